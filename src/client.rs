//! The client side of hooklog: how `hook` and `emit` deliver their records. The daemon's socket
//! first; the shared file when the socket is unreachable; stderr (or stdout) as the last resort.
//! Logging never makes a hook fail.

use std::fs::File;
use std::io::Write;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Longest a write to the daemon's socket may block before the file is used instead: a stuck
/// daemon must not stall a hook.
pub const SOCKET_WRITE_TIMEOUT: Duration = Duration::from_secs(2);

/// Mode of the shared file when a hook or `emit` has to create it (the daemon was not up yet):
/// the same as `hooklog run --file-mode`'s default, so containers running as other users can
/// still append after this one.
pub const SHARED_FILE_MODE: u32 = 0o666;

/// Where records go when neither the socket nor the file takes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LastResort {
    /// Our own stderr (hooks: the kubelet keeps a failed hook's output in its event).
    Stderr,
    /// Our own stdout (`emit` with neither `--socket` nor `--file`).
    Stdout,
}

/// Which way a record went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// The daemon's socket.
    Socket,
    /// The shared file.
    File,
    /// The last resort.
    LastResort,
}

/// Sends records, one JSON line each, by the first way that works.
#[derive(Debug)]
pub struct Reporter {
    /// The daemon's socket, if configured.
    socket: Option<PathBuf>,
    /// The connection, once made.
    conn: Option<UnixStream>,
    /// The shared file, if configured.
    file: Option<PathBuf>,
    /// The file, once opened for appending.
    file_handle: Option<File>,
    /// Where records go when all else fails.
    last_resort: LastResort,
    /// Routes already warned about, so a flood of lines gives one warning.
    warned_socket: bool,
    warned_file: bool,
}

impl Reporter {
    /// A reporter trying `socket`, then `file`, then `last_resort`.
    pub fn new(socket: Option<PathBuf>, file: Option<PathBuf>, last_resort: LastResort) -> Self {
        Reporter {
            socket,
            conn: None,
            file,
            file_handle: None,
            last_resort,
            warned_socket: false,
            warned_file: false,
        }
    }

    /// Sends one record (JSON text without newline). Never fails: the last resort takes it.
    pub fn send(&mut self, record: &str) -> Route {
        let mut line = Vec::with_capacity(record.len() + 1);
        line.extend_from_slice(record.as_bytes());
        line.push(b'\n');
        if self.try_socket(&line) {
            return Route::Socket;
        }
        if self.try_file(&line) {
            return Route::File;
        }
        let _ = match self.last_resort {
            // Nothing is left to report a failure to.
            LastResort::Stderr => std::io::stderr().lock().write_all(&line),
            LastResort::Stdout => std::io::stdout().lock().write_all(&line),
        };
        Route::LastResort
    }

    fn try_socket(&mut self, line: &[u8]) -> bool {
        let Some(path) = &self.socket else {
            return false;
        };
        if self.conn.is_none() {
            match UnixStream::connect(path) {
                Ok(c) => {
                    // A failure to set the timeout only means writes may block longer.
                    let _ = c.set_write_timeout(Some(SOCKET_WRITE_TIMEOUT));
                    self.conn = Some(c);
                }
                Err(e) => {
                    if !self.warned_socket {
                        tracing::warn!(socket = %path.display(), error = %e, "hooklog socket unreachable, falling back");
                        self.warned_socket = true;
                    }
                    return false;
                }
            }
        }
        let Some(conn) = self.conn.as_mut() else {
            return false;
        };
        match conn.write_all(line) {
            Ok(()) => true,
            Err(e) => {
                tracing::warn!(socket = %path.display(), error = %e, "write to hooklog socket failed, falling back");
                self.conn = None;
                false
            }
        }
    }

    fn try_file(&mut self, line: &[u8]) -> bool {
        let Some(path) = &self.file else { return false };
        if self.file_handle.is_none() {
            match open_shared(path) {
                Ok(f) => self.file_handle = Some(f),
                Err(e) => {
                    if !self.warned_file {
                        tracing::warn!(file = %path.display(), error = %e, "cannot open hooklog file, falling back");
                        self.warned_file = true;
                    }
                    return false;
                }
            }
        }
        let Some(f) = self.file_handle.as_mut() else {
            return false;
        };
        // One write per line: O_APPEND keeps concurrent writers' lines whole.
        match f.write_all(line) {
            Ok(()) => true,
            Err(e) => {
                tracing::warn!(file = %path.display(), error = %e, "write to hooklog file failed, falling back");
                self.file_handle = None;
                false
            }
        }
    }
}

/// Opens the shared file for appending. When this call creates it, it gets [`SHARED_FILE_MODE`]
/// despite the umask; an existing file keeps its mode.
fn open_shared(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    match std::fs::OpenOptions::new()
        .append(true)
        .create_new(true)
        .mode(SHARED_FILE_MODE)
        .open(path)
    {
        Ok(f) => {
            // Without it the file stays as narrow as the umask made it; appending still works
            // for this container, which is what matters here.
            let _ = f.set_permissions(std::fs::Permissions::from_mode(SHARED_FILE_MODE));
            Ok(f)
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            std::fs::OpenOptions::new().append(true).open(path)
        }
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn falls_back_from_a_dead_socket_to_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("prestop.log");
        let mut r = Reporter::new(
            Some(dir.path().join("nobody.sock")),
            Some(file.clone()),
            LastResort::Stderr,
        );
        assert_eq!(r.send("{\"a\":1}"), Route::File);
        assert_eq!(r.send("{\"a\":2}"), Route::File);
        assert_eq!(
            std::fs::read_to_string(file).unwrap(),
            "{\"a\":1}\n{\"a\":2}\n"
        );
    }

    #[test]
    fn uses_the_socket_when_it_listens() {
        let dir = tempfile::tempdir().unwrap();
        let sock = dir.path().join("h.sock");
        let listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        let mut r = Reporter::new(Some(sock), None, LastResort::Stderr);
        assert_eq!(r.send("{\"x\":true}"), Route::Socket);
        drop(r);
        let (mut conn, _) = listener.accept().unwrap();
        let mut got = String::new();
        std::io::Read::read_to_string(&mut conn, &mut got).unwrap();
        assert_eq!(got, "{\"x\":true}\n");
    }

    #[test]
    fn a_file_the_fallback_creates_is_writable_by_other_users() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("prestop.log");
        let mut r = Reporter::new(None, Some(file.clone()), LastResort::Stderr);
        assert_eq!(r.send("{}"), Route::File);
        let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, SHARED_FILE_MODE, "{mode:o}");
        // A file that already exists keeps the mode it has.
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        let mut r = Reporter::new(None, Some(file.clone()), LastResort::Stderr);
        assert_eq!(r.send("{}"), Route::File);
        let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{mode:o}");
    }

    #[test]
    fn unwritable_file_goes_to_the_last_resort() {
        let dir = tempfile::tempdir().unwrap();
        let mut r = Reporter::new(None, Some(dir.path().to_path_buf()), LastResort::Stderr);
        assert_eq!(r.send("{}"), Route::LastResort);
    }
}
