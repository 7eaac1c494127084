//! The file lists of layers and the configs of images, by digest, in `$HOOKLOG_CACHE_DIR`
//! (default `$XDG_CACHE_HOME/hooklog`, else `~/.cache/hooklog`). Content-addressed, so an entry
//! never goes stale; the cache holds at most [`MAX_ENTRIES`] of them and drops the least
//! recently used beyond that.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use super::layer::Change;

/// Cached layer lists and configs kept (each a few KB to a few MB: a Debian base layer's list
/// is about 1 MB of JSON). Beyond this the least recently used are removed.
pub const MAX_ENTRIES: usize = 2000;

/// Bumped when the format of a cached entry changes; old ones are then never read.
const FORMAT: &str = "v1";

/// A cache folder, or none (`HOME` unset and no `HOOKLOG_CACHE_DIR`).
#[derive(Debug, Clone)]
pub struct Cache {
    dir: Option<PathBuf>,
}

impl Cache {
    /// `$HOOKLOG_CACHE_DIR`, `$XDG_CACHE_HOME/hooklog` or `~/.cache/hooklog`, with `images-v1/`
    /// below it.
    pub fn from_env() -> Cache {
        let base = std::env::var_os("HOOKLOG_CACHE_DIR")
            .map(PathBuf::from)
            .or_else(|| {
                std::env::var_os("XDG_CACHE_HOME").map(|d| PathBuf::from(d).join("hooklog"))
            })
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/hooklog")));
        Cache {
            dir: base.map(|b| b.join(format!("images-{FORMAT}"))),
        }
    }

    fn path(&self, kind: &str, digest: &str) -> Option<PathBuf> {
        let dir = self.dir.as_ref()?;
        // A digest is `algorithm:hex`; anything else never names a file.
        let (alg, hex) = digest.split_once(':')?;
        let ok = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric());
        (ok(alg) && ok(hex)).then(|| dir.join(format!("{kind}-{alg}-{hex}.json")))
    }

    /// A layer's changes, if cached (and marks it used).
    pub fn layer(&self, digest: &str) -> Option<Vec<Change>> {
        let bytes = self.read("layer", digest)?;
        serde_json::from_slice(&bytes).ok()
    }

    pub fn put_layer(&self, digest: &str, changes: &[Change]) {
        if let Ok(bytes) = serde_json::to_vec(changes) {
            self.write("layer", digest, &bytes);
        }
    }

    /// An image config, if cached.
    pub fn config(&self, digest: &str) -> Option<Vec<u8>> {
        self.read("config", digest)
    }

    pub fn put_config(&self, digest: &str, bytes: &[u8]) {
        self.write("config", digest, bytes);
    }

    fn read(&self, kind: &str, digest: &str) -> Option<Vec<u8>> {
        let p = self.path(kind, digest)?;
        let bytes = std::fs::read(&p).ok()?;
        // The modification time is the last use, for the bound; a failure only ages it.
        if let Ok(f) = std::fs::File::options().append(true).open(&p) {
            let _ = f.set_modified(SystemTime::now());
        }
        Some(bytes)
    }

    /// Writes atomically (temporary file, rename), then trims the cache to its bound. A cache
    /// that cannot be written is no error: the next check reads the layer again.
    fn write(&self, kind: &str, digest: &str, bytes: &[u8]) {
        let Some(p) = self.path(kind, digest) else {
            return;
        };
        let Some(dir) = p.parent() else {
            return;
        };
        if std::fs::create_dir_all(dir).is_err() {
            return;
        }
        let tmp = dir.join(format!(".tmp-{}-{}", std::process::id(), fastrand::u64(..)));
        if std::fs::write(&tmp, bytes).is_ok() && std::fs::rename(&tmp, &p).is_ok() {
            trim(dir, MAX_ENTRIES);
        } else {
            let _ = std::fs::remove_file(&tmp); // may not exist
        }
    }
}

/// Removes the least recently used entries of `dir` beyond `max`.
fn trim(dir: &Path, max: usize) {
    let Ok(read) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<(SystemTime, PathBuf)> = read
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().ends_with(".json"))
        .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
        .collect();
    if entries.len() <= max {
        return;
    }
    entries.sort();
    for (_, p) in &entries[..entries.len() - max] {
        let _ = std::fs::remove_file(p); // another check may have removed it already
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cache_keeps_its_bound_and_refuses_odd_digests() {
        let tmp = tempfile::tempdir().unwrap();
        let c = Cache {
            dir: Some(tmp.path().to_path_buf()),
        };
        assert!(c.path("layer", "sha256:../../etc").is_none());
        for i in 0..5 {
            std::fs::write(tmp.path().join(format!("layer-sha256-{i}.json")), "[]").unwrap();
        }
        trim(tmp.path(), 3);
        assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 3);
        c.put_layer("sha256:ab", &[]);
        assert_eq!(c.layer("sha256:ab"), Some(vec![]));
    }
}
