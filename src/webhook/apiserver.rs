//! (the control plane) Requests to the API server as the pod's service account: `KUBERNETES_SERVICE_HOST` and
//! `_PORT` say where, the mount's `ca.crt` whom to trust and its `token` who asks. The token is
//! read again for every request (projected tokens are rotated by the kubelet, about hourly).
//! Outside a cluster the same environment and `--serviceaccount-dir` point it elsewhere (the
//! tests' API server).

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result};
use bytes::Bytes;
use hyper::{Method, StatusCode};

/// One request: connect, handshake, send and read the answer. The API server answers a GET or a
/// PATCH of one small object from its cache and etcd in milliseconds; this is for a server that
/// is not there at all.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// Largest answer read: one webhook configuration with its CA bundles is a few KiB.
pub const MAX_ANSWER: usize = 1024 * 1024;

/// Where the API server is and how to ask it: the sidecar's in-cluster client
/// (`events::api::Client`: hyper's HTTP/1.1 client half over tokio-rustls, the mount's CA, the
/// token read per request), with this module's deadline and answer size.
pub struct Client(crate::events::api::Client);

impl Client {
    /// The in-cluster client: `KUBERNETES_SERVICE_HOST`/`_PORT` and `dir`'s `ca.crt` and `token`
    /// (a missing token is a start-up error rather than a later one).
    pub fn in_cluster(dir: &Path) -> Result<Client> {
        crate::events::api::Client::in_cluster_as(
            |k| std::env::var(k).ok(),
            dir,
            "not in a cluster?",
        )
        .map(Client)
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
            self.0
                .request_unbounded(method.clone(), path, content_type, body, MAX_ANSWER),
        )
        .await
        .with_context(|| {
            format!("{method} {path}: the API server did not answer within {REQUEST_TIMEOUT:?}")
        })?
        .with_context(|| format!("{method} {path}"))
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
