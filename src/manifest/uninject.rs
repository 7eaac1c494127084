//! (the control plane) `hooklog uninject`: removes what `hooklog inject` added and nothing else. hooklog's own
//! pieces are recognised by what they are (the `hooklog` and `hooklog-install` containers, the
//! two volumes, the shared mount, the `hooklog hook` prefix of a wrapped command); the
//! annotation supplies only what cannot be seen (keys inject created, commands it rewrote).
//! Edits made after inject are kept, with a warning where they touched what inject owned.

use serde_json::{Map, Value};

use super::inject::{
    self, ANNOTATION, BIN_VOLUME, ContainerRecord, INSTALLER, Outcome, PODINFO_VOLUME, Record,
    SIDECAR, VOLUME, is_own, own_prefix, read_record, report_line,
};
use super::podspec::{self, TemplateRef};

/// Removes what inject added from every pod template of `doc`.
pub fn uninject(doc: &mut Value) -> Result<Vec<String>, inject::InjectError> {
    let mut report = Vec::new();
    for t in podspec::templates(doc) {
        let mut warnings = Vec::new();
        let outcome = uninject_pod(doc, &t, &mut warnings).map_err(|why| inject::InjectError {
            object: t.object.clone(),
            why,
            at: None,
        })?;
        report.push(report_line(
            &t.object.kind,
            &t.object.qualified_name(),
            &outcome,
        ));
        report.extend(warnings.into_iter().map(|w| format!("  warning: {w}")));
    }
    Ok(report)
}

/// Removes hooklog from one pod template, returning its warnings ([`inject::Undo`]).
pub fn undo_pod(doc: &mut Value, t: &TemplateRef) -> Result<Vec<String>, String> {
    let mut warnings = Vec::new();
    uninject_pod(doc, t, &mut warnings)?;
    Ok(warnings)
}

/// Removes hooklog from one pod template, in named steps.
fn uninject_pod(
    doc: &mut Value,
    t: &TemplateRef,
    warnings: &mut Vec<String>,
) -> Result<Outcome, String> {
    let Some(record) = read_record(doc, t)? else {
        return Ok(Outcome::NotInjected);
    };
    let spec = doc.pointer_mut(&t.spec_pointer).ok_or("no pod spec")?;
    super::migrate::restore(spec, record.migrated.as_ref());
    remove_own_containers(spec, warnings);
    if let Some(list) = spec.get_mut("volumes").and_then(Value::as_array_mut) {
        list.retain(|v| {
            v["name"] != VOLUME && v["name"] != BIN_VOLUME && v["name"] != PODINFO_VOLUME
        });
    }
    for key in ["initContainers", "containers"] {
        for c in spec
            .get_mut(key)
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
        {
            unwire(c, &record, warnings);
        }
    }
    let map = spec
        .as_object_mut()
        .ok_or("the pod spec is not a mapping")?;
    for key in ["initContainers", "containers", "volumes"] {
        put_back(map, key, &record.created, &record.replaced);
    }
    let parent = inject::metadata_parent(doc, t).ok_or("no pod metadata")?;
    let pmap = parent.as_object_mut().ok_or("not a mapping")?;
    if let Some(meta) = pmap.get_mut("metadata").and_then(Value::as_object_mut) {
        if let Some(a) = meta.get_mut("annotations").and_then(Value::as_object_mut) {
            a.shift_remove(ANNOTATION);
        }
        put_back(meta, "annotations", &record.created, &record.replaced);
    }
    put_back(pmap, "metadata", &record.created, &record.replaced);
    Ok(Outcome::Uninjected)
}

/// A key inject created or replaced goes back to what it was once it holds nothing: removed,
/// or the value it replaced. One that holds something (a later edit) stays.
fn put_back(
    map: &mut Map<String, Value>,
    key: &str,
    created: &[String],
    replaced: &Map<String, Value>,
) {
    let empty = match map.get(key) {
        Some(Value::Array(a)) => a.is_empty(),
        Some(Value::Object(o)) => o.is_empty(),
        _ => false,
    };
    if empty {
        if let Some(original) = replaced.get(key) {
            map.insert(key.to_string(), original.clone());
        } else if created.iter().any(|c| c == key) {
            map.shift_remove(key);
        }
    }
}

/// Removes the `hooklog` and `hooklog-install` containers, known by their names and by what
/// they run; a container of that name that runs something else now is kept, with a warning.
fn remove_own_containers(spec: &mut Value, warnings: &mut Vec<String>) {
    for key in ["initContainers", "containers"] {
        let Some(list) = spec.get_mut(key).and_then(Value::as_array_mut) else {
            continue;
        };
        list.retain(|c| {
            let name = c["name"].as_str().unwrap_or_default();
            if name != SIDECAR && name != INSTALLER {
                return true;
            }
            let container = podspec::Container {
                name: name.to_string(),
                init: key == "initContainers",
                path: String::new(),
                value: c,
            };
            if is_own(&container) {
                return false;
            }
            warnings.push(format!(
                "container {name:?} no longer runs hooklog (edited after inject): kept"
            ));
            true
        });
    }
}

/// Undoes inject's changes to one container: the prefix of its preStop, the command inject
/// rewrote, the shared mount, and the keys it created.
fn unwire(c: &mut Value, record: &Record, warnings: &mut Vec<String>) {
    let name = c["name"].as_str().unwrap_or_default().to_string();
    let entry = record.containers.get(&name);
    if c.is_object() {
        unwrap_pre_stop(c, &name, entry, record, warnings);
    }
    let Some(map) = c.as_object_mut() else {
        return;
    };
    if let Some(m) = map.get_mut("volumeMounts").and_then(Value::as_array_mut) {
        m.retain(|m| m["name"] != VOLUME && m["name"] != BIN_VOLUME);
    }
    if let Some(e) = entry {
        put_back(map, "volumeMounts", &e.created, &e.replaced);
        put_back(map, "lifecycle", &e.created, &e.replaced);
    }
}

fn unwrap_pre_stop(
    c: &mut Value,
    name: &str,
    entry: Option<&ContainerRecord>,
    record: &Record,
    warnings: &mut Vec<String>,
) {
    let Some(items) = c
        .pointer("/lifecycle/preStop/exec/command")
        .and_then(Value::as_array)
        .cloned()
    else {
        if entry.is_some() {
            warnings.push(format!(
                "{name}: its preStop no longer runs `hooklog hook` (edited after inject): left as it is"
            ));
        }
        return;
    };
    let argv = podspec::strings(&Value::Array(items.clone()));
    let Some((len, wired_as)) = own_prefix(&argv) else {
        if entry.is_some() {
            warnings.push(format!(
                "{name}: its preStop no longer runs `hooklog hook` (edited after inject): left as it is"
            ));
        }
        return;
    };
    // A container renamed since inject is still found by the name its prefix carries.
    let entry = entry.or_else(|| record.containers.get(wired_as));
    let inner = &argv[len..];
    // The binary the prefix runs: where inject put it then (before issue 37, the shared
    // volume's `bin/`), so that a `sleep N` it rewrote is recognised in either layout.
    let bin = &argv[0];
    let added = entry.is_some_and(|e| {
        e.created.iter().any(|k| k == "lifecycle" || k == "preStop")
            || e.replaced.contains_key("lifecycle")
            || e.replaced.contains_key("preStop")
    });
    if added {
        if inner.len() == 3 && inner[0] == *bin && inner[1] == "sleep" {
            if let Some(l) = c.get_mut("lifecycle").and_then(Value::as_object_mut) {
                // Removed, or the null it replaced (`preStop: ~`) put back.
                match entry.and_then(|e| e.replaced.get("preStop")) {
                    Some(was) => l.insert("preStop".into(), was.clone()),
                    None => l.shift_remove("preStop"),
                };
            }
            return;
        }
        warnings.push(format!(
            "{name}: the preStop inject added was edited since: kept, without hooklog's wrapper"
        ));
    }
    let restored = match entry.and_then(|e| e.command.as_ref()) {
        Some(original) => {
            let rewritten: Vec<String> = inject::rewrite(&podspec::strings(original), name)
                .into_iter()
                .map(|a| if a == inject::BIN { bin.clone() } else { a })
                .collect();
            if rewritten == inner {
                original.clone()
            } else {
                warnings.push(format!(
                    "{name}: the hook's command was edited since inject: the edited one is kept (inject had changed `{}`)",
                    podspec::strings(original).join(" ")
                ));
                Value::Array(items[len..].to_vec())
            }
        }
        None => Value::Array(items[len..].to_vec()),
    };
    if let Some(exec) = c
        .pointer_mut("/lifecycle/preStop/exec")
        .and_then(Value::as_object_mut)
    {
        exec.insert("command".into(), restored);
    }
}
