//! Test helpers: temporary pods (a folder standing in for the emptyDir), the real `hooklog`
//! binary as a child process with its stdout and stderr collected, and polling under a timeout.
//! The set-up more than one test module needs has a file of its own here, by concern: the
//! webhook and its certificates (`webhook`), the API server tier (`apiserver`), a registry
//! (`registry`), manifests and their validators (`manifests`), the shipped binaries
//! (`binaries`), check's JSON report (`findings`), an injected pod run here (`injected_pod`),
//! `hooklog run --events` and its service account mount (`events`), HTTP stand-ins (`http`), a
//! pod's Downward API volume (`podinfo`), the go-yaml oracle (`goyaml`), podman (`podman`),
//! markdown (`markdown`), the summary's word on a peer (`summary`), the hook wrapper's command
//! (`wrapper`).
#![allow(dead_code)]

pub mod apiserver;
pub mod binaries;
pub mod events;
pub mod findings;
pub mod goyaml;
pub mod http;
pub mod injected_pod;
pub mod manifests;
pub mod markdown;
pub mod podinfo;
pub mod podman;
pub mod registry;
pub mod settings;
pub mod summary;
pub mod webhook;
pub mod wrapper;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

/// The binary under test.
pub fn hooklog_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_hooklog"))
}

/// A `Command` for the binary under test, with a clean Downward API environment.
pub fn hooklog() -> Command {
    let mut c = Command::new(hooklog_bin());
    for k in [
        "POD_NAME",
        "POD_NAMESPACE",
        "POD_UID",
        "POD_IP",
        "NODE_NAME",
    ] {
        c.env_remove(k);
    }
    for (k, _) in std::env::vars() {
        if k.starts_with("HOOKLOG_") {
            c.env_remove(k);
        }
    }
    // `check` reads the images a manifest names from their registries: tests stay off the
    // network (tests/registry.rs removes this to use its own registry on 127.0.0.1).
    c.env("HOOKLOG_OFFLINE", "true");
    c
}

/// How long a `hooklog run` without peers may take to exit after SIGTERM: it drains what it read
/// and exits at once (tests/tail.rs measures under a second for 20,000 lines). The stated slack
/// is for a debug build on a loaded 2-core machine; the bound stays far under the default
/// `--grace` (25 s), so a SIGTERM that waits out its whole grace fails.
pub const PROMPT_EXIT: Duration = Duration::from_secs(5);

/// True on CI (`CI=true` or `CI=1`), where a missing tool or service fails a test instead of
/// skipping it.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

/// Polls `check` every 10 ms until it returns true or `timeout` passes.
pub fn wait_until(timeout: Duration, mut check: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    loop {
        if check() {
            return true;
        }
        if start.elapsed() > timeout {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Runs `script` as `container`'s preStop hook through `hooklog hook`, reporting to `file`
/// (its output not kept).
pub fn hook(file: &Path, container: &str, script: &str) -> ExitStatus {
    hooklog()
        .args(["hook", "--container", container, "--file"])
        .arg(file)
        .args(["--", "sh", "-c", script])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("run hooklog hook")
}

/// A pod's shared emptyDir as a test has it: a temporary folder (removed on drop), the file the
/// hooks write in it (`prestop.log`) and hooklog's socket path (`hooklog.sock`), neither made.
pub fn pod_dir() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let file = dir.path().join("prestop.log");
    let sock = dir.path().join("hooklog.sock");
    (dir, file, sock)
}

/// Runs `cmd` with `input` on its stdin and its stdout and stderr collected. A child that exits
/// before reading all of it (a usage error) is no error here: what it wrote and its exit status
/// are the caller's to check.
pub fn output_with_input(cmd: &mut Command, input: &[u8]) -> std::process::Output {
    use std::io::Write;
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot spawn {cmd:?}: {e}"));
    let mut pipe = child.stdin.take().expect("stdin");
    match pipe.write_all(input) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
        r => r.expect("write stdin"),
    }
    drop(pipe);
    child.wait_with_output().expect("the child's output")
}

/// Spawns `cmd` with no stdin and its stdout and stderr piped, for the caller to read.
pub fn spawn_piped(cmd: &mut Command) -> Child {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot spawn {cmd:?}: {e}"))
}

/// Lines a child wrote to one stream, collected by a thread.
#[derive(Clone, Default)]
pub struct Collected(
    Arc<Mutex<Vec<String>>>,
    Arc<Mutex<Option<std::thread::JoinHandle<()>>>>,
);

impl Collected {
    pub fn spawn(r: impl std::io::Read + Send + 'static) -> Self {
        let c = Collected::default();
        let lines = c.0.clone();
        let handle = std::thread::spawn(move || {
            let mut r = BufReader::new(r);
            let mut buf = Vec::new();
            while let Ok(n) = r.read_until(b'\n', &mut buf) {
                if n == 0 {
                    break;
                }
                let line = String::from_utf8_lossy(&buf)
                    .trim_end_matches('\n')
                    .to_string();
                lines.lock().unwrap().push(line);
                buf.clear();
            }
        });
        *c.1.lock().unwrap() = Some(handle);
        c
    }

    /// Waits until the stream reached its end (the child closed it).
    pub fn join(&self) {
        if let Some(h) = self.1.lock().unwrap().take() {
            h.join().expect("collector thread");
        }
    }

    /// Every line so far.
    pub fn lines(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }

    /// The number of lines so far.
    pub fn len(&self) -> usize {
        self.0.lock().unwrap().len()
    }

    /// Whether a line so far contains `s`.
    pub fn contains(&self, s: &str) -> bool {
        self.0.lock().unwrap().iter().any(|l| l.contains(s))
    }

    /// How many lines so far contain `s`.
    pub fn count(&self, s: &str) -> usize {
        self.0
            .lock()
            .unwrap()
            .iter()
            .filter(|l| l.contains(s))
            .count()
    }
}

/// A running `hooklog run`.
pub struct Daemon {
    pub child: Child,
    pub stdout: Collected,
    pub stderr: Collected,
    pub started: Instant,
}

impl Daemon {
    /// Starts `hooklog run ARGS` with `env` and waits until it says it is ready.
    pub fn start(args: &[&str], env: &[(&str, &str)]) -> Daemon {
        let mut cmd = hooklog();
        cmd.arg("run").args(args).envs(env.iter().copied());
        Self::spawn(cmd)
    }

    /// Starts `hooklog run --file FILE [--socket SOCK] ARGS` with `env`, as a pod's sidecar
    /// follows the shared folder's file and socket.
    pub fn follow(file: &Path, sock: Option<&Path>, args: &[&str], env: &[(&str, &str)]) -> Daemon {
        let mut cmd = hooklog();
        cmd.arg("run").arg("--file").arg(file);
        if let Some(sock) = sock {
            cmd.arg("--socket").arg(sock);
        }
        cmd.args(args).envs(env.iter().copied());
        Self::spawn(cmd)
    }

    /// Starts `hooklog run --socket SOCK ARGS` with `env`: a sidecar that only listens.
    pub fn listen(sock: &Path, args: &[&str], env: &[(&str, &str)]) -> Daemon {
        let mut cmd = hooklog();
        cmd.arg("run").arg("--socket").arg(sock);
        cmd.args(args).envs(env.iter().copied());
        Self::spawn(cmd)
    }

    /// Starts a prepared command (whose subcommand is `run`) and waits for readiness.
    pub fn spawn(mut cmd: Command) -> Daemon {
        let started = Instant::now();
        let mut child = spawn_piped(&mut cmd);
        let stdout = Collected::spawn(child.stdout.take().unwrap());
        let stderr = Collected::spawn(child.stderr.take().unwrap());
        let d = Daemon {
            child,
            stdout,
            stderr,
            started,
        };
        let ready = wait_until(Duration::from_secs(10), || {
            d.stderr.lines().iter().any(|l| l.contains("hooklog ready"))
        });
        assert!(
            ready,
            "hooklog did not become ready; stderr: {:#?}",
            d.stderr.lines()
        );
        d
    }

    /// Every stdout line parsed as JSON (a line that is not JSON fails the test).
    pub fn records(&self) -> Vec<Value> {
        self.stdout
            .lines()
            .iter()
            .map(|l| {
                serde_json::from_str(l)
                    .unwrap_or_else(|e| panic!("stdout line is not JSON ({e}): {l:?}"))
            })
            .collect()
    }

    /// The last record, checked to be the summary.
    pub fn summary(&self) -> Value {
        let records = self.records();
        let last = records.last().cloned().unwrap_or_default();
        assert_eq!(
            last["event"], "hooks.summary",
            "the summary is not last: {records:#?}"
        );
        last
    }

    /// Waits until `n` records have come out.
    pub fn wait_records(&self, n: usize, timeout: Duration) -> Vec<Value> {
        let ok = wait_until(timeout, || self.stdout.len() >= n);
        assert!(
            ok,
            "expected {n} records, got {}: {:#?}\nstderr: {:#?}",
            self.stdout.len(),
            self.stdout.lines(),
            self.stderr.lines()
        );
        self.records()
    }

    /// Waits until `check` holds; fails the test with `what` and hooklog's stderr when it does not
    /// within `timeout`.
    pub fn expect(&self, timeout: Duration, what: &str, check: impl FnMut() -> bool) {
        let ok = wait_until(timeout, check);
        assert!(
            ok,
            "{what} within {timeout:?}; stderr: {:#?}",
            self.stderr.lines()
        );
    }

    /// Sends a signal.
    pub fn signal(&self, sig: &str) {
        let st = Command::new("kill")
            .args(["-s", sig, &self.child.id().to_string()])
            .status()
            .expect("run kill");
        assert!(st.success());
    }

    /// Sends SIGTERM.
    pub fn terminate(&self) {
        self.signal("TERM");
    }

    /// Sends SIGTERM and waits for a successful exit within `timeout` (everything it wrote is
    /// collected then).
    pub fn stop(&mut self, timeout: Duration) {
        self.terminate();
        let st = self.wait_exit(timeout);
        assert!(
            st.success(),
            "hooklog exited {st} after SIGTERM; stderr: {:#?}",
            self.stderr.lines()
        );
    }

    /// Waits for exit; panics (after killing it) when it takes longer than `timeout`.
    pub fn wait_exit(&mut self, timeout: Duration) -> ExitStatus {
        let start = Instant::now();
        loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                // Everything the child wrote is collected once its pipes reach their end.
                self.stdout.join();
                self.stderr.join();
                return st;
            }
            if start.elapsed() > timeout {
                let _ = self.child.kill();
                panic!(
                    "hooklog did not exit within {timeout:?}; stderr: {:#?}",
                    self.stderr.lines()
                );
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Waits until process `pid` has the file now at `path` open (a file created at the path and
/// renamed away before hooklog ever opened it is not read: docs/inputs-and-records.md's limits).
/// Fails the test when no file is at `path`, or hooklog has not opened it, within `timeout`.
pub fn wait_open(pid: u32, path: &Path, timeout: Duration) {
    use std::os::unix::fs::MetadataExt;
    let fds = format!("/proc/{pid}/fd");
    let ok = wait_until(timeout, || {
        let Ok(m) = std::fs::metadata(path) else {
            return false;
        };
        std::fs::read_dir(&fds)
            .into_iter()
            .flatten()
            .flatten()
            .any(|e| {
                std::fs::metadata(e.path()).is_ok_and(|f| (f.dev(), f.ino()) == (m.dev(), m.ino()))
            })
    });
    assert!(
        ok,
        "hooklog never opened {} (there: {})",
        path.display(),
        path.exists()
    );
}

/// Where process `pid` is reading the file `m` describes: the `pos` of its descriptor for it
/// (/proc/PID/fdinfo), or `None` when it has none.
pub fn read_position(pid: u32, m: &std::fs::Metadata) -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .ok()?
        .flatten()
        .filter(|e| {
            std::fs::metadata(e.path()).is_ok_and(|f| (f.dev(), f.ino()) == (m.dev(), m.ino()))
        })
        .find_map(|e| {
            let info =
                std::fs::read_to_string(format!("/proc/{pid}/fdinfo/{}", e.file_name().to_str()?))
                    .ok()?;
            info.lines()
                .find_map(|l| l.strip_prefix("pos:"))?
                .trim()
                .parse()
                .ok()
        })
}

/// True when every thread of process `pid` is asleep (state `S` in /proc/PID/task/*/stat; a
/// thread waiting for a CPU is `R`): nothing in it runs until something outside wakes it.
pub fn all_asleep(pid: u32) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    tasks.flatten().all(|t| {
        std::fs::read_to_string(t.path().join("stat")).is_ok_and(|s| {
            // `pid (comm) state ...`: comm may hold spaces and parentheses.
            s.rsplit_once(") ")
                .is_some_and(|(_, rest)| rest.starts_with('S'))
        })
    })
}

/// A `kB` figure of process `pid`'s /proc/PID/status (`VmRSS`, `VmHWM`, ...).
pub fn status_kb(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_else(|e| panic!("/proc/{pid}/status: {e}"));
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"))
}

/// The subcommands a `--help` text lists, as clap prints them (`  NAME  About` under
/// `Commands:`).
pub fn listed_subcommands(help: &str) -> Vec<String> {
    help.split("Commands:")
        .nth(1)
        .unwrap_or_default()
        .lines()
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect()
}

/// `path` opened to append, created when missing, as a writer's `>>` opens it.
pub fn open_append(path: &Path) -> std::fs::File {
    std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)
        .unwrap_or_else(|e| panic!("cannot open {} to append: {e}", path.display()))
}

/// Appends `bytes` to `path` (created when missing) in one write, as a peer's `echo >>` does.
pub fn append(path: &Path, bytes: impl AsRef<[u8]>) {
    use std::io::Write;
    open_append(path)
        .write_all(bytes.as_ref())
        .unwrap_or_else(|e| panic!("cannot append to {}: {e}", path.display()));
}

/// Runs `sh -c SCRIPT` in `dir` and asserts it succeeded.
pub fn sh(dir: &Path, script: &str) {
    let st = Command::new("sh")
        .arg("-c")
        .arg(script)
        .current_dir(dir)
        .status()
        .expect("run sh");
    assert!(st.success(), "sh -c {script:?} failed: {st}");
}

/// The `message` of every record, in order.
pub fn messages(records: &[Value]) -> Vec<String> {
    records
        .iter()
        .filter_map(|r| r["message"].as_str().map(str::to_string))
        .collect()
}

/// The Downward API environment of a test pod.
pub const POD_ENV: [(&str, &str); 5] = [
    ("POD_NAME", "api-server-7d9f5"),
    ("POD_NAMESPACE", "shop"),
    ("POD_UID", "0b1c2d3e-aaaa-bbbb-cccc-0123456789ab"),
    ("POD_IP", "10.0.7.12"),
    ("NODE_NAME", "fargate-ip-10-0-7-12.ec2.internal"),
];

/// Bytes a child wrote, as text (invalid UTF-8 replaced).
pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

impl Daemon {
    /// Fails the test unless a line hooklog wrote to its stderr so far contains `what`.
    pub fn assert_said(&self, what: &str) {
        assert!(
            self.stderr.contains(what),
            "hooklog's stderr does not say {what:?}: {:#?}",
            self.stderr.lines()
        );
    }
}

/// The command was refused as misused: exit 64 (EX_USAGE), its stderr saying `says`; `case`
/// names the call in a failure.
pub fn assert_usage_error(out: &std::process::Output, says: &str, case: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(64), "{case}: {stderr}");
    assert!(
        stderr.contains(says),
        "{case}: not saying {says:?}: {stderr}"
    );
}

/// Fails the test unless `text` holds every one of `parts`, naming the first it lacks.
pub fn assert_contains_all(text: &str, parts: &[&str]) {
    for part in parts {
        assert!(text.contains(part), "{part:?} not in: {text}");
    }
}
