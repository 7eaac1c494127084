//! One copy of each wrapper lifecycle record: `hooklog hook` sends `hook.started` and
//! `hook.finished` by the socket and the file both, and the daemon keeps the first copy it reads
//! of each `(run_id, event)` and drops the others from its output.
//!
//! Memory is bounded: the last [`REMEMBERED`] keys are kept; a copy arriving after its key was
//! forgotten (thousands of hook runs later) comes out twice, and changes nothing in the summary.

use std::collections::{HashSet, VecDeque};
use std::sync::Mutex;

use crate::record::{HookEvent, HookEventKind};

/// Keys remembered: far more than the hook runs of one pod's shutdown (a handful of containers),
/// so a forged flood of run ids makes a real copy pass twice at worst. About 100 bytes each.
pub const REMEMBERED: usize = 4096;

/// A run's event: its `run_id` and whether it is the end.
type Key = (String, bool);

/// The lifecycle records already seen.
#[derive(Debug, Default)]
pub struct Once {
    /// The keys, and the order they came in (the oldest is forgotten first).
    seen: Mutex<(HashSet<Key>, VecDeque<Key>)>,
}

impl Once {
    /// True for the first copy of `event` (or an event without a run: nothing to tell copies
    /// apart by); false for a copy already seen.
    pub fn first(&self, event: &HookEvent) -> bool {
        let Some(run) = &event.run else {
            return true;
        };
        let key = (
            run.id.clone(),
            matches!(event.kind, HookEventKind::Finished { .. }),
        );
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        let (set, order) = &mut *seen;
        if set.contains(&key) {
            return false;
        }
        if order.len() >= REMEMBERED
            && let Some(old) = order.pop_front()
        {
            set.remove(&old);
        }
        set.insert(key.clone());
        order.push_back(key);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::HookRun;

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
        }
    }

    #[test]
    fn keeps_the_first_copy_of_each_run_and_event() {
        let once = Once::default();
        assert!(once.first(&event("a", false)));
        assert!(once.first(&event("a", true)));
        assert!(!once.first(&event("a", false)));
        assert!(!once.first(&event("a", true)));
        assert!(once.first(&event("b", false)));
        let no_run = HookEvent {
            run: None,
            ..event("x", false)
        };
        assert!(once.first(&no_run) && once.first(&no_run));
    }

    #[test]
    fn remembers_a_bounded_number_of_keys() {
        let once = Once::default();
        for i in 0..REMEMBERED * 3 {
            assert!(once.first(&event(&i.to_string(), false)));
        }
        let seen = once.seen.lock().unwrap();
        assert_eq!((seen.0.len(), seen.1.len()), (REMEMBERED, REMEMBERED));
        drop(seen);
        // The newest are still known, the oldest forgotten.
        assert!(!once.first(&event(&(REMEMBERED * 3 - 1).to_string(), false)));
        assert!(once.first(&event("0", false)));
    }
}
