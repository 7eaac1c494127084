//! (the control plane) HTTPS: accepts connections, bounds each one's handshake, headers and body, and routes
//! `POST /mutate`, `POST /mutate/namespace-enabled`, `GET /healthz` and `GET /readyz`. Every
//! admission answer is a 200 with an AdmissionReview (never a 500: under `failurePolicy: Fail`
//! an error blocks the deploy).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::connections::{Seat, Table};
pub use super::pace::{HEADER_TIMEOUT, IdleSlots, MIN_RATE, PACE_GRACE, WRITE_TIMEOUT};
use super::pace::{Layer, PACE_CHECK, Pace, Paced};
use super::review::{self, Policy, Scope, Verdict};

/// Largest review read. The API server refuses request bodies over 3 MiB
/// (`--max-request-body-bytes`, k8s.io/apiserver's default 3 * 1024 * 1024), so a pod's review
/// (the pod, no old object on CREATE) fits with room; a larger body is not read further.
pub const MAX_BODY: usize = 4 * 1024 * 1024;
/// Most bytes of an oversized body read (and dropped) before the connection is given up.
pub const MAX_DISCARD: usize = 4 * MAX_BODY;
/// The whole TLS handshake. The API server's webhook timeout is 10 s here (`timeoutSeconds`):
/// a handshake slower than that is answered by nobody.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the API server keeps an idle connection to a webhook for its next review: net/http's
/// `DefaultTransport.IdleConnTimeout`, 90 s, which k8s.io/apimachinery's `SetTransportDefaults`
/// keeps for the webhook client.
pub const CLIENT_IDLE_TIMEOUT: Duration = Duration::from_secs(90);
/// What the webhook waits beyond [`CLIENT_IDLE_TIMEOUT`] before it closes an idle connection
/// itself: the client gives it up first, so a review is never sent on a connection the webhook
/// is closing (a POST is not retried: the API server would fail or admit by `failurePolicy`).
pub const IDLE_MARGIN: Duration = Duration::from_secs(5);
/// `webhook --idle-timeout`'s default: an idle keep-alive connection's own bound, between an
/// answer and the next request's first byte (it was the 10 s [`HEADER_TIMEOUT`], so the webhook
/// closed connections the API server still meant to use).
pub const IDLE_TIMEOUT: Duration =
    Duration::from_secs(CLIENT_IDLE_TIMEOUT.as_secs() + IDLE_MARGIN.as_secs());
/// Idle keep-alive connections kept at once: client-go keeps 25 idle connections per host
/// (`idleConnsPerHost`, k8s.io/client-go/transport/cache.go), so this holds four API servers'
/// worth; past it an answer says `Connection: close` and the connection ends after it, so idle
/// ones never take more than this of [`MAX_CONNECTIONS`].
pub const MAX_IDLE_CONNECTIONS: usize = 100;
/// The body, once the headers are in: the same 10 s the API server waits in all.
pub const BODY_TIMEOUT: Duration = Duration::from_secs(10);
/// Connections served at once; the API server keeps a few open per replica, more wait.
pub const MAX_CONNECTIONS: usize = 256;
/// Connections kept beyond [`MAX_CONNECTIONS`] for the probes (`GET /healthz`, `/readyz`): the
/// kubelet's probes are answered whatever the review connections do; any other request on one
/// of these is answered 503 and its connection closed.
pub const PROBE_CONNECTIONS: usize = 8;
/// Bytes of bodies being read at once, in all connections: two of the largest (the API server
/// sends pod reviews of a few KB, so hundreds fit). A body waits for room before it is read.
pub const BODY_BUDGET: usize = 2 * MAX_BODY;
/// Memory the reviews in flight may take, as [`review_cost`] estimates it: with the bodies'
/// [`BODY_BUDGET`] and the idle process (about 10 MiB in release, 22 MiB in a debug build), the
/// webhook stays under its Deployment's limit of 64 MiB (k8s/webhook/webhook.yaml). A review
/// that would take more alone is admitted unchanged, with a warning, and never parsed.
pub const REVIEW_BUDGET: usize = 24 << 20;
/// Bytes per byte of body that a review takes besides its JSON values (the body, the strings
/// read out of it, the patch and the answer): measured 4.3 for a 4 MiB pod that is one long
/// annotation (tests/webhook_limits.rs), rounded up.
const COST_PER_BODY_BYTE: usize = 5;
/// Bytes per JSON value, member or element (each `{`, `[`, `:` and `,`): serde_json's `Value`
/// is 80 bytes with `preserve_order`, an object member 112 more, and the review holds the pod
/// about twice (the object and what inject makes of it). Measured 410 for a pod of 100,000 env
/// entries and 111 for 1.4 million empty arrays (tests/webhook_limits.rs), rounded up.
const COST_PER_VALUE: usize = 512;
/// The budgets count in KiB, so that a permit count fits the semaphore for any size.
const KIB: usize = 1024;

/// What every connection shares.
pub struct Shared {
    pub policy: Policy,
    /// KiB of bodies being read ([`BODY_BUDGET`]).
    pub bodies: Semaphore,
    /// KiB of memory the reviews in flight take ([`REVIEW_BUDGET`]).
    pub reviews: Semaphore,
    /// Reviews answered, and the time spent on them (the webhook's own share of admission
    /// latency), logged at shutdown.
    pub stats: std::sync::Mutex<Stats>,
    /// The idle connections kept ([`MAX_IDLE_CONNECTIONS`]).
    pub idle: Arc<IdleSlots>,
    /// How long an idle connection is kept (`--idle-timeout`, [`IDLE_TIMEOUT`]).
    pub idle_timeout: Duration,
}

/// Counters for the log.
#[derive(Debug, Default)]
pub struct Stats {
    pub reviews: u64,
    pub injected: u64,
    pub total: Duration,
    pub max: Duration,
}

/// Serves until `stop`, then lets connections in flight finish (the caller bounds that wait).
pub async fn serve(
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    shared: Arc<Shared>,
    stop: CancellationToken,
    tracker: &TaskTracker,
) {
    let acceptor = TlsAcceptor::from(tls);
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let probe_slots = Arc::new(Semaphore::new(PROBE_CONNECTIONS));
    let table = Arc::new(Table::default());
    loop {
        // Room before the next accept (more connections wait in the backlog): a free slot, a
        // connection that may be evicted for the newcomer, or one of the probes' slots.
        if slots.available_permits() == 0
            && probe_slots.available_permits() == 0
            && !table.evictable()
        {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = slots.acquire() => {}
                _ = probe_slots.acquire() => {}
                _ = tokio::time::sleep(PACE_CHECK) => continue,
            }
        }
        let (tcp, peer) = tokio::select! {
            _ = stop.cancelled() => return,
            r = listener.accept() => match r {
                Ok(c) => c,
                Err(e) => {
                    // EMFILE and the like: wait a moment rather than spin.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        // Taken since the check above: given up, as a full backlog would.
        let Some((admit, probes_only)) = admit(&slots, &probe_slots, &table) else {
            continue;
        };
        let acceptor = acceptor.clone();
        let shared = shared.clone();
        let stop = stop.clone();
        let table = table.clone();
        tracker.spawn(async move {
            let Some(_permit) = admit.slot().await else {
                tracing::debug!(%peer, "no slot came free after an eviction");
                return;
            };
            serve_connection(tcp, peer, probes_only, &acceptor, shared, &stop, &table).await;
        });
    }
}

/// A newcomer's slot: a free one, else an evicted connection's (the one that does least gives
/// up its own), else a probes' one (`true`: its connection answers probes only); `None` when
/// every one is taken.
fn admit(
    slots: &Arc<Semaphore>,
    probe_slots: &Arc<Semaphore>,
    table: &Table,
) -> Option<(Admit, bool)> {
    match slots.clone().try_acquire_owned() {
        Ok(p) => Some((Admit::Now(p), false)),
        Err(_) if table.evict_one() => Some((Admit::Evicted(slots.clone()), false)),
        Err(_) => match probe_slots.clone().try_acquire_owned() {
            Ok(p) => Some((Admit::Now(p), true)),
            Err(_) => None,
        },
    }
}

/// Serves one connection in its slot: the TLS handshake, then its requests, until it ends, is
/// too slow, is evicted, or the webhook stops (which lets the request in flight finish).
async fn serve_connection(
    tcp: TcpStream,
    peer: SocketAddr,
    probes_only: bool,
    acceptor: &TlsAcceptor,
    shared: Arc<Shared>,
    stop: &CancellationToken,
    table: &Arc<Table>,
) {
    let pace = Arc::new(Pace::new(shared.idle.clone(), shared.idle_timeout));
    // Probes' connections are never evicted: they are closed after one answer.
    let seat = (!probes_only).then(|| table.seat(pace.clone()));
    let tcp = Paced {
        inner: tcp,
        pace: pace.clone(),
        layer: Layer::Wire,
    };
    let handshake = tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp));
    let tls = tokio::select! {
        r = handshake => match r {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => {
                tracing::debug!(%peer, error = %e, "tls handshake failed");
                return;
            }
            Err(_) => {
                tracing::debug!(%peer, "tls handshake timed out");
                return;
            }
        },
        _ = pace.slow() => {
            tracing::debug!(%peer, min_rate = MIN_RATE, "tls handshake too slow");
            return;
        }
        _ = evicted(&seat) => {
            tracing::debug!(%peer, "evicted in its handshake: every slot was taken");
            return;
        }
    };
    pace.handshaken();
    let watched = pace.clone();
    let tls = Paced {
        inner: tls,
        pace: pace.clone(),
        layer: Layer::Plain,
    };
    let service = hyper::service::service_fn(move |req: Request<Incoming>| {
        answer(req, shared.clone(), pace.clone(), probes_only)
    });
    // The headers' and the idle connection's bounds are the pace's ([`Pace::too_slow`]):
    // hyper's own header timeout would run through the idle time too.
    let conn = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(None)
        .serve_connection(TokioIo::new(tls), service);
    tokio::pin!(conn);
    tokio::select! {
        r = conn.as_mut() => if let Err(e) = r {
            tracing::debug!(%peer, error = %e, "connection ended");
        },
        _ = watched.slow() => {
            tracing::debug!(%peer, min_rate = MIN_RATE, "request too slow, connection closed");
        },
        _ = evicted(&seat) => {
            tracing::debug!(%peer, "evicted: every slot was taken");
        },
        _ = stop.cancelled() => {
            conn.as_mut().graceful_shutdown();
            if let Err(e) = conn.await {
                tracing::debug!(%peer, error = %e, "connection ended");
            }
        }
    }
}

/// Answers one request: on a probes' connection only a probe (anything else a 503), and with
/// `Connection: close` when the connection is not kept for another.
async fn answer(
    req: Request<Incoming>,
    shared: Arc<Shared>,
    pace: Arc<Pace>,
    probes_only: bool,
) -> Result<Response<Full<Bytes>>, Infallible> {
    pace.answering();
    let keep = client_keeps(&req) && !probes_only;
    let mut r = if probes_only && !is_probe(&req) {
        Ok(text(
            StatusCode::SERVICE_UNAVAILABLE,
            "every connection slot is taken; try again\n",
        ))
    } else {
        handle(req, shared, &pace).await
    };
    if !pace.answered(keep)
        && let Ok(answer) = &mut r
    {
        answer.headers_mut().insert(
            hyper::header::CONNECTION,
            hyper::header::HeaderValue::from_static("close"),
        );
    }
    r
}

/// How a connection comes by its slot.
enum Admit {
    /// A free slot, taken.
    Now(tokio::sync::OwnedSemaphorePermit),
    /// The slot of a connection just evicted, once its task ends.
    Evicted(Arc<Semaphore>),
}

/// How long a newcomer waits for an evicted connection's slot: its task ends at its next poll.
const EVICTION_WAIT: Duration = Duration::from_secs(1);

impl Admit {
    async fn slot(self) -> Option<tokio::sync::OwnedSemaphorePermit> {
        match self {
            Admit::Now(p) => Some(p),
            Admit::Evicted(slots) => tokio::time::timeout(EVICTION_WAIT, slots.acquire_owned())
                .await
                .ok()?
                .ok(),
        }
    }
}

/// Resolves once the connection is evicted (never, for a probe's).
async fn evicted(seat: &Option<Seat>) {
    match seat {
        Some(s) => s.evicted.cancelled().await,
        None => std::future::pending().await,
    }
}

/// Whether the client means to send another request on this connection: HTTP/1.1 without
/// `Connection: close` (HTTP/1.0 only with `Connection: keep-alive`).
fn client_keeps(req: &Request<Incoming>) -> bool {
    let says = |word: &str| {
        req.headers()
            .get_all(hyper::header::CONNECTION)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .any(|t| t.trim().eq_ignore_ascii_case(word))
    };
    if req.version() == hyper::Version::HTTP_10 {
        says("keep-alive")
    } else {
        !says("close")
    }
}

/// `GET /healthz` or `GET /readyz`: the kubelet's probes.
fn is_probe(req: &Request<Incoming>) -> bool {
    req.method() == Method::GET && matches!(req.uri().path(), "/healthz" | "/readyz")
}

fn text(status: StatusCode, body: &'static str) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from_static(body.as_bytes())));
    *r.status_mut() = status;
    r
}

async fn handle(
    req: Request<Incoming>,
    shared: Arc<Shared>,
    pace: &Pace,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let scope = match (req.method(), req.uri().path()) {
        (&Method::GET, "/healthz" | "/readyz") => return Ok(text(StatusCode::OK, "ok\n")),
        (&Method::POST, "/mutate") => Scope::Other,
        (&Method::POST, "/mutate/namespace-enabled") => Scope::NamespaceEnabled,
        _ => return Ok(text(StatusCode::NOT_FOUND, "not found\n")),
    };
    let start = Instant::now();
    // The body's room in the budget is taken as its bytes arrive, never on its declared length
    // (8 connections declaring 4 MiB and sending 10 KiB/s starved every real review: issue
    // 36), and held until its review has room of its own (the review's cost counts the body
    // again): bodies read and waiting can never pile up past the budget.
    let mut reading = Reading::default();
    let read = tokio::time::timeout(
        BODY_TIMEOUT,
        read_body(req.into_body(), &shared.bodies, &mut reading),
    );
    // The body arrives at MIN_RATE or is given up (the request's clock started at its first
    // byte); the answer then closes the connection, with the uid if its bytes came.
    let body = tokio::select! {
        b = read => b.map_err(|_| format!("body not read within {BODY_TIMEOUT:?}")),
        _ = pace.late() => Err(format!("body slower than {MIN_RATE} bytes a second")),
    };
    let slow = body.is_err();
    pace.body_in();
    let room = reading.room.take();
    let reviewed = match body {
        Ok(Ok(())) => bounded_review(&reading.kept, scope, &shared, room).await,
        Ok(Err(why)) | Err(why) => review::invalid(
            "admission.k8s.io/v1",
            review::uid_in_prefix(&reading.kept).unwrap_or_default(),
            why,
        ),
    };
    let took = start.elapsed();
    match &reviewed.verdict {
        Verdict::Injected => tracing::info!(pod = %reviewed.object, ?took, "injected"),
        Verdict::Skipped(why) => {
            tracing::info!(pod = %reviewed.object, reason = %why, "InjectionSkipped")
        }
        Verdict::NotSelected(why) => {
            tracing::debug!(object = %reviewed.object, reason = why, "not selected")
        }
        Verdict::Invalid(why) => tracing::warn!(reason = %why, "bad review, admitted unchanged"),
    }
    if let Ok(mut s) = shared.stats.lock() {
        s.reviews += 1;
        s.injected += u64::from(reviewed.verdict == Verdict::Injected);
        s.total += took;
        s.max = s.max.max(took);
    }
    let mut r = Response::new(Full::new(Bytes::from(reviewed.response.to_string())));
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    if slow {
        r.headers_mut().insert(
            hyper::header::CONNECTION,
            hyper::header::HeaderValue::from_static("close"),
        );
    }
    Ok(r)
}

/// Waits for `bytes` of room in `budget` (counted in KiB, at least one).
async fn acquire(budget: &Semaphore, bytes: usize) -> Option<tokio::sync::SemaphorePermit<'_>> {
    let kib = u32::try_from(bytes.div_ceil(KIB).max(1)).unwrap_or(u32::MAX);
    budget.acquire_many(kib).await.ok()
}

/// Reviews `body` once its estimated cost fits in [`REVIEW_BUDGET`] (waiting for the reviews
/// in flight to make room); a body that alone costs more is admitted unchanged, unparsed.
async fn bounded_review(
    body: &[u8],
    scope: Scope,
    shared: &Shared,
    body_room: Option<tokio::sync::SemaphorePermit<'_>>,
) -> review::Reviewed {
    let cost = review_cost(body);
    if cost > REVIEW_BUDGET {
        return review::invalid(
            "admission.k8s.io/v1",
            review::uid_in_prefix(body).unwrap_or_default(),
            format!(
                "review too large to read: about {} MiB of memory for {} bytes, more than the {} MiB a review may take",
                cost >> 20,
                body.len(),
                REVIEW_BUDGET >> 20
            ),
        );
    }
    let _room = acquire(&shared.reviews, cost).await;
    drop(body_room);
    isolated(body, scope, &shared.policy)
}

/// [`review::review`], and if it panics (a bug hooklog's tests did not find), the answer every
/// failed review gets: allowed, unpatched, with its uid and a warning. The connection and the
/// process go on serving (the control plane's build unwinds: Cargo.toml's `[profile.control]`),
/// as Go's net/http recovers a handler's panic.
pub fn isolated(body: &[u8], scope: Scope, policy: &Policy) -> review::Reviewed {
    let reviewed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        review::review(body, scope, policy)
    }));
    reviewed.unwrap_or_else(|panic| {
        let why = panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_default();
        tracing::error!(panic = %why, "review failed (a bug in hooklog), admitted unchanged");
        review::invalid(
            review::api_version_of(body),
            review::uid_of(body).unwrap_or_default(),
            "hooklog failed on this review (a bug, in its log)".into(),
        )
    })
}

/// The memory a review of `body` takes at most, estimated from a scan of its JSON (no
/// allocation): [`COST_PER_BODY_BYTE`] per byte and [`COST_PER_VALUE`] per value.
pub fn review_cost(body: &[u8]) -> usize {
    let mut values = 1usize;
    let mut in_string = false;
    let mut escaped = false;
    for &b in body {
        if in_string {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'{' | b'[' | b':' | b',' => values += 1,
            _ => {}
        }
    }
    body.len()
        .saturating_mul(COST_PER_BODY_BYTE)
        .saturating_add(values.saturating_mul(COST_PER_VALUE))
}

/// A body being read: its bytes (the first 4 KiB only, for the uid, once it is over
/// [`MAX_BODY`]) and the room they hold in the bodies' budget.
#[derive(Default)]
struct Reading<'a> {
    kept: Vec<u8>,
    room: Option<tokio::sync::SemaphorePermit<'a>>,
    /// KiB of room held.
    held: u32,
}

/// Reads the body into `into`, at most [`MAX_BODY`] bytes, taking room in `budget` for each
/// KiB as it arrives; or why it stopped. The rest of a larger body is read and dropped, up to
/// [`MAX_DISCARD`], so that the answer reaches a client still writing (closing on unread bytes
/// resets the connection, answer and all).
async fn read_body<'a>(
    mut body: Incoming,
    budget: &'a Semaphore,
    into: &mut Reading<'a>,
) -> Result<(), String> {
    let mut total = 0usize;
    while let Some(frame) = body.frame().await {
        let data = match frame.map(|f| f.into_data()) {
            Ok(Ok(data)) => data,
            Ok(Err(_)) => continue,
            Err(e) => return Err(format!("body not read: {e}")),
        };
        total = total.saturating_add(data.len());
        if total <= MAX_BODY {
            let kib = u32::try_from(total.div_ceil(KIB)).unwrap_or(u32::MAX);
            if kib > into.held {
                let more = budget
                    .acquire_many(kib - into.held)
                    .await
                    .map_err(|e| format!("body not read: {e}"))?;
                into.held = kib;
                match &mut into.room {
                    Some(room) => room.merge(more),
                    None => into.room = Some(more),
                }
            }
            into.kept.extend_from_slice(&data);
        } else {
            into.kept.truncate(4096);
            into.kept.shrink_to_fit();
            drop(into.room.take());
            into.held = 0;
            if total > MAX_DISCARD {
                break;
            }
        }
    }
    if total > MAX_BODY {
        return Err(format!("body larger than {MAX_BODY} bytes"));
    }
    Ok(())
}

#[cfg(test)]
mod idle_tests {
    use super::*;

    #[test]
    fn the_idle_timeout_flag_defaults_to_the_constant_and_outlasts_the_api_servers() {
        use clap::Parser;
        let cli = crate::cli::Cli::try_parse_from(["hooklog", "webhook", "--image", "i:1"])
            .expect("parses");
        let crate::cli::Command::Webhook(args) = cli.command else {
            panic!("not webhook");
        };
        assert_eq!(args.idle_timeout, IDLE_TIMEOUT);
        const {
            assert!(IDLE_TIMEOUT.as_secs() > CLIENT_IDLE_TIMEOUT.as_secs());
            assert!(IDLE_TIMEOUT.as_secs() > HEADER_TIMEOUT.as_secs());
            assert!(MAX_IDLE_CONNECTIONS < MAX_CONNECTIONS);
        }
    }

    #[test]
    fn idle_slots_are_never_more_than_their_cap_nor_fewer_than_none() {
        let slots = IdleSlots::new(2);
        assert!(slots.take() && slots.take() && !slots.take());
        slots.give_back();
        assert!(slots.take() && !slots.take());
        for _ in 0..5 {
            slots.give_back();
        }
        assert!(slots.take() && slots.take() && !slots.take());
        let none = IdleSlots::new(0);
        assert!(!none.take());
    }
}
