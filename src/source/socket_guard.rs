//! (the sidecar) Keeps each `--socket` path leading to hooklog: every container of the pod may write the
//! shared folder, so a peer can delete the socket file (wrappers then fall back to the file, or
//! lose their records when there is none) or put a symlink in its place. Every [`CHECK_EVERY`]
//! the guard looks at each path; one that no longer holds hooklog's socket is bound again (a new
//! listener, served like the first), with one warning. A path held by something hooklog does not
//! replace (a regular file, another process's live socket) is reported once, until it is fixed.

use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::source::{SourceContext, socket};

/// How often the socket paths are looked at: a deleted socket is bound again within this. Five
/// seconds keeps an idle hooklog at one wake-up a second or less beside the file poll.
pub const CHECK_EVERY: Duration = Duration::from_secs(5);

/// Most times one path is bound again. Each new listener serves until shutdown (the wrappers
/// connected to an older one keep it), so a peer that deletes the socket again and again must not
/// add listeners without bound; past this the loss is only reported.
pub const MAX_REBINDS: u32 = 8;

/// One watched socket path.
struct Watched {
    /// The socket's path.
    path: PathBuf,
    /// (dev, inode) of the socket hooklog bound there.
    id: Option<(u64, u64)>,
    /// Times bound again.
    rebinds: u32,
    /// Set once the path's loss was reported, cleared when it holds hooklog's socket again.
    warned: bool,
}

/// What the guard needs to serve a socket bound again.
pub struct Guard {
    /// The pipeline, for new listeners.
    pub ctx: SourceContext,
    /// `--file-mode`.
    pub mode: u32,
    /// `--max-connections`, per listener.
    pub max_connections: usize,
    /// Ends the guard and every listener it started.
    pub cancel: CancellationToken,
    /// Where new listeners are tracked, beside the first ones.
    pub tracker: TaskTracker,
}

/// The (dev, inode) at `path`, whatever it is, without following a symlink.
fn id_at(path: &std::path::Path) -> Option<(u64, u64)> {
    std::fs::symlink_metadata(path)
        .ok()
        .map(|m| (m.dev(), m.ino()))
}

impl Guard {
    /// Watches `paths` (just bound) until cancelled.
    pub async fn run(self, paths: Vec<PathBuf>) {
        let mut watched: Vec<Watched> = paths
            .into_iter()
            .map(|path| Watched {
                id: id_at(&path),
                path,
                rebinds: 0,
                warned: false,
            })
            .collect();
        loop {
            tokio::select! {
                _ = self.cancel.cancelled() => return,
                _ = tokio::time::sleep(CHECK_EVERY) => {}
            }
            for w in &mut watched {
                self.check(w);
            }
        }
    }

    fn check(&self, w: &mut Watched) {
        if id_at(&w.path).is_some_and(|id| Some(id) == w.id) {
            w.warned = false;
            return;
        }
        if w.rebinds >= MAX_REBINDS {
            if !std::mem::replace(&mut w.warned, true) {
                tracing::warn!(path = %w.path.display(), rebinds = w.rebinds, "socket removed or replaced again: not binding it any more; hook wrappers fall back to the file");
            }
            return;
        }
        match super::bind::bind_socket(&w.path, self.mode)
            .and_then(|(path, l)| Ok((path, tokio::net::UnixListener::from_std(l)?)))
        {
            Ok((path, listener)) => {
                w.rebinds += 1;
                w.id = id_at(&path);
                w.warned = false;
                tracing::warn!(path = %path.display(), "socket removed or replaced by another container: bound it again");
                self.tracker.spawn(socket::run(
                    listener,
                    path,
                    self.ctx.clone(),
                    self.max_connections,
                    self.cancel.clone(),
                ));
            }
            Err(e) => {
                if !std::mem::replace(&mut w.warned, true) {
                    tracing::warn!(path = %w.path.display(), error = %format!("{e:#}"), "socket removed or replaced by another container and cannot be bound again");
                }
            }
        }
    }
}
