//! (the sidecar) CloudWatch's clock as the pod sees it: the offset between the pod's clock and the `Date` of
//! CloudWatch's answers, learned from every answer (success or error), used for the events'
//! timestamps and, as the SDK's time source, for signing requests.
//!
//! A pod's clock can be wrong (a node without NTP, a paused VM). CloudWatch judges timestamps
//! ("more than 2 hours in the future", "older than 14 days") and SigV4 signatures ("Signature
//! expired") by its own clock, so the pod's clock alone can neither see the problem nor avoid it.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, SystemTime};

use aws_sdk_cloudwatchlogs::config::interceptors::{
    BeforeDeserializationInterceptorContextRef, BeforeTransmitInterceptorContextRef,
};
use aws_sdk_cloudwatchlogs::config::{ConfigBag, Intercept, RuntimeComponents};
use aws_smithy_async::time::TimeSource;
use aws_smithy_types::DateTime;
use aws_smithy_types::config_bag::{Storable, StoreReplace};
use aws_smithy_types::date_time::Format;

/// Smallest offset taken as a real difference between the clocks. `Date` counts whole seconds
/// (RFC 9110, section 5.6.7: "HTTP-date ... second"), so one answer places CloudWatch's clock
/// within about half a second, plus half the round trip (added per answer); 2 s leaves margin.
pub const SKEW_MIN_MS: i64 = 2_000;

/// A change of the offset at least this large is logged at the default level (a pod clock a
/// minute or more off matters to whoever reads the records); smaller ones, and the noise of an
/// offset near [`SKEW_MIN_MS`], only at debug. The offset in use is in the sink's last line.
const LOUD_CHANGE_MS: i64 = 60_000;

/// An answer slower than this says too little about when its `Date` was written: ignored. The
/// AWS SDKs use the same bound for their clock skew correction (smithy-rs
/// `aws-runtime/src/service_clock_skew.rs`, `MAX_TRUSTED_REQUEST_DURATION`: 15 minutes); an
/// attempt here ends after 10 s anyway (client.rs).
const MAX_TRUSTED_ROUND_TRIP_MS: i64 = 15 * 60 * 1000;

/// The offset from the pod's clock to CloudWatch's, shared by the sink, the SDK's signer (as
/// its time source) and the interceptor that learns it.
#[derive(Debug, Default)]
pub struct ServerClock {
    /// CloudWatch's time minus the pod's, in ms; 0 while they agree (within [`SKEW_MIN_MS`]) or
    /// before any answer.
    offset_ms: AtomicI64,
}

impl ServerClock {
    /// The offset in use: CloudWatch's clock minus the pod's, in ms.
    pub fn offset_ms(&self) -> i64 {
        self.offset_ms.load(Ordering::Relaxed)
    }

    /// CloudWatch's "now" as best known: the pod's clock plus the offset.
    pub fn now_ms(&self) -> i64 {
        crate::timefmt::now_ms().saturating_add(self.offset_ms())
    }

    /// Takes one answer into account: sent and received on the pod's clock, `date_ms` from its
    /// `Date`. The latest answer wins, so a pod clock put right (or stepped) is followed.
    fn observe(&self, sent_ms: i64, received_ms: i64, date_ms: i64) {
        let Some(new) = offset_from(sent_ms, received_ms, date_ms) else {
            return;
        };
        let old = self.offset_ms.swap(new, Ordering::Relaxed);
        let change = (new - old).abs();
        if change < SKEW_MIN_MS {
            return;
        }
        if change < LOUD_CHANGE_MS {
            tracing::debug!(
                offset_ms = new,
                was_ms = old,
                "cloudwatch clock offset changed"
            );
        } else if new == 0 {
            tracing::info!(
                was_ms = old,
                "pod clock agrees with cloudwatch's again: timestamps use the pod's clock"
            );
        } else {
            tracing::warn!(
                offset_ms = new,
                "pod clock differs from cloudwatch's: timestamps and signatures use cloudwatch's clock"
            );
        }
    }
}

/// The offset one answer shows (CloudWatch's clock minus the pod's, in ms), or `None` when the
/// answer cannot tell: too slow ([`MAX_TRUSTED_ROUND_TRIP_MS`]) or received before it was sent
/// (the pod's clock stepped meanwhile). `Date` truncates to the second, so CloudWatch's time is
/// taken as `date + 500 ms`, and as written halfway through the round trip (as NTP does, RFC 5905
/// section 8). Below [`SKEW_MIN_MS`] plus half the round trip the clocks count as agreeing: 0.
pub fn offset_from(sent_ms: i64, received_ms: i64, date_ms: i64) -> Option<i64> {
    let round_trip = received_ms - sent_ms;
    if !(0..=MAX_TRUSTED_ROUND_TRIP_MS).contains(&round_trip) {
        return None;
    }
    let raw = date_ms + 500 - (sent_ms + round_trip / 2);
    Some(if raw.abs() > SKEW_MIN_MS + round_trip / 2 {
        raw
    } else {
        0
    })
}

/// Parses an HTTP `Date` (IMF-fixdate, the only form RFC 9110 lets a server send) to ms since
/// the epoch, with the SDK's own parser.
pub fn parse_http_date(value: &str) -> Option<i64> {
    DateTime::from_str(value.trim(), Format::HttpDate)
        .ok()?
        .to_millis()
        .ok()
}

/// The SDK's time source: CloudWatch's clock as best known, so that SigV4 signatures carry a
/// time CloudWatch accepts even when the pod's clock is off.
#[derive(Debug, Clone)]
pub struct ServerTimeSource(pub Arc<ServerClock>);

impl TimeSource for ServerTimeSource {
    fn now(&self) -> SystemTime {
        let now = SystemTime::now();
        let offset = self.0.offset_ms();
        let shift = Duration::from_millis(offset.unsigned_abs());
        let shifted = if offset >= 0 {
            now.checked_add(shift)
        } else {
            now.checked_sub(shift)
        };
        shifted.unwrap_or(now)
    }
}

/// When the current attempt was sent, on the pod's clock (stored per attempt by the SDK).
#[derive(Debug, Clone, Copy)]
struct SentAtMs(i64);

impl Storable for SentAtMs {
    type Storer = StoreReplace<Self>;
}

/// Reads the `Date` of every answer CloudWatch gives and updates the [`ServerClock`].
#[derive(Debug)]
pub struct DateObserver(pub Arc<ServerClock>);

type BoxError = Box<dyn std::error::Error + Send + Sync>;

impl Intercept for DateObserver {
    fn name(&self) -> &'static str {
        "hooklog::ServerClock"
    }

    fn read_before_transmit(
        &self,
        _ctx: &BeforeTransmitInterceptorContextRef<'_>,
        _rc: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        cfg.interceptor_state()
            .store_put(SentAtMs(crate::timefmt::now_ms()));
        Ok(())
    }

    fn read_before_deserialization(
        &self,
        ctx: &BeforeDeserializationInterceptorContextRef<'_>,
        _rc: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let received = crate::timefmt::now_ms();
        let Some(SentAtMs(sent)) = cfg.load::<SentAtMs>().copied() else {
            return Ok(());
        };
        let headers = ctx.response().headers();
        // A cached answer (RFC 9111, section 5.1: `Age`) carries an old `Date`.
        if headers.get("age").is_some() {
            return Ok(());
        }
        // No `Date` (or a bad one): nothing learned; the call itself goes on as usual.
        if let Some(date) = headers.get("date").and_then(parse_http_date) {
            self.0.observe(sent, received, date);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2026-01-01T00:00:00Z.
    const T: i64 = 1_767_225_600_000;

    #[test]
    fn parses_imf_fixdate_and_refuses_the_rest() {
        assert_eq!(parse_http_date("Thu, 01 Jan 2026 00:00:00 GMT"), Some(T));
        assert_eq!(
            parse_http_date("Thu, 01 Jan 2026 00:00:07 GMT "),
            Some(T + 7_000)
        );
        assert_eq!(parse_http_date("2026-01-01T00:00:00Z"), None);
        assert_eq!(parse_http_date(""), None);
    }

    #[test]
    fn agreeing_clocks_give_zero_despite_the_one_second_resolution() {
        // The server's second ticked just before or just after it answered.
        for date in [T - 1_000, T, T + 1_000] {
            assert_eq!(offset_from(T - 40, T + 40, date), Some(0), "date {date}");
        }
    }

    #[test]
    fn a_pod_clock_hours_ahead_or_days_behind_is_measured() {
        let ahead = 3 * 3600 * 1000; // The pod reads 3 h more than CloudWatch.
        let got = offset_from(T + ahead - 100, T + ahead + 100, T).unwrap();
        assert!((got + ahead).abs() <= 1_000, "{got}");
        let behind = 20 * 24 * 3600 * 1000;
        let got = offset_from(T - behind, T - behind + 300, T).unwrap();
        assert!((got - behind).abs() <= 1_000, "{got}");
    }

    #[test]
    fn a_slow_answer_needs_a_larger_offset_to_count() {
        // 3 s off with a 0.2 s round trip counts; with a 4 s round trip it is within the noise.
        assert!(offset_from(T, T + 200, T + 100 + 3_000).unwrap() > 2_000);
        assert_eq!(offset_from(T, T + 4_000, T + 2_000 + 3_000), Some(0));
    }

    #[test]
    fn answers_that_cannot_tell_are_ignored() {
        assert_eq!(offset_from(T, T - 1, T + 9_999_999), None);
        assert_eq!(offset_from(T, T + 16 * 60 * 1000, T), None);
    }

    #[test]
    fn the_latest_answer_wins_and_the_time_source_follows() {
        let clock = Arc::new(ServerClock::default());
        let src = ServerTimeSource(clock.clone());
        let skew = |src: &ServerTimeSource| {
            let d = src.now().duration_since(SystemTime::now());
            match d {
                Ok(d) => d.as_millis() as i64,
                Err(e) => -(e.duration().as_millis() as i64),
            }
        };
        assert!(skew(&src).abs() < 1_000);
        clock.observe(T, T + 10, T - 3_600_000);
        assert!((clock.offset_ms() + 3_600_000).abs() <= 1_000);
        assert!((skew(&src) + 3_600_000).abs() <= 2_000);
        assert!((clock.now_ms() - crate::timefmt::now_ms() + 3_600_000).abs() <= 2_000);
        clock.observe(T, T + 10, T);
        assert_eq!(clock.offset_ms(), 0);
        assert!(skew(&src).abs() < 1_000);
    }
}
