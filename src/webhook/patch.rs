//! (the control plane) The JSONPatch (RFC 6902) from a pod to the pod `inject` made of it: `add`, `remove` and
//! `replace` only, down to the changed mapping keys; a list whose length changed is replaced
//! whole (inject puts its init containers first, so indexes move). Small on purpose: it replaced
//! the json-patch crate, whose diff cost more of the binary's size budget than these lines.

use serde_json::{Map, Value, json};

/// The operations that turn `from` into `to`.
pub fn diff(from: &Value, to: &Value) -> Vec<Value> {
    let mut ops = Vec::new();
    walk(from, to, &mut String::new(), &mut ops);
    ops
}

fn walk(from: &Value, to: &Value, path: &mut String, ops: &mut Vec<Value>) {
    if from == to {
        return;
    }
    match (from, to) {
        (Value::Object(a), Value::Object(b)) => objects(a, b, path, ops),
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                let len = path.len();
                path.push('/');
                path.push_str(&i.to_string());
                walk(x, y, path, ops);
                path.truncate(len);
            }
        }
        _ => ops.push(json!({"op": "replace", "path": path.as_str(), "value": to})),
    }
}

fn objects(
    a: &Map<String, Value>,
    b: &Map<String, Value>,
    path: &mut String,
    ops: &mut Vec<Value>,
) {
    for (k, x) in a {
        let len = path.len();
        push_key(path, k);
        match b.get(k) {
            None => ops.push(json!({"op": "remove", "path": path.as_str()})),
            Some(y) => walk(x, y, path, ops),
        }
        path.truncate(len);
    }
    for (k, y) in b.iter().filter(|(k, _)| !a.contains_key(*k)) {
        let len = path.len();
        push_key(path, k);
        ops.push(json!({"op": "add", "path": path.as_str(), "value": y}));
        path.truncate(len);
    }
}

/// `/key`, escaped as RFC 6901 says (`~` is `~0`, `/` is `~1`: `hooklog.dev~1injected`).
fn push_key(path: &mut String, key: &str) {
    path.push('/');
    path.push_str(&key.replace('~', "~0").replace('/', "~1"));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(from: Value, to: Value) -> Vec<Value> {
        let ops = diff(&from, &to);
        let patch: json_patch::Patch =
            serde_json::from_value(Value::Array(ops.clone())).expect("a JSONPatch");
        let mut got = from.clone();
        json_patch::patch(&mut got, &patch).expect("applies");
        assert_eq!(got, to);
        ops
    }

    #[test]
    fn adds_removes_and_replaces_down_to_the_changed_keys() {
        let ops = check(
            json!({"metadata": {"annotations": {"a": "1"}}, "spec": {"x": 1, "gone": true}}),
            json!({"metadata": {"annotations": {"a": "1", "hooklog.dev/injected": "{}"}}, "spec": {"x": 2}}),
        );
        for want in [
            json!({"op": "add", "path": "/metadata/annotations/hooklog.dev~1injected", "value": "{}"}),
            json!({"op": "replace", "path": "/spec/x", "value": 2}),
            json!({"op": "remove", "path": "/spec/gone"}),
        ] {
            assert!(ops.contains(&want), "{want} not in {ops:?}");
        }
        assert_eq!(ops.len(), 3);
    }

    #[test]
    fn lists_change_in_place_or_whole() {
        check(
            json!({"c": [{"n": 1}, {"n": 2}]}),
            json!({"c": [{"n": 1}, {"n": 3, "m": [1]}]}),
        );
        let ops = check(json!({"c": [1, 2]}), json!({"c": [0, 1, 2]}));
        assert_eq!(
            ops,
            [json!({"op": "replace", "path": "/c", "value": [0, 1, 2]})]
        );
        check(json!({"a~b": null}), json!({"a~b": {"x": []}}));
        check(json!([1]), json!({"a": 1}));
        assert!(diff(&json!({"a": [1]}), &json!({"a": [1]})).is_empty());
    }

    /// Small JSON with keys that need escaping and lists of every length, for `diff` alone.
    fn value() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            (0i64..3).prop_map(|n| json!(n)),
            prop::sample::select(vec!["", "a", "~", "/"]).prop_map(|s| json!(s)),
        ];
        leaf.prop_recursive(4, 32, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::btree_map(
                    prop::sample::select(vec!["a", "b", "a/b", "~0", "~1", "", "x~y/z"]),
                    inner,
                    0..4
                )
                .prop_map(|m| Value::Object(
                    m.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
                )),
            ]
        })
    }

    /// Any two documents: the json-patch crate, an RFC 6902 implementation of its own, applies
    /// the patch to the first and gets the second.
    #[test]
    fn the_patch_between_any_two_documents_applies() {
        use proptest::prelude::*;
        // Every case applies its patch: the share is 1 by construction, stated anyway.
        crate::testkit::property(
            file!(),
            "the_patch_between_any_two_documents_applies",
            512,
            1.0,
            (value(), value(), any::<bool>()),
            |(a, b, nest), reach| {
                // Half the cases: the second inside the first, so most of the tree is shared.
                let b = if nest {
                    json!({"keep": a.clone(), "new": b})
                } else {
                    b
                };
                let a = if nest {
                    json!({"keep": a, "old": 1})
                } else {
                    a
                };
                let ops = diff(&a, &b);
                let patch: json_patch::Patch = serde_json::from_value(Value::Array(ops))
                    .map_err(|e| TestCaseError::fail(format!("not a JSONPatch: {e}")))?;
                let mut got = a.clone();
                json_patch::patch(&mut got, &patch)
                    .map_err(|e| TestCaseError::fail(format!("does not apply: {e}")))?;
                prop_assert_eq!(got, b);
                reach.reached();
                Ok(())
            },
        );
    }

    /// A pod in the shapes real manifests have, and the pod inject makes of it: the webhook's
    /// patch, applied by the json-patch crate, gives inject's pod exactly (escaped annotation
    /// keys, init containers put first, lists that grew).
    #[test]
    fn the_patch_of_a_random_pod_gives_inject_s_pod() {
        use crate::manifest::budget::SidecarMode;
        use crate::manifest::inject;
        use proptest::prelude::*;
        let strategy = (
            crate::testkit::metadata(),
            crate::testkit::pod_spec(),
            any::<bool>(),
        );
        // Inject leaves a pod as it was when its grace period is too short for its hooks (or 0):
        // about a fifth of the cases (measured: 415 of 512 change).
        crate::testkit::property(
            file!(),
            "the_patch_of_a_random_pod_gives_inject_s_pod",
            512,
            0.6,
            strategy,
            |(metadata, spec, native), reach| {
                let pod =
                    json!({"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec});
                let opts = inject::Options {
                    image: "registry.example.com/hooklog:0.1.0".into(),
                    mode: if native {
                        SidecarMode::Native
                    } else {
                        SidecarMode::Classic
                    },
                    prestop_sleep: vec![("web".into(), "5s".into())],
                    events: false,
                    settings: Default::default(),
                };
                let mut injected = pod.clone();
                if inject::inject(&mut injected, &opts).is_err() || injected == pod {
                    return Ok(());
                }
                let ops = diff(&pod, &injected);
                let patch: json_patch::Patch = serde_json::from_value(Value::Array(ops))
                    .map_err(|e| TestCaseError::fail(format!("not a JSONPatch: {e}")))?;
                let mut got = pod.clone();
                json_patch::patch(&mut got, &patch)
                    .map_err(|e| TestCaseError::fail(format!("does not apply: {e}")))?;
                prop_assert_eq!(got, injected);
                reach.reached();
                Ok(())
            },
        );
    }
}
