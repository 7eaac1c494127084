//! (below both) Durations as people write them in pod specs (`50`, `0.5`, `50s`, `1m30s`, `250ms`, `1h`), and
//! waiting for an optional deadline.

use std::time::Duration;

/// Why a duration could not be read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("invalid duration {input:?}: {why} (examples: 50, 0.5, 50s, 1m30s, 250ms, 1d)")]
pub struct DurationError {
    input: String,
    why: &'static str,
}

/// Parses a duration. A bare number is seconds (as `sleep` takes it); otherwise a sequence of
/// `<number><unit>` with units `d`, `h`, `m`, `s`, `ms`.
pub fn parse(input: &str) -> Result<Duration, DurationError> {
    let err = |why| DurationError {
        input: input.to_string(),
        why,
    };
    let s = input.trim();
    if s.is_empty() {
        return Err(err("empty"));
    }
    if let Ok(secs) = s.parse::<f64>() {
        return seconds(secs).ok_or_else(|| err("must be a finite, non-negative number"));
    }
    let mut total = 0f64;
    let mut rest = s;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(|| err("a number needs a unit"))?;
        if num_len == 0 {
            return Err(err("expected a number"));
        }
        let value: f64 = rest[..num_len].parse().map_err(|_| err("bad number"))?;
        rest = &rest[num_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let scale = match &rest[..unit_len] {
            "d" => 86400.0,
            "h" => 3600.0,
            "m" => 60.0,
            "s" => 1.0,
            "ms" => 0.001,
            _ => return Err(err("unknown unit")),
        };
        total += value * scale;
        rest = &rest[unit_len..];
    }
    seconds(total).ok_or_else(|| err("out of range"))
}

fn seconds(secs: f64) -> Option<Duration> {
    (secs.is_finite() && (0.0..1e12).contains(&secs)).then(|| Duration::from_secs_f64(secs))
}

/// Sleeps until `at`, or forever when there is no deadline (a `select!` arm that never fires).
pub async fn sleep_until_opt(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// What `hooklog sleep` takes: a duration as [`parse`] reads it, or `infinity` (`inf`), which
/// GNU sleep takes and `sleep infinity` keeps a debugging container alive with.
pub fn parse_sleep(input: &str) -> Result<Duration, DurationError> {
    match input.trim() {
        "infinity" | "inf" => Ok(Duration::MAX),
        s => parse(s),
    }
}

/// clap value parser for `hooklog sleep`.
pub fn clap_parse_sleep(s: &str) -> Result<Duration, String> {
    parse_sleep(s).map_err(|e| e.to_string())
}

/// clap value parser.
pub fn clap_parse(s: &str) -> Result<Duration, String> {
    parse(s).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_the_forms_pods_use() {
        assert_eq!(parse("50"), Ok(Duration::from_secs(50)));
        assert_eq!(parse("0.5"), Ok(Duration::from_millis(500)));
        assert_eq!(parse("50s"), Ok(Duration::from_secs(50)));
        assert_eq!(parse("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse("2d"), Ok(Duration::from_secs(2 * 86400)));
        assert_eq!(parse("100000d"), Ok(Duration::from_secs(100_000 * 86400)));
    }

    #[test]
    fn sleep_takes_infinity_as_gnu_sleep_does() {
        assert_eq!(parse_sleep("infinity"), Ok(Duration::MAX));
        assert_eq!(parse_sleep("inf"), Ok(Duration::MAX));
        assert_eq!(parse_sleep("1m30s"), Ok(Duration::from_secs(90)));
        assert!(parse_sleep("forever").is_err());
        // Only sleep takes it: a grace period of infinity is a mistake.
        assert!(parse("infinity").is_err());
    }

    #[test]
    fn rejects_garbage() {
        for bad in ["", "-1", "abc", "5x", "s", "1m30", "inf", "NaN"] {
            assert!(parse(bad).is_err(), "{bad:?} should be rejected");
        }
    }
}
