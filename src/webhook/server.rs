//! (the control plane) HTTPS: accepts connections, bounds each one's handshake, headers and body, and routes
//! `POST /mutate`, `POST /mutate/namespace-enabled`, `GET /healthz` and `GET /readyz`. Every
//! admission answer is a 200 with an AdmissionReview (never a 500: under `failurePolicy: Fail`
//! an error blocks the deploy).

use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

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
/// Request headers, from their first byte on; and, on a new connection, from the handshake to
/// the first request's first byte (the API server connects to send one).
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
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
/// Writing an answer: a client that stops reading (its window full) has this long before its
/// connection is closed, as net/http's `WriteTimeout` bounds it; the API server reads an answer
/// at once.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// The slowest a connection may send what it is sending (its TLS handshake, a request's
/// headers and body), after [`PACE_GRACE`]: a request of `n` bytes must be in within
/// `PACE_GRACE + n / MIN_RATE`, its first byte on (a time to complete, not an idle timer that a
/// trickle keeps alive). The API server sends a review at network speed; 260 connections
/// trickling 3 bytes a second held every slot (issue 26).
pub const MIN_RATE: u64 = 1024;
/// What a sender has before [`MIN_RATE`] counts: one round trip and a scheduler's hiccup.
pub const PACE_GRACE: Duration = Duration::from_secs(1);
/// How often a connection's pace is looked at.
const PACE_CHECK: Duration = Duration::from_millis(100);
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

/// The idle connections kept ([`MAX_IDLE_CONNECTIONS`]), counted across connections.
#[derive(Debug)]
pub struct IdleSlots {
    taken: std::sync::atomic::AtomicUsize,
    max: usize,
}

impl IdleSlots {
    pub fn new(max: usize) -> IdleSlots {
        IdleSlots {
            taken: std::sync::atomic::AtomicUsize::new(0),
            max,
        }
    }

    /// Takes a slot if one is free.
    fn take(&self) -> bool {
        use std::sync::atomic::Ordering;
        self.taken
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < self.max).then_some(n + 1)
            })
            .is_ok()
    }

    fn give_back(&self) {
        use std::sync::atomic::Ordering;
        // Only a holder gives back: never below 0.
        let _ = self
            .taken
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1));
    }
}

/// How fast a connection sends: the bytes of what it is sending now and since when; and, idle
/// (after the handshake or an answer, before the next request's first byte), since when and for
/// how long at most ([`HEADER_TIMEOUT`] before the first request, the idle timeout after one).
#[derive(Debug)]
pub struct Pace {
    state: std::sync::Mutex<PaceState>,
    /// Where an idle connection holds its slot.
    slots: Arc<IdleSlots>,
    /// How long a connection may stay idle between requests (`--idle-timeout`).
    idle_timeout: Duration,
}

#[derive(Debug)]
struct PaceState {
    /// When the bytes now arriving began (the accept, then each request's first byte).
    since: Option<Instant>,
    /// Bytes of it read off the wire (the handshake's, then the TLS records').
    wire: u64,
    /// Bytes of it read out of TLS: a request's bytes that came in with the handshake are
    /// already in rustls's buffer when it ends, and are only seen here.
    plain: u64,
    /// A request is being answered: the answer bounds its own wait ([`Pace::deadline`]).
    answering: bool,
    /// Idle since then, for at most that long.
    idle: Option<(Instant, Duration)>,
    /// This connection holds one of the [`IdleSlots`].
    holds_slot: bool,
    /// A write has waited on the client since then ([`WRITE_TIMEOUT`]).
    write_blocked: Option<Instant>,
}

impl Drop for Pace {
    fn drop(&mut self) {
        if self.with(|s| std::mem::take(&mut s.holds_slot)) {
            self.slots.give_back();
        }
    }
}

impl Pace {
    /// A connection just accepted: its handshake's clock runs.
    fn new(slots: Arc<IdleSlots>, idle_timeout: Duration) -> Pace {
        Pace {
            state: std::sync::Mutex::new(PaceState {
                since: Some(Instant::now()),
                wire: 0,
                plain: 0,
                answering: false,
                idle: None,
                holds_slot: false,
                write_blocked: None,
            }),
            slots,
            idle_timeout,
        }
    }

    fn with<T>(&self, f: impl FnOnce(&mut PaceState) -> T) -> T {
        let mut s = self
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        f(&mut s)
    }

    fn read(&self, layer: Layer, n: usize) {
        let gave_back = self.with(|s| {
            s.since.get_or_insert_with(Instant::now);
            let count = match layer {
                Layer::Wire => &mut s.wire,
                Layer::Plain => &mut s.plain,
            };
            *count = count.saturating_add(n as u64);
            s.idle = None;
            std::mem::take(&mut s.holds_slot)
        });
        if gave_back {
            self.slots.give_back();
        }
    }

    /// The handshake is done: idle until the first request's first byte, for at most
    /// [`HEADER_TIMEOUT`].
    fn handshaken(&self) {
        self.with(|s| {
            s.since = None;
            s.wire = 0;
            s.plain = 0;
            s.answering = false;
            s.idle = Some((Instant::now(), HEADER_TIMEOUT));
        });
    }

    /// A request is answered: idle until the next request's first byte, for at most the idle
    /// timeout, if `keep` (the client keeps the connection) and an idle slot is free. Returns
    /// whether the connection is kept: if not, the answer must close it.
    fn answered(&self, keep: bool) -> bool {
        let kept = keep && self.slots.take();
        self.with(|s| {
            s.since = None;
            s.wire = 0;
            s.plain = 0;
            s.answering = false;
            s.idle = kept.then(|| (Instant::now(), self.idle_timeout));
            s.holds_slot = kept;
        });
        kept
    }

    /// A write could not go on (`blocked`: the client's window is full) or went on.
    fn wrote(&self, blocked: bool) {
        self.with(|s| {
            if blocked {
                s.write_blocked.get_or_insert_with(Instant::now);
            } else {
                s.write_blocked = None;
            }
        });
    }

    /// A request's head is in: its answer bounds the wait for its body. Its clock runs from its
    /// first byte, or from now if none was read here (all of it was in a buffer above: hyper's,
    /// after an earlier request).
    fn answering(&self) {
        self.with(|s| {
            s.answering = true;
            s.since.get_or_insert_with(Instant::now);
        });
    }

    /// When what is arriving must be in, at [`MIN_RATE`] of the more bytes either layer saw;
    /// `None` when idle.
    fn deadline(&self) -> Option<Instant> {
        self.with(|s| {
            let since = s.since?;
            let bytes = s.wire.max(s.plain);
            Some(since + PACE_GRACE + Duration::from_millis(bytes.saturating_mul(1000) / MIN_RATE))
        })
    }

    /// Too slow: a write waiting on the client past [`WRITE_TIMEOUT`]; or, outside an answer
    /// (an answer reads its body against [`Pace::deadline`]), the bytes arriving below
    /// [`MIN_RATE`], a request's headers not in within [`HEADER_TIMEOUT`], or idle past its
    /// bound.
    fn too_slow(&self) -> bool {
        let now = Instant::now();
        let (answering, headers_late, idle_over, write_late) = self.with(|s| {
            (
                s.answering,
                s.since.is_some_and(|t| now > t + HEADER_TIMEOUT),
                s.idle.is_some_and(|(t, bound)| now > t + bound),
                s.write_blocked.is_some_and(|t| now > t + WRITE_TIMEOUT),
            )
        });
        write_late
            || (!answering
                && (headers_late || idle_over || self.deadline().is_some_and(|d| now > d)))
    }

    /// Resolves once the connection is too slow.
    async fn slow(&self) {
        loop {
            if self.too_slow() {
                return;
            }
            tokio::time::sleep(PACE_CHECK).await;
        }
    }

    /// Resolves once what is arriving (a body, in an answer) is past its deadline.
    async fn late(&self) {
        loop {
            if self.deadline().is_some_and(|d| Instant::now() > d) {
                return;
            }
            tokio::time::sleep(PACE_CHECK).await;
        }
    }
}

/// Where a [`Paced`] stream sits.
#[derive(Clone, Copy, Debug)]
enum Layer {
    /// The TCP stream, under TLS.
    Wire,
    /// The TLS stream, what hyper reads.
    Plain,
}

/// A stream whose reads feed its connection's [`Pace`].
struct Paced<S> {
    inner: S,
    pace: Arc<Pace>,
    layer: Layer,
}

impl<S> Paced<S> {
    /// A write on the wire waited on the client (or went on): only the TCP stream's writes
    /// count, since TLS above buffers what the wire has not taken.
    fn wrote(&self, blocked: bool) {
        if let Layer::Wire = self.layer {
            self.pace.wrote(blocked);
        }
    }
}

impl<S: tokio::io::AsyncRead + Unpin> tokio::io::AsyncRead for Paced<S> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let r = std::pin::Pin::new(&mut self.inner).poll_read(cx, buf);
        let n = buf.filled().len() - before;
        if n > 0 {
            self.pace.read(self.layer, n);
        }
        r
    }
}

impl<S: tokio::io::AsyncWrite + Unpin> tokio::io::AsyncWrite for Paced<S> {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        let r = std::pin::Pin::new(&mut self.inner).poll_write(cx, buf);
        self.wrote(r.is_pending());
        r
    }
    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let r = std::pin::Pin::new(&mut self.inner).poll_flush(cx);
        self.wrote(r.is_pending());
        r
    }
    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let r = std::pin::Pin::new(&mut self.inner).poll_shutdown(cx);
        self.wrote(r.is_pending());
        r
    }
}

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
    loop {
        // One slot free at least before the next accept (more connections wait in the backlog):
        // a connection's own, or one of the probes'.
        if slots.available_permits() == 0 && probe_slots.available_permits() == 0 {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = slots.acquire() => {}
                _ = probe_slots.acquire() => {}
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
        let (permit, probes_only) = match slots.clone().try_acquire_owned() {
            Ok(p) => (p, false),
            Err(_) => match probe_slots.clone().try_acquire_owned() {
                Ok(p) => (p, true),
                // Taken since the check above: given up, as a full backlog would.
                Err(_) => continue,
            },
        };
        let acceptor = acceptor.clone();
        let shared = shared.clone();
        let stop = stop.clone();
        tracker.spawn(async move {
            let _permit = permit;
            let pace = Arc::new(Pace::new(shared.idle.clone(), shared.idle_timeout));
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
            };
            pace.handshaken();
            let watched = pace.clone();
            let tls = Paced {
                inner: tls,
                pace: pace.clone(),
                layer: Layer::Plain,
            };
            let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                let (shared, pace) = (shared.clone(), pace.clone());
                async move {
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
                _ = stop.cancelled() => {
                    conn.as_mut().graceful_shutdown();
                    if let Err(e) = conn.await {
                        tracing::debug!(%peer, error = %e, "connection ended");
                    }
                }
            }
        });
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
