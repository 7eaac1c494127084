//! (below both) The flags of the tools for images without a shell: `hooklog sleep`,
//! `hooklog install` and `hooklog emit`.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use super::values::parse_field;

/// `hooklog sleep`.
#[derive(Debug, Clone, Args)]
pub struct SleepArgs {
    /// `50`, `50s`, `1m30s`, `0.5`, `250ms`, `2d`, `infinity`; several are added up, as GNU
    /// sleep does (`1m 30s`).
    #[arg(value_parser = crate::duration::clap_parse_sleep, required = true, num_args = 1..)]
    pub durations: Vec<Duration>,

    /// After `--`: the keep-alive of a `tail -F` forwarder `hooklog inject` migrated, never run;
    /// kept as written so that `uninject` gives it back byte for byte.
    #[arg(last = true, hide = true, value_name = "REPLACED")]
    pub replaced: Vec<String>,
}

/// `hooklog install`.
#[derive(Debug, Clone, Args)]
pub struct InstallArgs {
    /// Folder to copy the executable into (created if missing).
    pub dir: PathBuf,
}

/// `hooklog emit`.
#[derive(Debug, Clone, Args)]
pub struct EmitArgs {
    /// The container the record is about.
    #[arg(long, env = "HOOKLOG_CONTAINER")]
    pub container: Option<String>,

    /// An extra string field, `key=value`. Repeatable.
    #[arg(long = "field", value_name = "KEY=VALUE", value_parser = parse_field)]
    pub fields: Vec<(String, String)>,

    /// hooklog's socket; tried first.
    #[arg(long, env = "HOOKLOG_SOCKET")]
    pub socket: Option<PathBuf>,

    /// The shared file; used when the socket is unreachable. With neither, the record goes to
    /// stdout.
    #[arg(long, env = "HOOKLOG_FILE")]
    pub file: Option<PathBuf>,

    /// The message.
    pub message: String,
}
