//! `check`'s output: readable text grouped by object (colour only on a terminal), one JSON
//! document with stable field names, or SARIF 2.1.0 for code scanning.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde_json::{Value, json};

use super::check::{Finding, RULES, Severity};

/// Version of the JSON document's shape; bumped on an incompatible change.
pub const JSON_VERSION: u32 = 1;
/// The SARIF version and its schema (OASIS SARIF 2.1.0, errata 01).
const SARIF_VERSION: &str = "2.1.0";
const SARIF_SCHEMA: &str = "https://json.schemastore.org/sarif-2.1.0.json";

/// Counts per severity.
pub fn counts(findings: &[Finding]) -> BTreeMap<&'static str, usize> {
    let mut c = BTreeMap::from([("error", 0), ("warning", 0), ("info", 0)]);
    for f in findings {
        *c.entry(f.severity.as_str()).or_default() += 1;
    }
    c
}

/// Text, grouped by file and object. `colour` adds ANSI colours to severities.
pub fn text(findings: &[Finding], objects_checked: usize, colour: bool) -> String {
    let mut out = String::new();
    let mut groups: Vec<((&str, String), Vec<&Finding>)> = Vec::new();
    for f in findings {
        let key = (f.file.as_str(), f.object.to_string());
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, v)) => v.push(f),
            None => groups.push((key, vec![f])),
        }
    }
    for ((file, object), fs) in &groups {
        let _ = writeln!(out, "{file}: {object}");
        for f in fs {
            let sev = f.severity.as_str();
            let sev = if colour {
                let code = match f.severity {
                    Severity::Error => "31",
                    Severity::Warning => "33",
                    Severity::Info => "36",
                };
                format!("\x1b[1;{code}m{sev:<7}\x1b[0m")
            } else {
                format!("{sev:<7}")
            };
            let container = f
                .container
                .as_deref()
                .map(|c| format!(" [{c}]"))
                .unwrap_or_default();
            let _ = writeln!(
                out,
                "  {sev} {}{container} {} (line {}, by {})",
                f.rule,
                f.path,
                f.line,
                f.source.as_str()
            );
            let _ = writeln!(out, "          {}", f.message);
            let _ = writeln!(out, "          fix: {}", f.fix);
        }
    }
    let c = counts(findings);
    let _ = writeln!(
        out,
        "{} error(s), {} warning(s), {} info in {objects_checked} pod template(s)",
        c["error"], c["warning"], c["info"]
    );
    out
}

/// One JSON document: `version`, `findings`, `counts`, `pod_templates`.
pub fn json(findings: &[Finding], objects_checked: usize) -> Value {
    json!({
        "version": JSON_VERSION,
        "findings": findings,
        "counts": counts(findings),
        "pod_templates": objects_checked,
    })
}

/// SARIF 2.1.0: one run, hooklog's rules, one result per finding with its file and line.
pub fn sarif(findings: &[Finding]) -> Value {
    let rules: Vec<Value> = RULES
        .iter()
        .map(|r| {
            json!({
                "id": r.id,
                "name": r.id,
                "shortDescription": {"text": r.description},
                "fullDescription": {"text": r.description},
                "defaultConfiguration": {"level": level(r.severity)},
                "help": {"text": r.description},
            })
        })
        .collect();
    let results: Vec<Value> = findings
        .iter()
        .map(|f| {
            let rule_index = RULES.iter().position(|r| r.id == f.rule).unwrap_or(0);
            let container = f.container.as_deref().map(|c| format!(" container {c}:")).unwrap_or_default();
            json!({
                "ruleId": f.rule,
                "ruleIndex": rule_index,
                "level": level(f.severity),
                "message": {"text": format!("{}{container} {} Fix: {}", f.object, f.message, f.fix)},
                "locations": [{
                    "physicalLocation": {
                        "artifactLocation": {"uri": uri(&f.file)},
                        "region": {"startLine": f.line},
                    },
                    "logicalLocations": [{
                        "fullyQualifiedName": format!("{}/{}", f.object, f.path),
                        "kind": "object",
                    }],
                }],
                "properties": {
                    "source": f.source,
                    "object": f.object,
                    "container": f.container,
                    "path": f.path,
                    "fix": f.fix,
                },
            })
        })
        .collect();
    json!({
        "$schema": SARIF_SCHEMA,
        "version": SARIF_VERSION,
        "runs": [{
            "tool": {"driver": {
                "name": "hooklog",
                "version": env!("CARGO_PKG_VERSION"),
                "rules": rules,
            }},
            "results": results,
        }],
    })
}

fn level(s: Severity) -> &'static str {
    match s {
        Severity::Error => "error",
        Severity::Warning => "warning",
        Severity::Info => "note",
    }
}

/// A relative URI reference for a file name (`-` is stdin).
fn uri(file: &str) -> String {
    if file == "-" {
        return "stdin".to_string();
    }
    file.trim_start_matches("./")
        .chars()
        .map(|c| match c {
            ' ' => "%20".to_string(),
            '%' => "%25".to_string(),
            '#' => "%23".to_string(),
            '?' => "%3F".to_string(),
            c => c.to_string(),
        })
        .collect()
}
