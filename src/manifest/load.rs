//! Reading manifests: YAML or JSON files (multi-document, `kind: List`), folders searched
//! recursively, and `-` for stdin, into generic value trees that keep every field and its order.

use std::io::Read;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

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
    #[error("{file}:{line}:{column}: not valid YAML: {why}")]
    Yaml {
        file: String,
        line: usize,
        column: usize,
        why: String,
    },
    #[error("{file}:{line}:{column}: not valid JSON: {why}")]
    Json {
        file: String,
        line: usize,
        column: usize,
        why: String,
    },
    #[error("{file}:{line}: document {index} is not a Kubernetes object (a mapping): {found}")]
    NotObject {
        file: String,
        line: usize,
        index: usize,
        found: &'static str,
    },
}

/// One input: a file, or stdin (`-`).
#[derive(Debug)]
pub struct Source {
    /// As given or found (a path relative to the folder given), `-` for stdin.
    pub name: String,
    /// The whole text, for finding the line of a container.
    pub text: String,
    pub documents: Vec<Document>,
}

/// One YAML or JSON document.
#[derive(Debug)]
pub struct Document {
    /// 1-based line where the document starts (its first line after a `---`).
    pub line: usize,
    /// 1-based line after its last line (the next document's separator or the end).
    pub end_line: usize,
    pub value: Value,
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

/// Reads every path (`-` is stdin; an empty list means stdin, as a Helm post-renderer runs it).
pub fn load(paths: &[PathBuf]) -> Result<Vec<Source>, LoadError> {
    let stdin = [PathBuf::from("-")];
    let paths = if paths.is_empty() { &stdin[..] } else { paths };
    let mut sources = Vec::new();
    for p in paths {
        if p.as_os_str() == "-" {
            let text = read_limited(std::io::stdin().lock(), "-")?;
            sources.push(parse("-", text)?);
        } else if p.is_dir() {
            for f in files_under(p)? {
                let name = f.display().to_string();
                let file = std::fs::File::open(&f).map_err(|e| read_error(&name, e))?;
                sources.push(parse(&name, read_limited(file, &name)?)?);
            }
        } else {
            let name = p.display().to_string();
            let file = std::fs::File::open(p).map_err(|e| read_error(&name, e))?;
            sources.push(parse(&name, read_limited(file, &name)?)?);
        }
    }
    Ok(sources)
}

fn read_error(name: &str, e: impl std::fmt::Display) -> LoadError {
    LoadError::Read {
        file: name.to_string(),
        why: e.to_string(),
    }
}

fn read_limited(r: impl Read, name: &str) -> Result<String, LoadError> {
    let mut bytes = Vec::new();
    r.take(MAX_INPUT_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| read_error(name, e))?;
    if bytes.len() as u64 > MAX_INPUT_BYTES {
        return Err(read_error(
            name,
            format!("larger than {MAX_INPUT_BYTES} bytes"),
        ));
    }
    String::from_utf8(bytes).map_err(|e| read_error(name, format!("not UTF-8 text: {e}")))
}

/// Manifest files under `dir`, recursively, sorted by path.
fn files_under(dir: &Path) -> Result<Vec<PathBuf>, LoadError> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let name = d.display().to_string();
        for entry in std::fs::read_dir(&d).map_err(|e| read_error(&name, e))? {
            let path = entry.map_err(|e| read_error(&name, e))?.path();
            if path.is_dir() {
                stack.push(path);
            } else if path
                .extension()
                .and_then(|e| e.to_str())
                .is_some_and(|e| MANIFEST_EXTENSIONS.contains(&e))
            {
                out.push(path);
            }
        }
    }
    out.sort();
    Ok(out)
}

/// Parses one input's text: JSON when it starts with `{` or `[`, YAML otherwise.
pub fn parse(name: &str, text: String) -> Result<Source, LoadError> {
    let trimmed = text.trim_start();
    let values: Vec<(usize, usize, Value)> = if trimmed.starts_with('{') || trimmed.starts_with('[')
    {
        parse_json(name, &text)?
    } else {
        parse_yaml(name, &text)?
    };
    let mut documents = Vec::new();
    for (index, (line, end_line, value)) in values.into_iter().enumerate() {
        let found = match &value {
            Value::Object(_) => {
                documents.push(Document {
                    line,
                    end_line,
                    value,
                });
                continue;
            }
            // An empty document (`---` twice, or only comments) holds nothing to check.
            Value::Null => continue,
            Value::Bool(_) => "a boolean",
            Value::Number(_) => "a number",
            Value::String(_) => "a string",
            Value::Array(_) => "a sequence",
        };
        return Err(LoadError::NotObject {
            file: name.to_string(),
            line,
            index: index + 1,
            found,
        });
    }
    Ok(Source {
        name: name.to_string(),
        text,
        documents,
    })
}

fn parse_json(name: &str, text: &str) -> Result<Vec<(usize, usize, Value)>, LoadError> {
    let mut out = Vec::new();
    let mut stream = serde_json::Deserializer::from_str(text).into_iter::<Value>();
    let mut start = 0;
    loop {
        match stream.next() {
            None => break,
            Some(Ok(v)) => {
                let end = stream.byte_offset();
                let line = line_of(text, start);
                // A top-level JSON array is a list of objects, as `[{...}, {...}]`.
                match v {
                    Value::Array(items) => {
                        out.extend(items.into_iter().map(|i| (line, line_of(text, end) + 1, i)))
                    }
                    v => out.push((line, line_of(text, end) + 1, v)),
                }
                start = end;
            }
            Some(Err(e)) => {
                return Err(LoadError::Json {
                    file: name.to_string(),
                    line: e.line(),
                    column: e.column(),
                    why: strip_position(&e.to_string()),
                });
            }
        }
    }
    Ok(out)
}

/// 1-based line of a byte offset, counting the first non-blank line at or after it.
fn line_of(text: &str, offset: usize) -> usize {
    let skip = text[offset..].len() - text[offset..].trim_start().len();
    text[..offset + skip].matches('\n').count() + 1
}

fn parse_yaml(name: &str, text: &str) -> Result<Vec<(usize, usize, Value)>, LoadError> {
    let starts = document_starts(text);
    let total_lines = text.lines().count() + 1;
    let mut out = Vec::new();
    for (i, doc) in serde_norway::Deserializer::from_str(text).enumerate() {
        let error = |e: &dyn std::fmt::Display, at: Option<serde_norway::Location>| {
            let (line, column) = at
                .map(|l| (l.line(), l.column()))
                .unwrap_or((starts.get(i).copied().unwrap_or(1), 1));
            LoadError::Yaml {
                file: name.to_string(),
                line,
                column,
                why: strip_position(&e.to_string()),
            }
        };
        // Merge keys (`<<: *defaults`) are resolved, as kubectl does, before the tree is kept.
        let mut yaml =
            serde_norway::Value::deserialize(doc).map_err(|e| error(&e, e.location()))?;
        yaml.apply_merge().map_err(|e| error(&e, e.location()))?;
        let value = serde_json::to_value(yaml).map_err(|e| error(&e, None))?;
        let line = starts.get(i).copied().unwrap_or(1);
        let end = starts
            .get(i + 1)
            .map(|n| n.saturating_sub(1))
            .unwrap_or(total_lines);
        out.push((line, end, value));
    }
    Ok(out)
}

/// First line of each YAML document: line 1, and the line after each `---` separator (one at
/// the very top does not start a second document). Separators inside block scalars are not
/// told apart: the lines only place findings, never what is read.
fn document_starts(text: &str) -> Vec<usize> {
    let mut starts = vec![1];
    let mut seen_content = false;
    for (i, l) in text.lines().enumerate() {
        let is_sep = l == "---" || l.starts_with("--- ") || l.starts_with("---\t");
        if is_sep {
            if seen_content {
                starts.push(i + 2);
            } else if let Some(first) = starts.last_mut() {
                *first = i + 2;
            }
            seen_content = false;
        } else if !l.trim().is_empty() && !l.trim_start().starts_with('#') {
            seen_content = true;
        }
    }
    starts
}

/// serde's messages end with " at line L column C"; the error already says where.
fn strip_position(msg: &str) -> String {
    match msg.rfind(" at line ") {
        Some(i) => msg[..i].to_string(),
        None => msg.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let s = parse("f.json", "{\"kind\":\"A\"}\n[{\"kind\":\"B\"}]".to_string()).unwrap();
        assert_eq!(s.documents.len(), 2);
        let e = parse("f.json", "{\"kind\":\n".to_string()).unwrap_err();
        assert!(e.to_string().starts_with("f.json:2:"), "{e}");
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
    fn scalar_document_is_an_error() {
        assert!(parse("f", "just text\n".to_string()).is_err());
    }
}
