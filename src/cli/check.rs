//! (the control plane) `hooklog check`'s flags.

use std::path::PathBuf;

use clap::{Args, ValueEnum};

use super::images::ImageArgs;
use super::values::env_bool;

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

/// A platform with rules of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Platform {
    /// EKS Fargate: no privileged, host namespaces, hostPath, added capabilities or DaemonSets.
    Fargate,
}

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
