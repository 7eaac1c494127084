//! Rule control in `hooklog check` (issue 28, point 4), with the real binary: ignore-check
//! annotations, `--include` / `--exclude`, `.hooklog.yaml` and `--config`, `--list-rules`, and
//! SARIF's `helpUri` and `suppressions`, each against the one table of rules.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use hooklog::manifest::check::RULES;
use serde_json::Value;

use crate::util::hooklog;
use crate::util::manifests::{run, validate_schema};
use crate::util::text;

/// The annotation prefix, as a user writes it.
const IGNORE: &str = "hooklog.dev/ignore-check.";

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// A Deployment whose preStop writes to `/proc/1/fd/1` (`hook-output-to-proc-1`, a warning)
/// and is not reported (`hook-not-reported`, info), with `object` and `template` annotations.
fn deployment(object: &str, template: &str) -> String {
    format!(
        "apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: shop
  annotations: {{{object}}}
spec:
  template:
    metadata:
      annotations: {{{template}}}
    spec:
      containers:
        - name: app
          image: registry.example.com/app:1
          lifecycle:
            preStop:
              exec:
                command: [\"sh\", \"-c\", \"echo bye > /proc/1/fd/1\"]
"
    )
}

/// Runs `hooklog` in `dir` with `args`, `stdin` and the environment variables `env`.
fn run_in(dir: &Path, args: &[&str], stdin: &str, env: &[(&str, &str)]) -> Output {
    let mut cmd = hooklog();
    cmd.current_dir(dir)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for var in [
        "HOOKLOG_FAIL_ON",
        "HOOKLOG_INCLUDE",
        "HOOKLOG_EXCLUDE",
        "HOOKLOG_CONFIG",
    ] {
        cmd.env_remove(var);
    }
    cmd.envs(env.iter().copied());
    let mut child = cmd.spawn().expect("spawn hooklog");
    {
        use std::io::Write;
        let mut pipe = child.stdin.take().expect("stdin");
        match pipe.write_all(stdin.as_bytes()) {
            // A bad configuration file or rule name exits 64 before reading stdin: what it
            // wrote and its exit code are what the caller checks.
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
            r => r.expect("write stdin"),
        }
    }
    child.wait_with_output().expect("hooklog output")
}

/// `check --offline ARGS -` of `input` in `dir`, with the environment variables `env`.
fn check_in(dir: &Path, args: &[&str], input: &str, env: &[(&str, &str)]) -> Output {
    let mut all = vec!["check", "--offline"];
    all.extend_from_slice(args);
    all.push("-");
    run_in(dir, &all, input, env)
}

/// `check --offline --format json ARGS -` of `input` in `dir`: (exit code, document).
fn json_in(dir: &Path, input: &str, args: &[&str]) -> (i32, Value) {
    let mut all = vec!["--format", "json"];
    all.extend_from_slice(args);
    let out = check_in(dir, &all, input, &[]);
    let doc = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("no JSON ({e}): {}{}", text(&out.stdout), text(&out.stderr)));
    (out.status.code().expect("exit code"), doc)
}

/// `(rule, suppressed reason)` of each finding.
fn rules_of(doc: &Value) -> Vec<(String, Option<String>)> {
    doc["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .map(|f| {
            (
                f["rule"].as_str().unwrap().to_string(),
                f["suppressed"]["reason"].as_str().map(str::to_string),
            )
        })
        .collect()
}

#[test]
fn an_ignore_annotation_on_the_object_or_its_template_accepts_that_rule_only() {
    let dir = tempfile::tempdir().unwrap();
    let proc1 = format!("{IGNORE}hook-output-to-proc-1: \"runs as root on EC2\"");
    // Unannotated: the warning fails --fail-on warning.
    let (code, doc) = json_in(dir.path(), &deployment("", ""), &["--fail-on", "warning"]);
    assert_eq!(code, 1, "{doc:#}");
    // On the object, then on the pod template: the same finding is suppressed with its
    // reason, the other rule's is not, and --fail-on no longer fails on it.
    for input in [deployment(&proc1, ""), deployment("", &proc1)] {
        let (code, doc) = json_in(dir.path(), &input, &["--fail-on", "warning"]);
        assert_eq!(code, 0, "{doc:#}");
        assert_eq!(
            rules_of(&doc),
            [
                (
                    "hook-output-to-proc-1".to_string(),
                    Some("runs as root on EC2".to_string())
                ),
                ("hook-not-reported".to_string(), None),
            ]
        );
        assert_eq!(doc["counts"]["warning"], 0, "{doc:#}");
        assert_eq!(doc["counts"]["info"], 1, "{doc:#}");
        assert_eq!(doc["suppressed"], 1);
        assert_eq!(
            doc["findings"][0]["suppressed"]["annotation"],
            "hooklog.dev/ignore-check.hook-output-to-proc-1"
        );
        validate_schema(
            &root().join("tests/manifests/check-output.schema.json"),
            &doc,
        );
        // --fail-on info still fails on the finding no annotation accepts.
        let (code, _) = json_in(dir.path(), &input, &["--fail-on", "info"]);
        assert_eq!(code, 1);
    }
    // Both rules accepted: --fail-on info passes.
    let both = format!("{proc1}, {IGNORE}hook-not-reported: \"our agent reports it\"");
    let (code, doc) = json_in(dir.path(), &deployment("", &both), &["--fail-on", "info"]);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(doc["suppressed"], 2);
    // Text says so: one line per suppressed finding and the count in the summary.
    let out = check_in(
        dir.path(),
        &["--fail-on", "info"],
        &deployment("", &both),
        &[],
    );
    let t = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{t}");
    assert!(
        t.contains("  suppressed hook-output-to-proc-1 [app] spec.template.spec.containers[0].lifecycle.preStop (line 16): runs as root on EC2 (hooklog.dev/ignore-check.hook-output-to-proc-1)"),
        "{t}"
    );
    assert!(
        t.ends_with("0 error(s), 0 warning(s), 0 info, 2 suppressed in 1 pod template(s)\n"),
        "{t}"
    );
}

#[test]
fn an_ignore_annotation_on_a_pod_and_on_a_cronjob_accepts_its_rule() {
    let dir = tempfile::tempdir().unwrap();
    let hook = "lifecycle: {preStop: {exec: {command: [sh, -c, 'echo x > /proc/1/fd/2']}}}";
    let pod = format!(
        "kind: Pod\nmetadata:\n  name: p\n  annotations: {{{IGNORE}hook-output-to-proc-1: ok}}\nspec:\n  containers: [{{name: a, image: a, {hook}}}]\n"
    );
    let cron = format!(
        "apiVersion: batch/v1\nkind: CronJob\nmetadata: {{name: c}}\nspec:\n  schedule: '* * * * *'\n  jobTemplate:\n    spec:\n      template:\n        metadata: {{annotations: {{{IGNORE}hook-output-to-proc-1: ok}}}}\n        spec:\n          restartPolicy: Never\n          containers: [{{name: a, image: a, {hook}}}]\n"
    );
    for input in [pod, cron] {
        let (code, doc) = json_in(dir.path(), &input, &["--include", "hook-output-to-proc-1"]);
        assert_eq!(code, 0, "{doc:#}");
        assert_eq!(
            rules_of(&doc),
            [("hook-output-to-proc-1".to_string(), Some("ok".to_string()))],
            "{input}"
        );
    }
}

#[test]
fn an_ignore_annotation_naming_no_rule_is_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let typo = format!("{IGNORE}hook-output-to-proc1: \"typo\"");
    for (input, path) in [
        (deployment(&typo, ""), "metadata.annotations"),
        (deployment("", &typo), "spec.template.metadata.annotations"),
    ] {
        let (code, doc) = json_in(dir.path(), &input, &["--fail-on", "warning"]);
        assert_eq!(code, 1, "{doc:#}");
        let f = doc["findings"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["rule"] == "ignore-check-unknown-rule")
            .unwrap_or_else(|| panic!("no finding for the typo: {doc:#}"));
        assert_eq!(f["severity"], "warning");
        assert_eq!(f["path"], path);
        assert!(
            f["message"]
                .as_str()
                .unwrap()
                .contains("hooklog.dev/ignore-check.hook-output-to-proc1"),
            "{f:#}"
        );
        // And the misspelt rule's own finding is not accepted.
        assert!(
            rules_of(&doc).contains(&("hook-output-to-proc-1".to_string(), None)),
            "{doc:#}"
        );
    }
}

#[test]
fn sarif_marks_suppressed_results_in_source_and_links_every_rule_to_its_section() {
    let dir = tempfile::tempdir().unwrap();
    let proc1 = format!("{IGNORE}hook-output-to-proc-1: \"runs as root on EC2\"");
    let out = check_in(
        dir.path(),
        &["--format", "sarif"],
        &deployment(&proc1, ""),
        &[],
    );
    let sarif: Value = serde_json::from_slice(&out.stdout).expect("SARIF is JSON");
    validate_schema(&root().join("tests/sarif/sarif-schema-2.1.0.json"), &sarif);
    let results = sarif["runs"][0]["results"].as_array().unwrap();
    let suppressed: Vec<_> = results
        .iter()
        .filter(|r| r.get("suppressions").is_some())
        .collect();
    assert_eq!(suppressed.len(), 1, "{results:#?}");
    assert_eq!(suppressed[0]["ruleId"], "hook-output-to-proc-1");
    assert_eq!(suppressed[0]["suppressions"][0]["kind"], "inSource");
    assert_eq!(
        suppressed[0]["suppressions"][0]["justification"],
        "runs as root on EC2"
    );
    // Every rule's helpUri is this repository's docs/check-and-inject.md at a heading the page
    // has for that rule.
    let page = std::fs::read_to_string(root().join("docs/check-and-inject.md")).unwrap();
    let rules = sarif["runs"][0]["tool"]["driver"]["rules"]
        .as_array()
        .unwrap();
    assert_eq!(rules.len(), RULES.len());
    for r in rules {
        let id = r["id"].as_str().unwrap();
        let uri = r["helpUri"].as_str().unwrap();
        let (doc, anchor) = uri.split_once('#').expect("helpUri has an anchor");
        assert!(doc.ends_with("/docs/check-and-inject.md"), "{uri}");
        assert!(doc.starts_with("https://"), "{uri}");
        assert_eq!(anchor, id);
        assert!(
            page.contains(&format!("\n#### `{id}`\n")),
            "docs/check-and-inject.md has no section for {id}"
        );
    }
}

/// The list, SARIF and the docs come from `RULES`: a rule missing from any of them, or said
/// differently there, fails.
#[test]
fn list_rules_and_the_docs_name_every_rule_as_the_table_does() {
    let out = run(&["check", "--list-rules"], None);
    assert_eq!(out.status.code(), Some(0));
    let listed = text(&out.stdout);
    let out = run(&["check", "--list-rules", "--format", "json"], None);
    assert_eq!(out.status.code(), Some(0));
    let doc: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let json_rules = doc["rules"].as_array().unwrap();
    assert_eq!(json_rules.len(), RULES.len());
    let page = std::fs::read_to_string(root().join("docs/check-and-inject.md")).unwrap();
    let ids: BTreeSet<&str> = RULES.iter().map(|r| r.id).collect();
    assert_eq!(ids.len(), RULES.len(), "rule ids are unique");
    for (r, j) in RULES.iter().zip(json_rules) {
        assert_eq!(j["id"], r.id);
        assert_eq!(j["severity"], r.severity.as_str());
        assert_eq!(j["description"], r.description);
        assert_eq!(j["remediation"], r.remediation);
        assert!(!r.remediation.is_empty() && !r.description.is_empty());
        assert!(
            listed.contains(&format!(
                "{} ({})\n    {}\n    fix: {}\n",
                r.id,
                r.severity.as_str(),
                r.description,
                r.remediation
            )),
            "--list-rules lacks {}",
            r.id
        );
        let section = format!(
            "#### `{}`\n\n**{}**. {}\n\nFix: {}\n",
            r.id,
            r.severity.as_str(),
            r.description,
            r.remediation
        );
        assert!(
            page.contains(&section),
            "docs/check-and-inject.md lacks, or says otherwise, the section:\n{section}"
        );
    }
    // No section for a rule that is not in the table.
    for line in page.lines().filter(|l| l.starts_with("#### `")) {
        let id = line.trim_start_matches("#### `").trim_end_matches('`');
        assert!(
            ids.contains(id),
            "docs/check-and-inject.md has a section for no rule: {id}"
        );
    }
}

#[test]
fn include_and_exclude_pick_each_rule_over_the_corpus() {
    let paths = ["tests/manifests/corpus", "tests/manifests/incidents"];
    let all = |extra: &[&str]| -> Vec<String> {
        let mut args = vec!["check", "--offline", "--format", "json"];
        args.extend_from_slice(extra);
        args.extend_from_slice(&paths);
        let out = run(&args, None);
        let doc: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", text(&out.stderr)));
        rules_of(&doc).into_iter().map(|(r, _)| r).collect()
    };
    let every = all(&[]);
    let found: BTreeSet<&str> = every.iter().map(String::as_str).collect();
    assert!(found.len() > 10, "the corpus finds few rules: {found:?}");
    for id in &found {
        let only = all(&["--include", id]);
        assert_eq!(
            only,
            every
                .iter()
                .filter(|r| r == id)
                .cloned()
                .collect::<Vec<_>>(),
            "--include {id}"
        );
        let without = all(&["--exclude", id]);
        assert_eq!(
            without,
            every
                .iter()
                .filter(|r| r != id)
                .cloned()
                .collect::<Vec<_>>(),
            "--exclude {id}"
        );
    }
    // Both at once, comma-separated: include first, then exclude.
    let two: Vec<&str> = found.iter().take(2).copied().collect();
    let include = two.join(",");
    let picked = all(&["--include", &include, "--exclude", two[1]]);
    assert_eq!(
        picked,
        every
            .iter()
            .filter(|r| *r == two[0])
            .cloned()
            .collect::<Vec<_>>()
    );
}

#[test]
fn an_unknown_rule_name_is_a_usage_error_naming_it() {
    for flag in ["--include", "--exclude"] {
        for value in [
            "hook-not-reportd",
            "hook-not-reported,nope",
            " ",
            "HOOK-NOT-REPORTED",
        ] {
            let out = run(
                &[
                    "check",
                    "--offline",
                    flag,
                    value,
                    "tests/manifests/incidents",
                ],
                None,
            );
            let err = text(&out.stderr);
            if value.trim().is_empty() {
                // An empty list names no rule: nothing to refuse.
                assert_ne!(out.status.code(), Some(64), "{flag} {value:?}: {err}");
                continue;
            }
            assert_eq!(out.status.code(), Some(64), "{flag} {value:?}: {err}");
            let bad = value
                .split(',')
                .find(|n| *n != "hook-not-reported")
                .unwrap();
            assert!(
                err.contains(&format!("{flag}: no rule is named \"{bad}\"")),
                "{flag} {value:?}: {err}"
            );
            assert!(out.stdout.is_empty(), "nothing is checked on a usage error");
        }
    }
}

#[test]
fn the_config_file_is_found_upward_and_flags_win_over_it() {
    let top = tempfile::tempdir().unwrap();
    let deep = top.path().join("a/b");
    std::fs::create_dir_all(&deep).unwrap();
    let input = deployment("", "");
    // Without a file: the warning does not fail (fail-on error).
    let (code, doc) = json_in(&deep, &input, &[]);
    assert_eq!((code, rules_of(&doc).len()), (0, 2), "{doc:#}");
    std::fs::write(
        top.path().join(".hooklog.yaml"),
        "check:\n  exclude: [hook-not-reported]\n  fail-on: warning\n",
    )
    .unwrap();
    // Two folders down, the file decides.
    let (code, doc) = json_in(&deep, &input, &[]);
    assert_eq!(code, 1, "{doc:#}");
    assert_eq!(
        rules_of(&doc),
        [("hook-output-to-proc-1".to_string(), None)]
    );
    // Which file was used is said at debug level.
    let out = check_in(&deep, &[], &input, &[("RUST_LOG", "hooklog=debug")]);
    let err = text(&out.stderr);
    let file = top.path().join(".hooklog.yaml");
    assert!(
        err.contains("configuration file") && err.contains(&file.display().to_string()),
        "{err}"
    );
    // Flags win: --fail-on, --exclude and --include replace the file's keys.
    let (code, _) = json_in(&deep, &input, &["--fail-on", "error"]);
    assert_eq!(code, 0);
    let (_, doc) = json_in(&deep, &input, &["--exclude", "hook-output-to-proc-1"]);
    assert_eq!(rules_of(&doc), [("hook-not-reported".to_string(), None)]);
    // Per key: the file's exclude still holds beside a flag's --include.
    let (_, doc) = json_in(&deep, &input, &["--include", "hook-not-reported"]);
    assert_eq!(rules_of(&doc), []);
    let both = [
        "--include",
        "hook-not-reported",
        "--exclude",
        "hook-output-to-proc-1",
    ];
    let (_, doc) = json_in(&deep, &input, &both);
    assert_eq!(rules_of(&doc), [("hook-not-reported".to_string(), None)]);
    // So does the environment variable of a flag.
    let out = check_in(&deep, &[], &input, &[("HOOKLOG_FAIL_ON", "error")]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));
    // --config names another file, which replaces the one found.
    let other = top.path().join("other.yaml");
    std::fs::write(&other, "check: {include: [hook-not-reported]}\n").unwrap();
    let (code, doc) = json_in(&deep, &input, &["--config", other.to_str().unwrap()]);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(rules_of(&doc), [("hook-not-reported".to_string(), None)]);
}

#[test]
fn a_config_file_that_is_wrong_is_a_usage_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join(".hooklog.yaml");
    for (body, says) in [
        (
            "check: {exclude: [hook-not-reportd]}\n",
            "no rule is named \"hook-not-reportd\"",
        ),
        ("check: {include: [nope]}\n", "no rule is named \"nope\""),
        ("check: {fail_on: warning}\n", "unknown field `fail_on`"),
        ("check: {fail-on: fatal}\n", "fatal"),
        ("chek: {}\n", "unknown field `chek`"),
        ("check: [\n", "not valid YAML"),
    ] {
        std::fs::write(&file, body).unwrap();
        let out = check_in(dir.path(), &[], &deployment("", ""), &[]);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(64), "{body}: {err}");
        assert!(
            err.contains(".hooklog.yaml"),
            "{body}: names the file: {err}"
        );
        assert!(err.contains(says), "{body}: {err}");
    }
    // A --config that does not exist.
    let out = run_in(
        dir.path(),
        &["check", "--config", "missing.yaml", "-"],
        &deployment("", ""),
        &[],
    );
    assert_eq!(out.status.code(), Some(64));
    assert!(text(&out.stderr).contains("missing.yaml"));
    // An empty file is no configuration.
    std::fs::write(&file, "").unwrap();
    let (code, doc) = json_in(dir.path(), &deployment("", ""), &[]);
    assert_eq!((code, rules_of(&doc).len()), (0, 2));
}

#[test]
fn list_rules_reads_no_input() {
    // With stdin left open it would block on reading it: it must not read at all.
    let mut child = Command::new(crate::util::hooklog_bin())
        .args(["check", "--list-rules"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let _stdin = child.stdin.take();
    let ok = crate::util::wait_until(std::time::Duration::from_secs(20), || {
        matches!(child.try_wait(), Ok(Some(_)))
    });
    if !ok {
        let _ = child.kill();
        panic!("--list-rules waited for stdin");
    }
    let out = child.wait_with_output().unwrap();
    assert!(text(&out.stdout).contains("ignore-check-unknown-rule (warning)"));
}

/// Issue 28, point 6: `check`'s fatal errors ignored `--log-format json`.
#[test]
fn check_errors_follow_log_format_json() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("bad.yaml"), "kind: [\n").unwrap();
    let cases: [(&[&str], &str); 3] = [
        (
            &["--exclude", "nope"],
            "--exclude: no rule is named \"nope\"",
        ),
        (&["--config", "missing.yaml"], "missing.yaml"),
        (&["bad.yaml", "none.yaml"], "bad.yaml:"),
    ];
    for (args, says) in cases {
        for json in [false, true] {
            let mut all: Vec<&str> = if json {
                vec!["--log-format", "json", "check", "--offline"]
            } else {
                vec!["check", "--offline"]
            };
            all.extend_from_slice(args);
            let out = run_in(dir.path(), &all, "", &[]);
            assert_eq!(out.status.code(), Some(64), "{args:?}");
            let err = text(&out.stderr);
            let lines: Vec<&str> = err.lines().collect();
            assert!(!lines.is_empty(), "{args:?}: nothing said");
            let mut said = String::new();
            for line in &lines {
                if json {
                    let v: Value = serde_json::from_str(line)
                        .unwrap_or_else(|e| panic!("{args:?}: not JSON ({e}): {line}"));
                    assert_eq!(v["level"], "ERROR", "{line}");
                    said.push_str(v["message"].as_str().expect("a message"));
                } else {
                    let message = line.strip_prefix("hooklog: ");
                    said.push_str(message.unwrap_or_else(|| panic!("{args:?}: {line}")));
                }
                said.push('\n');
            }
            assert!(said.contains(says), "{args:?}: {err}");
        }
    }
}

/// Issue 37: a live pod the webhook skipped for its grace period (its hooks' sleeps and
/// hooklog's margin do not fit) was said to be "created while the webhook was down": its cause
/// is the skip, with the period that fits; a pod that fits keeps the down-webhook cause.
#[test]
fn a_pod_the_webhook_skipped_for_its_grace_period_is_said_to_be_skipped_on_purpose() {
    let dir = tempfile::tempdir().unwrap();
    let pod = |name: &str, period: u64| {
        format!(
            r#"  - apiVersion: v1
    kind: Pod
    metadata: {{name: {name}, namespace: shop}}
    spec:
      terminationGracePeriodSeconds: {period}
      containers:
        - name: web
          image: nginx:1.25
          lifecycle: {{preStop: {{exec: {{command: [sleep, "5"]}}}}}}
"#
        )
    };
    let input = format!(
        "apiVersion: v1\nkind: List\nitems:\n  - apiVersion: v1\n    kind: Namespace\n    metadata: {{name: shop, labels: {{hooklog.dev/inject: enabled}}}}\n{}{}",
        pod("short", 4),
        pod("long", 30)
    );
    let (_, doc) = json_in(dir.path(), &input, &[]);
    let missed: Vec<&Value> = doc["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["rule"] == "missed-injection")
        .collect();
    assert_eq!(missed.len(), 2, "{doc:#}");
    let text = |f: &Value| f.to_string();
    let short = missed
        .iter()
        .find(|f| text(f).contains("shop/short"))
        .unwrap();
    let long = missed
        .iter()
        .find(|f| text(f).contains("shop/long"))
        .unwrap();
    assert!(text(short).contains("skipped it on purpose"), "{short:#}");
    assert!(!text(short).contains("webhook was down"), "{short:#}");
    assert!(text(short).contains("at least 7"), "{short:#}");
    assert!(text(long).contains("webhook was down"), "{long:#}");
}
