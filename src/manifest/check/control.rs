//! (the control plane) Rule control, as kube-linter has it: `hooklog.dev/ignore-check.<rule>` annotations accept a
//! rule's findings on one object, `--include` / `--exclude` pick rules, and `.hooklog.yaml`
//! (found from the current folder upward, or `--config FILE`) holds the defaults.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

use super::{Finding, Pod, RULES, Rule, Severity, Sink, Suppression};

/// The annotation prefix that accepts a rule's findings on an object or its pod template
/// (kube-linter's is `ignore-check.kube-linter.io/<check>`; hooklog keeps its own domain).
pub const IGNORE_PREFIX: &str = "hooklog.dev/ignore-check.";

/// The configuration file's name, searched from the current folder upward.
pub const CONFIG_FILE: &str = ".hooklog.yaml";

pub const UNKNOWN_IGNORE: Rule = Rule {
    id: "ignore-check-unknown-rule",
    severity: Severity::Warning,
    description: "A `hooklog.dev/ignore-check.<rule>` annotation names no rule hooklog has (a typo, or a rule since renamed): it accepts nothing.",
    remediation: "Name a rule `hooklog check --list-rules` lists, or remove the annotation.",
};

/// The rule named `name`, if hooklog has it.
pub fn rule(name: &str) -> Option<&'static Rule> {
    RULES.iter().find(|r| r.id == name)
}

/// Reads a comma-separated list of rule names (`--include`, `--exclude`, the file's lists):
/// an unknown name is an error naming it.
pub fn rule_set(what: &str, names: &[String]) -> Result<BTreeSet<&'static str>, String> {
    let mut out = BTreeSet::new();
    for name in names.iter().map(|n| n.trim()).filter(|n| !n.is_empty()) {
        match rule(name) {
            Some(r) => {
                out.insert(r.id);
            }
            None => {
                return Err(format!(
                    "{what}: no rule is named {name:?} (`hooklog check --list-rules` lists them)"
                ));
            }
        }
    }
    Ok(out)
}

/// Which rules' findings are reported.
#[derive(Debug, Clone, Default)]
pub struct Selection {
    /// Only these, when set.
    pub include: Option<BTreeSet<&'static str>>,
    pub exclude: BTreeSet<&'static str>,
}

impl Selection {
    pub fn keeps(&self, rule: &str) -> bool {
        self.include.as_ref().is_none_or(|i| i.contains(rule)) && !self.exclude.contains(rule)
    }
}

/// `.hooklog.yaml`: `check:` holds `include`, `exclude` and `fail-on`, as the flags do.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigFile {
    #[serde(default)]
    pub check: CheckConfig,
}

/// The `check:` section.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct CheckConfig {
    pub include: Option<Vec<String>>,
    pub exclude: Option<Vec<String>>,
    pub fail_on: Option<Severity>,
}

/// The configuration file `check` uses: `--config FILE`, else the first `.hooklog.yaml` in
/// `start` or a folder above it.
pub fn find_config(given: Option<&Path>, start: &Path) -> Option<PathBuf> {
    if let Some(p) = given {
        return Some(p.to_path_buf());
    }
    start
        .ancestors()
        .map(|d| d.join(CONFIG_FILE))
        .find(|p| p.is_file())
}

/// Reads and validates a configuration file; an error names the file.
pub fn read_config(path: &Path) -> Result<ConfigFile, String> {
    let name = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| format!("{name}: {e}"))?;
    if text.trim().is_empty() {
        return Ok(ConfigFile::default());
    }
    let source = crate::manifest::load::parse(&name, text).map_err(|e| e.to_string())?;
    let value = match source.documents.as_slice() {
        [] => return Ok(ConfigFile::default()),
        [doc] => doc.value.clone(),
        _ => return Err(format!("{name}: holds more than one YAML document")),
    };
    let config: ConfigFile = serde_json::from_value(value).map_err(|e| format!("{name}: {e}"))?;
    for (what, list) in [
        ("include", &config.check.include),
        ("exclude", &config.check.exclude),
    ] {
        if let Some(list) = list {
            rule_set(&format!("{name}: check.{what}"), list)?;
        }
    }
    Ok(config)
}

/// An ignore annotation: what it accepts, and the dotted path of the metadata that holds it.
#[derive(Debug, Clone)]
pub struct Ignore {
    pub suppression: Suppression,
    pub at: String,
}

/// The `hooklog.dev/ignore-check.*` annotations of an object (its `metadata`, the object at
/// field path `path`) and of its pod template, by rule name as written.
pub fn ignores(object: Option<&Value>, path: &str, pod: &Pod) -> BTreeMap<String, Ignore> {
    let mut out = BTreeMap::new();
    // The template's own annotation is the closer one: it wins over the object's.
    let places = [
        (object, format!("{path}metadata")),
        (pod.metadata, metadata_path(pod.spec_path)),
    ];
    for (metadata, at) in places {
        let Some(annotations) = metadata
            .and_then(|m| m.get("annotations"))
            .and_then(Value::as_object)
        else {
            continue;
        };
        for (key, value) in annotations {
            if let Some(name) = key.strip_prefix(IGNORE_PREFIX) {
                let reason = match value {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                let suppression = Suppression {
                    annotation: key.clone(),
                    reason,
                };
                out.insert(
                    name.to_string(),
                    Ignore {
                        suppression,
                        at: at.clone(),
                    },
                );
            }
        }
    }
    out
}

/// Marks the findings an annotation accepts, and adds a finding for each annotation that
/// names no rule.
pub fn apply_ignores(ignores: &BTreeMap<String, Ignore>, sink: &mut Sink) {
    for f in &mut sink.findings {
        if let Some(i) = ignores.get(f.rule) {
            f.suppressed = Some(i.suppression.clone());
        }
    }
    for (name, i) in ignores {
        if rule(name).is_none() {
            sink.add(
                &UNKNOWN_IGNORE,
                None,
                &format!("{}.annotations", i.at),
                format!(
                    "annotation {} names no rule: it accepts nothing (reason given: {:?})",
                    i.suppression.annotation, i.suppression.reason
                ),
                "name a rule `hooklog check --list-rules` lists, or remove the annotation",
            );
        }
    }
}

/// The dotted path of a pod spec's metadata: `spec.template.spec` -> `spec.template.metadata`,
/// a Pod's `spec` -> `metadata`.
fn metadata_path(spec_path: &str) -> String {
    match spec_path.strip_suffix("spec") {
        Some(prefix) => format!("{prefix}metadata"),
        None => "metadata".to_string(),
    }
}

/// What `check` was told about rules, from its flags and the configuration file.
#[derive(Debug, Clone)]
pub struct Control {
    pub selection: Selection,
    pub fail_on: Severity,
}

/// Resolves the flags against the configuration file (`--config`, else the first
/// `.hooklog.yaml` from `cwd` upward): a flag wins over the file. An unknown rule name or a
/// file that cannot be read is an error, said once.
pub fn resolve(
    include: Option<&[String]>,
    exclude: Option<&[String]>,
    fail_on: Option<Severity>,
    config: Option<&Path>,
    cwd: &Path,
) -> Result<Control, String> {
    let file = match find_config(config, cwd) {
        Some(path) => {
            tracing::debug!(path = %path.display(), "configuration file");
            read_config(&path)?.check
        }
        None => {
            tracing::debug!(from = %cwd.display(), "no configuration file");
            CheckConfig::default()
        }
    };
    let include = match include.or(file.include.as_deref()) {
        Some(names) => Some(rule_set("--include", names)?),
        None => None,
    };
    let exclude = rule_set(
        "--exclude",
        exclude.or(file.exclude.as_deref()).unwrap_or_default(),
    )?;
    Ok(Control {
        selection: Selection { include, exclude },
        fail_on: fail_on.or(file.fail_on).unwrap_or(Severity::Error),
    })
}

/// Whether a finding counts for `--fail-on`.
pub fn counts_for_fail(f: &Finding, fail_on: Severity) -> bool {
    f.suppressed.is_none() && f.severity >= fail_on
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_path_of_each_template_shape() {
        assert_eq!(metadata_path("spec"), "metadata");
        assert_eq!(
            metadata_path("spec.template.spec"),
            "spec.template.metadata"
        );
        assert_eq!(
            metadata_path("spec.jobTemplate.spec.template.spec"),
            "spec.jobTemplate.spec.template.metadata"
        );
    }

    #[test]
    fn every_rule_name_is_read_and_an_unknown_one_is_named() {
        let all: Vec<String> = RULES.iter().map(|r| r.id.to_string()).collect();
        assert_eq!(rule_set("--include", &all).unwrap().len(), RULES.len());
        let err = rule_set("--exclude", &["hook-not-reportd".into()]).unwrap_err();
        assert!(err.contains("\"hook-not-reportd\""), "{err}");
    }

    #[test]
    fn include_then_exclude() {
        let s = Selection {
            include: Some(BTreeSet::from(["a", "b"])),
            exclude: BTreeSet::from(["b"]),
        };
        assert!(s.keeps("a") && !s.keeps("b") && !s.keeps("c"));
        assert!(Selection::default().keeps("c"));
    }
}
