//! (the control plane) A pod injected before, injected again with other settings (another `--image`, `--sidecar-*`
//! flag or `hooklog.dev/` annotation): what hooklog owns in it (the `hooklog` sidecar, the
//! `hooklog-install` init container) is compared with what inject writes into the pod as it was
//! before inject (uninject's result), and taken from there when it differs. This module holds
//! the pieces: the pod template on its own, the owned parts, and what changed in words; inject
//! runs the step ([`super::inject`]), with uninject passed in (it is above inject).

use serde_json::Value;

use super::budget::SidecarMode;
use super::layout::{INSTALLER, SIDECAR};
use super::podspec::TemplateRef;

/// The mapping that holds a template's `metadata` and `spec` (the Pod itself, or a workload's
/// `spec.template`), as a document of its own, with the template's pointers in it: inject and
/// uninject run on the copy, and a copy of the whole document is not made for each pod (a
/// `kind: List` of thousands). `None` when the pointers do not share it.
pub(super) fn template(doc: &Value, t: &TemplateRef) -> Option<(String, Value, TemplateRef)> {
    let (at, _) = t.metadata_pointer.rsplit_once('/')?;
    let spec = t.spec_pointer.strip_prefix(at)?;
    let metadata = t.metadata_pointer.strip_prefix(at)?;
    let value = doc.pointer(at).filter(|v| v.is_object())?.clone();
    let small = TemplateRef {
        object: t.object.clone(),
        spec_pointer: spec.to_string(),
        metadata_pointer: metadata.to_string(),
        spec_path: t.spec_path.clone(),
    };
    Some((at.to_string(), value, small))
}

/// hooklog's own containers in a pod spec, by name: the installer (an init container) and the
/// sidecar (an init container when native).
fn owned<'a>(spec: &'a Value, name: &str) -> Option<(&'static str, &'a Value)> {
    ["initContainers", "containers"]
        .into_iter()
        .find_map(|key| {
            spec[key]
                .as_array()?
                .iter()
                .find(|c| c["name"] == name)
                .map(|c| (key, c))
        })
}

/// The form of an injected pod's sidecar: native when it is an init container.
pub(super) fn form(spec: &Value) -> Option<SidecarMode> {
    owned(spec, SIDECAR).map(|(key, _)| match key {
        "initContainers" => SidecarMode::Native,
        _ => SidecarMode::Classic,
    })
}

/// Whether an injected pod's sidecar runs `--events` (kept when inject runs again without it):
/// in its `args`, or in its `command` before the `--` of a `tail -F` forwarder it took the
/// place of ([`super::migrate`]).
pub(super) fn has_events(spec: &Value) -> bool {
    owned(spec, SIDECAR).is_some_and(|(_, c)| {
        ["args", "command"].iter().any(|key| {
            c[key]
                .as_array()
                .into_iter()
                .flatten()
                .take_while(|a| *a != "--")
                .any(|a| a == "--events")
        })
    })
}

/// What differs in hooklog's own containers from `was` to `now`, in words (`image
/// reg/hooklog:0.1.0 -> reg/hooklog:0.2.0, sidecar args, env`); `None` when nothing does.
pub(super) fn change(was: &Value, now: &Value) -> Option<String> {
    let (sidecar_was, sidecar_now) = (owned(was, SIDECAR), owned(now, SIDECAR));
    let (installer_was, installer_now) = (owned(was, INSTALLER), owned(now, INSTALLER));
    if sidecar_was == sidecar_now && installer_was == installer_now {
        return None;
    }
    let field = |c: Option<(&str, &Value)>, key: &str| c.map(|(_, c)| c[key].clone());
    let mut parts = Vec::new();
    let (image_was, image_now) = (field(sidecar_was, "image"), field(sidecar_now, "image"));
    if image_was != image_now {
        let show = |v: Option<Value>| v.and_then(|v| v.as_str().map(str::to_string));
        parts.push(format!(
            "image {} -> {}",
            show(image_was).unwrap_or_else(|| "(none)".into()),
            show(image_now).unwrap_or_else(|| "(none)".into())
        ));
    } else if field(installer_was, "image") != field(installer_now, "image") {
        parts.push("installer image".to_string());
    }
    if let (Some(a), Some(b)) = (form(was), form(now))
        && a != b
    {
        let name = |m| match m {
            SidecarMode::Native => "native",
            SidecarMode::Classic => "classic",
        };
        parts.push(format!("sidecar {} -> {}", name(a), name(b)));
    }
    let mut fields = Vec::new();
    for key in ["command", "args", "env", "resources"] {
        if field(sidecar_was, key) != field(sidecar_now, key) {
            fields.push(key);
        }
    }
    if !fields.is_empty() {
        parts.push(format!("sidecar {}", fields.join(", ")));
    }
    if parts.is_empty() {
        parts.push("hooklog's containers as inject writes them".to_string());
    }
    Some(parts.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec(image: &str, args: Value) -> Value {
        json!({
            "initContainers": [{"name": INSTALLER, "image": image},
                {"name": SIDECAR, "image": image, "restartPolicy": "Always", "args": args}],
            "containers": [{"name": "web"}],
        })
    }

    #[test]
    fn the_change_names_the_image_and_the_settings() {
        let was = spec("h:0.1.0", json!(["run"]));
        assert_eq!(change(&was, &was), None);
        let now = spec("h:0.2.0", json!(["run", "--output", "cloudwatch"]));
        assert_eq!(
            change(&was, &now).as_deref(),
            Some("image h:0.1.0 -> h:0.2.0, sidecar args")
        );
        assert_eq!(form(&was), Some(SidecarMode::Native));
        assert!(!has_events(&was));
        assert!(has_events(&spec("h", json!(["run", "--events"]))));
        let mut migrated = spec("h", json!(null));
        migrated["initContainers"][1]["command"] =
            json!(["hooklog", "run", "--", "tail", "--events"]);
        assert!(!has_events(&migrated));
        migrated["initContainers"][1]["command"][2] = json!("--events");
        assert!(has_events(&migrated));
        let classic = json!({"initContainers": [{"name": INSTALLER, "image": "h:0.1.0"}],
            "containers": [{"name": "web"}, {"name": SIDECAR, "image": "h:0.1.0", "args": ["run"]}]});
        assert_eq!(
            change(&was, &classic).as_deref(),
            Some("sidecar native -> classic")
        );
    }

    #[test]
    fn a_template_is_taken_with_pointers_into_it() {
        let doc = json!({"items": [{"spec": {"template": {"metadata": {}, "spec": {"a": 1}}}}]});
        let t = TemplateRef {
            object: crate::manifest::podspec::ObjectRef {
                kind: "Deployment".into(),
                namespace: None,
                name: "d".into(),
            },
            spec_pointer: "/items/0/spec/template/spec".into(),
            metadata_pointer: "/items/0/spec/template/metadata".into(),
            spec_path: "items[0].spec.template.spec".into(),
        };
        let (at, value, small) = template(&doc, &t).unwrap();
        assert_eq!(at, "/items/0/spec/template");
        assert_eq!(value.pointer(&small.spec_pointer), Some(&json!({"a": 1})));
        assert_eq!(small.metadata_pointer, "/metadata");
    }
}
