//! (the sidecar) `hooklog hook -- CMD`: runs a lifecycle hook command and reports it: `hook.started`, every
//! line of its stdout and stderr, then `hook.finished` with how it ended. Exits with the
//! command's status (127 when it cannot be found, as shells do) so the kubelet still sees a
//! failure; the command's output is also passed through to hooklog's own stdout and stderr.

use std::ffi::OsString;
use std::process::{ExitStatus, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::Command;
use tokio::sync::mpsc;

use crate::cli::HookArgs;
use crate::client::{LastResort, Reporter};
use crate::framing::{FrameEnd, Framer};
use crate::lifecycle::signal::Stopping;
use crate::passthrough::PassThrough;
use crate::protocol::{Event, field};

/// Exit status when the command cannot be found (as shells report it).
pub const EXIT_NOT_FOUND: u8 = 127;
/// Exit status when the command exists but cannot be run.
pub const EXIT_CANNOT_RUN: u8 = 126;
/// Exit status when `--timeout` killed the command (as `timeout(1)` reports it).
pub const EXIT_TIMED_OUT: u8 = 124;
/// Exit status when hooklog itself could not start (no runtime).
pub const EXIT_INTERNAL: u8 = 70;

/// Time between SIGTERM and SIGKILL when the timeout fires. With what follows a timeout
/// ([`TIMED_OUT_DRAIN_MAX`], [`TIMED_OUT_PASS_THROUGH`]) it stays within
/// [`TIMED_OUT_REPORTED_WITHIN`], so that `hook.finished` is out before the kubelet's own kill
/// when inject's `--timeout` leaves `manifest::budget::REPORT_MARGIN` to it: with 2 s here, a
/// hook that ignores SIGTERM was killed by hooklog and the kubelet at the same moment, and
/// reported `unfinished` (issue 37, grace 4 s and `--timeout 2s` under a v1.32 kubelet).
const KILL_AFTER: Duration = Duration::from_secs(1);

/// After a timeout's SIGKILL (the command's process group is gone), the longest its remaining
/// output is read for: what a killed group left in its pipes is read in milliseconds.
const TIMED_OUT_DRAIN_MAX: Duration = Duration::from_millis(250);

/// After a timeout, how long the pass-through of the output may take.
const TIMED_OUT_PASS_THROUGH: Duration = Duration::from_millis(250);

/// The longest from a timeout's SIGTERM to `hook.finished` being handed to the reporter; the
/// record then takes a write to the socket. `manifest::budget::REPORT_MARGIN` holds it.
pub const TIMED_OUT_REPORTED_WITHIN: Duration = Duration::from_millis(
    KILL_AFTER.as_millis() as u64
        + TIMED_OUT_DRAIN_MAX.as_millis() as u64
        + TIMED_OUT_PASS_THROUGH.as_millis() as u64,
);

/// After the command exits, how long its pipes may stay open without a line before the rest of
/// its output is given up (a background child may hold them open forever).
const OUTPUT_DRAIN: Duration = Duration::from_millis(500);

/// After the command exits, the longest its remaining output is read for, at the daemon's pace:
/// a pipe (64 KiB) and the queue behind it, about 10,000 short lines, take well under a second
/// even in a debug build.
const OUTPUT_DRAIN_MAX: Duration = Duration::from_secs(5);

/// A reported output line is cut into pieces of at most this many bytes.
const OUTPUT_LINE_MAX: usize = 8 * 1024;

/// Bytes read from the command's stdout or stderr per `read` call.
const OUTPUT_READ_BUF: usize = 8 * 1024;

/// Output lines queued between the readers and the reporter; a full queue slows the readers,
/// and so the command, rather than growing.
const OUTPUT_QUEUE_LINES: usize = 64;

/// After the hook, how long its last records may take to be delivered (the socket gives up
/// within `client::SOCKET_STALL`, then the file takes the rest): the most logging adds to a
/// hook's run time.
const REPORT_FINISH: Duration = Duration::from_secs(2);

/// After the hook, how long the pass-through of its output to hooklog's own stdout and stderr
/// may take; a stream nobody reads is left behind when it runs out.
const PASS_THROUGH_FINISH: Duration = Duration::from_millis(500);

/// Bytes of the command (its arguments JSON-escaped, with their quotes and commas) that
/// `hook.started` carries, in `command` and again in `message`. Twice this plus the record's
/// envelope stays under `--max-line-bytes 2048` (the smallest a user is likely to set; 1024 is the
/// floor), so the daemon always reads `hook.started` as one record and never as split text: a
/// ~9 KB inline script passed the default 16 KiB cap once written twice.
const COMMAND_MAX_BYTES: usize = 512;

/// Longest `hook.started` line the wrapper writes (newline not included): under the smallest
/// `--max-line-bytes` a daemon takes (1024), so the daemon always reads it as one line; the
/// command's share is halved until it fits (issue 25.2: 1,212 bytes were cut at 1024).
const LIFECYCLE_LINE_MAX: usize = crate::record::MIN_MAX_LINE_BYTES - 24;

/// A command killed by signal N exits 128+N, as shells report it.
const SIGNAL_EXIT_BASE: u8 = 128;

/// How a hook ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookResult {
    /// `ok`, `failed` or `timed_out`.
    pub outcome: &'static str,
    /// Exit code, none when killed by a signal or never started.
    pub exit_code: Option<i32>,
    /// Name of the signal that killed it.
    pub signal: Option<String>,
    /// What hooklog exits with.
    pub status: u8,
    /// One line for people.
    pub message: String,
}

/// Runs the hook and returns hooklog's exit status.
pub fn run(args: HookArgs) -> u8 {
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            crate::cli::fatal(&format!("cannot start: {e}"));
            return EXIT_INTERNAL;
        }
    };
    rt.block_on(run_async(args))
}

async fn run_async(args: HookArgs) -> u8 {
    // Before anything else: a SIGTERM, SIGINT, SIGHUP or SIGQUIT from now on is forwarded to the
    // command (or, before it starts, waits for it) instead of killing the wrapper with the hook
    // half-reported and the command orphaned.
    let stopping = install_stopping();
    // Held since `main` began; a signal that came meanwhile reaches the handlers above now.
    crate::lifecycle::signal::release();
    // Reporting runs on a thread of its own, beside the command: a slow or stuck daemon delays
    // neither the command, nor its timeout, nor the signals forwarded to it.
    let reporter = Reporter::new(args.socket.clone(), args.file.clone(), LastResort::Stderr);
    let records = RunRecords::new(&args);
    let start = Instant::now();
    let result = execute(
        &args.command,
        args.timeout,
        stopping,
        &reporter,
        // Sent once the command runs (or could not be started), never before it.
        || reporter.send_everywhere(&records.started()),
        |stream, line, partial| reporter.send(&records.output(stream, line, partial)),
    )
    .await;
    let duration_ms = start.elapsed().as_millis() as u64;
    // Last: its file copy waits until the daemon has read the output before it.
    reporter.send_last_everywhere(&records.finished(&result, duration_ms));
    say_how_it_ended(&args.hook_name, &result);
    warn_unsent(reporter.finish(REPORT_FINISH).unsent);
    result.status
}

/// The handlers that forward signals to the command; none (with a warning) when they cannot be
/// installed, and a signal then ends the wrapper.
fn install_stopping() -> Option<Stopping> {
    match Stopping::install() {
        Ok(s) => Some(s),
        Err(e) => {
            tracing::warn!(error = %e, "cannot install signal handlers: signals end the wrapper");
            None
        }
    }
}

/// The records of one run of a hook: `hook.started`, each output line, `hook.finished`.
struct RunRecords<'a> {
    /// `--container`.
    container: &'a str,
    /// `--hook-name`.
    hook: &'a str,
    /// The command, as text.
    command: Vec<String>,
    /// This run's id and start (wall clock, ms): the daemon orders a container's hook events by
    /// them, whichever input each record came through.
    run_id: String,
    started_ms: i64,
    /// The run's key, kept until the run is over: `hook.started` carries its hash (`seal`),
    /// `hook.finished` the key itself. The daemon ends the run only with a finish whose key
    /// opens the seal, so a peer that reads the start in the shared file cannot end the run
    /// first.
    key: Option<(String, String)>,
}

impl<'a> RunRecords<'a> {
    fn new(args: &'a HookArgs) -> Self {
        let started_ms = crate::timefmt::now_ms();
        RunRecords {
            container: &args.container,
            hook: &args.hook_name,
            command: args
                .command
                .iter()
                .map(|a| a.to_string_lossy().into_owned())
                .collect(),
            run_id: format!("{started_ms:x}-{:x}", std::process::id()),
            started_ms,
            key: run_key(),
        }
    }

    /// The members every record of the run has.
    fn base(&self, event: Event) -> serde_json::Map<String, Value> {
        let mut m = serde_json::Map::new();
        m.insert(field::EVENT.into(), json!(event.name()));
        m.insert(field::CONTAINER.into(), json!(self.container));
        m.insert(field::HOOK.into(), json!(self.hook));
        m
    }

    /// The members of the run's start and finish.
    fn run_members(&self, m: &mut serde_json::Map<String, Value>) {
        m.insert(field::RUN_ID.into(), json!(self.run_id));
        m.insert(field::STARTED_MS.into(), json!(self.started_ms));
    }

    /// `hook.started`. The command's share shrinks until the line fits under the smallest cap a
    /// daemon may have: the daemon then reads it as one frame, whatever its --max-line-bytes.
    fn started(&self) -> String {
        let mut budget = COMMAND_MAX_BYTES;
        loop {
            let mut started = self.base(Event::Started);
            self.run_members(&mut started);
            if let Some((_, seal)) = &self.key {
                started.insert(field::SEAL.into(), json!(seal));
            }
            let (shown, truncated) = bounded_command(&self.command, budget);
            let ellipsis = if truncated { "…" } else { "" };
            started.insert(field::COMMAND.into(), json!(shown));
            if truncated {
                started.insert(field::COMMAND_TRUNCATED.into(), json!(true));
            }
            started.insert(
                field::MESSAGE.into(),
                json!(format!(
                    "{} hook started: {}{ellipsis}",
                    self.hook,
                    shown.join(" ")
                )),
            );
            let line = Value::Object(started).to_string();
            if line.len() < LIFECYCLE_LINE_MAX || budget == 0 {
                return line;
            }
            budget /= 2;
        }
    }

    /// One line of the command's output.
    fn output(&self, stream: &str, line: &str, partial: bool) -> String {
        let mut m = self.base(Event::Output);
        m.insert(field::STREAM.into(), json!(stream));
        m.insert(field::MESSAGE.into(), json!(line));
        if partial {
            m.insert(field::PARTIAL.into(), json!(true));
        }
        Value::Object(m).to_string()
    }

    /// `hook.finished`, with the key that opens the start's seal.
    fn finished(&self, result: &HookResult, duration_ms: u64) -> String {
        let mut finished = self.base(Event::Finished);
        self.run_members(&mut finished);
        if let Some((key, _)) = &self.key {
            finished.insert(field::KEY.into(), json!(key));
        }
        finished.insert(field::OUTCOME.into(), json!(result.outcome));
        finished.insert(field::EXIT_CODE.into(), json!(result.exit_code));
        finished.insert(field::SIGNAL.into(), json!(result.signal));
        finished.insert(field::DURATION_MS.into(), json!(duration_ms));
        finished.insert(
            field::MESSAGE.into(),
            json!(format!(
                "{} hook {}: {} after {duration_ms} ms",
                self.hook, result.outcome, result.message
            )),
        );
        Value::Object(finished).to_string()
    }
}

/// A hook not ok is said on hooklog's own stderr too, in `--log-format`.
fn say_how_it_ended(hook: &str, result: &HookResult) {
    if result.outcome != "ok" {
        let why = format!("{hook} hook {}: {}", result.outcome, result.message);
        let line = crate::cli::diagnostic_line("ERROR", &why);
        crate::passthrough::own_stderr(format!("{line}\n").into_bytes());
    }
}

/// Records the file did not take before [`REPORT_FINISH`] are said on stderr.
fn warn_unsent(unsent: usize) {
    if unsent > 0 {
        let why = format!(
            "{unsent} records of this hook not reported: the file did not take them within {} ms",
            REPORT_FINISH.as_millis()
        );
        let line = crate::cli::diagnostic_line("WARN", &why);
        crate::passthrough::own_stderr(format!("{line}\n").into_bytes());
    }
}

/// Bytes of randomness in a run's key: 128 bits, past any guess.
const RUN_KEY_BYTES: usize = 16;

/// A fresh run key and its seal (SHA-256), both in hex; none (with a warning) when the kernel's
/// randomness cannot be read, and the run's records then name it by its id alone.
fn run_key() -> Option<(String, String)> {
    use std::io::Read;
    let mut bytes = [0u8; RUN_KEY_BYTES];
    let read = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes));
    if let Err(e) = read {
        tracing::warn!(error = %e, "cannot read /dev/urandom: this run's finish is not sealed");
        return None;
    }
    let hex = |b: &[u8]| b.iter().map(|b| format!("{b:02x}")).collect::<String>();
    let key = hex(&bytes);
    let seal = crate::protocol::seal(&key);
    Some((key, seal))
}

/// Runs `command`: calls `on_spawn` once it runs (or could not be started), then hands each
/// output line to `on_line(stream, text, partial)` and passes it through to hooklog's own
/// stdout or stderr (from threads of their own: a stream nobody reads holds up nothing). Each
/// signal `stopping` receives is forwarded to the command's process group. While `reporter` has
/// no room, output is left in the command's pipes; the timeout and signals go on regardless.
pub async fn execute(
    command: &[OsString],
    timeout: Option<Duration>,
    stopping: Option<Stopping>,
    reporter: &Reporter,
    on_spawn: impl FnOnce(),
    mut on_line: impl FnMut(&str, &str, bool),
) -> HookResult {
    let Some((program, rest)) = command.split_first() else {
        on_spawn();
        return HookResult {
            outcome: "failed",
            exit_code: Some(EXIT_NOT_FOUND.into()),
            signal: None,
            status: EXIT_NOT_FOUND,
            message: "no command given".into(),
        };
    };
    let name = program.to_string_lossy().into_owned();
    let spawned = spawn(program, rest);
    on_spawn();
    let mut child = match spawned {
        Ok(c) => c,
        Err(e) => {
            let (status, why) = spawn_failure(&e);
            return HookResult {
                outcome: "failed",
                exit_code: Some(status.into()),
                signal: None,
                status,
                message: format!("{why}: {name} ({e})"),
            };
        }
    };
    drop(child.stdin.take());
    let pid = child
        .id()
        .and_then(|p| i32::try_from(p).ok())
        .map(Pid::from_raw);
    let mut output = Output {
        lines: output_lines(&mut child),
        passed: PassThrough::start(),
    };
    let (status, timed_out) = output
        .wait(&mut child, pid, timeout, stopping, reporter, &mut on_line)
        .await;
    if timed_out {
        // What the timed-out command left behind goes too.
        send(pid, Signal::SIGKILL);
    }
    output.drain(timed_out, reporter, &mut on_line).await;
    // Blocking, but bounded and after the command: the timers have nothing left to do.
    output.passed.finish(if timed_out {
        TIMED_OUT_PASS_THROUGH
    } else {
        PASS_THROUGH_FINISH
    });
    judge(&name, status, timed_out)
}

/// Starts `program` with `rest`, its output piped. stdin is a pipe closed at once rather than
/// /dev/null: the hook then reads EOF all the same, and a root without /dev (a bare chroot) can
/// still run hooks.
fn spawn(program: &OsString, rest: &[OsString]) -> std::io::Result<tokio::process::Child> {
    Command::new(program)
        .args(rest)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Its own process group, so a timeout or a forwarded SIGTERM reaches the command's
        // children too (`sh -c 'upload; sleep 50'`), as timeout(1) does.
        .process_group(0)
        .spawn()
}

/// The command's stdout and stderr, each read on a task of its own into one queue of lines.
fn output_lines(child: &mut tokio::process::Child) -> mpsc::Receiver<OutputLine> {
    let (tx, lines) = mpsc::channel::<OutputLine>(OUTPUT_QUEUE_LINES);
    if let Some(out) = child.stdout.take() {
        tokio::spawn(read_lines(out, "stdout", tx.clone()));
    }
    if let Some(err) = child.stderr.take() {
        tokio::spawn(read_lines(err, "stderr", tx.clone()));
    }
    lines
}

/// A line of output: its stream, its text, and whether it was cut before its end.
type OutputLine = (&'static str, String, bool);

/// The command's output on its way: the queue of its lines, and their pass-through.
struct Output {
    lines: mpsc::Receiver<OutputLine>,
    passed: PassThrough,
}

impl Output {
    /// Hands each line on until the command exits, while the timeout and signals go on
    /// regardless; returns its status and whether the timeout fired.
    async fn wait(
        &mut self,
        child: &mut tokio::process::Child,
        pid: Option<Pid>,
        timeout: Option<Duration>,
        mut stopping: Option<Stopping>,
        reporter: &Reporter,
        on_line: &mut impl FnMut(&str, &str, bool),
    ) -> (std::io::Result<ExitStatus>, bool) {
        let timeout_at = timeout.map(|t| tokio::time::Instant::now() + t);
        let mut timed_out = false;
        let mut kill_at: Option<tokio::time::Instant> = None;
        let status = loop {
            // Looked at once per turn: the reporting thread makes room at any moment, and two
            // looks that disagreed (no room for the lines, then room enough to wait for none)
            // disabled every branch but the command's exit, which waited on its full pipe: a
            // hang, seen once. Waiting for both is safe: a wake-up with room still short only
            // turns the loop again.
            let room = reporter.has_room() && self.passed.has_room();
            tokio::select! {
                status = child.wait() => break status,
                Some((stream, line, partial)) = self.lines.recv(), if room => {
                    self.passed.write(stream, &line, partial);
                    on_line(stream, &line, partial);
                }
                _ = reporter.room(), if !room => {}
                _ = self.passed.room(), if !room => {}
                _ = crate::duration::sleep_until_opt(timeout_at), if !timed_out => {
                    timed_out = true;
                    send(pid, Signal::SIGTERM);
                    kill_at = Some(tokio::time::Instant::now() + KILL_AFTER);
                }
                _ = crate::duration::sleep_until_opt(kill_at) => {
                    send(pid, Signal::SIGKILL);
                    kill_at = None;
                }
                sig = recv_opt(&mut stopping) => send(pid, sig),
            }
        };
        (status, timed_out)
    }

    /// The rest of the output, at the pace of its readers as before, until the pipes close, or
    /// stay open without a line for OUTPUT_DRAIN (something else holds them), or
    /// OUTPUT_DRAIN_MAX.
    async fn drain(
        &mut self,
        timed_out: bool,
        reporter: &Reporter,
        on_line: &mut impl FnMut(&str, &str, bool),
    ) {
        let drain_by = tokio::time::Instant::now()
            + if timed_out {
                TIMED_OUT_DRAIN_MAX
            } else {
                OUTPUT_DRAIN_MAX
            };
        loop {
            if !(reporter.has_room() && self.passed.has_room()) {
                // Both, as above: the branches' own looks could disagree with this one.
                tokio::select! {
                    _ = reporter.room() => {}
                    _ = self.passed.room() => {}
                    _ = tokio::time::sleep_until(drain_by) => break,
                }
                continue;
            }
            let idle_by = (tokio::time::Instant::now() + OUTPUT_DRAIN).min(drain_by);
            let Ok(Some((stream, line, partial))) =
                tokio::time::timeout_at(idle_by, self.lines.recv()).await
            else {
                break;
            };
            self.passed.write(stream, &line, partial);
            on_line(stream, &line, partial);
        }
    }
}

fn judge(name: &str, status: std::io::Result<ExitStatus>, timed_out: bool) -> HookResult {
    use std::os::unix::process::ExitStatusExt;
    match status {
        Err(e) => HookResult {
            outcome: "failed",
            exit_code: None,
            signal: None,
            status: EXIT_CANNOT_RUN,
            message: format!("cannot wait for {name}: {e}"),
        },
        Ok(s) => {
            let signal = s.signal().map(|n| {
                Signal::try_from(n)
                    .map(|s| s.as_str().to_string())
                    .unwrap_or_else(|_| n.to_string())
            });
            let exit_code = s.code();
            let (outcome, status) = if timed_out {
                ("timed_out", EXIT_TIMED_OUT)
            } else if let Some(code) = exit_code {
                (
                    if code == 0 { "ok" } else { "failed" },
                    u8::try_from(code).unwrap_or(1),
                )
            } else {
                (
                    "failed",
                    SIGNAL_EXIT_BASE.saturating_add(s.signal().unwrap_or(0) as u8),
                )
            };
            let message = match (&signal, exit_code) {
                (Some(sig), _) => format!("{name} killed by {sig}"),
                (None, Some(code)) => format!("{name} exited {code}"),
                (None, None) => format!("{name} ended"),
            };
            HookResult {
                outcome,
                exit_code,
                signal,
                status,
                message,
            }
        }
    }
}

/// The leading part of `command` whose arguments take at most `max` bytes as a JSON array (each
/// escaped, with its quotes and comma), the last one cut on a character boundary; true when
/// something was left out.
fn bounded_command(command: &[String], max: usize) -> (Vec<String>, bool) {
    /// Quotes and a comma around each argument in the array.
    const ARG_OVERHEAD: usize = 3;
    let mut left = max;
    let mut shown = Vec::new();
    for arg in command {
        let len = crate::record::escaped_len(arg) + ARG_OVERHEAD;
        if len <= left {
            shown.push(arg.clone());
            left -= len;
            continue;
        }
        let room = left.saturating_sub(ARG_OVERHEAD);
        if room > 0 {
            let cut = crate::record::escaped_prefix(arg, room);
            if crate::record::escaped_len(&arg[..cut]) <= room {
                shown.push(arg[..cut].to_string());
            }
        }
        return (shown, true);
    }
    (shown, false)
}

/// Signals the command's process group (its id is the command's pid).
fn send(pid: Option<Pid>, sig: Signal) {
    if let Some(pid) = pid {
        // The group may be gone already; then there is nothing to signal.
        let _ = killpg(pid, sig);
    }
}

/// The exit status a shell gives for a command that could not be started (127 when it does not
/// exist, 126 otherwise), and why in a few words.
pub fn spawn_failure(e: &std::io::Error) -> (u8, &'static str) {
    match e.kind() {
        std::io::ErrorKind::NotFound => (EXIT_NOT_FOUND, "command not found"),
        std::io::ErrorKind::PermissionDenied => (EXIT_CANNOT_RUN, "permission denied"),
        _ => (EXIT_CANNOT_RUN, "cannot run"),
    }
}

async fn recv_opt(s: &mut Option<Stopping>) -> Signal {
    match s {
        Some(s) => s.recv().await,
        None => std::future::pending().await,
    }
}

async fn read_lines(
    mut r: impl AsyncRead + Unpin,
    stream: &'static str,
    tx: mpsc::Sender<(&'static str, String, bool)>,
) {
    let mut framer = Framer::new(OUTPUT_LINE_MAX);
    let mut buf = vec![0u8; OUTPUT_READ_BUF];
    let mut out = Vec::new();
    loop {
        let n = match r.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        framer.feed(&buf[..n], |f| {
            out.push((
                String::from_utf8_lossy(f.bytes).into_owned(),
                f.end == FrameEnd::Cut,
            ))
        });
        for (line, partial) in out.drain(..) {
            if tx.send((stream, line, partial)).await.is_err() {
                return;
            }
        }
    }
    framer.finish(|f| out.push((String::from_utf8_lossy(f.bytes).into_owned(), false)));
    for (line, partial) in out.drain(..) {
        let _ = tx.send((stream, line, partial)).await; // Receiver gone: the hook is over.
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_short_command_is_shown_whole() {
        let c = args(&["sh", "-c", "curl -X POST localhost/drain"]);
        assert_eq!(bounded_command(&c, COMMAND_MAX_BYTES), (c.clone(), false));
    }

    #[test]
    fn a_long_command_is_cut_within_its_bound_on_a_char_boundary() {
        let script = "é\"".repeat(5000);
        let c = args(&["sh", "-c", &script]);
        let (shown, truncated) = bounded_command(&c, COMMAND_MAX_BYTES);
        assert!(truncated);
        assert_eq!(&shown[..2], &c[..2]);
        let json = serde_json::to_string(&shown).unwrap();
        assert!(json.len() <= COMMAND_MAX_BYTES, "{}", json.len());
        assert!(json.len() > COMMAND_MAX_BYTES - 8, "{}", json.len());
    }
}
