//! (the sidecar) Checkpoints: how far each file a file source reads has been delivered, kept in a small file
//! next to the followed path (the emptyDir outlives a container restart).
//!
//! The checkpoint moves each time a batch is delivered: the sink that delivers it last rewrites
//! one fixed-size record in place at offset 0 (`pwrite`, no temporary file, no fsync). A killed
//! process leaves the page cache intact and an emptyDir lives and dies with the pod, so that is
//! enough for a SIGKILL to repeat at most the batch that was being delivered. An idle source
//! delivers nothing and so writes nothing.
//!
//! A file is named in the checkpoint as it is opened (`announce`), not only once a batch
//! read after it is delivered: a file opened while older batches are still queued, then rotated
//! while hooklog is down, would otherwise be unknown to the next run, and its lines lost.
//!
//! Each file is identified by (device, inode, birth time) and carries a fingerprint of the bytes
//! just before its offset. A file whose bytes there changed was replaced in place (truncated and
//! refilled past the offset) and is read from its start; a file with the inode but another birth
//! time is a new file that got the freed inode. Where the filesystem keeps no birth time, a file
//! at the followed path is read from its start on a mismatch, and a rotated one is taken for
//! another file and not read (it cannot be told apart).

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::Deserialize;

/// Files one checkpoint can describe: the followed file and the rotated files still being read
/// (`source::file::MAX_ROTATED` of them).
pub const MAX_FILES: usize = 9;

/// Size of the record written in place: 20 lines of at most 97 bytes (every number at its
/// widest) and the header fit, so the `MAX_FILES` being read and the files just opened always do.
/// A fixed size means every write covers the previous one entirely.
pub const RECORD_BYTES: usize = 2048;

/// Bytes before the offset that the fingerprint covers: several typical lines, so two files that
/// only share a common line prefix (a JSON key, a timestamp) still differ.
pub const FINGERPRINT_BYTES: usize = 256;

/// First line of the record; names the format.
const HEADER: &str = "hooklog-checkpoint 3";

/// The previous format's header: the same lines without the birth time.
const HEADER_V2: &str = "hooklog-checkpoint 2";

/// Last line of the record: a record without it is incomplete.
const TRAILER: &str = "end";

/// The bytes just before an offset: how many (at most `FINGERPRINT_BYTES`) and their CRC-32.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fingerprint {
    /// Bytes covered: `min(offset, FINGERPRINT_BYTES)`.
    pub len: u32,
    /// CRC-32 (IEEE) of those bytes.
    pub crc: u32,
}

impl Fingerprint {
    /// The fingerprint of the start of a file (offset 0): nothing to compare.
    pub const EMPTY: Fingerprint = Fingerprint { len: 0, crc: 0 };

    /// The fingerprint of the bytes just before `offset` in `file`. Fails when the file is
    /// shorter than `offset`.
    pub fn at(file: &File, offset: u64) -> std::io::Result<Fingerprint> {
        let len = offset.min(FINGERPRINT_BYTES as u64) as usize;
        let mut buf = [0u8; FINGERPRINT_BYTES];
        file.read_exact_at(&mut buf[..len], offset - len as u64)?;
        Ok(Fingerprint::of(&buf[..len]))
    }

    /// The fingerprint of `bytes` (at most `FINGERPRINT_BYTES` of them are meant).
    pub fn of(bytes: &[u8]) -> Fingerprint {
        Fingerprint {
            len: bytes.len() as u32,
            crc: crc32fast::hash(bytes),
        }
    }

    /// True when `file` holds, just before `offset`, the bytes this fingerprint was taken of.
    pub fn matches(&self, file: &File, offset: u64) -> bool {
        Fingerprint::at(file, offset).is_ok_and(|f| f == *self)
    }
}

/// A position in one particular file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Position {
    /// Device of the file.
    pub dev: u64,
    /// Inode of the file.
    pub ino: u64,
    /// Bytes delivered from the start of the file.
    pub offset: u64,
    /// The bytes just before `offset`; `None` in a checkpoint written by hooklog 0.1's format.
    pub fingerprint: Option<Fingerprint>,
    /// The file's birth time (`birth`); `None` where the filesystem keeps none, and in older
    /// formats.
    pub born: Option<u64>,
}

/// A file's birth time (statx's `stx_btime`, nanoseconds since the epoch) where the filesystem
/// keeps one (ext4, xfs, btrfs, tmpfs): it tells a file from a later one that got its inode.
pub fn birth(m: &std::fs::Metadata) -> Option<u64> {
    let t = m.created().ok()?;
    let d = t.duration_since(std::time::UNIX_EPOCH).ok()?;
    u64::try_from(d.as_nanos()).ok()
}

impl Position {
    /// Whether `m` is, as far as can be told, the file this position was taken in: the same
    /// device and inode, and the same birth time where both are known. `Some(true)` when the
    /// birth times agree, `Some(false)` for another file, `None` for the same inode with no
    /// birth time to compare.
    pub fn same_file(&self, m: &std::fs::Metadata) -> Option<bool> {
        use std::os::unix::fs::MetadataExt;
        if (m.dev(), m.ino()) != (self.dev, self.ino) {
            return Some(false);
        }
        Some(self.born? == birth(m)?)
    }
}

/// The checkpoint of one followed path: a position in every file its source reads.
#[derive(Debug)]
pub struct Checkpoint {
    /// The checkpoint file.
    path: PathBuf,
    /// Where an older hooklog kept it: read while `path` holds nothing yet, removed once the
    /// new one is written.
    legacy: Option<PathBuf>,
    /// What was delivered, and the open checkpoint file.
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// The last delivered positions and the sequence number of the batch that brought them.
    committed: Option<(u64, Arc<[Position]>)>,
    /// Files opened after batch number `.0` was sent, at their opening position: written beside
    /// `committed` until a batch sent after the opening (whose positions name the file) is
    /// delivered.
    announced: Vec<(u64, Position)>,
    /// `committed` is newer than what is on disk (a write failed).
    dirty: bool,
    /// The checkpoint file, opened at the first write.
    file: Option<File>,
    /// The last write failed (warned once until one succeeds).
    failing: bool,
    /// The positions were read from the legacy path, still to be removed.
    legacy_read: bool,
}

/// The folder beside a followed file that holds its checkpoint. Not the followed folder itself:
/// the file source watches that one with inotify, which would report every checkpoint write (one
/// per delivered batch) back to hooklog's watcher thread: about 10 % more CPU per line on a
/// pre-written file, measured A/B (docs/performance.md). inotify on a folder does not report what
/// happens inside its subfolders.
pub const DIR: &str = ".hooklog";

/// The checkpoint file that belongs to `input`: `.hooklog/<name>.offset` in the same folder.
pub fn path_for(input: &Path) -> PathBuf {
    input
        .with_file_name(DIR)
        .join(format!("{}.offset", file_name(input)))
}

/// The mode a checkpoint is created with (narrowed by the umask), as `File::create` gives.
pub const CHECKPOINT_MODE: u32 = 0o666;

/// Where hooklog kept the checkpoint before [`DIR`]: `.<name>.hooklog-offset` in the same folder.
pub fn legacy_path_for(input: &Path) -> PathBuf {
    input.with_file_name(format!(".{}.hooklog-offset", file_name(input)))
}

fn file_name(input: &Path) -> String {
    input
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "input".to_string())
}

/// hooklog 0.1's checkpoint: one JSON position, no fingerprint.
#[derive(Deserialize)]
struct LegacyPosition {
    dev: u64,
    ino: u64,
    offset: u64,
}

impl Checkpoint {
    /// A checkpoint kept at `path`, with nothing committed yet.
    pub fn new(path: PathBuf) -> Self {
        Checkpoint {
            path,
            legacy: None,
            state: Mutex::new(State::default()),
        }
    }

    /// The checkpoint of the followed file `input` ([`path_for`]), taking over one an older
    /// hooklog left at [`legacy_path_for`].
    pub fn for_input(input: &Path) -> Self {
        Checkpoint {
            legacy: Some(legacy_path_for(input)),
            ..Checkpoint::new(path_for(input))
        }
    }

    /// The checkpoint file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Reads the saved positions. A missing or empty file reads as none; so does a corrupt one,
    /// with a warning (its files are then read from their start again: repeats beat losses).
    /// They stand as committed until the first batch of this run is delivered, so announcing a
    /// file before that keeps them on disk.
    pub fn load(&self) -> Vec<Position> {
        let mut saved = self.read_saved(&self.path);
        let mut from_legacy = false;
        // The new file exists but is empty from the start-up check (config.rs) until written.
        if let Some(legacy) = &self.legacy
            && saved.is_empty()
            && legacy.exists()
        {
            saved = self.read_saved(legacy);
            from_legacy = true;
        }
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        st.legacy_read |= from_legacy;
        if st.committed.is_none() && !saved.is_empty() {
            st.committed = Some((0, saved.clone().into()));
        }
        saved
    }

    fn read_saved(&self, path: &Path) -> Vec<Position> {
        // Never through a symlink a peer planted in the shared folder.
        let Ok(bytes) = crate::nofollow::read(path) else {
            return Vec::new();
        };
        let text = String::from_utf8_lossy(&bytes);
        let text = text.trim();
        if text.is_empty() {
            return Vec::new();
        }
        match parse(text) {
            Ok(p) => p,
            Err(why) => {
                tracing::warn!(path = %path.display(), why, "ignoring corrupt checkpoint");
                Vec::new()
            }
        }
    }

    /// Records that the batch numbered `seq` was delivered, bringing the source to `positions`,
    /// and writes it in place. An older batch acknowledged late never moves the checkpoint back.
    /// A failed write is warned about once and tried again at the next commit or `save`.
    pub fn commit(&self, seq: u64, positions: &Arc<[Position]>) {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if st.committed.as_ref().is_some_and(|(s, _)| *s >= seq) {
            return;
        }
        st.committed = Some((seq, positions.clone()));
        // A batch sent after a file was opened names it (or it was closed since).
        st.announced.retain(|(after, _)| *after >= seq);
        st.dirty = true;
        self.write(&mut st);
    }

    /// Names a file just opened, at the position reading starts from, and writes it in place at
    /// once: `after` is the number of the last batch sent before the opening. Its entry stands
    /// beside the delivered positions (and replaces a stale one with the same inode) until a
    /// batch sent after it is delivered.
    pub fn announce(&self, after: u64, position: Position) {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        st.announced
            .retain(|(_, p)| (p.dev, p.ino) != (position.dev, position.ino));
        st.announced.push((after, position));
        st.dirty = true;
        self.write(&mut st);
    }

    /// The last committed positions.
    pub fn committed(&self) -> Option<Arc<[Position]>> {
        let st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        st.committed.as_ref().map(|(_, p)| p.clone())
    }

    /// What the checkpoint file says: the delivered positions, and the files announced since
    /// (an announced file's entry replaces a delivered one with its inode: that file is gone
    /// and its inode reused).
    fn current(st: &State) -> Vec<Position> {
        let announced = || st.announced.iter().map(|(_, p)| p);
        let mut out: Vec<Position> = st
            .committed
            .iter()
            .flat_map(|(_, c)| c.iter())
            .filter(|c| !announced().any(|a| (a.dev, a.ino) == (c.dev, c.ino)))
            .copied()
            .collect();
        out.extend(announced().copied());
        out
    }

    /// Writes the committed positions if the last write failed.
    pub fn save(&self) {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if st.dirty {
            self.write(&mut st);
        }
    }

    /// True while writes fail.
    pub fn failing(&self) -> bool {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).failing
    }

    /// Opens (creates) the checkpoint file, and its folder the first time.
    fn open(&self) -> std::io::Result<File> {
        // Never through a symlink a peer planted in the shared folder: it could make hooklog
        // write over a file of the peer's choosing.
        let open = || {
            if let Some(dir) = self.path.parent() {
                crate::nofollow::reclaim_own(dir)?;
            }
            crate::nofollow::reclaim_own(&self.path)?;
            crate::nofollow::open_write(&self.path, CHECKPOINT_MODE).map_err(std::io::Error::from)
        };
        match open() {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                if let Some(dir) = self.path.parent() {
                    std::fs::create_dir_all(dir)?;
                }
                open()
            }
            r => r,
        }
    }

    fn write(&self, st: &mut State) {
        if st.committed.is_none() && st.announced.is_empty() {
            return;
        }
        let record = encode(&Self::current(st));
        let result = match &st.file {
            Some(f) => f.write_all_at(&record, 0),
            None => self.open().and_then(|f| {
                f.write_all_at(&record, 0)?;
                // A longer record from another format would leave its tail behind.
                f.set_len(record.len() as u64)?;
                st.file = Some(f);
                Ok(())
            }),
        };
        match result {
            Ok(()) => {
                if st.failing {
                    tracing::info!(path = %self.path.display(), "checkpoint written again");
                }
                st.failing = false;
                st.dirty = false;
                if std::mem::take(&mut st.legacy_read)
                    && let Some(legacy) = &self.legacy
                {
                    let _ = std::fs::remove_file(legacy); // Gone already is as good.
                }
            }
            Err(e) => {
                if !st.failing {
                    tracing::warn!(path = %self.path.display(), error = %e, "cannot write checkpoint, will retry");
                }
                st.failing = true;
                // A file that failed may be a stale handle: open it again next time.
                st.file = None;
            }
        }
    }
}

/// The fixed-size record: a header, one `dev ino offset fingerprint-len fingerprint-crc born`
/// line per file (`born` is `-` when unknown), a trailer, padded with spaces to `RECORD_BYTES`.
/// Past what fits (20 files at the widest), the last files are left out.
fn encode(positions: &[Position]) -> Vec<u8> {
    use std::fmt::Write;
    let mut s = String::with_capacity(RECORD_BYTES);
    s.push_str(HEADER);
    s.push('\n');
    let mut line = String::new();
    for p in positions {
        let fp = p.fingerprint.unwrap_or(Fingerprint::EMPTY);
        line.clear();
        let _ = match p.born {
            Some(b) => writeln!(
                line,
                "{} {} {} {} {:08x} {b}",
                p.dev, p.ino, p.offset, fp.len, fp.crc
            ),
            None => writeln!(
                line,
                "{} {} {} {} {:08x} -",
                p.dev, p.ino, p.offset, fp.len, fp.crc
            ),
        }; // Writing to a String cannot fail.
        if s.len() + line.len() + TRAILER.len() + 1 > RECORD_BYTES {
            break;
        }
        s.push_str(&line);
    }
    s.push_str(TRAILER);
    s.push('\n');
    let mut out = s.into_bytes();
    debug_assert!(out.len() <= RECORD_BYTES, "checkpoint record over its size");
    out.resize(out.len().max(RECORD_BYTES), b' ');
    out
}

/// Reads a record written by `encode`, or hooklog 0.1's JSON position.
fn parse(text: &str) -> Result<Vec<Position>, String> {
    if text.starts_with('{') {
        let p: LegacyPosition = serde_json::from_str(text).map_err(|e| e.to_string())?;
        return Ok(vec![Position {
            dev: p.dev,
            ino: p.ino,
            offset: p.offset,
            fingerprint: None,
            born: None,
        }]);
    }
    let mut lines = text.lines();
    let fields = match lines.next() {
        Some(HEADER) => 6,
        Some(HEADER_V2) => 5,
        _ => return Err("unknown format".into()),
    };
    let mut out = Vec::new();
    for line in lines {
        if line == TRAILER {
            return Ok(out);
        }
        let f: Vec<&str> = line.split(' ').collect();
        let num = |i: usize| -> Result<u64, String> {
            f.get(i)
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| format!("bad line {line:?}"))
        };
        let crc = f
            .get(4)
            .and_then(|v| u32::from_str_radix(v, 16).ok())
            .ok_or_else(|| format!("bad line {line:?}"))?;
        if f.len() != fields {
            return Err(format!("bad line {line:?}"));
        }
        let born = match f.get(5) {
            None | Some(&"-") => None,
            Some(_) => Some(num(5)?),
        };
        out.push(Position {
            dev: num(0)?,
            ino: num(1)?,
            offset: num(2)?,
            fingerprint: Some(Fingerprint {
                len: num(3)? as u32,
                crc,
            }),
            born,
        });
    }
    Err("incomplete record".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pos(ino: u64, offset: u64) -> Position {
        Position {
            dev: 3,
            ino,
            offset,
            fingerprint: Some(Fingerprint::of(b"some bytes\n")),
            born: Some(1_796_079_639_427_027_920 + ino),
        }
    }

    /// A position with every number at its widest (file `i`): the longest line of the record.
    fn widest(i: u64) -> Position {
        Position {
            dev: u64::MAX,
            ino: u64::MAX - i,
            offset: u64::MAX,
            fingerprint: Some(Fingerprint {
                len: FINGERPRINT_BYTES as u32,
                crc: u32::MAX,
            }),
            born: Some(u64::MAX),
        }
    }

    #[test]
    fn commits_in_place_and_loads() {
        let dir = tempfile::tempdir().unwrap();
        let cp = Checkpoint::for_input(&dir.path().join("prestop.log"));
        assert_eq!(cp.path(), dir.path().join(".hooklog/prestop.log.offset"));
        assert_eq!(cp.load(), vec![]);
        let all: Arc<[Position]> = (0..MAX_FILES as u64).map(widest).collect();
        cp.commit(1, &all);
        assert_eq!(
            std::fs::metadata(cp.path()).unwrap().len(),
            RECORD_BYTES as u64
        );
        assert_eq!(
            Checkpoint::new(cp.path().to_path_buf()).load(),
            all.to_vec()
        );
        let two: Arc<[Position]> = vec![pos(7, 10), pos(8, 0)].into();
        cp.commit(2, &two);
        assert_eq!(
            Checkpoint::new(cp.path().to_path_buf()).load(),
            two.to_vec()
        );
        // A late acknowledgement of an older batch does not move it back.
        cp.commit(1, &all);
        assert_eq!(
            Checkpoint::new(cp.path().to_path_buf()).load(),
            two.to_vec()
        );
        assert!(!cp.failing());
        let leftovers: Vec<_> = std::fs::read_dir(dir.path().join(DIR)).unwrap().collect();
        assert_eq!(leftovers.len(), 1, "no temporary file left behind");
    }

    #[test]
    fn an_opened_file_is_named_at_once_beside_the_delivered_positions() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("cp");
        let reread = || Checkpoint::new(p.clone()).load();
        // A run that starts from a saved checkpoint keeps it when it announces a file first.
        Checkpoint::new(p.clone()).commit(1, &vec![pos(1, 40), pos(2, 50)].into());
        let cp = Checkpoint::new(p.clone());
        assert_eq!(cp.load(), vec![pos(1, 40), pos(2, 50)]);
        // Opened once batch 1 was sent.
        cp.announce(1, pos(3, 0));
        assert_eq!(reread(), vec![pos(1, 40), pos(2, 50), pos(3, 0)]);
        // Batch 1, sent before the opening, does not drop it...
        cp.commit(1, &vec![pos(1, 60)].into());
        assert_eq!(reread(), vec![pos(1, 60), pos(3, 0)]);
        // ...one sent after it names it, and the announcement is done.
        cp.commit(2, &vec![pos(1, 60), pos(3, 70)].into());
        assert_eq!(reread(), vec![pos(1, 60), pos(3, 70)]);
        cp.commit(3, &vec![pos(3, 80)].into());
        assert_eq!(reread(), vec![pos(3, 80)]);
        // A new file that got a delivered file's inode (opened once batch 4 was sent) replaces
        // its entry, and batch 4's positions, which name the old file, do not bring it back.
        cp.announce(4, pos(3, 0));
        assert_eq!(reread(), vec![pos(3, 0)]);
        cp.commit(4, &vec![pos(3, 90)].into());
        assert_eq!(reread(), vec![pos(3, 0)]);
        cp.commit(5, &vec![pos(3, 10)].into());
        assert_eq!(reread(), vec![pos(3, 10)]);
    }

    #[test]
    fn the_record_holds_what_fits_and_stays_readable() {
        let dir = tempfile::tempdir().unwrap();
        let cp = Checkpoint::new(dir.path().join("cp"));
        let many: Arc<[Position]> = (0..25).map(widest).collect();
        cp.commit(1, &many);
        let back = Checkpoint::new(cp.path().to_path_buf()).load();
        assert_eq!(back.len(), 20, "20 of the widest lines fit");
        assert_eq!(back, many[..20].to_vec());
        assert_eq!(
            std::fs::metadata(cp.path()).unwrap().len(),
            RECORD_BYTES as u64
        );
    }

    #[test]
    fn takes_over_the_checkpoint_an_older_hooklog_left_beside_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("prestop.log");
        let old = legacy_path_for(&input);
        assert_eq!(old, dir.path().join(".prestop.log.hooklog-offset"));
        Checkpoint::new(old.clone()).commit(1, &vec![pos(1, 40)].into());
        let cp = Checkpoint::for_input(&input);
        assert_eq!(cp.load(), vec![pos(1, 40)]);
        assert!(old.exists(), "kept until the new one is written");
        cp.commit(1, &vec![pos(1, 50)].into());
        assert!(!old.exists(), "removed once the new one is written");
        assert_eq!(Checkpoint::for_input(&input).load(), vec![pos(1, 50)]);
    }

    #[test]
    fn a_failed_write_is_retried() {
        let dir = tempfile::tempdir().unwrap();
        // A folder where the checkpoint should go: the open fails, as on a full disk.
        let p = dir.path().join("cp");
        std::fs::create_dir(&p).unwrap();
        let cp = Checkpoint::new(p.clone());
        let one: Arc<[Position]> = vec![pos(2, 3)].into();
        cp.commit(1, &one);
        assert!(cp.failing());
        std::fs::remove_dir_all(&p).unwrap();
        cp.save();
        assert!(!cp.failing(), "retried and written on the next save");
        assert_eq!(Checkpoint::new(p).load(), one.to_vec());
    }

    #[test]
    fn reads_the_previous_format() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("cp");
        std::fs::write(&p, r#"{"dev":3,"ino":99,"offset":1234}"#).unwrap();
        let cp = Checkpoint::new(p.clone());
        assert_eq!(
            cp.load(),
            vec![Position {
                dev: 3,
                ino: 99,
                offset: 1234,
                fingerprint: None,
                born: None,
            }]
        );
        // The new record replaces it entirely.
        cp.commit(1, &vec![pos(1, 2)].into());
        assert_eq!(Checkpoint::new(p.clone()).load(), vec![pos(1, 2)]);
        // The format before the birth time.
        std::fs::write(&p, "hooklog-checkpoint 2\n3 99 1234 11 0000abcd\nend\n").unwrap();
        assert_eq!(
            Checkpoint::new(p).load(),
            vec![Position {
                dev: 3,
                ino: 99,
                offset: 1234,
                fingerprint: Some(Fingerprint {
                    len: 11,
                    crc: 0xabcd
                }),
                born: None,
            }]
        );
    }

    #[test]
    fn corrupt_or_incomplete_checkpoints_read_as_none() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("cp");
        for bad in [
            "{not json",
            "hooklog-checkpoint 2\n1 2 3 0 00000000\n",
            "hooklog-checkpoint 2\n1 2 x 0 00000000\nend\n",
            "hooklog-checkpoint 3\n1 2 3 0 00000000\nend\n",
            "hooklog-checkpoint 3\n1 2 3 0 00000000 y\nend\n",
            "something else\nend\n",
        ] {
            std::fs::write(&p, bad).unwrap();
            assert_eq!(Checkpoint::new(p.clone()).load(), vec![], "{bad:?}");
        }
    }

    #[test]
    fn tells_a_file_from_a_newer_one_with_its_inode() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        std::fs::write(&p, "x").unwrap();
        let m = std::fs::metadata(&p).unwrap();
        let at = |born| Position {
            dev: m.dev(),
            ino: m.ino(),
            offset: 1,
            fingerprint: None,
            born,
        };
        let Some(b) = birth(&m) else {
            eprintln!("no birth time on this filesystem: nothing to compare");
            return;
        };
        assert_eq!(at(Some(b)).same_file(&m), Some(true));
        assert_eq!(at(Some(b - 1)).same_file(&m), Some(false));
        assert_eq!(
            at(None).same_file(&m),
            None,
            "a checkpoint without birth times"
        );
        let other = Position {
            ino: m.ino() + 1,
            ..at(Some(b))
        };
        assert_eq!(other.same_file(&m), Some(false));
    }

    #[test]
    fn fingerprints_the_bytes_before_an_offset() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        let body: Vec<u8> = (0..1000u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(&p, &body).unwrap();
        let f = File::open(&p).unwrap();
        assert_eq!(Fingerprint::at(&f, 0).unwrap(), Fingerprint::EMPTY);
        assert_eq!(
            Fingerprint::at(&f, 100).unwrap(),
            Fingerprint::of(&body[..100])
        );
        assert_eq!(
            Fingerprint::at(&f, 900).unwrap(),
            Fingerprint::of(&body[900 - FINGERPRINT_BYTES..900])
        );
        assert!(Fingerprint::at(&f, 1001).is_err(), "past the end");
        let fp = Fingerprint::at(&f, 900).unwrap();
        assert!(fp.matches(&f, 900));
        assert!(!fp.matches(&f, 899));
    }
}
