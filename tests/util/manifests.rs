//! Manifests for the tests: `hooklog` run from the repository's top on them, YAML read back as
//! JSON (by hooklog's reader and by PyYAML), and `kubernetes-validate --strict` against every
//! Kubernetes version from 1.29 on, or a JSON schema with python's jsonschema.

use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use hooklog::manifest::load;
use serde_json::Value;

use super::{hooklog, output_with_input, text};

pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Runs hooklog from the repository's top with `args` and `stdin`.
pub fn run(args: &[&str], stdin: Option<&str>) -> Output {
    let mut cmd = hooklog();
    cmd.current_dir(root()).args(args);
    match stdin {
        // A usage error exits before reading stdin (`--sidecar native` below 1.29): what it
        // wrote and its exit code are what the caller checks.
        Some(input) => output_with_input(&mut cmd, input.as_bytes()),
        None => cmd.stdin(Stdio::null()).output().expect("hooklog output"),
    }
}

pub fn parse(yaml: &str) -> Vec<Value> {
    load::parse("out", yaml.to_string())
        .unwrap_or_else(|e| panic!("hooklog wrote unparseable YAML ({e}):\n{yaml}"))
        .documents
        .into_iter()
        .map(|d| d.value)
        .collect()
}

/// has no schema for `List` (nor for CRDs).
pub fn validator_input(yaml: &str) -> String {
    let mut out = String::new();
    for doc in parse(yaml) {
        let items = match doc["items"].as_array() {
            Some(items) if doc["kind"] == "List" => items.clone(),
            _ => vec![doc],
        };
        for item in items {
            // A kind the validator has no schema for (Argo's Rollout): its pod template, which is
            // what hooklog writes, in the Deployment it is modelled on.
            let item = if item["apiVersion"]
                .as_str()
                .is_some_and(|v| v.starts_with("argoproj.io/"))
            {
                serde_json::json!({
                    "apiVersion": "apps/v1",
                    "kind": "Deployment",
                    "metadata": item["metadata"],
                    "spec": {"selector": item["spec"]["selector"], "template": item["spec"]["template"]},
                })
            } else {
                item
            };
            out.push_str("---\n");
            out.push_str(&item.to_string());
            out.push('\n');
        }
    }
    out
}

/// `kubernetes-validate --strict` against every version from 1.29 on, as tests/k8s.rs does;
/// returns what it printed (every line a pass).
pub fn validate_strictly(files: &[PathBuf]) -> String {
    let versions = validator_versions();
    let mut cmd = Command::new("python3");
    cmd.args(["-m", "kubernetes_validate", "--strict"]);
    for v in &versions {
        cmd.args(["-k", v]);
    }
    cmd.args(files);
    let out = cmd
        .output()
        .expect("kubernetes-validate (scripts/test.sh installs it)");
    let stdout = text(&out.stdout);
    assert!(
        out.status.success(),
        "validation failed:\n{stdout}\n{}",
        text(&out.stderr)
    );
    let not_passed: Vec<&str> = stdout
        .lines()
        .filter(|l| !(l.starts_with("INFO") && l.contains(" passed ")))
        .collect();
    assert!(
        not_passed.is_empty(),
        "the validator said more than passed: {not_passed:#?}"
    );
    eprintln!("validated {} files against {versions:?}", files.len());
    stdout
}

/// Validates `instance` against a JSON schema with python's jsonschema (kubernetes-validate
/// depends on it, so scripts/test.sh installs it).
pub fn validate_schema(schema: &Path, instance: &Value) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("instance.json");
    std::fs::write(&file, instance.to_string()).unwrap();
    let script = "import json, sys, jsonschema\n\
        schema = json.load(open(sys.argv[1]))\n\
        cls = jsonschema.validators.validator_for(schema)\n\
        cls.check_schema(schema)\n\
        errors = sorted(cls(schema, format_checker=cls.FORMAT_CHECKER).iter_errors(json.load(open(sys.argv[2]))), key=str)\n\
        for e in errors: print(list(e.absolute_path), e.message)\n\
        sys.exit(1 if errors else 0)";
    let rejects = format!("{} rejects the output", schema.display());
    assert_python(script, [schema, file.as_path()], &rejects);
}
/// The oldest Kubernetes release with native sidecars on by default (KEP-753, beta in 1.29).
pub const OLDEST_KUBERNETES: (u32, u32) = (1, 29);

/// `python3 -c SCRIPT ARGS...`, its output; panics with a clear message when python3 is missing.
pub fn python_output<A: AsRef<OsStr>>(script: &str, args: impl IntoIterator<Item = A>) -> Output {
    Command::new("python3")
        .arg("-c")
        .arg(script)
        .args(args)
        .output()
        .unwrap_or_else(|e| {
            panic!("python3 is needed (install it; scripts/test.sh assumes it): {e}")
        })
}

/// `python3 -c SCRIPT ARGS...` exits 0: else the test fails with `what` and all it printed.
pub fn assert_python<A: AsRef<OsStr>>(script: &str, args: impl IntoIterator<Item = A>, what: &str) {
    let out = python_output(script, args);
    assert!(
        out.status.success(),
        "{what}:\n{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
}

/// Runs python3 with `script` and `args`; panics with a clear message when python3 or a module
/// is missing.
pub fn python(script: &str, args: &[&str]) -> String {
    let out = python_output(script, args);
    assert!(
        out.status.success(),
        "python3 failed (kubernetes-validate installs PyYAML; scripts/test.sh runs \
         `pip install kubernetes-validate`): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("python3 prints UTF-8")
}

/// The YAML documents of a file, as JSON (PyYAML resolves the anchors the manifests use).
pub fn documents(path: &Path) -> Vec<Value> {
    let out = python(
        "import sys, json, yaml\nprint(json.dumps([d for d in yaml.safe_load_all(open(sys.argv[1])) if d]))",
        &[path.to_str().expect("utf-8 path")],
    );
    serde_json::from_str(&out).expect("documents as JSON")
}

/// Kubernetes minor versions the installed validator has schemas for, from 1.29 on.
pub fn validator_versions() -> Vec<String> {
    let out = Command::new("python3")
        .args([
            "-c",
            "import kubernetes_validate.utils as u\nprint('\\n'.join(u.all_versions()))",
        ])
        .output();
    let out = match out {
        Ok(o) if o.status.success() => o,
        other => panic!(
            "kubernetes-validate is not installed (pip install kubernetes-validate; scripts/test.sh \
             does it): {other:?}"
        ),
    };
    let mut versions = BTreeSet::new();
    for v in String::from_utf8_lossy(&out.stdout).lines() {
        let mut parts = v.split('.').map(|p| p.parse::<u32>());
        if let (Some(Ok(major)), Some(Ok(minor))) = (parts.next(), parts.next())
            && (major, minor) >= OLDEST_KUBERNETES
        {
            versions.insert((major, minor));
        }
    }
    assert!(
        versions.contains(&OLDEST_KUBERNETES),
        "the installed kubernetes-validate has no 1.29 schemas: {versions:?}"
    );
    versions
        .into_iter()
        .map(|(a, b)| format!("{a}.{b}"))
        .collect()
}
/// The YAML documents of rendered text, as JSON (PyYAML, as [`documents`] reads a file).
pub fn yaml_documents(text: &str) -> Vec<Value> {
    let out = output_with_input(
        Command::new("python3").args([
            "-c",
            "import sys, json, yaml\nprint(json.dumps([d for d in yaml.safe_load_all(sys.stdin) if d]))",
        ]),
        text.as_bytes(),
    );
    assert!(
        out.status.success(),
        "not YAML: {}\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// A Helm chart in `dir`: its Chart.yaml (`web` 0.1.0) and one template,
/// templates/deployment.yaml, holding `template`.
pub fn write_chart(dir: &Path, template: &str) {
    std::fs::create_dir_all(dir.join("templates")).unwrap();
    std::fs::write(
        dir.join("Chart.yaml"),
        "apiVersion: v2\nname: web\nversion: 0.1.0\n",
    )
    .unwrap();
    std::fs::write(dir.join("templates/deployment.yaml"), template).unwrap();
}

/// Corpus files wired to hooklog by hand (inject refuses the names they use) or calling it
/// wrongly on purpose.
const NOT_INJECTABLE: [&str; 9] = [
    // Its annotations hold values inject refuses, on purpose.
    "sidecar-settings-annotations.yaml",
    "added-after-inject.yaml",
    // Injected already (`inject --events`), with RBAC beside it.
    "events-rbac.yaml",
    "bare-pod-classic-sidecar.yaml",
    "multi-document.yaml",
    "job-classic-sidecar.yaml",
    "statefulset-classic.yaml",
    "job-wrapped-no-sidecar.yaml",
    "cronjob.yaml",
];

/// Injectable inputs: the corpus files without a hand-wired hooklog, and the incidents.
pub fn injectable() -> Vec<String> {
    let mut out = Vec::new();
    for dir in ["corpus", "incidents", "e2e"] {
        let mut files: Vec<PathBuf> = std::fs::read_dir(root().join("tests/manifests").join(dir))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        for f in files {
            let name = f.file_name().unwrap().to_str().unwrap();
            if !NOT_INJECTABLE.contains(&name) {
                out.push(f.strip_prefix(root()).unwrap().display().to_string());
            }
        }
    }
    assert!(out.len() >= 8, "{out:?}");
    out
}

/// Outputs of hooklog gathered for one `kubernetes-validate --strict` at the end (the
/// validator takes seconds to start, so a test runs it once for all its cases).
pub struct ToValidate {
    dir: tempfile::TempDir,
    files: Vec<PathBuf>,
}

impl Default for ToValidate {
    fn default() -> ToValidate {
        ToValidate {
            dir: tempfile::tempdir().expect("a temporary folder"),
            files: Vec::new(),
        }
    }
}

impl ToValidate {
    /// Keeps `yaml`, as hooklog wrote it, to be validated.
    pub fn add(&mut self, yaml: &str) {
        let file = self.dir.path().join(format!("{}.yaml", self.files.len()));
        std::fs::write(&file, validator_input(yaml)).expect("write a file to validate");
        self.files.push(file);
    }

    /// How many outputs are kept.
    pub fn count(&self) -> usize {
        self.files.len()
    }

    /// Validates every output kept.
    pub fn validate(self) {
        validate_strictly(&self.files);
    }
}

/// `once`, what inject wrote of `input`, holds as every inject output must: `hooklog
/// REINJECT` (an inject reading stdin) on it changes nothing, and `uninject -` gives back
/// `input` byte for byte. `what` names the case in a failure.
pub fn assert_reinject_and_uninject(reinject: &[&str], input: &str, once: &str, what: &str) {
    let again = run(reinject, Some(once));
    assert_eq!(
        text(&again.stdout),
        once,
        "{what}: inject again changed it: {}",
        text(&again.stderr)
    );
    let back = run(&["uninject", "-"], Some(once));
    assert!(back.status.success(), "{what}: {}", text(&back.stderr));
    assert_eq!(
        text(&back.stdout),
        input,
        "{what}: uninject(inject(x)) != x\n--- injected\n{once}"
    );
}

/// A Deployment `web` (selector `app: web`) as text, a string literal: `template: "…"` is the
/// text after its `  template:` key; `image: "…"`, the text after the `image: ` of the one
/// container `web` of a block-style pod template labelled `app: web`.
macro_rules! web_deployment {
    (template: $template:expr) => {
        concat!(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n",
            "  selector:\n    matchLabels: {app: web}\n  template:",
            $template
        )
    };
    (image: $image:literal) => {
        $crate::util::manifests::web_deployment!(template: concat!(
            "\n    metadata:\n      labels: {app: web}\n    spec:\n      containers:\n",
            "        - name: web\n          image: ",
            $image
        ))
    };
}
pub(crate) use web_deployment;

/// The first line where `want` and `got` differ, for a failure message.
pub fn first_difference(want: &str, got: &str) -> String {
    let (w, g): (Vec<&str>, Vec<&str>) = (want.lines().collect(), got.lines().collect());
    let at = w
        .iter()
        .zip(&g)
        .position(|(x, y)| x != y)
        .unwrap_or(w.len().min(g.len()));
    format!(
        "line {}:\n  want: {:?}\n  got:  {:?}",
        at + 1,
        w.get(at),
        g.get(at)
    )
}

/// Every manifest of tests/manifests' folders of real and project inputs (`real`, `faithful`,
/// `corpus`, `incidents`, `e2e`), YAML and JSON, sorted within each folder: what tests/faithful.rs
/// and tests/reinject.rs run inject on.
pub fn every_manifest() -> Vec<PathBuf> {
    let mut out = Vec::new();
    for dir in ["real", "faithful", "corpus", "incidents", "e2e"] {
        let mut files: Vec<PathBuf> = std::fs::read_dir(root().join("tests/manifests").join(dir))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "yaml" || e == "json"))
            .collect();
        files.sort();
        out.extend(files);
    }
    out
}
