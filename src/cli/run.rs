//! (below both) `hooklog run`'s flags: the sidecar reads them, and `check` reads the
//! sidecar's command line in a manifest with them.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, ValueEnum};

use super::values::{bounded_duration, env_bool, parse_mode};
use crate::duration::clap_parse as duration;

/// `--max-connections` default: well above the handful of hooks a pod runs at once; each served
/// connection holds a 16 KiB read buffer (`source::socket::CONN_READ_BUF`) and one unfinished
/// line, about 2 MB for all of them (docs/inputs-and-records.md, "Memory and backpressure").
pub const DEFAULT_MAX_CONNECTIONS: usize = 64;

/// Default output cap. containerd splits stdout lines over 16 KiB into partial lines that
/// Fargate's log router does not rejoin (and drops lines over ~66 KB), so one record stays below.
pub const DEFAULT_MAX_LINE_BYTES: usize = 16 * 1024 - 1;

/// Where records go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Output {
    /// JSON lines on stdout (Fargate's Fluent Bit ships them).
    Stdout,
    /// CloudWatch Logs, through PutLogEvents.
    Cloudwatch,
}

/// `hooklog run`.
#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    /// File to follow (tail -F); created if missing. Repeatable.
    #[arg(long = "file", env = "HOOKLOG_FILE", value_delimiter = ',')]
    pub files: Vec<PathBuf>,

    /// Unix stream socket to listen on; a stale socket file is replaced. Repeatable.
    #[arg(long = "socket", env = "HOOKLOG_SOCKET", value_delimiter = ',')]
    pub sockets: Vec<PathBuf>,

    /// Permission bits (octal) for files and sockets hooklog creates; the default lets
    /// containers running as other users append.
    #[arg(long, env = "HOOKLOG_FILE_MODE", default_value = "666", value_parser = parse_mode)]
    pub file_mode: u32,

    /// Downward API volume holding `labels` and `annotations` files.
    #[arg(long, env = "HOOKLOG_PODINFO")]
    pub podinfo: Option<PathBuf>,

    /// Which of the pod's maps records carry (`labels`, `annotations`, both, or `none`), as
    /// Fluent Bit's kubernetes filter's `Labels` and `Annotations` settings; together they are
    /// bounded to 1 KiB per record (a quarter of `--max-line-bytes` when that is less).
    #[arg(
        long,
        env = "HOOKLOG_POD_METADATA",
        value_enum,
        value_delimiter = ',',
        default_value = "labels,annotations"
    )]
    pub pod_metadata: Vec<PodMetadata>,

    /// Longest output record in bytes, newline included; longer lines are split into parts.
    #[arg(long, env = "HOOKLOG_MAX_LINE_BYTES", default_value_t = DEFAULT_MAX_LINE_BYTES)]
    pub max_line_bytes: usize,

    /// Most socket connections served at once; more wait to be accepted.
    #[arg(long, env = "HOOKLOG_MAX_CONNECTIONS", default_value_t = DEFAULT_MAX_CONNECTIONS)]
    pub max_connections: usize,

    /// Containers expected to run a hook; on SIGTERM hooklog waits for each.
    #[arg(long, env = "HOOKLOG_PEERS", value_delimiter = ',')]
    pub peers: Vec<String>,

    /// Longest hooklog runs after SIGTERM, whatever is pending.
    #[arg(long, env = "HOOKLOG_GRACE", default_value = "25s", value_parser = bounded_duration)]
    pub grace: Duration,

    /// Quiet period after the last hook ended, for trailing lines.
    #[arg(long, env = "HOOKLOG_LINGER", default_value = "500ms", value_parser = bounded_duration)]
    pub linger: Duration,

    /// How long a file renamed away or deleted keeps being read after its last new bytes, for a
    /// writer that still has it open.
    #[arg(long, env = "HOOKLOG_ROTATE_WAIT", default_value = "5s", value_parser = duration)]
    pub rotate_wait: Duration,

    /// How long after SIGTERM an expected peer may take to announce its hook before it counts as
    /// missing.
    #[arg(long, env = "HOOKLOG_ANNOUNCE_TIMEOUT", default_value = "5s", value_parser = bounded_duration)]
    pub announce_timeout: Duration,

    /// hooklog runs as a native sidecar (an init container with `restartPolicy: Always`): the
    /// kubelet signals it only once the main containers are gone, so their hooks are over and
    /// the summary is written at once, without waiting for peers to announce or for `--linger`.
    #[arg(long, env = "HOOKLOG_NATIVE_SIDECAR", value_parser = env_bool("HOOKLOG_NATIVE_SIDECAR"))]
    pub native_sidecar: bool,

    /// Where records go: stdout, cloudwatch, or both (`stdout,cloudwatch`).
    #[arg(
        long = "output",
        env = "HOOKLOG_OUTPUT",
        value_delimiter = ',',
        value_enum,
        default_value = "stdout"
    )]
    pub outputs: Vec<Output>,

    /// CloudWatch Logs group (required with `--output cloudwatch`).
    #[arg(long, env = "HOOKLOG_LOG_GROUP")]
    pub log_group: Option<String>,

    /// CloudWatch Logs stream name; `{pod_name}`, `{namespace_name}`, `{pod_id}`, `{pod_ip}`
    /// and `{host}` are replaced by the pod's values.
    #[arg(
        long,
        env = "HOOKLOG_LOG_STREAM",
        default_value = "{namespace_name}/{pod_name}"
    )]
    pub log_stream: String,

    /// Retention to set on a log group hooklog creates (one of CloudWatch's allowed values).
    #[arg(long, env = "HOOKLOG_RETENTION_DAYS")]
    pub retention_days: Option<i32>,

    /// Longest a record waits before a CloudWatch batch is sent.
    #[arg(long, env = "HOOKLOG_FLUSH_INTERVAL", default_value = "1s", value_parser = bounded_duration)]
    pub flush_interval: Duration,

    /// Add CloudWatch Embedded Metric Format to the `hooks.summary` record.
    #[arg(long, env = "HOOKLOG_EMF", value_parser = env_bool("HOOKLOG_EMF"))]
    pub emf: bool,

    /// Metric namespace for `--emf`.
    #[arg(long, env = "HOOKLOG_EMF_NAMESPACE", default_value = "hooklog")]
    pub emf_namespace: String,

    /// Post a Warning Event on the pod for each hook that does not end ok (needs `create` and
    /// `patch` on `events` in the pod's namespace, and POD_NAME and POD_UID).
    #[arg(long, env = "HOOKLOG_EVENTS", value_parser = env_bool("HOOKLOG_EVENTS"))]
    pub events: bool,

    /// The service account mount `--events` reads (`ca.crt`, `token`, `namespace`).
    #[arg(
        long,
        env = "HOOKLOG_SERVICEACCOUNT_DIR",
        default_value = "/var/run/secrets/kubernetes.io/serviceaccount"
    )]
    pub serviceaccount_dir: PathBuf,

    /// Where the summary's line is written at exit, for the pod's status: the container's
    /// `terminationMessagePath` (default `/dev/termination-log`, written only when it exists);
    /// `-` for none.
    #[arg(long, env = "HOOKLOG_TERMINATION_MESSAGE_PATH")]
    pub termination_message_path: Option<PathBuf>,

    /// After `--`: the command of the `tail -F` forwarder whose container `hooklog inject` gave
    /// hooklog, never run; kept as written so that `uninject` gives it back byte for byte.
    #[arg(last = true, hide = true, value_name = "REPLACED")]
    pub replaced: Vec<String>,
}

/// What `--pod-metadata` may name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PodMetadata {
    /// The pod's labels.
    Labels,
    /// The pod's annotations (hooklog's own and kubectl's last-applied manifest never).
    Annotations,
    /// Neither.
    None,
}
