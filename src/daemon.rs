//! `hooklog run`: wires sources, fan-out and sinks together, and runs the shutdown phases.
//!
//! 1. The signal arrives: keep reading.
//! 2. Wait until every peer's hook is done (expected peers get `--announce-timeout` to show up),
//!    then for a quiet period of `--linger`; a hook that starts meanwhile is waited for too.
//! 3. Stop the sources: each reads what its input already holds, then drops its sender.
//! 4. Emit the `hooks.summary` record; the sinks see their queues close, flush, and end.
//!
//! All of it runs under one timeout of `--grace` from the signal: hooklog never outlives it.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::batch::Batch;
use crate::config::RunConfig;
use crate::framing::{Frame, FrameEnd};
use crate::lifecycle::peers::{Peers, summary_members};
use crate::record::{Encoder, Enrichment};
use crate::sink::{self, Counters};
use crate::source::checkpoint::{self, Checkpoint};
use crate::source::file::FileSource;
use crate::source::{Activity, SourceContext, socket};

/// How often pending hooks are logged while waiting.
const REPORT_EVERY: Duration = Duration::from_secs(5);

/// Time kept back from `--grace` for stopping sources and flushing sinks.
const FLUSH_RESERVE: Duration = Duration::from_secs(2);

/// The quiet period is waited for at most this many times `--linger`: a peer that never stops
/// writing must not hold the pod until the grace deadline.
const LINGER_CAP_FACTOR: u32 = 4;

/// Runs the daemon until `shutdown` resolves and the shutdown phases end.
pub async fn run(
    cfg: RunConfig,
    shutdown: impl Future<Output = &'static str>,
) -> anyhow::Result<()> {
    let enrichment = Arc::new(Enrichment::new(&cfg.pod, cfg.max_line_bytes));
    let peers = Arc::new(Peers::new(&cfg.peers));
    let activity = Arc::new(Activity::default());
    let counters = Arc::new(Counters::default());
    let emf = cfg
        .emf_namespace
        .clone()
        .map(|metric_namespace| EmfSettings {
            metric_namespace,
            pod_namespace: cfg.pod.namespace_name.clone(),
        });
    let (tx, rx) = mpsc::channel::<Batch>(sink::SOURCE_QUEUE_BATCHES);
    let (deadline_tx, deadline_rx) = watch::channel::<Option<Instant>>(None);

    // Sinks.
    let mut sinks: JoinSet<anyhow::Result<()>> = JoinSet::new();
    let mut sink_queues = Vec::new();
    if cfg.stdout {
        let (stx, srx) = mpsc::channel(sink::SINK_QUEUE_BATCHES);
        sink_queues.push(stx);
        let counters = counters.clone();
        sinks.spawn_blocking(move || sink::stdout::run(srx, counters).context("stdout sink"));
    }
    if let Some(settings) = cfg.cloudwatch.clone() {
        let (ctx, crx) = mpsc::channel(sink::SINK_QUEUE_BATCHES);
        sink_queues.push(ctx);
        let ctx = sink::cloudwatch::SinkContext {
            rx: crx,
            settings,
            counters: counters.clone(),
            deadline: deadline_rx.clone(),
            stdout_sink: cfg.stdout,
        };
        sinks.spawn(async move { sink::cloudwatch::run(ctx).await.context("cloudwatch sink") });
    }
    let fan_out = tokio::spawn(sink::fan_out(rx, sink_queues, counters.clone()));

    // Sources.
    let ctx = SourceContext {
        enrichment: enrichment.clone(),
        peers: peers.clone(),
        activity: activity.clone(),
        tx: tx.clone(),
    };
    let cancel = CancellationToken::new();
    let sources = TaskTracker::new();
    let mut checkpoints = Vec::new();
    let mut stops = Vec::new();
    for path in &cfg.files {
        let cp = Arc::new(Checkpoint::new(checkpoint::path_for(path)));
        checkpoints.push(cp.clone());
        let (src, stop) = FileSource::new(path.clone(), cp, ctx.clone(), cfg.rotate_wait);
        stops.push(stop);
        let path = path.clone();
        sources.spawn_blocking(move || {
            if let Err(e) = src.run() {
                tracing::error!(path = %path.display(), error = %format!("{e:#}"), "file source stopped");
            }
        });
    }
    for (path, listener) in cfg.sockets {
        let listener = tokio::net::UnixListener::from_std(listener).with_context(|| {
            format!(
                "--socket {}: cannot register with the runtime",
                path.display()
            )
        })?;
        sources.spawn(socket::run(
            listener,
            path,
            ctx.clone(),
            cfg.max_connections,
            cancel.clone(),
        ));
    }
    sources.close();
    drop(ctx);
    // Checkpoints are written as batches are delivered (no timer here to wake an idle daemon);
    // a write that failed is tried again below.
    tracing::info!(files = cfg.files.len(), peers = ?cfg.peers, "hooklog ready");

    // Phase 1: run until the signal.
    let signal = tokio::select! {
        s = shutdown => s,
        Some(res) = sinks.join_next() => {
            let err = match res {
                Ok(Ok(())) => anyhow::anyhow!("a sink ended early"),
                Ok(Err(e)) => e,
                Err(e) => anyhow::Error::new(e).context("a sink panicked"),
            };
            return Err(err);
        }
    };
    let t0 = Instant::now();
    // The quiet period starts at the signal at the earliest: a pod quiet for a while gets its
    // SIGTERM as the hooks start, and they need a moment to announce themselves.
    activity.touch();
    let deadline = t0 + cfg.grace;
    let stop_waiting = deadline - FLUSH_RESERVE.min(cfg.grace / 4);
    tracing::info!(
        signal,
        grace_ms = cfg.grace.as_millis() as u64,
        "shutdown: waiting for peer hooks"
    );
    deadline_tx.send_replace(Some(deadline));

    let phases = async {
        // Phase 2: the peers' hooks, then a quiet period.
        loop {
            peers
                .wait_done(t0 + cfg.announce_timeout, stop_waiting, REPORT_EVERY)
                .await;
            let cap = (Instant::now() + cfg.linger * LINGER_CAP_FACTOR).min(stop_waiting);
            loop {
                let quiet = activity.quiet_for();
                let now = Instant::now();
                if quiet >= cfg.linger || now >= cap {
                    break;
                }
                tokio::time::sleep_until((now + (cfg.linger - quiet)).min(cap)).await;
            }
            let announce_over = Instant::now() >= t0 + cfg.announce_timeout;
            if peers.pending(announce_over).is_empty() || Instant::now() >= stop_waiting {
                break;
            }
        }
        // Phase 3: sources read what they hold and stop.
        tracing::debug!("shutdown: stopping sources");
        cancel.cancel();
        for s in &stops {
            s.stop();
        }
        sources.wait().await;
        // Phase 4: the summary, then the sinks drain.
        let summary = summary_batch(&enrichment, &peers, emf.as_ref());
        let _ = tx.send(summary).await; // Fails only if the fan-out is gone, reported below.
        drop(tx);
        let _ = fan_out.await;
        let mut result = Ok(());
        while let Some(res) = sinks.join_next().await {
            match res {
                Ok(Ok(())) => {}
                Ok(Err(e)) => result = Err(e),
                Err(e) => result = Err(anyhow::Error::new(e).context("a sink panicked")),
            }
        }
        result
    };
    let result = match tokio::time::timeout_at(deadline, phases).await {
        Ok(r) => r,
        Err(_) => {
            tracing::warn!(
                grace_ms = cfg.grace.as_millis() as u64,
                "grace deadline reached: exiting with records still queued"
            );
            Ok(())
        }
    };
    save_checkpoints(&checkpoints);
    tracing::info!(
        records_in = Counters::get(&counters.records_in),
        stdout = Counters::get(&counters.stdout_records),
        cloudwatch_shipped = Counters::get(&counters.cloudwatch_shipped),
        cloudwatch_retried = Counters::get(&counters.cloudwatch_retried),
        cloudwatch_fell_back = Counters::get(&counters.cloudwatch_fell_back),
        elapsed_ms = t0.elapsed().as_millis() as u64,
        "hooklog stopped"
    );
    result
}

/// `--emf`: the metric namespace and the pod's namespace (a dimension).
struct EmfSettings {
    /// CloudWatch metric namespace.
    metric_namespace: String,
    /// `POD_NAMESPACE`, the `namespace` dimension.
    pod_namespace: Option<String>,
}

/// The `hooks.summary` record as a batch of its own; with `--emf` it carries the pod's totals
/// as metrics and is preceded by one `hooks.metrics` record per peer.
fn summary_batch(enrichment: &Arc<Enrichment>, peers: &Peers, emf: Option<&EmfSettings>) -> Batch {
    let outcomes = peers.outcomes();
    let now = crate::timefmt::now_ms();
    let mut members = summary_members(&outcomes);
    tracing::info!(summary = %members["message"].as_str().unwrap_or_default(), "hooks summary");
    let mut docs = Vec::new();
    if let Some(e) = emf {
        let pod_ns = e.pod_namespace.as_deref();
        sink::cloudwatch::emf::add_to_summary(
            &mut members,
            &e.metric_namespace,
            pod_ns,
            &outcomes,
            now,
        );
        docs = sink::cloudwatch::emf::per_peer(&e.metric_namespace, pod_ns, &outcomes, now);
    }
    // The summary is the very last record: the per-peer metric records come before it.
    docs.push(members);
    let mut encoder = Encoder::new(enrichment.clone(), "hooklog");
    let mut batch = Batch::new();
    for doc in docs {
        let line = serde_json::Value::Object(doc).to_string();
        let frame = Frame {
            bytes: line.as_bytes(),
            continued: false,
            end: FrameEnd::Newline,
        };
        // The summary carries no hook event of its own.
        let _ = encoder.encode(frame, now, &mut batch);
    }
    batch
}

fn save_checkpoints(checkpoints: &[Arc<Checkpoint>]) {
    for cp in checkpoints {
        cp.save();
    }
}
