//! (the control plane) `hooklog webhook`'s flags: how it serves, and what it gives a pod
//! ([`InjectFlags`], as inject does).

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, ValueEnum};

use super::inject::InjectFlags;
use super::values::bounded_duration;

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

/// What the webhook's help says of the flags it shares with inject ([`InjectFlags`]), for a
/// cluster rather than a file.
const WEBHOOK_HELP: [(&str, &str); 3] = [
    (
        "kubernetes_version",
        "The cluster's Kubernetes version (`1.28`), for `--sidecar auto`; without it the API \
         server is asked",
    ),
    (
        "prestop_sleep",
        "Give a container without a preStop the hook `hooklog sleep DURATION`, as inject does. \
         Repeatable",
    ),
    (
        "events",
        "The sidecars it adds post a Warning Event on their pod for each hook that does not end \
         ok (`hooklog run --events`); each pod's service account needs k8s/events/rbac.yaml",
    ),
];

/// `hooklog webhook`.
#[derive(Debug, Clone, Args)]
#[command(mut_args(webhook_help))]
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

    /// `--kubernetes-version`, `--prestop-sleep` and `--events`, as inject has them, with the
    /// help above ([`WEBHOOK_HELP`]).
    #[command(flatten)]
    pub common: InjectFlags,

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
    pub settings: crate::sidecar_settings::SidecarFlags,
}

/// Each of [`WEBHOOK_HELP`]'s flags with its help.
fn webhook_help(arg: clap::Arg) -> clap::Arg {
    match WEBHOOK_HELP.iter().find(|(id, _)| arg.get_id() == *id) {
        Some((_, help)) => arg.help(*help),
        None => arg,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each of the webhook's own helps lands on a flag it shares with inject, and says other
    /// than inject's.
    #[test]
    fn the_webhook_says_its_own_help_for_the_flags_it_shares() {
        let cmd = crate::cli::command();
        let help = |sub: &str, id: &str| {
            cmd.find_subcommand(sub)
                .and_then(|s| s.get_arguments().find(|a| a.get_id() == id))
                .and_then(|a| a.get_help())
                .map(ToString::to_string)
        };
        for (id, text) in WEBHOOK_HELP {
            assert_eq!(help("webhook", id).as_deref(), Some(text), "{id}");
            let inject = help("inject", id).unwrap_or_else(|| panic!("inject has no {id}"));
            assert_ne!(inject, text, "{id}");
        }
    }
}
