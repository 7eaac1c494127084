//! Markdown for the tests that read the docs: the GitHub anchors of a page's headings.

/// The GitHub anchors of a markdown text's headings: the heading's text lowercased, inline
/// markup and punctuation but `-` and `_` dropped, spaces made `-`, and `-1`, `-2`, ... added
/// to repeats.
pub fn anchors(text: &str) -> Vec<String> {
    let mut seen = Vec::<String>::new();
    let mut fence = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fence = !fence;
            continue;
        }
        if fence {
            continue;
        }
        let Some(heading) = line
            .strip_prefix('#')
            .map(|h| h.trim_start_matches('#'))
            .filter(|h| h.starts_with(' '))
        else {
            continue;
        };
        let text = link_texts(heading.trim());
        let slug: String = text
            .to_lowercase()
            .chars()
            .filter_map(|c| match c {
                ' ' => Some('-'),
                '-' | '_' => Some(c),
                c if c.is_alphanumeric() => Some(c),
                _ => None,
            })
            .collect();
        let repeats = seen
            .iter()
            .filter(|s| **s == slug || s.strip_prefix(&slug).is_some_and(is_repeat_suffix))
            .count();
        seen.push(if repeats == 0 {
            slug
        } else {
            format!("{slug}-{repeats}")
        });
    }
    seen
}

/// `-N`, the suffix GitHub gives a repeated heading's anchor.
fn is_repeat_suffix(s: &str) -> bool {
    s.strip_prefix('-')
        .is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()))
}

/// A heading's text with each `[text](target)` replaced by its text.
fn link_texts(heading: &str) -> String {
    let mut out = String::new();
    let mut rest = heading;
    while let Some(open) = rest.find('[') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        match after
            .find("](")
            .and_then(|mid| after[mid..].find(')').map(|close| (mid, mid + close + 1)))
        {
            Some((mid, end)) => {
                out.push_str(&after[..mid]);
                rest = &after[end..];
            }
            None => {
                out.push('[');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}
