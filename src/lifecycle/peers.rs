//! Peers: the containers whose hooks the daemon waits for, what each hook did, and the
//! `hooks.summary` record that reports it.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use crate::record::{HookEvent, HookEventKind, HookRun};

/// What is known of one peer's hook.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PeerState {
    /// Named by `--peers`, not heard from yet.
    Expected,
    /// `hook.started` seen.
    Running {
        /// When the start was read.
        since: Instant,
        /// The wrapper's run, when its records name it.
        run: Option<HookRun>,
    },
    /// `hook.finished` seen.
    Finished {
        /// `ok`, `failed` or `timed_out`.
        outcome: String,
        /// Exit status; none when killed.
        exit_code: Option<i64>,
        /// Duration the wrapper measured.
        duration_ms: Option<u64>,
        /// The wrapper's run, when its records name it.
        run: Option<HookRun>,
    },
}

impl PeerState {
    fn run(&self) -> Option<&HookRun> {
        match self {
            PeerState::Expected => None,
            PeerState::Running { run, .. } | PeerState::Finished { run, .. } => run.as_ref(),
        }
    }
}

/// True when `event` is older news than what `current` already says, so it must not change it.
/// Records of one hook may arrive out of order (`hook.finished` through the file while
/// `hook.started` waited in a socket connection not yet accepted); the wrapper's run id and
/// start time order them. Records that carry no run are taken in the order they are read, and
/// only until a record with a run is seen for that peer.
fn is_stale(current: &PeerState, event: &HookEvent) -> bool {
    let (old, new) = match (current.run(), event.run.as_ref()) {
        (Some(old), Some(new)) => (old, new),
        // A record without a run cannot speak for a hook the wrapper identified: anyone can
        // write `{"event":"hook.finished","outcome":"ok"}` while the real hook still runs.
        (Some(_), None) => return true,
        (None, _) => return false,
    };
    match (current, &event.kind) {
        // A run's start after its own end, or an earlier run's start, changes nothing.
        (PeerState::Finished { .. }, HookEventKind::Started) => {
            old.id == new.id || new.started_ms < old.started_ms
        }
        // The end of a run older than the one already seen.
        (_, _) => old.id != new.id && new.started_ms < old.started_ms,
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

/// All peers, shared by the sources (which report events) and the shutdown sequence (which
/// waits on them).
#[derive(Debug, Default)]
pub struct Peers {
    /// Peer name to state, sorted so the summary is stable.
    state: Mutex<BTreeMap<String, PeerState>>,
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
            .map(|n| (n.clone(), PeerState::Expected))
            .collect();
        Peers {
            expected: state.len(),
            state: Mutex::new(state),
            dropped: AtomicU64::new(0),
            changed: Notify::new(),
        }
    }

    /// Hook events ignored so far because they named a peer past the caps.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// False (and the event counted, with one warning per run) when `name` is a peer hooklog
    /// does not know and may not learn: past [`MAX_LEARNED_PEERS`], or longer than
    /// [`MAX_PEER_NAME`].
    fn may_learn(&self, st: &BTreeMap<String, PeerState>, name: &str) -> bool {
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

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, PeerState>> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Takes in a hook event read from an input.
    pub fn observe(&self, event: HookEvent) {
        let mut st = self.lock();
        match st.get(&event.container) {
            Some(current) if is_stale(current, &event) => {
                tracing::debug!(container = %event.container, event = ?event.kind, "older hook event ignored");
                return;
            }
            Some(_) => {}
            None if !self.may_learn(&st, &event.container) => return,
            None => {}
        }
        let new = match event.kind {
            HookEventKind::Started => PeerState::Running {
                since: Instant::now(),
                run: event.run,
            },
            HookEventKind::Finished {
                outcome,
                exit_code,
                duration_ms,
            } => PeerState::Finished {
                outcome: finished_outcome(&event.container, outcome),
                exit_code,
                duration_ms,
                run: event.run,
            },
        };
        tracing::debug!(container = %event.container, state = ?new, "peer");
        st.insert(event.container, new);
        drop(st);
        self.changed.notify_waiters();
    }

    /// The peers still waited for: those running a hook, and (until `announce_over`) those
    /// expected but not heard from.
    pub fn pending(&self, announce_over: bool) -> Vec<String> {
        self.lock()
            .iter()
            .filter(|(_, s)| match s {
                PeerState::Running { .. } => true,
                PeerState::Expected => !announce_over,
                PeerState::Finished { .. } => false,
            })
            .map(|(n, _)| n.clone())
            .collect()
    }

    /// True when some expected peer has not been heard from.
    pub fn any_unannounced(&self) -> bool {
        self.lock().values().any(|s| *s == PeerState::Expected)
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

    /// Every peer's outcome as of now.
    pub fn outcomes(&self) -> BTreeMap<String, PeerOutcome> {
        let now = Instant::now();
        self.lock()
            .iter()
            .map(|(name, s)| {
                let o = match s {
                    PeerState::Expected => PeerOutcome {
                        outcome: "missing".into(),
                        exit_code: None,
                        duration_ms: None,
                    },
                    PeerState::Running { since, .. } => PeerOutcome {
                        outcome: "unfinished".into(),
                        exit_code: None,
                        duration_ms: Some(now.duration_since(*since).as_millis() as u64),
                    },
                    PeerState::Finished {
                        outcome,
                        exit_code,
                        duration_ms,
                        ..
                    } => PeerOutcome {
                        outcome: outcome.clone(),
                        exit_code: *exit_code,
                        duration_ms: *duration_ms,
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
/// peers past the caps are counted in `peer_events_dropped`.
pub fn summary_members(
    outcomes: &BTreeMap<String, PeerOutcome>,
    list_at_most: usize,
    dropped: u64,
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
    m.insert("event".into(), json!("hooks.summary"));
    m.insert("message".into(), Value::String(message));
    m.insert("peers".into(), json!(listed));
    m.insert("counts".into(), Value::Object(counts));
    if omitted > 0 {
        m.insert("peers_omitted".into(), json!(omitted));
    }
    if dropped > 0 {
        m.insert("peer_events_dropped".into(), json!(dropped));
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    fn finished(c: &str, outcome: &str, code: Option<i64>) -> HookEvent {
        HookEvent {
            container: c.into(),
            kind: HookEventKind::Finished {
                outcome: outcome.into(),
                exit_code: code,
                duration_ms: Some(5),
            },
            run: None,
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
        let m = summary_members(&p.outcomes(), usize::MAX, 0);
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
        let m = summary_members(&o, usize::MAX, 0);
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
        let m = summary_members(&p.outcomes(), 1, 3);
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
        let all = summary_members(&p.outcomes(), usize::MAX, 0);
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
        }
    }

    fn ok() -> HookEventKind {
        HookEventKind::Finished {
            outcome: "ok".into(),
            exit_code: Some(0),
            duration_ms: Some(5),
        }
    }

    #[test]
    fn a_hook_started_read_after_its_own_finish_does_not_reopen_it() {
        let p = Peers::new(&["envoy".into()]);
        p.observe(event("envoy", ok(), "r1", 1000));
        p.observe(event("envoy", HookEventKind::Started, "r1", 1000));
        assert!(p.pending(true).is_empty());
        assert_eq!(p.outcomes()["envoy"].outcome, "ok");
        // An earlier run's start or end, read late, changes nothing either.
        p.observe(event("envoy", HookEventKind::Started, "r0", 500));
        p.observe(event(
            "envoy",
            HookEventKind::Finished {
                outcome: "failed".into(),
                exit_code: Some(1),
                duration_ms: Some(1),
            },
            "r0",
            500,
        ));
        assert_eq!(p.outcomes()["envoy"].outcome, "ok");
        // A later run is news.
        p.observe(event("envoy", HookEventKind::Started, "r2", 2000));
        assert_eq!(p.outcomes()["envoy"].outcome, "unfinished");
        p.observe(event("envoy", ok(), "r2", 2000));
        assert_eq!(p.outcomes()["envoy"].outcome, "ok");
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
