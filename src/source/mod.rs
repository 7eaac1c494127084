//! Sources: what reads the peers' lines. Each turns its input into batches of encoded records
//! and sends them into one bounded channel; a full channel slows the source down.

pub mod checkpoint;
pub mod file;
pub mod socket;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::mpsc;

use crate::batch::Batch;
use crate::framing::Frame;
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

    /// Encodes a frame into `batch` and hands any hook event to the peers.
    pub fn encode(&self, encoder: &mut Encoder, frame: Frame<'_>, time_ms: i64, batch: &mut Batch) {
        if let Some(event) = encoder.encode(frame, time_ms, batch) {
            self.peers.observe(event);
        }
    }
}

/// When input last arrived.
#[derive(Debug)]
pub struct Activity {
    /// Reference point for `last`.
    epoch: Instant,
    /// Milliseconds after `epoch` of the last input.
    last: AtomicU64,
}

impl Default for Activity {
    fn default() -> Self {
        Activity {
            epoch: Instant::now(),
            last: AtomicU64::new(0),
        }
    }
}

impl Activity {
    /// Notes that input arrived now.
    pub fn touch(&self) {
        let ms = self.epoch.elapsed().as_millis() as u64;
        self.last.store(ms, Ordering::Relaxed);
    }

    /// How long since input last arrived (since start, if none did).
    pub fn quiet_for(&self) -> Duration {
        let last = Duration::from_millis(self.last.load(Ordering::Relaxed));
        self.epoch.elapsed().saturating_sub(last)
    }
}
