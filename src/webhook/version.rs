//! (the control plane) `--sidecar auto` in a cluster: the API server's `GET /version`, asked once at start with the
//! pod's service account ([`super::apiserver`]), as Istio decides native sidecars per cluster.
//! `/version` is readable by every authenticated user (the `system:public-info-viewer` role), so
//! this needs no RBAC of its own.

use anyhow::Result;

use super::apiserver::{Client, json_answer};

/// The API server's `(major, minor)`.
pub async fn in_cluster(client: &Client) -> Result<(u32, u32)> {
    let (status, body) = client
        .request(hyper::Method::GET, "/version", None, Vec::new())
        .await?;
    parse_answer(status, &body)
}

/// The version in the answer to `GET /version`.
fn parse_answer(status: hyper::StatusCode, body: &[u8]) -> Result<(u32, u32)> {
    let v = json_answer(status, body).map_err(|e| anyhow::anyhow!("GET /version: {e:#}"))?;
    // `minor` is "20" or, on some providers, "29+".
    let major = v["major"].as_str().unwrap_or_default();
    let minor = v["minor"].as_str().unwrap_or_default();
    crate::manifest::check::parse_version(&format!("{major}.{minor}"))
        .map_err(|e| anyhow::anyhow!("GET /version: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::StatusCode;

    #[test]
    fn reads_versions_as_providers_write_them() {
        let ok = b"{\"major\": \"1\", \"minor\": \"29+\", \"gitVersion\": \"v1.29.3-eks-adc7111\"}";
        assert_eq!(parse_answer(StatusCode::OK, ok).expect("parses"), (1, 29));
        let no = b"{\"kind\":\"Status\"}";
        assert!(parse_answer(StatusCode::UNAUTHORIZED, no).is_err());
    }
}
