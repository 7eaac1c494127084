//! `hooklog check`, `inject` and `uninject` with the real binary: a corpus of realistic manifests
//! against golden findings, both incidents, image roots made here, every inject output validated
//! by `kubernetes-validate --strict`, idempotent and undone exactly, and an injected pod's hooks
//! run for real against the sidecar inject configured.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use clap::Parser;
use hooklog::cli::{Cli, Command as Sub};
use hooklog::manifest::check::RULES;
use hooklog::manifest::podspec;
use serde_json::Value;

use crate::util::injected_pod::run_installer;
use crate::util::manifests::{
    injectable, parse, root, run, validate_schema, validate_strictly, validator_input,
    web_deployment,
};
use crate::util::{Daemon, POD_ENV, hooklog, hooklog_bin};
use crate::util::{findings, text};

const IMAGE: &str = "registry.example.com/hooklog:0.1.0";

fn manifests() -> PathBuf {
    root().join("tests/manifests")
}

/// `check --format json`: (exit code, the document).
fn check_json(args: &[&str]) -> (i32, Value) {
    let mut all = vec!["check", "--format", "json"];
    all.extend_from_slice(args);
    let out = run(&all, None);
    let doc = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "check {args:?} did not print JSON ({e}): {}\n{}",
            text(&out.stdout),
            text(&out.stderr)
        )
    });
    (out.status.code().expect("exit code"), doc)
}

/// One line per finding, as the golden files have them.
fn finding_lines(doc: &Value) -> Vec<String> {
    doc["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .map(|f| {
            let o = &f["object"];
            let ns = o["namespace"]
                .as_str()
                .map(|n| format!("{n}/"))
                .unwrap_or_default();
            // An ignore-check annotation's: reported, but it does not count for --fail-on.
            let suppressed = if f.get("suppressed").is_some() {
                " suppressed"
            } else {
                ""
            };
            format!(
                "{} {} {} {ns}{} [{}] {} line {}{suppressed}",
                f["severity"].as_str().unwrap(),
                f["rule"].as_str().unwrap(),
                o["kind"].as_str().unwrap(),
                o["name"].as_str().unwrap(),
                f["container"].as_str().unwrap_or_default(),
                f["path"].as_str().unwrap(),
                f["line"]
            )
        })
        .collect()
}

/// Each golden file: its first line is the command (`# hooklog check ARGS`), the rest the
/// findings it must print, in order.
fn goldens() -> Vec<(PathBuf, Vec<String>, Vec<String>)> {
    let mut out = Vec::new();
    let mut files: Vec<PathBuf> = std::fs::read_dir(manifests().join("expected"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    for f in files {
        let content = std::fs::read_to_string(&f).unwrap();
        let mut lines = content.lines();
        let args: Vec<String> = lines
            .next()
            .and_then(|l| l.strip_prefix("# hooklog check "))
            .unwrap_or_else(|| panic!("{}: first line must be `# hooklog check ARGS`", f.display()))
            .split_whitespace()
            .map(str::to_string)
            .collect();
        out.push((f, args, lines.map(str::to_string).collect()));
    }
    out
}

#[test]
fn corpus_findings_match_the_golden_files() {
    let goldens = goldens();
    let mut seen_rules = BTreeSet::new();
    let mut covered = BTreeSet::new();
    for (golden, args, expected) in &goldens {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (code, doc) = check_json(&args);
        let got = finding_lines(&doc);
        assert_eq!(
            got,
            *expected,
            "{}: `hooklog check {}` found otherwise",
            golden.display(),
            args.join(" ")
        );
        let errors = expected
            .iter()
            .any(|l| l.starts_with("error ") && !l.ends_with(" suppressed"));
        assert_eq!(code, i32::from(errors), "{}: exit code", golden.display());
        for l in expected {
            seen_rules.insert(l.split(' ').nth(1).unwrap().to_string());
        }
        covered.extend(
            args.iter()
                .filter(|a| a.starts_with("tests/"))
                .map(|a| a.to_string()),
        );
    }
    // Every corpus file has a golden file.
    for e in std::fs::read_dir(manifests().join("corpus")).unwrap() {
        let p = e.unwrap().path();
        let rel = p.strip_prefix(root()).unwrap().display().to_string();
        assert!(
            covered.contains(&rel),
            "{rel} has no golden file in tests/manifests/expected/"
        );
    }
    // Every rule fires somewhere in the corpus (the image-root one in its own test below; the
    // one that needs an image's config only with a registry, tests/registry.rs).
    let elsewhere = ["hook-command-not-in-image", "container-command-not-set"];
    for r in RULES.iter().filter(|r| !elsewhere.contains(&r.id)) {
        assert!(
            seen_rules.contains(r.id),
            "no corpus manifest triggers {}",
            r.id
        );
    }
}

#[test]
fn both_incidents_are_found_and_inject_fixes_them() {
    let distroless = "tests/manifests/incidents/distroless-envoy-sleep.yaml";
    // Offline (tests/util sets HOOKLOG_OFFLINE) the image's name decides, a warning; the image
    // read from its registry gives the definitive error (tests/registry.rs).
    let (code, doc) = check_json(&["--fail-on", "warning", distroless]);
    assert_eq!(code, 1);
    let f = &doc["findings"][0];
    assert_eq!(f["severity"], "warning");
    assert_eq!(f["source"], "pattern");
    assert_eq!(f["rule"], "hook-command-in-shell-less-image");
    assert_eq!(f["container"], "envoy");
    assert_eq!(
        f["path"],
        "spec.template.spec.containers[1].lifecycle.preStop"
    );
    assert_eq!(
        f["fix"],
        "use `hooklog sleep 15` (`hooklog inject` does it) or the native `sleep` action on Kubernetes 1.30+"
    );
    let fargate = "tests/manifests/incidents/fargate-proc-1-fd-1.yaml";
    let (code, doc) = check_json(&["--platform", "fargate", fargate]);
    assert_eq!(code, 1);
    assert_eq!(doc["findings"][0]["rule"], "hook-output-to-proc-1");
    assert_eq!(doc["findings"][0]["severity"], "error");
    // Elsewhere it is a warning: a root user can open PID 1's stdout.
    let (code, doc) = check_json(&[fargate]);
    assert_eq!(
        (code, &doc["findings"][0]["severity"]),
        (0, &Value::from("warning"))
    );

    let out = inject(&[distroless], None);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let injected = text(&out.stdout);
    assert_checks_clean(&injected, &[], "after inject");
    // The Fargate incident too: its hook's output goes to hooklog instead of PID 1's.
    let out = inject(&[fargate], None);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_checks_clean(
        &text(&out.stdout),
        &["--platform", "fargate"],
        "after inject",
    );
    let pod = only_template(&text(&out.stdout));
    let cmd = podspec::strings(
        &pod["spec"]["template"]["spec"]["containers"][0]["lifecycle"]["preStop"]["exec"]["command"],
    );
    assert!(cmd.last().unwrap().contains("> /dev/stdout"), "{cmd:?}");
    assert!(text(&out.stderr).contains("now go to its own /dev/stdout"));

    let spec = &only_template(&injected)["spec"]["template"]["spec"];
    let cmd = pre_stop(spec, "containers", "envoy");
    let inner = &cmd[cmd.iter().position(|a| a == "--").unwrap() + 1..];
    assert_eq!(inner, ["/hooklog-bin/hooklog", "sleep", "15"]);
}

/// `hooklog inject --image IMAGE ARGS` with `stdin`.
fn inject(args: &[&str], stdin: Option<&str>) -> std::process::Output {
    let mut all = vec!["inject", "--image", IMAGE];
    all.extend_from_slice(args);
    run(&all, stdin)
}

/// Each of `parts` is in `said` (what a command wrote), which a failure shows.
fn assert_says(said: &str, parts: &[&str]) {
    for part in parts {
        assert!(said.contains(part), "{part:?} not in:\n{said}");
    }
}

/// `check --format json ARGS -` of `yaml` exits 0 and finds nothing; `what` names the case.
fn assert_checks_clean(yaml: &str, args: &[&str], what: &str) {
    let (code, doc) = check_json_stdin_with(yaml, args);
    findings::assert_clean(code, &doc, what);
}

fn check_json_stdin(input: &str) -> (i32, Value) {
    check_json_stdin_with(input, &[])
}

fn check_json_stdin_with(input: &str, args: &[&str]) -> (i32, Value) {
    let mut all = vec!["check", "--format", "json"];
    all.extend_from_slice(args);
    all.push("-");
    let out = run(&all, Some(input));
    let doc = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", text(&out.stderr)));
    (out.status.code().unwrap(), doc)
}

fn only_template(yaml: &str) -> Value {
    let docs = parse(yaml);
    assert_eq!(docs.len(), 1);
    docs.into_iter().next().unwrap()
}

/// Every hooklog command line in a pod spec: the hooklog image's containers (ENTRYPOINT
/// /usr/local/bin/hooklog) and exec hooks calling hooklog, with the commands they wrap.
fn hooklog_argvs(spec: &Value) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for c in podspec::containers(spec, "spec") {
        let (command, args) = c.argv();
        if command.is_empty() && c.image() == IMAGE {
            out.push(
                std::iter::once("/usr/local/bin/hooklog".to_string())
                    .chain(args)
                    .collect(),
            );
        }
        for hook in ["preStop", "postStart"] {
            let cmd = podspec::strings(&c.value["lifecycle"][hook]["exec"]["command"]);
            if cmd.first().is_some_and(|p| p.ends_with("/hooklog")) {
                if let Some(i) = cmd.iter().position(|a| a == "--")
                    && cmd.get(i + 1).is_some_and(|p| p.ends_with("/hooklog"))
                {
                    out.push(cmd[i + 1..].to_vec());
                }
                out.push(cmd);
            }
        }
    }
    out
}

#[test]
fn inject_outputs_validate_are_idempotent_parse_and_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let mut to_validate: Vec<PathBuf> = Vec::new();
    for file in injectable() {
        let original = parse(&std::fs::read_to_string(root().join(&file)).unwrap());
        let before = finding_lines(&check_json(&[&file]).1);
        for sidecar in ["native", "classic"] {
            let out = inject(&["--sidecar", sidecar, &file], None);
            assert!(out.status.success(), "{file}: {}", text(&out.stderr));
            let injected = text(&out.stdout);
            let report = text(&out.stderr);
            assert!(
                report.contains(" injected"),
                "{file}: the report on stderr: {report}"
            );

            // Idempotent: injecting again changes nothing, byte for byte.
            let again = inject(&["--sidecar", sidecar, "-"], Some(&injected));
            assert!(again.status.success(), "{}", text(&again.stderr));
            assert_eq!(
                text(&again.stdout),
                injected,
                "{file}: inject is not idempotent"
            );

            // Undone exactly, by `uninject` and by `inject --undo`.
            for undo in [&["uninject", "-"][..], &["inject", "--undo", "-"][..]] {
                let back = run(undo, Some(&injected));
                assert!(back.status.success(), "{}", text(&back.stderr));
                assert_eq!(
                    parse(&text(&back.stdout)),
                    original,
                    "{file}: {undo:?} does not restore"
                );
            }

            // Pods inject leaves unchanged, with a note: a grace period that cannot hold their
            // hooks and hooklog, or a Job that a classic sidecar would never let complete.
            let left: BTreeSet<String> = report
                .lines()
                .filter_map(|l| l.strip_suffix(" not injected, unchanged"))
                .filter_map(|l| l.split('"').nth(1))
                .map(str::to_string)
                .collect();
            let original_templates: Vec<Value> = original
                .iter()
                .flat_map(|d| {
                    podspec::templates(d)
                        .into_iter()
                        .map(|t| d.pointer(&t.spec_pointer).unwrap().clone())
                })
                .collect();

            // Every hooklog command line parses with hooklog's own parser.
            let mut i = 0;
            for doc in parse(&injected) {
                for t in podspec::templates(&doc) {
                    let spec = doc.pointer(&t.spec_pointer).unwrap();
                    if left.contains(&t.object.qualified_name()) {
                        assert_eq!(spec, &original_templates[i], "{file}: changed, though left");
                        i += 1;
                        continue;
                    }
                    i += 1;
                    let argvs = hooklog_argvs(spec);
                    assert!(
                        argvs.len() >= 2,
                        "{file}: no sidecar or installer: {argvs:?}"
                    );
                    for argv in argvs {
                        Cli::try_parse_from(&argv)
                            .unwrap_or_else(|e| panic!("{file}: hooklog rejects {argv:?}: {e}"));
                    }
                }
            }

            // Nothing new for check to say: no wiring or budget finding, no new error.
            let after = finding_lines(&check_json_stdin(&injected).1);
            let errors_before: BTreeSet<String> = before
                .iter()
                .filter(|l| l.starts_with("error "))
                .map(|l| {
                    l.split(" line ")
                        .next()
                        .unwrap()
                        .replace("containers[", "c[")
                })
                .collect();
            // check agrees with inject about the pods it left: it finds them as before.
            let about_left = |l: &str| left.iter().any(|n| l.contains(&format!(" {n} [")));
            for l in after.iter().filter(|l| about_left(l)) {
                let same = |b: &String| b.split(" line ").next() == l.split(" line ").next();
                assert!(
                    before.iter().any(same),
                    "{file} ({sidecar}): {l} after inject"
                );
            }
            // A classic hooklog stops before a native sidecar's hook runs: inject leaves that
            // hook with a note, and check says it is not reported.
            let noted = |l: &str| {
                l.contains(" hook-not-reported ")
                    && l.split('[')
                        .nth(1)
                        .and_then(|r| r.split(']').next())
                        .is_some_and(|c| {
                            report.contains(&format!(
                                "{c}: a native sidecar's preStop, left unwrapped"
                            ))
                        })
            };
            for l in after.iter().filter(|l| !about_left(l) && !noted(l)) {
                for rule in [
                    "hook-not-reported",
                    "sidecar-",
                    "hooklog-",
                    "hook-unbounded",
                    "hook-container-not-in-peers",
                    "grace-period-cannot-fit-hooklog",
                    "job-container-never-ends",
                ] {
                    assert!(
                        !l.contains(&format!(" {rule}")),
                        "{file} ({sidecar}) after inject: {l}"
                    );
                }
                if l.starts_with("error ") {
                    let rule = l.split(' ').nth(1).unwrap();
                    assert!(
                        errors_before
                            .iter()
                            .any(|b| b.split(' ').nth(1) == Some(rule)),
                        "{file} ({sidecar}): a new error after inject: {l}"
                    );
                }
            }

            let out_file = dir.path().join(format!(
                "{}-{sidecar}.yaml",
                file.replace('/', "_").trim_end_matches(".yaml")
            ));
            std::fs::write(&out_file, validator_input(&injected)).unwrap();
            to_validate.push(out_file);
        }
        let original_file = dir.path().join(file.replace('/', "_"));
        std::fs::write(
            &original_file,
            validator_input(&std::fs::read_to_string(root().join(&file)).unwrap()),
        )
        .unwrap();
        to_validate.push(original_file);
    }
    validate_strictly(&to_validate);
}

#[test]
fn inject_refuses_names_it_would_overwrite_and_notes_what_it_cannot_wrap() {
    for (file, name) in [
        (
            "tests/manifests/corpus/statefulset-classic.yaml",
            "hooklog-install",
        ),
        ("tests/manifests/corpus/multi-document.yaml", "hooklog"),
    ] {
        let out = inject(&[file], None);
        assert_eq!(out.status.code(), Some(64), "{file}");
        assert!(out.stdout.is_empty(), "nothing written on an error");
        let err = text(&out.stderr);
        assert!(
            err.contains(&format!("a container named \"{name}\" exists already")),
            "{err}"
        );
        assert!(
            err.starts_with(&format!("hooklog: {file}:")),
            "names the file: {err}"
        );
    }
    let out = inject(&["tests/manifests/corpus/http-and-native-sleep.yaml"], None);
    assert_says(
        &text(&out.stderr),
        &[
            "gateway: preStop is an httpGet/tcpSocket call, left as it is",
            "lb-wait: preStop is the native sleep action (10s), left as it is",
        ],
    );
    let pod = only_template(&text(&out.stdout));
    assert_eq!(
        pod["spec"]["containers"][0]["lifecycle"]["preStop"]["httpGet"]["port"],
        9000
    );
    let out = inject(&["tests/manifests/corpus/multi-document.yaml"], None);
    assert_eq!(out.status.code(), Some(64));
    // Other kinds pass through, reported as skipped.
    let out = inject(&["tests/manifests/corpus/list.yaml"], None);
    assert_says(&text(&out.stderr), &["service \"shop/cache\" skipped"]);
}

#[test]
fn prestop_sleep_gives_a_container_the_load_balancer_wait() {
    let out = inject(
        &[
            "--prestop-sleep",
            "checkout=20s",
            "tests/manifests/incidents/distroless-envoy-sleep.yaml",
        ],
        None,
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let doc = only_template(&text(&out.stdout));
    let c = &doc["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(c["name"], "checkout");
    let cmd = podspec::strings(&c["lifecycle"]["preStop"]["exec"]["command"]);
    assert_eq!(
        cmd[cmd.len() - 3..],
        ["/hooklog-bin/hooklog", "sleep", "20s"]
    );
    assert!(cmd.contains(&"--container".to_string()) && cmd.contains(&"checkout".to_string()));
    let (code, doc) = check_json_stdin(&text(&out.stdout));
    assert_eq!(
        (code, doc["counts"]["error"].as_u64()),
        (0, Some(0)),
        "{doc:#}"
    );
    let bad = inject(&["--prestop-sleep", "checkout=soon", "-"], Some(""));
    assert_eq!(bad.status.code(), Some(64));
}

#[test]
fn usage_errors_and_unparseable_input_exit_64_naming_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.yaml");
    std::fs::write(
        &bad,
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: [unclosed\n",
    )
    .unwrap();
    let out = run(&["check", bad.to_str().unwrap()], None);
    assert_eq!(out.status.code(), Some(64));
    let err = text(&out.stderr);
    assert!(
        err.starts_with(&format!("hooklog: {}:", bad.display())),
        "{err}"
    );
    let line: usize = err
        .split(':')
        .nth(2)
        .unwrap()
        .parse()
        .expect("a line number");
    assert!((4..=5).contains(&line), "{err}");
    let out = inject(&[bad.to_str().unwrap()], None);
    assert_eq!(out.status.code(), Some(64));
    assert!(out.stdout.is_empty());
    let out = run(&["check", "--format", "xml", "k8s"], None);
    assert_eq!(out.status.code(), Some(64));
    let out = run(&["check", "/nonexistent/manifest.yaml"], None);
    assert_eq!(out.status.code(), Some(64));
    assert!(text(&out.stderr).contains("/nonexistent/manifest.yaml"));
    let out = run(&["inject", "k8s"], None);
    assert_eq!(out.status.code(), Some(64), "inject without --image");
    assert!(text(&out.stderr).contains("--image"));
    let out = run(&["check", "--image-root", "nonsense", "k8s"], None);
    assert_eq!(out.status.code(), Some(64));
    // --fail-on: a warning fails only when asked.
    let list = "tests/manifests/corpus/list.yaml";
    assert_eq!(run(&["check", list], None).status.code(), Some(0));
    assert_eq!(
        run(&["check", "--fail-on", "warning", list], None)
            .status
            .code(),
        Some(1)
    );
    assert_eq!(
        run(&["check", "--fail-on", "info", "k8s"], None)
            .status
            .code(),
        Some(0)
    );
}

#[test]
fn check_reads_stdin_and_prints_text_without_colour_to_a_pipe() {
    let input =
        std::fs::read_to_string(manifests().join("incidents/distroless-envoy-sleep.yaml")).unwrap();
    let out = run(&["check", "-"], Some(&input));
    // The image is not read (tests/util sets HOOKLOG_OFFLINE): its name's pattern only warns.
    assert_eq!(out.status.code(), Some(0));
    let t = text(&out.stdout);
    assert!(t.starts_with("-: Deployment shop/checkout\n"), "{t}");
    assert!(
        t.contains("warning hook-command-in-shell-less-image [envoy]"),
        "{t}"
    );
    assert!(!t.contains('\x1b'), "no colour on a pipe");
    assert!(
        t.ends_with("0 error(s), 1 warning(s), 1 info in 1 pod template(s)\n"),
        "{t}"
    );
}

#[test]
fn json_output_matches_its_schema() {
    let schema = manifests().join("check-output.schema.json");
    let (_, doc) = check_json(&["tests/manifests/corpus", "tests/manifests/incidents"]);
    assert!(doc["findings"].as_array().unwrap().len() > 20);
    validate_schema(&schema, &doc);
    // The schema can fail: a finding without its fix is rejected.
    let mut broken = doc.clone();
    broken["findings"][0].as_object_mut().unwrap().remove("fix");
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("x.json");
    std::fs::write(&f, broken.to_string()).unwrap();
    let st = Command::new("python3")
        .args(["-c", "import json,sys,jsonschema; jsonschema.validate(json.load(open(sys.argv[2])), json.load(open(sys.argv[1])))"])
        .arg(&schema)
        .arg(&f)
        .output()
        .unwrap();
    assert!(
        !st.status.success(),
        "the schema accepted a finding without `fix`"
    );
}

/// A root file system for `--image-root`, made here.
fn make_roots(dir: &Path) -> BTreeMap<&'static str, PathBuf> {
    use std::os::unix::fs::symlink;
    let which = |p: &str| -> PathBuf {
        let out = Command::new("sh")
            .args(["-c", &format!("command -v {p}")])
            .output()
            .unwrap();
        PathBuf::from(text(&out.stdout).trim())
    };
    // /bin/sh and sleep, real binaries.
    let full = dir.join("full");
    std::fs::create_dir_all(full.join("bin")).unwrap();
    std::fs::copy(which("sh"), full.join("bin/sh")).unwrap();
    std::fs::copy(which("sleep"), full.join("bin/sleep")).unwrap();
    // Only a static binary, as distroless/static or FROM scratch images.
    let only_static = dir.join("static");
    std::fs::create_dir_all(&only_static).unwrap();
    std::fs::copy(hooklog_bin(), only_static.join("hooklog")).unwrap();
    // sleep a symlink to a path the host has but the root lacks; sh one that climbs out of the
    // root (in a chroot `..` stops at the top, so it points at itself); cat one to nowhere.
    let broken = dir.join("broken");
    std::fs::create_dir_all(broken.join("bin")).unwrap();
    symlink(which("sleep"), broken.join("bin/sleep")).unwrap();
    symlink("../../../../../../bin/sh", broken.join("bin/sh")).unwrap();
    symlink("nowhere", broken.join("bin/cat")).unwrap();
    // The static root as `docker export` writes it.
    let tar = dir.join("static.tar");
    let st = Command::new("tar")
        .arg("-C")
        .arg(&only_static)
        .arg("-cf")
        .arg(&tar)
        .arg(".")
        .status()
        .unwrap();
    assert!(st.success());
    BTreeMap::from([
        ("full", full),
        ("static", only_static),
        ("broken", broken),
        ("tar", tar),
    ])
}

#[test]
fn image_roots_resolve_commands_as_the_runtime_does() {
    let dir = tempfile::tempdir().unwrap();
    let roots = make_roots(dir.path());
    let manifest = dir.path().join("pods.yaml");
    let pod = |name: &str, image: &str, cmd: &str, env: &str| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  containers:\n    - name: {name}\n      image: {image}\n{env}      lifecycle:\n        preStop:\n          exec:\n            command: {cmd}\n"
        )
    };
    let docs = [
        pod("full-sleep", "example/full:1", r#"["sleep", "5"]"#, ""),
        pod(
            "full-sh",
            "example/full:1",
            r#"["/bin/sh", "-c", "sleep 1"]"#,
            "",
        ),
        pod(
            "full-path",
            "example/full:1",
            r#"["sleep", "5"]"#,
            "      env:\n        - name: PATH\n          value: /opt/bin\n",
        ),
        pod("static-sleep", "example/static:1", r#"["sleep", "5"]"#, ""),
        pod(
            "static-self",
            "example/static:1",
            r#"["/hooklog", "sleep", "5"]"#,
            "",
        ),
        pod("tar-sleep", "example/tar:1", r#"["sleep", "5"]"#, ""),
        pod("broken-sleep", "example/broken:1", r#"["sleep", "5"]"#, ""),
        pod(
            "broken-sh",
            "example/broken:1",
            r#"["sh", "-c", "true"]"#,
            "",
        ),
        pod("broken-cat", "example/broken:1", r#"["/bin/cat", "x"]"#, ""),
    ];
    std::fs::write(&manifest, docs.join("---\n")).unwrap();
    let mut args = vec!["--no-default-shell-less".to_string()];
    for (k, p) in &roots {
        args.push("--image-root".into());
        args.push(format!("example/{k}:1={}", p.display()));
    }
    args.push(manifest.display().to_string());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, doc) = check_json(&args);
    assert_eq!(code, 1);
    let found: BTreeMap<String, String> = findings::of_rule(&doc, "hook-command-not-in-image")
        .into_iter()
        .map(|f| {
            (
                f["container"].as_str().unwrap().to_string(),
                f["message"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let names: Vec<&str> = found.keys().map(String::as_str).collect();
    assert_eq!(
        names,
        [
            "broken-cat",
            "broken-sh",
            "broken-sleep",
            "full-path",
            "static-sleep",
            "tar-sleep"
        ],
        "{found:#?}"
    );
    for (container, says) in [
        // The paths searched are named: the runtime's default PATH, or the container's own.
        ("static-sleep", "tried /usr/local/sbin/sleep"),
        ("static-sleep", "/bin/sleep (/bin does not exist)"),
        ("full-path", "tried /opt/bin/sleep"),
        ("tar-sleep", "/bin/sleep"),
        ("broken-sleep", "does not exist"),
        ("broken-sh", "too many levels of symbolic links"),
        ("broken-cat", "/bin/nowhere does not exist"),
    ] {
        assert!(
            found[container].contains(says),
            "{container}: {}",
            found[container]
        );
    }
    assert_eq!(
        findings::all(&doc)
            .iter()
            .find(|f| f["container"] == "static-sleep")
            .unwrap()["fix"],
        "use `hooklog sleep 5` (`hooklog inject` does it) or the native `sleep` action on Kubernetes 1.30+"
    );
    // A root that is neither a folder nor a tar is a usage error.
    let junk = dir.path().join("junk");
    std::fs::write(&junk, "not a tar").unwrap();
    let out = run(
        &[
            "check",
            "--image-root",
            &format!("x={}", junk.display()),
            "k8s",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(64), "{}", text(&out.stderr));
}

/// inject looks hook programs up in `--image-root` as check does, and says so on stderr only.
#[test]
fn inject_warns_from_an_image_root_and_writes_the_same_manifests() {
    let dir = tempfile::tempdir().unwrap();
    let roots = make_roots(dir.path());
    let pod = |name: &str, cmd: &str| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  containers:\n    - name: {name}\n      image: example/static:1\n      lifecycle:\n        preStop:\n          exec:\n            command: {cmd}\n"
        )
    };
    let manifest = dir.path().join("pods.yaml");
    std::fs::write(
        &manifest,
        [
            pod("shell", r#"["sh", "-c", "sleep 1"]"#),
            pod("bare", r#"["sleep", "5"]"#),
        ]
        .join("---\n"),
    )
    .unwrap();
    let m = manifest.to_str().unwrap();
    let root = format!("example/static:1={}", roots["static"].display());
    let with = inject(&["--image-root", &root, m], None);
    assert!(with.status.success(), "{}", text(&with.stderr));
    let stderr = text(&with.stderr);
    let warnings: Vec<&str> = stderr.lines().filter(|l| l.contains("warning")).collect();
    assert_eq!(warnings.len(), 1, "{stderr}");
    for part in ["container \"shell\"", "`sh`", "by image-root", "exit 127"] {
        assert!(warnings[0].contains(part), "{part}: {}", warnings[0]);
    }
    let fixed: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("failed before"))
        .collect();
    assert_eq!(fixed.len(), 1, "{stderr}");
    assert!(fixed[0].contains("container \"bare\""), "{}", fixed[0]);
    let without = inject(&[m], None);
    assert!(
        !text(&without.stderr).contains("warning"),
        "{}",
        text(&without.stderr)
    );
    assert_eq!(with.stdout, without.stdout);
}

/// Maps a pod path to the test's emptyDir stand-ins.
fn in_pod(root: &Path, arg: &str) -> String {
    for prefix in ["/hooklog", "/hooklog-bin", "/etc/hooklog-podinfo"] {
        if arg == prefix || arg.starts_with(&format!("{prefix}/")) {
            return format!("{}{arg}", root.display());
        }
    }
    arg.to_string()
}

#[test]
fn an_injected_pod_runs_its_hooks_and_every_peer_is_ok() {
    let out = inject(&["tests/manifests/e2e/checkout.yaml"], None);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let doc = only_template(&text(&out.stdout));
    let spec = &doc["spec"]["template"]["spec"];
    let pod = tempfile::tempdir().unwrap();
    let containers = podspec::containers(spec, "spec");

    // The init container, as the kubelet runs it: the image's ENTRYPOINT with its args.
    run_installer(&containers, |a| in_pod(pod.path(), a));
    let installed = pod.path().join("hooklog-bin/hooklog");
    assert!(installed.is_file());

    // The native sidecar, configured exactly as inject wrote it, with the Downward API.
    let sidecar = containers.iter().find(|c| c.name == "hooklog").unwrap();
    assert!(sidecar.native_sidecar());
    let podinfo = pod.path().join("etc/hooklog-podinfo");
    std::fs::create_dir_all(&podinfo).unwrap();
    std::fs::write(podinfo.join("labels"), "app=\"checkout\"\n").unwrap();
    std::fs::write(podinfo.join("annotations"), "").unwrap();
    let run_args: Vec<String> = sidecar
        .argv()
        .1
        .iter()
        .map(|a| in_pod(pod.path(), a))
        .collect();
    let parsed =
        Cli::try_parse_from(std::iter::once("hooklog".to_string()).chain(run_args.clone()))
            .unwrap();
    let Sub::Run(run_cfg) = parsed.command else {
        panic!("the sidecar does not run `hooklog run`")
    };
    assert_eq!(run_cfg.peers, ["app", "envoy"]);
    let env: Vec<&str> = sidecar.value["env"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(env, POD_ENV.map(|(k, _)| k));
    let mut cmd = hooklog();
    cmd.args(&run_args).envs(POD_ENV);
    let mut daemon = Daemon::spawn(cmd);

    // Pod deletion: every preStop hook at once, with an empty PATH for envoy (distroless: no
    // sleep anywhere, only the installed hooklog).
    let mut hooks = Vec::new();
    for c in containers.iter().filter(|c| !c.init) {
        let argv: Vec<String> =
            podspec::strings(&c.value["lifecycle"]["preStop"]["exec"]["command"])
                .iter()
                .map(|a| in_pod(pod.path(), a))
                .collect();
        assert_eq!(
            argv[0],
            installed.display().to_string(),
            "{}: runs the installed copy",
            c.name
        );
        let mut p = Command::new(&argv[0]);
        p.args(&argv[1..]).env_clear();
        p.env(
            "PATH",
            if c.name == "envoy" {
                "/nonexistent"
            } else {
                "/usr/bin:/bin"
            },
        );
        hooks.push((c.name.clone(), p.spawn().unwrap()));
    }
    for (name, mut child) in hooks {
        let st = child.wait().unwrap();
        assert!(st.success(), "{name}'s hook failed: {st}");
    }
    // A native sidecar gets SIGTERM once the app containers are gone.
    daemon.terminate();
    let st = daemon.wait_exit(Duration::from_secs(10));
    assert!(st.success(), "{st}");
    let records = daemon.records();
    let summary = records.last().expect("records");
    assert_eq!(summary["event"], "hooks.summary", "{records:#?}");
    assert_eq!(summary["counts"]["ok"], 2, "{summary:#}");
    for peer in ["app", "envoy"] {
        assert_eq!(summary["peers"][peer]["outcome"], "ok", "{summary:#}");
    }
    assert!(
        records
            .iter()
            .any(|r| r["container_name"] == "app" && r["message"] == "draining connections"),
        "the app hook's output is reported: {records:#?}"
    );
    assert!(
        records.iter().any(|r| r["event"] == "hook.finished"
            && r["container_name"] == "envoy"
            && r["outcome"] == "ok"),
        "{records:#?}"
    );
    assert_eq!(summary["kubernetes"]["labels"]["app"], "checkout");
}

#[test]
fn sarif_output_matches_the_sarif_2_1_0_schema() {
    let schema = root().join("tests/sarif/sarif-schema-2.1.0.json");
    let out = run(
        &[
            "check",
            "--format",
            "sarif",
            "tests/manifests/corpus",
            "tests/manifests/incidents",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(1));
    let sarif: Value = serde_json::from_slice(&out.stdout).expect("SARIF is JSON");
    validate_schema(&schema, &sarif);
    let run0 = &sarif["runs"][0];
    let rules = run0["tool"]["driver"]["rules"].as_array().unwrap();
    assert_eq!(rules.len(), RULES.len());
    let results = run0["results"].as_array().unwrap();
    assert!(results.len() > 20);
    for r in results {
        let i = r["ruleIndex"].as_u64().unwrap() as usize;
        assert_eq!(rules[i]["id"], r["ruleId"], "ruleIndex points at its rule");
        let loc = &r["locations"][0]["physicalLocation"];
        let uri = loc["artifactLocation"]["uri"].as_str().unwrap();
        assert!(
            root().join(uri).is_file(),
            "{uri} is a file relative to the repository"
        );
        assert!(loc["region"]["startLine"].as_u64().unwrap() >= 1);
    }
    // The schema can fail: a result level SARIF does not have is rejected.
    let mut broken = sarif.clone();
    broken["runs"][0]["results"][0]["level"] = Value::from("fatal");
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("broken.sarif");
    std::fs::write(&f, broken.to_string()).unwrap();
    let st = Command::new("python3")
        .args([
            "-c",
            "import json,sys,jsonschema; jsonschema.Draft4Validator(json.load(open(sys.argv[1]))).validate(json.load(open(sys.argv[2])))",
        ])
        .arg(&schema)
        .arg(&f)
        .output()
        .unwrap();
    assert!(!st.status.success(), "the schema accepted level \"fatal\"");
}

/// The container named `name` in a pod spec's `initContainers` or `containers`.
fn container<'a>(spec: &'a Value, name: &str) -> (&'a Value, bool) {
    for (field, init) in [("initContainers", true), ("containers", false)] {
        if let Some(c) = spec[field]
            .as_array()
            .into_iter()
            .flatten()
            .find(|c| c["name"] == name)
        {
            return (c, init);
        }
    }
    panic!("no container {name}: {spec:#}")
}

/// `--flag value` and `--flag=value` pairs of an argv.
fn flags(argv: &[String]) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut it = argv.iter().peekable();
    while let Some(a) = it.next() {
        if a == "--" {
            break;
        }
        if let Some(f) = a.strip_prefix("--") {
            match f.split_once('=') {
                Some((k, v)) => out.insert(k.to_string(), v.to_string()),
                None => match it.peek() {
                    Some(v) if !v.starts_with("--") => {
                        out.insert(f.to_string(), it.next().unwrap().clone())
                    }
                    _ => out.insert(f.to_string(), String::new()),
                },
            };
        }
    }
    out
}

#[test]
fn inject_reproduces_the_wiring_of_the_k8s_manifests() {
    let before = "tests/manifests/e2e/api-server-before.yaml";
    for (sidecar, shipped) in [
        ("native", "k8s/api-server-native-sidecar.yaml"),
        ("classic", "k8s/api-server-classic-sidecar.yaml"),
    ] {
        let out = inject(&["--sidecar", sidecar, before], None);
        assert!(out.status.success(), "{}", text(&out.stderr));
        let ours = only_template(&text(&out.stdout));
        let theirs = parse(&std::fs::read_to_string(root().join(shipped)).unwrap())
            .into_iter()
            .find(|d| d["kind"] == "Deployment")
            .unwrap();
        let ours = &ours["spec"]["template"]["spec"];
        let theirs = &theirs["spec"]["template"]["spec"];

        // The sidecar: where it runs, its flags' values, env, resources, securityContext.
        let (s, s_init) = container(ours, "hooklog");
        let (t, t_init) = container(theirs, "hooklog");
        assert_eq!(
            (s_init, &s["restartPolicy"]),
            (t_init, &t["restartPolicy"]),
            "{sidecar}"
        );
        let (sf, tf) = (
            flags(&podspec::strings(&s["args"])),
            flags(&podspec::strings(&t["args"])),
        );
        assert_eq!(sf["peers"], tf["peers"], "{sidecar}: --peers");
        // k8s/ bounds the upload at 30 s by hand; inject, knowing nothing of its length, lets it
        // run until 2 s before the kubelet's own kill (60 s), and picks --grace to fit that.
        let grace = if sidecar == "native" { "1s" } else { "59s" };
        assert_eq!(sf["grace"], grace, "{sidecar}: --grace");
        for k in ["file", "socket", "podinfo"] {
            assert!(sf.contains_key(k) && tf.contains_key(k), "{sidecar}: --{k}");
        }
        let downward = |c: &Value| -> Vec<(String, String)> {
            c["env"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|e| e["valueFrom"]["fieldRef"].is_object())
                .map(|e| {
                    (
                        e["name"].as_str().unwrap().to_string(),
                        e["valueFrom"]["fieldRef"]["fieldPath"]
                            .as_str()
                            .unwrap()
                            .to_string(),
                    )
                })
                .collect()
        };
        assert_eq!(downward(s), downward(t), "{sidecar}: Downward API env");
        assert_eq!(s["resources"], t["resources"], "{sidecar}: resources");
        for (k, v) in t["securityContext"].as_object().unwrap() {
            assert_eq!(
                &s["securityContext"][k], v,
                "{sidecar}: securityContext.{k}"
            );
        }
        // The installer.
        let (si, _) = container(ours, "hooklog-install");
        let (ti, _) = container(theirs, "hooklog-install");
        assert_eq!(si["args"][0], ti["args"][0]);
        assert_eq!(si["resources"], ti["resources"]);
        assert_eq!(
            si["securityContext"]["runAsUser"],
            ti["securityContext"]["runAsUser"]
        );
        // The hooks: the unknown-length upload is never cut before the kubelet would (60 s, less
        // the 2 s to report its end), envoy sleeps with hooklog.
        let (sa, _) = container(ours, "api-server");
        let (ta, _) = container(theirs, "api-server");
        let cmd = |c: &Value| podspec::strings(&c["lifecycle"]["preStop"]["exec"]["command"]);
        assert_eq!(flags(&cmd(sa))["timeout"], "58s");
        assert_eq!(
            cmd(sa)[cmd(sa).len() - 3..],
            cmd(ta)[cmd(ta).len() - 3..],
            "the upload runs unchanged"
        );
        let (se, _) = container(ours, "envoy");
        let envoy = cmd(se);
        assert_eq!(
            envoy[envoy.len() - 3..],
            ["/hooklog-bin/hooklog", "sleep", "20"]
        );
        // The volumes: the same emptyDir limit and Downward API items.
        let vol = |spec: &Value, kind: &str| -> Value {
            spec["volumes"]
                .as_array()
                .unwrap()
                .iter()
                .find(|v| {
                    v.get(kind).is_some()
                        && v["name"]
                            .as_str()
                            .is_some_and(|n| n.contains("shared") || n.contains("podinfo"))
                })
                .unwrap()[kind]
                .clone()
        };
        assert_eq!(vol(ours, "emptyDir"), vol(theirs, "emptyDir"));
        assert_eq!(vol(ours, "downwardAPI"), vol(theirs, "downwardAPI"));
    }
}

/// The template's spec of the only document of `yaml`.
fn template_spec(yaml: &str) -> Value {
    let doc = only_template(yaml);
    let t = &podspec::templates(&doc)[0];
    doc.pointer(&t.spec_pointer).unwrap().clone()
}

fn pre_stop(spec: &Value, list: &str, name: &str) -> Vec<String> {
    let c = spec[list]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no {list} {name}: {spec:#}"));
    podspec::strings(&c["lifecycle"]["preStop"]["exec"]["command"])
}

/// inject gave hooks of unknown length `--timeout` = half the grace period: a `curl ... &&
/// sleep 20` drain in the default 30 s was killed after 15 s, and NATS's 60 s lame duck in a
/// 60 s period got 30 s.
#[test]
fn regression_inject_cut_a_drain_sleep_short() {
    let drain = "tests/manifests/corpus/drain-curl-sleep.yaml";
    let out = inject(&[drain], None);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let cmd = pre_stop(
        &template_spec(&text(&out.stdout)),
        "containers",
        "storefront",
    );
    // 2 s before the kubelet's own kill at 30 s, past the 20 s sleep.
    assert_eq!(flags(&cmd)["timeout"], "28s", "{cmd:?}");
    let original = ["/bin/sh", "-c"];
    assert_eq!(cmd[cmd.len() - 3..cmd.len() - 1], original, "prefix only");
    assert!(text(&out.stderr).contains("`--timeout 28s`: 2s before the kubelet's own kill"));
    assert_checks_clean(&text(&out.stdout), &[], drain);

    // The lame duck takes the whole period: nothing fits, so nothing changes, and both say so.
    for (file, needed) in [
        ("tests/manifests/corpus/nats-lame-duck.yaml", "62"),
        ("tests/manifests/corpus/cilium-quick-install.yaml", "2"),
    ] {
        for sidecar in ["native", "classic"] {
            let out = inject(&["--sidecar", sidecar, file], None);
            assert!(out.status.success(), "{}", text(&out.stderr));
            assert_eq!(
                parse(&text(&out.stdout)),
                parse(&std::fs::read_to_string(root().join(file)).unwrap()),
                "{file}: left unchanged"
            );
            let err = text(&out.stderr);
            assert!(err.contains("not injected, unchanged"), "{err}");
            assert!(
                err.contains(&format!(
                    "raise terminationGracePeriodSeconds to at least {needed}"
                )),
                "{err}"
            );
        }
        let (code, doc) = check_json(&[file]);
        assert_eq!(code, 0);
        let f = findings::first(&doc, "grace-period-cannot-fit-hooklog");
        assert!(
            f["fix"]
                .as_str()
                .unwrap()
                .contains(&format!("at least {needed}")),
            "{f}"
        );
    }
}

const JOB_AND_DEPLOYMENT: &str = concat!(
    "\
apiVersion: batch/v1
kind: Job
metadata:
  name: migrate
spec:
  template:
    spec:
      restartPolicy: Never
      containers:
        - name: migrate
          image: registry.example.com/migrate:1
          lifecycle:
            preStop:
              exec:
                command: [/app/release-lock]
---
",
    web_deployment!(image: "registry.example.com/web:1\n")
);

/// `--sidecar classic` put `hooklog run` into Jobs as a regular container: the Job never
/// completed. The cluster's version now decides the form.
#[test]
fn regression_a_classic_sidecar_kept_a_job_from_completing() {
    let native = |spec: &Value| {
        spec["initContainers"].as_array().is_some_and(|l| {
            l.iter()
                .any(|c| c["name"] == "hooklog" && c["restartPolicy"] == "Always")
        })
    };
    let dir = tempfile::tempdir().unwrap();
    let mut written = Vec::new();
    // No version: 1.29+ is assumed, both get a native sidecar.
    for args in [&[][..], &["--kubernetes-version", "1.29"][..]] {
        let mut all = vec!["inject", "--image", IMAGE];
        all.extend_from_slice(args);
        all.push("-");
        let out = run(&all, Some(JOB_AND_DEPLOYMENT));
        assert!(out.status.success(), "{}", text(&out.stderr));
        let docs = parse(&text(&out.stdout));
        assert!(native(&docs[0]["spec"]["template"]["spec"]), "{args:?}");
        assert!(native(&docs[1]["spec"]["template"]["spec"]), "{args:?}");
        written.push(text(&out.stdout));
    }
    // 1.28: classic for the Deployment, the Job left as it was, with a note.
    let out = inject(
        &["--kubernetes-version", "1.28", "-"],
        Some(JOB_AND_DEPLOYMENT),
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let docs = parse(&text(&out.stdout));
    assert_eq!(docs[0], parse(JOB_AND_DEPLOYMENT)[0]);
    assert_says(
        &text(&out.stderr),
        &[
            "job \"migrate\" not injected, unchanged",
            "a classic sidecar never ends, so the Job would never complete",
        ],
    );
    let web = &docs[1]["spec"]["template"]["spec"];
    assert!(!native(web));
    assert!(
        web["containers"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["name"] == "hooklog")
    );
    let (code, doc) = check_json_stdin_with(&text(&out.stdout), &["--kubernetes-version", "1.28"]);
    assert_eq!(code, 0, "{doc:#}");
    written.push(text(&out.stdout));
    let files: Vec<PathBuf> = written
        .iter()
        .enumerate()
        .map(|(i, yaml)| {
            let f = dir.path().join(format!("job-{i}.yaml"));
            std::fs::write(&f, validator_input(yaml)).unwrap();
            f
        })
        .collect();
    validate_strictly(&files);
    // A native sidecar for a 1.28 cluster is refused: it would keep the pod Pending.
    let out = inject(
        &["--sidecar", "native", "--kubernetes-version", "1.28", "-"],
        Some(JOB_AND_DEPLOYMENT),
    );
    assert_eq!(out.status.code(), Some(64));
    assert!(out.stdout.is_empty());
    assert!(text(&out.stderr).contains("the pod would stay Pending"));
    // check says what a native sidecar does below 1.29.
    let native_out = inject(&["-"], Some(JOB_AND_DEPLOYMENT));
    let (code, doc) =
        check_json_stdin_with(&text(&native_out.stdout), &["--kubernetes-version", "1.28"]);
    assert_eq!(code, 1);
    let f = findings::first(&doc, "native-sidecar-unsupported");
    assert!(
        f["message"].as_str().unwrap().contains("Pending forever"),
        "{f}"
    );
}

/// istio-proxy's own preStop (a native sidecar's) was left unwrapped without a note, and check
/// said "fix: hooklog inject", then nothing.
#[test]
fn regression_a_native_sidecars_prestop_was_left_unwrapped() {
    let istio = "tests/manifests/corpus/istio-native-sidecar.yaml";
    let out = inject(&[istio], None);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let spec = template_spec(&text(&out.stdout));
    let cmd = pre_stop(&spec, "initContainers", "istio-proxy");
    assert_eq!(
        cmd[cmd.len() - 5..],
        [
            "pilot-agent",
            "request",
            "--debug-port=15020",
            "POST",
            "drain"
        ]
    );
    assert_eq!(flags(&cmd)["container"], "istio-proxy");
    // hooklog starts first and, a native sidecar too, stops last.
    let names: Vec<&str> = spec["initContainers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["hooklog-install", "hooklog", "istio-proxy"]);
    assert_checks_clean(&text(&out.stdout), &[], istio);

    // A classic hooklog is gone before the native sidecar's hook: a note, and check agrees.
    let out = inject(&["--sidecar", "classic", istio], None);
    let err = text(&out.stderr);
    assert!(
        err.contains("istio-proxy: a native sidecar's preStop, left unwrapped"),
        "{err}"
    );
    let (_, doc) = check_json_stdin(&text(&out.stdout));
    let lines = finding_lines(&doc);
    assert_eq!(
        lines,
        [
            "info hook-not-reported Deployment bookinfo/reviews [istio-proxy] spec.template.spec.initContainers[1].lifecycle.preStop line 51"
        ],
        "{doc:#}"
    );
}

/// The user's edits after inject, on the Deployment `doc`: a postStart on envoy, and a new
/// container `worker` with a preStop.
fn edit_later(doc: &mut Value) {
    let containers = doc
        .pointer_mut("/spec/template/spec/containers")
        .unwrap()
        .as_array_mut()
        .unwrap();
    let envoy = containers
        .iter_mut()
        .find(|c| c["name"] == "envoy")
        .unwrap();
    envoy["lifecycle"]["postStart"] =
        serde_json::json!({"exec": {"command": ["/usr/local/bin/envoy-ready"]}});
    containers.push(
        serde_json::json!({"name": "worker", "image": "registry.example.com/worker:2",
        "lifecycle": {"preStop": {"exec": {"command": ["/app/finish-batch"]}}}}),
    );
}

/// uninject restored the whole recorded `lifecycle`, so a postStart added after inject was
/// lost; and inject on an edited manifest said "already injected, unchanged", leaving a
/// container added since unwired.
#[test]
fn regression_uninject_dropped_later_edits_and_reinject_ignored_new_containers() {
    let file = "tests/manifests/incidents/distroless-envoy-sleep.yaml";
    let original = only_template(&std::fs::read_to_string(root().join(file)).unwrap());
    let out = inject(&[file], None);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let mut doc = only_template(&text(&out.stdout));
    edit_later(&mut doc);
    let edited = doc.to_string();

    let again = inject(&["-"], Some(&edited));
    assert!(again.status.success(), "{}", text(&again.stderr));
    assert!(
        text(&again.stderr).contains("now wired: worker"),
        "{}",
        text(&again.stderr)
    );
    let spec = template_spec(&text(&again.stdout));
    let worker = pre_stop(&spec, "containers", "worker");
    assert_eq!(flags(&worker)["container"], "worker");
    assert_eq!(worker.last().unwrap(), "/app/finish-batch");
    let (sidecar, native) = container(&spec, "hooklog");
    assert!(native, "the sidecar is an init container: {spec:#}");
    assert_eq!(
        flags(&podspec::strings(&sidecar["args"]))["peers"],
        "envoy,worker"
    );
    assert_checks_clean(&text(&again.stdout), &[], "edited, then injected");
    // Once more: nothing new.
    let third = inject(&["-"], Some(&text(&again.stdout)));
    assert_eq!(text(&third.stdout), text(&again.stdout));
    assert!(text(&third.stderr).contains("already injected, unchanged"));

    // uninject keeps the edits and removes only hooklog.
    let back = run(&["uninject", "-"], Some(&text(&again.stdout)));
    assert!(back.status.success(), "{}", text(&back.stderr));
    let mut expected = original.clone();
    edit_later(&mut expected);
    assert_eq!(only_template(&text(&back.stdout)), expected);

    // A hook edited after inject: the edit is kept, with a warning.
    let mut doc = only_template(&text(&out.stdout));
    let envoy = doc
        .pointer_mut("/spec/template/spec/containers")
        .unwrap()
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|c| c["name"] == "envoy")
        .unwrap();
    let cmd = envoy["lifecycle"]["preStop"]["exec"]["command"]
        .as_array_mut()
        .unwrap();
    *cmd.last_mut().unwrap() = Value::from("25");
    let back = run(&["uninject", "-"], Some(&doc.to_string()));
    assert!(back.status.success());
    assert!(
        text(&back.stderr).contains("warning: envoy: the hook's command was edited since inject"),
        "{}",
        text(&back.stderr)
    );
    let spec = template_spec(&text(&back.stdout));
    assert_eq!(
        pre_stop(&spec, "containers", "envoy"),
        ["/hooklog-bin/hooklog", "sleep", "25"]
    );
}

/// With `--image .../platform/hooklog-sidecar:0.1.0`, check on inject's own output exited 1
/// (hooklog-binary-not-installed, hooklog-sidecar-missing): hooklog was known by image name.
#[test]
fn regression_check_knew_hooklog_only_by_its_image_name() {
    let image = "registry.example.com/platform/hooklog-sidecar:0.1.0";
    for file in [
        "tests/manifests/incidents/distroless-envoy-sleep.yaml",
        "tests/manifests/corpus/drain-curl-sleep.yaml",
        // Two wrapped containers: each mounts the other's hook binary, read-only.
        "tests/manifests/e2e/checkout.yaml",
    ] {
        for sidecar in ["native", "classic"] {
            let out = run(
                &["inject", "--image", image, "--sidecar", sidecar, file],
                None,
            );
            assert!(out.status.success(), "{}", text(&out.stderr));
            assert_checks_clean(&text(&out.stdout), &[], &format!("{file} {sidecar}"));
        }
    }
}

/// The Dockerfile put the binary at the file `/hooklog`, where inject mounts its emptyDir: the
/// kubelet failed `hooklog-install` with "not a directory", and check found nothing.
#[test]
fn regression_a_mount_over_a_file_of_the_image_was_not_found() {
    let dir = tempfile::tempdir().unwrap();
    let file = "tests/manifests/incidents/distroless-envoy-sleep.yaml";
    let injected = text(&inject(&[file], None).stdout);
    for (image, binary, mounted_over_by) in [
        // The old layout: the binary is the file /hooklog. The installer mounts the binary's
        // own volume at /hooklog-bin (issue 37): the sidecar is the one over /hooklog.
        ("old-image", "hooklog", &["hooklog"][..]),
        // An image with a file where the installer mounts: found on it.
        ("old-image-bin", "hooklog-bin", &["hooklog-install"][..]),
        // The layout the Dockerfile now has: nothing at /hooklog.
        ("new-image", "usr/local/bin/hooklog", &[][..]),
    ] {
        let root = image_root(dir.path(), image, binary);
        let root_arg = format!("--image-root={IMAGE}={}", root.display());
        let (code, doc) = check_json_stdin_with(&injected, &[&root_arg]);
        if mounted_over_by.is_empty() {
            findings::assert_clean(code, &doc, image);
            continue;
        }
        assert_eq!(code, 1, "{image}: {doc:#}");
        assert_eq!(
            findings::containers(&doc, "hooklog-mount-over-image-path"),
            mounted_over_by,
            "{image}: {doc:#}"
        );
    }
}

/// An image's root file system made in `dir/name` for `--image-root`: the CA bundle's folder, as
/// the sidecar's image has, and a binary (four bytes of ELF) at `binary`.
fn image_root(dir: &Path, name: &str, binary: &str) -> PathBuf {
    let root = dir.join(name);
    std::fs::create_dir_all(root.join("etc/ssl/certs")).unwrap();
    let bin = root.join(binary);
    std::fs::create_dir_all(bin.parent().unwrap()).unwrap();
    std::fs::write(bin, b"\x7fELF").unwrap();
    root
}

/// An Argo Rollout gave "0 pod templates": only built-in kinds were looked at.
#[test]
fn regression_an_argo_rollout_had_no_pod_template() {
    let file = "tests/manifests/corpus/argo-rollout.yaml";
    let out = run(&["check", "--platform", "fargate", file], None);
    assert!(
        text(&out.stdout).contains("in 1 pod template(s)"),
        "{}",
        text(&out.stdout)
    );
    let out = inject(&[file], None);
    assert!(
        text(&out.stderr).contains("rollout \"pay/payments\" injected"),
        "{}",
        text(&out.stderr)
    );
    assert_checks_clean(&text(&out.stdout), &["--platform", "fargate"], file);
}

/// Issue 37: the hooks' binary is on a volume of its own that only the installer mounts
/// writable; a peer of the shared emptyDir could replace it. What earlier versions injected
/// (tests/manifests/injected/, the binary in the shared emptyDir) still uninjects to the user's
/// bytes, and check says its binary is writable by every wired container; what inject writes
/// now checks clean.
#[test]
fn the_hooks_binary_is_on_a_volume_only_the_installer_writes_and_earlier_injections_still_uninject()
{
    for (fixture, original) in [
        (
            "tests/manifests/injected/distroless-envoy-sleep.before-issue-37.yaml",
            "tests/manifests/incidents/distroless-envoy-sleep.yaml",
        ),
        (
            "tests/manifests/injected/argo-rollout-canary.before-issue-37.yaml",
            "tests/manifests/real/argo-rollout-canary.yaml",
        ),
    ] {
        let out = run(&["uninject", fixture], None);
        assert!(out.status.success(), "{}", text(&out.stderr));
        let want = std::fs::read_to_string(root().join(original)).unwrap();
        assert_eq!(text(&out.stdout), want, "uninject {fixture}");
    }
    // inject on them: moved to hooklog-bin, and said so; nothing of the old path is left, check
    // finds no writable binary, uninject still gives the user's bytes, and inject again changes
    // nothing.
    for (fixture, original) in [
        (
            "tests/manifests/injected/distroless-envoy-sleep.before-issue-37.yaml",
            "tests/manifests/incidents/distroless-envoy-sleep.yaml",
        ),
        (
            "tests/manifests/injected/argo-rollout-canary.before-issue-37.yaml",
            "tests/manifests/real/argo-rollout-canary.yaml",
        ),
    ] {
        let out = inject(&[fixture], None);
        assert!(out.status.success(), "{}", text(&out.stderr));
        assert!(
            text(&out.stderr).contains("its hooks' binary now on a read-only volume of its own"),
            "{fixture}: {}",
            text(&out.stderr)
        );
        let moved = text(&out.stdout);
        assert!(!moved.contains("/hooklog/bin"), "{moved}");
        let (_, doc) = check_json_stdin(&moved);
        assert!(
            findings::of_rule(&doc, "hooklog-binary-writable").is_empty(),
            "{fixture}: {doc:#}"
        );
        let back = run(&["uninject", "-"], Some(&moved));
        let want = std::fs::read_to_string(root().join(original)).unwrap();
        assert_eq!(text(&back.stdout), want, "uninject of {fixture} moved");
        let again = inject(&["-"], Some(&moved));
        assert_eq!(text(&again.stdout), moved, "{fixture}: inject twice");
        assert!(
            text(&again.stderr).contains("already injected, unchanged"),
            "{}",
            text(&again.stderr)
        );
    }
    let legacy = "tests/manifests/injected/distroless-envoy-sleep.before-issue-37.yaml";
    let (_, doc) = check_json(&[legacy]);
    assert!(
        !findings::of_rule(&doc, "hooklog-binary-writable").is_empty(),
        "{doc:#}"
    );

    let distroless = "tests/manifests/incidents/distroless-envoy-sleep.yaml";
    let out = inject(&[distroless], None);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let injected = text(&out.stdout);
    assert!(!injected.contains("/hooklog/bin"), "{injected}");
    let doc: Value = serde_yaml_ng_or_json(&injected);
    let spec = &doc["spec"]["template"]["spec"];
    let all: Vec<&Value> = spec["initContainers"]
        .as_array()
        .into_iter()
        .chain(spec["containers"].as_array())
        .flatten()
        .collect();
    let mut wired = 0;
    for c in all {
        for m in c["volumeMounts"].as_array().into_iter().flatten() {
            if m["name"] != "hooklog-bin" {
                continue;
            }
            if c["name"] == "hooklog-install" {
                assert_ne!(m["readOnly"], true, "{c}");
            } else {
                assert_eq!(m["readOnly"], true, "{c}");
                wired += 1;
            }
        }
    }
    assert!(wired >= 1, "{injected}");
    assert_checks_clean(&injected, &[], distroless);
    // And back.
    let out = run(&["uninject", "-"], Some(&injected));
    assert_eq!(
        text(&out.stdout),
        std::fs::read_to_string(root().join(distroless)).unwrap()
    );
}

/// The first document of `text` (YAML), as hooklog reads it.
fn serde_yaml_ng_or_json(text: &str) -> Value {
    let source = hooklog::manifest::load::Input::new("-", text.to_string())
        .parse()
        .expect("YAML");
    source.documents[0].value.clone()
}
