//! (the sidecar) The CloudWatch Logs sink: collects records from its queue into PutLogEvents requests
//! ([`batch`]), sends them through the AWS SDK ([`client`]) and retries what may succeed later
//! ([`retry`]).
//!
//! Nothing is dropped. While a request is being sent or retried the sink reads no more batches,
//! so its bounded queue fills and the inputs wait. A batch is acknowledged only once CloudWatch
//! has accepted all its events, or they went to stdout instead. Once the grace deadline is near
//! (or CloudWatch stays unreachable during shutdown), everything not accepted is written to
//! stdout as ordinary records, where the platform's log router still picks it up.
//!
//! Delivery is at least once: a call cut off at the deadline that CloudWatch in fact accepted
//! is written to stdout too, and a call whose answer is lost is sent again. Timestamps are
//! CloudWatch's clock ([`clock`]) and never go down within the stream ([`batch::stamp`]).
//!
//! [`emf`] adds Embedded Metric Format to the `hooks.summary` record.

pub mod batch;
pub mod client;
pub mod clock;
pub mod emf;
pub mod region;
pub mod retry;

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use self::batch::{Batcher, Event, Stamping};
use self::client::LogsClient;
use self::retry::{CallError, backoff, is_clock_skew, is_retriable};
use crate::batch::Batch;
use crate::sink::Counters;

/// The CloudWatch Logs output's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CloudWatchSettings {
    /// Log group.
    pub log_group: String,
    /// Log stream, template already filled in.
    pub log_stream: String,
    /// Retention for a group hooklog creates.
    pub retention_days: Option<i32>,
    /// Longest a record waits before it is sent.
    pub flush_interval: Duration,
    /// The region `run` found at start ([`crate::config::aws_region`]), which the client takes
    /// as it is; `None` asks the SDK's default chain.
    pub region: Option<String>,
}

/// Time kept before the grace deadline for writing what CloudWatch has not taken to stdout.
const FALLBACK_RESERVE: Duration = Duration::from_millis(750);

/// Tries per request once shutdown has begun; past them the request goes to stdout.
const SHUTDOWN_ATTEMPTS: u32 = 3;

/// While CloudWatch keeps failing, a warning every this many retries of one request.
const WARN_EVERY_RETRIES: u32 = 10;

/// An event held back this far or more (its timestamp was below the stream's last) is worth a
/// warning: the clock stepped back. Less is the normal interleaving of several inputs, whose
/// records reach the sink a few milliseconds out of read order.
const STEP_BACK_WARN_MS: i64 = 1_000;

/// What the sink needs from the daemon.
pub struct SinkContext {
    /// Batches to ship, closed at shutdown.
    pub rx: mpsc::Receiver<Arc<Batch>>,
    /// Group, stream, retention, flush interval.
    pub settings: CloudWatchSettings,
    /// Counters reported at exit.
    pub counters: Arc<Counters>,
    /// The grace deadline, set when the shutdown begins.
    pub deadline: watch::Receiver<Option<Instant>>,
    /// True when the stdout sink runs too: it already wrote every record, so the fallback writes
    /// nothing a second time.
    pub stdout_sink: bool,
}

/// Runs the sink until its queue closes and everything is shipped or written to stdout.
pub async fn run(ctx: SinkContext) -> anyhow::Result<()> {
    // Loading the configuration may ask IMDS for the region; the grace deadline bounds it too.
    let mut deadline = ctx.deadline.clone();
    let client = tokio::select! {
        c = LogsClient::new(&ctx.settings, ctx.counters.clone()) => c,
        () = give_up_time(&mut deadline) => {
            tracing::warn!("cloudwatch: configuration not loaded before the shutdown deadline: writing the records to stdout");
            return drain_to_stdout(ctx).await;
        }
    };
    let mut sink = Sink {
        client,
        flush_interval: ctx.settings.flush_interval,
        counters: ctx.counters,
        deadline: ctx.deadline,
        stdout_sink: ctx.stdout_sink,
        batcher: Batcher::new(),
        floor: None,
        oldest: None,
        pending: HashMap::new(),
        next_origin: 0,
        ensured: false,
        giving_up: false,
    };
    let mut rx = ctx.rx;
    loop {
        let flush_at = sink.oldest.map(|t| t + sink.flush_interval);
        tokio::select! {
            biased;
            next = rx.recv() => match next {
                Some(b) => sink.take(b).await,
                None => break,
            },
            () = crate::duration::sleep_until_opt(flush_at) => sink.flush().await,
        }
        // Checked here too: a queue that is never empty would otherwise starve the timer.
        let due = sink
            .oldest
            .is_some_and(|t| t.elapsed() >= sink.flush_interval);
        if sink.batcher.is_full() || due {
            sink.flush().await;
        }
    }
    sink.flush().await;
    tracing::info!(
        group = %sink.client.group(),
        stream = %sink.client.stream(),
        shipped = Counters::get(&sink.counters.cloudwatch_shipped),
        retried = Counters::get(&sink.counters.cloudwatch_retried),
        fell_back = Counters::get(&sink.counters.cloudwatch_fell_back),
        adjusted = Counters::get(&sink.counters.cloudwatch_adjusted),
        clock_offset_ms = sink.client.clock().offset_ms(),
        "cloudwatch sink stopped"
    );
    Ok(())
}

/// Waits until the shutdown has begun and its deadline is [`FALLBACK_RESERVE`] away.
async fn give_up_time(deadline: &mut watch::Receiver<Option<Instant>>) {
    loop {
        let at =
            (*deadline.borrow_and_update()).map(|d| d.checked_sub(FALLBACK_RESERVE).unwrap_or(d));
        if let Some(at) = at {
            return tokio::time::sleep_until(at).await;
        }
        if deadline.changed().await.is_err() {
            // The daemon is gone without a deadline: nothing left to wait for.
            return std::future::pending().await;
        }
    }
}

/// Without a client: every batch goes to stdout (unless the stdout sink writes it already) and
/// is acknowledged.
async fn drain_to_stdout(ctx: SinkContext) -> anyhow::Result<()> {
    let mut rx = ctx.rx;
    while let Some(b) = rx.recv().await {
        let n = b.len();
        Counters::add(&ctx.counters.cloudwatch_fell_back, n);
        if !ctx.stdout_sink && n > 0 {
            let buf = b.buf.clone();
            match tokio::task::spawn_blocking(move || crate::sink::stdout::write_lines(&buf)).await
            {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    tracing::error!(error = %e, records = n, "cloudwatch fallback: cannot write to stdout; records lost")
                }
                Err(e) => {
                    tracing::error!(error = %e, records = n, "cloudwatch fallback: writer failed; records lost")
                }
            }
        }
        b.delivered();
    }
    Ok(())
}

/// The sink's state between requests.
struct Sink {
    /// The CloudWatch client.
    client: LogsClient,
    /// Longest an event waits in the batcher.
    flush_interval: Duration,
    /// Counters reported at exit.
    counters: Arc<Counters>,
    /// The grace deadline, once shutdown has begun.
    deadline: watch::Receiver<Option<Instant>>,
    /// The stdout sink runs too.
    stdout_sink: bool,
    /// Events waiting to be sent.
    batcher: Batcher,
    /// The last timestamp CloudWatch took for the stream: no later event goes below it.
    floor: Option<i64>,
    /// When the oldest waiting event arrived.
    oldest: Option<Instant>,
    /// Input batches with events not yet settled, and how many.
    pending: HashMap<u64, (Arc<Batch>, usize)>,
    /// Id of the next input batch.
    next_origin: u64,
    /// The group and stream are known to exist.
    ensured: bool,
    /// Shutdown and CloudWatch out of reach: everything left goes to stdout.
    giving_up: bool,
}

impl Sink {
    /// Takes one input batch into the batcher (or straight to stdout once giving up).
    async fn take(&mut self, b: Arc<Batch>) {
        if b.is_empty() {
            b.delivered();
            return;
        }
        if self.giving_up {
            let n = b.len();
            self.write_stdout(b.buf.clone(), n).await;
            b.delivered();
            return;
        }
        let origin = self.next_origin;
        self.next_origin += 1;
        let mut events = Vec::with_capacity(b.len());
        let mut adjusted = 0;
        for (rec, time_ms) in b.iter() {
            let parts = batch::to_events(rec, time_ms, origin, &mut events);
            if parts > 0 {
                adjusted += 1;
                tracing::warn!(
                    bytes = rec.len(),
                    parts,
                    "record larger than a cloudwatch event: split"
                );
            }
        }
        Counters::add(&self.counters.cloudwatch_adjusted, adjusted);
        self.pending.insert(origin, (b, events.len()));
        for e in events {
            self.batcher.push(e);
        }
        if self.oldest.is_none() {
            self.oldest = Some(Instant::now());
        }
    }

    /// Sends every waiting event.
    async fn flush(&mut self) {
        self.oldest = None;
        let mut queue: VecDeque<Vec<Event>> = self.batcher.take_requests().into();
        while let Some(req) = queue.pop_front() {
            let rest = self.send(req).await;
            if !rest.is_empty() {
                queue.push_front(rest);
            }
        }
    }

    /// When to stop trying CloudWatch: shortly before the grace deadline, once shutdown began.
    fn give_up_at(&self) -> Option<Instant> {
        (*self.deadline.borrow()).map(|d| d.checked_sub(FALLBACK_RESERVE).unwrap_or(d))
    }

    /// Sends one request until CloudWatch accepts it, or hands it to stdout. Returns the events
    /// cut off its end to keep it within a day ([`batch::cut_span`]): they go next.
    async fn send(&mut self, mut req: Vec<Event>) -> Vec<Event> {
        let mut rest = Vec::new();
        let mut attempt: u32 = 0;
        loop {
            if self.giving_up {
                self.fall_back(req, "shutdown").await;
                return rest;
            }
            let offset_before = self.client.clock().offset_ms();
            // A call in flight when the shutdown begins is cut off at its deadline too (a
            // credential source that never answers would otherwise hold it).
            let mut deadline = self.deadline.clone();
            let result = tokio::select! {
                r = self.try_once(&mut req, &mut rest) => r,
                () = give_up_time(&mut deadline) => Err(CallError::deadline()),
            };
            let give_up_at = self.give_up_at();
            let err = match result {
                Ok((put, stamping)) => {
                    self.accepted(req, put.rejected, stamping).await;
                    return rest;
                }
                Err(e) => e,
            };
            // The answer to this very call showed CloudWatch's clock elsewhere than thought.
            let clock_moved =
                (self.client.clock().offset_ms() - offset_before).abs() >= clock::SKEW_MIN_MS;
            let failure = &err.failure;
            if failure.code() == Some("ResourceNotFoundException") {
                // The group or stream was deleted under us: create it again on the next try.
                self.ensured = false;
            } else if clock_moved && is_clock_skew(failure) {
                // Signed with the pod's clock and refused for it ("Signature expired"): the next
                // try is signed with CloudWatch's clock, just learned from this answer.
            } else if !is_retriable(failure) {
                tracing::error!(error = %err.detail, events = req.len(), "cloudwatch refused a request: writing it to stdout");
                self.fall_back(req, "refused").await;
                return rest;
            }
            let wait = backoff(attempt, fastrand::f64());
            attempt += 1;
            if let Some(at) = give_up_at
                && (attempt >= SHUTDOWN_ATTEMPTS || Instant::now() + wait >= at)
            {
                tracing::warn!(error = %err.detail, attempts = attempt, "cloudwatch unreachable at shutdown: writing the rest to stdout");
                self.giving_up = true;
                continue;
            }
            Counters::add(&self.counters.cloudwatch_retried, 1);
            if *failure == retry::Failure::Credentials {
                // The credential provider said it once, with the reason.
                tracing::debug!(error = %err.detail, attempt, "cloudwatch: no credentials yet: retrying");
            } else if attempt == 1 || attempt % WARN_EVERY_RETRIES == 0 {
                tracing::warn!(error = %err.detail, attempt, wait_ms = wait.as_millis() as u64, "cloudwatch call failed: retrying");
            }
            // Wake early if the shutdown begins meanwhile: the deadline changes the rules.
            let mut deadline = self.deadline.clone();
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                _ = deadline.changed(), if give_up_at.is_none() => {}
            }
        }
    }

    /// One try: make sure the stream exists; stamp the request with CloudWatch's clock as now
    /// known (the calls just made may have taught it) and cut it to a day's span, the events
    /// cut off going to the front of `rest`; then put.
    async fn try_once(
        &mut self,
        req: &mut Vec<Event>,
        rest: &mut Vec<Event>,
    ) -> Result<(client::Put, Stamping), CallError> {
        if !self.ensured {
            self.client.ensure_stream().await?;
            self.ensured = true;
        }
        let clock = self.client.clock();
        let stamping = batch::stamp(req, clock.offset_ms(), clock.now_ms(), self.floor);
        let mut cut = batch::cut_span(req);
        if !cut.is_empty() {
            cut.append(rest);
            *rest = cut;
        }
        let put = self.client.put(req).await?;
        Ok((put, stamping))
    }

    /// Settles an accepted request; events CloudWatch turned away go to stdout.
    async fn accepted(
        &mut self,
        req: Vec<Event>,
        rejected: Vec<std::ops::Range<usize>>,
        stamping: Stamping,
    ) {
        if stamping.moved > 0 {
            tracing::warn!(
                events = stamping.moved,
                "timestamps outside cloudwatch's window (14 days back, 2 hours ahead): sent with cloudwatch's current time"
            );
        }
        if stamping.held_by_ms >= STEP_BACK_WARN_MS {
            tracing::warn!(
                events = stamping.held,
                by_ms = stamping.held_by_ms,
                "clock stepped back: events sent with the stream's last timestamp to keep it in order"
            );
        } else if stamping.held > 0 {
            tracing::debug!(
                events = stamping.held,
                by_ms = stamping.held_by_ms,
                "events held at the stream's last timestamp"
            );
        }
        if rejected.is_empty() {
            self.floor = req.last().map(|e| e.timestamp).or(self.floor);
            return self.settle(req, true);
        }
        let mut kept = Vec::new();
        let mut refused = Vec::new();
        for (i, e) in req.into_iter().enumerate() {
            if rejected.iter().any(|r| r.contains(&i)) {
                refused.push(e);
            } else {
                kept.push(e);
            }
        }
        tracing::error!(
            ranges = ?rejected,
            events = refused.len(),
            "cloudwatch rejected events (rejectedLogEventsInfo: too old, too new or expired): writing them to stdout"
        );
        self.floor = kept.last().map(|e| e.timestamp).or(self.floor);
        self.settle(kept, true);
        self.fall_back(refused, "rejected").await;
    }

    /// Writes events to stdout (unless the stdout sink already did) and settles them.
    async fn fall_back(&mut self, events: Vec<Event>, why: &'static str) {
        let mut buf = Vec::new();
        let mut records = 0;
        for e in &events {
            buf.extend_from_slice(e.message.as_bytes());
            buf.push(b'\n');
            records += usize::from(e.first_part);
        }
        tracing::debug!(why, records, "cloudwatch fallback to stdout");
        self.write_stdout(buf, records).await;
        self.settle(events, false);
    }

    /// Writes whole lines to stdout on a blocking thread, counting them as fallen back.
    async fn write_stdout(&self, buf: Vec<u8>, records: usize) {
        Counters::add(&self.counters.cloudwatch_fell_back, records);
        if self.stdout_sink {
            return; // The stdout sink writes every record already.
        }
        let res = tokio::task::spawn_blocking(move || crate::sink::stdout::write_lines(&buf)).await;
        match res {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                tracing::error!(error = %e, records, "cloudwatch fallback: cannot write to stdout; records lost")
            }
            Err(e) => {
                tracing::error!(error = %e, records, "cloudwatch fallback: writer failed; records lost")
            }
        }
    }

    /// Counts events as done and acknowledges input batches whose events are all done.
    fn settle(&mut self, events: Vec<Event>, shipped: bool) {
        let mut records = 0;
        let mut adjusted = 0;
        for e in events {
            records += usize::from(e.first_part);
            // Shipped with a timestamp other than its read time: the clock offset, a step back.
            adjusted += usize::from(shipped && e.first_part && e.timestamp != e.read_ms);
            if let Some(entry) = self.pending.get_mut(&e.origin) {
                entry.1 -= 1;
                if entry.1 == 0
                    && let Some((b, _)) = self.pending.remove(&e.origin)
                {
                    b.delivered();
                }
            }
        }
        if shipped {
            Counters::add(&self.counters.cloudwatch_shipped, records);
            Counters::add(&self.counters.cloudwatch_adjusted, adjusted);
        }
    }
}
