//! (the control plane) Finding pod templates in Kubernetes objects (Pod, Deployment, StatefulSet, DaemonSet,
//! ReplicaSet, Job, CronJob, any other kind's standard `spec.template` such as Argo's `Rollout`,
//! and the items of a `List`), with the field paths that name them.

use std::collections::BTreeMap;

use serde_json::Value;

/// Where each kind keeps its pod spec, as a JSON pointer from the object.
const POD_SPEC_POINTERS: [(&str, &str); 8] = [
    ("Pod", "/spec"),
    ("Deployment", "/spec/template/spec"),
    ("StatefulSet", "/spec/template/spec"),
    ("DaemonSet", "/spec/template/spec"),
    ("ReplicaSet", "/spec/template/spec"),
    ("ReplicationController", "/spec/template/spec"),
    ("Job", "/spec/template/spec"),
    ("CronJob", "/spec/jobTemplate/spec/template/spec"),
];

/// Where every other kind (Argo `Rollout`, OpenKruise `CloneSet`, ...) keeps a pod template:
/// the standard `spec.template`, taken only when its `spec.containers` is a sequence.
const STANDARD_POD_SPEC: &str = "/spec/template/spec";

/// kind, namespace and name of an object.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
pub struct ObjectRef {
    pub kind: String,
    pub namespace: Option<String>,
    pub name: String,
}

impl ObjectRef {
    /// `namespace/name`, or `name` when it has no namespace.
    pub fn qualified_name(&self) -> String {
        match &self.namespace {
            Some(ns) => format!("{ns}/{}", self.name),
            None => self.name.clone(),
        }
    }
}

impl std::fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{} {ns}/{}", self.kind, self.name),
            None => write!(f, "{} {}", self.kind, self.name),
        }
    }
}

/// A pod template inside a document.
#[derive(Debug, Clone)]
pub struct TemplateRef {
    pub object: ObjectRef,
    /// JSON pointer to the pod spec from the document's root.
    pub spec_pointer: String,
    /// JSON pointer to the pod's metadata (the template's, or the Pod's own).
    pub metadata_pointer: String,
    /// The pod spec's field path, `spec.template.spec` (`items[2].spec.template.spec` in a List).
    pub spec_path: String,
}

/// Every object in a document: itself, or a List's items (recursively), with their pointers.
pub fn objects(doc: &Value) -> Vec<(String, &Value)> {
    let mut out = Vec::new();
    collect_objects(doc, String::new(), &mut out);
    out
}

fn collect_objects<'a>(v: &'a Value, pointer: String, out: &mut Vec<(String, &'a Value)>) {
    // A top-level sequence (a kustomize JSON6902 patch) or a scalar is no object.
    if !v.is_object() {
        return;
    }
    let kind = v["kind"].as_str().unwrap_or_default();
    if let (true, Some(items)) = (kind.ends_with("List"), v["items"].as_array()) {
        for (i, item) in items.iter().enumerate() {
            collect_objects(item, format!("{pointer}/items/{i}"), out);
        }
    } else {
        out.push((pointer, v));
    }
}

/// The pod templates of a document; other kinds pass silently.
pub fn templates(doc: &Value) -> Vec<TemplateRef> {
    let mut out = Vec::new();
    for (pointer, obj) in objects(doc) {
        let kind = obj["kind"].as_str().unwrap_or_default();
        let spec = match POD_SPEC_POINTERS.iter().find(|(k, _)| *k == kind) {
            Some((_, spec)) => *spec,
            None if obj
                .pointer(STANDARD_POD_SPEC)
                .is_some_and(|s| s["containers"].is_array()) =>
            {
                STANDARD_POD_SPEC
            }
            None => continue,
        };
        if !obj.pointer(spec).is_some_and(Value::is_object) {
            continue;
        }
        let meta = spec.strip_suffix("/spec").unwrap_or_default();
        out.push(TemplateRef {
            object: ObjectRef {
                kind: kind.to_string(),
                namespace: obj["metadata"]["namespace"].as_str().map(str::to_string),
                name: obj["metadata"]["name"]
                    .as_str()
                    .unwrap_or("(unnamed)")
                    .to_string(),
            },
            spec_pointer: format!("{pointer}{spec}"),
            metadata_pointer: format!("{pointer}{meta}/metadata"),
            spec_path: pointer_to_path(&format!("{pointer}{spec}")),
        });
    }
    out
}

/// `/items/2/spec/template/spec` -> `items[2].spec.template.spec`.
pub fn pointer_to_path(pointer: &str) -> String {
    let mut out = String::new();
    for part in pointer.split('/').skip(1) {
        if part.chars().all(|c| c.is_ascii_digit()) && !part.is_empty() {
            out.push_str(&format!("[{part}]"));
        } else {
            if !out.is_empty() {
                out.push('.');
            }
            out.push_str(part);
        }
    }
    out
}

/// One container of a pod spec.
#[derive(Debug, Clone)]
pub struct Container<'a> {
    pub name: String,
    /// In `initContainers`.
    pub init: bool,
    /// `containers[1]` with the spec's path in front.
    pub path: String,
    pub value: &'a Value,
}

impl Container<'_> {
    /// An init container with `restartPolicy: Always` (Kubernetes 1.29+).
    pub fn native_sidecar(&self) -> bool {
        self.init && self.value["restartPolicy"] == "Always"
    }

    pub fn image(&self) -> &str {
        self.value["image"].as_str().unwrap_or_default()
    }

    /// `command` then `args`, as strings.
    pub fn argv(&self) -> (Vec<String>, Vec<String>) {
        (
            strings(&self.value["command"]),
            strings(&self.value["args"]),
        )
    }

    /// Env vars with a literal `value`.
    pub fn literal_env(&self) -> BTreeMap<String, String> {
        self.value["env"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|e| {
                Some((
                    e["name"].as_str()?.to_string(),
                    e["value"].as_str()?.to_string(),
                ))
            })
            .collect()
    }

    /// Volume mounts: (volume, mountPath, subPath).
    pub fn mounts(&self) -> Vec<Mount> {
        self.value["volumeMounts"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|m| {
                Some(Mount {
                    volume: m["name"].as_str()?.to_string(),
                    path: m["mountPath"].as_str()?.trim_end_matches('/').to_string(),
                    sub_path: m["subPath"].as_str().unwrap_or_default().to_string(),
                })
            })
            .collect()
    }

    /// Where `path` (absolute, in this container) lies on a volume: (volume, path inside it).
    pub fn on_volume(&self, path: &str) -> Option<(String, String)> {
        let mut best: Option<(usize, Mount)> = None;
        for m in self.mounts() {
            let under = path == m.path
                || path
                    .strip_prefix(&m.path)
                    .is_some_and(|r| r.starts_with('/'))
                || m.path.is_empty();
            if under && best.as_ref().is_none_or(|(len, _)| m.path.len() > *len) {
                best = Some((m.path.len(), m));
            }
        }
        let (_, m) = best?;
        let rest = path[m.path.len()..].trim_start_matches('/');
        let inner = [m.sub_path.trim_matches('/'), rest]
            .iter()
            .filter(|s| !s.is_empty())
            .copied()
            .collect::<Vec<_>>()
            .join("/");
        Some((m.volume, inner))
    }
}

/// A volume mount.
#[derive(Debug, Clone)]
pub struct Mount {
    pub volume: String,
    pub path: String,
    pub sub_path: String,
}

/// The init containers, then the containers, of a pod spec.
pub fn containers<'a>(spec: &'a Value, spec_path: &str) -> Vec<Container<'a>> {
    let mut out = Vec::new();
    for (field, init) in [("initContainers", true), ("containers", false)] {
        for (i, c) in spec[field].as_array().into_iter().flatten().enumerate() {
            out.push(Container {
                name: c["name"].as_str().unwrap_or("(unnamed)").to_string(),
                init,
                path: format!("{spec_path}.{field}[{i}]"),
                value: c,
            });
        }
    }
    out
}

/// A sequence of strings (numbers and booleans as written), empty when absent.
pub fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .into_iter()
        .flatten()
        .map(|s| match s {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        })
        .collect()
}

/// `terminationGracePeriodSeconds`, Kubernetes' default 30 when absent.
pub fn termination_grace_seconds(spec: &Value) -> u64 {
    /// The pod spec's default (core/v1 PodSpec).
    const DEFAULT_TERMINATION_GRACE_SECONDS: u64 = 30;
    super::number::json_seconds(&spec["terminationGracePeriodSeconds"])
        .unwrap_or(DEFAULT_TERMINATION_GRACE_SECONDS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn finds_templates_in_every_kind_and_in_lists() {
        let doc = json!({"kind": "List", "items": [
            {"kind": "CronJob", "metadata": {"name": "c", "namespace": "n"},
             "spec": {"jobTemplate": {"spec": {"template": {"spec": {"containers": []}}}}}},
            {"kind": "Service", "metadata": {"name": "s"}, "spec": {}},
            {"kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": []}},
        ]});
        let t = templates(&doc);
        assert_eq!(t.len(), 2);
        assert_eq!(
            t[0].spec_path,
            "items[0].spec.jobTemplate.spec.template.spec"
        );
        assert_eq!(t[0].object.to_string(), "CronJob n/c");
        assert_eq!(t[1].metadata_pointer, "/items/2/metadata");
        assert!(doc.pointer(&t[0].spec_pointer).is_some());
    }

    #[test]
    fn any_kind_with_a_standard_pod_template_and_no_patch_lists() {
        let rollout = json!({"apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout",
            "metadata": {"name": "r"},
            "spec": {"template": {"spec": {"containers": [{"name": "a"}]}}}});
        let t = templates(&rollout);
        assert_eq!(t.len(), 1);
        assert_eq!(t[0].spec_path, "spec.template.spec");
        assert_eq!(t[0].metadata_pointer, "/spec/template/metadata");
        // A template of something else (no containers) is not a pod's.
        let other = json!({"kind": "Thing", "spec": {"template": {"spec": {"steps": []}}}});
        assert!(templates(&other).is_empty());
        // A kustomize JSON6902 patch: a top-level sequence.
        let patch = json!([{"op": "add", "path": "/spec/replicas", "value": 3}]);
        assert!(objects(&patch).is_empty());
        assert!(templates(&patch).is_empty());
    }

    #[test]
    fn paths_on_volumes() {
        let c = json!({"name": "a", "volumeMounts": [
            {"name": "v", "mountPath": "/shared"},
            {"name": "w", "mountPath": "/shared/deep/", "subPath": "x"}]});
        let c = Container {
            name: "a".into(),
            init: false,
            path: String::new(),
            value: &c,
        };
        assert_eq!(
            c.on_volume("/shared/bin/hooklog"),
            Some(("v".into(), "bin/hooklog".into()))
        );
        assert_eq!(
            c.on_volume("/shared/deep/s"),
            Some(("w".into(), "x/s".into()))
        );
        assert_eq!(c.on_volume("/sharedx/s"), None);
    }
}
