//! (below both) Opening files in the shared folder without following a symlink a peer planted there.
//!
//! Every container of the pod may write the shared emptyDir, so a peer can replace
//! `prestop.log` (or a checkpoint) by a symlink to `/proc/self/environ` or a mounted secret.
//! hooklog opens the last component with `O_NOFOLLOW` (a symlink fails with `ELOOP`) and
//! `O_NONBLOCK` (a FIFO put in its place cannot hang the open), then checks the type of what it
//! opened with `fstat`: anything but a regular file is refused. The daemon's reads walk an
//! absolute path from `/` with `O_NOFOLLOW | O_DIRECTORY` at every folder ([`open_read`]): the
//! path is made canonical once at start-up (`config.rs`), so a link met later is a peer's swap.
//!
//! Both sides of the shared file use it: the daemon's sources and checkpoints, and the hook
//! wrapper's file fallback ([`open_append`], from `client.rs`).

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use nix::fcntl::OFlag;

/// Why a path was not opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// Nothing at the path.
    #[error("not found")]
    NotFound,
    /// Something hooklog does not open: a symlink, a folder, a FIFO, a device.
    #[error("{0}")]
    Refused(&'static str),
    /// Any other failure (permissions, I/O).
    #[error(transparent)]
    Io(io::Error),
}

impl From<io::Error> for OpenError {
    fn from(e: io::Error) -> Self {
        match e.raw_os_error() {
            _ if e.kind() == io::ErrorKind::NotFound => OpenError::NotFound,
            Some(nix::libc::ELOOP) => OpenError::Refused(SYMLINK),
            // O_NONBLOCK's answer to opening a FIFO that nobody reads for writing.
            Some(nix::libc::ENXIO) => OpenError::Refused(NOT_REGULAR),
            _ => OpenError::Io(e),
        }
    }
}

/// The refusal of a symlink, as it is logged.
pub const SYMLINK: &str = "a symbolic link (not followed: a peer may point it anywhere)";

/// The refusal of anything else that is not a regular file.
pub const NOT_REGULAR: &str = "not a regular file";

/// Why a file of this type is refused, or none for a regular file.
pub fn refusal(t: std::fs::FileType) -> Option<&'static str> {
    if t.is_file() {
        None
    } else if t.is_symlink() {
        Some(SYMLINK)
    } else {
        Some(NOT_REGULAR)
    }
}

fn flags() -> i32 {
    (OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC).bits()
}

fn checked(file: File) -> Result<File, OpenError> {
    match refusal(file.metadata()?.file_type()) {
        None => Ok(file),
        Some(why) => Err(OpenError::Refused(why)),
    }
}

/// Opens the regular file at `path` for reading, never through a symlink at any level of an
/// absolute path: each folder on the way is opened with `O_NOFOLLOW | O_DIRECTORY`, from `/`
/// down, and the file in the last one (issue 25.4: `--file $D/logs/prestop.log` with `$D/logs`
/// renamed and a link put in its place shipped the other folder's file). The daemon's paths are
/// made canonical at start-up (`config.rs`), so a link met here was put there since. A relative
/// path is opened as given (its last component only is checked).
pub fn open_read(path: &Path) -> Result<File, OpenError> {
    if path.is_absolute() {
        return open_read_walking(path);
    }
    checked(
        OpenOptions::new()
            .read(true)
            .custom_flags(flags())
            .open(path)?,
    )
}

/// The refusal of a folder on the way that is not one (a symbolic link put in its place).
pub const FOLDER_ON_THE_WAY: &str = "a folder on the way is a symbolic link or not a folder (not followed: a peer may have swapped it)";

fn open_read_walking(path: &Path) -> Result<File, OpenError> {
    use nix::fcntl::openat;
    use nix::sys::stat::Mode;
    use std::path::Component;
    let walk = OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let errno = |e: nix::errno::Errno| io::Error::from_raw_os_error(e as i32);
    let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
        return Err(OpenError::Refused(NOT_REGULAR));
    };
    let mut dir = nix::fcntl::open("/", walk, Mode::empty()).map_err(errno)?;
    for c in parent.components() {
        let Component::Normal(part) = c else {
            // `/` is where the walk starts; `.` and `..` do not occur in a canonical path and
            // are refused rather than resolved.
            if c == Component::RootDir {
                continue;
            }
            return Err(OpenError::Refused(FOLDER_ON_THE_WAY));
        };
        dir = match openat(&dir, part, walk, Mode::empty()) {
            Ok(d) => d,
            Err(nix::errno::Errno::ENOTDIR | nix::errno::Errno::ELOOP) => {
                return Err(OpenError::Refused(FOLDER_ON_THE_WAY));
            }
            Err(e) => return Err(errno(e).into()),
        };
    }
    let fd = openat(
        &dir,
        name,
        OFlag::O_RDONLY | OFlag::from_bits_truncate(flags()),
        Mode::empty(),
    )
    .map_err(errno)?;
    checked(File::from(fd))
}

/// Opens (creating it with `mode` when missing) the regular file at `path` for writing in place,
/// never through a symlink.
pub fn open_write(path: &Path, mode: u32) -> Result<File, OpenError> {
    checked(
        OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .mode(mode)
            .custom_flags(flags())
            .open(path)?,
    )
}

/// Opens the regular file at `path` for appending, never through a symlink, and for reading too
/// where the file's mode allows it (the wrapper checks the file's last byte). When this call
/// creates the file, it gets `mode` despite the umask; an existing file keeps its mode.
pub fn open_append(path: &Path, mode: u32) -> Result<File, OpenError> {
    use std::os::unix::fs::PermissionsExt;
    match OpenOptions::new()
        .read(true)
        .append(true)
        .create_new(true)
        .mode(mode)
        .custom_flags(flags())
        .open(path)
    {
        Ok(f) => {
            // Without it the file stays as narrow as the umask made it; appending still works
            // for this container, which is what matters here.
            let _ = f.set_permissions(std::fs::Permissions::from_mode(mode));
            return Ok(f);
        }
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e.into()),
    }
    let open = |read: bool| {
        OpenOptions::new()
            .read(read)
            .append(true)
            .custom_flags(flags())
            .open(path)
    };
    let file = match open(true) {
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => open(false),
        r => r,
    };
    checked(file?)
}

/// Removes a symlink at `path`, one of hooklog's own paths (the checkpoints' folder `.hooklog`
/// and the files in it): a peer may plant one there to send hooklog's writes into a file or
/// folder of its choosing. `unlink` removes the link itself, never what it points to. Anything
/// else at the path is left alone.
pub fn reclaim_own(path: &Path) -> io::Result<()> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => {
            tracing::warn!(path = %path.display(), "a symbolic link at one of hooklog's own paths: removed");
            std::fs::remove_file(path)
        }
        _ => Ok(()),
    }
}

/// Reads the whole regular file at `path`, never through a symlink.
pub fn read(path: &Path) -> Result<Vec<u8>, OpenError> {
    use std::io::Read;
    let mut f = open_read(path)?;
    let mut buf = Vec::new();
    f.read_to_end(&mut buf)?;
    Ok(buf)
}

impl From<OpenError> for io::Error {
    fn from(e: OpenError) -> Self {
        match e {
            OpenError::NotFound => io::ErrorKind::NotFound.into(),
            OpenError::Refused(why) => io::Error::new(io::ErrorKind::InvalidInput, why),
            OpenError::Io(e) => e,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_symlinks_fifos_and_folders_and_opens_regular_files() {
        let dir = tempfile::tempdir().unwrap();
        let secret = dir.path().join("secret");
        std::fs::write(&secret, "AWS_SECRET_ACCESS_KEY=x").unwrap();
        let link = dir.path().join("prestop.log");
        std::os::unix::fs::symlink(&secret, &link).unwrap();
        assert!(matches!(open_read(&link), Err(OpenError::Refused(SYMLINK))));
        assert!(matches!(
            open_write(&link, 0o600),
            Err(OpenError::Refused(SYMLINK))
        ));
        assert!(matches!(read(&link), Err(OpenError::Refused(SYMLINK))));
        assert_eq!(std::fs::read(&secret).unwrap(), b"AWS_SECRET_ACCESS_KEY=x");
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        assert!(matches!(
            open_read(&fifo),
            Err(OpenError::Refused(NOT_REGULAR))
        ));
        assert!(matches!(
            open_read(dir.path()),
            Err(OpenError::Refused(NOT_REGULAR))
        ));
        assert!(matches!(
            open_read(&dir.path().join("none")),
            Err(OpenError::NotFound)
        ));
        assert_eq!(read(&secret).unwrap(), b"AWS_SECRET_ACCESS_KEY=x");
        let new = dir.path().join("new");
        open_write(&new, 0o600).unwrap();
        assert!(new.is_file());
    }

    #[test]
    fn open_append_creates_with_its_mode_and_refuses_what_open_read_refuses() {
        use std::io::Write;
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("prestop.log");
        open_append(&file, 0o666)
            .unwrap()
            .write_all(b"a\n")
            .unwrap();
        let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o666, "despite the umask");
        open_append(&file, 0o600)
            .unwrap()
            .write_all(b"b\n")
            .unwrap();
        assert_eq!(std::fs::read(&file).unwrap(), b"a\nb\n");
        let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o666, "an existing file keeps its mode");
        let secret = dir.path().join("secret");
        std::fs::write(&secret, "x").unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&secret, &link).unwrap();
        assert!(matches!(
            open_append(&link, 0o666),
            Err(OpenError::Refused(SYMLINK))
        ));
        assert_eq!(std::fs::read(&secret).unwrap(), b"x");
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        assert!(matches!(
            open_append(&fifo, 0o666),
            Err(OpenError::Refused(NOT_REGULAR))
        ));
        assert!(matches!(
            open_append(dir.path(), 0o666),
            Err(OpenError::Refused(NOT_REGULAR)) | Err(OpenError::Io(_))
        ));
    }
}
