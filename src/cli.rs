//! (below both) The command line: the sidecar's `run`, `hook`, `sleep`, `install`, `emit`
//! and, built with the `control` feature, the control plane's `check`, `inject`, `uninject` for
//! manifests and `webhook` for the cluster. `check` reads hook command lines with these types,
//! so this module imports nothing of the control plane but [`crate::kube`]'s shared words. Every
//! flag but `emit --field` has an environment variable, because pods are configured through env
//! (lists are comma-separated).

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::duration::clap_parse as duration;

/// `--max-connections` default: well above the handful of hooks a pod runs at once; each served
/// connection holds a 16 KiB read buffer (`source::socket::CONN_READ_BUF`) and one unfinished
/// line, about 2 MB for all of them (docs/inputs-and-records.md, "Memory and backpressure").
pub const DEFAULT_MAX_CONNECTIONS: usize = 64;

/// The sidecar's examples, which both builds print.
macro_rules! sidecar_examples {
    () => {
        "\
Examples:
  # The sidecar: follow a file and a socket, print JSON records on stdout
  hooklog run --file /hooklog/prestop.log \\
    --socket /hooklog/hooklog.sock --peers envoy,api-server

  # A container's preStop hook, reported from start to exit status
  /hooklog-bin/hooklog hook --container envoy \\
    --socket /hooklog/hooklog.sock -- /hooklog-bin/hooklog sleep 15

  # Distroless images have no sleep, cp or echo
  hooklog sleep 1m30s
  hooklog install /hooklog-bin
  hooklog emit --container api-server --file /hooklog/prestop.log \\
    --field phase=drain 'draining connections'"
    };
}

#[cfg(not(feature = "control"))]
const EXAMPLES: &str = sidecar_examples!();
#[cfg(feature = "control")]
const EXAMPLES: &str = concat!(
    sidecar_examples!(),
    "

  # Before deploy: find broken preStop hooks, then wire hooklog in
  hooklog check k8s/
  hooklog inject \\
    --image registry.example.com/hooklog-sidecar:0.1.0 \\
    deploy.yaml | kubectl apply -f -
  kubectl get deploy api-server -o yaml | hooklog uninject - \\
    | kubectl apply -f -

  # Cluster-wide: a webhook injecting the pods of opted-in namespaces
  hooklog webhook \\
    --image registry.example.com/hooklog-sidecar:0.1.0"
);

/// The pages that explain each subcommand, relative to the repository root (where README.md's
/// table of contents links them), listed under `Docs:` at the end of its `--help`, one a line.
/// tests/cli.rs checks that every subcommand has one and that each page and heading exists. A
/// name with no subcommand (one another branch adds) is skipped.
const DOCS: &[(&str, &str)] = &[
    ("", "README.md#documentation"),
    (
        "run",
        "docs/flags.md#hooklog-run, docs/inputs-and-records.md, docs/lifecycle.md#the-daemon-end",
    ),
    (
        "hook",
        "docs/flags.md#hooklog-hook, docs/lifecycle.md#the-hook-end",
    ),
    (
        "sleep",
        "docs/flags.md#hooklog-sleep-hooklog-install-hooklog-emit, docs/lifecycle.md#tools-for-images-without-a-shell",
    ),
    (
        "install",
        "docs/flags.md#hooklog-sleep-hooklog-install-hooklog-emit, docs/lifecycle.md#tools-for-images-without-a-shell",
    ),
    (
        "emit",
        "docs/flags.md#hooklog-sleep-hooklog-install-hooklog-emit, docs/lifecycle.md#tools-for-images-without-a-shell",
    ),
    (
        "check",
        "docs/flags.md#hooklog-check, docs/check-and-inject.md#hooklog-check",
    ),
    (
        "inject",
        "docs/flags.md#hooklog-inject-and-hooklog-uninject, docs/check-and-inject.md#hooklog-inject-and-hooklog-uninject",
    ),
    (
        "uninject",
        "docs/flags.md#hooklog-inject-and-hooklog-uninject, docs/check-and-inject.md#hooklog-inject-and-hooklog-uninject",
    ),
    ("webhook", "docs/webhook.md"),
];

/// What `--log-format` shapes, in each subcommand's help: what the subcommand writes on stderr
/// besides fatal errors, and what it leaves as it is. Every subcommand has a line (tests/cli.rs).
const LOG_FORMAT_HELP: &[(&str, &str)] = &[
    (
        "run",
        "Format of stderr: the daemon's diagnostics and a fatal error. Never of stdout: the \
         records, always JSON",
    ),
    (
        "hook",
        "Format of stderr: how the hook ended, when not ok, and a fatal error. Never of stdout \
         or of the hook's own output, passed through as it is; the records go to the socket or \
         the file",
    ),
    (
        "sleep",
        "Format of stderr: a fatal error (a duration that does not parse). Never of stdout: \
         sleep writes nothing",
    ),
    (
        "install",
        "Format of stderr: a fatal error (the copy failed). Never of stdout: the installed path",
    ),
    (
        "emit",
        "Format of stderr: diagnostics (a record not delivered) and a fatal error. Never of \
         stdout or of the record, a JSON line wherever it goes",
    ),
    (
        "check",
        "Format of stderr: diagnostics (images not read) and a fatal error. Never of stdout: \
         the findings, in --format",
    ),
    (
        "inject",
        "Format of stderr: diagnostics and a fatal error. Never of stdout, the manifests, or of \
         the report lines (`deployment \"NS/NAME\" injected`)",
    ),
    (
        "uninject",
        "Format of stderr: diagnostics and a fatal error. Never of stdout, the manifests, or of \
         the report lines (`deployment \"NS/NAME\" uninjected`)",
    ),
    (
        "webhook",
        "Format of stderr: the webhook's diagnostics (one line per review) and a fatal error. \
         Never of stdout: the webhook writes nothing there",
    ),
];

/// The command line as clap reads it: [`Cli`] with each help's `Docs:` ([`DOCS`]) added.
pub fn command() -> clap::Command {
    use clap::CommandFactory;
    let with_docs = |cmd: clap::Command, pages: &str| {
        let before = cmd
            .get_after_help()
            .map(|h| format!("{h}\n\n"))
            .unwrap_or_default();
        let pages: String = pages.split(", ").map(|p| format!("\n  {p}")).collect();
        cmd.after_help(format!("{before}Docs:{pages}"))
    };
    let mut cmd = Cli::command();
    for (name, pages) in DOCS {
        if name.is_empty() {
            cmd = with_docs(cmd, pages);
        } else if cmd.find_subcommand(name).is_some() {
            cmd = cmd.mut_subcommand(name, |sub| with_docs(sub, pages));
        }
    }
    // Each subcommand gets the global flag with its own help; clap propagates a global flag
    // only to subcommands that do not have it, and reads it the same from either.
    let global = cmd
        .get_arguments()
        .find(|a| a.get_id() == "log_format")
        .cloned();
    if let Some(global) = global {
        for (name, help) in LOG_FORMAT_HELP {
            if cmd.find_subcommand(name).is_some() {
                let arg = global.clone().help(*help);
                cmd = cmd.mut_subcommand(name, |sub| sub.arg(arg));
            }
        }
    }
    cmd
}

/// Parses the process's arguments with [`command`], as `Cli::try_parse` would.
pub fn try_parse() -> Result<Cli, clap::Error> {
    use clap::FromArgMatches;
    let mut cmd = command();
    let matches = cmd.try_get_matches_from_mut(std::env::args_os())?;
    Cli::from_arg_matches(&matches).map_err(|e| e.format(&mut cmd))
}

/// What `hooklog --version` prints after the name: the version, the commit it was built from and
/// the target (build.rs), as `0.1.0 (commit 9b8ff3f1c2d4, x86_64-unknown-linux-musl)`.
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("HOOKLOG_COMMIT"),
    ", ",
    env!("HOOKLOG_TARGET"),
    ")"
);

/// hooklog: makes Kubernetes preStop hooks visible.
#[derive(Debug, Parser)]
#[command(name = "hooklog", version = VERSION, about, long_about = None, after_help = EXAMPLES)]
pub struct Cli {
    /// Format of what hooklog itself writes on stderr: its diagnostics and, in every subcommand,
    /// a fatal error (a bad flag or value included: one line, `hooklog: MESSAGE`, or one JSON
    /// object with timestamp, level, message and command). Never of stdout, the subcommand's
    /// output: run's records (always JSON), check's report (its --format), inject's and
    /// uninject's manifests, install's path; nor of a hook's own output, which hook passes
    /// through as it is.
    #[arg(long, global = true, env = "HOOKLOG_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,

    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Format of stderr diagnostics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum LogFormat {
    #[default]
    /// One human-readable line per event.
    Text,
    /// One JSON object per event.
    Json,
}

/// Whether fatal errors are JSON lines (`--log-format json`); set once by main.
static ERRORS_JSON: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
/// The subcommand a fatal error names (`command`): set once by main, `hooklog` before.
static ERRORS_COMMAND: std::sync::OnceLock<&'static str> = std::sync::OnceLock::new();

/// Sets how [`fatal`] writes, and the subcommand it names: main calls it once, before the
/// subcommand runs (or with what [`log_format_of`] found when the command line did not parse).
pub fn set_error_format(format: LogFormat, command: &'static str) {
    ERRORS_JSON.store(
        format == LogFormat::Json,
        std::sync::atomic::Ordering::Relaxed,
    );
    // Set once per process; a second call keeps the first subcommand.
    let _ = ERRORS_COMMAND.set(command);
}

/// The `--log-format` a command line asks for when it does not parse as a whole: its last
/// `--log-format VALUE` or `--log-format=VALUE` before `--` (clap's global flag, wherever it
/// stands), else `HOOKLOG_LOG_FORMAT`, else text. A value that is neither `text` nor `json`
/// reads as text.
pub fn log_format_of(args: &[OsString]) -> LogFormat {
    let mut found: Option<String> = None;
    let mut words = args.iter().skip(1).map(|a| a.to_string_lossy());
    while let Some(a) = words.next() {
        if a == "--" {
            break;
        }
        if a == "--log-format" {
            found = words.next().map(|v| v.into_owned());
        } else if let Some(v) = a.strip_prefix("--log-format=") {
            found = Some(v.to_string());
        }
    }
    let value = found.or_else(|| std::env::var("HOOKLOG_LOG_FORMAT").ok());
    match value.as_deref().map(str::trim) {
        Some(v) if v.eq_ignore_ascii_case("json") => LogFormat::Json,
        _ => LogFormat::Text,
    }
}

/// The subcommand a command line names, as [`Command::name`] would, when it does not parse: its
/// first word that is a subcommand of `cmd`, else `hooklog`.
pub fn command_of(cmd: &clap::Command, args: &[OsString]) -> &'static str {
    args.iter()
        .skip(1)
        .take_while(|a| *a != "--")
        .find_map(|a| {
            let a = a.to_str()?;
            cmd.get_subcommands().find(|s| s.get_name() == a).map(|_| {
                Command::NAMES
                    .iter()
                    .find(|n| **n == a)
                    .copied()
                    .unwrap_or("hooklog")
            })
        })
        .unwrap_or("hooklog")
}

/// One line of hooklog's own on stderr at `level` (`ERROR`, `WARN`): `hooklog: MESSAGE`, or with
/// `--log-format json` one JSON object shaped as the JSON diagnostics are (`timestamp`, `level`,
/// `message`) with the subcommand as `command`. Newlines in `message` are kept inside the one
/// line (escaped in JSON, as `; ` in text).
pub fn diagnostic_line(level: &str, message: &str) -> String {
    let command = ERRORS_COMMAND.get().copied().unwrap_or("hooklog");
    if ERRORS_JSON.load(std::sync::atomic::Ordering::Relaxed) {
        let now = crate::timefmt::rfc3339_ms(crate::timefmt::now_ms());
        // Each value a JSON string, escaped by serde_json; the keys are fixed.
        let quote = |v: &str| serde_json::to_string(v).unwrap_or_else(|_| "\"\"".into());
        format!(
            "{{\"timestamp\":{},\"level\":{},\"message\":{},\"command\":{}}}",
            quote(&String::from_utf8_lossy(&now)),
            quote(level),
            quote(message),
            quote(command)
        )
    } else {
        let one: Vec<&str> = message.lines().filter(|l| !l.trim().is_empty()).collect();
        format!("hooklog: {}", one.join("; "))
    }
}

/// Writes a fatal error as [`diagnostic_line`] says, at level `ERROR`; a stderr that cannot be
/// written leaves the exit code to tell.
pub fn fatal(message: &str) {
    diagnostic("ERROR", message);
}

/// Writes one [`diagnostic_line`] at `level` on stderr.
pub fn diagnostic(level: &str, message: &str) {
    use std::io::Write;
    let line = diagnostic_line(level, message);
    // Nothing to report a stderr failure to: the exit code still tells.
    let _ = writeln!(std::io::stderr().lock(), "{line}");
}

/// What a clap error says, on one line: its first line without clap's `error: `, and where to
/// read more (clap's usage and tips follow it in its own rendering).
pub fn clap_message(e: &clap::Error, command: &str) -> String {
    // What comes before clap's `Usage:`, its lines joined (a list of missing arguments, a tip).
    let rendered = e.render().to_string();
    let said: Vec<&str> = rendered
        .lines()
        .take_while(|l| !l.starts_with("Usage:") && !l.starts_with("For more information"))
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    // A line that ends in `:` introduces the next (a list of missing arguments).
    let mut joined = String::new();
    for line in said {
        if !joined.is_empty() {
            joined.push_str(if joined.ends_with(':') { " " } else { "; " });
        }
        joined.push_str(line);
    }
    let said = joined;
    let first = said.strip_prefix("error: ").unwrap_or(&said);
    let first = if first.is_empty() {
        "invalid command line"
    } else {
        first
    };
    let help = if command == "hooklog" {
        "hooklog --help".to_string()
    } else {
        format!("hooklog {command} --help")
    };
    format!("{first} (see '{help}')")
}

/// The subcommands.
// One value per process, parsed once: boxing `run`'s arguments (the largest once the control
// plane's variants are compiled out of the sidecar) would save nothing that matters.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, Subcommand)]
pub enum Command {
    /// The sidecar daemon: follow files and sockets, write enriched JSON records.
    #[command(
        after_help = "Example:\n  hooklog run --file /hooklog/prestop.log \\\n    --socket /hooklog/hooklog.sock --podinfo /etc/podinfo \\\n    --peers envoy,api-server --grace 25s"
    )]
    Run(RunArgs),
    /// Run a lifecycle hook command and report its output and how it ended.
    #[command(
        after_help = "Example (a preStop exec command):\n  /hooklog-bin/hooklog hook --container envoy \\\n    --socket /hooklog/hooklog.sock --file /hooklog/prestop.log \\\n    -- /hooklog-bin/hooklog sleep 15"
    )]
    Hook(HookArgs),
    /// Sleep for a duration (for images without a sleep binary).
    #[command(
        after_help = "Examples:\n  hooklog sleep 50\n  hooklog sleep 1m30s\n  hooklog sleep 0.5"
    )]
    Sleep(SleepArgs),
    /// Copy this executable into a folder (an emptyDir), executable by every user.
    #[command(
        after_help = "Example (an init container or native sidecar at start):\n  hooklog install /hooklog-bin"
    )]
    Install(InstallArgs),
    /// Write one well-formed JSON record (instead of hand-written echo JSON).
    #[command(
        after_help = "Example:\n  hooklog emit --container api-server --file /hooklog/prestop.log \\\n    --field phase=heap-dump 'uploading heap dump to S3'"
    )]
    Emit(EmitArgs),
    #[cfg(feature = "control")]
    /// Find broken lifecycle hooks in Kubernetes manifests, before deploy (no cluster needed).
    #[command(
        after_help = "Examples:\n  hooklog check k8s/\n  kubectl get deploy -A -o yaml | hooklog check -\n  hooklog check --format sarif --platform fargate --kubernetes-version 1.29 \\\n    manifests/ > hooklog.sarif\n  hooklog check --image-root envoyproxy/envoy-distroless:v1.31.0=envoy.tar \\\n    deploy.yaml\n  hooklog check --insecure-registry localhost:5000 --image-platform arm64 \\\n    deploy.yaml\n  hooklog check --exclude hook-not-reported --fail-on warning k8s/\n  hooklog check --list-rules\n\nA finding is accepted on one object by the annotation hooklog.dev/ignore-check.RULE: \"REASON\" (on the object or its pod template).\n\nImages are read from their registries (credentials as docker and podman keep them; layer lists cached in $HOOKLOG_CACHE_DIR or ~/.cache/hooklog) unless --offline.\n\nExit code: 0 when nothing at or above --fail-on (suppressed findings do not count), 1 otherwise, 64 for usage errors (an unknown rule name, a bad configuration file) or input that does not parse, 69 when --require-image and an image cannot be read."
    )]
    Check(CheckArgs),
    #[cfg(feature = "control")]
    /// Add hooklog to every pod template of Kubernetes manifests (stdin to stdout by default).
    #[command(
        after_help = "Examples:\n  hooklog inject \\\n    --image registry.example.com/hooklog-sidecar:0.1.0 \\\n    deploy.yaml | kubectl apply -f -\n  # a 1.28 cluster: the classic sidecar (Jobs are left as they are)\n  hooklog inject --kubernetes-version 1.28 \\\n    --image registry.example.com/hooklog-sidecar:0.1.0 \\\n    deploy.yaml\n  # as a Helm 4 post-renderer (helm-plugin/hooklog), HOOKLOG_INJECT_IMAGE set:\n  helm install shop ./chart --post-renderer hooklog"
    )]
    Inject(InjectArgs),
    #[cfg(feature = "control")]
    /// Remove what `hooklog inject` added (same as `inject --undo`).
    #[command(
        after_help = "Example:\n  kubectl get deploy api-server -o yaml | hooklog uninject - \\\n    | kubectl apply -f -"
    )]
    Uninject(UninjectArgs),
    #[cfg(feature = "control")]
    /// A mutating admission webhook: injects hooklog into pods as they are created.
    #[command(
        after_help = "Example (in the cluster, k8s/webhook/ or charts/hooklog):\n  hooklog webhook \\\n    --image registry.example.com/hooklog-sidecar:0.1.0\n\nServes POST /mutate (AdmissionReview admission.k8s.io/v1), /healthz and /readyz over TLS:\nits own CA in the MutatingWebhookConfiguration's caBundle and a certificate renewed in\nmemory (auto-TLS), or --tls-cert-file and --tls-key-file (cert-manager)."
    )]
    Webhook(WebhookArgs),
}

impl Command {
    /// Every subcommand's name, in both builds (the sidecar has the first five).
    pub const NAMES: [&'static str; 9] = [
        "run", "hook", "sleep", "install", "emit", "check", "inject", "uninject", "webhook",
    ];

    /// The subcommand's name on the command line.
    pub fn name(&self) -> &'static str {
        match self {
            Command::Run(_) => "run",
            Command::Hook(_) => "hook",
            Command::Sleep(_) => "sleep",
            Command::Install(_) => "install",
            Command::Emit(_) => "emit",
            #[cfg(feature = "control")]
            Command::Check(_) => "check",
            #[cfg(feature = "control")]
            Command::Inject(_) => "inject",
            #[cfg(feature = "control")]
            Command::Uninject(_) => "uninject",
            #[cfg(feature = "control")]
            Command::Webhook(_) => "webhook",
        }
    }
}

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
    #[arg(long, env = "HOOKLOG_MAX_LINE_BYTES", default_value_t = crate::record::DEFAULT_MAX_LINE_BYTES)]
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

/// Longest duration any flag takes: larger values are mistakes (and could overflow a deadline).
pub const MAX_DURATION: Duration = Duration::from_secs(24 * 3600);

/// Words a pod spec uses for true and false in an environment variable, compared without case:
/// what people write (`1`, `yes`, `true`) beside what clap's own flags take.
const TRUE_WORDS: [&str; 3] = ["1", "yes", "true"];
/// The false half of [`TRUE_WORDS`].
const FALSE_WORDS: [&str; 3] = ["0", "no", "false"];

/// The parser of a boolean flag that `var` may set: `1`/`0`, `yes`/`no`, `true`/`false` in any
/// case; an error names the variable, since a flag without a value can only get a bad one from
/// there (a pod that crash-loops on `HOOKLOG_NATIVE_SIDECAR=on` must say where to look).
pub fn env_bool(
    var: &'static str,
) -> impl Fn(&str) -> Result<bool, String> + Clone + Send + Sync + 'static {
    move |s: &str| {
        let word = s.trim().to_ascii_lowercase();
        if TRUE_WORDS.contains(&word.as_str()) {
            Ok(true)
        } else if FALSE_WORDS.contains(&word.as_str()) {
            Ok(false)
        } else {
            Err(format!(
                "{var}={s:?} is not a boolean: use 1, 0, yes, no, true or false"
            ))
        }
    }
}

/// A duration of at most [`MAX_DURATION`].
pub fn bounded_duration(s: &str) -> Result<Duration, String> {
    let d = duration(s)?;
    if d > MAX_DURATION {
        return Err(format!("{s:?} is longer than the maximum of 24h"));
    }
    Ok(d)
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

#[cfg(feature = "control")]
/// `hooklog check` output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CheckFormat {
    /// Readable text grouped by object.
    Text,
    /// One JSON document (docs/check-and-inject.md, "hooklog check").
    Json,
    /// SARIF 2.1.0, for code scanning.
    Sarif,
}

#[cfg(feature = "control")]
/// A platform with rules of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Platform {
    /// EKS Fargate: no privileged, host namespaces, hostPath, added capabilities or DaemonSets.
    Fargate,
}

#[cfg(feature = "control")]
/// How `inject` runs the sidecar.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SidecarKind {
    /// An init container with `restartPolicy: Always` (Kubernetes 1.29+).
    Native,
    /// A regular container that waits for its peers (clusters before 1.29).
    Classic,
}

#[cfg(feature = "control")]
/// Where `check` and `inject` find the images a manifest names: an exported root, else the
/// registry (docs/image-lookup.md).
#[derive(Debug, Clone, Args)]
pub struct ImageArgs {
    /// An image's filesystem, a folder or a `docker export` tar, to look hook commands up in.
    /// Repeatable.
    #[arg(
        long = "image-root",
        env = "HOOKLOG_IMAGE_ROOT",
        value_delimiter = ',',
        value_name = "IMAGE=PATH",
        value_parser = parse_image_root
    )]
    pub image_roots: Vec<(String, PathBuf)>,

    /// Never read images from their registries: only `--image-root` (and, for `check`, the
    /// image-name patterns) decide.
    #[arg(long, env = "HOOKLOG_OFFLINE", value_parser = env_bool("HOOKLOG_OFFLINE"))]
    pub offline: bool,

    /// A registry (`HOST[:PORT]`) to speak plain HTTP to, as podman's and containerd's insecure
    /// registries. Repeatable.
    #[arg(
        long = "insecure-registry",
        env = "HOOKLOG_INSECURE_REGISTRIES",
        value_delimiter = ',',
        value_name = "HOST[:PORT]"
    )]
    pub insecure_registries: Vec<String>,

    /// The longest that reading every image together may take (a duration: 90s, 10m); an
    /// image not read by then counts as unreadable, and the note names the layer it was at.
    #[arg(
        long,
        env = "HOOKLOG_IMAGE_TIMEOUT",
        value_name = "DURATION",
        default_value = "10m",
        value_parser = crate::duration::clap_parse
    )]
    pub image_timeout: std::time::Duration,

    /// The architecture whose image is read when a pod's nodeSelector and node affinity
    /// (`kubernetes.io/arch`) name none.
    #[arg(
        long,
        env = "HOOKLOG_IMAGE_PLATFORM",
        value_enum,
        default_value = "amd64"
    )]
    pub image_platform: crate::kube::Arch,
}

#[cfg(feature = "control")]
/// `hooklog check`.
#[derive(Debug, Clone, Args)]
pub struct CheckArgs {
    /// Manifest files, folders (searched recursively for .yaml, .yml, .json), or `-` for stdin
    /// (also when none is given).
    #[arg(value_name = "FILE|DIR|-")]
    pub paths: Vec<PathBuf>,

    /// Output: text, json or sarif.
    #[arg(long, env = "HOOKLOG_CHECK_FORMAT", value_enum, default_value_t = CheckFormat::Text)]
    pub format: CheckFormat,

    /// Exit 1 when a finding no annotation accepts has this severity or a higher one. Default:
    /// the configuration file's `fail-on`, else `error`.
    #[arg(long, env = "HOOKLOG_FAIL_ON", value_enum)]
    pub fail_on: Option<crate::kube::Severity>,

    /// Report only these rules (comma-separated; `--list-rules` names them). Replaces the
    /// configuration file's `include`.
    #[arg(
        long,
        env = "HOOKLOG_INCLUDE",
        value_delimiter = ',',
        value_name = "RULE,..."
    )]
    pub include: Option<Vec<String>>,

    /// Do not report these rules (comma-separated). Replaces the configuration file's
    /// `exclude`.
    #[arg(
        long,
        env = "HOOKLOG_EXCLUDE",
        value_delimiter = ',',
        value_name = "RULE,..."
    )]
    pub exclude: Option<Vec<String>>,

    /// The configuration file (`check: {include, exclude, fail-on}`). Default: the first
    /// `.hooklog.yaml` in the current folder or one above it.
    #[arg(long, env = "HOOKLOG_CONFIG", value_name = "FILE")]
    pub config: Option<PathBuf>,

    /// Print every rule (name, severity, description, remediation, docs link) and exit; as
    /// JSON with `--format json`.
    #[arg(long, env = "HOOKLOG_LIST_RULES", value_parser = env_bool("HOOKLOG_LIST_RULES"))]
    pub list_rules: bool,

    /// How images are read: `--image-root`, `--offline`, `--insecure-registry`,
    /// `--image-platform` (shared with `inject`).
    #[command(flatten)]
    pub images: ImageArgs,

    /// An image pattern (`*` is any text) of images without a shell, after the built-in ones;
    /// `!PATTERN` says matching images have one. The last match decides. Repeatable.
    #[arg(
        long = "shell-less-image",
        env = "HOOKLOG_SHELL_LESS_IMAGES",
        value_delimiter = ',',
        value_name = "PATTERN"
    )]
    pub shell_less_images: Vec<String>,

    /// Exit 69 when an image cannot be read from its registry (instead of a note and the
    /// image-name patterns).
    #[arg(long, env = "HOOKLOG_REQUIRE_IMAGE", value_parser = env_bool("HOOKLOG_REQUIRE_IMAGE"))]
    pub require_image: bool,

    /// Drop the built-in shell-less image patterns.
    #[arg(long, env = "HOOKLOG_NO_DEFAULT_SHELL_LESS", value_parser = env_bool("HOOKLOG_NO_DEFAULT_SHELL_LESS"))]
    pub no_default_shell_less: bool,

    /// Also check what this platform refuses.
    #[arg(long, env = "HOOKLOG_PLATFORM", value_enum)]
    pub platform: Option<Platform>,

    /// The cluster's Kubernetes version (`1.29`): features it lacks are errors.
    #[arg(long, env = "HOOKLOG_KUBERNETES_VERSION", value_parser = crate::kube::parse_version)]
    pub kubernetes_version: Option<(u32, u32)>,
}

#[cfg(feature = "control")]
/// `hooklog inject`.
#[derive(Debug, Clone, Args)]
pub struct InjectArgs {
    /// Manifest files, folders, or `-` for stdin (also when none is given, as a Helm
    /// post-renderer runs it).
    #[arg(value_name = "FILE|DIR|-")]
    pub paths: Vec<PathBuf>,

    /// The hooklog image for the init container and the sidecar: the sidecar's
    /// (`hooklog-sidecar`, the Dockerfile's default stage).
    #[arg(long, env = "HOOKLOG_INJECT_IMAGE")]
    pub image: Option<String>,

    /// Run the sidecar as a native sidecar (1.29+) or as a classic container. Default: what
    /// `--kubernetes-version` allows, native without it.
    #[arg(long, env = "HOOKLOG_SIDECAR", value_enum)]
    pub sidecar: Option<SidecarKind>,

    /// The cluster's Kubernetes version (`1.28`): native sidecars only from 1.29, where the
    /// kubelet knows them (below, one keeps the pod Pending forever). Without it, inject writes
    /// for 1.29+: every release the Kubernetes project has supported since 1.28's end of life
    /// (October 2024). Pass it for an older cluster.
    #[arg(long, env = "HOOKLOG_KUBERNETES_VERSION", value_parser = crate::kube::parse_version)]
    pub kubernetes_version: Option<(u32, u32)>,

    /// Give a container without a preStop the hook `hooklog sleep DURATION` (wait for the load
    /// balancer to deregister the pod). Repeatable.
    #[arg(
        long = "prestop-sleep",
        env = "HOOKLOG_PRESTOP_SLEEP",
        value_delimiter = ',',
        value_name = "CONTAINER=DURATION",
        value_parser = parse_prestop_sleep
    )]
    pub prestop_sleep: Vec<(String, String)>,

    /// The sidecar posts a Warning Event on the pod for each hook that does not end ok
    /// (`hooklog run --events`); the pod's service account needs k8s/events/rbac.yaml.
    #[arg(long, env = "HOOKLOG_INJECT_EVENTS", value_parser = env_bool("HOOKLOG_INJECT_EVENTS"))]
    pub events: bool,

    /// Remove what inject added instead (as `hooklog uninject`).
    #[arg(long, env = "HOOKLOG_INJECT_UNDO", value_parser = env_bool("HOOKLOG_INJECT_UNDO"))]
    pub undo: bool,

    /// How images are read, as for `check`: only for the warnings on stderr (a hook program
    /// the image lacks); the manifests written never depend on them.
    #[command(flatten)]
    pub images: ImageArgs,

    #[command(flatten)]
    pub settings: crate::manifest::sidecar_settings::SidecarFlags,
}

#[cfg(feature = "control")]
/// `hooklog webhook`'s sidecar form.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum WebhookSidecar {
    /// An init container with `restartPolicy: Always` (Kubernetes 1.29+).
    Native,
    /// A regular container that waits for its peers (clusters before 1.29).
    Classic,
    /// Native from 1.29 on, classic below: `--kubernetes-version`, or the API server's
    /// `/version` when hooklog runs in a cluster.
    Auto,
}

#[cfg(feature = "control")]
/// `hooklog webhook`.
#[derive(Debug, Clone, Args)]
pub struct WebhookArgs {
    /// Address to serve HTTPS on.
    #[arg(long, env = "HOOKLOG_WEBHOOK_LISTEN", default_value = "0.0.0.0:8443")]
    pub listen: std::net::SocketAddr,

    /// The serving certificate chain (PEM); re-read when it changes (cert-manager renewals).
    /// Without it, auto-TLS: the webhook makes its own CA and certificate and puts the CA into
    /// `--webhook-config`'s caBundle.
    #[arg(long, env = "HOOKLOG_TLS_CERT_FILE", requires = "tls_key_file")]
    pub tls_cert_file: Option<PathBuf>,

    /// The serving certificate's private key (PEM); re-read when it changes.
    #[arg(long, env = "HOOKLOG_TLS_KEY_FILE", requires = "tls_cert_file")]
    pub tls_key_file: Option<PathBuf>,

    /// Auto-TLS: a further name (DNS or IP) for the serving certificate, besides the Service's
    /// `<service>.<namespace>.svc` and `.svc.cluster.local`. Repeatable.
    #[arg(
        long,
        env = "HOOKLOG_TLS_SAN",
        value_delimiter = ',',
        value_name = "NAME|IP"
    )]
    pub tls_san: Vec<String>,

    /// Auto-TLS: the Service in front of the webhook, whose DNS names the certificate holds.
    #[arg(
        long,
        env = "HOOKLOG_WEBHOOK_SERVICE",
        default_value = "hooklog-webhook"
    )]
    pub service: String,

    /// Auto-TLS: the MutatingWebhookConfiguration whose webhooks' caBundle gets the CA.
    #[arg(
        long,
        env = "HOOKLOG_WEBHOOK_CONFIG",
        default_value = "hooklog-webhook"
    )]
    pub webhook_config: String,

    /// Auto-TLS: how long each serving certificate is valid; it is renewed after 2/3 of it
    /// (at least 10s, at most 24h).
    #[arg(long, env = "HOOKLOG_CERT_VALIDITY", default_value = "24h", value_parser = bounded_duration)]
    pub cert_validity: Duration,

    /// How long a keep-alive connection may stay idle between reviews before the webhook closes
    /// it: longer than the API server keeps it (90 s, net/http's default), so that the API
    /// server gives it up first and never sends a review on a closing connection.
    #[arg(long, env = "HOOKLOG_WEBHOOK_IDLE_TIMEOUT", default_value = "95s", value_parser = bounded_duration)]
    pub idle_timeout: Duration,

    /// The hooklog image for the init container and the sidecar: the sidecar's
    /// (`hooklog-sidecar`, the Dockerfile's default stage).
    #[arg(long, env = "HOOKLOG_INJECT_IMAGE")]
    pub image: String,

    /// Native or classic sidecar, or `auto`: decided by the cluster's version.
    #[arg(long, env = "HOOKLOG_SIDECAR", value_enum, default_value_t = WebhookSidecar::Auto)]
    pub sidecar: WebhookSidecar,

    /// The cluster's Kubernetes version (`1.28`), for `--sidecar auto`; without it the API
    /// server is asked.
    #[arg(long, env = "HOOKLOG_KUBERNETES_VERSION", value_parser = crate::kube::parse_version)]
    pub kubernetes_version: Option<(u32, u32)>,

    /// Give a container without a preStop the hook `hooklog sleep DURATION`, as inject does.
    /// Repeatable.
    #[arg(
        long = "prestop-sleep",
        env = "HOOKLOG_PRESTOP_SLEEP",
        value_delimiter = ',',
        value_name = "CONTAINER=DURATION",
        value_parser = parse_prestop_sleep
    )]
    pub prestop_sleep: Vec<(String, String)>,

    /// The sidecars it adds post a Warning Event on their pod for each hook that does not end
    /// ok (`hooklog run --events`); each pod's service account needs k8s/events/rbac.yaml.
    #[arg(long, env = "HOOKLOG_INJECT_EVENTS", value_parser = env_bool("HOOKLOG_INJECT_EVENTS"))]
    pub events: bool,

    /// The webhook's own namespace: its pods are never injected (default: the pod's own
    /// namespace, from the Downward API's `POD_NAMESPACE`).
    #[arg(long, env = "HOOKLOG_WEBHOOK_NAMESPACE")]
    pub own_namespace: Option<String>,

    /// The service account's mount: its `ca.crt` and `token` are how the webhook talks to the API
    /// server (for `--sidecar auto` and auto-TLS's caBundle), at `KUBERNETES_SERVICE_HOST`/`_PORT`.
    #[arg(
        long,
        env = "HOOKLOG_SERVICEACCOUNT_DIR",
        default_value = "/var/run/secrets/kubernetes.io/serviceaccount"
    )]
    pub serviceaccount_dir: PathBuf,

    #[command(flatten)]
    pub settings: crate::manifest::sidecar_settings::SidecarFlags,
}

#[cfg(feature = "control")]
/// `hooklog uninject`.
#[derive(Debug, Clone, Args)]
pub struct UninjectArgs {
    /// Manifest files, folders, or `-` for stdin (also when none is given).
    #[arg(value_name = "FILE|DIR|-")]
    pub paths: Vec<PathBuf>,
}

#[cfg(feature = "control")]
fn parse_image_root(s: &str) -> Result<(String, PathBuf), String> {
    match s.split_once('=') {
        Some((image, path)) if !image.is_empty() && !path.is_empty() => {
            Ok((image.to_string(), PathBuf::from(path)))
        }
        _ => Err(format!("{s:?} is not IMAGE=PATH")),
    }
}

#[cfg(feature = "control")]
fn parse_prestop_sleep(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((c, d)) if !c.is_empty() => crate::duration::parse(d)
            .map(|_| (c.to_string(), d.to_string()))
            .map_err(|e| e.to_string()),
        _ => Err(format!("{s:?} is not CONTAINER=DURATION")),
    }
}

fn parse_mode(s: &str) -> Result<u32, String> {
    let digits = s.trim_start_matches("0o");
    u32::from_str_radix(digits, 8)
        .ok()
        .filter(|m| *m <= 0o777)
        .ok_or_else(|| format!("{s:?} is not an octal mode such as 666 or 0660"))
}

fn parse_field(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
        _ => Err(format!("{s:?} is not KEY=VALUE")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    /// The words pod specs write for booleans, in any case, and an error that names the
    /// variable (main exited 64 on `HOOKLOG_NATIVE_SIDECAR=1`).
    #[test]
    fn boolean_variables_take_what_pod_specs_write() {
        let parse = env_bool("HOOKLOG_NATIVE_SIDECAR");
        for (word, want) in [
            ("1", true),
            ("0", false),
            ("yes", true),
            ("no", false),
            ("true", true),
            ("false", false),
            ("TRUE", true),
            ("No", false),
            ("Yes", true),
            ("FALSE", false),
        ] {
            assert_eq!(parse(word), Ok(want), "{word}");
        }
        for bad in ["maybe", "", "2", "on!"] {
            let err = parse(bad).expect_err("not a boolean");
            assert!(err.contains("HOOKLOG_NATIVE_SIDECAR"), "{bad}: {err}");
        }
    }

    /// Every boolean flag that a variable may set takes those words: each parses `1` through
    /// the real command line, the variable standing in as the flag's value.
    #[test]
    fn every_boolean_flag_with_a_variable_uses_the_pod_spec_words() {
        let cmd = Cli::command();
        let mut seen = 0;
        for sub in cmd.get_subcommands() {
            for arg in sub.get_arguments() {
                if arg.get_env().is_none() || !matches!(arg.get_action(), clap::ArgAction::SetTrue)
                {
                    continue;
                }
                seen += 1;
                // `--flag=1` goes through the same value parser the variable's value does.
                let one = arg.clone().action(clap::ArgAction::Set).num_args(1);
                let m = clap::Command::new("t").arg(one).try_get_matches_from([
                    "t",
                    &format!("--{}=yes", arg.get_long().expect("long")),
                ]);
                let m = m.unwrap_or_else(|e| panic!("{}: {e}", arg.get_id()));
                assert_eq!(
                    m.get_one::<bool>(arg.get_id().as_str()),
                    Some(&true),
                    "{}",
                    arg.get_id()
                );
            }
        }
        // The sidecar's (`run --native-sidecar`, `--emf`...) and, with `control`, check's and
        // inject's.
        let least = if cfg!(feature = "control") { 6 } else { 2 };
        assert!(seen >= least, "only {seen} boolean flags with a variable");
    }

    #[test]
    fn cli_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn every_flag_has_an_environment_variable() {
        let cmd = Cli::command();
        let mut missing = Vec::new();
        let mut checked = 0;
        for sub in cmd.get_subcommands() {
            for arg in sub.get_arguments().chain(cmd.get_arguments()) {
                let Some(long) = arg.get_long() else { continue };
                if ["help", "version"].contains(&long) {
                    continue;
                }
                checked += 1;
                if arg.get_env().is_none() {
                    missing.push(format!("{} --{long}", sub.get_name()));
                }
            }
        }
        assert!(checked > 20, "found only {checked} flags");
        // `--field` values may hold commas, so they cannot be a comma-separated env list; the
        // docs/flags.md names this one exception.
        assert_eq!(missing, ["emit --field"], "flags without env");
    }

    #[test]
    fn modes_and_fields_parse() {
        assert_eq!(parse_mode("666"), Ok(0o666));
        assert_eq!(parse_mode("0o640"), Ok(0o640));
        assert!(parse_mode("999").is_err());
        assert!(parse_mode("1777").is_err());
        assert_eq!(parse_field("a=b=c"), Ok(("a".into(), "b=c".into())));
        assert!(parse_field("=x").is_err());
    }

    #[test]
    fn hook_takes_the_command_after_double_dash() {
        let cli = Cli::try_parse_from([
            "hooklog",
            "hook",
            "--container",
            "envoy",
            "--",
            "sleep",
            "-x",
        ])
        .unwrap();
        match cli.command {
            Command::Hook(h) => assert_eq!(
                h.command,
                vec![OsString::from("sleep"), OsString::from("-x")]
            ),
            other => panic!("{other:?}"),
        }
    }
}
