//! (the control plane) `hooklog inject`'s and `hooklog uninject`'s flags, and [`InjectFlags`],
//! what inject and the webhook both give a pod, which each flattens in.

use std::path::PathBuf;

use clap::{Args, ValueEnum};

use super::images::ImageArgs;
use super::values::env_bool;

/// How `inject` runs the sidecar.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SidecarKind {
    /// An init container with `restartPolicy: Always` (Kubernetes 1.29+).
    Native,
    /// A regular container that waits for its peers (clusters before 1.29).
    Classic,
}

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

    /// `--kubernetes-version`, `--prestop-sleep` and `--events`, as the webhook has them.
    #[command(flatten)]
    pub common: InjectFlags,

    /// Remove what inject added instead (as `hooklog uninject`).
    #[arg(long, env = "HOOKLOG_INJECT_UNDO", value_parser = env_bool("HOOKLOG_INJECT_UNDO"))]
    pub undo: bool,

    /// How images are read, as for `check`: only for the warnings on stderr (a hook program
    /// the image lacks); the manifests written never depend on them.
    #[command(flatten)]
    pub images: ImageArgs,

    #[command(flatten)]
    pub settings: crate::sidecar_settings::SidecarFlags,
}

/// The flags `inject` and `webhook` share: what both give each pod, and the cluster they write
/// for. Each command flattens them in at the same place (after `--sidecar`); the webhook says its
/// own help for them ([`super::WebhookArgs`]).
#[derive(Debug, Clone, Args)]
pub struct InjectFlags {
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
}

/// `hooklog uninject`.
#[derive(Debug, Clone, Args)]
pub struct UninjectArgs {
    /// Manifest files, folders, or `-` for stdin (also when none is given).
    #[arg(value_name = "FILE|DIR|-")]
    pub paths: Vec<PathBuf>,
}

fn parse_prestop_sleep(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((c, d)) if !c.is_empty() => crate::duration::parse(d)
            .map(|_| (c.to_string(), d.to_string()))
            .map_err(|e| e.to_string()),
        _ => Err(format!("{s:?} is not CONTAINER=DURATION")),
    }
}
