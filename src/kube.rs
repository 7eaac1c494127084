//! (the control plane) The Kubernetes words that the control plane's flags in [`crate::cli`] and
//! the control plane share: a finding's [`Severity`], a cluster's version ([`parse_version`])
//! and a node's [`Arch`]. Here rather than in `manifest::check` and `registry`, which re-export
//! them, so that `cli`, whose types `check` reads hook command lines with, imports nothing of
//! them (issue 27's circle).

/// How bad a finding is.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    serde::Serialize,
    serde::Deserialize,
    clap::ValueEnum,
)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Info,
    Warning,
    Error,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Error => "error",
        }
    }
}

/// `1.29`, `v1.30.2` -> `(1, 29)`, `(1, 30)`.
pub fn parse_version(s: &str) -> Result<(u32, u32), String> {
    let t = s.trim().trim_start_matches('v');
    let mut parts = t.split('.');
    let major = parts.next().and_then(|p| p.parse().ok());
    let minor = parts
        .next()
        .and_then(|p| p.trim_end_matches('+').parse().ok());
    match (major, minor) {
        (Some(a), Some(b)) => Ok((a, b)),
        _ => Err(format!("{s:?} is not a Kubernetes version such as 1.29")),
    }
}

/// The CPU architectures nodes run (EKS and Fargate: amd64 and arm64).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, clap::ValueEnum)]
pub enum Arch {
    Amd64,
    Arm64,
}

impl Arch {
    /// Go's GOARCH, as image indexes spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Arch::Amd64 => "amd64",
            Arch::Arm64 => "arm64",
        }
    }

    pub fn parse(s: &str) -> Option<Arch> {
        match s {
            "amd64" => Some(Arch::Amd64),
            "arm64" => Some(Arch::Arm64),
            _ => None,
        }
    }
}
