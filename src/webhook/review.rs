//! (the control plane) One AdmissionReview in, one out: decides whether a pod gets hooklog, and turns what
//! [`crate::manifest::inject`] makes of it into a JSONPatch. Pure: no I/O, so every decision has
//! a unit test. Whatever comes in, the answer allows the object: a webhook that refuses (or
//! fails) blocks deploys under `failurePolicy: Fail`.

use base64::Engine;
use serde_json::{Map, Value, json};

use crate::manifest::adoption::{self, Adoption, Leave, PodView};
use crate::manifest::inject::{self, ANNOTATION as RECORD_ANNOTATION};
use crate::manifest::podspec;
use crate::sidecar_settings::{self, Settings};

pub use crate::manifest::layout::{OPT_IN, SYSTEM_NAMESPACES};
/// The prefix of every warning about a pod or template that asked for hooklog and did not get it
/// (the name users search for, as Linkerd's and Vault's users asked).
pub const SKIPPED: &str = "InjectionSkipped";
/// Longest warning kept: "Warnings over 256 characters ... may be truncated" (Kubernetes API
/// concepts, "Warnings"; AdmissionResponse.warnings).
const MAX_WARNING: usize = 256;

/// Which webhook of the configuration called: the two are told apart by URL path, because a
/// webhook sees the pod but not its namespace's labels (reading them would need cluster-wide
/// `get namespaces`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// `/mutate/namespace-enabled`: the namespace has the label `hooklog.dev/inject=enabled`, so
    /// pods are injected unless their annotation says `disabled`.
    NamespaceEnabled,
    /// `/mutate`: any other namespace; only pods annotated `enabled` are injected.
    Other,
}

/// What the webhook was told.
#[derive(Debug, Clone)]
pub struct Policy {
    /// Image, sidecar form and `--prestop-sleep`, as `hooklog inject` takes them.
    pub inject: inject::Options,
    /// The webhook's own namespace: its pods never get hooklog.
    pub own_namespace: Option<String>,
    /// The namespaces' `hooklog.dev/` annotations, as last listed: over `inject.settings`.
    pub namespaces: std::sync::Arc<super::namespaces::Namespaces>,
}

/// What happened, for hooklog's log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Injected,
    /// Asked for (namespace or annotation) and not done; the reason is also a warning.
    Skipped(String),
    /// Not asked for: nothing to say to the user.
    NotSelected(&'static str),
    /// Not a review we can act on (the reason is a warning too).
    Invalid(String),
}

/// The answer to one review.
#[derive(Debug)]
pub struct Reviewed {
    /// The AdmissionReview to send back.
    pub response: Value,
    pub verdict: Verdict,
    /// `namespace/name` (or `generateName`) of the object, for the log.
    pub object: String,
}

/// Reviews `body`, an AdmissionReview; never fails.
pub fn review(body: &[u8], scope: Scope, policy: &Policy) -> Reviewed {
    let review: Value = match serde_json::from_slice(body) {
        Ok(v) => v,
        Err(e) => {
            return invalid(
                "admission.k8s.io/v1",
                uid_in_prefix(body).unwrap_or_default(),
                format!("not JSON: {e}"),
            );
        }
    };
    // The answer's version is the request's (the API server checks); v1 for anything else.
    let api_version = review["apiVersion"]
        .as_str()
        .filter(|v| matches!(*v, "admission.k8s.io/v1" | "admission.k8s.io/v1beta1"))
        .unwrap_or("admission.k8s.io/v1");
    let request = &review["request"];
    let uid = request["uid"].as_str().unwrap_or_default().to_string();
    if review["kind"] != "AdmissionReview" || !request.is_object() || uid.is_empty() {
        return invalid(
            api_version,
            uid,
            "not an AdmissionReview with a request and its uid".into(),
        );
    }
    let object = &request["object"];
    let namespace = request["namespace"]
        .as_str()
        .or(object["metadata"]["namespace"].as_str())
        .unwrap_or_default();
    let name = request["name"]
        .as_str()
        .filter(|n| !n.is_empty())
        .or(object["metadata"]["name"].as_str())
        .or(object["metadata"]["generateName"].as_str())
        .unwrap_or("(unnamed)");
    let display = format!("{namespace}/{name}");
    let kind = &request["kind"];
    let is_pod = kind["group"] == "" && kind["version"] == "v1" && kind["kind"] == "Pod";
    let (verdict, patch, warnings) = if !object.is_object() {
        let why = "the request has no object".to_string();
        (Verdict::Invalid(why.clone()), None, vec![why])
    } else if !is_pod {
        workload(object, kind)
    } else if request["operation"] != "CREATE" {
        (Verdict::NotSelected("not a CREATE"), None, vec![])
    } else {
        pod(object, namespace, scope, policy)
    };
    let mut response = json!({ "uid": uid, "allowed": true });
    if let Some(p) = patch {
        response["patchType"] = json!("JSONPatch");
        response["patch"] =
            json!(base64::engine::general_purpose::STANDARD.encode(p.to_string().as_bytes()));
    }
    if !warnings.is_empty() {
        response["warnings"] = json!(warnings.into_iter().map(clip).collect::<Vec<_>>());
    }
    Reviewed {
        response: json!({ "apiVersion": api_version, "kind": "AdmissionReview", "response": response }),
        verdict,
        object: display,
    }
}

/// The answer to a review that cannot be read: allowed, no patch, one warning.
pub fn invalid(api_version: &str, uid: String, why: String) -> Reviewed {
    Reviewed {
        response: json!({
            "apiVersion": api_version,
            "kind": "AdmissionReview",
            "response": {
                "uid": uid,
                "allowed": true,
                "warnings": [clip(format!("hooklog webhook: {why}; admitted unchanged"))],
            }
        }),
        verdict: Verdict::Invalid(why),
        object: String::new(),
    }
}

/// The request's uid, read alone (a body that parses as JSON but not as a review, or whose
/// review failed): only an answer with the request's uid counts as one.
pub fn uid_of(body: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Request {
        uid: String,
    }
    #[derive(serde::Deserialize)]
    struct Review {
        request: Request,
    }
    serde_json::from_slice::<Review>(body)
        .ok()
        .map(|r| r.request.uid)
        .or_else(|| uid_in_prefix(body))
}

/// The answer's `apiVersion`: the request's if it is one the API server sends, else v1.
pub fn api_version_of(body: &[u8]) -> &'static str {
    #[derive(serde::Deserialize)]
    struct Review<'a> {
        #[serde(rename = "apiVersion", borrow)]
        api_version: std::borrow::Cow<'a, str>,
    }
    match serde_json::from_slice::<Review>(body) {
        Ok(r) if r.api_version == "admission.k8s.io/v1beta1" => "admission.k8s.io/v1beta1",
        _ => "admission.k8s.io/v1",
    }
}

/// The request's uid from the first bytes of a body too large (or too broken) to parse: the API
/// server writes `request.uid` first, and only an answer with that uid counts as one.
pub fn uid_in_prefix(body: &[u8]) -> Option<String> {
    const NEEDLE: &[u8] = b"\"uid\":\"";
    let head = &body[..body.len().min(4096)];
    let start = head.windows(NEEDLE.len()).position(|w| w == NEEDLE)? + NEEDLE.len();
    let len = head[start..].iter().position(|b| *b == b'"')?;
    let uid = std::str::from_utf8(&head[start..start + len]).ok()?;
    // A Kubernetes UID is a UUID: letters, digits and dashes.
    uid.bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        .then(|| uid.to_string())
}

fn clip(mut s: String) -> String {
    if s.len() > MAX_WARNING {
        let mut end = MAX_WARNING - 3;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
        s.push_str("...");
    }
    s
}

type Decision = (Verdict, Option<Value>, Vec<String>);

fn skipped(why: String) -> Decision {
    let warning = format!("{SKIPPED}: {why}");
    (Verdict::Skipped(why), None, vec![warning])
}

/// A panic planted for the tests of the webhook's isolation (tests/webhook_hostile.rs): only in
/// a debug build (the tests' binary; never a release one), only when `HOOKLOG_TEST_PANIC` is
/// set, and only for a pod annotated `hooklog.dev/test-panic`.
#[cfg(debug_assertions)]
fn planted_panic(object: &Value) {
    if std::env::var_os("HOOKLOG_TEST_PANIC").is_some()
        && object["metadata"]["annotations"]["hooklog.dev/test-panic"].is_string()
    {
        panic!("planted panic (HOOKLOG_TEST_PANIC)");
    }
}

/// A workload (Deployment, Job, ...): never changed, but an opt-in annotation on the object
/// instead of its pod template is the mistake users make most (Linkerd #4125, Vault #525): said
/// at `kubectl apply` time, where they look.
fn workload(object: &Value, kind: &Value) -> Decision {
    let kind = kind["kind"].as_str().unwrap_or("object");
    let templates = podspec::templates(object);
    let Some(t) = templates.first() else {
        let why = format!("a {kind} is not a Pod; nothing to do");
        return (
            Verdict::NotSelected("not a Pod"),
            None,
            vec![format!("hooklog webhook: {why}")],
        );
    };
    match adoption::misplaced_annotation(object, &t.metadata_pointer) {
        Some(why) => skipped(why),
        None => (Verdict::NotSelected("a workload"), None, vec![]),
    }
}

/// A pod being created: the opt-in, the webhook's own skips, the adoption rule every part of
/// hooklog shares ([`adoption::decide`]), then inject and the patch. A pod injected before (the
/// API server reinvokes the webhook after a later one changed the pod) gets what inject, run
/// again, wires: containers added since.
fn pod(object: &Value, namespace: &str, scope: Scope, policy: &Policy) -> Decision {
    #[cfg(debug_assertions)]
    planted_panic(object);
    if let Some(left) = left_alone(object, namespace, scope, policy) {
        return left;
    }
    let namespaced = policy.namespaces.annotations(namespace);
    let opts = match options(policy, namespace, namespaced.as_ref()) {
        Ok(o) => o,
        Err(why) => return skipped(why),
    };
    let (pod, report, outcomes) = match injected(object, &opts) {
        Ok(r) => r,
        Err(why) => return skipped(why),
    };
    if outcomes == [inject::Outcome::AlreadyInjected] {
        // Asked again with nothing new (a reinvocation): nothing to say at INFO.
        return (Verdict::NotSelected("already injected"), None, vec![]);
    }
    if &pod == object {
        // inject's own words: why it left the pod as it was (a grace period too short, ...).
        let why = report
            .iter()
            .map(|l| l.trim())
            .collect::<Vec<_>>()
            .join("; ");
        return skipped(why);
    }
    let patch = super::patch::diff(object, &pod);
    // An unknown `hooklog.dev/` annotation (a typo, most likely) is said where the user looks.
    let mut unknown = sidecar_settings::unknown(namespaced.as_ref());
    unknown.extend(sidecar_settings::unknown(
        object["metadata"]["annotations"].as_object(),
    ));
    let warnings = unknown
        .into_iter()
        .map(|u| format!("hooklog: {u}"))
        .collect();
    (Verdict::Injected, Some(Value::Array(patch)), warnings)
}

/// Why the webhook leaves a pod alone before inject sees it (opted out, not opted in, a system
/// or its own namespace, the host's network, a form the adoption rule refuses), if it does.
fn left_alone(object: &Value, namespace: &str, scope: Scope, policy: &Policy) -> Option<Decision> {
    let spec = &object["spec"];
    let rule = adoption::decide(&PodView {
        kind: "Pod",
        metadata: object.get("metadata"),
        spec,
    });
    let annotated = object["metadata"]["annotations"][OPT_IN].as_str() == Some("enabled");
    match &rule {
        Adoption::LeaveAlone(Leave::OptedOut) => {
            return Some((Verdict::NotSelected("annotation disabled"), None, vec![]));
        }
        Adoption::LeaveAlone(why @ Leave::Unclear(_)) => return Some(skipped(why.to_string())),
        _ => {}
    }
    if !annotated && scope == Scope::Other {
        return Some((Verdict::NotSelected("not opted in"), None, vec![]));
    }
    if SYSTEM_NAMESPACES.contains(&namespace) {
        return Some(skipped(format!("{namespace} is a system namespace")));
    }
    if policy.own_namespace.as_deref() == Some(namespace) {
        return Some(skipped(format!(
            "{namespace} is the webhook's own namespace"
        )));
    }
    if spec["hostNetwork"] == true {
        return Some(skipped("hostNetwork pod (its ports are the node's)".into()));
    }
    let injected_before = object["metadata"]["annotations"][RECORD_ANNOTATION].is_string();
    if !injected_before && let Err(why) = adoption::form(&rule, policy.inject.mode) {
        return Some(skipped(why));
    }
    None
}

/// inject's options for a pod of `namespace`: the namespace's settings over the install's (the
/// pod's go over these in inject), or why the pod is skipped (a bad namespace setting, named).
fn options(
    policy: &Policy,
    namespace: &str,
    namespaced: Option<&Map<String, Value>>,
) -> Result<inject::Options, String> {
    let install = Settings {
        events: policy.inject.settings.events || policy.inject.events,
        ..policy.inject.settings.clone()
    };
    let settings = sidecar_settings::resolve(&install, namespaced)
        .map_err(|why| format!("namespace {namespace}: {why}"))?;
    Ok(inject::Options {
        events: settings.events,
        settings,
        ..policy.inject.clone()
    })
}

/// inject's pod, report and outcomes for `object`, its `kind` and `apiVersion` as they came (the
/// review's object may lack them: inject finds pod templates by kind); or why inject refused it.
fn injected(
    object: &Value,
    opts: &inject::Options,
) -> Result<(Value, Vec<String>, Vec<inject::Outcome>), String> {
    let mut pod = object.clone();
    pod["kind"] = json!("Pod");
    pod["apiVersion"] = json!("v1");
    // A pod `hooklog inject` wrote keeps the settings it was given there: flags the webhook
    // cannot see (`--sidecar-output cloudwatch`) are the user's, not to be taken back to the
    // install's at admission. Running `inject` again updates them in the manifest.
    let (report, outcomes) = inject::inject_outcomes(&mut pod, opts).map_err(|e| e.why)?;
    for key in ["kind", "apiVersion"] {
        match object.get(key) {
            Some(v) => pod[key] = v.clone(),
            None => {
                if let Some(m) = pod.as_object_mut() {
                    m.remove(key);
                }
            }
        }
    }
    Ok((pod, report, outcomes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::budget::SidecarMode;

    fn policy(mode: SidecarMode) -> Policy {
        Policy {
            inject: inject::Options {
                image: "hooklog:test".into(),
                mode,
                prestop_sleep: vec![],
                events: false,
                settings: Default::default(),
            },
            own_namespace: Some("hooklog".into()),
            namespaces: Default::default(),
        }
    }

    fn review_of(object: Value, namespace: &str) -> Vec<u8> {
        json!({
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": "0df28fbd-5f5f-11e8-bc74-36e6bb280816",
                "kind": {"group": "", "version": "v1", "kind": "Pod"},
                "resource": {"group": "", "version": "v1", "resource": "pods"},
                "namespace": namespace,
                "operation": "CREATE",
                "object": object,
            }
        })
        .to_string()
        .into_bytes()
    }

    fn pod(annotations: Value, spec_extra: Value) -> Value {
        let mut spec = json!({"containers": [{"name": "app", "image": "nginx"}]});
        for (k, v) in spec_extra.as_object().into_iter().flatten() {
            spec[k] = v.clone();
        }
        json!({"metadata": {"generateName": "web-", "annotations": annotations}, "spec": spec})
    }

    fn apply(object: &Value, r: &Reviewed) -> Value {
        let b64 = r.response["response"]["patch"].as_str().expect("a patch");
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(b64)
            .expect("base64");
        let p: json_patch::Patch = serde_json::from_slice(&bytes).expect("a JSONPatch");
        let mut out = object.clone();
        json_patch::patch(&mut out, &p).expect("applies");
        out
    }

    /// A pod `inject` wrote with other settings (another image, CloudWatch output, classic)
    /// keeps them: the webhook cannot see inject's flags, and does not take them back to the
    /// install's.
    #[test]
    fn a_pod_injected_with_other_settings_keeps_them() {
        let p = policy(SidecarMode::Native);
        let mut by_cli = p.inject.clone();
        by_cli.image = "hooklog:older".into();
        by_cli.mode = SidecarMode::Classic;
        by_cli.settings.outputs = vec![sidecar_settings::Output::Cloudwatch];
        by_cli.settings.log_group = Some("shop".into());
        let object = pod(
            json!({}),
            json!({"containers": [{"name": "app", "image": "nginx",
                "lifecycle": {"preStop": {"exec": {"command": ["sh", "-c", "sleep 5"]}}}}]}),
        );
        let mut injected = object.clone();
        injected["kind"] = json!("Pod");
        inject::inject(&mut injected, &by_cli).expect("injects");
        injected.as_object_mut().expect("a pod").remove("kind");
        let text = injected.to_string();
        assert!(
            text.contains("hooklog:older") && text.contains("cloudwatch"),
            "{text}"
        );
        let r = review(&review_of(injected, "shop"), Scope::NamespaceEnabled, &p);
        assert_eq!(r.verdict, Verdict::NotSelected("already injected"));
    }

    #[test]
    fn an_enabled_namespace_injects_as_inject_does() {
        let p = policy(SidecarMode::Classic);
        let object = pod(json!({}), json!({}));
        let r = review(
            &review_of(object.clone(), "shop"),
            Scope::NamespaceEnabled,
            &p,
        );
        assert_eq!(r.verdict, Verdict::Injected);
        assert_eq!(r.response["response"]["patchType"], "JSONPatch");
        let mut want = object.clone();
        want["kind"] = json!("Pod");
        inject::inject(&mut want, &p.inject).expect("injects");
        let mut got = apply(&object, &r);
        got["kind"] = json!("Pod");
        assert_eq!(got, want);
    }

    #[test]
    fn with_events_the_sidecar_it_adds_runs_events() {
        let mut p = policy(SidecarMode::Native);
        p.inject.events = true;
        let object = pod(json!({}), json!({}));
        let r = review(
            &review_of(object.clone(), "shop"),
            Scope::NamespaceEnabled,
            &p,
        );
        assert_eq!(r.verdict, Verdict::Injected);
        let got = apply(&object, &r);
        let sidecar = got["spec"]["initContainers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == "hooklog")
            .unwrap();
        assert!(
            sidecar["args"]
                .as_array()
                .unwrap()
                .contains(&json!("--events")),
            "{sidecar:#}"
        );
    }

    #[test]
    fn the_pod_annotation_wins_over_the_namespace() {
        let p = policy(SidecarMode::Classic);
        let off = pod(json!({OPT_IN: "disabled"}), json!({}));
        let r = review(&review_of(off, "shop"), Scope::NamespaceEnabled, &p);
        assert_eq!(r.verdict, Verdict::NotSelected("annotation disabled"));
        assert!(r.response["response"].get("patch").is_none());
        let on = pod(json!({OPT_IN: "enabled"}), json!({}));
        let r = review(&review_of(on, "shop"), Scope::Other, &p);
        assert_eq!(r.verdict, Verdict::Injected);
        let none = pod(json!({}), json!({}));
        let r = review(&review_of(none, "shop"), Scope::Other, &p);
        assert_eq!(r.verdict, Verdict::NotSelected("not opted in"));
    }

    #[test]
    fn skips_say_why() {
        let p = policy(SidecarMode::Classic);
        let on = json!({OPT_IN: "enabled"});
        for (object, ns, why) in [
            (
                pod(on.clone(), json!({})),
                "kube-system",
                "system namespace",
            ),
            (pod(on.clone(), json!({})), "hooklog", "own namespace"),
            (
                pod(on.clone(), json!({"hostNetwork": true})),
                "shop",
                "hostNetwork",
            ),
            (
                pod(on.clone(), json!({"restartPolicy": "Never"})),
                "shop",
                "restartPolicy Never",
            ),
            (pod(json!({OPT_IN: "yes"}), json!({})), "shop", "neither"),
        ] {
            let r = review(&review_of(object, ns), Scope::Other, &p);
            let Verdict::Skipped(reason) = &r.verdict else {
                panic!("{why}: {:?}", r.verdict)
            };
            assert!(reason.contains(why), "{reason}");
            let w = r.response["response"]["warnings"][0]
                .as_str()
                .expect("a warning");
            assert!(w.starts_with("InjectionSkipped: "), "{w}");
            assert!(r.response["response"].get("patch").is_none());
        }
    }

    #[test]
    fn a_native_sidecar_may_go_into_a_jobs_pod() {
        let p = policy(SidecarMode::Native);
        let mut object = pod(
            json!({OPT_IN: "enabled"}),
            json!({"restartPolicy": "Never"}),
        );
        object["metadata"]["ownerReferences"] = json!([{"kind": "Job", "name": "batch", "controller": true, "apiVersion": "batch/v1", "uid": "x"}]);
        let r = review(&review_of(object.clone(), "shop"), Scope::Other, &p);
        assert_eq!(r.verdict, Verdict::Injected);
        let got = apply(&object, &r);
        assert_eq!(got["spec"]["initContainers"][1]["restartPolicy"], "Always");
        let c = policy(SidecarMode::Classic);
        let r = review(&review_of(object, "shop"), Scope::Other, &c);
        assert!(matches!(&r.verdict, Verdict::Skipped(w) if w.contains("Job")));
    }

    #[test]
    fn a_second_review_of_an_injected_pod_changes_nothing() {
        let p = policy(SidecarMode::Classic);
        let object = pod(json!({}), json!({}));
        let r = review(
            &review_of(object.clone(), "shop"),
            Scope::NamespaceEnabled,
            &p,
        );
        let injected = apply(&object, &r);
        let again = review(&review_of(injected, "shop"), Scope::NamespaceEnabled, &p);
        assert_eq!(again.verdict, Verdict::NotSelected("already injected"));
        assert!(again.response["response"].get("patch").is_none());
    }

    /// The adoption rule inject follows: Windows pods are skipped with a warning, a reinvoked
    /// review wires a container added since, and one with nothing new is not logged at INFO.
    #[test]
    fn windows_pods_are_skipped_and_a_reinvocation_wires_what_was_added() {
        let p = policy(SidecarMode::Native);
        let windows = pod(json!({}), json!({"os": {"name": "windows"}}));
        let r = review(&review_of(windows, "shop"), Scope::NamespaceEnabled, &p);
        assert!(
            matches!(&r.verdict, Verdict::Skipped(w) if w.contains("Windows")),
            "{:?}",
            r.verdict
        );
        let object = pod(
            json!({}),
            json!({"containers": [{"name": "app", "image": "nginx", "lifecycle": {"preStop": {"exec": {"command": ["sh", "-c", "sleep 1; drain"]}}}}]}),
        );
        let r = review(
            &review_of(object.clone(), "shop"),
            Scope::NamespaceEnabled,
            &p,
        );
        let mut injected = apply(&object, &r);
        injected["spec"]["containers"]
            .as_array_mut()
            .expect("containers")
            .push(json!({"name": "late", "image": "x", "lifecycle": {"preStop": {"exec": {"command": ["/drain"]}}}}));
        let again = review(
            &review_of(injected.clone(), "shop"),
            Scope::NamespaceEnabled,
            &p,
        );
        assert_eq!(again.verdict, Verdict::Injected);
        let wired = apply(&injected, &again);
        let mut want = injected.clone();
        want["kind"] = json!("Pod");
        inject::inject(&mut want, &p.inject).expect("rewires");
        let mut got = wired.clone();
        got["kind"] = json!("Pod");
        assert_eq!(got, want);
        let done = review(&review_of(wired, "shop"), Scope::NamespaceEnabled, &p);
        assert_eq!(done.verdict, Verdict::NotSelected("already injected"));
        assert!(done.response["response"].get("warnings").is_none());
    }

    #[test]
    fn an_annotation_on_the_deployment_is_reported() {
        let p = policy(SidecarMode::Classic);
        let deploy = json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "annotations": {OPT_IN: "enabled"}},
            "spec": {"template": {"metadata": {}, "spec": {"containers": [{"name": "app"}]}}}
        });
        let mut body: Value = serde_json::from_slice(&review_of(deploy, "shop")).expect("json");
        body["request"]["kind"] = json!({"group": "apps", "version": "v1", "kind": "Deployment"});
        let r = review(body.to_string().as_bytes(), Scope::Other, &p);
        let w = r.response["response"]["warnings"][0]
            .as_str()
            .expect("a warning");
        assert!(w.starts_with("InjectionSkipped: "), "{w}");
        assert!(w.contains("spec.template.metadata.annotations"), "{w}");
        assert!(r.response["response"].get("patch").is_none());
    }

    #[test]
    fn bad_input_is_allowed_with_a_warning() {
        let p = policy(SidecarMode::Classic);
        for body in [
            &b"{"[..],
            b"[]",
            b"{\"kind\":\"AdmissionReview\",\"request\":{}}",
        ] {
            let r = review(body, Scope::Other, &p);
            assert!(matches!(r.verdict, Verdict::Invalid(_)), "{:?}", r.verdict);
            assert_eq!(r.response["response"]["allowed"], true);
            assert!(r.response["response"]["warnings"][0].is_string());
        }
        let cut = br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"ab-12","kind":"#;
        assert_eq!(uid_in_prefix(cut).as_deref(), Some("ab-12"));
        assert_eq!(
            review(cut, Scope::Other, &p).response["response"]["uid"],
            "ab-12"
        );
    }

    /// hooklog's sidecar in a pod.
    fn sidecar_of(pod: &Value) -> Value {
        ["initContainers", "containers"]
            .iter()
            .flat_map(|k| pod["spec"][*k].as_array().cloned().unwrap_or_default())
            .find(|c| c["name"] == "hooklog")
            .expect("a sidecar")
    }

    /// What the webhook makes the sidecar of a plain pod with `annotations` in namespace `shop`.
    fn webhook_sidecar(p: &Policy, annotations: Value) -> Value {
        let object = pod(annotations, json!({}));
        let r = review(
            &review_of(object.clone(), "shop"),
            Scope::NamespaceEnabled,
            p,
        );
        assert_eq!(r.verdict, Verdict::Injected, "{:?}", r.response);
        sidecar_of(&apply(&object, &r))
    }

    /// The issue's "done when": an annotation (on the pod, or on its namespace) and an install
    /// flag (the chart's value) each turn on CloudWatch, EMF, resources and env for the sidecar,
    /// and the webhook writes the sidecar `inject` writes.
    #[test]
    fn annotations_and_flags_configure_the_sidecar_alike() {
        let settings = json!({
            "hooklog.dev/output": "cloudwatch",
            "hooklog.dev/log-group": "/eks/shop/hooklog",
            "hooklog.dev/emf": "true",
            "hooklog.dev/cpu-request": "50m",
            "hooklog.dev/memory-limit": "128Mi",
            "hooklog.dev/env": "AWS_REGION=eu-west-1",
        });
        let plain = policy(SidecarMode::Native);
        let by_pod = webhook_sidecar(&plain, settings.clone());
        let by_namespace = {
            let p = policy(SidecarMode::Native);
            p.namespaces
                .replace([("shop".to_string(), settings.as_object().unwrap().clone())].into());
            webhook_sidecar(&p, json!({}))
        };
        let by_flags = {
            let mut p = policy(SidecarMode::Native);
            p.inject.settings = crate::sidecar_settings::SidecarFlags {
                output: Some("cloudwatch".into()),
                log_group: Some("/eks/shop/hooklog".into()),
                emf: true,
                cpu_request: Some("50m".into()),
                memory_limit: Some("128Mi".into()),
                env: vec!["AWS_REGION=eu-west-1".into()],
                ..Default::default()
            }
            .settings(false)
            .unwrap();
            webhook_sidecar(&p, json!({}))
        };
        let args = by_pod["args"].as_array().unwrap();
        for want in [
            "--output",
            "cloudwatch",
            "--log-group=/eks/shop/hooklog",
            "--emf",
        ] {
            assert!(args.contains(&json!(want)), "{want}: {args:?}");
        }
        assert_eq!(
            by_pod["resources"],
            json!({"requests": {"cpu": "50m", "memory": "16Mi"}, "limits": {"memory": "128Mi"}})
        );
        assert!(
            by_pod["env"]
                .as_array()
                .unwrap()
                .contains(&json!({"name": "AWS_REGION", "value": "eu-west-1"}))
        );
        assert_eq!(by_pod, by_namespace);
        assert_eq!(by_pod, by_flags);
        // inject, the annotation on a Deployment's pod template.
        let mut doc = json!({"kind": "Deployment", "metadata": {"name": "web"}, "spec": {"template": {
            "metadata": {"annotations": settings}, "spec": {"containers": [{"name": "app", "image": "nginx"}]}}}});
        inject::inject(&mut doc, &plain.inject).expect("injects");
        assert_eq!(sidecar_of(&doc["spec"]["template"]), by_pod);
        // Without settings: the sidecar of before (run's defaults, k8s/'s resources).
        let default = webhook_sidecar(&plain, json!({}));
        assert!(
            !default["args"]
                .as_array()
                .unwrap()
                .contains(&json!("--output"))
        );
        assert_eq!(
            default["resources"],
            json!({"requests": {"cpu": "10m", "memory": "16Mi"}, "limits": {"memory": "64Mi"}})
        );
    }

    /// Pod over namespace over install, and a bad annotation on either is a skip that names it.
    #[test]
    fn the_pod_wins_over_the_namespace_and_bad_annotations_are_named() {
        let mut p = policy(SidecarMode::Native);
        p.inject.settings.log_group = Some("/install".into());
        p.inject.settings.outputs = vec![crate::sidecar_settings::Output::Cloudwatch];
        p.inject.events = true;
        let ns = json!({"hooklog.dev/log-group": "/ns", "hooklog.dev/events": "false"});
        p.namespaces
            .replace([("shop".to_string(), ns.as_object().unwrap().clone())].into());
        let args = |s: Value| -> Vec<Value> { s["args"].as_array().unwrap().clone() };
        let from_ns = args(webhook_sidecar(&p, json!({})));
        assert!(
            from_ns.contains(&json!("--log-group=/ns")) && !from_ns.contains(&json!("--events"))
        );
        let from_pod = args(webhook_sidecar(
            &p,
            json!({"hooklog.dev/log-group": "/pod", "hooklog.dev/events": "true"}),
        ));
        assert!(
            from_pod.contains(&json!("--log-group=/pod")) && from_pod.contains(&json!("--events"))
        );
        // An unknown one is a warning on an injected pod.
        let typo = pod(json!({"hooklog.dev/outptu": "stdout"}), json!({}));
        let r = review(&review_of(typo, "shop"), Scope::NamespaceEnabled, &p);
        assert_eq!(r.verdict, Verdict::Injected);
        let warning = r.response["response"]["warnings"][0].as_str().unwrap();
        assert!(warning.contains("hooklog.dev/output?"), "{warning}");
        for (annotations, ns, named) in [
            (
                json!({"hooklog.dev/cpu-request": "ten"}),
                json!({}),
                "hooklog.dev/cpu-request",
            ),
            (
                json!({"hooklog.dev/memory-request": "1Gi"}),
                json!({}),
                "above the memory limit",
            ),
            (
                json!({}),
                json!({"hooklog.dev/output": "kafka"}),
                "namespace shop: annotation hooklog.dev/output",
            ),
        ] {
            p.namespaces
                .replace([("shop".to_string(), ns.as_object().unwrap().clone())].into());
            let r = review(
                &review_of(pod(annotations, json!({})), "shop"),
                Scope::NamespaceEnabled,
                &p,
            );
            assert!(matches!(r.verdict, Verdict::Skipped(_)), "{:?}", r.verdict);
            let warning = r.response["response"]["warnings"][0].as_str().unwrap();
            assert!(warning.contains(named), "{warning}");
            assert!(r.response["response"].get("patch").is_none());
        }
    }

    #[test]
    fn long_warnings_are_clipped_on_a_char_boundary() {
        let s = clip("é".repeat(300));
        assert!(s.len() <= MAX_WARNING && s.ends_with("..."));
    }
}
