//! (the sidecar) Where Kubernetes users look first (`hooklog run --events`, `--termination-message-path`):
//! a Warning Event on the pod for each preStop hook that does not end ok, posted as the outcome
//! is known, and the summary's line as the sidecar's termination message ([`termination`]).
//!
//! Never at the hooks' expense. The records reach the [`Notices`] through a tap of the
//! fan-out that never waits (a batch that finds the tap full is not looked at: its output lines
//! are missing from a note, and an outcome it carried is posted at the summary); a hook's end is
//! taken from a `hook.finished` record only when the peers paired it with its run's start
//! ([`Peers::finish_of`]), so a forged finish posts nothing. Calls ([`api`]) are made one at a
//! time by a task of their own, each by a deadline inside the grace period ([`CALL_TIMEOUT`],
//! [`EXIT_RESERVE`]). A call that fails for want of an answer (a refused or reset connection,
//! no answer in time, a 429 or a 5xx) is tried again as client-go's event broadcaster tries it
//! ([`retry`]), while the grace period leaves time; an answer every later call would get too
//! (401, 403, 404) is warned once and ends the calls; any other gives up that Event alone. The
//! Events given up are counted as not posted. Each container has its own share of Events
//! ([`budget`]), and the expected containers' are posted first, so names a peer makes up cost
//! the others nothing. The summary counts the Events as of its writing and is never waited
//! for them; at exit hooklog waits for calls in flight only until the grace deadline's reserve.
//!
//! Repeated outcomes of a container (its hook failing on every run) become one Event's series
//! (events.k8s.io/v1 `series.count`), not a flood. The Event's `deprecatedCount`,
//! `deprecatedFirstTimestamp` and `deprecatedLastTimestamp` stay unset: the API server refuses
//! an events.k8s.io/v1 create that sets them ("needs to be unset",
//! k8s.io/kubernetes `pkg/apis/core/validation/events.go`, `ValidateEventCreate`), and keeps
//! them immutable on update; core/v1 readers see the series' count in `series.count`.

pub mod api;
pub mod budget;
pub mod note;
pub mod retry;
pub mod termination;

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hyper::Method;
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::batch::Batch;
use crate::lifecycle::peers::{PeerOutcome, Peers};
use crate::pod::PodMeta;
use crate::protocol::{self, Event};
use budget::{Budget, Lane};
use note::Tail;
use termination::TerminationMessage;

/// `reportingController` of hooklog's Events (a qualified name, as the API server requires).
pub const REPORTING_CONTROLLER: &str = "hooklog.dev/sidecar";

/// `action` of hooklog's Events: what failed.
pub const ACTION: &str = "PreStopHook";

/// Longest `reportingInstance` (the pod's name): `ReportingInstanceLengthLimit` in
/// k8s.io/kubernetes/pkg/apis/core/validation/events.go.
const REPORTING_INSTANCE_MAX: usize = 128;

/// Longest object name: a DNS subdomain (RFC 1123), 253 characters.
const NAME_MAX: usize = 253;

/// One call's deadline: the API server's latency objective for a mutating call on one object
/// is a p99 of 1 s (Kubernetes SIG Scalability, `api_call_latency.md`); twice that, and an
/// Event is worth no more of a pod's grace period.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(2);

/// After the signal, every call ends this long before the grace deadline, so hooklog's exit
/// (the summary is already out) is never pushed past it.
pub const EXIT_RESERVE: Duration = Duration::from_millis(250);

/// Batches the tap holds before it drops one (a batch is at most 64 KiB: 2 MiB held at most).
const TAP_BATCHES: usize = 32;

/// Containers whose output is kept: past [`crate::lifecycle::peers::MAX_LEARNED_PEERS`] and
/// the expected ones a peer is ignored anyway; any container may write any `container_name`.
const MAX_TAILS: usize = 128;

/// After the signal, a try is not started with less than this left before the grace deadline's
/// reserve: a TLS handshake and a call on a loaded node take some tens of milliseconds.
const MIN_TRY: Duration = Duration::from_millis(200);

/// `--events` settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventSettings {
    /// The service account mount: `ca.crt`, `token` and `namespace`.
    pub serviceaccount_dir: PathBuf,
}

/// The pod the Events are about.
#[derive(Debug, Clone)]
struct PodRef {
    /// `POD_NAME`.
    name: String,
    /// `POD_NAMESPACE`, else the mount's `namespace`.
    namespace: String,
    /// `POD_UID`: `kubectl describe pod` selects the pod's Events by it.
    uid: Option<String>,
}

/// One Event to post.
#[derive(Debug, Clone)]
struct Post {
    /// The container whose hook it is.
    container: String,
    /// From [`note::reason`].
    reason: &'static str,
    /// The bounded note.
    note: String,
}

/// Counts of the run, for the summary.
#[derive(Debug, Default)]
struct Stats {
    /// Events created or series updated.
    posted: AtomicU64,
    /// Events given up on: a failed call, the calls ended, or past the container's share.
    not_posted: AtomicU64,
    /// Events queued and not yet done.
    pending: AtomicU64,
    /// Set by a 401, 403 or 404: no more calls.
    stopped: AtomicBool,
    /// Why the calls ended, or the first Event was given up, for the summary.
    error: Mutex<Option<String>>,
}

/// What the tap and the summary share.
#[derive(Debug, Default)]
struct Shared {
    /// Counts.
    stats: Stats,
    /// The outcomes posted (or queued) per container, so the summary's pass posts only the
    /// others.
    reported: Mutex<BTreeSet<(String, &'static str)>>,
}

impl Shared {
    fn reported(&self) -> std::sync::MutexGuard<'_, BTreeSet<(String, &'static str)>> {
        self.reported.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The Events reporter of one run.
struct Reporter {
    /// Into the tap (the fan-out's copy of every batch).
    tap: mpsc::Sender<Arc<Batch>>,
    /// The summary's outcomes, for the Events of hooks that never ended ok by then.
    at_summary: Mutex<Option<oneshot::Sender<AtSummary>>>,
    /// Counts and what was reported.
    shared: Arc<Shared>,
    /// The task making the calls; ends once the summary's Events are done.
    calls: Mutex<Option<JoinHandle<()>>>,
}

/// What the sidecar reports beside its records: Events, and the termination message.
pub struct Notices {
    /// `--events`.
    events: Option<Reporter>,
    /// `--termination-message-path`.
    termination: Option<TerminationMessage>,
    /// The summary's line, once it is written.
    summary: Mutex<Option<String>>,
}

impl Notices {
    /// Starts the Events reporter when `events` is set. `deadline` is the grace deadline once
    /// the signal came.
    pub fn start(
        events: Option<&EventSettings>,
        termination: Option<TerminationMessage>,
        pod: &PodMeta,
        peers: Arc<Peers>,
        deadline: watch::Receiver<Option<Instant>>,
    ) -> Notices {
        let events = events.map(|s| Reporter::start(s, pod, peers, deadline));
        Notices {
            events,
            termination,
            summary: Mutex::new(None),
        }
    }

    /// The tap the fan-out offers every batch to, without waiting.
    pub fn tap(&self) -> Option<mpsc::Sender<Arc<Batch>>> {
        self.events.as_ref().map(|r| r.tap.clone())
    }

    /// At the summary: the Events of hooks not ok that no `hook.finished` reported (missing,
    /// unfinished, or read past a full tap) are queued. Never waits.
    pub fn at_summary(&self, outcomes: &BTreeMap<String, PeerOutcome>) {
        if let Some(r) = &self.events {
            let taken = r
                .at_summary
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .take();
            if let Some(tx) = taken {
                let reported = r.shared.reported();
                let left = outcomes
                    .iter()
                    .filter(|(c, o)| {
                        note::reason(&o.outcome)
                            .is_some_and(|why| !reported.contains(&((*c).clone(), why)))
                    })
                    .count();
                drop(reported);
                r.shared
                    .stats
                    .pending
                    .fetch_add(left as u64, Ordering::Relaxed);
                // The task is gone only after a panic.
                let _ = tx.send(AtSummary {
                    outcomes: outcomes.clone(),
                    counted: left as u64,
                });
            }
        }
    }

    /// The summary's `events` member, as of now.
    pub fn summary_member(&self) -> Option<Value> {
        let r = self.events.as_ref()?;
        let s = &r.shared.stats;
        let not_posted = s.not_posted.load(Ordering::Relaxed);
        let mut m = json!({
            "posted": s.posted.load(Ordering::Relaxed),
            "not_posted": not_posted,
            "pending": s.pending.load(Ordering::Relaxed),
        });
        if let Some(e) = s.error.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
            m["error"] = json!(e);
        }
        Some(m)
    }

    /// Keeps the summary's line for the termination message.
    pub fn set_summary(&self, message: &str) {
        *self.summary.lock().unwrap_or_else(|e| e.into_inner()) = Some(message.to_string());
    }

    /// At exit, once the summary is out: writes the termination message, then waits for the
    /// Events still being posted until `until` at most (the grace deadline: each call ends
    /// [`EXIT_RESERVE`] before it).
    pub async fn finish(&self, until: Instant) {
        let summary = self
            .summary
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let (Some(t), Some(line)) = (&self.termination, summary) {
            t.write(&line);
        }
        let Some(r) = &self.events else { return };
        // The summary's pass may never come (a run cut at the deadline): this ends the tap's
        // task, and with it the calls' once they are done.
        r.at_summary
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        let calls = r.calls.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(mut calls) = calls
            && tokio::time::timeout_at(until, &mut calls).await.is_err()
        {
            calls.abort();
        }
        let s = &r.shared.stats;
        let pending = s.pending.swap(0, Ordering::Relaxed);
        s.not_posted.fetch_add(pending, Ordering::Relaxed);
        tracing::info!(
            posted = s.posted.load(Ordering::Relaxed),
            not_posted = s.not_posted.load(Ordering::Relaxed),
            "events"
        );
    }
}

impl Reporter {
    fn start(
        settings: &EventSettings,
        pod: &PodMeta,
        peers: Arc<Peers>,
        deadline: watch::Receiver<Option<Instant>>,
    ) -> Reporter {
        let (tap, tap_rx) = mpsc::channel(TAP_BATCHES);
        let (summary_tx, summary_rx) = oneshot::channel();
        let budget = Budget::new(peers.expected_names());
        // As long as the shares: an Event the budget lets through always finds room.
        let (expected_tx, expected_rx) = mpsc::channel(budget.expected_capacity().max(1));
        let (others_tx, others_rx) = mpsc::channel(budget.other_capacity().max(1));
        let shared = Arc::new(Shared::default());
        let target = Target::new(settings, pod);
        if let Err(why) = &target {
            tracing::warn!(error = %why, "--events: no event will be posted");
        }
        tokio::spawn(watch_records(
            tap_rx,
            summary_rx,
            peers,
            Queues {
                budget: Mutex::new(budget),
                expected: expected_tx,
                others: others_tx,
            },
            shared.clone(),
        ));
        let calls = tokio::spawn(make_calls(
            [expected_rx, others_rx],
            target,
            deadline,
            shared.clone(),
        ));
        Reporter {
            tap,
            at_summary: Mutex::new(Some(summary_tx)),
            shared,
            calls: Mutex::new(Some(calls)),
        }
    }
}

/// Where Events go: the client and the pod.
struct Target {
    client: api::Client,
    pod: PodRef,
}

impl Target {
    fn new(settings: &EventSettings, pod: &PodMeta) -> Result<Target, String> {
        let client =
            api::Client::in_cluster(|k| std::env::var(k).ok(), &settings.serviceaccount_dir)
                .map_err(|e| format!("{e:#}"))?;
        let name = pod
            .pod_name
            .clone()
            .ok_or("POD_NAME is not set (the Downward API's metadata.name)")?;
        let namespace = match &pod.namespace_name {
            Some(ns) => ns.clone(),
            None => read_namespace(&settings.serviceaccount_dir)
                .ok_or("POD_NAMESPACE is not set and the service account mount has no namespace")?,
        };
        Ok(Target {
            client,
            pod: PodRef {
                name,
                namespace,
                uid: pod.pod_id.clone(),
            },
        })
    }
}

/// The mount's `namespace` file, trimmed.
fn read_namespace(dir: &Path) -> Option<String> {
    let ns = std::fs::read_to_string(dir.join("namespace")).ok()?;
    let ns = ns.trim();
    (!ns.is_empty()).then(|| ns.to_string())
}

/// The summary's outcomes, and how many Events it counted as pending for them.
struct AtSummary {
    outcomes: BTreeMap<String, PeerOutcome>,
    counted: u64,
}

/// The members of a record the tap reads.
#[derive(serde::Deserialize)]
struct Seen<'a> {
    #[serde(borrow, default)]
    event: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    container_name: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    hook: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    run_id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    message: Option<Cow<'a, str>>,
    #[serde(default)]
    signal: Option<Value>,
    #[serde(default)]
    hooklog: Option<SeenHooklog<'a>>,
}

/// A record's `hooklog` member: its `input` is `hooklog` for hooklog's own records.
#[derive(serde::Deserialize)]
struct SeenHooklog<'a> {
    #[serde(borrow, default)]
    input: Option<Cow<'a, str>>,
}

/// Where the tap's task queues Events: each container's share, and a queue per [`Lane`].
struct Queues {
    /// The shares left (the tap's task alone spends them).
    budget: Mutex<Budget>,
    /// The expected containers' Events, posted first.
    expected: mpsc::Sender<Post>,
    /// The other containers'.
    others: mpsc::Sender<Post>,
}

/// The tap's task: keeps each container's output tail, queues an Event for each paired
/// `hook.finished` not ok, and at the summary the Events of the rest.
async fn watch_records(
    mut tap: mpsc::Receiver<Arc<Batch>>,
    mut at_summary: oneshot::Receiver<AtSummary>,
    peers: Arc<Peers>,
    queues: Queues,
    shared: Arc<Shared>,
) {
    let mut tails: HashMap<String, Tail> = HashMap::new();
    let queue = |post: Post| {
        shared
            .reported()
            .insert((post.container.clone(), post.reason));
        let lane = queues
            .budget
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take(&post.container);
        // Pending before it is sent: the calls' task counts it down as it takes it.
        shared.stats.pending.fetch_add(1, Ordering::Relaxed);
        let sent = match lane {
            Some(Lane::Expected) => queues.expected.try_send(post).is_ok(),
            Some(Lane::Other) => queues.others.try_send(post).is_ok(),
            None => false,
        };
        if !sent {
            shared.stats.pending.fetch_sub(1, Ordering::Relaxed);
            shared.stats.not_posted.fetch_add(1, Ordering::Relaxed);
        }
    };
    let at = loop {
        tokio::select! {
            biased;
            b = tap.recv() => match b {
                Some(b) => look_at(&b, &mut tails, &peers, &queue),
                None => match (&mut at_summary).await {
                    Ok(o) => break o,
                    Err(_) => return,
                },
            },
            o = &mut at_summary => match o {
                Ok(o) => {
                    // What the fan-out handed over before the summary comes first.
                    while let Ok(b) = tap.try_recv() {
                        look_at(&b, &mut tails, &peers, &queue);
                    }
                    break o;
                }
                Err(_) => return,
            },
        }
    };
    // The summary counted these as pending: they are counted again as they are queued.
    shared
        .stats
        .pending
        .fetch_sub(at.counted, Ordering::Relaxed);
    for (container, o) in &at.outcomes {
        let Some(reason) = note::reason(&o.outcome) else {
            continue;
        };
        if shared.reported().contains(&(container.clone(), reason)) {
            continue;
        }
        let head = summary_head(container, o);
        let tail = tails.get(container).cloned().unwrap_or_default();
        queue(Post {
            container: container.clone(),
            reason,
            note: note::note(&head, &tail),
        });
    }
}

/// The first line of the Event for a hook the summary found not ok and no Event said yet.
fn summary_head(container: &str, o: &PeerOutcome) -> String {
    match o.outcome.as_str() {
        "missing" => format!(
            "container {container}: no preStop hook reported (missing: named by --peers, never heard from)"
        ),
        "unfinished" => format!(
            "container {container}: preStop hook still running after {} ms when hooklog stopped (unfinished)",
            o.duration_ms.unwrap_or(0)
        ),
        other => format!(
            "container {container}: preStop hook {other}{}{}",
            o.exit_code
                .map(|c| format!(", exit status {c}"))
                .unwrap_or_default(),
            o.duration_ms
                .map(|d| format!(" after {d} ms"))
                .unwrap_or_default()
        ),
    }
}

/// Reads one batch: output lines into the tails, a paired finish not ok into an Event.
fn look_at(batch: &Batch, tails: &mut HashMap<String, Tail>, peers: &Peers, queue: &impl Fn(Post)) {
    for (record, _) in batch.iter() {
        // Most records stop here: a wrapper's records all carry `"hook.…"` as their event.
        if memchr::memmem::find(record, protocol::HOOK_PREFIX.as_bytes()).is_none() {
            continue;
        }
        let Ok(seen) = serde_json::from_slice::<Seen<'_>>(record) else {
            continue;
        };
        if seen
            .hooklog
            .as_ref()
            .and_then(|h| h.input.as_deref())
            .is_some_and(|i| i == "hooklog")
        {
            continue;
        }
        let (Some(event), Some(container)) = (seen.event.as_deref(), seen.container_name) else {
            continue;
        };
        if seen
            .hook
            .as_deref()
            .is_some_and(|h| !h.eq_ignore_ascii_case("preStop"))
        {
            continue;
        }
        match Event::parse(event) {
            Some(Event::Output) => {
                if !tails.contains_key(container.as_ref()) && tails.len() >= MAX_TAILS {
                    continue;
                }
                tails
                    .entry(container.into_owned())
                    .or_default()
                    .push(seen.message.as_deref().unwrap_or_default());
            }
            Some(Event::Started) => {
                if let Some(t) = tails.get_mut(container.as_ref()) {
                    t.clear();
                }
            }
            Some(Event::Finished) => {
                let Some(o) = peers.finish_of(&container, seen.run_id.as_deref()) else {
                    continue; // It ended no run.
                };
                let Some(reason) = note::reason(&o.outcome) else {
                    continue;
                };
                let mut head = format!(
                    "container {container}: {}",
                    seen.message
                        .as_deref()
                        .map(Cow::Borrowed)
                        .unwrap_or_else(|| Cow::Owned(format!("preStop hook {}", o.outcome)))
                );
                match (o.exit_code, seen.signal.as_ref().and_then(Value::as_str)) {
                    (_, Some(sig)) => head.push_str(&format!(" (signal {sig})")),
                    (Some(code), None) => head.push_str(&format!(" (exit status {code})")),
                    (None, None) => {}
                }
                let tail = tails.get(container.as_ref()).cloned().unwrap_or_default();
                queue(Post {
                    container: container.into_owned(),
                    reason,
                    note: note::note(&head, &tail),
                });
            }
            _ => {}
        }
    }
}

/// The calls' task: posts each Event in turn, the expected containers' first, a repeated one as
/// its series, each tried again while [`retry`] says so and the grace leaves time, until an
/// answer ends the calls.
async fn make_calls(
    [mut expected, mut others]: [mpsc::Receiver<Post>; 2],
    target: Result<Target, String>,
    mut deadline: watch::Receiver<Option<Instant>>,
    shared: Arc<Shared>,
) {
    let stats = &shared.stats;
    if let Err(why) = &target {
        // Warned at the start: every Event is counted as not posted, without a call.
        stats.stopped.store(true, Ordering::Relaxed);
        *stats.error.lock().unwrap_or_else(|e| e.into_inner()) = Some(why.clone());
    }
    let mut series = Series::default();
    let mut seq = 0u64;
    let mut warned = false;
    loop {
        let post = tokio::select! {
            biased;
            Some(p) = expected.recv() => p,
            Some(p) = others.recv() => p,
            else => break,
        };
        let result = match &target {
            _ if stats.stopped.load(Ordering::Relaxed) => Err(None),
            Err(_) => Err(None),
            Ok(t) => post_with_retries(t, &post, &mut series, &mut seq, &mut deadline)
                .await
                .map_err(Some),
        };
        // Pending until done: one aborted at exit is counted as not posted.
        stats.pending.fetch_sub(1, Ordering::Relaxed);
        match result {
            Ok(()) => {
                stats.posted.fetch_add(1, Ordering::Relaxed);
            }
            Err(failure) => {
                stats.not_posted.fetch_add(1, Ordering::Relaxed);
                let Some(failure) = failure else { continue };
                if failure.stop {
                    stats.stopped.store(true, Ordering::Relaxed);
                }
                if !warned {
                    warned = true;
                    tracing::warn!(
                        error = %failure.why,
                        container = %post.container,
                        reason = post.reason,
                        "{}",
                        if failure.stop {
                            "event not posted: no more events this run (counted in the summary)"
                        } else {
                            "event not posted (counted in the summary; no more warnings)"
                        }
                    );
                    *stats.error.lock().unwrap_or_else(|e| e.into_inner()) = Some(failure.why);
                } else if failure.stop {
                    tracing::warn!(error = %failure.why, "event not posted: no more events this run (counted in the summary)");
                    *stats.error.lock().unwrap_or_else(|e| e.into_inner()) = Some(failure.why);
                }
            }
        }
    }
}

/// An Event given up.
#[derive(Debug)]
struct Failure {
    /// The call and its error.
    why: String,
    /// True when no more calls are to be made ([`retry::Verdict::Stop`]).
    stop: bool,
}

/// (container, reason) to its Event's name and its series' count.
type Series = HashMap<(String, &'static str), (String, u64)>;

/// Posts `post`, trying again as [`retry::verdict`] says, at most
/// [`retry::MAX_TRIES_PER_EVENT`] tries, while the grace deadline (once known) leaves time.
async fn post_with_retries(
    t: &Target,
    post: &Post,
    series: &mut Series,
    seq: &mut u64,
    deadline: &mut watch::Receiver<Option<Instant>>,
) -> Result<(), Failure> {
    // Chosen once: a create whose answer was lost is found taken (409) on the next try.
    let mut created_as: Option<String> = None;
    let mut tries = 0u32;
    loop {
        tries += 1;
        let by = call_deadline(*deadline.borrow());
        let err = match post_one(t, post, series, seq, &mut created_as, by).await {
            Ok(()) => return Ok(()),
            Err(e) => e,
        };
        let after = match retry::verdict(&err.1) {
            retry::Verdict::Stop => return Err(err.failure(true, "")),
            retry::Verdict::GiveUp => return Err(err.failure(false, "")),
            retry::Verdict::Retry { after } => after,
        };
        if tries >= retry::MAX_TRIES_PER_EVENT {
            return Err(err.failure(false, &format!(" (given up after {tries} tries)")));
        }
        let wait = retry::sleep(tries, after, fastrand::f64());
        tracing::debug!(error = %err.1, tries, wait_ms = wait.as_millis() as u64, "event call failed: trying again");
        if !sleep_within_grace(wait, deadline).await {
            return Err(err.failure(
                false,
                &format!(
                    " (given up after {tries} tries: the grace period leaves no time for another)"
                ),
            ));
        }
    }
}

/// A failed call: what it was, and its error.
struct Failed(String, api::CallError);

impl Failed {
    fn failure(&self, stop: bool, why: &str) -> Failure {
        Failure {
            why: format!("{}: {}{why}", self.0, self.1),
            stop,
        }
    }
}

/// Sleeps `wait`, unless the grace deadline (known now or told during the wait) leaves no time
/// for a try after it: false then, at once.
async fn sleep_within_grace(
    wait: Duration,
    deadline: &mut watch::Receiver<Option<Instant>>,
) -> bool {
    let until = Instant::now() + wait;
    loop {
        let last_start =
            (*deadline.borrow()).map(|d| d.checked_sub(EXIT_RESERVE + MIN_TRY).unwrap_or(d));
        if last_start.is_some_and(|l| until > l) {
            return false;
        }
        tokio::select! {
            _ = tokio::time::sleep_until(until) => return true,
            changed = deadline.changed() => if changed.is_err() {
                // The daemon is gone: no deadline will come; the wait is all that is left.
                tokio::time::sleep_until(until).await;
                return true;
            },
        }
    }
}

/// A call's deadline: [`CALL_TIMEOUT`] from now, and after the signal [`EXIT_RESERVE`] before
/// the grace deadline.
fn call_deadline(grace_deadline: Option<Instant>) -> Instant {
    let by = Instant::now() + CALL_TIMEOUT;
    match grace_deadline {
        Some(d) => by.min(d.checked_sub(EXIT_RESERVE).unwrap_or(d)),
        None => by,
    }
}

/// One try: creates the Event, or updates its series when the container's hook had this
/// outcome before. `created_as` is the name of this Event's create, once one was tried.
async fn post_one(
    t: &Target,
    post: &Post,
    series: &mut Series,
    seq: &mut u64,
    created_as: &mut Option<String>,
    by: Instant,
) -> Result<(), Failed> {
    let now = crate::timefmt::now_ms();
    let base = format!(
        "/apis/events.k8s.io/v1/namespaces/{}/events",
        t.pod.namespace
    );
    let key = (post.container.clone(), post.reason);
    if created_as.is_none()
        && let Some((name, count)) = series.get_mut(&key)
    {
        // The count sent is absolute: a retried update whose answer was lost counts once.
        let body = json!({"series": {"count": *count + 1, "lastObservedTime": micro_time(now)}});
        match t
            .client
            .call(
                Method::PATCH,
                &format!("{base}/{name}"),
                "application/merge-patch+json",
                body.to_string().into_bytes(),
                by,
            )
            .await
        {
            Ok(_) => {
                *count += 1;
                return Ok(());
            }
            // The Event expired (the API server keeps Events an hour by default): a new one.
            Err(api::CallError::Status { status: 404, .. }) => {}
            Err(e) => return Err(Failed(format!("PATCH {base}/{name}"), e)),
        }
    }
    let retried_create = created_as.is_some();
    let name = created_as
        .get_or_insert_with(|| {
            *seq += 1;
            event_name(&t.pod.name, now, *seq)
        })
        .clone();
    let body = event_object(&t.pod, &name, post, now);
    match t
        .client
        .call(
            Method::POST,
            &base,
            "application/json",
            body.to_string().into_bytes(),
            by,
        )
        .await
    {
        Ok(_) => {}
        // An earlier try of this create was done; its answer was lost.
        Err(api::CallError::Status { status: 409, .. }) if retried_create => {}
        Err(e) => return Err(Failed(format!("POST {base}"), e)),
    }
    series.insert(key, (name, 1));
    Ok(())
}

/// A unique Event name: the pod's, then the time and a sequence number in hex, as client-go
/// names Events (`<object>.<hex>`), within a DNS subdomain's length.
fn event_name(pod: &str, now_ms: i64, seq: u64) -> String {
    let suffix = format!(".{:x}{seq:04x}", now_ms.max(0));
    let head = note::prefix(pod, NAME_MAX - suffix.len()).trim_end_matches(['.', '-']);
    format!("{head}{suffix}")
}

/// An events.k8s.io/v1 `MicroTime`: RFC 3339 with exactly six fractional digits (the API server
/// parses it with Go's `RFC3339Micro` layout).
fn micro_time(ms: i64) -> String {
    let t = crate::timefmt::rfc3339_ms(ms);
    // `YYYY-MM-DDTHH:MM:SS.mmmZ` is ASCII.
    let s = String::from_utf8_lossy(&t[..t.len() - 1]).into_owned();
    format!("{s}000Z")
}

/// Longest container name Kubernetes takes: a DNS label (RFC 1123), 63 bytes.
const CONTAINER_NAME_MAX: usize = 63;

/// The `fieldPath` naming the hook's container in the pod, as the kubelet writes it in its own
/// `FailedPreStopHook` Events (`spec.containers{NAME}`, pkg/kubelet/container/ref.go), so
/// `kubectl describe pod` shows which container: `None` for a name that cannot be a
/// container's (a DNS label), which the path could not hold. A preStop hook is on a container
/// of `spec.containers` but for a native sidecar's, which hooklog cannot tell apart from here.
fn container_field_path(container: &str) -> Option<String> {
    let label = !container.is_empty()
        && container.len() <= CONTAINER_NAME_MAX
        && container
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !container.starts_with('-')
        && !container.ends_with('-');
    label.then(|| format!("spec.containers{{{container}}}"))
}

/// The Event: type Warning, about the pod (with its uid), from [`REPORTING_CONTROLLER`] on
/// this pod.
fn event_object(pod: &PodRef, name: &str, post: &Post, now_ms: i64) -> Value {
    let mut regarding = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "name": pod.name,
        "namespace": pod.namespace,
    });
    if let Some(uid) = &pod.uid {
        regarding["uid"] = json!(uid);
    }
    if let Some(path) = container_field_path(&post.container) {
        regarding["fieldPath"] = json!(path);
    }
    json!({
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": pod.namespace},
        "eventTime": micro_time(now_ms),
        "type": "Warning",
        "reason": post.reason,
        "action": ACTION,
        "note": post.note,
        "regarding": regarding,
        "reportingController": REPORTING_CONTROLLER,
        "reportingInstance": note::prefix(&pod.name, REPORTING_INSTANCE_MAX),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framing::{Frame, FrameEnd};
    use crate::record::{Encoder, Enrichment};

    /// Encodes `lines` as the sources do (the peers see each hook event), then lets the tap
    /// look at the batch: the Events it would post.
    fn posts_for(lines: &[String]) -> Vec<Post> {
        let enrichment = Arc::new(Enrichment::new(&PodMeta::default(), 16 * 1024));
        let peers = Peers::new(&[]);
        let mut encoder = Encoder::new(enrichment, "file:/hooklog/prestop.log");
        let mut batch = Batch::new();
        for l in lines {
            let frame = Frame {
                bytes: l.as_bytes(),
                continued: false,
                end: FrameEnd::Newline,
            };
            if let Some(e) = encoder.encode(frame, 0, &mut batch) {
                peers.observe(e);
            }
        }
        let posted = Mutex::new(Vec::new());
        let mut tails = HashMap::new();
        look_at(&batch, &mut tails, &peers, &|p| {
            posted.lock().unwrap().push(p)
        });
        posted.into_inner().unwrap()
    }

    fn run_lines(container: &str, run: &str, exit: i64, finish_key: &str) -> Vec<String> {
        use sha2::Digest;
        let seal: String = sha2::Sha256::digest(b"the-key")
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let base = format!(
            r#""container_name":"{container}","hook":"preStop","run_id":"{run}","started_ms":1"#
        );
        vec![
            format!(r#"{{"event":"hook.started",{base},"seal":"{seal}"}}"#),
            format!(
                r#"{{"event":"hook.output","container_name":"{container}","hook":"preStop","stream":"stderr","message":"connection refused"}}"#
            ),
            format!(
                r#"{{"event":"hook.finished",{base},"key":"{finish_key}","outcome":"{}","exit_code":{exit},"signal":null,"duration_ms":5,"message":"preStop hook failed: sh exited {exit} after 5 ms"}}"#,
                if exit == 0 { "ok" } else { "failed" }
            ),
        ]
    }

    #[test]
    fn a_paired_failed_finish_posts_its_exit_status_and_output_and_an_ok_one_nothing() {
        let posts = posts_for(&run_lines("envoy", "r1", 3, "the-key"));
        assert_eq!(posts.len(), 1);
        assert_eq!(posts[0].reason, "PreStopHookFailed");
        assert_eq!(
            posts[0].note,
            "container envoy: preStop hook failed: sh exited 3 after 5 ms (exit status 3)\nlast output:\nconnection refused"
        );
        assert!(posts_for(&run_lines("envoy", "r1", 0, "the-key")).is_empty());
    }

    #[test]
    fn a_forged_finish_posts_nothing() {
        // The key does not open the start's seal: the run is not over, nothing is posted.
        assert!(posts_for(&run_lines("envoy", "r1", 3, "a-guess")).is_empty());
        // A finish of a run no start named.
        let lines = run_lines("envoy", "r1", 3, "the-key");
        assert!(posts_for(&lines[2..]).is_empty());
        // A postStart hook's failure is not a preStop's.
        let post_start: Vec<String> = lines
            .iter()
            .map(|l| l.replace("preStop", "postStart"))
            .collect();
        assert!(posts_for(&post_start).is_empty());
    }

    #[test]
    fn micro_time_has_six_fractional_digits() {
        assert_eq!(micro_time(1_796_112_331_822), "2026-12-01T08:05:31.822000Z");
        assert_eq!(micro_time(0), "1970-01-01T00:00:00.000000Z");
    }

    #[test]
    fn event_names_are_dns_subdomains_of_any_pod_name() {
        for pod in [
            "checkout-7d9f",
            &"a".repeat(253),
            &format!("{}.x", "b".repeat(250)),
        ] {
            let n = event_name(pod, i64::MAX, u64::MAX);
            assert!(n.len() <= NAME_MAX, "{}", n.len());
            assert!(!n.starts_with('.'));
            assert!(
                n.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-')
            );
        }
        assert_ne!(event_name("p", 5, 1), event_name("p", 5, 2));
    }

    #[test]
    fn the_event_is_about_the_pod_and_within_the_api_servers_limits() {
        let pod = PodRef {
            name: "p".repeat(253),
            namespace: "shop".into(),
            uid: Some("0f1e".into()),
        };
        let post = Post {
            container: "envoy".into(),
            reason: "PreStopHookFailed",
            note: "n".into(),
        };
        let e = event_object(&pod, "p.1", &post, 0);
        assert_eq!(e["regarding"]["uid"], "0f1e");
        assert_eq!(e["regarding"]["kind"], "Pod");
        assert_eq!(e["regarding"]["fieldPath"], "spec.containers{envoy}");
        assert_eq!(e["type"], "Warning");
        assert_eq!(e["reportingController"], REPORTING_CONTROLLER);
        assert_eq!(
            e["reportingInstance"].as_str().unwrap().len(),
            REPORTING_INSTANCE_MAX
        );
    }

    #[test]
    fn the_field_path_names_a_container_only_by_a_name_a_container_can_have() {
        let longest = "a".repeat(CONTAINER_NAME_MAX);
        for (name, want) in [
            ("envoy", Some("spec.containers{envoy}".to_string())),
            (
                "api-server-2",
                Some("spec.containers{api-server-2}".to_string()),
            ),
            ("0", Some("spec.containers{0}".to_string())),
            (
                longest.as_str(),
                Some(format!("spec.containers{{{longest}}}")),
            ),
            ("", None),
            ("-envoy", None),
            ("envoy-", None),
            ("Envoy", None),
            ("env}oy", None),
            ("env oy", None),
            ("énvoy", None),
        ] {
            assert_eq!(container_field_path(name), want, "{name:?}");
        }
        assert_eq!(
            container_field_path(&"a".repeat(CONTAINER_NAME_MAX + 1)),
            None
        );
        // Without a name it can hold, the Event is about the pod alone.
        let pod = PodRef {
            name: "p".into(),
            namespace: "shop".into(),
            uid: None,
        };
        let post = Post {
            container: "x}y".into(),
            reason: "PreStopHookFailed",
            note: "n".into(),
        };
        let e = event_object(&pod, "p.1", &post, 0);
        assert!(e["regarding"].get("fieldPath").is_none(), "{e}");
    }

    #[test]
    fn calls_end_before_the_grace_deadline() {
        let now = Instant::now();
        assert!(call_deadline(None) <= now + CALL_TIMEOUT + Duration::from_millis(100));
        let d = now + Duration::from_millis(500);
        assert_eq!(call_deadline(Some(d)), d - EXIT_RESERVE);
    }
}
