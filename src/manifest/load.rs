//! (the control plane) Reading manifests: YAML or JSON files (multi-document, `kind: List`), folders searched
//! recursively, and `-` for stdin, into generic value trees that keep every field and its order.

use std::io::Read;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::yaml::tree;

/// Extensions of the files a folder contributes (other files in it are skipped).
const MANIFEST_EXTENSIONS: [&str; 3] = ["yaml", "yml", "json"];
/// Largest input read from one file or stdin: far above any real manifest set (a `kubectl get
/// -A -o yaml` of a large cluster is tens of MB), low enough to keep memory bounded.
const MAX_INPUT_BYTES: u64 = 256 * 1024 * 1024;

/// Why the input could not be read: printed as one line, exit code 64.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("{file}: cannot read: {why}")]
    Read { file: String, why: String },
    #[error("{path}: no manifests found (no .yaml, .yml or .json file in it)")]
    Empty { path: String },
    #[error(
        "{path}: a Helm chart (Chart.yaml beside templates/), whose templates are not manifests until rendered: `helm template {path} | hooklog check -`"
    )]
    HelmChart { path: String },
    /// A chart inside a folder searched: skipped, a note ([`LoadError::is_note`]), so that
    /// `check .` on a repository holding a chart exits on its manifests' findings.
    #[error(
        "{path}: a Helm chart, skipped: its templates are not manifests until rendered: `helm template {path} | hooklog check -`"
    )]
    HelmChartSkipped { path: String },
    /// A file of a chart's `templates/` that holds `{{`, given on its own.
    #[error(
        "{file}: a template of the Helm chart {chart}, not a manifest until rendered: `helm template {chart} | hooklog check -`"
    )]
    HelmTemplate { file: String, chart: String },
    #[error("{file}:{line}:{column}: not valid YAML: {why}")]
    Yaml {
        file: String,
        line: usize,
        column: usize,
        why: String,
    },
}

impl LoadError {
    /// True for what is left out of a folder searched with a note, not an error (a Helm chart
    /// inside it).
    pub fn is_note(&self) -> bool {
        matches!(self, LoadError::HelmChartSkipped { .. })
    }
}

/// One input: a file, or stdin (`-`).
#[derive(Debug)]
pub struct Source {
    /// As given or found (a path relative to the folder given), `-` for stdin.
    pub name: String,
    /// The whole text, for finding the line of a container.
    pub text: String,
    pub documents: Vec<Document>,
    /// What was left out, one line each, for stderr.
    pub notes: Vec<String>,
}

/// One YAML or JSON document.
#[derive(Debug)]
pub struct Document {
    /// 1-based line where the document starts (its first line after a `---`).
    pub line: usize,
    /// 1-based line after its last line (the next document's separator or the end).
    pub end_line: usize,
    pub value: Value,
    /// Where each part of it is in the text.
    pub node: tree::Node,
    /// The field path of its value in the document it was read from, `items[3].` for an item of
    /// a List read on its own ([`Part::Item`]); empty for a document.
    pub path: String,
}

/// What [`Input::each_part`] hands on, in the text's order.
#[derive(Debug)]
pub enum Part {
    /// Item `index` of the `items` of the `kind: *List` document that follows, read on its own
    /// (any value, as the List holds it); `root` is where that document's root starts.
    Item {
        index: usize,
        doc: Document,
        root: usize,
    },
    /// A document, as [`Input::each_document`] hands it. `items` is `Some(n)` when its `n` items
    /// went before it as [`Part::Item`]s: its `items` is then an empty sequence. `tangled`: an
    /// alias crossed an item's bounds ([`tree::Part::Doc`]).
    Document {
        doc: Document,
        items: Option<usize>,
        tangled: bool,
    },
}

impl Source {
    /// The 1-based line of the first line of document `doc` that ends with `needle` (a trailing
    /// comma aside), if any.
    pub fn find_line(&self, doc: &Document, needle: &str) -> Option<usize> {
        self.find_line_from(doc, doc.line, needle)
    }

    /// The same, from line `from` of the document on.
    pub fn find_line_from(&self, doc: &Document, from: usize, needle: &str) -> Option<usize> {
        self.text
            .lines()
            .enumerate()
            .skip(from.saturating_sub(1))
            .take(doc.end_line.saturating_sub(from))
            .find(|(_, l)| l.trim_end().trim_end_matches(',').ends_with(needle))
            .map(|(i, _)| i + 1)
    }
}

impl Document {
    /// The 1-based line of the node at a JSON pointer into this document, if the text has it.
    pub fn line_of(&self, pointer: &str) -> Option<usize> {
        self.node.at(pointer).map(|n| n.line)
    }
}

/// Reads every path (`-` is stdin; an empty list means stdin, as a Helm post-renderer runs it);
/// the first input that cannot be read is the error.
pub fn load(paths: &[PathBuf]) -> Result<Vec<Source>, LoadError> {
    load_each(paths).into_iter().collect()
}

/// Reads every path, each file on its own: what cannot be read is an error in its place, and
/// the rest is still read. A folder is searched recursively for manifest files; one with none, a
/// Helm chart's folder (not searched: its templates are no YAML), is an error too.
pub fn load_each(paths: &[PathBuf]) -> Vec<Result<Source, LoadError>> {
    read_each(paths)
        .into_iter()
        .map(|input| input.and_then(Input::parse))
        .collect()
}

/// One input's text, read and not yet parsed: [`Input::each_document`] reads its documents one
/// at a time, so that a command holds one document at a time, not the stream (issue 24 §4).
#[derive(Debug)]
pub struct Input {
    /// As given or found (a path relative to the folder given), `-` for stdin.
    pub name: String,
    pub text: String,
    /// The Helm chart whose template this is (a file of its `templates/` that holds `{{`):
    /// its YAML errors say to render it first.
    chart: Option<PathBuf>,
}

impl Input {
    /// An input of `text` named `name`, of no Helm chart.
    pub fn new(name: &str, text: String) -> Input {
        Input {
            name: name.to_string(),
            text,
            chart: None,
        }
    }

    /// Hands each document to `each` as it is read, as [`parse`] reads them; returns the notes
    /// on what was left out, or the first error (after some documents may have been handed on).
    pub fn each_document(&self, mut each: impl FnMut(Document)) -> Result<Vec<String>, LoadError> {
        let mut notes = Vec::new();
        let mut index = 0;
        let mut read = Vec::new();
        tree::parse_each(&self.text, |doc| {
            add_document(&self.name, index, doc, &mut read, &mut notes);
            index += 1;
            read.drain(..).for_each(&mut each);
        })
        .map_err(|e| self.error(e))?;
        Ok(notes)
    }

    /// [`Input::each_document`], but the items of a `kind: *List` document one at a time
    /// ([`tree::parse_parts`]): what a List costs is one item's trees, not the List's (issue 24
    /// §4: `kubectl get -o yaml` prints a cluster's objects as one List).
    pub fn each_part(&self, mut each: impl FnMut(Part)) -> Result<Vec<String>, LoadError> {
        let mut notes = Vec::new();
        let mut index = 0;
        let mut read = Vec::new();
        tree::parse_parts(&self.text, &mut |part| match part {
            tree::Part::Item { index, doc, root } => each(Part::Item {
                index,
                root,
                doc: Document {
                    line: doc.node.line,
                    end_line: doc.end_line,
                    value: doc.value,
                    node: doc.node,
                    path: format!("items[{index}]."),
                },
            }),
            tree::Part::Doc {
                doc,
                items,
                tangled,
            } => {
                add_document(&self.name, index, doc, &mut read, &mut notes);
                index += 1;
                read.drain(..).for_each(|doc| {
                    each(Part::Document {
                        doc,
                        items,
                        tangled,
                    })
                });
            }
        })
        .map_err(|e| self.error(e))?;
        Ok(notes)
    }

    /// [`Input::each_document`], each as a [`Part::Document`]: what [`Input::each_part`] hands
    /// on, with no List read an item at a time.
    pub fn each_document_part(&self, mut each: impl FnMut(Part)) -> Result<Vec<String>, LoadError> {
        self.each_document(|doc| {
            each(Part::Document {
                doc,
                items: None,
                tangled: false,
            })
        })
    }

    /// Every document at once.
    pub fn parse(self) -> Result<Source, LoadError> {
        let mut documents = Vec::new();
        let notes = self.each_document(|d| documents.push(d))?;
        Ok(Source {
            name: self.name,
            text: self.text,
            documents,
            notes,
        })
    }

    /// A parse error of this input; a Helm template's says to render it first.
    fn error(&self, e: tree::ParseError) -> LoadError {
        let e = yaml_error(&self.name, e);
        match (e, &self.chart) {
            (
                LoadError::Yaml {
                    file,
                    line,
                    column,
                    why,
                },
                Some(chart),
            ) => LoadError::Yaml {
                file,
                line,
                column,
                why: format!(
                    "{why} (a template of the Helm chart {}: `helm template {} | hooklog check -`)",
                    chart.display(),
                    chart.display()
                ),
            },
            (e, _) => e,
        }
    }
}

/// Reads every path as [`load_each`] does, each input's text without parsing it.
pub fn read_each(paths: &[PathBuf]) -> Vec<Result<Input, LoadError>> {
    let stdin = [PathBuf::from("-")];
    let paths = if paths.is_empty() { &stdin[..] } else { paths };
    let mut out = Vec::new();
    for p in paths {
        if p.as_os_str() == "-" {
            out.push(read_stdin_limited().map(|t| Input::new("-", t)));
        } else if p.is_dir() {
            let before = out.len();
            let mut found = 0;
            for f in files_under(p) {
                found += usize::from(f.is_ok());
                out.push(f.and_then(|f| read_file(&f)));
            }
            if found == 0 && out.len() == before {
                out.push(Err(LoadError::Empty {
                    path: p.display().to_string(),
                }));
            }
        } else {
            out.push(read_file(p));
        }
    }
    out
}

/// One file, read; a Helm template's YAML errors will say to render it first.
fn read_file(path: &Path) -> Result<Input, LoadError> {
    let name = path.display().to_string();
    let file = std::fs::File::open(path).map_err(|e| read_error(&name, e))?;
    let text = read_file_limited(file, &name)?;
    let chart = if text.contains("{{") {
        chart_of(path)
    } else {
        None
    };
    // A template given on its own: found by its real path too (`check deployment.yaml` in
    // templates/), and not read as a manifest (issue 41: `a mapping key must be a scalar`).
    let chart = chart.or_else(|| {
        text.contains("{{")
            .then(|| path.canonicalize().ok().and_then(|p| chart_of(&p)))
            .flatten()
    });
    if let Some(chart) = &chart
        && text.contains("{{")
    {
        return Err(LoadError::HelmTemplate {
            file: name,
            chart: chart.display().to_string(),
        });
    }
    Ok(Input { name, text, chart })
}

/// The chart a file lies in, when it is one of its `templates/`.
fn chart_of(path: &Path) -> Option<PathBuf> {
    path.ancestors()
        .skip(1)
        .find(|d| d.file_name().is_some_and(|n| n == HELM_TEMPLATES))
        .and_then(Path::parent)
        .filter(|chart| is_chart(chart))
        .map(Path::to_path_buf)
}

/// A Helm chart's folder: a `Chart.yaml` beside `templates/` (Helm's "Chart File Structure").
fn is_chart(dir: &Path) -> bool {
    dir.join(HELM_CHART_FILE).is_file() && dir.join(HELM_TEMPLATES).is_dir()
}

/// A chart's metadata file and its templates' folder (Helm's "Chart File Structure").
const HELM_CHART_FILE: &str = "Chart.yaml";
const HELM_TEMPLATES: &str = "templates";

fn read_error(name: &str, e: impl std::fmt::Display) -> LoadError {
    LoadError::Read {
        file: name.to_string(),
        why: e.to_string(),
    }
}

/// How much of an input of unknown length (stdin) is read at a time: each piece is kept as it
/// is read and the pieces joined once at the end, so that reading holds the input and one
/// piece, never the doubled buffer `read_to_end` grows into (772 MB at the 256 MiB limit, issue
/// 24 §4). 1 MiB: a pipe's reads are 64 KiB (Linux's default pipe size), so a piece takes 16 of
/// them, and a 256 MiB input 256 pieces.
const READ_PIECE_BYTES: usize = 1024 * 1024;

/// The whole text of `file`, or an error naming `name`: a regular file longer than
/// [`MAX_INPUT_BYTES`] is refused before any of it is read; any other (a pipe, a device) is read
/// as stdin is.
fn read_file_limited(mut file: std::fs::File, name: &str) -> Result<String, LoadError> {
    match left_in(&mut file) {
        Some(n) if n > MAX_INPUT_BYTES => Err(too_large(name, MAX_INPUT_BYTES)),
        Some(n) => read_known(file, name, n),
        None => read_limited(file, name, MAX_INPUT_BYTES),
    }
}

/// Reads a regular file of `len` bytes left (as [`left_in`] found) into one buffer of that
/// size: no pieces to join, so it is held once (the pieces, freed, stayed in the allocator's
/// hands: uninject of 228 MB took 467 MB). One that grew since is still held to the limit.
fn read_known(file: impl Read, name: &str, len: u64) -> Result<String, LoadError> {
    // One more than its length, so that its end is found without growing the buffer.
    let mut bytes = Vec::with_capacity(usize::try_from(len).unwrap_or(0).saturating_add(1));
    file.take(MAX_INPUT_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| read_error(name, e))?;
    if bytes.len() as u64 > MAX_INPUT_BYTES {
        return Err(too_large(name, MAX_INPUT_BYTES));
    }
    String::from_utf8(bytes).map_err(|e| read_error(name, format!("not UTF-8 text: {e}")))
}

/// Stdin's whole text, refused at once as [`read_file_limited`] refuses a file when it is a
/// regular file (`hooklog check - < big.yaml`), else read up to the limit.
fn read_stdin_limited() -> Result<String, LoadError> {
    use std::os::fd::AsFd;
    let stdin = std::io::stdin();
    // A second descriptor of the same open file: its length and offset are stdin's.
    let left = stdin
        .as_fd()
        .try_clone_to_owned()
        .ok()
        .and_then(|fd| left_in(&mut std::fs::File::from(fd)));
    match left {
        Some(n) if n > MAX_INPUT_BYTES => Err(too_large("-", MAX_INPUT_BYTES)),
        Some(n) => read_known(stdin.lock(), "-", n),
        None => read_limited(stdin.lock(), "-", MAX_INPUT_BYTES),
    }
}

/// How many bytes are left to read in `file` when it is a regular file (its length past its
/// offset); `None` for a pipe, a socket or a device, whose length is known only once read.
fn left_in(file: &mut std::fs::File) -> Option<u64> {
    use std::io::Seek;
    let meta = file.metadata().ok().filter(std::fs::Metadata::is_file)?;
    let at = file.stream_position().ok()?;
    Some(meta.len().saturating_sub(at))
}

fn too_large(name: &str, limit: u64) -> LoadError {
    read_error(name, format!("larger than {limit} bytes"))
}

/// Reads `r` to its end, at most `limit` bytes ([`MAX_INPUT_BYTES`]; one byte more is the
/// refusal), in pieces of [`READ_PIECE_BYTES`] joined once: what is held is the input read so
/// far and one piece.
fn read_limited(r: impl Read, name: &str, limit: u64) -> Result<String, LoadError> {
    let mut r = r.take(limit + 1);
    let mut pieces: Vec<Vec<u8>> = Vec::new();
    let mut total = 0usize;
    loop {
        // Grown as read_to_end grows it (a small input takes little), up to one piece.
        let mut piece = Vec::new();
        let n = (&mut r)
            .take(READ_PIECE_BYTES as u64)
            .read_to_end(&mut piece)
            .map_err(|e| read_error(name, e))?;
        total += n;
        if total as u64 > limit {
            return Err(too_large(name, limit));
        }
        if n == 0 {
            break;
        }
        pieces.push(piece);
    }
    let bytes = match pieces.len() {
        0 => Vec::new(),
        1 => {
            let mut bytes = pieces.pop().unwrap_or_default();
            bytes.shrink_to_fit();
            bytes
        }
        _ => {
            let mut bytes = Vec::with_capacity(total);
            // Each piece freed once copied: the join holds the input once and a piece.
            for piece in pieces.drain(..) {
                bytes.extend_from_slice(&piece);
            }
            bytes
        }
    };
    String::from_utf8(bytes).map_err(|e| read_error(name, format!("not UTF-8 text: {e}")))
}

/// Manifest files under `dir`, recursively, sorted by path, or what could not be searched (a
/// folder that cannot be listed, a Helm chart) in its place.
fn files_under(dir: &Path) -> Vec<Result<PathBuf, LoadError>> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let name = d.display().to_string();
        if is_chart(&d) {
            // The folder given is the chart: an error. A chart found inside it: a note.
            let e = if d == dir {
                LoadError::HelmChart { path: name }
            } else {
                LoadError::HelmChartSkipped { path: name }
            };
            out.push((d.clone(), Err(e)));
            continue;
        }
        let entries = match std::fs::read_dir(&d) {
            Ok(e) => e,
            Err(e) => {
                out.push((d.clone(), Err(read_error(&name, e))));
                continue;
            }
        };
        for entry in entries {
            let path = match entry {
                Ok(entry) => entry.path(),
                Err(e) => {
                    out.push((d.clone(), Err(read_error(&name, e))));
                    continue;
                }
            };
            if path.is_dir() {
                stack.push(path);
            } else if path
                .extension()
                .and_then(|e| e.to_str())
                .is_some_and(|e| MANIFEST_EXTENSIONS.contains(&e))
            {
                out.push((path.clone(), Ok(path)));
            }
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out.into_iter().map(|(_, r)| r).collect()
}

/// Reads one input's documents. JSON is read as the YAML it is (a flow-style YAML file that
/// starts with `{` is no JSON error); a JSON file whose top level is a sequence contributes each
/// of its items, as `kubectl` reads `[ {...}, {...} ]`. A document that is not a mapping (a
/// kustomize JSON 6902 patch is a list) is left out with a note, and the rest is still read.
pub fn parse(name: &str, text: String) -> Result<Source, LoadError> {
    Input::new(name, text).parse()
}

/// A parse error of input `name`, as [`LoadError::Yaml`].
pub(crate) fn yaml_error(name: &str, e: tree::ParseError) -> LoadError {
    LoadError::Yaml {
        file: name.to_string(),
        line: e.line,
        column: e.column,
        why: e.why,
    }
}

/// Adds document `index` (0-based) of input `name` to `documents` as [`parse`] reads it: a
/// mapping as it is, a flow sequence of mappings item by item, nothing for an empty one, and
/// for anything else a line in `notes`.
pub(crate) fn add_document(
    name: &str,
    index: usize,
    doc: tree::Doc,
    documents: &mut Vec<Document>,
    notes: &mut Vec<String>,
) {
    let line = doc.node.line;
    let end_line = doc.end_line;
    let found = match (doc.value, doc.node) {
        (Value::Object(map), node) => {
            documents.push(Document {
                line,
                end_line,
                value: Value::Object(map),
                node,
                path: String::new(),
            });
            return;
        }
        (Value::Null, _) => return,
        (
            Value::Array(items),
            tree::Node {
                kind:
                    tree::Kind::Seq {
                        flow: true,
                        items: nodes,
                    },
                ..
            },
        ) if items.iter().all(Value::is_object) => {
            for (value, node) in items.into_iter().zip(nodes) {
                documents.push(Document {
                    line: node.line,
                    end_line,
                    value,
                    node,
                    path: String::new(),
                });
            }
            return;
        }
        (Value::Bool(_), _) => "a boolean",
        (Value::Number(_), _) => "a number",
        (Value::String(_), _) => "a string",
        (Value::Array(_), _) => "a sequence",
    };
    notes.push(format!(
        "{name}:{line}: document {} is not a Kubernetes object (it is {found}), left as it is",
        index + 1
    ));
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Read in pieces, joined: the same bytes at every length around a piece's, and one byte
    /// over the limit refused, not read further.
    #[test]
    fn read_limited_joins_its_pieces_and_refuses_past_the_limit() {
        let piece = READ_PIECE_BYTES;
        for len in [0, 1, piece - 1, piece, piece + 1, 3 * piece + 7] {
            let text: String = (0..len)
                .map(|i| char::from(b'a' + (i % 26) as u8))
                .collect();
            let limit = len as u64;
            let read = read_limited(text.as_bytes(), "t", limit).unwrap();
            assert!(read == text, "{len} bytes read back otherwise");
            let over = format!("{text}z");
            let e = read_limited(over.as_bytes(), "t", limit).unwrap_err();
            assert_eq!(
                e.to_string(),
                format!("t: cannot read: larger than {limit} bytes")
            );
            // A source far longer than the limit is read to one byte past it, no further.
            let mut long = std::io::repeat(b'a').take(limit + 10 * piece as u64);
            assert!(read_limited(&mut long, "t", limit).is_err());
            assert_eq!(long.limit(), 10 * piece as u64 - 1, "{len}");
        }
        let e = read_limited(&b"a\xffb"[..], "t", 10).unwrap_err();
        assert!(e.to_string().contains("not UTF-8"), "{e}");
    }

    #[test]
    fn multi_document_yaml_with_lines() {
        let s = parse(
            "f.yaml",
            "# c\n---\na: 1\n---\n---\nkind: B\nx: [1]\n".to_string(),
        )
        .unwrap();
        assert_eq!(s.documents.len(), 2);
        assert_eq!(s.documents[0].line, 3);
        assert_eq!(s.documents[1].value["kind"], "B");
        assert_eq!(s.find_line(&s.documents[1], "x: [1]"), Some(7));
    }

    #[test]
    fn yaml_error_names_file_and_line() {
        let e = parse("f.yaml", "a: 1\nb: [\n".to_string()).unwrap_err();
        let msg = e.to_string();
        assert!(msg.starts_with("f.yaml:"), "{msg}");
        assert!(matches!(e, LoadError::Yaml { line: 2 | 3, .. }), "{msg}");
    }

    #[test]
    fn json_stream_and_array() {
        let s = parse(
            "f.json",
            "[{\"kind\":\"A\"},\n {\"kind\":\"B\"}]".to_string(),
        )
        .unwrap();
        assert_eq!(s.documents.len(), 2);
        assert_eq!(s.documents[1].line, 2);
        let e = parse("f.json", "{\"kind\":\n".to_string()).unwrap_err();
        assert!(e.to_string().starts_with("f.json:2:"), "{e}");
        assert!(e.to_string().contains("not valid YAML"), "{e}");
    }

    #[test]
    fn anchors_resolve_and_order_is_kept() {
        let s = parse("f", "z: &a {q: 1}\nb: *a\na: 2\n".to_string()).unwrap();
        let keys: Vec<&String> = s.documents[0].value.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["z", "b", "a"]);
        assert_eq!(s.documents[0].value["b"]["q"], 1);
    }

    #[test]
    fn merge_keys_are_resolved() {
        let s = parse(
            "f",
            "base: &b {image: x, name: a}\nc:\n  <<: *b\n  name: c\n".to_string(),
        )
        .unwrap();
        assert_eq!(
            s.documents[0].value["c"],
            serde_json::json!({"name": "c", "image": "x"})
        );
    }

    #[test]
    fn a_document_that_is_no_object_is_left_out_with_a_note() {
        let s = parse(
            "f",
            "just text\n---\n- op: add\n  path: /x\n---\nkind: Pod\n".to_string(),
        )
        .unwrap();
        assert_eq!(s.documents.len(), 1);
        assert_eq!(s.documents[0].line, 6);
        assert_eq!(s.notes.len(), 2, "{:?}", s.notes);
        assert!(
            s.notes[1].starts_with("f:3: document 2 is not a Kubernetes object (it is a sequence)"),
            "{:?}",
            s.notes
        );
    }

    #[test]
    fn flow_yaml_that_looks_like_json_is_yaml() {
        let s = parse(
            "f.yaml",
            "{kind: Pod, metadata: {name: p}, spec: {containers: []}} # flow\n".to_string(),
        )
        .unwrap();
        assert_eq!(s.documents[0].value["metadata"]["name"], "p");
    }
}
