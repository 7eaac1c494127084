//! (the sidecar) Which failed Event calls are tried again, and how long to wait first: client-go's
//! event broadcaster's policy (k8s.io/client-go `tools/events/event_broadcaster.go`,
//! `attemptRecording` and `recordEvent`), its waits fitted into a pod's grace period.
//!
//! client-go retries what never reached the API server or got no answer (a transport error) and
//! gives up an Event the API server rejected. Its REST client has already retried a 429 and a 5xx
//! by their `Retry-After` before the broadcaster sees them; hooklog's client makes one try per
//! call, so those are retried here. Only an answer that every later call would get too (401, 403:
//! the token or the Role; 404: the namespace is gone) ends the calls; any other rejection gives up
//! that Event alone.

use std::time::Duration;

use super::api::CallError;

/// Tries of one Event at most: client-go's `maxTriesPerEvent` (tools/events and tools/record).
pub const MAX_TRIES_PER_EVENT: u32 = 12;

/// Longest wait between two tries: client-go's `defaultSleepDuration`, which it waits between
/// every two tries. A pod's grace period (30 s by default) holds few of those, so hooklog starts
/// at [`FIRST_SLEEP`] and doubles up to it.
pub const MAX_SLEEP: Duration = Duration::from_secs(10);

/// The wait before the second try. An API server restarting behind its Service (an upgrade)
/// refuses connections for a few seconds: 200 ms doubling reaches 3.2 s by the fifth try.
pub const FIRST_SLEEP: Duration = Duration::from_millis(200);

/// Most a wait is lengthened at random, as a fraction of it: client-go's
/// `wait.Jitter(e.sleepDuration, 0.25)`, so the pods of a Deployment do not retry in step.
pub const JITTER: f64 = 0.25;

/// What to do after a failed call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Try the Event again, waiting at least `after` when the API server said so.
    Retry {
        /// The answer's `Retry-After`.
        after: Option<Duration>,
    },
    /// Give up this Event; the next ones are still posted (a rejection of this one only).
    GiveUp,
    /// Make no more calls this run: every later one would be refused the same way.
    Stop,
}

/// The verdict on `e`, a failed create or series update.
pub fn verdict(e: &CallError) -> Verdict {
    match e {
        // No answer in time, a refused or reset connection, TLS: a transport error.
        CallError::Deadline(_) | CallError::Other(_) => Verdict::Retry { after: None },
        CallError::Status {
            status,
            retry_after,
            ..
        } => match status {
            // The token is not taken, or the Role is missing; the namespace does not exist.
            401 | 403 | 404 => Verdict::Stop,
            // Request Timeout, Too Many Requests (the API server's max-in-flight and priority
            // and fairness limits), and the server's own failures (an etcd leader election, an
            // upgrade, a proxy in front of it).
            408 | 429 | 500..=599 => Verdict::Retry {
                after: *retry_after,
            },
            // Anything else is about this Event (422: invalid; 409: the name is taken).
            _ => Verdict::GiveUp,
        },
    }
}

/// The wait after the `tries`-th failed try (1 for the first): [`FIRST_SLEEP`] doubled per try
/// up to [`MAX_SLEEP`], lengthened by up to [`JITTER`] of itself with `unit` (uniform in 0..1);
/// never shorter than the API server's `Retry-After`.
pub fn sleep(tries: u32, retry_after: Option<Duration>, unit: f64) -> Duration {
    let doubled = FIRST_SLEEP.saturating_mul(1u32 << tries.saturating_sub(1).min(16));
    let base = doubled.min(MAX_SLEEP);
    // NaN would panic in `mul_f64`: taken as no jitter.
    let unit = if unit.is_nan() {
        0.0
    } else {
        unit.clamp(0.0, 1.0)
    };
    let jittered = base.mul_f64(1.0 + JITTER * unit);
    jittered.max(retry_after.unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(status: u16, retry_after: Option<u64>) -> CallError {
        CallError::Status {
            status,
            body: String::new(),
            retry_after: retry_after.map(Duration::from_secs),
        }
    }

    #[test]
    fn transport_errors_throttling_and_server_errors_are_retried() {
        assert_eq!(
            verdict(&CallError::Deadline(2000)),
            Verdict::Retry { after: None }
        );
        assert_eq!(
            verdict(&CallError::Other(anyhow::anyhow!("connection reset"))),
            Verdict::Retry { after: None }
        );
        assert_eq!(
            verdict(&status(429, Some(3))),
            Verdict::Retry {
                after: Some(Duration::from_secs(3))
            }
        );
        for s in [408, 500, 502, 503, 504, 599] {
            assert_eq!(
                verdict(&status(s, None)),
                Verdict::Retry { after: None },
                "{s}"
            );
        }
    }

    #[test]
    fn only_authorization_and_not_found_stop_the_calls_other_rejections_give_up_one_event() {
        for s in [401, 403, 404] {
            assert_eq!(verdict(&status(s, None)), Verdict::Stop, "{s}");
        }
        for s in [400, 409, 410, 413, 415, 422] {
            assert_eq!(verdict(&status(s, None)), Verdict::GiveUp, "{s}");
        }
    }

    #[test]
    fn waits_double_from_the_first_up_to_client_gos_and_honour_retry_after() {
        assert_eq!(sleep(1, None, 0.0), FIRST_SLEEP);
        assert_eq!(sleep(2, None, 0.0), FIRST_SLEEP * 2);
        assert_eq!(sleep(MAX_TRIES_PER_EVENT, None, 0.0), MAX_SLEEP);
        assert_eq!(sleep(u32::MAX, None, 1.0), MAX_SLEEP.mul_f64(1.0 + JITTER));
        assert_eq!(sleep(0, None, 0.0), FIRST_SLEEP);
        assert_eq!(
            sleep(1, Some(Duration::from_secs(7)), 0.5),
            Duration::from_secs(7)
        );
        // A unit out of range is clamped: the jitter never shortens nor more than lengthens.
        assert_eq!(sleep(1, None, -3.0), FIRST_SLEEP);
        assert_eq!(sleep(1, None, f64::NAN), FIRST_SLEEP);
        assert_eq!(
            sleep(1, None, f64::INFINITY),
            FIRST_SLEEP.mul_f64(1.0 + JITTER)
        );
    }

    proptest::proptest! {
        /// Every wait is within [base, base * (1 + JITTER)] of its try's base, or the server's
        /// Retry-After when longer.
        #[test]
        fn every_wait_is_its_base_jittered_by_at_most_a_quarter(
            tries in 0u32..100, unit in 0.0f64..1.0, after in proptest::option::of(0u64..100_000),
        ) {
            let after = after.map(Duration::from_millis);
            let w = sleep(tries, after, unit);
            let base = FIRST_SLEEP.saturating_mul(1 << tries.saturating_sub(1).min(16)).min(MAX_SLEEP);
            proptest::prop_assert!(w >= base);
            proptest::prop_assert!(w >= after.unwrap_or_default());
            proptest::prop_assert!(w <= base.mul_f64(1.0 + JITTER).max(after.unwrap_or_default()));
        }
    }
}
