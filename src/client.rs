//! (the sidecar) The client side of hooklog: how `hook` and `emit` deliver their records. The daemon's socket
//! first; the shared file when the socket is unreachable or slow; stderr (or stdout) as the last
//! resort. Logging never makes a hook fail, and never makes it wait: records are queued and a
//! thread of their own delivers them, so the hook's command runs beside its reporting, never
//! behind it.
//!
//! Each record goes out whole by one route; lifecycle records (`hook.started`, `hook.finished`,
//! [`Reporter::send_everywhere`]) go by the socket and the file both, and the daemon keeps one.
//! The run's last record is copied to the file only once the daemon has read all the socket
//! carried (the wrapper shuts its side; the daemon closes the connection at that end), or after
//! [`ACK_WAIT`]: so the copy never overtakes the output before it.
//! Once the socket has failed (it cannot be reached within [`CONNECT_DEADLINE`], a write makes
//! no progress for [`SOCKET_STALL`], or, with a file to go to, [`SOCKET_QUEUE_BYTES`] wait in
//! front of it), the rest of the run's records go to the file, which the daemon reads at its own
//! pace: the file on disk is the buffer, and the hook is not slowed. With no file, a socket that
//! makes progress is behind, not stuck: it keeps the hook (given up only after [`SOCKET_STUCK`]
//! without progress), and the queue in front of it slows the command's output to the daemon's
//! pace. A connection the daemon closed (it closes idle ones when its connections are all taken)
//! is made again once per record.
//!
//! Writes to the shared file never glue records: the file is opened without following a symlink
//! and only if it is a regular file, and a record is written on a fresh line when the file does
//! not end with one (another writer's record cut short by a full disk).

use std::collections::VecDeque;
use std::fs::File;
use std::io::Write;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// How long the reporter keeps trying to connect to a daemon whose accept queue is full before it
/// uses the file for the rest of the run. A refused or missing socket is given up at once.
pub const CONNECT_DEADLINE: Duration = Duration::from_millis(250);

/// Pause between two connect attempts while the daemon's accept queue is full.
const CONNECT_RETRY: Duration = Duration::from_millis(20);

/// Longest a write to the daemon's socket may make no progress before the socket is given up for
/// the rest of the run and the record goes to the file.
pub const SOCKET_STALL: Duration = Duration::from_millis(500);

/// The same with no file to go to: the records would go to stderr, so the socket is waited for
/// longer. A daemon whose reads take this long (its own stdout blocked) is stuck, not behind.
pub const SOCKET_STUCK: Duration = Duration::from_secs(5);

/// Bytes queued in front of a working socket before the rest goes to the file (with a file), or
/// before `has_room` says no and the hook stops reading its command's output until the daemon
/// catches up (without one): what slows a socket-only command to the daemon's pace. Small, so
/// that what is queued when the command ends is delivered well within the hook's finish deadline
/// (at 100,000 records/s, a daemon's debug build, about 0.1 s).
pub const SOCKET_QUEUE_BYTES: usize = 1024 * 1024;

/// After the run's last record, how long the daemon may take to read all the socket carried
/// (it closes the connection once it has) before that record is copied to the file all the
/// same.
pub const ACK_WAIT: Duration = Duration::from_millis(500);

/// Bytes queued in front of the file (once the socket is given up, or when there is none) before
/// `has_room` says no and the hook stops reading its command's output until the file catches up
/// (a local file write; this bounds memory).
pub const QUEUE_BYTES: usize = 4 * 1024 * 1024;

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

/// How many records went which way, once the reporter is finished.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Delivery {
    /// Records the daemon's socket took.
    pub socket: usize,
    /// Records written to the shared file.
    pub file: usize,
    /// Records written to the last resort.
    pub last_resort: usize,
    /// Records still queued when the finish deadline passed.
    pub unsent: usize,
}

/// Sends records, one JSON line each, by the first way that works, from a thread of its own.
#[derive(Debug)]
pub struct Reporter {
    /// The queue, shared with the delivering thread.
    shared: Arc<Shared>,
    /// The delivering thread; `None` once joined.
    thread: Option<std::thread::JoinHandle<()>>,
}

#[derive(Debug)]
struct Shared {
    /// Records and what became of them.
    state: Mutex<State>,
    /// Wakes the delivering thread (a record queued, or the end) and `finish` (all delivered).
    wake: Condvar,
    /// Told whenever the queue shrinks, for callers waiting on `has_room`.
    room: tokio::sync::Notify,
}

/// One queued record.
#[derive(Debug)]
struct Entry {
    /// The record with its newline.
    line: Vec<u8>,
    /// Sent by every route (a lifecycle record), not only the first that works.
    everywhere: Copy,
}

/// When a record taken by the socket is copied to the file too.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Copy {
    /// Not at all: one route is enough.
    Never,
    /// At once (`hook.started`: before any output of the run, whichever copy the daemon reads).
    Now,
    /// Once the daemon has read all the socket carried, or after [`ACK_WAIT`]
    /// (`hook.finished`: it must not overtake the run's output still in the socket).
    AfterAck,
}

#[derive(Debug, Default)]
struct State {
    /// Records waiting.
    queue: VecDeque<Entry>,
    /// Bytes in `queue`.
    bytes: usize,
    /// True when the socket is given up (or was never there): the file comes next.
    socket_failed: bool,
    /// A file is configured: a socket that falls behind is given up for it.
    has_file: bool,
    /// No more records will come.
    closed: bool,
    /// The thread has delivered everything and ended.
    done: bool,
    /// What went where.
    delivery: Delivery,
}

impl Reporter {
    /// A reporter trying `socket`, then `file`, then `last_resort`. Starts its thread at once; if
    /// no thread can be started the records are delivered on the caller's thread.
    pub fn new(socket: Option<PathBuf>, file: Option<PathBuf>, last_resort: LastResort) -> Self {
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                socket_failed: socket.is_none(),
                has_file: file.is_some(),
                ..State::default()
            }),
            wake: Condvar::new(),
            room: tokio::sync::Notify::new(),
        });
        let routes = Routes {
            socket,
            conn: None,
            file,
            file_handle: None,
            last_resort,
            warned_socket: false,
            warned_file: false,
        };
        let thread_shared = shared.clone();
        let thread = std::thread::Builder::new()
            .name("hooklog-report".into())
            .spawn(move || deliver(&thread_shared, routes))
            .map_err(|e| tracing::warn!(error = %e, "cannot start the reporting thread"))
            .ok();
        Reporter { shared, thread }
    }

    /// Queues one record (JSON text without newline) for the first route that takes it. Never
    /// blocks on delivery: with a file, a socket [`SOCKET_QUEUE_BYTES`] behind is given up for
    /// it; callers that produce many records wait for [`Reporter::has_room`].
    pub fn send(&self, record: &str) {
        self.queue(record, Copy::Never);
    }

    /// Queues a lifecycle record for the socket and the file both (when both are configured):
    /// it reaches the daemon whatever becomes of one route, and the daemon keeps one copy per
    /// `(run_id, event)`.
    pub fn send_everywhere(&self, record: &str) {
        self.queue(record, Copy::Now);
    }

    /// [`Reporter::send_everywhere`] for the run's last record: its file copy waits until the
    /// daemon has read everything the socket carried (or [`ACK_WAIT`]), so that it cannot come
    /// out ahead of the output before it. Nothing may be sent after it.
    pub fn send_last_everywhere(&self, record: &str) {
        self.queue(record, Copy::AfterAck);
    }

    fn queue(&self, record: &str, everywhere: Copy) {
        let mut line = Vec::with_capacity(record.len() + 1);
        line.extend_from_slice(record.as_bytes());
        line.push(b'\n');
        let mut st = self.shared.lock();
        st.bytes += line.len();
        st.queue.push_back(Entry { line, everywhere });
        if !st.socket_failed && st.has_file && st.bytes > SOCKET_QUEUE_BYTES {
            st.socket_failed = true;
            tracing::warn!(
                queued = st.bytes,
                "hooklog socket behind, using the file for the rest of this hook"
            );
        }
        drop(st);
        self.shared.wake.notify_all();
    }

    /// False while more than [`SOCKET_QUEUE_BYTES`] wait for a working socket, or
    /// [`QUEUE_BYTES`] for the file: the caller should stop producing records until
    /// [`Reporter::room`] fires.
    pub fn has_room(&self) -> bool {
        let st = self.shared.lock();
        let limit = if st.socket_failed {
            QUEUE_BYTES
        } else {
            SOCKET_QUEUE_BYTES
        };
        st.bytes <= limit
    }

    /// Resolves after the queue shrank (call `has_room` again).
    pub async fn room(&self) {
        self.shared.room.notified().await;
    }

    /// Ends the queue and waits until every record is delivered, or `within` has passed (then
    /// the rest is abandoned, and counted as `unsent`).
    pub fn finish(mut self, within: Duration) -> Delivery {
        let by = Instant::now() + within;
        let mut st = self.shared.lock();
        st.closed = true;
        self.shared.wake.notify_all();
        if self.thread.is_none() {
            // No thread: deliver here, as the thread would have.
            drop(st);
            let shared = self.shared.clone();
            deliver(&shared, Routes::none());
            st = self.shared.lock();
        }
        while !st.done {
            let now = Instant::now();
            if now >= by {
                st.delivery.unsent = st.queue.len();
                return st.delivery;
            }
            st = self
                .shared
                .wake
                .wait_timeout(st, by - now)
                .map(|(g, _)| g)
                .unwrap_or_else(|e| e.into_inner().0);
        }
        let delivery = st.delivery;
        drop(st);
        if let Some(t) = self.thread.take() {
            // The thread is done; joining only reaps it. A panic there was already reported.
            let _ = t.join();
        }
        delivery
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The delivering thread: takes records off the queue in order and writes each by the first
/// route that works, until the queue is closed and empty.
fn deliver(shared: &Shared, mut routes: Routes) {
    let mut last_copy: Option<Vec<u8>> = None;
    loop {
        let mut st = shared.lock();
        let entry = loop {
            if let Some(e) = st.queue.pop_front() {
                break e;
            }
            if st.closed {
                if let Some(line) = last_copy.take() {
                    drop(st);
                    routes.await_read(ACK_WAIT);
                    // The file's copy: the daemon keeps the first it reads.
                    routes.try_file(&line);
                    st = shared.lock();
                    continue;
                }
                st.done = true;
                drop(st);
                shared.wake.notify_all();
                return;
            }
            st = shared.wake.wait(st).unwrap_or_else(|e| e.into_inner());
        };
        let use_socket = !st.socket_failed;
        drop(st);
        let route = routes.write(&entry.line, use_socket);
        if route == Route::Socket {
            match entry.everywhere {
                Copy::Never => {}
                // The file's copy: the daemon keeps the first it reads.
                Copy::Now => {
                    routes.try_file(&entry.line);
                }
                Copy::AfterAck => last_copy = Some(entry.line.clone()),
            }
        }
        let mut st = shared.lock();
        st.bytes -= entry.line.len();
        match route {
            Route::Socket => st.delivery.socket += 1,
            Route::File => st.delivery.file += 1,
            Route::LastResort => st.delivery.last_resort += 1,
        }
        if use_socket && route != Route::Socket {
            st.socket_failed = true;
        }
        drop(st);
        shared.room.notify_one();
    }
}

/// Which way a record went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Route {
    Socket,
    File,
    LastResort,
}

/// The ways out, owned by the delivering thread.
#[derive(Debug)]
struct Routes {
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

impl Routes {
    /// No route but stderr: for the (unlikely) case where no thread could be started and the
    /// caller delivers what is queued itself.
    fn none() -> Self {
        Routes {
            socket: None,
            conn: None,
            file: None,
            file_handle: None,
            last_resort: LastResort::Stderr,
            warned_socket: true,
            warned_file: true,
        }
    }

    /// Writes `line` by the socket (when `use_socket`), the file, or the last resort.
    fn write(&mut self, line: &[u8], use_socket: bool) -> Route {
        if use_socket && self.try_socket(line) {
            return Route::Socket;
        }
        self.conn = None;
        if self.try_file(line) {
            return Route::File;
        }
        // The file is refused (a peer swapped it for a link) or failing: a socket that was only
        // slow (waiting behind other connections) is better than stderr, so it is tried again
        // with the socket-only budget (found by the generated hostile pods: dribblers held the
        // daemon's slots, the file was a peer's link, and the hook's finish went to stderr).
        // (Socket only, the first try had that budget already.)
        if self.socket.is_some() && self.file.is_some() && self.try_socket_with(line, SOCKET_STUCK)
        {
            return Route::Socket;
        }
        let _ = match self.last_resort {
            // Nothing is left to report a failure to.
            LastResort::Stderr => std::io::stderr().lock().write_all(line),
            LastResort::Stdout => std::io::stdout().lock().write_all(line),
        };
        Route::LastResort
    }

    fn try_socket(&mut self, line: &[u8]) -> bool {
        let stall = if self.file.is_some() {
            SOCKET_STALL
        } else {
            SOCKET_STUCK
        };
        self.try_socket_with(line, stall)
    }

    /// [`Self::try_socket`] giving up after `stall` without progress.
    fn try_socket_with(&mut self, line: &[u8], stall: Duration) -> bool {
        let Some(path) = &self.socket else {
            return false;
        };
        // A second try only when the daemon closed the connection (an idle one, to make room).
        for attempt in 0..2 {
            if self.conn.is_none() {
                match connect(path, CONNECT_DEADLINE) {
                    Ok(c) => self.conn = Some(c),
                    Err(e) => {
                        if !self.warned_socket {
                            tracing::warn!(socket = %path.display(), error = %e, "hooklog socket unreachable, using the file");
                            self.warned_socket = true;
                        }
                        return false;
                    }
                }
            }
            let Some(conn) = self.conn.as_mut() else {
                return false;
            };
            match write_record(conn, line, stall) {
                Ok(()) => return true,
                Err(e) if attempt == 0 && closed_by_peer(&e) => {
                    tracing::debug!(socket = %path.display(), error = %e, "connection closed by the daemon, connecting again");
                    self.conn = None;
                }
                Err(e) => {
                    tracing::warn!(socket = %path.display(), error = %e, "hooklog socket stalled, using the file for the rest of this hook");
                    return false;
                }
            }
        }
        false
    }

    /// Shuts the writing side of the connection and waits, at most `within`, for the daemon to
    /// close it: it does once it has read everything this side sent, to the end it now sees.
    fn await_read(&mut self, within: Duration) {
        use std::io::{ErrorKind, Read};
        let Some(mut conn) = self.conn.take() else {
            return;
        };
        if conn.shutdown(std::net::Shutdown::Write).is_err() {
            return;
        }
        let by = Instant::now() + within;
        let mut buf = [0u8; 64];
        loop {
            let left = by.saturating_duration_since(Instant::now());
            // A zero timeout would mean none.
            if left.is_zero() || conn.set_read_timeout(Some(left)).is_err() {
                tracing::debug!("the daemon did not read all the socket carried in time");
                return;
            }
            match conn.read(&mut buf) {
                // Closed (or reset) by the daemon: all read.
                Ok(0) => return,
                // The daemon sends nothing; whatever comes is not an answer.
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    tracing::debug!("the daemon did not read all the socket carried in time");
                    return;
                }
                Err(_) => return,
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
        // One write per line: O_APPEND keeps concurrent writers' lines whole. A line after one
        // cut short (a full disk, ours or another writer's) starts on a fresh line.
        let fresh;
        let line = if ends_mid_line(f) {
            fresh = [b"\n", line].concat();
            &fresh[..]
        } else {
            line
        };
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

/// Connects without blocking: a daemon whose accept queue is full answers EAGAIN at once, and is
/// tried again until `within` has passed; any other error is final.
fn connect(path: &Path, within: Duration) -> std::io::Result<UnixStream> {
    use nix::errno::Errno;
    use nix::sys::socket::{AddressFamily, SockFlag, SockType, UnixAddr, socket};
    let addr = UnixAddr::new(path).map_err(std::io::Error::from)?;
    let by = Instant::now() + within;
    loop {
        let fd = socket(
            AddressFamily::Unix,
            SockType::Stream,
            SockFlag::SOCK_NONBLOCK | SockFlag::SOCK_CLOEXEC,
            None,
        )
        .map_err(std::io::Error::from)?;
        match nix::sys::socket::connect(std::os::fd::AsRawFd::as_raw_fd(&fd), &addr) {
            Ok(()) => {
                let stream = UnixStream::from(fd);
                stream.set_nonblocking(false)?;
                stream.set_write_timeout(Some(SOCKET_STALL))?;
                return Ok(stream);
            }
            Err(Errno::EAGAIN) if Instant::now() + CONNECT_RETRY < by => {
                std::thread::sleep(CONNECT_RETRY);
            }
            Err(Errno::EAGAIN) => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!(
                        "the daemon's accept queue stayed full for {} ms",
                        within.as_millis()
                    ),
                ));
            }
            Err(e) => return Err(e.into()),
        }
    }
}

/// Writes one record. A write that makes no progress for `stall` fails, and the record goes
/// whole to the file; a daemon that keeps reading, however slowly, keeps it. A record the kernel
/// took in part (only one longer than a socket buffer segment, tens of KB) leaves the daemon a
/// flagged fragment, and the file the whole line.
fn write_record(conn: &mut UnixStream, line: &[u8], stall: Duration) -> std::io::Result<()> {
    use std::io::ErrorKind;
    let mut written = 0;
    let mut progress = Instant::now();
    while written < line.len() {
        // Each blocking write returns after SOCKET_STALL at the latest (the socket's timeout).
        match conn.write(&line[written..]) {
            Ok(0) => return Err(ErrorKind::WriteZero.into()),
            Ok(n) => {
                written += n;
                progress = Instant::now();
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                // A record the socket has begun is finished there while it can be: given up
                // half-way, its first part would come out beside its whole copy through the file
                // (issue 25.7: a line came out twice, the connection waiting in the daemon's
                // accept queue with a full buffer while 64 idle ones held the slots).
                let budget = if written > 0 {
                    stall.max(SOCKET_STUCK)
                } else {
                    stall
                };
                if progress.elapsed() >= budget {
                    return Err(std::io::Error::new(
                        ErrorKind::TimedOut,
                        format!(
                            "no write made progress for {} ms ({written} of {} bytes taken)",
                            budget.as_millis(),
                            line.len()
                        ),
                    ));
                }
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// True when the daemon closed the connection (EPIPE, ECONNRESET): it closes idle connections
/// when all of its `--max-connections` are taken, after reading what they sent.
fn closed_by_peer(e: &std::io::Error) -> bool {
    use std::io::ErrorKind;
    matches!(
        e.kind(),
        ErrorKind::BrokenPipe | ErrorKind::ConnectionReset | ErrorKind::NotConnected
    )
}

/// True when the file's last byte is not a newline: a record cut short (a full disk, a write
/// limit) ends it, and the next record must not be glued to that fragment. Unknown (the file
/// cannot be read: opened for appending only) counts as a whole line.
fn ends_mid_line(f: &File) -> bool {
    use std::os::unix::fs::FileExt;
    let Ok(len) = f.metadata().map(|m| m.len()) else {
        return false;
    };
    let mut last = [0u8; 1];
    len > 0 && f.read_at(&mut last, len - 1).is_ok_and(|n| n == 1) && last[0] != b'\n'
}

/// Opens the shared file for appending (and reading, to check its last byte, when allowed),
/// creating it with [`SHARED_FILE_MODE`]. A symlink is not followed (a peer could point it at
/// any file of this container), and anything but a regular file is refused: a FIFO would block
/// the writes ([`crate::nofollow`], the daemon's own rules for the shared folder).
fn open_shared(path: &Path) -> std::io::Result<File> {
    use crate::nofollow::OpenError;
    crate::nofollow::open_append(path, SHARED_FILE_MODE).map_err(|e| match e {
        OpenError::Refused(why) => std::io::Error::other(format!("{why}: not opened")),
        // The shared folder itself is missing: the system's own words for it.
        OpenError::NotFound => std::io::Error::from_raw_os_error(nix::libc::ENOENT),
        OpenError::Io(e) => e,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const WITHIN: Duration = Duration::from_secs(10);

    /// A listener with a short accept queue (std's is the system maximum).
    fn listen_with_backlog(path: &Path, backlog: i32) -> std::os::fd::OwnedFd {
        use nix::sys::socket::{
            AddressFamily, Backlog, SockFlag, SockType, UnixAddr, bind, listen, socket,
        };
        let fd = socket(
            AddressFamily::Unix,
            SockType::Stream,
            SockFlag::empty(),
            None,
        )
        .unwrap();
        bind(
            std::os::fd::AsRawFd::as_raw_fd(&fd),
            &UnixAddr::new(path).unwrap(),
        )
        .unwrap();
        listen(&fd, Backlog::new(backlog).unwrap()).unwrap();
        fd
    }

    #[test]
    fn falls_back_from_a_dead_socket_to_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("prestop.log");
        let r = Reporter::new(
            Some(dir.path().join("nobody.sock")),
            Some(file.clone()),
            LastResort::Stderr,
        );
        r.send("{\"a\":1}");
        r.send("{\"a\":2}");
        let d = r.finish(WITHIN);
        assert_eq!((d.socket, d.file, d.unsent), (0, 2, 0), "{d:?}");
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
        let r = Reporter::new(Some(sock), None, LastResort::Stderr);
        r.send("{\"x\":true}");
        let d = r.finish(WITHIN);
        assert_eq!(d.socket, 1, "{d:?}");
        let (mut conn, _) = listener.accept().unwrap();
        let mut got = String::new();
        std::io::Read::read_to_string(&mut conn, &mut got).unwrap();
        assert_eq!(got, "{\"x\":true}\n");
    }

    #[test]
    fn a_full_accept_queue_sends_records_to_the_file_within_the_connect_deadline() {
        let dir = tempfile::tempdir().unwrap();
        let sock = dir.path().join("h.sock");
        let file = dir.path().join("prestop.log");
        let listener = listen_with_backlog(&sock, 2);
        // Fill the accept queue: connections nobody accepts.
        let mut held = Vec::new();
        for _ in 0..64 {
            match connect(&sock, Duration::ZERO) {
                Ok(c) => held.push(c),
                Err(_) => break,
            }
        }
        assert!(
            connect(&sock, Duration::ZERO).is_err(),
            "the accept queue never filled"
        );
        let r = Reporter::new(Some(sock), Some(file.clone()), LastResort::Stderr);
        r.send("{\"n\":1}");
        let d = r.finish(WITHIN);
        assert_eq!((d.socket, d.file), (0, 1), "{d:?}");
        assert_eq!(std::fs::read_to_string(file).unwrap(), "{\"n\":1}\n");
        drop(listener);
    }

    #[test]
    fn a_socket_nobody_reads_is_given_up_for_the_file_and_nothing_is_lost() {
        let dir = tempfile::tempdir().unwrap();
        let sock = dir.path().join("h.sock");
        let file = dir.path().join("prestop.log");
        let listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        let r = Reporter::new(Some(sock), Some(file.clone()), LastResort::Stderr);
        let line = format!("{{\"m\":\"{}\"}}", "x".repeat(1000));
        for _ in 0..2000 {
            r.send(&line);
        }
        let d = r.finish(WITHIN);
        assert_eq!(d.socket + d.file, 2000, "{d:?}");
        assert!(d.file > 0, "{d:?}");
        // What the socket took is still in it, whole lines only; the file has the rest.
        // (The reporter may have given the socket up before it even connected.)
        listener.set_nonblocking(true).unwrap();
        let mut got = Vec::new();
        if let Ok((mut conn, _)) = listener.accept() {
            conn.set_nonblocking(true).unwrap();
            let _ = std::io::Read::read_to_end(&mut conn, &mut got);
        }
        let from_socket = got.split(|b| *b == b'\n').filter(|l| !l.is_empty()).count();
        assert!(got.is_empty() || got.ends_with(b"\n"));
        let in_file = std::fs::read_to_string(file).unwrap().lines().count();
        assert_eq!((from_socket, in_file), (d.socket, d.file));
    }

    #[test]
    fn a_connection_the_daemon_closed_is_made_again() {
        use std::io::BufRead;
        let dir = tempfile::tempdir().unwrap();
        let sock = dir.path().join("h.sock");
        let file = dir.path().join("prestop.log");
        let listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        let r = Reporter::new(Some(sock), Some(file.clone()), LastResort::Stderr);
        listener.set_nonblocking(true).unwrap();
        let accept = || {
            let by = Instant::now() + WITHIN;
            loop {
                match listener.accept() {
                    Ok((c, _)) => break c,
                    Err(_) if Instant::now() < by => std::thread::sleep(CONNECT_RETRY),
                    Err(e) => panic!("the reporter did not connect (again): {e}"),
                }
            }
        };
        let read_one = |conn: std::os::unix::net::UnixStream| {
            conn.set_nonblocking(false).unwrap();
            let mut line = String::new();
            std::io::BufReader::new(&conn).read_line(&mut line).unwrap();
            (conn, line)
        };
        r.send("{\"n\":1}");
        let (first, line) = read_one(accept());
        assert_eq!(line, "{\"n\":1}\n");
        // As the daemon closes an idle connection to make room: reading side first, then close.
        first.shutdown(std::net::Shutdown::Read).unwrap();
        drop(first);
        r.send("{\"n\":2}");
        let (_second, line) = read_one(accept());
        assert_eq!(line, "{\"n\":2}\n");
        let d = r.finish(WITHIN);
        assert_eq!((d.socket, d.file), (2, 0), "{d:?}");
        assert!(!file.exists());
    }

    #[test]
    fn a_record_after_a_fragment_starts_on_a_fresh_line() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("prestop.log");
        // What a writer cut short by a full disk left.
        std::fs::write(&file, "{\"cut\":").unwrap();
        let r = Reporter::new(None, Some(file.clone()), LastResort::Stderr);
        r.send("{\"n\":1}");
        r.send("{\"n\":2}");
        assert_eq!(r.finish(WITHIN).file, 2);
        assert_eq!(
            std::fs::read_to_string(&file).unwrap(),
            "{\"cut\":\n{\"n\":1}\n{\"n\":2}\n"
        );
    }

    #[test]
    fn a_file_the_fallback_creates_is_writable_by_other_users() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("prestop.log");
        let r = Reporter::new(None, Some(file.clone()), LastResort::Stderr);
        r.send("{}");
        assert_eq!(r.finish(WITHIN).file, 1);
        let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, SHARED_FILE_MODE, "{mode:o}");
        // A file that already exists keeps the mode it has.
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        let r = Reporter::new(None, Some(file.clone()), LastResort::Stderr);
        r.send("{}");
        assert_eq!(r.finish(WITHIN).file, 1);
        let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{mode:o}");
    }

    #[test]
    fn unwritable_file_goes_to_the_last_resort() {
        let dir = tempfile::tempdir().unwrap();
        let r = Reporter::new(None, Some(dir.path().to_path_buf()), LastResort::Stderr);
        r.send("{}");
        assert_eq!(r.finish(WITHIN).last_resort, 1);
    }
}
