//! The injected sidecar's settings (issue 41) through the real `hooklog inject`: the pod's
//! `hooklog.dev/` annotations and the `--sidecar-*` flags (as the chart's values reach the
//! webhook, `HOOKLOG_SIDECAR_*`) give the same sidecar, which `kubernetes-validate --strict`
//! accepts in every form and whose args `hooklog run` parses; a bad annotation or flag is an
//! error that names it. The sidecar started for real against CloudWatch is in tests/cloudwatch.rs.

use std::path::PathBuf;

use clap::Parser;
use hooklog::cli::{Cli, Command as Sub};
use serde_json::{Value, json};

use crate::util::manifests::{injectable, run, validate_strictly, validator_input};
use crate::util::settings::{ANNOTATIONS, IMAGE, deployment, sidecar};
use crate::util::text;

/// The same settings as flags.
const FLAGS: [&str; 7] = [
    "--sidecar-output=stdout,cloudwatch",
    "--sidecar-log-group=/eks/shop/hooklog",
    "--sidecar-emf",
    "--sidecar-cpu-request=50m",
    "--sidecar-memory-request=32Mi",
    "--sidecar-memory-limit=128Mi",
    "--sidecar-env=AWS_REGION=us-east-1",
];

#[test]
fn annotations_and_flags_give_the_same_valid_sidecar_run_parses() {
    let dir = tempfile::tempdir().unwrap();
    let mut files: Vec<PathBuf> = Vec::new();
    for form in ["native", "classic"] {
        let by_annotation = run(
            &["inject", "--image", IMAGE, "--sidecar", form, "-"],
            Some(&deployment(&ANNOTATIONS)),
        );
        assert!(
            by_annotation.status.success(),
            "{}",
            text(&by_annotation.stderr)
        );
        let mut args = vec!["inject", "--image", IMAGE, "--sidecar", form];
        args.extend(FLAGS);
        args.push("-");
        let by_flags = run(&args, Some(&deployment(&[])));
        assert!(by_flags.status.success(), "{}", text(&by_flags.stderr));
        // The chart sets the flags through their variables.
        let by_env = {
            let mut cmd = crate::util::hooklog();
            cmd.args(["inject", "--image", IMAGE, "--sidecar", form, "-"]);
            for f in FLAGS {
                let (flag, value) = f.split_once('=').unwrap_or((f, "true"));
                let var = format!(
                    "HOOKLOG_{}",
                    flag.trim_start_matches("--")
                        .replace('-', "_")
                        .to_uppercase()
                );
                cmd.env(var, value);
            }
            piped(cmd, &deployment(&[]))
        };
        let (a, f, e) = (
            sidecar(&text(&by_annotation.stdout)),
            sidecar(&text(&by_flags.stdout)),
            sidecar(&by_env),
        );
        assert_eq!(a, f, "{form}: annotations and flags differ");
        assert_eq!(a, e, "{form}: flags and their variables differ");
        assert_eq!(
            a["resources"],
            json!({"requests": {"cpu": "50m", "memory": "32Mi"}, "limits": {"memory": "128Mi"}})
        );
        assert!(
            a["env"]
                .as_array()
                .unwrap()
                .contains(&json!({"name": "AWS_REGION", "value": "us-east-1"}))
        );
        // `hooklog run` takes what inject wrote.
        let argv: Vec<String> = std::iter::once("hooklog".to_string())
            .chain(
                a["args"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|v| v.as_str().unwrap().to_string()),
            )
            .collect();
        let Sub::Run(r) = Cli::try_parse_from(&argv).expect("run parses").command else {
            panic!("not run: {argv:?}")
        };
        assert!(r.emf && r.log_group.as_deref() == Some("/eks/shop/hooklog"));
        assert_eq!(r.outputs.len(), 2);
        for (name, out) in [
            ("annotations", &by_annotation.stdout),
            ("flags", &by_flags.stdout),
        ] {
            let path = dir.path().join(format!("{form}-{name}.yaml"));
            std::fs::write(&path, out).unwrap();
            files.push(path);
        }
        // Undone exactly.
        let back = run(&["uninject", "-"], Some(&text(&by_annotation.stdout)));
        assert!(back.status.success());
        assert_eq!(
            sidecar_free(&text(&back.stdout)),
            sidecar_free(&deployment(&ANNOTATIONS))
        );
    }
    // Every injectable manifest of the corpus, with every setting on: what the API server takes.
    for file in injectable() {
        let mut args = vec!["inject", "--image", IMAGE];
        args.extend(FLAGS);
        args.extend([
            "--sidecar-log-stream={namespace_name}/{pod_name}",
            "--events",
        ]);
        args.push(&file);
        let out = run(&args, None);
        assert!(out.status.success(), "{file}: {}", text(&out.stderr));
        let path = dir.path().join(file.replace('/', "_") + ".yaml");
        std::fs::write(&path, validator_input(&text(&out.stdout))).unwrap();
        files.push(path);
    }
    validate_strictly(&files);
}

/// The document of `yaml`, for comparing.
fn sidecar_free(yaml: &str) -> Value {
    hooklog::manifest::load::parse("x.yaml", yaml.to_string())
        .expect("reads")
        .documents[0]
        .value
        .clone()
}

/// `cmd` with `input` on stdin; its stdout (it must succeed).
fn piped(mut cmd: std::process::Command, input: &str) -> String {
    use std::io::Write;
    use std::process::Stdio;
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    text(&out.stdout)
}

/// A pod annotation with an invalid value stops inject with the object and the annotation named
/// (a pod silently shipped with settings it did not ask for is worse); an unknown one is a note;
/// a bad flag is a usage error naming the flag.
#[test]
fn bad_annotations_and_flags_are_errors_that_name_them() {
    for (annotation, value, said) in [
        (
            "hooklog.dev/cpu-request",
            "ten",
            "not a Kubernetes quantity",
        ),
        ("hooklog.dev/output", "kafka", "not an output"),
        (
            "hooklog.dev/memory-request",
            "1Gi",
            "above the memory limit 64Mi",
        ),
        ("hooklog.dev/output", "cloudwatch", "needs a log group"),
        ("hooklog.dev/env", "POD_NAME=x", "set by inject"),
    ] {
        let out = run(
            &["inject", "--image", IMAGE, "-"],
            Some(&deployment(&[(annotation, value)])),
        );
        let stderr = text(&out.stderr);
        assert!(!out.status.success(), "{annotation}: {value}");
        assert!(
            stderr.contains(said) && stderr.contains("api-server"),
            "{annotation}={value}: {stderr}"
        );
        assert!(out.stdout.is_empty(), "nothing half-written");
    }
    // An unknown one (a typo, or a newer hooklog's key) is a note; the pod is injected.
    let out = run(
        &["inject", "--image", IMAGE, "-"],
        Some(&deployment(&[("hooklog.dev/outptu", "cloudwatch")])),
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("did you mean hooklog.dev/output?"),
        "{}",
        text(&out.stderr)
    );
    for (flag, said) in [
        ("--sidecar-cpu-limit=lots", "--sidecar-cpu-limit"),
        ("--sidecar-output=kafka", "--sidecar-output"),
        ("--sidecar-env=1A=b", "--sidecar-env"),
        // Settings that only fail together: a usage error too.
        ("--sidecar-output=cloudwatch", "needs a log group"),
    ] {
        let out = run(
            &["inject", "--image", IMAGE, flag, "-"],
            Some(&deployment(&[])),
        );
        assert_eq!(out.status.code(), Some(64), "{flag}");
        assert!(text(&out.stderr).contains(said), "{}", text(&out.stderr));
    }
}

/// `check` reports an unknown `hooklog.dev/` annotation (a warning, with the nearest name) and an
/// invalid value (an error) on pod templates and Namespaces, at the annotations' line, with the
/// parser inject and the webhook use: what it calls invalid, inject refuses.
#[test]
fn check_finds_unknown_and_invalid_annotations_at_their_line() {
    let input = "\
apiVersion: v1
kind: Namespace
metadata:
  name: shop
  annotations:
    hooklog.dev/output: kafka
    hooklog.dev/emff: \"true\"
    hooklog.dev/inject: enabled
---
apiVersion: v1
kind: List
items:
- apiVersion: apps/v1
  kind: Deployment
  metadata:
    name: api
    namespace: shop
  spec:
    selector: {matchLabels: {app: api}}
    template:
      metadata:
        labels: {app: api}
        annotations:
          hooklog.dev/cpu-request: ten
          hooklog.dev/memory-limt: 1Gi
          hooklog.dev/log-group: /eks/shop
          hooklog.dev/ignore-check.hook-not-reported: ours
      spec:
        containers:
        - name: app
          image: nginx:1.27
";
    let out = run(
        &["check", "--offline", "--format", "json", "-"],
        Some(input),
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let doc: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let found: Vec<(String, u64, String, String)> = doc["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| {
            f["rule"]
                .as_str()
                .unwrap()
                .starts_with("sidecar-annotation")
        })
        .map(|f| {
            (
                f["rule"].as_str().unwrap().to_string(),
                f["line"].as_u64().unwrap(),
                f["path"].as_str().unwrap().to_string(),
                f["message"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let brief: Vec<(&str, u64, &str)> = found
        .iter()
        .map(|(r, l, p, _)| (r.as_str(), *l, p.as_str()))
        .collect();
    assert_eq!(
        brief,
        [
            ("sidecar-annotation-invalid", 5, "metadata.annotations"),
            ("sidecar-annotation-unknown", 5, "metadata.annotations"),
            (
                "sidecar-annotation-invalid",
                23,
                "items[0].spec.template.metadata.annotations"
            ),
            (
                "sidecar-annotation-unknown",
                23,
                "items[0].spec.template.metadata.annotations"
            ),
        ],
        "{found:#?}"
    );
    assert!(
        found[1].3.contains("did you mean hooklog.dev/emf?"),
        "{found:#?}"
    );
    assert!(
        found[3].3.contains("hooklog.dev/memory-limit?"),
        "{found:#?}"
    );
    assert!(
        found[2].3.contains("not a Kubernetes quantity"),
        "{found:#?}"
    );
    // inject refuses what check calls invalid: the Namespace's first, as it comes first.
    let inject = run(&["inject", "--image", IMAGE, "-"], Some(input));
    assert_eq!(inject.status.code(), Some(64));
    let stderr = text(&inject.stderr);
    assert!(
        stderr.contains("Namespace shop") && stderr.contains("hooklog.dev/output"),
        "{stderr}"
    );
    let pod_only = input.split("---\n").nth(1).unwrap();
    let inject = run(&["inject", "--image", IMAGE, "-"], Some(pod_only));
    assert_eq!(inject.status.code(), Some(64));
    assert!(text(&inject.stderr).contains("hooklog.dev/cpu-request"));
}

/// `inject` reads the Namespace objects of its input as the webhook reads the cluster's: a
/// namespace's settings reach the workloads after it in that namespace, a pod's own annotation
/// wins, another namespace's workloads are untouched; an invalid one names the Namespace.
#[test]
fn inject_takes_a_namespaces_settings_for_the_workloads_after_it() {
    let namespace = |annotations: &str| {
        format!(
            "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: shop\n  annotations:\n{annotations}---\n"
        )
    };
    let other = deployment(&[]).replace("\"namespace\": \"shop\"", "\"namespace\": \"tools\"");
    let input = format!(
        "{}{}\n---\n{}\n---\n{}\n",
        namespace(
            "    hooklog.dev/emf: \"true\"\n    hooklog.dev/memory-limit: 96Mi\n    hooklog.dev/cpu-request: 20m\n"
        ),
        deployment(&[]),
        deployment(&[("hooklog.dev/cpu-request", "30m")]),
        other
    );
    let out = run(&["inject", "--image", IMAGE, "-"], Some(&input));
    assert!(out.status.success(), "{}", text(&out.stderr));
    let docs = hooklog::manifest::load::parse("out.yaml", text(&out.stdout)).unwrap();
    let sidecars: Vec<Value> = docs.documents[1..]
        .iter()
        .map(|d| sidecar(&serde_json::to_string(&d.value).unwrap()))
        .collect();
    let emf = |s: &Value| s["args"].as_array().unwrap().contains(&json!("--emf"));
    assert!(emf(&sidecars[0]) && emf(&sidecars[1]) && !emf(&sidecars[2]));
    assert_eq!(sidecars[0]["resources"]["limits"]["memory"], "96Mi");
    assert_eq!(sidecars[0]["resources"]["requests"]["cpu"], "20m");
    assert_eq!(sidecars[1]["resources"]["requests"]["cpu"], "30m");
    assert_eq!(sidecars[2]["resources"]["limits"]["memory"], "64Mi");
    // An invalid setting on the Namespace, or one that fails with the install's: named.
    for (bad, said) in [
        ("    hooklog.dev/output: kafka\n", "not an output"),
        (
            "    hooklog.dev/memory-request: 1Gi\n",
            "above the memory limit",
        ),
    ] {
        let out = run(
            &["inject", "--image", IMAGE, "-"],
            Some(&format!("{}{}", namespace(bad), deployment(&[]))),
        );
        assert_eq!(out.status.code(), Some(64));
        let stderr = text(&out.stderr);
        assert!(
            stderr.contains("Namespace shop") && stderr.contains(said),
            "{stderr}"
        );
    }
}
