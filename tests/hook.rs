//! `hooklog hook`, `sleep`, `install` and `emit` on their own: the wrapper's exit status, its
//! records, its timeout and its fallbacks when the daemon is not there.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::util::wrapper::{PidFile, alive, wrapper};
use crate::util::{Daemon, POD_ENV, assert_usage_error, hooklog, hooklog_bin, pod_dir, wait_until};

/// Records in a JSON-lines file (or stream).
fn json_lines(text: &str) -> Vec<Value> {
    text.lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l:?}")))
        .collect()
}

fn events(records: &[Value]) -> Vec<&str> {
    records
        .iter()
        .map(|r| r["event"].as_str().unwrap_or(""))
        .collect()
}

/// Runs `hooklog hook --container envoy FLAGS -- CMD...`.
fn hook(flags: &[&str], cmd: &[&str]) -> Output {
    wrapper("envoy", flags, cmd)
        .output()
        .expect("run hooklog hook")
}

/// [`hook`] reporting to the socket `sock`, and to `file` when the socket fails.
fn hook_via(sock: &Path, file: &Path, cmd: &[&str]) -> Output {
    hook(
        &[
            "--socket",
            sock.to_str().unwrap(),
            "--file",
            file.to_str().unwrap(),
        ],
        cmd,
    )
}

/// Starts envoy's wrapped hook `sh -c SCRIPT`, reporting to `file` (its stdout discarded).
fn spawn_hook(file: &Path, script: &str) -> Child {
    wrapper(
        "envoy",
        &["--file", file.to_str().unwrap()],
        &["sh", "-c", script],
    )
    .stdout(Stdio::null())
    .spawn()
    .unwrap()
}

#[test]
fn hook_exits_with_the_commands_status_and_reports_every_line() {
    let (_dir, file, _) = pod_dir();
    let out = hook(
        &["--file", file.to_str().unwrap()],
        &["sh", "-c", "echo 'to stdout'; echo 'to stderr' >&2; exit 3"],
    );
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    let records = json_lines(&std::fs::read_to_string(&file).unwrap());
    assert_eq!(events(&records)[0], "hook.started");
    assert_eq!(events(&records)[3], "hook.finished");
    assert_eq!(records.len(), 4, "{records:#?}");
    let line = |m: &str| {
        records
            .iter()
            .find(|r| r["message"] == m)
            .unwrap_or_else(|| panic!("{m}"))
    };
    assert_eq!(line("to stdout")["stream"], "stdout");
    assert_eq!(line("to stderr")["stream"], "stderr");
    let f = &records[3];
    assert_eq!(f["container_name"], "envoy");
    assert_eq!(f["hook"], "preStop");
    assert_eq!(f["outcome"], "failed");
    assert_eq!(f["exit_code"], 3);
    assert!(f["signal"].is_null());
    assert!(f["duration_ms"].is_u64());
    assert_eq!(
        records[0]["command"],
        serde_json::json!(["sh", "-c", "echo 'to stdout'; echo 'to stderr' >&2; exit 3"])
    );
    // The output passes through, as if hooklog were not there.
    assert_eq!(String::from_utf8_lossy(&out.stdout), "to stdout\n");
    assert!(String::from_utf8_lossy(&out.stderr).contains("to stderr\n"));
}

#[test]
fn hook_ok_exits_0() {
    let (_dir, file, _) = pod_dir();
    let out = hook(&["--file", file.to_str().unwrap()], &["true"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let records = json_lines(&std::fs::read_to_string(&file).unwrap());
    assert_eq!(events(&records), ["hook.started", "hook.finished"]);
    assert_eq!(records[1]["outcome"], "ok");
    assert_eq!(records[1]["exit_code"], 0);
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn hook_command_not_found_exits_127_and_says_which() {
    let (_dir, file, _) = pod_dir();
    let out = hook(
        &["--file", file.to_str().unwrap()],
        &["sleep-not-here", "5"],
    );
    assert_eq!(out.status.code(), Some(127), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("sleep-not-here"),
        "{out:?}"
    );
    let records = json_lines(&std::fs::read_to_string(&file).unwrap());
    let f = records.last().unwrap();
    assert_eq!(f["event"], "hook.finished");
    assert_eq!(f["outcome"], "failed");
    assert_eq!(f["exit_code"], 127);
    assert!(
        f["message"]
            .as_str()
            .unwrap()
            .contains("command not found: sleep-not-here"),
        "{f}"
    );
}

#[test]
fn hook_not_executable_exits_126() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("drain.sh");
    std::fs::write(&script, "#!/bin/sh\necho hi\n").unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o644)).unwrap();
    let file = dir.path().join("prestop.log");
    let out = hook(
        &["--file", file.to_str().unwrap()],
        &[script.to_str().unwrap()],
    );
    assert_eq!(out.status.code(), Some(126), "{out:?}");
    let records = json_lines(&std::fs::read_to_string(&file).unwrap());
    assert_eq!(records.last().unwrap()["exit_code"], 126);
}

#[test]
fn hook_timeout_kills_the_command_and_its_children_and_exits_124() {
    let (dir, file, _) = pod_dir();
    let pid_file = PidFile::new(dir.path(), "child.pid");
    let started = Instant::now();
    let out = hook(
        &["--file", file.to_str().unwrap(), "--timeout", "500ms"],
        &[
            "sh",
            "-c",
            &format!("sleep 30 & {}; wait", pid_file.echo("$!")),
        ],
    );
    let took = started.elapsed();
    assert_eq!(out.status.code(), Some(124), "{out:?}");
    // The contract: SIGTERM at the 500 ms timeout, and the command (which dies of it) reaped
    // then, 1.8 s of slack for starting hooklog and sh on a loaded machine. A hook that only
    // ended at the SIGKILL (1 s after the SIGTERM, src/hook.rs KILL_AFTER) fails the signal's
    // assertion below.
    let bound = Duration::from_millis(500) + Duration::from_millis(1800);
    assert!(took < bound, "took {took:?}, over {bound:?}");
    let records = json_lines(&std::fs::read_to_string(&file).unwrap());
    let f = records.last().unwrap();
    assert_eq!(f["outcome"], "timed_out", "{f}");
    assert!(f["exit_code"].is_null(), "{f}");
    assert_eq!(f["signal"], "SIGTERM", "{f}");
    let grandchild = pid_file.read();
    assert!(
        wait_until(Duration::from_secs(3), || !alive(grandchild)),
        "the command's child (sleep 30, pid {grandchild}) survived the timeout"
    );
}

/// Issue 37: under a v1.32 kubelet, a hook that ignores SIGTERM, at grace 4 s with inject's
/// `--timeout 2s` (and grace 20 s with `--timeout 18s`), was killed by the kubelet before the
/// wrapper wrote `hook.finished`: reported `unfinished`. The kubelet's kill is played here with
/// a real SIGKILL to the wrapper at the grace; its end must be in the file by then, `timed_out`
/// with its duration.
#[test]
fn a_hook_that_ignores_sigterm_is_reported_timed_out_before_the_kubelets_kill() {
    for (grace, timeout) in [(4u64, "2s"), (20, "18s")] {
        let (_dir, file, _) = pod_dir();
        let started = Instant::now();
        let file_flags = ["--file", file.to_str().unwrap(), "--timeout", timeout];
        let script = "trap '' TERM; while :; do sleep 0.1; done";
        let mut child = wrapper("envoy", &file_flags, &["sh", "-c", script])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let kill_at = started + Duration::from_secs(grace);
        let ended = wait_until(Duration::from_secs(grace), || {
            matches!(child.try_wait(), Ok(Some(_)))
        });
        // The kubelet's kill, at the grace deadline, if the wrapper is still there.
        if !ended {
            std::thread::sleep(kill_at.saturating_duration_since(Instant::now()));
            let _ = child.kill();
        }
        let status = child.wait().unwrap();
        let records = json_lines(&std::fs::read_to_string(&file).unwrap_or_default());
        let finished = records
            .iter()
            .find(|r| r["event"] == "hook.finished")
            .unwrap_or_else(|| {
                panic!("grace {grace}: no hook.finished before the kill: {records:#?}")
            });
        assert!(
            ended,
            "grace {grace}: the wrapper outlived the grace ({status:?})"
        );
        assert_eq!(status.code(), Some(124), "grace {grace}");
        assert_eq!(finished["outcome"], "timed_out", "{finished}");
        assert_eq!(finished["signal"], "SIGKILL", "{finished}");
        let ms = finished["duration_ms"].as_u64().unwrap();
        let timeout_ms = (grace - 2) * 1000;
        assert!(
            (timeout_ms..grace * 1000).contains(&ms),
            "grace {grace}: duration {ms} ms"
        );
    }
}

#[test]
fn hook_timeout_escalates_to_sigkill() {
    let (dir, file, _) = pod_dir();
    let pid_file = PidFile::new(dir.path(), "sh.pid");
    let script = format!(
        "trap '' TERM; {}; while :; do sleep 0.1; done",
        pid_file.echo("$$")
    );
    let out = hook(
        &["--file", file.to_str().unwrap(), "--timeout", "300ms"],
        &["sh", "-c", &script],
    );
    assert_eq!(out.status.code(), Some(124), "{out:?}");
    let records = json_lines(&std::fs::read_to_string(&file).unwrap());
    let f = records.last().unwrap();
    assert_eq!(f["outcome"], "timed_out", "{f}");
    assert_eq!(f["signal"], "SIGKILL", "{f}");
    assert!(!alive(pid_file.read()));
}

#[test]
fn hook_forwards_sigterm_to_the_command() {
    let (dir, file, _) = pod_dir();
    let ready = dir.path().join("ready");
    let script = format!(
        "trap 'echo got TERM; exit 9' TERM; touch {}; while :; do sleep 0.05; done",
        ready.display()
    );
    let mut child = spawn_hook(&file, &script);
    assert!(wait_until(Duration::from_secs(5), || ready.exists()));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let st = child.wait().unwrap();
    assert_eq!(st.code(), Some(9));
    let records = json_lines(&std::fs::read_to_string(&file).unwrap());
    assert!(
        records.iter().any(|r| r["message"] == "got TERM"),
        "{records:#?}"
    );
    assert_eq!(records.last().unwrap()["exit_code"], 9);
}

/// Sends `sig` to a `hooklog hook` running `sh -c 'exec sleep 30'`: the wrapper must forward it
/// to the command's group (no orphaned `sleep`), report `hook.finished` with the signal, and exit
/// 128+N as a shell would.
fn hook_forwards(sig: nix::sys::signal::Signal) {
    let (dir, file, _) = pod_dir();
    let pid_file = PidFile::new(dir.path(), "command.pid");
    let mut child = spawn_hook(&file, &format!("{}; exec sleep 30", pid_file.echo("$$")));
    let command = pid_file.read();
    // `exec` has replaced the shell once the command's name says `sleep`.
    assert!(wait_until(Duration::from_secs(5), || {
        std::fs::read_to_string(format!("/proc/{command}/comm")).is_ok_and(|c| c.trim() == "sleep")
    }));
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), sig).unwrap();
    let exited = wait_until(Duration::from_secs(5), || {
        child.try_wait().unwrap().is_some()
    });
    let orphan = alive(command);
    // Clean up before asserting: the command must not outlive a failed test.
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(command),
        nix::sys::signal::Signal::SIGKILL,
    );
    assert!(exited, "hooklog hook did not exit on {sig}");
    let st = child.wait().unwrap();
    assert!(
        !orphan,
        "the command (pid {command}) outlived the wrapper on {sig}"
    );
    assert_eq!(st.code(), Some(128 + sig as i32), "{st:?}");
    let records = json_lines(&std::fs::read_to_string(&file).unwrap());
    let f = records.last().unwrap();
    assert_eq!(f["event"], "hook.finished", "{records:#?}");
    assert_eq!(f["outcome"], "failed", "{f}");
    assert_eq!(f["signal"], sig.as_str(), "{f}");
}

#[test]
fn hook_forwards_sigint_to_the_command_and_reports_it() {
    hook_forwards(nix::sys::signal::Signal::SIGINT);
}

#[test]
fn hook_forwards_sighup_to_the_command_and_reports_it() {
    hook_forwards(nix::sys::signal::Signal::SIGHUP);
}

#[test]
fn hook_forwards_sigquit_to_the_command_and_reports_it() {
    hook_forwards(nix::sys::signal::Signal::SIGQUIT);
}

#[test]
fn hook_with_socket_down_falls_back_to_the_file() {
    let (dir, file, _) = pod_dir();
    let sock = dir.path().join("nobody.sock");
    let out = hook_via(&sock, &file, &["sh", "-c", "echo 'still logged'; exit 4"]);
    assert_eq!(out.status.code(), Some(4), "{out:?}");
    let records = json_lines(&std::fs::read_to_string(&file).unwrap());
    assert_eq!(
        events(&records),
        ["hook.started", "hook.output", "hook.finished"]
    );
    assert_eq!(records[1]["message"], "still logged");
}

#[test]
fn hook_with_socket_and_file_down_reports_on_stderr() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("nobody.sock");
    // A folder where the file should be: it cannot be opened for appending.
    let not_a_file = dir.path();
    let out = hook_via(
        &sock,
        not_a_file,
        &["sh", "-c", "echo 'nowhere to go'; exit 5"],
    );
    assert_eq!(out.status.code(), Some(5), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let records = json_lines(&stderr);
    assert_eq!(
        events(&records),
        ["hook.started", "hook.output", "hook.finished"],
        "{stderr}"
    );
    assert_eq!(records[2]["exit_code"], 5);
    // The command's own output still passes through.
    assert_eq!(String::from_utf8_lossy(&out.stdout), "nowhere to go\n");
}

#[test]
fn hook_through_a_daemon_socket() {
    let (_dir, _, sock) = pod_dir();
    let mut d = Daemon::listen(&sock, &["--linger", "100ms"], &POD_ENV);
    let out = hook(
        &["--socket", sock.to_str().unwrap()],
        &["sh", "-c", "echo 'via socket'"],
    );
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let records = d.wait_records(3, Duration::from_secs(5));
    assert_eq!(
        events(&records),
        ["hook.started", "hook.output", "hook.finished"]
    );
    for r in &records {
        assert_eq!(r["kubernetes"]["container_name"], "envoy", "{r}");
        assert!(
            r["hooklog"]["input"]
                .as_str()
                .unwrap()
                .starts_with("socket:"),
            "{r}"
        );
    }
    d.stop(Duration::from_secs(5));
    let last = d.records().pop().unwrap();
    assert_eq!(last["event"], "hooks.summary");
    assert_eq!(last["peers"]["envoy"]["outcome"], "ok");
}

#[test]
fn hook_takes_its_settings_from_env() {
    let (_dir, file, _) = pod_dir();
    let out = hooklog()
        .args(["hook", "--", "true"])
        .env("HOOKLOG_CONTAINER", "api-server")
        .env("HOOKLOG_FILE", &file)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let records = json_lines(&std::fs::read_to_string(&file).unwrap());
    assert_eq!(records[0]["container_name"], "api-server");
}

#[test]
fn sleep_takes_the_forms_pods_use() {
    for (arg, ms) in [("0.3", 300u64), ("250ms", 250), ("1s", 1000)] {
        let start = Instant::now();
        let st = hooklog().args(["sleep", arg]).status().unwrap();
        let took = start.elapsed();
        assert!(st.success(), "sleep {arg}: {st}");
        assert!(
            took >= Duration::from_millis(ms),
            "sleep {arg} took {took:?}"
        );
        assert!(
            took < Duration::from_millis(ms) + Duration::from_secs(3),
            "sleep {arg} took {took:?}"
        );
    }
    // Long forms are accepted (still sleeping, not a usage error, after 300 ms).
    for arg in ["50", "50s", "1m30s"] {
        let mut child = hooklog().args(["sleep", arg]).spawn().unwrap();
        let exited = wait_until(Duration::from_millis(300), || {
            child.try_wait().unwrap().is_some()
        });
        assert!(
            !exited,
            "sleep {arg} exited at once: {:?}",
            child.try_wait()
        );
        child.kill().unwrap();
        child.wait().unwrap();
    }
    let out = hooklog().args(["sleep", "banana"]).output().unwrap();
    assert_usage_error(&out, "banana", "sleep banana");
}

#[test]
fn install_copies_a_working_executable_for_everyone() {
    let dir = tempfile::tempdir().unwrap();
    let bin_dir = dir.path().join("shared-logs/bin");
    for _ in 0..2 {
        // Twice: a restarted init container installs over the old copy.
        let out = hooklog().args(["install"]).arg(&bin_dir).output().unwrap();
        assert!(out.status.success(), "{out:?}");
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            bin_dir.join("hooklog").to_str().unwrap()
        );
    }
    let installed = bin_dir.join("hooklog");
    let meta = std::fs::metadata(&installed).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o755);
    assert_eq!(
        std::fs::read(&installed).unwrap(),
        std::fs::read(hooklog_bin()).unwrap()
    );
    let leftovers: Vec<_> = std::fs::read_dir(&bin_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(leftovers, [std::ffi::OsString::from("hooklog")]);
    // The copy runs: a hook wrapping the copy's own sleep.
    let file = dir.path().join("prestop.log");
    let out = Command::new(&installed)
        .args(["hook", "--container", "envoy", "--file"])
        .arg(&file)
        .arg("--")
        .arg(&installed)
        .args(["sleep", "0.1"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let records = json_lines(&std::fs::read_to_string(&file).unwrap());
    assert_eq!(records.last().unwrap()["outcome"], "ok");
}

#[test]
fn emit_writes_to_stdout_without_socket_or_file() {
    let out = hooklog()
        .args([
            "emit",
            "--container",
            "api-server",
            "--field",
            "phase=drain \"now\"",
            "it's 100% done",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let records = json_lines(&String::from_utf8_lossy(&out.stdout));
    assert_eq!(records.len(), 1);
    assert_eq!(records[0]["container_name"], "api-server");
    assert_eq!(records[0]["phase"], "drain \"now\"");
    assert_eq!(records[0]["message"], "it's 100% done");
}

#[test]
fn emit_appends_to_the_file() {
    let (_dir, file, _) = pod_dir();
    for m in ["one", "two"] {
        let st = hooklog()
            .args([
                "emit",
                "--container",
                "api-server",
                "--file",
                file.to_str().unwrap(),
                m,
            ])
            .status()
            .unwrap();
        assert!(st.success());
    }
    let records = json_lines(&std::fs::read_to_string(&file).unwrap());
    assert_eq!(
        records
            .iter()
            .map(|r| r["message"].as_str().unwrap())
            .collect::<Vec<_>>(),
        ["one", "two"]
    );
}

#[test]
fn emit_through_the_daemon_socket() {
    let (_dir, file, sock) = pod_dir();
    let d = Daemon::start(&["--socket", sock.to_str().unwrap()], &POD_ENV);
    let st = hooklog()
        .args([
            "emit",
            "--container",
            "api-server",
            "--socket",
            sock.to_str().unwrap(),
        ])
        .args([
            "--file",
            file.to_str().unwrap(),
            "--field",
            "phase=heap-dump",
            "uploading heap dump",
        ])
        .status()
        .unwrap();
    assert!(st.success());
    let records = d.wait_records(1, Duration::from_secs(5));
    let r = &records[0];
    assert_eq!(r["message"], "uploading heap dump");
    assert_eq!(r["phase"], "heap-dump");
    assert_eq!(r["kubernetes"]["container_name"], "api-server");
    assert_eq!(r["kubernetes"]["pod_name"], "api-server-7d9f5");
    assert!(!file.exists(), "the socket worked, the file is not needed");
}

/// stdout a pipe nobody reads any more (`hooklog ... | head -0`).
fn closed_pipe() -> Stdio {
    let (read, write) = nix::unistd::pipe().expect("pipe");
    drop(read);
    Stdio::from(write)
}

#[test]
fn install_with_stdout_closed_exits_quietly() {
    let dir = tempfile::tempdir().unwrap();
    let out = hooklog()
        .arg("install")
        .arg(dir.path())
        .stdout(closed_pipe())
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "stderr: {stderr}");
    assert!(!stderr.contains("panicked"), "stderr: {stderr}");
    assert!(dir.path().join("hooklog").is_file());
}

#[test]
fn emit_and_hook_with_stdout_closed_exit_quietly() {
    let out = hooklog()
        .args(["emit", "hello"])
        .stdout(closed_pipe())
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(out.stderr.is_empty(), "{out:?}");
    let out = hooklog()
        .args(["hook", "--container", "envoy", "--", "sh", "-c"])
        .arg("for i in 1 2 3; do echo line $i; done; exit 3")
        .stdin(Stdio::null())
        .stdout(closed_pipe())
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("panicked"),
        "{out:?}"
    );
}

#[test]
fn a_misconfigured_hook_still_runs_its_command() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let script = format!("echo ran > {}; exit 3", marker.display());
    for flags in [
        // No --container (and no HOOKLOG_CONTAINER): the pod spec forgot it.
        vec!["--log-format", "json", "hook"],
        // A --timeout that does not parse.
        vec!["hook", "--container", "envoy", "--timeout", "5 sec"],
    ] {
        let _ = std::fs::remove_file(&marker);
        let out = hooklog()
            .args(&flags)
            .args(["--", "sh", "-c", &script])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{flags:?}: {stderr}");
        assert!(marker.exists(), "{flags:?}: the command did not run");
        // The usage error, in --log-format, names what is wrong.
        let usage = stderr.lines().next().unwrap_or_default();
        assert!(
            usage.contains("--container") || usage.contains("--timeout"),
            "{flags:?}: no usage error: {stderr}"
        );
        if flags.contains(&"json") {
            let v: serde_json::Value = serde_json::from_str(usage).expect("a JSON line");
            assert_eq!(v["level"], "ERROR", "{stderr}");
        }
    }
    let out = hooklog()
        .args(["hook", "--", "no-such-hook-command"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(127), "{out:?}");
    // Not for other subcommands, nor without a command.
    let out = hooklog()
        .args(["hook", "--container", "x"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64), "{out:?}");
    let out = hooklog()
        .args(["run", "--bogus", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64), "{out:?}");
}
