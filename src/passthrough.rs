//! (the sidecar) The hook command's output passed through to hooklog's own stdout and stderr (the kubelet keeps
//! a failed hook's output in its event), from a thread per stream: a stdout nobody reads blocks
//! that thread only, never the wrapper's runtime, its `--timeout` or the signals it forwards.
//!
//! Each stream has a queue of [`QUEUE_LINES`] lines. A full queue slows the command down like a
//! full pipe would, as long as its thread makes progress; once one write has been blocked for
//! [`STALL`] (nobody reads), lines are left out of the pass-through and counted instead. The
//! records sent to the daemon are not affected.

use std::fs::File;
use std::io::Write;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

/// Lines queued per stream in front of a slow reader (each at most the hook's 8 KiB line cut:
/// at most 2 MiB per stream).
pub const QUEUE_LINES: usize = 256;

/// How long one write to hooklog's stdout or stderr may block before the stream counts as not
/// read: its lines are then dropped from the pass-through rather than holding up the command.
pub const STALL: Duration = Duration::from_secs(1);

/// How long one line of hooklog's own (a warning, the wrapper's verdict) may wait for a
/// stderr nobody reads: the wrapper's exit must not wait on its reader (issue 25.6: it blocked
/// 12 s, then panicked on EPIPE).
pub const OWN_LINE_WAIT: Duration = Duration::from_millis(200);

/// Lines of hooklog's own queued in front of stderr; past it, they are dropped.
const OWN_QUEUE_LINES: usize = 256;

/// Set while a line of hooklog's own has waited past [`OWN_LINE_WAIT`]: the lines after it are
/// queued without waiting (or dropped when the queue is full) until it is written.
static OWN_STDERR_STUCK: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// One line of hooklog's own, and where to say it was written.
type OwnLine = (Vec<u8>, SyncSender<()>);

/// The one thread that writes hooklog's own lines to stderr, in order.
fn own_writer() -> Option<&'static SyncSender<OwnLine>> {
    static WRITER: std::sync::OnceLock<Option<SyncSender<OwnLine>>> = std::sync::OnceLock::new();
    WRITER
        .get_or_init(|| {
            let (tx, rx) = sync_channel::<OwnLine>(OWN_QUEUE_LINES);
            std::thread::Builder::new()
                .name("own-stderr".into())
                .spawn(move || {
                    let mut err = std::io::stderr();
                    for (bytes, done) in rx {
                        // A stderr that fails (EPIPE: its reader left) leaves nothing to tell.
                        let _ = err.write_all(&bytes);
                        OWN_STDERR_STUCK.store(false, Ordering::Relaxed);
                        // The waiter may have given up already.
                        let _ = done.try_send(());
                    }
                })
                .ok()
                .map(|_| tx)
        })
        .as_ref()
}

/// Writes `bytes` (hooklog's own words, not the command's) to stderr through one thread of its
/// own, in order, waiting at most [`OWN_LINE_WAIT`] for it: never blocks longer, never panics.
/// While a line waits past that, the next ones are queued without waiting, and dropped when
/// [`OWN_QUEUE_LINES`] already wait.
pub fn own_stderr(bytes: Vec<u8>) {
    let Some(tx) = own_writer() else {
        return;
    };
    let (done_tx, done_rx) = sync_channel(1);
    if tx.try_send((bytes, done_tx)).is_err() {
        return;
    }
    if OWN_STDERR_STUCK.load(Ordering::Relaxed) {
        return;
    }
    if done_rx.recv_timeout(OWN_LINE_WAIT).is_err() {
        OWN_STDERR_STUCK.store(true, Ordering::Relaxed);
    }
}

/// `own_stderr` as an [`std::io::Write`], for the tracing subscriber: each write goes whole, or
/// is dropped.
#[derive(Debug, Default, Clone, Copy)]
pub struct OwnStderr;

impl Write for OwnStderr {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        own_stderr(buf.to_vec());
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// One stream's writer: a queue and the thread that empties it.
#[derive(Debug)]
struct Stream {
    /// Into the thread; `None` once finished or when the stream could not be set up.
    tx: Option<SyncSender<Vec<u8>>>,
    /// Shared with the thread.
    state: Arc<StreamState>,
    /// Lines left out because the stream was not read.
    dropped: u64,
}

#[derive(Debug, Default)]
struct StreamState {
    /// Lines in the queue or being written.
    queued: AtomicUsize,
    /// When the write in progress began (ms after `epoch`, plus one), 0 while none is.
    busy_since: AtomicU64,
    /// Set once the thread has written (or given up on) everything.
    done: Mutex<bool>,
    /// Tells `finish` about `done`.
    done_cv: Condvar,
}

/// Hooklog's stdout and stderr, written from threads of their own.
#[derive(Debug)]
pub struct PassThrough {
    stdout: Stream,
    stderr: Stream,
    /// Reference point for `busy_since`.
    epoch: Instant,
    /// Told each time a line is written (the queue has room again).
    written: Arc<Notify>,
}

impl PassThrough {
    /// Starts the two writers. A stream that cannot be duplicated or given a thread is not
    /// passed through.
    pub fn start() -> Self {
        let epoch = Instant::now();
        let written = Arc::new(Notify::new());
        let dup = |fd: std::os::fd::BorrowedFd<'_>| fd.try_clone_to_owned().ok();
        PassThrough {
            stdout: Stream::start(dup(std::io::stdout().as_fd()), "stdout", epoch, &written),
            stderr: Stream::start(dup(std::io::stderr().as_fd()), "stderr", epoch, &written),
            epoch,
            written,
        }
    }

    /// True when a line can be queued now: neither queue is full, or the full one is not read
    /// (its lines are dropped).
    pub fn has_room(&self) -> bool {
        self.stdout.has_room(self.epoch) && self.stderr.has_room(self.epoch)
    }

    /// Resolves once a line was written, or by the time a full queue's write has stalled
    /// [`STALL`] (call `has_room` again).
    pub async fn room(&self) {
        let notified = self.written.notified();
        // Without a write in progress now, one may begin right after: look again within STALL.
        let by = [&self.stdout, &self.stderr]
            .iter()
            .filter_map(|s| s.stalled_at(self.epoch))
            .min()
            .unwrap_or_else(|| Instant::now() + STALL);
        // Either way, has_room is asked again.
        let _ = tokio::time::timeout_at(by.into(), notified).await;
    }

    /// Queues `line` (with a newline unless `partial`) for `stream` (`stdout` or `stderr`);
    /// never blocks. When that stream is not read and its queue is full, the line is dropped and
    /// counted.
    pub fn write(&mut self, stream: &str, line: &str, partial: bool) {
        let mut bytes = Vec::with_capacity(line.len() + 1);
        bytes.extend_from_slice(line.as_bytes());
        if !partial {
            bytes.push(b'\n');
        }
        if stream == "stdout" {
            self.stdout.write(bytes)
        } else {
            self.stderr.write(bytes)
        }
    }

    /// Ends both queues and waits until what they hold is written, or `within` has passed (a
    /// stream nobody reads; the process then exits without it). Returns the lines left out of
    /// stdout's pass-through, and of stderr's.
    pub fn finish(mut self, within: Duration) -> (u64, u64) {
        let by = Instant::now() + within;
        if self.stdout.dropped > 0 {
            let note = format!(
                "hooklog: {} lines of the hook's stdout not passed through: hooklog's stdout was not read\n",
                self.stdout.dropped
            );
            self.stderr.write(note.into_bytes());
        }
        let dropped = (self.stdout.dropped, self.stderr.dropped);
        self.stdout.finish(by);
        self.stderr.finish(by);
        dropped
    }
}

impl Stream {
    fn start(out: Option<OwnedFd>, name: &str, epoch: Instant, written: &Arc<Notify>) -> Self {
        let state = Arc::new(StreamState::default());
        let tx = out.and_then(|fd| {
            let (tx, rx) = sync_channel(QUEUE_LINES);
            let state = state.clone();
            let written = written.clone();
            std::thread::Builder::new()
                .name(format!("hooklog-{name}"))
                .spawn(move || {
                    write_all(File::from(fd), rx, &state, epoch, &written);
                    *state.done.lock().unwrap_or_else(|e| e.into_inner()) = true;
                    state.done_cv.notify_all();
                })
                .ok()
                .map(|_| tx)
        });
        Stream {
            tx,
            state,
            dropped: 0,
        }
    }

    /// When the write in progress will have stalled [`STALL`], if the queue is full.
    fn stalled_at(&self, epoch: Instant) -> Option<Instant> {
        if self.tx.is_none() || self.state.queued.load(Ordering::Relaxed) < QUEUE_LINES {
            return None;
        }
        match self.state.busy_since.load(Ordering::Relaxed) {
            0 => None,
            since => Some(epoch + Duration::from_millis(since - 1) + STALL),
        }
    }

    fn has_room(&self, epoch: Instant) -> bool {
        if self.tx.is_none() || self.state.queued.load(Ordering::Relaxed) < QUEUE_LINES {
            return true;
        }
        self.stalled_at(epoch)
            .is_some_and(|at| Instant::now() >= at)
    }

    fn write(&mut self, bytes: Vec<u8>) {
        let Some(tx) = &self.tx else { return };
        // Full (the caller saw the stream stalled): left out.
        if self.state.queued.load(Ordering::Relaxed) >= QUEUE_LINES {
            self.dropped += 1;
            return;
        }
        self.state.queued.fetch_add(1, Ordering::Relaxed);
        match tx.try_send(bytes) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => {
                self.state.queued.fetch_sub(1, Ordering::Relaxed);
                self.dropped += 1;
            }
            // The thread stopped writing (the stream is closed): nothing to pass through to.
            Err(TrySendError::Disconnected(_)) => {
                self.state.queued.fetch_sub(1, Ordering::Relaxed);
            }
        }
    }

    fn finish(&mut self, by: Instant) {
        if self.tx.take().is_none() {
            return;
        }
        let mut done = self.state.done.lock().unwrap_or_else(|e| e.into_inner());
        while !*done {
            let now = Instant::now();
            if now >= by {
                return;
            }
            done = self
                .state
                .done_cv
                .wait_timeout(done, by - now)
                .map(|(g, _)| g)
                .unwrap_or_else(|e| e.into_inner().0);
        }
    }
}

/// Writes what comes until the queue ends, or the stream is gone (EPIPE: nobody to tell).
fn write_all(
    mut out: File,
    rx: Receiver<Vec<u8>>,
    state: &StreamState,
    epoch: Instant,
    written: &Notify,
) {
    for bytes in rx {
        let since = epoch.elapsed().as_millis() as u64 + 1;
        state.busy_since.store(since, Ordering::Relaxed);
        let ok = out.write_all(&bytes).is_ok();
        state.busy_since.store(0, Ordering::Relaxed);
        state.queued.fetch_sub(1, Ordering::Relaxed);
        written.notify_one();
        if !ok {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stream_nobody_reads_drops_and_counts_once_stalled() {
        // A pipe nobody reads, of one page: its thread blocks in the first line's write (8 KiB)
        // and never drains another, so the queue's state below depends on no scheduling.
        let (r, w) = nix::unistd::pipe().unwrap();
        nix::fcntl::fcntl(&w, nix::fcntl::FcntlArg::F_SETPIPE_SZ(4096)).unwrap();
        let epoch = Instant::now();
        let mut s = Stream::start(Some(w), "test", epoch, &Arc::new(Notify::new()));
        let line = vec![b'x'; 8192];
        let start = Instant::now();
        s.write(line.clone());
        assert!(wait(|| s.state.busy_since.load(Ordering::Relaxed) != 0));
        // Fill the queue behind it. A line written below the bound is queued, never dropped,
        // however slowly this loop runs (under load the fill alone can outlast STALL).
        while s.state.queued.load(Ordering::Relaxed) < QUEUE_LINES {
            s.write(line.clone());
        }
        assert_eq!(s.dropped, 0);
        // Full and not yet stalled STALL: no room. Asked with the clock read after has_room's
        // own, so a stall that ends in between cannot fail it.
        let stalled_at = s.stalled_at(epoch);
        let room = s.has_room(epoch);
        let now = Instant::now();
        assert!(
            !room || stalled_at.is_some_and(|at| now >= at),
            "room in a full queue before its write stalled"
        );
        // Room again once the write has stalled: lines are now dropped, not queued.
        assert!(wait(|| s.has_room(epoch)));
        // `busy_since` keeps whole milliseconds: the stall may be seen up to 1 ms early.
        assert!(
            start.elapsed() + Duration::from_millis(1) >= STALL,
            "{:?}",
            start.elapsed()
        );
        assert_eq!(s.dropped, 0);
        s.write(line.clone());
        assert_eq!(s.dropped, 1);
        s.finish(Instant::now() + Duration::from_millis(10));
        drop(r);
    }

    fn wait(mut f: impl FnMut() -> bool) -> bool {
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(10) {
            if f() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        false
    }
}
