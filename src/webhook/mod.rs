//! (the control plane) `hooklog webhook`: a mutating admission webhook that gives pods hooklog as they are created,
//! with the same core as `hooklog inject` ([`crate::manifest::inject`]), so a pod the API server
//! stores is what `inject` makes of it.
//!
//! [`review`] decides (pure), [`patch`] writes the JSONPatch, [`server`] is the HTTPS side (each
//! connection's [`pace`], and the [`connections`] table that evicts the one that does least when
//! every slot is taken), [`tls`] the serving certificate (reloaded when its files change),
//! [`autotls`] the default without files (its own CA, in the caBundle, and renewal),
//! [`apiserver`] the requests to the API server, [`version`] the API server's version for
//! `--sidecar auto`, and [`namespaces`] the namespaces' `hooklog.dev/` annotations for the
//! injected sidecar's settings.

pub mod apiserver;
pub mod autotls;
pub mod connections;
pub mod namespaces;
pub mod pace;
pub mod patch;
pub mod review;
pub mod server;
pub mod tls;
pub mod version;

#[cfg(test)]
mod no_panic;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::cli::{WebhookArgs, WebhookSidecar};
use crate::manifest::budget::{NATIVE_SIDECAR_SINCE, SidecarMode};
use crate::manifest::inject;

/// How long reviews in flight may take after the signal. The API server gives up on a review
/// after `timeoutSeconds` (10 in k8s/webhook/), so nothing is worth waiting for longer.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

/// Shortest `--cert-validity`: renewal at 2/3 of it must leave a handshake's worth of time, and
/// the tests renew after 10 s of a 15 s one.
pub const MIN_CERT_VALIDITY: Duration = Duration::from_secs(10);

/// `hooklog webhook`, checked: the TLS files load and the sidecar form is decided before anything
/// is served.
pub struct WebhookConfig {
    pub args: WebhookArgs,
    /// The injected sidecars' settings from the flags (`--sidecar-*`, `--events`), checked.
    pub settings: crate::sidecar_settings::Settings,
}

/// The webhook's own namespace: `--own-namespace`, else the Downward API's `POD_NAMESPACE`.
fn own_namespace(args: &WebhookArgs) -> Option<String> {
    args.own_namespace
        .clone()
        .or_else(|| std::env::var("POD_NAMESPACE").ok())
        .filter(|n| !n.is_empty())
}

/// Auto-TLS's certificate names: the Service's, when the namespace is known, then `--tls-san`.
fn sans(args: &WebhookArgs) -> Vec<String> {
    let mut sans = Vec::new();
    if let Some(ns) = own_namespace(args) {
        let svc = &args.service;
        sans.push(format!("{svc}.{ns}.svc"));
        sans.push(format!("{svc}.{ns}.svc.cluster.local"));
    }
    sans.extend(args.tls_san.iter().filter(|s| !s.is_empty()).cloned());
    sans
}

impl WebhookConfig {
    /// Checks what can be checked before a runtime starts.
    pub fn from_args(args: WebhookArgs) -> Result<Self> {
        if args.image.trim().is_empty() {
            anyhow::bail!("--image (HOOKLOG_INJECT_IMAGE) is empty");
        }
        if let (WebhookSidecar::Native, Some(v)) = (args.sidecar, args.common.kubernetes_version)
            && v < NATIVE_SIDECAR_SINCE
        {
            anyhow::bail!(
                "--sidecar native needs Kubernetes 1.29+, and --kubernetes-version is {}.{}",
                v.0,
                v.1
            );
        }
        if args.tls_cert_file.is_none() {
            if sans(&args).is_empty() {
                anyhow::bail!(
                    "auto-TLS (no --tls-cert-file) needs a name for the certificate: --own-namespace (POD_NAMESPACE) for the Service's, or --tls-san"
                );
            }
            if args.cert_validity < MIN_CERT_VALIDITY {
                anyhow::bail!("--cert-validity is shorter than {MIN_CERT_VALIDITY:?}");
            }
        }
        let settings = args
            .settings
            .settings(args.common.events)
            .map_err(|e| anyhow::anyhow!(e))?;
        Ok(WebhookConfig { args, settings })
    }
}

/// The sidecar form: `--sidecar`, or for `auto` the version given or asked of the API server.
async fn sidecar_mode(
    args: &WebhookArgs,
    client: &Result<apiserver::Client>,
) -> Result<SidecarMode> {
    let version = match (args.sidecar, args.common.kubernetes_version) {
        (WebhookSidecar::Native, _) => return Ok(SidecarMode::Native),
        (WebhookSidecar::Classic, _) => return Ok(SidecarMode::Classic),
        (WebhookSidecar::Auto, Some(v)) => v,
        (WebhookSidecar::Auto, None) => match client {
            Ok(c) => version::in_cluster(c).await,
            Err(e) => Err(anyhow::anyhow!("{e:#}")),
        }
            .context("--sidecar auto: cannot learn the API server's version (give --kubernetes-version, or --sidecar native|classic)")?,
    };
    Ok(if version >= NATIVE_SIDECAR_SINCE {
        SidecarMode::Native
    } else {
        SidecarMode::Classic
    })
}

/// The serving certificate: the files given, or auto-TLS's own, its CA put into the caBundle
/// before anything is served (the API server could not call a webhook it does not trust).
async fn certificate(
    args: &WebhookArgs,
    client: Result<apiserver::Client>,
) -> Result<(Arc<tls::Reloading>, Option<autotls::AutoTls>)> {
    if let (Some(cert), Some(key)) = (&args.tls_cert_file, &args.tls_key_file) {
        return Ok((
            Arc::new(tls::Reloading::open(cert.clone(), key.clone())?),
            None,
        ));
    }
    let client = client
        .context("auto-TLS (no --tls-cert-file) writes the caBundle through the API server")?;
    let ca = autotls::Ca::new(&args.webhook_config)?;
    let sans = sans(args);
    let leaf = ca.leaf(&sans, args.cert_validity)?;
    autotls::keep_bundle(&client, &args.webhook_config, &ca.pem)
        .await
        .with_context(|| {
            format!(
                "auto-TLS: cannot put the CA into MutatingWebhookConfiguration {}'s caBundle (give --tls-cert-file/--tls-key-file to manage certificates yourself)",
                args.webhook_config
            )
        })?;
    tracing::info!(config = %args.webhook_config, ?sans, valid = ?args.cert_validity, "auto-TLS: CA in caBundle, serving certificate made");
    let auto = autotls::AutoTls {
        ca,
        sans,
        lasts: args.cert_validity,
        client,
        config: args.webhook_config.clone(),
    };
    Ok((Arc::new(tls::Reloading::in_memory(leaf)), Some(auto)))
}

/// Runs the webhook until `shutdown` resolves, in phases: decide the sidecar form, make or load
/// the certificate, listen, serve (the certificate renewed or reloaded beside), then drain.
pub async fn run(cfg: WebhookConfig, shutdown: impl Future<Output = &'static str>) -> Result<()> {
    let args = cfg.args;
    // Made here (it only reads the mount), used only if needed: with a version and certificate
    // files given, nothing asks the API server anything.
    let client = apiserver::Client::in_cluster(&args.serviceaccount_dir);
    let mode = sidecar_mode(&args, &client).await?;
    let (certs, auto) = certificate(&args, client).await?;
    let tls = Arc::new(tls::server_config(certs.clone())?);
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("listen on {}", args.listen))?;
    let own_namespace = own_namespace(&args);
    let namespaces = Arc::new(namespaces::Namespaces::default());
    let lister = apiserver::Client::in_cluster(&args.serviceaccount_dir);
    namespaces::first(&lister, &namespaces).await;
    let shared = Arc::new(server::Shared {
        idle: Arc::new(server::IdleSlots::new(server::MAX_IDLE_CONNECTIONS)),
        idle_timeout: args.idle_timeout,
        bodies: tokio::sync::Semaphore::new(server::BODY_BUDGET / 1024),
        reviews: tokio::sync::Semaphore::new(server::REVIEW_BUDGET / 1024),
        policy: review::Policy {
            inject: inject::Options {
                image: args.image.clone(),
                mode,
                prestop_sleep: args.common.prestop_sleep.clone(),
                events: args.common.events,
                settings: cfg.settings,
            },
            own_namespace,
            namespaces: namespaces.clone(),
        },
        stats: Default::default(),
    });
    tracing::info!(
        listen = %listener.local_addr().unwrap_or(args.listen),
        sidecar = ?mode,
        events = args.common.events,
        "webhook serving"
    );
    if args.common.events {
        tracing::info!(rbac = inject::EVENTS_RBAC, "sidecars post events");
    }

    let stop = CancellationToken::new();
    let tracker = TaskTracker::new();
    match auto {
        Some(auto) => tracker.spawn(auto.run(certs.clone(), stop.clone())),
        None => tracker.spawn(certs.watch(stop.clone())),
    };
    if let Ok(lister) = lister {
        tracker.spawn(namespaces::keep(lister, namespaces, stop.clone()));
    }
    let serving = server::serve(listener, tls, shared.clone(), stop.clone(), &tracker);
    tokio::pin!(serving);
    tokio::select! {
        signal = shutdown => tracing::info!(signal, "stopping"),
        _ = &mut serving => {}
    }
    stop.cancel();
    tracker.close();
    if tokio::time::timeout(DRAIN_TIMEOUT, tracker.wait())
        .await
        .is_err()
    {
        tracing::warn!(timeout = ?DRAIN_TIMEOUT, "reviews still in flight at the drain deadline");
    }
    if let Ok(s) = shared.stats.lock() {
        let mean = s
            .total
            .checked_div(s.reviews.max(1) as u32)
            .unwrap_or_default();
        tracing::info!(reviews = s.reviews, injected = s.injected, ?mean, max = ?s.max, "webhook stopped");
    }
    Ok(())
}
