//! (the sidecar) How many Events each container's hooks may cost a run: a share of its own for each
//! container `--peers` names, and one share for all the others together. Any container may write
//! any `container_name`; a peer that writes failing runs of names it makes up spends the shared
//! share only, and the expected containers' Events are posted first ([`Lane`]).

use std::collections::HashMap;

/// Events (creates and series updates: a repeat of an outcome updates its Event's series and
/// costs one call too) per container named by `--peers`. A container's preStop hook runs once
/// per stop; 32 restarts of one container in a pod's life, each failing its hook, are past what
/// a crash-looping container reaches before its back-off holds it for minutes.
pub const PER_EXPECTED: u32 = 32;

/// Events shared by every container `--peers` does not name (all of them without `--peers`).
pub const SHARED: u32 = 64;

/// Of [`SHARED`], most one such container may spend: one name made up cannot spend the share
/// alone (it takes eight names to).
pub const PER_UNNAMED: u32 = 8;

/// Which queue an Event waits in: the expected containers' is served first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lane {
    /// A container `--peers` names.
    Expected,
    /// Any other.
    Other,
}

/// What each container has left to spend.
#[derive(Debug)]
pub struct Budget {
    /// Per expected container, its Events left.
    expected: HashMap<String, u32>,
    /// Per other container, the Events it spent (at most [`SHARED`] / [`PER_UNNAMED`] names can
    /// spend, so the map is bounded too).
    others: HashMap<String, u32>,
    /// Left of [`SHARED`].
    shared_left: u32,
}

impl Budget {
    /// A budget for `expected` (the names `--peers` gave).
    pub fn new(expected: impl IntoIterator<Item = String>) -> Budget {
        Budget {
            expected: expected.into_iter().map(|n| (n, PER_EXPECTED)).collect(),
            others: HashMap::new(),
            shared_left: SHARED,
        }
    }

    /// Events the expected containers can queue at most.
    pub fn expected_capacity(&self) -> usize {
        self.expected.len() * PER_EXPECTED as usize
    }

    /// Events the other containers can queue at most.
    pub fn other_capacity(&self) -> usize {
        SHARED as usize
    }

    /// Spends one Event of `container`'s: its lane, or `None` when its share is spent.
    pub fn take(&mut self, container: &str) -> Option<Lane> {
        if let Some(left) = self.expected.get_mut(container) {
            *left = left.checked_sub(1)?;
            return Some(Lane::Expected);
        }
        if self.shared_left == 0 {
            return None;
        }
        let spent = self.others.get(container).copied().unwrap_or(0);
        if spent >= PER_UNNAMED {
            return None;
        }
        self.others.insert(container.to_string(), spent + 1);
        self.shared_left -= 1;
        Some(Lane::Other)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn made_up_names_spend_the_shared_share_never_an_expected_containers() {
        let mut b = Budget::new(["envoy".to_string(), "app".to_string()]);
        // One name, 256 runs: its own cap.
        let one = (0..256).filter(|_| b.take("made-up").is_some()).count();
        assert_eq!(one, PER_UNNAMED as usize);
        // Many names, many runs each: the shared share, all of it and no more.
        let many = (0..10_000)
            .filter(|i| b.take(&format!("made-up-{}", i % 300)) == Some(Lane::Other))
            .count();
        assert_eq!(one + many, SHARED as usize);
        // The expected containers' shares are whole.
        for _ in 0..PER_EXPECTED {
            assert_eq!(b.take("envoy"), Some(Lane::Expected));
            assert_eq!(b.take("app"), Some(Lane::Expected));
        }
        assert_eq!(b.take("envoy"), None);
        assert_eq!(b.take("app"), None);
        assert_eq!(b.expected_capacity(), 2 * PER_EXPECTED as usize);
    }
}
