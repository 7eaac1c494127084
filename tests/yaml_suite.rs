//! The YAML specification's own test suite (yaml-test-suite, in `../shared/yaml-test-suite`,
//! or `HOOKLOG_YAML_TEST_SUITE`), read by hooklog and by go-yaml v2 (the oracle,
//! tests/util/goyaml.rs): every case is accepted or refused as go-yaml does (not as the
//! specification does: Kubernetes reads with go-yaml), and where both accept, the values are
//! go-yaml's (strings, numbers, booleans, nulls, keys, what tags make of them). The cases are
//! inputs nobody here wrote; tests/yaml.rs generates the shapes Kubernetes files have.

use std::path::{Path, PathBuf};

use crate::util::goyaml::GoYaml;
use crate::util::goyaml::{deliberate_difference, hooklog_reads, non_null};
use crate::util::in_ci;

/// The suite's cases with their numbered parts (its README says 402: 351 cases).
const SUITE_CASES: usize = 402;

/// The suite's folder, or None (skipped, with a note) outside CI when it is not there.
fn suite() -> Option<PathBuf> {
    let dir = std::env::var_os("HOOKLOG_YAML_TEST_SUITE").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/yaml-test-suite"),
        PathBuf::from,
    );
    if dir.join("README.md").is_file() {
        return Some(dir);
    }
    assert!(
        !in_ci(),
        "{}: no yaml-test-suite there (set HOOKLOG_YAML_TEST_SUITE to its folder)",
        dir.display()
    );
    eprintln!(
        "\n!!!!! SKIPPED: no yaml-test-suite at {} (HOOKLOG_YAML_TEST_SUITE). In CI this is a failure.\n",
        dir.display()
    );
    None
}

/// Every case's input: its name (`DK95/07`) and the `in.yaml` path, in order.
fn cases(dir: &Path) -> Vec<(String, PathBuf)> {
    let mut out = Vec::new();
    let mut names: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    names.sort();
    for case in names {
        let name = case.file_name().unwrap().to_string_lossy().into_owned();
        if case.join("in.yaml").is_file() {
            out.push((name, case.join("in.yaml")));
            continue;
        }
        let mut parts: Vec<_> = std::fs::read_dir(&case)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.join("in.yaml").is_file())
            .collect();
        parts.sort();
        for part in parts {
            let part_name = part.file_name().unwrap().to_string_lossy().into_owned();
            out.push((format!("{name}/{part_name}"), part.join("in.yaml")));
        }
    }
    out
}

#[test]
fn every_case_of_the_yaml_test_suite_reads_as_go_yaml_reads() {
    let Some(dir) = suite() else { return };
    let Some(mut oracle) = GoYaml::start() else {
        return;
    };
    let cases = cases(&dir);
    assert_eq!(
        cases.len(),
        SUITE_CASES,
        "{}: the suite's README says {SUITE_CASES} inputs",
        dir.display()
    );
    let (mut both_read, mut both_refuse) = (0, 0);
    let mut differ = Vec::new();
    for (name, path) in &cases {
        let bytes = std::fs::read(path).unwrap();
        // go-yaml reads UTF-8 (and UTF-16, which the suite does not use); the oracle takes text.
        let text = String::from_utf8(bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        let go = oracle.read(&text).map(non_null);
        let ours = hooklog_reads(&text);
        match (&go, &ours) {
            (Ok(want), Ok(got)) if got == want => both_read += 1,
            (Err(_), Err(_)) => both_refuse += 1,
            (Ok(_), Err(_)) if deliberate_difference(&ours) => both_read += 1,
            _ => differ.push(format!(
                "{name}: go-yaml {go:?}\n   hooklog {ours:?}\n   {text:?}"
            )),
        }
    }
    eprintln!(
        "yaml-test-suite: {} cases, {both_read} read alike, {both_refuse} refused by both, {} differ",
        cases.len(),
        differ.len()
    );
    assert!(
        differ.is_empty(),
        "{} of {} yaml-test-suite cases read otherwise than go-yaml reads them:\n{}",
        differ.len(),
        cases.len(),
        differ.join("\n")
    );
}
