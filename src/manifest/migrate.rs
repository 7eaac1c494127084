//! (the control plane) `hooklog inject`'s migration of the busybox `tail -F` workaround: hooklog's
//! sidecar takes the tailer's place, in the tailer's own container entry, and reads the files it
//! followed (`run --file`) on the same mounts; its keep-alive preStop becomes `hooklog sleep 0`.
//!
//! Every change is a scalar replaced in place or an item or key added, never a line of the
//! user's removed: that is what lets `uninject` give back the user's bytes exactly (the splicer
//! undoes a replacement in the scalar's own style and an insertion with the bytes it added). The
//! tailer's whole entry, as written, is kept in inject's record ([`super::inject::Record`]).

use serde_json::{Map, Value, json};

use super::budget::SidecarMode;
use super::hooks::{self, Handler, IMAGE_BINARY};
use super::inject::Record;
use super::layout::{FILE, PODINFO_MOUNT, SIDECAR, SOCKET};
use super::podspec::Container;
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

/// hooklog's `run` flags that take a path, written as one word each (`--file=PATH`) where the
/// tailer's `command` has room for them.
const PATH_FLAGS: [&str; 3] = ["--file", "--socket", "--podinfo"];

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
        if !volume.is_some_and(|v| v.get("emptyDir").is_some()) {
            return Some(format!(
                "{} is on volume {}, which is not an emptyDir: it may hold what earlier pods wrote, which hooklog would read again",
                f.path, shared.volume
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
    if let Some(key) = lifecycle.and_then(|l| l.keys().find(|k| *k != "preStop")) {
        return Some(format!("it has a `{key}` hook"));
    }
    if lifecycle.is_some_and(|l| l.contains_key("preStop")) {
        match hooks::hooks(c).into_iter().find(|h| h.name == "preStop") {
            Some(h) if t.keep_alive.is_some() && matches!(h.handler, Handler::Exec(_)) => {}
            _ => {
                return Some(
                    "its preStop does more than sleep (or is not an exec command)".into(),
                );
            }
        }
    }
    let (command, args) = c.argv();
    // The words of the shortest `run` line before `--grace G`: hooklog, run, one word for each
    // path flag and file.
    let words = 2 + PATH_FLAGS.len() + t.files.len();
    if command.len() + args.len() > words {
        return Some(format!(
            "its command line has {} words, more than hooklog's `run` has ({words}), and inject only replaces and adds",
            command.len() + args.len()
        ));
    }
    None
}

/// Turns the tailer's container into hooklog's sidecar: the one inject just added to `spec` is
/// taken out again and gives what hooklog needs; the original is kept in `record`.
pub fn take_place(spec: &mut Value, plan: &Plan, record: &mut Record, notes: &mut Vec<String>) {
    let Some(sidecar) = ["initContainers", "containers"].iter().find_map(|key| {
        let list = spec.get_mut(*key)?.as_array_mut()?;
        let at = list.iter().position(|c| c["name"] == SIDECAR)?;
        Some(list.remove(at))
    }) else {
        return;
    };
    let Some(c) = tailer::container_mut(spec, &plan.tailer.name) else {
        return;
    };
    record.migrated = Some(c.clone());
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
    set_argv(map, run_line(&sidecar, &plan.tailer));
    if let Some(exec) = map
        .get_mut("lifecycle")
        .and_then(|l| l.get_mut("preStop"))
        .and_then(|p| p.get_mut("exec"))
        .and_then(Value::as_object_mut)
    {
        // `hooklog sleep` adds its arguments up: one `0` for each word past three.
        let n = super::podspec::strings(exec.get("command").unwrap_or(&Value::Null))
            .len()
            .max(3);
        let mut cmd = vec![json!(IMAGE_BINARY), json!("sleep")];
        cmd.extend(std::iter::repeat_n(json!("0"), n - 2));
        exec.insert("command".into(), Value::Array(cmd));
    }
    for key in ["env", "volumeMounts"] {
        let add = sidecar[key].as_array().cloned().unwrap_or_default();
        match map.get_mut(key).and_then(Value::as_array_mut) {
            Some(list) => {
                for item in add {
                    if !list.iter().any(|e| e["name"] == item["name"] && key == "env") {
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
pub fn restore(spec: &mut Value, record: &Record) -> bool {
    let Some(original) = &record.migrated else {
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

/// The sidecar's `run` line, with the tailer's files added after hooklog's own.
fn run_line(sidecar: &Value, t: &Tailer) -> Vec<String> {
    let args = super::podspec::strings(&sidecar["args"]);
    let mut out = vec![IMAGE_BINARY.to_string()];
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        if PATH_FLAGS.contains(&a.as_str()) && i + 1 < args.len() {
            out.push(format!("{a}={}", args[i + 1]));
            if a == "--file" {
                out.extend(t.files.iter().map(|f| format!("--file={}", f.path)));
            }
            i += 2;
        } else {
            out.push(a.clone());
            i += 1;
        }
    }
    debug_assert!(out.iter().any(|a| a == &format!("--file={FILE}")));
    debug_assert!(out.iter().any(|a| a == &format!("--socket={SOCKET}")));
    debug_assert!(out.iter().any(|a| a == &format!("--podinfo={PODINFO_MOUNT}")));
    out
}

/// Writes `line` over the container's `command` and `args`: each keeps at least as many words as
/// it had (replaced in place, the rest added), `--peers` and `--grace` in `args`, where inject
/// updates them later. Without a `command`, the image's ENTRYPOINT is hooklog.
fn set_argv(map: &mut Map<String, Value>, line: Vec<String>) {
    let had_command = super::podspec::strings(map.get("command").unwrap_or(&Value::Null)).len();
    let words = |v: &[String]| Value::Array(v.iter().map(|s| json!(s)).collect());
    if had_command == 0 {
        map.insert("args".into(), words(&line[1..]));
        return;
    }
    // The one-word flags end where `--peers` (or `--grace`) starts.
    let fixed = line
        .iter()
        .position(|a| a == "--peers" || a == "--grace")
        .unwrap_or(line.len());
    let k = had_command.max(2).min(fixed);
    map.insert("command".into(), words(&line[..k]));
    map.insert("args".into(), words(&line[k..]));
}
