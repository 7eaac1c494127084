//! (the sidecar) Run configuration: the command line checked and turned into ready inputs before the runtime
//! starts, so a bad path or value fails at once with one line that names it.

use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};

use crate::cli::{Output, RunArgs};
use crate::pod::PodMeta;
use crate::record::MIN_MAX_LINE_BYTES;
use crate::sink::cloudwatch::CloudWatchSettings;
use crate::sink::cloudwatch::region::region_at_start;
use crate::source::bind::{absolute_in_created_dir, bind_socket};

/// Retention periods CloudWatch Logs accepts, in days (PutRetentionPolicy,
/// <https://docs.aws.amazon.com/AmazonCloudWatchLogs/latest/APIReference/API_PutRetentionPolicy.html>).
pub const RETENTION_DAYS: [i32; 22] = [
    1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922,
    3288, 3653,
];

/// Longest log stream name CloudWatch Logs accepts (CreateLogStream,
/// <https://docs.aws.amazon.com/AmazonCloudWatchLogs/latest/APIReference/API_CreateLogStream.html>).
pub const MAX_LOG_STREAM_NAME: usize = 512;

/// Most `--max-connections`: each served connection holds a 16 KiB read buffer and up to one
/// unfinished line, and a file descriptor; a pod runs a handful of hooks.
pub const MAX_CONNECTIONS_LIMIT: usize = 4096;

/// Most `--max-line-bytes`: 4 MiB. A record is held in memory whole (in each connection's framer
/// and each batch), so this bounds memory; CloudWatch gets a record over one event (1 MiB,
/// PutLogEvents) as several events.
pub const MAX_LINE_BYTES_LIMIT: usize = 4 * 1024 * 1024;

/// File descriptors hooklog needs besides one per connection and per followed file: stdio, the
/// runtime's, inotify, sockets, checkpoints, a rotated file or two, the CloudWatch client's.
const FD_RESERVE: u64 = 64;

/// File descriptors each `--file` may hold: the file, a rotated one, its checkpoint.
const FDS_PER_FILE: u64 = 3;

/// A usage or configuration error: exit code 64, one line.
#[derive(Debug, thiserror::Error)]
#[error("{0:#}")]
pub struct ConfigError(pub anyhow::Error);

/// `hooklog run`, validated.
#[derive(Debug)]
pub struct RunConfig {
    /// Files to follow, absolute.
    pub files: Vec<PathBuf>,
    /// Sockets, bound and listening.
    pub sockets: Vec<(PathBuf, UnixListener)>,
    /// The mode sockets are bound with (`--file-mode`), also when bound again.
    pub socket_mode: u32,
    /// The pod's metadata.
    pub pod: PodMeta,
    /// Longest output record.
    pub max_line_bytes: usize,
    /// Most socket connections at once.
    pub max_connections: usize,
    /// Peers expected to run a hook.
    pub peers: Vec<String>,
    /// Hard limit after SIGTERM.
    pub grace: Duration,
    /// Quiet period after the last hook.
    pub linger: Duration,
    /// How long a rotated file is read after its last new bytes.
    pub rotate_wait: Duration,
    /// How long expected peers may take to announce after SIGTERM.
    pub announce_timeout: Duration,
    /// Runs as a native sidecar: signalled after the peers are gone.
    pub native_sidecar: bool,
    /// Write records to stdout.
    pub stdout: bool,
    /// Ship records to CloudWatch Logs.
    pub cloudwatch: Option<CloudWatchSettings>,
    /// Add EMF metrics to the summary, in this namespace.
    pub emf_namespace: Option<String>,
    /// `--events`: post an Event for each hook not ok.
    pub events: Option<crate::events::EventSettings>,
    /// Where the summary's line goes at exit.
    pub termination: Option<crate::events::termination::TerminationMessage>,
}

impl RunConfig {
    /// Checks `args`, creates missing input files and binds the sockets.
    pub fn from_args(args: RunArgs) -> Result<Self, ConfigError> {
        Self::from_args_in(args, |k| std::env::var(k).ok())
    }

    /// [`RunConfig::from_args`], the AWS region looked up in `env` ([`aws_region`]): CloudWatch
    /// output with no region is refused at start, as one without `--log-group` is (it ran on
    /// with a warning, and nothing could be sent); the region found is the one the client uses.
    pub fn from_args_in(
        args: RunArgs,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, ConfigError> {
        let group = args.log_group.as_deref().is_some_and(|g| !g.is_empty());
        let region = if args.outputs.contains(&Output::Cloudwatch) && group {
            let region = aws_region(env).map_err(|looked| {
                ConfigError(anyhow::anyhow!(
                    "--output cloudwatch needs an AWS region, and none is set: {looked}"
                ))
            })?;
            Some(region)
        } else {
            None
        };
        let mut config = Self::build(args).map_err(ConfigError)?;
        // Found once: the client takes it instead of asking the chain (and IMDS) again.
        if let Some(cloudwatch) = config.cloudwatch.as_mut() {
            cloudwatch.region = region;
        }
        Ok(config)
    }

    fn build(args: RunArgs) -> anyhow::Result<Self> {
        check_bounds(&args)?;
        let pod = pod_metadata(&args)?;
        ensure_fd_limit(
            args.max_connections as u64
                + FDS_PER_FILE * args.files.len() as u64
                + args.sockets.len() as u64
                + FD_RESERVE,
        );
        let files = prepare_files(&args)?;
        let sockets = args
            .sockets
            .iter()
            .map(|p| bind_socket(p, args.file_mode))
            .collect::<anyhow::Result<Vec<_>>>()?;
        let cloudwatch = cloudwatch_settings(&args, &pod)?;
        Ok(RunConfig {
            files,
            sockets,
            socket_mode: args.file_mode,
            pod,
            max_line_bytes: args.max_line_bytes,
            max_connections: args.max_connections,
            // `HOOKLOG_PEERS: "envoy, api-server"` is how people write lists in YAML.
            peers: args
                .peers
                .iter()
                .map(|p| p.trim().to_string())
                .filter(|p| !p.is_empty())
                .collect(),
            grace: args.grace,
            linger: args.linger,
            rotate_wait: args.rotate_wait,
            announce_timeout: args.announce_timeout,
            native_sidecar: args.native_sidecar,
            stdout: args.outputs.contains(&Output::Stdout),
            cloudwatch,
            emf_namespace: args.emf.then_some(args.emf_namespace),
            events: args.events.then(|| crate::events::EventSettings {
                serviceaccount_dir: args.serviceaccount_dir.clone(),
            }),
            termination: crate::events::termination::TerminationMessage::from_flag(
                args.termination_message_path.as_deref(),
            ),
        })
    }
}

/// Something to read, and each number within its bounds.
fn check_bounds(args: &RunArgs) -> anyhow::Result<()> {
    if args.files.is_empty() && args.sockets.is_empty() {
        bail!("nothing to read: give --file or --socket (or HOOKLOG_FILE / HOOKLOG_SOCKET)");
    }
    if args.max_line_bytes < MIN_MAX_LINE_BYTES {
        bail!(
            "--max-line-bytes {} is below the minimum of {MIN_MAX_LINE_BYTES}",
            args.max_line_bytes
        );
    }
    if args.max_line_bytes > MAX_LINE_BYTES_LIMIT {
        bail!(
            "--max-line-bytes {} is above the maximum of {MAX_LINE_BYTES_LIMIT}",
            args.max_line_bytes
        );
    }
    if !(1..=MAX_CONNECTIONS_LIMIT).contains(&args.max_connections) {
        bail!(
            "--max-connections {} is not between 1 and {MAX_CONNECTIONS_LIMIT}",
            args.max_connections
        );
    }
    if args.grace.is_zero() {
        bail!("--grace must be more than 0");
    }
    Ok(())
}

/// The pod's metadata from `--podinfo` and the environment, with the maps `--pod-metadata`
/// leaves out emptied.
fn pod_metadata(args: &RunArgs) -> anyhow::Result<PodMeta> {
    if let Some(dir) = &args.podinfo
        && !dir.is_dir()
    {
        bail!("--podinfo {}: not a directory", dir.display());
    }
    let mut pod = PodMeta::from_env(args.podinfo.as_deref())?;
    if !args.pod_metadata.contains(&crate::cli::PodMetadata::Labels) {
        pod.labels.clear();
    }
    if !args
        .pod_metadata
        .contains(&crate::cli::PodMetadata::Annotations)
    {
        pod.annotations.clear();
    }
    Ok(pod)
}

/// Each `--file` ready to follow ([`prepare_file`]), none given twice.
fn prepare_files(args: &RunArgs) -> anyhow::Result<Vec<PathBuf>> {
    let files = args
        .files
        .iter()
        .map(|p| prepare_file(p, args.file_mode))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let mut seen = std::collections::HashSet::new();
    for f in &files {
        if !seen.insert(f) {
            bail!("--file {} is given twice", f.display());
        }
    }
    Ok(files)
}

/// The CloudWatch output's settings, when `--output` names it.
fn cloudwatch_settings(
    args: &RunArgs,
    pod: &PodMeta,
) -> anyhow::Result<Option<CloudWatchSettings>> {
    if !args.outputs.contains(&Output::Cloudwatch) {
        return Ok(None);
    }
    let Some(log_group) = args.log_group.clone().filter(|g| !g.is_empty()) else {
        bail!("--output cloudwatch needs --log-group (or HOOKLOG_LOG_GROUP)");
    };
    if let Some(days) = args.retention_days
        && !RETENTION_DAYS.contains(&days)
    {
        bail!("--retention-days {days} is not one CloudWatch accepts: {RETENTION_DAYS:?}");
    }
    Ok(Some(CloudWatchSettings {
        log_group,
        log_stream: fill_stream_template(&args.log_stream, pod)?,
        retention_days: args.retention_days,
        flush_interval: args.flush_interval,
        region: None,
    }))
}

/// Raises the soft limit on open files to `need` when the hard limit allows (Fargate's default
/// soft limit is 1024 on some platform versions), and warns when it cannot: connections past
/// the limit are then refused (accept backs off) rather than served.
fn ensure_fd_limit(need: u64) {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) else {
        return; // Unknown limit: nothing to check against.
    };
    if soft >= need {
        return;
    }
    let raised = need.min(hard);
    if setrlimit(Resource::RLIMIT_NOFILE, raised, hard).is_ok() && raised >= need {
        tracing::debug!(from = soft, to = raised, "raised the open-file limit");
        return;
    }
    tracing::warn!(
        limit = soft.max(raised),
        need,
        "open-file limit below what --max-connections needs: lower --max-connections or raise nofile"
    );
}

/// Makes `path` ready to follow: absolute, not a folder, created with `mode` when missing (so
/// containers running as other users can append), readable, with a writable checkpoint beside.
fn prepare_file(path: &Path, mode: u32) -> anyhow::Result<PathBuf> {
    let path = absolute_in_created_dir(path, "--file")?;
    // A FIFO would block the open below (and the file source) until some writer opens it; a
    // device has no end to follow from. Only regular files can be tailed. A symlink is never
    // followed (a peer may have planted it in the shared folder before hooklog started): it is
    // not an error, so a peer cannot keep hooklog from starting; the file source waits for a
    // regular file at the path, with one warning.
    let meta = match std::fs::symlink_metadata(&path) {
        Ok(m) => Some(m),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(e).with_context(|| format!("--file {}: cannot read", path.display())),
    };
    match &meta {
        Some(m) if m.is_dir() => bail!("--file {}: is a directory", path.display()),
        Some(m) if m.file_type().is_symlink() => {}
        Some(m) if !m.is_file() => bail!("--file {}: is not a regular file", path.display()),
        Some(_) => {
            crate::nofollow::open_read(&path)
                .map_err(std::io::Error::from)
                .with_context(|| format!("--file {}: cannot read", path.display()))?;
        }
        None => {
            // O_EXCL: creates a file, never follows a symlink planted meanwhile.
            let f = std::fs::OpenOptions::new()
                .append(true)
                .create_new(true)
                .mode(mode)
                .open(&path)
                .with_context(|| format!("--file {}: cannot create", path.display()))?;
            // The umask narrowed the mode at creation; set it as asked, on the file created
            // (fchmod: a symlink swapped in at the path is not followed).
            f.set_permissions(std::fs::Permissions::from_mode(mode))
                .with_context(|| format!("--file {}: cannot set mode {mode:o}", path.display()))?;
        }
    }
    let cp = crate::checkpoint::path_for(&path);
    if let Some(dir) = cp.parent() {
        // Never through a symlink a peer planted in the shared folder: hooklog's own paths.
        crate::nofollow::reclaim_own(dir)
            .and_then(|()| std::fs::create_dir_all(dir))
            .with_context(|| {
                format!(
                    "--file {}: cannot create its checkpoint folder {}",
                    path.display(),
                    dir.display()
                )
            })?;
    }
    crate::nofollow::reclaim_own(&cp)
        .and_then(|()| {
            crate::nofollow::open_write(&cp, crate::checkpoint::CHECKPOINT_MODE)
                .map_err(std::io::Error::from)
        })
        .with_context(|| {
            format!(
                "--file {}: cannot write its checkpoint {}",
                path.display(),
                cp.display()
            )
        })?;
    Ok(path)
}

/// The AWS region, as the SDK's default chain finds it ([`region_at_start`]: `AWS_REGION`,
/// `AWS_DEFAULT_REGION`, the profile's `region` in the shared config file, instance metadata).
/// `Err` names each source looked in.
pub fn aws_region(env: impl Fn(&str) -> Option<String>) -> Result<String, String> {
    let set = |k: &str| env(k).filter(|v| !v.trim().is_empty());
    // The chain's first link, read in `env` (the process's, or a test's).
    if let Some(region) = set("AWS_REGION").or_else(|| set("AWS_DEFAULT_REGION")) {
        return Ok(region);
    }
    if let Some(region) = region_at_start() {
        return Ok(region);
    }
    let profile = set("AWS_PROFILE").unwrap_or_else(|| "default".to_string());
    let file = set("AWS_CONFIG_FILE").unwrap_or_else(|| {
        set("HOME").map_or("~/.aws/config".to_string(), |h| format!("{h}/.aws/config"))
    });
    let imds = if set("AWS_EC2_METADATA_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true")) {
        "instance metadata (off: AWS_EC2_METADATA_DISABLED)"
    } else {
        "instance metadata (no answer)"
    };
    Err(format!(
        "looked in AWS_REGION, AWS_DEFAULT_REGION, profile {profile:?} of the shared config file ({file}) and {imds}; set AWS_REGION"
    ))
}

/// Fills `{field}` placeholders from the pod; a field the pod lacks becomes `unknown`. Characters
/// CloudWatch refuses in stream names (`:` and `*`) become `_`.
pub fn fill_stream_template(template: &str, pod: &PodMeta) -> anyhow::Result<String> {
    let mut out = String::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let close = rest[open..]
            .find('}')
            .with_context(|| format!("--log-stream {template:?}: unclosed {{"))?;
        let name = &rest[open + 1..open + close];
        if !["pod_name", "namespace_name", "pod_id", "pod_ip", "host"].contains(&name) {
            bail!(
                "--log-stream {template:?}: unknown field {{{name}}} (pod_name, namespace_name, pod_id, pod_ip, host)"
            );
        }
        out.push_str(pod.field(name).unwrap_or("unknown"));
        rest = &rest[open + close + 1..];
    }
    out.push_str(rest);
    let out: String = out
        .chars()
        .map(|c| if c == ':' || c == '*' { '_' } else { c })
        .collect();
    if out.is_empty() || out.len() > MAX_LOG_STREAM_NAME {
        bail!(
            "--log-stream {template:?}: gives a name of {} characters (1 to {MAX_LOG_STREAM_NAME} allowed)",
            out.len()
        );
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_args(args: &[&str]) -> RunArgs {
        use clap::Parser;
        let cli = crate::cli::Cli::try_parse_from(["hooklog", "run"].iter().chain(args))
            .expect("valid run arguments");
        match cli.command {
            crate::cli::Command::Run(a) => a,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn peers_listed_with_spaces_are_trimmed() {
        let dir = tempfile::tempdir().unwrap();
        let sock = dir.path().join("h.sock");
        let args = run_args(&[
            "--socket",
            sock.to_str().unwrap(),
            "--peers",
            "envoy, api-server,, ",
        ]);
        let cfg = RunConfig::build(args).unwrap();
        assert_eq!(cfg.peers, ["envoy", "api-server"]);
    }

    #[test]
    fn stream_template_uses_pod_fields() {
        let pod = PodMeta {
            pod_name: Some("api-1".into()),
            namespace_name: Some("shop".into()),
            ..PodMeta::default()
        };
        assert_eq!(
            fill_stream_template("{namespace_name}/{pod_name}", &pod).unwrap(),
            "shop/api-1"
        );
        assert_eq!(fill_stream_template("x:{host}", &pod).unwrap(), "x_unknown");
        assert!(fill_stream_template("{nope}", &pod).is_err());
        assert!(fill_stream_template("{pod_name", &pod).is_err());
    }

    #[test]
    fn created_file_gets_the_asked_mode_despite_umask() {
        let dir = tempfile::tempdir().unwrap();
        let p = prepare_file(&dir.path().join("sub/prestop.log"), 0o666).unwrap();
        let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o666);
    }

    #[test]
    fn a_directory_is_not_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let err = prepare_file(dir.path(), 0o666).unwrap_err();
        assert!(format!("{err:#}").contains("is a directory"), "{err:#}");
    }

    #[test]
    fn a_symlink_at_the_file_path_is_neither_followed_nor_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("elsewhere");
        let p = dir.path().join("prestop.log");
        std::os::unix::fs::symlink(&target, &p).unwrap();
        prepare_file(&p, 0o666).unwrap();
        assert!(!target.exists(), "the dangling link's target was created");
    }
}
