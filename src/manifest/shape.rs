//! (the control plane) The fields of a pod template that inject fills, in the shape Kubernetes
//! gives them: one of another shape (a mapping for `volumes`, a string for `containers`, as
//! partial "assert" files of test suites have) is refused by inject, naming it, never replaced
//! (issue 39). A null, or no field, is filled, and uninject gives it back.

use serde_json::Value;

use super::podspec::TemplateRef;

/// A shape Kubernetes gives a field.
#[derive(Clone, Copy)]
enum Shape {
    List,
    Mapping,
}

/// The pod spec's fields inject fills, with their shapes.
const SPEC_FIELDS: &[(&str, Shape)] = &[
    ("initContainers", Shape::List),
    ("containers", Shape::List),
    ("volumes", Shape::List),
];

/// A container's fields inject fills or wraps (its mount, its preStop exec command).
const CONTAINER_FIELDS: &[(&str, Shape)] = &[
    ("volumeMounts", Shape::List),
    ("lifecycle", Shape::Mapping),
    ("lifecycle/preStop", Shape::Mapping),
    ("lifecycle/preStop/exec", Shape::Mapping),
    ("lifecycle/preStop/exec/command", Shape::List),
];

/// The first field of template `t` in `doc` that inject would fill and that holds another
/// shape: its JSON pointer and why it is refused.
pub fn misfit(doc: &Value, t: &TemplateRef) -> Option<(String, String)> {
    let mut fields = vec![
        (t.metadata_pointer.clone(), Shape::Mapping),
        (
            format!("{}/annotations", t.metadata_pointer),
            Shape::Mapping,
        ),
    ];
    fields.extend(
        SPEC_FIELDS
            .iter()
            .map(|(f, shape)| (format!("{}/{f}", t.spec_pointer), *shape)),
    );
    for list in ["initContainers", "containers"] {
        let at = format!("{}/{list}", t.spec_pointer);
        let Some(Value::Array(items)) = doc.pointer(&at) else {
            continue;
        };
        for i in 0..items.len() {
            fields.extend(
                CONTAINER_FIELDS
                    .iter()
                    .map(|(f, shape)| (format!("{at}/{i}/{f}"), *shape)),
            );
        }
    }
    fields.into_iter().find_map(|(pointer, shape)| {
        let found = doc.pointer(&pointer)?;
        let fits = match shape {
            Shape::List => found.is_array() || found.is_null(),
            Shape::Mapping => found.is_object() || found.is_null(),
        };
        if fits {
            return None;
        }
        let want = match shape {
            Shape::List => "a list",
            Shape::Mapping => "a mapping",
        };
        let why = format!(
            "{} is {} where Kubernetes wants {want}, and inject would replace it: left to you (correct it, or leave this file out)",
            field_path(&pointer),
            kind_of(found)
        );
        Some((pointer, why))
    })
}

/// `/spec/template/spec/volumes` as `spec.template.spec.volumes`, `/x/0` as `x[0]`.
fn field_path(pointer: &str) -> String {
    let mut out = String::new();
    for token in pointer.split('/').skip(1) {
        let token = token.replace("~1", "/").replace("~0", "~");
        if token.parse::<usize>().is_ok() {
            out.push_str(&format!("[{token}]"));
        } else {
            if !out.is_empty() {
                out.push('.');
            }
            out.push_str(&token);
        }
    }
    out
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::podspec;
    use serde_json::json;

    fn misfit_of(doc: &Value) -> Option<(String, String)> {
        let t = podspec::templates(doc)
            .into_iter()
            .next()
            .expect("a template");
        misfit(doc, &t)
    }

    #[test]
    fn every_field_inject_fills_is_refused_in_every_other_shape() {
        let pod = || {
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                   "spec": {"containers": [{"name": "a", "image": "busybox",
                            "lifecycle": {"preStop": {"exec": {"command": ["sleep", "5"]}}}}]}})
        };
        assert_eq!(misfit_of(&pod()), None);
        let wrong: [Value; 5] = [
            json!(true),
            json!(3),
            json!("x"),
            json!([1]),
            json!({"a": 1}),
        ];
        let fields = [
            ("/metadata", Shape::Mapping),
            ("/metadata/annotations", Shape::Mapping),
            ("/spec/initContainers", Shape::List),
            ("/spec/volumes", Shape::List),
            ("/spec/containers/0/volumeMounts", Shape::List),
            ("/spec/containers/0/lifecycle", Shape::Mapping),
            ("/spec/containers/0/lifecycle/preStop", Shape::Mapping),
            ("/spec/containers/0/lifecycle/preStop/exec", Shape::Mapping),
            (
                "/spec/containers/0/lifecycle/preStop/exec/command",
                Shape::List,
            ),
        ];
        for (pointer, shape) in fields {
            let (parent, key) = pointer.rsplit_once('/').unwrap();
            for value in wrong.iter().chain([&Value::Null]) {
                let mut doc = pod();
                doc.pointer_mut(parent).unwrap()[key] = value.clone();
                let fits = value.is_null()
                    || matches!(shape, Shape::List) && value.is_array()
                    || matches!(shape, Shape::Mapping) && value.is_object();
                let got = misfit_of(&doc);
                assert_eq!(got.is_none(), fits, "{pointer} = {value}: {got:?}");
                if let Some((at, why)) = got {
                    assert_eq!(at, pointer);
                    assert!(why.contains(&field_path(pointer)), "{why}");
                }
            }
        }
    }
}
