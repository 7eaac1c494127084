//! (the sidecar) The shutdown trigger: the first of the [`STOPPING`] signals, held from the first instruction
//! of `main` until its handler is in place, so a signal in the first milliseconds still ends in
//! an orderly shutdown (and a summary) rather than killing the process outright.

use std::task::Poll;

use nix::sys::signal::{SigSet, SigmaskHow, Signal, pthread_sigmask};
use tokio::signal::unix::{SignalKind, signal};

/// The signals that stop `hooklog run` through its shutdown phases, and that `hooklog hook`
/// forwards to its command's process group: the kubelet's SIGTERM, and what a terminal (SIGINT,
/// SIGQUIT) or a closed session (SIGHUP) sends. Their default action would end hooklog at once,
/// with no summary and no `hook.finished` (signal(7)).
pub const STOPPING: [Signal; 4] = [
    Signal::SIGTERM,
    Signal::SIGINT,
    Signal::SIGHUP,
    Signal::SIGQUIT,
];

/// Signals `hooklog run` ignores: their default action is to end the process (signal(7)), and
/// nothing in a pod means "stop" by them. SIGPIPE is not here: Rust's runtime already ignores it
/// from the start (a closed pipe is an `EPIPE` from the write, handled where it happens).
const IGNORED: [Signal; 2] = [Signal::SIGUSR1, Signal::SIGUSR2];

/// What [`hold`] blocks: the stopping signals, and the ignored ones until they are ignored.
fn held() -> SigSet {
    let mut set = SigSet::empty();
    for s in STOPPING.into_iter().chain(IGNORED) {
        set.add(s);
    }
    set
}

/// Blocks the [`STOPPING`] and ignored signals on this thread (and the threads it starts): one
/// sent now waits, pending, until [`release`]. Call it first thing in `main`.
pub fn hold() {
    // Failing only on an invalid argument; then signals keep their default action, as before.
    let _ = pthread_sigmask(SigmaskHow::SIG_BLOCK, Some(&held()), None);
}

/// Unblocks what [`hold`] blocked: a signal that arrived meanwhile is delivered now, to the
/// handler installed since (or with its default action, for the subcommands that have none).
pub fn release() {
    let _ = pthread_sigmask(SigmaskHow::SIG_UNBLOCK, Some(&held()), None);
}

/// Handlers for every [`STOPPING`] signal; [`Stopping::recv`] yields each one that arrives.
pub struct Stopping {
    /// One tokio stream per signal, with the signal it stands for.
    streams: Vec<(Signal, tokio::signal::unix::Signal)>,
}

impl Stopping {
    /// Installs the handlers (from now on these signals no longer end the process). Call
    /// [`release`] after it.
    pub fn install() -> std::io::Result<Stopping> {
        let streams = STOPPING
            .into_iter()
            .map(|s| Ok((s, signal(SignalKind::from_raw(s as i32))?)))
            .collect::<std::io::Result<_>>()?;
        Ok(Stopping { streams })
    }

    /// The next stopping signal to arrive.
    pub async fn recv(&mut self) -> Signal {
        std::future::poll_fn(|cx| {
            for (sig, stream) in &mut self.streams {
                if let Poll::Ready(Some(())) = stream.poll_recv(cx) {
                    return Poll::Ready(*sig);
                }
            }
            Poll::Pending
        })
        .await
    }
}

/// Resolves on the first [`STOPPING`] signal, with its name. Handlers are installed when this is
/// called (and the [`IGNORED`] signals are ignored from then on), then what [`hold`] held is
/// released; if they cannot be installed, it never resolves and says so (the daemon then stops
/// only on SIGKILL, as before hooklog).
pub fn terminate() -> impl Future<Output = &'static str> + Send + 'static {
    let stopping = Stopping::install();
    for s in IGNORED {
        // tokio never removes a handler it installed: the stream may go, the signal stays
        // caught, and nothing reads it.
        if let Err(e) = signal(SignalKind::from_raw(s as i32)) {
            tracing::warn!(signal = s.as_str(), error = %e, "cannot ignore signal");
        }
    }
    release();
    async move {
        match stopping {
            Ok(mut stopping) => stopping.recv().await.as_str(),
            Err(e) => {
                tracing::error!(error = %e, "cannot install signal handlers");
                std::future::pending().await
            }
        }
    }
}
