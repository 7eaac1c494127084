//! The API server tier (scripts/apiserver.sh) as the tests reach it: its address and token from
//! the environment, a test's own namespaces and MutatingWebhookConfiguration, and a pod as a user
//! writes it.

use std::time::Duration;

use base64::Engine;
use serde_json::{Value, json};

use super::webhook::{Certs, Webhook, injected, request};
use super::{in_ci, wait_until};

/// How long the API server may take to start calling a webhook configuration just created (its
/// informer's resync; under a second idle).
pub const CONFIG_ACTIVE: Duration = Duration::from_secs(30);

/// The API server the tier started.
pub struct Api {
    pub port: u16,
    pub token: String,
    pub ca_pem: String,
    pub ca_file: String,
}

impl Api {
    /// The tier's API server, or `None` (with a message) when it is not running; on CI its
    /// absence fails the test.
    pub fn from_env() -> Option<Api> {
        let Ok(url) = std::env::var("HOOKLOG_TEST_APISERVER") else {
            assert!(
                !in_ci(),
                "HOOKLOG_TEST_APISERVER is not set: scripts/test.sh starts the API server tier (scripts/apiserver.sh start)"
            );
            eprintln!(
                "skipped: no API server tier (bash scripts/apiserver.sh start STATE; then export STATE/env)"
            );
            return None;
        };
        let port = url
            .rsplit(':')
            .next()
            .and_then(|p| p.parse().ok())
            .expect("a port in HOOKLOG_TEST_APISERVER");
        let ca_file =
            std::env::var("HOOKLOG_TEST_APISERVER_CA").expect("HOOKLOG_TEST_APISERVER_CA");
        Some(Api {
            port,
            token: std::env::var("HOOKLOG_TEST_APISERVER_TOKEN")
                .expect("HOOKLOG_TEST_APISERVER_TOKEN"),
            ca_pem: std::fs::read_to_string(&ca_file).expect("the API server's CA"),
            ca_file,
        })
    }

    /// One call: `(status, body as JSON)`.
    pub fn call(&self, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
        let auth = format!("Bearer {}", self.token);
        let bytes = body.map(|b| b.to_string().into_bytes()).unwrap_or_default();
        let (status, answer) = request(
            self.port,
            &self.ca_pem,
            method,
            path,
            &[("Authorization", &auth)],
            &bytes,
        )
        .unwrap_or_else(|e| panic!("{method} {path}: {e}"));
        let value = serde_json::from_slice(&answer)
            .unwrap_or_else(|_| json!(String::from_utf8_lossy(&answer)));
        (status, value)
    }

    pub fn ok(&self, method: &str, path: &str, body: Option<&Value>) -> Value {
        let (status, v) = self.call(method, path, body);
        assert!(
            (200..300).contains(&status),
            "{method} {path}: {status} {v:#}"
        );
        v
    }
}

/// A test's namespaces (`<name>-in`, labelled `hooklog.dev/inject=enabled`, and `<name>-out`) and
/// webhook configuration; removed on drop.
pub struct Tier<'a> {
    pub api: &'a Api,
    pub name: String,
    pub ns_in: String,
    pub ns_out: String,
}

impl<'a> Tier<'a> {
    pub fn new(api: &'a Api, name: &str) -> Tier<'a> {
        let name = format!("{name}-{}", std::process::id());
        let t = Tier {
            api,
            ns_in: format!("{name}-in"),
            ns_out: format!("{name}-out"),
            name,
        };
        for (ns, inject) in [(&t.ns_in, true), (&t.ns_out, false)] {
            let mut labels = json!({"hooklog-test": t.name});
            if inject {
                labels["hooklog.dev/inject"] = json!("enabled");
            }
            api.ok(
                "POST",
                "/api/v1/namespaces",
                Some(&json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "labels": labels}})),
            );
        }
        t
    }

    /// The configuration k8s/webhook/ ships, for this test's namespaces, pointing at 127.0.0.1.
    pub fn configuration(&self, port: u16, ca_pems: &[&str], failure_policy: &str) -> Value {
        let bundle = base64::engine::general_purpose::STANDARD.encode(ca_pems.concat());
        let hook = |name: &str, path: &str, inject: Value| {
            json!({
                "name": format!("{name}.{}.hooklog.dev", self.name),
                "admissionReviewVersions": ["v1"],
                "clientConfig": {"url": format!("https://127.0.0.1:{port}{path}"), "caBundle": bundle},
                "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"], "scope": "Namespaced"}],
                "namespaceSelector": {"matchLabels": {"hooklog-test": self.name}, "matchExpressions": [inject]},
                "failurePolicy": failure_policy,
                "sideEffects": "None",
                "timeoutSeconds": 10,
                "reinvocationPolicy": "IfNeeded",
            })
        };
        json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": self.name},
            "webhooks": [
                hook("namespace", "/mutate/namespace-enabled", json!({"key": "hooklog.dev/inject", "operator": "In", "values": ["enabled"]})),
                hook("pod", "/mutate", json!({"key": "hooklog.dev/inject", "operator": "NotIn", "values": ["enabled", "disabled"]})),
            ]
        })
    }

    /// Creates or replaces the webhook configuration.
    pub fn register(&self, config: &Value) {
        let path = format!(
            "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/{}",
            self.name
        );
        let (status, old) = self.api.call("GET", &path, None);
        if status == 200 {
            let mut config = config.clone();
            config["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"].clone();
            self.api.ok("PUT", &path, Some(&config));
        } else {
            self.api.ok(
                "POST",
                "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations",
                Some(config),
            );
        }
    }

    /// POSTs `pod` into `ns` (`?dryRun=All` when `dry`): `(status, answer)`.
    pub fn create(&self, ns: &str, pod: &Value, dry: bool) -> (u16, Value) {
        let q = if dry { "?dryRun=All" } else { "" };
        self.api.call(
            "POST",
            &format!("/api/v1/namespaces/{ns}/pods{q}"),
            Some(pod),
        )
    }

    /// Creates `pod(name)` in the opted-in namespace and checks it was stored injected; `what`
    /// says which admission failed.
    pub fn admit(&self, name: &str, what: &str) -> Value {
        let (status, stored) = self.create(&self.ns_in, &pod(name), false);
        assert_eq!(status, 201, "{what}: {stored:#}");
        assert!(has_hooklog(&stored), "{what}: {stored:#}");
        stored
    }

    /// `pod` as `hooklog inject ARGS` makes it, both as the API server defaults them: the pod where
    /// nobody injects (dry run, in the opted-out namespace), inject of that, and inject's output
    /// dry run in turn (the API server defaults what a webhook adds too). What the webhook's pod
    /// must be stored as.
    pub fn as_inject_makes(&self, pod: &Value, args: &[&str]) -> Value {
        let (status, plain) = self.create(&self.ns_out, pod, true);
        assert_eq!(status, 201, "{plain:#}");
        assert!(!has_hooklog(&plain), "{plain:#}");
        let mut by_inject = injected(&plain, args);
        // What the API server set on the dry run, which it refuses to be given.
        for k in [
            "uid",
            "creationTimestamp",
            "resourceVersion",
            "managedFields",
            "selfLink",
        ] {
            by_inject["metadata"].as_object_mut().unwrap().remove(k);
        }
        let (status, want) = self.create(&self.ns_out, &by_inject, true);
        assert_eq!(status, 201, "{want:#}");
        want
    }

    /// Waits until a dry-run pod in the opted-in namespace comes back injected: the API server
    /// calls the configuration now.
    pub fn wait_active(&self) {
        let probe = pod("probe");
        let active = wait_until(CONFIG_ACTIVE, || {
            let (status, v) = self.create(&self.ns_in, &probe, true);
            status == 201 && has_hooklog(&v)
        });
        assert!(active, "the API server never called the webhook");
    }
}

impl Drop for Tier<'_> {
    fn drop(&mut self) {
        // Best effort: a failed test leaves its namespaces, which the next run's names avoid.
        let _ = self.api.call(
            "DELETE",
            &format!(
                "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/{}",
                self.name
            ),
            None,
        );
        for ns in [&self.ns_in, &self.ns_out] {
            let _ = self
                .api
                .call("DELETE", &format!("/api/v1/namespaces/{ns}"), None);
        }
    }
}

/// A tier named after `name` with `webhook` (made with a CA of its own, in a folder of its own)
/// registered for it under `failure_policy`, and called by the API server already: the folder,
/// the certificates, the webhook and the tier, in the order a test drops them last to first.
pub fn registered<'a>(
    api: &'a Api,
    name: &str,
    failure_policy: &str,
    webhook: impl FnOnce(&Certs, &std::path::Path) -> Webhook,
) -> (tempfile::TempDir, Certs, Webhook, Tier<'a>) {
    let dir = tempfile::tempdir().unwrap();
    let certs = Certs::make(dir.path(), "hooklog test CA");
    let w = webhook(&certs, dir.path());
    let t = Tier::new(api, name);
    t.register(&t.configuration(w.port, &[&certs.ca_pem], failure_policy));
    t.wait_active();
    (dir, certs, w, t)
}

/// `hooklog webhook --sidecar classic` with `certs`, for [`registered`].
pub fn classic_webhook(certs: &Certs, _dir: &std::path::Path) -> Webhook {
    Webhook::start(certs, &["--sidecar", "classic"])
}

/// A pod as a user writes it, with a preStop for hooklog to wire.
pub fn pod(name: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "web"}},
        "spec": {
            "terminationGracePeriodSeconds": 40,
            "containers": [{
                "name": "app",
                "image": "nginx:1.25",
                "lifecycle": {"preStop": {"exec": {"command": ["sh", "-c", "sleep 5; nginx -s quit"]}}}
            }]
        }
    })
}

pub fn has_hooklog(pod: &Value) -> bool {
    let names = |k: &str| -> Vec<String> {
        pod["spec"][k]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| c["name"].as_str().map(String::from))
            .collect()
    };
    names("containers").contains(&"hooklog".to_string())
        || names("initContainers").contains(&"hooklog".to_string())
}
