//! (the control plane) The webhook's table of review connections. When every slot is taken, a new connection
//! is served in place of the one that does least for the API server ([`Pace::eviction_rank`]):
//! a client that does not read its answer, then one handshaken that never sent a request, then
//! the slowest sender, then the longest-idle keep-alive; never one whose review is under way.
//! Refusing the newcomer instead let a few hundred slow or silent clients keep real reviews out
//! (issue 36: 37 of 40 injected under attack, the rest answered 503).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use tokio_util::sync::CancellationToken;

use super::pace::Pace;

/// The connections that hold a review slot, each with the token that ends it.
#[derive(Debug, Default)]
pub struct Table {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    next: u64,
    seats: HashMap<u64, Seated>,
}

#[derive(Debug)]
struct Seated {
    pace: Arc<Pace>,
    evict: CancellationToken,
}

/// A connection's place in the [`Table`], given up when it is dropped.
#[derive(Debug)]
pub struct Seat {
    table: Arc<Table>,
    id: u64,
    /// Cancelled when the connection is evicted: it must end at once.
    pub evicted: CancellationToken,
}

impl Drop for Seat {
    fn drop(&mut self) {
        self.table.with(|t| t.seats.remove(&self.id));
    }
}

impl Table {
    fn with<T>(&self, f: impl FnOnce(&mut Inner) -> T) -> T {
        f(&mut self.inner.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// Seats a connection.
    pub fn seat(self: &Arc<Self>, pace: Arc<Pace>) -> Seat {
        let evicted = CancellationToken::new();
        let id = self.with(|t| {
            let id = t.next;
            t.next += 1;
            t.seats.insert(
                id,
                Seated {
                    pace,
                    evict: evicted.clone(),
                },
            );
            id
        });
        Seat {
            table: self.clone(),
            id,
            evicted,
        }
    }

    /// Whether some seated connection could be evicted now.
    pub fn evictable(&self) -> bool {
        let now = Instant::now();
        self.with(|t| {
            t.seats
                .values()
                .any(|s| s.pace.eviction_rank(now).is_some())
        })
    }

    /// Evicts the connection that does least, if any may go: its token is cancelled and it
    /// leaves the table at once (its slot comes back when its task ends). Returns whether one
    /// went.
    pub fn evict_one(&self) -> bool {
        let now = Instant::now();
        self.with(|t| {
            let victim = t
                .seats
                .iter()
                .filter_map(|(id, s)| s.pace.eviction_rank(now).map(|rank| (rank, *id)))
                .min();
            let Some((_, id)) = victim else {
                return false;
            };
            if let Some(s) = t.seats.remove(&id) {
                s.evict.cancel();
            }
            true
        })
    }

    /// Connections seated.
    #[cfg(test)]
    pub fn seated(&self) -> usize {
        self.with(|t| t.seats.len())
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::webhook::pace::{IdleSlots, Layer};

    fn pace() -> Arc<Pace> {
        Arc::new(Pace::new(
            Arc::new(IdleSlots::new(10)),
            Duration::from_secs(95),
        ))
    }

    #[test]
    fn the_connection_that_does_least_goes_first_and_a_review_under_way_never() {
        let table = Arc::new(Table::default());
        // A review under way: its head and body in.
        let reviewing = pace();
        reviewing.read(Layer::Wire, 5000);
        reviewing.answering();
        reviewing.body_in();
        // A keep-alive idle after an answer.
        let kept = pace();
        kept.handshaken();
        kept.answering();
        kept.body_in();
        assert!(kept.answered(true));
        // A fast sender and a slow one, both mid-request.
        let fast = pace();
        fast.read(Layer::Wire, 1 << 20);
        let slow = pace();
        slow.read(Layer::Wire, 3);
        // Handshaken, never a request.
        let unused = pace();
        unused.handshaken();
        // Its answer unread.
        let unread = pace();
        unread.wrote(true);
        let seats: Vec<(&str, Seat)> = [
            ("reviewing", &reviewing),
            ("kept", &kept),
            ("fast", &fast),
            ("slow", &slow),
            ("unused", &unused),
            ("unread", &unread),
        ]
        .into_iter()
        .map(|(n, p)| (n, table.seat(p.clone())))
        .collect();
        std::thread::sleep(Duration::from_millis(20));
        let mut order = Vec::new();
        while table.evict_one() {
            let gone: Vec<_> = seats
                .iter()
                .filter(|(n, s)| s.evicted.is_cancelled() && !order.contains(n))
                .map(|(n, _)| *n)
                .collect();
            assert_eq!(gone.len(), 1, "one at a time: {gone:?}");
            order.push(gone[0]);
        }
        assert_eq!(order, ["unread", "unused", "slow", "fast", "kept"]);
        assert!(!seats[0].1.evicted.is_cancelled());
        assert_eq!(table.seated(), 1);
        assert!(!table.evictable());
        drop(seats);
        assert_eq!(table.seated(), 0);
    }
}
