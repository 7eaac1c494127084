//! The shutdown trigger: the first SIGTERM or SIGINT, held from the first instruction of `main`
//! until its handler is in place, so a signal in the first milliseconds still ends in an orderly
//! shutdown (and a summary) rather than killing the process outright.

use nix::sys::signal::{SigSet, SigmaskHow, Signal, pthread_sigmask};
use tokio::signal::unix::{SignalKind, signal};

/// The signals that stop hooklog.
fn stopping() -> SigSet {
    let mut set = SigSet::empty();
    set.add(Signal::SIGTERM);
    set.add(Signal::SIGINT);
    set
}

/// Blocks SIGTERM and SIGINT on this thread (and the threads it starts): one sent now waits,
/// pending, until [`release`]. Call it first thing in `main`.
pub fn hold() {
    // Failing only on an invalid argument; then signals keep their default action, as before.
    let _ = pthread_sigmask(SigmaskHow::SIG_BLOCK, Some(&stopping()), None);
}

/// Unblocks what [`hold`] blocked: a signal that arrived meanwhile is delivered now, to the
/// handler installed since (or with its default action, for the subcommands that have none).
pub fn release() {
    let _ = pthread_sigmask(SigmaskHow::SIG_UNBLOCK, Some(&stopping()), None);
}

/// Resolves on the first SIGTERM or SIGINT. Handlers are installed when this is called, and then
/// what [`hold`] held is released; if they cannot be installed, it never resolves and says so
/// (the daemon then stops only on SIGKILL, as before hooklog).
pub fn terminate() -> impl Future<Output = &'static str> + Send + 'static {
    let term = signal(SignalKind::terminate());
    let int = signal(SignalKind::interrupt());
    release();
    async move {
        match (term, int) {
            (Ok(mut term), Ok(mut int)) => tokio::select! {
                _ = term.recv() => "SIGTERM",
                _ = int.recv() => "SIGINT",
            },
            (Err(e), _) | (_, Err(e)) => {
                tracing::error!(error = %e, "cannot install signal handlers");
                std::future::pending().await
            }
        }
    }
}
