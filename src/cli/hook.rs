//! (below both) `hooklog hook`'s flags: the hook end reads them, and `check` reads a preStop
//! hook's command line with them.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use super::values::bounded_duration;

/// `hooklog hook`.
#[derive(Debug, Clone, Args)]
pub struct HookArgs {
    /// The container this hook belongs to.
    #[arg(long, env = "HOOKLOG_CONTAINER")]
    pub container: String,

    /// hooklog's socket; tried first.
    #[arg(long, env = "HOOKLOG_SOCKET")]
    pub socket: Option<PathBuf>,

    /// The shared file; used when the socket is unreachable (then stderr).
    #[arg(long, env = "HOOKLOG_FILE")]
    pub file: Option<PathBuf>,

    /// Kill the command after this long (SIGTERM, then SIGKILL 1 s later). At most 24h.
    #[arg(long, env = "HOOKLOG_HOOK_TIMEOUT", value_parser = bounded_duration)]
    pub timeout: Option<Duration>,

    /// Which hook this is, reported as `hook`.
    #[arg(
        long = "hook-name",
        env = "HOOKLOG_HOOK_NAME",
        default_value = "preStop"
    )]
    pub hook_name: String,

    /// The command and its arguments.
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<OsString>,
}
