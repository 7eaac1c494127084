//! The busybox `tail -F` workaround (issue 40), with the real binary: `check` names it on the
//! incident's seed pod and its variants, `inject` migrates it (or leaves it, saying why),
//! `uninject` gives back the bytes, and the migrated pod's hooks, run for real against the
//! sidecar inject configured, reach hooklog's stdout with every line they appended, the summary
//! last. (`kubernetes-validate --strict` on every output: tests/manifest.rs, which injects every
//! incident and corpus file.)

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use clap::Parser;
use hooklog::cli::{Cli, Command as Sub};
use hooklog::manifest::{load, podspec};
use serde_json::Value;

use crate::util::injected_pod::run_installer;
use crate::util::manifests::{assert_reinject_and_uninject, run};
use crate::util::text;
use crate::util::{Daemon, POD_ENV, hooklog};

const IMAGE: &str = "registry.example.com/hooklog:0.1.0";
const SEED: &str = "tests/manifests/incidents/busybox-tail-workaround.yaml";
const VARIANTS: &str = "tests/manifests/corpus/tail-workaround-variants.yaml";
const JSON_FORM: &str = "tests/manifests/corpus/tail-workaround.json";

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn check(stdin: Option<&str>, file: &str) -> Vec<Value> {
    let out = run(&["check", "--offline", "--format", "json", file], stdin);
    let doc: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{file}: not JSON ({e}): {}", text(&out.stderr)));
    doc["findings"].as_array().unwrap().clone()
}

/// A finding's fix.
fn fix(finding: &Value) -> &str {
    finding["fix"]
        .as_str()
        .unwrap_or_else(|| panic!("a finding without a fix: {finding:#}"))
}

fn inject(file: &str) -> (String, String) {
    let out = run(&["inject", "--offline", "--image", IMAGE, file], None);
    assert!(out.status.success(), "{file}: {}", text(&out.stderr));
    (text(&out.stdout), text(&out.stderr))
}

fn templates(yaml: &str) -> Vec<(String, Value)> {
    let source = load::parse("out", yaml.to_string()).unwrap();
    source
        .documents
        .iter()
        .flat_map(|d| {
            podspec::templates(&d.value).into_iter().map(|t| {
                (
                    t.object.name.clone(),
                    d.value.pointer(&t.spec_pointer).unwrap().clone(),
                )
            })
        })
        .collect()
}

#[test]
fn check_names_the_forwarder_its_file_and_the_hooks_that_write_to_it() {
    let findings = check(None, SEED);
    let f: Vec<&Value> = findings
        .iter()
        .filter(|f| f["rule"] == "tail-sidecar-workaround")
        .collect();
    assert_eq!(f.len(), 1, "{findings:#?}");
    assert_eq!(f[0]["container"], "log-forwarder");
    assert_eq!(f[0]["path"], "spec.template.spec.containers[2]");
    let message = f[0]["message"].as_str().unwrap();
    for part in [
        "/shared-logs/prestop.log",
        "`sleep 55`",
        "api-server's preStop",
        "envoy's preStop",
    ] {
        assert!(message.contains(part), "{part}: {message}");
    }
    assert!(fix(f[0]).starts_with("hooklog inject"), "{:#}", f[0]);
    // Every way of writing it: each variant's forwarder is found, with the fix inject takes.
    let findings = check(None, VARIANTS);
    let by_object = |name: &str| -> Vec<&Value> {
        findings
            .iter()
            .filter(|f| f["object"]["name"] == name && f["rule"] == "tail-sidecar-workaround")
            .collect()
    };
    for name in [
        "coreutils-tail-f",
        "busybox-args-only",
        "two-files",
        "native-forwarder",
    ] {
        let f = by_object(name);
        assert_eq!(f.len(), 1, "{name}: {findings:#?}");
        assert!(
            fix(f[0]).starts_with("hooklog inject ("),
            "{name}: {:#}",
            f[0]
        );
    }
    for (name, why) in [
        ("two-forwarders", "2 containers of the pod follow files"),
        ("forwarder-with-sed", "piped"),
        ("forwarder-on-a-pvc", "not an emptyDir"),
    ] {
        for f in by_object(name) {
            assert!(fix(f).contains(why), "{name}: {f:#}");
        }
    }
    let f = &check(None, JSON_FORM)[3];
    assert_eq!(
        (&f["rule"], &f["container"]),
        (&"tail-sidecar-workaround".into(), &"log-forwarder".into())
    );
}

#[test]
fn inject_migrates_the_forwarder_and_uninject_gives_the_bytes_back() {
    for file in [SEED, VARIANTS, JSON_FORM] {
        let original = std::fs::read_to_string(root().join(file)).unwrap();
        let (injected, report) = inject(file);
        let reinject = ["inject", "--offline", "--image", IMAGE, "-"];
        assert_reinject_and_uninject(&reinject, &original, &injected, file);
        // After inject, nothing is left of the forwarders inject migrated.
        let after = check(Some(&injected), "-");
        for (name, spec) in templates(&injected) {
            let names: Vec<&str> = spec["containers"]
                .as_array()
                .into_iter()
                .chain(spec["initContainers"].as_array())
                .flatten()
                .map(|c| c["name"].as_str().unwrap())
                .collect();
            let left = report.contains("left as it is")
                && after.iter().any(|f| {
                    f["object"]["name"] == name.as_str() && f["rule"] == "tail-sidecar-workaround"
                });
            if !left && name != "nothing-reads" {
                assert!(names.contains(&"hooklog"), "{name}: {names:?}");
                assert!(
                    !names
                        .iter()
                        .any(|n| n.contains("forwarder") || *n == "tailer"),
                    "{name}: a forwarder is left: {names:?}"
                );
            }
        }
        for f in &after {
            assert!(
                ["tail-sidecar-workaround", "hook-output-unread"]
                    .contains(&f["rule"].as_str().unwrap())
                    || f["severity"] == "info",
                "{file} after inject: {f:#}"
            );
        }
    }
    // The ones it leaves, each with its one line; nothing read stays said after inject.
    let (injected, report) = inject(VARIANTS);
    for line in [
        "app-forwarder: a `tail -F` forwarder, left as it is: 2 containers",
        "log-forwarder: a `tail -F` forwarder, left as it is: its `tail` is piped",
        "log-forwarder: a `tail -F` forwarder, left as it is: /data/prestop.log is on volume data, which is not an emptyDir",
    ] {
        assert!(report.contains(line), "{line}: {report}");
    }
    let unread: Vec<Value> = check(Some(&injected), "-")
        .into_iter()
        .filter(|f| f["rule"] == "hook-output-unread")
        .collect();
    assert_eq!(unread.len(), 2, "{unread:#?}");
    assert!(
        fix(&unread[0]).contains("--file /shared-logs/prestop.log"),
        "{unread:#?}"
    );
}

/// Maps a pod path to the test's stand-ins for its volumes, inside every word (the hooks'
/// scripts name `/shared-logs/...`).
fn in_pod(root: &Path, arg: &str) -> String {
    let mut out = arg.to_string();
    for prefix in ["/hooklog/", "/etc/hooklog-podinfo", "/shared-logs/"] {
        out = out.replace(prefix, &format!("{}{prefix}", root.display()));
    }
    out
}

#[test]
fn the_migrated_pods_hooks_and_their_appended_lines_reach_hooklogs_stdout() {
    let (injected, _) = inject(SEED);
    let (_, spec) = templates(&injected).remove(0);
    let containers = podspec::containers(&spec, "spec");
    let pod = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(pod.path().join("shared-logs")).unwrap();
    std::fs::create_dir_all(pod.path().join("etc/hooklog-podinfo")).unwrap();
    std::fs::write(
        pod.path().join("etc/hooklog-podinfo/labels"),
        "app=\"api-server\"\n",
    )
    .unwrap();
    std::fs::write(pod.path().join("etc/hooklog-podinfo/annotations"), "").unwrap();
    run_installer(&containers, |a| in_pod(pod.path(), a));

    // hooklog in the forwarder's place: its command, the image's binary first.
    let sidecar = containers.iter().find(|c| c.name == "hooklog").unwrap();
    let (command, _) = sidecar.argv();
    let argv: Vec<String> = command.iter().map(|a| in_pod(pod.path(), a)).collect();
    let Sub::Run(cfg) = Cli::try_parse_from(&argv).unwrap().command else {
        panic!("not `hooklog run`: {argv:?}")
    };
    assert_eq!(cfg.peers, ["api-server", "envoy"]);
    assert!(
        cfg.files
            .iter()
            .any(|f| f.ends_with("shared-logs/prestop.log"))
    );
    let keep_alive = podspec::strings(&sidecar.value["lifecycle"]["preStop"]["exec"]["command"]);
    let st = hooklog().args(&keep_alive[1..]).output().unwrap();
    assert!(st.status.success(), "the keep-alive: {}", text(&st.stderr));
    let mut cmd = hooklog();
    cmd.args(&argv[1..]).envs(POD_ENV);
    let mut daemon = Daemon::spawn(cmd);

    // Every preStop at once, as the kubelet runs them (envoy's drain sleep made 1 s).
    let mut hooks = Vec::new();
    for c in containers.iter().filter(|c| !c.init && c.name != "hooklog") {
        let argv: Vec<String> =
            podspec::strings(&c.value["lifecycle"]["preStop"]["exec"]["command"])
                .iter()
                .map(|a| in_pod(pod.path(), a).replace("sleep 15", "sleep 1"))
                .collect();
        let mut p = Command::new(&argv[0]);
        p.args(&argv[1..]).env_clear().env("PATH", "/usr/bin:/bin");
        hooks.push((c.name.clone(), p.spawn().unwrap()));
    }
    for (name, mut child) in hooks {
        let st = child.wait().unwrap();
        // api-server's upload script is not here, but its hook ends with an echo: ok.
        assert!(st.success(), "{name}: {st}");
    }
    daemon.stop(Duration::from_secs(20));
    let records = daemon.records();
    let summary = records.last().expect("records");
    assert_eq!(summary["event"], "hooks.summary", "{records:#?}");
    assert_eq!(summary["counts"]["ok"], 2, "{summary:#}");
    let from_file: Vec<&Value> = records
        .iter()
        .filter(|r| {
            r["hooklog"]["input"]
                .as_str()
                .is_some_and(|i| i.ends_with("shared-logs/prestop.log"))
        })
        .collect();
    // The hand-written JSON lines, read as JSON; the commands' appended output, as messages.
    for msg in ["prestop start", "prestop done", "draining"] {
        assert!(
            from_file.iter().any(|r| r["msg"] == msg),
            "{msg}: {from_file:#?}"
        );
    }
    assert!(
        from_file.iter().any(|r| r["message"]
            .as_str()
            .is_some_and(|m| m.contains("upload-heap-dump.sh"))),
        "the failed upload's own error line: {from_file:#?}"
    );
    assert!(
        from_file
            .iter()
            .all(|r| r["kubernetes"]["pod_name"].is_string()),
        "enriched"
    );
}
