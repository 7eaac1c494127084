//! (the sidecar) The file source: follows a file with `tail -F` semantics on its own thread.
//!
//! inotify (through `notify`, on the parent folder) wakes it as soon as the file changes; a slow
//! poll is the safety net for events inotify cannot see. It survives the file not existing yet,
//! being renamed away and recreated, truncated, replaced in place, and deleted. A file renamed
//! away or deleted keeps being read, beside the path's new file, until it has had no new bytes
//! for `--rotate-wait`: a writer that still holds it open loses nothing. Each file is identified
//! by (dev, inode) and a fingerprint of the bytes before its offset; every file being read is in
//! the checkpoint, which moves with each delivered batch.

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
use crate::checkpoint::{self, Checkpoint, Fingerprint, Position};
use crate::framing::Framer;
use crate::nofollow::{self, OpenError};
use crate::record::Encoder;
use crate::source::{BATCH_BYTES, SourceContext};

/// The safety-net poll: catches what inotify missed (events lost on an overflowing inotify
/// queue, a path that became followable again). Once a second, like busybox's tail, so idle costs
/// one wake-up a second.
pub const POLL_INTERVAL: Duration = Duration::from_secs(1);

/// The poll when inotify is not available at all.
pub const FALLBACK_POLL_INTERVAL: Duration = Duration::from_millis(100);

/// The poll while a rotated file is still being read: inotify on the folder does not report
/// writes to a file renamed out of it or deleted, so those are read this often (only for the
/// `--rotate-wait` after a rotation; an idle hooklog is back to `POLL_INTERVAL`).
pub const ROTATED_POLL_INTERVAL: Duration = Duration::from_millis(100);

/// `--rotate-wait`'s default: how long a rotated file must go without new bytes before it is
/// closed. Fluent Bit's `Rotate_Wait` default.
pub const DEFAULT_ROTATE_WAIT: Duration = Duration::from_secs(5);

/// Rotated files read at once, beside the followed one. Past it the oldest is read to its end
/// and closed early (with a warning): bytes written to it later are not read. Eight rotations
/// within `--rotate-wait` is far past what logrotate or an application reopening on a signal do.
pub const MAX_ROTATED: usize = checkpoint::MAX_FILES - 1;

/// Bytes read per `read` call.
const READ_BUF: usize = 64 * 1024;

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
    /// How long a rotated file is read after its last new bytes.
    rotate_wait: Duration,
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
    /// Asks the source to read what its files hold now (not what is appended after), then stop.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = self.wake.try_send(()); // Full means a wake-up is already queued.
    }
}

/// A file being read: the followed one, or one rotated away that may still be written.
struct Tracked {
    file: File,
    dev: u64,
    ino: u64,
    /// Its birth time, where the filesystem keeps one (`checkpoint::birth`).
    born: Option<u64>,
    /// Bytes read so far.
    offset: u64,
    /// Bytes whose records were sent (`offset` minus what the framer holds).
    sent: u64,
    /// The bytes before `sent`, for the checkpoint.
    sent_fp: Fingerprint,
    /// The bytes before `offset`: a file whose bytes there changed was replaced in place.
    read_fp: Fingerprint,
    /// Each file has its own framer and encoder: a rotated file's unfinished line is never
    /// glued to the new file's first line, nor a split line's parts numbered across files.
    framer: Framer,
    encoder: Encoder,
    /// When bytes last arrived (or the file was rotated).
    last_data: Instant,
    /// Set when stopping: read up to here, not further.
    limit: Option<u64>,
    /// Where it was found, for messages.
    name: PathBuf,
}

/// Everything one source reads.
struct Files {
    /// Rotated files, oldest first, then the followed file when `followed` (always last).
    list: Vec<Tracked>,
    /// The last entry of `list` is the file at the path.
    followed: bool,
    /// Number of the next batch.
    seq: u64,
    /// The read buffer.
    buf: Vec<u8>,
}

impl FileSource {
    /// Prepares to follow `path`, keeping its checkpoint at `checkpoint`; a rotated file is read
    /// until it has had no new bytes for `rotate_wait`.
    pub fn new(
        path: PathBuf,
        checkpoint: Arc<Checkpoint>,
        ctx: SourceContext,
        rotate_wait: Duration,
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
            rotate_wait,
            warned_unusable: AtomicBool::new(false),
        };
        (src, handle)
    }

    /// Follows the file until stopped; meant for its own thread. Returns when stopped (after
    /// reading every file up to where it ended at the stop) or when the pipeline is gone.
    pub fn run(self) -> anyhow::Result<()> {
        let mut files = Files {
            list: Vec::new(),
            followed: false,
            seq: 0,
            buf: vec![0u8; READ_BUF],
        };
        // Positions from the last run, used by the first open of the path.
        let mut saved = self.resume_rotated(&mut files);
        let mut stopping = false;
        loop {
            // Read the flag before reading: whatever was written before the stop is read.
            if !stopping && self.stop.load(Ordering::SeqCst) {
                stopping = true;
                for t in &mut files.list {
                    set_limit(t);
                }
            }
            // Rotated files first: a writer's older lines come before its newer ones.
            let rotated = files.list.len() - usize::from(files.followed);
            let mut i = 0;
            while i < rotated.min(files.list.len()) {
                self.check_replaced(&mut files, i)?;
                self.drain(&mut files, i)?;
                i += 1;
            }
            if !files.followed && self.follow(&mut files, saved.as_deref(), stopping)? {
                saved = None;
            }
            if files.followed {
                let i = files.list.len() - 1;
                self.check_replaced(&mut files, i)?;
                self.drain(&mut files, i)?;
                let t = &files.list[i];
                // The path itself, not what a symlink put in its place points to.
                let same = std::fs::symlink_metadata(&self.path)
                    .is_ok_and(|m| (m.dev(), m.ino()) == (t.dev, t.ino));
                if !same {
                    // Renamed away, replaced or deleted: keep reading it while following the
                    // path again.
                    tracing::info!(path = %self.path.display(), "file rotated or removed, following the path");
                    files.followed = false;
                    files.list[i].last_data = Instant::now();
                    self.bound_rotated(&mut files)?;
                    continue;
                }
            }
            if stopping {
                for i in 0..files.list.len() {
                    self.finish_line(&mut files, i)?;
                }
                return Ok(());
            }
            self.close_idle(&mut files)?;
            if self.checkpoint.failing() {
                self.checkpoint.save();
            }
            let poll = if files.list.len() > usize::from(files.followed) {
                self.poll.min(ROTATED_POLL_INTERVAL)
            } else {
                self.poll
            };
            match self.wake.recv_timeout(poll) {
                Ok(()) | Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return Ok(()),
            }
        }
    }

    /// Opens the path to follow it, when a file is there: true then. `saved` is the last run's
    /// positions, for the first open; `stopping` limits the file to what it holds now.
    fn follow(
        &self,
        files: &mut Files,
        saved: Option<&[Position]>,
        stopping: bool,
    ) -> anyhow::Result<bool> {
        let Some(mut t) = self.open(files, saved)? else {
            return Ok(false);
        };
        if stopping {
            set_limit(&mut t);
        }
        // Name it in the checkpoint at the position reading starts from, beside the delivered
        // positions: if it is rotated while hooklog is down, the next run must know it (`open`
        // named a new file before opening it).
        self.checkpoint.announce(files.seq, position(&t));
        files.list.push(t);
        files.followed = true;
        // And in the positions as soon as what was read before it is delivered: an empty batch
        // whose ack travels behind the old file's batches.
        let i = files.list.len() - 1;
        let sent = files.list[i].sent;
        send(self, &mut files.list, &mut files.seq, Batch::new(), i, sent)?;
        Ok(true)
    }

    /// Reads the checkpoint. Files it names that are no longer at the path but still in the same
    /// folder (rotated while hooklog was down) are read again from their saved offsets; the rest
    /// is returned for the first open of the path.
    fn resume_rotated(&self, files: &mut Files) -> Option<Vec<Position>> {
        let saved = self.checkpoint.load();
        if saved.is_empty() {
            return None;
        }
        let at_path = std::fs::metadata(&self.path)
            .ok()
            .map(|m| (m.dev(), m.ino()));
        let entries: Vec<(PathBuf, std::fs::Metadata)> = self
            .path
            .parent()
            .and_then(|dir| std::fs::read_dir(dir).ok())
            .map(|rd| {
                rd.flatten()
                    .filter_map(|e| Some((e.path(), e.metadata().ok()?)))
                    .filter(|(_, m)| m.is_file())
                    .collect()
            })
            .unwrap_or_default();
        for p in &saved {
            if at_path == Some((p.dev, p.ino)) {
                continue;
            }
            let Some((name, m)) = entries
                .iter()
                .find(|(_, m)| (m.dev(), m.ino()) == (p.dev, p.ino))
            else {
                continue;
            };
            let same = p.same_file(m);
            if same == Some(false) {
                tracing::debug!(path = %self.path.display(), file = %name.display(), "a newer file has the inode of a file read before: not read");
                continue;
            }
            // The entry was listed as a regular file; what is opened must still be that file.
            let Ok(mut file) = nofollow::open_read(name) else {
                continue;
            };
            if file
                .metadata()
                .map_or(true, |f| (f.dev(), f.ino()) != (p.dev, p.ino))
            {
                continue;
            }
            let intact =
                m.len() >= p.offset && p.fingerprint.is_none_or(|fp| fp.matches(&file, p.offset));
            let offset = if intact {
                p.offset
            } else if same == Some(true) {
                // The same file (same birth time), truncated or refilled since.
                tracing::warn!(path = %self.path.display(), rotated = %name.display(), offset = p.offset, len = m.len(), "file rotated while hooklog was down was also replaced in place: reading it from its start");
                0
            } else {
                // No birth time to tell: the same file replaced in place, or a new one that got
                // the freed inode. Reading it again could repeat a whole file that was read.
                tracing::warn!(path = %self.path.display(), rotated = %name.display(), offset = p.offset, "not reading a file with the inode of a rotated file: its bytes before the saved offset differ and the filesystem keeps no birth time to tell whether it is the same file");
                continue;
            };
            if file.seek(SeekFrom::Start(offset)).is_err() {
                continue;
            }
            tracing::info!(path = %self.path.display(), rotated = %name.display(), offset, "finishing a file rotated while hooklog was down");
            let fp = match p.fingerprint {
                Some(fp) if offset == p.offset => fp,
                _ => Fingerprint::at(&file, offset).unwrap_or(Fingerprint::EMPTY),
            };
            let t = self.tracked(file, m, offset, fp, name.clone());
            files.list.push(t);
            if files.list.len() >= MAX_ROTATED {
                break;
            }
        }
        Some(saved)
    }

    fn tracked(
        &self,
        file: File,
        m: &std::fs::Metadata,
        offset: u64,
        fp: Fingerprint,
        name: PathBuf,
    ) -> Tracked {
        Tracked {
            file,
            dev: m.dev(),
            ino: m.ino(),
            born: checkpoint::birth(m),
            offset,
            sent: offset,
            sent_fp: fp,
            read_fp: fp,
            framer: Framer::new(self.ctx.max_frame()),
            encoder: Encoder::new(
                self.ctx.enrichment.clone(),
                &format!("file:{}", self.path.display()),
            ),
            last_data: Instant::now(),
            limit: None,
            name,
        }
    }

    /// Opens the path if it exists. A file that is still being read as rotated (renamed back)
    /// continues where it was; the first open of a run resumes from the checkpoint when it names
    /// this very file with the same bytes before its offset; any other file is read from its
    /// start.
    fn open(
        &self,
        files: &mut Files,
        saved: Option<&[Position]>,
    ) -> anyhow::Result<Option<Tracked>> {
        // Anything but a regular file (a symlink a peer planted, a folder put in its place, a
        // FIFO whose open would block) is waited out like a missing file, with one warning, and
        // so is a file hooklog may not open just now.
        let before = match std::fs::symlink_metadata(&self.path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Ok(self.unusable(&e.to_string())),
            Ok(m) => match nofollow::refusal(m.file_type()) {
                Some(why) => return Ok(self.unusable(why)),
                None => m,
            },
        };
        // Name a new file in the checkpoint before opening it, so that no moment exists when
        // hooklog has it open and a SIGKILL leaves a checkpoint that does not know it (it could
        // then be rotated away before the next start). A file already being read, or one the
        // saved checkpoint names, keeps its position; `run` names the opened file again with
        // the position reading starts from.
        let known = files
            .list
            .iter()
            .any(|t| (t.dev, t.ino) == (before.dev(), before.ino()))
            || saved
                .unwrap_or_default()
                .iter()
                .any(|p| p.same_file(&before) != Some(false));
        if !known {
            self.checkpoint.announce(
                files.seq,
                Position {
                    dev: before.dev(),
                    ino: before.ino(),
                    offset: 0,
                    fingerprint: Some(Fingerprint::EMPTY),
                    born: checkpoint::birth(&before),
                },
            );
        }
        // Swapped between the look and the open: O_NOFOLLOW and the type of what was opened.
        let mut file = match nofollow::open_read(&self.path) {
            Ok(f) => f,
            Err(OpenError::NotFound) => return Ok(None),
            Err(OpenError::Refused(why)) => return Ok(self.unusable(why)),
            Err(OpenError::Io(e)) => return Ok(self.unusable(&e.to_string())),
        };
        self.warned_unusable.store(false, Ordering::Relaxed);
        let m = file.metadata()?;
        tracing::debug!(path = %self.path.display(), ino = m.ino(), "opened");
        if let Some(i) = files
            .list
            .iter()
            .position(|t| (t.dev, t.ino) == (m.dev(), m.ino()))
        {
            return Ok(Some(files.list.remove(i)));
        }
        let mut offset = 0;
        let mut fp = Fingerprint::EMPTY;
        if let Some(p) = saved
            .unwrap_or_default()
            .iter()
            .find(|p| (p.dev, p.ino) == (m.dev(), m.ino()))
        {
            if p.same_file(&m) == Some(false) {
                tracing::info!(path = %self.path.display(), "a new file got the inode of a file read before, reading it from its start");
            } else if p.offset > m.len() {
                tracing::warn!(path = %self.path.display(), offset = p.offset, len = m.len(), "file shorter than its checkpoint, reading from its start");
            } else if p.fingerprint.is_some_and(|f| !f.matches(&file, p.offset)) {
                tracing::warn!(path = %self.path.display(), offset = p.offset, "file content replaced while hooklog was down (or a new file reused the inode), reading from its start");
            } else {
                offset = p.offset;
                fp = Fingerprint::at(&file, offset).unwrap_or(Fingerprint::EMPTY);
                file.seek(SeekFrom::Start(offset))?;
                tracing::info!(path = %self.path.display(), offset, "resuming from checkpoint");
            }
        }
        Ok(Some(self.tracked(file, &m, offset, fp, self.path.clone())))
    }

    /// Notes (once, until the file is usable again) that the path cannot be followed now.
    fn unusable(&self, why: &str) -> Option<Tracked> {
        if !self.warned_unusable.swap(true, Ordering::Relaxed) {
            tracing::warn!(path = %self.path.display(), why, "cannot follow the file now, waiting for it");
        }
        None
    }

    /// Notices a file truncated (shorter than what was read) or replaced in place (other bytes
    /// before the offset: truncated and refilled past it between two reads): its unfinished
    /// line is ended and it is read again from its start.
    fn check_replaced(&self, files: &mut Files, i: usize) -> anyhow::Result<()> {
        let t = &files.list[i];
        if t.offset == 0 {
            return Ok(());
        }
        let len = t.file.metadata().map(|m| m.len()).unwrap_or(t.offset);
        let why = if len < t.offset {
            "file truncated, reading from its start"
        } else if !t.read_fp.matches(&t.file, t.offset) {
            "file content replaced, reading from its start"
        } else {
            return Ok(());
        };
        tracing::warn!(path = %t.name.display(), from = t.offset, len, "{why}");
        self.finish_line(files, i)?;
        let t = &mut files.list[i];
        t.file.seek(SeekFrom::Start(0))?;
        t.offset = 0;
        t.sent = 0;
        t.sent_fp = Fingerprint::EMPTY;
        t.read_fp = Fingerprint::EMPTY;
        Ok(())
    }

    /// Reads file `i` to its current end (or its stop limit), sending batches as they fill.
    fn drain(&self, files: &mut Files, i: usize) -> anyhow::Result<()> {
        // A batch is sent once it passes BATCH_BYTES, after a record of at most max_frame bytes.
        let cap = BATCH_BYTES + self.ctx.max_frame();
        let mut batch = Batch::with_capacity(cap);
        let mut read_any = false;
        loop {
            let t = &mut files.list[i];
            let want = match t.limit {
                Some(l) => (l.saturating_sub(t.offset) as usize).min(files.buf.len()),
                None => files.buf.len(),
            };
            if want == 0 {
                break;
            }
            let n = match t.file.read(&mut files.buf[..want]) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    return Err(e).with_context(|| format!("cannot read {}", t.name.display()));
                }
            };
            read_any = true;
            t.offset += n as u64;
            self.ctx.activity.touch();
            let now = crate::timefmt::now_ms();
            let mut chunk = &files.buf[..n];
            while !chunk.is_empty() {
                let Tracked {
                    framer, encoder, ..
                } = &mut files.list[i];
                let used = framer.feed_some(chunk, |frame| {
                    self.ctx.encode(encoder, frame, now, &mut batch);
                    batch.buf.len() < BATCH_BYTES
                });
                chunk = &chunk[used..];
                if batch.buf.len() >= BATCH_BYTES {
                    let t = &files.list[i];
                    let held = (t.framer.pending_len() + chunk.len()) as u64;
                    let sent = t.offset - held;
                    let full = std::mem::replace(&mut batch, Batch::with_capacity(cap));
                    // `chunk` borrows the read buffer: send without touching it.
                    send(self, &mut files.list, &mut files.seq, full, i, sent)?;
                    // A stop asked during a long catch-up bounds this file where it ends now.
                    if self.stop.load(Ordering::SeqCst) && files.list[i].limit.is_none() {
                        set_limit(&mut files.list[i]);
                    }
                }
            }
        }
        let t = &mut files.list[i];
        if read_any {
            t.last_data = Instant::now();
            t.read_fp = Fingerprint::at(&t.file, t.offset).unwrap_or(Fingerprint::EMPTY);
        }
        if !batch.is_empty() {
            let sent = t.offset - t.framer.pending_len() as u64;
            send(self, &mut files.list, &mut files.seq, batch, i, sent)?;
        }
        Ok(())
    }

    /// Ends file `i`'s unfinished line (rotation, truncation, stop): it comes out flagged
    /// `no_newline`.
    fn finish_line(&self, files: &mut Files, i: usize) -> anyhow::Result<()> {
        let mut batch = Batch::new();
        let now = crate::timefmt::now_ms();
        let Tracked {
            framer,
            encoder,
            offset,
            ..
        } = &mut files.list[i];
        framer.finish(|frame| self.ctx.encode(encoder, frame, now, &mut batch));
        let offset = *offset;
        if !batch.is_empty() {
            send(self, &mut files.list, &mut files.seq, batch, i, offset)?;
        }
        Ok(())
    }

    /// Closes rotated files that had no new bytes for `--rotate-wait`.
    fn close_idle(&self, files: &mut Files) -> anyhow::Result<()> {
        let mut i = 0;
        while i < files.list.len() - usize::from(files.followed) {
            if files.list[i].last_data.elapsed() >= self.rotate_wait {
                self.finish_line(files, i)?;
                let t = files.list.remove(i);
                tracing::debug!(path = %self.path.display(), file = %t.name.display(), "rotated file idle, closed");
            } else {
                i += 1;
            }
        }
        Ok(())
    }

    /// Keeps at most `MAX_ROTATED` rotated files: past it the oldest, already read to its end,
    /// is closed.
    fn bound_rotated(&self, files: &mut Files) -> anyhow::Result<()> {
        while files.list.len() - usize::from(files.followed) > MAX_ROTATED {
            self.drain(files, 0)?;
            self.finish_line(files, 0)?;
            let t = files.list.remove(0);
            tracing::warn!(path = %self.path.display(), file = %t.name.display(), max = MAX_ROTATED, "too many rotated files still being read: closed the oldest; bytes written to it from now on are not read");
        }
        Ok(())
    }
}

/// Bounds a file's reading at a stop to where it ends now.
fn set_limit(t: &mut Tracked) {
    let len = t.file.metadata().map(|m| m.len()).unwrap_or(t.offset);
    t.limit = Some(len.max(t.offset));
}

/// Where a file's delivered records end.
fn position(t: &Tracked) -> Position {
    Position {
        dev: t.dev,
        ino: t.ino,
        offset: t.sent,
        fingerprint: Some(t.sent_fp),
        born: t.born,
    }
}

/// Sends a batch of file `i`'s records, which bring it to `sent`, with an ack naming where
/// every file being read stands: the checkpoint moves only once these records are delivered.
fn send(
    src: &FileSource,
    list: &mut [Tracked],
    seq: &mut u64,
    mut batch: Batch,
    i: usize,
    sent: u64,
) -> anyhow::Result<()> {
    let t = &mut list[i];
    if t.sent != sent {
        t.sent = sent;
        t.sent_fp = Fingerprint::at(&t.file, sent).unwrap_or(Fingerprint::EMPTY);
    }
    *seq += 1;
    batch.ack = Some(Ack {
        checkpoint: src.checkpoint.clone(),
        seq: *seq,
        positions: list.iter().map(position).collect(),
    });
    // While the pipeline is full this file counts as behind (a peer's announcement may be in it).
    src.ctx
        .blocking_send(batch)
        .map_err(|_| anyhow::anyhow!("pipeline closed"))
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
