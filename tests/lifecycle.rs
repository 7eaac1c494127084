//! The pod simulation: `hooklog run` (the real binary) and several "containers" (real `sh`
//! processes) sharing a temporary folder as the emptyDir, with a small kubelet driving them in
//! the kubelet's order. On pod deletion every preStop hook starts at once (the installed
//! `hooklog hook` wrapping a real command); each container gets SIGTERM when its own hook ends;
//! everything still alive gets SIGKILL at the pod's grace deadline. Each scenario checks that
//! every line written comes out exactly once, that the `hooks.summary` record is last and names
//! each peer's true outcome, and that hooklog exits 0, after its last peer's hook and never after
//! its own grace deadline.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;
use serde_json::{Value, json};

use crate::util::wrapper::wrapper;
use crate::util::{Daemon, POD_ENV, append, hooklog, pod_dir, wait_until};

/// hooklog's `--grace` in most scenarios: short, so the suite stays fast.
const GRACE: Duration = Duration::from_secs(3);
/// The pod's terminationGracePeriodSeconds stand-in: the kubelet's SIGKILL.
const POD_GRACE: Duration = Duration::from_secs(5);
/// hooklog's `--linger` in most scenarios.
const LINGER: Duration = Duration::from_millis(300);
/// hooklog's `--announce-timeout` in most scenarios.
const ANNOUNCE: Duration = Duration::from_secs(1);
/// Slack allowed on top of a deadline hooklog must meet (process start-up, polling, a loaded
/// 2-core machine). The brief: "never later; measure with a tolerance, e.g. < grace + 1 s".
const SLACK: Duration = Duration::from_secs(1);
/// `--grace` of the tests that check a wait ends on what it waits for: far past each wait's own
/// bound, so a wait that runs on until hooklog stops waiting (2 s before the grace) fails by
/// many seconds, not by a margin the machine's load could eat. The simulated kubelet's SIGKILL
/// comes [`POD_GRACE`] later.
const LONG_GRACE: Duration = Duration::from_secs(20);
/// How often the simulated kubelet looks at its processes.
const TICK: Duration = Duration::from_millis(5);

/// The daemon's settings for one pod.
struct Settings {
    grace: Duration,
    linger: Duration,
    announce: Duration,
    peers: &'static [&'static str],
    /// `--native-sidecar`.
    native: bool,
    /// The pod's grace period: the simulated kubelet's SIGKILL comes this long after the deletion.
    pod_grace: Duration,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            grace: GRACE,
            linger: LINGER,
            announce: ANNOUNCE,
            peers: &[],
            native: false,
            pod_grace: POD_GRACE,
        }
    }
}

impl Settings {
    /// The default settings, with `--peers`.
    fn peers(peers: &'static [&'static str]) -> Settings {
        Settings {
            peers,
            ..Settings::default()
        }
    }

    /// [`LONG_GRACE`] as hooklog's `--grace`, the kubelet's SIGKILL [`POD_GRACE`] after it.
    fn long_grace(self) -> Settings {
        Settings {
            grace: LONG_GRACE,
            pod_grace: LONG_GRACE + POD_GRACE,
            ..self
        }
    }
}

/// A pod: the emptyDir, the installed hooklog in it, and the running sidecar.
struct Pod {
    dir: tempfile::TempDir,
    /// `/shared-logs/bin/hooklog`: the copy `hooklog install` put in the emptyDir.
    bin: PathBuf,
    sock: PathBuf,
    file: PathBuf,
    daemon: Daemon,
    settings: Settings,
}

fn ms(d: Duration) -> String {
    format!("{}ms", d.as_millis())
}

impl Pod {
    /// The init step (`hooklog install`), then the sidecar.
    fn start(settings: Settings) -> Pod {
        Self::start_with(settings, true)
    }

    fn start_with(settings: Settings, socket: bool) -> Pod {
        let dir = tempfile::tempdir().unwrap();
        let out = hooklog()
            .args(["install"])
            .arg(dir.path().join("bin"))
            .output()
            .expect("run hooklog install");
        assert!(out.status.success(), "hooklog install failed: {out:?}");
        let bin = dir.path().join("bin/hooklog");
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            bin.to_str().unwrap()
        );
        let sock = dir.path().join("hooklog.sock");
        let file = dir.path().join("prestop.log");
        let mut args: Vec<String> = vec!["--file".into(), file.to_str().unwrap().into()];
        if socket {
            args.extend(["--socket".into(), sock.to_str().unwrap().into()]);
        }
        args.extend([
            "--grace".into(),
            ms(settings.grace),
            "--linger".into(),
            ms(settings.linger),
            "--announce-timeout".into(),
            ms(settings.announce),
        ]);
        if !settings.peers.is_empty() {
            args.extend(["--peers".into(), settings.peers.join(",")]);
        }
        if settings.native {
            args.push("--native-sidecar".into());
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let daemon = Daemon::start(&args, &POD_ENV);
        Pod {
            dir,
            bin,
            sock,
            file,
            daemon,
            settings,
        }
    }

    /// A command run inside a "container": env for scripts to reach the emptyDir, no HOOKLOG_*
    /// from the test runner.
    fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut c = Command::new(program);
        for (k, _) in std::env::vars() {
            if k.starts_with("HOOKLOG_") {
                c.env_remove(k);
            }
        }
        c.env("HL", &self.bin)
            .env("SHARED_SOCK", &self.sock)
            .env("SHARED_FILE", &self.file)
            .env("SHARED_DIR", self.dir.path())
            .current_dir(self.dir.path())
            .stdin(Stdio::null())
            // Its own process group: the kubelet's SIGKILL takes the whole container.
            .process_group(0);
        c
    }
}

/// A container of the simulated pod.
struct Spec {
    name: &'static str,
    /// The preStop hook: the command after `hooklog hook ... --`; none for a container without.
    hook: Option<Vec<String>>,
    /// Extra `hooklog hook` flags (`--timeout`).
    hook_flags: Vec<String>,
    /// The kubelet starts this hook this long after the deletion (exec latency, a slow runtime).
    hook_delay: Duration,
    /// A line the container's main process appends to the shared file when it gets SIGTERM.
    term_line: Option<String>,
    /// Hand the wrapper a socket path nobody listens on (the fallback to the file).
    dead_socket: bool,
}

impl Spec {
    fn new(name: &'static str) -> Spec {
        Spec {
            name,
            hook: None,
            hook_flags: Vec::new(),
            hook_delay: Duration::ZERO,
            term_line: None,
            dead_socket: false,
        }
    }

    /// A hook running `sh -c SCRIPT`.
    fn sh(mut self, script: &str) -> Spec {
        self.hook = Some(vec!["sh".into(), "-c".into(), script.into()]);
        self
    }

    /// A hook running the command as is (no shell, like a distroless image).
    fn exec(mut self, cmd: &[&str]) -> Spec {
        self.hook = Some(cmd.iter().map(|s| s.to_string()).collect());
        self
    }
}

/// When the sidecar gets its SIGTERM.
#[derive(Clone, Copy, Debug)]
enum SidecarTerm {
    /// At the deletion, before any hook started (a regular container without a preStop).
    AtDeletion,
    /// This long after the deletion.
    After(Duration),
    /// Once every main container has exited (a native sidecar, Kubernetes 1.29+).
    AfterMainsExit,
}

/// SIGTERM while the hooks run.
const DURING_THE_HOOKS: SidecarTerm = SidecarTerm::After(Duration::from_millis(300));

/// What the kubelet saw.
struct Ended {
    /// When the sidecar got SIGTERM.
    sigterm_at: Instant,
    /// From SIGTERM to the daemon's exit.
    daemon_took: Duration,
    daemon_status: ExitStatus,
    /// When the daemon exited.
    daemon_exit_at: Instant,
    /// Each hook's exit status and when it was seen to end; killed ones are marked.
    hooks: BTreeMap<&'static str, HookEnd>,
}

impl Ended {
    /// hooklog left after its SIGTERM within `bounds`; `what` says why those.
    fn assert_left_within(&self, bounds: std::ops::Range<Duration>, what: &str) {
        assert!(
            bounds.contains(&self.daemon_took),
            "hooklog left {:?} after SIGTERM, outside {bounds:?} ({what})",
            self.daemon_took
        );
    }
}

struct HookEnd {
    status: ExitStatus,
    ended_at: Instant,
    killed_by_kubelet: bool,
    stdout: String,
    stderr: String,
}

/// One container's processes.
struct Running {
    main: Child,
    main_done: bool,
    main_termed: bool,
    hook: Option<Child>,
    hook_end: Option<(ExitStatus, Instant, bool)>,
}

fn signal(pid: u32, sig: Signal) {
    // The process may have exited already.
    let _ = kill(Pid::from_raw(pid as i32), sig);
}

fn kill_group(pid: u32) {
    // The group may be gone already.
    let _ = killpg(Pid::from_raw(pid as i32), Signal::SIGKILL);
}

/// Sends SIGTERM to the daemon; returns the instant just before the signal went (so durations
/// measured from it are never shorter than the daemon's own).
fn sigterm(daemon: &Daemon) -> Instant {
    let at = Instant::now();
    kill(Pid::from_raw(daemon.child.id() as i32), Signal::SIGTERM).expect("signal hooklog");
    at
}

/// Deletes the pod: runs its containers' preStop hooks and signals, in the kubelet's order, and
/// SIGKILLs what is left at the pod's grace deadline (`Settings::pod_grace`).
fn delete_pod(pod: &mut Pod, specs: &[Spec], term: SidecarTerm) -> Ended {
    let pod_grace = pod.settings.pod_grace;
    // The containers' main processes; each appends its `term_line` on SIGTERM.
    let mut running: Vec<Running> = specs
        .iter()
        .map(|s| {
            let ready = pod.dir.path().join(format!("{}.ready", s.name));
            let script = "trap 'kill $p 2>/dev/null; if [ -n \"$TERM_LINE\" ]; then echo \"$TERM_LINE\" >> \"$SHARED_FILE\"; fi; exit 0' TERM; \
                          sleep 600 & p=$!; touch \"$READY\"; wait $p";
            let main = pod
                .command("sh")
                .arg("-c")
                .arg(script)
                .env("TERM_LINE", s.term_line.clone().unwrap_or_default())
                .env("READY", &ready)
                .stdout(Stdio::null())
                .spawn()
                .expect("spawn sh for a container");
            Running {
                main,
                main_done: false,
                main_termed: false,
                hook: None,
                hook_end: None,
            }
        })
        .collect();
    let all_ready = wait_until(Duration::from_secs(10), || {
        specs
            .iter()
            .all(|s| pod.dir.path().join(format!("{}.ready", s.name)).exists())
    });
    assert!(all_ready, "the containers' shells did not start");

    let deleted = Instant::now();
    let mut sigterm_at = None;
    if let SidecarTerm::AtDeletion = term {
        sigterm_at = Some(sigterm(&pod.daemon));
    }
    let mut daemon_exit: Option<(ExitStatus, Instant)> = None;
    loop {
        let now = Instant::now();
        for (s, r) in specs.iter().zip(running.iter_mut()) {
            match &s.hook {
                None if !r.main_termed => {
                    signal(r.main.id(), Signal::SIGTERM);
                    r.main_termed = true;
                }
                Some(cmd)
                    if r.hook.is_none()
                        && r.hook_end.is_none()
                        && now >= deleted + s.hook_delay =>
                {
                    let socket = if s.dead_socket {
                        pod.dir.path().join("nobody-listens.sock")
                    } else {
                        pod.sock.clone()
                    };
                    let hook = pod
                        .command(&pod.bin)
                        .args(["hook", "--container", s.name, "--socket"])
                        .arg(socket)
                        .arg("--file")
                        .arg(&pod.file)
                        .args(&s.hook_flags)
                        .arg("--")
                        .args(cmd)
                        .stdout(
                            File::create(pod.dir.path().join(format!("{}.hook.out", s.name)))
                                .unwrap(),
                        )
                        .stderr(
                            File::create(pod.dir.path().join(format!("{}.hook.err", s.name)))
                                .unwrap(),
                        )
                        .spawn()
                        .expect("spawn the installed hooklog hook");
                    r.hook = Some(hook);
                }
                _ => {}
            }
            if let Some(h) = r.hook.as_mut()
                && let Some(st) = h.try_wait().unwrap()
            {
                r.hook_end = Some((st, Instant::now(), false));
                r.hook = None;
                // The kubelet sends SIGTERM once the container's hook ended.
                signal(r.main.id(), Signal::SIGTERM);
                r.main_termed = true;
            }
            if !r.main_done && r.main.try_wait().unwrap().is_some() {
                r.main_done = true;
            }
        }
        if sigterm_at.is_none() {
            let due = match term {
                SidecarTerm::AtDeletion => true,
                SidecarTerm::After(d) => now >= deleted + d,
                SidecarTerm::AfterMainsExit => running.iter().all(|r| r.main_done),
            };
            if due {
                sigterm_at = Some(sigterm(&pod.daemon));
            }
        }
        if daemon_exit.is_none()
            && let Some(st) = pod.daemon.child.try_wait().unwrap()
        {
            daemon_exit = Some((st, Instant::now()));
        }
        let containers_done = running.iter().all(|r| r.main_done && r.hook.is_none());
        if daemon_exit.is_some() && containers_done {
            break;
        }
        if now >= deleted + pod_grace {
            // The kubelet's SIGKILL: hooks, containers, and the sidecar if it is still there.
            for r in &mut running {
                if let Some(mut h) = r.hook.take() {
                    kill_group(h.id());
                    let st = h.wait().unwrap();
                    r.hook_end = Some((st, Instant::now(), true));
                }
                kill_group(r.main.id());
                let _ = r.main.wait();
            }
            if daemon_exit.is_none() {
                let _ = pod.daemon.child.kill();
                let st = pod.daemon.child.wait().unwrap();
                daemon_exit = Some((st, Instant::now()));
            }
            break;
        }
        std::thread::sleep(TICK);
    }
    for r in &mut running {
        kill_group(r.main.id());
        let _ = r.main.wait();
    }
    let sigterm_at = sigterm_at.expect("the sidecar got SIGTERM");
    let (daemon_status, daemon_exit_at) = daemon_exit.expect("the daemon ended");
    // Let the collector threads read the rest of the pipes.
    pod.daemon.wait_exit(Duration::from_secs(1));
    let hooks = specs
        .iter()
        .zip(running)
        .filter_map(|(s, r)| {
            let (status, ended_at, killed_by_kubelet) = r.hook_end?;
            let read = |ext: &str| {
                std::fs::read_to_string(pod.dir.path().join(format!("{}.hook.{ext}", s.name)))
                    .unwrap_or_default()
            };
            Some((
                s.name,
                HookEnd {
                    status,
                    ended_at,
                    killed_by_kubelet,
                    stdout: read("out"),
                    stderr: read("err"),
                },
            ))
        })
        .collect();
    Ended {
        sigterm_at,
        daemon_took: daemon_exit_at.saturating_duration_since(sigterm_at),
        daemon_status,
        daemon_exit_at,
        hooks,
    }
}

/// How a line a peer wrote is expected to come out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Via {
    /// A hook's stdout line, relayed by the wrapper.
    Stdout,
    /// A hook's stderr line, relayed by the wrapper.
    Stderr,
    /// A plain line appended to the shared file.
    Plain,
    /// A record from `hooklog emit --container`.
    Emit,
}

/// One line a peer wrote.
struct Line {
    container: &'static str,
    via: Via,
    text: String,
}

fn line(container: &'static str, via: Via, text: &str) -> Line {
    Line {
        container,
        via,
        text: text.to_string(),
    }
}

/// A line of `container`'s hook on its stdout.
fn stdout(container: &'static str, text: &str) -> Line {
    line(container, Via::Stdout, text)
}

/// A line of `container`'s hook on its stderr.
fn stderr(container: &'static str, text: &str) -> Line {
    line(container, Via::Stderr, text)
}

/// A line `container` appended to the shared file.
fn plain(container: &'static str, text: &str) -> Line {
    line(container, Via::Plain, text)
}

/// A record `container` wrote with `hooklog emit`.
fn emitted(container: &'static str, text: &str) -> Line {
    line(container, Via::Emit, text)
}

/// A peer's expected outcome in the summary.
struct Outcome {
    name: &'static str,
    outcome: &'static str,
    exit_code: Option<i64>,
}

/// `name`'s hook exited 0.
fn ok(name: &'static str) -> Outcome {
    Outcome {
        name,
        outcome: "ok",
        exit_code: Some(0),
    }
}

/// `name`'s hook exited with `code`.
fn failed(name: &'static str, code: i64) -> Outcome {
    Outcome {
        name,
        outcome: "failed",
        exit_code: Some(code),
    }
}

/// An outcome without an exit code: `missing`, `unfinished`, `timed_out`.
fn without_exit(name: &'static str, outcome: &'static str) -> Outcome {
    Outcome {
        name,
        outcome,
        exit_code: None,
    }
}

/// `name` never reported a hook.
fn missing(name: &'static str) -> Outcome {
    without_exit(name, "missing")
}

/// `name`'s hook still ran when hooklog left.
fn unfinished(name: &'static str) -> Outcome {
    without_exit(name, "unfinished")
}

/// The wrapper's `--timeout` ended `name`'s hook.
fn timed_out(name: &'static str) -> Outcome {
    without_exit(name, "timed_out")
}

fn event(r: &Value) -> &str {
    r["event"].as_str().unwrap_or("")
}

/// The events of `records`, in order (`""` for a record without one).
fn events<'r>(records: impl IntoIterator<Item = &'r Value>) -> Vec<&'r str> {
    records.into_iter().map(event).collect()
}

/// The checks every scenario makes. Returns the summary record.
fn check(pod: &Pod, ended: &Ended, lines: &[Line], outcomes: &[Outcome]) -> Value {
    let stderr = pod.daemon.stderr.lines();
    let records = pod.daemon.records();
    let dump = || format!("records: {records:#?}\nstderr: {stderr:#?}");

    // hooklog left by itself, with 0, never after its grace deadline.
    eprintln!(
        "hooklog exited {:?} after SIGTERM (grace {:?}, linger {:?}, announce {:?})",
        ended.daemon_took, pod.settings.grace, pod.settings.linger, pod.settings.announce
    );
    assert!(
        ended.daemon_status.success(),
        "hooklog exited {} after {:?}\n{}",
        ended.daemon_status,
        ended.daemon_took,
        dump()
    );
    ended.assert_left_within(Duration::ZERO..pod.settings.grace + SLACK, "its grace");
    // ... and not before a hook it saw finish had ended.
    for (name, h) in &ended.hooks {
        if !h.killed_by_kubelet {
            assert!(
                ended.daemon_exit_at >= h.ended_at,
                "hooklog exited before {name}'s hook ended"
            );
        }
    }

    // The summary is the last record, and the only one.
    let summaries: Vec<usize> = (0..records.len())
        .filter(|i| event(&records[*i]) == "hooks.summary")
        .collect();
    assert_eq!(
        summaries,
        vec![records.len() - 1],
        "one summary, last\n{}",
        dump()
    );
    let summary = records.last().unwrap().clone();

    // Every line in comes out exactly once.
    for l in lines {
        let found: Vec<&Value> = records
            .iter()
            .filter(|r| r["message"] == l.text.as_str())
            .collect();
        assert_eq!(
            found.len(),
            1,
            "{:?} came out {} times\n{}",
            l.text,
            found.len(),
            dump()
        );
        let r = found[0];
        match l.via {
            Via::Stdout | Via::Stderr => {
                assert_eq!(event(r), "hook.output", "{r}");
                let stream = if l.via == Via::Stdout {
                    "stdout"
                } else {
                    "stderr"
                };
                assert_eq!(r["stream"], stream, "{r}");
                assert_eq!(r["container_name"], l.container, "{r}");
                assert_eq!(r["kubernetes"]["container_name"], l.container, "{r}");
            }
            Via::Emit => assert_eq!(r["container_name"], l.container, "{r}"),
            Via::Plain => assert!(r.get("event").is_none(), "{r}"),
        }
        assert_eq!(r["kubernetes"]["pod_name"], "api-server-7d9f5", "{r}");
    }
    // No record twice, and nothing that was not written.
    let keys: Vec<String> = records
        .iter()
        .map(|r| {
            json!([
                r["container_name"],
                r["event"],
                r["stream"],
                r["message"],
                r["hooklog"]["input"]
            ])
            .to_string()
        })
        .collect();
    let unique: BTreeSet<&String> = keys.iter().collect();
    assert_eq!(
        unique.len(),
        keys.len(),
        "a record came out twice\n{}",
        dump()
    );
    let mut expected_hook_records = 0;
    for (name, h) in &ended.hooks {
        let of = |ev: &str| -> Vec<usize> {
            (0..records.len())
                .filter(|i| event(&records[*i]) == ev && records[*i]["container_name"] == *name)
                .collect()
        };
        let started = of("hook.started");
        assert_eq!(started.len(), 1, "{name}: hook.started\n{}", dump());
        let finished = of("hook.finished");
        expected_hook_records += 1;
        if h.killed_by_kubelet {
            assert!(
                finished.is_empty(),
                "{name} was killed, yet finished\n{}",
                dump()
            );
        } else {
            assert_eq!(finished.len(), 1, "{name}: hook.finished\n{}", dump());
            expected_hook_records += 1;
            // The wrapper's lines keep their order: started, output, finished.
            for i in of("hook.output") {
                assert!(
                    started[0] < i && i < finished[0],
                    "{name}: record {i} out of order\n{}",
                    dump()
                );
            }
            // The wrapper exits with the command's status; the record says the same.
            let f = &records[finished[0]];
            if let Some(code) = h.status.code()
                && f["outcome"] != "timed_out"
            {
                assert_eq!(f["exit_code"], code, "{name}: {f}");
            }
        }
    }
    assert_eq!(
        records.len(),
        lines.len() + expected_hook_records + 1,
        "records other than the lines written, the hook events and the summary\n{}",
        dump()
    );

    // The summary names each peer's true outcome.
    let peers = summary["peers"].as_object().expect("summary has peers");
    let names: BTreeSet<&str> = peers.keys().map(String::as_str).collect();
    let want: BTreeSet<&str> = outcomes.iter().map(|o| o.name).collect();
    assert_eq!(names, want, "{summary}");
    for o in outcomes {
        let p = &peers[o.name];
        assert_eq!(p["outcome"], o.outcome, "{}: {summary}", o.name);
        assert_eq!(p["exit_code"], json!(o.exit_code), "{}: {summary}", o.name);
        let finished = records
            .iter()
            .find(|r| event(r) == "hook.finished" && r["container_name"] == o.name);
        match (o.outcome, finished) {
            ("missing", _) => assert!(p["duration_ms"].is_null(), "{summary}"),
            ("unfinished", _) => {
                let d = p["duration_ms"]
                    .as_u64()
                    .expect("unfinished has a duration");
                assert!(
                    d > 0 && d < (pod.settings.grace + SLACK).as_millis() as u64,
                    "{summary}"
                );
            }
            (_, Some(f)) => {
                assert_eq!(p["duration_ms"], f["duration_ms"], "{}: {summary}", o.name);
                assert!(p["duration_ms"].is_u64(), "{summary}");
            }
            (_, None) => panic!(
                "{} has outcome {} without hook.finished\n{}",
                o.name,
                o.outcome,
                dump()
            ),
        }
        assert_eq!(
            summary["counts"][o.outcome].as_u64().unwrap_or(0) as usize,
            { outcomes.iter().filter(|x| x.outcome == o.outcome).count() }
        );
    }
    summary
}

/// hooklog left promptly once nothing was left to wait for: within its quiet period (and a
/// margin for the machine).
fn assert_left_promptly(ended: &Ended) {
    ended.assert_left_within(
        Duration::ZERO..LINGER + Duration::from_millis(500),
        "promptly: its quiet period",
    );
}

fn finished(pod: &Pod, name: &str) -> Value {
    pod.daemon
        .records()
        .into_iter()
        .find(|r| event(r) == "hook.finished" && r["container_name"] == name)
        .unwrap_or_else(|| panic!("no hook.finished for {name}"))
}

/// Incident 1: Envoy on distroless, preStop `sleep 5`, and no sleep in the image.
#[test]
fn distroless_hook_whose_command_is_missing_is_failed_127() {
    let mut pod = Pod::start(Settings::peers(&["envoy", "api-server"]));
    let specs = [
        Spec::new("envoy").exec(&["sleep-not-here", "5"]),
        Spec::new("api-server")
            .sh("echo 'draining api-server'; \"$HL\" sleep 0.3; echo 'api-server drained'"),
    ];
    let ended = delete_pod(&mut pod, &specs, SidecarTerm::AtDeletion);
    assert_eq!(ended.hooks["envoy"].status.code(), Some(127));
    assert!(
        ended.hooks["envoy"].stderr.contains("sleep-not-here"),
        "the wrapper says why on its stderr (the kubelet's event): {:?}",
        ended.hooks["envoy"].stderr
    );
    let lines = [
        stdout("api-server", "draining api-server"),
        stdout("api-server", "api-server drained"),
    ];
    let summary = check(
        &pod,
        &ended,
        &lines,
        &[failed("envoy", 127), ok("api-server")],
    );
    let f = finished(&pod, "envoy");
    assert_eq!(f["outcome"], "failed");
    assert_eq!(f["exit_code"], 127);
    assert!(
        f["message"].as_str().unwrap().contains("sleep-not-here"),
        "{f}"
    );
    assert!(f["message"].as_str().unwrap().contains("not found"), "{f}");
    assert!(
        summary["message"]
            .as_str()
            .unwrap()
            .contains("envoy=failed"),
        "{summary}"
    );
}

/// Incident 2: the heap dump upload fails half-way; every line it printed is there, then failed.
#[test]
fn hook_failing_half_way_reports_every_line_then_failed() {
    let mut pod = Pod::start(Settings::peers(&["api-server"]));
    let script = "echo 'heap dump written to /tmp/heap.hprof'; \
                  echo 'uploading to s3://dumps/api-server/heap.hprof'; \
                  echo 'upload: 10% done'; \
                  echo 'upload failed: An error occurred (AccessDenied) when calling the PutObject operation' >&2; \
                  exit 1; \
                  echo 'never printed'";
    let specs = [Spec::new("api-server").sh(script)];
    let ended = delete_pod(&mut pod, &specs, SidecarTerm::AtDeletion);
    assert_eq!(ended.hooks["api-server"].status.code(), Some(1));
    let lines = [
        stdout("api-server", "heap dump written to /tmp/heap.hprof"),
        stdout(
            "api-server",
            "uploading to s3://dumps/api-server/heap.hprof",
        ),
        stdout("api-server", "upload: 10% done"),
        stderr(
            "api-server",
            "upload failed: An error occurred (AccessDenied) when calling the PutObject operation",
        ),
    ];
    check(&pod, &ended, &lines, &[failed("api-server", 1)]);
    // The wrapper passes the output through too (the kubelet keeps it for the event).
    assert!(
        ended.hooks["api-server"]
            .stdout
            .contains("upload: 10% done")
    );
    assert!(ended.hooks["api-server"].stderr.contains("AccessDenied"));
}

/// A hook longer than the sidecar's grace: hooklog leaves at its deadline, says `unfinished`.
#[test]
fn hook_longer_than_grace_is_unfinished_and_hooklog_leaves_at_its_deadline() {
    let grace = Duration::from_secs(2);
    let mut pod = Pod::start(Settings {
        grace,
        pod_grace: Duration::from_millis(3500),
        ..Settings::peers(&["envoy", "api-server"])
    });
    let specs = [
        Spec::new("envoy").sh("echo 'envoy: draining listeners'; exec \"$HL\" sleep 30"),
        Spec::new("api-server").sh("echo 'api-server: bye'"),
    ];
    let ended = delete_pod(&mut pod, &specs, SidecarTerm::AtDeletion);
    assert!(ended.hooks["envoy"].killed_by_kubelet);
    // It waited for the hook as long as it could: up to its grace minus the flush reserve.
    ended.assert_left_within(
        grace / 2..grace + SLACK,
        "not giving up on the running hook early, nor past its grace",
    );
    let lines = [
        stdout("envoy", "envoy: draining listeners"),
        stdout("api-server", "api-server: bye"),
    ];
    let summary = check(
        &pod,
        &ended,
        &lines,
        &[unfinished("envoy"), ok("api-server")],
    );
    assert!(
        summary["message"]
            .as_str()
            .unwrap()
            .contains("envoy=unfinished"),
        "{summary}"
    );
}

/// An expected peer that never reports (a misconfigured image): `missing`, and hooklog leaves
/// shortly after the announce window, not at its grace ([`LONG_GRACE`]).
#[test]
fn expected_peer_that_never_reports_is_missing() {
    let mut pod = Pod::start(Settings::peers(&["envoy", "api-server"]).long_grace());
    // envoy has no preStop at all (or one that never calls hooklog).
    let specs = [
        Spec::new("envoy"),
        Spec::new("api-server").sh("echo 'api-server: bye'"),
    ];
    let ended = delete_pod(&mut pod, &specs, SidecarTerm::AtDeletion);
    ended.assert_left_within(
        ANNOUNCE..ANNOUNCE + LINGER + Duration::from_millis(700),
        "once the announce window closed, and soon after",
    );
    let lines = [stdout("api-server", "api-server: bye")];
    check(&pod, &ended, &lines, &[missing("envoy"), ok("api-server")]);
}

/// SIGTERM before the hooks: one announces itself well after the SIGTERM (and after a linger)
/// and must be waited for.
#[test]
fn sigterm_before_the_hooks_waits_for_a_late_announcer() {
    let mut pod = Pod::start(Settings {
        announce: Duration::from_secs(2),
        ..Settings::peers(&["envoy", "api-server"])
    });
    let mut late =
        Spec::new("envoy").sh("echo 'envoy: late but here'; \"$HL\" sleep 0.8; echo 'envoy: done'");
    late.hook_delay = LINGER * 3;
    let specs = [late, Spec::new("api-server").sh("echo 'api-server: bye'")];
    let ended = delete_pod(&mut pod, &specs, SidecarTerm::AtDeletion);
    let lines = [
        stdout("envoy", "envoy: late but here"),
        stdout("envoy", "envoy: done"),
        stdout("api-server", "api-server: bye"),
    ];
    check(&pod, &ended, &lines, &[ok("envoy"), ok("api-server")]);
}

/// SIGTERM before the hooks, without `--peers`, to a pod that has been quiet for a while: a hook
/// announcing itself within the linger after the SIGTERM is still waited for.
#[test]
fn sigterm_before_the_hooks_without_peers_waits_for_one_announcing_within_the_linger() {
    let mut pod = Pod::start(Settings {
        linger: Duration::from_millis(800),
        ..Settings::default()
    });
    let mut late =
        Spec::new("envoy").sh("echo 'envoy: started late'; \"$HL\" sleep 1; echo 'envoy: done'");
    late.hook_delay = Duration::from_millis(200);
    let specs = [late];
    // The pod has been quiet for longer than the linger when it is deleted (as pods are): the
    // quiet period must still start at the SIGTERM, not at the last line. This sleep sets up
    // that precondition; it waits for nothing.
    std::thread::sleep(pod.settings.linger * 2);
    let ended = delete_pod(&mut pod, &specs, SidecarTerm::AtDeletion);
    let lines = [
        stdout("envoy", "envoy: started late"),
        stdout("envoy", "envoy: done"),
    ];
    check(&pod, &ended, &lines, &[ok("envoy")]);
}

/// SIGTERM while the hooks run.
#[test]
fn sigterm_during_the_hooks_waits_for_them() {
    let mut pod = Pod::start(Settings::peers(&["envoy", "api-server"]));
    let specs = [
        Spec::new("envoy").sh("echo 'envoy: draining'; \"$HL\" sleep 1.2; echo 'envoy: drained'"),
        Spec::new("api-server").sh("echo 'api-server: draining'; \"$HL\" sleep 0.6; echo 'api-server: drained' >&2; exit 3"),
    ];
    let ended = delete_pod(&mut pod, &specs, DURING_THE_HOOKS);
    let lines = [
        stdout("envoy", "envoy: draining"),
        stdout("envoy", "envoy: drained"),
        stdout("api-server", "api-server: draining"),
        stderr("api-server", "api-server: drained"),
    ];
    check(
        &pod,
        &ended,
        &lines,
        &[ok("envoy"), failed("api-server", 3)],
    );
    assert!(
        ended.daemon_exit_at >= ended.hooks["envoy"].ended_at + LINGER - Duration::from_millis(50),
        "hooklog did not wait the quiet period after the last hook"
    );
}

/// SIGTERM while a hook runs, with a grace far longer than the hook ([`LONG_GRACE`]): its
/// `hook.finished` ends the wait at once (then the quiet period), not the next report
/// ([`REPORT_EVERY_IN_DAEMON`]) nor the grace.
#[test]
fn a_hook_finishing_during_the_wait_ends_it_then_not_at_the_grace() {
    let mut pod = Pod::start(Settings::peers(&["envoy"]).long_grace());
    let specs =
        [Spec::new("envoy").sh("echo 'envoy: draining'; \"$HL\" sleep 1; echo 'envoy: drained'")];
    let ended = delete_pod(&mut pod, &specs, DURING_THE_HOOKS);
    let lines = [
        stdout("envoy", "envoy: draining"),
        stdout("envoy", "envoy: drained"),
    ];
    check(&pod, &ended, &lines, &[ok("envoy")]);
    // The bound tells a wait woken by the finish from one woken by the next report.
    assert!(LINGER + SLACK < REPORT_EVERY_IN_DAEMON);
    let after_hook = ended
        .daemon_exit_at
        .saturating_duration_since(ended.hooks["envoy"].ended_at);
    assert!(
        after_hook < LINGER + SLACK,
        "hooklog left {after_hook:?} after the hook ended ({:?} after SIGTERM, grace \
         {LONG_GRACE:?}); the quiet period is {LINGER:?}",
        ended.daemon_took
    );
}

/// src/daemon.rs REPORT_EVERY: how often a waiting hooklog wakes on its own to log what it waits
/// for (a wait that missed a hook's end would end there at the earliest).
const REPORT_EVERY_IN_DAEMON: Duration = Duration::from_secs(5);

/// SIGTERM after the hooks ended (the containers still shutting down): hooklog leaves promptly.
#[test]
fn sigterm_after_the_hooks_leaves_promptly() {
    let mut pod = Pod::start(Settings::peers(&["envoy", "api-server"]));
    let specs = [
        Spec::new("envoy").sh("echo 'envoy: quick'"),
        Spec::new("api-server").sh("echo 'api-server: quick'"),
    ];
    let ended = delete_pod(
        &mut pod,
        &specs,
        SidecarTerm::After(Duration::from_millis(1500)),
    );
    for h in ended.hooks.values() {
        assert!(
            h.ended_at < ended.sigterm_at,
            "a hook was still running at SIGTERM"
        );
    }
    assert_left_promptly(&ended);
    let lines = [
        stdout("envoy", "envoy: quick"),
        stdout("api-server", "api-server: quick"),
    ];
    check(&pod, &ended, &lines, &[ok("envoy"), ok("api-server")]);
}

/// The native-sidecar order: SIGTERM only after every main container exited.
#[test]
fn native_sidecar_gets_sigterm_last_and_leaves_promptly() {
    let mut pod = Pod::start(Settings::peers(&["envoy", "api-server"]));
    let mut envoy =
        Spec::new("envoy").sh("echo 'envoy: draining'; \"$HL\" sleep 0.5; echo 'envoy: drained'");
    envoy.term_line = Some("envoy: main process got SIGTERM".into());
    let mut api = Spec::new("api-server").exec(&["/bin/false"]);
    api.term_line = Some("api-server: main process got SIGTERM".into());
    let specs = [envoy, api];
    let ended = delete_pod(&mut pod, &specs, SidecarTerm::AfterMainsExit);
    assert_left_promptly(&ended);
    let lines = [
        stdout("envoy", "envoy: draining"),
        stdout("envoy", "envoy: drained"),
        plain("envoy", "envoy: main process got SIGTERM"),
        plain("api-server", "api-server: main process got SIGTERM"),
    ];
    check(
        &pod,
        &ended,
        &lines,
        &[ok("envoy"), failed("api-server", 1)],
    );
}

/// Under a real kubelet, main containers that outlive the pod's grace period (one ignores
/// SIGTERM) make it signal a native sidecar at the end of that period, with its 2-second minimum
/// window: SIGKILL follows 2 s after the SIGTERM. hooklog's own `--grace 15s` and a 5 s announce
/// window for a peer that never reported would run into that SIGKILL and lose the summary; as a
/// native sidecar it knows its peers' hooks are over and writes the summary at once.
#[test]
fn native_sidecar_signalled_with_two_seconds_left_still_writes_the_summary() {
    let window = Duration::from_secs(2);
    let mut pod = Pod::start(Settings {
        grace: Duration::from_secs(15),
        announce: Duration::from_secs(5),
        native: true,
        ..Settings::peers(&["envoy", "api-server"])
    });
    let specs = [
        Spec::new("envoy").sh("echo 'envoy: drained'"),
        // No hook that reports: `missing`, without waiting for it to announce.
        Spec::new("api-server"),
    ];
    let ended = delete_pod(&mut pod, &specs, SidecarTerm::After(POD_GRACE - window));
    // Exited 0 by itself (checked below), so before the kubelet's SIGKILL.
    ended.assert_left_within(Duration::ZERO..window, "the kubelet's window");
    let lines = [stdout("envoy", "envoy: drained")];
    check(&pod, &ended, &lines, &[ok("envoy"), missing("api-server")]);
}

/// Lines written after the sidecar got SIGTERM, by every route, all come out: the hooks write
/// to the file and the socket while hooklog drains, and a main container writes on its own
/// SIGTERM, after its hook.
#[test]
fn lines_written_after_sigterm_all_come_out() {
    let mut pod = Pod::start(Settings {
        linger: Duration::from_millis(800),
        ..Settings::peers(&["envoy", "api-server"])
    });
    const N: usize = 200;
    let burst = |name: &str| {
        format!(
            "\"$HL\" sleep 0.3; \
             i=0; while [ $i -lt {N} ]; do echo \"{name} file line $i\" >> \"$SHARED_FILE\"; echo \"{name} stdout line $i\"; i=$((i+1)); done; \
             \"$HL\" emit --container {name} --socket \"$SHARED_SOCK\" --field phase=drain '{name}: emitted via the socket'; \
             \"$HL\" emit --container {name} --file \"$SHARED_FILE\" '{name}: emitted via the file'; \
             echo '{name}: last stderr line' >&2"
        )
    };
    let mut envoy = Spec::new("envoy").sh(&burst("envoy"));
    envoy.term_line = Some("envoy: shutting down after the hook".into());
    // api-server's hook ends last: its main process's line comes after every hook ended, and
    // only the quiet period (`--linger`) waits for it.
    let mut api =
        Spec::new("api-server").sh(&format!("{}; \"$HL\" sleep 0.5", burst("api-server")));
    api.term_line = Some("api-server: shutting down after the last hook".into());
    let specs = [envoy, api];
    let ended = delete_pod(&mut pod, &specs, SidecarTerm::AtDeletion);
    let mut lines = vec![
        plain("envoy", "envoy: shutting down after the hook"),
        plain(
            "api-server",
            "api-server: shutting down after the last hook",
        ),
    ];
    for name in ["envoy", "api-server"] {
        for i in 0..N {
            lines.push(plain(name, &format!("{name} file line {i}")));
            lines.push(stdout(name, &format!("{name} stdout line {i}")));
        }
        lines.push(emitted(name, &format!("{name}: emitted via the socket")));
        lines.push(emitted(name, &format!("{name}: emitted via the file")));
        lines.push(stderr(name, &format!("{name}: last stderr line")));
    }
    check(&pod, &ended, &lines, &[ok("envoy"), ok("api-server")]);
    let records = pod.daemon.records();
    let emitted = records
        .iter()
        .find(|r| r["message"] == "envoy: emitted via the socket")
        .unwrap();
    assert_eq!(emitted["phase"], "drain");
    assert!(
        emitted["hooklog"]["input"]
            .as_str()
            .unwrap()
            .starts_with("socket:")
    );
}

/// `--timeout` on the wrapper: the command is killed, the hook is `timed_out`, exit 124.
#[test]
fn wrapper_timeout_is_timed_out_124_in_the_summary() {
    let mut pod = Pod::start(Settings::peers(&["envoy"]));
    let mut envoy = Spec::new("envoy").sh("echo \"$$\" > \"$SHARED_DIR/envoy.pid\"; echo 'envoy: waiting for ever'; exec \"$HL\" sleep 60");
    envoy.hook_flags = vec!["--timeout".into(), "700ms".into()];
    let ended = delete_pod(&mut pod, &[envoy], SidecarTerm::AtDeletion);
    assert_eq!(ended.hooks["envoy"].status.code(), Some(124));
    let lines = [stdout("envoy", "envoy: waiting for ever")];
    check(&pod, &ended, &lines, &[timed_out("envoy")]);
    let f = finished(&pod, "envoy");
    assert_eq!(f["signal"], "SIGTERM", "{f}");
    let pid: i32 = std::fs::read_to_string(pod.dir.path().join("envoy.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(
        kill(Pid::from_raw(pid), None).is_err(),
        "the timed-out command still runs"
    );
}

/// The socket is down: the wrappers fall back to the shared file, which hooklog follows.
#[test]
fn socket_down_falls_back_to_the_file() {
    let mut pod = Pod::start_with(Settings::peers(&["envoy"]), false);
    let mut envoy = Spec::new("envoy").sh("echo 'envoy: via the file'; \"$HL\" sleep 0.3; exit 7");
    envoy.dead_socket = true;
    let ended = delete_pod(&mut pod, &[envoy], SidecarTerm::AtDeletion);
    assert_eq!(ended.hooks["envoy"].status.code(), Some(7));
    let lines = [stdout("envoy", "envoy: via the file")];
    check(&pod, &ended, &lines, &[failed("envoy", 7)]);
    for r in pod
        .daemon
        .records()
        .iter()
        .filter(|r| event(r).starts_with("hook."))
    {
        assert!(
            r["hooklog"]["input"].as_str().unwrap().starts_with("file:"),
            "{r}"
        );
    }
}

/// A container that never stops writing must not hold hooklog until its grace deadline: the
/// quiet period is capped at 4 × `--linger`. What it wrote comes out once each, with no gap,
/// up to where hooklog stopped reading.
#[test]
fn chatty_container_does_not_hold_hooklog_past_the_linger_cap() {
    // A grace far above the cap, so that waiting for the grace instead shows.
    let mut pod = Pod::start(Settings::peers(&["envoy"]).long_grace());
    let mut chatty = pod
        .command("sh")
        .arg("-c")
        .arg(
            "i=0; while :; do echo \"chatty $i\" >> \"$SHARED_FILE\"; i=$((i+1)); sleep 0.02; done",
        )
        .spawn()
        .unwrap();
    let specs = [Spec::new("envoy").sh("echo 'envoy: bye'")];
    let ended = delete_pod(&mut pod, &specs, SidecarTerm::AtDeletion);
    kill_group(chatty.id());
    let _ = chatty.wait();
    assert!(ended.daemon_status.success(), "{}", ended.daemon_status);
    let cap = pod.settings.linger * 4;
    ended.assert_left_within(
        Duration::ZERO..cap + SLACK,
        "with a chatty container: the quiet period's cap",
    );
    let records = pod.daemon.records();
    assert_eq!(event(records.last().unwrap()), "hooks.summary");
    assert_eq!(records.last().unwrap()["peers"]["envoy"]["outcome"], "ok");
    let mut seen: Vec<u64> = records
        .iter()
        .filter_map(|r| r["message"].as_str()?.strip_prefix("chatty ")?.parse().ok())
        .collect();
    seen.sort_unstable();
    let n = seen.len() as u64;
    assert!(n > 0, "no chatty line came out");
    assert_eq!(
        seen,
        (0..n).collect::<Vec<_>>(),
        "chatty lines with a gap or twice"
    );
}

/// Nobody reads hooklog's stdout (a stuck log router): hooklog still leaves at its grace
/// deadline, exit 0, instead of waiting for the kubelet's SIGKILL.
#[test]
fn blocked_stdout_does_not_hold_hooklog_past_its_grace() {
    let (dir, file, _) = pod_dir();
    let grace = Duration::from_secs(2);
    let stderr = File::create(dir.path().join("hooklog.err")).unwrap();
    let mut child = hooklog()
        .args(["run", "--file", file.to_str().unwrap(), "--grace", "2s"])
        .envs(POD_ENV)
        .stdin(Stdio::null())
        // A pipe nobody reads: it fills at 64 KiB and the stdout sink blocks.
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .unwrap();
    let err = dir.path().join("hooklog.err");
    assert!(wait_until(Duration::from_secs(10), || {
        std::fs::read_to_string(&err).is_ok_and(|s| s.contains("hooklog ready"))
    }));
    let line = format!("{}\n", "x".repeat(200));
    std::fs::write(&file, line.repeat(20_000)).unwrap();
    // 4 MB of records against a 64 KiB pipe: the sink blocks (the lower bound below shows it
    // did: an unblocked hooklog would leave after the linger).
    let at = Instant::now();
    kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM).unwrap();
    let exited = wait_until(grace + SLACK, || child.try_wait().unwrap().is_some());
    let took = at.elapsed();
    if !exited {
        let _ = child.kill();
    }
    let st = child.wait().unwrap();
    assert!(
        exited,
        "hooklog still ran {took:?} after SIGTERM with grace {grace:?}"
    );
    assert!(st.success(), "{st}");
    assert!(
        took >= grace - Duration::from_millis(100),
        "left after {took:?}: gave up on queued records early"
    );
}

/// A wrapped postStart hook reports `hook.finished` long before deletion; it must not count as
/// the container's preStop (found in review: hooklog used to leave at once and lose the preStop).
#[test]
fn a_wrapped_poststart_hook_does_not_count_as_the_peers_prestop() {
    let (_dir, sock, mut daemon) =
        listening(&["--peers", "envoy", "--grace", "10s", "--linger", "300ms"]);
    let s = sock.to_str().unwrap();
    let st = wrapper(
        "envoy",
        &["--hook-name", "postStart", "--socket", s],
        &["true"],
    )
    .status()
    .unwrap();
    assert!(st.success());
    assert!(wait_until(Duration::from_secs(5), || daemon
        .records()
        .len()
        == 2));
    daemon.terminate();
    std::thread::sleep(Duration::from_millis(500)); // The preStop announces a moment after SIGTERM.
    let out = wrapper(
        "envoy",
        &["--socket", s],
        &["sh", "-c", "echo draining; sleep 1; echo drained"],
    )
    .output()
    .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(daemon.wait_exit(Duration::from_secs(15)).success());
    let records = daemon.records();
    let summary = records.last().unwrap();
    assert_eq!(summary["event"], "hooks.summary", "{records:#?}");
    let msgs: Vec<&str> = records
        .iter()
        .filter_map(|r| r["message"].as_str())
        .collect();
    assert!(
        msgs.contains(&"drained"),
        "the preStop hook's output was lost: {msgs:?}"
    );
    assert_eq!(
        summary["peers"]["envoy"]["duration_ms"]
            .as_u64()
            .map(|d| d >= 1000),
        Some(true),
        "{summary}"
    );
}

/// With `--emf`, per-peer metric records come before the summary, which stays the last record.
#[test]
fn with_emf_the_summary_is_still_the_last_record() {
    let (_dir, sock, mut daemon) = listening(&["--peers", "envoy", "--emf", "--linger", "200ms"]);
    let s = sock.to_str().unwrap();
    let st = wrapper("envoy", &["--socket", s], &["sh", "-c", "exit 3"])
        .status()
        .unwrap();
    assert_eq!(st.code(), Some(3));
    daemon.stop(Duration::from_secs(15));
    let records = daemon.records();
    let summary = records.last().unwrap();
    assert_eq!(summary["event"], "hooks.summary", "{records:#?}");
    assert_eq!(summary["HooksFailed"], 1, "{summary}");
    let metrics = &records[records.len() - 2];
    assert_eq!(metrics["event"], "hooks.metrics", "{records:#?}");
    assert_eq!(metrics["container"], "envoy", "{metrics}");
}

/// The pod's folder, its file holding the line `before`, and a sidecar (quiet period 100 ms)
/// following it that has read that line.
fn reading_a_line() -> (tempfile::TempDir, PathBuf, Daemon) {
    let (dir, file, _) = pod_dir();
    std::fs::write(&file, "before\n").unwrap();
    let daemon = Daemon::follow(&file, None, &["--linger", "100ms"], &POD_ENV);
    daemon.wait_records(1, Duration::from_secs(10));
    (dir, file, daemon)
}

/// The pod's folder, its socket, and a sidecar listening on it alone with `args`.
fn listening(args: &[&str]) -> (tempfile::TempDir, PathBuf, Daemon) {
    let (dir, _, sock) = pod_dir();
    let daemon = Daemon::listen(&sock, args, &POD_ENV);
    (dir, sock, daemon)
}

/// Sends `sig` to a running daemon: it must end through its shutdown phases as on SIGTERM, exit
/// 0, and write its `hooks.summary` last.
fn daemon_stops_cleanly_on(sig: &str) {
    let (_dir, _, mut daemon) = reading_a_line();
    daemon.signal(sig);
    let st = daemon.wait_exit(Duration::from_secs(15));
    assert!(st.success(), "SIG{sig}: {st:?}");
    let records = daemon.records();
    assert_eq!(
        records.last().unwrap()["event"],
        "hooks.summary",
        "SIG{sig}: {records:#?}"
    );
}

#[test]
fn run_on_sigint_ends_with_its_summary() {
    daemon_stops_cleanly_on("INT");
}

#[test]
fn run_on_sighup_ends_with_its_summary() {
    daemon_stops_cleanly_on("HUP");
}

#[test]
fn run_on_sigquit_ends_with_its_summary() {
    daemon_stops_cleanly_on("QUIT");
}

/// SIGUSR1, SIGUSR2 and SIGPIPE do not end the daemon: it keeps reading, and SIGTERM still ends
/// it with its summary.
#[test]
fn run_ignores_sigusr1_sigusr2_and_sigpipe() {
    let (_dir, file, mut daemon) = reading_a_line();
    for sig in ["USR1", "USR2", "PIPE"] {
        daemon.signal(sig);
    }
    // A line read after the signals: they were delivered (a running thread takes a pending
    // signal on its way back to user space) and the daemon lived on.
    std::fs::OpenOptions::new()
        .append(true)
        .open(&file)
        .and_then(|mut f| std::io::Write::write_all(&mut f, b"after\n"))
        .unwrap();
    daemon.wait_records(2, Duration::from_secs(10));
    daemon.terminate();
    let st = daemon.wait_exit(Duration::from_secs(15));
    assert!(st.success(), "{st:?}");
    let records = daemon.records();
    assert_eq!(records[1]["message"], "after", "{records:#?}");
    assert_eq!(
        records.last().unwrap()["event"],
        "hooks.summary",
        "{records:#?}"
    );
}

/// Starts `container`'s wrapped hook `sh -c SCRIPT` reporting to the socket `sock`, and waits
/// until the script has made the file `ready`.
fn running_hook(container: &str, sock: &Path, script: &str, ready: &Path) -> Child {
    let hook = wrapper(
        container,
        &["--socket", sock.to_str().unwrap()],
        &["sh", "-c", script],
    )
    .stdout(Stdio::null())
    .spawn()
    .unwrap();
    assert!(wait_until(Duration::from_secs(10), || ready.exists()));
    hook
}

/// A sidecar following the shared `file` (made empty) alone, with a short quiet period and
/// `args`.
fn follow_quietly(file: &Path, args: &[&str]) -> Daemon {
    std::fs::write(file, "").unwrap();
    let args = [["--linger", "200ms"].as_slice(), args].concat();
    Daemon::follow(file, None, &args, &POD_ENV)
}

/// Runs `container`'s wrapped hook `CMD...` reporting to the shared `file`, to its success.
fn hook_via_file(container: &str, file: &Path, cmd: &[&str]) {
    let st = wrapper(container, &["--file", file.to_str().unwrap()], cmd)
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(st.success(), "{container}'s hook: {st}");
}

/// A peer writes `hook.finished` with `outcome: ok` and no `run_id` while envoy's real hook
/// (which started with a run id) still runs: the daemon keeps waiting, and the summary reports
/// the hook's true end.
#[test]
fn a_finished_record_without_run_id_cannot_end_a_wrapped_hook() {
    let (dir, file, sock) = pod_dir();
    let ready = dir.path().join("ready");
    let mut daemon = Daemon::follow(
        &file,
        Some(&sock),
        &["--peers", "envoy", "--grace", "20s", "--linger", "200ms"],
        &POD_ENV,
    );
    let script = format!("touch {}; sleep 2; exit 3", ready.display());
    let mut hook = running_hook("envoy", &sock, &script, &ready);
    daemon.expect(Duration::from_secs(10), "hook.started came out", || {
        daemon
            .records()
            .iter()
            .any(|r| r["event"] == "hook.started")
    });
    append(
        &file,
        "{\"event\":\"hook.finished\",\"container_name\":\"envoy\",\"hook\":\"preStop\",\"outcome\":\"ok\",\"exit_code\":0}\n",
    );
    daemon.terminate();
    assert_eq!(hook.wait().unwrap().code(), Some(3));
    assert!(daemon.wait_exit(Duration::from_secs(25)).success());
    let records = daemon.records();
    let summary = records.last().unwrap();
    assert_eq!(summary["event"], "hooks.summary", "{records:#?}");
    assert_eq!(summary["peers"]["envoy"]["outcome"], "failed", "{summary}");
    assert_eq!(summary["peers"]["envoy"]["exit_code"], 3, "{summary}");
}

/// Input records that use hooklog's own event names without being hooklog's carry
/// `hooklog.forged: true`; the wrapper's records and the daemon's summary do not.
#[test]
fn input_records_imitating_hooklogs_events_are_marked_forged() {
    let (_dir, file, _) = pod_dir();
    let mut daemon = follow_quietly(&file, &[]);
    let forged = [
        r#"{"event":"hooks.summary","message":"hooks: 1 ok (app=ok)","peers":{"app":{"outcome":"ok"}}}"#,
        r#"{"event":"hooks.metrics","container":"app"}"#,
        r#"{"event":"hook.finished","container_name":"app","outcome":"ok","exit_code":0}"#,
        r#"{"event":"hook.started","container_name":"app","hook":"preStop"}"#,
        r#"{"event":"hook.output","container_name":"app","message":"all good"}"#,
        r#"{"event":"\u0068ook.finished","container_name":"app","outcome":"ok"}"#,
        r#"{"event":"hook.anything","container_name":"app"}"#,
    ];
    append(&file, &(forged.join("\n") + "\n"));
    hook_via_file("envoy", &file, &["echo", "real"]);
    // Events hooklog does not own are left alone.
    append(&file, "{\"event\":\"deploy.done\",\"message\":\"x\"}\n");
    daemon.wait_records(forged.len() + 4, Duration::from_secs(10));
    daemon.stop(Duration::from_secs(15));
    let records = daemon.records();
    let (marked, unmarked): (Vec<&Value>, Vec<&Value>) =
        records.iter().partition(|r| r["hooklog"]["forged"] == true);
    assert_eq!(marked.len(), forged.len(), "{records:#?}");
    let real = events(unmarked.iter().copied());
    assert_eq!(
        real,
        [
            "hook.started",
            "hook.output",
            "hook.finished",
            "deploy.done",
            "hooks.summary"
        ],
        "{records:#?}"
    );
    // The forged summary does not count as one: the real summary is the last record.
    assert_eq!(records.last().unwrap()["hooklog"]["input"], "hooklog");
}

/// A duplicated key is read once, the last value winning as in jq: the record carries it once,
/// and the summary agrees with it.
#[test]
fn a_duplicated_key_is_read_as_jq_reads_it_last_wins() {
    let (_dir, file, _) = pod_dir();
    let mut daemon = follow_quietly(&file, &[]);
    append(
        &file,
        "{\"event\":\"hook.finished\",\"container_name\":\"app\",\"hook\":\"preStop\",\"outcome\":\"ok\",\"exit_code\":0,\"outcome\":\"failed\",\"exit_code\":2}\n",
    );
    daemon.wait_records(1, Duration::from_secs(10));
    daemon.stop(Duration::from_secs(15));
    let lines = daemon.stdout.lines();
    assert_eq!(lines[0].matches("\"outcome\":").count(), 1, "{}", lines[0]);
    let records = daemon.records();
    assert_eq!(records[0]["outcome"], "failed", "{}", lines[0]);
    assert_eq!(records[0]["exit_code"], 2, "{}", lines[0]);
    let summary = records.last().unwrap();
    assert_eq!(summary["peers"]["app"]["outcome"], "failed", "{summary}");
    assert_eq!(summary["peers"]["app"]["exit_code"], 2, "{summary}");
}

/// A ~9 KB inline script under `--max-line-bytes 2048`: `hook.started` carries a bounded,
/// flagged command and is read as one record, so the daemon waits for the running hook and the
/// summary names its true outcome (it said `missing`, the start being split text).
#[test]
fn a_long_hook_command_still_gives_a_parsed_hook_started() {
    let (dir, sock, mut daemon) = listening(&[
        "--peers",
        "app",
        "--max-line-bytes",
        "2048",
        "--announce-timeout",
        "300ms",
        "--grace",
        "20s",
        "--linger",
        "200ms",
    ]);
    let ready = dir.path().join("ready");
    let script = format!(
        "# {}\ntouch {}; sleep 2; echo drained",
        "a \"quoted\" drain step; ".repeat(400),
        ready.display()
    );
    assert!(script.len() > 9000);
    let mut hook = running_hook("app", &sock, &script, &ready);
    daemon.expect(Duration::from_secs(10), "the hook's start came out", || {
        daemon.stdout.len() > 0
    });
    daemon.terminate();
    assert!(hook.wait().unwrap().success());
    assert!(daemon.wait_exit(Duration::from_secs(25)).success());
    for line in daemon.stdout.lines() {
        assert!(line.len() < 2048, "{} bytes: {line}", line.len());
    }
    let records = daemon.records();
    let started = records
        .iter()
        .find(|r| r["event"] == "hook.started")
        .unwrap_or_else(|| panic!("no parsed hook.started: {records:#?}"));
    assert_eq!(started["command_truncated"], true, "{started}");
    assert_eq!(started["command"][0], "sh", "{started}");
    let summary = records.last().unwrap();
    assert_eq!(summary["peers"]["app"]["outcome"], "ok", "{summary}");
}

/// A pod with 20 KB of annotations (Vault templates), kubectl's last-applied manifest and
/// inject's own annotation: records carry only the annotations that fit the cap, never
/// `hooklog.dev/*` nor the manifest, and count what they left out; every record, the summary
/// included, stays one parsed record (they were all split text).
#[test]
fn large_pod_annotations_leave_every_record_whole() {
    let (dir, file, _) = pod_dir();
    let podinfo = dir.path().join("podinfo");
    std::fs::create_dir(&podinfo).unwrap();
    std::fs::write(podinfo.join("labels"), "app=\"api-server\"\n").unwrap();
    let template = "{{ with secret \\\"db/creds\\\" }}{{ .Data.password }}{{ end }}".repeat(350);
    let manifest = format!(
        "{{\\\"kind\\\":\\\"Pod\\\",\\\"pad\\\":\\\"{}\\\"}}",
        "x".repeat(4000)
    );
    std::fs::write(
        podinfo.join("annotations"),
        format!(
            "hooklog.dev/injected=\"{}\"\n\
             kubectl.kubernetes.io/last-applied-configuration=\"{manifest}\"\n\
             team=\"payments\"\n\
             vault.hashicorp.com/agent-inject-template-db=\"{template}\"\n\
             owner=\"sre\"\n",
            "y".repeat(200)
        ),
    )
    .unwrap();
    let podinfo = podinfo.to_str().unwrap();
    let mut daemon = follow_quietly(&file, &["--podinfo", podinfo, "--peers", "app"]);
    hook_via_file("app", &file, &["echo", "drained"]);
    daemon.wait_records(3, Duration::from_secs(10));
    daemon.stop(Duration::from_secs(15));
    let records = daemon.records();
    let events = events(&records);
    assert_eq!(
        events,
        [
            "hook.started",
            "hook.output",
            "hook.finished",
            "hooks.summary"
        ],
        "{records:#?}"
    );
    for r in &records {
        let k = &r["kubernetes"];
        assert_eq!(
            k["annotations"],
            json!({"team": "payments", "owner": "sre"}),
            "{r}"
        );
        assert_eq!(k["annotations_omitted"], 1, "{r}");
    }
    assert_eq!(
        records.last().unwrap()["peers"]["app"]["outcome"],
        "ok",
        "{records:#?}"
    );
}
