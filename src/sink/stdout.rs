//! (the sidecar) The stdout sink: writes each batch's JSON lines to stdout, where the platform's log router
//! (Fargate's Fluent Bit) picks them up. Runs on a blocking thread: a slow reader of stdout
//! slows hooklog down instead of filling memory.
//!
//! At the cut (the grace deadline is near) it stops at the next record end, drops what is still
//! queued (counted as undelivered) and writes the `hooks.summary`: stdout always ends on a whole
//! record, the summary last, however slowly it is read.

use std::io::Write;
use std::sync::Arc;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::batch::Batch;
use crate::sink::{Counters, Progress};

/// Batches written under one lock of stdout, when more are queued.
const COALESCE_BATCHES: usize = 16;

/// Most bytes written in one `write_all` between two looks at the cut: a whole batch at the
/// default line cap (`source::BATCH_BYTES`, 64 KiB, plus one record of up to 16 KiB) in one
/// piece, so the hot path writes as before. A reader at 2 MB/s takes 64 ms for it, inside the cut
/// reserve of 125 ms that `--grace 1s` leaves and the 250 ms of a native sidecar's 2-second window
/// (daemon.rs `CUT_RESERVE`).
pub const WRITE_PIECE: usize = 128 * 1024;

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

/// Writes every batch until the queue closes; after `cut`, only the summary. Blocking: run it
/// with `spawn_blocking`. `progress` counts the batches it is done with (written or dropped).
pub fn run(
    mut rx: mpsc::Receiver<Arc<Batch>>,
    counters: Arc<Counters>,
    cut: CancellationToken,
    progress: Arc<Progress>,
) -> Result<(), StdoutError> {
    let stdout = std::io::stdout();
    while let Some(first) = rx.blocking_recv() {
        let mut out = stdout.lock();
        let mut next = Some(first);
        let mut written = 0;
        while let Some(b) = next.take() {
            let result = write_batch(&mut out, &b, &counters, &cut);
            progress.done();
            result?;
            written += 1;
            if written < COALESCE_BATCHES {
                next = rx.try_recv().ok();
            }
        }
    }
    Ok(())
}

/// Writes one batch in pieces that end on record ends, looking at `cut` before each: after the
/// cut, the rest of the batch is dropped and counted (the summary batch is written whole). Each
/// batch is acknowledged as soon as it is all out (its checkpoint moves then), so a SIGKILL
/// repeats at most the batch being written; a batch cut short is not acknowledged, and its
/// records are read again by the next run.
fn write_batch(
    out: &mut impl Write,
    b: &Batch,
    counters: &Counters,
    cut: &CancellationToken,
) -> Result<(), StdoutError> {
    let mut left = b.len();
    for (piece, records) in b.pieces(WRITE_PIECE) {
        if !b.summary && cut.is_cancelled() {
            Counters::add(&counters.records_dropped, left);
            return Ok(());
        }
        out.write_all(piece)
            .and_then(|()| out.flush())
            .map_err(classify)?;
        Counters::add(&counters.stdout_records, records);
        left -= records;
    }
    b.delivered();
    Ok(())
}
