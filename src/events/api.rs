//! (the sidecar) The sidecar's in-cluster API client: `KUBERNETES_SERVICE_HOST` and `_PORT` say where, the
//! service account mount's `ca.crt` whom to trust and its `token` who asks. The token is read
//! again for every call (the kubelet rotates projected tokens, about hourly). Every call has a
//! deadline of its caller's.
//!
//! hyper 1's HTTP/1.1 client half over tokio-rustls with ring. The control plane's
//! `webhook::apiserver::Client` is this client with its own deadline and answer size (imports
//! run that way: the sidecar imports nothing of the control plane).

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
use tokio::time::Instant;

/// Largest answer read: the API server answers a create or a patch with the Event itself, a few
/// KiB at most (its note is at most 1 KiB).
const MAX_ANSWER: usize = 64 * 1024;

/// The port when `KUBERNETES_SERVICE_PORT` is not set: the `kubernetes` Service's HTTPS port.
const DEFAULT_PORT: &str = "443";

/// Every call's `User-Agent`: the API server names a create's or a patch's field manager after
/// it (`managedFields[].manager`, the part before the first `/`), and audit logs show it.
pub const USER_AGENT: &str = concat!("hooklog/", env!("CARGO_PKG_VERSION"));

/// Where the API server is and how to ask it.
pub struct Client {
    /// `host:port` (an IPv6 host bracketed), for the connection and the `Host` header.
    addr: String,
    /// The name the API server's certificate must hold.
    name: ServerName<'static>,
    /// Trusts the mount's CA only.
    tls: Arc<rustls::ClientConfig>,
    /// The token file, read per call (rotated by the kubelet).
    token: PathBuf,
}

/// Why a call failed: the status when the API server answered.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// Not done by the deadline: no answer (a server that is slow or not there at all).
    #[error("no answer within {0} ms")]
    Deadline(u64),
    /// The API server answered with an error status (403: the Role is missing).
    #[error("HTTP {status}: {body}")]
    Status {
        /// The status code.
        status: u16,
        /// The start of the API server's `Status` message.
        body: String,
        /// The answer's `Retry-After` in whole seconds (the API server sends it with a 429 and
        /// with some 5xx), when it holds one.
        retry_after: Option<Duration>,
    },
    /// Anything else: the token, the connection, TLS.
    #[error("{0:#}")]
    Other(anyhow::Error),
}

/// Longest part of an error answer kept for the warning.
const ERROR_BODY_SHOWN: usize = 300;

impl Client {
    /// The in-cluster client, from `env` (`KUBERNETES_SERVICE_HOST`/`_PORT`) and `dir`'s
    /// `ca.crt` and `token`.
    pub fn in_cluster(env: impl Fn(&str) -> Option<String>, dir: &Path) -> Result<Client> {
        Self::in_cluster_as(env, dir, "no API server to post to")
    }

    /// [`Client::in_cluster`], saying `unset` in parentheses when `KUBERNETES_SERVICE_HOST` is
    /// not set (what its absence means to the caller).
    pub fn in_cluster_as(
        env: impl Fn(&str) -> Option<String>,
        dir: &Path,
        unset: &str,
    ) -> Result<Client> {
        let host = env("KUBERNETES_SERVICE_HOST")
            .filter(|h| !h.is_empty())
            .with_context(|| format!("KUBERNETES_SERVICE_HOST is not set ({unset})"))?;
        let port = env("KUBERNETES_SERVICE_PORT").unwrap_or_else(|| DEFAULT_PORT.into());
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
        let addr = if host.contains(':') {
            format!("[{host}]:{port}")
        } else {
            format!("{host}:{port}")
        };
        let token = dir.join("token");
        std::fs::metadata(&token).with_context(|| format!("{}", token.display()))?;
        Ok(Client {
            addr,
            name,
            tls: Arc::new(tls),
            token,
        })
    }

    /// `method path` with a JSON `body` of `content_type`, done by `deadline`: the answer's
    /// JSON when its status is 2xx.
    pub async fn call(
        &self,
        method: Method,
        path: &str,
        content_type: &str,
        body: Vec<u8>,
        deadline: Instant,
    ) -> Result<serde_json::Value, CallError> {
        let started = Instant::now();
        let answer = tokio::time::timeout_at(
            deadline,
            self.request_with_retry_after(method, path, Some(content_type), body, MAX_ANSWER),
        )
        .await
        .map_err(|_| {
            CallError::Deadline(deadline.saturating_duration_since(started).as_millis() as u64)
        })?
        .map_err(CallError::Other)?;
        let (status, retry_after, bytes) = answer;
        if !status.is_success() {
            let text = String::from_utf8_lossy(&bytes);
            let shown: String = text.trim().chars().take(ERROR_BODY_SHOWN).collect();
            return Err(CallError::Status {
                status: status.as_u16(),
                body: shown,
                retry_after,
            });
        }
        serde_json::from_slice(&bytes)
            .context("the answer is not JSON")
            .map_err(CallError::Other)
    }

    /// `method path` with `body` (of `content_type`, if any), on a connection of its own, with
    /// no deadline: the caller sets one. The status and at most `max_answer` bytes of the
    /// answer.
    pub async fn request_unbounded(
        &self,
        method: Method,
        path: &str,
        content_type: Option<&str>,
        body: Vec<u8>,
        max_answer: usize,
    ) -> Result<(StatusCode, Bytes)> {
        let (status, _, bytes) = self
            .request_with_retry_after(method, path, content_type, body, max_answer)
            .await?;
        Ok((status, bytes))
    }

    /// [`Client::request_unbounded`], with the answer's `Retry-After` (delay-seconds; an
    /// HTTP-date is not read: the API server sends seconds).
    async fn request_with_retry_after(
        &self,
        method: Method,
        path: &str,
        content_type: Option<&str>,
        body: Vec<u8>,
        max_answer: usize,
    ) -> Result<(StatusCode, Option<Duration>, Bytes)> {
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
        // Ends with the answer (one call per connection); the caller's deadline bounds it.
        let driver = tokio::spawn(conn);
        let mut req = Request::builder()
            .method(method)
            .uri(path)
            .header(hyper::header::HOST, &self.addr)
            .header(
                hyper::header::AUTHORIZATION,
                format!("Bearer {}", token.trim()),
            )
            .header(hyper::header::ACCEPT, "application/json")
            .header(hyper::header::USER_AGENT, USER_AGENT);
        if let Some(ct) = content_type {
            req = req.header(hyper::header::CONTENT_TYPE, ct);
        }
        let req = req
            .body(Full::new(Bytes::from(body)))
            .context("the request")?;
        let answer = sender.send_request(req).await.context("send")?;
        let status = answer.status();
        let retry_after = answer
            .headers()
            .get(hyper::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
        let bytes = Limited::new(answer.into_body(), max_answer)
            .collect()
            .await
            .map_err(|e| anyhow::anyhow!("the answer: {e}"))?
            .to_bytes();
        driver.abort();
        Ok((status, retry_after, bytes))
    }
}
