//! (the sidecar) The HTTP/1.1 client under the CloudWatch Logs client and the credential
//! sources: hyper 1's client half over TCP, or over tokio-rustls (ring) for `https`, the stack
//! `run --events` (src/events/api.rs) already links.
//!
//! TLS trusts the system's roots as the AWS SDK did (aws-smithy-http-client's rustls
//! connector loads them with rustls-native-certs): `SSL_CERT_FILE` / `SSL_CERT_DIR` when set,
//! else the distribution's bundle (`/etc/ssl/certs/ca-certificates.crt` in the image). They
//! are loaded the first time an `https` URL is used, so a sidecar that never calls out holds
//! none of them. CloudWatch calls keep their connection for the next call; other calls (the
//! credential sources) use one connection each.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use rustls_pki_types::ServerName;

/// Largest answer read. CloudWatch's answers to hooklog's calls are a few hundred bytes (a
/// PutLogEvents answer is at most its `rejectedLogEventsInfo`), STS's and the metadata
/// services' a few KiB.
const MAX_ANSWER: usize = 256 * 1024;

/// Where a call goes: `http://` or `https://`, host, port and a path prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Url {
    /// `https`, else plain `http` (moto, LocalStack, the metadata services).
    pub https: bool,
    /// The host, without brackets for IPv6.
    pub host: String,
    /// The port, the scheme's default when the URL names none.
    pub port: u16,
    /// The path (and query) after the authority, `/` when empty.
    pub path: String,
}

impl Url {
    /// Parses `http(s)://host[:port][/path]`. Userinfo and fragments are refused.
    pub fn parse(s: &str) -> Result<Url, String> {
        let s = s.trim();
        let (https, rest) = if let Some(r) = s.strip_prefix("https://") {
            (true, r)
        } else if let Some(r) = s.strip_prefix("http://") {
            (false, r)
        } else {
            return Err(format!("{s:?}: not an http:// or https:// URL"));
        };
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        if authority.contains('@') || path.contains('#') {
            return Err(format!("{s:?}: userinfo and fragments are not supported"));
        }
        let default_port = if https { 443 } else { 80 };
        let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
            let (h, after) = v6
                .split_once(']')
                .ok_or_else(|| format!("{s:?}: unclosed ["))?;
            let port = match after.strip_prefix(':') {
                Some(p) => p.parse().map_err(|_| format!("{s:?}: bad port"))?,
                None if after.is_empty() => default_port,
                None => return Err(format!("{s:?}: bad authority")),
            };
            (h.to_string(), port)
        } else {
            match authority.rsplit_once(':') {
                Some((h, p)) => (
                    h.to_string(),
                    p.parse().map_err(|_| format!("{s:?}: bad port"))?,
                ),
                None => (authority.to_string(), default_port),
            }
        };
        if host.is_empty() {
            return Err(format!("{s:?}: no host"));
        }
        Ok(Url {
            https,
            host,
            port,
            path: path.to_string(),
        })
    }

    /// `host[:port]` as the `Host` header has it (the port only when not the default).
    pub fn authority(&self) -> String {
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        if self.port == if self.https { 443 } else { 80 } {
            host
        } else {
            format!("{host}:{}", self.port)
        }
    }

    /// This URL with `path` appended to its own path (`/` joined once).
    pub fn join(&self, path: &str) -> Url {
        let mut u = self.clone();
        u.path = format!(
            "{}/{}",
            self.path.trim_end_matches('/'),
            path.trim_start_matches('/')
        );
        u
    }

    /// Whether the host is a loopback address (or `localhost`).
    pub fn is_loopback(&self) -> bool {
        self.host == "localhost"
            || self
                .host
                .parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.is_loopback())
    }
}

/// How a call failed before an answer came.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Failed {
    /// No connection (refused, DNS, TLS) within the connect timeout or at all.
    #[error("connect: {0}")]
    Connect(String),
    /// The request could not be sent, or the connection closed before the answer.
    #[error("send: {0}")]
    Send(String),
    /// The answer's body could not be read (or was too large).
    #[error("the answer: {0}")]
    Answer(String),
    /// The request could not be made (bad header value).
    #[error("the request: {0}")]
    Request(String),
}

/// An answer: status, headers and the whole body.
#[derive(Debug)]
pub struct Answer {
    /// HTTP status.
    pub status: u16,
    /// The headers.
    pub headers: http::HeaderMap,
    /// The body.
    pub body: Bytes,
}

/// A connection kept for the next call to the same place.
struct Pooled {
    /// `https?://authority` it goes to.
    key: String,
    /// The request half.
    sender: SendRequest<Full<Bytes>>,
}

/// Connects, sends and reads; keeps one connection for the next call when asked to.
#[derive(Default)]
pub struct Client {
    /// The kept connection.
    pooled: tokio::sync::Mutex<Option<Pooled>>,
}

/// The TLS configuration: the system's roots, loaded once (see the module's comment).
fn tls_config() -> Result<Arc<rustls::ClientConfig>, String> {
    static CONFIG: OnceLock<Result<Arc<rustls::ClientConfig>, String>> = OnceLock::new();
    CONFIG
        .get_or_init(|| {
            let found = rustls_native_certs::load_native_certs();
            for e in &found.errors {
                tracing::warn!(error = %e, "cloudwatch: cannot read a CA certificate");
            }
            let mut roots = rustls::RootCertStore::empty();
            let (added, _ignored) = roots.add_parsable_certificates(found.certs);
            if added == 0 {
                return Err(
                    "no CA certificates (set SSL_CERT_FILE, or install /etc/ssl/certs/ca-certificates.crt)"
                        .to_string(),
                );
            }
            tracing::debug!(roots = added, "cloudwatch: CA certificates loaded");
            let config = rustls::ClientConfig::builder_with_provider(Arc::new(
                rustls::crypto::ring::default_provider(),
            ))
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS protocol versions: {e}"))?
            .with_root_certificates(roots)
            .with_no_client_auth();
            Ok(Arc::new(config))
        })
        .clone()
}

impl Client {
    /// Sends the request `build` makes to `url` (whose path the request carries already) and
    /// reads the whole answer. `keep`: reuse and keep the connection; a kept connection that
    /// fails before its answer (the server closed it while idle) is replaced once. The
    /// connection (TCP and TLS) must be up within `connect_timeout`; the caller bounds the
    /// whole call.
    pub async fn send(
        &self,
        url: &Url,
        build: &(dyn Fn() -> http::request::Builder + Sync),
        body: Vec<u8>,
        keep: bool,
        connect_timeout: Duration,
    ) -> Result<Answer, Failed> {
        let body = Bytes::from(body);
        let request = || {
            build()
                .header(hyper::header::HOST, url.authority())
                .body(Full::new(body.clone()))
                .map_err(|e| Failed::Request(e.to_string()))
        };
        let key = format!(
            "{}://{}",
            if url.https { "https" } else { "http" },
            url.authority()
        );
        let kept = if keep {
            self.pooled.lock().await.take()
        } else {
            None
        }
        .filter(|p| p.key == key && !p.sender.is_closed());
        let (sender, answer) = match kept {
            Some(p) => {
                let mut sender = p.sender;
                match exchange(&mut sender, request()?).await {
                    Ok(a) => (sender, a),
                    Err(e) => {
                        tracing::debug!(error = %e, "cloudwatch: kept connection failed: a new one");
                        let mut sender = connect_within(url, connect_timeout).await?;
                        let a = exchange(&mut sender, request()?).await?;
                        (sender, a)
                    }
                }
            }
            None => {
                let mut sender = connect_within(url, connect_timeout).await?;
                let a = exchange(&mut sender, request()?).await?;
                (sender, a)
            }
        };
        let status = answer.status().as_u16();
        let (parts, body) = answer.into_parts();
        let body = Limited::new(body, MAX_ANSWER)
            .collect()
            .await
            .map_err(|e| Failed::Answer(e.to_string()))?
            .to_bytes();
        // Not kept, the sender is dropped here and its connection's task ends.
        if keep && sender.is_ready() {
            *self.pooled.lock().await = Some(Pooled { key, sender });
        }
        Ok(Answer {
            status,
            headers: parts.headers,
            body,
        })
    }
}

/// Sends one request on `sender` and waits for the answer's head.
async fn exchange(
    sender: &mut SendRequest<Full<Bytes>>,
    req: http::Request<Full<Bytes>>,
) -> Result<http::Response<hyper::body::Incoming>, Failed> {
    sender
        .ready()
        .await
        .map_err(|e| Failed::Send(e.to_string()))?;
    sender
        .send_request(req)
        .await
        .map_err(|e| Failed::Send(e.to_string()))
}

/// [`connect`] within `timeout`.
async fn connect_within(url: &Url, timeout: Duration) -> Result<SendRequest<Full<Bytes>>, Failed> {
    tokio::time::timeout(timeout, connect(url))
        .await
        .map_err(|_| {
            Failed::Connect(format!(
                "{}: no connection within {} ms",
                url.authority(),
                timeout.as_millis()
            ))
        })?
}

/// A new connection to `url`: TCP, TLS for `https`, then HTTP/1.1. Its driver runs as a task
/// that ends when the sender is dropped.
async fn connect(url: &Url) -> Result<SendRequest<Full<Bytes>>, Failed> {
    let tcp = tokio::net::TcpStream::connect((url.host.as_str(), url.port))
        .await
        .map_err(|e| Failed::Connect(format!("{}: {e}", url.authority())))?;
    // Small requests and answers: send each at once.
    let _ = tcp.set_nodelay(true); // Only latency depends on it.
    if !url.https {
        let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp))
            .await
            .map_err(|e| Failed::Connect(format!("HTTP/1.1: {e}")))?;
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!(error = %e, "cloudwatch: connection ended");
            }
        });
        return Ok(sender);
    }
    let tls = tls_config().map_err(Failed::Connect)?;
    let name = ServerName::try_from(url.host.clone())
        .map_err(|e| Failed::Connect(format!("{}: {e}", url.host)))?;
    let stream = tokio_rustls::TlsConnector::from(tls)
        .connect(name, tcp)
        .await
        .map_err(|e| Failed::Connect(format!("TLS to {}: {e}", url.authority())))?;
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| Failed::Connect(format!("HTTP/1.1: {e}")))?;
    tokio::spawn(async move {
        if let Err(e) = conn.await {
            tracing::debug!(error = %e, "cloudwatch: connection ended");
        }
    });
    Ok(sender)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_urls_the_sdk_took() {
        let u = Url::parse("http://127.0.0.1:4566").unwrap();
        assert_eq!(
            (u.https, u.host.as_str(), u.port, u.path.as_str()),
            (false, "127.0.0.1", 4566, "/")
        );
        assert_eq!(u.authority(), "127.0.0.1:4566");
        let u = Url::parse("https://logs.eu-west-1.amazonaws.com/").unwrap();
        assert_eq!((u.https, u.port), (true, 443));
        assert_eq!(u.authority(), "logs.eu-west-1.amazonaws.com");
        let u = Url::parse("http://[fd00:ec2::23]/v1/credentials").unwrap();
        assert_eq!(
            (u.host.as_str(), u.port, u.path.as_str()),
            ("fd00:ec2::23", 80, "/v1/credentials")
        );
        assert_eq!(u.authority(), "[fd00:ec2::23]");
        assert_eq!(
            Url::parse("http://[::1]:8080").unwrap().authority(),
            "[::1]:8080"
        );
        assert!(Url::parse("http://[::1]:8080").unwrap().is_loopback());
        assert!(!Url::parse("http://169.254.170.23/").unwrap().is_loopback());
        assert_eq!(Url::parse("http://h:1/a/").unwrap().join("/b").path, "/a/b");
        for bad in [
            "ftp://x",
            "http://",
            "http://u:p@h/",
            "http://h:99999",
            "http://h:x",
            "https://[::1",
        ] {
            assert!(Url::parse(bad).is_err(), "{bad}");
        }
    }
}
