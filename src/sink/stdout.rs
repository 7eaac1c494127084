//! The stdout sink: writes each batch's JSON lines to stdout, where the platform's log router
//! (Fargate's Fluent Bit) picks them up. Runs on a blocking thread: a slow reader of stdout
//! slows hooklog down instead of filling memory.

use std::io::Write;
use std::sync::Arc;

use tokio::sync::mpsc;

use crate::batch::Batch;
use crate::sink::Counters;

/// Batches written under one lock of stdout, when more are queued.
const COALESCE_BATCHES: usize = 16;

/// Why the stdout sink stopped.
#[derive(Debug, thiserror::Error)]
pub enum StdoutError {
    /// The reader of stdout went away.
    #[error("stdout closed by its reader")]
    Closed,
    /// Any other write failure.
    #[error("cannot write to stdout: {0}")]
    Io(#[from] std::io::Error),
}

/// Writes lines to stdout in one piece each, so they never interleave with other writers of
/// hooklog's stdout (the CloudWatch fallback).
pub fn write_lines(buf: &[u8]) -> Result<(), StdoutError> {
    let mut out = std::io::stdout().lock();
    out.write_all(buf)
        .and_then(|()| out.flush())
        .map_err(classify)
}

fn classify(e: std::io::Error) -> StdoutError {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        StdoutError::Closed
    } else {
        StdoutError::Io(e)
    }
}

/// Writes every batch until the queue closes. Blocking: run it with `spawn_blocking`.
pub fn run(mut rx: mpsc::Receiver<Arc<Batch>>, counters: Arc<Counters>) -> Result<(), StdoutError> {
    let stdout = std::io::stdout();
    while let Some(first) = rx.blocking_recv() {
        let mut out = stdout.lock();
        let mut next = Some(first);
        let mut written = 0;
        while let Some(b) = next.take() {
            // Each batch is acknowledged as soon as it is out (its checkpoint moves then), so a
            // SIGKILL repeats at most the batch being written.
            out.write_all(&b.buf)
                .and_then(|()| out.flush())
                .map_err(classify)?;
            Counters::add(&counters.stdout_records, b.len());
            b.delivered();
            written += 1;
            if written < COALESCE_BATCHES {
                next = rx.try_recv().ok();
            }
        }
    }
    Ok(())
}
