//! (below both) How flag values are read where clap's own parsers do not fit: booleans as pod
//! specs write them ([`env_bool`]), durations of at most a day ([`bounded_duration`]), octal
//! modes and `KEY=VALUE` fields.

use std::time::Duration;

use crate::duration::clap_parse as duration;

/// Longest duration any flag takes: larger values are mistakes (and could overflow a deadline).
pub const MAX_DURATION: Duration = Duration::from_secs(24 * 3600);

/// Words a pod spec uses for true and false in an environment variable, compared without case:
/// what people write (`1`, `yes`, `true`) beside what clap's own flags take.
const TRUE_WORDS: [&str; 3] = ["1", "yes", "true"];
/// The false half of [`TRUE_WORDS`].
const FALSE_WORDS: [&str; 3] = ["0", "no", "false"];

/// The parser of a boolean flag that `var` may set: `1`/`0`, `yes`/`no`, `true`/`false` in any
/// case; an error names the variable, since a flag without a value can only get a bad one from
/// there (a pod that crash-loops on `HOOKLOG_NATIVE_SIDECAR=on` must say where to look).
pub fn env_bool(
    var: &'static str,
) -> impl Fn(&str) -> Result<bool, String> + Clone + Send + Sync + 'static {
    move |s: &str| {
        let word = s.trim().to_ascii_lowercase();
        if TRUE_WORDS.contains(&word.as_str()) {
            Ok(true)
        } else if FALSE_WORDS.contains(&word.as_str()) {
            Ok(false)
        } else {
            Err(format!(
                "{var}={s:?} is not a boolean: use 1, 0, yes, no, true or false"
            ))
        }
    }
}

/// A duration of at most [`MAX_DURATION`].
pub fn bounded_duration(s: &str) -> Result<Duration, String> {
    let d = duration(s)?;
    if d > MAX_DURATION {
        return Err(format!("{s:?} is longer than the maximum of 24h"));
    }
    Ok(d)
}

pub(crate) fn parse_mode(s: &str) -> Result<u32, String> {
    let digits = s.trim_start_matches("0o");
    u32::from_str_radix(digits, 8)
        .ok()
        .filter(|m| *m <= 0o777)
        .ok_or_else(|| format!("{s:?} is not an octal mode such as 666 or 0660"))
}

pub(crate) fn parse_field(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
        _ => Err(format!("{s:?} is not KEY=VALUE")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The words pod specs write for booleans, in any case, and an error that names the
    /// variable (main exited 64 on `HOOKLOG_NATIVE_SIDECAR=1`).
    #[test]
    fn boolean_variables_take_what_pod_specs_write() {
        let parse = env_bool("HOOKLOG_NATIVE_SIDECAR");
        for (word, want) in [
            ("1", true),
            ("0", false),
            ("yes", true),
            ("no", false),
            ("true", true),
            ("false", false),
            ("TRUE", true),
            ("No", false),
            ("Yes", true),
            ("FALSE", false),
        ] {
            assert_eq!(parse(word), Ok(want), "{word}");
        }
        for bad in ["maybe", "", "2", "on!"] {
            let err = parse(bad).expect_err("not a boolean");
            assert!(err.contains("HOOKLOG_NATIVE_SIDECAR"), "{bad}: {err}");
        }
    }

    #[test]
    fn modes_and_fields_parse() {
        assert_eq!(parse_mode("666"), Ok(0o666));
        assert_eq!(parse_mode("0o640"), Ok(0o640));
        assert!(parse_mode("999").is_err());
        assert!(parse_mode("1777").is_err());
        assert_eq!(parse_field("a=b=c"), Ok(("a".into(), "b=c".into())));
        assert!(parse_field("=x").is_err());
    }
}
