//! The command line: help, version, env configuration, and unusable arguments failing at once
//! with one line that names the problem.

use clap::{CommandFactory, Parser};
use hooklog::cli::Cli;
use std::time::Duration;

use crate::util::binaries::assert_version;
use crate::util::{Daemon, hooklog, messages, sh};

fn run_err(args: &[&str]) -> (Option<i32>, String) {
    let out = hooklog().args(args).output().unwrap();
    assert!(out.stdout.is_empty(), "nothing on stdout");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn help_shows_an_example_for_each_subcommand() {
    let out = hooklog().arg("--help").output().unwrap();
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    for sub in [
        "run", "hook", "sleep", "install", "emit", "check", "inject", "uninject", "webhook",
    ] {
        assert!(
            help.contains(&format!("hooklog {sub} ")),
            "no {sub} example in:\n{help}"
        );
        let out = hooklog().args([sub, "--help"]).output().unwrap();
        assert!(out.status.success());
        let h = String::from_utf8_lossy(&out.stdout);
        assert!(h.contains("Example"), "{sub} --help has no example:\n{h}");
    }
    let out = hooklog().arg("--version").output().unwrap();
    assert_version(&String::from_utf8_lossy(&out.stdout), None);
}

#[test]
fn unusable_arguments_fail_at_start_naming_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let blocker = dir.path().join("plainfile");
    std::fs::write(&blocker, "x").unwrap();
    let under_file = format!("{}/prestop.log", blocker.display());
    for (args, needle) in [
        (vec!["run", "--file", d], d.to_string()),
        (vec!["run", "--file", &under_file], under_file.clone()),
        (vec!["run", "--socket", d], d.to_string()),
        (
            vec!["run", "--socket", blocker.to_str().unwrap()],
            blocker.display().to_string(),
        ),
        (
            vec!["run", "--file", "/proc/hooklog-test/x.log"],
            "/proc/hooklog-test/x.log".into(),
        ),
        (vec!["run"], "--file or --socket".into()),
        (
            vec!["run", "--file", "/tmp/x", "--max-line-bytes", "10"],
            "--max-line-bytes".into(),
        ),
        (
            vec!["run", "--file", "/tmp/x", "--output", "cloudwatch"],
            "--log-group".into(),
        ),
    ] {
        let (code, err) = run_err(&args);
        assert_eq!(code, Some(64), "{args:?}: {err}");
        assert!(
            err.contains(&needle),
            "{args:?}: error does not name {needle:?}: {err}"
        );
        assert_eq!(
            err.trim_end().lines().count(),
            1,
            "{args:?}: one line, got: {err}"
        );
        assert!(!err.contains("panicked"), "{err}");
    }
    let (code, err) = run_err(&["run", "--file", "/tmp/x", "--grace", "soon"]);
    assert_eq!(code, Some(64));
    assert!(err.contains("invalid duration"), "{err}");
}

#[test]
fn every_flag_can_come_from_the_environment() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.log");
    let b = dir.path().join("b.log");
    let list = format!("{},{}", a.display(), b.display());
    let mut daemon = Daemon::start(
        &[],
        &[
            ("HOOKLOG_FILE", list.as_str()),
            ("HOOKLOG_LOG_FORMAT", "json"),
            ("HOOKLOG_GRACE", "3s"),
        ],
    );
    sh(dir.path(), "echo to-a >> a.log; echo to-b >> b.log");
    daemon.wait_records(2, Duration::from_secs(10));
    daemon.terminate();
    assert!(daemon.wait_exit(Duration::from_secs(10)).success());
    let mut got = messages(&daemon.records());
    got.retain(|m| m.starts_with("to-"));
    got.sort();
    assert_eq!(got, vec!["to-a", "to-b"]);
    for l in daemon.stderr.lines() {
        let v: serde_json::Value =
            serde_json::from_str(&l).unwrap_or_else(|e| panic!("stderr not JSON ({e}): {l}"));
        assert!(v.get("level").is_some(), "{l}");
    }
}

#[test]
fn podinfo_labels_and_annotations_enrich_records() {
    let dir = tempfile::tempdir().unwrap();
    let info = dir.path().join("podinfo");
    std::fs::create_dir(&info).unwrap();
    std::fs::write(
        info.join("labels"),
        "app=\"api-server\"\npod-template-hash=\"7d9f5\"\n",
    )
    .unwrap();
    std::fs::write(
        info.join("annotations"),
        "kubernetes.io/psp=\"eks.privileged\"\n",
    )
    .unwrap();
    let file = dir.path().join("p.log");
    let mut daemon = Daemon::start(
        &[
            "--file",
            file.to_str().unwrap(),
            "--podinfo",
            info.to_str().unwrap(),
        ],
        &crate::util::POD_ENV,
    );
    sh(dir.path(), "echo hi >> p.log");
    let r = daemon.wait_records(1, Duration::from_secs(10)).remove(0);
    assert_eq!(r["kubernetes"]["labels"]["app"], "api-server");
    assert_eq!(r["kubernetes"]["labels"]["pod-template-hash"], "7d9f5");
    assert_eq!(
        r["kubernetes"]["annotations"]["kubernetes.io/psp"],
        "eks.privileged"
    );
    daemon.terminate();
    assert!(daemon.wait_exit(Duration::from_secs(10)).success());
}

#[test]
fn docs_flags_page_documents_every_flag_and_env_var() {
    let page = include_str!("../docs/flags.md");
    for sub in [
        "run", "hook", "sleep", "install", "emit", "check", "inject", "uninject", "webhook",
    ] {
        let out = hooklog().args([sub, "--help"]).output().unwrap();
        let help = String::from_utf8_lossy(&out.stdout).into_owned();
        let mut checked = 0;
        for word in help.split(|c: char| c.is_whitespace() || c == ',' || c == '[' || c == ']') {
            let flag = word.trim_end_matches(|c: char| !(c.is_ascii_alphanumeric() || c == '-'));
            if flag.starts_with("--") && flag.len() > 2 && flag != "--help" && flag != "--version" {
                assert!(mentions(page, flag), "docs/flags.md lacks {sub} {flag}");
                checked += 1;
            }
            if let Some(var) = word.strip_prefix("HOOKLOG_") {
                // `[env: HOOKLOG_OFFLINE=true]` when the variable is set (tests/util sets it).
                let var = format!("HOOKLOG_{}", var.split('=').next().unwrap_or_default());
                assert!(page.contains(&var), "docs/flags.md lacks {var} ({sub})");
            }
        }
        if sub == "run" || sub == "hook" {
            assert!(checked > 4, "{sub}: parsed no flags from --help:\n{help}");
        }
    }
}

/// `hooklog --help` and every subcommand's `--help` end with `Docs:` and the pages, one a line
/// (relative to the repository root), that explain it; each page exists and each `#anchor` is
/// one of its headings. The subcommands are read from `hooklog --help`, so a new one without
/// a page fails here.
#[test]
fn every_help_points_to_a_docs_page_that_exists() {
    let help = |args: &[&str]| {
        let out = hooklog().args(args).output().unwrap();
        assert!(out.status.success(), "{args:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    let top = help(&["--help"]);
    let subcommands: Vec<String> = top
        .split("Commands:\n")
        .nth(1)
        .expect("hooklog --help lists its commands")
        .lines()
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_string)
        .collect();
    assert!(subcommands.len() >= 8, "{subcommands:?}");
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut pages = 0;
    for (what, text) in std::iter::once(("hooklog".to_string(), top.clone())).chain(
        subcommands
            .iter()
            .map(|sub| (format!("hooklog {sub}"), help(&[sub, "--help"]))),
    ) {
        let docs: Vec<&str> = text
            .lines()
            .skip_while(|l| *l != "Docs:")
            .skip(1)
            .map_while(|l| l.strip_prefix("  "))
            .collect();
        assert!(
            !docs.is_empty(),
            "{what} --help lists no Docs: pages:\n{text}"
        );
        for target in docs {
            let (path, anchor) = target.split_once('#').unwrap_or((target, ""));
            assert!(
                path.starts_with("docs/") || path == "README.md",
                "{what}: {target} is not a page of the repository"
            );
            let file = root.join(path);
            assert!(file.is_file(), "{what}: {target}: no such page");
            if !anchor.is_empty() {
                let anchors =
                    crate::util::markdown::anchors(&std::fs::read_to_string(&file).unwrap());
                assert!(
                    anchors.iter().any(|a| a == anchor),
                    "{what}: {target}: no such heading; {path} has {anchors:?}"
                );
            }
            pages += 1;
        }
    }
    assert!(pages > subcommands.len(), "{pages} pages named");
}

/// True when `text` holds `flag` as a whole flag (not as the start of a longer one).
fn mentions(text: &str, flag: &str) -> bool {
    text.match_indices(flag).any(|(i, _)| {
        !text[i + flag.len()..].starts_with(|c: char| c.is_ascii_alphanumeric() || c == '-')
    })
}

#[test]
fn a_fifo_as_file_fails_at_start_instead_of_hanging() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("prestop.log");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o666)).unwrap();
    let mut child = hooklog()
        .args(["run", "--file", fifo.to_str().unwrap()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let exited = crate::util::wait_until(Duration::from_secs(5), || {
        child.try_wait().unwrap().is_some()
    });
    if !exited {
        let _ = child.kill();
        let _ = child.wait();
        panic!("hooklog run --file FIFO hung at start");
    }
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(64), "{err}");
    assert!(
        err.contains(fifo.to_str().unwrap()) && err.contains("not a regular file"),
        "{err}"
    );
}

/// `hooklog [SUB] --help` as a terminal `columns` wide renders it (clap reads `COLUMNS`).
fn help_at(sub: Option<&str>, columns: usize) -> String {
    let mut cmd = hooklog();
    cmd.env("COLUMNS", columns.to_string());
    if let Some(s) = sub {
        cmd.arg(s);
    }
    let out = cmd.arg("--help").output().unwrap();
    assert!(out.status.success());
    String::from_utf8(out.stdout).unwrap()
}

/// The help's examples: the indented lines (and blank lines between them) after the `Example`
/// heading, up to the next text that is not indented (prose, which may wrap, or `Docs:`).
fn after_options(help: &str) -> Vec<String> {
    let lines: Vec<&str> = help.lines().collect();
    let start = lines
        .iter()
        .position(|l| l.starts_with("Example"))
        .unwrap_or_else(|| panic!("no Example in:\n{help}"));
    lines[start + 1..]
        .iter()
        .take_while(|l| l.is_empty() || l.starts_with(' '))
        .map(|l| l.to_string())
        .collect()
}

#[test]
fn help_examples_never_wrap_at_80_100_or_120_columns() {
    let subs: Vec<Option<String>> = std::iter::once(None)
        .chain(
            Cli::command()
                .get_subcommands()
                .map(|s| Some(s.get_name().to_string())),
        )
        .collect();
    for sub in &subs {
        // Wide enough that clap wraps nothing: each example line as written.
        let written = after_options(&help_at(sub.as_deref(), 1000));
        for columns in [80, 100, 120] {
            let shown = after_options(&help_at(sub.as_deref(), columns));
            assert_eq!(
                shown,
                written,
                "`hooklog {} --help` at {columns} columns wraps an example (copy-paste breaks): keep each line under 80 and continue with \\",
                sub.as_deref().unwrap_or("")
            );
            for line in &shown {
                assert!(
                    line.chars().count() <= 80,
                    "{line:?} is wider than 80 columns"
                );
            }
        }
    }
}

#[test]
fn log_format_help_says_what_it_shapes_in_every_subcommand() {
    // Every subcommand, from the CLI's own list: a new one cannot be missed.
    let subs: Vec<String> = hooklog::cli::command()
        .get_subcommands()
        .map(|s| s.get_name().to_string())
        .filter(|n| n != "help")
        .collect();
    let mut seen = std::collections::BTreeSet::new();
    for sub in &subs {
        let help = help_at(Some(sub), 1000);
        let line = help
            .lines()
            .skip_while(|l| !l.trim_start().starts_with("--log-format"))
            .nth(1)
            .unwrap_or_else(|| panic!("{sub}: no --log-format"))
            .trim()
            .to_string();
        // Issue 28: it said "records always go to stdout as JSON" in check and inject, whose
        // stdout is text, JSON, SARIF or YAML.
        assert!(
            !line.contains("records always go to stdout"),
            "{sub}: {line}"
        );
        let lower = line.to_lowercase();
        assert!(
            lower.contains("stderr")
                && lower.contains("fatal error")
                && lower.contains("never of stdout"),
            "{sub}: {line}"
        );
        // Its own words: what this subcommand's stdout is.
        assert!(
            seen.insert(line.clone()),
            "{sub}: the same help as another: {line}"
        );
    }
    assert!(subs.len() >= 9, "{subs:?}");
}

/// The flags docs/flags.md says are capped at 24h, and those it says are not, from its
/// `Durations:` paragraph: `(subcommand, flag)` as the paragraph names them.
/// `(subcommand, flag)` pairs.
type Flags = Vec<(String, String)>;

fn duration_caps_in_the_docs() -> (Flags, Flags) {
    let flags =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/flags.md")).unwrap();
    let start = flags.find("Durations:").expect("the Durations paragraph");
    let para: String = flags[start..]
        .split("\n\n")
        .next()
        .unwrap()
        .replace('\n', " ");
    let (capped, longer) = para
        .split_once("take longer ones")
        .map(|(a, _)| a.rsplit_once(';').unwrap())
        .expect("`...; X take longer ones` in the paragraph");
    let named = |text: &str| -> Flags {
        let mut sub = String::from("run");
        let mut out = Vec::new();
        for code in text.split('`').skip(1).step_by(2) {
            let mut words = code.split_whitespace();
            let (Some(first), second) = (words.next(), words.next()) else {
                continue;
            };
            let flag = match second {
                Some(f) => {
                    sub = first.to_string();
                    f
                }
                None => first,
            };
            if flag.starts_with("--") {
                out.push((sub.clone(), flag.to_string()));
            }
        }
        out
    };
    (
        named(capped.split_once("at most").unwrap().1),
        named(longer),
    )
}

/// `hooklog SUB FLAG VALUE` (with what SUB needs besides) through the CLI's parser.
fn parses(sub: &str, flag: &str, value: &str) -> Result<(), String> {
    let mut argv: Vec<String> = vec!["hooklog".into(), sub.into()];
    match sub {
        "run" => argv.extend(["--file".into(), "/tmp/x.log".into()]),
        "hook" => argv.extend(["--container".into(), "app".into()]),
        "webhook" | "inject" => argv.extend(["--image".into(), "i:1".into()]),
        _ => {}
    }
    argv.extend([flag.to_string(), value.to_string()]);
    if sub == "hook" {
        argv.extend(["--".into(), "true".into()]);
    }
    Cli::try_parse_from(&argv)
        .map(|_| ())
        .map_err(|e| e.to_string())
}

#[test]
fn the_duration_caps_flags_md_states_are_the_parsers() {
    let (capped, longer) = duration_caps_in_the_docs();
    assert!(capped.len() >= 6, "{capped:?}");
    assert!(longer.len() >= 2, "{longer:?}");
    for (sub, flag) in &capped {
        parses(sub, flag, "24h").unwrap_or_else(|e| panic!("{sub} {flag} 24h: {e}"));
        let err = parses(sub, flag, "24h1s").expect_err(&format!("{sub} {flag} 24h1s was taken"));
        assert!(err.contains("24h"), "{sub} {flag}: {err}");
    }
    for (sub, flag) in &longer {
        parses(sub, flag, "48h").unwrap_or_else(|e| {
            panic!("{sub} {flag} 48h (the docs say longer ones are taken): {e}")
        });
    }
}
