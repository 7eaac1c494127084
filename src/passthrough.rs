//! The hook command's output passed through to hooklog's own stdout and stderr (the kubelet keeps
//! a failed hook's output in its event), from a thread per stream: a stdout nobody reads blocks
//! that thread only, never the wrapper's runtime, its `--timeout` or the signals it forwards.
//!
//! Each stream has a queue of [`QUEUE_LINES`] lines; when it is full (nobody reads), lines are
//! left out of the pass-through and counted. The records sent to the daemon are not affected.

use std::fs::File;
use std::io::Write;
use std::os::fd::AsFd;
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// Lines queued per stream in front of a slow reader (each at most the hook's 8 KiB line cut:
/// at most 2 MiB per stream).
pub const QUEUE_LINES: usize = 256;

/// One stream's writer: a queue and the thread that empties it.
#[derive(Debug)]
struct Stream {
    /// Into the thread; `None` once finished.
    tx: Option<SyncSender<Vec<u8>>>,
    /// Lines left out because the queue was full.
    dropped: u64,
    /// Set by the thread once it has written (or given up on) everything.
    done: Arc<(Mutex<bool>, Condvar)>,
}

/// Hooklog's stdout and stderr, written from threads of their own.
#[derive(Debug)]
pub struct PassThrough {
    stdout: Stream,
    stderr: Stream,
}

impl PassThrough {
    /// Starts the two writers. A stream that cannot be duplicated or given a thread is not
    /// passed through.
    pub fn start() -> Self {
        PassThrough {
            stdout: Stream::start(std::io::stdout().as_fd().try_clone_to_owned().ok(), "stdout"),
            stderr: Stream::start(std::io::stderr().as_fd().try_clone_to_owned().ok(), "stderr"),
        }
    }

    /// Queues `line` (with a newline unless `partial`) for `stream` (`stdout` or `stderr`);
    /// never blocks.
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
                "hooklog: {} lines of the hook's stdout not passed through: nobody read hooklog's stdout\n",
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
    fn start(out: Option<std::os::fd::OwnedFd>, name: &str) -> Self {
        let done = Arc::new((Mutex::new(false), Condvar::new()));
        let tx = out.and_then(|fd| {
            let (tx, rx) = sync_channel(QUEUE_LINES);
            let thread_done = done.clone();
            std::thread::Builder::new()
                .name(format!("hooklog-{name}"))
                .spawn(move || {
                    write_all(File::from(fd), rx);
                    let (lock, cv) = &*thread_done;
                    *lock.lock().unwrap_or_else(|e| e.into_inner()) = true;
                    cv.notify_all();
                })
                .ok()
                .map(|_| tx)
        });
        Stream {
            tx,
            dropped: 0,
            done,
        }
    }

    fn write(&mut self, bytes: Vec<u8>) {
        let Some(tx) = &self.tx else { return };
        match tx.try_send(bytes) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => self.dropped += 1,
            // The thread stopped writing (the stream is closed): nothing to pass through to.
            Err(TrySendError::Disconnected(_)) => {}
        }
    }

    fn finish(&mut self, by: Instant) {
        if self.tx.take().is_none() {
            return;
        }
        let (lock, cv) = &*self.done;
        let mut done = lock.lock().unwrap_or_else(|e| e.into_inner());
        while !*done {
            let now = Instant::now();
            if now >= by {
                return;
            }
            done = cv
                .wait_timeout(done, by - now)
                .map(|(g, _)| g)
                .unwrap_or_else(|e| e.into_inner().0);
        }
    }
}

/// Writes what comes until the queue ends, or the stream is gone (EPIPE: nobody to tell).
fn write_all(mut out: File, rx: Receiver<Vec<u8>>) {
    for bytes in rx {
        if out.write_all(&bytes).is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_queue_drops_and_counts_instead_of_blocking() {
        // A stream whose thread never empties its queue: a pipe nobody reads.
        let (r, w) = nix::unistd::pipe().unwrap();
        let mut s = Stream::start(Some(w), "test");
        let line = vec![b'x'; 8192];
        let start = Instant::now();
        for _ in 0..(QUEUE_LINES + 100) {
            s.write(line.clone());
        }
        assert!(start.elapsed() < Duration::from_secs(5));
        assert!(s.dropped > 0, "{}", s.dropped);
        s.finish(Instant::now() + Duration::from_millis(10));
        drop(r);
    }
}
