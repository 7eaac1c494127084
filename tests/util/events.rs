//! `hooklog run --events` as a pod runs it: the service account mount it reads (the API
//! server's CA, a token, the namespace, as the kubelet projects them) and the API server's
//! address and the pod's identity in its environment.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::{Daemon, hooklog, text};

/// Writes a service account mount, `dir/serviceaccount/` with `ca.crt`, `token` and `namespace`.
pub fn serviceaccount_mount(dir: &Path, ca_pem: &str, token: &str, namespace: &str) -> PathBuf {
    let sa = dir.join("serviceaccount");
    std::fs::create_dir_all(&sa).unwrap();
    std::fs::write(sa.join("ca.crt"), ca_pem).unwrap();
    std::fs::write(sa.join("token"), token).unwrap();
    std::fs::write(sa.join("namespace"), namespace).unwrap();
    sa
}

/// Starts `hooklog run --file FILE --events --serviceaccount-dir SA EXTRA` against the API
/// server at 127.0.0.1:`port`, with the pod's identity `pod` (`POD_NAME`, `POD_UID`, ...) in its
/// environment.
pub fn run_events(
    file: &Path,
    sa: &Path,
    port: u16,
    extra: &[&str],
    pod: &[(&str, &str)],
) -> Daemon {
    let port = port.to_string();
    let mut env = vec![
        ("KUBERNETES_SERVICE_HOST", "127.0.0.1"),
        ("KUBERNETES_SERVICE_PORT", port.as_str()),
    ];
    env.extend_from_slice(pod);
    let mut args = vec!["--events", "--serviceaccount-dir", sa.to_str().unwrap()];
    args.extend_from_slice(extra);
    Daemon::follow(file, None, &args, &env)
}

/// What hooklog's stderr says of an Event it could not post: its "event not posted" warnings.
pub const NOT_POSTED: &str = "event not posted";

/// The first [`NOT_POSTED`] warning on `d`'s stderr, or an empty line when there is none.
pub fn not_posted_warning(d: &Daemon) -> String {
    d.stderr
        .lines()
        .into_iter()
        .find(|l| l.contains(NOT_POSTED))
        .unwrap_or_default()
}

/// The rule `hooklog check` warns by when a sidecar posts Events and no RBAC it can see grants it.
pub const RBAC_UNKNOWN: &str = "sidecar-events-rbac-unknown";

/// The [`RBAC_UNKNOWN`] findings of `hooklog check ARGS --format json` on `yaml` (written to a
/// file in `dir`).
pub fn rbac_unknown_findings(dir: &Path, yaml: &str, args: &[&str]) -> Vec<Value> {
    let path = dir.join("checked.yaml");
    std::fs::write(&path, yaml).unwrap();
    let out = hooklog()
        .arg("check")
        .args(args)
        .args(["--format", "json"])
        .arg(&path)
        .output()
        .unwrap();
    let doc: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("check's report ({e}): {}", text(&out.stderr)));
    doc["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["rule"] == RBAC_UNKNOWN)
        .cloned()
        .collect()
}
