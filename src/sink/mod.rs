//! Sinks: where records go. The fan-out hands every batch to each sink's own bounded queue; a
//! sink marks a batch delivered once it is written (or handed to a fallback).

pub mod cloudwatch;
pub mod stdout;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::mpsc;

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

/// Hands each batch from the sources to every sink, in order. Ends when the sources' channel
/// closes, which closes the sinks' queues in turn.
pub async fn fan_out(
    mut rx: mpsc::Receiver<Batch>,
    sinks: Vec<mpsc::Sender<Arc<Batch>>>,
    counters: Arc<Counters>,
) {
    while let Some(batch) = rx.recv().await {
        Counters::add(&counters.records_in, batch.len());
        batch.expect_sinks(sinks.len());
        let batch = Arc::new(batch);
        for sink in &sinks {
            if sink.send(batch.clone()).await.is_err() {
                tracing::error!("a sink stopped early; its records are not delivered");
            }
        }
    }
}
