//! `hooklog webhook`: a mutating admission webhook that gives pods hooklog as they are created,
//! with the same core as `hooklog inject` ([`crate::manifest::inject`]), so a pod the API server
//! stores is what `inject` makes of it.
//!
//! [`review`] decides (pure), [`patch`] writes the JSONPatch, [`server`] is the HTTPS side, [`tls`] the
//! serving certificate (reloaded when its files change), [`version`] the API server's version for
//! `--sidecar auto`.

pub mod patch;
pub mod review;
pub mod server;
pub mod tls;
pub mod version;

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

/// `hooklog webhook`, checked: the TLS files load and the sidecar form is decided before anything
/// is served.
pub struct WebhookConfig {
    pub args: WebhookArgs,
}

impl WebhookConfig {
    /// Checks what can be checked before a runtime starts.
    pub fn from_args(args: WebhookArgs) -> Result<Self> {
        if args.image.trim().is_empty() {
            anyhow::bail!("--image (HOOKLOG_INJECT_IMAGE) is empty");
        }
        if let (WebhookSidecar::Native, Some(v)) = (args.sidecar, args.kubernetes_version)
            && v < NATIVE_SIDECAR_SINCE
        {
            anyhow::bail!(
                "--sidecar native needs Kubernetes 1.29+, and --kubernetes-version is {}.{}",
                v.0,
                v.1
            );
        }
        Ok(WebhookConfig { args })
    }
}

/// The sidecar form: `--sidecar`, or for `auto` the version given or asked of the API server.
async fn sidecar_mode(args: &WebhookArgs) -> Result<SidecarMode> {
    let version = match (args.sidecar, args.kubernetes_version) {
        (WebhookSidecar::Native, _) => return Ok(SidecarMode::Native),
        (WebhookSidecar::Classic, _) => return Ok(SidecarMode::Classic),
        (WebhookSidecar::Auto, Some(v)) => v,
        (WebhookSidecar::Auto, None) => version::in_cluster(&args.serviceaccount_dir)
            .await
            .context("--sidecar auto: cannot learn the API server's version (give --kubernetes-version, or --sidecar native|classic)")?,
    };
    Ok(if version >= NATIVE_SIDECAR_SINCE {
        SidecarMode::Native
    } else {
        SidecarMode::Classic
    })
}

/// Runs the webhook until `shutdown` resolves, in phases: decide the sidecar form, load the
/// certificate, listen, serve (the certificate reloading beside), then drain.
pub async fn run(cfg: WebhookConfig, shutdown: impl Future<Output = &'static str>) -> Result<()> {
    let args = cfg.args;
    let mode = sidecar_mode(&args).await?;
    let certs = Arc::new(tls::Reloading::open(
        args.tls_cert_file.clone(),
        args.tls_key_file.clone(),
    )?);
    let tls = Arc::new(tls::server_config(certs.clone())?);
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("listen on {}", args.listen))?;
    let own_namespace = args
        .own_namespace
        .clone()
        .or_else(|| std::env::var("POD_NAMESPACE").ok());
    let shared = Arc::new(server::Shared {
        policy: review::Policy {
            inject: inject::Options {
                image: args.image.clone(),
                mode,
                prestop_sleep: args.prestop_sleep.clone(),
            },
            own_namespace,
        },
        stats: Default::default(),
    });
    tracing::info!(
        listen = %listener.local_addr().unwrap_or(args.listen),
        sidecar = ?mode,
        "webhook serving"
    );

    let stop = CancellationToken::new();
    let tracker = TaskTracker::new();
    tracker.spawn(certs.watch(stop.clone()));
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
