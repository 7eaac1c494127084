//! (the control plane) `hooklog inject`'s migration of the busybox `tail -F` workaround: hooklog's
//! sidecar takes the tailer's place, in the tailer's own container entry, and reads the files it
//! followed (`run --file`) on the same mounts; its keep-alive preStop becomes `hooklog sleep 0`.
//!
//! Only the name and image are replaced (names and image references are written as they read);
//! everything else is added: hooklog's `run` line goes in front of the tailer's own words, which
//! follow `--` and are never run (`hooklog run -- ...` and `hooklog sleep 0 -- ...` ignore
//! them), and the env, mounts, resources and securityContext hooklog needs are added. The
//! splicer takes an insertion out again with exactly its bytes: `uninject` gives back the
//! user's bytes. The tailer's entry as it was is kept in inject's record
//! (`migrated` of [`super::inject`]'s record).

use serde_json::{Map, Value, json};

use super::budget::SidecarMode;
use super::hooks::{self, Handler, IMAGE_BINARY};
use super::layout::{INSTALLER, SIDECAR};
use super::podspec::{Container, strings};
use super::tailer::{self, Tailer};

/// The keys a tailer's container may have for hooklog to take its place: what `run` ignores or
/// keeps as the user set it. Any other (ports, probes, stdin) is left with a note.
const KEPT_KEYS: [&str; 15] = [
    "name",
    "image",
    "imagePullPolicy",
    "command",
    "args",
    "env",
    "envFrom",
    "volumeMounts",
    "resources",
    "securityContext",
    "lifecycle",
    "terminationMessagePath",
    "terminationMessagePolicy",
    "workingDir",
    "restartPolicy",
];

/// A tailer inject migrates.
#[derive(Debug, Clone)]
pub struct Plan {
    pub tailer: Tailer,
    /// It is a native sidecar (an init container with `restartPolicy: Always`): hooklog is one.
    pub native: bool,
}

/// The tailer inject migrates in `containers`, if any, and a note for each it leaves (why).
pub fn plan(containers: &[Container], spec: &Value, notes: &mut Vec<String>) -> Option<Plan> {
    let found = tailer::tailers(containers);
    let mut chosen = None;
    for t in &found {
        let Some(c) = containers.iter().find(|c| c.name == t.name) else {
            continue;
        };
        match blocker(t, c, spec, found.len()) {
            Some(why) => notes.push(format!(
                "{}: a `tail -F` forwarder, left as it is: {why}",
                t.name
            )),
            None => {
                chosen = Some(Plan {
                    tailer: t.clone(),
                    native: c.native_sidecar(),
                });
            }
        }
    }
    chosen
}

/// The tailer's files, for messages.
pub fn files(t: &Tailer) -> String {
    t.files
        .iter()
        .map(|f| f.path.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Why inject leaves tailer `t` (container `c`, one of `count` tailers of pod spec `spec`) as it
/// is, if it does: `check`'s fix says the same.
pub fn blocker(t: &Tailer, c: &Container, spec: &Value, count: usize) -> Option<String> {
    if count > 1 {
        return Some(format!(
            "{count} containers of the pod follow files; inject migrates one (merge them into one `tail -F FILE...`, or give hooklog's sidecar a --file for each by hand)"
        ));
    }
    if let Some(extra) = &t.extra_work {
        return Some(format!("{extra}, which hooklog's sidecar would not do"));
    }
    for f in &t.files {
        let Some(shared) = &f.shared else {
            return Some(format!(
                "{} is on no volume: only the tailer's own filesystem holds it",
                f.path
            ));
        };
        let volume = spec["volumes"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|v| v["name"] == shared.volume.as_str());
        if volume.is_none_or(|v| v.get("emptyDir").is_none()) {
            return Some(format!(
                "{} is on volume {}, which is not an emptyDir: it may hold what earlier pods wrote, which hooklog would read again",
                f.path, shared.volume
            ));
        }
    }
    // Replaced, they must read back as written (a digest's `@` would come back quoted).
    for (key, value) in [("name", c.name.as_str()), ("image", c.image())] {
        if !crate::yaml::emit::plain_safe(value) {
            return Some(format!(
                "its {key} `{value}` is not one inject can replace and give back byte for byte"
            ));
        }
    }
    if c.init && !c.native_sidecar() {
        return Some("an init container".into());
    }
    let map = c.value.as_object()?;
    if let Some(key) = map.keys().find(|k| !KEPT_KEYS.contains(&k.as_str())) {
        return Some(format!(
            "it has `{key}`, which hooklog's sidecar would not keep"
        ));
    }
    let lifecycle = map.get("lifecycle").and_then(Value::as_object);
    // A null hook (`preStop: ~`) is none, as Kubernetes (and hooks::hooks) reads it.
    let hook = |l: &Map<String, Value>, k: &str| l.get(k).is_some_and(|v| !v.is_null());
    if let Some(key) = lifecycle.and_then(|l| l.keys().find(|k| *k != "preStop" && hook(l, k))) {
        return Some(format!("it has a `{key}` hook"));
    }
    if lifecycle.is_some_and(|l| hook(l, "preStop")) {
        match hooks::hooks(c).into_iter().find(|h| h.name == "preStop") {
            Some(h) if t.keep_alive.is_some() && matches!(h.handler, Handler::Exec(_)) => {}
            _ => {
                return Some("its preStop does more than sleep (or is not an exec command)".into());
            }
        }
    }
    None
}

/// Turns the tailer's container into hooklog's sidecar: the one inject just added to `spec` is
/// taken out again and gives what hooklog needs; the original is kept in `migrated` (the
/// record's).
pub fn take_place(
    spec: &mut Value,
    plan: &Plan,
    migrated: &mut Option<Value>,
    notes: &mut Vec<String>,
) {
    let Some(sidecar) = ["initContainers", "containers"].iter().find_map(|key| {
        let list = spec.get_mut(*key)?.as_array_mut()?;
        let at = list.iter().position(|c| c["name"] == SIDECAR)?;
        Some(list.remove(at))
    }) else {
        return;
    };
    if plan.native {
        place_installer_after(spec, &plan.tailer.name);
    }
    let Some(c) = tailer::container_mut(spec, &plan.tailer.name) else {
        return;
    };
    *migrated = Some(c.clone());
    let Some(map) = c.as_object_mut() else {
        return;
    };
    let t = &plan.tailer;
    notes.push(format!(
        "{}: its `tail -F` of {} migrated: hooklog's sidecar takes its place and reads the same file{}{}",
        t.name,
        files(t),
        if t.files.len() > 1 { "s" } else { "" },
        t.keep_alive
            .as_ref()
            .map(|k| format!("; its keep-alive preStop `{k}` becomes `hooklog sleep 0`"))
            .unwrap_or_default()
    ));
    map.insert("name".into(), json!(SIDECAR));
    map.insert("image".into(), sidecar["image"].clone());
    // hooklog's line goes in front of the tailer's own words, which follow `--`, never run: only
    // insertions, which uninject takes out again with exactly their bytes.
    let line = run_line(&sidecar, &plan.tailer);
    if map.get("command").is_some_and(|c| !strings(c).is_empty()) {
        prepend(map, "command", &line);
    } else {
        // hooklog's image's ENTRYPOINT is the binary.
        prepend(map, "args", &line[1..]);
    }
    if let Some(exec) = map
        .get_mut("lifecycle")
        .and_then(|l| l.get_mut("preStop"))
        .and_then(|p| p.get_mut("exec"))
        .and_then(Value::as_object_mut)
    {
        prepend(
            exec,
            "command",
            &[IMAGE_BINARY.into(), "sleep".into(), "0".into(), "--".into()],
        );
    }
    take_sidecars_lists(map, &sidecar);
}

/// The sidecar's env and mounts added to the tailer's (an env var it has already kept), and its
/// resources and security context where the tailer has none.
fn take_sidecars_lists(map: &mut serde_json::Map<String, Value>, sidecar: &Value) {
    for key in ["env", "volumeMounts"] {
        let add = sidecar[key].as_array().cloned().unwrap_or_default();
        match map.get_mut(key).and_then(Value::as_array_mut) {
            Some(list) => {
                for item in add {
                    if !list
                        .iter()
                        .any(|e| e["name"] == item["name"] && key == "env")
                    {
                        list.push(item);
                    }
                }
            }
            None => {
                map.insert(key.into(), Value::Array(add));
            }
        }
    }
    for key in ["resources", "securityContext"] {
        if !map.contains_key(key) {
            map.insert(key.into(), sidecar[key].clone());
        }
    }
}

/// Moves inject's installer to just after the native forwarder: the forwarder's entry then lines
/// up with hooklog's (the splicer pairs entries by name, else by place), and the installer is
/// an insertion. It still runs before any app container starts.
fn place_installer_after(spec: &mut Value, forwarder: &str) {
    let Some(list) = spec.get_mut("initContainers").and_then(Value::as_array_mut) else {
        return;
    };
    let Some(at) = list.iter().position(|c| c["name"] == INSTALLER) else {
        return;
    };
    let installer = list.remove(at);
    let after = list
        .iter()
        .position(|c| c["name"] == forwarder)
        .map_or(at, |i| i + 1);
    list.insert(after, installer);
}

/// The sidecar form of a migrated pod: the tailer's (a native sidecar's place is among the init
/// containers, an app container's among the containers), said when it is not `requested`.
pub fn mode(plan: &Plan, requested: SidecarMode, notes: &mut Vec<String>) -> SidecarMode {
    let mode = if plan.native {
        SidecarMode::Native
    } else {
        SidecarMode::Classic
    };
    if mode != requested {
        notes.push(format!(
            "{}: hooklog takes its place as a {} sidecar, the form of the tailer's container",
            plan.tailer.name,
            if plan.native { "native" } else { "classic" }
        ));
    }
    mode
}

/// `containers` without the tailer hooklog takes the place of: its keep-alive is neither wrapped
/// nor waited for.
pub fn without<'a>(containers: &[Container<'a>], plan: Option<&Plan>) -> Vec<Container<'a>> {
    containers
        .iter()
        .filter(|c| plan.is_none_or(|p| p.tailer.name != c.name))
        .cloned()
        .collect()
}

/// Gives the tailer's original container back (uninject): hooklog's sidecar in its place
/// becomes the tailer again. True when it did.
pub fn restore(spec: &mut Value, migrated: Option<&Value>) -> bool {
    let Some(original) = migrated else {
        return false;
    };
    match tailer::container_mut(spec, SIDECAR) {
        Some(c) => {
            *c = original.clone();
            true
        }
        None => false,
    }
}

/// The sidecar's `run` line (hooklog's binary first), with the tailer's files after hooklog's own
/// `--file`, ending in `--`.
fn run_line(sidecar: &Value, t: &Tailer) -> Vec<String> {
    let mut out = vec![IMAGE_BINARY.to_string()];
    let args = strings(&sidecar["args"]);
    let mut rest = args.iter();
    while let Some(a) = rest.next() {
        out.push(a.clone());
        if a == "--file" {
            out.extend(rest.next().cloned());
            for f in &t.files {
                out.extend(["--file".to_string(), f.path.clone()]);
            }
        }
    }
    out.push("--".into());
    out
}

/// Puts `words` in front of the sequence at `key` (made when missing).
fn prepend(map: &mut Map<String, Value>, key: &str, words: &[String]) {
    let entry = map.entry(key.to_string()).or_insert_with(|| json!([]));
    if !entry.is_array() {
        *entry = json!([]);
    }
    if let Some(list) = entry.as_array_mut() {
        for (i, w) in words.iter().enumerate() {
            list.insert(i, json!(w));
        }
    }
}

/// The list holding a hooklog sidecar's `run` line: its `command` when that runs hooklog (a
/// migrated forwarder's), else its `args`.
pub fn run_line_mut(c: &mut Value) -> Option<&mut Vec<Value>> {
    let in_command = c["command"]
        .get(0)
        .and_then(Value::as_str)
        .is_some_and(hooks::is_hooklog);
    c.get_mut(if in_command { "command" } else { "args" })?
        .as_array_mut()
}

/// Where flags added to a `run` line go: before the `--` of a migrated forwarder's words.
pub fn end_of_flags(line: &[Value]) -> usize {
    line.iter().position(|a| a == "--").unwrap_or(line.len())
}
