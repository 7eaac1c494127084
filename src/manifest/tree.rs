//! YAML (and JSON, which is YAML) read into value trees as Kubernetes reads them, every node
//! with its place in the text, so that [`super::splice`] can edit the text in place.
//!
//! Kubernetes reads manifests with `sigs.k8s.io/yaml`, that is go-yaml v2: YAML 1.1 plain
//! scalars (`0755` is the octal 493, `no` is false, `0x1F` is 31, `1_000` is 1000) turned into
//! JSON. [`resolve_plain`] follows go-yaml v2's `resolve.go`; quoted and block scalars are
//! strings whatever they hold. saphyr-parser gives the events with their spans (serde_norway's
//! libyaml keeps no position a value can be found by).

use std::borrow::Cow;
use std::collections::HashMap;

use saphyr_parser::{Event, Marker, Parser, ScalarStyle, Span, Tag};
use serde_json::{Map, Number, Value};

/// Deepest nesting read: far beyond any manifest, and a bound on the recursion of every walk
/// over the tree (a hostile input of nested `[[[[` would otherwise exhaust the stack).
const MAX_DEPTH: usize = 256;
/// The UTF-8 byte order mark Windows editors write first: not part of the document (YAML 1.2
/// §5.2), kept in the text as it was.
pub const BOM: char = '\u{feff}';

/// How a scalar was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    Plain,
    Single,
    Double,
    /// `|` or `>`: the node runs to the start of the line where the next token is.
    Block,
}

/// A node of the text: where it is and what it holds.
#[derive(Debug, Clone)]
pub struct Node {
    /// Byte offset of its first character (an anchor or tag included).
    pub start: usize,
    /// Byte offset just past its last character: a flow collection's closing bracket, a block
    /// collection's last child, a block scalar's last line (then at a line start).
    pub end: usize,
    /// 1-based line and 0-based column (in characters) of `start`.
    pub line: usize,
    pub col: usize,
    /// It carries an anchor (`&a`) or is an alias (`*a`): its text stands for more than itself.
    pub shared: bool,
    pub kind: Kind,
}

#[derive(Debug, Clone)]
pub enum Kind {
    Scalar(Style),
    Alias,
    Seq { flow: bool, items: Vec<Node> },
    Map { flow: bool, entries: Vec<Entry> },
}

/// One `key: value` of a mapping.
#[derive(Debug, Clone)]
pub struct Entry {
    pub key: String,
    pub key_node: Node,
    pub value: Node,
}

impl Node {
    pub fn is_flow(&self) -> bool {
        match &self.kind {
            Kind::Seq { flow, .. } | Kind::Map { flow, .. } => *flow,
            _ => true,
        }
    }

    /// The line the node at a JSON pointer is written on (a mapping value's key line, a block
    /// sequence item's `- ` line), or its nearest ancestor's when the text does not have it.
    pub fn line_at(&self, pointer: &str) -> usize {
        self.walk(pointer).1
    }

    /// The node at a JSON pointer below this one (`/spec/containers/0`), if the text has it.
    pub fn at(&self, pointer: &str) -> Option<&Node> {
        self.walk(pointer).0
    }

    /// Follows `pointer` as far as the text has it: the node it names (`None` when a step is
    /// missing) and the line of the last step found.
    fn walk(&self, pointer: &str) -> (Option<&Node>, usize) {
        let (mut node, mut line) = (self, self.line);
        for token in pointer.split('/').skip(1) {
            let token = token.replace("~1", "/").replace("~0", "~");
            let next = match &node.kind {
                Kind::Map { entries, .. } => entries
                    .iter()
                    .rev()
                    .find(|e| e.key == token)
                    .map(|e| (&e.value, e.key_node.line)),
                Kind::Seq { items, .. } => token
                    .parse::<usize>()
                    .ok()
                    .and_then(|i| items.get(i))
                    .map(|item| (item, item.line)),
                _ => None,
            };
            let Some(step) = next else {
                return (None, line);
            };
            (node, line) = step;
        }
        (Some(node), line)
    }
}

/// The start of the line that byte offset `at` of `text` is on.
pub(super) fn line_start(text: &str, at: usize) -> usize {
    text[..at].rfind('\n').map_or(0, |i| i + 1)
}

/// One document of a stream: its value and its text.
#[derive(Debug, Clone)]
pub struct Doc {
    pub value: Value,
    pub node: Node,
    /// 1-based line after its last line (the next document's separator, or the end).
    pub end_line: usize,
}

/// Why a text is not YAML: where, and the parser's words.
#[derive(Debug, Clone)]
pub struct ParseError {
    pub line: usize,
    pub column: usize,
    pub why: String,
}

/// Byte offsets from the parser's positions, which count characters.
struct Offsets<'a> {
    text: &'a str,
    /// Byte offset of each line's start, line 1 first.
    lines: Vec<usize>,
    ascii: bool,
    /// The last position asked for, `(line, column, byte)`: positions mostly come in order, so
    /// a long line of non-ASCII text (minified JSON) is walked once, not once per node.
    last: std::cell::Cell<(usize, usize, usize)>,
}

impl<'a> Offsets<'a> {
    fn new(text: &'a str) -> Self {
        // The parser skips a byte order mark without counting it in the first line's columns.
        let bom = if text.starts_with(BOM) {
            BOM.len_utf8()
        } else {
            0
        };
        let mut lines = vec![bom];
        lines.extend(memchr::memchr_iter(b'\n', text.as_bytes()).map(|i| i + 1));
        Offsets {
            text,
            lines,
            ascii: text[bom..].is_ascii(),
            last: std::cell::Cell::new((0, 0, 0)),
        }
    }

    fn byte(&self, m: &Marker) -> usize {
        let Some(&start) = self.lines.get(m.line().saturating_sub(1)) else {
            return self.text.len();
        };
        if self.ascii {
            return (start + m.col()).min(self.text.len());
        }
        let (line, col, byte) = self.last.get();
        let (from_col, from) = if line == m.line() && col <= m.col() {
            (col, byte)
        } else {
            (0, start)
        };
        let rest = &self.text[from..];
        let at = from
            + rest
                .char_indices()
                .nth(m.col() - from_col)
                .map_or(rest.len(), |(i, _)| i);
        self.last.set((m.line(), m.col(), at));
        at
    }
}

/// Reads every document of `text`. A document that is empty (only comments) is left out.
pub fn parse(text: &str) -> Result<Vec<Doc>, ParseError> {
    let offsets = Offsets::new(text);
    let mut parser = Parser::new_from_str(text);
    let mut reader = Reader {
        offsets: &offsets,
        anchors: HashMap::new(),
        depth: 0,
    };
    let mut docs = Vec::new();
    loop {
        let (event, span) = next(&mut parser)?;
        match event {
            Event::StreamEnd => break,
            Event::StreamStart | Event::DocumentStart(_) | Event::Nothing => {}
            Event::DocumentEnd => {}
            other => {
                let (value, node) = reader.node(&mut parser, other, span)?;
                // The document's end: the event after its root.
                let (end, end_span) = next(&mut parser)?;
                if !matches!(end, Event::DocumentEnd) {
                    return Err(error(&end_span, "expected the end of a document"));
                }
                reader.anchors.clear();
                docs.push(Doc {
                    value,
                    node,
                    end_line: end_span.start.line(),
                });
            }
        }
    }
    Ok(docs)
}

fn next<'i>(
    parser: &mut Parser<'i, saphyr_parser::StrInput<'i>>,
) -> Result<(Event<'i>, Span), ParseError> {
    match parser.next_event() {
        Some(Ok(pair)) => Ok(pair),
        Some(Err(e)) => Err(ParseError {
            line: e.marker().line(),
            column: e.marker().col() + 1,
            why: e.info().to_string(),
        }),
        None => Err(ParseError {
            line: 0,
            column: 0,
            why: "unexpected end of input".into(),
        }),
    }
}

fn error(span: &Span, why: &str) -> ParseError {
    ParseError {
        line: span.start.line(),
        column: span.start.col() + 1,
        why: why.to_string(),
    }
}

struct Reader<'a> {
    offsets: &'a Offsets<'a>,
    /// Anchor id to its value (an alias is the value it names).
    anchors: HashMap<usize, Value>,
    depth: usize,
}

impl Reader<'_> {
    fn node<'i>(
        &mut self,
        parser: &mut Parser<'i, saphyr_parser::StrInput<'i>>,
        event: Event<'i>,
        span: Span,
    ) -> Result<(Value, Node), ParseError> {
        let start = self.offsets.byte(&span.start);
        let at = |end: usize, shared: bool, kind: Kind| Node {
            start,
            end,
            line: span.start.line(),
            col: span.start.col(),
            shared,
            kind,
        };
        match event {
            Event::Scalar(text, style, anchor, tag) => {
                let value =
                    scalar(&text, style, tag.as_deref()).map_err(|why| error(&span, &why))?;
                if matches!(style, ScalarStyle::Literal | ScalarStyle::Folded) {
                    // The span starts at the content; the node starts at its `|` or `>`.
                    let header = self.block_header(start);
                    let (line, col) = self.position(header);
                    let end = self.block_end(header, &span.end);
                    self.remember(anchor, &value);
                    return Ok((
                        value,
                        Node {
                            start: header,
                            end,
                            line,
                            col,
                            shared: anchor > 0,
                            kind: Kind::Scalar(Style::Block),
                        },
                    ));
                }
                let (end, style) = match style {
                    // An empty plain scalar (a key with no value) takes no room in the text.
                    ScalarStyle::Plain if text.is_empty() && anchor == 0 && tag.is_none() => {
                        (start, Style::Plain)
                    }
                    ScalarStyle::Plain => (self.offsets.byte(&span.end), Style::Plain),
                    ScalarStyle::SingleQuoted => (self.offsets.byte(&span.end), Style::Single),
                    ScalarStyle::DoubleQuoted => (self.offsets.byte(&span.end), Style::Double),
                    _ => unreachable!("block scalars are handled above"),
                };
                self.remember(anchor, &value);
                Ok((value, at(end, anchor > 0, Kind::Scalar(style))))
            }
            Event::Alias(id) => {
                let value = self
                    .anchors
                    .get(&id)
                    .cloned()
                    .ok_or_else(|| error(&span, "an alias to an unknown anchor"))?;
                Ok((value, at(self.offsets.byte(&span.end), true, Kind::Alias)))
            }
            Event::SequenceStart(anchor, _) => {
                self.enter(&span)?;
                let flow = self.text_at(start).starts_with('[');
                let mut values = Vec::new();
                let mut items = Vec::new();
                let end = loop {
                    let (event, span) = next(parser)?;
                    if let Event::SequenceEnd = event {
                        break if flow {
                            self.flow_end(self.offsets.byte(&span.end), b']')
                        } else {
                            items.last().map_or(start, |n: &Node| n.end)
                        };
                    }
                    let (v, n) = self.node(parser, event, span)?;
                    values.push(v);
                    items.push(n);
                };
                self.depth -= 1;
                let value = Value::Array(values);
                self.remember(anchor, &value);
                Ok((value, at(end, anchor > 0, Kind::Seq { flow, items })))
            }
            Event::MappingStart(anchor, _) => {
                self.enter(&span)?;
                let flow = self.text_at(start).starts_with('{');
                let mut map = Map::new();
                let mut merged = Map::new();
                let mut entries = Vec::new();
                let end = loop {
                    let (event, span) = next(parser)?;
                    if let Event::MappingEnd = event {
                        break if flow {
                            self.flow_end(self.offsets.byte(&span.end), b'}')
                        } else {
                            entries.last().map_or(start, |e: &Entry| e.value.end)
                        };
                    }
                    let merge = matches!(&event, Event::Scalar(t, ScalarStyle::Plain, _, None) if t == "<<");
                    let key_span = span;
                    let (k, key_node) = self.node(parser, event, span)?;
                    let (event, span) = next(parser)?;
                    let (v, mut value_node) = self.node(parser, event, span)?;
                    if matches!(value_node.kind, Kind::Scalar(Style::Plain))
                        && value_node.start >= value_node.end
                    {
                        // A key with no value (`annotations:`, `{a}`): the parser places the
                        // empty scalar at the next token, which may be lines further on; it is
                        // here, right after its key.
                        value_node.start = key_node.end;
                        value_node.end = key_node.end;
                        value_node.line = key_node.line;
                        value_node.col = key_node.col;
                    }
                    if merge {
                        // `<<: *base` or `<<: [*a, *b]`: keys not written here come from them,
                        // the first one listed winning (go-yaml v2).
                        let sources = match v {
                            Value::Array(list) => list,
                            other => vec![other],
                        };
                        for source in sources {
                            let Value::Object(source) = source else {
                                return Err(error(&key_span, "a merge key (<<) takes mappings"));
                            };
                            for (k, v) in source {
                                merged.entry(k).or_insert(v);
                            }
                        }
                    } else {
                        let key = key_string(k).map_err(|why| error(&key_span, &why))?;
                        if map.contains_key(&key) {
                            return Err(error(
                                &key_span,
                                &format!("the key {key:?} is written twice in one mapping"),
                            ));
                        }
                        map.insert(key.clone(), v);
                        entries.push(Entry {
                            key,
                            key_node,
                            value: value_node,
                        });
                        continue;
                    }
                    entries.push(Entry {
                        key: "<<".into(),
                        key_node,
                        value: value_node,
                    });
                };
                self.depth -= 1;
                for (k, v) in merged {
                    map.entry(k).or_insert(v);
                }
                let value = Value::Object(map);
                self.remember(anchor, &value);
                Ok((value, at(end, anchor > 0, Kind::Map { flow, entries })))
            }
            _ => Err(error(&span, "unexpected YAML event")),
        }
    }

    /// Just past the bracket that closes a flow collection: after a trailing comma (`[a, b,]`,
    /// `{k: v,\n}`) the parser's end event is at the comma, and the bracket follows it.
    fn flow_end(&self, at: usize, close: u8) -> usize {
        let b = self.offsets.text.as_bytes();
        if at > 0 && b.get(at - 1) == Some(&close) {
            return at;
        }
        let mut i = at;
        while let Some(&c) = b.get(i) {
            match c {
                b' ' | b'\t' | b'\r' | b'\n' | b',' => i += 1,
                b'#' => i += memchr::memchr(b'\n', &b[i..]).unwrap_or(b.len() - i),
                c if c == close => return i + 1,
                _ => break,
            }
        }
        at
    }

    /// Keeps a node's value under its anchor id (0: no anchor), for the aliases to it.
    fn remember(&mut self, anchor: usize, value: &Value) {
        if anchor > 0 {
            self.anchors.insert(anchor, value.clone());
        }
    }

    fn enter(&mut self, span: &Span) -> Result<(), ParseError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(error(
                span,
                &format!("nested deeper than {MAX_DEPTH} levels"),
            ));
        }
        Ok(())
    }

    /// The text from `at` on, an anchor or tag skipped (`&a [`, `!!map {`).
    fn text_at(&self, at: usize) -> &str {
        let mut rest = &self.offsets.text[at.min(self.offsets.text.len())..];
        while let Some(c) = rest.chars().next() {
            if c == '&' || c == '!' {
                let skip = rest.find(|c: char| c.is_whitespace()).unwrap_or(rest.len());
                rest = rest[skip..].trim_start();
            } else {
                break;
            }
        }
        rest
    }

    /// The `|` or `>` that starts the block scalar whose content starts at `content`: on the
    /// last line before it that is not blank, the last indicator before any comment.
    fn block_header(&self, content: usize) -> usize {
        let text = self.offsets.text;
        let mut end = line_start(text, content);
        while end > 0 {
            let start = line_start(text, end - 1);
            let line = &text[start..end];
            if !line.trim().is_empty() {
                let code = match line.find(" #") {
                    Some(i) => &line[..i],
                    None => line,
                };
                if let Some(i) = code.rfind(['|', '>']) {
                    return start + i;
                }
                break;
            }
            end = start;
        }
        content
    }

    /// The 1-based line and 0-based column (in characters) of a byte offset.
    fn position(&self, at: usize) -> (usize, usize) {
        let line = self.offsets.lines.partition_point(|&l| l <= at).max(1);
        let start = self.offsets.lines[line - 1].min(at);
        (line, self.offsets.text[start..at].chars().count())
    }

    /// Where a block scalar starting at `start` ends: its span runs to the next token, so back
    /// to the start of that line, then back over blank lines unless it keeps them (`|+`), so
    /// that they stay outside an edit of it.
    fn block_end(&self, start: usize, m: &Marker) -> usize {
        let text = self.offsets.text;
        let at = self.offsets.byte(m).min(text.len());
        let mut end = if at == text.len() && !text.ends_with('\n') {
            at
        } else {
            line_start(text, at)
        };
        let header_end = text[start..]
            .find('\n')
            .map_or(text.len(), |i| start + i + 1);
        if text[start..header_end].contains('+') {
            return end.max(header_end);
        }
        while end > header_end {
            let before = &text[..end];
            let prev = before
                .strip_suffix('\n')
                .unwrap_or(before)
                .rfind('\n')
                .map_or(0, |i| i + 1)
                .max(header_end);
            if !text[prev..end].trim().is_empty() {
                break;
            }
            end = prev;
        }
        end.max(header_end.min(text.len()))
    }
}

/// A mapping key as the JSON key Kubernetes makes of it.
fn key_string(k: Value) -> Result<String, String> {
    match k {
        Value::String(s) => Ok(s),
        Value::Number(n) => Ok(n.to_string()),
        Value::Bool(b) => Ok(b.to_string()),
        Value::Null => Ok("null".into()),
        _ => Err("a mapping key must be a scalar".into()),
    }
}

/// A scalar's value: quoted and block scalars are strings; a plain one as go-yaml v2 reads it;
/// a core-schema tag (`!!str 0755`) decides.
fn scalar(text: &str, style: ScalarStyle, tag: Option<&Tag>) -> Result<Value, String> {
    let core = tag
        .filter(|t| t.is_yaml_core_schema())
        .map(|t| t.suffix.as_str());
    match core {
        Some("str") | Some("binary") | Some("timestamp") => return Ok(Value::String(text.into())),
        Some("null") => return Ok(Value::Null),
        Some(want @ ("int" | "float" | "bool")) => {
            let v = resolve_plain(text);
            let ok = match want {
                "int" => v.is_i64() || v.is_u64(),
                "float" => v.is_number(),
                _ => v.is_boolean(),
            };
            return if ok {
                Ok(v)
            } else {
                Err(format!("{text:?} is not a valid !!{want}"))
            };
        }
        _ => {}
    }
    Ok(match style {
        ScalarStyle::Plain => resolve_plain(text),
        _ => Value::String(text.into()),
    })
}

/// A plain scalar as go-yaml v2 (`resolve.go`) reads it, turned into JSON as
/// `sigs.k8s.io/yaml` does (a float with no fraction is an integer there).
pub fn resolve_plain(s: &str) -> Value {
    match s {
        "" | "~" | "null" | "Null" | "NULL" => return Value::Null,
        "y" | "Y" | "yes" | "Yes" | "YES" | "true" | "True" | "TRUE" | "on" | "On" | "ON" => {
            return Value::Bool(true);
        }
        "n" | "N" | "no" | "No" | "NO" | "false" | "False" | "FALSE" | "off" | "Off" | "OFF" => {
            return Value::Bool(false);
        }
        _ => {}
    }
    let first = s.as_bytes()[0];
    if !(first.is_ascii_digit() || matches!(first, b'+' | b'-' | b'.')) {
        return Value::String(s.into());
    }
    let plain: Cow<str> = if s.contains('_') {
        Cow::Owned(s.replace('_', ""))
    } else {
        Cow::Borrowed(s)
    };
    if let Some(n) = go_parse_int(&plain) {
        return n;
    }
    if is_yaml_float(&plain)
        && let Ok(f) = plain.parse::<f64>()
    {
        return float(f);
    }
    if let Some(bits) = plain.strip_prefix("0b")
        && let Ok(n) = i64::from_str_radix(bits, 2)
    {
        return Value::from(n);
    }
    if let Some(bits) = plain.strip_prefix("-0b")
        && let Ok(n) = i64::from_str_radix(bits, 2)
    {
        return Value::from(-n);
    }
    Value::String(s.into())
}

/// Go's `strconv.ParseInt(s, 0, 64)`, then `ParseUint`: a sign, then `0x`, `0o`, `0b`, a
/// leading `0` (octal) or decimal digits.
fn go_parse_int(s: &str) -> Option<Value> {
    let (negative, body) = match s.as_bytes().first()? {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    let (radix, digits) = if let Some(d) = body.strip_prefix("0x").or(body.strip_prefix("0X")) {
        (16, d)
    } else if let Some(d) = body.strip_prefix("0o").or(body.strip_prefix("0O")) {
        (8, d)
    } else if let Some(d) = body.strip_prefix("0b").or(body.strip_prefix("0B")) {
        (2, d)
    } else if body.len() > 1 && body.starts_with('0') {
        (8, &body[1..])
    } else {
        (10, body)
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    let magnitude = u64::from_str_radix(digits, radix).ok()?;
    if negative {
        let n = i64::try_from(magnitude)
            .ok()
            .map(|m| -m)
            .or((magnitude == 1 << 63).then_some(i64::MIN))?;
        Some(Value::from(n))
    } else {
        Some(Value::from(magnitude))
    }
}

/// go-yaml v2's `yamlStyleFloat`: `^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$`.
fn is_yaml_float(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = usize::from(matches!(b.first(), Some(b'-' | b'+')));
    let digits = |i: &mut usize| {
        let from = *i;
        while b.get(*i).is_some_and(u8::is_ascii_digit) {
            *i += 1;
        }
        *i - from
    };
    if b.get(i) == Some(&b'.') {
        i += 1;
        if digits(&mut i) == 0 {
            return false;
        }
    } else {
        if digits(&mut i) == 0 {
            return false;
        }
        if b.get(i) == Some(&b'.') {
            i += 1;
            digits(&mut i);
        }
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(b.get(i), Some(b'-' | b'+')) {
            i += 1;
        }
        if digits(&mut i) == 0 {
            return false;
        }
    }
    i == b.len()
}

/// A float as JSON carries it: whole numbers as integers (Go's `json.Marshal` writes `1e3` as
/// `1000`), others as floats.
fn float(f: f64) -> Value {
    const EXACT: f64 = 9_007_199_254_740_992.0; // 2^53
    if f.fract() == 0.0 && f.abs() < EXACT {
        return Value::from(f as i64);
    }
    Number::from_f64(f).map_or(Value::Null, Value::Number)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn plain_scalars_read_as_kubernetes_reads_them() {
        for (text, want) in [
            ("0755", json!(493)),
            ("0644", json!(420)),
            ("0x1F", json!(31)),
            ("0o17", json!(15)),
            ("0b101", json!(5)),
            ("1_000", json!(1000)),
            ("-12", json!(-12)),
            ("+5", json!(5)),
            ("1e3", json!(1000)),
            ("1.5", json!(1.5)),
            ("09", json!(9)),
            ("no", json!(false)),
            ("Yes", json!(true)),
            ("on", json!(true)),
            ("y", json!(true)),
            ("~", json!(null)),
            ("", json!(null)),
            ("12:30", json!("12:30")),
            ("2024-01-01T10:00:00Z", json!("2024-01-01T10:00:00Z")),
            ("10m", json!("10m")),
            ("64Mi", json!("64Mi")),
            ("-c", json!("-c")),
            (".inf", json!(".inf")),
            ("0x", json!("0x")),
        ] {
            assert_eq!(resolve_plain(text), want, "{text:?}");
        }
    }

    #[test]
    fn quoted_and_tagged_scalars() {
        let docs =
            parse("a: '0755'\nb: \"0xFF\"\nc: !!str 10\nd: !!int 0x10\ne: |\n  x\n").unwrap();
        assert_eq!(
            docs[0].value,
            json!({"a": "0755", "b": "0xFF", "c": "10", "d": 16, "e": "x\n"})
        );
        assert!(parse("a: !!int abc\n").is_err());
    }

    #[test]
    fn spans_point_at_the_text() {
        let text = "# c\na: 1\nb:\n  - x\n  - {k: \"v\"}\nc: |\n  line\n\nd: [1, 2]\n---\ne: f\n";
        let docs = parse(text).unwrap();
        assert_eq!(docs.len(), 2);
        let n = &docs[0].node;
        assert_eq!(n.line, 2);
        let slice = |n: &Node| &text[n.start..n.end];
        assert_eq!(slice(n.at("/b/1").unwrap()), "{k: \"v\"}");
        assert_eq!(slice(n.at("/b/1/k").unwrap()), "\"v\"");
        assert_eq!(slice(n.at("/c").unwrap()), "|\n  line\n");
        assert_eq!(slice(n.at("/d").unwrap()), "[1, 2]");
        assert_eq!(n.at("/b/0").unwrap().line, 4);
        assert_eq!(docs[0].end_line, 10);
        assert_eq!(docs[1].node.line, 11);
    }

    #[test]
    fn anchors_aliases_and_merge_keys() {
        let docs = parse("a: &x {k: 1}\nb: *x\nc:\n  <<: *x\n  j: 2\n").unwrap();
        assert_eq!(
            docs[0].value,
            json!({"a": {"k": 1}, "b": {"k": 1}, "c": {"j": 2, "k": 1}})
        );
        assert!(docs[0].node.at("/b").unwrap().shared);
    }

    #[test]
    fn bad_input_is_an_error_with_a_place() {
        let e = parse("a: 1\na: 2\n").unwrap_err();
        assert_eq!(e.line, 2);
        assert!(e.why.contains("twice"), "{}", e.why);
        let deep = "[".repeat(10_000);
        assert!(parse(&deep).is_err());
        let e = parse("a: [1\n").unwrap_err();
        assert!(e.line >= 1);
    }

    #[test]
    fn non_ascii_text_maps_to_bytes() {
        let text = "a: \"é€\"\nb: [ü, x]\n";
        let docs = parse(text).unwrap();
        let x = docs[0].node.at("/b/1").unwrap();
        assert_eq!(&text[x.start..x.end], "x");
    }

    #[test]
    fn json_is_yaml() {
        let docs = parse("{\"kind\": \"Pod\", \"spec\": {\"n\": 0755, \"t\": true}}").unwrap();
        assert_eq!(
            docs[0].value,
            json!({"kind": "Pod", "spec": {"n": 493, "t": true}})
        );
    }

    proptest::proptest! {
        /// Any text of YAML's punctuation never panics the reader, nor the splicer on what it
        /// read; a value added to a mapping document reads back from what the splicer wrote.
        /// (60,000 cases passed before this was made part of every run; it found a cut through
        /// a multi-byte character and an empty value placed at the next token.)
        #[test]
        fn arbitrary_text_never_panics_and_an_added_key_reads_back(text in "([a-z0-9]|[ \\t\\n]|[-:,#&*!|>'\"{}\\[\\]?%@`]|\u{e9}){0,80}") {
            if let Ok(docs) = parse(&text) {
                for doc in docs {
                    let mut new = doc.value.clone();
                    if let Value::Object(m) = &mut new {
                        m.insert("hooklog-added".into(), serde_json::json!({"k": ["v", 1]}));
                        if let Ok(edits) = crate::manifest::splice::edits(&text, &doc.node, &doc.value, &new)
                            && let Ok(out) = crate::manifest::splice::apply(&text, edits)
                        {
                            let back = parse(&out).map(|d| d.into_iter().map(|d| d.value).collect::<Vec<_>>());
                            proptest::prop_assert!(
                                back.as_ref().is_ok_and(|b| b.contains(&new)),
                                "{text:?} -> {out:?}"
                            );
                        }
                    }
                }
            }
        }
    }
}
