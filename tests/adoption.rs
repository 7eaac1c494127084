//! Which pods get hooklog, and in which form, as `inject`, `hooklog webhook` and `check` decide
//! it (issue 24, points 5 to 7): pods that run to completion, Windows pods, the opt-out
//! annotation, a reinvoked webhook; and what `check` says about files, folders and sleeps.

use std::time::Duration;

use serde_json::{Value, json};

use crate::util::http::{read_request, respond_json};
use crate::util::manifests::{run, write_chart};
use crate::util::text;
use crate::util::wait_until;
use crate::util::webhook::{Certs, Webhook, injected, patched, pod_review, web_pod};

const IMAGE: &str = "registry.example.com/hooklog:0.1.0";

fn values(yaml: &str) -> Vec<Value> {
    hooklog::manifest::load::parse("out", yaml.to_string())
        .unwrap_or_else(|e| panic!("unparseable output ({e}):\n{yaml}"))
        .documents
        .into_iter()
        .map(|d| d.value)
        .collect()
}

/// `inject ARGS -` on `input`: (stdout's documents, stderr).
fn inject(input: &str, args: &[&str]) -> (Vec<Value>, String) {
    let mut all = vec!["inject", "--image", IMAGE];
    all.extend_from_slice(args);
    all.push("-");
    let out = run(&all, Some(input));
    assert!(out.status.success(), "{}", text(&out.stderr));
    (values(&text(&out.stdout)), text(&out.stderr))
}

/// `check --format json ARGS`: (exit code, rules found, stderr).
fn check(args: &[&str], stdin: Option<&str>) -> (i32, Vec<(String, String)>, String) {
    let mut all = vec!["check", "--format", "json"];
    all.extend_from_slice(args);
    let out = run(&all, stdin);
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    let rules = doc["findings"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|f| {
            (
                f["rule"].as_str().unwrap_or_default().to_string(),
                f["fix"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    (
        out.status.code().expect("an exit code"),
        rules,
        text(&out.stderr),
    )
}

fn has_hooklog(spec: &Value) -> bool {
    ["initContainers", "containers"].iter().any(|l| {
        spec[l]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["name"] == "hooklog")
    })
}

fn bare_pod(restart: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: hooks-j\nspec:\n  restartPolicy: {restart}\n  containers:\n    - name: app\n      image: busybox\n      command: [sh, -c, 'echo done']\n      lifecycle:\n        preStop:\n          exec:\n            command: [sh, -c, 'echo bye']\n"
    )
}

/// `--sidecar classic` on a bare Pod with restartPolicy Never added `hooklog run` as a regular
/// container, and the pod never finished (seen under a kubelet v1.32); check said nothing.
#[test]
fn regression_a_classic_sidecar_kept_a_bare_run_to_completion_pod_running() {
    for restart in ["Never", "OnFailure"] {
        let input = bare_pod(restart);
        // Classic by the cluster's version (asked for explicitly on a newer one, it is an error
        // naming the flag: tests/day_one.rs).
        let (docs, err) = inject(
            &input,
            &["--sidecar", "classic", "--kubernetes-version", "1.28"],
        );
        assert_eq!(docs, values(&input), "{restart}: changed\n{err}");
        assert!(
            err.contains("pod \"hooks-j\" not injected, unchanged") && err.contains("never ends"),
            "{restart}: {err}"
        );
        // Native (the default for 1.29+): the sidecar ends with the pod.
        let (docs, err) = inject(&input, &["--kubernetes-version", "1.32"]);
        let spec = &docs[0]["spec"];
        assert!(
            spec["initContainers"][1]["name"] == "hooklog"
                && spec["initContainers"][1]["restartPolicy"] == "Always",
            "{restart}: {err}\n{spec:#}"
        );
        // check: a classic hooklog in such a pod is an error.
        let classic = input.replace(
            "  containers:\n",
            "  containers:\n    - name: hooklog\n      image: registry.example.com/hooklog:0.1.0\n      args: [run, --file, /hooklog/prestop.log, --socket, /hooklog/hooklog.sock]\n",
        );
        let (code, rules, _) = check(&["-"], Some(&classic));
        assert_eq!(code, 1, "{restart}: {rules:?}");
        assert!(
            rules.iter().any(|(r, _)| r == "job-container-never-ends"),
            "{restart}: {rules:?}"
        );
    }
    // A batch kind of a CRD whose template ends (OpenKruise BroadcastJob).
    let crd = "apiVersion: apps.kruise.io/v1alpha1\nkind: BroadcastJob\nmetadata:\n  name: warm\nspec:\n  template:\n    spec:\n      containers:\n        - name: app\n          image: busybox\n";
    let (docs, err) = inject(crd, &["--kubernetes-version", "1.28"]);
    assert_eq!(docs, values(crd), "{err}");
    assert!(err.contains("never ends"), "{err}");
}

const WINDOWS_SPECS: [&str; 4] = [
    "  os:\n    name: windows\n",
    "  nodeSelector:\n    kubernetes.io/os: windows\n",
    "  affinity:\n    nodeAffinity:\n      requiredDuringSchedulingIgnoredDuringExecution:\n        nodeSelectorTerms:\n          - matchExpressions:\n              - {key: kubernetes.io/os, operator: In, values: [windows]}\n",
    "  affinity:\n    nodeAffinity:\n      requiredDuringSchedulingIgnoredDuringExecution:\n        nodeSelectorTerms:\n          - matchExpressions:\n              - {key: kubernetes.io/os, operator: NotIn, values: [linux]}\n",
];

fn windows_pod(extra: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: iis\nspec:\n{extra}  containers:\n    - name: app\n      image: mcr.microsoft.com/windows/servercore/iis\n      lifecycle:\n        preStop:\n          exec:\n            command: [powershell, -c, 'Stop-Service w3svc']\n"
    )
}

/// A Windows pod was injected with hooklog's Linux securityContext, and the API server refused it
/// with 422 (`seccompProfile: Forbidden: cannot be set for a windows pod`); check said "fix:
/// hooklog inject".
#[test]
fn regression_windows_pods_were_injected_and_refused() {
    for extra in WINDOWS_SPECS {
        let input = windows_pod(extra);
        let (docs, err) = inject(&input, &[]);
        assert_eq!(docs, values(&input), "{extra}: changed\n{err}");
        assert!(
            err.contains("not injected, unchanged") && err.contains("Windows"),
            "{extra}: {err}"
        );
        let (_, rules, _) = check(&["-"], Some(&input));
        assert!(
            rules.iter().all(|(_, fix)| !fix.contains("hooklog inject")),
            "{extra}: {rules:?}"
        );
    }
    // A Linux pod that names its OS is injected as any.
    let linux = windows_pod("  nodeSelector:\n    kubernetes.io/os: linux\n");
    let (docs, _) = inject(&linux, &[]);
    assert!(has_hooklog(&docs[0]["spec"]));
}

/// `inject` ignored `hooklog.dev/inject: disabled`, which the webhook honours.
#[test]
fn regression_inject_ignored_the_opt_out_annotation() {
    let deployment = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  template:\n    metadata:\n      annotations:\n        hooklog.dev/inject: disabled\n    spec:\n      containers:\n        - name: app\n          image: nginx\n";
    let (docs, err) = inject(deployment, &[]);
    assert_eq!(docs, values(deployment), "{err}");
    assert!(
        err.contains("deployment \"web\" not injected, unchanged") && err.contains("disabled"),
        "{err}"
    );
    // On the Deployment's own metadata its pods do not see it: injected, with a note.
    let on_object = deployment
        .replace(
            "    metadata:\n      annotations:\n        hooklog.dev/inject: disabled\n",
            "",
        )
        .replace(
            "  name: web\n",
            "  name: web\n  annotations:\n    hooklog.dev/inject: disabled\n",
        );
    let (docs, err) = inject(&on_object, &[]);
    assert!(has_hooklog(&docs[0]["spec"]["template"]["spec"]), "{err}");
    assert!(err.contains("spec.template.metadata.annotations"), "{err}");
}

/// `hooklog webhook --kubernetes-version 1.32` serving with a CA of its own, asked as the API
/// server asks it.
struct Asked {
    w: Webhook,
    certs: Certs,
    _dir: tempfile::TempDir,
}

impl Asked {
    fn start() -> Asked {
        let dir = tempfile::tempdir().unwrap();
        let certs = Certs::make(dir.path(), "hooklog test CA");
        Asked {
            w: Webhook::start(&certs, &["--kubernetes-version", "1.32"]),
            certs,
            _dir: dir,
        }
    }

    /// The AdmissionReview the webhook answers at `path` for review `uid` of `pod` in `shop`.
    fn review(&self, path: &str, uid: &str, pod: &Value) -> Value {
        self.w
            .review(&self.certs.ca_pem, path, &pod_review(uid, "shop", pod))
    }
}

/// The webhook injected Windows pods, and the API server then refused them with 422.
#[test]
fn regression_the_webhook_injected_windows_pods() {
    let webhook = Asked::start();
    for (i, extra) in [
        json!({"os": {"name": "windows"}}),
        json!({"nodeSelector": {"kubernetes.io/os": "windows"}}),
        json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "kubernetes.io/os", "operator": "In", "values": ["windows"]}]}]}}}}),
    ]
    .into_iter()
    .enumerate()
    {
        let mut pod = web_pod(json!({}));
        for (k, v) in extra.as_object().unwrap() {
            pod["spec"][k] = v.clone();
        }
        let answer = webhook.review("/mutate/namespace-enabled", &format!("w-{i}"), &pod);
        assert!(answer["response"].get("patch").is_none(), "{extra}: {answer}");
        let ws = answer["response"]["warnings"].to_string();
        assert!(ws.contains("InjectionSkipped") && ws.contains("Windows"), "{ws}");
    }
}

/// Reinvoked after a later webhook added a container with a preStop (reinvocationPolicy
/// IfNeeded), the webhook logged "InjectionSkipped ... already injected" and left the new
/// container's hook raw, unmounted and out of `--peers`.
#[test]
fn regression_a_reinvoked_webhook_did_not_wire_a_later_webhooks_container() {
    let webhook = Asked::start();
    let mut pod = injected(&web_pod(json!({})), &["--kubernetes-version", "1.32"]);
    pod["spec"]["containers"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "istio-proxy", "image": "istio/proxyv2:1.22.0", "lifecycle": {"preStop": {"exec": {"command": ["pilot-agent", "request", "POST", "drain"]}}}}));
    let answer = webhook.review("/mutate/namespace-enabled", "r-1", &pod);
    let got = patched(&pod, &answer);
    let want = injected(&pod, &["--kubernetes-version", "1.32"]);
    assert_ne!(got, pod, "not wired: {answer}");
    assert_eq!(got, want);
    // Asked again once complete: no patch, no warning, no INFO line.
    let answer = webhook.review("/mutate/namespace-enabled", "r-2", &want);
    assert!(answer["response"].get("patch").is_none(), "{answer}");
    assert!(answer["response"].get("warnings").is_none(), "{answer}");
    // The line of a review sent after it says the one before was logged, if it was.
    let marker = web_pod(json!({"hooklog.dev/inject": "yes"}));
    webhook.review("/mutate", "r-3", &marker);
    let w = &webhook.w;
    assert!(
        wait_until(Duration::from_secs(5), || w.logged(&["neither"])),
        "{:#?}",
        w.log()
    );
    assert!(!w.logged(&["already injected"]), "{:#?}", w.log());
}

/// An istio-proxy hook left as it was, in a pod with hooklog, got no finding.
#[test]
fn regression_check_was_silent_on_an_unwrapped_hook_beside_the_sidecar() {
    let base = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  template:\n    spec:\n      containers:\n        - name: app\n          image: nginx\n          lifecycle:\n            preStop:\n              exec:\n                command: [sh, -c, 'sleep 5']\n";
    let (docs, _) = inject(base, &[]);
    let mut doc = docs[0].clone();
    doc["spec"]["template"]["spec"]["containers"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "istio-proxy", "image": "istio/proxyv2:1.22.0", "lifecycle": {"preStop": {"exec": {"command": ["pilot-agent", "request", "POST", "drain"]}}}}));
    let (_, rules, _) = check(&["-"], Some(&doc.to_string()));
    let hit: Vec<_> = rules
        .iter()
        .filter(|(r, _)| r == "hook-not-wrapped")
        .collect();
    assert_eq!(hit.len(), 1, "{rules:?}");
    assert!(hit[0].1.contains("hooklog inject"), "{hit:?}");
}

/// `sh -c "exec sleep 60"` was no known sleep, so a 61 s period gave it `--timeout 59s`.
#[test]
fn regression_exec_sleep_was_cut_a_second_short() {
    for script in [
        "exec sleep 60",
        "sleep 60",
        "/bin/sleep 60",
        "busybox sleep 60",
        "sleep 60s",
        "sleep 1m",
        "sleep 20 && sleep 40",
        "trap 'echo bye; exit 0' TERM; sleep 60",
        "DELAY=1 exec sleep 60",
    ] {
        let input = format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  terminationGracePeriodSeconds: 61\n  containers:\n    - name: app\n      image: busybox\n      lifecycle:\n        preStop:\n          exec:\n            command: [sh, -c, '{}']\n",
            script.replace('\'', "''")
        );
        let (docs, err) = inject(&input, &[]);
        let out = serde_json::to_string(&docs).unwrap();
        assert!(!out.contains("--timeout"), "{script}: {err}\n{out}");
        let (_, rules, _) = check(&["-"], Some(&input));
        assert!(
            rules
                .iter()
                .any(|(r, _)| r == "grace-period-cannot-fit-hooklog"),
            "{script}: {rules:?}"
        );
    }
}

const GOOD: &str = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: good\nspec:\n  terminationGracePeriodSeconds: 10\n  containers:\n    - name: app\n      image: busybox\n      lifecycle:\n        preStop:\n          exec:\n            command: [sleep, '20']\n";

/// A folder with one unreadable file stopped there; an empty folder, or a path that matches
/// nothing, passed with exit 0; a Helm chart failed at `{{` with no hint.
#[test]
fn regression_check_stopped_at_one_bad_file_and_passed_on_none() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::write(root.join("a-bad.yaml"), "kind: Pod\nspec: [\n").unwrap();
    std::fs::write(root.join("b-good.yaml"), GOOD).unwrap();
    std::fs::write(root.join("c-latin1.yaml"), b"kind: Pod\n# caf\xe9\n").unwrap();
    let (code, rules, err) = check(&[root.to_str().unwrap()], None);
    assert_eq!(code, 64, "{err}");
    assert!(
        rules.iter().any(|(r, _)| r == "hook-exceeds-grace-period"),
        "the good file was not checked: {rules:?}\n{err}"
    );
    let lines: Vec<&str> = err.lines().filter(|l| l.contains("a-bad.yaml")).collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert_eq!(
        err.lines().filter(|l| l.contains("c-latin1.yaml")).count(),
        1,
        "{err}"
    );

    let empty = root.join("empty");
    std::fs::create_dir_all(empty.join("sub")).unwrap();
    std::fs::write(empty.join("README.md"), "no manifests\n").unwrap();
    let typo = root.join("no-such-folder");
    for path in [&empty, &typo] {
        let out = run(&["check", path.to_str().unwrap()], None);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(64), "{path:?}: {err}");
        assert!(err.contains(path.to_str().unwrap()), "{err}");
    }

    let chart = root.join("chart");
    write_chart(
        &chart,
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {{ .Release.Name }}\n{{- if .Values.x }}\n",
    );
    let out = run(&["check", chart.to_str().unwrap()], None);
    let err = text(&out.stderr);
    let hints: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("helm template"))
        .collect();
    assert_eq!(hints.len(), 1, "{err}");
    assert!(hints[0].contains("hooklog check -"), "{err}");
}

/// A check of nothing passed: an empty file, or an empty pipe (`helm template` failed before
/// `|`), said `0 pod template(s)` and exit 0. Every input that holds no object at all (empty,
/// comments, separators, a BOM, CRLF blank lines, a null or scalar document) is exit 64 naming
/// it, stdin with a hint; an input with any object (a ConfigMap, an empty List) passes, and so
/// does an empty file beside one that has objects.
#[test]
fn a_check_of_nothing_is_an_error_naming_the_input() {
    let dir = tempfile::tempdir().unwrap();
    let nothing = [
        "",
        "\n\n",
        "# only a comment\n",
        "---\n",
        "--- # c\n...\n---\n",
        "\u{feff}",
        "\r\n\r\n# c\r\n",
        "~\n",
        "null\n---\nnull\n",
        "just a scalar\n",
        "%YAML 1.1\n---\n",
    ];
    for (i, body) in nothing.iter().enumerate() {
        let file = dir.path().join(format!("nothing-{i}.yaml"));
        std::fs::write(&file, body).unwrap();
        let name = file.to_str().unwrap();
        let out = run(&["check", "--offline", name], None);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(64), "{body:?}: {err}");
        assert!(
            err.lines()
                .any(|l| l.contains(name) && l.contains("no objects")),
            "{body:?}: {err}"
        );
        let out = run(&["check", "--offline", "-"], Some(body));
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(64), "stdin {body:?}: {err}");
        assert!(
            err.contains("-: no objects") && err.contains("before `|`"),
            "{err}"
        );
    }
    // A folder of nothing but such files is nothing too.
    let out = run(&["check", "--offline", dir.path().to_str().unwrap()], None);
    assert_eq!(out.status.code(), Some(64), "{}", text(&out.stderr));
    for something in [
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n",
        "apiVersion: v1\nkind: List\nitems: []\n",
        "{\"apiVersion\": \"v1\", \"kind\": \"List\", \"items\": []}",
        "---\n# c\n---\napiVersion: v1\nkind: Namespace\nmetadata: {name: n}\n",
    ] {
        let out = run(&["check", "--offline", "-"], Some(something));
        assert_eq!(
            out.status.code(),
            Some(0),
            "{something:?}: {}",
            text(&out.stderr)
        );
    }
    let good = dir.path().join("good.yaml");
    std::fs::write(&good, GOOD).unwrap();
    let out = run(
        &[
            "check",
            "--offline",
            dir.path().join("nothing-0.yaml").to_str().unwrap(),
            good.to_str().unwrap(),
        ],
        None,
    );
    let err = text(&out.stderr);
    assert!(!err.contains("no objects"), "{err}");
    assert_ne!(out.status.code(), Some(64), "{err}");
}

/// One generated case of the adoption property: a workload or pod in every shape the rule reads.
#[derive(Debug, Clone)]
struct Case {
    kind: &'static str,
    restart: Option<Value>,
    os: Value,
    template_annotation: Option<&'static str>,
    object_annotation: Option<&'static str>,
    owner: Option<&'static str>,
    native: bool,
}

/// Where each generated kind keeps its pod template (a CRD's at the standard `spec.template`),
/// and the kind of the controller that owns its pods.
fn shape(kind: &str) -> (Option<&'static str>, &'static str) {
    match kind {
        "Pod" => (None, ""),
        "CronJob" => (Some("/spec/jobTemplate/spec/template"), "Job"),
        "Deployment" => (Some("/spec/template"), "ReplicaSet"),
        "Job" => (Some("/spec/template"), "Job"),
        "BroadcastJob" => (Some("/spec/template"), "BroadcastJob"),
        other => (
            Some("/spec/template"),
            if other == "Rollout" {
                "ReplicaSet"
            } else {
                "StatefulSet"
            },
        ),
    }
}

fn case() -> impl proptest::strategy::Strategy<Value = Case> {
    use proptest::prelude::*;
    let kinds = prop::sample::select(vec![
        "Pod",
        "Deployment",
        "StatefulSet",
        "Job",
        "CronJob",
        "BroadcastJob",
        "Rollout",
    ]);
    let restart = prop::sample::select(vec![
        None,
        Some(json!("Always")),
        Some(json!("Never")),
        Some(json!("OnFailure")),
        Some(json!("always")),
        Some(json!(7)),
        Some(Value::Null),
    ]);
    let affinity = |terms: Value| json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}});
    let expr = |op: &str, values: Value| json!({"matchExpressions": [{"key": "kubernetes.io/os", "operator": op, "values": values}]});
    let os = prop::sample::select(vec![
        json!({}),
        json!({}),
        json!({"os": {"name": "windows"}}),
        json!({"os": {"name": "linux"}}),
        json!({"nodeSelector": {"kubernetes.io/os": "windows"}}),
        json!({"nodeSelector": {"kubernetes.io/os": "linux", "zone": "a"}}),
        json!({"nodeSelector": {"beta.kubernetes.io/os": "windows"}}),
        affinity(json!([expr("In", json!(["windows"]))])),
        affinity(json!([expr("In", json!(["linux", "windows"]))])),
        affinity(json!([expr("NotIn", json!(["linux"]))])),
        affinity(json!([
            expr("In", json!(["windows"])),
            expr("In", json!(["linux"]))
        ])),
        affinity(
            json!([{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]),
        ),
    ]);
    let annotation = prop::sample::select(vec![
        None,
        None,
        Some("enabled"),
        Some("disabled"),
        Some("yes"),
    ]);
    let object_annotation =
        prop::sample::select(vec![None, None, Some("disabled"), Some("enabled")]);
    let owner = prop::sample::select(vec![
        None,
        Some("Job"),
        Some("ReplicaSet"),
        Some("Workflow"),
    ]);
    (
        kinds,
        restart,
        os,
        annotation,
        object_annotation,
        owner,
        any::<bool>(),
    )
        .prop_map(
            |(kind, restart, os, template_annotation, object_annotation, owner, native)| Case {
                kind,
                restart,
                os,
                template_annotation,
                object_annotation,
                // Only a Pod's own manifest says who owns it; a template's pods get their owner.
                owner: if kind == "Pod" { owner } else { None },
                native,
            },
        )
}

impl Case {
    fn spec(&self) -> Value {
        let mut spec = json!({"containers": [{"name": "app", "image": "nginx:1.25",
            "lifecycle": {"preStop": {"exec": {"command": ["sh", "-c", "sleep 1; nginx -s quit"]}}}}]});
        if let Some(r) = &self.restart {
            spec["restartPolicy"] = r.clone();
        }
        for (k, v) in self.os.as_object().into_iter().flatten() {
            spec[k] = v.clone();
        }
        spec
    }

    fn pod_metadata(&self) -> Value {
        let mut m = json!({});
        if let Some(a) = self.template_annotation {
            m["annotations"] = json!({"hooklog.dev/inject": a});
        }
        m
    }

    /// The object as a manifest holds it.
    fn object(&self) -> Value {
        let mut obj = json!({"apiVersion": "v1", "kind": self.kind, "metadata": {"name": "x", "namespace": "shop"}});
        match shape(self.kind).0 {
            None => {
                for (k, v) in self.pod_metadata().as_object().into_iter().flatten() {
                    obj["metadata"][k] = v.clone();
                }
                if let Some(o) = self.owner {
                    obj["metadata"]["ownerReferences"] = json!([{"apiVersion": "v1", "kind": o, "name": "o", "uid": "u", "controller": true}]);
                }
                obj["spec"] = self.spec();
            }
            Some(template) => {
                let t = json!({"metadata": self.pod_metadata(), "spec": self.spec()});
                let mut cursor = &mut obj;
                for part in template.split('/').skip(1) {
                    cursor = &mut cursor[part];
                }
                *cursor = t;
                if let Some(a) = self.object_annotation {
                    obj["metadata"]["annotations"] = json!({"hooklog.dev/inject": a});
                }
            }
        }
        obj
    }

    /// The pod its controller creates, as the API server sends it to the webhook.
    fn created_pod(&self) -> Value {
        if shape(self.kind).0.is_none() {
            return self.object();
        }
        let mut pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": self.pod_metadata(), "spec": self.spec()});
        pod["metadata"]["name"] = json!("x-1");
        pod["metadata"]["namespace"] = json!("shop");
        pod["metadata"]["ownerReferences"] = json!([{"apiVersion": "v1", "kind": shape(self.kind).1, "name": "x", "uid": "u", "controller": true}]);
        pod
    }

    fn mode(&self) -> hooklog::manifest::budget::SidecarMode {
        if self.native {
            hooklog::manifest::budget::SidecarMode::Native
        } else {
            hooklog::manifest::budget::SidecarMode::Classic
        }
    }

    fn version(&self) -> (u32, u32) {
        if self.native { (1, 32) } else { (1, 28) }
    }
}

/// What inject, the webhook and check each decide for one case: (inject, webhook, check).
fn decisions(c: &Case) -> Result<(bool, bool, bool), String> {
    use hooklog::manifest::{check, inject, load};
    use hooklog::webhook::review;
    let opts = inject::Options {
        image: IMAGE.into(),
        mode: c.mode(),
        prestop_sleep: vec![],
        events: false,
        settings: Default::default(),
    };
    let mut doc = c.object();
    inject::inject(&mut doc, &opts).map_err(|e| e.to_string())?;
    let by_inject = doc != c.object();
    let policy = review::Policy {
        inject: opts.clone(),
        own_namespace: Some("hooklog".into()),
        namespaces: Default::default(),
    };
    let body = crate::util::webhook::pod_review("p-1", "shop", &c.created_pod());
    let answer = review::review(&body, review::Scope::NamespaceEnabled, &policy);
    let by_webhook = answer.response["response"].get("patch").is_some();
    let live = format!(
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: shop\n  labels:\n    hooklog.dev/inject: enabled\n---\n{}",
        c.created_pod()
    );
    let source = load::parse("live", live).map_err(|e| e.to_string())?;
    let copts = check::Options {
        kubernetes_version: Some(c.version()),
        ..Default::default()
    };
    let findings = check::check(&[source], &copts);
    let by_check = findings.iter().any(|f| f.rule == "missed-injection");
    // What inject wrote never breaks the rule check holds it to.
    if by_inject {
        let text = serde_json::to_string(&doc).map_err(|e| e.to_string())?;
        let source = load::parse("injected", text).map_err(|e| e.to_string())?;
        let bad: Vec<_> = check::check(&[source], &copts)
            .into_iter()
            .filter(|f| ["job-container-never-ends", "hooklog-in-windows-pod"].contains(&f.rule))
            .map(|f| f.message)
            .collect();
        if !bad.is_empty() {
            return Err(format!("check on inject's output: {bad:?}"));
        }
    }
    Ok((by_inject, by_webhook, by_check))
}

/// Cases the property runs (more with HOOKLOG_PROPTEST_CASES, as every property, or
/// HOOKLOG_FUZZ_CASES).
fn adoption_cases() -> u32 {
    ["HOOKLOG_PROPTEST_CASES", "HOOKLOG_FUZZ_CASES"]
        .iter()
        .find_map(|k| std::env::var(k).ok()?.parse().ok())
        .unwrap_or(512)
}

/// Least share of the cases each decision must have, so that the property tests all three
/// (issue 30: every property counts what reaches its assertion). Far below each share's usual
/// value, so that a random run does not miss it: at 0.10, "native only" (72 to 81 of 512 in
/// three runs here) came out at 49, 9.6 %, in one CI run; 0.04 is 20 cases.
const LEAST_SHARE: f64 = 0.04;

/// inject, the webhook's review and check's `missed-injection` take the same decision for
/// every pod: kinds, restartPolicy (absent, Always, Never, OnFailure, garbage), OS by
/// `spec.os`, nodeSelector and node affinity, the annotation on the template or the object, an
/// owner, either sidecar form.
#[test]
fn inject_the_webhook_and_check_decide_alike() {
    use proptest::test_runner::{Config, TestRunner};
    let mut runner = TestRunner::new(Config {
        cases: adoption_cases(),
        failure_persistence: None,
        ..Config::default()
    });
    let counts = std::cell::RefCell::new([0u32; 3]);
    let result = runner.run(&case(), |c| {
        let (i, w, k) = decisions(&c)
            .map_err(|e| proptest::test_runner::TestCaseError::fail(format!("{c:?}: {e}")))?;
        proptest::prop_assert!(
            i == w && w == k,
            "{c:?}: inject {i}, webhook {w}, check {k}"
        );
        let mut n = counts.borrow_mut();
        n[0] += 1;
        n[1] += u32::from(i);
        // Left alone in both forms: opted out, unclear, not Linux.
        let mut native = c.clone();
        native.native = true;
        n[2] += u32::from(!decisions(&native).map(|d| d.0).unwrap_or(true));
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    let [reached, injected, left_alone] = *counts.borrow();
    let other = reached - injected - left_alone;
    eprintln!(
        "adoption: {reached} cases: {injected} injected, {left_alone} left alone, {other} native only with classic asked"
    );
    for (what, n) in [
        ("injected", injected),
        ("left alone", left_alone),
        ("native only, classic asked", other),
    ] {
        assert!(
            f64::from(n) >= LEAST_SHARE * f64::from(reached),
            "{what}: {n} of {reached} cases, below {LEAST_SHARE}"
        );
    }
    assert_eq!(
        reached,
        adoption_cases(),
        "cases that reached the assertion"
    );
}

/// A second mutating webhook, as a service mesh's injector is: it adds a container `late` with
/// an exec preStop to every pod it is sent that has none. A plain HTTPS server on 127.0.0.1, one
/// request per connection.
struct LateWebhook {
    port: u16,
}

impl LateWebhook {
    fn start(certs: &Certs) -> LateWebhook {
        let reloading = std::sync::Arc::new(
            hooklog::webhook::tls::Reloading::open(certs.cert_file.clone(), certs.key_file.clone())
                .expect("the test's certificate"),
        );
        let config = std::sync::Arc::new(
            hooklog::webhook::tls::server_config(reloading).expect("a TLS config"),
        );
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        std::thread::spawn(move || {
            for tcp in listener.incoming().map_while(Result::ok) {
                let config = config.clone();
                std::thread::spawn(move || {
                    let conn = rustls::ServerConnection::new(config).expect("a TLS session");
                    let mut tls = rustls::StreamOwned::new(conn, tcp);
                    let Some((_, body)) = read_request(&mut tls) else {
                        return;
                    };
                    let review: Value = serde_json::from_slice(&body).unwrap_or_default();
                    let pod = &review["request"]["object"];
                    let has_late = pod["spec"]["containers"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .any(|c| c["name"] == "late");
                    let mut response = json!({"uid": review["request"]["uid"], "allowed": true});
                    if !has_late {
                        let patch = json!([{"op": "add", "path": "/spec/containers/-", "value": {
                            "name": "late", "image": "busybox:1.36",
                            "lifecycle": {"preStop": {"exec": {"command": ["sh", "-c", "sleep 1; echo late-bye"]}}}}}]);
                        response["patchType"] = json!("JSONPatch");
                        response["patch"] = json!(base64::Engine::encode(
                            &base64::engine::general_purpose::STANDARD,
                            patch.to_string()
                        ));
                    }
                    let body = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}).to_string();
                    respond_json(&mut tls, "200 OK", "", &body);
                });
            }
        });
        LateWebhook { port }
    }
}

/// Deletes a webhook configuration when the test ends, passed or failed.
struct Registered<'a>(&'a crate::util::apiserver::Api, String);

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        // Best effort, as the tier's own cleanup.
        let _ = self.0.call(
            "DELETE",
            &format!(
                "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/{}",
                self.1
            ),
            None,
        );
    }
}

/// Under a real kube-apiserver: hooklog, then a later webhook that adds a container with a
/// preStop; the API server reinvokes hooklog (reinvocationPolicy IfNeeded), which wires it. The
/// stored pod is what `hooklog inject` makes of the pod with both containers, and hooklog's log
/// has no "already injected".
#[test]
fn a_reinvoked_webhook_wires_a_later_webhooks_container_under_the_api_server() {
    use crate::util::apiserver::{Api, classic_webhook, pod, registered};
    let Some(api) = Api::from_env() else { return };
    let (_dir, certs, w, t) = registered(&api, "reinvoke", "Fail", classic_webhook);
    let late = LateWebhook::start(&certs);
    // Named after hooklog's configuration: the API server calls configurations in name order.
    let late_name = format!("{}-z-late", t.name);
    let bundle = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, &certs.ca_pem);
    let (status, body) = api.call(
        "POST",
        "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations",
        Some(&json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": late_name},
            "webhooks": [{
                "name": format!("late.{}.example.com", t.name),
                "admissionReviewVersions": ["v1"],
                "clientConfig": {"url": format!("https://127.0.0.1:{}/late", late.port), "caBundle": bundle},
                "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"], "scope": "Namespaced"}],
                "namespaceSelector": {"matchLabels": {"hooklog-test": t.name}},
                "failurePolicy": "Fail",
                "sideEffects": "None",
                "timeoutSeconds": 10,
                "reinvocationPolicy": "Never",
            }]
        })),
    );
    assert_eq!(status, 201, "{body:#}");
    let _late = Registered(&api, late_name);
    t.wait_active();
    // Both called now: the dry-run pod comes back with `late`.
    let both = wait_until(Duration::from_secs(30), || {
        let (status, v) = t.create(&t.ns_in, &pod("probe"), true);
        status == 201 && v["spec"]["containers"].to_string().contains("\"late\"")
    });
    assert!(both, "the API server never called the later webhook");

    let (status, stored) = t.create(&t.ns_in, &pod("web"), false);
    assert_eq!(status, 201, "{stored:#}");
    let containers = stored["spec"]["containers"].as_array().unwrap();
    let late_c = containers
        .iter()
        .find(|c| c["name"] == "late")
        .expect("late");
    let command = late_c["lifecycle"]["preStop"]["exec"]["command"].to_string();
    assert!(
        command.starts_with("[\"/hooklog-bin/hooklog\",\"hook\""),
        "not wired: {command}"
    );
    assert!(
        late_c["volumeMounts"].to_string().contains("/hooklog"),
        "{late_c:#}"
    );
    let sidecar = containers
        .iter()
        .find(|c| c["name"] == "hooklog")
        .expect("hooklog");
    let args: Vec<String> = serde_json::from_value(sidecar["args"].clone()).unwrap();
    let peers = args
        .iter()
        .position(|a| a == "--peers")
        .map(|i| args[i + 1].clone());
    assert_eq!(peers.as_deref(), Some("app,late"), "{args:?}");
    assert!(!w.logged(&["already injected"]), "{:#?}", w.log());
}
