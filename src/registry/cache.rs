//! (the control plane) The file lists of layers and the configs of images, by digest, in `$HOOKLOG_CACHE_DIR`
//! (default `$XDG_CACHE_HOME/hooklog`, else `~/.cache/hooklog`). Content-addressed, so an entry
//! never goes stale; the cache holds at most [`MAX_ENTRIES`] of them and drops the least
//! recently used beyond that. The folder is private (0700, its files 0600), and an entry is read
//! only if it is this user's and nobody else could have written it; a config must match its
//! digest, a layer's list must name its own.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use super::layer::Change;

/// Cached layer lists and configs kept (each a few KB to a few MB: a Debian base layer's list
/// is about 1 MB of JSON). Beyond this the least recently used are removed.
pub const MAX_ENTRIES: usize = 2000;

/// Bumped when the format of a cached entry changes; old ones are then never read.
const FORMAT: &str = "v2";

/// A layer's list as cached: with the digest it lists, checked when read.
#[derive(serde::Serialize, serde::Deserialize)]
struct CachedLayer {
    digest: String,
    changes: Vec<Change>,
}

/// A cache folder, or none (`HOME` unset and no `HOOKLOG_CACHE_DIR`).
#[derive(Debug, Clone)]
pub struct Cache {
    dir: Option<PathBuf>,
}

impl Cache {
    /// `$HOOKLOG_CACHE_DIR`, `$XDG_CACHE_HOME/hooklog` or `~/.cache/hooklog`, with `images-v2/`
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

    /// A cache in `dir` itself.
    #[cfg(test)]
    pub fn at(dir: &Path) -> Cache {
        Cache {
            dir: Some(dir.to_path_buf()),
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
        let cached: CachedLayer = serde_json::from_slice(&bytes).ok()?;
        (cached.digest == digest).then_some(cached.changes)
    }

    pub fn put_layer(&self, digest: &str, changes: &[Change]) {
        let cached = CachedLayer {
            digest: digest.to_string(),
            changes: changes.to_vec(),
        };
        if let Ok(bytes) = serde_json::to_vec(&cached) {
            self.write("layer", digest, &bytes);
        }
    }

    /// An image config, if cached (and its bytes have its digest).
    pub fn config(&self, digest: &str) -> Option<Vec<u8>> {
        let bytes = self.read("config", digest)?;
        let mut v = super::client::Verifier::new(digest).ok()?;
        v.update(&bytes);
        v.finish().ok()?;
        Some(bytes)
    }

    pub fn put_config(&self, digest: &str, bytes: &[u8]) {
        self.write("config", digest, bytes);
    }

    fn read(&self, kind: &str, digest: &str) -> Option<Vec<u8>> {
        let p = self.path(kind, digest)?;
        if !private(p.parent()?) || !private(&p) {
            tracing::debug!(path = %p.display(), "cache entry not private, not read");
            return None;
        }
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
        use std::io::Write;
        use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
        if std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .is_err()
            || !private(dir)
        {
            return;
        }
        let tmp = dir.join(format!(".tmp-{}-{}", std::process::id(), fastrand::u64(..)));
        let written = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)
            .and_then(|mut f| f.write_all(bytes));
        if written.is_ok() && std::fs::rename(&tmp, &p).is_ok() {
            trim(dir, MAX_ENTRIES);
        } else {
            let _ = std::fs::remove_file(&tmp); // may not exist
        }
    }
}

/// This user's, and writable by nobody else (no group or other write bit): what a cache entry
/// must be to be trusted.
fn private(p: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(p)
        .is_ok_and(|m| m.uid() == nix::unistd::geteuid().as_raw() && m.mode() & 0o022 == 0)
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

    /// Issue 26: the cache was 0755/0644 and read as found. It is private now, and an entry
    /// someone else could have written, or that lists another digest, is not read.
    #[test]
    fn the_cache_is_private_and_reads_only_entries_it_can_trust() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("images");
        let c = Cache {
            dir: Some(dir.clone()),
        };
        let listing = vec![Change::Put(
            "/bin/sh".into(),
            super::super::Entry::File { mode: 0o755 },
        )];
        c.put_layer("sha256:ab", &listing);
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&dir), 0o700);
        let file = dir.join("layer-sha256-ab.json");
        assert_eq!(mode(&file), 0o600);
        assert_eq!(c.layer("sha256:ab"), Some(listing.clone()));
        // Planted: the listing of another layer under this digest.
        std::fs::copy(&file, dir.join("layer-sha256-cd.json")).unwrap();
        assert_eq!(c.layer("sha256:cd"), None);
        // Writable by others: not read.
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o666)).unwrap();
        assert_eq!(c.layer("sha256:ab"), None);
        // A config must have its digest.
        let config = br#"{"config":{}}"#;
        let digest = format!("sha256:{}", super::super::client::hex_digest(config));
        c.put_config(&digest, config);
        assert_eq!(c.config(&digest).as_deref(), Some(&config[..]));
        c.put_config("sha256:00", config);
        assert_eq!(c.config("sha256:00"), None);
    }
}
