//! (the control plane) A webhook connection's pace: how fast it sends what it is sending (its handshake, a
//! request's headers and body), how long it has been idle, whether its client reads its answer;
//! and so when it is too slow to keep, and which connection goes first when every slot is taken
//! ([`Pace::eviction_rank`]).

use std::sync::Arc;
use std::time::{Duration, Instant};

/// Request headers, from their first byte on; and, on a new connection, from the handshake to
/// the first request's first byte (the API server connects to send one).
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
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
pub const PACE_CHECK: Duration = Duration::from_millis(100);

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
    pub fn take(&self) -> bool {
        use std::sync::atomic::Ordering;
        self.taken
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < self.max).then_some(n + 1)
            })
            .is_ok()
    }

    pub fn give_back(&self) {
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
    /// The request being answered is in, body and all: its review is under way.
    body_in: bool,
    /// A request has been answered on this connection.
    served: bool,
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
    pub fn new(slots: Arc<IdleSlots>, idle_timeout: Duration) -> Pace {
        Pace {
            state: std::sync::Mutex::new(PaceState {
                since: Some(Instant::now()),
                wire: 0,
                plain: 0,
                answering: false,
                idle: None,
                holds_slot: false,
                write_blocked: None,
                body_in: false,
                served: false,
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

    pub fn read(&self, layer: Layer, n: usize) {
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
    pub fn handshaken(&self) {
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
    pub fn answered(&self, keep: bool) -> bool {
        let kept = keep && self.slots.take();
        self.with(|s| {
            s.since = None;
            s.wire = 0;
            s.plain = 0;
            s.answering = false;
            s.idle = kept.then(|| (Instant::now(), self.idle_timeout));
            s.holds_slot = kept;
            s.body_in = false;
            s.served = true;
        });
        kept
    }

    /// A write could not go on (`blocked`: the client's window is full) or went on.
    pub fn wrote(&self, blocked: bool) {
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
    pub fn answering(&self) {
        self.with(|s| {
            s.answering = true;
            s.since.get_or_insert_with(Instant::now);
        });
    }

    /// The request being answered is in, body and all: from now on the connection holds a review
    /// under way, and is never evicted until it is answered.
    pub fn body_in(&self) {
        self.with(|s| s.body_in = true);
    }

    /// Where this connection stands in the queue for eviction when every slot is taken: lower
    /// goes first; `None` never goes (a review under way, or an answer being written to a
    /// client that reads it). Within a stage, the connection that has waited longest (or, while
    /// bytes arrive, the slowest sender) goes first.
    pub fn eviction_rank(&self, now: Instant) -> Option<(Stage, u64)> {
        /// Older is lower.
        fn age(now: Instant, since: Instant) -> u64 {
            let micros = now.saturating_duration_since(since).as_micros();
            u64::MAX - u64::try_from(micros).unwrap_or(u64::MAX)
        }
        self.with(|s| {
            if let Some(t) = s.write_blocked {
                return Some((Stage::Unread, age(now, t)));
            }
            if s.answering && s.body_in {
                return None;
            }
            if let Some((t, _)) = s.idle {
                let stage = if s.served { Stage::Kept } else { Stage::Unused };
                return Some((stage, age(now, t)));
            }
            // Bytes arriving (a handshake, a request's head or body): bytes per second so far.
            let since = s.since?;
            let micros = now.saturating_duration_since(since).as_micros().max(1);
            let micros = u64::try_from(micros).unwrap_or(u64::MAX);
            let bytes = s.wire.max(s.plain);
            Some((Stage::Arriving, bytes.saturating_mul(1_000_000) / micros))
        })
    }

    /// When what is arriving must be in, at [`MIN_RATE`] of the more bytes either layer saw;
    /// `None` when idle.
    pub fn deadline(&self) -> Option<Instant> {
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
    pub fn too_slow(&self) -> bool {
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
    pub async fn slow(&self) {
        loop {
            if self.too_slow() {
                return;
            }
            tokio::time::sleep(PACE_CHECK).await;
        }
    }

    /// Resolves once what is arriving (a body, in an answer) is past its deadline.
    pub async fn late(&self) {
        loop {
            if self.deadline().is_some_and(|d| Instant::now() > d) {
                return;
            }
            tokio::time::sleep(PACE_CHECK).await;
        }
    }
}

/// What a connection is doing, in the order connections are evicted when every slot is taken
/// (the first does least for the API server, which connects, sends a review at network speed,
/// reads its answer at once and keeps the connection for the next).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Stage {
    /// Its client does not read its answer.
    Unread,
    /// Handshaken, and no request yet.
    Unused,
    /// Sending: its handshake, a request's head, or a body not yet all in.
    Arriving,
    /// Idle after an answer, kept for the client's next request.
    Kept,
}

/// Where a [`Paced`] stream sits.
#[derive(Clone, Copy, Debug)]
pub enum Layer {
    /// The TCP stream, under TLS.
    Wire,
    /// The TLS stream, what hyper reads.
    Plain,
}

/// A stream whose reads feed its connection's [`Pace`].
pub struct Paced<S> {
    pub inner: S,
    pub pace: Arc<Pace>,
    pub layer: Layer,
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
