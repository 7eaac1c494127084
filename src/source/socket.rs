//! The socket source: a Unix stream socket where each connection sends newline-delimited lines.
//! Each connection has its own framer, so concurrent writers never interleave partial lines, and
//! a writer that leaves mid-line gets its fragment flushed as its own record.

use std::path::PathBuf;
use std::sync::Arc;

use tokio::io::AsyncReadExt;
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::batch::Batch;
use crate::framing::Framer;
use crate::record::Encoder;
use crate::source::{BATCH_BYTES, SourceContext};

/// Bytes read per `read` call on one connection. Together with `--max-connections` and the line
/// cap this bounds what connections hold.
pub const CONN_READ_BUF: usize = 16 * 1024;

/// Serves one listening socket until cancelled, then lets each connection send what it has
/// already written and ends.
pub async fn run(
    listener: UnixListener,
    path: PathBuf,
    ctx: SourceContext,
    max_connections: usize,
    cancel: CancellationToken,
) {
    let input = format!("socket:{}", path.display());
    let tracker = TaskTracker::new();
    let slots = Arc::new(Semaphore::new(max_connections.max(1)));
    loop {
        let permit = tokio::select! {
            _ = cancel.cancelled() => break,
            p = slots.clone().acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => break,
            },
        };
        let stream = tokio::select! {
            _ = cancel.cancelled() => break,
            r = listener.accept() => match r {
                Ok((s, _)) => s,
                Err(e) => {
                    tracing::warn!(path = %path.display(), error = %e, "accept failed");
                    continue;
                }
            },
        };
        let ctx = ctx.clone();
        let cancel = cancel.clone();
        let input = input.clone();
        tracker.spawn(async move {
            connection(stream, &input, &ctx, cancel).await;
            drop(permit);
        });
    }
    drop(listener);
    // Sent but not yet accepted connections are lost with the listener; the daemon only stops
    // accepting after the peers' hooks ended and the quiet period passed.
    tracker.close();
    tracker.wait().await;
    let _ = std::fs::remove_file(&path); // Best effort: the emptyDir goes away with the pod.
}

/// Reads one connection to its end (or, once cancelled, to what it has sent so far).
async fn connection(
    mut stream: UnixStream,
    input: &str,
    ctx: &SourceContext,
    cancel: CancellationToken,
) {
    let mut encoder = Encoder::new(ctx.enrichment.clone(), input);
    let mut framer = Framer::new(ctx.max_frame());
    let mut buf = vec![0u8; CONN_READ_BUF];
    let mut cancelled = false;
    loop {
        let read = if cancelled {
            // Drain what is already buffered, without waiting for more.
            match stream.try_read(&mut buf) {
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                r => r,
            }
        } else {
            tokio::select! {
                biased;
                r = stream.read(&mut buf) => r,
                _ = cancel.cancelled() => {
                    cancelled = true;
                    continue;
                }
            }
        };
        let n = match read {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) => {
                tracing::warn!(input, error = %e, "socket read failed");
                break;
            }
        };
        ctx.activity.touch();
        let now = crate::timefmt::now_ms();
        let mut chunk = &buf[..n];
        while !chunk.is_empty() {
            let mut batch = Batch::new();
            let used = framer.feed_some(chunk, |frame| {
                ctx.encode(&mut encoder, frame, now, &mut batch);
                batch.buf.len() < BATCH_BYTES
            });
            chunk = &chunk[used..];
            if !batch.is_empty() && ctx.tx.send(batch).await.is_err() {
                return;
            }
        }
    }
    let mut batch = Batch::new();
    let now = crate::timefmt::now_ms();
    framer.finish(|frame| ctx.encode(&mut encoder, frame, now, &mut batch));
    if !batch.is_empty() {
        let _ = ctx.tx.send(batch).await; // A closed pipeline means shutdown ran out of time.
    }
}
