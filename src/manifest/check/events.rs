//! (the control plane) A sidecar that runs `--events` but whose service account these manifests do not show may
//! create events, or that has no token to ask with. A static check sees only the manifests it
//! is given: RBAC applied to the cluster apart from them is invisible to it, so this is a
//! warning that says so, never an error.

use std::collections::BTreeSet;

use serde_json::Value;

use super::{Pod, Rule, Severity, Sink, Source};
use crate::manifest::podspec;

pub const EVENTS_RBAC: Rule = Rule {
    id: "sidecar-events-rbac-unknown",
    severity: Severity::Warning,
    description: "The hooklog sidecar runs with `--events`, but the manifests checked do not grant the pod's service account `create` on events.k8s.io events in its namespace, or the pod mounts no service account token: its Events would be refused (counted in the summary and warned once, the hooks unharmed).",
    remediation: "Apply k8s/events/rbac.yaml in the pod's namespace for its service account and keep its token mounted; `check` sees only the manifests it is given, so RBAC applied apart from them needs a `hooklog.dev/ignore-check.sidecar-events-rbac-unknown` annotation.",
};

/// Where the kubelet mounts a pod's service account token.
const TOKEN_MOUNT: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// The service accounts the manifests grant `create` on events to: `(namespace, name)`, a
/// namespace of `None` for bindings written without one (applied with `kubectl -n`), a name of
/// `*` for a group of every service account (`system:serviceaccounts[:NS]`).
#[derive(Debug, Default)]
pub struct Grants(BTreeSet<(Option<String>, String)>);

impl Grants {
    fn allows(&self, namespace: Option<&str>, account: &str) -> bool {
        self.0.iter().any(|(ns, name)| {
            let ns_ok = match (ns.as_deref(), namespace) {
                (Some(a), Some(b)) => a == b,
                // One side written without a namespace: applied with `-n`, it may be the same.
                _ => true,
            };
            ns_ok && (name == account || name == "*")
        })
    }
}

/// True when a rule grants `create` on events.k8s.io `events`.
fn rule_creates_events(rule: &Value) -> bool {
    let has = |key: &str, want: &str| {
        rule[key]
            .as_array()
            .is_some_and(|l| l.iter().any(|v| v == want || v == "*"))
    };
    has("apiGroups", "events.k8s.io") && has("resources", "events") && has("verbs", "create")
}

/// The objects of one document that [`grants_of`] reads (Roles, ClusterRoles and their
/// bindings), added to `out`: `check` reads its input one document at a time and keeps only
/// these, which are few and small.
pub fn rbac_objects(doc: &Value, out: &mut Vec<Value>) {
    for (_, o) in podspec::objects(doc) {
        if matches!(
            o["kind"].as_str(),
            Some("Role" | "ClusterRole" | "RoleBinding" | "ClusterRoleBinding")
        ) {
            out.push(o.clone());
        }
    }
}

/// [`grants_of`] every document of `sources`.
pub fn grants(sources: &[Source]) -> Grants {
    let mut objects = Vec::new();
    for d in sources.iter().flat_map(|s| &s.documents) {
        rbac_objects(&d.value, &mut objects);
    }
    grants_of(&objects)
}

/// Every Role and ClusterRole of `objects` that grants creating events, and the bindings to
/// them.
pub fn grants_of(objects: &[Value]) -> Grants {
    let ns_of = |o: &Value| o["metadata"]["namespace"].as_str().map(str::to_string);
    let mut roles: BTreeSet<(&str, Option<String>, String)> = BTreeSet::new();
    for o in objects {
        let kind = o["kind"].as_str().unwrap_or_default();
        if (kind == "Role" || kind == "ClusterRole")
            && o["rules"]
                .as_array()
                .is_some_and(|r| r.iter().any(rule_creates_events))
            && let Some(name) = o["metadata"]["name"].as_str()
        {
            let ns = if kind == "Role" { ns_of(o) } else { None };
            roles.insert((kind, ns, name.to_string()));
        }
    }
    let mut out = Grants::default();
    for o in objects {
        let kind = o["kind"].as_str().unwrap_or_default();
        if kind != "RoleBinding" && kind != "ClusterRoleBinding" {
            continue;
        }
        let binding_ns = if kind == "RoleBinding" {
            ns_of(o)
        } else {
            None
        };
        let ref_kind = o["roleRef"]["kind"].as_str().unwrap_or_default();
        let ref_name = o["roleRef"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let granted = roles.iter().any(|(k, ns, n)| {
            *k == ref_kind
                && *n == ref_name
                && (*k == "ClusterRole"
                    || ns.is_none()
                    || binding_ns.is_none()
                    || *ns == binding_ns)
        });
        if !granted {
            continue;
        }
        for s in o["subjects"].as_array().into_iter().flatten() {
            match s["kind"].as_str() {
                Some("ServiceAccount") => {
                    let ns = s["namespace"]
                        .as_str()
                        .map(str::to_string)
                        .or(binding_ns.clone());
                    if let Some(name) = s["name"].as_str() {
                        out.0.insert((ns, name.to_string()));
                    }
                }
                Some("Group") => match s["name"].as_str() {
                    Some("system:serviceaccounts") => {
                        out.0.insert((None, "*".into()));
                    }
                    Some(g) => {
                        if let Some(ns) = g.strip_prefix("system:serviceaccounts:") {
                            out.0.insert((Some(ns.to_string()), "*".into()));
                        }
                    }
                    None => {}
                },
                _ => {}
            }
        }
    }
    out
}

pub fn check_pod(pod: &Pod, grants: &Grants, sink: &mut Sink) {
    let Some(sidecar) = &pod.sidecar else {
        return;
    };
    if !sidecar.args.events {
        return;
    }
    let c = &sidecar.container;
    let account = pod.spec["serviceAccountName"]
        .as_str()
        .or(pod.spec["serviceAccount"].as_str())
        .unwrap_or("default");
    let mount_dir = sidecar
        .args
        .serviceaccount_dir
        .to_string_lossy()
        .to_string();
    let own_mount = c.value["volumeMounts"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|m| m["mountPath"].as_str() == Some(mount_dir.as_str()));
    let no_token = pod.spec["automountServiceAccountToken"] == false && !own_mount;
    if no_token {
        sink.add(
            &EVENTS_RBAC,
            Some(&c.name),
            &format!("{}.automountServiceAccountToken", pod.spec_path),
            format!(
                "{} runs --events, but the pod mounts no service account token (automountServiceAccountToken: false) at {}: no Event can be posted",
                c.name,
                if mount_dir.is_empty() { TOKEN_MOUNT } else { &mount_dir }
            ),
            "mount the service account token (automountServiceAccountToken: true, or a projected token volume at --serviceaccount-dir)",
        );
        return;
    }
    let namespace = pod.object.namespace.as_deref();
    if !grants.allows(namespace, account) {
        sink.add(
            &EVENTS_RBAC,
            Some(&c.name),
            &format!("{}.args", c.path),
            format!(
                "{} runs --events, but no Role in these manifests grants service account {account}{} create on events.k8s.io events: if the cluster has none, every Event is refused (a 403; check cannot see RBAC applied apart from these files)",
                c.name,
                namespace.map(|n| format!(" (namespace {n})")).unwrap_or_default()
            ),
            format!(
                "kubectl apply -n {} -f k8s/events/rbac.yaml (for service account {account})",
                namespace.unwrap_or("NAMESPACE")
            ),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grants_of(yaml: &str) -> Grants {
        let source = crate::manifest::load::parse("rbac.yaml", yaml.to_string()).expect("parses");
        grants(&[source])
    }

    const ROLE: &str = "kind: Role\nmetadata: {name: ev, namespace: shop}\nrules: [{apiGroups: [events.k8s.io], resources: [events], verbs: [create, patch]}]\n";

    #[test]
    fn the_shipped_role_grants_its_subject_in_its_namespace_only() {
        let g = grants_of(&format!(
            "{ROLE}---\nkind: RoleBinding\nmetadata: {{name: ev, namespace: shop}}\nroleRef: {{kind: Role, name: ev}}\nsubjects: [{{kind: ServiceAccount, name: checkout}}]\n"
        ));
        assert!(g.allows(Some("shop"), "checkout"));
        assert!(!g.allows(Some("shop"), "default"));
        assert!(!g.allows(Some("other"), "checkout"));
        // Without a namespace on either side (applied with -n): it may be the same.
        assert!(g.allows(None, "checkout"));
    }

    #[test]
    fn what_does_not_grant_creating_events_k8s_io_events_grants_nothing() {
        for rules in [
            // Core events: the sidecar posts to events.k8s.io.
            "[{apiGroups: [''], resources: [events], verbs: [create, patch]}]",
            "[{apiGroups: [events.k8s.io], resources: [events], verbs: [patch, get]}]",
            "[{apiGroups: [events.k8s.io], resources: [pods], verbs: [create]}]",
        ] {
            let g = grants_of(&format!(
                "kind: Role\nmetadata: {{name: ev, namespace: shop}}\nrules: {rules}\n---\nkind: RoleBinding\nmetadata: {{name: ev, namespace: shop}}\nroleRef: {{kind: Role, name: ev}}\nsubjects: [{{kind: ServiceAccount, name: default}}]\n"
            ));
            assert!(!g.allows(Some("shop"), "default"), "{rules}");
        }
        // A binding to a role of that name in another namespace.
        let g = grants_of(&format!(
            "{ROLE}---\nkind: RoleBinding\nmetadata: {{name: ev, namespace: other}}\nroleRef: {{kind: Role, name: ev}}\nsubjects: [{{kind: ServiceAccount, name: default}}]\n"
        ));
        assert!(!g.allows(Some("other"), "default"));
    }

    #[test]
    fn wildcards_cluster_roles_and_groups_grant() {
        let cluster = "kind: ClusterRole\nmetadata: {name: ev}\nrules: [{apiGroups: ['*'], resources: ['*'], verbs: ['*']}]\n";
        let g = grants_of(&format!(
            "{cluster}---\nkind: RoleBinding\nmetadata: {{name: ev, namespace: shop}}\nroleRef: {{kind: ClusterRole, name: ev}}\nsubjects: [{{kind: Group, name: 'system:serviceaccounts:shop'}}]\n"
        ));
        assert!(g.allows(Some("shop"), "anyone"));
        assert!(!g.allows(Some("other"), "anyone"));
        let g = grants_of(&format!(
            "{cluster}---\nkind: ClusterRoleBinding\nmetadata: {{name: ev}}\nroleRef: {{kind: ClusterRole, name: ev}}\nsubjects: [{{kind: ServiceAccount, name: hooklog, namespace: shop}}]\n"
        ));
        assert!(g.allows(Some("shop"), "hooklog"));
        assert!(!g.allows(Some("other"), "hooklog"));
    }
}
