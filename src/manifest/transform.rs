//! (the control plane) The streaming transform under `inject` and `uninject`: a change applied to
//! each document of every input, a `kind: *List` an item at a time, and every input written back
//! with only the changed parts rewritten ([`splice`]), into a temporary file ([`spool`]) until it
//! all reads back. It returns its errors; the commands ([`super`]) say them.

use crate::yaml::{digest, emit, splice, spool, tree};

use super::layout::OWN_CONTAINERS;
use super::{inject, load};

/// A document transform: [`inject::inject`] or [`super::uninject::uninject`].
pub(crate) type Change<'a> =
    dyn FnMut(&mut serde_json::Value) -> Result<Vec<String>, inject::InjectError> + 'a;

/// What [`transform`] made: every input written back, the report, and the inputs read.
#[derive(Debug)]
pub(crate) struct Transformed {
    /// Every input written back, in order, with `---` between them: in a temporary file, not
    /// in memory (inject's output is about 5 times its input, issue 24 §4).
    pub out: spool::Spool,
    pub report: Vec<String>,
    pub inputs: Vec<load::Input>,
}

/// Why an input is not written back as it was edited.
enum NotApplied {
    /// The edit cannot be made in place (said in the report; the input is written anew).
    Edit(String),
    /// The temporary file failed: nothing is written.
    Spool(std::io::Error),
}

fn spool_error(e: std::io::Error) -> String {
    format!("cannot write the manifests to a temporary file: {e}")
}

/// One input's place in the output: where its text starts (past the `---` before it), once any
/// of it is written.
struct Place {
    /// The output's length before this input: what a failed edit goes back to.
    before: u64,
    start: Option<u64>,
}

impl Place {
    fn new(out: &spool::Spool) -> Place {
        Place {
            before: out.len(),
            start: None,
        }
    }

    /// Writes `text`, the next piece of this input's output; before its first piece, the
    /// separator from the inputs before, as when the outputs were joined whole: a line break
    /// if the last did not end with one, and `---` unless this one starts with it.
    fn put(&mut self, out: &mut spool::Spool, text: &str) -> std::io::Result<()> {
        if self.start.is_none() {
            if !out.is_empty() {
                if !out.ends_with_newline() {
                    out.push("\n")?;
                }
                if !text.starts_with("---") {
                    out.push("---\n")?;
                }
            }
            self.start = Some(out.len());
        }
        out.push(text)
    }

    /// Takes back all this input wrote, separator included.
    fn undo(&mut self, out: &mut spool::Spool) -> std::io::Result<()> {
        self.start = None;
        out.truncate(self.before)
    }
}

/// Applies `f` to each document of every input and writes every input back with only the
/// changed parts rewritten ([`splice`]), with the report (what `f` says and what could not be
/// edited in place); `observe` sees each document before and after. Nothing is made when any
/// input or document fails: the error is the first input that cannot be read, else the first
/// document `f` refuses (as when every input was read whole before any was changed).
///
/// Each input is read one document at a time, a `kind: *List` one item at a time (read, changed,
/// its edits written into the output by [`splice::Applier`], dropped), and the output goes to a
/// temporary file ([`spool`]) a piece at a time: what is held is the input's text and one
/// document or item, not a value tree of every document nor the output (issue 24 §4). A List
/// whose items cannot be edited each on its own is read again, its items' edits made as one
/// ([`Mode::Shared`]), then whole; a last read writes the input anew when it cannot be edited
/// in place.
pub(crate) fn transform(
    inputs: Vec<Result<load::Input, load::LoadError>>,
    f: &mut Change,
    observe: &mut Observe,
) -> Result<Transformed, String> {
    let mut out = spool::Spool::new();
    let mut report = Vec::new();
    let mut read = Vec::new();
    // The first document `f` refused: reported only if every input reads.
    let mut refused: Option<String> = None;
    for input in inputs {
        let input = input.map_err(|e| e.to_string())?;
        let mut place = Place::new(&out);
        let mut edited = edit_input(
            &input,
            Mode::Split,
            f,
            Some(&mut *observe),
            &mut out,
            &mut place,
            &mut refused,
        )?;
        if refused.is_some() {
            continue;
        }
        // An edit of a List's item that cannot be made on its own (inside an anchor that
        // another item names, say) is made in the List: its items' edits as one splice, else
        // the List read whole as before Lists were read an item at a time.
        let redo = std::mem::take(&mut edited.redo);
        for mode in [Mode::Shared(&redo), Mode::Whole] {
            let retry = matches!(&edited.written, Err(NotApplied::Edit(_))) && edited.split;
            if !retry || matches!(mode, Mode::Shared(set) if set.is_empty()) {
                continue;
            }
            place.undo(&mut out).map_err(spool_error)?;
            edited = edit_input(&input, mode, f, None, &mut out, &mut place, &mut refused)?;
        }
        report.extend(edited.notes);
        report.extend(edited.lines);
        match edited.written {
            Ok(()) => {
                report.extend(
                    edited
                        .placed
                        .into_iter()
                        .map(|n| format!("  {}:{n}", input.name)),
                );
            }
            Err(NotApplied::Spool(e)) => return Err(spool_error(e)),
            Err(NotApplied::Edit(why)) => {
                // Meaning first: the whole input written anew, and said so.
                report.push(format!(
                    "hooklog: {}: could not edit in place ({why}); written anew, comments and layout not kept",
                    input.name
                ));
                place
                    .undo(&mut out)
                    .and_then(|_| place.put(&mut out, &written_anew(&input, f)))
                    .map_err(spool_error)?;
            }
        }
        read.push(input);
    }
    if let Some(e) = refused {
        return Err(e);
    }
    Ok(Transformed {
        out,
        report,
        inputs: read,
    })
}

/// What [`edit_list`] made of a List.
enum ListEdited {
    Made {
        lines: Vec<String>,
        /// Its edits, or why they cannot be made in place.
        edits: Result<Vec<splice::Edit>, String>,
        notes: Vec<String>,
        /// The digest of the List changed.
        digest: u128,
    },
    /// `f` refused one of its items (said in `refused`).
    Refused,
}

/// `doc`, when it is a `kind: *List` read whole, changed by `f` an item at a time and its
/// edits made as the whole List's ([`splice::ListEdits`]): held are its trees (read whole, since
/// its items share anchors) and its edits, never the List changed beside it (inject's output is
/// about 5 times its input). Any other document is given back.
fn edit_list(
    input: &load::Input,
    mut doc: load::Document,
    f: &mut Change,
    refused: &mut Option<String>,
) -> Result<ListEdited, Box<load::Document>> {
    use serde_json::Value;
    let is_list = doc.value["kind"]
        .as_str()
        .is_some_and(|k| k.ends_with("List"));
    let count = root_items(&doc.node).and_then(|n| match &n.kind {
        tree::Kind::Seq { items, .. } => Some(items.len()),
        _ => None,
    });
    let fits = count.is_some_and(|n| doc.value["items"].as_array().is_some_and(|a| a.len() == n));
    if !is_list || !fits {
        return Err(Box::new(doc));
    }
    let Some(items_node) = root_items(&doc.node) else {
        return Err(Box::new(doc));
    };
    let old_items = match doc.value.get_mut("items") {
        Some(Value::Array(a)) => std::mem::take(a),
        // `fits` found them.
        _ => return Err(Box::new(doc)),
    };
    let mut list = splice::ListEdits::new(&input.text, &doc.node, OWN_CONTAINERS);
    let mut lines = Vec::new();
    let mut folded = digest::Items::new();
    let mut failed: Option<String> = None;
    for (index, old) in old_items.into_iter().enumerate() {
        let mut new = old.clone();
        match f(&mut new) {
            Ok(l) => lines.extend(l),
            Err(e) => {
                let line = doc
                    .node
                    .at(&format!("/items/{index}"))
                    .map_or(doc.line, |n| refused_line(n.line, n, &e));
                *refused = Some(format!("{}:{line}: {e}", input.name));
                return Ok(ListEdited::Refused);
            }
        }
        if failed.is_none()
            && let Err(e) = list.item(items_node, index, &old, &new)
        {
            failed = Some(format!("document at line {}: {e}", doc.line));
        }
        folded.push(&new);
    }
    // The List's own keys, its items left out of both.
    let mut wrapper = doc.value.clone();
    match f(&mut wrapper) {
        Ok(l) => lines.extend(l),
        Err(e) => {
            *refused = Some(format!(
                "{}:{}: {e}",
                input.name,
                refused_line(doc.line, &doc.node, &e)
            ));
            return Ok(ListEdited::Refused);
        }
    }
    let (edits, notes) = match failed {
        Some(why) => (Err(why), Vec::new()),
        None => match list.finish(&doc.node, &doc.value, &wrapper) {
            Ok((e, n)) => (Ok(e), n),
            Err(e) => (
                Err(format!("document at line {}: {e}", doc.line)),
                Vec::new(),
            ),
        },
    };
    Ok(ListEdited::Made {
        lines,
        edits,
        notes,
        digest: folded.of(&wrapper),
    })
}

/// The value node of a root mapping's `items`, unless a merge key (`<<`) may set them anew.
fn root_items(root: &tree::Node) -> Option<&tree::Node> {
    match &root.kind {
        tree::Kind::Map { entries, .. } if !entries.iter().any(|e| e.key == "<<") => {
            entries.iter().find(|e| e.key == "items").map(|e| &e.value)
        }
        _ => None,
    }
}

/// What sees each document (or List item) before and after `f`.
pub(crate) type Observe<'a> = dyn FnMut(&serde_json::Value, &serde_json::Value) + 'a;

/// What [`edit_input`] made of one input.
struct Edited {
    /// What it left out, and what `f` said.
    notes: Vec<String>,
    lines: Vec<String>,
    /// The notes of the edits made in place.
    placed: Vec<String>,
    /// Whether its edits were written and read back.
    written: Result<(), NotApplied>,
    /// Whether a List's items were read one at a time.
    split: bool,
    /// The documents whose items must be edited as one ([`Mode::Shared`]).
    redo: std::collections::BTreeSet<usize>,
}

/// How [`edit_input`] reads an input's Lists.
#[derive(Clone, Copy)]
enum Mode<'a> {
    /// An item at a time, each edited on its own.
    Split,
    /// The same, but the Lists these document ordinals name (whose items share anchors, found
    /// by [`Mode::Split`]) edited as one: every item's edits in one splice of the List's text
    /// ([`splice::ListEdits`]), an alias of one item seeing the anchor of another.
    Shared(&'a std::collections::BTreeSet<usize>),
    /// Every document whole (a List still changed an item at a time, [`edit_list`]).
    Whole,
}

/// Applies `f` to each document of `input` (a List's items as `mode` says) and writes its
/// edits to `out` at `place`; `observe` sees each document (or item) before and after. A
/// document `f` refuses is `refused`, and the rest is not written.
fn edit_input(
    input: &load::Input,
    mode: Mode,
    f: &mut Change,
    mut observe: Option<&mut Observe>,
    out: &mut spool::Spool,
    place: &mut Place,
    refused: &mut Option<String>,
) -> Result<Edited, String> {
    let mut p = Progress::new(&input.text);
    let each = |part: load::Part| {
        if refused.is_some() {
            return;
        }
        let (doc, list, root, index) = p.open(part, mode, input);
        let this = p.ordinal;
        p.ordinal += usize::from(list.is_some());
        let doc = match (mode, list) {
            (Mode::Whole, Some(_)) => p.whole_list(input, doc, f, refused),
            _ => Some(doc),
        };
        if let Some(doc) = doc {
            let mut value = doc.value.clone();
            match f(&mut value) {
                Ok(l) => p.lines.extend(l),
                Err(e) => {
                    *refused = Some(format!(
                        "{}:{}: {e}",
                        input.name,
                        refused_line(doc.line, &doc.node, &e)
                    ));
                    return;
                }
            }
            if let Some(observe) = observe.as_mut() {
                observe(&doc.value, &value);
            }
            let joined = matches!(mode, Mode::Shared(set) if set.contains(&this));
            p.splice(
                &input.text,
                &doc,
                &value,
                joined,
                list.is_some(),
                (root, index),
            );
            p.count(list, &value);
        }
        if p.failed.is_none() && p.applier.written_len() >= spool::PIECE_BYTES {
            p.failed = place.put(out, &p.applier.take_written()).err();
        }
    };
    let notes = match mode {
        Mode::Whole => input.each_document_part(each),
        Mode::Split | Mode::Shared(_) => input.each_part(each),
    };
    let notes = notes.map_err(|e| e.to_string())?;
    if let Some(e) = p.failed {
        return Err(spool_error(e));
    }
    let written = match p.why {
        _ if refused.is_some() => Ok(()),
        Some(why) => Err(NotApplied::Edit(why)),
        None => applied(input, p.applier, &p.wants, f, out, place),
    };
    Ok(Edited {
        notes,
        lines: p.lines,
        placed: p.placed,
        written,
        split: p.any_split,
        redo: p.redo,
    })
}

/// What [`edit_input`] gathers as it reads an input's parts.
struct Progress<'t> {
    /// What `f` said.
    lines: Vec<String>,
    /// The edits, applied to the input's text as they come.
    applier: splice::Applier<'t>,
    /// What the edits noted of where they put things.
    placed: Vec<String>,
    /// Why the edits cannot be made in place, once one cannot.
    why: Option<String>,
    /// The digest each document (or List) written must have.
    wants: Vec<u128>,
    /// The first failure to write to the spool.
    failed: Option<std::io::Error>,
    /// Whether a List was read an item at a time.
    any_split: bool,
    /// The digests of the List items read so far, for the List's own digest.
    items: digest::Items,
    /// Which document the next part is of, and those whose items must be edited as one.
    ordinal: usize,
    redo: std::collections::BTreeSet<usize>,
    /// The List whose items are being edited as one.
    joint: Option<splice::ListEdits<'t>>,
}

impl<'t> Progress<'t> {
    fn new(text: &'t str) -> Self {
        Progress {
            lines: Vec::new(),
            applier: splice::Applier::new(text),
            placed: Vec::new(),
            why: None,
            wants: Vec::new(),
            failed: None,
            any_split: false,
            items: digest::Items::new(),
            ordinal: 0,
            redo: std::collections::BTreeSet::new(),
            joint: None,
        }
    }

    /// A part's document, its List's item count (for a List's own document), where that List's
    /// root starts and the item's index; a List whose items cannot be edited on their own is
    /// marked to be read again ([`Mode::Shared`]).
    fn open(
        &mut self,
        part: load::Part,
        mode: Mode,
        input: &load::Input,
    ) -> (load::Document, Option<Option<usize>>, usize, usize) {
        match part {
            load::Part::Item { doc, root, index } => {
                if matches!(mode, Mode::Split) && written_out_in(input, &doc) {
                    // An alias inject wrote out here may go back to another item's anchor.
                    self.redo.insert(self.ordinal);
                    self.why.get_or_insert_with(|| {
                        format!(
                            "document at line {}: an alias written out in one of its items",
                            doc.line
                        )
                    });
                }
                (doc, None, root, index)
            }
            load::Part::Document {
                doc,
                items,
                tangled,
            } => {
                if tangled && matches!(mode, Mode::Split) {
                    self.redo.insert(self.ordinal);
                    self.why.get_or_insert_with(|| {
                        format!(
                            "document at line {}: an alias crosses its items' bounds",
                            doc.line
                        )
                    });
                }
                (doc, Some(items), 0, 0)
            }
        }
    }

    /// A List read whole (its items share anchors), edited an item at a time; the document back
    /// when it is no List.
    fn whole_list(
        &mut self,
        input: &load::Input,
        doc: load::Document,
        f: &mut Change,
        refused: &mut Option<String>,
    ) -> Option<load::Document> {
        match edit_list(input, doc, f, refused) {
            Ok(ListEdited::Made {
                lines,
                edits,
                notes,
                digest: d,
            }) => {
                self.lines.extend(lines);
                if self.why.is_none() {
                    match edits {
                        Ok(e) => {
                            self.applier.push(e);
                            self.placed.extend(notes);
                        }
                        Err(e) => self.why = Some(e),
                    }
                }
                self.wants.push(d);
                None
            }
            Ok(ListEdited::Refused) => None,
            Err(doc) => Some(*doc),
        }
    }

    /// The edits from `doc`'s value to `value`, in place: an item of a List `joined` (edited
    /// as one) goes into that List's edits, which its own document (`is_list`) ends.
    fn splice(
        &mut self,
        text: &'t str,
        doc: &load::Document,
        value: &serde_json::Value,
        joined: bool,
        is_list: bool,
        (root, index): (usize, usize),
    ) {
        if self.why.is_some() {
            return;
        }
        let made = match (joined, is_list) {
            // An item of a List edited as one.
            (true, false) => self
                .joint
                .get_or_insert_with(|| splice::ListEdits::open(text, root, OWN_CONTAINERS))
                .next_item(index, &doc.node, &doc.value, value)
                .map(|()| (Vec::new(), Vec::new())),
            (true, true) => match self.joint.take() {
                Some(list) => list.finish(&doc.node, &doc.value, value),
                None => splice::edits_noted(text, &doc.node, &doc.value, value, OWN_CONTAINERS),
            },
            (false, _) => splice::edits_noted(text, &doc.node, &doc.value, value, OWN_CONTAINERS),
        };
        match made {
            Ok((e, n)) => {
                self.applier.push(e);
                self.placed.extend(n);
            }
            Err(e) => self.why = Some(format!("document at line {}: {e}", doc.line)),
        }
    }

    /// The digest `value` must have once written: an item's goes into its List's.
    fn count(&mut self, list: Option<Option<usize>>, value: &serde_json::Value) {
        match list {
            None => self.items.push(value),
            Some(Some(_)) => {
                self.any_split = true;
                let items = std::mem::replace(&mut self.items, digest::Items::new());
                self.wants.push(items.of(value));
            }
            Some(None) => {
                self.items = digest::Items::new();
                self.wants.push(digest::digest(value));
            }
        }
    }
}

/// The line a refusal names: the refused field's in `node`, else `line` (the document's or
/// item's own).
fn refused_line(line: usize, node: &tree::Node, e: &inject::InjectError) -> usize {
    e.at.as_deref().map_or(line, |at| node.line_at(at))
}

/// Whether a List's item, read on its own, holds an alias inject wrote out: the mark, a comment,
/// follows what was written out, inside the item or after its end on its last line. Only the
/// item's text and the blanks after it are read: reading to its line's end read the rest of a
/// one-line (compact JSON) List for each item, quadratic.
fn written_out_in(input: &load::Input, doc: &load::Document) -> bool {
    let text = &input.text;
    let inside = text
        .get(doc.node.start..doc.node.end)
        .is_some_and(|t| t.contains(splice::WRITTEN_OUT));
    let after = text.get(doc.node.end..).unwrap_or_default();
    let mark = splice::WRITTEN_OUT.trim_start_matches(' ');
    inside || after.trim_start_matches([' ', '\t']).starts_with(mark)
}

/// `input` written anew from `f` of each document, in its BOM and line endings: each document
/// read again and changed again (it read and changed once: the same again).
fn written_anew(input: &load::Input, f: &mut Change) -> String {
    let mut anew = String::new();
    let mut first = true;
    let _ = input.each_document(|doc| {
        let mut value = doc.value;
        let _ = f(&mut value);
        if !first {
            anew.push_str("---\n");
        }
        first = false;
        anew.push_str(&emit::to_yaml(&value));
    });
    splice::as_written(&input.text, anew)
}

/// `source`'s text with each document changed to `values` (in order), read back to check that
/// it holds exactly those values.
#[cfg(test)]
pub(crate) fn rewrite(
    source: &load::Source,
    values: &[serde_json::Value],
) -> Result<(String, Vec<String>), String> {
    let mut edits = Vec::new();
    let mut notes = Vec::new();
    for (doc, new) in source.documents.iter().zip(values) {
        let (e, n) = splice::edits_noted(&source.text, &doc.node, &doc.value, new, OWN_CONTAINERS)
            .map_err(|e| format!("document at line {}: {e}", doc.line))?;
        edits.extend(e);
        notes.extend(n);
    }
    if edits.is_empty() {
        return Ok((source.text.clone(), notes));
    }
    let text = splice::apply(&source.text, edits).map_err(|e| e.to_string())?;
    let wants: Vec<u128> = values.iter().map(digest::digest).collect();
    read_back(&source.name, text.as_bytes(), &wants)?;
    Ok((text, notes))
}

/// Writes the rest of `input`'s output (the edits of `applier` applied, after what was written
/// already) and reads all of it back, to check that its documents are those whose [`digest`]s
/// are `wants`, in order; no edit at all is the text as it was, not read back. Edits that do
/// not come in the text's order are made again (`f` of every document) and applied at once.
fn applied(
    input: &load::Input,
    applier: splice::Applier,
    wants: &[u128],
    f: &mut Change,
    out: &mut spool::Spool,
    place: &mut Place,
) -> Result<(), NotApplied> {
    let edit = |e: String| NotApplied::Edit(e);
    let text = match applier.finish().map_err(|e| edit(e.to_string()))? {
        splice::Applied::Unchanged => {
            return place.put(out, &input.text).map_err(NotApplied::Spool);
        }
        splice::Applied::Changed(text) => text,
        splice::Applied::Unordered => {
            place.undo(out).map_err(NotApplied::Spool)?;
            let mut edits = Vec::new();
            let _ = input.each_document(|doc| {
                let mut value = doc.value.clone();
                if f(&mut value).is_ok()
                    && let Ok((e, _)) = splice::edits_noted(
                        &input.text,
                        &doc.node,
                        &doc.value,
                        &value,
                        OWN_CONTAINERS,
                    )
                {
                    edits.extend(e);
                }
            });
            splice::apply(&input.text, edits).map_err(|e| edit(e.to_string()))?
        }
    };
    place.put(out, &text).map_err(NotApplied::Spool)?;
    drop(text);
    let start = place.start.unwrap_or(place.before);
    let written = out.read_from(start).map_err(NotApplied::Spool)?;
    read_back(&input.name, written, wants).map_err(edit)
}

/// Reads an input's output (input `name`) back, to check that its documents are those whose
/// [`digest`]s are `wants`, in order.
fn read_back(name: &str, text: impl std::io::Read, wants: &[u128]) -> Result<(), String> {
    // Read back one document at a time, each compared and dropped as it is read, from the
    // temporary file: holding the whole stream read back was most of inject's peak memory
    // (issue 24 §4). A text that does not read back at all is said first, as when it was read
    // whole.
    // The items of any root `items` one at a time, as the List items were read: a List's digest
    // is its items'.
    let mut want = wants.iter();
    let mut same = true;
    let mut index = 0;
    let mut read = Vec::new();
    let mut ignored = Vec::new();
    let mut items = digest::Items::new();
    let input = std::io::BufReader::with_capacity(READ_BACK_CHUNK_BYTES, text);
    tree::values_parts(input, &mut |part| match part {
        tree::Part::Item { doc, .. } => items.push(&doc.value),
        tree::Part::Doc {
            doc, items: split, ..
        } => {
            load::add_document(name, index, doc, &mut read, &mut ignored);
            index += 1;
            // A split document is a mapping: one document. Its items are its own (or, when a
            // merge key set `items` anew after them, no part of it).
            let folded = std::mem::replace(&mut items, digest::Items::new());
            let mut folded = split.map(|_| folded);
            for d in read.drain(..) {
                let got = match folded.take() {
                    Some(items) => items.of(&d.value),
                    None => digest::digest(&d.value),
                };
                same = same && want.next() == Some(&got);
            }
        }
    })
    .map_err(|e| format!("the edit does not read back: {}", load::yaml_error(name, e)))?;
    if !same || want.next().is_some() {
        return Err("the edit reads back as something else".into());
    }
    Ok(())
}

/// How much of the output the read-back reads at a time: as tree.rs's `PARSE_CHUNK_BYTES`.
const READ_BACK_CHUNK_BYTES: usize = 64 * 1024;

#[cfg(test)]
mod tests {
    use super::*;

    /// The read-back, one document at a time, still sees every document: an edit reads back
    /// only when the stream holds exactly the values asked for, no more and no fewer.
    #[test]
    fn rewrite_reads_back_every_document() {
        let text = "a: 1\n---\n[{b: 2}, {c: 3}]\n---\njust text\n---\nd: 4\n";
        let source = load::parse("t", text.to_string()).unwrap();
        let mut values: Vec<serde_json::Value> =
            source.documents.iter().map(|d| d.value.clone()).collect();
        values[0]["a"] = 5.into();
        values[3]["d"] = 6.into();
        let (out, _) = rewrite(&source, &values).unwrap();
        assert_eq!(
            out,
            "a: 5\n---\n[{b: 2}, {c: 3}]\n---\njust text\n---\nd: 6\n"
        );
        // Fewer values than documents: the rest reads back as more than was asked for.
        let first = [values[0].clone()];
        assert_eq!(
            rewrite(&source, &first).unwrap_err(),
            "the edit reads back as something else"
        );
        // No edit at all is the text as it was, never read back.
        let same: Vec<serde_json::Value> =
            source.documents.iter().map(|d| d.value.clone()).collect();
        assert_eq!(rewrite(&source, &same).unwrap().0, text);
    }
}
