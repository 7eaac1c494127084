//! (the control plane) Writing a changed document back into the text it was read from: only what changed is
//! rewritten, and every other byte (comments, quoting, block scalars, key order, flow style,
//! document separators) stays as the user wrote it.
//!
//! kustomize's kyaml keeps comments by editing the node tree it parsed; no maintained Rust YAML
//! crate keeps comments and layout through an edit (saphyr and serde_norway drop them), so this
//! module compares the document's value before and after the edit and splices text at the spans
//! [`super::tree`] recorded. New text follows the document's own indentation. The edits are
//! chosen so that undoing a change undoes its text: an inserted item is removed with exactly the
//! bytes it added, which is what makes `uninject(inject(x)) == x` byte for byte. Callers read
//! the result back and compare values (`manifest::load`), so a splice that would change meaning
//! (an edit inside an anchor an alias repeats) is caught, never written.

use serde_json::{Map, Value};

use super::emit;
use super::tree::{Entry, Kind, Node, Style, line_start};

/// Sequences longer than this are aligned by their common ends only (the full alignment is
/// quadratic); no pod spec comes near it.
const MAX_ALIGN: usize = 2_000;

/// Replace `start..end` of the text with `text` (an insertion when they are equal).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edit {
    pub start: usize,
    pub end: usize,
    pub text: String,
}

/// Why a change cannot be written into the text in place.
#[derive(Debug, thiserror::Error)]
#[error("line {line}: {why}")]
pub struct SpliceError {
    pub line: usize,
    pub why: String,
}

/// How this document indents, to write new text the same way.
#[derive(Debug, Clone, Copy)]
struct Layout {
    /// Spaces a nested mapping is indented by.
    indent: usize,
    /// A sequence under a key starts at the key's own column (`containers:\n- name: a`), as
    /// kubectl writes it, rather than indented.
    indentless: bool,
}

struct Splicer<'a> {
    text: &'a str,
    layout: Layout,
    edits: Vec<Edit>,
    /// The document's root's start and end: a trial edit reads back only its text, to the end
    /// of its last line, so that it costs the document's size, not the file's. That line end is
    /// found when a trial needs it, not for each splicer: on a one-line (compact JSON) List, a
    /// search for it for each item read the rest of the List, quadratic.
    root: (usize, usize),
    /// The keys and (old) indices from the root to the node being edited.
    path: Vec<String>,
    /// What the user should hear of.
    notes: Vec<String>,
    /// An edit is being made inside an anchored node: an alias of it that must keep its value
    /// may no longer ([`Splicer::unchanged`]).
    anchor_edited: bool,
    /// How many aliases were tried in [`Splicer::unchanged`], each a read of the document.
    trials: usize,
    /// The `name`s of the sequence items whose strings the caller writes itself (see
    /// [`edits_noted`]).
    fresh: &'a [&'a str],
    /// How deep the diff is inside one of the `fresh` items (0: outside).
    own: usize,
}

/// How many aliases whose value stays one document's edit tries, each a read of the document
/// ([`Splicer::settles`]): past it, the document is written anew. Far beyond any manifest's
/// anchors (go-yaml's own bound is on what aliases expand to, tree.rs's `ALIAS_MIN_COUNT`),
/// low enough that a file of aliases costs a bounded number of reads.
const MAX_ALIAS_TRIALS: usize = 256;

/// Where a node sits: what precedes it decides how a replacement is written.
#[derive(Debug, Clone, Copy)]
enum Slot {
    /// The document's root.
    Root,
    /// A block mapping's value, the key at `key_col`, its `:` ending at `after_colon`.
    BlockValue { key_col: usize, after_colon: usize },
    /// A block sequence's item, its `- ` at `dash_col`, the `-` ending at `after_dash`.
    BlockItem { dash_col: usize, after_dash: usize },
    /// Inside a flow collection (or JSON); laid out one item a line at a column, nested ones a
    /// step further in (pretty JSON), or on one line (`None`).
    Flow(Option<(usize, usize)>),
    /// A flow mapping's value, laid out as [`Slot::Flow`], its key ending at `key_end`.
    FlowValue {
        layout: Option<(usize, usize)>,
        key_end: usize,
    },
}

/// The edits that turn `node` (read as `old`) into `new`.
pub fn edits(text: &str, node: &Node, old: &Value, new: &Value) -> Result<Vec<Edit>, SpliceError> {
    edits_noted(text, node, old, new, &[]).map(|(edits, _)| edits)
}

/// [`edits`], and what they did that a user should hear of (an alias written out). A string that
/// changes in a sequence item whose `name` is one of `fresh` (items the caller writes whole, as
/// inject writes its own containers) is written as a new string is ([`emit::string`]) when it
/// was written so, not in the old one's style: writing such an item again gives the bytes of its
/// first writing. Elsewhere a string keeps the style the user chose, which undoing an edit needs.
pub fn edits_noted<'a>(
    text: &'a str,
    node: &Node,
    old: &Value,
    new: &Value,
    fresh: &'a [&'a str],
) -> Result<(Vec<Edit>, Vec<String>), SpliceError> {
    let mut s = Splicer::new(text, node, fresh);
    s.diff(node, old, new, Slot::Root)?;
    Ok(s.finish())
}

/// The edits of a `kind: *List` document made one item at a time, as [`edits_noted`] of the
/// whole document makes them (an alias of one item may repeat another's anchor), without the
/// whole List changed beside it: what inject holds is the List's trees and its edits.
pub struct ListEdits<'t> {
    s: Splicer<'t>,
}

impl<'t> ListEdits<'t> {
    /// For the document whose root, a mapping, is `root`; `fresh` as [`edits_noted`]'s.
    pub fn new(text: &'t str, root: &Node, fresh: &'t [&'t str]) -> ListEdits<'t> {
        ListEdits {
            s: Splicer::new(text, root, fresh),
        }
    }

    /// Item `index` of the root's `items` sequence `items`, read as `old`, changed to `new`
    /// (items are neither added nor removed).
    pub fn item(
        &mut self,
        items: &Node,
        index: usize,
        old: &Value,
        new: &Value,
    ) -> Result<(), SpliceError> {
        let Kind::Seq { flow, items: nodes } = &items.kind else {
            return Err(self.s.err(items, "a List whose `items` is no sequence"));
        };
        let Some(node) = nodes.get(index) else {
            return Err(self.s.err(items, "a List item that is not in its text"));
        };
        let slot = match self.s.item_slot(*flow, node)? {
            Slot::Flow(_) => Slot::Flow(self.s.flow_layout(items, nodes.iter())),
            other => other,
        };
        self.diff_item(index, node, old, new, slot)
    }

    /// For the document whose root starts at `root`, its items read one at a time
    /// ([`ListEdits::next_item`]), its text tree never whole; `fresh` as [`edits_noted`]'s.
    pub fn open(text: &'t str, root: usize, fresh: &'t [&'t str]) -> ListEdits<'t> {
        let mut s = Splicer::new(
            text,
            &Node {
                start: root,
                end: root,
                line: 0,
                col: 0,
                shared: false,
                kind: Kind::Scalar(Style::Plain),
            },
            fresh,
        );
        s.layout = Layout {
            indent: 2,
            indentless: true,
        };
        ListEdits { s }
    }

    /// Item `index` (its node `node`, of a block sequence) read as `old`, changed to `new`: as
    /// [`ListEdits::item`], with what the text holds up to its end.
    pub fn next_item(
        &mut self,
        index: usize,
        node: &Node,
        old: &Value,
        new: &Value,
    ) -> Result<(), SpliceError> {
        self.s.layout = layout(self.s.text, node);
        self.s.root.1 = self.s.root.1.max(node.end);
        if dash_of(self.s.text, node).is_none() {
            return Err(self.s.err(node, "a List item in flow style"));
        }
        let slot = self.s.item_slot(false, node)?;
        self.diff_item(index, node, old, new, slot)
    }

    /// Item `index`'s edits, its path the List's (`/items/N`).
    fn diff_item(
        &mut self,
        index: usize,
        node: &Node,
        old: &Value,
        new: &Value,
        slot: Slot,
    ) -> Result<(), SpliceError> {
        self.s.path = vec!["items".into(), index.to_string()];
        let made = self.s.diff(node, old, new, slot);
        self.s.path.clear();
        made
    }

    /// The rest of the document (`old` and `new` with their `items` empty), then every edit
    /// and note, as [`edits_noted`] gives them.
    pub fn finish(
        mut self,
        root: &Node,
        old: &Value,
        new: &Value,
    ) -> Result<(Vec<Edit>, Vec<String>), SpliceError> {
        self.s.root.1 = self.s.root.1.max(root.end);
        self.s.diff(root, old, new, Slot::Root)?;
        Ok(self.s.finish())
    }
}

/// Just past the end of the line `at` is on (its line break included), or the text's end.
fn line_end(text: &str, at: usize) -> usize {
    memchr::memchr(b'\n', &text.as_bytes()[at..]).map_or(text.len(), |i| at + i + 1)
}

/// Text written anew in `original`'s byte order mark and line ending (CRLF when most of its
/// lines have it).
pub fn as_written(original: &str, text: String) -> String {
    let lines = memchr::memchr_iter(b'\n', original.as_bytes()).count();
    let crlf = original.matches(CRLF).count();
    let text = if crlf * 2 > lines {
        text.replace('\n', CRLF)
    } else {
        text
    };
    if original.starts_with(BOM) {
        format!("{}{text}", BOM)
    } else {
        text
    }
}

/// Past the blank lines at `at` when one of them holds a tab, else `at`. After a plain scalar at
/// its key's own indentation such a line is whitespace, but after deeper lines (the ones a new
/// key's value adds) libyaml reads its tab as "a tab character that violates indentation": the
/// new lines go after them (found by the splicer's property: `_: a\n \t` and a key added).
fn past_tab_blanks(text: &str, at: usize) -> usize {
    let mut end = at;
    let mut tab = false;
    while end < text.len() {
        let line_end =
            memchr::memchr(b'\n', &text.as_bytes()[end..]).map_or(text.len(), |i| end + i + 1);
        let line = &text[end..line_end];
        if !line.chars().all(|c| matches!(c, ' ' | '\t' | '\r' | '\n')) {
            break;
        }
        tab |= line.contains('\t');
        end = line_end;
    }
    if tab { end } else { at }
}

/// The UTF-8 byte order mark Windows editors write first: not part of the document (YAML 1.2
/// §5.2), kept in the text as it was.
pub const BOM: char = '\u{feff}';

/// The comment inject writes after an alias it had to write out (`command: *drain`, whose
/// copy must differ): uninject finds it there and writes `*drain` back.
pub(crate) const WRITTEN_OUT: &str = " # hooklog: written out from *";

/// The comment inject writes after a key whose null it replaced with a collection (`volumes:
/// ~`, `annotations: NULL`, a `null` on the next line), then the null as it was written (its
/// text after the `:`, as a JSON string unless it is one plain token after one space):
/// uninject finds it there and writes that text back, where it would write an empty value.
/// In a flow mapping ([`Splicer::flow_null_kept`]) the comment follows the key's `:` and holds,
/// as a JSON string, the text from the key's end to the null's end (`": ~"`).
pub(crate) const NULL_WAS: &str = " # hooklog: was ";

/// The line ending of Windows editors: kept where the file has it.
const CRLF: &str = "\r\n";

/// [`NULL_WAS`] for the text `was` a null had after its key's `:` (line breaks as `\n`: a
/// CRLF file's come back as CRLF, [`Splicer::finish`]).
fn null_was(was: &str) -> String {
    let was = was.replace(CRLF, "\n");
    match was.strip_prefix(' ') {
        Some(token)
            if !token.is_empty()
                && !token.starts_with('"')
                && !token.contains(|c: char| c.is_whitespace()) =>
        {
            format!("{NULL_WAS}{token}")
        }
        _ => format!("{NULL_WAS}{}", Value::String(was)),
    }
}

/// The text a null had after its key's `:`, from the [`NULL_WAS`] comment that starts `rest`.
fn null_as_it_was(rest: &str) -> Option<String> {
    let rest = rest.strip_prefix(NULL_WAS)?;
    let line = rest.split('\n').next()?.trim_end_matches('\r');
    if line.starts_with('"') {
        serde_json::from_str(line).ok()
    } else {
        Some(format!(" {line}"))
    }
}

/// The line break new text at `at` takes: at a line's start, the line before's; elsewhere its
/// own line's; on a last line without one, the line before's.
fn line_break_at(text: &str, at: usize) -> &'static str {
    let b = text.as_bytes();
    let at = at.min(b.len());
    let ending = |nl: usize| {
        if nl > 0 && b[nl - 1] == b'\r' {
            CRLF
        } else {
            "\n"
        }
    };
    if at > 0 && b[at - 1] == b'\n' {
        return ending(at - 1);
    }
    if let Some(i) = memchr::memchr(b'\n', &b[at..]) {
        return ending(at + i);
    }
    memchr::memrchr(b'\n', &b[..at]).map_or("\n", ending)
}

/// `start..end` to delete, widened at the end of a text without a final line break to the
/// break before it, which an insertion there added: what remains ends as the text did.
fn widen_at_end(text: &str, start: usize, end: usize) -> (usize, usize) {
    if end < text.len() || text.ends_with('\n') || start == 0 {
        return (start, end);
    }
    let before = &text[..start];
    match before.strip_suffix('\n') {
        Some(b) => (b.strip_suffix('\r').unwrap_or(b).len(), end),
        None => (start, end),
    }
}

/// `text` with `edits` applied; edits must not overlap.
pub fn apply(text: &str, mut edits: Vec<Edit>) -> Result<String, SpliceError> {
    edits.sort_by_key(|e| (e.start, e.end));
    // Deletions that meet (the last lines of two mappings that end together) are one.
    let mut merged: Vec<Edit> = Vec::with_capacity(edits.len());
    for e in edits {
        match merged.last_mut() {
            Some(prev) if prev.text.is_empty() && e.text.is_empty() && e.start <= prev.end => {
                prev.end = prev.end.max(e.end);
            }
            _ => merged.push(e),
        }
    }
    if let Some(last) = merged.last_mut()
        && last.text.is_empty()
    {
        (last.start, last.end) = widen_at_end(text, last.start, last.end);
    }
    let edits = merged;
    let mut out =
        String::with_capacity(text.len() + edits.iter().map(|e| e.text.len()).sum::<usize>());
    let mut at = 0;
    for e in edits {
        if e.start < at {
            return Err(SpliceError {
                line: line_of(text, e.start),
                why: "two changes overlap".into(),
            });
        }
        out.push_str(&text[at..e.start]);
        out.push_str(&e.text);
        at = e.end;
    }
    out.push_str(&text[at..]);
    Ok(out)
}

/// [`apply`] one document's edits at a time, each batch written as it comes (what is held is
/// the text written so far, not every edit of a stream): the same text as [`apply`] of all the
/// edits, or the same error, as long as no batch sorts before one written already (then
/// [`Applier::finish`] says so, and the caller applies every edit at once).
pub struct Applier<'t> {
    text: &'t str,
    out: String,
    /// Where in `text` the output has got to.
    at: usize,
    /// The last edit, not written yet: a deletion that the next one meets merges with it, and
    /// the last of all may widen ([`widen_at_end`]).
    last: Option<Edit>,
    /// The greatest `(start, end)` of any edit so far.
    key: Option<(usize, usize)>,
    any: bool,
    unordered: bool,
    error: Option<SpliceError>,
}

/// What [`Applier::finish`] gives: the text changed, or as it was (no edit at all).
pub enum Applied {
    Changed(String),
    Unchanged,
    /// A batch sorted before an earlier one: [`apply`] every edit at once instead.
    Unordered,
}

impl<'t> Applier<'t> {
    pub fn new(text: &'t str) -> Applier<'t> {
        Applier {
            text,
            out: String::new(),
            at: 0,
            last: None,
            key: None,
            any: false,
            unordered: false,
            error: None,
        }
    }

    /// Adds one document's edits.
    pub fn push(&mut self, mut edits: Vec<Edit>) {
        if self.unordered {
            return;
        }
        edits.sort_by_key(|e| (e.start, e.end));
        for e in edits {
            let key = (e.start, e.end);
            // Out of order even after an overlap: apply of them all may meet another overlap
            // first.
            if self.key.is_some_and(|k| key < k) {
                self.unordered = true;
                return;
            }
            self.key = Some(key);
            self.any = true;
            if self.error.is_some() {
                continue;
            }
            match &mut self.last {
                Some(prev) if prev.text.is_empty() && e.text.is_empty() && e.start <= prev.end => {
                    prev.end = prev.end.max(e.end);
                }
                _ => {
                    if let Some(prev) = self.last.replace(e) {
                        self.write(prev);
                    }
                }
            }
        }
    }

    fn write(&mut self, e: Edit) {
        if self.error.is_some() {
            return;
        }
        if e.start < self.at {
            self.error = Some(SpliceError {
                line: line_of(self.text, e.start),
                why: "two changes overlap".into(),
            });
            return;
        }
        self.out.push_str(&self.text[self.at..e.start]);
        self.out.push_str(&e.text);
        self.at = e.end;
    }

    /// How much of the output is written and not yet taken.
    pub fn written_len(&self) -> usize {
        self.out.len()
    }

    /// The output written so far, not to be held here any longer (the caller writes it out):
    /// [`Applier::finish`] then gives only what follows it.
    pub fn take_written(&mut self) -> String {
        std::mem::take(&mut self.out)
    }

    /// The text with every edit applied, as [`apply`] writes it (less what
    /// [`Applier::take_written`] took).
    pub fn finish(mut self) -> Result<Applied, SpliceError> {
        if self.unordered {
            return Ok(Applied::Unordered);
        }
        if !self.any {
            return Ok(Applied::Unchanged);
        }
        if let Some(mut last) = self.last.take() {
            if last.text.is_empty() {
                (last.start, last.end) = widen_at_end(self.text, last.start, last.end);
            }
            self.write(last);
        }
        if let Some(e) = self.error {
            return Err(e);
        }
        self.out.push_str(&self.text[self.at..]);
        Ok(Applied::Changed(self.out))
    }
}

fn line_of(text: &str, at: usize) -> usize {
    text[..at.min(text.len())].matches('\n').count() + 1
}

fn layout(text: &str, root: &Node) -> Layout {
    let mut l = Layout {
        indent: 2,
        indentless: true,
    };
    let (mut indent, mut indentless) = (None, None);
    visit(root, 0, &mut |node| {
        if let Kind::Map {
            flow: false,
            entries,
        } = &node.kind
        {
            for e in entries {
                match &e.value.kind {
                    Kind::Map {
                        flow: false,
                        entries: inner,
                    } if indent.is_none() => {
                        if let Some(first) = inner.first()
                            && first.key_node.col > e.key_node.col
                        {
                            indent = Some(first.key_node.col - e.key_node.col);
                        }
                    }
                    Kind::Seq { flow: false, items } if indentless.is_none() => {
                        if let Some(dash) = items.first().and_then(|i| dash_of(text, i)) {
                            indentless = Some(dash.1 == e.key_node.col);
                        }
                    }
                    _ => {}
                }
            }
        }
    });
    if let Some(i) = indent {
        l.indent = i;
    }
    if let Some(i) = indentless {
        l.indentless = i;
    }
    l
}

fn visit(node: &Node, depth: usize, f: &mut impl FnMut(&Node)) {
    if depth > 64 {
        return;
    }
    f(node);
    match &node.kind {
        Kind::Map { entries, .. } => entries.iter().for_each(|e| visit(&e.value, depth + 1, f)),
        Kind::Seq { items, .. } => items.iter().for_each(|i| visit(i, depth + 1, f)),
        _ => {}
    }
}

/// The byte offset and column of a block sequence item's `-`, when it is the first thing on
/// its line (`- - a` and other forms are not edited).
fn dash_of(text: &str, item: &Node) -> Option<(usize, usize)> {
    let start = line_start(text, item.start);
    let trimmed = text[start..item.start].trim_end_matches(' ');
    let dash = trimmed.strip_suffix('-')?;
    dash.chars()
        .all(|c| c == ' ')
        .then(|| (start + dash.len(), dash.len()))
}

/// The start of `at`'s line when only spaces precede it there.
fn line_start_if_first(text: &str, at: usize) -> Option<usize> {
    let start = line_start(text, at);
    text[start..at].chars().all(|c| c == ' ').then_some(start)
}

/// Just past the end of the line `node` ends on. A node that ends with a block scalar (itself,
/// or a collection whose last item is one) already ends at a line start: only there does the
/// character before its end be a newline.
fn after_line(text: &str, node: &Node) -> usize {
    if node.end > 0 && text.as_bytes()[node.end - 1] == b'\n' {
        return node.end;
    }
    match memchr::memchr(b'\n', &text.as_bytes()[node.end..]) {
        Some(i) => node.end + i + 1,
        None => text.len(),
    }
}

fn is_empty_collection(v: &Value) -> bool {
    match v {
        Value::Array(a) => a.is_empty(),
        Value::Object(m) => m.is_empty(),
        _ => false,
    }
}

impl<'a> Splicer<'a> {
    /// A splicer of the document whose root is `node`.
    fn new(text: &'a str, node: &Node, fresh: &'a [&'a str]) -> Splicer<'a> {
        Splicer {
            text,
            layout: layout(text, node),
            edits: Vec::new(),
            root: (node.start, node.end),
            path: Vec::new(),
            notes: Vec::new(),
            anchor_edited: false,
            trials: 0,
            fresh,
            own: 0,
        }
    }

    /// The root's column: the characters before it on its line. Counted when an alias trial
    /// needs it, not for each splicer: a List's items each have one, and on a one-line (compact
    /// JSON) List counting for each made uninject quadratic. Not the node's `col`, which counts
    /// a BOM: libyaml does not indent by it.
    fn root_col(&self) -> usize {
        let at = self.root.0;
        self.text[line_start(self.text, at)..at]
            .chars()
            .filter(|c| *c != BOM)
            .count()
    }

    /// Its edits and notes. New lines end as the lines beside them do: a CRLF file stays CRLF,
    /// and in a file of both each insertion takes its neighbours' ending.
    fn finish(mut self) -> (Vec<Edit>, Vec<String>) {
        for e in &mut self.edits {
            if e.text.contains('\n') && line_break_at(self.text, e.start) == CRLF {
                e.text = e.text.replace('\n', CRLF);
            }
        }
        (self.edits, self.notes)
    }

    fn err(&self, node: &Node, why: impl Into<String>) -> SpliceError {
        SpliceError {
            line: node.line,
            why: why.into(),
        }
    }

    /// True when the edits made so far and `candidate` give the node being edited the value
    /// `want`, read back from the text (its path is [`Self::path`]: items at their old
    /// indices, as the edits so far leave them).
    fn settles(&self, candidate: &[Edit], want: &Value) -> bool {
        let (start, end) = (self.root.0, line_end(self.text, self.root.1));
        let trial: Vec<Edit> = self
            .edits
            .iter()
            .chain(candidate)
            .map(|e| Edit {
                start: e.start.saturating_sub(start),
                end: e.end.saturating_sub(start),
                text: e.text.clone(),
            })
            .collect();
        if self
            .edits
            .iter()
            .chain(candidate)
            .any(|e| e.start < start || e.end > end)
        {
            return false;
        }
        let Ok(out) = apply(&self.text[start..end], trial) else {
            return false;
        };
        // The root at its own column, as in the text: a List's item read on its own starts
        // after its `- `, and its lines below are indented past it.
        let out = " ".repeat(self.root_col()) + &out;
        let pointer: String = self
            .path
            .iter()
            .map(|k| format!("/{}", k.replace('~', "~0").replace('/', "~1")))
            .collect();
        // Read one item at a time: a trial of a List costs one item's trees, not the List's.
        super::tree::value_at(&out, &pointer).is_some_and(|v| &v == want)
    }

    /// A collection that inject wrote out from an alias, known by the comment it wrote after
    /// it ([`WRITTEN_OUT`]), goes back to that alias when, read back, that gives the new value.
    fn back_to_alias(&mut self, node: &Node, new: &Value) -> bool {
        let Some(rest) = self.text[node.end..].strip_prefix(WRITTEN_OUT) else {
            return false;
        };
        let name: String = rest
            .chars()
            .take_while(|c| !c.is_whitespace() && !",[]{}".contains(*c))
            .collect();
        let start = self.content_start(node);
        let edit = [Edit {
            start,
            end: node.end + WRITTEN_OUT.len() + name.len(),
            text: format!("*{name}"),
        }];
        if name.is_empty() || !self.settles(&edit, new) {
            return false;
        }
        self.edits.extend(edit);
        true
    }

    /// `key: *a` that must change: `key:` gains `<<: *a` (a merge of what the alias repeats)
    /// and, after it, the keys whose values differ. Every byte stays, and
    /// [`Self::merge_to_alias`] takes it back.
    fn alias_to_merge(
        &mut self,
        node: &Node,
        slot: Slot,
        col: usize,
        old: &Map<String, Value>,
        new: &Map<String, Value>,
    ) -> Result<(), SpliceError> {
        let overrides: Map<String, Value> = new
            .iter()
            .filter(|(k, v)| old.get(*k) != Some(*v))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        match slot {
            Slot::BlockValue { after_colon, .. } => {
                if self.text[after_colon..node.start].contains('\n') {
                    return Err(self.err(node, "an alias on the line after its key"));
                }
                self.push(
                    after_colon,
                    after_colon,
                    format!("\n{}<<:", " ".repeat(col)),
                );
            }
            _ => self.push(node.start, node.start, "<<: ".into()),
        }
        let mut text = String::from("\n");
        self.block_map(&overrides, col, false, &mut text);
        text.pop();
        let eol = match memchr::memchr(b'\n', &self.text.as_bytes()[node.end..]) {
            Some(i) if self.text.as_bytes()[..node.end + i].ends_with(b"\r") => node.end + i - 1,
            Some(i) => node.end + i,
            None => self.text.len(),
        };
        self.push(eol, eol, text);
        Ok(())
    }

    /// The edits that turn a mapping written as `<<: *a` and other keys back into the `*a`
    /// [`Self::alias_to_merge`] made it from, when it is one.
    fn merge_to_alias(&self, flow: bool, entries: &[Entry], slot: Slot) -> Option<Vec<Edit>> {
        let first = entries.first()?;
        if flow || first.key != "<<" || !matches!(first.value.kind, Kind::Alias) {
            return None;
        }
        let start = match slot {
            Slot::BlockValue { after_colon, .. }
                if line_start_if_first(self.text, first.key_node.start).is_some() =>
            {
                after_colon
            }
            Slot::BlockItem { after_dash, .. } if after_dash + 1 == first.key_node.start => {
                first.key_node.start
            }
            _ => return None,
        };
        let value_start = match slot {
            Slot::BlockValue { .. } => self.after_colon(first).ok()?,
            _ => first.value.start,
        };
        let mut edits = vec![Edit {
            start,
            end: value_start,
            text: String::new(),
        }];
        for e in &entries[1..] {
            let at = line_start_if_first(self.text, e.key_node.start)?;
            edits.push(Edit {
                start: at,
                end: after_line(self.text, &e.value),
                text: String::new(),
            });
        }
        Some(edits)
    }

    /// An empty flow collection (`[]`, `[\n  ]`, `{}`) gains its items inside its brackets, as
    /// they are: and one whose items all go loses exactly them (and a trailing comma), so that
    /// emptying what was filled gives the bytes back. False when `node` is no such case.
    fn fill_or_empty_flow(&mut self, node: &Node, old: &Value, new: &Value, slot: Slot) -> bool {
        match (&node.kind, old, new) {
            (Kind::Seq { flow: true, .. }, Value::Array(_), Value::Array(_))
            | (Kind::Map { flow: true, .. }, Value::Object(_), Value::Object(_)) => {}
            _ => return false,
        }
        let open = self.content_start(node);
        if !self.text[open..].starts_with(['[', '{']) {
            return false;
        }
        match (is_empty_collection(old), is_empty_collection(new)) {
            (true, false) => {
                let (layout, quote) = match slot {
                    Slot::Flow(Some((col, step)))
                    | Slot::FlowValue {
                        layout: Some((col, step)),
                        ..
                    } => (Some((col + step, step)), Quote::Double),
                    Slot::Flow(None) | Slot::FlowValue { layout: None, .. } => {
                        (None, Quote::Double)
                    }
                    _ => (None, Quote::AsNeeded),
                };
                let items: Vec<(Option<String>, Value)> = match new {
                    Value::Array(a) => a.iter().map(|v| (None, v.clone())).collect(),
                    Value::Object(m) => m
                        .iter()
                        .map(|(k, v)| (Some(k.clone()), v.clone()))
                        .collect(),
                    _ => return false,
                };
                let (mut text, _) = self.flow_items(layout, items.into_iter(), quote);
                if let Some((col, _)) = layout {
                    text.insert_str(0, &format!("\n{}", " ".repeat(col)));
                }
                self.push(open + 1, open + 1, text);
                true
            }
            (false, true) => {
                let last_end = match &node.kind {
                    Kind::Seq { items, .. } => items.last().map(|i| i.end),
                    Kind::Map { entries, .. } => entries.last().map(|e| e.value.end),
                    _ => None,
                };
                let Some(mut end) = last_end else {
                    return false;
                };
                let rest = &self.text[end..node.end];
                let gap = rest.len() - rest.trim_start().len();
                if rest[gap..].starts_with(',') {
                    end += gap + 1;
                }
                self.push(open + 1, end, String::new());
                true
            }
            _ => false,
        }
    }

    /// True when `node` ends the text with a block scalar and no line break after it.
    fn unterminated_block(&self, node: &Node) -> bool {
        if node.end < self.text.len() || self.text.ends_with('\n') {
            return false;
        }
        let mut n = node;
        loop {
            n = match &n.kind {
                Kind::Scalar(Style::Block) => return true,
                Kind::Map { entries, .. } => match entries.last() {
                    Some(e) => &e.value,
                    None => return false,
                },
                Kind::Seq { items, .. } => match items.last() {
                    Some(i) => i,
                    None => return false,
                },
                _ => return false,
            };
        }
    }

    /// Where a node's own text starts: after its anchor and tag (`&a !!str x`), which an edit of
    /// its content keeps.
    fn content_start(&self, node: &Node) -> usize {
        let mut at = node.start;
        loop {
            let rest = &self.text[at..node.end.max(at)];
            if !rest.starts_with(['&', '!']) {
                return at;
            }
            let token = rest.find([' ', '\t', '\r', '\n']).unwrap_or(rest.len());
            let gap = rest[token..].len() - rest[token..].trim_start().len();
            if token + gap >= rest.len() {
                return at;
            }
            at += token + gap;
        }
    }

    /// A value written inside a flow collection: pretty when the collection is, on one line
    /// otherwise.
    fn flow_value(&self, v: &Value, layout: Option<(usize, usize)>) -> String {
        match layout {
            Some((col, step)) => pretty(v, col, step, Quote::AsNeeded),
            None => flow_text(v),
        }
    }

    fn push(&mut self, start: usize, end: usize, text: String) {
        self.edits.push(Edit { start, end, text });
    }

    fn diff(
        &mut self,
        node: &Node,
        old: &Value,
        new: &Value,
        slot: Slot,
    ) -> Result<(), SpliceError> {
        if old == new {
            return self.unchanged(node, old, slot);
        }
        if node.shared && !matches!(node.kind, Kind::Alias) {
            self.anchor_edited = true;
        }
        if self.fill_or_empty_flow(node, old, new, slot) {
            return Ok(());
        }
        if matches!(node.kind, Kind::Alias) {
            // The anchor's own edit may already give the alias its new value.
            if self.settles(&[], new) {
                return Ok(());
            }
            if let (Value::Object(o), Value::Object(n)) = (old, new)
                && o.keys().all(|k| n.contains_key(k))
                && let Some(col) = match slot {
                    Slot::BlockValue { key_col, .. } => Some(key_col + self.layout.indent),
                    Slot::BlockItem { dash_col, .. } => Some(dash_col + 2),
                    _ => None,
                }
            {
                return self.alias_to_merge(node, slot, col, o, n);
            }
            let alias = self.text[node.start..node.end].to_string();
            if !matches!(slot, Slot::BlockValue { .. } | Slot::BlockItem { .. }) {
                return Err(self.err(
                    node,
                    format!(
                        "`{alias}` repeats `&{}` inside a flow collection, and hooklog's change \
                         here must not change that one too",
                        alias.trim_start_matches('*')
                    ),
                ));
            }
            self.write_out(
                node,
                new,
                "hooklog's change here must not change that one too",
            );
            return Ok(());
        }
        if self.back_to_alias(node, new) {
            return Ok(());
        }
        match (&node.kind, old, new) {
            (Kind::Map { flow, entries }, Value::Object(o), Value::Object(n))
                if !o.is_empty() && !n.is_empty() =>
            {
                // Tried first: the mapping may be the alias it was made from.
                if let Some(collapse) = self.merge_to_alias(*flow, entries, slot)
                    && self.settles(&collapse, new)
                {
                    self.edits.extend(collapse);
                    return Ok(());
                }
                self.map(node, *flow, entries, o, n)
            }
            (Kind::Seq { flow, items }, Value::Array(o), Value::Array(n))
                if !o.is_empty() && !n.is_empty() =>
            {
                self.seq(node, *flow, items, o, n)
            }
            (Kind::Scalar(style), Value::String(o), Value::String(s)) => {
                let text = self.string_in_place(node, *style, o, s);
                self.push(self.content_start(node), node.end, text);
                Ok(())
            }
            _ => self.replace(node, old, new, slot),
        }
    }

    /// Writes the alias `node` out as `value`, on its own line (a block slot's), marked so that
    /// uninject writes the alias back ([`Self::back_to_alias`]); says so, and `why`.
    fn write_out(&mut self, node: &Node, value: &Value, why: &str) {
        let alias = self.text[node.start..node.end].to_string();
        let name = alias.trim_start_matches('*');
        let text = format!("{}{WRITTEN_OUT}{name}", flow_text(value));
        self.push(node.start, node.end, text);
        self.notes.push(format!(
            "{}: `{alias}` written out: it repeats `&{name}`, and {why} (uninject writes `{alias}` back)",
            node.line,
        ));
    }

    /// A node whose value stays, once an edit was made inside an anchor: an alias below it that
    /// repeats the anchor no longer reads as it did, so it is written out as it was (`volumeMounts:
    /// *vm` of a container hooklog does not wire, beside the one whose `&vm` it does); one that
    /// hooklog wrote out and that reads as it should as the alias again goes back to it (uninject).
    fn unchanged(&mut self, node: &Node, value: &Value, slot: Slot) -> Result<(), SpliceError> {
        if !self.anchor_edited {
            return Ok(());
        }
        let flow = matches!(
            node.kind,
            Kind::Seq { flow: true, .. } | Kind::Map { flow: true, .. }
        );
        // (A block collection ends where its last value does: that one may be written out.)
        if flow && self.text[node.end..].starts_with(WRITTEN_OUT) {
            self.trial(node)?;
            self.back_to_alias(node, value);
            return Ok(());
        }
        match &node.kind {
            Kind::Alias => {
                self.trial(node)?;
                if self.settles(&[], value) {
                    return Ok(());
                }
                if !matches!(slot, Slot::BlockValue { .. } | Slot::BlockItem { .. }) {
                    return Err(self.err(
                        node,
                        "an alias inside a flow collection repeats an anchor hooklog's change edits, and must not change",
                    ));
                }
                self.write_out(
                    node,
                    value,
                    "hooklog's change there must not change this one",
                );
                Ok(())
            }
            Kind::Map { flow, entries } => {
                let Value::Object(map) = value else {
                    return Ok(());
                };
                for e in entries {
                    if e.key == "<<" {
                        self.unchanged_merge(node, e, map)?;
                        continue;
                    }
                    let Some(v) = map.get(&e.key) else {
                        continue;
                    };
                    let slot = if *flow {
                        Slot::Flow(None)
                    } else {
                        Slot::BlockValue {
                            key_col: self.indent(&e.key_node),
                            after_colon: self.after_colon(e)?,
                        }
                    };
                    self.path.push(e.key.clone());
                    let kept = self.unchanged(&e.value, v, slot);
                    self.path.pop();
                    kept?;
                }
                Ok(())
            }
            Kind::Seq { flow, items } => {
                let Value::Array(list) = value else {
                    return Ok(());
                };
                for (i, (item, v)) in items.iter().zip(list).enumerate() {
                    let slot = self.item_slot(*flow, item)?;
                    self.path.push(i.to_string());
                    let kept = self.unchanged(item, v, slot);
                    self.path.pop();
                    kept?;
                }
                Ok(())
            }
            Kind::Scalar(_) => Ok(()),
        }
    }

    /// A merge key (`<<: *base`) of a mapping `map` whose value stays: when an edit inside
    /// `&base` would change what it brings in, it is written out as what it brings in now (the
    /// keys of `map` not written in it), and back to the alias when that reads the same again.
    fn unchanged_merge(
        &mut self,
        node: &Node,
        merge: &Entry,
        map: &Map<String, Value>,
    ) -> Result<(), SpliceError> {
        let whole = Value::Object(map.clone());
        if self.text[merge.value.end..].starts_with(WRITTEN_OUT) {
            self.trial(node)?;
            self.back_to_alias(&merge.value, &whole);
            return Ok(());
        }
        if !matches!(merge.value.kind, Kind::Alias) {
            // `<<: [*a, *b]`, or a mapping written in place: what the read-back says of it.
            return Ok(());
        }
        self.trial(node)?;
        if self.settles(&[], &whole) {
            return Ok(());
        }
        let Kind::Map { entries, .. } = &node.kind else {
            return Ok(());
        };
        let brought: Map<String, Value> = map
            .iter()
            .filter(|(k, _)| !entries.iter().any(|e| &e.key == *k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if brought.is_empty() || line_start_if_first(self.text, merge.key_node.start).is_none() {
            return Err(self.err(
                node,
                "a merge (`<<: *name`) repeats an anchor hooklog's change edits, and must not change",
            ));
        }
        self.write_out(
            &merge.value,
            &Value::Object(brought),
            "hooklog's change there must not change what this merge brings in",
        );
        Ok(())
    }

    /// Counts one more alias tried, within [`MAX_ALIAS_TRIALS`].
    fn trial(&mut self, node: &Node) -> Result<(), SpliceError> {
        self.trials += 1;
        if self.trials > MAX_ALIAS_TRIALS {
            return Err(self.err(
                node,
                format!("more than {MAX_ALIAS_TRIALS} aliases repeat anchors that hooklog's change edits"),
            ));
        }
        Ok(())
    }

    /// A null in a flow mapping (`{volumes: ~}`, `{annotations: }`, `{annotations}`) that a
    /// collection takes the place of: its text from its key's end on is kept, as a JSON
    /// string, in a comment after the key's `:` ([`NULL_WAS`]), and the collection goes on the
    /// line below, so that uninject gives every byte back ([`Self::flow_null_back`]). A flow
    /// collection has room for a comment only where a line break may follow it, and after a
    /// key's `:` one always may. A `null` is written back as it is and needs none (JSON stays
    /// JSON). False when `node` is no such null.
    fn flow_null_kept(
        &mut self,
        node: &Node,
        old: &Value,
        new: &Value,
        layout: Option<(usize, usize)>,
        key_end: usize,
    ) -> bool {
        if !old.is_null()
            || !(new.is_object() || new.is_array())
            || &self.text[node.start..node.end] == "null"
            || node.start < key_end
        {
            return false;
        }
        let end = if node.start < node.end {
            node.end
        } else {
            // No text of its own: through its `:`, when it has one on its key's line.
            let rest = &self.text[key_end..];
            let blanks = rest.len() - rest.trim_start_matches([' ', '\t']).len();
            if rest[blanks..].starts_with(':') {
                key_end + blanks + 1
            } else {
                key_end
            }
        };
        let indent = match layout {
            Some((col, _)) => col,
            None => {
                let line = &self.text[line_start(self.text, key_end)..];
                line.len() - line.trim_start_matches(' ').len() + self.layout.indent.max(2)
            }
        };
        let was = Value::String(self.text[key_end..end].replace(CRLF, "\n"));
        let text = format!(
            ":{NULL_WAS}{was}\n{}{}",
            " ".repeat(indent),
            self.flow_value(new, layout)
        );
        self.push(key_end, end, text);
        true
    }

    /// The null that [`Self::flow_null_kept`] kept, written back in place of the flow
    /// collection `node` (and the comment and line break before it) when `new` is null again.
    /// False when `node` follows no such comment.
    fn flow_null_back(&mut self, node: &Node, new: &Value) -> bool {
        if !new.is_null() {
            return false;
        }
        let before = self.text[..node.start].trim_end_matches([' ', '\t']);
        let Some(before) = before.strip_suffix('\n') else {
            return false;
        };
        let before = before.strip_suffix('\r').unwrap_or(before);
        let from = line_start(before, before.len());
        let line = &before[from..];
        let kept = line.match_indices(NULL_WAS).find_map(|(at, _)| {
            let was: String = serde_json::from_str(&line[at + NULL_WAS.len()..]).ok()?;
            line[..at].ends_with(':').then_some((from + at - 1, was))
        });
        let Some((colon, was)) = kept else {
            return false;
        };
        self.push(colon, node.end, was);
        true
    }

    /// True when `node` is a null with an anchor (`volumes: &v ~`) that no alias in the text
    /// repeats (no `*v` at all): filling it changes nothing else, and the null's comment
    /// ([`NULL_WAS`]) keeps its anchor for uninject.
    fn unaliased_null(&self, node: &Node, old: &Value) -> bool {
        let Some(anchored) = self.text[node.start..node.end].strip_prefix('&') else {
            return false;
        };
        let name: String = anchored
            .chars()
            .take_while(|c| !c.is_whitespace() && !",[]{}".contains(*c))
            .collect();
        old.is_null()
            && matches!(node.kind, Kind::Scalar(_))
            && !name.is_empty()
            && !self.text.contains(&format!("*{name}"))
    }

    /// Writes `new` in place of `node` whole.
    fn replace(
        &mut self,
        node: &Node,
        old: &Value,
        new: &Value,
        slot: Slot,
    ) -> Result<(), SpliceError> {
        let flow_node = matches!(
            node.kind,
            Kind::Seq { flow: true, .. } | Kind::Map { flow: true, .. }
        );
        if flow_node
            && (new.is_object() || new.is_array())
            && matches!(slot, Slot::BlockValue { .. } | Slot::BlockItem { .. })
        {
            // `volumes: []` gains its items in flow style, inside its own brackets.
            let text = flow_text(new);
            self.push(self.content_start(node), node.end, text);
            return Ok(());
        }
        if node.shared && !matches!(node.kind, Kind::Alias) && !self.unaliased_null(node, old) {
            return Err(self.err(
                node,
                "an anchored value (`&name`) would be written anew, and its aliases with it",
            ));
        }
        let block = !is_empty_collection(new) && (new.is_object() || new.is_array());
        match slot {
            Slot::BlockValue {
                key_col,
                after_colon,
            } if block => self.block_value(node, old, new, key_col, after_colon),
            Slot::BlockItem {
                dash_col,
                after_dash,
            } if block => self.block_item(node, new, dash_col, after_dash),
            Slot::BlockValue {
                after_colon: at, ..
            }
            | Slot::BlockItem { after_dash: at, .. } => {
                // null as nothing (`annotations:`), as charts write an empty key, or as it was
                // before inject replaced it ([`NULL_WAS`])
                let text = match new {
                    Value::Null => null_as_it_was(&self.text[at..]).unwrap_or_default(),
                    other => format!(" {}", flow_text(other)),
                };
                self.push(at, node.end.max(at), text);
            }
            Slot::FlowValue { layout, key_end } => {
                if !self.flow_null_kept(node, old, new, layout, key_end)
                    && !self.flow_null_back(node, new)
                {
                    let text = self.flow_value(new, layout);
                    self.push(self.content_start(node), node.end, text);
                }
            }
            Slot::Flow(layout) => {
                let text = self.flow_value(new, layout);
                self.push(self.content_start(node), node.end, text);
            }
            Slot::Root => return Err(self.err(node, "the document itself would be replaced")),
        }
        Ok(())
    }

    /// Writes the collection `new` as a block in place of a key's value `node`, on the lines
    /// under its key (at `key_col`); a null written there before is kept in a comment.
    fn block_value(
        &mut self,
        node: &Node,
        old: &Value,
        new: &Value,
        key_col: usize,
        after_colon: usize,
    ) {
        let mut text = String::from("\n");
        match new {
            Value::Object(m) => self.block_map(m, key_col + self.layout.indent, false, &mut text),
            Value::Array(a) => {
                let dash = if self.layout.indentless {
                    key_col
                } else {
                    key_col + self.layout.indent
                };
                self.block_seq(a, dash, &mut text);
            }
            _ => unreachable!("block is only set for collections"),
        }
        text.pop(); // the node ends at its last character, not after its newline
        let was = &self.text[after_colon..node.end.max(after_colon)];
        if old.is_null() && !was.trim().is_empty() {
            // `~`, `null` on the next line: kept in a comment for uninject.
            text.insert_str(0, &null_was(was));
        }
        self.push(after_colon, node.end.max(after_colon), text);
    }

    /// Writes the collection `new` as a block in place of a sequence item `node`, after its
    /// dash (at `dash_col`).
    fn block_item(&mut self, node: &Node, new: &Value, dash_col: usize, after_dash: usize) {
        let mut text = String::from(" ");
        match new {
            Value::Object(m) => self.block_map(m, dash_col + 2, true, &mut text),
            Value::Array(a) => {
                text.clear();
                text.push('\n');
                self.block_seq(a, dash_col + 2, &mut text);
            }
            _ => unreachable!("block is only set for collections"),
        }
        text.pop();
        self.push(after_dash, node.end.max(after_dash), text);
    }

    /// The text of the string `s` in place of `old`: in a `fresh` item, as a new string is
    /// written ([`emit::string`]: bare when safe, else single-quoted) when `old` was written so;
    /// else in `old`'s style ([`Self::restyled`]).
    fn string_in_place(&self, node: &Node, style: Style, old: &str, s: &str) -> String {
        let as_new =
            self.text.get(self.content_start(node)..node.end) == Some(emit::string(old).as_str());
        match self.own > 0 && as_new {
            true => emit::string(s),
            false => self.restyled(node, style, s),
        }
    }

    /// A string in place of a string, written in the old one's style where that style can hold
    /// it.
    fn restyled(&self, node: &Node, style: Style, s: &str) -> String {
        match style {
            Style::Plain if emit::plain_safe(s) => s.to_string(),
            Style::Single if !s.chars().any(emit::needs_escape) => {
                format!("'{}'", s.replace('\'', "''"))
            }
            Style::Block => {
                if let Some(text) = self.literal(node, s) {
                    return text;
                }
                // The replacement ends where the block ended, at a line start.
                format!("{}\n", emit::double_quoted(s))
            }
            Style::Plain | Style::Single | Style::Double => emit::double_quoted(s),
        }
    }

    /// `s` as a literal block scalar with the old one's header and indentation, when its
    /// chomping can hold `s` and every line can be written as it is.
    fn literal(&self, node: &Node, s: &str) -> Option<String> {
        let old = &self.text[node.start..node.end];
        let (header, body) = old.split_once('\n')?;
        let header = header.strip_suffix('\r').unwrap_or(header);
        if !header.starts_with('|') || header.chars().any(|c| c.is_ascii_digit()) {
            return None;
        }
        let indent = body
            .lines()
            .find(|l| !l.trim().is_empty())
            .map(|l| l.len() - l.trim_start_matches(' ').len())?;
        let header_chomp = header.trim_start_matches('|').trim();
        let content = match header_chomp.chars().next() {
            // clip: exactly one final newline
            None => s.strip_suffix('\n').filter(|c| !c.ends_with('\n'))?,
            Some('-') => (!s.ends_with('\n')).then_some(s)?,
            _ => return None,
        };
        if content.is_empty()
            || content.starts_with(' ')
            || content
                .chars()
                .any(|c| c.is_control() && c != '\n' && c != '\t')
            || content
                .lines()
                .any(|l| l.ends_with(' ') || l.ends_with('\t'))
        {
            return None;
        }
        let mut out = format!("{header}\n");
        for line in content.split('\n') {
            if !line.is_empty() {
                out.extend(std::iter::repeat_n(' ', indent));
                out.push_str(line);
            }
            out.push('\n');
        }
        Some(out)
    }

    fn map(
        &mut self,
        node: &Node,
        flow: bool,
        entries: &[Entry],
        old: &Map<String, Value>,
        new: &Map<String, Value>,
    ) -> Result<(), SpliceError> {
        let written = |k: &str| entries.iter().any(|e| e.key == k);
        // Deleted keys.
        let kept: Vec<&Entry> = entries
            .iter()
            .filter(|e| e.key == "<<" || new.contains_key(&e.key))
            .collect();
        for (i, e) in entries.iter().enumerate() {
            if e.key == "<<" || new.contains_key(&e.key) {
                continue;
            }
            self.delete_entry(node, flow, entries, i)?;
        }
        if old.keys().any(|k| !written(k) && !new.contains_key(k)) {
            return Err(self.err(node, "a key that a merge (<<) brings in would be removed"));
        }
        // Changed keys.
        let merges = entries.iter().any(|e| e.key == "<<");
        for e in &kept {
            if e.key == "<<" {
                continue;
            }
            if merges
                && !flow
                && old[&e.key] != new[&e.key]
                && let Some(start) = line_start_if_first(self.text, e.key_node.start)
            {
                self.beside_merge(e, start, &old[&e.key], &new[&e.key])?;
                continue;
            }
            let slot = if flow {
                Slot::FlowValue {
                    layout: self.flow_layout(node, entries.iter().map(|e| &e.key_node)),
                    key_end: e.key_node.end,
                }
            } else {
                Slot::BlockValue {
                    key_col: self.indent(&e.key_node),
                    after_colon: self.after_colon(e)?,
                }
            };
            self.path.push(e.key.clone());
            self.diff(&e.value, &old[&e.key], &new[&e.key], slot)?;
            self.path.pop();
        }
        // Added keys (or keys a merge brought in, now changed: written here, they win), each
        // run of them before the next key that is written, or after the last.
        let mut pending: Vec<(&String, &Value)> = Vec::new();
        let added = |k: &String| !written(k) && old.get(k) != new.get(k);
        for (k, v) in new {
            if added(k) {
                pending.push((k, v));
                continue;
            }
            if pending.is_empty() || !written(k) {
                continue;
            }
            let before = kept.iter().find(|e| &e.key == k).expect("written and kept");
            self.insert_entries(node, flow, entries, Some(before), &pending)?;
            pending.clear();
        }
        if !pending.is_empty() {
            self.insert_entries(node, flow, entries, None, &pending)?;
        }
        Ok(())
    }

    /// Changes the value of a block entry `e` (its line starting at `start`) in a mapping with
    /// a merge: deleting the entry is tried first, as the merge may give the new value by
    /// itself (uninject removing a key that inject wrote here); else the value is changed.
    fn beside_merge(
        &mut self,
        e: &Entry,
        start: usize,
        old: &Value,
        new: &Value,
    ) -> Result<(), SpliceError> {
        let slot = Slot::BlockValue {
            key_col: self.indent(&e.key_node),
            after_colon: self.after_colon(e)?,
        };
        let deletion = [Edit {
            start,
            end: after_line(self.text, &e.value),
            text: String::new(),
        }];
        self.path.push(e.key.clone());
        let settled = self.settles(&deletion, new);
        let edited = if settled {
            self.edits.extend(deletion);
            Ok(())
        } else {
            self.diff(&e.value, old, new, slot)
        };
        self.path.pop();
        edited
    }

    fn after_colon(&self, e: &Entry) -> Result<usize, SpliceError> {
        let rest = &self.text[e.key_node.end..];
        let skip = rest.len() - rest.trim_start_matches(' ').len();
        if rest[skip..].starts_with(':') {
            Ok(e.key_node.end + skip + 1)
        } else {
            Err(self.err(&e.key_node, "a key whose `:` is not on its line"))
        }
    }

    fn delete_entry(
        &mut self,
        node: &Node,
        flow: bool,
        entries: &[Entry],
        i: usize,
    ) -> Result<(), SpliceError> {
        let e = &entries[i];
        if flow {
            // With its separator: the one before it, or for the first one the one after it.
            let (start, end) = if i > 0 {
                (entries[i - 1].value.end, e.value.end)
            } else if let Some(next) = entries.get(1) {
                (e.key_node.start, next.key_node.start)
            } else {
                return Err(self.err(node, "the last key of a flow mapping"));
            };
            self.push(start, end, String::new());
            return Ok(());
        }
        let Some(start) = line_start_if_first(self.text, e.key_node.start) else {
            return Err(self.err(&e.key_node, "a key that shares its line with a `- `"));
        };
        self.push(start, after_line(self.text, &e.value), String::new());
        Ok(())
    }

    fn insert_entries(
        &mut self,
        node: &Node,
        flow: bool,
        entries: &[Entry],
        before: Option<&Entry>,
        new: &[(&String, &Value)],
    ) -> Result<(), SpliceError> {
        let Some(last) = entries.last() else {
            return Err(self.err(node, "an empty mapping"));
        };
        if flow {
            let layout = self.flow_layout(node, entries.iter().map(|e| &e.key_node));
            let (items, sep) = self.flow_items(
                layout,
                new.iter().map(|(k, v)| (Some((*k).clone()), (*v).clone())),
                Quote::Double,
            );
            let index = before.and_then(|b| entries.iter().position(|e| std::ptr::eq(e, b)));
            match index {
                Some(0) => {
                    let at = entries[0].key_node.start;
                    self.push(at, at, format!("{items}{sep}"));
                }
                Some(i) => {
                    let at = entries[i - 1].value.end;
                    self.push(at, at, format!("{sep}{items}"));
                }
                None => self.push(last.value.end, last.value.end, format!("{sep}{items}")),
            }
            return Ok(());
        }
        let col = self.indent(&entries[0].key_node);
        let mut text = String::new();
        let map: Map<String, Value> = new
            .iter()
            .map(|(k, v)| ((*k).clone(), (*v).clone()))
            .collect();
        self.block_map(&map, col, false, &mut text);
        // After a block scalar that ends the file without a line break, a new line would give
        // it one (`|` keeps its last break): the new keys go before its key instead.
        let before = before.or_else(|| self.unterminated_block(&last.value).then_some(last));
        match before {
            Some(e) => match line_start_if_first(self.text, e.key_node.start) {
                Some(at) => self.push(at, at, text),
                None => {
                    // The first key of a `- ` item: the new keys go on the dash's line.
                    let mut text = text[col..].to_string();
                    text.extend(std::iter::repeat_n(' ', col));
                    self.push(e.key_node.start, e.key_node.start, text);
                }
            },
            None => {
                let at = past_tab_blanks(self.text, after_line(self.text, &last.value));
                if at == self.text.len() && !self.text.ends_with('\n') {
                    text.insert(0, '\n');
                    // A last line without a line break: the new lines go after one, and end as
                    // that line did, without one.
                    text.pop();
                }
                self.push(at, at, text);
            }
        }
        Ok(())
    }

    /// The indentation a block node's column stands for: a byte order mark before the first
    /// line counts as a column of the text (`Node::col`) but indents nothing (a key added beside
    /// the first key of `\u{feff}a: 1` went one space in, and read as part of `a`'s value).
    fn indent(&self, node: &Node) -> usize {
        node.col - usize::from(node.line == 1 && node.col > 0 && self.text.starts_with(BOM))
    }

    /// How a flow collection lays out its items: on one line (`None`), or each on a line of
    /// its own at a column, nested ones a step further in (pretty JSON).
    fn flow_layout<'n>(
        &self,
        node: &Node,
        mut firsts: impl Iterator<Item = &'n Node>,
    ) -> Option<(usize, usize)> {
        let first = firsts.next()?;
        if first.line <= node.line {
            return None;
        }
        let line = &self.text[line_start(self.text, node.start)..];
        let base = line.len() - line.trim_start_matches(' ').len();
        Some((first.col, first.col.saturating_sub(base).max(1)))
    }

    /// New items of a flow collection (`key: value` when a key is given), joined, and the
    /// separator they are joined with.
    fn flow_items(
        &self,
        layout: Option<(usize, usize)>,
        items: impl Iterator<Item = (Option<String>, Value)>,
        quote: Quote,
    ) -> (String, String) {
        let sep = match layout {
            Some((col, _)) => format!(",\n{}", " ".repeat(col)),
            None => ", ".to_string(),
        };
        let items: Vec<String> = items
            .map(|(key, v)| {
                let value = match layout {
                    Some((col, step)) => pretty(&v, col, step, quote),
                    None => flow_quoted(&v, quote),
                };
                match key {
                    Some(k) => format!("{}: {value}", emit::double_quoted(&k)),
                    None => value,
                }
            })
            .collect();
        (items.join(&sep), sep)
    }

    fn seq(
        &mut self,
        node: &Node,
        flow: bool,
        items: &[Node],
        old: &[Value],
        new: &[Value],
    ) -> Result<(), SpliceError> {
        if items.len() != old.len() {
            return Err(self.err(node, "a sequence whose items do not match its text"));
        }
        let pairs = align(old, new);
        // Walk the pairs: `Some(i), Some(j)` matched or paired, `Some(i), None` deleted,
        // `None, Some(j)` inserted after the last kept item (or before the first).
        let mut last_kept: Option<usize> = None;
        let mut inserts: Vec<(Option<usize>, Vec<usize>)> = Vec::new();
        let mut deleted: Vec<usize> = Vec::new();
        for (i, j) in &pairs {
            match (i, j) {
                (Some(i), Some(j)) => {
                    let slot = match self.item_slot(flow, &items[*i])? {
                        Slot::Flow(_) => Slot::Flow(self.flow_layout(node, items.iter())),
                        other => other,
                    };
                    let own = usize::from(is_fresh_item(self.fresh, &old[*i], &new[*j]));
                    self.own += own;
                    self.path.push(i.to_string());
                    let diffed = self.diff(&items[*i], &old[*i], &new[*j], slot);
                    self.path.pop();
                    self.own -= own;
                    diffed?;
                    last_kept = Some(*i);
                }
                (Some(i), None) => deleted.push(*i),
                (None, Some(j)) => match inserts.last_mut() {
                    Some((after, js)) if *after == last_kept => js.push(*j),
                    _ => inserts.push((last_kept, vec![*j])),
                },
                (None, None) => {}
            }
        }
        let kept: Vec<usize> = (0..items.len()).filter(|i| !deleted.contains(i)).collect();
        if kept.is_empty() && inserts.is_empty() {
            return self
                .replace(
                    node,
                    &Value::Array(old.to_vec()),
                    &Value::Array(new.to_vec()),
                    Slot::Flow(None),
                )
                .map(|_| ());
        }
        self.delete_items(node, flow, items, &deleted, &kept)?;
        for (after, js) in inserts {
            let values: Vec<&Value> = js.iter().map(|j| &new[*j]).collect();
            self.insert_items(node, flow, items, after, &kept, &values)?;
        }
        Ok(())
    }

    fn item_slot(&self, flow: bool, item: &Node) -> Result<Slot, SpliceError> {
        if flow {
            return Ok(Slot::Flow(None));
        }
        let (dash, dash_col) = dash_of(self.text, item)
            .ok_or_else(|| self.err(item, "a `- ` that is not first on its line"))?;
        Ok(Slot::BlockItem {
            dash_col,
            after_dash: dash + 1,
        })
    }

    /// Deletes items, each run with its separator: after the kept item before it, or up to the
    /// kept item after it.
    fn delete_items(
        &mut self,
        node: &Node,
        flow: bool,
        items: &[Node],
        deleted: &[usize],
        kept: &[usize],
    ) -> Result<(), SpliceError> {
        let mut runs: Vec<(usize, usize)> = Vec::new();
        for &i in deleted {
            match runs.last_mut() {
                Some((_, to)) if *to + 1 == i => *to = i,
                _ => runs.push((i, i)),
            }
        }
        for (from, to) in runs {
            let prev = kept.iter().rev().find(|&&k| k < from);
            let next = kept.iter().find(|&&k| k > to);
            let (start, end) = if flow {
                match (prev, next) {
                    (Some(&p), _) => (items[p].end, items[to].end),
                    (None, Some(&n)) => (items[from].start, items[n].start),
                    (None, None) => return Err(self.err(node, "every item deleted")),
                }
            } else {
                match (prev, next) {
                    (Some(&p), _) => (
                        after_line(self.text, &items[p]),
                        after_line(self.text, &items[to]),
                    ),
                    (None, Some(&n)) => {
                        let a = dash_of(self.text, &items[from]).ok_or_else(|| {
                            self.err(&items[from], "a `- ` that is not first on its line")
                        })?;
                        let b = dash_of(self.text, &items[n]).ok_or_else(|| {
                            self.err(&items[n], "a `- ` that is not first on its line")
                        })?;
                        (line_start(self.text, a.0), line_start(self.text, b.0))
                    }
                    (None, None) => return Err(self.err(node, "every item deleted")),
                }
            };
            self.push(start, end, String::new());
        }
        Ok(())
    }

    /// Inserts `values` after item `after`, or before the first kept item.
    fn insert_items(
        &mut self,
        node: &Node,
        flow: bool,
        items: &[Node],
        after: Option<usize>,
        kept: &[usize],
        values: &[&Value],
    ) -> Result<(), SpliceError> {
        let before_first = after.is_none();
        let anchor = after.or_else(|| kept.first().copied());
        let Some(anchor) = anchor else {
            return Err(self.err(node, "no item to insert beside"));
        };
        if flow {
            let layout = self.flow_layout(node, items.iter());
            // Strings quoted as the items beside them are: bare in `[sh, -c]`, double-quoted in
            // `["sh", "-c"]` and in JSON.
            let double = items
                .iter()
                .any(|i| matches!(i.kind, Kind::Scalar(Style::Double)));
            let quote = if double {
                Quote::Double
            } else {
                Quote::AsNeeded
            };
            let (texts, sep) =
                self.flow_items(layout, values.iter().map(|v| (None, (*v).clone())), quote);
            if before_first {
                let at = items[anchor].start;
                self.push(at, at, format!("{texts}{sep}"));
            } else {
                let at = items[anchor].end;
                self.push(at, at, format!("{sep}{texts}"));
            }
            return Ok(());
        }
        if !before_first && self.unterminated_block(&items[anchor]) {
            return Err(self.err(
                &items[anchor],
                "the file ends in a block scalar (`|` or `>`) without a final line break, and \
                 an item after it would give that text one",
            ));
        }
        let (dash, dash_col) = dash_of(self.text, &items[anchor])
            .ok_or_else(|| self.err(&items[anchor], "a `- ` that is not first on its line"))?;
        let owned: Vec<Value> = values.iter().map(|v| (*v).clone()).collect();
        let mut text = String::new();
        self.block_seq_items(
            &owned,
            dash_col,
            items[anchor].col.saturating_sub(dash_col).max(2),
            &mut text,
        );
        if before_first {
            let at = line_start(self.text, dash);
            self.push(at, at, text);
        } else {
            let at = after_line(self.text, &items[anchor]);
            if at == self.text.len() && !self.text.ends_with('\n') {
                text.insert(0, '\n');
                // A last line without a line break: the new lines go after one, and end as
                // that line did, without one.
                text.pop();
            }
            self.push(at, at, text);
        }
        Ok(())
    }

    // --- new block text, in the document's layout ---------------------------------------------

    /// `m`'s entries at column `col`, each line ending with a newline; the first key without
    /// its indentation when `inline` (after a `- `).
    fn block_map(&self, m: &Map<String, Value>, col: usize, inline: bool, out: &mut String) {
        for (i, (k, v)) in m.iter().enumerate() {
            if i > 0 || !inline {
                out.extend(std::iter::repeat_n(' ', col));
            }
            out.push_str(&emit::string(k));
            out.push(':');
            match v {
                Value::Object(inner) if !inner.is_empty() => {
                    out.push('\n');
                    self.block_map(inner, col + self.layout.indent, false, out);
                }
                Value::Array(items) if !items.is_empty() => {
                    out.push('\n');
                    let dash = if self.layout.indentless {
                        col
                    } else {
                        col + self.layout.indent
                    };
                    self.block_seq(items, dash, out);
                }
                other => {
                    out.push(' ');
                    out.push_str(&flow_text(other));
                    out.push('\n');
                }
            }
        }
    }

    fn block_seq(&self, items: &[Value], dash_col: usize, out: &mut String) {
        self.block_seq_items(items, dash_col, 2, out);
    }

    /// Items `- x` at `dash_col`, their content `offset` columns further in.
    fn block_seq_items(&self, items: &[Value], dash_col: usize, offset: usize, out: &mut String) {
        for item in items {
            out.extend(std::iter::repeat_n(' ', dash_col));
            out.push('-');
            out.extend(std::iter::repeat_n(' ', offset - 1));
            match item {
                Value::Object(m) if !m.is_empty() => {
                    self.block_map(m, dash_col + offset, true, out)
                }
                Value::Array(a) if !a.is_empty() => {
                    out.truncate(out.len() - (offset - 1));
                    out.push('\n');
                    self.block_seq(a, dash_col + offset, out);
                }
                other => {
                    out.push_str(&flow_text(other));
                    out.push('\n');
                }
            }
        }
    }
}

/// How new strings in flow style are quoted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Quote {
    /// Bare where YAML 1.1 and 1.2 read them the same ([`emit::string`]).
    AsNeeded,
    /// Always double-quoted, as JSON has them.
    Double,
}

/// A value on one line: strings as [`emit::string`] writes them, collections as JSON (which
/// is YAML flow style, and keeps a JSON file JSON).
fn flow_text(v: &Value) -> String {
    flow_quoted(v, Quote::AsNeeded)
}

fn flow_quoted(v: &Value, quote: Quote) -> String {
    match v {
        Value::String(s) if quote == Quote::AsNeeded => emit::string(s),
        Value::String(s) => emit::double_quoted(s),
        Value::Array(a) => {
            let items: Vec<String> = a.iter().map(|v| flow_quoted(v, Quote::Double)).collect();
            format!("[{}]", items.join(", "))
        }
        Value::Object(m) => {
            let items: Vec<String> = m
                .iter()
                .map(|(k, v)| {
                    format!(
                        "{}: {}",
                        emit::double_quoted(k),
                        flow_quoted(v, Quote::Double)
                    )
                })
                .collect();
            format!("{{{}}}", items.join(", "))
        }
        other => other.to_string(),
    }
}

/// A value as pretty JSON whose first line is at column `col`, nested lines `step` further in
/// each, as the file around it is written.
fn pretty(v: &Value, col: usize, step: usize, quote: Quote) -> String {
    let inner = " ".repeat(col + step);
    let close = " ".repeat(col);
    match v {
        Value::Array(a) if !a.is_empty() => {
            let items: Vec<String> = a
                .iter()
                .map(|v| format!("{inner}{}", pretty(v, col + step, step, Quote::Double)))
                .collect();
            format!("[\n{}\n{close}]", items.join(",\n"))
        }
        Value::Object(m) if !m.is_empty() => {
            let items: Vec<String> = m
                .iter()
                .map(|(k, v)| {
                    let v = pretty(v, col + step, step, Quote::Double);
                    format!("{inner}{}: {v}", emit::double_quoted(k))
                })
                .collect();
            format!("{{\n{}\n{close}}}", items.join(",\n"))
        }
        other => flow_quoted(other, quote),
    }
}

/// Pairs old items with new ones: `(Some(i), Some(j))` for an item kept (perhaps changed),
/// `(Some(i), None)` for one removed, `(None, Some(j))` for one added, in order. Items are
/// matched by their `name` when they have one (containers, volumes, env), by value otherwise
/// (a command's words); unmatched items between two matches are paired in order.
fn align(old: &[Value], new: &[Value]) -> Vec<(Option<usize>, Option<usize>)> {
    // Borrowed, not copied: a copy of every item twice over was a sixth of inject's peak on
    // one large `kind: List` (issue 24 §4).
    let ok: Vec<AlignKey> = old.iter().map(AlignKey::of).collect();
    let nk: Vec<AlignKey> = new.iter().map(AlignKey::of).collect();
    let matches = if old.len() * new.len() <= MAX_ALIGN * MAX_ALIGN / 4 {
        lcs(&ok, &nk)
    } else {
        let mut m = Vec::new();
        let mut p = 0;
        while p < ok.len() && p < nk.len() && ok[p] == nk[p] {
            m.push((p, p));
            p += 1;
        }
        m
    };
    let mut out = Vec::new();
    let (mut i, mut j) = (0, 0);
    for (mi, mj) in matches
        .into_iter()
        .chain(std::iter::once((old.len(), new.len())))
    {
        while i < mi && j < mj {
            out.push((Some(i), Some(j)));
            i += 1;
            j += 1;
        }
        while i < mi {
            out.push((Some(i), None));
            i += 1;
        }
        while j < mj {
            out.push((None, Some(j)));
            j += 1;
        }
        if mi < old.len() {
            out.push((Some(mi), Some(mj)));
            i = mi + 1;
            j = mj + 1;
        }
    }
    out
}

/// Whether the item matched from `old` to `new` is one of the `fresh` items, by `name`.
fn is_fresh_item(fresh: &[&str], old: &Value, new: &Value) -> bool {
    let name = |v: &Value| v.get("name").and_then(Value::as_str).map(str::to_string);
    name(old).is_some_and(|n| fresh.contains(&n.as_str())) && name(old) == name(new)
}

/// What [`align`] matches an item by: its `name` when it has one, else its whole value.
#[derive(PartialEq)]
enum AlignKey<'v> {
    Name(&'v str),
    Value(&'v Value),
}

impl<'v> AlignKey<'v> {
    fn of(v: &'v Value) -> AlignKey<'v> {
        match v.get("name").and_then(Value::as_str) {
            Some(n) => AlignKey::Name(n),
            None => AlignKey::Value(v),
        }
    }
}

/// The longest common subsequence of `a` and `b`, as index pairs.
pub fn lcs<T: PartialEq>(a: &[T], b: &[T]) -> Vec<(usize, usize)> {
    let (n, m) = (a.len(), b.len());
    let mut t = vec![0u32; (n + 1) * (m + 1)];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            t[i * (m + 1) + j] = if a[i] == b[j] {
                t[(i + 1) * (m + 1) + j + 1] + 1
            } else {
                t[(i + 1) * (m + 1) + j].max(t[i * (m + 1) + j + 1])
            };
        }
    }
    let (mut i, mut j) = (0, 0);
    let mut out = Vec::new();
    while i < n && j < m {
        if a[i] == b[j] {
            out.push((i, j));
            i += 1;
            j += 1;
        } else if t[(i + 1) * (m + 1) + j] >= t[i * (m + 1) + j + 1] {
            i += 1;
        } else {
            j += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::yaml::tree;
    use serde_json::json;

    /// `text` with `change` applied to its first document, checked to read back as the changed
    /// value; then the change undone must give `text` back, byte for byte.
    fn edit(text: &str, change: impl Fn(&mut Value)) -> String {
        let doc = tree::parse(text).unwrap().remove(0);
        let mut new = doc.value.clone();
        change(&mut new);
        let out = apply(text, edits(text, &doc.node, &doc.value, &new).unwrap()).unwrap();
        let back = tree::parse(&out).unwrap().remove(0);
        assert_eq!(back.value, new, "{out}");
        let undone = apply(&out, edits(&out, &back.node, &new, &doc.value).unwrap()).unwrap();
        assert_eq!(undone, text, "undoing the edit of:\n{out}");
        out
    }

    #[test]
    fn keys_and_items_are_added_in_the_documents_own_layout() {
        let text = "# c\na:\n    b: 1 # x\n    l:\n        - x\n        - y\nz: |\n  keep\n\n";
        let out = edit(text, |v| {
            // `n` is false to YAML 1.1: quoted
            v["a"]["n"] = json!({"k": [1, "on"]});
            v["a"]["l"].as_array_mut().unwrap().push(json!("w"));
        });
        assert_eq!(
            out,
            "# c\na:\n    b: 1 # x\n    l:\n        - x\n        - y\n        - w\n    'n':\n        k:\n            - 1\n            - 'on'\nz: |\n  keep\n\n"
        );
    }

    #[test]
    fn a_key_before_the_first_of_an_item_and_after_a_block_scalar() {
        let text = "- name: a\n  s: |-\n    x\n\n- name: b\n";
        let out = edit(text, |v| {
            v[0]["t"] = json!(2);
            v[1]["u"] = json!(true);
        });
        assert_eq!(
            out,
            "- name: a\n  s: |-\n    x\n  t: 2\n\n- name: b\n  u: true\n"
        );
    }

    #[test]
    fn flow_collections_gain_items_in_their_own_quoting() {
        let out = edit("c: [sh, -c]\nd: [\"a\"]\ne: {k: v}\n", |v| {
            v["c"]
                .as_array_mut()
                .unwrap()
                .insert(0, json!("/hooklog/bin/hooklog"));
            v["d"].as_array_mut().unwrap().insert(0, json!("--"));
            v["e"]["j"] = json!("0755");
        });
        assert_eq!(
            out,
            "c: [/hooklog/bin/hooklog, sh, -c]\nd: [\"--\", \"a\"]\ne: {k: v, \"j\": \"0755\"}\n"
        );
    }

    #[test]
    fn pretty_json_stays_pretty_json() {
        let text = "{\n    \"a\": {\n        \"b\": 1\n    }\n}";
        let out = edit(text, |v| v["a"]["c"] = json!({"d": ["e"]}));
        assert_eq!(
            out,
            "{\n    \"a\": {\n        \"b\": 1,\n        \"c\": {\n            \"d\": [\n                \"e\"\n            ]\n        }\n    }\n}"
        );
        serde_json::from_str::<Value>(&out).unwrap();
    }

    #[test]
    fn empty_and_null_values_are_filled_and_emptied() {
        let out = edit("a:\nb: []\nc: {}\n", |v| {
            v["a"] = json!({"k": "x"});
            v["b"] = json!([{"m": 1}]);
            v["c"] = json!({"m": 2});
        });
        // Empty flow collections gain their items in flow style, inside their brackets.
        assert_eq!(out, "a:\n  k: x\nb: [{\"m\": 1}]\nc: {\"m\": 2}\n");
    }

    #[test]
    fn a_null_in_a_flow_mapping_is_kept_after_its_key_and_given_back() {
        let fill = |v: &mut Value| {
            v["m"]["a"] = json!({"k": "x"});
            v["m"]["b"] = json!([1]);
        };
        let out = edit("m: {a: ~, b: NULL }\n", fill);
        assert_eq!(
            out,
            "m: {a: # hooklog: was \": ~\"\n  {\"k\": \"x\"}, b: # hooklog: was \": NULL\"\n  [1] }\n"
        );
        // Empty, without a `:`, tagged, anchored, on the next line: each is its text from the
        // key's end.
        for text in [
            "m: {a: , b}\n",
            "m: {a: !!null Null, b:\n    ~\n  }\n",
            "m: {a: &x ~, b: &y}\n",
            "m:\n  a: &x ~\n  b: &y\n",
        ] {
            edit(text, fill);
        }
        // An anchored null that an alias repeats is not written anew.
        let text = "m: {a: &x ~, b: []}\nn: *x\n";
        let doc = tree::parse(text).unwrap().remove(0);
        let mut new = doc.value.clone();
        fill(&mut new);
        assert!(edits(text, &doc.node, &doc.value, &new).is_err());
        // `null` is written back as it is: JSON stays JSON.
        let json = "{\"m\": {\"a\": null, \"b\": null}}";
        assert!(!edit(json, fill).contains('#'));
    }

    #[test]
    fn strings_keep_their_style_and_unsafe_ones_are_quoted() {
        let out = edit("a: x\nb: 'y'\nc: \"z\"\nd: |\n  one\n", |v| {
            v["a"] = json!("w");
            v["b"] = json!("it's");
            v["c"] = json!("del\u{7f}");
            v["d"] = json!("two\n");
        });
        assert_eq!(out, "a: w\nb: 'it''s'\nc: \"del\\u007f\"\nd: |\n  two\n");
        // A string a YAML 1.1 reader takes for something else is never left bare.
        let doc = tree::parse("a: x\n").unwrap().remove(0);
        let e = edits("a: x\n", &doc.node, &doc.value, &json!({"a": "no"})).unwrap();
        assert_eq!(apply("a: x\n", e).unwrap(), "a: \"no\"\n");
    }

    #[test]
    fn strings_of_fresh_items_are_written_as_new_ones() {
        let text =
            "c:\n- name: hooklog\n  args: [run, 'a,b', \"x\"]\n- name: web\n  args: [run, 'a,b']\n";
        let doc = tree::parse(text).unwrap().remove(0);
        let mut new = doc.value.clone();
        new["c"][0]["args"] = json!(["run", "a", "x,y"]);
        new["c"][1]["args"] = json!(["run", "a"]);
        let with = |fresh: &[&str]| {
            let (e, _) = edits_noted(text, &doc.node, &doc.value, &new, fresh).unwrap();
            apply(text, e).unwrap()
        };
        // The fresh item's as a first write; the user's in their style.
        assert_eq!(
            with(&["hooklog"]),
            "c:\n- name: hooklog\n  args: [run, a, \"x,y\"]\n- name: web\n  args: [run, 'a']\n"
        );
        // No item fresh: every string keeps its style.
        assert_eq!(
            with(&[]),
            "c:\n- name: hooklog\n  args: [run, 'a', \"x,y\"]\n- name: web\n  args: [run, 'a']\n"
        );
    }

    #[test]
    fn an_alias_that_must_change_is_written_out_and_undone() {
        let out = edit("a: &x [1]\nb: *x\n", |v| v["b"] = json!([1, 2]));
        assert_eq!(out, "a: &x [1]\nb: [1, 2] # hooklog: written out from *x\n");
        // Where every copy changes the same way, the anchor is edited and the alias stays.
        let out = edit("a: &x [1]\nb: *x\n", |v| {
            v["a"] = json!([1, 2]);
            v["b"] = json!([1, 2]);
        });
        assert_eq!(out, "a: &x [1, 2]\nb: *x\n");
    }

    #[test]
    fn align_matches_names_then_values() {
        let old = [json!({"name": "a", "x": 1}), json!({"name": "b"})];
        let new = [
            json!({"name": "a", "x": 2}),
            json!({"name": "b"}),
            json!({"name": "c"}),
        ];
        assert_eq!(
            align(&old, &new),
            [(Some(0), Some(0)), (Some(1), Some(1)), (None, Some(2))]
        );
        let old = [json!("sleep"), json!("5")];
        let new = [json!("hook"), json!("--"), json!("sleep"), json!("5")];
        assert_eq!(
            align(&old, &new),
            [
                (None, Some(0)),
                (None, Some(1)),
                (Some(0), Some(2)),
                (Some(1), Some(3))
            ]
        );
    }
}

#[cfg(test)]
mod applier {
    //! [`Applier`], one batch of edits at a time, against [`apply`] of them all.

    use super::*;
    use proptest::prelude::*;

    /// A text of lines (some CRLF, maybe no final newline) and batches of edits in it: insertions,
    /// replacements and deletions, overlapping or meeting at times, in the text's order or not.
    /// An edit as `(start, end, text)`.
    type Raw = (usize, usize, String);

    fn case() -> impl Strategy<Value = (String, Vec<Vec<Raw>>)> {
        let text = (
            prop::collection::vec(
                prop::sample::select(vec!["a: 1", "  b: [x]", "- c", ""]),
                0..8,
            ),
            any::<bool>(),
            any::<bool>(),
        )
            .prop_map(|(lines, crlf, last)| {
                let nl = if crlf { "\r\n" } else { "\n" };
                let mut t = lines.join(nl);
                if last {
                    t.push_str(nl);
                }
                t
            });
        text.prop_flat_map(|t| {
            let n = t.len();
            let edit = (
                0..=n,
                0..=4usize,
                prop::sample::select(vec!["", "", "z", "  new: 2\n"]),
            )
                .prop_map(move |(start, len, text)| {
                    (start, (start + len).min(n), text.to_string())
                });
            (
                Just(t),
                prop::collection::vec(prop::collection::vec(edit, 0..4), 0..4),
            )
        })
    }

    /// Whatever its batches, Applier writes what apply writes, fails as it fails, or says that
    /// they came out of order; in the text's order it never says so.
    #[test]
    fn applier_writes_what_apply_writes() {
        crate::testkit::property(
            file!(),
            "applier_writes_what_apply_writes",
            512,
            0.5,
            case(),
            |(text, batches), reach| {
                let edits = |b: &[(usize, usize, String)]| -> Vec<Edit> {
                    b.iter()
                        .map(|(start, end, text)| Edit {
                            start: *start,
                            end: *end,
                            text: text.clone(),
                        })
                        .collect()
                };
                let all: Vec<Edit> = batches.iter().flat_map(|b| edits(b)).collect();
                let mut applier = Applier::new(&text);
                for b in &batches {
                    applier.push(edits(b));
                }
                let want = apply(&text, all);
                match (applier.finish(), want) {
                    (Ok(Applied::Unordered), _) => {
                        let mut keys: Vec<(usize, usize)> = Vec::new();
                        for b in &batches {
                            let mut k: Vec<_> = b.iter().map(|e| (e.0, e.1)).collect();
                            k.sort();
                            keys.extend(k);
                        }
                        prop_assert!(keys.windows(2).any(|w| w[1] < w[0]), "{:?}", batches);
                    }
                    (Ok(Applied::Unchanged), Ok(t)) => {
                        prop_assert!(batches.iter().all(Vec::is_empty));
                        prop_assert_eq!(t, text);
                        reach.reached();
                    }
                    (Ok(Applied::Changed(got)), Ok(t)) => {
                        prop_assert_eq!(got, t);
                        reach.reached();
                    }
                    (Err(got), Err(e)) => {
                        prop_assert_eq!(got.to_string(), e.to_string());
                        reach.reached();
                    }
                    (got, want) => {
                        let got = match got {
                            Ok(Applied::Changed(t)) => Ok(t),
                            Ok(_) => Ok("(unchanged or unordered)".to_string()),
                            Err(e) => Err(e.to_string()),
                        };
                        return Err(TestCaseError::fail(format!(
                            "applier {got:?}, apply {:?}",
                            want.map_err(|e| e.to_string())
                        )));
                    }
                }
                Ok(())
            },
        );
    }
}
