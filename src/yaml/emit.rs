//! (the control plane) Writing value trees back as YAML that means the same to every reader. kubectl and Helm read
//! YAML 1.1 (`yes`, `on`, `off`, `y`, `12:30`, `1_000` are booleans and numbers there) while
//! YAML 1.2 writers leave those strings bare; so strings are written bare only
//! when no YAML version can read them as anything else, and quoted otherwise.

use serde_json::{Map, Value};

/// Words YAML 1.1 or 1.2 reads as booleans or null, compared in lower case.
const RESERVED_WORDS: [&str; 10] = [
    "y", "yes", "n", "no", "true", "false", "on", "off", "null", "~",
];

/// One document, block style, ending with a newline.
pub fn to_yaml(v: &Value) -> String {
    let mut out = String::new();
    match v {
        Value::Object(m) if !m.is_empty() => mapping(m, 0, &mut out),
        Value::Array(a) if !a.is_empty() => sequence(a, 0, &mut out),
        other => {
            out.push_str(&scalar(other));
            out.push('\n');
        }
    }
    out
}

/// True when `s` can be written bare and still be read back as this string by a YAML 1.1 or
/// 1.2 parser: letters, digits and `_./=-:` only, starting with a letter, `/` or `_` (or `-`
/// then a letter or `-`, as in `--container`; or a digit in a string no number can be), not
/// ending with `:`, not a reserved word.
pub fn plain_safe(s: &str) -> bool {
    let mut chars = s.chars();
    let start_ok = match chars.next() {
        Some(c) if c.is_ascii_alphabetic() || c == '/' || c == '_' => true,
        Some('-') => matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '-'),
        // A digit first: a `/` (no number, timestamp or sexagesimal has one:
        // `123456789012.dkr.ecr.eu-west-1.amazonaws.com/hooklog:0.1.0`), or only digits and
        // letters with a letter that is neither a hex digit nor a radix prefix (`10m`, `64Mi`,
        // `7s`). Anything with `-`, `:`, `.` or `_` may be a timestamp (`2024-01-01T10:00:00Z`
        // is a datetime to YAML 1.1 tools), a float or a sexagesimal.
        Some(c) if c.is_ascii_digit() => {
            s.contains('/')
                || (s.chars().all(|c| c.is_ascii_alphanumeric())
                    && s.chars()
                        .any(|c| c.is_ascii_alphabetic() && !"aAbBcCdDeEfFxXoO".contains(c)))
        }
        _ => false,
    };
    start_ok
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "_./=-:".contains(c))
        && !s.ends_with(':')
        && !RESERVED_WORDS.contains(&s.to_ascii_lowercase().as_str())
}

/// Bare when safe; single-quoted (only `'` is escaped, as `''`) when it holds no control
/// characters; double-quoted otherwise.
pub fn string(s: &str) -> String {
    if plain_safe(s) {
        s.to_string()
    } else if !s.chars().any(needs_escape) {
        format!("'{}'", s.replace('\'', "''"))
    } else {
        double_quoted(s)
    }
}

/// Characters YAML does not allow written as they are (C0 and C1 controls, DEL, the byte order
/// mark, the non-characters U+FFFE and U+FFFF): a quoted string escapes them.
pub fn needs_escape(c: char) -> bool {
    c.is_control() || matches!(c, '\u{feff}' | '\u{fffe}' | '\u{ffff}')
}

/// A double-quoted string, as JSON and YAML both read it: `"`, `\\` and every character of
/// [`needs_escape`] escaped, everything else as it is.
pub fn double_quoted(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if needs_escape(c) => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A scalar or an empty collection, on one line.
fn scalar(v: &Value) -> String {
    match v {
        Value::Null => "null".to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => string(s),
        Value::Array(_) => "[]".to_string(),
        Value::Object(_) => "{}".to_string(),
    }
}

fn is_block(v: &Value) -> bool {
    match v {
        Value::Array(a) => !a.is_empty(),
        Value::Object(m) => !m.is_empty(),
        _ => false,
    }
}

fn indent(n: usize, out: &mut String) {
    out.extend(std::iter::repeat_n(' ', n));
}

/// A mapping at `level`; its first key is written without indentation when the caller already
/// wrote it (after `- `).
fn mapping(m: &Map<String, Value>, level: usize, out: &mut String) {
    for (i, (k, v)) in m.iter().enumerate() {
        if i > 0 || !out.ends_with("- ") {
            indent(level, out);
        }
        out.push_str(&string(k));
        out.push(':');
        match v {
            Value::Object(inner) if !inner.is_empty() => {
                out.push('\n');
                mapping(inner, level + 2, out);
            }
            // kubectl's style: a sequence under a key at the key's own indentation.
            Value::Array(items) if !items.is_empty() => {
                out.push('\n');
                sequence(items, level, out);
            }
            other => {
                out.push(' ');
                out.push_str(&scalar(other));
                out.push('\n');
            }
        }
    }
}

fn sequence(items: &[Value], level: usize, out: &mut String) {
    for item in items {
        indent(level, out);
        out.push_str("- ");
        match item {
            Value::Object(m) if is_block(item) => mapping(m, level + 2, out),
            Value::Array(a) if is_block(item) => {
                out.truncate(out.len() - 1);
                out.push('\n');
                sequence(a, level + 2, out);
            }
            other => {
                out.push_str(&scalar(other));
                out.push('\n');
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn round_trip(v: &Value) -> Value {
        let yaml = to_yaml(v);
        let docs = crate::yaml::tree::parse(&yaml).unwrap_or_else(|e| panic!("{e:?}:\n{yaml}"));
        docs.into_iter()
            .next()
            .map(|d| d.value)
            .unwrap_or(Value::Null)
    }

    #[test]
    fn strings_yaml_1_1_would_misread_are_quoted() {
        for s in [
            "yes",
            "on",
            "Off",
            "y",
            "N",
            "12:30",
            "1_000",
            "0x10",
            "1e3",
            "010",
            ".5",
            "+1",
            "~",
            "",
            " x",
            "a: b",
            "#c",
            "x #y",
            "-1",
            "- a",
            "*a",
            "&a",
            "!t",
            "a\nb",
            "\"q\"",
            "key:",
            "2024-03-01T10:00:00Z",
            "2024-03-01",
            "1_0m",
            "0x1f",
            "del\u{7f}",
            "c1\u{85}",
        ] {
            assert!(!plain_safe(s), "{s:?} must be quoted");
            assert_eq!(round_trip(&json!({ "k": s }))["k"], s);
        }
        for s in [
            "hooklog",
            "/hooklog/bin/hooklog",
            "--container",
            "-c",
            "envoy:v1.31.0",
            "registry.example.com/a/b:1.0",
            "a=b",
            "metadata.name",
        ] {
            assert!(plain_safe(s), "{s:?} can be bare");
        }
    }

    #[test]
    fn round_trips_and_keeps_order() {
        let v = json!({
            "z": 1, "a": [1, "two", {"b": [], "c": {}, "d": null, "e": true}],
            "nested": [[1, 2], []], "empty": "", "f": 1.5, "multi": "a\nb\n",
            "on": {"x": [{"y": [{"z": "deep"}]}]}
        });
        let back = round_trip(&v);
        assert_eq!(back, v);
        let keys: Vec<&String> = back.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["z", "a", "nested", "empty", "f", "multi", "on"]);
    }
}
