//! (the sidecar) Sinks: where records go. The fan-out hands every batch to each sink's own bounded queue; a
//! sink marks a batch delivered once it is written (or handed to a fallback).

pub mod cloudwatch;
pub mod stdout;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::batch::Batch;
use crate::lifecycle::once::Once;

/// Batches queued between the sources and the fan-out.
pub const SOURCE_QUEUE_BATCHES: usize = 8;

/// Batches queued in front of each sink.
pub const SINK_QUEUE_BATCHES: usize = 8;

/// How long the fan-out waits, after the cut, for a sink that stops at the cut to finish the
/// piece it is writing and drop its queue, so the summary counts what it dropped: one piece of
/// [`stdout::WRITE_PIECE`] takes 64 ms at a reader of 2 MB/s. Past it the summary goes out anyway
/// and may undercount `undelivered`.
const SETTLE_WAIT: Duration = Duration::from_millis(100);

/// How often the fan-out looks whether such a sink has settled.
const SETTLE_POLL: Duration = Duration::from_millis(2);

/// A sink's queue as the fan-out sees it.
pub struct SinkQueue {
    /// Where its batches go.
    pub tx: mpsc::Sender<Arc<Batch>>,
    /// For a sink that stops at the cut (stdout): the batches it is done with, so the fan-out
    /// knows when it has dropped its queue.
    pub progress: Option<Arc<Progress>>,
}

/// Batches a sink is done with, written or dropped.
#[derive(Debug, Default)]
pub struct Progress(AtomicU64);

impl Progress {
    /// One more batch done.
    pub fn done(&self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }

    fn get(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}

/// Counters reported at exit.
#[derive(Debug, Default)]
pub struct Counters {
    /// Records that entered the pipeline.
    pub records_in: AtomicU64,
    /// Records written to stdout by the stdout sink.
    pub stdout_records: AtomicU64,
    /// Records CloudWatch accepted.
    pub cloudwatch_shipped: AtomicU64,
    /// PutLogEvents (or create) calls tried again after a failure.
    pub cloudwatch_retried: AtomicU64,
    /// Records CloudWatch did not take that went to stdout instead.
    pub cloudwatch_fell_back: AtomicU64,
    /// Records read but dropped because the grace deadline was near (not delivered anywhere).
    pub records_dropped: AtomicU64,
    /// Records whose timestamp was moved or that were split to suit CloudWatch.
    pub cloudwatch_adjusted: AtomicU64,
}

impl Counters {
    /// Adds `n` to a counter.
    pub fn add(counter: &AtomicU64, n: usize) {
        counter.fetch_add(n as u64, Ordering::Relaxed);
    }

    /// Reads a counter.
    pub fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }
}

/// Builds the last batch (the `hooks.summary`), given how many records read were not delivered
/// because the shutdown was cut short.
pub type SummaryFn = Box<dyn FnOnce(u64) -> Batch + Send>;

/// Hands each batch from the sources to every sink, in order, until the sources' channel closes
/// or `cut` fires (the grace deadline is near); then the summary from `summary`, always last.
/// After a cut, what is still queued is dropped and counted in the summary. Ends by closing the
/// sinks' queues. Each batch is also offered to `tap` (`--events`), which is never waited for.
pub async fn fan_out(
    mut rx: mpsc::Receiver<Batch>,
    queues: Vec<SinkQueue>,
    counters: Arc<Counters>,
    summary: oneshot::Receiver<SummaryFn>,
    cut: CancellationToken,
    tap: Option<mpsc::Sender<Arc<Batch>>>,
) {
    let mut dropped = 0u64;
    // The copy of each wrapper lifecycle record that comes out: the first in this order.
    let once = Once::default();
    let sinks: Vec<_> = queues.iter().map(|q| q.tx.clone()).collect();
    // Batches each sink was given.
    let mut sent = vec![0u64; sinks.len()];
    loop {
        let batch = tokio::select! {
            biased;
            _ = cut.cancelled() => break,
            b = rx.recv() => match b {
                Some(b) => b,
                None => break,
            },
        };
        let batch = without_copies(batch, &once);
        if !forward(
            &sinks,
            batch,
            &counters,
            Some(&cut),
            &mut sent,
            tap.as_ref(),
        )
        .await
        {
            break;
        }
    }
    // No more from the sources: what they still queued (only after a cut) is dropped.
    rx.close();
    while let Ok(b) = rx.try_recv() {
        // A second copy of a lifecycle record is no record lost.
        let b = without_copies(b, &once);
        Counters::add(&counters.records_in, b.len());
        dropped += b.len() as u64;
    }
    if cut.is_cancelled() {
        settle(&queues, &sent).await;
    }
    dropped += Counters::get(&counters.records_dropped);
    if dropped > 0 {
        tracing::warn!(
            records = dropped,
            "grace deadline near: records read but not delivered"
        );
    }
    // The summary is sent once the sources are done (or the cut came); a daemon that ended
    // without one sends nothing.
    if let Ok(make) = summary.await {
        forward(&sinks, make(dropped), &counters, None, &mut sent, None).await;
    }
}

/// `batch` without the lifecycle records whose copy came out already: a hook's records keep the
/// order their route gave them (see [`crate::lifecycle::once`]).
fn without_copies(mut batch: Batch, once: &Once) -> Batch {
    let drop: Vec<usize> = std::mem::take(&mut batch.copies)
        .into_iter()
        .filter(|&(_, copy)| !once.first_copy(copy))
        .map(|(i, _)| i)
        .collect();
    if !drop.is_empty() {
        batch.remove_records(&drop);
    }
    batch
}

/// After the cut: waits (at most [`SETTLE_WAIT`]) until every sink that stops at the cut is
/// done with the batches it was given (`sent`), so what it dropped is counted.
async fn settle(queues: &[SinkQueue], sent: &[u64]) {
    let until = tokio::time::Instant::now() + SETTLE_WAIT;
    for (q, &sent) in queues.iter().zip(sent) {
        let Some(progress) = &q.progress else {
            continue;
        };
        while progress.get() < sent && tokio::time::Instant::now() < until {
            tokio::time::sleep(SETTLE_POLL).await;
        }
    }
}

/// Hands `batch` to every sink, counting in `sent` each sink that got it; false when `cut` fired
/// first (the batch is then counted as dropped for the sinks that did not get it). `tap` gets it
/// too when it has room.
async fn forward(
    sinks: &[mpsc::Sender<Arc<Batch>>],
    batch: Batch,
    counters: &Counters,
    cut: Option<&CancellationToken>,
    sent: &mut [u64],
    tap: Option<&mpsc::Sender<Arc<Batch>>>,
) -> bool {
    Counters::add(&counters.records_in, batch.len());
    batch.expect_sinks(sinks.len());
    let n = batch.len();
    let batch = Arc::new(batch);
    if let Some(tap) = tap {
        // A full tap misses this batch: the Events reporter never slows the records down.
        let _ = tap.try_send(batch.clone());
    }
    for (sink, given) in sinks.iter().zip(sent.iter_mut()) {
        let sent = match cut {
            Some(cut) => tokio::select! {
                biased;
                r = sink.send(batch.clone()) => Some(r),
                _ = cut.cancelled() => None,
            },
            None => Some(sink.send(batch.clone()).await),
        };
        match sent {
            Some(Ok(())) => *given += 1,
            Some(Err(_)) => tracing::error!("a sink stopped early; its records are not delivered"),
            None => {
                Counters::add(&counters.records_dropped, n);
                return false;
            }
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::CopyKey;
    use crate::record::{HookEvent, HookEventKind, HookRun};

    const STARTED: &[u8] = br#"{"event":"hook.started","run_id":"r1"}"#;

    fn started_copy() -> CopyKey {
        let event = HookEvent {
            container: "api-server".into(),
            kind: HookEventKind::Started,
            run: Some(HookRun {
                id: "r1".into(),
                started_ms: 1,
            }),
            proof: None,
        };
        event.copy_key(STARTED).expect("a run")
    }

    /// A batch of `lines`, the ones at `copies` marked as copies of the wrapper's `hook.started`.
    fn batch(lines: &[&str], copies: &[usize]) -> Batch {
        let mut b = Batch::new();
        for l in lines {
            b.buf.extend_from_slice(l.as_bytes());
            b.buf.push(b'\n');
            b.push_record(0);
        }
        b.copies = copies.iter().map(|&i| (i, started_copy())).collect();
        b
    }

    fn lines(b: &Batch) -> Vec<String> {
        b.iter()
            .map(|(r, _)| String::from_utf8_lossy(r).into_owned())
            .collect()
    }

    /// The failure CI saw: the file's `hook.started` was read first, but the socket's batch (its
    /// own copy, then the hook's output) reached the pipeline first. Whichever batch comes
    /// first, `hook.started` comes out once and before the output.
    #[test]
    fn a_hook_started_by_two_routes_comes_out_once_and_before_its_output() {
        for socket_first in [true, false] {
            let once = Once::default();
            let socket = || batch(&["started (socket)", "output", "more output"], &[0]);
            let file = || batch(&["started (file)"], &[0]);
            let out: Vec<String> = if socket_first {
                [socket(), file()]
            } else {
                [file(), socket()]
            }
            .into_iter()
            .flat_map(|b| lines(&without_copies(b, &once)))
            .collect();
            let first = if socket_first { "socket" } else { "file" };
            assert_eq!(
                out,
                [
                    format!("started ({first})"),
                    "output".into(),
                    "more output".into()
                ],
                "socket first: {socket_first}"
            );
        }
    }

    #[test]
    fn a_batch_without_copies_is_left_as_it_is() {
        let once = Once::default();
        let b = without_copies(batch(&["a", "b"], &[]), &once);
        assert_eq!(lines(&b), ["a", "b"]);
        let b = without_copies(batch(&["started", "x"], &[0]), &once);
        assert_eq!(lines(&b), ["started", "x"]);
        let b = without_copies(batch(&["y", "started", "z"], &[1]), &once);
        assert_eq!(lines(&b), ["y", "z"]);
        assert_eq!(b.records.last().map(|r| r.end), Some(b.buf.len()));
    }
}
