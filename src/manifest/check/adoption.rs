//! (the control plane) Live pods that `hooklog webhook` should have injected and did not: created while it was down
//! or unreachable (`failurePolicy: Ignore` admits them as they are). Read from what the API server
//! lists: `kubectl get namespaces,pods -A -o yaml | hooklog check -` (the namespaces tell which
//! are opted in; without them, a pod's own annotation still does).

use std::collections::BTreeSet;

use serde_json::Value;

use super::{Pod, Rule, Severity, Sink};
use crate::manifest::adoption::{Adoption, Leave};
use crate::manifest::budget::Unfit;
use crate::manifest::hooks::container_hooklog_argv;
use crate::manifest::layout::{ANNOTATION, OPT_IN, SYSTEM_NAMESPACES};
use crate::manifest::podspec;

pub const MISSED_INJECTION: Rule = Rule {
    id: "missed-injection",
    severity: Severity::Warning,
    description: "A pod that opted in to `hooklog webhook` (its namespace's label or its own annotation hooklog.dev/inject) runs without hooklog: it was created while the webhook was down or unreachable, or the webhook skipped it on purpose (a grace period too short for its hooks and hooklog's margin).",
    remediation: "Restart the pod's workload while the webhook is up (`kubectl rollout restart`), so it is created with hooklog; for a pod skipped for its grace period, raise terminationGracePeriodSeconds first.",
};

pub const NOT_LINUX: Rule = Rule {
    id: "hooklog-in-windows-pod",
    severity: Severity::Error,
    description: "hooklog in a Windows pod (spec.os.name, nodeSelector or required node affinity on kubernetes.io/os): its image and securityContext are Linux-only, and the API server refuses them in a Windows pod.",
    remediation: "Remove hooklog from Windows pods (`hooklog uninject`): inject and the webhook leave them alone.",
};

/// hooklog's pieces (its sidecar, its installer) in a pod sent to Windows.
pub fn check_not_linux(pod: &Pod, sink: &mut Sink) {
    let Adoption::LeaveAlone(why @ Leave::NotLinux(_)) = &pod.adoption else {
        return;
    };
    for c in pod
        .containers
        .iter()
        .filter(|c| container_hooklog_argv(c).is_some())
    {
        sink.add(
            &NOT_LINUX,
            Some(&c.name),
            &c.path,
            format!("{}: hooklog cannot run here", why),
            "leave hooklog out of Windows pods (`hooklog uninject`; inject and the webhook leave them alone)",
        );
    }
}

/// Namespaces labelled `hooklog.dev/inject=enabled`, among the objects of document `doc`,
/// added to `out`.
pub fn opted_in_namespaces(doc: &Value, out: &mut BTreeSet<String>) {
    for (_, obj) in podspec::objects(doc) {
        if obj["kind"] == "Namespace"
            && obj["metadata"]["labels"][OPT_IN] == "enabled"
            && let Some(name) = obj["metadata"]["name"].as_str()
        {
            out.insert(name.to_string());
        }
    }
}

/// A Pod (not a template: the webhook injects pods as they are created) that opted in, is not
/// one the webhook leaves alone, and has no hooklog; `unfit` when the webhook skipped it on
/// purpose for its grace period (said as the cause: it was not down).
pub fn check_pod(
    pod: &Pod,
    metadata: Option<&Value>,
    opted_in: &BTreeSet<String>,
    native: bool,
    unfit: Option<Unfit>,
    sink: &mut Sink,
) {
    if pod.object.kind != "Pod" {
        return;
    }
    let namespace = pod.object.namespace.as_deref().unwrap_or("default");
    let annotations = metadata.map(|m| &m["annotations"]);
    let annotation = annotations.and_then(|a| a[OPT_IN].as_str());
    let by_namespace = opted_in.contains(namespace);
    let selected = match annotation {
        Some("enabled") => true,
        Some(_) => false,
        None => by_namespace,
    };
    // What the webhook would have left alone (Windows, a run-to-completion pod in a cluster
    // without native sidecars) is no missed injection.
    let left_alone = match &pod.adoption {
        Adoption::Any => false,
        Adoption::NativeOnly(_) => !native,
        Adoption::LeaveAlone(_) => true,
    };
    if !selected
        || left_alone
        || SYSTEM_NAMESPACES.contains(&namespace)
        || pod.spec["hostNetwork"] == true
        || annotations.is_some_and(|a| a[ANNOTATION].is_string())
        || pod.sidecar.is_some()
    {
        return;
    }
    let why = if annotation.is_some() {
        format!("its annotation {OPT_IN}: enabled")
    } else {
        format!("namespace {namespace} has the label {OPT_IN}=enabled")
    };
    let name = pod.object.qualified_name();
    match unfit {
        Some(unfit) => sink.add(
            &MISSED_INJECTION,
            None,
            pod.spec_path,
            format!(
                "pod {name} opted in to hooklog ({why}) but has no hooklog: the webhook skipped it on purpose, {unfit} (it leaves a pod unchanged rather than cut a hook short)"
            ),
            format!(
                "raise terminationGracePeriodSeconds to at least {} in the pod's workload; its new pods get hooklog",
                unfit.needed()
            ),
        ),
        None => sink.add(
            &MISSED_INJECTION,
            None,
            pod.spec_path,
            format!(
                "pod {name} opted in to hooklog ({why}) but has no hooklog: it was created while the webhook was down or unreachable (failurePolicy Ignore admits such pods as they are)"
            ),
            "check the webhook (`kubectl -n hooklog get pods`, its log says what it skipped and why), then delete the pod so that its controller creates it again through the webhook",
        ),
    }
}
