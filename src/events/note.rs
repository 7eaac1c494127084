//! (the sidecar) What an Event says: the reason for an outcome, and the note (the hook's end and the last
//! lines of its output), bounded to what the API server accepts.

use std::borrow::Cow;
use std::collections::VecDeque;

/// Longest `note` the API server accepts in an events.k8s.io/v1 Event, in bytes (`len()` of a
/// Go string): `NoteLengthLimit` in k8s.io/kubernetes/pkg/apis/core/validation/events.go.
pub const NOTE_MAX_BYTES: usize = 1024;

/// Longest first line (how the hook ended): the rest of the note is left to its output.
const HEAD_MAX_BYTES: usize = 400;

/// Output lines kept per container: a note of 1 KiB holds about this many short lines.
pub const TAIL_LINES: usize = 16;

/// Longest output line kept: no line shown can be longer than the whole note.
const LINE_MAX_BYTES: usize = NOTE_MAX_BYTES;

/// What introduces the output lines in a note.
const OUTPUT_HEADER: &str = "\nlast output:";

/// Shortest end of a line shown cut, above the newest (less says nothing).
const MIN_CUT_BYTES: usize = 16;

/// Marks a line whose start was cut to fit.
const CUT_MARK: &str = "…";

/// The Event `reason` for a hook outcome (`failed` gives `PreStopHookFailed`); `None` for `ok`.
/// Reasons are CamelCase as the kubelet's (`FailedPreStopHook`), one per outcome so a field
/// selector finds each.
pub fn reason(outcome: &str) -> Option<&'static str> {
    match outcome {
        "ok" => None,
        "failed" => Some("PreStopHookFailed"),
        "timed_out" => Some("PreStopHookTimedOut"),
        "unfinished" => Some("PreStopHookUnfinished"),
        "missing" => Some("PreStopHookMissing"),
        // The summary counts any other outcome as failed (lifecycle::peers).
        _ => Some("PreStopHookFailed"),
    }
}

/// The last lines of one container's hook output, bounded in count and length.
#[derive(Debug, Default, Clone)]
pub struct Tail {
    /// The lines, oldest first (each at most [`LINE_MAX_BYTES`]).
    lines: VecDeque<String>,
}

impl Tail {
    /// Keeps `line` (its start, when longer than a note) as the newest.
    pub fn push(&mut self, line: &str) {
        if self.lines.len() == TAIL_LINES {
            self.lines.pop_front();
        }
        let line = escape_controls(line.trim_end_matches(['\r', '\n']));
        self.lines
            .push_back(prefix(&line, LINE_MAX_BYTES).to_string());
    }

    /// Forgets the lines (a new run of the hook starts).
    pub fn clear(&mut self) {
        self.lines.clear();
    }

    /// The lines, oldest first.
    pub fn lines(&self) -> impl DoubleEndedIterator<Item = &str> {
        self.lines.iter().map(String::as_str)
    }
}

/// The note: `head` (how the hook ended, at most [`HEAD_MAX_BYTES`]), then as many of the
/// newest `tail` lines as fit, oldest first; never more than [`NOTE_MAX_BYTES`] bytes. The
/// newest line is kept even when it alone is too long: its end is shown, after [`CUT_MARK`].
pub fn note(head: &str, tail: &Tail) -> String {
    let mut out = prefix(&escape_controls(head), HEAD_MAX_BYTES).to_string();
    let mut budget = NOTE_MAX_BYTES.saturating_sub(out.len() + OUTPUT_HEADER.len());
    let mut shown: Vec<String> = Vec::new();
    for line in tail.lines().rev() {
        let need = line.len() + 1;
        if need <= budget {
            budget -= need;
            shown.push(line.to_string());
        } else {
            // The end of the line that does not fit, when there is room for some of it.
            if budget >= CUT_MARK.len() + 1 + MIN_CUT_BYTES || shown.is_empty() {
                let end = suffix(line, budget.saturating_sub(CUT_MARK.len() + 1));
                if !end.is_empty() {
                    shown.push(format!("{CUT_MARK}{end}"));
                }
            }
            break;
        }
    }
    if !shown.is_empty() {
        out.push_str(OUTPUT_HEADER);
        for line in shown.iter().rev() {
            out.push('\n');
            out.push_str(line);
        }
    }
    debug_assert!(out.len() <= NOTE_MAX_BYTES);
    out
}

/// `s` with every control character but the newline (C0, DEL and C1: what a terminal acts on,
/// ESC starting an escape sequence) written as `\xNN`, as the records' JSON escapes them: a
/// note is shown by `kubectl describe` on a terminal.
pub fn escape_controls(s: &str) -> Cow<'_, str> {
    if !s.chars().any(|c| c.is_control() && c != '\n') {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if c.is_control() && c != '\n' {
            out.push_str(&format!("\\x{:02x}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// The longest start of `s` of at most `max` bytes that ends on a character boundary.
pub fn prefix(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// The longest end of `s` of at most `max` bytes that starts on a character boundary.
fn suffix(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut start = s.len() - max;
    while !s.is_char_boundary(start) {
        start += 1;
    }
    &s[start..]
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn tail_of(lines: &[&str]) -> Tail {
        let mut t = Tail::default();
        for l in lines {
            t.push(l);
        }
        t
    }

    #[test]
    fn a_short_output_is_shown_whole_under_the_head() {
        let n = note("envoy: failed", &tail_of(&["one", "two"]));
        assert_eq!(n, "envoy: failed\nlast output:\none\ntwo");
        assert_eq!(note("envoy: failed", &Tail::default()), "envoy: failed");
    }

    #[test]
    fn the_newest_lines_are_kept_and_a_long_last_line_shows_its_end() {
        let long = format!("{}END", "x".repeat(5000));
        let n = note("head", &tail_of(&["old", &long]));
        assert!(n.len() <= NOTE_MAX_BYTES, "{}", n.len());
        // The line kept is the start of the pushed one (a tail line is at most a note long).
        assert!(!n.contains("old"));
        assert!(n.contains(CUT_MARK));
        let many: Vec<String> = (0..100).map(|i| format!("line {i:03}")).collect();
        let refs: Vec<&str> = many.iter().map(String::as_str).collect();
        let n = note("head", &tail_of(&refs));
        assert!(n.ends_with("line 099"), "{n}");
        assert!(n.contains(&format!("line {:03}", 100 - TAIL_LINES)), "{n}");
        assert!(!n.contains(&format!("line {:03}", 99 - TAIL_LINES)), "{n}");
    }

    #[test]
    fn reasons_name_each_outcome_and_ok_has_none() {
        assert_eq!(reason("ok"), None);
        assert_eq!(reason("failed"), Some("PreStopHookFailed"));
        assert_eq!(reason("timed_out"), Some("PreStopHookTimedOut"));
        assert_eq!(reason("unfinished"), Some("PreStopHookUnfinished"));
        assert_eq!(reason("missing"), Some("PreStopHookMissing"));
        assert_eq!(reason("success"), Some("PreStopHookFailed"));
    }

    #[test]
    fn control_characters_are_escaped_and_newlines_kept() {
        assert_eq!(
            escape_controls("\u{1b}[31mred\u{7}\r\tx\ny\u{9b}2J\u{7f}"),
            "\\x1b[31mred\\x07\\x0d\\x09x\ny\\x9b2J\\x7f"
        );
        assert!(matches!(escape_controls("plain é"), Cow::Borrowed(_)));
        let n = note(
            "head\u{1b}]0;title\u{7}",
            &tail_of(&["\u{1b}[2Jcleared", "ok\r"]),
        );
        assert_eq!(
            n,
            "head\\x1b]0;title\\x07\nlast output:\n\\x1b[2Jcleared\nok"
        );
    }

    proptest! {
        /// Any head and any output lines (multi-byte characters, empty lines, lines far past
        /// the limit) give a note within the API server's limit that is valid UTF-8 and keeps
        /// the newest line's end.
        #[test]
        fn every_note_fits_the_api_servers_limit(
            head in prop_oneof!["\\PC{0,600}", "[\\x00-\\x1f\\x7f-\\u{9f}a]{0,600}"],
            lines in proptest::collection::vec(
                prop_oneof!["\\PC{0,40}", "[a-zé€𝄞]{0,3000}", "[\\x00-\\x1f\\x7f-\\u{9f}a]{0,80}"], 0..40),
        ) {
            let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
            let t = tail_of(&refs);
            let n = note(&head, &t);
            prop_assert!(n.len() <= NOTE_MAX_BYTES, "{} bytes", n.len());
            prop_assert!(n.starts_with(prefix(&escape_controls(&head), HEAD_MAX_BYTES)));
            prop_assert!(!n.chars().any(|c| c.is_control() && c != '\n'), "{n:?}");
            if let Some(last) = t.lines().next_back() {
                let end: String = last.chars().rev().take(8).collect::<Vec<_>>().into_iter().rev().collect();
                if !end.is_empty() {
                    prop_assert!(n.ends_with(&end), "{n:?} does not end with {end:?}");
                }
            }
        }
    }
}
