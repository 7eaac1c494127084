//! The shutdown trigger: the first SIGTERM or SIGINT.

use tokio::signal::unix::{SignalKind, signal};

/// Resolves on the first SIGTERM or SIGINT. Handlers are installed when this is called, so call
/// it before anything can send the signal; if they cannot be installed, it never resolves and
/// says so (the daemon then stops only on SIGKILL, as before hooklog).
pub fn terminate() -> impl Future<Output = &'static str> + Send + 'static {
    let term = signal(SignalKind::terminate());
    let int = signal(SignalKind::interrupt());
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
