//! (the sidecar) CloudWatch's clock as the pod sees it: the offset between the pod's clock and the `Date` of
//! CloudWatch's answers, learned from every answer (success or error), used for the events'
//! timestamps and for signing requests.
//!
//! A pod's clock can be wrong (a node without NTP, a paused VM). CloudWatch judges timestamps
//! ("more than 2 hours in the future", "older than 14 days") and SigV4 signatures ("Signature
//! expired") by its own clock, so the pod's clock alone can neither see the problem nor avoid it.

use std::sync::atomic::{AtomicI64, Ordering};

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

/// The offset from the pod's clock to CloudWatch's, shared by the sink and the client, which
/// learns it from every answer and signs with it.
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
    pub fn observe(&self, sent_ms: i64, received_ms: i64, date_ms: i64) {
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

/// Days from 1970-01-01 to the civil date (Howard Hinnant's `days_from_civil`).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// ms since the epoch of a UTC civil time, when every field is in range.
fn civil_ms(y: i64, mo: i64, d: i64, h: i64, mi: i64, s: i64) -> Option<i64> {
    let ok = (1..=12).contains(&mo)
        && (1..=31).contains(&d)
        && (0..=23).contains(&h)
        && (0..=59).contains(&mi)
        && (0..=60).contains(&s);
    ok.then(|| ((days_from_civil(y, mo, d) * 24 + h) * 60 + mi) * 60_000 + s * 1000)
}

fn digits(s: &str) -> Option<i64> {
    (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
        .then(|| s.parse().ok())
        .flatten()
}

/// Parses an HTTP `Date` in IMF-fixdate, the only form RFC 9110 (section 5.6.7) lets a server
/// send (`Sun, 06 Nov 1994 08:49:37 GMT`), to ms since the epoch.
pub fn parse_http_date(value: &str) -> Option<i64> {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let mut f = value.trim().split(' ');
    let (_day_name, d, mo, y, hms, gmt) = (
        f.next()?.strip_suffix(',')?,
        f.next()?,
        f.next()?,
        f.next()?,
        f.next()?,
        f.next()?,
    );
    if gmt != "GMT" || f.next().is_some() || d.len() != 2 || y.len() != 4 {
        return None;
    }
    let mo = MONTHS.iter().position(|m| *m == mo)? as i64 + 1;
    let mut t = hms.split(':');
    let (h, mi, s) = (t.next()?, t.next()?, t.next()?);
    if t.next().is_some() || [h, mi, s].iter().any(|x| x.len() != 2) {
        return None;
    }
    civil_ms(
        digits(y)?,
        mo,
        digits(d)?,
        digits(h)?,
        digits(mi)?,
        digits(s)?,
    )
}

/// Parses an RFC 3339 time (`2026-12-02T03:00:00Z`, fractions and `+hh:mm` offsets taken), as
/// STS's and the metadata services' `Expiration` are written, to ms since the epoch.
pub fn parse_rfc3339_ms(value: &str) -> Option<i64> {
    let v = value.trim();
    if v.len() < 20 || !v.is_char_boundary(19) {
        return None;
    }
    let (date, rest) = v.split_at(19);
    let b = date.as_bytes();
    if b[4] != b'-'
        || b[7] != b'-'
        || !matches!(b[10], b'T' | b't' | b' ')
        || b[13] != b':'
        || b[16] != b':'
    {
        return None;
    }
    let base = civil_ms(
        digits(&date[0..4])?,
        digits(&date[5..7])?,
        digits(&date[8..10])?,
        digits(&date[11..13])?,
        digits(&date[14..16])?,
        digits(&date[17..19])?,
    )?;
    let (frac, zone) = match rest.strip_prefix('.') {
        Some(r) => {
            let n = r.bytes().take_while(u8::is_ascii_digit).count();
            (&r[..n], &r[n..])
        }
        None => ("", rest),
    };
    if rest.starts_with('.') && frac.is_empty() {
        return None;
    }
    let ms = frac
        .bytes()
        .take(3)
        .chain(std::iter::repeat(b'0'))
        .take(3)
        .fold(0i64, |acc, d| acc * 10 + i64::from(d - b'0'));
    let offset_min = match zone {
        "Z" | "z" => 0,
        z if z.len() == 6
            && z.is_ascii()
            && (z.starts_with('+') || z.starts_with('-'))
            && &z[3..4] == ":" =>
        {
            let m = digits(&z[1..3])? * 60 + digits(&z[4..6])?;
            if z.starts_with('-') { -m } else { m }
        }
        _ => return None,
    };
    Some(base + ms - offset_min * 60_000)
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
    fn the_latest_answer_wins() {
        let clock = ServerClock::default();
        assert_eq!(clock.offset_ms(), 0);
        clock.observe(T, T + 10, T - 3_600_000);
        assert!((clock.offset_ms() + 3_600_000).abs() <= 1_000);
        assert!((clock.now_ms() - crate::timefmt::now_ms() + 3_600_000).abs() <= 2_000);
        clock.observe(T, T + 10, T);
        assert_eq!(clock.offset_ms(), 0);
    }

    #[test]
    fn http_dates_round_trip_through_the_formatter_for_every_day() {
        // An independent oracle: timefmt's civil_from_days, the other direction.
        const NAMES: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
        const MONTHS: [&str; 12] = [
            "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
        ];
        for day in (0..80_000i64).step_by(7) {
            let ms = day * 86_400_000 + 12 * 3_600_000 + 34 * 60_000 + 56_000;
            let iso = String::from_utf8(crate::timefmt::rfc3339_ms(ms).to_vec()).unwrap();
            assert_eq!(parse_rfc3339_ms(&iso), Some(ms), "{iso}");
            let (y, m, d) = (&iso[0..4], &iso[5..7], &iso[8..10]);
            let http = format!(
                "{}, {d} {} {y} 12:34:56 GMT",
                NAMES[day.rem_euclid(7) as usize],
                MONTHS[m.parse::<usize>().unwrap() - 1]
            );
            assert_eq!(parse_http_date(&http), Some(ms), "{http}");
        }
    }

    #[test]
    fn rfc3339_takes_fractions_and_offsets_and_refuses_the_rest() {
        assert_eq!(parse_rfc3339_ms("2026-01-01T00:00:00Z"), Some(T));
        assert_eq!(parse_rfc3339_ms("2026-01-01T00:00:00.5Z"), Some(T + 500));
        assert_eq!(
            parse_rfc3339_ms("2026-01-01T00:00:00.123456Z"),
            Some(T + 123)
        );
        assert_eq!(parse_rfc3339_ms("2026-01-01T01:00:00+01:00"), Some(T));
        assert_eq!(parse_rfc3339_ms("2025-12-31T23:00:00-01:00"), Some(T));
        for bad in [
            "",
            "2026-01-01",
            "2026-01-01T00:00:00",
            "2026-13-01T00:00:00Z",
            "2026-01-01T24:00:00Z",
            "2026-01-01T00:00:00.Z",
            "2026-01-01T00:00:00+0100",
            "2026-01-01T00:00:00ZZ",
            "20é6-01-01T00:00:00Z",
            "2026-01-01T00:00:00é",
            "2026-01-01T00:00:00+0é00",
        ] {
            assert_eq!(parse_rfc3339_ms(bad), None, "{bad}");
        }
    }

    #[test]
    fn http_dates_refuse_the_obsolete_forms_and_garbage() {
        for bad in [
            "Thursday, 01-Jan-26 00:00:00 GMT",
            "Thu Jan  1 00:00:00 2026",
            "Thu, 01 Jan 2026 00:00:00 UTC",
            "Thu, 1 Jan 2026 00:00:00 GMT",
            "Thu, 01 Foo 2026 00:00:00 GMT",
            "Thu, 01 Jan 2026 25:00:00 GMT",
            "Thu, 01 Jan 2026 00:00 GMT",
            "Thu, 01 Jan 2026 00:00:00 GMT extra",
            "Thu, 0é Jan 2026 00:00:00 GMT",
        ] {
            assert_eq!(parse_http_date(bad), None, "{bad}");
        }
    }
}
