//! What a new user meets on day one (issue 41), each through the real binary: a command given
//! nothing says so and exits 64 alike (`check`, `inject`, `uninject`), an unreadable input gets
//! no `0 error(s)` summary beside its error, and an explicit `--sidecar classic` that leaves a
//! pod uninjected is an error naming the flag, not a silent exit 0.

use crate::util::manifests::{run, write_chart};
use crate::util::text;

const IMAGE: &str = "registry.example.com/hooklog-sidecar:0.1.0";

/// `inject </dev/null` printed nothing and exited 0, where `check </dev/null` explained itself
/// and exited 64: a pipeline whose `helm template` failed applied nothing, "successfully".
#[test]
fn inject_and_uninject_of_nothing_explain_themselves_and_exit_64_as_check_does() {
    for body in [None, Some(""), Some("# only a comment\n---\n"), Some("~\n")] {
        for (args, verb) in [
            (vec!["check", "--offline"], "check"),
            (vec!["inject", "--offline", "--image", IMAGE], "inject"),
            (vec!["uninject"], "uninject"),
            (vec!["inject", "--undo"], "uninject"),
        ] {
            let out = run(&args, body);
            let err = text(&out.stderr);
            assert_eq!(out.status.code(), Some(64), "{args:?} {body:?}: {err}");
            assert!(
                err.contains(&format!(
                    "-: no objects in it (empty, or only comments): nothing to {verb}"
                )) && err.contains("before `|`"),
                "{args:?} {body:?}: {err}"
            );
            assert!(out.stdout.is_empty(), "{args:?}: {}", text(&out.stdout));
        }
    }
    // Something to inject: exit 0, as before; a document that is no object (a kustomize
    // json6902 patch is a list) is something too, passed on byte for byte.
    let pod = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n";
    let patch = "- op: replace\n  path: /spec/replicas\n  value: 3\n";
    for body in [pod, patch] {
        for args in [
            vec!["inject", "--offline", "--image", IMAGE],
            vec!["uninject"],
        ] {
            let out = run(&args, Some(body));
            assert_eq!(
                out.status.code(),
                Some(0),
                "{args:?}: {}",
                text(&out.stderr)
            );
            if body == patch {
                assert_eq!(text(&out.stdout), patch, "{args:?}");
            }
        }
    }
}

/// `check nope.yaml` printed `0 error(s), 0 warning(s), 0 info in 0 pod template(s)` beside its
/// exit-64 `cannot read`: a summary of nothing. An input that reads beside it keeps its summary.
#[test]
fn check_of_an_unreadable_input_prints_no_summary_beside_its_error() {
    let dir = tempfile::tempdir().unwrap();
    let nope = dir.path().join("nope.yaml");
    let out = run(&["check", "--offline", nope.to_str().unwrap()], None);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(64), "{err}");
    assert!(err.contains("nope.yaml: cannot read"), "{err}");
    assert!(out.stdout.is_empty(), "{}", text(&out.stdout));
    let out = run(
        &[
            "check",
            "--offline",
            nope.to_str().unwrap(),
            "tests/manifests/incidents/distroless-envoy-sleep.yaml",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(64), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("in 1 pod template(s)"),
        "{}",
        text(&out.stdout)
    );
}

/// A pod that runs to completion under each way of asking for a sidecar form.
const ONCE: &str = "apiVersion: v1
kind: Pod
metadata: {name: once, namespace: shop}
spec:
  restartPolicy: Never
  containers:
    - name: app
      image: busybox
      lifecycle: {preStop: {exec: {command: [sh, -c, echo bye]}}}
";

/// `inject --sidecar classic --kubernetes-version 1.32` on a `restartPolicy: Never` pod left it
/// uninjected and exited 0, its hint asking for "`--kubernetes-version 1.29` or later" though
/// 1.32 was given. Asked for explicitly with a version that runs native sidecars, classic is the
/// blocker: an error naming it, nothing written. A cluster below 1.29 (classic by its version)
/// still leaves the pod alone with a note and exit 0, as does `--sidecar classic` on such a
/// cluster or with no version given.
#[test]
fn an_explicit_classic_sidecar_that_leaves_a_pod_uninjected_is_an_error_naming_the_flag() {
    for version in [Some("1.29"), Some("1.32")] {
        let mut args = vec![
            "inject",
            "--offline",
            "--image",
            IMAGE,
            "--sidecar",
            "classic",
        ];
        args.extend(version.iter().flat_map(|v| ["--kubernetes-version", *v]));
        let out = run(&args, Some(ONCE));
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(64), "{version:?}: {err}");
        assert!(
            err.contains("Pod shop/once: --sidecar classic cannot inject it")
                && err.contains("restartPolicy Never")
                && err.contains("leave --sidecar out"),
            "{version:?}: {err}"
        );
        assert!(!err.contains("or later"), "{err}");
        assert!(out.stdout.is_empty(), "{version:?}: {}", text(&out.stdout));
    }
    // Classic by the version, classic on a cluster below 1.29, and classic with no version
    // given (the cluster unknown: a note, as before).
    for args in [
        vec!["--kubernetes-version", "1.28"],
        vec!["--sidecar", "classic", "--kubernetes-version", "1.28"],
        vec!["--sidecar", "classic"],
    ] {
        let mut all = vec!["inject", "--offline", "--image", IMAGE];
        all.extend(&args);
        let out = run(&all, Some(ONCE));
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {err}");
        assert!(err.contains("not injected, unchanged"), "{args:?}: {err}");
        assert_eq!(text(&out.stdout), ONCE, "{args:?}");
    }
    // Native (the default from 1.29) injects it.
    let out = run(&["inject", "--offline", "--image", IMAGE], Some(ONCE));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("pod \"shop/once\" injected"));
}

/// A Helm chart's Chart.yaml, and a template of it that is no YAML until rendered.
fn write_web_chart(dir: &std::path::Path) {
    write_chart(
        dir,
        "{{- include \"web.validate\" . -}}\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {{ .Release.Name }}\n  labels:\n    {{- include \"web.labels\" . | nindent 4 }}\n",
    );
}

/// `hooklog check --offline DIR`: its output, and its stderr as text.
fn check_offline(dir: &std::path::Path) -> (std::process::Output, String) {
    let out = run(&["check", "--offline", dir.to_str().unwrap()], None);
    let err = text(&out.stderr);
    (out, err)
}

/// Writes `yaml` to `file` in the repository `repo`, then checks the whole repository offline.
fn add_and_check(repo: &std::path::Path, file: &str, yaml: &str) -> (std::process::Output, String) {
    std::fs::write(repo.join(file), yaml).unwrap();
    check_offline(repo)
}

/// `hooklog check .` on a repository that holds a Helm chart printed the real findings, then
/// exited 64 for the chart's templates, with no way to skip them. Now a chart inside a folder
/// searched is skipped with one note naming `helm template … | hooklog check -`, and the exit
/// code is the findings': 0 for clean manifests, 1 for an error. The chart given itself, or one
/// template file of it (found by its real path, from inside templates/ too), is still exit 64,
/// with the same hint instead of `a mapping key must be a scalar`.
#[test]
fn check_of_a_folder_with_helm_charts_skips_them_with_a_note_and_exits_on_its_findings() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path();
    write_web_chart(&repo.join("charts/web"));
    write_web_chart(&repo.join("deploy/charts/api"));
    let (out, err) = add_and_check(
        repo,
        "deploy/config.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n",
    );
    assert_eq!(out.status.code(), Some(0), "{err}");
    for chart in ["charts/web", "deploy/charts/api"] {
        let notes: Vec<&str> = err
            .lines()
            .filter(|l| l.contains(chart) && l.contains("skipped"))
            .collect();
        assert_eq!(notes.len(), 1, "{chart}: {err}");
        assert!(
            notes[0].contains(&format!("`helm template {}", repo.join(chart).display()))
                && notes[0].contains("| hooklog check -`"),
            "{err}"
        );
    }
    assert!(!err.contains("not valid YAML"), "{err}");
    assert!(
        text(&out.stdout).contains("0 error(s)"),
        "{}",
        text(&out.stdout)
    );
    // A finding beside the charts decides the exit code.
    let (out, err) = add_and_check(
        repo,
        "deploy/pod.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  terminationGracePeriodSeconds: 10\n  containers:\n    - name: app\n      image: busybox\n      lifecycle: {preStop: {exec: {command: [sleep, '20']}}}\n",
    );
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(text(&out.stdout).contains("hook-exceeds-grace-period"));

    // One template alone: exit 64 with the hint, by any path to it.
    let template = repo.join("charts/web/templates/deployment.yaml");
    let chart = repo.join("charts/web");
    for (cwd, path) in [
        (repo.to_path_buf(), template.to_str().unwrap().to_string()),
        (chart.join("templates"), "deployment.yaml".to_string()),
        (chart.clone(), "templates/deployment.yaml".to_string()),
    ] {
        let out = crate::util::hooklog()
            .current_dir(&cwd)
            .args(["check", "--offline", &path])
            .output()
            .unwrap();
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(64), "{path}: {err}");
        assert!(
            err.contains("a template of the Helm chart")
                && err.contains("helm template")
                && err.contains("| hooklog check -`")
                && !err.contains("mapping key"),
            "{path}: {err}"
        );
        assert!(out.stdout.is_empty(), "{path}: {}", text(&out.stdout));
    }
}
