//! (the sidecar) The unit that flows from sources to sinks: records already serialised into one buffer, plus
//! what to acknowledge once every sink has delivered them.

use std::hash::{BuildHasher, RandomState};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock};

use crate::checkpoint::{Checkpoint, Position};

/// Keyed per process: a peer cannot make two different keys or lines hash alike.
static HASHER: LazyLock<RandomState> = LazyLock::new(RandomState::new);

/// What tells copies of one lifecycle record apart from other records: its run's event, and the
/// line it was read from ([`crate::lifecycle::once`] keeps one copy of each).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CopyKey {
    /// A hash of the run's event: its `run_id` and whether it is the end.
    key: u64,
    /// A hash of the line.
    line: u64,
}

impl CopyKey {
    /// The key of the event `finished` (else started) of the run `run_id`, read from `line`
    /// ([`crate::record::HookEvent::copy_key`] takes them from a record's event).
    pub fn new(run_id: &str, finished: bool, line: &[u8]) -> CopyKey {
        CopyKey {
            key: HASHER.hash_one((run_id, finished)),
            line: HASHER.hash_one(line),
        }
    }

    /// The two hashes, as [`crate::lifecycle::once::Once`] remembers them.
    pub(crate) fn pair(self) -> (u64, u64) {
        (self.key, self.line)
    }
}

/// Where one record sits in a batch's buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordMeta {
    /// End of the record in `Batch::buf`, just past its newline.
    pub end: usize,
    /// When hooklog read the line, in milliseconds since the epoch (CloudWatch's timestamp).
    pub time_ms: i64,
}

/// A run of records from one source, in the order they were read.
#[derive(Debug, Default)]
pub struct Batch {
    /// The records as JSON lines, each ending in `\n`: stdout writes this buffer as it is.
    pub buf: Vec<u8>,
    /// One entry per record in `buf`.
    pub records: Vec<RecordMeta>,
    /// The file position these records bring their source to, committed when delivered.
    pub ack: Option<Ack>,
    /// Sinks that still have to deliver this batch before `ack` is committed.
    pending_sinks: AtomicUsize,
    /// The `hooks.summary` batch: the one batch a sink still writes after the cut.
    pub summary: bool,
    /// The wrapper's lifecycle records in `records` (by index), which may have a copy in another
    /// source's batch: the pipeline keeps the first in its order ([`crate::lifecycle::once`]).
    pub copies: Vec<(usize, CopyKey)>,
}

/// A checkpoint to advance once a batch is delivered. It travels with the records it follows,
/// so a position is never committed ahead of them.
#[derive(Debug, Clone)]
pub struct Ack {
    /// The source's checkpoint.
    pub checkpoint: Arc<Checkpoint>,
    /// The source's batch number: a late acknowledgement of an older batch is ignored.
    pub seq: u64,
    /// Where the source stands after the batch's last record, in every file it reads.
    pub positions: Arc<[Position]>,
}

impl Batch {
    /// An empty batch.
    pub fn new() -> Self {
        Batch::default()
    }

    /// An empty batch with room for `bytes` of records, so filling it does not reallocate and
    /// copy the buffer as it grows.
    pub fn with_capacity(bytes: usize) -> Self {
        Batch {
            buf: Vec::with_capacity(bytes),
            ..Batch::default()
        }
    }

    /// Number of records.
    pub fn len(&self) -> usize {
        self.records.len()
    }

    /// True when it holds no record.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// Marks the end of a record just written to `buf` (which must end with a newline).
    pub fn push_record(&mut self, time_ms: i64) {
        debug_assert_eq!(self.buf.last(), Some(&b'\n'));
        self.records.push(RecordMeta {
            end: self.buf.len(),
            time_ms,
        });
    }

    /// Splits the buffer at record ends into pieces of at most `max` bytes (a record longer than
    /// `max` is a piece of its own): `(bytes, records in them)`, in order.
    pub fn pieces(&self, max: usize) -> impl Iterator<Item = (&[u8], usize)> + '_ {
        let mut start = 0;
        let mut next = 0;
        std::iter::from_fn(move || {
            let first = next;
            let mut end = start;
            while let Some(r) = self.records.get(next) {
                if next > first && r.end - start > max {
                    break;
                }
                end = r.end;
                next += 1;
            }
            if next == first {
                return None;
            }
            let piece = &self.buf[start..end];
            start = end;
            Some((piece, next - first))
        })
    }

    /// Takes out the records at `drop` (indexes into `records`, ascending), keeping the others
    /// in order.
    pub fn remove_records(&mut self, drop: &[usize]) {
        let mut buf = Vec::with_capacity(self.buf.len());
        let mut records = Vec::with_capacity(self.records.len());
        let mut start = 0;
        let mut drop = drop.iter().peekable();
        for (i, r) in self.records.iter().enumerate() {
            if drop.next_if_eq(&&i).is_none() {
                buf.extend_from_slice(&self.buf[start..r.end]);
                records.push(RecordMeta {
                    end: buf.len(),
                    time_ms: r.time_ms,
                });
            }
            start = r.end;
        }
        self.buf = buf;
        self.records = records;
    }

    /// Each record as (JSON without its newline, time in ms).
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], i64)> + '_ {
        let mut start = 0;
        self.records.iter().map(move |r| {
            let rec = &self.buf[start..r.end - 1];
            start = r.end;
            (rec, r.time_ms)
        })
    }

    /// Sets how many sinks must deliver this batch before its checkpoint moves.
    pub fn expect_sinks(&self, n: usize) {
        self.pending_sinks.store(n, Ordering::SeqCst);
    }

    /// Called by each sink once the batch is delivered (or handed to a fallback); the last call
    /// commits the checkpoint.
    pub fn delivered(&self) {
        let before = self
            .pending_sinks
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                Some(n.saturating_sub(1))
            })
            .unwrap_or(0);
        if before <= 1
            && let Some(ack) = &self.ack
        {
            ack.checkpoint.commit(ack.seq, &ack.positions);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iterates_records_without_newlines() {
        let mut b = Batch::new();
        b.buf.extend_from_slice(b"{\"a\":1}\n");
        b.push_record(5);
        b.buf.extend_from_slice(b"{}\n");
        b.push_record(7);
        let got: Vec<_> = b.iter().map(|(r, t)| (r.to_vec(), t)).collect();
        assert_eq!(got, vec![(b"{\"a\":1}".to_vec(), 5), (b"{}".to_vec(), 7)]);
    }

    #[test]
    fn pieces_end_on_record_ends() {
        let mut b = Batch::new();
        for rec in ["{\"a\":1}\n", "{}\n", "{\"long\":\"xxxxxxxxxx\"}\n", "{}\n"] {
            b.buf.extend_from_slice(rec.as_bytes());
            b.push_record(0);
        }
        let got: Vec<_> = b.pieces(11).map(|(p, n)| (p.to_vec(), n)).collect();
        assert_eq!(
            got,
            vec![
                (b"{\"a\":1}\n{}\n".to_vec(), 2),
                (b"{\"long\":\"xxxxxxxxxx\"}\n".to_vec(), 1),
                (b"{}\n".to_vec(), 1),
            ]
        );
        assert_eq!(b.pieces(1 << 20).count(), 1);
        assert_eq!(Batch::new().pieces(10).count(), 0);
    }

    #[test]
    fn commits_only_after_the_last_sink() {
        let dir = tempfile::tempdir().unwrap();
        let cp = Arc::new(Checkpoint::new(dir.path().join("cp")));
        let mut b = Batch::new();
        let pos: Arc<[Position]> = vec![Position {
            dev: 1,
            ino: 2,
            offset: 30,
            fingerprint: None,
            born: None,
        }]
        .into();
        b.ack = Some(Ack {
            checkpoint: cp.clone(),
            seq: 1,
            positions: pos.clone(),
        });
        b.expect_sinks(2);
        b.delivered();
        assert_eq!(cp.committed(), None);
        b.delivered();
        assert_eq!(cp.committed(), Some(pos));
    }
}
