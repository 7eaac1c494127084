//! The injected sidecar's settings the tests turn on (issue 41): as annotations, the Deployment
//! that carries them, and the sidecar inject writes from them (tests/sidecar_settings.rs,
//! tests/cloudwatch.rs).

use serde_json::{Value, json};

/// The sidecar image inject is given.
pub const IMAGE: &str = "registry.example.com/hooklog-sidecar:0.1.0";

/// The settings the tests turn on, as annotations.
pub const ANNOTATIONS: [(&str, &str); 7] = [
    ("hooklog.dev/output", "stdout,cloudwatch"),
    ("hooklog.dev/log-group", "/eks/shop/hooklog"),
    ("hooklog.dev/emf", "true"),
    ("hooklog.dev/cpu-request", "50m"),
    ("hooklog.dev/memory-request", "32Mi"),
    ("hooklog.dev/memory-limit", "128Mi"),
    ("hooklog.dev/env", "AWS_REGION=us-east-1"),
];

/// A Deployment whose template has `annotations`, with a hook for hooklog to report.
pub fn deployment(annotations: &[(&str, &str)]) -> String {
    let annotations: serde_json::Map<String, Value> = annotations
        .iter()
        .map(|(k, v)| (k.to_string(), json!(v)))
        .collect();
    let doc = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "api-server", "namespace": "shop"},
        "spec": {"selector": {"matchLabels": {"app": "api"}}, "template": {
            "metadata": {"labels": {"app": "api"}, "annotations": annotations},
            "spec": {"containers": [{"name": "app", "image": "nginx:1.27",
                "lifecycle": {"preStop": {"exec": {"command": ["sleep", "5"]}}}}]}}}});
    serde_json::to_string_pretty(&doc).expect("JSON")
}

/// The sidecar inject wrote into `out`'s only pod template.
pub fn sidecar(out: &str) -> Value {
    let doc: Value = serde_json::from_value(
        hooklog::manifest::load::parse("out.yaml", out.to_string())
            .expect("inject's output reads")
            .documents[0]
            .value
            .clone(),
    )
    .expect("a document");
    let spec = &doc["spec"]["template"]["spec"];
    ["initContainers", "containers"]
        .iter()
        .flat_map(|k| spec[*k].as_array().cloned().unwrap_or_default())
        .find(|c| c["name"] == "hooklog")
        .expect("inject added the sidecar")
}
