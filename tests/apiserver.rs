//! `hooklog webhook` behind a real kube-apiserver 1.20.2 (built from Debian's source package)
//! and Debian's etcd, both on 127.0.0.1 (scripts/apiserver.sh, started by scripts/test.sh, which
//! exports HOOKLOG_TEST_APISERVER, _TOKEN and _CA). The webhook is registered by
//! `clientConfig.url` with its `caBundle` (loopback addresses cannot be a Service's endpoints).
//! Each test has namespaces and a MutatingWebhookConfiguration of its own, the webhooks
//! selecting only that test's namespaces, so tests run side by side.

use std::time::{Duration, Instant};

use base64::Engine;
use serde_json::{Value, json};

use crate::util::apiserver::{
    Api, CONFIG_ACTIVE, Tier, classic_webhook, has_hooklog, pod, registered,
};
use crate::util::webhook::{Certs, IMAGE, Webhook, client_connection, https};
use crate::util::{hooklog, output_with_input, wait_until};

/// The API server's CA and the static token, as a pod's service account mount holds them, so
/// that `--sidecar auto` asks this API server its version.
fn serviceaccount(api: &Api, dir: &std::path::Path) -> std::path::PathBuf {
    let sa = dir.join("serviceaccount");
    std::fs::create_dir_all(&sa).unwrap();
    std::fs::copy(&api.ca_file, sa.join("ca.crt")).unwrap();
    std::fs::write(sa.join("token"), &api.token).unwrap();
    sa
}

/// A webhook with `--sidecar auto`, learning the version from the API server (1.20: classic).
fn auto_webhook(api: &Api, certs: &Certs, dir: &std::path::Path) -> Webhook {
    let sa = serviceaccount(api, dir);
    let port = api.port.to_string();
    let w = Webhook::start_with(
        certs,
        &[
            "--sidecar",
            "auto",
            "--serviceaccount-dir",
            sa.to_str().unwrap(),
        ],
        &[
            ("KUBERNETES_SERVICE_HOST", "127.0.0.1"),
            ("KUBERNETES_SERVICE_PORT", &port),
        ],
    );
    w.assert_logged(&["sidecar=Classic"], "auto on 1.20");
    w
}

#[test]
fn a_pod_in_an_opted_in_namespace_is_stored_as_inject_classic_makes_it() {
    let Some(api) = Api::from_env() else { return };
    let (_dir, _certs, w, t) = registered(&api, "stored", "Ignore", |certs, dir| {
        auto_webhook(&api, certs, dir)
    });

    let stored = t.admit("web", "web");
    let (_, got) = api.call(
        "GET",
        &format!("/api/v1/namespaces/{}/pods/web", t.ns_in),
        None,
    );
    assert_eq!(got["spec"], stored["spec"]);
    crate::util::webhook::assert_structurally_injected(&pod("web"), &got, false);

    let want = t.as_inject_makes(&pod("web"), &["--sidecar", "classic"]);
    assert_eq!(got["spec"], want["spec"]);
    assert_eq!(
        got["metadata"]["annotations"],
        want["metadata"]["annotations"]
    );
    w.assert_logged(&["injected", &format!("{}/web", t.ns_in)], "the pod");
}

#[test]
fn an_opted_out_pod_is_stored_untouched() {
    let Some(api) = Api::from_env() else { return };
    let (_dir, _certs, w, t) = registered(&api, "untouched", "Fail", classic_webhook);
    let mut off = pod("off");
    off["metadata"]["annotations"] = json!({"hooklog.dev/inject": "disabled"});
    for (ns, p) in [(&t.ns_out, pod("plain")), (&t.ns_in, off)] {
        let (status, stored) = t.create(ns, &p, false);
        assert_eq!(status, 201, "{stored:#}");
        assert!(!has_hooklog(&stored), "{stored:#}");
        assert_eq!(stored["spec"]["containers"].as_array().unwrap().len(), 1);
        assert!(
            stored["metadata"]["annotations"]
                .get("hooklog.dev/injected")
                .is_none()
        );
    }
    // Asked (under Fail, an unanswered call would have refused the pods), and left them.
    let log = w.log();
    for name in ["plain", "off"] {
        assert!(
            !log.iter()
                .any(|l| l.contains("injected") && l.contains(&format!("/{name}"))),
            "{log:#?}"
        );
    }
}

#[test]
fn a_server_side_dry_run_returns_the_injected_pod_and_stores_nothing() {
    let Some(api) = Api::from_env() else { return };
    let (_dir, _certs, _w, t) = registered(&api, "dryrun", "Ignore", classic_webhook);
    let (status, preview) = t.create(&t.ns_in, &pod("preview"), true);
    assert_eq!(status, 201, "{preview:#}");
    assert!(has_hooklog(&preview), "{preview:#}");
    let (status, _) = api.call(
        "GET",
        &format!("/api/v1/namespaces/{}/pods/preview", t.ns_in),
        None,
    );
    assert_eq!(status, 404, "a dry run stored the pod");
}

#[test]
fn with_the_webhook_down_ignore_admits_uninjected_check_says_so_and_fail_rejects() {
    let Some(api) = Api::from_env() else { return };
    let (_dir, certs, mut w, t) = registered(&api, "down", "Ignore", classic_webhook);
    let port = w.port;
    w.child.kill().unwrap();
    w.child.wait().unwrap();

    let (status, missed) = t.create(&t.ns_in, &pod("missed"), false);
    assert_eq!(status, 201, "Ignore must admit: {missed:#}");
    assert!(!has_hooklog(&missed), "{missed:#}");

    // `kubectl get namespaces,pods -A -o yaml | hooklog check -`: the List the API server gives.
    let namespaces = api.ok(
        "GET",
        &format!("/api/v1/namespaces?labelSelector=hooklog-test%3D{}", t.name),
        None,
    );
    let pods = api.ok("GET", &format!("/api/v1/namespaces/{}/pods", t.ns_in), None);
    let mut items: Vec<Value> = Vec::new();
    for (list, kind) in [(&namespaces, "Namespace"), (&pods, "Pod")] {
        for mut item in list["items"].as_array().unwrap().clone() {
            item["apiVersion"] = json!("v1");
            item["kind"] = json!(kind);
            items.push(item);
        }
    }
    let list = json!({"apiVersion": "v1", "kind": "List", "items": items});
    let out = output_with_input(
        hooklog().args(["check", "--format", "json", "-"]),
        list.to_string().as_bytes(),
    );
    let report: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    let text = report.to_string();
    assert!(
        text.contains("missed-injection") && text.contains(&format!("{}/missed", t.ns_in)),
        "{report:#}"
    );

    // failurePolicy Fail: the same pod is refused while the webhook is down.
    t.register(&t.configuration(port, &[&certs.ca_pem], "Fail"));
    let mut refused = Value::Null;
    let mut attempt = 0;
    // Until the API server uses the new policy, a pod is still admitted: each try a new name.
    let rejected = wait_until(CONFIG_ACTIVE, || {
        attempt += 1;
        let (status, v) = t.create(&t.ns_in, &pod(&format!("refused-{attempt}")), false);
        refused = v;
        status >= 400
    });
    assert!(rejected, "Fail admitted the pod: {refused:#}");
    assert!(
        refused.to_string().contains("failed calling webhook"),
        "{refused:#}"
    );
}

/// Admits pods `during-0`, `during-1`, ... into `t` (each must be stored injected; `what` says
/// when), one every `pace`, until `done(n)` holds with `n` admitted; fails with `w`'s log when
/// it does not within `within`.
fn admit_until(
    t: &Tier,
    w: &Webhook,
    (within, pace): (Duration, Duration),
    what: &str,
    mut done: impl FnMut(usize) -> bool,
) {
    let start = Instant::now();
    let mut n = 0;
    while !done(n) {
        assert!(
            start.elapsed() < within,
            "not done within {within:?}, {what}: {:#?}",
            w.log()
        );
        t.admit(&format!("during-{n}"), &format!("admission {n}, {what}"));
        n += 1;
        std::thread::sleep(pace);
    }
}

#[test]
fn a_certificate_renewal_during_admissions_keeps_them_working() {
    let Some(api) = Api::from_env() else { return };
    let dir = tempfile::tempdir().unwrap();
    let old = Certs::make(dir.path(), "hooklog CA 1");
    let w = Webhook::start(&old, &["--sidecar", "classic"]);
    let t = Tier::new(&api, "renewal");
    // The bundle holds the CA to come too, as cert-manager's cainjector puts it before renewing.
    let new_ca_dir = tempfile::tempdir().unwrap();
    let staged = Certs::make(new_ca_dir.path(), "hooklog CA 2");
    t.register(&t.configuration(w.port, &[&old.ca_pem, &staged.ca_pem], "Fail"));
    t.wait_active();
    // Renewal: the second CA's certificate replaces the files the webhook serves.
    for f in ["tls.crt", "tls.key"] {
        std::fs::copy(
            new_ca_dir.path().join(f),
            dir.path().join(format!("{f}.tmp")),
        )
        .unwrap();
        std::fs::rename(dir.path().join(format!("{f}.tmp")), dir.path().join(f)).unwrap();
    }
    admit_until(
        &t,
        &w,
        (Duration::from_secs(30), Duration::ZERO),
        "during the renewal",
        |n| n >= 5 && w.logged(&["serving certificate reloaded"]),
    );
    // Only the new CA from now on: still admitted, still injected.
    t.register(&t.configuration(w.port, &[&staged.ca_pem], "Fail"));
    t.admit("after", "after the renewal");
}

/// The port a configuration names before its webhook runs: nothing listens on the discard port
/// here, and no pod is created before [`Tier::point_at`] names the webhook's own. (A port found
/// free, released and given to the webhook later could be taken in between.)
const NOT_YET: u16 = 9;

/// `hooklog webhook` with auto-TLS (no certificate files) on a port of its choosing (the one it
/// reports), keeping the configuration `config`'s caBundle through this API server, its
/// certificate also for 127.0.0.1.
fn auto_tls_webhook(api: &Api, dir: &std::path::Path, config: &str, args: &[&str]) -> Webhook {
    let sa = serviceaccount(api, dir);
    let mut cmd = hooklog();
    cmd.env("KUBERNETES_SERVICE_HOST", "127.0.0.1")
        .env("KUBERNETES_SERVICE_PORT", api.port.to_string())
        .env("RUST_LOG", "info")
        .args(["webhook", "--image", IMAGE, "--sidecar", "classic"])
        .args(["--listen", "127.0.0.1:0"])
        .arg("--serviceaccount-dir")
        .arg(&sa)
        .args(["--webhook-config", config, "--tls-san", "127.0.0.1"])
        .args(["--own-namespace", "hooklog"])
        .args(args);
    Webhook::spawn(cmd)
}

/// A tier named after `name`, its configuration registered as a user applies k8s/webhook/: no
/// caBundle (Fail: an untrusted webhook refuses), at the port [`NOT_YET`]; and a folder for its
/// webhooks.
fn unbundled_tier<'a>(api: &'a Api, name: &str) -> (tempfile::TempDir, Tier<'a>) {
    let dir = tempfile::tempdir().unwrap();
    let t = Tier::new(api, name);
    t.register(&t.configuration(NOT_YET, &[], "Fail"));
    (dir, t)
}

impl Tier<'_> {
    /// Points every webhook of the stored configuration at `port` (its caBundle as stored).
    fn point_at(&self, port: u16) {
        let path = format!(
            "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/{}",
            self.name
        );
        let mut config = self.api.ok("GET", &path, None);
        for w in config["webhooks"].as_array_mut().unwrap() {
            let url = w["clientConfig"]["url"].as_str().unwrap().to_string();
            let path = url
                .split_once(&format!(":{NOT_YET}/"))
                .map(|(_, p)| p)
                .unwrap_or_else(|| panic!("{url} does not name the placeholder port"));
            w["clientConfig"]["url"] = json!(format!("https://127.0.0.1:{port}/{path}"));
        }
        self.api.ok("PUT", &path, Some(&config));
    }

    /// Each webhook's caBundle in the configuration as stored, decoded.
    fn bundles(&self) -> Vec<String> {
        let config = self.api.ok(
            "GET",
            &format!(
                "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/{}",
                self.name
            ),
            None,
        );
        config["webhooks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| {
                let b64 = w["clientConfig"]["caBundle"].as_str().unwrap_or_default();
                String::from_utf8(
                    base64::engine::general_purpose::STANDARD
                        .decode(b64)
                        .unwrap(),
                )
                .unwrap()
            })
            .collect()
    }
}

fn certificates_in(pem: &str) -> usize {
    pem.matches("-----BEGIN CERTIFICATE-----").count()
}

/// The leaf certificate 127.0.0.1:`port` serves (DER), verified against `ca_pem` for 127.0.0.1.
fn served_leaf(port: u16, ca_pem: &str) -> Vec<u8> {
    let mut conn = client_connection(ca_pem).unwrap();
    let mut tcp = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    while conn.is_handshaking() {
        conn.complete_io(&mut tcp)
            .unwrap_or_else(|e| panic!("handshake with the webhook: {e}"));
    }
    conn.peer_certificates().expect("a certificate")[0].to_vec()
}

#[test]
fn auto_tls_puts_its_ca_into_the_configuration_and_pods_are_stored_injected() {
    let Some(api) = Api::from_env() else { return };
    let (dir, t) = unbundled_tier(&api, "autotls");
    let w = auto_tls_webhook(&api, dir.path(), &t.name, &[]);
    t.point_at(w.port);
    let bundles = t.bundles();
    assert_eq!(bundles.len(), 2);
    for b in &bundles {
        assert_eq!(certificates_in(b), 1, "{b}");
        assert_eq!(b, &bundles[0], "the webhooks trust different CAs");
    }
    // What the API server is told to trust is what the webhook serves with.
    let (status, _) = https(w.port, &bundles[0], "GET", "/healthz", b"")
        .unwrap_or_else(|e| panic!("the bundle's CA does not verify the webhook: {e}"));
    assert_eq!(status, 200);
    t.wait_active();
    t.admit("web", "web");
    w.assert_logged(&["auto-TLS: CA in caBundle"], "the CA");

    // A second replica adds its own CA beside the first's: the API server trusts both.
    let dir2 = tempfile::tempdir().unwrap();
    let w2 = auto_tls_webhook(&api, dir2.path(), &t.name, &[]);
    let bundles = t.bundles();
    for b in &bundles {
        assert_eq!(certificates_in(b), 2, "{b}");
    }
    for port in [w.port, w2.port] {
        let (status, _) = https(port, &bundles[0], "GET", "/healthz", b"")
            .unwrap_or_else(|e| panic!("replica on {port} not trusted: {e}"));
        assert_eq!(status, 200);
    }
    t.admit("web-2", "with two replicas");
}

#[test]
fn auto_tls_renews_the_serving_certificate_and_admissions_keep_working() {
    let Some(api) = Api::from_env() else { return };
    let (dir, t) = unbundled_tier(&api, "autorenew");
    // Valid 15 s: renewed after 10 s (2/3).
    let w = auto_tls_webhook(&api, dir.path(), &t.name, &["--cert-validity", "15s"]);
    t.point_at(w.port);
    let bundle = t.bundles().remove(0);
    t.wait_active();
    let first = served_leaf(w.port, &bundle);
    t.admit("before", "before the renewal");

    let start = Instant::now();
    // Pacing, not waiting for anything: a pod every quarter second.
    admit_until(
        &t,
        &w,
        (Duration::from_secs(40), Duration::from_millis(250)),
        "before the renewal",
        |_| served_leaf(w.port, &bundle) != first,
    );
    assert!(
        start.elapsed() > Duration::from_secs(3),
        "renewed long before 2/3 of the validity"
    );
    w.assert_logged(&["serving certificate renewed"], "the renewal");
    // The same CA signs the new certificate: the bundle is unchanged and still trusted.
    assert_eq!(t.bundles().remove(0), bundle);
    for name in ["after-1", "after-2", "after-3"] {
        t.admit(name, "after the renewal");
    }

    // `kubectl apply` of the shipped configuration empties the bundles: the next renewal (or
    // the minute's check) puts the CA back.
    t.register(&t.configuration(w.port, &[], "Fail"));
    assert_eq!(certificates_in(&t.bundles()[0]), 0);
    let back = wait_until(Duration::from_secs(30), || {
        // A GET every 100 ms rather than every 10: the API server is shared with other tests.
        std::thread::sleep(Duration::from_millis(100));
        t.bundles().iter().all(|b| b == &bundle)
    });
    assert!(back, "the CA never came back: {:#?}", w.log());
    let admitted = wait_until(CONFIG_ACTIVE, || {
        let (status, p) = t.create(&t.ns_in, &pod("restored"), true);
        status == 201 && has_hooklog(&p)
    });
    assert!(admitted, "no admission with the CA restored");
    w.assert_logged(
        &["CA was missing from caBundle; added again"],
        "the restored CA",
    );
}

/// The API server as another identity: `token` instead of the tier's `system:masters` one.
fn as_token(api: &Api, token: &str) -> Api {
    Api {
        port: api.port,
        token: token.to_string(),
        ca_pem: api.ca_pem.clone(),
        ca_file: api.ca_file.clone(),
    }
}

#[test]
fn auto_tls_works_with_the_shipped_rbac_and_nothing_more() {
    let Some(api) = Api::from_env() else { return };
    let (dir, t) = unbundled_tier(&api, "autorbac");
    // k8s/webhook/rbac.yaml as shipped, but for this test's configuration and service account
    // (in this test's namespace): names changed, rules untouched.
    let ns = &t.ns_out;
    api.ok(
        "POST",
        &format!("/api/v1/namespaces/{ns}/serviceaccounts"),
        Some(&json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "hooklog-webhook"}})),
    );
    let rbac = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("k8s/webhook/rbac.yaml");
    let mut created = Vec::new();
    for mut doc in crate::util::manifests::documents(&rbac) {
        let kind = doc["kind"].as_str().unwrap().to_string();
        doc["metadata"]["name"] = json!(t.name);
        match kind.as_str() {
            "ClusterRole" => {
                for rule in doc["rules"].as_array_mut().unwrap() {
                    assert_eq!(rule["resourceNames"], json!(["hooklog-webhook"]));
                    rule["resourceNames"] = json!([t.name]);
                }
            }
            "ClusterRoleBinding" => {
                doc["roleRef"]["name"] = json!(t.name);
                doc["subjects"][0]["namespace"] = json!(ns);
            }
            other => panic!("rbac.yaml has a {other}"),
        }
        let plural = format!("{}s", kind.to_lowercase());
        api.ok(
            "POST",
            &format!("/apis/rbac.authorization.k8s.io/v1/{plural}"),
            Some(&doc),
        );
        created.push(format!(
            "/apis/rbac.authorization.k8s.io/v1/{plural}/{}",
            t.name
        ));
    }
    // A token of that service account, as the kubelet projects one (TokenRequest).
    let answer = api.ok(
        "POST",
        &format!("/api/v1/namespaces/{ns}/serviceaccounts/hooklog-webhook/token"),
        Some(&json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"audiences": ["https://kubernetes.default.svc"], "expirationSeconds": 3600}})),
    );
    let token = answer["status"]["token"].as_str().unwrap().to_string();
    let sa_api = as_token(&api, &token);

    // What the role allows is enough: the webhook starts and its CA is in the bundle.
    let w = auto_tls_webhook(&sa_api, dir.path(), &t.name, &[]);
    assert!(
        t.bundles().iter().all(|b| certificates_in(b) == 1),
        "{:#?}",
        w.log()
    );
    t.point_at(w.port);
    t.wait_active();
    // And nothing more: another configuration, the list, pods, secrets.
    for path in [
        "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/someone-else"
            .to_string(),
        "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations".to_string(),
        format!("/api/v1/namespaces/{ns}/pods"),
        format!("/api/v1/namespaces/{ns}/secrets"),
    ] {
        let (status, v) = sa_api.call("GET", &path, None);
        assert_eq!(status, 403, "GET {path}: {v:#}");
    }
    let (status, v) = sa_api.call(
        "DELETE",
        &format!(
            "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/{}",
            t.name
        ),
        None,
    );
    assert_eq!(status, 403, "DELETE: {v:#}");
    drop(w);
    for path in created {
        let _ = api.call("DELETE", &path, None);
    }
}
