//! `hooklog webhook` against hostile clients (issue 26): the real binary over TLS on 127.0.0.1.
//! Its memory per review is a bounded multiple of the body, whatever the body's shape, and the
//! review budget keeps the whole process under its Deployment's limit.

use std::time::Duration;

use serde_json::{Value, json};

use crate::util::webhook::{Certs, Webhook, client_connection, pod_review, serving, web_pod};

/// The memory limit of the shipped Deployment (k8s/webhook/webhook.yaml).
const DEPLOYMENT_LIMIT: u64 = 64 << 20;

/// The process's peak resident set (VmHWM), in bytes.
pub fn peak_rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    kb * 1024
}

/// A review of about `size` bytes in one of the shapes a large body can take.
pub fn body_of(shape: &str, size: usize) -> Vec<u8> {
    let opted = json!({"hooklog.dev/inject": "enabled"});
    let mut pod = match shape {
        "hostile" | "hostile-opted-in" => {
            let mut p = web_pod(if shape == "hostile" { json!({}) } else { opted });
            // The shape that costs serde_json the most per byte: empty arrays, 3 bytes each.
            p["spec"]["x"] = Value::Array(vec![json!([]); size / 3]);
            p
        }
        "env" => {
            let mut p = web_pod(opted);
            let env: Vec<Value> = (0..size / 40)
                .map(|i| json!({"name": format!("VAR_{i}"), "value": "some value"}))
                .collect();
            p["spec"]["containers"][0]["env"] = Value::Array(env);
            p
        }
        _ => {
            let mut p = web_pod(opted);
            p["metadata"]["annotations"]["big"] = json!("a".repeat(size));
            p
        }
    };
    let mut body = pod_review("u-mem", "shop", &pod);
    // Trim the filler to the size asked for (the arrays are a little over).
    while body.len() > size {
        let over = body.len() - size;
        match shape {
            "hostile" | "hostile-opted-in" => {
                let a = pod["spec"]["x"].as_array_mut().unwrap();
                a.truncate(a.len() - over.div_ceil(3));
            }
            "env" => {
                let a = pod["spec"]["containers"][0]["env"].as_array_mut().unwrap();
                a.truncate(a.len() - over.div_ceil(40).max(1));
            }
            _ => {
                let s = pod["metadata"]["annotations"]["big"]
                    .as_str()
                    .unwrap()
                    .len();
                pod["metadata"]["annotations"]["big"] = json!("a".repeat(s - over));
            }
        }
        body = pod_review("u-mem", "shop", &pod);
    }
    body
}

/// The webhook's peak RSS after one review of each shape and size up to the largest body it
/// reads: a review it reads costs at most its estimate (and so fits the budget), one too
/// costly is answered without being parsed, and the process stays under its Deployment's limit.
#[test]
fn one_review_of_any_shape_and_size_costs_what_the_webhook_budgets() {
    use hooklog::webhook::server::{MAX_BODY, REVIEW_BUDGET, review_cost};
    let dir = tempfile::tempdir().unwrap();
    let certs = Certs::make(dir.path(), "hooklog test CA");
    let mut failed = Vec::new();
    for shape in ["annotation", "env", "hostile", "hostile-opted-in"] {
        for size in [64 << 10, 1 << 20, 3 << 20, MAX_BODY - 1024] {
            let w = Webhook::start(&certs, &["--sidecar", "classic"]);
            // One small review first: the TLS session, the runtime's threads and the
            // allocator's first segments (about 4 MiB) are the idle process's, not the review's.
            let small = pod_review(
                "u-warm",
                "shop",
                &web_pod(json!({"hooklog.dev/inject": "enabled"})),
            );
            w.review(&certs.ca_pem, "/mutate", &small);
            let idle = peak_rss(w.child.id());
            let body = body_of(shape, size);
            let answer = w.review(&certs.ca_pem, "/mutate", &body);
            assert_eq!(answer["response"]["allowed"], json!(true), "{shape}");
            assert_eq!(answer["response"]["uid"], json!("u-mem"), "{shape}");
            let peak = peak_rss(w.child.id());
            let took = peak.saturating_sub(idle);
            let cost = review_cost(&body) as u64;
            let read = cost <= REVIEW_BUDGET as u64;
            eprintln!(
                "{shape}: body {} bytes, estimate {cost}, read {read}, idle {idle}, peak {peak}, review {took}",
                body.len()
            );
            // Read: within its estimate. Not read: no more than the body twice and a little.
            // Both with the allocator's granularity (a segment of 4 MiB) as slack.
            let bound = (4 << 20) + if read { cost } else { 2 * body.len() as u64 };
            if took > bound || peak >= DEPLOYMENT_LIMIT {
                failed.push(format!(
                    "{shape} {size}: review {took} > {bound} or peak {peak}"
                ));
            }
        }
    }
    assert!(failed.is_empty(), "{failed:#?}");
}

/// Eight reviews at once with the largest bodies, in every shape: the process stays under the
/// Deployment's limit.
#[test]
fn concurrent_largest_reviews_stay_under_the_deployment_limit() {
    use hooklog::webhook::server::MAX_BODY;
    let (_dir, certs, w) = serving(&["--sidecar", "classic"]);
    let shapes = ["annotation", "env", "hostile", "hostile-opted-in"];
    let threads: Vec<_> = (0..8)
        .map(|i| {
            let body = body_of(shapes[i % shapes.len()], MAX_BODY - 1024);
            let (ca, port) = (certs.ca_pem.clone(), w.port);
            std::thread::spawn(move || {
                crate::util::webhook::https(port, &ca, "POST", "/mutate", &body).map(|(s, _)| s)
            })
        })
        .collect();
    for t in threads {
        assert_eq!(t.join().unwrap(), Ok(200));
    }
    let peak = peak_rss(w.child.id());
    eprintln!("8 reviews of {MAX_BODY} bytes at once: peak {peak}");
    assert!(peak < DEPLOYMENT_LIMIT, "peak {peak}");
}

/// A TLS client of the webhook under test, verified against its CA.
fn tls_client(
    ca_pem: &str,
    port: u16,
) -> std::io::Result<rustls::StreamOwned<rustls::ClientConnection, std::net::TcpStream>> {
    let conn = client_connection(ca_pem).expect("a TLS client for the test's CA");
    let tcp = std::net::TcpStream::connect(("127.0.0.1", port))?;
    tcp.set_write_timeout(Some(Duration::from_secs(5)))?;
    Ok(rustls::StreamOwned::new(conn, tcp))
}

/// Issue 26: 260 keep-alive connections sending 3 bytes a second held all 256 slots, and real
/// reviews went unanswered. Each of them is closed once it falls below the minimum rate, and
/// real reviews are answered meanwhile.
#[test]
fn slow_connections_do_not_block_real_reviews() {
    use std::io::Write;
    use std::sync::atomic::{AtomicUsize, Ordering};
    const SLOW: usize = 260;
    /// How long a slow client goes on at most (it stops by itself).
    const TRICKLE_FOR: Duration = Duration::from_secs(30);
    let (_dir, certs, w) = serving(&["--sidecar", "classic"]);
    let connected = std::sync::Arc::new(AtomicUsize::new(0));
    let slow: Vec<_> = (0..SLOW)
        .map(|_| {
            let (ca, port, connected) = (certs.ca_pem.clone(), w.port, connected.clone());
            std::thread::spawn(move || {
                let Ok(mut tls) = tls_client(&ca, port) else {
                    return false;
                };
                // The handshake, then requests short enough to be complete within every
                // timeout, 3 bytes a second, on and on (keep-alive; answers left unread).
                if tls.write_all(b"GET").and_then(|_| tls.flush()).is_err() {
                    return false;
                }
                connected.fetch_add(1, Ordering::SeqCst);
                let request = b" / HTTP/1.1\r\n\r\nGET";
                let started = std::time::Instant::now();
                for chunk in request.chunks(3).cycle() {
                    if started.elapsed() > TRICKLE_FOR {
                        return false;
                    }
                    std::thread::sleep(Duration::from_secs(1));
                    if tls.write_all(chunk).and_then(|_| tls.flush()).is_err() {
                        return true; // closed by the webhook
                    }
                }
                false
            })
        })
        .collect();
    // Once most slow clients hold a connection, real reviews are answered in time.
    assert!(crate::util::wait_until(
        Duration::from_secs(30),
        || connected.load(Ordering::SeqCst) >= 200
    ));
    let body = pod_review(
        "u-real",
        "shop",
        &web_pod(json!({"hooklog.dev/inject": "enabled"})),
    );
    for _ in 0..4 {
        let started = std::time::Instant::now();
        let (status, _) =
            crate::util::webhook::https(w.port, &certs.ca_pem, "POST", "/mutate", &body).unwrap();
        assert_eq!(status, 200);
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{:?}",
            started.elapsed()
        );
    }
    let closed = slow
        .into_iter()
        .filter_map(|t| t.join().ok())
        .filter(|c| *c)
        .count();
    assert!(
        closed >= 200,
        "{closed} of {SLOW} slow connections closed by the webhook"
    );
}

/// The webhook's bound for a request's headers and, before the first request, for a new
/// connection's silence (src/webhook/server.rs `HEADER_TIMEOUT`).
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// Idle connections the webhook keeps at once (src/webhook/server.rs `MAX_IDLE_CONNECTIONS`).
const MAX_IDLE_CONNECTIONS: usize = 100;
/// Slack for a debug binary on a shared 2-core machine to notice a deadline (it looks every
/// 100 ms).
const NOTICE: Duration = Duration::from_secs(3);

type Tls = rustls::StreamOwned<rustls::ClientConnection, std::net::TcpStream>;

/// Sends `GET /healthz` on a kept connection (keep-alive, the API server's way) and reads the
/// one answer: its head, lowercased.
fn healthz(tls: &mut Tls, port: u16) -> std::io::Result<String> {
    use std::io::{Read, Write};
    tls.write_all(format!("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n").as_bytes())?;
    tls.flush()?;
    let mut got = Vec::new();
    let mut byte = [0u8; 1];
    while !got.ends_with(b"\r\n\r\n") {
        if tls.read(&mut byte)? == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        got.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&got).to_lowercase();
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    let mut body = vec![0u8; length];
    tls.read_exact(&mut body)?;
    assert!(head.starts_with("http/1.1 200"), "{head}");
    Ok(head)
}

/// A new connection to the webhook on `port` that has asked `GET /healthz` once (its reads
/// bounded at 20 s): the connection and the answer's head.
fn new_connection_healthz(ca_pem: &str, port: u16) -> (Tls, String) {
    let mut tls = tls_client(ca_pem, port).unwrap();
    tls.sock
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let head = healthz(&mut tls, port).unwrap();
    (tls, head)
}

/// Whether the webhook closed `tls`: a read returns end of file (or a reset) within `wait`.
fn closed_within(tls: &mut Tls, wait: Duration) -> bool {
    use std::io::Read;
    tls.sock.set_read_timeout(Some(wait)).unwrap();
    let mut byte = [0u8; 1];
    match tls.read(&mut byte) {
        Ok(0) => true,
        Ok(_) => panic!("the webhook sent bytes unasked"),
        Err(e) => !matches!(
            e.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        ),
    }
}

/// Issue 26's leftover: an idle keep-alive connection was closed by the 10 s header timeout,
/// while the API server keeps idle connections 90 s and sends its next review on one (a POST
/// it does not retry). It is kept past the header timeout and serves the next review; then, with
/// `--idle-timeout`, it is closed once idle that long, and not before.
#[test]
fn an_idle_keep_alive_connection_outlives_the_header_timeout_and_ends_at_its_own_bound() {
    let (_dir, certs, w) = serving(&["--sidecar", "classic"]);
    let mut tls = tls_client(&certs.ca_pem, w.port).unwrap();
    let head = healthz(&mut tls, w.port).unwrap();
    assert!(!head.contains("connection: close"), "{head}");
    // Idle past the header timeout: not closed.
    assert!(
        !closed_within(&mut tls, HEADER_TIMEOUT + NOTICE),
        "closed while idle, before its idle bound"
    );
    tls.sock
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let head = healthz(&mut tls, w.port).expect("the kept connection serves the next request");
    assert!(!head.contains("connection: close"), "{head}");
    drop(w);

    // Its own bound, set short: closed once idle that long, after each answer anew.
    let idle = Duration::from_secs(2);
    let w = Webhook::start(&certs, &["--sidecar", "classic", "--idle-timeout", "2s"]);
    let mut tls = tls_client(&certs.ca_pem, w.port).unwrap();
    healthz(&mut tls, w.port).unwrap();
    let answered = std::time::Instant::now();
    let early = idle - Duration::from_millis(500);
    assert!(
        !closed_within(&mut tls, early),
        "closed before its idle bound"
    );
    assert!(
        closed_within(&mut tls, NOTICE + Duration::from_millis(500)),
        "not closed {:?} after the answer (--idle-timeout 2s)",
        answered.elapsed()
    );
    assert!(answered.elapsed() >= early, "{:?}", answered.elapsed());
    // A new connection that never sends a request is closed at the header timeout.
    let mut silent = tls_client(&certs.ca_pem, w.port).unwrap();
    use std::io::Write;
    // rustls handshakes on the first write or read: an empty flush completes it.
    silent.flush().unwrap();
    let opened = std::time::Instant::now();
    assert!(closed_within(&mut silent, HEADER_TIMEOUT + NOTICE + NOTICE));
    assert!(
        opened.elapsed() + Duration::from_millis(500) >= HEADER_TIMEOUT,
        "{:?}",
        opened.elapsed()
    );
}

/// Idle connections take at most `MAX_IDLE_CONNECTIONS` of the webhook's slots: past it, an
/// answer says `Connection: close` and the connection ends after it; once an idle one goes, a new
/// connection is kept again.
#[test]
fn idle_connections_are_capped_and_the_next_answers_close_theirs() {
    let (_dir, certs, w) = serving(&["--sidecar", "classic"]);
    let mut kept = Vec::new();
    for i in 0..MAX_IDLE_CONNECTIONS {
        let (tls, head) = new_connection_healthz(&certs.ca_pem, w.port);
        assert!(
            !head.contains("connection: close"),
            "connection {i}: {head}"
        );
        kept.push(tls);
    }
    for i in 0..3 {
        let (mut tls, head) = new_connection_healthz(&certs.ca_pem, w.port);
        assert!(
            head.contains("connection: close"),
            "over the cap, {i}: {head}"
        );
        assert!(
            closed_within(&mut tls, NOTICE),
            "over the cap, {i}: not closed"
        );
    }
    // A kept one that sends again is still served, and kept (its slot is its own).
    let head = healthz(&mut kept[0], w.port).unwrap();
    assert!(!head.contains("connection: close"), "{head}");
    // One goes away: a new connection is kept again, once the webhook has seen it go.
    drop(kept.pop());
    let again = crate::util::wait_until(Duration::from_secs(10), || {
        let (tls, head) = new_connection_healthz(&certs.ca_pem, w.port);
        let keep = !head.contains("connection: close");
        if keep {
            kept.push(tls);
        }
        keep
    });
    assert!(again, "no connection kept after one went");
}
