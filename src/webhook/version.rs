//! `--sidecar auto` in a cluster: the API server's `GET /version`, asked once at start with the
//! pod's service account (its CA and token), as Istio decides native sidecars per cluster.
//! `/version` is readable by every authenticated user (the `system:public-info-viewer` role), so
//! this needs no RBAC of its own.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Connect, handshake, request and response together. The API server answers `/version` from
/// memory; a server that takes longer than this is not one to start against.
pub const VERSION_TIMEOUT: Duration = Duration::from_secs(10);
/// Largest `/version` answer read (it is about 300 bytes).
const MAX_ANSWER: u64 = 64 * 1024;

/// The API server's `(major, minor)`, from the in-cluster environment: `KUBERNETES_SERVICE_HOST`
/// and `_PORT`, and `dir`'s `ca.crt` and `token` (the service account's mount).
pub async fn in_cluster(dir: &Path) -> Result<(u32, u32)> {
    let host = std::env::var("KUBERNETES_SERVICE_HOST")
        .context("KUBERNETES_SERVICE_HOST is not set (not in a cluster?)")?;
    let port = std::env::var("KUBERNETES_SERVICE_PORT").unwrap_or_else(|_| "443".into());
    let ca = dir.join("ca.crt");
    let token = std::fs::read_to_string(dir.join("token"))
        .with_context(|| format!("{}", dir.join("token").display()))?;
    tokio::time::timeout(
        VERSION_TIMEOUT,
        get_version(&host, &port, &ca, token.trim()),
    )
    .await
    .with_context(|| format!("the API server did not answer within {VERSION_TIMEOUT:?}"))?
}

async fn get_version(host: &str, port: &str, ca: &Path, token: &str) -> Result<(u32, u32)> {
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_file_iter(ca).with_context(|| format!("{}", ca.display()))? {
        roots.add(c.context("ca.crt")?).context("ca.crt")?;
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .context("TLS protocol versions")?
    .with_root_certificates(roots)
    .with_no_client_auth();
    let name = ServerName::try_from(host.to_string()).context("KUBERNETES_SERVICE_HOST")?;
    // An IPv6 service address is bare in the environment and bracketed in a URL authority.
    let addr = if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    };
    let tcp = tokio::net::TcpStream::connect(&addr)
        .await
        .with_context(|| format!("connect to {addr}"))?;
    let mut tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
        .with_context(|| format!("TLS to {addr}"))?;
    let request = format!(
        "GET /version HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\nAccept: application/json\r\nConnection: close\r\n\r\n"
    );
    tls.write_all(request.as_bytes()).await?;
    let mut answer = Vec::new();
    tls.take(MAX_ANSWER).read_to_end(&mut answer).await?;
    parse_answer(&answer)
}

/// The version in an HTTP/1.1 answer to `GET /version` (the API server sends `Content-Length`).
fn parse_answer(answer: &[u8]) -> Result<(u32, u32)> {
    let text = String::from_utf8_lossy(answer);
    let (head, body) = text.split_once("\r\n\r\n").context("no HTTP answer")?;
    let status = head.split(' ').nth(1).unwrap_or_default();
    if status != "200" {
        bail!("GET /version: HTTP {status}: {}", body.trim());
    }
    let v: serde_json::Value =
        serde_json::from_str(body.trim()).context("GET /version: not JSON")?;
    // `minor` is "20" or, on some providers, "29+".
    let major = v["major"].as_str().unwrap_or_default();
    let minor = v["minor"].as_str().unwrap_or_default();
    crate::manifest::check::parse_version(&format!("{major}.{minor}"))
        .map_err(|e| anyhow::anyhow!("GET /version: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_versions_as_providers_write_them() {
        let ok = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n{\"major\": \"1\", \"minor\": \"29+\", \"gitVersion\": \"v1.29.3-eks-adc7111\"}";
        assert_eq!(parse_answer(ok).expect("parses"), (1, 29));
        let no = b"HTTP/1.1 401 Unauthorized\r\n\r\n{\"kind\":\"Status\"}";
        assert!(parse_answer(no).is_err());
    }
}
