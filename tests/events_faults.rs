//! `hooklog run --events` through faults (issue 37): the real binary against an API server
//! stand-in on 127.0.0.1 (HTTPS, one request per connection, as hooklog's client makes them)
//! that answers each call from a plan of faults: a reset connection, a connection closed without
//! an answer, a 429 with `Retry-After`, a 503, an answer slower than a call's deadline, a
//! refused connection (nothing listening yet), a 403. Every failed hook still gets its Event
//! within the grace; only an authorization answer ends the calls. The stand-in keeps the Events
//! it was sent, by name, and answers a series update of one it does not hold with 404, as the
//! API server does.

use std::collections::{BTreeMap, VecDeque};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::util::events::{NOT_POSTED, not_posted_warning, run_events, serviceaccount_mount};
use crate::util::http::{read_request, respond_json};
use crate::util::webhook::Certs;
use crate::util::{Daemon, hook, wait_until};

/// How long an Event may take to show up after the hook ended, faults included.
const EVENT_SHOWS: Duration = Duration::from_secs(30);

/// Longer than hooklog's deadline for one call (src/events/mod.rs, `CALL_TIMEOUT`, 2 s).
const SLOW: Duration = Duration::from_millis(2600);

/// The User-Agent every call must carry.
const USER_AGENT: &str = concat!("hooklog/", env!("CARGO_PKG_VERSION"));

/// What the stand-in does with one call.
#[derive(Debug, Clone, PartialEq)]
enum Fault {
    /// Closes the TCP connection with the client's bytes unread: the kernel answers with a RST.
    Reset,
    /// Reads the request and closes the connection without an answer.
    Close,
    /// Answers with this status (and `Retry-After` seconds) and a `Status` body.
    Status(u16, Option<u64>),
    /// Answers correctly, after this long.
    Slow(Duration),
}

/// One call as the stand-in saw it.
#[derive(Debug, Clone)]
struct Call {
    /// When it was read.
    at: Instant,
    method: String,
    path: String,
    user_agent: Option<String>,
    /// What the stand-in did: a fault, or `None` for a correct answer.
    fault: Option<Fault>,
}

/// The stand-in: its port, its plan, what it saw and the Events it holds.
struct StandIn {
    port: u16,
    calls: Arc<Mutex<Vec<Call>>>,
    events: Arc<Mutex<BTreeMap<String, Value>>>,
    ca_pem: String,
}

impl StandIn {
    /// A stand-in on a port of its own that starts listening after `listen_after` (a refused
    /// connection until then) and answers from `plan`, then correctly.
    fn start(dir: &Path, plan: Vec<Fault>, listen_after: Duration) -> StandIn {
        let certs = Certs::make(dir, "stand-in-apiserver");
        let reloading = Arc::new(
            hooklog::webhook::tls::Reloading::open(certs.cert_file.clone(), certs.key_file.clone())
                .expect("the test's certificate"),
        );
        let config =
            Arc::new(hooklog::webhook::tls::server_config(reloading).expect("a TLS config"));
        // The port is taken now and let go until the stand-in listens (std sets SO_REUSEADDR).
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let plan = Arc::new(Mutex::new(VecDeque::from(plan)));
        let calls = Arc::new(Mutex::new(Vec::new()));
        let events = Arc::new(Mutex::new(BTreeMap::new()));
        let (c, e) = (calls.clone(), events.clone());
        std::thread::spawn(move || {
            std::thread::sleep(listen_after);
            let listener = TcpListener::bind(("127.0.0.1", port)).expect("the stand-in's port");
            for tcp in listener.incoming().map_while(Result::ok) {
                let fault = plan.lock().unwrap().pop_front();
                let (config, c, e) = (config.clone(), c.clone(), e.clone());
                std::thread::spawn(move || serve(tcp, config, fault, &c, &e));
            }
        });
        StandIn {
            port,
            calls,
            events,
            ca_pem: certs.ca_pem,
        }
    }

    fn calls(&self) -> Vec<Call> {
        self.calls.lock().unwrap().clone()
    }

    fn events(&self) -> Vec<Value> {
        self.events.lock().unwrap().values().cloned().collect()
    }

    /// The Event about `container`, once it is there.
    fn event_of(&self, container: &str) -> Option<Value> {
        let path = format!("spec.containers{{{container}}}");
        self.events()
            .into_iter()
            .find(|e| e["regarding"]["fieldPath"] == path.as_str())
    }

    /// `hooklog run --events` against the stand-in with `extra` flags.
    fn daemon(&self, dir: &Path, file: &Path, extra: &[&str]) -> Daemon {
        let sa = serviceaccount_mount(dir, &self.ca_pem, "a-token", "shop");
        run_events(
            file,
            &sa,
            self.port,
            &[&["--linger", "100ms", "--announce-timeout", "200ms"], extra].concat(),
            &[("POD_NAME", "checkout-7d9f-x2x4b"), ("POD_UID", "0f1e2d3c")],
        )
    }
}

/// Serves one connection: reads the request, then does what `fault` says (or answers
/// correctly, keeping the Event).
fn serve(
    tcp: TcpStream,
    config: Arc<rustls::ServerConfig>,
    fault: Option<Fault>,
    calls: &Mutex<Vec<Call>>,
    events: &Mutex<BTreeMap<String, Value>>,
) {
    if let Some(Fault::Reset) = fault {
        // The client's ClientHello is in, unread: closing now sends a RST.
        let _ = tcp.set_read_timeout(Some(Duration::from_secs(5)));
        let _ = tcp.peek(&mut [0u8; 1]);
        calls.lock().unwrap().push(Call {
            at: Instant::now(),
            method: String::new(),
            path: String::new(),
            user_agent: None,
            fault,
        });
        return;
    }
    let conn = rustls::ServerConnection::new(config).expect("a TLS session");
    let mut tls = rustls::StreamOwned::new(conn, tcp);
    let Some((head, body)) = read_request(&mut tls) else {
        return;
    };
    let mut first = head.lines().next().unwrap_or_default().split(' ');
    let method = first.next().unwrap_or_default().to_string();
    let path = first.next().unwrap_or_default().to_string();
    let user_agent = head.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.eq_ignore_ascii_case("user-agent")
            .then(|| v.trim().to_string())
    });
    let body: Value = serde_json::from_slice(&body).unwrap_or_default();
    calls.lock().unwrap().push(Call {
        at: Instant::now(),
        method: method.clone(),
        path: path.clone(),
        user_agent,
        fault: fault.clone(),
    });
    let (status, retry_after, answer) = match fault {
        Some(Fault::Close) => return,
        Some(Fault::Status(status, retry_after)) => (
            status,
            retry_after,
            json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": status}),
        ),
        Some(Fault::Slow(d)) => {
            std::thread::sleep(d);
            answer_correctly(&method, &path, body, events)
        }
        Some(Fault::Reset) | None => answer_correctly(&method, &path, body, events),
    };
    let answer = answer.to_string();
    let retry = retry_after
        .map(|s| format!("retry-after: {s}\r\n"))
        .unwrap_or_default();
    respond_json(&mut tls, &format!("{status} X"), &retry, &answer);
}

/// What the API server does with a create or a series update: keeps the Event (409 for a name
/// it holds), updates its series (404 for one it does not hold).
fn answer_correctly(
    method: &str,
    path: &str,
    body: Value,
    events: &Mutex<BTreeMap<String, Value>>,
) -> (u16, Option<u64>, Value) {
    let mut events = events.lock().unwrap();
    match method {
        "POST" => {
            let name = body["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            if events.contains_key(&name) {
                return (409, None, json!({"kind": "Status", "code": 409}));
            }
            events.insert(name, body.clone());
            (201, None, body)
        }
        "PATCH" => {
            let name = path.rsplit('/').next().unwrap_or_default();
            match events.get_mut(name) {
                Some(e) => {
                    e["series"] = body["series"].clone();
                    (200, None, e.clone())
                }
                None => (404, None, json!({"kind": "Status", "code": 404})),
            }
        }
        _ => (405, None, json!({})),
    }
}

fn file_in(dir: &Path) -> PathBuf {
    dir.join("prestop.log")
}

#[test]
fn a_503_on_the_first_call_still_gives_every_failed_hook_its_event() {
    let dir = tempfile::tempdir().unwrap();
    let api = StandIn::start(
        dir.path(),
        vec![Fault::Status(503, None), Fault::Status(503, None)],
        Duration::ZERO,
    );
    let file = file_in(dir.path());
    let mut d = api.daemon(dir.path(), &file, &["--peers", "envoy,app"]);
    // Terminal escapes and a BEL in the output: the note carries them escaped.
    assert_eq!(
        hook(&file, "envoy", r"printf '\033[31mred\007\n'; exit 3").code(),
        Some(3)
    );
    assert_eq!(hook(&file, "app", "exit 4").code(), Some(4));
    d.expect(EVENT_SHOWS, "both Events", || {
        api.event_of("envoy").is_some() && api.event_of("app").is_some()
    });
    // A repeat is the app Event's series.
    assert_eq!(hook(&file, "app", "exit 4").code(), Some(4));
    d.expect(EVENT_SHOWS, "the app Event's series", || {
        api.event_of("app")
            .is_some_and(|e| e["series"]["count"] == 2)
    });
    d.terminate();
    d.wait_exit(Duration::from_secs(30));
    let events = d.summary()["events"].clone();
    assert_eq!(events["posted"], 3, "{events:#}");
    assert_eq!(events["not_posted"], 0, "{events:#}");
    let note = api.event_of("envoy").unwrap()["note"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(note.contains(r"\x1b[31mred\x07"), "{note:?}");
    assert!(
        !note.chars().any(|c| c.is_control() && c != '\n'),
        "{note:?}"
    );
    let calls = api.calls();
    assert_eq!(
        calls.len(),
        5,
        "two 503s, two creates, one update: {calls:#?}"
    );
    let shape: Vec<(&str, Option<Fault>)> = calls
        .iter()
        .map(|c| (c.method.as_str(), c.fault.clone()))
        .collect();
    let unavailable = Some(Fault::Status(503, None));
    assert_eq!(
        shape,
        [
            ("POST", unavailable.clone()),
            ("POST", unavailable),
            ("POST", None),
            ("POST", None),
            ("PATCH", None)
        ]
    );
    for c in &calls {
        assert!(
            c.path
                .starts_with("/apis/events.k8s.io/v1/namespaces/shop/events"),
            "{c:?}"
        );
        assert_eq!(c.user_agent.as_deref(), Some(USER_AGENT), "{c:?}");
    }
}

#[test]
fn resets_closes_throttling_slow_answers_and_server_errors_are_tried_again_until_the_event_is_posted()
 {
    let dir = tempfile::tempdir().unwrap();
    let plan = vec![
        Fault::Reset,
        Fault::Close,
        Fault::Status(429, Some(1)),
        Fault::Slow(SLOW),
        Fault::Status(500, None),
    ];
    let tries = plan.len() + 1;
    let api = StandIn::start(dir.path(), plan, Duration::ZERO);
    let file = file_in(dir.path());
    let mut d = api.daemon(dir.path(), &file, &["--peers", "envoy"]);
    assert_eq!(hook(&file, "envoy", "echo bye; exit 3").code(), Some(3));
    d.expect(EVENT_SHOWS, "the Event", || api.event_of("envoy").is_some());
    d.expect(EVENT_SHOWS, "every try", || api.calls().len() >= tries);
    let calls = api.calls();
    assert_eq!(calls.len(), tries, "{calls:#?}");
    // The try after the 429 waited for its Retry-After.
    let after_429 = calls[3].at.duration_since(calls[2].at);
    assert!(after_429 >= Duration::from_secs(1), "{after_429:?}");
    // The slow answer was not waited for past the call's deadline: tried again meanwhile.
    let after_slow = calls[4].at.duration_since(calls[3].at);
    assert!(after_slow < SLOW + Duration::from_secs(2), "{after_slow:?}");
    d.terminate();
    d.wait_exit(Duration::from_secs(30));
    let events = d.summary()["events"].clone();
    assert_eq!(events["posted"], 1, "{events:#}");
    assert_eq!(events["not_posted"], 0, "{events:#}");
    // One create landed: the slow answer's create may have been kept, its retry found the
    // name taken (409) and counted it posted.
    assert_eq!(api.events().len(), 1, "{:#?}", api.events());
}

#[test]
fn an_api_server_refusing_connections_for_two_seconds_still_gets_the_event() {
    let dir = tempfile::tempdir().unwrap();
    let api = StandIn::start(dir.path(), vec![], Duration::from_secs(2));
    let file = file_in(dir.path());
    let mut d = api.daemon(dir.path(), &file, &["--peers", "envoy"]);
    assert_eq!(hook(&file, "envoy", "exit 3").code(), Some(3));
    d.expect(EVENT_SHOWS, "the Event", || api.event_of("envoy").is_some());
    d.terminate();
    d.wait_exit(Duration::from_secs(30));
    assert_eq!(d.summary()["events"]["posted"], 1);
}

#[test]
fn a_403_ends_the_calls_at_once_warned_once_and_every_event_counted() {
    let dir = tempfile::tempdir().unwrap();
    let api = StandIn::start(dir.path(), vec![Fault::Status(403, None)], Duration::ZERO);
    let file = file_in(dir.path());
    let mut d = api.daemon(dir.path(), &file, &["--peers", "envoy,app"]);
    assert_eq!(hook(&file, "envoy", "exit 3").code(), Some(3));
    d.expect(EVENT_SHOWS, "the warning", || {
        d.stderr.contains("no more events this run")
    });
    assert_eq!(hook(&file, "app", "exit 4").code(), Some(4));
    let signalled = Instant::now();
    d.terminate();
    d.wait_exit(Duration::from_secs(30));
    assert!(
        signalled.elapsed() < Duration::from_secs(5),
        "{:?}",
        signalled.elapsed()
    );
    let events = d.summary()["events"].clone();
    assert_eq!(events["posted"], 0, "{events:#}");
    assert_eq!(events["not_posted"], 2, "{events:#}");
    assert!(
        events["error"].as_str().unwrap().contains("HTTP 403"),
        "{events:#}"
    );
    assert_eq!(api.calls().len(), 1, "{:#?}", api.calls());
    let warned = d.stderr.count(NOT_POSTED);
    assert_eq!(warned, 1, "{:#?}", d.stderr.lines());
}

#[test]
fn an_api_server_down_for_the_whole_grace_costs_the_grace_and_no_more() {
    let dir = tempfile::tempdir().unwrap();
    // Never listens within the test.
    let api = StandIn::start(dir.path(), vec![], Duration::from_secs(3600));
    let file = file_in(dir.path());
    let mut d = api.daemon(dir.path(), &file, &["--peers", "envoy", "--grace", "3s"]);
    assert_eq!(hook(&file, "envoy", "exit 3").code(), Some(3));
    let signalled = Instant::now();
    d.terminate();
    d.wait_exit(Duration::from_secs(30));
    let took = signalled.elapsed();
    assert!(took < Duration::from_millis(3000 + 1200), "{took:?}");
    let events = d.summary()["events"].clone();
    assert_eq!(events["posted"], 0, "{events:#}");
    let warning = not_posted_warning(&d);
    assert!(warning.contains("tries"), "{warning}");
}

#[test]
fn two_hundred_fifty_six_made_up_runs_leave_the_real_containers_event_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let api = StandIn::start(dir.path(), vec![], Duration::ZERO);
    let file = file_in(dir.path());
    let mut d = api.daemon(dir.path(), &file, &["--peers", "app"]);
    // What `hooklog hook -- false` writes, for names a peer makes up, eight at a time.
    let made_up: Vec<_> = (0..8)
        .map(|t| {
            let file = file.clone();
            std::thread::spawn(move || {
                for i in 0..32 {
                    let name = format!("made-up-{}", (t * 32 + i) % 40);
                    hook(&file, &name, "exit 1");
                }
            })
        })
        .collect();
    for t in made_up {
        t.join().unwrap();
    }
    assert_eq!(hook(&file, "app", "exit 4").code(), Some(4));
    d.expect(EVENT_SHOWS, "the app container's Event", || {
        api.event_of("app").is_some()
    });
    d.terminate();
    d.wait_exit(Duration::from_secs(30));
    let events = d.summary()["events"].clone();
    // The made-up names shared 64 Events (src/events/budget.rs `SHARED`), the rest counted as
    // not posted; the app container's Event is its own.
    assert_eq!(events["posted"], 64 + 1, "{events:#}");
    assert_eq!(events["not_posted"], 256 - 64, "{events:#}");
    assert!(
        wait_until(Duration::from_secs(1), || api.event_of("app").is_some()),
        "{events:#}"
    );
}
