//! Sinks: where records go. The fan-out hands every batch to each sink's own bounded queue; a
//! sink marks a batch delivered once it is written (or handed to a fallback).

pub mod cloudwatch;
pub mod stdout;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::batch::Batch;

/// Batches queued between the sources and the fan-out.
pub const SOURCE_QUEUE_BATCHES: usize = 8;

/// Batches queued in front of each sink.
pub const SINK_QUEUE_BATCHES: usize = 8;

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
/// sinks' queues.
pub async fn fan_out(
    mut rx: mpsc::Receiver<Batch>,
    sinks: Vec<mpsc::Sender<Arc<Batch>>>,
    counters: Arc<Counters>,
    summary: oneshot::Receiver<SummaryFn>,
    cut: CancellationToken,
) {
    let mut dropped = 0u64;
    loop {
        let batch = tokio::select! {
            biased;
            _ = cut.cancelled() => break,
            b = rx.recv() => match b {
                Some(b) => b,
                None => break,
            },
        };
        if !forward(&sinks, batch, &counters, Some(&cut)).await {
            break;
        }
    }
    // No more from the sources: what they still queued (only after a cut) is dropped.
    rx.close();
    while let Ok(b) = rx.try_recv() {
        Counters::add(&counters.records_in, b.len());
        dropped += b.len() as u64;
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
        forward(&sinks, make(dropped), &counters, None).await;
    }
}

/// Hands `batch` to every sink; false when `cut` fired first (the batch is then counted as
/// dropped for the sinks that did not get it).
async fn forward(
    sinks: &[mpsc::Sender<Arc<Batch>>],
    batch: Batch,
    counters: &Counters,
    cut: Option<&CancellationToken>,
) -> bool {
    Counters::add(&counters.records_in, batch.len());
    batch.expect_sinks(sinks.len());
    let n = batch.len();
    let batch = Arc::new(batch);
    for sink in sinks {
        let sent = match cut {
            Some(cut) => tokio::select! {
                biased;
                r = sink.send(batch.clone()) => Some(r),
                _ = cut.cancelled() => None,
            },
            None => Some(sink.send(batch.clone()).await),
        };
        match sent {
            Some(Ok(())) => {}
            Some(Err(_)) => tracing::error!("a sink stopped early; its records are not delivered"),
            None => {
                Counters::add(&counters.records_dropped, n);
                return false;
            }
        }
    }
    true
}
