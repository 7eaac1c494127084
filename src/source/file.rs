//! The file source: follows a file with `tail -F` semantics on its own thread.
//!
//! inotify (through `notify`, on the parent folder) wakes it as soon as the file changes; a slow
//! poll is the safety net for events inotify cannot see. It survives the file not existing yet,
//! being renamed away and recreated (the old file's unread bytes come first), truncated, and
//! deleted. The file is identified by (dev, inode); its delivered position is checkpointed.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TrySendError, sync_channel};
use std::time::{Duration, Instant};

use anyhow::Context;
use notify::Watcher;

use crate::batch::{Ack, Batch};
use crate::framing::Framer;
use crate::record::Encoder;
use crate::source::checkpoint::{Checkpoint, Position};
use crate::source::{BATCH_BYTES, SourceContext};

/// The safety-net poll: catches what inotify missed (events lost on an overflowing inotify
/// queue, a path that became followable again). Once a second, like busybox's tail, so idle costs
/// one wake-up a second. A truncation is seen while the file is shorter than what was read; one
/// refilled past that between two reads is not.
pub const POLL_INTERVAL: Duration = Duration::from_secs(1);

/// The poll when inotify is not available at all.
pub const FALLBACK_POLL_INTERVAL: Duration = Duration::from_millis(100);

/// Bytes read per `read` call.
const READ_BUF: usize = 64 * 1024;

/// How often the source writes its checkpoint (when it moved). Done on this thread, which
/// already wakes once per `POLL_INTERVAL`, so an idle sidecar has no extra timer to wake for.
pub const CHECKPOINT_EVERY: Duration = Duration::from_secs(1);

/// A followed file's handle on the pipeline.
pub struct FileSource {
    /// The followed path.
    path: PathBuf,
    /// Its checkpoint.
    checkpoint: Arc<Checkpoint>,
    /// Shared pipeline context.
    ctx: SourceContext,
    /// Set when the source should read to the end and stop.
    stop: Arc<AtomicBool>,
    /// Wake-ups from inotify and from `stop`.
    wake: Receiver<()>,
    /// Kept alive for as long as the source runs; dropping it ends the watch.
    _watcher: Option<notify::RecommendedWatcher>,
    /// How long to sleep between polls.
    poll: Duration,
    /// Set once the "cannot follow" warning was given, cleared when the file opens again.
    warned_unusable: AtomicBool,
}

/// Asks a running file source to drain and stop.
#[derive(Debug, Clone)]
pub struct StopHandle {
    stop: Arc<AtomicBool>,
    wake: SyncSender<()>,
}

impl StopHandle {
    /// Asks the source to read what the file holds now, then stop.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = self.wake.try_send(()); // Full means a wake-up is already queued.
    }
}

/// The file that is open now.
struct OpenFile {
    file: File,
    dev: u64,
    ino: u64,
    offset: u64,
}

impl FileSource {
    /// Prepares to follow `path`, keeping its checkpoint at `checkpoint`.
    pub fn new(
        path: PathBuf,
        checkpoint: Arc<Checkpoint>,
        ctx: SourceContext,
    ) -> (Self, StopHandle) {
        let (wake_tx, wake) = sync_channel(1);
        let stop = Arc::new(AtomicBool::new(false));
        let (watcher, poll) = match watch(&path, wake_tx.clone()) {
            Ok(w) => (Some(w), POLL_INTERVAL),
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "inotify unavailable, polling instead");
                (None, FALLBACK_POLL_INTERVAL)
            }
        };
        let handle = StopHandle {
            stop: stop.clone(),
            wake: wake_tx,
        };
        let src = FileSource {
            path,
            checkpoint,
            ctx,
            stop,
            wake,
            _watcher: watcher,
            poll,
            warned_unusable: AtomicBool::new(false),
        };
        (src, handle)
    }

    /// Follows the file until stopped; meant for its own thread. Returns when stopped (after
    /// reading everything the file held) or when the pipeline is gone.
    pub fn run(self) -> anyhow::Result<()> {
        let mut encoder = Encoder::new(
            self.ctx.enrichment.clone(),
            &format!("file:{}", self.path.display()),
        );
        let mut framer = Framer::new(self.ctx.max_frame());
        let mut buf = vec![0u8; READ_BUF];
        let mut current: Option<OpenFile> = None;
        let mut first_open = true;
        let mut saved_at = Instant::now();
        self.finish_rotated_while_down(&mut framer, &mut encoder, &mut buf)?;
        loop {
            // Read the flag before draining: whatever was written before the stop is read.
            let stopping = self.stop.load(Ordering::SeqCst);
            if current.is_none() {
                current = self.open(first_open)?;
                first_open &= current.is_none();
            }
            if let Some(open) = current.as_mut() {
                self.drain(open, &mut framer, &mut encoder, &mut buf)?;
                match std::fs::metadata(&self.path) {
                    Ok(m) if (m.dev(), m.ino()) == (open.dev, open.ino) => {
                        if m.len() < open.offset {
                            tracing::warn!(path = %self.path.display(), from = open.offset, to = m.len(), "file truncated, reading from its start");
                            self.finish_line(open, &mut framer, &mut encoder)?;
                            open.file.seek(SeekFrom::Start(0))?;
                            open.offset = 0;
                            continue;
                        }
                    }
                    Ok(_) | Err(_) => {
                        // Renamed away, replaced or deleted: finish the old file, then follow the
                        // path again.
                        self.drain(open, &mut framer, &mut encoder, &mut buf)?;
                        self.finish_line(open, &mut framer, &mut encoder)?;
                        tracing::info!(path = %self.path.display(), "file rotated or removed, following the path");
                        current = None;
                        continue;
                    }
                }
            }
            if saved_at.elapsed() >= CHECKPOINT_EVERY {
                saved_at = Instant::now();
                self.checkpoint.save();
            }
            if stopping {
                if let Some(open) = current.as_mut() {
                    self.finish_line(open, &mut framer, &mut encoder)?;
                }
                return Ok(());
            }
            match self.wake.recv_timeout(self.poll) {
                Ok(()) | Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return Ok(()),
            }
        }
    }

    /// Opens the path if it exists. The first open of a run resumes from the checkpoint when it
    /// names this very file; later opens (after rotation) start at the beginning.
    fn open(&self, first: bool) -> anyhow::Result<Option<OpenFile>> {
        // Anything but a regular file (a folder put in its place, a FIFO whose open would block)
        // is waited out like a missing file, and so is a file hooklog may not open just now.
        match std::fs::metadata(&self.path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Ok(self.unusable(&e.to_string())),
            Ok(m) if !m.is_file() => return Ok(self.unusable("not a regular file")),
            Ok(_) => {}
        }
        let mut file = match File::open(&self.path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Ok(self.unusable(&e.to_string())),
        };
        self.warned_unusable.store(false, Ordering::Relaxed);
        let m = file.metadata()?;
        let mut offset = 0;
        if first
            && let Some(p) = self.checkpoint.load()
            && (p.dev, p.ino) == (m.dev(), m.ino())
            && p.offset <= m.len()
        {
            offset = p.offset;
            file.seek(SeekFrom::Start(offset))?;
            tracing::info!(path = %self.path.display(), offset, "resuming from checkpoint");
        }
        self.checkpoint.commit(Position {
            dev: m.dev(),
            ino: m.ino(),
            offset,
        });
        Ok(Some(OpenFile {
            file,
            dev: m.dev(),
            ino: m.ino(),
            offset,
        }))
    }

    /// When the checkpoint names a file that is no longer at the path (rotated while hooklog
    /// was down) but still in the same folder, reads that file's unread tail first.
    fn finish_rotated_while_down(
        &self,
        framer: &mut Framer,
        encoder: &mut Encoder,
        buf: &mut [u8],
    ) -> anyhow::Result<()> {
        let Some(saved) = self.checkpoint.load() else {
            return Ok(());
        };
        let at_path = std::fs::metadata(&self.path)
            .ok()
            .map(|m| (m.dev(), m.ino()));
        if at_path == Some((saved.dev, saved.ino)) {
            return Ok(());
        }
        let Some(dir) = self.path.parent() else {
            return Ok(());
        };
        let Ok(entries) = std::fs::read_dir(dir) else {
            return Ok(());
        };
        let rotated = entries.flatten().find(|e| {
            e.metadata().is_ok_and(|m| {
                m.is_file()
                    && (m.dev(), m.ino()) == (saved.dev, saved.ino)
                    && m.len() >= saved.offset
            })
        });
        let Some(rotated) = rotated else {
            return Ok(());
        };
        let Ok(mut file) = File::open(rotated.path()) else {
            return Ok(());
        };
        file.seek(SeekFrom::Start(saved.offset))?;
        tracing::info!(path = %self.path.display(), rotated = %rotated.path().display(), offset = saved.offset, "finishing a file rotated while hooklog was down");
        let mut open = OpenFile {
            file,
            dev: saved.dev,
            ino: saved.ino,
            offset: saved.offset,
        };
        self.drain(&mut open, framer, encoder, buf)?;
        self.finish_line(&open, framer, encoder)
    }

    /// Notes (once, until the file is usable again) that the path cannot be followed now.
    fn unusable(&self, why: &str) -> Option<OpenFile> {
        if !self.warned_unusable.swap(true, Ordering::Relaxed) {
            tracing::warn!(path = %self.path.display(), why, "cannot follow the file now, waiting for it");
        }
        None
    }

    /// Reads the open file to its current end, sending batches as they fill.
    fn drain(
        &self,
        open: &mut OpenFile,
        framer: &mut Framer,
        encoder: &mut Encoder,
        buf: &mut [u8],
    ) -> anyhow::Result<()> {
        // A batch is sent once it passes BATCH_BYTES, after a record of at most max_frame bytes.
        let cap = BATCH_BYTES + self.ctx.max_frame();
        let mut batch = Batch::with_capacity(cap);
        loop {
            let n = match open.file.read(buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    return Err(e).with_context(|| format!("cannot read {}", self.path.display()));
                }
            };
            open.offset += n as u64;
            self.ctx.activity.touch();
            let now = crate::timefmt::now_ms();
            let mut chunk = &buf[..n];
            while !chunk.is_empty() {
                let used = framer.feed_some(chunk, |frame| {
                    self.ctx.encode(encoder, frame, now, &mut batch);
                    batch.buf.len() < BATCH_BYTES
                });
                chunk = &chunk[used..];
                if batch.buf.len() >= BATCH_BYTES {
                    let held = (framer.pending_len() + chunk.len()) as u64;
                    self.send(
                        std::mem::replace(&mut batch, Batch::with_capacity(cap)),
                        open,
                        open.offset - held,
                    )?;
                }
            }
        }
        if !batch.is_empty() {
            let delivered_to = open.offset - framer.pending_len() as u64;
            self.send(batch, open, delivered_to)?;
        }
        Ok(())
    }

    /// Ends an unfinished line (rotation, truncation, stop): it comes out flagged `no_newline`.
    fn finish_line(
        &self,
        open: &OpenFile,
        framer: &mut Framer,
        encoder: &mut Encoder,
    ) -> anyhow::Result<()> {
        let mut batch = Batch::new();
        let now = crate::timefmt::now_ms();
        framer.finish(|frame| self.ctx.encode(encoder, frame, now, &mut batch));
        if !batch.is_empty() {
            self.send(batch, open, open.offset)?;
        }
        Ok(())
    }

    fn send(&self, mut batch: Batch, open: &OpenFile, offset: u64) -> anyhow::Result<()> {
        batch.ack = Some(Ack {
            checkpoint: self.checkpoint.clone(),
            position: Position {
                dev: open.dev,
                ino: open.ino,
                offset,
            },
        });
        self.ctx
            .tx
            .blocking_send(batch)
            .map_err(|_| anyhow::anyhow!("pipeline closed"))
    }
}

/// Watches the folder holding `path` (so creation and renames are seen too) and wakes the
/// source on any event that names the file.
fn watch(path: &Path, wake: SyncSender<()>) -> notify::Result<notify::RecommendedWatcher> {
    let target = path.to_path_buf();
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
        .to_path_buf();
    let mut watcher = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
        let relevant = match &res {
            Ok(ev) => ev.paths.is_empty() || ev.paths.contains(&target),
            Err(_) => true,
        };
        if relevant {
            match wake.try_send(()) {
                Ok(()) | Err(TrySendError::Full(())) | Err(TrySendError::Disconnected(())) => {}
            }
        }
    })?;
    watcher.watch(&dir, notify::RecursiveMode::NonRecursive)?;
    Ok(watcher)
}
