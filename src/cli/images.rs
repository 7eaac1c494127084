//! (the control plane) How `check` and `inject` find the images a manifest names: the flags
//! both flatten in.

use std::path::PathBuf;

use clap::Args;

use super::values::env_bool;

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

fn parse_image_root(s: &str) -> Result<(String, PathBuf), String> {
    match s.split_once('=') {
        Some((image, path)) if !image.is_empty() && !path.is_empty() => {
            Ok((image.to_string(), PathBuf::from(path)))
        }
        _ => Err(format!("{s:?} is not IMAGE=PATH")),
    }
}
