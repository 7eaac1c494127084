//! (the control plane) The injected sidecar's `hooklog.dev/` annotations on pod templates and
//! Namespaces (docs/annotations.md): an unknown one (a typo, most likely: inject and the webhook
//! ignore it) and a value inject and the webhook refuse (they leave the pod uninjected), found
//! with the same parser they use ([`crate::sidecar_settings`]).

use serde_json::Value;

use super::{Pod, Rule, Severity, Sink};
use crate::sidecar_settings::{self, Problem, ProblemKind};

pub const UNKNOWN: Rule = Rule {
    id: "sidecar-annotation-unknown",
    severity: Severity::Warning,
    description: "A `hooklog.dev/` annotation on a pod template or a Namespace names no setting hooklog reads (a typo, most likely): inject and the webhook ignore it, so the sidecar runs without the setting it meant.",
    remediation: "Use a name docs/annotations.md lists (`hooklog.dev/output`, `hooklog.dev/cpu-request`...), or remove the annotation.",
};

pub const INVALID: Rule = Rule {
    id: "sidecar-annotation-invalid",
    severity: Severity::Error,
    description: "A `hooklog.dev/` setting annotation holds a value hooklog refuses (an unknown output, a bad quantity, an environment variable name Kubernetes refuses): inject stops on it and the webhook leaves the pod, or every pod of the Namespace, without hooklog.",
    remediation: "Give a value docs/annotations.md describes for that annotation.",
};

/// The annotations of a pod template.
pub fn check_pod(pod: &Pod, sink: &mut Sink) {
    let at = match pod.spec_path.strip_suffix("spec") {
        Some(prefix) => format!("{prefix}metadata.annotations"),
        None => "metadata.annotations".to_string(),
    };
    report(
        sidecar_settings::problems(
            pod.metadata
                .and_then(|m| m.get("annotations"))
                .and_then(Value::as_object),
        ),
        &at,
        sink,
    );
}

/// The annotations of a Namespace object at dotted path `path` (`""` for a document's own).
pub fn check_namespace(namespace: &Value, path: &str, sink: &mut Sink) {
    report(
        sidecar_settings::problems(namespace["metadata"]["annotations"].as_object()),
        &format!("{path}metadata.annotations"),
        sink,
    );
}

fn report(problems: Vec<Problem>, at: &str, sink: &mut Sink) {
    for p in problems {
        let (rule, fix) = match &p.kind {
            ProblemKind::Unknown(Some(near)) => (
                &UNKNOWN,
                format!("rename it {}{near}", sidecar_settings::PREFIX),
            ),
            ProblemKind::Unknown(None) => (
                &UNKNOWN,
                "use a name docs/annotations.md lists, or remove it".to_string(),
            ),
            ProblemKind::Invalid(_) => (
                &INVALID,
                "give a value docs/annotations.md describes".to_string(),
            ),
        };
        sink.add(rule, None, at, p.to_string(), fix);
    }
}
