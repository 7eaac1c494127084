//! (the control plane) Where `inject` and `uninject` put what they write until every input has
//! read back (nothing goes to stdout before): a temporary file, removed from its folder as soon
//! as it is made, so that their output (inject's is about 5 times its input) is not held in
//! memory (issue 24 §4); memory when no temporary file can be made.

use std::fs::File;
use std::io::{Cursor, Read, Seek, SeekFrom, Write};

/// How much of one input's output is gathered before it goes to the spool: writes of this size
/// cost the file little, and what is held is at most this. 1 MiB, as load.rs's pieces.
#[cfg(not(test))]
pub(crate) const PIECE_BYTES: usize = 1024 * 1024;
/// Small in the unit tests, so that their inputs of a few lines go out in several pieces.
#[cfg(test)]
pub(crate) const PIECE_BYTES: usize = 16;

/// A temporary file (or memory), written at its end, truncated back to a mark, read from a
/// mark, copied out.
#[derive(Debug)]
pub(crate) struct Spool {
    store: Store,
    /// Bytes written.
    len: u64,
    /// The last byte written, for [`Spool::ends_with_newline`].
    last: Option<u8>,
}

#[derive(Debug)]
enum Store {
    File(File),
    Memory(Cursor<Vec<u8>>),
}

impl Spool {
    /// A spool in a new temporary file (in `TMPDIR`, else `/tmp`), or in memory when none can
    /// be made (a read-only filesystem).
    pub(crate) fn new() -> Spool {
        let store = match temp_file() {
            Ok(f) => Store::File(f),
            Err(e) => {
                tracing::debug!(error = %e, "no temporary file, output held in memory");
                Store::Memory(Cursor::new(Vec::new()))
            }
        };
        Spool {
            store,
            len: 0,
            last: None,
        }
    }

    /// A spool in memory (tests, and where no file may be written).
    #[cfg(test)]
    pub(crate) fn in_memory() -> Spool {
        Spool {
            store: Store::Memory(Cursor::new(Vec::new())),
            len: 0,
            last: None,
        }
    }

    pub(crate) fn len(&self) -> u64 {
        self.len
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub(crate) fn ends_with_newline(&self) -> bool {
        self.last == Some(b'\n')
    }

    /// Appends `text`.
    pub(crate) fn push(&mut self, text: &str) -> std::io::Result<()> {
        if text.is_empty() {
            return Ok(());
        }
        self.store.seek(SeekFrom::End(0))?;
        self.store.write_all(text.as_bytes())?;
        self.len += text.len() as u64;
        self.last = text.as_bytes().last().copied();
        Ok(())
    }

    /// Drops everything written from `mark` (a [`Spool::len`] of before) on.
    pub(crate) fn truncate(&mut self, mark: u64) -> std::io::Result<()> {
        if mark >= self.len {
            return Ok(());
        }
        match &mut self.store {
            Store::File(f) => f.set_len(mark)?,
            Store::Memory(c) => c.get_mut().truncate(mark as usize),
        }
        self.len = mark;
        self.last = if mark == 0 {
            None
        } else {
            self.store.seek(SeekFrom::Start(mark - 1))?;
            let mut b = [0u8];
            self.store.read_exact(&mut b)?;
            Some(b[0])
        };
        Ok(())
    }

    /// What was written from `mark` on, to read (buffered by the caller).
    pub(crate) fn read_from(&mut self, mark: u64) -> std::io::Result<impl Read + '_> {
        let n = self.len.saturating_sub(mark);
        self.store.seek(SeekFrom::Start(mark))?;
        Ok((&mut self.store).take(n))
    }

    /// Copies everything written to `out`.
    pub(crate) fn copy_to(&mut self, out: &mut impl Write) -> std::io::Result<()> {
        let n = self.len;
        self.store.seek(SeekFrom::Start(0))?;
        std::io::copy(&mut (&mut self.store).take(n), out)?;
        Ok(())
    }

    /// Everything written, as text (tests compare it).
    #[cfg(test)]
    pub(crate) fn read_text(&mut self) -> String {
        let mut out = Vec::new();
        self.copy_to(&mut out).expect("a spool reads back");
        String::from_utf8(out).expect("a spool holds text")
    }
}

/// A new file in the temporary folder, open for reading and writing, only its owner's, and no
/// longer in the folder: it goes when it is closed, however the process ends.
fn temp_file() -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    /// Names tried before giving up (another process's file of the same name).
    const ATTEMPTS: u32 = 16;
    let dir = std::env::temp_dir();
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let mut last = None;
    for attempt in 0..ATTEMPTS {
        let path = dir.join(format!(
            ".hooklog-spool-{}-{stamp}-{attempt}",
            std::process::id()
        ));
        match std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
        {
            Ok(f) => {
                std::fs::remove_file(&path)?;
                return Ok(f);
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| std::io::Error::other("no temporary file")))
}

impl Read for Store {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Store::File(f) => f.read(buf),
            Store::Memory(c) => c.read(buf),
        }
    }
}

impl Write for Store {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Store::File(f) => f.write(buf),
            Store::Memory(c) => c.write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Store::File(f) => f.flush(),
            Store::Memory(c) => c.flush(),
        }
    }
}

impl Seek for Store {
    fn seek(&mut self, pos: SeekFrom) -> std::io::Result<u64> {
        match self {
            Store::File(f) => f.seek(pos),
            Store::Memory(c) => c.seek(pos),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file spool and a memory spool hold the same after the same writes and truncations.
    #[test]
    fn file_and_memory_spools_agree() {
        let mut spools = [Spool::new(), Spool::in_memory()];
        assert!(
            matches!(spools[0].store, Store::File(_)),
            "no temporary file"
        );
        for s in &mut spools {
            s.push("a: 1\n").unwrap();
            let mark = s.len();
            s.push("---\nb: 2").unwrap();
            assert!(!s.ends_with_newline());
            s.truncate(mark).unwrap();
            assert!(s.ends_with_newline());
            s.push("c: 3\n").unwrap();
            let mut tail = String::new();
            s.read_from(mark)
                .unwrap()
                .read_to_string(&mut tail)
                .unwrap();
            assert_eq!(tail, "c: 3\n");
            assert_eq!(s.read_text(), "a: 1\nc: 3\n");
            s.truncate(0).unwrap();
            assert!(s.is_empty() && !s.ends_with_newline());
        }
    }
}
