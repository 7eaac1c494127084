//! (below both) Test-only helpers for the properties: [`Reach`] counts how many of a property's generated cases
//! reached its assertion (a property that filters almost every case away, with an `if let` that
//! rarely matches or a `prop_assume!`, passes while checking nothing: [`Reach::check`] fails it below
//! a stated share and prints the count), and [`pod_spec`] generates pod specs in the shapes real
//! manifests have.

use std::sync::atomic::{AtomicU64, Ordering};

/// Counts a property's cases and those that reached its assertion.
pub(crate) struct Reach {
    /// The property's name, for the report.
    name: &'static str,
    /// Cases generated and run.
    cases: AtomicU64,
    /// Cases that reached the assertion the property is named for.
    reached: AtomicU64,
}

impl Reach {
    /// A counter for the property `name`.
    pub(crate) const fn new(name: &'static str) -> Reach {
        Reach {
            name,
            cases: AtomicU64::new(0),
            reached: AtomicU64::new(0),
        }
    }

    /// One case ran.
    pub(crate) fn case(&self) {
        self.cases.fetch_add(1, Ordering::Relaxed);
    }

    /// The case reached its assertion.
    pub(crate) fn reached(&self) {
        self.reached.fetch_add(1, Ordering::Relaxed);
    }

    /// Prints `reached/cases` and panics when fewer than `min_share` (0 to 1) of the cases
    /// reached their assertion.
    pub(crate) fn check(&self, min_share: f64) {
        let cases = self.cases.load(Ordering::Relaxed);
        let reached = self.reached.load(Ordering::Relaxed);
        let share = reached as f64 / cases.max(1) as f64;
        eprintln!(
            "property {}: {reached} of {cases} cases reached the assertion ({:.0}%, at least {:.0}% needed)",
            self.name,
            share * 100.0,
            min_share * 100.0
        );
        assert!(
            cases > 0 && share >= min_share,
            "property {}: only {reached} of {cases} cases reached the assertion, under {:.0}%",
            self.name,
            min_share * 100.0
        );
    }
}

/// The cases a property runs: `HOOKLOG_PROPTEST_CASES` when set (a long run: tests/yaml.rs reads
/// the same variable), else the property's own `default`.
pub(crate) fn cases(default: u32) -> u32 {
    std::env::var("HOOKLOG_PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Runs `test` on `cases` values of `strategy` (or `HOOKLOG_PROPTEST_CASES`, see [`cases`];
/// proptest's runner, with shrinking; what fails is kept in `proptest-regressions/` beside
/// `source`, the caller's `file!()`), counts the cases that call [`Reach::reached`], and fails
/// below `min_share`.
pub(crate) fn property<S: proptest::strategy::Strategy>(
    source: &'static str,
    name: &'static str,
    cases: u32,
    min_share: f64,
    strategy: S,
    test: impl Fn(S::Value, &Reach) -> proptest::test_runner::TestCaseResult,
) {
    let reach = Reach::new(name);
    let config = proptest::test_runner::Config {
        cases: self::cases(cases),
        source_file: Some(source),
        ..Default::default()
    };
    let mut runner = proptest::test_runner::TestRunner::new(config);
    let result = runner.run(&strategy, |v| {
        reach.case();
        test(v, &reach)
    });
    if let Err(e) = result {
        panic!("property {name}: {e}");
    }
    reach.check(min_share);
}

#[cfg(feature = "control")] // The manifests' generators: the control plane's properties.
/// A container as real manifests write one: a name from `names`, an image, maybe a command, env,
/// ports, probes, mounts of the pod's volumes, and a lifecycle of every kind (none, an exec
/// preStop of the shapes hooks have, a sleep, an httpGet, a postStart beside it).
fn container(name: &'static str) -> impl proptest::strategy::Strategy<Value = serde_json::Value> {
    use proptest::prelude::*;
    use serde_json::json;
    let image = prop::sample::select(vec![
        "nginx:1.27",
        "envoyproxy/envoy-distroless:v1.31.0",
        "gcr.io/distroless/static:nonroot",
        "registry.example.com/team/api@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        "busybox",
        "docker.io/library/python:3.12-slim",
    ]);
    let exec = prop::sample::select(vec![
        json!(["sleep", "15"]),
        json!([
            "/bin/sh",
            "-c",
            "sleep 5; nginx -s quit; while pgrep -x nginx; do sleep 1; done"
        ]),
        json!(["sh", "-c", "echo draining > /proc/1/fd/1; sleep 2"]),
        json!(["/usr/local/bin/envoy-drain", "--timeout=20s"]),
        json!(["/hooklog-bin/hooklog", "sleep", "10"]),
        json!([
            "curl",
            "-fsS",
            "-X",
            "POST",
            "http://127.0.0.1:15000/drain_listeners?graceful"
        ]),
        json!(["python", "-c", "import time; time.sleep(3)"]),
    ]);
    let lifecycle = prop_oneof![
        2 => Just(None),
        4 => exec.clone().prop_map(|c| Some(json!({"preStop": {"exec": {"command": c}}}))),
        1 => prop::sample::select(vec![0u64, 1, 5, 15, 30]).prop_map(|s| Some(json!({"preStop": {"sleep": {"seconds": s}}}))),
        1 => Just(Some(json!({"preStop": {"httpGet": {"path": "/drain", "port": 8080}}}))),
        1 => (exec.clone(), exec).prop_map(|(a, b)| Some(json!({"postStart": {"exec": {"command": a}}, "preStop": {"exec": {"command": b}}}))),
    ];
    (
        image,
        lifecycle,
        prop::option::of(prop::sample::select(vec![
            json!({"command": ["/app/server"], "args": ["--port=8080", "--log-level=info"]}),
            json!({"args": ["serve", "--config", "/etc/app/config.yaml"]}),
        ])),
        any::<bool>(),
        any::<bool>(),
        prop::option::of(prop::sample::subsequence(vec!["data", "config"], 1..=2)),
    )
        .prop_map(move |(image, lifecycle, cmd, env, extras, mounts)| {
            let mut c = json!({"name": name, "image": image});
            if let Some(l) = lifecycle {
                c["lifecycle"] = l;
            }
            if let Some(serde_json::Value::Object(m)) = cmd {
                for (k, v) in m {
                    c[k] = v;
                }
            }
            if env {
                c["env"] = json!([
                    {"name": "LOG_FORMAT", "value": "json"},
                    {"name": "MY_POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                ]);
            }
            if extras {
                c["ports"] = json!([{"containerPort": 8080, "name": "http"}]);
                c["readinessProbe"] =
                    json!({"httpGet": {"path": "/ready", "port": "http"}, "periodSeconds": 5});
                c["resources"] = json!({"requests": {"cpu": "100m", "memory": "64Mi"}});
                c["securityContext"] =
                    json!({"runAsNonRoot": true, "readOnlyRootFilesystem": true});
            }
            if let Some(ms) = mounts {
                let at = |v: &str| format!("/var/lib/{v}");
                c["volumeMounts"] = serde_json::Value::Array(
                    ms.iter()
                        .map(|v| json!({"name": v, "mountPath": at(v)}))
                        .collect(),
                );
            }
            c
        })
}

#[cfg(feature = "control")] // The manifests' generators: the control plane's properties.
/// A pod spec in the shapes real manifests have: one to four containers of distinct names, maybe
/// an init container (a migration, or a native sidecar with `restartPolicy: Always`), the
/// volumes the containers mount, a grace period from none to an hour, a restart policy, and the
/// fields around them.
pub(crate) fn pod_spec() -> impl proptest::strategy::Strategy<Value = serde_json::Value> {
    use proptest::prelude::*;
    use serde_json::json;
    let names = prop::sample::subsequence(vec!["web", "envoy", "api", "worker"], 1..=4);
    (
        names.prop_flat_map(|ns| ns.into_iter().map(container).collect::<Vec<_>>()),
        prop_oneof![
            3 => Just(None),
            1 => Just(Some(json!({"name": "migrate", "image": "registry.example.com/migrate:2", "command": ["/migrate", "up"]}))),
            1 => container("istio-proxy").prop_map(|mut c| {
                c["restartPolicy"] = json!("Always");
                Some(c)
            }),
        ],
        prop::option::of(prop::sample::select(vec![0u64, 1, 10, 30, 45, 60, 120, 3600])),
        prop::option::of(prop::sample::select(vec!["Always", "OnFailure", "Never"])),
        any::<bool>(),
    )
        .prop_map(|(containers, init, grace, restart, extras)| {
            let mut spec = json!({"containers": containers});
            if let Some(i) = init {
                spec["initContainers"] = json!([i]);
            }
            // Every volume a container mounts, and one nobody does.
            spec["volumes"] = json!([
                {"name": "data", "emptyDir": {}},
                {"name": "config", "configMap": {"name": "app-config"}},
                {"name": "cache", "emptyDir": {"medium": "Memory"}},
            ]);
            if let Some(g) = grace {
                spec["terminationGracePeriodSeconds"] = json!(g);
            }
            if let Some(r) = restart {
                spec["restartPolicy"] = json!(r);
            }
            if extras {
                spec["serviceAccountName"] = json!("app");
                spec["nodeSelector"] = json!({"kubernetes.io/arch": "amd64"});
                spec["securityContext"] = json!({"fsGroup": 2000});
            }
            spec
        })
}

#[cfg(feature = "control")] // The manifests' generators: the control plane's properties.
/// The metadata a pod template has: labels, and annotations whose keys need RFC 6901's
/// escapes in a JSONPatch (`/`, `~`).
pub(crate) fn metadata() -> impl proptest::strategy::Strategy<Value = serde_json::Value> {
    use proptest::prelude::*;
    use serde_json::json;
    prop::option::of(prop::sample::subsequence(
        vec![
            ("example.com/owner", "team-a"),
            ("prometheus.io/scrape", "true"),
            ("a~b/c~1d", "tilde"),
            ("hooklog.dev/inject", "enabled"),
        ],
        0..=4,
    ))
    .prop_map(|ann| {
        let mut m = json!({"labels": {"app": "shop", "app.kubernetes.io/part-of": "shop"}});
        if let Some(a) = ann {
            m["annotations"] = serde_json::Value::Object(
                a.into_iter()
                    .map(|(k, v)| (k.to_string(), json!(v)))
                    .collect(),
            );
        }
        m
    })
}

#[cfg(feature = "control")] // The manifests' generators: the control plane's properties.
/// A document holding `spec` as its pod template: a Pod, Deployment, StatefulSet, DaemonSet,
/// Job or CronJob.
pub(crate) fn workload() -> impl proptest::strategy::Strategy<Value = serde_json::Value> {
    use proptest::prelude::*;
    use serde_json::json;
    (
        prop::sample::select(vec!["Pod", "Deployment", "StatefulSet", "DaemonSet", "Job", "CronJob"]),
        metadata(),
        pod_spec(),
    )
        .prop_map(|(kind, meta, spec)| {
            let api = match kind {
                "Pod" => "v1",
                "Job" | "CronJob" => "batch/v1",
                _ => "apps/v1",
            };
            let template = json!({"metadata": meta, "spec": spec});
            let body = match kind {
                "Pod" => return json!({"apiVersion": api, "kind": kind, "metadata": {"name": "shop", "namespace": "shop"}, "spec": template["spec"]}),
                "CronJob" => json!({"schedule": "*/5 * * * *", "jobTemplate": {"spec": {"template": template}}}),
                "Job" => json!({"backoffLimit": 2, "template": template}),
                _ => json!({"replicas": 2, "selector": {"matchLabels": {"app": "shop"}}, "template": template}),
            };
            json!({"apiVersion": api, "kind": kind, "metadata": {"name": "shop", "namespace": "shop"}, "spec": body})
        })
}
