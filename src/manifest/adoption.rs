//! (the control plane) Which pods hooklog adopts, and in which form: the one rule that `inject`, `hooklog webhook`
//! and `check` share, so that the three never disagree about a pod.
//!
//! In order, first match wins:
//! 1. the pod's annotation [`OPT_IN`] `disabled`: left alone; any value but `enabled` or
//!    `disabled`: left alone, with a note (a typo must not inject);
//! 2. a pod that does not run on Linux ([`not_linux`]): left alone, with a note (hooklog's image
//!    is Linux-only, and the API server refuses its securityContext in a Windows pod);
//! 3. a pod that runs to completion ([`runs_to_completion`]): only a native sidecar, which ends
//!    with it; in a cluster without native sidecars it is left alone, with a note;
//! 4. any other pod: either form.
//!
//! Where to inject (a namespace's label, system namespaces, `hostNetwork`) is the webhook's own
//! selection, not this rule: `inject` is told which files to change.

use serde_json::Value;

use super::budget::SidecarMode;
use super::layout::OPT_IN;

/// The node labels a pod is sent to an OS by: the well-known label, and its deprecated beta
/// name that kubelets still set (Kubernetes "Well-Known Labels": `kubernetes.io/os`).
const OS_LABELS: [&str; 2] = ["kubernetes.io/os", "beta.kubernetes.io/os"];
/// The one OS hooklog's image runs on.
const LINUX: &str = "linux";
/// Kinds of other projects whose pods end, named as their controllers own them (Argo Workflows,
/// Tekton). A kind ending in `Job` (Job, CronJob, OpenKruise BroadcastJob, Kubeflow PyTorchJob,
/// KEDA ScaledJob, ...) is one too.
const BATCH_KINDS: [&str; 4] = ["Workflow", "CronWorkflow", "TaskRun", "PipelineRun"];

/// A pod, as the rule sees it: from a manifest's template or from an admission review.
#[derive(Debug, Clone, Copy)]
pub struct PodView<'a> {
    /// The kind of the object holding the template (`Pod` for a pod itself).
    pub kind: &'a str,
    /// The pod's metadata (the template's, or the Pod's own), when it has any.
    pub metadata: Option<&'a Value>,
    pub spec: &'a Value,
}

/// What the rule decides for one pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Adoption {
    /// Either sidecar form.
    Any,
    /// It runs to completion: only a native sidecar ends with it (the reason, for the note).
    NativeOnly(Completion),
    /// Left alone.
    LeaveAlone(Leave),
}

/// Why a pod runs to completion, in words for its note.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Completion {
    /// `a Job's pod`, `restartPolicy Never`.
    pub why: String,
    /// What would never complete: `Job`, `pod`.
    pub what: String,
}

/// Why a pod is left alone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Leave {
    /// `hooklog.dev/inject: disabled`.
    OptedOut,
    /// [`OPT_IN`] holds something else (the value as written).
    Unclear(String),
    /// Not a Linux pod: what says so.
    NotLinux(String),
}

impl std::fmt::Display for Leave {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Leave::OptedOut => write!(f, "its annotation {OPT_IN}: disabled opts it out"),
            Leave::Unclear(v) => write!(
                f,
                "annotation {OPT_IN}: {v} is neither \"enabled\" nor \"disabled\""
            ),
            Leave::NotLinux(by) => write!(
                f,
                "a Windows pod ({by}), not a Linux one: hooklog's image and its securityContext are Linux-only, and the API server refuses them in a Windows pod"
            ),
        }
    }
}

/// What the note of a pod that runs to completion says, under a classic sidecar: `inject
/// --sidecar classic` finds its notes by it.
pub const CLASSIC_NEVER_ENDS: &str = "a classic sidecar never ends";

impl std::fmt::Display for Completion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: {CLASSIC_NEVER_ENDS}, so the {} would never complete: a native sidecar does, on Kubernetes 1.29+ (`--kubernetes-version 1.29` or later)",
            self.why, self.what
        )
    }
}

/// The rule, for one pod.
pub fn decide(pod: &PodView) -> Adoption {
    let annotation = pod.metadata.map(|m| &m["annotations"][OPT_IN]);
    match annotation {
        None | Some(Value::Null) => {}
        Some(Value::String(s)) if s == "enabled" => {}
        Some(Value::String(s)) if s == "disabled" => return Adoption::LeaveAlone(Leave::OptedOut),
        Some(Value::String(s)) => return Adoption::LeaveAlone(Leave::Unclear(format!("{s:?}"))),
        Some(other) => return Adoption::LeaveAlone(Leave::Unclear(other.to_string())),
    }
    if let Some(by) = not_linux(pod.spec) {
        return Adoption::LeaveAlone(Leave::NotLinux(by));
    }
    match runs_to_completion(pod) {
        Some(c) => Adoption::NativeOnly(c),
        None => Adoption::Any,
    }
}

/// The form a pod gets when `mode` is the cluster's: `Err` with the note when none fits.
pub fn form(adoption: &Adoption, mode: SidecarMode) -> Result<SidecarMode, String> {
    match adoption {
        Adoption::Any => Ok(mode),
        Adoption::NativeOnly(_) if mode == SidecarMode::Native => Ok(mode),
        Adoption::NativeOnly(c) => Err(c.to_string()),
        Adoption::LeaveAlone(l) => Err(l.to_string()),
    }
}

/// True for a kind whose pods end: `Job`, `CronJob`, any kind ending in `Job`, and
/// [`BATCH_KINDS`].
pub fn batch_kind(kind: &str) -> bool {
    kind.ends_with("Job") || BATCH_KINDS.contains(&kind)
}

/// Why the pod runs to completion, if it does: its object is of a batch kind, its controller
/// (`ownerReferences`, a Pod as the API server creates it) is, or its `restartPolicy` is set
/// and not `Always` (a value Kubernetes does not know included: only `Always` restarts).
pub fn runs_to_completion(pod: &PodView) -> Option<Completion> {
    if batch_kind(pod.kind) {
        return Some(Completion {
            why: format!("a {}'s pod", pod.kind),
            what: pod.kind.to_string(),
        });
    }
    let owner = pod
        .metadata
        .and_then(|m| m["ownerReferences"].as_array())
        .into_iter()
        .flatten()
        .filter(|o| o["controller"] == true)
        .find_map(|o| o["kind"].as_str().filter(|k| batch_kind(k)));
    if let Some(kind) = owner {
        return Some(Completion {
            why: format!("a {kind}'s pod"),
            what: kind.to_string(),
        });
    }
    match pod.spec.get("restartPolicy") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if s == "Always" => None,
        Some(Value::String(s)) => Some(Completion {
            why: format!("restartPolicy {s}"),
            what: "pod".into(),
        }),
        Some(other) => Some(Completion {
            why: format!("restartPolicy {other}"),
            what: "pod".into(),
        }),
    }
}

/// What sends the pod to another OS than Linux, if anything does: `spec.os.name`, a
/// `nodeSelector` on [`OS_LABELS`], or required node affinity whose every term rules Linux out.
pub fn not_linux(spec: &Value) -> Option<String> {
    if let Some(os) = spec["os"]["name"].as_str().filter(|os| *os != LINUX) {
        return Some(format!("spec.os.name: {os}"));
    }
    for label in OS_LABELS {
        if let Some(os) = spec["nodeSelector"][label]
            .as_str()
            .filter(|os| *os != LINUX)
        {
            return Some(format!("nodeSelector {label}: {os}"));
        }
    }
    let terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        ["nodeSelectorTerms"]
        .as_array()?;
    // Terms are ORed: Linux is ruled out only when every one rules it out.
    (!terms.is_empty() && terms.iter().all(term_excludes_linux))
        .then(|| "required node affinity on kubernetes.io/os".to_string())
}

/// A node selector term (its expressions ANDed) that no Linux node matches.
fn term_excludes_linux(term: &Value) -> bool {
    term["matchExpressions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["key"].as_str().is_some_and(|k| OS_LABELS.contains(&k)))
        .any(|e| {
            let has_linux = e["values"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|v| v == LINUX);
            match e["operator"].as_str() {
                Some("In") => !has_linux,
                Some("NotIn") => has_linux,
                // Every node has the label.
                Some("DoesNotExist") => true,
                _ => false,
            }
        })
}

/// The note for an opt-in annotation on a workload's own metadata, which its pods never see
/// (the mistake users make most: Linkerd #4125, Vault #525), when its template has none.
pub fn misplaced_annotation(object: &Value, metadata_pointer: &str) -> Option<String> {
    let kind = object["kind"].as_str().unwrap_or("object");
    if kind == "Pod" || metadata_pointer.is_empty() || metadata_pointer == "/metadata" {
        return None;
    }
    let on_object = object["metadata"]["annotations"][OPT_IN].as_str()?;
    let on_template = object
        .pointer(metadata_pointer)
        .and_then(|m| m["annotations"].get(OPT_IN));
    on_template.is_none().then(|| {
        format!(
            "the {kind}'s metadata.annotations has {OPT_IN}: {on_object}, which its pods do not see; put it on {}.annotations",
            metadata_pointer.trim_start_matches('/').replace('/', ".")
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(kind: &str, metadata: Value, spec: Value) -> Adoption {
        decide(&PodView {
            kind,
            metadata: Some(&metadata),
            spec: &spec,
        })
    }

    #[test]
    fn the_rule_in_order() {
        let linux = json!({"containers": []});
        assert_eq!(pod("Deployment", json!({}), linux.clone()), Adoption::Any);
        let off = json!({"annotations": {OPT_IN: "disabled"}});
        assert_eq!(
            pod("Job", off, json!({"os": {"name": "windows"}})),
            Adoption::LeaveAlone(Leave::OptedOut)
        );
        assert!(matches!(
            pod("Pod", json!({"annotations": {OPT_IN: true}}), linux.clone()),
            Adoption::LeaveAlone(Leave::Unclear(_))
        ));
        assert!(matches!(
            pod("Job", json!({}), json!({"os": {"name": "windows"}})),
            Adoption::LeaveAlone(Leave::NotLinux(_))
        ));
        for (kind, spec) in [
            ("Job", json!({})),
            ("CronJob", json!({})),
            ("BroadcastJob", json!({})),
            ("Pod", json!({"restartPolicy": "Never"})),
            ("Pod", json!({"restartPolicy": "OnFailure"})),
            ("Pod", json!({"restartPolicy": "always"})),
            ("Pod", json!({"restartPolicy": 3})),
        ] {
            assert!(
                matches!(pod(kind, json!({}), spec.clone()), Adoption::NativeOnly(_)),
                "{kind} {spec}"
            );
        }
        let owned = json!({"ownerReferences": [{"kind": "Workflow", "controller": true}]});
        assert!(matches!(
            pod("Pod", owned, json!({})),
            Adoption::NativeOnly(_)
        ));
        let not_controller = json!({"ownerReferences": [{"kind": "Job"}]});
        assert_eq!(pod("Pod", not_controller, json!({})), Adoption::Any);
        assert_eq!(
            pod("Pod", json!({}), json!({"restartPolicy": null})),
            Adoption::Any
        );
    }

    #[test]
    fn node_affinity_rules_linux_out_only_in_every_term() {
        let terms = |t: Value| json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": t}}}});
        let expr = |op: &str, v: Value| json!({"matchExpressions": [{"key": "kubernetes.io/os", "operator": op, "values": v}]});
        let windows = expr("In", json!(["windows"]));
        let either = expr("In", json!(["linux", "windows"]));
        let not_linux_term = expr("NotIn", json!(["linux"]));
        let other =
            json!({"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]});
        assert!(not_linux(&terms(json!([windows]))).is_some());
        assert!(not_linux(&terms(json!([not_linux_term]))).is_some());
        assert!(not_linux(&terms(json!([windows, other]))).is_none());
        assert!(not_linux(&terms(json!([either]))).is_none());
        assert!(not_linux(&terms(json!([]))).is_none());
        assert!(
            not_linux(&json!({"nodeSelector": {"beta.kubernetes.io/os": "windows"}})).is_some()
        );
        assert!(not_linux(&json!({"nodeSelector": {"kubernetes.io/os": "linux"}})).is_none());
        assert!(not_linux(&json!({"os": {"name": "linux"}})).is_none());
    }

    #[test]
    fn a_classic_cluster_leaves_a_run_to_completion_pod_alone() {
        let job = pod("Job", json!({}), json!({}));
        assert_eq!(form(&job, SidecarMode::Native), Ok(SidecarMode::Native));
        let note = form(&job, SidecarMode::Classic).unwrap_err();
        assert!(
            note.contains(
                "a Job's pod: a classic sidecar never ends, so the Job would never complete"
            ),
            "{note}"
        );
    }
}
