//! Fatal errors follow `--log-format` in every subcommand (issue 28 §6): a bad invocation gives
//! exactly one line on stderr, `hooklog: MESSAGE`, or with `--log-format json` one JSON object
//! (`timestamp`, `level`, `message`, `command`), and the documented exit code. The cases are
//! generated from the CLI's own subcommand list (`clap::Command::get_subcommands`), so a new
//! subcommand, or a new flag with a checked value, cannot be missed; the sidecar build
//! (`HOOKLOG_SIDECAR_BIN`) is tried with its own list.

use std::ffi::OsString;
use std::path::Path;
use std::process::Command;

use serde_json::Value;

/// A value no checked flag takes: not a number, a duration, a boolean or any enum's value.
const BAD_VALUE: &str = "not-a-value";

/// hooklog's usage error (BSD sysexits EX_USAGE).
const EXIT_USAGE: i32 = 64;

/// A failing invocation and its exit code, or why a subcommand has none.
type Runtime = Result<(&'static [&'static str], i32), &'static str>;

/// Per subcommand, an invocation that fails after the command line parsed (a missing file, a
/// setting its configuration refuses), with its exit code; or why there is none. The test fails
/// for a subcommand missing here.
const RUNTIME: &[(&str, Runtime)] = &[
    (
        "run",
        Ok((&["run", "--file", "x.log", "--max-line-bytes", "10"], 64)),
    ),
    (
        "hook",
        Ok((
            &[
                "hook",
                "--container",
                "c",
                "--file",
                "h.log",
                "--",
                "./not-here",
            ],
            127,
        )),
    ),
    (
        "sleep",
        Err("every duration that parses is slept; there is nothing else to fail"),
    ),
    ("install", Ok((&["install", "/proc/not-here/bin"], 1))),
    (
        "emit",
        Err("a record it cannot deliver goes to stdout with a warning (a tracing line), exit 0"),
    ),
    ("check", Ok((&["check", "missing.yaml"], 64))),
    (
        "inject",
        Ok((&["inject", "--image", "i:1", "missing.yaml"], 64)),
    ),
    ("uninject", Ok((&["uninject", "missing.yaml"], 64))),
    (
        "webhook",
        Ok((
            &[
                "webhook",
                "--image",
                "i:1",
                "--kubernetes-version",
                "1.30",
                "--tls-cert-file",
                "missing.crt",
                "--tls-key-file",
                "missing.key",
            ],
            // Read when the webhook starts serving: the role failed (as any error of a
            // long-lived role), not its command line.
            1,
        )),
    ),
];

/// The subcommands of the CLI under test, from its own definition.
fn subcommands(cmd: &clap::Command) -> Vec<String> {
    cmd.get_subcommands()
        .map(|s| s.get_name().to_string())
        .filter(|n| n != "help")
        .collect()
}

/// For each flag of `sub` that checks its value, the flag: the ones clap refuses
/// [`BAD_VALUE`] for, asked in-process of the same definition the binary parses with.
fn checked_flags(cmd: &clap::Command, sub: &str) -> Vec<String> {
    let subcommand = cmd.find_subcommand(sub).expect("listed");
    let mut flags = Vec::new();
    for arg in subcommand.get_arguments() {
        let Some(long) = arg.get_long() else { continue };
        if !arg.get_action().takes_values() || long == "log-format" {
            continue;
        }
        let flag = format!("--{long}");
        let argv: Vec<OsString> = ["hooklog", sub, &flag, BAD_VALUE]
            .iter()
            .map(OsString::from)
            .collect();
        let refused = cmd
            .clone()
            .try_get_matches_from(argv)
            .err()
            .is_some_and(|e| {
                matches!(
                    e.kind(),
                    clap::error::ErrorKind::InvalidValue | clap::error::ErrorKind::ValueValidation
                )
            });
        if refused {
            flags.push(flag);
        }
    }
    flags
}

/// Runs `bin` with `args` in `dir`, with `--log-format json` first when `json`, and checks what
/// a fatal error must look like; returns its one line.
fn one_error_line(bin: &Path, dir: &Path, args: &[&str], json: bool, code: i32) -> String {
    let mut c = Command::new(bin);
    for (k, _) in std::env::vars() {
        if k.starts_with("HOOKLOG_") || k.starts_with("POD_") || k.starts_with("KUBERNETES_") {
            c.env_remove(k);
        }
    }
    if json {
        c.args(["--log-format", "json"]);
    }
    let out = c
        .args(args)
        .current_dir(dir)
        .env("HOOKLOG_OFFLINE", "true")
        .output()
        .expect("run hooklog");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let what = format!("{args:?} (json {json}): stderr {stderr:?}");
    assert_eq!(out.status.code(), Some(code), "{what}");
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "one line on stderr: {what}");
    let line = lines[0].to_string();
    if json {
        let v: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {what}"));
        assert_eq!(v["level"], "ERROR", "{what}");
        assert!(
            v["message"].as_str().is_some_and(|m| !m.is_empty()),
            "{what}"
        );
        assert!(
            v["timestamp"].as_str().is_some_and(|t| t.ends_with('Z')),
            "{what}"
        );
        let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(keys.len(), 4, "the same shape everywhere: {what}");
        assert!(
            args.first().is_some_and(|sub| v["command"] == *sub) || v["command"] == "hooklog",
            "{what}"
        );
    } else {
        assert!(line.starts_with("hooklog: "), "{what}");
        assert!(!line.starts_with("hooklog: {"), "{what}");
    }
    line
}

/// Every generated case against `bin`, whose definition is `cmd`; returns how many ran.
fn every_case(bin: &Path, cmd: &clap::Command) -> usize {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut ran = 0;
    let subs = subcommands(cmd);
    assert!(subs.len() >= 5, "{subs:?}");
    for sub in &subs {
        let mut cases: Vec<(Vec<String>, i32)> =
            vec![(vec![sub.clone(), "--no-such-flag".into()], EXIT_USAGE)];
        for flag in checked_flags(cmd, sub) {
            cases.push((vec![sub.clone(), flag, BAD_VALUE.into()], EXIT_USAGE));
        }
        let runtime = RUNTIME
            .iter()
            .find(|(name, _)| name == sub)
            .unwrap_or_else(|| panic!("{sub}: no runtime case in RUNTIME (or a reason)"));
        if let Ok((args, code)) = runtime.1 {
            cases.push((args.iter().map(|s| s.to_string()).collect(), code));
        }
        for (args, code) in &cases {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let json = one_error_line(bin, dir.path(), &args, true, *code);
            let text = one_error_line(bin, dir.path(), &args, false, *code);
            // The same message either way.
            let v: Value = serde_json::from_str(&json).unwrap();
            assert_eq!(
                text.strip_prefix("hooklog: "),
                v["message"].as_str(),
                "{args:?}"
            );
            ran += 1;
        }
    }
    // Not a subcommand at all: the command is hooklog itself.
    let json = one_error_line(bin, dir.path(), &["no-such-command"], true, EXIT_USAGE);
    assert!(json.contains(r#""command":"hooklog""#), "{json}");
    ran + 1
}

#[test]
fn every_subcommands_fatal_error_is_one_line_in_its_log_format() {
    let ran = every_case(&crate::util::hooklog_bin(), &hooklog::cli::command());
    eprintln!("{ran} invocations, each with and without --log-format json");
}

#[test]
fn the_sidecars_fatal_errors_follow_its_log_format_too() {
    let Some(bin) = crate::util::binaries::sidecar_bin() else {
        return;
    };
    // The sidecar's definition is the full CLI's without the control plane's subcommands.
    let mut cmd = hooklog::cli::command();
    let sidecar = ["run", "hook", "sleep", "install", "emit"];
    for sub in subcommands(&cmd) {
        if !sidecar.contains(&sub.as_str()) {
            cmd = cmd.mut_subcommand(&sub, |s| s.hide(true));
            let out = Command::new(&bin)
                .args(["--log-format", "json", &sub])
                .output()
                .unwrap();
            assert_eq!(out.status.code(), Some(EXIT_USAGE));
            let line = String::from_utf8_lossy(&out.stderr);
            assert_eq!(line.lines().count(), 1, "{line}");
            let v: Value = serde_json::from_str(line.trim()).expect("one JSON line");
            assert_eq!(v["command"], "hooklog", "{line}");
        }
    }
    let dir = tempfile::tempdir().unwrap();
    for sub in sidecar {
        one_error_line(&bin, dir.path(), &[sub, "--no-such-flag"], true, EXIT_USAGE);
        one_error_line(
            &bin,
            dir.path(),
            &[sub, "--no-such-flag"],
            false,
            EXIT_USAGE,
        );
    }
}

#[test]
fn log_format_is_read_from_a_command_line_that_does_not_parse() {
    use hooklog::cli::{LogFormat, log_format_of};
    let read = |args: &[&str]| log_format_of(&args.iter().map(OsString::from).collect::<Vec<_>>());
    assert_eq!(
        read(&["hooklog", "--log-format", "json", "run", "--x"]),
        LogFormat::Json
    );
    assert_eq!(
        read(&["hooklog", "run", "--log-format=json"]),
        LogFormat::Json
    );
    assert_eq!(
        read(&["hooklog", "run", "--log-format=JSON"]),
        LogFormat::Json
    );
    // The last one wins, as clap's does; after `--` it is the hook's command's.
    assert_eq!(
        read(&["hooklog", "--log-format", "json", "--log-format", "text"]),
        LogFormat::Text
    );
    assert_eq!(
        read(&["hooklog", "hook", "--", "x", "--log-format", "json"]),
        LogFormat::Text
    );
    assert_eq!(read(&["hooklog", "--log-format"]), LogFormat::Text);
    assert_eq!(read(&["hooklog", "--log-format", "yaml"]), LogFormat::Text);
}
