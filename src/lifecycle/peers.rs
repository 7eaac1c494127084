//! (the sidecar) Peers: the containers whose hooks the daemon waits for, what each hook did, and the
//! `hooks.summary` record that reports it.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use crate::protocol::{self, field};
use crate::record::{HookEvent, HookEventKind};

/// How a run ended, as its `hook.finished` says.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Finish {
    /// `ok`, `failed` or `timed_out`.
    outcome: String,
    /// Exit status; none when killed.
    exit_code: Option<i64>,
    /// Duration the wrapper measured.
    duration_ms: Option<u64>,
}

/// One run of a peer's hook: what its `hook.started` and the `hook.finished` that pairs with it
/// said.
#[derive(Debug, Clone)]
struct Run {
    /// The wrapper's `run_id`; none for records that name no run (hand-written, `emit`).
    id: Option<String>,
    /// When its start was read; none while only finishes naming it were read.
    since: Option<Instant>,
    /// The start's `seal`: the SHA-256 (hex) of the key its own finish carries.
    seal: Option<String>,
    /// The finish that paired with the start.
    finished: Option<Finish>,
    /// Finishes read before the start, with their keys, waiting for it (at most
    /// [`MAX_WAITING_FINISHES`]).
    waiting: Vec<(Finish, Option<String>)>,
}

impl Run {
    fn running(&self) -> bool {
        self.since.is_some() && self.finished.is_none()
    }

    /// Heard from as a hook: a start read, or (records without a run) a finish.
    fn announced(&self) -> bool {
        self.since.is_some() || self.finished.is_some()
    }
}

/// What is known of one peer: whether `--peers` named it, and its runs.
#[derive(Debug, Clone, Default)]
struct Peer {
    /// Named by `--peers`: waited for until it announces itself, never dropped.
    expected: bool,
    /// Its hook's runs, in the order their first record was read.
    runs: Vec<Run>,
}

impl Peer {
    fn announced(&self) -> bool {
        self.runs.iter().any(Run::announced)
    }
}

/// True when `key` opens `seal`: its SHA-256, in hex, is the seal. A start without a seal (a
/// wrapper older than seals) pairs with any finish of its run id, as before seals.
fn opens(seal: Option<&str>, key: Option<&str>) -> bool {
    let Some(seal) = seal else {
        return true;
    };
    let Some(key) = key else {
        return false;
    };
    crate::protocol::seal(key).eq_ignore_ascii_case(seal)
}

/// How bad an outcome is, for a peer with several runs: the summary reports the worst, so a run
/// a peer adds can make a hook look worse, never better.
fn badness(outcome: &str) -> u8 {
    match outcome {
        "ok" => 0,
        "failed" => 1,
        _ => 2,
    }
}

/// The outcome of one peer in the summary.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PeerOutcome {
    /// `ok`, `failed`, `timed_out`, `missing` or `unfinished`.
    pub outcome: String,
    /// Exit status, when the hook exited.
    pub exit_code: Option<i64>,
    /// How long it ran (so far, when unfinished).
    pub duration_ms: Option<u64>,
}

/// How often an expected peer's announcement is looked for again while input waits to be read.
const BACKLOG_POLL: Duration = Duration::from_millis(50);

/// Peers learned from input (beside those `--peers` names, which are always kept). Any container
/// of the pod may write any `container_name`: past this many, hook events naming a new one are
/// ignored and counted, so forged names bound neither memory nor the summary. A pod rarely has
/// more than a handful of containers; 64 is far past any real one.
pub const MAX_LEARNED_PEERS: usize = 64;

/// Longest peer name learned from input: a Kubernetes container name is a DNS label, at most 63
/// characters (RFC 1123, as the API server validates it).
pub const MAX_PEER_NAME: usize = 63;

/// Runs kept for all peers together: every start or finish naming a new run id adds one, so a
/// peer writing made-up run ids by the million is bounded here; past it, new runs are ignored
/// and counted with [`Peers::dropped`]. 4,096 runs of about 200 bytes stay under 1 MB, and a
/// real pod has a run or two per container.
pub const MAX_RUNS: usize = 4096;

/// Finishes kept per run while its start has not been read (a start waiting in a socket
/// connection not yet accepted while the finish came through the file); past it, they are
/// counted as unpaired.
const MAX_WAITING_FINISHES: usize = 4;

/// All peers, shared by the sources (which report events) and the shutdown sequence (which
/// waits on them).
#[derive(Debug, Default)]
pub struct Peers {
    /// Peer name to what is known of it, sorted so the summary is stable.
    state: Mutex<BTreeMap<String, Peer>>,
    /// Runs kept over all peers (bounded by [`MAX_RUNS`]).
    runs: AtomicU64,
    /// `hook.finished` records that paired with no start: a run id no start named, or a key that
    /// did not open the start's seal. They end nothing.
    unpaired: AtomicU64,
    /// How many of `state`'s peers `--peers` named (they are never dropped).
    expected: usize,
    /// Hook events ignored because they named a peer past [`MAX_LEARNED_PEERS`] or a name longer
    /// than [`MAX_PEER_NAME`].
    dropped: AtomicU64,
    /// Woken on every change.
    changed: Notify,
}

impl Peers {
    /// Peers with `expected` names waiting to report.
    pub fn new(expected: &[String]) -> Self {
        let state: BTreeMap<_, _> = expected
            .iter()
            .map(|n| {
                (
                    n.clone(),
                    Peer {
                        expected: true,
                        runs: Vec::new(),
                    },
                )
            })
            .collect();
        Peers {
            expected: state.len(),
            state: Mutex::new(state),
            runs: AtomicU64::new(0),
            unpaired: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            changed: Notify::new(),
        }
    }

    /// Hook events ignored so far because they named a peer past the caps.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// `hook.finished` records that paired with no start so far.
    pub fn unpaired(&self) -> u64 {
        self.unpaired.load(Ordering::Relaxed)
    }

    /// False (and the event counted, with one warning per run) when `name` is a peer hooklog
    /// does not know and may not learn: past [`MAX_LEARNED_PEERS`], or longer than
    /// [`MAX_PEER_NAME`].
    fn may_learn(&self, st: &BTreeMap<String, Peer>, name: &str) -> bool {
        if st.len() - self.expected < MAX_LEARNED_PEERS && name.len() <= MAX_PEER_NAME {
            return true;
        }
        if self.dropped.fetch_add(1, Ordering::Relaxed) == 0 {
            tracing::warn!(
                container = %name.chars().take(MAX_PEER_NAME).collect::<String>(),
                max_peers = MAX_LEARNED_PEERS,
                max_name = MAX_PEER_NAME,
                "hook event of a peer past the cap ignored (counted in the summary; no more warnings)"
            );
        }
        false
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Peer>> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Takes in a hook event read from an input. A start opens a run (its `run_id`); a finish
    /// ends only the run whose start it pairs with: the same run id, and a key that opens the
    /// start's seal. Records without a run id are taken in the order read, and only until a
    /// record with one is seen for that peer.
    pub fn observe(&self, event: HookEvent) {
        let mut st = self.lock();
        if !st.contains_key(&event.container) && !self.may_learn(&st, &event.container) {
            return;
        }
        let HookEvent {
            container,
            kind,
            run,
            proof,
        } = event;
        let peer = st.entry(container.clone()).or_default();
        let finish = match kind {
            HookEventKind::Started => None,
            HookEventKind::Finished {
                outcome,
                exit_code,
                duration_ms,
            } => Some(Finish {
                outcome: finished_outcome(&container, outcome),
                exit_code,
                duration_ms,
            }),
        };
        let changed = match run {
            None => self.observe_unnamed(peer, finish),
            Some(run) => self.observe_run(peer, &container, run.id, finish, proof),
        };
        drop(st);
        if changed {
            self.changed.notify_waiters();
        }
    }

    /// A record that names no run: it speaks for the peer only while no record naming one was
    /// read (anyone can write `{"event":"hook.finished","outcome":"ok"}` while the real hook
    /// still runs).
    fn observe_unnamed(&self, peer: &mut Peer, finish: Option<Finish>) -> bool {
        if peer.runs.iter().any(|r| r.id.is_some()) {
            tracing::debug!("hook event without a run ignored: the peer's records name runs");
            return false;
        }
        let since = match finish {
            None => Some(Instant::now()),
            Some(_) => peer.runs.first().and_then(|r| r.since),
        };
        peer.runs = vec![Run {
            id: None,
            since,
            seal: None,
            finished: finish,
            waiting: Vec::new(),
        }];
        true
    }

    /// A record of run `id`.
    fn observe_run(
        &self,
        peer: &mut Peer,
        container: &str,
        id: String,
        finish: Option<Finish>,
        proof: Option<String>,
    ) -> bool {
        // Records naming runs supersede those that named none (never counted in `runs`).
        peer.runs.retain(|r| r.id.is_some());
        let known = peer
            .runs
            .iter()
            .position(|r| r.id.as_deref() == Some(id.as_str()));
        let Some(at) = known else {
            return self.new_run(peer, container, id, finish, proof);
        };
        let run = &mut peer.runs[at];
        match finish {
            // A second start of a run already started (a copy, or a peer's) changes nothing.
            None if run.since.is_some() => false,
            None => {
                run.since = Some(Instant::now());
                run.seal = proof;
                let waiting = std::mem::take(&mut run.waiting);
                let mut unpaired = waiting.len() as u64;
                if let Some(pos) = waiting
                    .iter()
                    .position(|(_, key)| opens(run.seal.as_deref(), key.as_deref()))
                {
                    run.finished = Some(waiting[pos].0.clone());
                    unpaired -= 1;
                }
                self.unpaired.fetch_add(unpaired, Ordering::Relaxed);
                true
            }
            // The first finish that pairs ends the run; later ones change nothing.
            Some(_) if run.finished.is_some() => false,
            Some(f) if run.since.is_some() => {
                if opens(run.seal.as_deref(), proof.as_deref()) {
                    run.finished = Some(f);
                    true
                } else {
                    tracing::debug!(
                        container,
                        "hook.finished whose key does not open its start's seal ignored"
                    );
                    self.unpaired.fetch_add(1, Ordering::Relaxed);
                    false
                }
            }
            Some(f) => {
                if run.waiting.len() < MAX_WAITING_FINISHES {
                    run.waiting.push((f, proof));
                } else {
                    self.unpaired.fetch_add(1, Ordering::Relaxed);
                }
                false
            }
        }
    }

    /// A run not known before, started or (its start not read yet) finished; false when past
    /// [`MAX_RUNS`].
    fn new_run(
        &self,
        peer: &mut Peer,
        container: &str,
        id: String,
        finish: Option<Finish>,
        proof: Option<String>,
    ) -> bool {
        if self.runs.load(Ordering::Relaxed) >= MAX_RUNS as u64 {
            if self.dropped.fetch_add(1, Ordering::Relaxed) == 0 {
                tracing::warn!(
                    container,
                    max_runs = MAX_RUNS,
                    "hook event of a run past the cap ignored (counted in the summary; no more warnings)"
                );
            }
            return false;
        }
        self.runs.fetch_add(1, Ordering::Relaxed);
        let run = match finish {
            None => Run {
                id: Some(id),
                since: Some(Instant::now()),
                seal: proof,
                finished: None,
                waiting: Vec::new(),
            },
            Some(f) => Run {
                id: Some(id),
                since: None,
                seal: None,
                finished: None,
                waiting: vec![(f, proof)],
            },
        };
        peer.runs.push(run);
        true
    }

    /// The peers still waited for: those running a hook, and (until `announce_over`) those
    /// expected but not heard from.
    pub fn pending(&self, announce_over: bool) -> Vec<String> {
        self.lock()
            .iter()
            .filter(|(_, p)| {
                p.runs.iter().any(Run::running) || (p.expected && !p.announced() && !announce_over)
            })
            .map(|(n, _)| n.clone())
            .collect()
    }

    /// The peers `--peers` named.
    pub fn expected_names(&self) -> Vec<String> {
        self.lock()
            .iter()
            .filter(|(_, p)| p.expected)
            .map(|(n, _)| n.clone())
            .collect()
    }

    /// True when some expected peer has not been heard from.
    pub fn any_unannounced(&self) -> bool {
        self.lock().values().any(|p| p.expected && !p.announced())
    }

    /// Waits until no peer is pending, expected peers being given until `announce_by` to
    /// announce themselves, and longer while `behind()` says input is still waiting to be read
    /// (their announcement may be in it); gives up at `deadline`. Logs what is pending every
    /// `report_every`. Returns true when every peer is done.
    pub async fn wait_done(
        &self,
        announce_by: Instant,
        deadline: Instant,
        report_every: Duration,
        behind: impl Fn() -> bool,
    ) -> bool {
        let mut next_report = Instant::now() + report_every;
        loop {
            let notified = self.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let now = Instant::now();
            let backlog = behind();
            let pending = self.pending(now >= announce_by && !backlog);
            if pending.is_empty() {
                return true;
            }
            if now >= deadline {
                tracing::warn!(pending = ?pending, "grace deadline reached with hooks still pending");
                return false;
            }
            if now >= next_report {
                tracing::info!(pending = ?pending, "waiting for peer hooks");
                next_report = now + report_every;
            }
            let mut wake = deadline.min(next_report);
            if self.any_unannounced() {
                if announce_by > now {
                    wake = wake.min(announce_by);
                } else if backlog {
                    // Nothing notifies when a backlog clears: look again shortly.
                    wake = wake.min(now + BACKLOG_POLL);
                }
            }
            tokio::select! {
                _ = &mut notified => {}
                _ = tokio::time::sleep_until(wake) => {}
            }
        }
    }

    /// How run `run_id` of `container` ended, when a finish that pairs with its start was read
    /// (a forged finish, whose key does not open the seal, ended nothing and gives `None`).
    /// Without a run id: the peer's outcome while its records name no run.
    pub fn finish_of(&self, container: &str, run_id: Option<&str>) -> Option<PeerOutcome> {
        let st = self.lock();
        let peer = st.get(container)?;
        let run = match run_id {
            Some(id) => peer.runs.iter().find(|r| r.id.as_deref() == Some(id))?,
            None => peer.runs.iter().find(|r| r.id.is_none())?,
        };
        let f = run.finished.as_ref()?;
        Some(PeerOutcome {
            outcome: f.outcome.clone(),
            exit_code: f.exit_code,
            duration_ms: f.duration_ms,
        })
    }

    /// Every peer's outcome as of now: `unfinished` while any of its runs is, `missing` when no
    /// run was announced, else the worst of its finished runs.
    pub fn outcomes(&self) -> BTreeMap<String, PeerOutcome> {
        let now = Instant::now();
        self.lock()
            .iter()
            .map(|(name, p)| {
                let running = p
                    .runs
                    .iter()
                    .filter(|r| r.running())
                    .filter_map(|r| r.since)
                    .min();
                let worst = p
                    .runs
                    .iter()
                    .filter_map(|r| r.finished.as_ref())
                    .max_by_key(|f| badness(&f.outcome));
                let o = match (running, worst) {
                    (Some(since), _) => PeerOutcome {
                        outcome: "unfinished".into(),
                        exit_code: None,
                        duration_ms: Some(now.duration_since(since).as_millis() as u64),
                    },
                    (None, Some(f)) => PeerOutcome {
                        outcome: f.outcome.clone(),
                        exit_code: f.exit_code,
                        duration_ms: f.duration_ms,
                    },
                    (None, None) => PeerOutcome {
                        outcome: "missing".into(),
                        exit_code: None,
                        duration_ms: None,
                    },
                };
                (name.clone(), o)
            })
            .collect()
    }
}

/// The outcomes the summary counts, in the order its message lists them.
pub const OUTCOMES: [&str; 5] = ["ok", "failed", "timed_out", "missing", "unfinished"];

/// The outcomes a `hook.finished` record may carry (`missing` and `unfinished` are the daemon's).
const FINISHED_OUTCOMES: [&str; 3] = ["ok", "failed", "timed_out"];

/// A reported outcome as the summary counts it: anything but `ok`, `failed` or `timed_out` (a
/// hand-written `"outcome":"success"`) counts as `failed`, so the summary's counts always add up
/// to its peers and an alarm on them errs towards firing.
fn finished_outcome(container: &str, outcome: String) -> String {
    if FINISHED_OUTCOMES.contains(&outcome.as_str()) {
        outcome
    } else {
        tracing::warn!(
            container,
            outcome,
            "unknown hook outcome, counted as failed"
        );
        "failed".to_string()
    }
}

/// The members of the `hooks.summary` record (without time, hooklog and kubernetes), as JSON
/// object members: `"event":"hooks.summary","message":...,"peers":{...},"counts":{...}`.
///
/// `counts` always covers every peer; `peers` (and the message's list of hooks that were not ok)
/// name at most `list_at_most` of them, those not ok first, and `peers_omitted` says how many
/// were left out, so the caller can keep the record under the line cap. `dropped` hook events of
/// peers past the caps are counted in `peer_events_dropped`, and `unpaired` finishes (that ended
/// nothing) in `unpaired_finishes`.
pub fn summary_members(
    outcomes: &BTreeMap<String, PeerOutcome>,
    list_at_most: usize,
    dropped: u64,
    unpaired: u64,
) -> serde_json::Map<String, serde_json::Value> {
    use serde_json::{Value, json};
    let mut counts = serde_json::Map::new();
    for o in OUTCOMES {
        let n = outcomes.values().filter(|p| p.outcome == o).count();
        counts.insert(o.to_string(), json!(n));
    }
    let mut parts: Vec<String> = OUTCOMES
        .iter()
        .filter_map(|o| {
            let n = counts[*o].as_u64().unwrap_or(0);
            (n > 0).then(|| format!("{n} {o}"))
        })
        .collect();
    if parts.is_empty() {
        parts.push("no hooks seen".to_string());
    }
    let not_ok = outcomes.iter().filter(|(_, p)| p.outcome != "ok");
    let ok = outcomes.iter().filter(|(_, p)| p.outcome == "ok");
    let listed: BTreeMap<&String, &PeerOutcome> = not_ok.chain(ok).take(list_at_most).collect();
    let omitted = outcomes.len() - listed.len();
    let mut bad: Vec<String> = listed
        .iter()
        .filter(|(_, p)| p.outcome != "ok")
        .map(|(n, p)| format!("{n}={}", p.outcome))
        .collect();
    let bad_omitted = outcomes.values().filter(|p| p.outcome != "ok").count() - bad.len();
    if bad_omitted > 0 {
        bad.push(format!("{bad_omitted} more"));
    }
    let mut message = format!("hooks: {}", parts.join(", "));
    if !bad.is_empty() {
        message.push_str(&format!(" ({})", bad.join(", ")));
    }
    if dropped > 0 {
        message.push_str(&format!(
            "; {dropped} hook events of peers past the cap of {MAX_LEARNED_PEERS} ignored"
        ));
    }
    let mut m = serde_json::Map::new();
    m.insert(field::EVENT.into(), json!(protocol::SUMMARY));
    m.insert("message".into(), Value::String(message));
    m.insert("peers".into(), json!(listed));
    m.insert("counts".into(), Value::Object(counts));
    if omitted > 0 {
        m.insert("peers_omitted".into(), json!(omitted));
    }
    if dropped > 0 {
        m.insert("peer_events_dropped".into(), json!(dropped));
    }
    if unpaired > 0 {
        m.insert("unpaired_finishes".into(), json!(unpaired));
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::HookRun;

    fn finished(c: &str, outcome: &str, code: Option<i64>) -> HookEvent {
        HookEvent {
            container: c.into(),
            kind: HookEventKind::Finished {
                outcome: outcome.into(),
                exit_code: code,
                duration_ms: Some(5),
            },
            run: None,
            proof: None,
        }
    }

    #[test]
    fn expected_peer_never_heard_from_is_missing() {
        let p = Peers::new(&["envoy".into(), "api-server".into()]);
        p.observe(finished("api-server", "ok", Some(0)));
        assert_eq!(p.pending(false), vec!["envoy".to_string()]);
        assert!(p.pending(true).is_empty());
        let o = p.outcomes();
        assert_eq!(o["envoy"].outcome, "missing");
        assert_eq!(o["api-server"].outcome, "ok");
    }

    #[test]
    fn running_peer_is_pending_and_unfinished() {
        let p = Peers::new(&[]);
        p.observe(HookEvent {
            container: "envoy".into(),
            kind: HookEventKind::Started,
            run: None,
            proof: None,
        });
        assert_eq!(p.pending(true), vec!["envoy".to_string()]);
        assert_eq!(p.outcomes()["envoy"].outcome, "unfinished");
        p.observe(finished("envoy", "failed", Some(127)));
        assert!(p.pending(true).is_empty());
        assert_eq!(p.outcomes()["envoy"].exit_code, Some(127));
    }

    #[test]
    fn summary_counts_and_names_bad_hooks() {
        let p = Peers::new(&["a".into()]);
        p.observe(finished("b", "failed", Some(127)));
        p.observe(finished("c", "ok", Some(0)));
        let m = summary_members(&p.outcomes(), usize::MAX, 0, 0);
        assert_eq!(m["counts"]["failed"], 1);
        assert_eq!(m["counts"]["missing"], 1);
        assert_eq!(m["counts"]["ok"], 1);
        assert_eq!(
            m["message"],
            "hooks: 1 ok, 1 failed, 1 missing (a=missing, b=failed)"
        );
        assert_eq!(m["peers"]["b"]["exit_code"], 127);
    }

    #[test]
    fn an_unknown_outcome_counts_as_failed_so_counts_add_up() {
        let p = Peers::new(&[]);
        p.observe(finished("b", "success", Some(0)));
        p.observe(finished("c", "missing", None));
        let o = p.outcomes();
        assert_eq!(o["b"].outcome, "failed");
        assert_eq!(o["b"].exit_code, Some(0));
        assert_eq!(o["c"].outcome, "failed");
        let m = summary_members(&o, usize::MAX, 0, 0);
        let counted: u64 = OUTCOMES
            .iter()
            .map(|k| m["counts"][*k].as_u64().unwrap())
            .sum();
        assert_eq!(counted, 2, "{m:?}");
    }

    #[test]
    fn learned_peers_are_capped_but_expected_ones_always_kept() {
        let p = Peers::new(&["envoy".into()]);
        for i in 0..MAX_LEARNED_PEERS + 10 {
            p.observe(finished(&format!("forged-{i}"), "ok", Some(0)));
        }
        p.observe(finished(&"x".repeat(MAX_PEER_NAME + 1), "ok", Some(0)));
        p.observe(finished("envoy", "failed", Some(1)));
        let o = p.outcomes();
        assert_eq!(o.len(), MAX_LEARNED_PEERS + 1);
        assert_eq!(o["envoy"].outcome, "failed");
        assert_eq!(p.dropped(), 11);
        // A peer already known still changes.
        p.observe(finished("forged-0", "failed", Some(2)));
        assert_eq!(p.outcomes()["forged-0"].outcome, "failed");
    }

    #[test]
    fn a_summary_listing_fewer_peers_still_counts_all_and_lists_bad_ones_first() {
        let p = Peers::new(&[]);
        p.observe(finished("a", "ok", Some(0)));
        p.observe(finished("b", "ok", Some(0)));
        p.observe(finished("c", "failed", Some(1)));
        p.observe(finished("d", "timed_out", None));
        let m = summary_members(&p.outcomes(), 1, 3, 0);
        assert_eq!(m["counts"]["ok"], 2);
        assert_eq!(m["counts"]["failed"], 1);
        assert_eq!(m["peers"].as_object().unwrap().len(), 1);
        assert_eq!(m["peers"]["c"]["outcome"], "failed");
        assert_eq!(m["peers_omitted"], 3);
        assert_eq!(m["peer_events_dropped"], 3);
        assert_eq!(
            m["message"],
            "hooks: 2 ok, 1 failed, 1 timed_out (c=failed, 1 more); 3 hook events of peers past the cap of 64 ignored"
        );
        let all = summary_members(&p.outcomes(), usize::MAX, 0, 0);
        assert!(all.get("peers_omitted").is_none());
        assert!(all.get("peer_events_dropped").is_none());
    }

    fn event(c: &str, kind: HookEventKind, id: &str, started_ms: i64) -> HookEvent {
        HookEvent {
            container: c.into(),
            kind,
            run: Some(HookRun {
                id: id.into(),
                started_ms,
            }),
            proof: None,
        }
    }

    fn ok() -> HookEventKind {
        HookEventKind::Finished {
            outcome: "ok".into(),
            exit_code: Some(0),
            duration_ms: Some(5),
        }
    }

    fn sealed(c: &str, kind: HookEventKind, id: &str, proof: &str) -> HookEvent {
        HookEvent {
            proof: Some(proof.into()),
            ..event(c, kind, id, 1000)
        }
    }

    fn failed(code: i64) -> HookEventKind {
        HookEventKind::Finished {
            outcome: "failed".into(),
            exit_code: Some(code),
            duration_ms: Some(1),
        }
    }

    /// Looks like a seal, opens nothing.
    const SEAL_K1: &str = "9fd3f0b2a1e47e7c8a4f7fd6f1d6cbe0a04bb1ec4e5e8bb2c8e1f5f4b3f5e9b6";

    fn seal_of(key: &str) -> String {
        use sha2::Digest;
        sha2::Sha256::digest(key.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    #[test]
    fn a_hook_started_read_after_its_own_finish_does_not_reopen_it() {
        let p = Peers::new(&["envoy".into()]);
        p.observe(event("envoy", ok(), "r1", 1000));
        // A finish read before its start ends nothing yet: it waits for the start.
        assert_eq!(p.pending(false), ["envoy"]);
        p.observe(event("envoy", HookEventKind::Started, "r1", 1000));
        assert!(p.pending(true).is_empty());
        assert_eq!(p.outcomes()["envoy"].outcome, "ok");
        // A second start of the same run changes nothing.
        p.observe(event("envoy", HookEventKind::Started, "r1", 1000));
        assert_eq!(p.outcomes()["envoy"].outcome, "ok");
        // Another run is news, and the peer is done when every run is.
        p.observe(event("envoy", HookEventKind::Started, "r2", 2000));
        assert_eq!(p.outcomes()["envoy"].outcome, "unfinished");
        p.observe(event("envoy", ok(), "r2", 2000));
        assert_eq!(p.outcomes()["envoy"].outcome, "ok");
    }

    /// Issue 25.1: a peer writes `hook.finished` for `app` with a made-up `run_id` and
    /// `started_ms` = now while the real hook runs: it ends nothing, and the real outcome is
    /// reported.
    #[test]
    fn a_made_up_run_id_does_not_end_a_real_hook() {
        let p = Peers::new(&["app".into()]);
        p.observe(sealed(
            "app",
            HookEventKind::Started,
            "real",
            &seal_of("k1"),
        ));
        p.observe(event("app", ok(), "made-up", i64::MAX));
        assert_eq!(
            p.pending(true),
            ["app"],
            "a finish of no start ends nothing"
        );
        assert_eq!(p.outcomes()["app"].outcome, "unfinished");
        assert_eq!(p.unpaired(), 0, "still waiting for its start");
        p.observe(sealed("app", failed(1), "real", "k1"));
        assert!(p.pending(true).is_empty());
        assert_eq!(p.outcomes()["app"].outcome, "failed");
        assert_eq!(p.outcomes()["app"].exit_code, Some(1));
    }

    /// A peer that copied the real run id from the shared file cannot end the run without its
    /// key, nor with a wrong one; the wrapper's own finish, with the key, does.
    #[test]
    fn a_copied_run_id_without_the_key_ends_nothing() {
        assert_ne!(
            seal_of("k1"),
            SEAL_K1.to_string(),
            "the constant is not a real seal"
        );
        for forged_key in [None, Some("k2"), Some(""), Some(SEAL_K1)] {
            let p = Peers::new(&["app".into()]);
            p.observe(sealed(
                "app",
                HookEventKind::Started,
                "real",
                &seal_of("k1"),
            ));
            let mut forged = event("app", ok(), "real", 1000);
            forged.proof = forged_key.map(str::to_string);
            p.observe(forged);
            assert_eq!(p.pending(true), ["app"], "{forged_key:?}");
            assert_eq!(p.unpaired(), 1);
            p.observe(sealed("app", failed(3), "real", "k1"));
            assert_eq!(p.outcomes()["app"].exit_code, Some(3), "{forged_key:?}");
        }
    }

    /// A finish with the key, read before its start (through the file while the start waited
    /// in the socket), pairs once the start comes; a forged one waiting beside it does not.
    #[test]
    fn finishes_read_before_their_start_wait_for_it_and_only_the_key_pairs() {
        let p = Peers::new(&["app".into()]);
        p.observe(sealed("app", ok(), "real", "wrong"));
        p.observe(sealed("app", failed(2), "real", "k1"));
        p.observe(sealed(
            "app",
            HookEventKind::Started,
            "real",
            &seal_of("k1"),
        ));
        assert!(p.pending(true).is_empty());
        assert_eq!(p.outcomes()["app"].exit_code, Some(2));
        assert_eq!(p.unpaired(), 1);
    }

    /// A peer may add whole runs of its own (it could run the wrapper itself): the summary
    /// reports the worst run, so they make a hook look worse, never better.
    #[test]
    fn a_run_a_peer_adds_makes_a_hook_look_worse_never_better() {
        let p = Peers::new(&["app".into()]);
        p.observe(sealed(
            "app",
            HookEventKind::Started,
            "real",
            &seal_of("k1"),
        ));
        p.observe(sealed(
            "app",
            HookEventKind::Started,
            "peer",
            &seal_of("k9"),
        ));
        p.observe(sealed("app", ok(), "peer", "k9"));
        assert_eq!(p.outcomes()["app"].outcome, "unfinished");
        p.observe(sealed("app", failed(4), "real", "k1"));
        assert_eq!(p.outcomes()["app"].exit_code, Some(4));
    }

    /// A record without a run, then the wrapper's: the wrapper's run is taken, and counts once.
    #[test]
    fn a_run_after_records_without_one_is_taken() {
        let p = Peers::new(&["app".into()]);
        p.observe(finished("app", "ok", Some(0)));
        p.observe(event("app", HookEventKind::Started, "r1", 1));
        assert_eq!(p.outcomes()["app"].outcome, "unfinished");
        assert_eq!(p.runs.load(Ordering::Relaxed), 1);
        p.observe(event("app", HookEventKind::Started, "r2", 2));
        assert_eq!(p.dropped(), 0);
    }

    /// Made-up run ids by the thousand: runs stay bounded, the excess is counted, and an
    /// expected peer's real run, once the cap is reached, is missing (never ok).
    #[test]
    fn made_up_run_ids_are_bounded_and_counted() {
        let p = Peers::new(&["app".into()]);
        for i in 0..MAX_RUNS + 10 {
            p.observe(event("app", ok(), &format!("f{i}"), 1));
        }
        assert_eq!(p.dropped(), 10);
        p.observe(sealed(
            "app",
            HookEventKind::Started,
            "real",
            &seal_of("k1"),
        ));
        assert_ne!(p.outcomes()["app"].outcome, "ok");
    }

    #[test]
    fn a_record_without_a_run_cannot_speak_for_a_hook_that_named_one() {
        let p = Peers::new(&["envoy".into()]);
        p.observe(event("envoy", HookEventKind::Started, "r1", 1000));
        p.observe(finished("envoy", "ok", Some(0)));
        assert_eq!(p.pending(true), ["envoy"]);
        p.observe(event(
            "envoy",
            HookEventKind::Finished {
                outcome: "failed".into(),
                exit_code: Some(3),
                duration_ms: Some(2000),
            },
            "r1",
            1000,
        ));
        // Nor restart it and then mark it ok.
        p.observe(HookEvent {
            container: "envoy".into(),
            kind: HookEventKind::Started,
            run: None,
            proof: None,
        });
        p.observe(finished("envoy", "ok", Some(0)));
        assert_eq!(p.outcomes()["envoy"].outcome, "failed");
        assert_eq!(p.outcomes()["envoy"].exit_code, Some(3));
    }

    #[test]
    fn records_without_a_run_are_taken_in_the_order_read() {
        let p = Peers::new(&[]);
        p.observe(finished("envoy", "ok", Some(0)));
        p.observe(HookEvent {
            container: "envoy".into(),
            kind: HookEventKind::Started,
            run: None,
            proof: None,
        });
        assert_eq!(p.outcomes()["envoy"].outcome, "unfinished");
    }

    #[tokio::test(start_paused = true)]
    async fn wait_done_returns_when_the_last_hook_finishes() {
        let p = std::sync::Arc::new(Peers::new(&["envoy".into()]));
        let start = Instant::now();
        let p2 = p.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(3)).await;
            p2.observe(HookEvent {
                container: "envoy".into(),
                kind: HookEventKind::Started,
                run: None,
                proof: None,
            });
            tokio::time::sleep(Duration::from_secs(4)).await;
            p2.observe(finished("envoy", "ok", Some(0)));
        });
        let done = p
            .wait_done(
                start + Duration::from_secs(5),
                start + Duration::from_secs(20),
                Duration::from_secs(5),
                || false,
            )
            .await;
        assert!(done);
        assert_eq!(Instant::now() - start, Duration::from_secs(7));
    }

    #[tokio::test(start_paused = true)]
    async fn wait_done_gives_up_on_silent_peers_after_the_announce_window() {
        let p = Peers::new(&["envoy".into()]);
        let start = Instant::now();
        let done = p
            .wait_done(
                start + Duration::from_secs(2),
                start + Duration::from_secs(20),
                Duration::from_secs(5),
                || false,
            )
            .await;
        assert!(done);
        assert_eq!(Instant::now() - start, Duration::from_secs(2));
    }

    #[tokio::test(start_paused = true)]
    async fn an_expected_peer_is_not_missing_while_input_waits_to_be_read() {
        let p = std::sync::Arc::new(Peers::new(&["envoy".into()]));
        let start = Instant::now();
        let backlog = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
        let (p2, b2) = (p.clone(), backlog.clone());
        tokio::spawn(async move {
            // The backlog holds envoy's start; it is read 6 s in, past the announce window.
            tokio::time::sleep(Duration::from_secs(6)).await;
            p2.observe(HookEvent {
                container: "envoy".into(),
                kind: HookEventKind::Started,
                run: None,
                proof: None,
            });
            b2.store(false, std::sync::atomic::Ordering::SeqCst);
            tokio::time::sleep(Duration::from_secs(1)).await;
            p2.observe(finished("envoy", "ok", Some(0)));
        });
        let b = backlog.clone();
        let done = p
            .wait_done(
                start + Duration::from_secs(2),
                start + Duration::from_secs(20),
                Duration::from_secs(5),
                move || b.load(std::sync::atomic::Ordering::SeqCst),
            )
            .await;
        assert!(done);
        assert_eq!(p.outcomes()["envoy"].outcome, "ok");
        assert_eq!(Instant::now() - start, Duration::from_secs(7));
    }

    #[tokio::test(start_paused = true)]
    async fn wait_done_stops_at_the_deadline() {
        let p = Peers::new(&[]);
        p.observe(HookEvent {
            container: "envoy".into(),
            kind: HookEventKind::Started,
            run: None,
            proof: None,
        });
        let start = Instant::now();
        let done = p
            .wait_done(
                start,
                start + Duration::from_secs(9),
                Duration::from_secs(5),
                || false,
            )
            .await;
        assert!(!done);
        assert_eq!(Instant::now() - start, Duration::from_secs(9));
    }
}
