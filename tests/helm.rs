//! The Helm chart (charts/hooklog/) and the Helm post-renderer (helm-plugin/hooklog/) with real
//! Helm: PyPI's `helm-python-sdk`, Helm v4's own engine as a library, driven by
//! tests/support/helm.py (no helm binary). The chart lints strictly, renders a matrix of values
//! whose every manifest `kubernetes-validate --strict` accepts, renders k8s/webhook/ exactly with
//! its defaults, and refuses bad values by name; the rendered webhook starts with the chart's own
//! environment and writes the sidecar image the values name. The post-renderer plugin runs
//! `hooklog inject` inside a Helm install and gives what the webhook gives the same pods. The API
//! server tier installs the chart for real (tests/apiserver.rs's tier): its RBAC is enough for
//! auto-TLS, and an opted-in pod is stored as `inject` makes it.
//!
//! Cold cost: `pip install helm-python-sdk` (a 75 MB wheel, libhelm 85 MB unpacked), 4 s here;
//! then each Helm call loads libhelm, about 0.3 s.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Map, Value, json};

use crate::util::events::rbac_unknown_findings;
use crate::util::manifests::yaml_documents;
use crate::util::webhook::{Certs, IMAGE, Webhook, patched, pod_review};
use crate::util::{hooklog, hooklog_bin, in_ci, output_with_input};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn chart() -> PathBuf {
    root().join("charts/hooklog")
}

/// Labels the chart adds to k8s/webhook/'s for Helm's bookkeeping.
const HELM_LABELS: [&str; 4] = [
    "app.kubernetes.io/instance",
    "app.kubernetes.io/version",
    "app.kubernetes.io/managed-by",
    "helm.sh/chart",
];

/// Whether Helm is here: `None` skips the test with a message, and in CI fails it.
fn helm_available() -> bool {
    let ok = Command::new("python3")
        .args(["-c", "import helm_python, yaml"])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        ok || !in_ci(),
        "helm-python-sdk is not installed: scripts/test.sh runs `pip install helm-python-sdk`"
    );
    if !ok {
        eprintln!("skipped: no helm-python-sdk (pip install helm-python-sdk)");
    }
    ok
}

/// One request to tests/support/helm.py: `Ok(answer)` or `Err(Helm's message)`.
pub fn helm(request: &Value, env: &[(&str, &std::ffi::OsStr)]) -> Result<Value, String> {
    let out = output_with_input(
        Command::new("python3")
            .arg(root().join("tests/support/helm.py"))
            .envs(env.iter().copied()),
        request.to_string().as_bytes(),
    );
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    match out.status.code() {
        Some(0) => Ok(serde_json::from_slice(&out.stdout).expect("helm.py answers JSON")),
        Some(2) => Err(stderr),
        _ => panic!("helm.py failed: {stderr}"),
    }
}

/// The chart rendered with `values` (and [`IMAGES`] where they name none) as release `name` in
/// `namespace`: every manifest's documents (NOTES.txt left out), or Helm's error.
pub fn render(values: &Value, name: &str, namespace: &str) -> Result<Vec<Value>, String> {
    render_for(values, name, namespace, None)
}

/// [`render`] for the API server version `kube` (`Capabilities.KubeVersion`; Helm's default,
/// its newest, without).
pub fn render_for(
    values: &Value,
    name: &str,
    namespace: &str,
    kube: Option<&str>,
) -> Result<Vec<Value>, String> {
    render_exact(&with_images(values.clone()), name, namespace, kube)
}

/// [`render_for`] with `values` as they are: no [`IMAGES`] filled in.
fn render_exact(
    values: &Value,
    name: &str,
    namespace: &str,
    kube: Option<&str>,
) -> Result<Vec<Value>, String> {
    let files = helm(
        &json!({"op": "render", "chart": chart(), "values": values, "name": name, "namespace": namespace, "kube_version": kube}),
        &[],
    )?;
    let mut text = String::new();
    let files: &Map<String, Value> = files.as_object().unwrap();
    for (path, body) in files {
        if path.ends_with(".yaml") {
            text.push_str("---\n");
            text.push_str(body.as_str().unwrap());
            text.push('\n');
        }
    }
    Ok(yaml_documents(&text))
}

fn chart_app_version() -> String {
    let chart = std::fs::read_to_string(chart().join("Chart.yaml")).unwrap();
    let line = chart
        .lines()
        .find(|l| l.starts_with("appVersion:"))
        .expect("appVersion in Chart.yaml");
    line["appVersion:".len()..]
        .trim()
        .trim_matches('"')
        .to_string()
}

fn find<'a>(docs: &'a [Value], kind: &str) -> &'a Value {
    docs.iter()
        .find(|d| d["kind"] == kind)
        .unwrap_or_else(|| panic!("no {kind} in {docs:#?}"))
}

fn webhook_container(docs: &[Value]) -> &Value {
    &find(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]
}

/// The Deployment's environment as `(name, value)`, a fieldRef to the namespace as `namespace`.
fn env_of(docs: &[Value], namespace: &str) -> Vec<(String, String)> {
    webhook_container(docs)["env"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            let value = match e["value"].as_str() {
                Some(v) => v.to_string(),
                None => {
                    assert_eq!(
                        e["valueFrom"]["fieldRef"]["fieldPath"], "metadata.namespace",
                        "{e}"
                    );
                    namespace.to_string()
                }
            };
            (e["name"].as_str().unwrap().to_string(), value)
        })
        .collect()
}

/// `hooklog webhook` as the chart's Deployment runs it in `namespace`, with nothing of the
/// test's environment but PATH: its container's args and env, the Secret's mount (the TLS files
/// the env names) as `certs`' files, on a port of its own (127.0.0.1:0) and logging at info.
fn chart_webhook(docs: &[Value], namespace: &str, certs: Option<&Certs>) -> Command {
    let mut cmd = hooklog();
    cmd.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap());
    cmd.args(
        webhook_container(docs)["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap()),
    );
    for (k, v) in env_of(docs, namespace) {
        let v = match (k.as_str(), certs) {
            ("HOOKLOG_TLS_CERT_FILE", Some(c)) => c.cert_file.to_str().unwrap().to_string(),
            ("HOOKLOG_TLS_KEY_FILE", Some(c)) => c.key_file.to_str().unwrap().to_string(),
            _ => v,
        };
        cmd.env(k, v);
    }
    cmd.env("HOOKLOG_WEBHOOK_LISTEN", "127.0.0.1:0")
        .env("RUST_LOG", "info");
    cmd
}

/// The chart's webhook as [`chart_webhook`] runs it in the release's namespace `hooklog`,
/// serving with a certificate of its own where the Secret's mount would be.
struct ChartWebhook {
    w: Webhook,
    certs: Certs,
    _dir: tempfile::TempDir,
}

impl ChartWebhook {
    fn serving(docs: &[Value]) -> ChartWebhook {
        let dir = tempfile::tempdir().unwrap();
        let certs = Certs::make(dir.path(), "hooklog chart CA");
        ChartWebhook {
            w: Webhook::spawn(chart_webhook(docs, "hooklog", Some(&certs))),
            certs,
            _dir: dir,
        }
    }

    /// An opted-in pod through the webhook: the pod, and the pod patched as it answers.
    fn opted_in_pod(&self) -> (Value, Value) {
        let pod = crate::util::webhook::web_pod(json!({"hooklog.dev/inject": "enabled"}));
        let review = pod_review("u1", "shop", &pod);
        let answer = self.w.review(&self.certs.ca_pem, "/mutate", &review);
        let got = patched(&pod, &answer);
        (pod, got)
    }
}

/// The native sidecar (the init container `hooklog`) of `pod`.
fn native_sidecar(pod: &Value) -> Value {
    pod["spec"]["initContainers"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["name"] == "hooklog")
        .cloned()
        .unwrap_or_else(|| panic!("no sidecar: {pod:#}"))
}

/// The images k8s/webhook/webhook.yaml names: the two values the chart requires.
const IMAGES: [(&str, &str); 2] = [
    (
        "image",
        "123456789012.dkr.ecr.eu-west-1.amazonaws.com/hooklog",
    ),
    (
        "sidecarImage",
        "123456789012.dkr.ecr.eu-west-1.amazonaws.com/hooklog-sidecar",
    ),
];

/// `values` with [`IMAGES`]' repositories where it names none.
fn with_images(mut values: Value) -> Value {
    for (key, repository) in IMAGES {
        let image = values
            .as_object_mut()
            .unwrap()
            .entry(key)
            .or_insert_with(|| json!({}));
        if image.get("repository").is_none() {
            image["repository"] = json!(repository);
        }
    }
    values
}

/// Values that reach every branch of the templates, each with a name (and [`IMAGES`] where they
/// name no image).
fn matrix() -> Vec<(&'static str, Value)> {
    matrix_without_images()
        .into_iter()
        .map(|(what, values)| (what, with_images(values)))
        .collect()
}

fn matrix_without_images() -> Vec<(&'static str, Value)> {
    let digest = format!("sha256:{}", "ab".repeat(32));
    vec![
        ("defaults", json!({})),
        (
            "cert-manager, the chart's issuer",
            json!({"tls": {"mode": "certManager"}}),
        ),
        (
            "cert-manager, a ClusterIssuer",
            json!({"tls": {"mode": "certManager", "secretName": "mine", "certManager": {"issuerRef": {"name": "corp-ca", "kind": "ClusterIssuer", "group": "cert-manager.io"}, "duration": "720h"}}}),
        ),
        (
            "a given Secret",
            json!({"tls": {"mode": "secret", "secretName": "webhook-tls", "caBundle": "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg=="}}),
        ),
        (
            "selectors, url, Fail",
            json!({"webhook": {"failurePolicy": "Fail", "timeoutSeconds": 5, "url": "https://hooklog.example.com:8443/", "excludedNamespaces": ["ci", "kube-system"], "namespaceSelector": {"matchExpressions": [{"key": "team", "operator": "In", "values": ["shop"]}]}, "objectSelector": {"matchLabels": {"hooklog": "yes"}}}}),
        ),
        (
            "sidecar and auto-TLS settings",
            json!({"sidecar": {"mode": "native", "kubernetesVersion": "1.30", "prestopSleep": {"app": "5s", "web": "15s"}}, "logFormat": "json", "tls": {"certValidity": "1h", "sans": ["hooklog.example.com", "10.0.0.7"]}}),
        ),
        (
            "images by digest, scheduling, sizes",
            json!({"image": {"repository": "ghcr.io/acme/hooklog", "tag": "9.9.9", "digest": digest, "pullPolicy": "Always"}, "sidecarImage": {"repository": "ghcr.io/acme/hooklog-sidecar", "digest": digest}, "imagePullSecrets": [{"name": "regcred"}], "replicas": 3, "pdb": {"enabled": false}, "nodeSelector": {"kubernetes.io/os": "linux"}, "tolerations": [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}], "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64", "arm64"]}]}]}}}, "resources": {"requests": {"cpu": "100m", "memory": "48Mi"}, "limits": {"memory": "96Mi"}}, "priorityClassName": "system-cluster-critical", "podAnnotations": {"prometheus.io/scrape": "false"}, "podLabels": {"team": "platform"}, "terminationGracePeriodSeconds": 45}),
        ),
        ("a fullname override", json!({"fullnameOverride": "hooks"})),
        ("events", json!({"events": {"enabled": true}})),
        ("the injected sidecar's settings", sidecar_settings_values()),
        (
            "no namespace annotations, a certificate by cert-manager",
            json!({"sidecar": {"namespaceAnnotations": false}, "tls": {"mode": "certManager"}}),
        ),
    ]
}

#[test]
fn the_chart_lints_strictly() {
    if !helm_available() {
        return;
    }
    for kube in ["v1.20.0", "v1.29.0", "v1.33.0"] {
        let report = helm(
            &json!({"op": "lint", "chart": chart(), "namespace": "hooklog", "kube_version": kube, "values": with_images(json!({}))}),
            &[],
        )
        .unwrap();
        assert_eq!(report["errors"], json!([]), "{kube}: {report:#}");
        // Severity 2 is a warning, 3 an error (helm_python.lint); `strict` fails on both. Only
        // the icon (info, 1) is left: the project has none.
        let messages = report["messages"].as_array().unwrap();
        for m in messages {
            assert!(
                m["severity"].as_u64().unwrap() < 2,
                "{kube}: {m} in {report:#}"
            );
        }
        assert!(
            messages.iter().all(|m| m["error"] == "icon is recommended"),
            "{report:#}"
        );
    }
}

/// The cert-manager kinds, which the Kubernetes schemas do not know: checked by field instead.
fn is_cert_manager(doc: &Value) -> bool {
    doc["apiVersion"]
        .as_str()
        .is_some_and(|v| v.starts_with("cert-manager.io/"))
}

/// Manifests a test keeps, for one `kubernetes-validate --strict` of them all at its end.
struct Strictly {
    dir: tempfile::TempDir,
    files: Vec<PathBuf>,
}

impl Strictly {
    fn new() -> Strictly {
        Strictly {
            dir: tempfile::tempdir().unwrap(),
            files: Vec::new(),
        }
    }

    /// Keeps `doc` as `name`.yaml.
    fn keep(&mut self, name: &str, doc: &Value) {
        let file = self.dir.path().join(format!("{name}.yaml"));
        std::fs::write(&file, serde_json::to_string_pretty(doc).unwrap()).unwrap();
        self.files.push(file);
    }

    fn validate(self) {
        crate::util::manifests::validate_strictly(&self.files);
    }
}

#[test]
fn every_manifest_of_a_matrix_of_values_validates_strictly() {
    if !helm_available() {
        return;
    }
    let mut strictly = Strictly::new();
    for (i, (what, values)) in matrix().into_iter().enumerate() {
        let docs = render(&values, "hooklog", "hooklog").unwrap_or_else(|e| panic!("{what}: {e}"));
        let kinds: Vec<&str> = docs.iter().map(|d| d["kind"].as_str().unwrap()).collect();
        let mode = values["tls"]["mode"].as_str().unwrap_or("auto");
        // The RBAC only for auto-TLS; the Certificate only for cert-manager; the PDB unless off.
        let fullname = find(&docs, "Deployment")["metadata"]["name"].clone();
        let role = |name: &Value| {
            docs.iter()
                .any(|d| d["kind"] == "ClusterRole" && d["metadata"]["name"] == *name)
        };
        assert_eq!(role(&fullname), mode == "auto", "{what}: {kinds:?}");
        // The namespaces' list for their settings' annotations, unless turned off.
        assert_eq!(
            role(&json!(format!("{}-namespaces", fullname.as_str().unwrap()))),
            values["sidecar"]["namespaceAnnotations"] != false,
            "{what}"
        );
        assert_eq!(
            kinds.contains(&"Certificate"),
            mode == "certManager",
            "{what}: {kinds:?}"
        );
        assert_eq!(
            kinds.contains(&"PodDisruptionBudget"),
            values["pdb"]["enabled"] != false,
            "{what}"
        );
        check_wiring(what, &values, &docs);
        for (j, doc) in docs.iter().enumerate() {
            if !is_cert_manager(doc) {
                strictly.keep(&format!("{i}-{j}"), doc);
            }
        }
    }
    strictly.validate();
}

/// What each value must change in the rendered objects, read back from them.
fn check_wiring(what: &str, values: &Value, docs: &[Value]) {
    let deployment = find(docs, "Deployment");
    let config = find(docs, "MutatingWebhookConfiguration");
    let name = deployment["metadata"]["name"].as_str().unwrap();
    let env: std::collections::BTreeMap<String, String> =
        env_of(docs, "hooklog").into_iter().collect();
    assert_eq!(
        env["HOOKLOG_WEBHOOK_CONFIG"], config["metadata"]["name"],
        "{what}"
    );
    assert_eq!(env["HOOKLOG_WEBHOOK_SERVICE"], name, "{what}");
    let tag = chart_app_version();
    let image = |key: &str, default_repo: &str| {
        let v = &values[key];
        let mut s = format!(
            "{}:{}",
            v["repository"].as_str().unwrap_or(default_repo),
            v["tag"].as_str().unwrap_or(&tag)
        );
        if let Some(d) = v["digest"].as_str() {
            s = format!("{s}@{d}");
        }
        s
    };
    assert_eq!(
        webhook_container(docs)["image"],
        image(
            "image",
            "123456789012.dkr.ecr.eu-west-1.amazonaws.com/hooklog"
        ),
        "{what}"
    );
    assert_eq!(
        env["HOOKLOG_INJECT_IMAGE"],
        image(
            "sidecarImage",
            "123456789012.dkr.ecr.eu-west-1.amazonaws.com/hooklog-sidecar"
        ),
        "{what}"
    );
    let hooks = config["webhooks"].as_array().unwrap();
    assert_eq!(hooks.len(), 3, "{what}");
    for hook in hooks {
        // The workload webhook only warns: always Ignore (issue 36).
        let policy = match hook["name"].as_str() {
            Some("workload.hooklog.dev") => "Ignore",
            _ => values["webhook"]["failurePolicy"]
                .as_str()
                .unwrap_or("Ignore"),
        };
        assert_eq!(hook["failurePolicy"], policy, "{what}");
        let excluded = hook["namespaceSelector"]["matchExpressions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["key"] == "kubernetes.io/metadata.name")
            .unwrap()["values"]
            .clone();
        for ns in ["hooklog", "kube-system", "kube-public", "kube-node-lease"] {
            assert!(excluded.as_array().unwrap().contains(&json!(ns)), "{what}");
        }
        let client = &hook["clientConfig"];
        match values["webhook"]["url"].as_str() {
            Some(url) => {
                assert!(
                    client["url"]
                        .as_str()
                        .unwrap()
                        .starts_with(url.trim_end_matches('/'))
                );
                assert!(client.get("service").is_none());
            }
            None => assert_eq!(client["service"]["name"], name, "{what}"),
        }
    }
    let tls = values["tls"]["mode"].as_str().unwrap_or("auto");
    if tls != "auto" {
        let secret = deployment["spec"]["template"]["spec"]["volumes"][0]["secret"]["secretName"]
            .as_str()
            .unwrap();
        assert_eq!(env["HOOKLOG_TLS_CERT_FILE"], "/tls/tls.crt", "{what}");
        if tls == "certManager" {
            let cert = find(docs, "Certificate");
            assert_eq!(cert["spec"]["secretName"], secret, "{what}");
            assert_eq!(
                cert["spec"]["dnsNames"][0],
                format!("{name}.hooklog.svc"),
                "{what}"
            );
            assert_eq!(
                config["metadata"]["annotations"]["cert-manager.io/inject-ca-from"],
                format!("hooklog/{}", cert["metadata"]["name"].as_str().unwrap()),
                "{what}"
            );
            let issuer = &cert["spec"]["issuerRef"]["name"];
            if values["tls"]["certManager"]["issuerRef"].is_null() {
                assert_eq!(find(docs, "Issuer")["metadata"]["name"], *issuer, "{what}");
            }
        } else {
            for hook in hooks {
                assert_eq!(hook["clientConfig"]["caBundle"], values["tls"]["caBundle"]);
            }
        }
    } else {
        assert!(!env.contains_key("HOOKLOG_TLS_CERT_FILE"), "{what}");
    }
}

/// `doc` without the labels the chart adds to every object (`hooklog.labels`) that `shipped`,
/// the same object in k8s/webhook/, does not have.
fn without_helm_labels(mut doc: Value, shipped: &Value) -> Value {
    let added = HELM_LABELS.iter().chain(&["app.kubernetes.io/name"]);
    for (at, keep) in [
        ("/metadata/labels", shipped.pointer("/metadata/labels")),
        (
            "/spec/template/metadata/labels",
            shipped.pointer("/spec/template/metadata/labels"),
        ),
    ] {
        if let Some(map) = doc.pointer_mut(at).and_then(Value::as_object_mut) {
            for l in added.clone() {
                if keep.and_then(|k| k.get(*l)).is_none() {
                    map.remove(*l);
                }
            }
        }
    }
    if doc["metadata"]["labels"]
        .as_object()
        .is_some_and(Map::is_empty)
    {
        doc["metadata"].as_object_mut().unwrap().remove("labels");
    }
    doc
}

#[test]
fn the_chart_with_its_defaults_renders_k8s_webhook() {
    if !helm_available() {
        return;
    }
    let key = |d: &Value| format!("{}/{}", d["kind"].as_str().unwrap(), d["metadata"]["name"]);
    // k8s/webhook/ stays valid from 1.20: the chart renders it for a cluster without
    // matchConditions (GA in 1.30).
    let mut chart: Vec<Value> = render_for(
        &with_images(json!({})),
        "hooklog",
        "hooklog",
        Some("v1.29.0"),
    )
    .unwrap();
    let mut shipped: Vec<Value> = Vec::new();
    for file in [
        "webhook.yaml",
        "rbac.yaml",
        "namespaces-rbac.yaml",
        "mutatingwebhookconfiguration.yaml",
    ] {
        shipped.extend(
            crate::util::manifests::documents(&root().join("k8s/webhook").join(file))
                .into_iter()
                .filter(|d| d["kind"] != "Namespace"),
        );
    }
    chart.sort_by_key(key);
    shipped.sort_by_key(key);
    assert_eq!(
        chart.iter().map(key).collect::<Vec<_>>(),
        shipped.iter().map(key).collect::<Vec<_>>()
    );
    for (c, s) in chart.iter().zip(&shipped) {
        let c = without_helm_labels(c.clone(), s);
        assert_eq!(&c, s, "{} differs from k8s/webhook/", key(s));
    }
}

#[test]
fn bad_values_fail_the_render_naming_the_value() {
    if !helm_available() {
        return;
    }
    for (values, says) in [
        (json!({"tls": {"mode": "letsencrypt"}}), "tls.mode"),
        (json!({"tls": {"mode": "secret"}}), "tls.secretName"),
        (
            json!({"tls": {"mode": "secret", "secretName": "x"}}),
            "tls.caBundle",
        ),
        (json!({"sidecar": {"mode": "both"}}), "sidecar.mode"),
        (
            json!({"webhook": {"failurePolicy": "Retry"}}),
            "webhook.failurePolicy",
        ),
        (
            json!({"webhook": {"url": "http://127.0.0.1:8443"}}),
            "webhook.url",
        ),
        (json!({"image": {"digest": "latest"}}), "digest"),
        (
            json!({"sidecarImage": {"digest": format!("sha256:{}", "A".repeat(64))}}),
            "digest",
        ),
        (json!({"image": {"repository": ""}}), "repository"),
        (json!({"sidecar": {"output": "kafka"}}), "sidecar.output"),
        (
            json!({"sidecar": {"output": "cloudwatch"}}),
            "sidecar.cloudwatch.logGroup",
        ),
        (
            json!({"sidecar": {"resources": {"requests": {"cpu": "ten"}}}}),
            "sidecar.resources.requests.cpu",
        ),
        (
            json!({"sidecar": {"resources": {"requests": {"gpu": "1"}}}}),
            "sidecar.resources.requests.gpu",
        ),
        (
            json!({"sidecar": {"env": {"NO_PROXY": "a,b"}}}),
            "sidecar.env.NO_PROXY",
        ),
    ] {
        let values = with_images(values);
        let err = render(&values, "hooklog", "hooklog").expect_err(&format!("{values} rendered"));
        assert!(err.contains(says), "{values}: {err}");
    }
}

/// Without its images the chart does not install (Helm's `required`): an error naming each
/// missing value and the build that makes its image, never a webhook that cannot start (the
/// sidecar image under the full CLI's name exits `unrecognized subcommand 'webhook'`, and with
/// `failurePolicy: Ignore` pods go silently uninjected).
#[test]
fn an_install_without_the_images_fails_naming_the_value() {
    if !helm_available() {
        return;
    }
    for (values, says) in [
        (json!({}), "image.repository is required"),
        (
            json!({"image": {"repository": IMAGES[0].1}}),
            "sidecarImage.repository is required",
        ),
        (
            json!({"sidecarImage": {"repository": IMAGES[1].1}}),
            "image.repository is required",
        ),
        (
            json!({"image": {"repository": IMAGES[0].1}, "sidecarImage": {"repository": ""}}),
            "sidecarImage.repository is required",
        ),
    ] {
        let err = render_exact(&values, "hooklog", "hooklog", None)
            .expect_err(&format!("{values} rendered"));
        assert!(err.contains(says), "{values}: {err}");
        let build = if says.starts_with("image") {
            "--target hooklog"
        } else {
            "docker build -t REGISTRY/hooklog-sidecar"
        };
        assert!(err.contains(build), "{values}: {err}");
    }
    // A real install (client-side dry run) fails alike: nothing is created.
    let err = helm(
        &json!({"op": "install", "chart": chart(), "name": "hooklog", "namespace": "hooklog", "dry_run": "client"}),
        &[],
    )
    .expect_err("installed without images");
    assert!(err.contains("image.repository is required"), "{err}");
}

#[test]
fn the_rendered_webhook_starts_with_the_charts_environment_and_writes_the_sidecar_image() {
    if !helm_available() {
        return;
    }
    let sidecar = "ghcr.io/acme/hooklog-sidecar";
    let docs = render(
        &json!({
            "tls": {"mode": "secret", "secretName": "tls", "caBundle": "eA=="},
            "image": {"repository": IMAGES[0].1},
            "sidecarImage": {"repository": sidecar},
            "sidecar": {"mode": "classic"},
        }),
        "hooklog",
        "hooklog",
    )
    .unwrap();
    let (_, got) = ChartWebhook::serving(&docs).opted_in_pod();
    let images: Vec<&str> = got["spec"]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .chain(got["spec"]["initContainers"].as_array().unwrap())
        .filter(|c| c["name"].as_str().unwrap().starts_with("hooklog"))
        .map(|c| c["image"].as_str().unwrap())
        .collect();
    let want = format!("{sidecar}:{}", chart_app_version());
    assert!(images.len() >= 2, "{got:#}");
    assert!(images.iter().all(|i| *i == want), "{images:?}");
    // The classic sidecar the values chose, and the sleep they gave the app.
    let names: Vec<&str> = got["spec"]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"hooklog"), "{names:?}");
}

/// The plugin as shipped, installed where Helm looks for plugins ($HELM_PLUGINS), with this
/// build's `hooklog` first on PATH.
fn plugin_env(dir: &Path) -> (PathBuf, std::ffi::OsString) {
    let plugins = dir.join("plugins");
    let to = plugins.join("hooklog");
    std::fs::create_dir_all(&to).unwrap();
    std::fs::copy(
        root().join("helm-plugin/hooklog/plugin.yaml"),
        to.join("plugin.yaml"),
    )
    .unwrap();
    let bin = hooklog_bin();
    let mut path = std::ffi::OsString::from(bin.parent().unwrap());
    path.push(":");
    path.push(std::env::var_os("PATH").unwrap_or_default());
    (plugins, path)
}

#[test]
fn the_post_renderer_plugin_in_a_helm_install_gives_what_the_webhook_gives() {
    if !helm_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (plugins, path) = plugin_env(dir.path());
    let release = helm(
        &json!({
            "op": "install", "chart": root().join("tests/charts/shop"), "name": "shop",
            "namespace": "shop", "dry_run": "client", "post_renderer": "hooklog",
            "post_renderer_args": [format!("--image={IMAGE}"), "--offline"],
        }),
        &[("HELM_PLUGINS", plugins.as_os_str()), ("PATH", &path)],
    )
    .unwrap();
    let docs = yaml_documents(release["manifest"].as_str().unwrap());
    let deployment = find(&docs, "Deployment");
    let service = find(&docs, "Service");
    assert_eq!(service["metadata"]["name"], "shop-checkout", "{docs:#?}");
    let template = &deployment["spec"]["template"];
    let names = |k: &str| -> Vec<String> {
        template["spec"][k]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| c["name"].as_str().unwrap().to_string())
            .collect()
    };
    assert!(
        names("initContainers").contains(&"hooklog".to_string()),
        "not injected: {deployment:#}"
    );

    // The same pods, as the chart renders them without the post-renderer, through the webhook.
    let plain = render_chart(&root().join("tests/charts/shop"), "shop", "shop");
    let plain_template = &find(&plain, "Deployment")["spec"]["template"];
    let certs = Certs::make(dir.path(), "hooklog post-render CA");
    let w = Webhook::start(&certs, &["--sidecar", "native"]);
    let pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": plain_template["metadata"],
        "spec": plain_template["spec"],
    });
    let answer = w.review(
        &certs.ca_pem,
        "/mutate/namespace-enabled",
        &pod_review("post-render", "shop", &pod),
    );
    let by_webhook = patched(&pod, &answer);
    assert_eq!(by_webhook["spec"], template["spec"]);
    assert_eq!(
        by_webhook["metadata"]["annotations"],
        template["metadata"]["annotations"]
    );
    // envoy's `sleep` (not in its distroless image) became hooklog's own.
    let envoy = &template["spec"]["containers"][1];
    assert_eq!(envoy["name"], "envoy");
    let command: Vec<&str> = envoy["lifecycle"]["preStop"]["exec"]["command"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert!(
        command.ends_with(&["--", "/hooklog-bin/hooklog", "sleep", "15"]),
        "{command:?}"
    );
}

/// Any chart rendered offline: its documents.
fn render_chart(chart: &Path, name: &str, namespace: &str) -> Vec<Value> {
    let files = helm(
        &json!({"op": "render", "chart": chart, "name": name, "namespace": namespace}),
        &[],
    )
    .unwrap();
    let text: String = files
        .as_object()
        .unwrap()
        .values()
        .map(|v| format!("---\n{}\n", v.as_str().unwrap()))
        .collect();
    yaml_documents(&text)
}

/// The API server tier's credentials, for Helm's client.
fn kube(api: &crate::util::apiserver::Api) -> Value {
    json!({
        "apiserver": format!("https://127.0.0.1:{}", api.port),
        "token": api.token,
        "ca_file": api.ca_file,
    })
}

#[test]
fn helm_installs_the_chart_into_an_api_server_and_opted_in_pods_are_stored_injected() {
    use crate::util::apiserver::{Api, Tier, pod};
    let Some(api) = Api::from_env() else { return };
    if !helm_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let t = Tier::new(&api, "helm");
    let release = t.name.clone();
    let namespace = format!("{}-sys", t.name);
    let fullname = format!("{release}-webhook");
    // Only this test's namespaces reach the webhook (the extra matchExpression); the webhook is
    // outside the cluster, at a URL (loopback cannot be a Service's endpoint), its certificate
    // also for 127.0.0.1. Port 9 until the webhook has one: nothing is sent there before.
    let (image_repo, image_tag) = IMAGE.rsplit_once(':').unwrap();
    let values = |port: u16| {
        json!({
            "webhook": {
                "url": format!("https://127.0.0.1:{port}"),
                "failurePolicy": "Fail",
                "namespaceSelector": {"matchExpressions": [{"key": "hooklog-test", "operator": "In", "values": [t.name]}]},
            },
            "image": {"repository": IMAGES[0].1},
            "sidecarImage": {"repository": image_repo, "tag": image_tag},
            "tls": {"sans": ["127.0.0.1"]},
        })
    };
    let installed = helm(
        &json!({"op": "install", "chart": chart(), "name": release, "namespace": namespace,
                "create_namespace": true, "values": values(9), "kube": kube(&api)}),
        &[],
    )
    .unwrap();
    assert_eq!(installed["status"], "deployed", "{installed:#}");
    let docs = yaml_documents(installed["manifest"].as_str().unwrap());
    for (kind, path) in [
        (
            "Deployment",
            format!("/apis/apps/v1/namespaces/{namespace}/deployments/{fullname}"),
        ),
        (
            "Service",
            format!("/api/v1/namespaces/{namespace}/services/{fullname}"),
        ),
        (
            "ServiceAccount",
            format!("/api/v1/namespaces/{namespace}/serviceaccounts/{fullname}"),
        ),
        (
            "PodDisruptionBudget",
            format!("/apis/policy/v1beta1/namespaces/{namespace}/poddisruptionbudgets/{fullname}"),
        ),
        (
            "ClusterRole",
            format!("/apis/rbac.authorization.k8s.io/v1/clusterroles/{fullname}"),
        ),
        (
            "MutatingWebhookConfiguration",
            format!(
                "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/{fullname}"
            ),
        ),
    ] {
        let (status, v) = api.call("GET", &path, None);
        assert_eq!(status, 200, "{kind} not stored: {v:#}");
    }

    // The chart's webhook, as its Deployment runs it, with a token of the chart's service
    // account (TokenRequest, as the kubelet projects one): its RBAC must be enough for auto-TLS.
    let answer = api.call(
        "POST",
        &format!("/api/v1/namespaces/{namespace}/serviceaccounts/{fullname}/token"),
        Some(&json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"audiences": ["https://kubernetes.default.svc"], "expirationSeconds": 3600}})),
    );
    assert_eq!(answer.0, 201, "{:#}", answer.1);
    let sa = dir.path().join("serviceaccount");
    std::fs::create_dir_all(&sa).unwrap();
    std::fs::copy(&api.ca_file, sa.join("ca.crt")).unwrap();
    std::fs::write(
        sa.join("token"),
        answer.1["status"]["token"].as_str().unwrap(),
    )
    .unwrap();
    // The opted-in namespace's settings (issue 41): the webhook lists the namespaces as it
    // starts, with the chart's ClusterRole, and its pods get them.
    let ns_path = format!("/api/v1/namespaces/{}", t.ns_in);
    let (status, mut ns) = api.call("GET", &ns_path, None);
    assert_eq!(status, 200, "{ns:#}");
    ns["metadata"]["annotations"] =
        json!({"hooklog.dev/emf": "true", "hooklog.dev/memory-limit": "96Mi"});
    let (status, ns) = api.call("PUT", &ns_path, Some(&ns));
    assert_eq!(status, 200, "{ns:#}");
    let mut cmd = chart_webhook(&docs, &namespace, None);
    cmd.env("HOOKLOG_SERVICEACCOUNT_DIR", &sa)
        .env("KUBERNETES_SERVICE_HOST", "127.0.0.1")
        .env("KUBERNETES_SERVICE_PORT", api.port.to_string());
    let w = Webhook::spawn(cmd);
    w.assert_logged(&["sidecar=Classic"], "sidecar auto on 1.20");
    w.assert_logged(
        &["namespace settings read", "annotated="],
        "the chart's RBAC lets the webhook list namespaces",
    );

    // `helm upgrade` to the webhook's port: the caBundle the webhook wrote is not the chart's,
    // and survives it.
    let upgraded = helm(
        &json!({"op": "upgrade", "chart": chart(), "name": release, "namespace": namespace,
                "values": values(w.port), "kube": kube(&api)}),
        &[],
    )
    .unwrap();
    assert_eq!(upgraded["revision"], 2, "{upgraded:#}");
    t.wait_active();

    let stored = t.admit("web", "through the chart's webhook");
    // As `hooklog inject --sidecar classic` makes the same pod, both as the API server defaults
    // them (tests/apiserver.rs does the same with its own configuration); the namespace's
    // settings as inject's flags.
    let want = t.as_inject_makes(
        &pod("web"),
        &[
            "--sidecar",
            "classic",
            "--sidecar-emf",
            "--sidecar-memory-limit=96Mi",
        ],
    );
    assert_eq!(stored["spec"], want["spec"]);

    drop(w);
    helm(
        &json!({"op": "uninstall", "name": release, "namespace": namespace, "kube": kube(&api)}),
        &[],
    )
    .unwrap();
    let (status, _) = api.call(
        "GET",
        &format!("/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/{fullname}"),
        None,
    );
    assert_eq!(status, 404, "helm uninstall left the configuration");
    let _ = api.call("DELETE", &format!("/api/v1/namespaces/{namespace}"), None);
}

/// `MAX_BUNDLE` of src/webhook/autotls.rs: the CAs an auto-TLS caBundle keeps.
fn max_bundle() -> i64 {
    let src = std::fs::read_to_string(root().join("src/webhook/autotls.rs")).unwrap();
    src.lines()
        .find_map(|l| l.strip_prefix("pub const MAX_BUNDLE: usize = "))
        .and_then(|v| v.trim_end_matches(';').parse().ok())
        .expect("MAX_BUNDLE in src/webhook/autotls.rs")
}

fn hook<'a>(config: &'a Value, name: &str) -> &'a Value {
    config["webhooks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["name"] == name)
        .unwrap_or_else(|| panic!("no webhook {name}"))
}

/// Issue 36: the chart keeps its word. The workload webhook (warnings only) is Ignore and
/// opted-in namespaces only whatever `failurePolicy` says; from 1.30 the pod webhooks carry a
/// matchCondition skipping the excluded namespaces; the optional NetworkPolicy admits the
/// API server's CIDRs to the webhook's port only; auto-TLS refuses more replicas than the
/// caBundle holds (with a rollout's surge). Every manifest rendered validates strictly.
#[test]
fn the_webhook_policy_keeps_its_word() {
    if !helm_available() {
        return;
    }
    let mut strictly = Strictly::new();
    let fail = json!({"webhook": {"failurePolicy": "Fail", "excludedNamespaces": ["ci"]}});
    for kube in ["v1.29.0", "v1.30.0", "v1.36.0"] {
        let docs = render_for(&fail, "hooklog", "tools", Some(kube)).unwrap();
        let config = find(&docs, "MutatingWebhookConfiguration");
        for pods in ["namespace.inject.hooklog.dev", "pod.inject.hooklog.dev"] {
            let h = hook(config, pods);
            assert_eq!(h["failurePolicy"], "Fail", "{kube} {pods}");
            let conditions = &h["matchConditions"];
            if kube == "v1.29.0" {
                assert!(conditions.is_null(), "{kube}: {h:#}");
            } else {
                let expression = conditions[0]["expression"].as_str().unwrap();
                assert_eq!(
                    expression,
                    "!(request.namespace in ['tools','kube-system','kube-public','kube-node-lease','ci'])",
                    "{kube}"
                );
            }
        }
        let w = hook(config, "workload.hooklog.dev");
        assert_eq!(w["failurePolicy"], "Ignore", "{kube}");
        assert!(
            w["namespaceSelector"]["matchExpressions"]
                .as_array()
                .unwrap()
                .contains(
                    &json!({"key": "hooklog.dev/inject", "operator": "In", "values": ["enabled"]})
                ),
            "{w:#}"
        );
        strictly.keep(&format!("config-{kube}"), config);
    }

    let cidrs = ["10.0.0.0/19", "10.0.32.0/19"];
    let values = json!({"networkPolicy": {"enabled": true, "apiServerCIDRs": cidrs}});
    let docs = render(&values, "hooklog", "hooklog").unwrap();
    let policy = find(&docs, "NetworkPolicy");
    let deployment = find(&docs, "Deployment");
    assert_eq!(
        policy["spec"]["podSelector"]["matchLabels"],
        deployment["spec"]["selector"]["matchLabels"]
    );
    let ingress = &policy["spec"]["ingress"];
    assert_eq!(ingress.as_array().unwrap().len(), 1, "{policy:#}");
    assert_eq!(
        ingress[0]["from"],
        json!(cidrs.map(|c| json!({"ipBlock": {"cidr": c}})))
    );
    assert_eq!(
        ingress[0]["ports"],
        json!([{"protocol": "TCP", "port": webhook_container(&docs)["ports"][0]["containerPort"]}])
    );
    strictly.keep("networkpolicy", policy);
    assert!(
        render(&json!({}), "hooklog", "hooklog")
            .unwrap()
            .iter()
            .all(|d| d["kind"] != "NetworkPolicy")
    );
    let err = render(
        &json!({"networkPolicy": {"enabled": true}}),
        "hooklog",
        "hooklog",
    )
    .unwrap_err();
    assert!(err.contains("networkPolicy.apiServerCIDRs"), "{err}");

    // The most replicas whose CAs, with a rollout's surge (maxSurge 25 %, rounded up), fit.
    let max = max_bundle();
    let fits = |r: i64| r + (r + 3) / 4 <= max;
    let most = (1..=max).rev().find(|r| fits(*r)).unwrap();
    render(&json!({"replicas": most}), "hooklog", "hooklog").unwrap();
    let err = render(&json!({"replicas": most + 1}), "hooklog", "hooklog").unwrap_err();
    assert!(
        err.contains(&format!("replicas {}", most + 1)) && err.contains(&format!("holds {max}")),
        "{err}"
    );
    render(
        &json!({"replicas": most + 1, "tls": {"mode": "certManager"}}),
        "hooklog",
        "hooklog",
    )
    .unwrap();
    strictly.validate();
}

/// Issue 37: `events.enabled` makes the webhook inject `run --events` (HOOKLOG_INJECT_EVENTS)
/// and renders one ClusterRole with create and patch on events.k8s.io events, nothing more,
/// bound to no one; with the RoleBinding docs/webhook.md shows, `check` finds the grant for an
/// injected pod's service account, and warns without it. Off by default: neither.
#[test]
fn events_enabled_renders_the_flag_and_the_least_cluster_role_that_the_docs_binding_grants() {
    if !helm_available() {
        return;
    }
    let off = render(&json!({}), "hooklog", "hooklog").unwrap();
    assert!(
        !env_of(&off, "hooklog")
            .iter()
            .any(|(k, _)| k == "HOOKLOG_INJECT_EVENTS")
    );
    assert!(
        !off.iter()
            .any(|d| d["metadata"]["name"] == "hooklog-events")
    );
    let docs = render(&json!({"events": {"enabled": true}}), "hooklog", "hooklog").unwrap();
    assert!(
        env_of(&docs, "hooklog").contains(&("HOOKLOG_INJECT_EVENTS".into(), "true".into())),
        "{:?}",
        env_of(&docs, "hooklog")
    );
    let role = docs
        .iter()
        .find(|d| d["kind"] == "ClusterRole" && d["metadata"]["name"] == "hooklog-events")
        .expect("the events ClusterRole");
    assert_eq!(
        role["rules"],
        json!([{"apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch"]}])
    );
    assert!(
        !docs.iter().any(
            |d| d["kind"].as_str().is_some_and(|k| k.ends_with("Binding"))
                && d["roleRef"]["name"] == "hooklog-events"
        ),
        "the chart binds it to no one"
    );
    // The docs' RoleBinding, as shown, and a pod injected with --events in its namespace.
    let text = std::fs::read_to_string(root().join("docs/webhook.md")).unwrap();
    let at = text
        .find("kind: RoleBinding")
        .expect("the docs' RoleBinding");
    let start = text[..at].rfind("```yaml\n").unwrap() + "```yaml\n".len();
    let end = start + text[start..].find("```").unwrap();
    let binding = &text[start..end];
    let dir = tempfile::tempdir().unwrap();
    let pod = "apiVersion: v1\nkind: Pod\nmetadata: {name: web, namespace: shop}\nspec:\n  containers:\n    - name: web\n      image: nginx:1.25\n      lifecycle: {preStop: {exec: {command: [sh, -c, \"sleep 1\"]}}}\n";
    let injected = crate::util::manifests::run(
        &[
            "inject",
            "--events",
            "--image",
            "registry.example.com/hooklog:0.1.0",
            "-",
        ],
        Some(pod),
    );
    assert!(
        injected.status.success(),
        "{}",
        crate::util::text(&injected.stderr)
    );
    let role_yaml = serde_json::to_string(role).unwrap();
    let check = |with_binding: bool| {
        let mut all = format!(
            "{}\n---\n{role_yaml}\n",
            String::from_utf8_lossy(&injected.stdout)
        );
        if with_binding {
            all.push_str(&format!("---\n{binding}"));
        }
        !rbac_unknown_findings(dir.path(), &all, &["--offline"]).is_empty()
    };
    assert!(check(false), "without the binding, check warns");
    assert!(!check(true), "with the docs' binding, the grant is found");
}

/// Every sidecar setting the chart has, set (issue 41).
fn sidecar_settings_values() -> Value {
    json!({"sidecar": {
        "output": "stdout,cloudwatch",
        "cloudwatch": {"logGroup": "/eks/shop/hooklog", "logStream": "{namespace_name}/{pod_name}/{pod_id}"},
        "emf": {"enabled": true, "namespace": "Shop/Hooks"},
        "resources": {"requests": {"cpu": "50m", "memory": "32Mi"}, "limits": {"cpu": 1, "memory": "128Mi"}},
        "env": {"AWS_REGION": "eu-west-1", "HTTPS_PROXY": "http://proxy:3128"},
    }, "events": {"enabled": true}})
}

/// Issue 41's "done when", for the chart: its values reach the webhook (as `HOOKLOG_SIDECAR_*`
/// variables the real binary reads) and turn on CloudWatch, EMF, resources and env for every pod
/// it injects: the same sidecar `hooklog inject` writes for a pod with the same settings as
/// annotations; and with none, the webhook's environment is k8s/webhook/'s (the test above).
#[test]
fn the_charts_sidecar_values_configure_every_injected_pod_as_annotations_do() {
    if !helm_available() {
        return;
    }
    let mut values = sidecar_settings_values();
    values["tls"] = json!({"mode": "secret", "secretName": "tls", "caBundle": "eA=="});
    values["sidecar"]["mode"] = json!("native");
    let docs = render(&values, "hooklog", "hooklog").unwrap();
    let env = env_of(&docs, "hooklog");
    for var in [
        "HOOKLOG_SIDECAR_OUTPUT",
        "HOOKLOG_SIDECAR_LOG_GROUP",
        "HOOKLOG_SIDECAR_LOG_STREAM",
        "HOOKLOG_SIDECAR_EMF",
        "HOOKLOG_SIDECAR_EMF_NAMESPACE",
        "HOOKLOG_SIDECAR_CPU_REQUEST",
        "HOOKLOG_SIDECAR_CPU_LIMIT",
        "HOOKLOG_SIDECAR_MEMORY_REQUEST",
        "HOOKLOG_SIDECAR_MEMORY_LIMIT",
        "HOOKLOG_SIDECAR_ENV",
        "HOOKLOG_INJECT_EVENTS",
    ] {
        assert!(env.iter().any(|(k, _)| k == var), "{var} not set: {env:?}");
    }
    let (pod, got) = ChartWebhook::serving(&docs).opted_in_pod();
    let by_webhook = native_sidecar(&got);
    let args: Vec<&str> = by_webhook["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    for want in [
        "--output",
        "stdout,cloudwatch",
        "--log-group=/eks/shop/hooklog",
        "--emf",
        "--emf-namespace=Shop/Hooks",
        "--events",
    ] {
        assert!(args.contains(&want), "{want}: {args:?}");
    }
    assert_eq!(
        by_webhook["resources"],
        json!({"requests": {"cpu": "50m", "memory": "32Mi"}, "limits": {"cpu": "1", "memory": "128Mi"}})
    );
    // inject, told the same by the pod's annotations, writes the same sidecar.
    let annotations = [
        ("hooklog.dev/output", "stdout,cloudwatch"),
        ("hooklog.dev/log-group", "/eks/shop/hooklog"),
        (
            "hooklog.dev/log-stream",
            "{namespace_name}/{pod_name}/{pod_id}",
        ),
        ("hooklog.dev/emf", "true"),
        ("hooklog.dev/emf-namespace", "Shop/Hooks"),
        ("hooklog.dev/events", "true"),
        ("hooklog.dev/cpu-request", "50m"),
        ("hooklog.dev/cpu-limit", "1"),
        ("hooklog.dev/memory-request", "32Mi"),
        ("hooklog.dev/memory-limit", "128Mi"),
        (
            "hooklog.dev/env",
            "AWS_REGION=eu-west-1,HTTPS_PROXY=http://proxy:3128",
        ),
    ];
    let sidecar_image = env_of(&docs, "hooklog")
        .into_iter()
        .find(|(k, _)| k == "HOOKLOG_INJECT_IMAGE")
        .unwrap()
        .1;
    let mut annotated = pod.clone();
    for (k, v) in annotations {
        annotated["metadata"]["annotations"][k] = json!(v);
    }
    annotated["kind"] = json!("Pod");
    annotated["apiVersion"] = json!("v1");
    let out = crate::util::manifests::run(
        &[
            "inject",
            "--image",
            &sidecar_image,
            "--sidecar",
            "native",
            "-",
        ],
        Some(&serde_json::to_string(&annotated).unwrap()),
    );
    assert!(out.status.success(), "{}", crate::util::text(&out.stderr));
    let injected: Value = hooklog::manifest::load::parse("p.yaml", crate::util::text(&out.stdout))
        .unwrap()
        .documents[0]
        .value
        .clone();
    let by_inject = native_sidecar(&injected);
    // The env's order: the chart renders a map, sorted by name; so does the annotation here.
    assert_eq!(by_webhook, by_inject);
}
