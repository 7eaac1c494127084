//! (below both) hooklog makes Kubernetes lifecycle hooks visible.
//!
//! Two halves, built from this one crate as two artifacts (issue 27): **the sidecar**, the binary
//! every pod runs and `install` copies (`cargo build --no-default-features`, the
//! `hooklog-sidecar` image), and **the control plane**, which the full CLI adds with the default
//! `control` feature (laptops, CI, the `hooklog` image the webhook Deployment runs). Imports run
//! one way: the control plane may use what is below both and the sidecar's types (`check` reads
//! hook command lines with [`cli`]'s), and nothing of the sidecar names the control plane
//! (tests/layers.rs). Each module's first line says its half.
//!
//! The sidecar:
//! - [`daemon`] (`hooklog run`): [`source`]s follow a shared file ([`source::file`]) and a Unix
//!   socket ([`source::socket`]); [`framing`] cuts their bytes into lines and [`record`] turns
//!   each into an enriched JSON record with the pod's metadata from [`pod`]. Records travel in
//!   [`batch::Batch`]es through a bounded channel to the [`sink`]s (stdout, CloudWatch Logs),
//!   each with the [`checkpoint`] positions it commits once delivered. On
//!   SIGTERM, SIGINT, SIGHUP or SIGQUIT ([`lifecycle::signal`]) it waits for its
//!   [`lifecycle::peers`] to finish their hooks, then emits a `hooks.summary` record and exits
//!   within `--grace`. [`config`] validates `run`'s command line before any runtime starts.
//!   With `--events` ([`events`]) it posts a Warning Event on the pod for each hook not ok,
//!   and it writes the summary's line as its termination message.
//! - [`hook`] (`hooklog hook -- CMD`) runs a hook and reports its output and exit status
//!   through [`client`], and passes its output through ([`passthrough`]).
//! - [`tools`]: `sleep`, `install` and `emit`, for distroless images without a shell.
//!
//! The control plane (`control` feature):
//! - `manifest`: `check`, `inject` and `uninject` on Kubernetes manifests, without a cluster
//!   (images read from their registries unless `--offline`).
//! - `webhook` (`hooklog webhook`): a mutating admission webhook giving pods what `inject`
//!   gives them, as the API server creates them.
//! - `registry`: images read from their registries (manifests, layers' file lists), for
//!   `check` to look hook commands up in the image they run in.
//! - `yaml`, below `manifest`: YAML read and edited in place, byte for byte, naming nothing of
//!   Kubernetes' objects.
//! - `kube`: the Kubernetes words its flags share with it (severity, version, architecture).
//! - `sidecar_settings`: the injected sidecar's settings (the `--sidecar-*` flags, then the
//!   namespace's and the pod's `hooklog.dev/` annotations), one parser for inject, the webhook
//!   and check.
//!
//! Below both: [`protocol`] is the hook record's wire schema, spelled once; [`cli`] parses the
//! command line (the control plane's subcommands only with `control`); [`nofollow`] is how both sides open files in the shared folder, never through a
//! peer's symlink; [`duration`] and [`timefmt`] read and write times.
#![forbid(unsafe_code)]

pub mod batch;
pub mod checkpoint;
pub mod cli;
pub mod client;
pub mod config;
pub mod daemon;
pub mod duration;
pub mod events;
pub mod framing;
pub mod hook;
#[cfg(feature = "control")]
pub mod kube;
pub mod lifecycle;
#[cfg(feature = "control")]
pub mod manifest;
pub mod nofollow;
pub mod passthrough;
pub mod pod;
pub mod protocol;
pub mod record;
#[cfg(feature = "control")]
pub mod registry;
#[cfg(feature = "control")]
pub mod sidecar_settings;
pub mod sink;
pub mod source;
#[cfg(test)]
pub(crate) mod testkit;
pub mod timefmt;
pub mod tools;
#[cfg(feature = "control")]
pub mod webhook;
#[cfg(feature = "control")]
pub mod yaml;
