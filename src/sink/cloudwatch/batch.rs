//! (the sidecar) The PutLogEvents batcher: turns records into log events, cuts them into requests, and gives
//! each request its timestamps right before it is sent. Pure: no I/O, no clock (the caller
//! passes CloudWatch's "now" and the clock offset, see `clock.rs`).
//!
//! Rules enforced (PutLogEvents,
//! <https://docs.aws.amazon.com/AmazonCloudWatchLogs/latest/APIReference/API_PutLogEvents.html>):
//! at most [`MAX_BATCH_EVENTS`] events and [`MAX_BATCH_BYTES`] bytes per call, counting
//! [`EVENT_OVERHEAD_BYTES`] per event; events in chronological order within a call; no call
//! spanning more than [`MAX_BATCH_SPAN_MS`]; no event over [`MAX_EVENT_MESSAGE_BYTES`]; no event
//! older than [`MAX_AGE_MS`] or further ahead than [`MAX_AHEAD_MS`].
//!
//! Events keep the order the sink received them in (the order the stdout sink writes them), and
//! timestamps never go down within the stream: [`stamp`] holds an event that would go below the
//! one before (a clock stepped back) at that one's timestamp. Sorting is never needed, so
//! CloudWatch shows the records in that order and the `hooks.summary`, received last, stays last.

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
/// in a single request cannot span more than 24 hours. Otherwise, the operation fails.").
pub const MAX_BATCH_SPAN_MS: i64 = 24 * 3600 * 1000;

/// Oldest event CloudWatch takes, against CloudWatch's clock (AWS: "Events older than 14 days or
/// preceding the log group's retention period are rejected while processing remaining valid
/// events."). One hour of margin is kept for the error of the clock offset and the call's time.
pub const MAX_AGE_MS: i64 = 14 * 24 * 3600 * 1000 - 3600 * 1000;

/// Furthest ahead an event may be, against CloudWatch's clock (AWS: "Events more than 2 hours
/// in the future are rejected while processing remaining valid events."). Five minutes of margin
/// are kept for the error of the clock offset (`clock.rs`, within seconds).
pub const MAX_AHEAD_MS: i64 = 2 * 3600 * 1000 - 5 * 60 * 1000;

/// One log event on its way to CloudWatch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// When hooklog read the record, in ms since the epoch on the pod's clock.
    pub read_ms: i64,
    /// CloudWatch's timestamp, ms since the epoch: set by [`stamp`] before each attempt.
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

/// Turns one record (JSON without newline, the time hooklog read it) into events, cutting the
/// message into parts at character boundaries when it is over [`MAX_EVENT_MESSAGE_BYTES`].
/// Returns the number of parts when it was split, 0 when not. The timestamp is set later, by
/// [`stamp`]; the record's own `time` field is never changed.
pub fn to_events(record: &[u8], read_ms: i64, origin: u64, out: &mut Vec<Event>) -> usize {
    to_events_capped(record, read_ms, origin, MAX_EVENT_MESSAGE_BYTES, out)
}

fn to_events_capped(
    record: &[u8],
    read_ms: i64,
    origin: u64,
    cap: usize,
    out: &mut Vec<Event>,
) -> usize {
    let event = |message: String, first_part: bool| Event {
        read_ms,
        timestamp: read_ms,
        message,
        origin,
        first_part,
    };
    // Records are JSON text; anything else is made valid UTF-8 so CloudWatch takes it.
    let text = String::from_utf8_lossy(record);
    if text.len() <= cap {
        out.push(event(text.into_owned(), true));
        return 0;
    }
    let mut rest: &str = &text;
    let mut parts = 0;
    while !rest.is_empty() {
        let mut end = rest.len().min(cap);
        while !rest.is_char_boundary(end) {
            end -= 1;
        }
        out.push(event(rest[..end].to_string(), parts == 0));
        parts += 1;
        rest = &rest[end..];
    }
    parts
}

/// What [`stamp`] did to a request besides adding the clock offset.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stamping {
    /// Events outside CloudWatch's window (read time plus offset more than [`MAX_AGE_MS`]
    /// before or [`MAX_AHEAD_MS`] after CloudWatch's now), sent with CloudWatch's now instead.
    pub moved: usize,
    /// Events held at the timestamp before them because theirs was lower.
    pub held: usize,
    /// The largest amount an event was held up by, in ms (a clock step back shows here).
    pub held_by_ms: i64,
}

/// Sets the timestamps of one request, in order: the read time plus `offset_ms` (CloudWatch's
/// clock minus the pod's); [`Stamping::moved`] to `server_now_ms` when that is outside
/// CloudWatch's window; then never below `floor` (the last timestamp CloudWatch took for this
/// stream) nor below the event before. The result is non-decreasing.
pub fn stamp(
    events: &mut [Event],
    offset_ms: i64,
    server_now_ms: i64,
    floor: Option<i64>,
) -> Stamping {
    let mut done = Stamping::default();
    let mut last = floor.unwrap_or(i64::MIN);
    let oldest = server_now_ms - MAX_AGE_MS;
    let newest = server_now_ms + MAX_AHEAD_MS;
    for e in events {
        let mut t = e.read_ms.saturating_add(offset_ms);
        if !(oldest..=newest).contains(&t) {
            t = server_now_ms;
            done.moved += 1;
        }
        if t < last {
            done.held += 1;
            done.held_by_ms = done.held_by_ms.max(last - t);
            t = last;
        }
        e.timestamp = t;
        last = t;
    }
    done
}

/// Cuts a stamped request (non-decreasing, as from [`stamp`]) where it would span more than
/// [`MAX_BATCH_SPAN_MS`]; returns the events cut off, to be sent next.
pub fn cut_span(events: &mut Vec<Event>) -> Vec<Event> {
    let Some(first) = events.first().map(|e| e.timestamp) else {
        return Vec::new();
    };
    let at = events.partition_point(|e| e.timestamp - first <= MAX_BATCH_SPAN_MS);
    events.split_off(at)
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

    /// Takes every waiting event as requests within the count and size limits, in arrival
    /// order. Each still needs [`stamp`] and [`cut_span`] before it is sent.
    pub fn take_requests(&mut self) -> Vec<Vec<Event>> {
        self.bytes = 0;
        split_requests(std::mem::take(&mut self.events))
    }
}

/// Cuts `events` (kept in their order) into requests within the count and size limits.
pub fn split_requests(events: Vec<Event>) -> Vec<Vec<Event>> {
    let mut requests = Vec::new();
    let mut current: Vec<Event> = Vec::new();
    let mut bytes = 0;
    for e in events {
        let fits = current.len() < MAX_BATCH_EVENTS && bytes + e.cost() <= MAX_BATCH_BYTES;
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
    const HOUR: i64 = 3600 * 1000;
    const DAY: i64 = 24 * HOUR;

    fn ev(read_ms: i64, len: usize) -> Event {
        Event {
            read_ms,
            timestamp: read_ms,
            message: "x".repeat(len),
            origin: 0,
            first_part: true,
        }
    }

    fn stamps(events: &[Event]) -> Vec<i64> {
        events.iter().map(|e| e.timestamp).collect()
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
    fn requests_keep_arrival_order() {
        let evs: Vec<_> = [5, 3, 9, 1].iter().map(|t| ev(NOW + t, 1)).collect();
        let reqs = split_requests(evs);
        let read: Vec<i64> = reqs[0].iter().map(|e| e.read_ms - NOW).collect();
        assert_eq!(read, [5, 3, 9, 1]);
    }

    #[test]
    fn a_backward_step_is_held_at_the_last_timestamp_and_order_is_kept() {
        // Read at NOW, NOW+10, then the clock steps back 5 s, then forward again.
        let mut evs: Vec<_> = [0, 10, -5_000, -4_990, 20]
            .iter()
            .enumerate()
            .map(|(i, t)| Event {
                message: i.to_string(),
                ..ev(NOW + t, 0)
            })
            .collect();
        let done = stamp(&mut evs, 0, NOW, None);
        assert_eq!(stamps(&evs), [NOW, NOW + 10, NOW + 10, NOW + 10, NOW + 20]);
        assert_eq!(done.held, 2);
        assert_eq!(done.held_by_ms, 5_010);
        assert_eq!(done.moved, 0);
        let order: Vec<_> = evs.iter().map(|e| e.message.as_str()).collect();
        assert_eq!(order, ["0", "1", "2", "3", "4"]);
    }

    #[test]
    fn the_stream_floor_holds_across_requests() {
        let mut evs = vec![ev(NOW - 100, 1), ev(NOW + 100, 1)];
        let done = stamp(&mut evs, 0, NOW, Some(NOW));
        assert_eq!(stamps(&evs), [NOW, NOW + 100]);
        assert_eq!(done.held, 1);
    }

    #[test]
    fn the_offset_moves_timestamps_to_cloudwatch_s_clock() {
        // The pod reads 3 h ahead of CloudWatch: read times are 3 h "in the future".
        let pod = NOW + 3 * HOUR;
        let mut evs = vec![ev(pod, 1), ev(pod + 5, 1)];
        let done = stamp(&mut evs, -3 * HOUR, NOW, None);
        assert_eq!(stamps(&evs), [NOW, NOW + 5]);
        assert_eq!(done, Stamping::default());
        // Without the offset the same events are outside the window and moved.
        let done = stamp(&mut evs, 0, NOW, None);
        assert_eq!(done.moved, 2);
        assert_eq!(stamps(&evs), [NOW, NOW]);
        // 20 days behind: the same, the other way.
        let pod = NOW - 20 * DAY;
        let mut evs = vec![ev(pod, 1)];
        assert_eq!(stamp(&mut evs, 20 * DAY, NOW, None), Stamping::default());
        assert_eq!(stamps(&evs), [NOW]);
    }

    #[test]
    fn the_window_is_judged_by_cloudwatch_s_now() {
        let mut evs = vec![
            ev(NOW - 15 * DAY, 1),
            ev(NOW - HOUR, 1),
            ev(NOW + HOUR, 1),
            ev(NOW + 3 * HOUR, 1),
        ];
        let done = stamp(&mut evs, 0, NOW, None);
        assert_eq!(done.moved, 2);
        // The old one goes to now, and holds the next one there; the one 3 h ahead goes to now
        // too, below the one before it, so it is held there.
        assert_eq!(stamps(&evs), [NOW, NOW, NOW + HOUR, NOW + HOUR]);
        // At the edges exactly, nothing moves.
        let mut evs = vec![ev(NOW - MAX_AGE_MS, 1), ev(NOW + MAX_AHEAD_MS, 1)];
        assert_eq!(stamp(&mut evs, 0, NOW, None).moved, 0);
    }

    #[test]
    fn a_request_spanning_more_than_a_day_is_cut() {
        let mut evs = vec![
            ev(NOW, 1),
            ev(NOW + DAY, 1),
            ev(NOW + DAY + 1, 1),
            ev(NOW + DAY + 2, 1),
        ];
        stamp(&mut evs, 0, NOW + DAY, None);
        let rest = cut_span(&mut evs);
        assert_eq!(stamps(&evs), [NOW, NOW + DAY]);
        assert_eq!(stamps(&rest), [NOW + DAY + 1, NOW + DAY + 2]);
        assert!(cut_span(&mut Vec::new()).is_empty());
    }

    #[test]
    fn an_oversize_record_is_split_at_character_boundaries_and_nothing_is_lost() {
        let record = "é".repeat(10) + "abc"; // 23 bytes
        let mut out = Vec::new();
        let parts = to_events_capped(record.as_bytes(), NOW, 7, 5, &mut out);
        assert_eq!(parts, out.len());
        assert!(out.len() > 1);
        assert!(
            out.iter()
                .all(|e| e.message.len() <= 5 && e.origin == 7 && e.read_ms == NOW)
        );
        assert_eq!(out.iter().filter(|e| e.first_part).count(), 1);
        assert!(out[0].first_part);
        assert_eq!(
            out.iter().map(|e| e.message.as_str()).collect::<String>(),
            record
        );
    }

    #[test]
    fn a_record_at_the_limit_is_one_event() {
        let record = vec![b'a'; MAX_EVENT_MESSAGE_BYTES];
        let mut out = Vec::new();
        assert_eq!(to_events(&record, NOW, 0, &mut out), 0);
        assert_eq!(out.len(), 1);
        let record = vec![b'a'; MAX_EVENT_MESSAGE_BYTES + 1];
        out.clear();
        assert_eq!(to_events(&record, NOW, 0, &mut out), 2);
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

    /// Whatever goes in comes out once, in arrival order, in requests AWS accepts, with
    /// timestamps that never go down, whatever the read times and the clock offset do. Counts
    /// the cases with at least one event (the others send nothing to check).
    #[test]
    fn requests_are_valid_ordered_and_keep_every_event() {
        let strategy = (
            proptest::collection::vec((-20 * DAY..3 * DAY, 0usize..300_000), 0..40),
            0usize..12_000,
            prop_oneof![Just(0i64), -30 * DAY..30 * DAY],
            proptest::option::of(NOW - DAY..NOW + HOUR),
        );
        crate::testkit::property(
            file!(),
            "requests_are_valid_ordered_and_keep_every_event",
            64,
            0.9,
            strategy,
            |(specs, many_small, offset, floor), reach| {
                let mut events: Vec<Event> = specs
                    .iter()
                    .map(|(t, len)| ev(NOW + t - offset, *len))
                    .collect();
                events
                    .extend((0..many_small).map(|i| ev(NOW - offset + (i as i64 % 1000) - 500, 3)));
                for (i, e) in events.iter_mut().enumerate() {
                    e.origin = i as u64;
                }
                let n = events.len() as u64;
                let mut sent = Vec::new();
                let mut last = floor;
                for req in split_requests(events) {
                    let mut queue = vec![req];
                    while let Some(mut req) = queue.pop() {
                        stamp(&mut req, offset, NOW, last);
                        let rest = cut_span(&mut req);
                        if !rest.is_empty() {
                            queue.push(rest);
                        }
                        assert_valid(&req);
                        prop_assert!(last.is_none_or(|l| req[0].timestamp >= l));
                        prop_assert!(
                            req.iter().all(|e| {
                                (NOW - MAX_AGE_MS..=NOW + MAX_AHEAD_MS).contains(&e.timestamp)
                                    || Some(e.timestamp) == last
                            }),
                            "an event's timestamp out of AWS's window"
                        );
                        last = req.last().map(|e| e.timestamp);
                        sent.extend(req.into_iter().map(|e| e.origin));
                    }
                }
                if n > 0 {
                    reach.reached();
                }
                prop_assert_eq!(sent, (0..n).collect::<Vec<_>>());
                Ok(())
            },
        );
    }
}
