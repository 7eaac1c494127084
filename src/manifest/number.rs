//! (the control plane) The one checked reading of the numbers a manifest holds: every count of seconds that check,
//! inject and the webhook take from a pod spec (`sleep.seconds`, `terminationGracePeriodSeconds`,
//! `sleep 1e20` in a hook, `hooklog sleep infinity`) comes through here, into the stated range
//! `0..=MAX_SECONDS`, so that no sum or product of them can overflow (issue 26: `sleep 1e20`
//! aborted the webhook).

use std::time::Duration;

use serde_json::Value;

/// The longest time kept: 10^12 s (about 31,700 years), the bound `hooklog`'s own duration
/// parser has. Longer is as good as forever for a hook or a grace period, so a longer value is
/// clamped to this; a few hundred thousand of them still add up within `u64` seconds, and the
/// budget's `period * 3` cannot overflow.
pub const MAX_SECONDS: u64 = 1_000_000_000_000;
/// [`MAX_SECONDS`] as a duration.
pub const MAX: Duration = Duration::from_secs(MAX_SECONDS);

/// Whole seconds from JSON, as the API server takes them (`int64` fields): an integer at least
/// 0, clamped to [`MAX_SECONDS`]. A negative, fractional or quoted number is `None` (the API
/// server refuses those, so the caller's default is right).
pub fn json_seconds(v: &Value) -> Option<u64> {
    let n = v.as_number()?;
    if let Some(u) = n.as_u64() {
        return Some(u.min(MAX_SECONDS));
    }
    // Integers above u64 (serde_json reads them as f64): at least MAX either way.
    match n.as_f64() {
        Some(f) if f.is_finite() && f >= 0.0 && f.fract() == 0.0 => Some(MAX_SECONDS),
        _ => None,
    }
}

/// Seconds written as a decimal (`sleep 0.5`, `sleep 1e20`, a product with a unit's scale):
/// NaN and negative numbers are `None`; anything above [`MAX_SECONDS`] (infinity too) is
/// [`MAX`].
pub fn float_seconds(secs: f64) -> Option<Duration> {
    if secs.is_nan() || secs < 0.0 {
        return None;
    }
    if secs >= MAX_SECONDS as f64 {
        return Some(MAX);
    }
    Some(Duration::try_from_secs_f64(secs).map_or(MAX, clamp))
}

/// A duration within [`MAX`] (`hooklog sleep infinity` is `Duration::MAX`).
pub fn clamp(d: Duration) -> Duration {
    d.min(MAX)
}

/// `a + b`, at most [`MAX`].
pub fn add(a: Duration, b: Duration) -> Duration {
    clamp(a.saturating_add(b))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn json_seconds_at_every_edge() {
        assert_eq!(json_seconds(&json!(0)), Some(0));
        assert_eq!(json_seconds(&json!(30)), Some(30));
        assert_eq!(json_seconds(&json!(u64::MAX)), Some(MAX_SECONDS));
        assert_eq!(json_seconds(&json!(i64::MAX)), Some(MAX_SECONDS));
        assert_eq!(json_seconds(&json!(1e300)), Some(MAX_SECONDS));
        for bad in [
            json!(-1),
            json!(i64::MIN),
            json!(0.5),
            json!("30"),
            json!(null),
        ] {
            assert_eq!(json_seconds(&bad), None, "{bad}");
        }
    }

    #[test]
    fn float_seconds_at_every_edge() {
        assert_eq!(float_seconds(0.5), Some(Duration::from_millis(500)));
        assert_eq!(float_seconds(1e20), Some(MAX));
        assert_eq!(float_seconds(f64::INFINITY), Some(MAX));
        assert_eq!(float_seconds(f64::MAX), Some(MAX));
        assert_eq!(float_seconds(f64::MIN_POSITIVE), Some(Duration::ZERO));
        assert_eq!(float_seconds(f64::NAN), None);
        assert_eq!(float_seconds(-1.0), None);
        assert_eq!(float_seconds(-0.0), Some(Duration::ZERO));
        assert_eq!(add(MAX, MAX), MAX);
        assert_eq!(add(Duration::MAX, Duration::MAX), MAX);
    }
}
