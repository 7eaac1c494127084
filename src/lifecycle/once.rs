//! (the sidecar) One copy of each wrapper lifecycle record: `hooklog hook` sends `hook.started` and
//! `hook.finished` by the socket and the file both, and the daemon keeps one copy of each
//! `(run_id, event)`. A copy is the same line byte for byte: a record that names a run already
//! seen but says something else (a peer guessed the run id and wrote first) is kept, so it
//! cannot shadow the wrapper's own.
//!
//! Two [`Once`]s decide, each in its own order: the sources' one picks the copy the peers see
//! (the first read), and the pipeline's one (`sink::fan_out`) the copy that comes out, the first
//! in the output's order. Deciding the output at the source broke a hook's order: the file's
//! `hook.started`, read first but still in the file's batch, came out after the output lines the
//! socket's batch carried behind its own (dropped) copy.
//!
//! Memory is bounded: the last [`REMEMBERED`] keys are kept; a copy arriving after its key was
//! forgotten (thousands of hook runs later) comes out twice, and changes nothing in the summary.

use std::collections::VecDeque;
use std::sync::Mutex;

use crate::batch::CopyKey;

/// Lines remembered: far more than the hook runs of one pod's shutdown (a handful of
/// containers), so a forged flood of run ids makes a real copy pass twice at worst. Entries are
/// hashes, whatever the length of a run id a peer writes: about 50 bytes each, under 250 KB in
/// all.
pub const REMEMBERED: usize = 4096;

/// A run's event and its line, as hashes ([`CopyKey::pair`]).
type Pair = (u64, u64);

/// The pairs seen, and the order they came in.
type Seen = (std::collections::HashSet<Pair>, VecDeque<Pair>);

/// The lifecycle records already seen.
#[derive(Debug, Default)]
pub struct Once {
    /// Each `(key, line)` seen, and the order they came in (the oldest is forgotten first). A
    /// pair, not a key with its first line: a peer's record that names a real run but says
    /// something else, read first, must not make both of the wrapper's own copies pass as
    /// "different from the first" (found by the generated hostile pods: the real
    /// `hook.finished` came out twice after a peer copied its run id).
    seen: Mutex<Seen>,
}

impl Once {
    /// True for the first copy of a lifecycle record (or a line that differs from every one
    /// seen of its key); false for a copy of a line already seen.
    pub fn first_copy(&self, copy: CopyKey) -> bool {
        let (key, line) = copy.pair();
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        let (set, order) = &mut *seen;
        if set.contains(&(key, line)) {
            return false;
        }
        if order.len() >= REMEMBERED
            && let Some(old) = order.pop_front()
        {
            set.remove(&old);
        }
        set.insert((key, line));
        order.push_back((key, line));
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{HookEvent, HookEventKind, HookRun};

    /// Whether `event` read from `line` is the first copy, as a source asks it (an event
    /// without a run always is).
    fn first(once: &Once, event: &HookEvent, line: &[u8]) -> bool {
        event.copy_key(line).is_none_or(|k| once.first_copy(k))
    }

    fn event(id: &str, finished: bool) -> HookEvent {
        HookEvent {
            container: "app".into(),
            kind: if finished {
                HookEventKind::Finished {
                    outcome: "ok".into(),
                    exit_code: Some(0),
                    duration_ms: None,
                }
            } else {
                HookEventKind::Started
            },
            run: Some(HookRun {
                id: id.into(),
                started_ms: 1,
            }),
            proof: None,
        }
    }

    #[test]
    fn keeps_the_first_copy_of_each_run_and_event() {
        let once = Once::default();
        assert!(first(&once, &event("a", false), b"s"));
        assert!(first(&once, &event("a", true), b"f"));
        assert!(!first(&once, &event("a", false), b"s"));
        assert!(!first(&once, &event("a", true), b"f"));
        assert!(first(&once, &event("b", false), b"s"));
        let no_run = HookEvent {
            run: None,
            proof: None,
            ..event("x", false)
        };
        assert!(first(&once, &no_run, b"n") && first(&once, &no_run, b"n"));
    }

    #[test]
    fn a_different_line_naming_a_seen_run_is_kept() {
        let once = Once::default();
        assert!(first(&once, &event("a", true), br#"{"outcome":"ok"}"#));
        assert!(first(&once, &event("a", true), br#"{"outcome":"failed"}"#));
        assert!(!first(&once, &event("a", true), br#"{"outcome":"ok"}"#));
    }

    /// Found by the generated hostile pods: a peer's finish naming the real run, read first,
    /// made both of the wrapper's identical copies pass (each differed from that first line).
    #[test]
    fn a_peers_line_read_first_does_not_let_both_real_copies_pass() {
        let once = Once::default();
        assert!(first(
            &once,
            &event("a", true),
            br#"{"outcome":"ok","forged":1}"#
        ));
        assert!(first(&once, &event("a", true), br#"{"outcome":"failed"}"#));
        assert!(!first(&once, &event("a", true), br#"{"outcome":"failed"}"#));
    }

    #[test]
    fn remembers_a_bounded_number_of_keys() {
        let once = Once::default();
        for i in 0..REMEMBERED * 3 {
            assert!(first(&once, &event(&i.to_string(), false), b"s"));
        }
        let seen = once.seen.lock().unwrap();
        assert_eq!((seen.0.len(), seen.1.len()), (REMEMBERED, REMEMBERED));
        drop(seen);
        // The newest are still known, the oldest forgotten.
        assert!(!first(
            &once,
            &event(&(REMEMBERED * 3 - 1).to_string(), false),
            b"s"
        ));
        assert!(first(&once, &event("0", false), b"s"));
    }
}
