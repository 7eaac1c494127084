//! The go-yaml oracle (scripts/goyaml.sh, tests/support/goyaml/main.go): a long-running
//! process that reads YAML as Kubernetes does (go-yaml v2 and sigs.k8s.io/yaml's JSON
//! conversion), asked one JSON line at a time. Its path comes from `HOOKLOG_TEST_GOYAML`
//! (scripts/test.sh exports it); without it a test is skipped, and fails in CI.

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use hooklog::yaml::tree;
use serde_json::Value;

use super::in_ci;

/// What go-yaml made of a text: each document's JSON (an empty one is `null`), or its error.
pub type Reading = Result<Vec<Value>, String>;

pub struct GoYaml {
    path: PathBuf,
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl GoYaml {
    /// The oracle, or None (skipped, with a note) outside CI when `HOOKLOG_TEST_GOYAML` is not
    /// set. In CI a missing oracle fails the test.
    pub fn start() -> Option<GoYaml> {
        let Some(path) = std::env::var_os("HOOKLOG_TEST_GOYAML") else {
            assert!(
                !in_ci(),
                "HOOKLOG_TEST_GOYAML is not set: these tests need the go-yaml oracle \
                 (bash scripts/goyaml.sh build; scripts/test.sh exports it)"
            );
            eprintln!(
                "\n!!!!! SKIPPED: HOOKLOG_TEST_GOYAML is not set, so no go-yaml to compare with.\n\
                 !!!!! HOOKLOG_TEST_GOYAML=$(bash scripts/goyaml.sh build). In CI this is a failure.\n"
            );
            return None;
        };
        Some(Self::spawn(PathBuf::from(path)))
    }

    fn spawn(path: PathBuf) -> GoYaml {
        let mut child = Command::new(&path)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        GoYaml {
            path,
            child,
            stdin,
            stdout,
        }
    }

    /// go-yaml's reading of `text`. A crash of the oracle (Go's stack limit on a hostile input)
    /// is an error reading, and the oracle is started anew.
    pub fn read(&mut self, text: &str) -> Reading {
        let mut line = serde_json::to_string(text).unwrap();
        line.push('\n');
        let mut answer = String::new();
        let ok = self.stdin.write_all(line.as_bytes()).is_ok()
            && self.stdin.flush().is_ok()
            && self.stdout.read_line(&mut answer).is_ok_and(|n| n > 0);
        if !ok {
            let _ = self.child.kill();
            let _ = self.child.wait();
            *self = Self::spawn(self.path.clone());
            return Err("the go-yaml oracle crashed".into());
        }
        let mut v: Value = serde_json::from_str(&answer).unwrap();
        match v.get_mut("docs") {
            Some(Value::Array(docs)) => Ok(std::mem::take(docs)),
            _ => Err(v["error"].as_str().unwrap_or("?").to_string()),
        }
    }
}

impl Drop for GoYaml {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

// --- hooklog's reading, beside the oracle's ------------------------------------------------

/// hooklog's reading: each document's value, empty ones left out.
pub fn hooklog_reads(text: &str) -> Result<Vec<Value>, String> {
    tree::parse(text)
        .map(|docs| {
            docs.into_iter()
                .map(|d| d.value)
                .filter(|v| !v.is_null())
                .collect()
        })
        .map_err(|e| format!("{}:{}: {}", e.line, e.column, e.why))
}

pub fn non_null(docs: Vec<Value>) -> Vec<Value> {
    docs.into_iter().filter(|v| !v.is_null()).collect()
}

/// hooklog rejects a mapping with a key written twice, which go-yaml v2 reads with the last
/// one winning: an edit could not know which one the user meant (docs/check-and-inject.md).
pub fn deliberate_difference(hooklog: &Result<Vec<Value>, String>) -> bool {
    hooklog
        .as_ref()
        .is_err_and(|e| e.contains("is written twice"))
}
