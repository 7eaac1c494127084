//! (the control plane) Requests to the API server as the pod's service account: `KUBERNETES_SERVICE_HOST` and
//! `_PORT` say where, the mount's `ca.crt` whom to trust and its `token` who asks. The token is
//! read again for every request (projected tokens are rotated by the kubelet, about hourly).
//! Outside a cluster the same environment and `--serviceaccount-dir` point it elsewhere (the
//! tests' API server).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::{Method, Request, StatusCode};
use hyper_util::rt::TokioIo;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName};

/// One request: connect, handshake, send and read the answer. The API server answers a GET or a
/// PATCH of one small object from its cache and etcd in milliseconds; this is for a server that
/// is not there at all.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// Largest answer read: one webhook configuration with its CA bundles is a few KiB.
pub const MAX_ANSWER: usize = 1024 * 1024;

/// Where the API server is and how to ask it.
pub struct Client {
    /// `host:port` (an IPv6 host bracketed), for the connection and the `Host` header.
    addr: String,
    /// The name the API server's certificate must hold.
    name: ServerName<'static>,
    tls: Arc<rustls::ClientConfig>,
    /// The token file, read per request.
    token: PathBuf,
}

impl Client {
    /// The in-cluster client: `KUBERNETES_SERVICE_HOST`/`_PORT` and `dir`'s `ca.crt` and `token`.
    pub fn in_cluster(dir: &Path) -> Result<Client> {
        let host = std::env::var("KUBERNETES_SERVICE_HOST")
            .context("KUBERNETES_SERVICE_HOST is not set (not in a cluster?)")?;
        let port = std::env::var("KUBERNETES_SERVICE_PORT").unwrap_or_else(|_| "443".into());
        let ca = dir.join("ca.crt");
        let mut roots = rustls::RootCertStore::empty();
        for c in CertificateDer::pem_file_iter(&ca).with_context(|| format!("{}", ca.display()))? {
            roots
                .add(c.with_context(|| format!("{}", ca.display()))?)
                .with_context(|| format!("{}", ca.display()))?;
        }
        let tls = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .context("TLS protocol versions")?
        .with_root_certificates(roots)
        .with_no_client_auth();
        let name = ServerName::try_from(host.clone()).context("KUBERNETES_SERVICE_HOST")?;
        // An IPv6 service address is bare in the environment and bracketed in a URL authority.
        let addr = if host.contains(':') {
            format!("[{host}]:{port}")
        } else {
            format!("{host}:{port}")
        };
        let token = dir.join("token");
        // Read now too, so a missing mount is a start-up error rather than a later one.
        std::fs::metadata(&token).with_context(|| format!("{}", token.display()))?;
        Ok(Client {
            addr,
            name,
            tls: Arc::new(tls),
            token,
        })
    }

    /// `method path` with `body` as `content_type`, within [`REQUEST_TIMEOUT`]: the status and
    /// at most [`MAX_ANSWER`] bytes of the answer.
    pub async fn request(
        &self,
        method: Method,
        path: &str,
        content_type: Option<&str>,
        body: Vec<u8>,
    ) -> Result<(StatusCode, Bytes)> {
        tokio::time::timeout(
            REQUEST_TIMEOUT,
            self.request_unbounded(method.clone(), path, content_type, body),
        )
        .await
        .with_context(|| {
            format!("{method} {path}: the API server did not answer within {REQUEST_TIMEOUT:?}")
        })?
        .with_context(|| format!("{method} {path}"))
    }

    async fn request_unbounded(
        &self,
        method: Method,
        path: &str,
        content_type: Option<&str>,
        body: Vec<u8>,
    ) -> Result<(StatusCode, Bytes)> {
        let token = std::fs::read_to_string(&self.token)
            .with_context(|| format!("{}", self.token.display()))?;
        let tcp = tokio::net::TcpStream::connect(&self.addr)
            .await
            .with_context(|| format!("connect to {}", self.addr))?;
        let tls = tokio_rustls::TlsConnector::from(self.tls.clone())
            .connect(self.name.clone(), tcp)
            .await
            .with_context(|| format!("TLS to {}", self.addr))?;
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
            .await
            .context("HTTP/1.1")?;
        // Ends with the answer (one request per connection); the timeout above bounds it.
        let driver = tokio::spawn(conn);
        let mut req = Request::builder()
            .method(method)
            .uri(path)
            .header(hyper::header::HOST, &self.addr)
            .header(
                hyper::header::AUTHORIZATION,
                format!("Bearer {}", token.trim()),
            )
            .header(hyper::header::ACCEPT, "application/json");
        if let Some(ct) = content_type {
            req = req.header(hyper::header::CONTENT_TYPE, ct);
        }
        let req = req
            .body(Full::new(Bytes::from(body)))
            .context("the request")?;
        let answer = sender.send_request(req).await.context("send")?;
        let status = answer.status();
        let bytes = Limited::new(answer.into_body(), MAX_ANSWER)
            .collect()
            .await
            .map_err(|e| anyhow::anyhow!("the answer: {e}"))?
            .to_bytes();
        driver.abort();
        Ok((status, bytes))
    }

    /// A GET whose answer must be a 200 with JSON.
    pub async fn get_json(&self, path: &str) -> Result<serde_json::Value> {
        let (status, body) = self.request(Method::GET, path, None, Vec::new()).await?;
        json_answer(status, &body).with_context(|| format!("GET {path}"))
    }
}

/// The JSON of a 200 answer; any other status is an error with the body (the API server's
/// `Status` says why).
pub fn json_answer(status: StatusCode, body: &[u8]) -> Result<serde_json::Value> {
    if status != StatusCode::OK {
        anyhow::bail!(
            "HTTP {}: {}",
            status.as_u16(),
            String::from_utf8_lossy(body).trim()
        );
    }
    serde_json::from_slice(body).context("not JSON")
}
