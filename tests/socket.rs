//! The socket source end to end: concurrent writers, partial writes, writers that leave
//! mid-line, stale and live socket files.

use std::collections::HashMap;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::time::Duration;

use crate::util::{Daemon, hooklog, messages};

const T: Duration = Duration::from_secs(30);

#[test]
fn concurrent_writers_never_interleave_partial_lines() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("hooklog.sock");
    let mut daemon = Daemon::start(&["--socket", sock.to_str().unwrap()], &[]);
    const WRITERS: usize = 16;
    const LINES: usize = 400;
    let threads: Vec<_> = (0..WRITERS)
        .map(|w| {
            let sock = sock.clone();
            std::thread::spawn(move || {
                let mut s = UnixStream::connect(&sock).unwrap();
                let mut rng = w as u64 + 1;
                for i in 0..LINES {
                    let line = format!("writer {w} line {i} {}\n", "p".repeat(i % 97));
                    // Dribble each line out in small pieces so reads see partial lines.
                    let bytes = line.as_bytes();
                    let mut at = 0;
                    while at < bytes.len() {
                        rng = rng
                            .wrapping_mul(6364136223846793005)
                            .wrapping_add(1442695040888963407);
                        let n = (1 + (rng >> 33) as usize % 17).min(bytes.len() - at);
                        s.write_all(&bytes[at..at + n]).unwrap();
                        at += n;
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    daemon.wait_records(WRITERS * LINES, T);
    daemon.terminate();
    assert!(daemon.wait_exit(crate::util::PROMPT_EXIT).success());
    let got = messages(&daemon.records());
    let mut per_writer: HashMap<usize, Vec<usize>> = HashMap::new();
    for m in got.iter().filter(|m| m.starts_with("writer ")) {
        let parts: Vec<&str> = m.split(' ').collect();
        let (w, i): (usize, usize) = (parts[1].parse().unwrap(), parts[3].parse().unwrap());
        assert_eq!(
            *m,
            format!("writer {w} line {i} {}", "p".repeat(i % 97)),
            "intact line"
        );
        per_writer.entry(w).or_default().push(i);
    }
    assert_eq!(per_writer.len(), WRITERS);
    for (w, seq) in per_writer {
        assert_eq!(
            seq,
            (0..LINES).collect::<Vec<_>>(),
            "writer {w}: every line once, in order"
        );
    }
}

#[test]
fn a_writer_that_leaves_mid_line_gets_its_own_record() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("hooklog.sock");
    let mut daemon = Daemon::start(&["--socket", sock.to_str().unwrap()], &[]);
    let mut a = UnixStream::connect(&sock).unwrap();
    let mut b = UnixStream::connect(&sock).unwrap();
    a.write_all(b"from a, unfinished").unwrap();
    b.write_all(b"from b, whole\n").unwrap();
    drop(a);
    b.write_all(b"from b, again\n").unwrap();
    drop(b);
    let records = daemon.wait_records(3, T);
    daemon.terminate();
    assert!(daemon.wait_exit(crate::util::PROMPT_EXIT).success());
    let frag = records
        .iter()
        .find(|r| r["message"] == "from a, unfinished")
        .expect("fragment flushed as its own record");
    assert_eq!(frag["hooklog"]["flags"], serde_json::json!(["no_newline"]));
    let mut msgs = messages(&records);
    msgs.retain(|m| m.starts_with("from"));
    msgs.sort();
    assert_eq!(
        msgs,
        vec!["from a, unfinished", "from b, again", "from b, whole"]
    );
}

#[test]
fn stale_socket_is_replaced_with_the_asked_mode() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("hooklog.sock");
    // A socket file left behind by a dead process.
    drop(std::os::unix::net::UnixListener::bind(&sock).unwrap());
    assert!(sock.exists());
    let mut daemon = Daemon::start(&["--socket", sock.to_str().unwrap()], &[]);
    assert_eq!(
        std::fs::metadata(&sock).unwrap().permissions().mode() & 0o777,
        0o666
    );
    let mut c = UnixStream::connect(&sock).unwrap();
    c.write_all(b"hello\n").unwrap();
    drop(c);
    daemon.wait_records(1, T);

    // A second daemon must not steal the live socket.
    let out = hooklog()
        .args(["run", "--socket", sock.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(sock.to_str().unwrap()) && err.contains("another process"),
        "{err}"
    );
    daemon.terminate();
    assert!(daemon.wait_exit(crate::util::PROMPT_EXIT).success());
}

#[test]
fn emit_through_the_socket_is_well_formed() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("hooklog.sock");
    let mut daemon = Daemon::start(&["--socket", sock.to_str().unwrap()], &[]);
    let st = hooklog()
        .args([
            "emit",
            "--socket",
            sock.to_str().unwrap(),
            "--container",
            "api-server",
        ])
        .args(["--field", "phase=heap \"dump\"", r#"it's 100% \ done"#])
        .status()
        .unwrap();
    assert!(st.success());
    let r = daemon.wait_records(1, T).remove(0);
    assert_eq!(r["message"], r#"it's 100% \ done"#);
    assert_eq!(r["phase"], "heap \"dump\"");
    assert_eq!(r["container_name"], "api-server");
    assert_eq!(r["kubernetes"]["container_name"], "api-server");
    daemon.terminate();
    assert!(daemon.wait_exit(crate::util::PROMPT_EXIT).success());
}
