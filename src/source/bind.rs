//! (the sidecar) Binds a `--socket` path: at start, from the command line ([`crate::config`]),
//! and again whenever a peer removed or replaced it ([`super::socket_guard`]); and makes a
//! source's path absolute in a folder created for it.

use std::os::unix::fs::FileTypeExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};

/// `path` made absolute through its folder, which is created when missing (an emptyDir
/// subfolder, say). Errors name `flag` and the path as given.
pub fn absolute_in_created_dir(path: &Path, flag: &str) -> anyhow::Result<PathBuf> {
    let name = path
        .file_name()
        .with_context(|| format!("{flag} {}: not a file name", path.display()))?;
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    std::fs::create_dir_all(parent)
        .with_context(|| format!("{flag} {}: cannot create its folder", path.display()))?;
    let parent = parent
        .canonicalize()
        .with_context(|| format!("{flag} {}: cannot resolve its folder", path.display()))?;
    Ok(parent.join(name))
}

/// Binds a listening socket at `path` (returned absolute), replacing a stale socket file but
/// never a live one.
pub fn bind_socket(path: &Path, mode: u32) -> anyhow::Result<(PathBuf, UnixListener)> {
    let path = absolute_in_created_dir(path, "--socket")?;
    if let Ok(m) = std::fs::symlink_metadata(&path) {
        if m.is_dir() {
            bail!("--socket {}: is a directory", path.display());
        }
        if m.file_type().is_symlink() {
            // A peer's link in the shared folder: removed (unlink does not follow it), never
            // bound through.
            tracing::warn!(path = %path.display(), "--socket path is a symbolic link: removing it");
        } else if !m.file_type().is_socket() {
            bail!("--socket {}: exists and is not a socket", path.display());
        }
        if m.file_type().is_socket() && UnixStream::connect(&path).is_ok() {
            bail!(
                "--socket {}: another process is listening on it",
                path.display()
            );
        }
        std::fs::remove_file(&path)
            .with_context(|| format!("--socket {}: cannot remove stale socket", path.display()))?;
    }
    // The socket is created with `mode` by the umask of the bind, not by a chmod of the path
    // afterwards: a chmod follows a symlink a peer swapped in meanwhile. At start-up config runs
    // before the runtime starts any thread, so the process-wide umask is this thread's alone; the
    // socket guard binds again at runtime, where only hooklog's own checkpoints could be created
    // under the narrower umask meanwhile (hooklog alone reads them).
    let mask = nix::sys::stat::Mode::from_bits_truncate(!mode & 0o777);
    let old_mask = nix::sys::stat::umask(mask);
    let bound = UnixListener::bind(&path);
    nix::sys::stat::umask(old_mask);
    let listener = bound.with_context(|| format!("--socket {}: cannot bind", path.display()))?;
    listener
        .set_nonblocking(true)
        .with_context(|| format!("--socket {}: cannot make non-blocking", path.display()))?;
    Ok((path, listener))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_live_socket_is_not_stolen_but_a_stale_one_is_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("s.sock");
        let live = bind_socket(&p, 0o666).unwrap();
        let err = bind_socket(&p, 0o666).unwrap_err();
        assert!(format!("{err:#}").contains("another process"), "{err:#}");
        drop(live);
        bind_socket(&p, 0o666).unwrap();
    }

    #[test]
    fn a_symlink_at_the_socket_path_is_replaced_and_its_target_left_alone() {
        use std::os::unix::fs::{FileTypeExt, PermissionsExt};
        let dir = tempfile::tempdir().unwrap();
        let secret = dir.path().join("secret");
        std::fs::write(&secret, "key").unwrap();
        std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
        let p = dir.path().join("s.sock");
        std::os::unix::fs::symlink(&secret, &p).unwrap();
        let _live = bind_socket(&p, 0o666).unwrap();
        let m = std::fs::symlink_metadata(&p).unwrap();
        assert!(m.file_type().is_socket());
        assert_eq!(m.permissions().mode() & 0o777, 0o666);
        let t = std::fs::metadata(&secret).unwrap();
        assert_eq!(t.permissions().mode() & 0o777, 0o600);
        assert_eq!(std::fs::read(&secret).unwrap(), b"key");
    }
}
