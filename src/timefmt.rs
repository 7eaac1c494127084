//! (below both) Wall-clock timestamps: RFC 3339 UTC with millisecond precision, formatted without allocation.

use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch, now. A clock before 1970 reads as 0.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// Length of `YYYY-MM-DDTHH:MM:SS.mmmZ`.
pub const RFC3339_MS_LEN: usize = 24;

/// Formats `ms` (since the epoch) as `YYYY-MM-DDTHH:MM:SS.mmmZ`.
pub fn rfc3339_ms(ms: i64) -> [u8; RFC3339_MS_LEN] {
    let ms = ms.max(0);
    let secs = ms.div_euclid(1000);
    let millis = ms.rem_euclid(1000) as u32;
    let days = secs.div_euclid(86_400);
    let sod = secs.rem_euclid(86_400) as u32;
    let (y, m, d) = civil_from_days(days);
    let mut out = *b"0000-00-00T00:00:00.000Z";
    put(&mut out[0..4], y.clamp(0, 9999) as u32);
    put(&mut out[5..7], m);
    put(&mut out[8..10], d);
    put(&mut out[11..13], sod / 3600);
    put(&mut out[14..16], sod / 60 % 60);
    put(&mut out[17..19], sod % 60);
    put(&mut out[20..23], millis);
    out
}

fn put(dst: &mut [u8], mut v: u32) {
    for b in dst.iter_mut().rev() {
        *b = b'0' + (v % 10) as u8;
        v /= 10;
    }
}

/// Howard Hinnant's `civil_from_days`: days since 1970-01-01 to (year, month, day).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fmt(ms: i64) -> String {
        String::from_utf8(rfc3339_ms(ms).to_vec()).unwrap()
    }

    #[test]
    fn formats_known_instants() {
        assert_eq!(fmt(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(fmt(951_782_400_123), "2000-02-29T00:00:00.123Z");
        assert_eq!(fmt(1_796_000_000_999), "2026-11-30T00:53:20.999Z");
        assert_eq!(fmt(4_102_444_799_000), "2099-12-31T23:59:59.000Z");
    }

    #[test]
    fn now_is_after_2024() {
        assert!(now_ms() > 1_704_067_200_000);
    }
}
