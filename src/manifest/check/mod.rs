//! (the control plane) `hooklog check`: the rules, one file per family, run over every pod template; each finding
//! has a severity, a stable rule id, the object, container and field path, a message and a fix.

mod adoption;
pub mod control;
pub mod events;
mod fargate;
pub mod image;
mod jobs;
mod output;
mod settings;
mod tailer;
pub mod timing;
pub mod version;
mod wiring;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;

use super::hooks::{self, container_hooklog_argv, parse_hooklog};
use super::load::{Document, Source};
use super::podspec::{self, Container, ObjectRef, TemplateRef};
use crate::cli::{Command, RunArgs};
use crate::registry::Arch;

pub use crate::kube::Severity;

/// A rule: its stable id, severity, what it is about and how to fix it. `--list-rules`, SARIF's
/// `tool.driver.rules` and docs/check-and-inject.md (a test compares them) all come from
/// [`RULES`].
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Rule {
    pub id: &'static str,
    pub severity: Severity,
    pub description: &'static str,
    /// What to do about a finding, in general (each finding's `fix` says it for its case).
    pub remediation: &'static str,
}

/// Every rule `check` has. Ids are stable: they name findings in JSON and SARIF, and in
/// docs/check-and-inject.md.
pub const RULES: &[Rule] = &[
    image::NOT_IN_IMAGE,
    image::NO_COMMAND,
    image::SHELL_LESS,
    output::PROC_1,
    output::NOT_REPORTED,
    timing::EXCEEDS_GRACE,
    timing::BUDGET,
    timing::GRACE_PERIOD,
    timing::NOT_IN_PEERS,
    timing::UNBOUNDED,
    timing::CANNOT_FIT,
    jobs::NEVER_ENDS,
    output::NOT_WRAPPED,
    adoption::NOT_LINUX,
    wiring::BINARY_NOT_MOUNTED,
    wiring::BINARY_NOT_INSTALLED,
    wiring::BINARY_WRITABLE,
    wiring::PATH_NOT_SHARED,
    wiring::NO_SIDECAR,
    wiring::NAME_MISMATCH,
    wiring::DOWNWARD_API,
    wiring::INVALID_COMMAND,
    wiring::MOUNT_OVER_IMAGE,
    events::EVENTS_RBAC,
    fargate::CAPABILITIES,
    fargate::PRIVILEGED,
    fargate::HOST_NAMESPACE,
    fargate::HOST_PATH,
    fargate::DAEMONSET,
    version::NATIVE_SLEEP,
    version::NATIVE_SIDECAR,
    adoption::MISSED_INJECTION,
    control::UNKNOWN_IGNORE,
    tailer::TAIL_WORKAROUND,
    tailer::OUTPUT_UNREAD,
    settings::UNKNOWN,
    settings::INVALID,
];

/// What decided a finding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Basis {
    /// The manifest alone.
    Manifest,
    /// The image's filesystem, read from its registry: definitive.
    Image,
    /// The filesystem given with `--image-root`.
    ImageRoot,
    /// The image's name matched a shell-less pattern: a guess.
    Pattern,
}

impl Basis {
    pub fn as_str(self) -> &'static str {
        match self {
            Basis::Manifest => "manifest",
            Basis::Image => "image",
            Basis::ImageRoot => "image-root",
            Basis::Pattern => "pattern",
        }
    }
}

/// One finding.
#[derive(Debug, Clone, Serialize)]
pub struct Finding {
    pub severity: Severity,
    pub rule: &'static str,
    /// What decided it: `manifest`, `image`, `image-root` or `pattern`.
    pub source: Basis,
    pub file: String,
    /// 1-based line: the container's `name:` line, else the document's first line.
    pub line: usize,
    pub object: ObjectRef,
    pub container: Option<String>,
    /// Field path from the document's root, `spec.template.spec.containers[1].lifecycle.preStop`.
    pub path: String,
    pub message: String,
    pub fix: String,
    /// Set when a `hooklog.dev/ignore-check.<rule>` annotation accepts the finding: it is
    /// reported as suppressed and does not count for `--fail-on`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub suppressed: Option<Suppression>,
}

/// Why a finding is accepted: the annotation and the reason it gives.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Suppression {
    pub annotation: String,
    pub reason: String,
}

/// What `check` was told.
#[derive(Debug, Clone)]
pub struct Options {
    /// Image filesystems, by image reference as written in the manifest.
    pub image_roots: BTreeMap<String, image::ImageRoot>,
    /// Images read from their registries, by reference as written and architecture; or why
    /// one could not be read.
    pub images: BTreeMap<(String, Arch), Result<crate::registry::Image, String>>,
    /// The architecture of a pod whose nodeSelector and affinity name none.
    pub image_platform: Arch,
    pub shell_less: image::Patterns,
    pub fargate: bool,
    /// `(major, minor)`.
    pub kubernetes_version: Option<(u32, u32)>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            image_roots: BTreeMap::new(),
            images: BTreeMap::new(),
            image_platform: Arch::Amd64,
            shell_less: image::Patterns::default(),
            fargate: false,
            kubernetes_version: None,
        }
    }
}

/// A pod template being checked, with what the rules share.
pub struct Pod<'a> {
    pub object: &'a ObjectRef,
    pub spec: &'a Value,
    pub spec_path: &'a str,
    pub containers: Vec<Container<'a>>,
    pub period: Duration,
    /// The `hooklog run` container, its mode and arguments.
    pub sidecar: Option<Sidecar<'a>>,
    /// The pod's metadata (the template's, or the Pod's own).
    pub metadata: Option<&'a Value>,
    /// What the adoption rule, shared with inject and the webhook, says of this pod.
    pub adoption: super::adoption::Adoption,
}

/// The hooklog sidecar of a pod.
pub struct Sidecar<'a> {
    pub container: Container<'a>,
    pub mode: super::budget::SidecarMode,
    pub args: RunArgs,
}

/// Collects findings for one pod template.
pub struct Sink<'a> {
    file: &'a str,
    doc: &'a super::load::Document,
    object: &'a ObjectRef,
    pub findings: Vec<Finding>,
}

impl Sink<'_> {
    /// Adds a finding of `rule` about `container` at `path`.
    pub fn add(
        &mut self,
        rule: &Rule,
        container: Option<&str>,
        path: &str,
        message: String,
        fix: impl Into<String>,
    ) {
        self.add_as(rule.severity, rule, container, path, message, fix)
    }

    /// Adds a finding of `rule` that `source` decided (an image, a pattern).
    pub fn add_from(
        &mut self,
        source: Basis,
        rule: &Rule,
        container: Option<&str>,
        path: &str,
        message: String,
        fix: impl Into<String>,
    ) {
        self.add_as(rule.severity, rule, container, path, message, fix);
        if let Some(f) = self.findings.last_mut() {
            f.source = source;
        }
    }

    /// Adds a finding with a severity other than the rule's own (a platform makes it worse).
    pub fn add_as(
        &mut self,
        severity: Severity,
        rule: &Rule,
        container: Option<&str>,
        path: &str,
        message: String,
        fix: impl Into<String>,
    ) {
        // The path is the List's, for a List's item read on its own: the node is the item's.
        let within = path.strip_prefix(self.doc.path.as_str()).unwrap_or(path);
        let line = self.doc.node.line_at(&path_to_pointer(within));
        self.findings.push(Finding {
            severity,
            rule: rule.id,
            source: Basis::Manifest,
            file: self.file.to_string(),
            line,
            object: self.object.clone(),
            container: container.map(str::to_string),
            path: path.to_string(),
            message,
            fix: fix.into(),
            suppressed: None,
        });
    }
}

/// A finding's path (`spec.template.spec.containers[0].lifecycle`) as a JSON pointer.
fn path_to_pointer(path: &str) -> String {
    let mut out = String::new();
    for part in path.split('.').filter(|p| !p.is_empty()) {
        let mut pieces = part.split('[');
        if let Some(key) = pieces.next().filter(|k| !k.is_empty()) {
            out.push('/');
            out.push_str(&key.replace('~', "~0").replace('/', "~1"));
        }
        for index in pieces {
            out.push('/');
            out.push_str(index.trim_end_matches(']'));
        }
    }
    out
}

/// Checks every pod template of every source. Objects that are not pod templates pass silently.
pub fn check(sources: &[Source], opts: &Options) -> Vec<Finding> {
    let mut opted_in = BTreeSet::new();
    for doc in sources.iter().flat_map(|s| &s.documents) {
        adoption::opted_in_namespaces(&doc.value, &mut opted_in);
    }
    let mut out = Vec::new();
    let grants = events::grants(sources);
    for source in sources {
        for doc in &source.documents {
            out.extend(check_document(&source.name, doc, &opted_in, &grants, opts));
        }
    }
    out
}

/// The findings of every pod template of one document of input `file`; `opted_in` are the
/// namespaces the whole input opted in to the webhook ([`adoption::opted_in_namespaces`]) and
/// `grants` the service accounts its RBAC lets create events ([`events::grants_of`]), the two
/// facts a document's findings take from the others.
pub fn check_document(
    file: &str,
    doc: &Document,
    opted_in: &BTreeSet<String>,
    grants: &events::Grants,
    opts: &Options,
) -> Vec<Finding> {
    let mut out = Vec::new();
    for mut t in podspec::templates(&doc.value) {
        let Some(spec) = doc.value.pointer(&t.spec_pointer) else {
            continue;
        };
        // A List's item read on its own: its paths are the List's.
        t.spec_path.insert_str(0, &doc.path);
        let mut sink = Sink {
            file,
            doc,
            object: &t.object,
            findings: Vec::new(),
        };
        let metadata = doc.value.pointer(&t.metadata_pointer);
        let pod = pod(&t, spec, metadata);
        check_pod(&pod, opts, &mut sink);
        let native = timing::inject_mode(opts) == super::budget::SidecarMode::Native;
        let unfit = timing::unfit(&pod, opts);
        adoption::check_pod(&pod, metadata, opted_in, native, unfit, &mut sink);
        events::check_pod(&pod, grants, &mut sink);
        settings::check_pod(&pod, &mut sink);
        let ignores = control::ignores(doc.value.get("metadata"), &doc.path, &pod);
        control::apply_ignores(&ignores, &mut sink);
        out.extend(sink.findings);
    }
    for (pointer, object) in podspec::objects(&doc.value) {
        if object["kind"] != "Namespace" {
            continue;
        }
        let target = ObjectRef {
            kind: "Namespace".into(),
            namespace: None,
            name: object["metadata"]["name"]
                .as_str()
                .unwrap_or("(unnamed)")
                .to_string(),
        };
        let mut sink = Sink {
            file,
            doc,
            object: &target,
            findings: Vec::new(),
        };
        // `/items/3` is `items[3].`, after the List's own path.
        let mut path = doc.path.clone();
        for part in pointer.split('/').filter(|p| !p.is_empty()) {
            match part.parse::<usize>() {
                Ok(i) => path.push_str(&format!("[{i}].")),
                Err(_) => path.push_str(part),
            }
        }
        settings::check_namespace(object, &path, &mut sink);
        out.extend(sink.findings);
    }
    out
}

/// What one document adds to the facts `check` needs of the whole input before it checks any
/// document: its pod templates' count, the images it names ([`wanted_images`]), the
/// namespaces it opts in and its RBAC objects ([`events::rbac_objects`]).
pub fn summarize(
    doc: &Value,
    opts: &Options,
    templates: &mut usize,
    wanted: &mut BTreeSet<(String, Arch)>,
    opted_in: &mut BTreeSet<String>,
    rbac: &mut Vec<Value>,
) {
    *templates += podspec::templates(doc).len();
    wanted_images_of(doc, opts, wanted);
    adoption::opted_in_namespaces(doc, opted_in);
    events::rbac_objects(doc, rbac);
}

/// The `(image, arch)` pairs whose filesystem the image rules would look in: the image of
/// every container (what it runs is its `command` or the image's ENTRYPOINT or CMD), not given
/// with `--image-root`.
pub fn wanted_images(sources: &[Source], opts: &Options) -> Vec<(String, Arch)> {
    let mut out = BTreeSet::new();
    for doc in sources.iter().flat_map(|s| &s.documents) {
        wanted_images_of(&doc.value, opts, &mut out);
    }
    out.into_iter().collect()
}

/// [`wanted_images`] of one document, added to `out`.
fn wanted_images_of(doc: &Value, opts: &Options, out: &mut BTreeSet<(String, Arch)>) {
    for t in podspec::templates(doc) {
        let Some(spec) = doc.pointer(&t.spec_pointer) else {
            continue;
        };
        let arch = image::pod_arch(spec, opts.image_platform);
        for c in podspec::containers(spec, &t.spec_path) {
            let image = c.image();
            if !image.is_empty() && !opts.image_roots.contains_key(image) {
                out.insert((image.to_string(), arch));
            }
        }
    }
}

fn pod<'a>(t: &'a TemplateRef, spec: &'a Value, metadata: Option<&'a Value>) -> Pod<'a> {
    let containers = podspec::containers(spec, &t.spec_path);
    let sidecar = containers.iter().find_map(|c| {
        let argv = container_hooklog_argv(c)?;
        match parse_hooklog(&argv, &c.literal_env()) {
            Ok(Command::Run(args)) => Some(Sidecar {
                container: c.clone(),
                mode: if c.native_sidecar() {
                    super::budget::SidecarMode::Native
                } else {
                    super::budget::SidecarMode::Classic
                },
                args,
            }),
            _ => None,
        }
    });
    let adoption = super::adoption::decide(&super::adoption::PodView {
        kind: &t.object.kind,
        metadata,
        spec,
    });
    Pod {
        object: &t.object,
        metadata,
        adoption,
        spec,
        spec_path: &t.spec_path,
        period: Duration::from_secs(podspec::termination_grace_seconds(spec)),
        containers,
        sidecar,
    }
}

fn check_pod(pod: &Pod, opts: &Options, sink: &mut Sink) {
    for c in &pod.containers {
        image::check_container(pod, c, opts, sink);
        image::check_probes(pod, c, opts, sink);
        for hook in hooks::hooks(c) {
            image::check_hook(pod, c, &hook, opts, sink);
            output::check_hook(pod, c, &hook, opts, sink);
            timing::check_hook(pod, c, &hook, sink);
            wiring::check_hook(pod, c, &hook, sink);
            version::check_hook(c, &hook, opts, sink);
        }
    }
    timing::check_pod(pod, opts, sink);
    wiring::check_pod(pod, opts, sink);
    jobs::check_pod(pod, sink);
    tailer::check_pod(pod, sink);
    adoption::check_not_linux(pod, sink);
    version::check_pod(pod, opts, sink);
    if opts.fargate {
        fargate::check_pod(pod, sink);
    }
}

pub use crate::kube::parse_version;

pub use super::budget::secs;

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// `check DIR` exited 64 on a kustomize JSON6902 patch (a top-level list) among the files:
    /// such a document holds no pod template, and the others are still checked.
    #[test]
    fn a_json6902_patch_does_not_stop_the_rest() {
        let text = "- op: add\n  path: /spec/replicas\n  value: 3\n---\nkind: Pod\nmetadata: {name: p}\nspec:\n  terminationGracePeriodSeconds: 1\n  containers: [{name: a, image: a}]\n";
        let source = crate::manifest::load::parse("dir/patch.yaml", text.to_string())
            .expect("a patch beside a pod is read");
        assert_eq!(source.notes.len(), 1, "{:?}", source.notes);
        let findings = check(&[source], &Options::default());
        assert_eq!(
            findings.iter().map(|f| f.rule).collect::<Vec<_>>(),
            [timing::CANNOT_FIT.id]
        );
        let mut patch = json!([{"op": "remove", "path": "/spec/x"}]);
        let before = patch.clone();
        let opts = crate::manifest::inject::Options {
            image: "hooklog".into(),
            mode: crate::manifest::budget::SidecarMode::Native,
            prestop_sleep: vec![],
            events: false,
            settings: Default::default(),
        };
        assert!(
            crate::manifest::inject::inject(&mut patch, &opts)
                .unwrap()
                .is_empty()
        );
        assert_eq!(patch, before);
    }
}
