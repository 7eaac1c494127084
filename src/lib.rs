//! hooklog makes Kubernetes lifecycle hooks visible.
//!
//! One static binary with several roles:
//! - [`daemon`] (`hooklog run`), the sidecar: [`source`]s follow a shared file ([`source::file`])
//!   and a Unix socket ([`source::socket`]); [`framing`] cuts their bytes into lines and
//!   [`record`] turns each into an enriched JSON record with the pod's metadata from [`pod`].
//!   Records travel in [`batch::Batch`]es through a bounded channel to the [`sink`]s. On
//!   SIGTERM, SIGINT, SIGHUP or SIGQUIT ([`lifecycle::signal`]) it waits for its [`lifecycle::peers`] to finish their hooks,
//!   then emits a `hooks.summary` record and exits within `--grace`.
//!   With `--events` ([`events`]) it posts a Warning Event on the pod for each hook not ok,
//!   and it writes the summary's line as its termination message.
//! - [`hook`] (`hooklog hook -- CMD`) runs a hook and reports its output and exit status
//!   through [`client`], and passes its output through ([`passthrough`]).
//! - [`tools`]: `sleep`, `install` and `emit`, for distroless images without a shell.
//! - [`manifest`]: `check`, `inject` and `uninject` on Kubernetes manifests, without a cluster
//!   (images read from their registries unless `--offline`).
//! - [`webhook`] (`hooklog webhook`): a mutating admission webhook giving pods what `inject`
//!   gives them, as the API server creates them.
//! - [`registry`]: images read from their registries (manifests, layers' file lists), for
//!   `check` to look hook commands up in the image they run in.
//!
//! - [`nofollow`]: how both sides open files in the shared folder, never through a peer's
//!   symlink.
//!
//! [`cli`] parses the command line, [`config`] validates it before any runtime starts, and
//! [`duration`] and [`timefmt`] read and write times.
#![forbid(unsafe_code)]

pub mod batch;
pub mod cli;
pub mod client;
pub mod config;
pub mod daemon;
pub mod duration;
pub mod events;
pub mod framing;
pub mod hook;
pub mod lifecycle;
pub mod manifest;
pub mod nofollow;
pub mod passthrough;
pub mod pod;
pub mod record;
pub mod registry;
pub mod sink;
pub mod source;
#[cfg(test)]
pub(crate) mod testkit;
pub mod timefmt;
pub mod tools;
pub mod webhook;
