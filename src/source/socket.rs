//! The socket source: a Unix stream socket where each connection sends newline-delimited lines.
//! Each connection has its own framer, so concurrent writers never interleave partial lines, and
//! a writer that leaves mid-line gets its fragment flushed as its own record.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

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

/// Most bytes read from one connection once cancelled: what its writer had sent by then is at
/// most a socket buffer (about 200 KiB); a writer that keeps writing does not hold the shutdown.
pub const CONN_DRAIN_LIMIT: usize = 1024 * 1024;

/// First pause after `accept` fails for want of resources (out of file descriptors, buffers or
/// memory); doubled on each failure in a row up to [`ACCEPT_BACKOFF_MAX`].
const ACCEPT_BACKOFF_MIN: Duration = Duration::from_millis(10);

/// Longest pause between two `accept`s that failed for want of resources.
const ACCEPT_BACKOFF_MAX: Duration = Duration::from_secs(1);

/// At most one warning about failing `accept`s per this period; the others are counted in it.
const ACCEPT_WARN_EVERY: Duration = Duration::from_secs(10);

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
    let mut backoff = ACCEPT_BACKOFF_MIN;
    let mut warned_at: Option<tokio::time::Instant> = None;
    let mut unwarned = 0u64;
    loop {
        // Every slot taken: writers may be waiting in the accept queue, so this input is behind.
        let behind = (slots.available_permits() == 0).then(|| ctx.activity.behind_while());
        let permit = tokio::select! {
            _ = cancel.cancelled() => break,
            p = slots.clone().acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => break,
            },
        };
        drop(behind);
        let stream = tokio::select! {
            _ = cancel.cancelled() => break,
            r = listener.accept() => match r {
                Ok((s, _)) => {
                    backoff = ACCEPT_BACKOFF_MIN;
                    s
                }
                Err(e) => {
                    // Rate-limited: out of descriptors, this would otherwise print per try.
                    let now = tokio::time::Instant::now();
                    if warned_at.is_none_or(|t| now >= t + ACCEPT_WARN_EVERY) {
                        tracing::warn!(path = %path.display(), error = %e, failed_since_last_warning = unwarned, "accept failed");
                        warned_at = Some(now);
                        unwarned = 0;
                    } else {
                        unwarned += 1;
                    }
                    if is_resource_shortage(&e) {
                        // Waiting frees what a retry needs (a connection ends, memory returns);
                        // retrying at once would only spin.
                        drop(permit);
                        tokio::select! {
                            _ = cancel.cancelled() => break,
                            _ = tokio::time::sleep(backoff) => {}
                        }
                        backoff = (backoff * 2).min(ACCEPT_BACKOFF_MAX);
                    }
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

/// True for `accept` errors that mean "not now": out of file descriptors (EMFILE, ENFILE),
/// buffers (ENOBUFS) or memory (ENOMEM).
fn is_resource_shortage(e: &std::io::Error) -> bool {
    use nix::errno::Errno;
    e.raw_os_error().is_some_and(|n| {
        [Errno::EMFILE, Errno::ENFILE, Errno::ENOBUFS, Errno::ENOMEM]
            .iter()
            .any(|x| *x as i32 == n)
    })
}

/// What is in the connection's receive queue now, read with a real `recv` (tokio's cached
/// readiness may not have seen bytes that arrived just before the stop).
fn recv_now(stream: &UnixStream, buf: &mut [u8]) -> std::io::Result<usize> {
    use nix::sys::socket::{MsgFlags, recv};
    use std::os::fd::AsRawFd;
    recv(stream.as_raw_fd(), buf, MsgFlags::MSG_DONTWAIT).map_err(std::io::Error::from)
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
    let mut drained = 0;
    loop {
        let read = if cancelled {
            // Drain what is already buffered, without waiting for more, up to a bound.
            if drained >= CONN_DRAIN_LIMIT {
                tracing::warn!(
                    input,
                    "writer still writing at shutdown: rest of its output unread"
                );
                break;
            }
            match recv_now(&stream, &mut buf) {
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Ok(n) => {
                    drained += n;
                    Ok(n)
                }
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
            if !batch.is_empty() && ctx.send(batch).await.is_err() {
                return;
            }
        }
    }
    let mut batch = Batch::new();
    let now = crate::timefmt::now_ms();
    framer.finish(|frame| ctx.encode(&mut encoder, frame, now, &mut batch));
    if !batch.is_empty() {
        let _ = ctx.send(batch).await; // A closed pipeline means shutdown ran out of time.
    }
}
