//! (the sidecar) `hooklog run`: wires sources, fan-out and sinks together, and runs the shutdown
//! phases ([`run`] reads as their list).
//!
//! 1. The signal arrives: keep reading.
//! 2. Wait until every peer's hook is done (expected peers get `--announce-timeout` to show up),
//!    then for a quiet period of `--linger`; a hook that starts meanwhile is waited for too.
//! 3. Stop the sources: each reads what its input already holds, then drops its sender.
//! 4. Emit the `hooks.summary` record; the sinks see their queues close, flush, and end.
//!
//! All of it runs under one timeout of `--grace` from the signal: hooklog never outlives it.
//! Shortly before it (the cut, [`CUT_RESERVE`]) whatever is still being read or queued is
//! dropped and counted, and the summary goes out: it is written in every run that is not
//! SIGKILLed, always last, and stdout ends on a whole record.
//!
//! As a native sidecar (`--native-sidecar`) the kubelet signals hooklog only once the main
//! containers are gone, possibly with its 2-second minimum window left: phase 2 is skipped and
//! everything runs under [`NATIVE_WINDOW`] at most.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::batch::Batch;
use crate::checkpoint::Checkpoint;
use crate::config::RunConfig;
use crate::events::Notices;
use crate::framing::{Frame, FrameEnd};
use crate::lifecycle::peers::{Peers, summary_members};
use crate::record::{Encoder, Enrichment};
use crate::sink::{self, Counters};
use crate::source::file::{FileSource, StopHandle};
use crate::source::{Activity, SourceContext, socket, socket_guard};

/// How often pending hooks are logged while waiting.
const REPORT_EVERY: Duration = Duration::from_secs(5);

/// Time kept back from `--grace` for stopping sources and flushing sinks.
const FLUSH_RESERVE: Duration = Duration::from_secs(2);

/// Time kept back from `--grace` for the summary: at the cut, reading and delivering stop and the
/// summary is written (a stdout reader at 3 MB/s takes 0.2 s for the sink's whole queue).
const CUT_RESERVE: Duration = Duration::from_secs(1);

/// The kubelet's minimum grace for a sidecar it stops after the main containers: a native
/// sidecar may get its SIGTERM with no more than this left before SIGKILL
/// (<https://kubernetes.io/docs/concepts/workloads/pods/sidecar-containers/>).
const NATIVE_WINDOW: Duration = Duration::from_secs(2);

/// The quiet period is waited for at most this many times `--linger`: a peer that never stops
/// writing must not hold the pod until the grace deadline.
const LINGER_CAP_FACTOR: u32 = 4;

/// The Downward API lines that give hooklog the pod's names, for the warning when none is set.
const DOWNWARD_API_HINT: &str = "env: [{name: POD_NAME, valueFrom: {fieldRef: {fieldPath: metadata.name}}}, {name: POD_NAMESPACE, valueFrom: {fieldRef: {fieldPath: metadata.namespace}}}, {name: POD_UID, valueFrom: {fieldRef: {fieldPath: metadata.uid}}}, {name: POD_IP, valueFrom: {fieldRef: {fieldPath: status.podIP}}}, {name: NODE_NAME, valueFrom: {fieldRef: {fieldPath: spec.nodeName}}}]";

/// Warns once when the records will carry `"kubernetes":{}`: no `POD_*`/`NODE_NAME` variable
/// and no podinfo labels or annotations (`hooklog inject` sets them; a hand-written sidecar may
/// not).
fn warn_if_no_pod_metadata(pod: &crate::pod::PodMeta) {
    let none = [
        &pod.pod_name,
        &pod.namespace_name,
        &pod.pod_id,
        &pod.pod_ip,
        &pod.host,
    ]
    .iter()
    .all(|v| v.is_none())
        && pod.labels.is_empty()
        && pod.annotations.is_empty();
    if none {
        tracing::warn!(
            add = DOWNWARD_API_HINT,
            "no pod metadata: records carry an empty kubernetes object; add the downward api variables to hooklog's container"
        );
    }
}

/// Runs the daemon until `shutdown` resolves and the shutdown phases end: phase 1 until the
/// signal, 2 [`wait_for_peers`], 3 [`Input::stop`], 4 [`Output::summary_then_drain`], all
/// [`within_grace`].
pub async fn run(
    mut cfg: RunConfig,
    shutdown: impl Future<Output = &'static str>,
) -> anyhow::Result<()> {
    warn_if_no_pod_metadata(&cfg.pod);
    let shared = Shared::new(&cfg);
    let output = Output::start(&cfg, &shared);
    let sockets = std::mem::take(&mut cfg.sockets);
    let input = Input::start(&cfg, sockets, &shared, &output.tx)?;
    // Checkpoints are written as batches are delivered (no timer here to wake an idle daemon);
    // a write that failed is tried again at the end.
    tracing::info!(files = cfg.files.len(), peers = ?cfg.peers, "hooklog ready");
    // Phase 1: run until the signal.
    let (signal, output) = output.until_signal(shutdown).await?;
    let times = Deadlines::from_signal(&cfg, &shared.activity);
    say_shutdown(&cfg, &shared.peers, &times, signal);
    let cut_timer = output.arm(&times);
    let notices = output.notices.clone();
    let phases = async {
        // Phase 2: the peers' hooks, then a quiet period.
        wait_for_peers(&cfg, &shared, &times).await;
        // Phase 3: the sources read what they hold and stop.
        input.stop(&output.cut).await;
        // Phase 4: the summary, always last; then the sinks drain.
        output.summary_then_drain(&shared, emf_settings(&cfg)).await
    };
    let result = within_grace(&times, phases).await;
    cut_timer.abort();
    // The summary is out: the termination message, and the Events still being posted. A call
    // in flight ends at the grace deadline's reserve (events::EXIT_RESERVE) at the latest.
    notices.finish(times.deadline).await;
    save_checkpoints(&input.checkpoints);
    say_stopped(&shared.counters, &times);
    result
}

/// What the sources, the fan-out and the summary share.
struct Shared {
    /// The pod's metadata, for every record.
    enrichment: Arc<Enrichment>,
    /// The peers' hooks, as the records tell them: what phase 2 waits for and the summary says.
    peers: Arc<Peers>,
    /// When input last arrived: the quiet period of phase 2.
    activity: Arc<Activity>,
    /// Records in and out, for the last log line.
    counters: Arc<Counters>,
}

impl Shared {
    fn new(cfg: &RunConfig) -> Shared {
        Shared {
            enrichment: Arc::new(Enrichment::new(&cfg.pod, cfg.max_line_bytes)),
            peers: Arc::new(Peers::new(&cfg.peers)),
            activity: Arc::default(),
            counters: Arc::default(),
        }
    }
}

/// The sinks behind the fan-out, and what phase 4 ends them with.
struct Output {
    /// The sources' end of the bounded channel (each source holds a clone); dropped in phase 4.
    tx: mpsc::Sender<Batch>,
    /// The stdout and CloudWatch sinks.
    sinks: JoinSet<anyhow::Result<()>>,
    /// The fan-out from the channel to each sink's queue.
    fan_out: tokio::task::JoinHandle<()>,
    /// How the fan-out gets the summary, once the sources are done.
    summary_tx: oneshot::Sender<sink::SummaryFn>,
    /// The cut: reading and delivering stop, the summary goes out.
    cut: CancellationToken,
    /// The grace deadline, for the CloudWatch sink's last retries.
    deadline_tx: watch::Sender<Option<Instant>>,
    /// `--events` and the termination message: told of each batch, and of the summary.
    notices: Arc<Notices>,
}

impl Output {
    /// Starts the sinks `cfg` names and the fan-out to them.
    fn start(cfg: &RunConfig, shared: &Shared) -> Output {
        let (tx, rx) = mpsc::channel::<Batch>(sink::SOURCE_QUEUE_BATCHES);
        let (deadline_tx, deadline_rx) = watch::channel::<Option<Instant>>(None);
        let notices = Arc::new(Notices::start(
            cfg.events.as_ref(),
            cfg.termination.clone(),
            &cfg.pod,
            shared.peers.clone(),
            deadline_rx.clone(),
        ));
        let mut sinks: JoinSet<anyhow::Result<()>> = JoinSet::new();
        let mut sink_queues = Vec::new();
        let cut = CancellationToken::new();
        if cfg.stdout {
            let (stx, srx) = mpsc::channel(sink::SINK_QUEUE_BATCHES);
            let progress = Arc::new(sink::Progress::default());
            sink_queues.push(sink::SinkQueue {
                tx: stx,
                progress: Some(progress.clone()),
            });
            let (counters, cut) = (shared.counters.clone(), cut.clone());
            sinks.spawn_blocking(move || {
                sink::stdout::run(srx, counters, cut, progress).context("stdout sink")
            });
        }
        if let Some(settings) = cfg.cloudwatch.clone() {
            let (ctx, crx) = mpsc::channel(sink::SINK_QUEUE_BATCHES);
            sink_queues.push(sink::SinkQueue {
                tx: ctx,
                progress: None,
            });
            let ctx = sink::cloudwatch::SinkContext {
                rx: crx,
                settings,
                counters: shared.counters.clone(),
                deadline: deadline_rx,
                stdout_sink: cfg.stdout,
            };
            sinks.spawn(async move { sink::cloudwatch::run(ctx).await.context("cloudwatch sink") });
        }
        let (summary_tx, summary_rx) = oneshot::channel::<sink::SummaryFn>();
        let fan_out = tokio::spawn(sink::fan_out(
            rx,
            sink_queues,
            shared.counters.clone(),
            summary_rx,
            cut.clone(),
            notices.tap(),
        ));
        Output {
            tx,
            sinks,
            fan_out,
            summary_tx,
            cut,
            deadline_tx,
            notices,
        }
    }

    /// Phase 1: runs until the signal, whose name it returns; a sink that ends first is the
    /// daemon's error.
    async fn until_signal(
        mut self,
        shutdown: impl Future<Output = &'static str>,
    ) -> anyhow::Result<(&'static str, Output)> {
        tokio::select! {
            s = shutdown => Ok((s, self)),
            Some(res) = self.sinks.join_next() => Err(match res {
                Ok(Ok(())) => anyhow::anyhow!("a sink ended early"),
                Ok(Err(e)) => e,
                Err(e) => anyhow::Error::new(e).context("a sink panicked"),
            }),
        }
    }

    /// Tells the sinks the deadline, and starts the timer of the cut.
    fn arm(&self, times: &Deadlines) -> tokio::task::JoinHandle<()> {
        self.deadline_tx.send_replace(Some(times.deadline));
        let cut = self.cut.clone();
        let cut_at = times.cut_at;
        tokio::spawn(async move {
            tokio::time::sleep_until(cut_at).await;
            cut.cancel();
        })
    }

    /// Phase 4: the summary, always last; then the sinks drain. The first sink error is the
    /// daemon's.
    async fn summary_then_drain(
        mut self,
        shared: &Shared,
        emf: Option<EmfSettings>,
    ) -> anyhow::Result<()> {
        drop(self.tx);
        let summary_enrichment = shared.enrichment.clone();
        let summary_peers = shared.peers.clone();
        let cut_short = self.cut.clone();
        let summary_notices = self.notices.clone();
        let make: sink::SummaryFn = Box::new(move |dropped| {
            let shutdown = ShutdownReport {
                cut_short: cut_short.is_cancelled(),
                undelivered: dropped,
            };
            summary_batch(
                &summary_enrichment,
                &summary_peers,
                emf.as_ref(),
                shutdown,
                &summary_notices,
            )
        });
        let _ = self.summary_tx.send(make); // Fails only if the fan-out is gone, reported below.
        let _ = self.fan_out.await;
        let mut result = Ok(());
        while let Some(res) = self.sinks.join_next().await {
            match res {
                Ok(Ok(())) => {}
                Ok(Err(e)) => result = Err(e),
                Err(e) => result = Err(anyhow::Error::new(e).context("a sink panicked")),
            }
        }
        result
    }
}

/// The sources: the files' and sockets' tasks, and how phase 3 stops them.
struct Input {
    /// Cancels the socket listeners and their guard.
    cancel: CancellationToken,
    /// Every source task, to wait for in phase 3.
    sources: TaskTracker,
    /// Each file's checkpoint, saved once more at the end.
    checkpoints: Vec<Arc<Checkpoint>>,
    /// Stops each file source once it has read what its file holds.
    stops: Vec<StopHandle>,
}

impl Input {
    /// Starts a source per `--file` and `--socket` (and the sockets' guard), each sending into
    /// `tx`.
    fn start(
        cfg: &RunConfig,
        sockets: Vec<(PathBuf, std::os::unix::net::UnixListener)>,
        shared: &Shared,
        tx: &mpsc::Sender<Batch>,
    ) -> anyhow::Result<Input> {
        let ctx = SourceContext {
            enrichment: shared.enrichment.clone(),
            peers: shared.peers.clone(),
            once: Arc::default(),
            activity: shared.activity.clone(),
            tx: tx.clone(),
        };
        let cancel = CancellationToken::new();
        let sources = TaskTracker::new();
        let mut checkpoints = Vec::new();
        let mut stops = Vec::new();
        for path in &cfg.files {
            let cp = Arc::new(Checkpoint::for_input(path));
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
        let socket_paths: Vec<_> = sockets.iter().map(|(p, _)| p.clone()).collect();
        for (path, listener) in sockets {
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
        if !socket_paths.is_empty() {
            let guard = socket_guard::Guard {
                ctx: ctx.clone(),
                mode: cfg.socket_mode,
                max_connections: cfg.max_connections,
                cancel: cancel.clone(),
                tracker: sources.clone(),
            };
            sources.spawn(guard.run(socket_paths));
        }
        sources.close();
        Ok(Input {
            cancel,
            sources,
            checkpoints,
            stops,
        })
    }

    /// Phase 3: the sources read what they hold and stop, until the cut at the latest.
    async fn stop(&self, cut: &CancellationToken) {
        tracing::debug!("shutdown: stopping sources");
        self.cancel.cancel();
        for s in &self.stops {
            s.stop();
        }
        tokio::select! {
            _ = self.sources.wait() => {}
            _ = cut.cancelled() => tracing::warn!("grace deadline near: stopping sources with input unread"),
        }
    }
}

/// The shutdown's times, counted from the signal.
struct Deadlines {
    /// When the signal came.
    t0: Instant,
    /// `--grace`, or [`NATIVE_WINDOW`] at most for a native sidecar.
    grace: Duration,
    /// Everything is over by then: `t0 + grace`.
    deadline: Instant,
    /// Phase 2 gives up waiting for the peers then, leaving [`FLUSH_RESERVE`].
    stop_waiting: Instant,
    /// The cut, [`CUT_RESERVE`] before the deadline.
    cut_at: Instant,
}

impl Deadlines {
    /// The times from now, the signal's arrival.
    fn from_signal(cfg: &RunConfig, activity: &Activity) -> Deadlines {
        let t0 = Instant::now();
        // The quiet period starts at the signal at the earliest: a pod quiet for a while gets
        // its SIGTERM as the hooks start, and they need a moment to announce themselves.
        activity.touch();
        let grace = if cfg.native_sidecar {
            cfg.grace.min(NATIVE_WINDOW)
        } else {
            cfg.grace
        };
        let deadline = t0 + grace;
        Deadlines {
            t0,
            grace,
            deadline,
            stop_waiting: deadline - FLUSH_RESERVE.min(grace / 4),
            cut_at: deadline - CUT_RESERVE.min(grace / 8),
        }
    }
}

/// Logs the signal, and what the shutdown waits for.
fn say_shutdown(cfg: &RunConfig, peers: &Peers, times: &Deadlines, signal: &'static str) {
    let grace_ms = times.grace.as_millis() as u64;
    if !cfg.native_sidecar {
        tracing::info!(signal, grace_ms, "shutdown: waiting for peer hooks");
        return;
    }
    // The kubelet stops a native sidecar after the main containers, or at the pod's deadline
    // while they still run: say which the records show (issue 25.9: a hook that ignored
    // SIGTERM was still running when this line said the peers had stopped).
    let running = peers.pending(true);
    if running.is_empty() {
        tracing::info!(
            signal,
            grace_ms,
            "shutdown: native sidecar, no peer hook running: reading what is left, then the summary"
        );
    } else {
        tracing::warn!(
            signal,
            grace_ms,
            running = ?running,
            "shutdown: native sidecar, peer hooks still running (signalled at the pod's deadline?): reading what is left, then the summary"
        );
    }
}

/// Phase 2: the peers' hooks, then a quiet period. A native sidecar is signalled after its
/// peers are gone: their hooks are over.
async fn wait_for_peers(cfg: &RunConfig, shared: &Shared, times: &Deadlines) {
    if cfg.native_sidecar {
        return;
    }
    wait_for_hooks(
        &shared.peers,
        &shared.activity,
        times.t0 + cfg.announce_timeout,
        cfg.linger,
        times.stop_waiting,
    )
    .await;
}

/// Runs the phases under one timeout of the grace; at the deadline, records still queued are
/// left behind.
async fn within_grace(
    times: &Deadlines,
    phases: impl Future<Output = anyhow::Result<()>>,
) -> anyhow::Result<()> {
    match tokio::time::timeout_at(times.deadline, phases).await {
        Ok(r) => r,
        Err(_) => {
            tracing::warn!(
                grace_ms = times.grace.as_millis() as u64,
                "grace deadline reached: exiting with records still queued"
            );
            Ok(())
        }
    }
}

/// The last log line: what went where.
fn say_stopped(counters: &Counters, times: &Deadlines) {
    tracing::info!(
        records_in = Counters::get(&counters.records_in),
        stdout = Counters::get(&counters.stdout_records),
        cloudwatch_shipped = Counters::get(&counters.cloudwatch_shipped),
        cloudwatch_retried = Counters::get(&counters.cloudwatch_retried),
        cloudwatch_fell_back = Counters::get(&counters.cloudwatch_fell_back),
        elapsed_ms = times.t0.elapsed().as_millis() as u64,
        "hooklog stopped"
    );
}

/// `--emf`'s settings, when it is on.
fn emf_settings(cfg: &RunConfig) -> Option<EmfSettings> {
    cfg.emf_namespace
        .clone()
        .map(|metric_namespace| EmfSettings {
            metric_namespace,
            pod_namespace: cfg.pod.namespace_name.clone(),
        })
}

/// Phase 2: waits until every peer's hook is done (expected peers get `--announce-timeout` to
/// show up), then for a quiet period of `--linger` (at most [`LINGER_CAP_FACTOR`] times), and
/// again if a hook started meanwhile; gives up at `stop_waiting`.
async fn wait_for_hooks(
    peers: &Peers,
    activity: &Activity,
    announce_by: Instant,
    linger: Duration,
    stop_waiting: Instant,
) {
    loop {
        peers
            .wait_done(announce_by, stop_waiting, REPORT_EVERY, || {
                activity.behind()
            })
            .await;
        let cap = (Instant::now() + linger * LINGER_CAP_FACTOR).min(stop_waiting);
        loop {
            let quiet = activity.quiet_for();
            let now = Instant::now();
            if quiet >= linger || now >= cap {
                break;
            }
            tokio::time::sleep_until((now + (linger - quiet)).min(cap)).await;
        }
        let announce_over = Instant::now() >= announce_by && !activity.behind();
        if peers.pending(announce_over).is_empty() || Instant::now() >= stop_waiting {
            return;
        }
    }
}

/// `--emf`: the metric namespace and the pod's namespace (a dimension).
struct EmfSettings {
    /// CloudWatch metric namespace.
    metric_namespace: String,
    /// `POD_NAMESPACE`, the `namespace` dimension.
    pod_namespace: Option<String>,
}

/// How the shutdown went, for the summary.
#[derive(Debug, Clone, Copy)]
struct ShutdownReport {
    /// The cut came: input may have been left unread, and `undelivered` records were dropped.
    cut_short: bool,
    /// Records read but not delivered.
    undelivered: u64,
}

/// The `hooks.summary` record as a batch of its own; with `--emf` it carries the pod's totals
/// as metrics and is preceded by one `hooks.metrics` record per peer. The summary is always one
/// whole record within `--max-line-bytes`: when listing every peer would pass it, fewer are
/// listed (those not ok first) and `peers_omitted` says how many were left out; its counts
/// always cover every peer.
fn summary_batch(
    enrichment: &Arc<Enrichment>,
    peers: &Peers,
    emf: Option<&EmfSettings>,
    shutdown: ShutdownReport,
    notices: &Notices,
) -> Batch {
    let outcomes = peers.outcomes();
    let now = crate::timefmt::now_ms();
    notices.at_summary(&outcomes);
    let events = notices.summary_member();
    let members = |list_at_most: usize| {
        let mut members =
            summary_members(&outcomes, list_at_most, peers.dropped(), peers.unpaired());
        if shutdown.cut_short {
            // The outcomes are as far as hooklog read: a hook's last records may be among what
            // the cut left unread.
            members.insert("cut_short".into(), serde_json::Value::Bool(true));
            members.insert("undelivered".into(), shutdown.undelivered.into());
            if let Some(serde_json::Value::String(m)) = members.get_mut("message") {
                m.push_str(&format!(
                    "; shutdown cut short at the grace deadline, {} records not delivered",
                    shutdown.undelivered
                ));
            }
        }
        if let Some(counts) = &events {
            members.insert("events".into(), counts.clone());
        }
        if let Some(e) = emf {
            sink::cloudwatch::emf::add_to_summary(
                &mut members,
                &e.metric_namespace,
                e.pod_namespace.as_deref(),
                &outcomes,
                now,
            );
        }
        members
    };
    // Halve the peers listed until the record fits (at most log2(peers) tries: the peers are
    // bounded, `lifecycle::peers::MAX_LEARNED_PEERS`).
    let mut list_at_most = outcomes.len();
    let mut doc = members(list_at_most);
    while list_at_most > 0 && encode_own(enrichment, doc.clone(), now).len() > 1 {
        list_at_most /= 2;
        doc = members(list_at_most);
    }
    if encode_own(enrichment, doc.clone(), now).len() > 1 {
        tracing::warn!(
            max_line_bytes = enrichment.max_line(),
            "the pod's metadata alone passes --max-line-bytes: the summary comes out split"
        );
    }
    tracing::info!(summary = %doc["message"].as_str().unwrap_or_default(), "hooks summary");
    notices.set_summary(doc["message"].as_str().unwrap_or_default());
    let mut batch = Batch::new();
    if let Some(e) = emf {
        let docs = sink::cloudwatch::emf::per_peer(
            &e.metric_namespace,
            e.pod_namespace.as_deref(),
            &outcomes,
            now,
        );
        for d in docs {
            append_own(enrichment, d, now, &mut batch);
        }
    }
    // The summary is the very last record: the per-peer metric records come before it.
    append_own(enrichment, doc, now, &mut batch);
    batch.summary = true;
    batch
}

/// One of hooklog's own records, encoded alone.
fn encode_own(
    enrichment: &Arc<Enrichment>,
    doc: serde_json::Map<String, serde_json::Value>,
    now: i64,
) -> Batch {
    let mut batch = Batch::new();
    append_own(enrichment, doc, now, &mut batch);
    batch
}

/// Appends one of hooklog's own records to `batch`.
fn append_own(
    enrichment: &Arc<Enrichment>,
    doc: serde_json::Map<String, serde_json::Value>,
    now: i64,
    batch: &mut Batch,
) {
    let line = serde_json::Value::Object(doc).to_string();
    let frame = Frame {
        bytes: line.as_bytes(),
        continued: false,
        end: FrameEnd::Newline,
    };
    // hooklog's own records carry no hook event.
    let _ = Encoder::own(enrichment.clone()).encode(frame, now, batch);
}

fn save_checkpoints(checkpoints: &[Arc<Checkpoint>]) {
    for cp in checkpoints {
        cp.save();
    }
}
