//! (the sidecar) The socket source: a Unix stream socket where each connection sends newline-delimited lines.
//! Each connection has its own framer, so concurrent writers never interleave partial lines, and
//! a writer that leaves mid-line gets its fragment flushed as its own record.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::AsyncReadExt;
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::batch::Batch;
use crate::framing::Framer;
use crate::record::Encoder;
use crate::source::{BATCH_BYTES, SourceContext};

/// Bytes read per `read` call on one connection. Together with `--max-connections` and the line
/// cap this bounds what connections hold.
pub const CONN_READ_BUF: usize = 16 * 1024;

/// Most bytes read from one connection once it is stopped: its reading side is shut first, so
/// what is left is what its writer had sent by then, at most a socket buffer (about 200 KiB).
pub const CONN_DRAIN_LIMIT: usize = 1024 * 1024;

/// First pause after `accept` fails for want of resources (out of file descriptors, buffers or
/// memory); doubled on each failure in a row up to [`ACCEPT_BACKOFF_MAX`].
const ACCEPT_BACKOFF_MIN: Duration = Duration::from_millis(10);

/// Longest pause between two `accept`s that failed for want of resources.
const ACCEPT_BACKOFF_MAX: Duration = Duration::from_secs(1);

/// At most one warning about failing `accept`s per this period; the others are counted in it.
const ACCEPT_WARN_EVERY: Duration = Duration::from_secs(10);

/// How long a connection must have sent no whole record before it may be closed to make room,
/// when every `--max-connections` slot is taken. Its writer is told (EPIPE on its next write)
/// after what it sent is read; the wrapper then connects again. A peer holding every slot with
/// idle connections, or with connections that dribble a byte now and then (issue 25.5: one byte
/// every 0.5 s on 65 connections starved a socket-only hook), so delays a real hook's connection
/// by this much at most.
pub const IDLE_CLOSE_AFTER: Duration = Duration::from_secs(1);

/// When every slot has been taken for [`IDLE_CLOSE_AFTER`] by connections that all send whole
/// records, the one open longest (at least this long) is closed to make room: a connection's
/// turn. Slots go round, so connections that keep sending cannot hold them against a writer
/// waiting in the accept queue; a wrapper whose turn ends connects again.
pub const TURN_AFTER: Duration = Duration::from_secs(1);

/// Serves one listening socket until cancelled, then lets each connection send what it has
/// already written, reads the connections still in the kernel's accept queue, and ends.
pub async fn run(
    listener: UnixListener,
    path: PathBuf,
    ctx: SourceContext,
    max_connections: usize,
    cancel: CancellationToken,
) {
    let input = format!("socket:{}", path.display());
    let tracker = TaskTracker::new();
    let served = Arc::new(Served::default());
    let max = max_connections.max(1);
    let mut backoff = ACCEPT_BACKOFF_MIN;
    let mut warned_at: Option<tokio::time::Instant> = None;
    let mut unwarned = 0u64;
    let mut next_id = 0u64;
    loop {
        if !make_room(&served, max, &ctx, &cancel).await {
            break;
        }
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
        next_id += 1;
        let id = next_id;
        // Closing an idle connection to make room, or the shutdown, ends it.
        let stop = cancel.child_token();
        let last = served.add(id, stop.clone());
        let ctx = ctx.clone();
        let input = input.clone();
        let served = served.clone();
        tracker.spawn(async move {
            connection(stream, &input, &ctx, stop, &last, served.epoch).await;
            served.remove(id);
        });
    }
    // No new connections from here (a writer that tries gets ENOENT and uses the file); the
    // ones already in the accept queue are read before the summary.
    let _ = std::fs::remove_file(&path); // Best effort: the emptyDir goes away with the pod.
    drain_accept_queue(listener, &input, &ctx, &cancel, served.epoch).await;
    tracker.close();
    tracker.wait().await;
}

/// A connection and how long ago something happened to it.
type Since = (u64, Duration);

/// One served connection, as [`Served`] knows it.
type Conn = (Arc<AtomicU64>, u64, CancellationToken);

/// The connections being served, so that idle ones can be closed when all slots are taken.
#[derive(Debug)]
struct Served {
    /// Reference point for the connections' last activity.
    epoch: Instant,
    /// Connection id to its last whole record (ms after `epoch`), when it was opened (the
    /// same), and the token that closes it.
    conns: Mutex<HashMap<u64, Conn>>,
    /// Told when a connection ends (a slot is free).
    ended: Notify,
}

impl Default for Served {
    fn default() -> Self {
        Served {
            epoch: Instant::now(),
            conns: Mutex::new(HashMap::new()),
            ended: Notify::new(),
        }
    }
}

impl Served {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Conn>> {
        self.conns.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers a connection accepted now; returns where it notes its activity.
    fn add(&self, id: u64, stop: CancellationToken) -> Arc<AtomicU64> {
        let now = millis_since(self.epoch);
        let last = Arc::new(AtomicU64::new(now));
        self.lock().insert(id, (last.clone(), now, stop));
        last
    }

    fn remove(&self, id: u64) {
        if self.lock().remove(&id).is_some() {
            self.ended.notify_one();
        }
    }

    /// How many connections are served, the one that has sent no whole record for longest with
    /// how long that is, and the one open longest with how long that is.
    fn idlest(&self) -> (usize, Option<Since>, Option<Since>) {
        let conns = self.lock();
        let now = millis_since(self.epoch);
        let ago = |ms: u64| Duration::from_millis(now.saturating_sub(ms));
        let idlest = conns
            .iter()
            .map(|(id, (last, _, _))| (*id, last.load(Ordering::Relaxed)))
            .min_by_key(|(_, last)| *last)
            .map(|(id, last)| (id, ago(last)));
        let oldest = conns
            .iter()
            .min_by_key(|(_, (_, opened, _))| *opened)
            .map(|(id, (_, opened, _))| (*id, ago(*opened)));
        (conns.len(), idlest, oldest)
    }

    /// Closes connection `id`: it reads what its writer sent, then ends. Its slot is free now.
    fn close(&self, id: u64) {
        if let Some((_, _, stop)) = self.lock().remove(&id) {
            stop.cancel();
        }
    }
}

fn millis_since(epoch: Instant) -> u64 {
    epoch.elapsed().as_millis() as u64
}

/// Waits until fewer than `max` connections are served, closing the one idle longest once it
/// has sent no whole record for [`IDLE_CLOSE_AFTER`], or, when every slot has been taken that
/// long by connections that all send, the one open longest ([`TURN_AFTER`]). False when
/// cancelled meanwhile.
async fn make_room(
    served: &Served,
    max: usize,
    ctx: &SourceContext,
    cancel: &CancellationToken,
) -> bool {
    let mut full_since: Option<tokio::time::Instant> = None;
    loop {
        let (count, idlest, oldest) = served.idlest();
        if count < max {
            return true;
        }
        let full_for = full_since
            .get_or_insert_with(tokio::time::Instant::now)
            .elapsed();
        let idle = match idlest {
            Some((id, idle)) if idle >= IDLE_CLOSE_AFTER => {
                tracing::debug!(
                    max_connections = max,
                    idle_ms = idle.as_millis() as u64,
                    "closing an idle connection to make room"
                );
                served.close(id);
                continue;
            }
            Some((_, idle)) => idle,
            None => Duration::ZERO,
        };
        if full_for >= IDLE_CLOSE_AFTER
            && let Some((id, open)) = oldest
            && open >= TURN_AFTER
        {
            tracing::debug!(
                max_connections = max,
                open_ms = open.as_millis() as u64,
                "closing the connection open longest to make room: its turn is over"
            );
            served.close(id);
            full_since = None;
            continue;
        }
        // Every slot taken by a connection that sent something lately: writers may be waiting
        // in the accept queue, so this input is behind.
        let _behind = ctx.activity.behind_while();
        let wake = (IDLE_CLOSE_AFTER - idle).min(IDLE_CLOSE_AFTER.saturating_sub(full_for));
        tokio::select! {
            _ = cancel.cancelled() => return false,
            _ = served.ended.notified() => {}
            _ = tokio::time::sleep(wake.max(Duration::from_millis(10))) => {}
        }
    }
}

/// Reads, one after the other, the connections still in the kernel's accept queue at shutdown:
/// their writers were told their records were taken. The socket's path is gone, so the queue
/// only shrinks; the daemon's cut bounds the time.
async fn drain_accept_queue(
    listener: UnixListener,
    input: &str,
    ctx: &SourceContext,
    cancel: &CancellationToken,
    epoch: Instant,
) {
    let listener = match listener.into_std() {
        Ok(l) => l,
        Err(e) => {
            tracing::warn!(input, error = %e, "cannot read the connections still queued");
            return;
        }
    };
    // `into_std` keeps it non-blocking; said again, as an `accept` that waited would hang here.
    if let Err(e) = listener.set_nonblocking(true) {
        tracing::warn!(input, error = %e, "cannot read the connections still queued");
        return;
    }
    let mut read = 0u64;
    loop {
        let stream = match listener.accept() {
            Ok((s, _)) => s,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
            Err(e) => {
                tracing::warn!(input, error = %e, "accept failed at shutdown");
                break;
            }
        };
        let stream = match stream
            .set_nonblocking(true)
            .and_then(|()| UnixStream::from_std(stream))
        {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(input, error = %e, "cannot read a queued connection");
                continue;
            }
        };
        let last = AtomicU64::new(0);
        connection(stream, input, ctx, cancel.clone(), &last, epoch).await;
        read += 1;
    }
    if read > 0 {
        tracing::debug!(
            input,
            connections = read,
            "read the connections still queued at shutdown"
        );
    }
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

/// Shuts the reading side of `stream`: what is queued can still be read, then it reads as
/// ended, and the writer's next write fails with EPIPE.
fn shut_reading(stream: &UnixStream) {
    use nix::sys::socket::{Shutdown, shutdown};
    use std::os::fd::AsRawFd;
    // A connection the writer already closed cannot be shut; it reads to its end all the same.
    let _ = shutdown(stream.as_raw_fd(), Shutdown::Read);
}

/// After the stop: what is already buffered, without waiting for more, up to
/// [`CONN_DRAIN_LIMIT`] bytes in all (`drained`); none once there is nothing more or the bound is
/// reached.
fn read_buffered(
    stream: &UnixStream,
    buf: &mut [u8],
    drained: &mut usize,
    input: &str,
) -> Option<std::io::Result<usize>> {
    if *drained >= CONN_DRAIN_LIMIT {
        tracing::warn!(
            input,
            "writer still writing at shutdown: rest of its output unread"
        );
        return None;
    }
    // After the shutdown of the reading side, the end of what was sent reads as 0.
    match recv_now(stream, buf) {
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => None,
        Ok(n) => {
            *drained += n;
            Some(Ok(n))
        }
        r => Some(r),
    }
}

/// Reads one connection to its end (or, once `stop` is cancelled, to what it has sent so far),
/// noting in `last` when it last sent something (ms after `epoch`).
async fn connection(
    mut stream: UnixStream,
    input: &str,
    ctx: &SourceContext,
    stop: CancellationToken,
    last: &AtomicU64,
    epoch: Instant,
) {
    let mut encoder = Encoder::new(ctx.enrichment.clone(), input);
    let mut framer = Framer::new(ctx.max_frame());
    let mut buf = vec![0u8; CONN_READ_BUF];
    let mut cancelled = false;
    let mut drained = 0;
    loop {
        let read = if cancelled {
            match read_buffered(&stream, &mut buf, &mut drained, input) {
                Some(read) => read,
                None => break,
            }
        } else {
            tokio::select! {
                biased;
                r = stream.read(&mut buf) => r,
                _ = stop.cancelled() => {
                    cancelled = true;
                    // The writer's next write fails (EPIPE) from now on, rather than going into a
                    // buffer nobody reads: a wrapper then connects again or uses the file.
                    shut_reading(&stream);
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
        let mut records = false;
        while !chunk.is_empty() {
            let mut batch = Batch::new();
            let used = framer.feed_some(chunk, |frame| {
                ctx.encode(&mut encoder, frame, now, &mut batch);
                batch.buf.len() < BATCH_BYTES
            });
            chunk = &chunk[used..];
            if !batch.is_empty() {
                records = true;
                if ctx.send(batch).await.is_err() {
                    return;
                }
            }
        }
        // A whole record (or a cut piece of one) is progress, bytes alone are not: a connection
        // that dribbles a byte now and then stays idle. Stored after the pipeline took it:
        // waiting on a full pipeline is not being idle.
        if records {
            last.store(millis_since(epoch), Ordering::Relaxed);
        }
    }
    let mut batch = Batch::new();
    let now = crate::timefmt::now_ms();
    framer.finish(|frame| ctx.encode(&mut encoder, frame, now, &mut batch));
    if !batch.is_empty() {
        let _ = ctx.send(batch).await; // A closed pipeline means shutdown ran out of time.
    }
}
