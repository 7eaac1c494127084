//! Checkpoints: where a followed file was last delivered up to, kept in a small file next to it
//! (the emptyDir outlives a container restart) and written atomically.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

/// A position in one particular file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Position {
    /// Device of the file, so a replaced file is not read from the old offset.
    pub dev: u64,
    /// Inode of the file.
    pub ino: u64,
    /// Bytes delivered from the start of the file.
    pub offset: u64,
}

/// The checkpoint of one followed file.
#[derive(Debug)]
pub struct Checkpoint {
    /// The checkpoint file.
    path: PathBuf,
    /// The last delivered position, and whether it is newer than the file on disk.
    state: Mutex<(Option<Position>, bool)>,
    /// Held for a whole save, so two savers (the source's poll and the daemon's last save at
    /// exit) never write the temporary file at once. Its value: the last save failed.
    saving: Mutex<bool>,
}

/// The checkpoint file that belongs to `input`: `.<name>.hooklog-offset` in the same folder.
pub fn path_for(input: &Path) -> PathBuf {
    let name = input
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "input".to_string());
    input.with_file_name(format!(".{name}.hooklog-offset"))
}

impl Checkpoint {
    /// A checkpoint kept at `path`, with nothing committed yet.
    pub fn new(path: PathBuf) -> Self {
        Checkpoint {
            path,
            state: Mutex::new((None, false)),
            saving: Mutex::new(false),
        }
    }

    /// The checkpoint file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Reads the saved position, if there is a readable one. A corrupt file reads as none (the
    /// file is then read from its start again: repeats beat losses).
    pub fn load(&self) -> Option<Position> {
        let text = std::fs::read_to_string(&self.path).ok()?;
        if text.trim().is_empty() {
            return None;
        }
        match serde_json::from_str(&text) {
            Ok(p) => Some(p),
            Err(e) => {
                tracing::warn!(path = %self.path.display(), error = %e, "ignoring corrupt checkpoint");
                None
            }
        }
    }

    /// Records that everything up to `pos` has been delivered.
    pub fn commit(&self, pos: Position) {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if st.0 != Some(pos) {
            *st = (Some(pos), true);
        }
    }

    /// The last committed position.
    pub fn committed(&self) -> Option<Position> {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).0
    }

    /// Writes the committed position if it changed since the last save: temporary file,
    /// `sync_all`, `rename`, so a crash leaves the old or the new checkpoint, never half of one.
    /// A failure (a full disk, say) keeps the old checkpoint, is retried on the next save, and is
    /// logged once until a save succeeds again.
    pub fn save(&self) {
        let mut failing = self.saving.lock().unwrap_or_else(|e| e.into_inner());
        let pos = {
            let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
            match *st {
                (Some(p), true) => {
                    st.1 = false;
                    p
                }
                _ => return,
            }
        };
        match write_atomic(&self.path, &serde_json::to_vec(&pos).unwrap_or_default()) {
            Ok(()) => {
                if *failing {
                    tracing::info!(path = %self.path.display(), "checkpoint written again");
                }
                *failing = false;
            }
            Err(e) => {
                if !*failing {
                    tracing::warn!(path = %self.path.display(), error = %e, "cannot write checkpoint, will retry");
                }
                *failing = true;
                // Try again on the next save.
                self.state.lock().unwrap_or_else(|e| e.into_inner()).1 = true;
            }
        }
    }

    /// True while saves fail.
    pub fn failing(&self) -> bool {
        *self.saving.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Writes `data` to `path` atomically.
pub fn write_atomic(path: &Path, data: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension("tmp");
    let result = std::fs::File::create(&tmp)
        .and_then(|mut f| f.write_all(data).and_then(|()| f.sync_all()))
        .and_then(|()| std::fs::rename(&tmp, path));
    if result.is_err() {
        // Leave no half-written temporary file behind (a full disk stays full otherwise).
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn saves_and_loads_atomically() {
        let dir = tempfile::tempdir().unwrap();
        let cp = Checkpoint::new(path_for(&dir.path().join("prestop.log")));
        assert_eq!(cp.path(), dir.path().join(".prestop.log.hooklog-offset"));
        assert_eq!(cp.load(), None);
        let pos = Position {
            dev: 3,
            ino: 99,
            offset: 1234,
        };
        cp.commit(pos);
        cp.save();
        assert!(!cp.failing());
        assert_eq!(Checkpoint::new(cp.path().to_path_buf()).load(), Some(pos));
        let leftovers: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(leftovers.len(), 1, "no temporary file left behind");
    }

    #[test]
    fn a_failed_save_is_retried_and_leaves_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        // A folder where the checkpoint should go: the rename fails, as on a full disk.
        let p = dir.path().join("cp");
        std::fs::create_dir(&p).unwrap();
        std::fs::write(p.join("keep"), "x").unwrap();
        let cp = Checkpoint::new(p.clone());
        cp.commit(Position {
            dev: 1,
            ino: 2,
            offset: 3,
        });
        cp.save();
        assert!(cp.failing());
        assert!(
            !dir.path().join("cp.tmp").exists(),
            "temporary file removed"
        );
        std::fs::remove_dir_all(&p).unwrap();
        cp.save();
        assert!(!cp.failing(), "retried and written on the next save");
        assert_eq!(
            Checkpoint::new(p).load(),
            Some(Position {
                dev: 1,
                ino: 2,
                offset: 3
            })
        );
    }

    #[test]
    fn corrupt_checkpoint_reads_as_none() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("cp");
        std::fs::write(&p, "{not json").unwrap();
        assert_eq!(Checkpoint::new(p).load(), None);
    }
}
