//! (the sidecar) Sources: what reads the peers' lines. Each turns its input into batches of encoded records
//! and sends them into one bounded channel; a full channel slows the source down.

pub mod bind;
pub mod file;
pub mod socket;
pub mod socket_guard;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::mpsc;

use crate::batch::Batch;
use crate::framing::Frame;
use crate::lifecycle::once::Once;
use crate::lifecycle::peers::Peers;
use crate::record::{Encoder, Enrichment};

/// A batch is sent once its buffer reaches this size (or the input has nothing more for now).
pub const BATCH_BYTES: usize = 64 * 1024;

/// What every source shares.
#[derive(Debug, Clone)]
pub struct SourceContext {
    /// Pod metadata and output cap.
    pub enrichment: Arc<Enrichment>,
    /// Where hook events go.
    pub peers: Arc<Peers>,
    /// The lifecycle records already read (the wrapper sends them by every route).
    pub once: Arc<Once>,
    /// When input last arrived, for the quiet period at shutdown.
    pub activity: Arc<Activity>,
    /// Into the pipeline.
    pub tx: mpsc::Sender<Batch>,
}

impl SourceContext {
    /// Longest frame a source's framer emits: a raw line that long already fills a record.
    pub fn max_frame(&self) -> usize {
        self.enrichment.max_line()
    }

    /// Sends a batch into the pipeline; while it has to wait (the pipeline is full), the source
    /// counts as behind its input (see [`Activity::behind`]). Fails when the pipeline is gone.
    pub async fn send(&self, batch: Batch) -> Result<(), Batch> {
        match self.tx.try_send(batch) {
            Ok(()) => Ok(()),
            Err(mpsc::error::TrySendError::Closed(b)) => Err(b),
            Err(mpsc::error::TrySendError::Full(b)) => {
                let _behind = self.activity.behind_while();
                self.tx.send(b).await.map_err(|e| e.0)
            }
        }
    }

    /// [`SourceContext::send`] for a blocking thread.
    pub fn blocking_send(&self, batch: Batch) -> Result<(), Batch> {
        match self.tx.try_send(batch) {
            Ok(()) => Ok(()),
            Err(mpsc::error::TrySendError::Closed(b)) => Err(b),
            Err(mpsc::error::TrySendError::Full(b)) => {
                let _behind = self.activity.behind_while();
                self.tx.blocking_send(b).map_err(|e| e.0)
            }
        }
    }

    /// Encodes a frame into `batch` and hands any hook event to the peers. Of a wrapper's
    /// lifecycle record, which comes by every route, the peers see the first copy read; every
    /// copy goes into the batch, marked, and the pipeline keeps the first in its order.
    pub fn encode(&self, encoder: &mut Encoder, frame: Frame<'_>, time_ms: i64, batch: &mut Batch) {
        let records = batch.records.len();
        let line = frame.bytes;
        if let Some(event) = encoder.encode(frame, time_ms, batch) {
            if let Some(copy) = event.copy_key(line) {
                batch
                    .copies
                    .extend((records..batch.records.len()).map(|i| (i, copy)));
                if !self.once.first_copy(copy) {
                    return;
                }
            }
            self.peers.observe(event);
        }
    }
}

/// When input last arrived, and whether some is still waiting to be read.
#[derive(Debug)]
pub struct Activity {
    /// Reference point for `last`.
    epoch: Instant,
    /// Milliseconds after `epoch` of the last input.
    last: AtomicU64,
    /// Sources (or connections) that cannot read on now because the pipeline is full or every
    /// connection slot is taken: their input may hold hook events not yet seen.
    behind: AtomicUsize,
}

impl Default for Activity {
    fn default() -> Self {
        Activity {
            epoch: Instant::now(),
            last: AtomicU64::new(0),
            behind: AtomicUsize::new(0),
        }
    }
}

/// Counts a source as behind while it lives.
#[derive(Debug)]
pub struct Behind<'a>(&'a AtomicUsize);

impl Drop for Behind<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Activity {
    /// Notes that input arrived now.
    pub fn touch(&self) {
        let ms = self.epoch.elapsed().as_millis() as u64;
        self.last.store(ms, Ordering::Relaxed);
    }

    /// Marks a source as behind its input until the guard is dropped.
    pub fn behind_while(&self) -> Behind<'_> {
        self.behind.fetch_add(1, Ordering::Relaxed);
        Behind(&self.behind)
    }

    /// True while some input is waiting to be read: a backlog may hold a peer's `hook.started`,
    /// so an expected peer is not judged `missing` yet.
    pub fn behind(&self) -> bool {
        self.behind.load(Ordering::Relaxed) > 0
    }

    /// How long since input last arrived (since start, if none did).
    pub fn quiet_for(&self) -> Duration {
        let last = Duration::from_millis(self.last.load(Ordering::Relaxed));
        self.epoch.elapsed().saturating_sub(last)
    }
}
