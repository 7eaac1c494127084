//! Which pods get hooklog, and in which form, as `inject`, `hooklog webhook` and `check` decide
//! it (issue 24, points 5 to 7): pods that run to completion, Windows pods, the opt-out
//! annotation, a reinvoked webhook; and what `check` says about files, folders and sleeps.

use std::time::Duration;

use serde_json::{Value, json};

use crate::manifest::{run, text};
use crate::util::wait_until;
use crate::webhook::{Certs, Webhook, injected, patched, pod_review, web_pod};

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
        let (docs, err) = inject(&input, &["--sidecar", "classic"]);
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
    let (docs, err) = inject(crd, &["--sidecar", "classic"]);
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

/// The webhook injected Windows pods (the API server then refused them), and when reinvoked
/// logged "InjectionSkipped ... already injected" instead of wiring a later webhook's container.
#[test]
fn regression_the_webhook_injected_windows_pods_and_did_not_wire_on_reinvocation() {
    let dir = tempfile::tempdir().unwrap();
    let certs = Certs::make(dir.path(), "hooklog test CA");
    let w = Webhook::start(&certs, &["--kubernetes-version", "1.32"]);
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
        let answer = w.review(
            &certs.ca_pem,
            "/mutate/namespace-enabled",
            &pod_review(&format!("w-{i}"), "shop", &pod),
        );
        assert!(answer["response"].get("patch").is_none(), "{extra}: {answer}");
        let ws = answer["response"]["warnings"].to_string();
        assert!(ws.contains("InjectionSkipped") && ws.contains("Windows"), "{ws}");
    }
    // Reinvoked after a later webhook added a container with a preStop: it is wired, as
    // re-running inject wires it.
    let mut pod = injected(&web_pod(json!({})), &["--kubernetes-version", "1.32"]);
    pod["spec"]["containers"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "istio-proxy", "image": "istio/proxyv2:1.22.0", "lifecycle": {"preStop": {"exec": {"command": ["pilot-agent", "request", "POST", "drain"]}}}}));
    let answer = w.review(
        &certs.ca_pem,
        "/mutate/namespace-enabled",
        &pod_review("r-1", "shop", &pod),
    );
    let got = patched(&pod, &answer);
    let want = injected(&pod, &["--kubernetes-version", "1.32"]);
    assert_ne!(got, pod, "not wired: {answer}");
    assert_eq!(got, want);
    // Asked again once complete: no patch, no warning, no INFO line.
    let answer = w.review(
        &certs.ca_pem,
        "/mutate/namespace-enabled",
        &pod_review("r-2", "shop", &want),
    );
    assert!(answer["response"].get("patch").is_none(), "{answer}");
    assert!(answer["response"].get("warnings").is_none(), "{answer}");
    // The line of a review sent after it says the one before was logged, if it was.
    let marker = web_pod(json!({"hooklog.dev/inject": "yes"}));
    w.review(
        &certs.ca_pem,
        "/mutate",
        &pod_review("r-3", "shop", &marker),
    );
    assert!(
        wait_until(Duration::from_secs(5), || w
            .log()
            .iter()
            .any(|l| l.contains("neither"))),
        "{:#?}",
        w.log()
    );
    let log = w.log();
    assert!(
        !log.iter().any(|l| l.contains("already injected")),
        "{log:#?}"
    );
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
    std::fs::create_dir_all(chart.join("templates")).unwrap();
    std::fs::write(
        chart.join("Chart.yaml"),
        "apiVersion: v2\nname: web\nversion: 0.1.0\n",
    )
    .unwrap();
    std::fs::write(
        chart.join("templates/deployment.yaml"),
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {{ .Release.Name }}\n{{- if .Values.x }}\n",
    )
    .unwrap();
    let out = run(&["check", chart.to_str().unwrap()], None);
    let err = text(&out.stderr);
    let hints: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("helm template"))
        .collect();
    assert_eq!(hints.len(), 1, "{err}");
    assert!(hints[0].contains("hooklog check -"), "{err}");
}
