//! The hook's routes to the daemon under pressure (issue 17): idle connections that fill
//! `--max-connections`, lifecycle records sent by socket and file at once, a socket-only hook
//! that prints a lot, a wrapper whose own stdout nobody reads, a short write to the shared file,
//! and a shared file that is a symlink or a FIFO.

use std::io::Write;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::util::wrapper::{PidFile, alive, wrapper};
use crate::util::{Daemon, hooklog, hooklog_bin, pod_dir, wait_until};

const T: Duration = Duration::from_secs(30);

/// Waits for `child` to exit within `within`; kills it and fails the test with `what` otherwise.
fn exit_within(child: &mut Child, within: Duration, what: &str) -> ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(st) = child.try_wait().expect("try_wait") {
            return st;
        }
        if start.elapsed() > within {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what}: still running after {within:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Runs `hooklog hook --container app FLAGS -- CMD` to its end (at most `within`).
fn run_hook(flags: &[&str], cmd: &[&str], within: Duration) -> (ExitStatus, String) {
    let mut child = wrapper("app", flags, cmd)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn hooklog hook");
    let mut stderr = child.stderr.take().expect("piped stderr");
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut stderr, &mut s);
        s
    });
    let st = exit_within(&mut child, within, "hooklog hook");
    (st, reader.join().expect("stderr reader"))
}

/// Records of a JSON-lines file; a line that is not JSON fails the test.
fn file_records(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l:?}")))
        .collect()
}

fn count_event(records: &[Value], event: &str) -> usize {
    records.iter().filter(|r| r["event"] == event).count()
}

fn summary(records: &[Value]) -> &Value {
    let last = records.last().expect("some record");
    assert_eq!(last["event"], "hooks.summary", "{last}");
    last
}

/// `hooklog run` on the socket alone with peer `app` and `slots` connection slots, then `args`.
fn with_slots(sock: &Path, slots: &str, args: &[&str]) -> Daemon {
    let mut all = vec!["--peers", "app", "--max-connections", slots];
    all.extend(args);
    Daemon::listen(sock, &all, &[])
}

/// Case 1: a peer holding every `--max-connections` slot with idle connections. The daemon
/// closes idle connections to serve the real hook, which has no file to fall back to.
#[test]
fn idle_connections_at_the_limit_do_not_hide_a_real_hook() {
    let (_dir, _, sock) = pod_dir();
    let s = sock.to_str().unwrap();
    let mut d = with_slots(&sock, "4", &["--linger", "200ms", "--grace", "20s"]);
    let idle: Vec<UnixStream> = (0..4)
        .map(|_| UnixStream::connect(&sock).expect("connect"))
        .collect();
    let (st, err) = run_hook(&["--socket", s], &["sh", "-c", "echo real work"], T);
    assert!(st.success(), "{st} {err}");
    // Read while the idle connections are still held, not only at shutdown.
    d.expect(T, "the hook's records read", || {
        d.stdout.contains("hook.finished")
    });
    d.stop(crate::util::PROMPT_EXIT);
    let records = d.records();
    assert!(
        records.iter().any(|r| r["message"] == "real work"),
        "{records:#?}"
    );
    assert_eq!(summary(&records)["peers"]["app"]["outcome"], "ok");
    drop(idle);
}

/// Case 1, at shutdown: every slot is taken by connections that keep writing (none is idle),
/// so the hook's connection waits in the kernel's accept queue; the daemon reads it before the
/// summary.
#[test]
fn a_connection_still_in_the_accept_queue_is_read_before_the_summary() {
    let (_dir, _, sock) = pod_dir();
    let s = sock.to_str().unwrap();
    let mut d = with_slots(&sock, "2", &["--linger", "200ms", "--grace", "6s"]);
    let stop = Arc::new(AtomicBool::new(false));
    let chatty: Vec<_> = (0..2)
        .map(|i| {
            let mut c = UnixStream::connect(&sock).expect("connect");
            let stop = stop.clone();
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    if c.write_all(format!("chatty {i}\n").as_bytes()).is_err() {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(50));
                }
            })
        })
        .collect();
    // Both chatty connections are served (their lines come out) before the hook connects.
    d.expect(T, "both chatty connections read", || {
        let l = d.stdout.lines();
        (0..2).all(|i| l.iter().any(|x| x.contains(&format!("chatty {i}"))))
    });
    let (st, err) = run_hook(&["--socket", s], &["sh", "-c", "echo queued work"], T);
    assert!(st.success(), "{st} {err}");
    d.stop(crate::util::PROMPT_EXIT);
    stop.store(true, Ordering::Relaxed);
    for t in chatty {
        t.join().unwrap();
    }
    let records = d.records();
    assert!(
        records.iter().any(|r| r["message"] == "queued work"),
        "{:#?}",
        d.stderr.lines()
    );
    assert_eq!(summary(&records)["peers"]["app"]["outcome"], "ok");
}

/// What to build: `hook.started` and `hook.finished` go by the socket and the file, and the
/// daemon, reading both, keeps one of each.
#[test]
fn lifecycle_records_go_by_every_route_and_the_daemon_keeps_one_of_each() {
    let (_dir, file, sock) = pod_dir();
    let (s, f) = (sock.to_str().unwrap(), file.to_str().unwrap());
    std::fs::write(&file, "").unwrap();
    let mut d = Daemon::listen(
        &sock,
        &["--file", f, "--peers", "app", "--linger", "300ms"],
        &[],
    );
    let (st, err) = run_hook(
        &["--socket", s, "--file", f],
        &["sh", "-c", "echo one; echo two"],
        T,
    );
    assert!(st.success(), "{st} {err}");
    // The file has the lifecycle records (the socket worked, so only those).
    let in_file = file_records(&file);
    assert_eq!(count_event(&in_file, "hook.started"), 1, "{in_file:#?}");
    assert_eq!(count_event(&in_file, "hook.finished"), 1, "{in_file:#?}");
    assert_eq!(count_event(&in_file, "hook.output"), 0, "{in_file:#?}");
    // The daemon reads the file to its end before the summary.
    d.stop(crate::util::PROMPT_EXIT);
    let records = d.records();
    assert_eq!(count_event(&records, "hook.started"), 1, "{records:#?}");
    assert_eq!(count_event(&records, "hook.finished"), 1, "{records:#?}");
    assert_eq!(count_event(&records, "hook.output"), 2, "{records:#?}");
    assert_eq!(summary(&records)["peers"]["app"]["outcome"], "ok");
}

/// Case 4: `hook --socket S` with no `--file` prints 400,000 lines; the daemon is behind, not
/// stuck, and the wrapper waits for it rather than dropping lines to stderr.
#[test]
fn a_socket_only_hook_that_prints_a_lot_delivers_every_line() {
    const LINES: usize = 400_000;
    let (_dir, _, sock) = pod_dir();
    let s = sock.to_str().unwrap();
    let mut d = Daemon::listen(&sock, &["--linger", "200ms"], &[]);
    let script = format!("seq 1 {LINES}");
    // About 40 s for the debug build alone on 2 cores (it runs alone: .config/nextest.toml).
    let slow = Duration::from_secs(300);
    let (st, err) = run_hook(&["--socket", s], &["sh", "-c", &script], slow);
    assert!(st.success(), "{st}");
    assert!(
        !err.lines()
            .any(|l| l.contains("hook.output") || l.contains("not reported")),
        "records went to stderr or were not reported: {}",
        err.lines().take(5).collect::<Vec<_>>().join("\n")
    );
    // hook.started, every line, hook.finished (len() only: cloning 400,000 lines per poll would
    // slow the test more than the daemon).
    let ok = wait_until(slow, || d.stdout.len() >= LINES + 2);
    assert!(
        ok,
        "{} of {} records; hook's stderr: {err}",
        d.stdout.len(),
        LINES + 2
    );
    d.stop(crate::util::PROMPT_EXIT);
    let records = d.records();
    assert_eq!(count_event(&records, "hook.output"), LINES);
    assert_eq!(count_event(&records, "hook.finished"), 1);
    assert_eq!(summary(&records)["peers"]["app"]["outcome"], "ok");
}

/// Case 7: `--timeout 2s` fires on time while nobody reads the wrapper's own stdout.
#[test]
fn the_timeout_fires_on_time_when_nobody_reads_the_wrappers_stdout() {
    let (dir, file, _) = pod_dir();
    let pid_file = PidFile::new(dir.path(), "pid");
    let script = format!(
        "{}; head -c 400000 /dev/zero | tr '\\0' x; sleep 60",
        pid_file.echo("$$")
    );
    let start = Instant::now();
    // stdout is a pipe this test holds open and never reads.
    let flags = ["--timeout", "2s", "--file", file.to_str().unwrap()];
    let mut child = wrapper("app", &flags, &["sh", "-c", &script])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn hooklog hook");
    let st = exit_within(
        &mut child,
        Duration::from_secs(15),
        "hook with unread stdout",
    );
    let took = start.elapsed();
    assert_eq!(st.code(), Some(124), "{st}");
    // 2 s, then the output drain (0.5 s) and the file's records; never the 60 s sleep.
    assert!(took < Duration::from_secs(6), "took {took:?}");
    let records = file_records(&file);
    let finished = records
        .iter()
        .find(|r| r["event"] == "hook.finished")
        .expect("hook.finished in the file");
    assert_eq!(finished["outcome"], "timed_out");
    // The wrapper reaped the command it timed out before it exited.
    assert!(!alive(pid_file.read()), "the timed-out command still runs");
    drop(child);
}

/// Case 8: a writer's record cut short by a full file system (here RLIMIT_FSIZE, which gives a
/// real short write then EFBIG) must not glue the next writer's record onto its fragment.
#[test]
fn a_short_write_to_the_shared_file_does_not_glue_the_next_record() {
    let (_dir, file, _) = pod_dir();
    // 1000 bytes of one whole record; the limit below (2 blocks of 512) leaves 24 bytes.
    let pad = format!("{{\"pad\":\"{}\"}}\n", "p".repeat(1000 - 11));
    assert_eq!(pad.len(), 1000);
    std::fs::write(&file, &pad).unwrap();
    let script = format!(
        "trap '' XFSZ; ulimit -f 2; exec '{}' emit --container a --file '{}' 'cut short by a full disk'",
        hooklog_bin().display(),
        file.display()
    );
    let st = Command::new("sh").arg("-c").arg(&script).status().unwrap();
    assert!(st.success(), "{st}");
    let text = std::fs::read_to_string(&file).unwrap();
    assert_eq!(text.len(), 1024, "a short write happened: {text:?}");
    // Space is back: the next writer's record starts on a line of its own.
    let st = hooklog()
        .args(["emit", "--container", "b", "--file", file.to_str().unwrap()])
        .arg("after the disk was freed")
        .status()
        .unwrap();
    assert!(st.success());
    let text = std::fs::read_to_string(&file).unwrap();
    let last = text.lines().last().unwrap();
    let r: Value = serde_json::from_str(last).unwrap_or_else(|e| panic!("{e}: {last:?}"));
    assert_eq!(r["message"], "after the disk was freed");
    assert!(text.ends_with('\n'));
}

/// Case 9, the wrapper's side: its file fallback does not follow a symlink a peer planted.
#[test]
fn the_file_fallback_does_not_follow_a_symlink() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("elsewhere");
    std::fs::write(&target, "").unwrap();
    let file = dir.path().join("prestop.log");
    std::os::unix::fs::symlink(&target, &file).unwrap();
    let (st, err) = run_hook(
        &["--file", file.to_str().unwrap()],
        &["sh", "-c", "echo secret; exit 3"],
        T,
    );
    assert_eq!(st.code(), Some(3), "{err}");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "", "{err}");
    // The records went to the last resort instead, whole.
    assert_file_refused(&err, "symbolic link");
}

/// The wrapper's stderr `err` when the file fallback refused the file: one clear line about
/// prestop.log that says `why`, and the records there (on the last resort), whole.
fn assert_file_refused(err: &str, why: &str) {
    let warnings: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("prestop.log") && !l.starts_with('{'))
        .collect();
    assert_eq!(warnings.len(), 1, "one clear line: {err}");
    assert!(warnings[0].contains(why), "{err}");
    assert!(err.contains("\"hook.finished\""), "{err}");
}

/// Case 9, the wrapper's side: a FIFO at the file's path (nobody reading it) neither hangs the
/// hook nor takes its records.
#[test]
fn the_file_fallback_refuses_a_fifo() {
    let (_dir, file, _) = pod_dir();
    let st = Command::new("mkfifo").arg(&file).status().unwrap();
    assert!(st.success());
    let (st, err) = run_hook(
        &["--file", file.to_str().unwrap()],
        &["sh", "-c", "echo hi"],
        Duration::from_secs(10),
    );
    assert!(st.success(), "{err}");
    assert_file_refused(&err, "not a regular file");
}

/// Issue 25.7: with every slot held by idle connections, a hook's connection waits in the
/// accept queue; a chatty hook fills its buffer there, and on main the wrapper gave the record
/// in progress up half-way (500 ms without progress) and sent it whole to the file: its first
/// part came out beside its copy, the line twice. Now a record the socket has begun is finished
/// there. Every line exactly once, by both routes, at several sizes and slot counts.
#[test]
fn every_line_comes_out_once_when_the_hooks_connection_waits_behind_idle_ones() {
    for (slots, lines, width) in [
        (64usize, 3000usize, 200usize),
        (8, 6000, 120),
        (64, 1500, 600),
    ] {
        let (_dir, file, sock) = pod_dir();
        let slots_s = slots.to_string();
        let mut d = Daemon::follow(
            &file,
            Some(&sock),
            &[
                "--peers",
                "app",
                "--max-connections",
                &slots_s,
                "--linger",
                "200ms",
                "--grace",
                "15s",
            ],
            &[],
        );
        let idle: Vec<UnixStream> = (0..slots)
            .map(|_| UnixStream::connect(&sock).expect("connect"))
            .collect();
        let script = format!(
            "pad=$(head -c {width} /dev/zero | tr '\\0' x); i=0; while [ $i -lt {lines} ]; do echo \"line $i $pad\"; i=$((i+1)); done"
        );
        let (st, err) = run_hook(
            &[
                "--socket",
                sock.to_str().unwrap(),
                "--file",
                file.to_str().unwrap(),
            ],
            &["sh", "-c", &script],
            T,
        );
        assert!(st.success(), "{st} {err}");
        d.expect(T, "hook.finished", || d.stdout.contains("hook.finished"));
        d.stop(crate::util::PROMPT_EXIT);
        let records = d.records();
        let mut seen = std::collections::HashMap::<String, usize>::new();
        for r in &records {
            // Fragments too: any record carrying a line's number counts as that line.
            let m = r["message"].as_str().unwrap_or_default();
            let text = if r["event"] == "hook.output" {
                m.to_string()
            } else {
                m.split("\"message\":\"")
                    .nth(1)
                    .unwrap_or_default()
                    .to_string()
            };
            if let Some(n) = text.strip_prefix("line ").and_then(|t| t.split(' ').next()) {
                *seen.entry(n.to_string()).or_default() += 1;
            }
        }
        let twice: Vec<_> = seen.iter().filter(|(_, c)| **c > 1).collect();
        assert!(
            twice.is_empty(),
            "{slots} slots: lines out twice: {twice:?}"
        );
        assert_eq!(seen.len(), lines, "{slots} slots: lines out");
        assert_eq!(summary(&records)["peers"]["app"]["outcome"], "ok");
        drop(idle);
    }
}
