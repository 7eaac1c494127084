//! The PutLogEvents batcher: turns records into log events and cuts them into requests that
//! CloudWatch Logs accepts. Pure: no I/O, no clock (the caller passes "now").
//!
//! Rules enforced (PutLogEvents,
//! <https://docs.aws.amazon.com/AmazonCloudWatchLogs/latest/APIReference/API_PutLogEvents.html>):
//! at most [`MAX_BATCH_EVENTS`] events and [`MAX_BATCH_BYTES`] bytes per call, counting
//! [`EVENT_OVERHEAD_BYTES`] per event; events in chronological order within a call; no call
//! spanning more than [`MAX_BATCH_SPAN_MS`]; no event over [`MAX_EVENT_MESSAGE_BYTES`]; no event
//! older than [`MAX_AGE_MS`] or further ahead than [`MAX_AHEAD_MS`].

/// Most events in one PutLogEvents call (AWS: "The maximum number of log events in a batch is
/// 10,000").
pub const MAX_BATCH_EVENTS: usize = 10_000;

/// Most bytes in one call: the messages in UTF-8 plus [`EVENT_OVERHEAD_BYTES`] each (AWS: "The
/// maximum batch size is 1,048,576 bytes").
pub const MAX_BATCH_BYTES: usize = 1_048_576;

/// Bytes CloudWatch adds to each event when it sizes a batch (AWS: "plus 26 bytes for each log
/// event").
pub const EVENT_OVERHEAD_BYTES: usize = 26;

/// Longest message of one event: the largest event CloudWatch takes (1,048,576 bytes, the
/// batch limit) less the per-event overhead.
pub const MAX_EVENT_MESSAGE_BYTES: usize = MAX_BATCH_BYTES - EVENT_OVERHEAD_BYTES;

/// Longest time between the first and the last event of one call (AWS: "A batch of log events
/// in a single request cannot span more than 24 hours").
pub const MAX_BATCH_SPAN_MS: i64 = 24 * 3600 * 1000;

/// Oldest event CloudWatch takes (AWS: "None of the log events in the batch can be older than 14
/// days or older than the retention period of the log group"). One hour of margin is kept for
/// clock skew and time spent queued.
pub const MAX_AGE_MS: i64 = 14 * 24 * 3600 * 1000 - 3600 * 1000;

/// Furthest ahead an event may be (AWS: "None of the log events in the batch can be more than 2
/// hours in the future"). Five minutes of margin are kept for clock skew.
pub const MAX_AHEAD_MS: i64 = 2 * 3600 * 1000 - 5 * 60 * 1000;

/// One log event on its way to CloudWatch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// CloudWatch's timestamp, milliseconds since the epoch.
    pub timestamp: i64,
    /// The record's JSON (or one part of it, when the record is too large for one event).
    pub message: String,
    /// The input batch this event came from, to acknowledge it once every event is settled.
    pub origin: u64,
    /// True for the first (or only) event of a record: counts the record once.
    pub first_part: bool,
}

impl Event {
    /// What this event counts towards [`MAX_BATCH_BYTES`].
    pub fn cost(&self) -> usize {
        self.message.len() + EVENT_OVERHEAD_BYTES
    }
}

/// What [`to_events`] had to change so CloudWatch takes a record.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Adjusted {
    /// The timestamp was outside CloudWatch's window and was replaced by "now".
    pub timestamp: bool,
    /// The record was larger than one event and was split into this many parts (0: not split).
    pub parts: usize,
}

/// Turns one record (JSON without newline, its time) into events: the timestamp moved to `now`
/// when CloudWatch would reject it, the message cut into parts at character boundaries when it
/// is over [`MAX_EVENT_MESSAGE_BYTES`]. The record's own `time` field is left as it was.
pub fn to_events(
    record: &[u8],
    time_ms: i64,
    now_ms: i64,
    origin: u64,
    out: &mut Vec<Event>,
) -> Adjusted {
    to_events_capped(
        record,
        time_ms,
        now_ms,
        origin,
        MAX_EVENT_MESSAGE_BYTES,
        out,
    )
}

fn to_events_capped(
    record: &[u8],
    time_ms: i64,
    now_ms: i64,
    origin: u64,
    cap: usize,
    out: &mut Vec<Event>,
) -> Adjusted {
    let mut adjusted = Adjusted::default();
    let timestamp = if time_ms < now_ms - MAX_AGE_MS || time_ms > now_ms + MAX_AHEAD_MS {
        adjusted.timestamp = true;
        now_ms
    } else {
        time_ms
    };
    // Records are JSON text; anything else is made valid UTF-8 so CloudWatch takes it.
    let text = String::from_utf8_lossy(record);
    if text.len() <= cap {
        out.push(Event {
            timestamp,
            message: text.into_owned(),
            origin,
            first_part: true,
        });
        return adjusted;
    }
    let mut rest: &str = &text;
    let mut first = true;
    while !rest.is_empty() {
        let mut end = rest.len().min(cap);
        while !rest.is_char_boundary(end) {
            end -= 1;
        }
        out.push(Event {
            timestamp,
            message: rest[..end].to_string(),
            origin,
            first_part: first,
        });
        first = false;
        adjusted.parts += 1;
        rest = &rest[end..];
    }
    adjusted
}

/// Events waiting to be sent.
#[derive(Debug, Default)]
pub struct Batcher {
    /// In arrival order.
    events: Vec<Event>,
    /// Sum of [`Event::cost`].
    bytes: usize,
}

impl Batcher {
    /// An empty batcher.
    pub fn new() -> Self {
        Batcher::default()
    }

    /// Adds an event (one already within [`MAX_EVENT_MESSAGE_BYTES`], as from [`to_events`]).
    pub fn push(&mut self, event: Event) {
        self.bytes += event.cost();
        self.events.push(event);
    }

    /// Number of events waiting.
    pub fn len(&self) -> usize {
        self.events.len()
    }

    /// True when nothing waits.
    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
    }

    /// True when a full request's worth waits: time to send without waiting for the interval.
    pub fn is_full(&self) -> bool {
        self.events.len() >= MAX_BATCH_EVENTS || self.bytes >= MAX_BATCH_BYTES
    }

    /// Takes every waiting event as requests CloudWatch accepts, in timestamp order.
    pub fn take_requests(&mut self) -> Vec<Vec<Event>> {
        self.bytes = 0;
        split_requests(std::mem::take(&mut self.events))
    }
}

/// Sorts `events` by timestamp (stable: equal timestamps keep their arrival order) and cuts them
/// into requests within the count, size and span limits.
pub fn split_requests(mut events: Vec<Event>) -> Vec<Vec<Event>> {
    events.sort_by_key(|e| e.timestamp);
    let mut requests = Vec::new();
    let mut current: Vec<Event> = Vec::new();
    let mut bytes = 0;
    for e in events {
        let fits = current.len() < MAX_BATCH_EVENTS
            && bytes + e.cost() <= MAX_BATCH_BYTES
            && current
                .first()
                .is_none_or(|first| e.timestamp - first.timestamp <= MAX_BATCH_SPAN_MS);
        if !fits && !current.is_empty() {
            requests.push(std::mem::take(&mut current));
            bytes = 0;
        }
        bytes += e.cost();
        current.push(e);
    }
    if !current.is_empty() {
        requests.push(current);
    }
    requests
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const NOW: i64 = 1_796_000_000_000;

    fn ev(timestamp: i64, len: usize) -> Event {
        Event {
            timestamp,
            message: "x".repeat(len),
            origin: 0,
            first_part: true,
        }
    }

    /// Every rule AWS checks on one request, as the validating proxy in the tests checks it.
    fn assert_valid(req: &[Event]) {
        assert!(!req.is_empty());
        assert!(req.len() <= MAX_BATCH_EVENTS, "{} events", req.len());
        let bytes: usize = req.iter().map(Event::cost).sum();
        assert!(bytes <= MAX_BATCH_BYTES, "{bytes} bytes");
        assert!(
            req.windows(2).all(|w| w[0].timestamp <= w[1].timestamp),
            "not sorted"
        );
        let span = req.last().unwrap().timestamp - req[0].timestamp;
        assert!(span <= MAX_BATCH_SPAN_MS, "span {span}");
        assert!(
            req.iter()
                .all(|e| e.message.len() <= MAX_EVENT_MESSAGE_BYTES)
        );
    }

    #[test]
    fn ten_thousand_and_one_events_make_two_requests() {
        let reqs = split_requests((0..10_001).map(|i| ev(NOW + i, 10)).collect());
        assert_eq!(
            reqs.iter().map(Vec::len).collect::<Vec<_>>(),
            vec![10_000, 1]
        );
    }

    #[test]
    fn the_byte_limit_counts_the_overhead() {
        // 4 events of exactly a quarter of the limit, overhead included, fit in one request...
        let quarter = MAX_BATCH_BYTES / 4 - EVENT_OVERHEAD_BYTES;
        assert_eq!(
            split_requests((0..4).map(|i| ev(NOW + i, quarter)).collect()).len(),
            1
        );
        // ...one more byte in one of them does not.
        let mut evs: Vec<_> = (0..4).map(|i| ev(NOW + i, quarter)).collect();
        evs[3].message.push('y');
        let reqs = split_requests(evs);
        assert_eq!(reqs.iter().map(Vec::len).collect::<Vec<_>>(), vec![3, 1]);
    }

    #[test]
    fn requests_are_sorted_and_never_span_more_than_a_day() {
        let day = MAX_BATCH_SPAN_MS;
        let evs = vec![
            ev(NOW + day + 1, 1),
            ev(NOW, 1),
            ev(NOW + day, 1),
            ev(NOW + 5, 1),
        ];
        let reqs = split_requests(evs);
        let ts: Vec<Vec<i64>> = reqs
            .iter()
            .map(|r| r.iter().map(|e| e.timestamp).collect())
            .collect();
        assert_eq!(ts, vec![vec![NOW, NOW + 5, NOW + day], vec![NOW + day + 1]]);
    }

    #[test]
    fn equal_timestamps_keep_arrival_order() {
        let evs: Vec<_> = (0..5)
            .map(|i| Event {
                message: i.to_string(),
                ..ev(NOW, 0)
            })
            .collect();
        let reqs = split_requests(evs);
        let msgs: Vec<_> = reqs[0].iter().map(|e| e.message.as_str()).collect();
        assert_eq!(msgs, ["0", "1", "2", "3", "4"]);
    }

    #[test]
    fn an_oversize_record_is_split_at_character_boundaries_and_nothing_is_lost() {
        let record = "é".repeat(10) + "abc"; // 23 bytes
        let mut out = Vec::new();
        let adj = to_events_capped(record.as_bytes(), NOW, NOW, 7, 5, &mut out);
        assert_eq!(adj.parts, out.len());
        assert!(out.len() > 1);
        assert!(
            out.iter()
                .all(|e| e.message.len() <= 5 && e.origin == 7 && e.timestamp == NOW)
        );
        assert_eq!(out.iter().filter(|e| e.first_part).count(), 1);
        assert_eq!(
            out.iter().map(|e| e.message.as_str()).collect::<String>(),
            record
        );
    }

    #[test]
    fn a_record_at_the_limit_is_one_event() {
        let record = vec![b'a'; MAX_EVENT_MESSAGE_BYTES];
        let mut out = Vec::new();
        assert_eq!(
            to_events(&record, NOW, NOW, 0, &mut out),
            Adjusted::default()
        );
        assert_eq!(out.len(), 1);
        let record = vec![b'a'; MAX_EVENT_MESSAGE_BYTES + 1];
        out.clear();
        assert_eq!(to_events(&record, NOW, NOW, 0, &mut out).parts, 2);
    }

    #[test]
    fn timestamps_outside_the_window_move_to_now() {
        let mut out = Vec::new();
        let old = NOW - 15 * 24 * 3600 * 1000;
        assert!(to_events(b"{}", old, NOW, 0, &mut out).timestamp);
        let ahead = NOW + 3 * 3600 * 1000;
        assert!(to_events(b"{}", ahead, NOW, 0, &mut out).timestamp);
        let fine = NOW - 3600 * 1000;
        assert!(!to_events(b"{}", fine, NOW, 0, &mut out).timestamp);
        let ts: Vec<_> = out.iter().map(|e| e.timestamp).collect();
        assert_eq!(ts, vec![NOW, NOW, fine]);
    }

    #[test]
    fn the_batcher_says_full_at_either_limit() {
        let mut b = Batcher::new();
        for i in 0..MAX_BATCH_EVENTS - 1 {
            b.push(ev(NOW + i as i64, 1));
        }
        assert!(!b.is_full());
        b.push(ev(NOW, 1));
        assert!(b.is_full());
        assert_eq!(b.take_requests().len(), 1);
        assert!(b.is_empty() && !b.is_full());
        b.push(ev(NOW, MAX_EVENT_MESSAGE_BYTES));
        assert!(b.is_full());
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// Whatever goes in comes out once, in requests AWS accepts.
        #[test]
        fn requests_are_valid_and_keep_every_event(
            specs in proptest::collection::vec((0i64..3 * MAX_BATCH_SPAN_MS, 0usize..300_000), 0..40),
            many_small in 0usize..12_000,
        ) {
            let mut events: Vec<Event> = specs
                .iter()
                .enumerate()
                .map(|(i, (t, len))| Event { origin: i as u64, ..ev(NOW + t, *len) })
                .collect();
            events.extend((0..many_small).map(|i| Event { origin: 100_000 + i as u64, ..ev(NOW + (i as i64 % 1000), 3) }));
            let mut want: Vec<u64> = events.iter().map(|e| e.origin).collect();
            let reqs = split_requests(events);
            for r in &reqs {
                assert_valid(r);
            }
            let mut got: Vec<u64> = reqs.iter().flatten().map(|e| e.origin).collect();
            want.sort_unstable();
            got.sort_unstable();
            prop_assert_eq!(got, want);
        }
    }
}
