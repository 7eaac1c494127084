//! `hooklog inject`: adds hooklog to every pod template (the shared emptyDir, the `hooklog
//! install` init container, the sidecar, every exec preStop wrapped), and `hooklog uninject`,
//! which removes exactly that, using what inject recorded in an annotation.

use std::time::Duration;

use serde_json::{Map, Value, json};

use super::budget::{self, SidecarMode};
use super::check::secs;
use super::hooks::{self, Handler, is_sleep, parse_hooklog, wrapped};
use super::podspec::{self, ObjectRef, TemplateRef};
use crate::cli::Command;

/// Names inject adds; a pod that already uses one is an error, never overwritten.
pub const SIDECAR: &str = "hooklog";
pub const INSTALLER: &str = "hooklog-install";
pub const VOLUME: &str = "hooklog-shared";
pub const PODINFO_VOLUME: &str = "hooklog-podinfo";
/// Where the shared emptyDir is mounted, in every container inject touches.
pub const MOUNT: &str = "/hooklog";
pub const PODINFO_MOUNT: &str = "/etc/hooklog-podinfo";
pub const BIN_DIR: &str = "/hooklog/bin";
pub const BIN: &str = "/hooklog/bin/hooklog";
pub const SOCKET: &str = "/hooklog/hooklog.sock";
pub const FILE: &str = "/hooklog/prestop.log";
/// The pod annotation holding what `uninject` needs to restore the template exactly.
pub const ANNOTATION: &str = "hooklog.dev/injected";
/// The shared emptyDir's size limit (as in k8s/): the file only holds hook lines.
const VOLUME_SIZE_LIMIT: &str = "64Mi";

/// What inject was told.
#[derive(Debug, Clone)]
pub struct Options {
    pub image: String,
    pub mode: SidecarMode,
    /// `(container, duration)`: a preStop `hooklog sleep DURATION` for a container without one.
    pub prestop_sleep: Vec<(String, String)>,
}

/// What happened to one object, for the report on stderr.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Injected,
    AlreadyInjected,
    Uninjected,
    NotInjected,
    Skipped,
}

/// Why a pod template cannot be injected.
#[derive(Debug, thiserror::Error)]
#[error("{object}: {why}")]
pub struct InjectError {
    pub object: ObjectRef,
    pub why: String,
}

/// One line of the stderr report, per object: `deployment "shop/api-server" injected`.
pub fn report_line(kind: &str, name: &str, outcome: &Outcome) -> String {
    let what = match outcome {
        Outcome::Injected => "injected",
        Outcome::AlreadyInjected => "already injected, unchanged",
        Outcome::Uninjected => "uninjected",
        Outcome::NotInjected => "not injected, unchanged",
        Outcome::Skipped => "skipped",
    };
    format!("{} \"{name}\" {what}", kind.to_lowercase())
}

fn display_name(obj: &Value) -> String {
    let name = obj["metadata"]["name"].as_str().unwrap_or("(unnamed)");
    match obj["metadata"]["namespace"].as_str() {
        Some(ns) => format!("{ns}/{name}"),
        None => name.to_string(),
    }
}

/// Injects every pod template of `doc`; returns the report lines (objects and notes).
pub fn inject(doc: &mut Value, opts: &Options) -> Result<Vec<String>, InjectError> {
    let mut report = Vec::new();
    let templates = podspec::templates(doc);
    for (pointer, obj) in podspec::objects(doc) {
        if !templates
            .iter()
            .any(|t| t.spec_pointer.starts_with(&format!("{pointer}/")))
        {
            report.push(report_line(
                obj["kind"].as_str().unwrap_or("object"),
                &display_name(obj),
                &Outcome::Skipped,
            ));
        }
    }
    for t in &templates {
        let mut notes = Vec::new();
        let outcome = inject_pod(doc, t, opts, &mut notes).map_err(|why| InjectError {
            object: t.object.clone(),
            why,
        })?;
        report.push(report_line(
            &t.object.kind,
            &t.object.qualified_name(),
            &outcome,
        ));
        report.extend(notes.into_iter().map(|n| format!("  {n}")));
    }
    Ok(report)
}

/// Removes what inject added from every pod template of `doc`.
pub fn uninject(doc: &mut Value) -> Result<Vec<String>, InjectError> {
    let mut report = Vec::new();
    for t in podspec::templates(doc) {
        let outcome = uninject_pod(doc, &t).map_err(|why| InjectError {
            object: t.object.clone(),
            why,
        })?;
        report.push(report_line(
            &t.object.kind,
            &t.object.qualified_name(),
            &outcome,
        ));
    }
    Ok(report)
}

fn obj_mut<'a>(v: &'a mut Value, key: &str) -> &'a mut Map<String, Value> {
    let map = v.as_object_mut().expect("callers pass a mapping");
    let entry = map.entry(key.to_string()).or_insert_with(|| json!({}));
    if !entry.is_object() {
        *entry = json!({});
    }
    entry.as_object_mut().expect("just made a mapping")
}

fn arr_mut<'a>(v: &'a mut Value, key: &str) -> &'a mut Vec<Value> {
    let map = v.as_object_mut().expect("callers pass a mapping");
    let entry = map.entry(key.to_string()).or_insert_with(|| json!([]));
    if !entry.is_array() {
        *entry = json!([]);
    }
    entry.as_array_mut().expect("just made a sequence")
}

/// The parent pointer and last key of a JSON pointer.
fn split_pointer(p: &str) -> (&str, &str) {
    p.rsplit_once('/').unwrap_or(("", p))
}

fn metadata<'a>(doc: &'a mut Value, t: &TemplateRef) -> Option<&'a mut Value> {
    let (parent, _) = split_pointer(&t.metadata_pointer);
    let parent = doc.pointer_mut(parent)?;
    parent.is_object().then_some(())?;
    Some(parent)
}

/// A hook's new command, and how long it runs when known.
struct Wrap {
    container: String,
    /// The command `hooklog hook` runs.
    inner: Vec<String>,
    known: Option<Duration>,
    /// The container had no preStop (`--prestop-sleep`).
    added: bool,
}

fn inject_pod(
    doc: &mut Value,
    t: &TemplateRef,
    opts: &Options,
    notes: &mut Vec<String>,
) -> Result<Outcome, String> {
    let spec_snapshot = doc.pointer(&t.spec_pointer).cloned().ok_or("no pod spec")?;
    let meta_snapshot = doc.pointer(&t.metadata_pointer).cloned();
    if meta_snapshot
        .as_ref()
        .is_some_and(|m| m["annotations"].get(ANNOTATION).is_some())
    {
        return Ok(Outcome::AlreadyInjected);
    }
    let containers = podspec::containers(&spec_snapshot, &t.spec_path);
    let mut seen = std::collections::BTreeSet::new();
    for c in &containers {
        if !c.value.is_object() {
            return Err(format!("{} is not a mapping", c.path));
        }
        if !seen.insert(c.name.as_str()) {
            return Err(format!(
                "two containers are named {:?} ({})",
                c.name, c.path
            ));
        }
    }
    for c in &containers {
        if c.name == SIDECAR || c.name == INSTALLER {
            return Err(format!(
                "a container named {:?} exists already ({}); hooklog inject adds one of that name and will not overwrite it",
                c.name, c.path
            ));
        }
        for m in c.mounts() {
            if m.path == MOUNT
                || m.path.starts_with(&format!("{MOUNT}/"))
                || m.path == PODINFO_MOUNT
            {
                return Err(format!(
                    "container {} mounts something at {}, where hooklog inject mounts its volume",
                    c.name, m.path
                ));
            }
        }
    }
    for v in spec_snapshot["volumes"].as_array().into_iter().flatten() {
        if let Some(n) = v["name"]
            .as_str()
            .filter(|n| *n == VOLUME || *n == PODINFO_VOLUME)
        {
            return Err(format!(
                "a volume named {n:?} exists already; hooklog inject adds one of that name and will not overwrite it"
            ));
        }
    }
    let period = Duration::from_secs(podspec::termination_grace_seconds(&spec_snapshot));

    // Which preStop hooks to wrap, and what else bounds the shutdown.
    let mut wraps: Vec<Wrap> = Vec::new();
    let mut peers: Vec<String> = Vec::new();
    let mut longest_known = Duration::ZERO;
    for c in containers.iter().filter(|c| !c.init) {
        let env = c.literal_env();
        let pre = hooks::hooks(c).into_iter().find(|h| h.name == "preStop");
        match pre.map(|h| h.handler) {
            Some(Handler::Exec(argv)) => {
                if let Some(h) = wrapped(&argv, &env) {
                    // Wired by hand already: left as it is, waited for.
                    notes.push(format!("{}: preStop already runs `hooklog hook`, left as it is", c.name));
                    peers.push(h.container);
                    if let Some(m) = hooks::bound(&Handler::Exec(argv), &env).max {
                        longest_known = longest_known.max(m);
                    }
                    continue;
                }
                let inner = proc_1_to_own_output(sleep_to_hooklog(&argv, notes, &c.name), notes, &c.name);
                let known = hooks::bound(&Handler::Exec(inner.clone()), &env).max;
                wraps.push(Wrap { container: c.name.clone(), inner, known, added: false });
            }
            Some(Handler::Sleep(s)) => {
                notes.push(format!(
                    "{}: preStop is the native sleep action ({s}s), left as it is: the kubelet runs it, there is no command to wrap",
                    c.name
                ));
                longest_known = longest_known.max(Duration::from_secs(s));
            }
            Some(Handler::HttpGet) | Some(Handler::TcpSocket) => notes.push(format!(
                "{}: preStop is an httpGet/tcpSocket call, left as it is: the kubelet makes it from outside the container, there is no command to wrap",
                c.name
            )),
            Some(Handler::Unknown) => notes.push(format!("{}: preStop has no handler hooklog knows, left as it is", c.name)),
            None => {
                if let Some((_, d)) = opts.prestop_sleep.iter().find(|(n, _)| *n == c.name) {
                    let inner = vec![BIN.to_string(), "sleep".to_string(), d.clone()];
                    let known = hooks::bound(&Handler::Exec(inner.clone()), &env).max;
                    wraps.push(Wrap { container: c.name.clone(), inner, known, added: true });
                }
            }
        }
    }
    for (name, _) in &opts.prestop_sleep {
        let Some(c) = containers.iter().find(|c| !c.init && c.name == *name) else {
            continue;
        };
        if c.value["lifecycle"].get("preStop").is_some() {
            notes.push(format!(
                "{name}: has a preStop already, --prestop-sleep ignored"
            ));
        }
    }
    for w in &wraps {
        if let Some(k) = w.known {
            longest_known = longest_known.max(k);
        }
        peers.push(w.container.clone());
    }
    let (grace, timeout) = budget::plan(opts.mode, longest_known, period).unwrap_or_else(|| {
        let fallback = Duration::from_secs(match opts.mode {
            SidecarMode::Native => (period.as_secs() / 4).max(1),
            SidecarMode::Classic => (period.as_secs() * 3 / 4).max(1),
        });
        notes.push(format!(
            "hooks of {} leave no --grace that fits terminationGracePeriodSeconds {}; raise it (`hooklog check` reports this pod)",
            secs(longest_known),
            period.as_secs()
        ));
        (fallback, Duration::from_secs((period.as_secs() / 2).max(1)))
    });

    // The record uninject restores from.
    let mut record_containers = Map::new();
    let spec = doc.pointer_mut(&t.spec_pointer).ok_or("no pod spec")?;
    // Keys inject fills: absent ones are created, ones of another type (`null`) replaced; both
    // are recorded so that uninject puts back exactly what was there.
    let mut created = Vec::new();
    let mut replaced = Map::new();
    for key in ["initContainers", "containers", "volumes"] {
        match spec.get(key) {
            None => created.push(key),
            Some(Value::Array(_)) => {}
            Some(other) => {
                replaced.insert(key.to_string(), other.clone());
            }
        }
    }
    for w in &wraps {
        let c = arr_mut(spec, "containers")
            .iter_mut()
            .find(|c| c["name"] == w.container.as_str())
            .expect("the container was found in the snapshot");
        // What was there (a key left out when it was absent).
        let mut original = Map::new();
        for key in ["lifecycle", "volumeMounts"] {
            if let Some(v) = c.get(key) {
                original.insert(key.to_string(), v.clone());
            }
        }
        record_containers.insert(w.container.clone(), Value::Object(original));
        let mut command = vec![
            BIN.to_string(),
            "hook".into(),
            "--container".into(),
            w.container.clone(),
            "--socket".into(),
            SOCKET.into(),
            "--file".into(),
            FILE.into(),
        ];
        if w.known.is_none() {
            command.extend(["--timeout".to_string(), secs(timeout)]);
        }
        command.push("--".into());
        command.extend(w.inner.iter().cloned());
        let lifecycle = obj_mut(c, "lifecycle");
        if w.added {
            lifecycle.insert("preStop".into(), json!({"exec": {"command": command}}));
        } else {
            let pre = lifecycle
                .get_mut("preStop")
                .and_then(|p| p.get_mut("exec"))
                .and_then(Value::as_object_mut)
                .expect("an exec preStop was found in the snapshot");
            pre.insert("command".into(), json!(command));
        }
        arr_mut(c, "volumeMounts").push(json!({"name": VOLUME, "mountPath": MOUNT}));
    }

    // A new initContainers goes where people write it, just before containers.
    if let Some(map) = spec.as_object_mut()
        && !map.contains_key("initContainers")
    {
        let at = map
            .keys()
            .position(|k| k == "containers")
            .unwrap_or(map.len());
        map.shift_insert(at, "initContainers".into(), json!([]));
    }
    let installer = installer(&opts.image);
    let sidecar = sidecar(&opts.image, opts.mode, &peers, grace);
    match opts.mode {
        SidecarMode::Native => {
            let init = arr_mut(spec, "initContainers");
            init.insert(0, sidecar);
            init.insert(0, installer);
        }
        SidecarMode::Classic => {
            arr_mut(spec, "initContainers").insert(0, installer);
            arr_mut(spec, "containers").push(sidecar);
        }
    }
    let volumes = arr_mut(spec, "volumes");
    volumes.push(json!({"name": VOLUME, "emptyDir": {"sizeLimit": VOLUME_SIZE_LIMIT}}));
    volumes.push(json!({"name": PODINFO_VOLUME, "downwardAPI": {"items": [
        {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}},
        {"path": "annotations", "fieldRef": {"fieldPath": "metadata.annotations"}},
    ]}}));

    let parent = metadata(doc, t).ok_or("no place for the pod's metadata")?;
    match parent.get("metadata") {
        None => created.push("metadata"),
        Some(Value::Object(_)) => {}
        Some(other) => {
            replaced.insert("metadata".into(), other.clone());
        }
    }
    let meta = obj_mut(parent, "metadata");
    match meta.get("annotations") {
        None => created.push("annotations"),
        Some(Value::Object(_)) => {}
        Some(other) => {
            replaced.insert("annotations".into(), other.clone());
        }
    }
    let record = json!({
        "version": 1,
        "containers": record_containers,
        "created": created,
        "replaced": replaced,
    });
    let annotations = meta
        .entry("annotations".to_string())
        .or_insert_with(|| json!({}));
    if !annotations.is_object() {
        *annotations = json!({});
    }
    annotations
        .as_object_mut()
        .expect("just made a mapping")
        .insert(ANNOTATION.to_string(), Value::String(record.to_string()));
    Ok(Outcome::Injected)
}

/// A bare `sleep N` (or `/bin/sleep N`) becomes `hooklog sleep N` from the shared volume, which
/// every image can run; anything else stays unchanged.
fn sleep_to_hooklog(argv: &[String], notes: &mut Vec<String>, container: &str) -> Vec<String> {
    if let [program, arg] = argv
        && is_sleep(program)
    {
        let candidate = vec![BIN.to_string(), "sleep".to_string(), arg.clone()];
        if let Ok(Command::Sleep(_)) = parse_hooklog(&candidate, &Default::default()) {
            return candidate;
        }
        notes.push(format!(
            "{container}: `{} {arg}` kept as it is: `hooklog sleep` does not take {arg:?}",
            program
        ));
    }
    argv.to_vec()
}

/// PID 1's stdout and stderr, which hooks write to so that `kubectl logs` shows them, and what
/// inject writes instead: under `hooklog hook` the hook's own stdout and stderr are the
/// wrapper's pipes, which it reports, and any user may write to them (`/proc/1/fd/1` is denied
/// to non-root users and on Fargate).
const PROC_1_REWRITES: [(&str, &str); 2] = [
    ("/proc/1/fd/1", "/dev/stdout"),
    ("/proc/1/fd/2", "/dev/stderr"),
];

/// Points a wrapped hook's writes to `/proc/1/fd/1` and `/proc/1/fd/2` at its own stdout and
/// stderr; `uninject` restores the original.
fn proc_1_to_own_output(
    argv: Vec<String>,
    notes: &mut Vec<String>,
    container: &str,
) -> Vec<String> {
    let mut changed = false;
    let out = argv
        .into_iter()
        .map(|a| {
            let mut a = a;
            for (from, to) in PROC_1_REWRITES {
                if a.contains(from) {
                    a = a.replace(from, to);
                    changed = true;
                }
            }
            a
        })
        .collect();
    if changed {
        notes.push(format!(
            "{container}: the hook's writes to /proc/1/fd/1 and /proc/1/fd/2 now go to its own /dev/stdout and /dev/stderr, which `hooklog hook` reports"
        ));
    }
    out
}

/// The hardened securityContext of k8s/: hooklog's image runs as 65532 with nothing else.
fn security_context() -> Value {
    json!({
        "runAsNonRoot": true,
        "runAsUser": 65532,
        "runAsGroup": 65532,
        "readOnlyRootFilesystem": true,
        "allowPrivilegeEscalation": false,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    })
}

fn installer(image: &str) -> Value {
    json!({
        "name": INSTALLER,
        "image": image,
        "args": ["install", BIN_DIR],
        // k8s/: a copy of a 8 MB file
        "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}, "limits": {"memory": "32Mi"}},
        "securityContext": security_context(),
        "volumeMounts": [{"name": VOLUME, "mountPath": MOUNT}],
    })
}

fn sidecar(image: &str, mode: SidecarMode, peers: &[String], grace: Duration) -> Value {
    let mut args = vec![
        "run".to_string(),
        "--file".into(),
        FILE.into(),
        "--socket".into(),
        SOCKET.into(),
        "--podinfo".into(),
        PODINFO_MOUNT.into(),
    ];
    if !peers.is_empty() {
        args.extend(["--peers".to_string(), peers.join(",")]);
    }
    args.extend(["--grace".to_string(), secs(grace)]);
    if mode == SidecarMode::Native {
        // Signalled after its peers are gone, perhaps with 2 s left: summary at once.
        args.push("--native-sidecar".to_string());
    }
    let env: Vec<Value> = [
        ("POD_NAME", "metadata.name"),
        ("POD_NAMESPACE", "metadata.namespace"),
        ("POD_UID", "metadata.uid"),
        ("POD_IP", "status.podIP"),
        ("NODE_NAME", "spec.nodeName"),
    ]
    .iter()
    .map(|(n, f)| json!({"name": n, "valueFrom": {"fieldRef": {"fieldPath": f}}}))
    .collect();
    let mut c = Map::new();
    c.insert("name".into(), json!(SIDECAR));
    c.insert("image".into(), json!(image));
    if mode == SidecarMode::Native {
        c.insert("restartPolicy".into(), json!("Always"));
    }
    c.insert("args".into(), json!(args));
    c.insert("env".into(), json!(env));
    // k8s/: measured 2.0 MiB idle, 2.3 MiB and ~35 millicores at 10,000 lines/s (README).
    c.insert(
        "resources".into(),
        json!({"requests": {"cpu": "10m", "memory": "16Mi"}, "limits": {"memory": "64Mi"}}),
    );
    c.insert("securityContext".into(), security_context());
    c.insert(
        "volumeMounts".into(),
        json!([
            {"name": VOLUME, "mountPath": MOUNT},
            {"name": PODINFO_VOLUME, "mountPath": PODINFO_MOUNT, "readOnly": true},
        ]),
    );
    Value::Object(c)
}

fn uninject_pod(doc: &mut Value, t: &TemplateRef) -> Result<Outcome, String> {
    let Some(raw) = doc
        .pointer(&t.metadata_pointer)
        .and_then(|m| m["annotations"][ANNOTATION].as_str())
        .map(str::to_string)
    else {
        return Ok(Outcome::NotInjected);
    };
    let record: Value = serde_json::from_str(&raw)
        .map_err(|e| format!("annotation {ANNOTATION} is not what inject wrote: {e}"))?;
    let created: Vec<&str> = record["created"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let replaced = record["replaced"].as_object().cloned().unwrap_or_default();
    // A key inject created or replaced goes back to what it was once it holds nothing of ours.
    let put_back = |map: &mut Map<String, Value>, key: &str| {
        let empty = match map.get(key) {
            Some(Value::Array(a)) => a.is_empty(),
            Some(Value::Object(o)) => o.is_empty(),
            _ => false,
        };
        if empty {
            if let Some(original) = replaced.get(key) {
                map.insert(key.to_string(), original.clone());
            } else if created.contains(&key) {
                map.shift_remove(key);
            }
        }
    };
    let spec = doc.pointer_mut(&t.spec_pointer).ok_or("no pod spec")?;
    for key in ["initContainers", "containers"] {
        if let Some(list) = spec.get_mut(key).and_then(Value::as_array_mut) {
            list.retain(|c| c["name"] != SIDECAR && c["name"] != INSTALLER);
        }
    }
    if let Some(list) = spec.get_mut("volumes").and_then(Value::as_array_mut) {
        list.retain(|v| v["name"] != VOLUME && v["name"] != PODINFO_VOLUME);
    }
    let map = spec
        .as_object_mut()
        .ok_or("the pod spec is not a mapping")?;
    for key in ["initContainers", "containers", "volumes"] {
        put_back(map, key);
    }
    let restore = record["containers"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    if let Some(list) = map.get_mut("containers").and_then(Value::as_array_mut) {
        for c in list.iter_mut() {
            let Some(r) = c["name"].as_str().and_then(|n| restore.get(n)) else {
                continue;
            };
            let c = c.as_object_mut().ok_or("a container is not a mapping")?;
            match r.get("lifecycle") {
                None => {
                    c.shift_remove("lifecycle");
                }
                Some(l) => {
                    c.insert("lifecycle".into(), l.clone());
                }
            }
            if let Some(m) = c.get_mut("volumeMounts").and_then(Value::as_array_mut) {
                m.retain(|m| m["name"] != VOLUME);
                match r.get("volumeMounts") {
                    None if m.is_empty() => {
                        c.shift_remove("volumeMounts");
                    }
                    Some(original) if !original.is_array() => {
                        c.insert("volumeMounts".into(), original.clone());
                    }
                    _ => {}
                }
            }
        }
    }
    let parent = metadata(doc, t).ok_or("no pod metadata")?;
    let pmap = parent.as_object_mut().ok_or("not a mapping")?;
    if let Some(meta) = pmap.get_mut("metadata").and_then(Value::as_object_mut) {
        if let Some(a) = meta.get_mut("annotations").and_then(Value::as_object_mut) {
            a.shift_remove(ANNOTATION);
        }
        put_back(meta, "annotations");
    }
    put_back(pmap, "metadata");
    Ok(Outcome::Uninjected)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts() -> Options {
        Options {
            image: "registry.example.com/hooklog:0.1.0".into(),
            mode: SidecarMode::Native,
            prestop_sleep: vec![("web".into(), "10s".into())],
        }
    }

    #[test]
    fn inject_then_uninject_restores_and_inject_is_idempotent() {
        let original = json!({"kind": "Deployment", "metadata": {"name": "d"}, "spec": {"template": {
        "metadata": {"labels": {"app": "d"}},
        "spec": {"containers": [
            {"name": "envoy", "image": "envoyproxy/envoy-distroless:v1.31.0",
             "lifecycle": {"preStop": {"exec": {"command": ["sleep", "15"]}}}},
            {"name": "web", "image": "nginx"},
            {"name": "api", "image": "api", "lifecycle": {"preStop": {"httpGet": {"path": "/drain", "port": 8080}}}},
        ]}}}});
        let mut doc = original.clone();
        let report = inject(&mut doc, &opts()).unwrap();
        assert!(report[0].contains("injected"), "{report:?}");
        let spec = &doc["spec"]["template"]["spec"];
        assert_eq!(
            spec["containers"][0]["lifecycle"]["preStop"]["exec"]["command"],
            json!([
                BIN,
                "hook",
                "--container",
                "envoy",
                "--socket",
                SOCKET,
                "--file",
                FILE,
                "--",
                BIN,
                "sleep",
                "15"
            ])
        );
        assert_eq!(spec["initContainers"][1]["restartPolicy"], "Always");
        assert_eq!(
            spec["containers"][1]["lifecycle"]["preStop"]["exec"]["command"][10],
            "sleep"
        );
        assert_eq!(
            spec["containers"][2]["lifecycle"],
            original["spec"]["template"]["spec"]["containers"][2]["lifecycle"]
        );
        let once = doc.clone();
        assert_eq!(
            inject(&mut doc, &opts()).unwrap(),
            ["deployment \"d\" already injected, unchanged"]
        );
        assert_eq!(doc, once);
        uninject(&mut doc).unwrap();
        assert_eq!(doc, original);
        assert_eq!(
            serde_json::to_string(&doc).unwrap(),
            serde_json::to_string(&original).unwrap()
        );
    }

    /// Arbitrary JSON, small.
    fn value() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            (0u64..100).prop_map(|n| json!(n)),
            prop::sample::select(vec![
                "sleep",
                "15",
                "sh",
                "-c",
                "hooklog",
                "/hooklog/bin/hooklog",
                "hook",
                "--",
                "exec",
                "preStop",
                "name",
                "Always"
            ])
            .prop_map(|s| json!(s)),
        ];
        leaf.prop_recursive(4, 48, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::vec(
                    (
                        prop::sample::select(vec![
                            "name",
                            "lifecycle",
                            "preStop",
                            "postStart",
                            "exec",
                            "command",
                            "sleep",
                            "seconds",
                            "httpGet",
                            "volumeMounts",
                            "containers",
                            "initContainers",
                            "volumes",
                            "metadata",
                            "annotations",
                            "restartPolicy",
                            "args",
                            "env",
                            "image"
                        ]),
                        inner
                    ),
                    0..5
                )
                .prop_map(|kv| Value::Object(
                    kv.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
                )),
            ]
        })
    }

    /// A container that looks real: a name, maybe an exec or sleep preStop, maybe junk.
    fn container() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let word = prop::sample::select(vec![
            "sleep",
            "15",
            "1m",
            "sh",
            "-c",
            "/bin/sleep",
            "/hooklog/bin/hooklog",
            "hook",
            "--",
            "/proc/1/fd/1",
            "echo hi > /proc/1/fd/2; sleep 2",
        ]);
        (
            prop::sample::select(vec!["web", "envoy", "hooklog", "app"]),
            prop::option::of(prop::collection::vec(word, 0..4)),
            prop::option::of(0u64..100),
            value(),
        )
            .prop_map(|(name, exec, sleep, junk)| {
                let mut c = json!({"name": name, "image": "gcr.io/distroless/static"});
                if let Some(cmd) = exec {
                    c["lifecycle"] = json!({"preStop": {"exec": {"command": cmd}}});
                } else if let Some(s) = sleep {
                    c["lifecycle"] = json!({"preStop": {"sleep": {"seconds": s}}});
                }
                if let (Value::Object(j), Some(m)) = (junk, c.as_object_mut()) {
                    for (k, v) in j {
                        m.entry(k).or_insert(v);
                    }
                }
                c
            })
    }

    proptest::proptest! {
        /// Malformed pod specs never panic check, inject or uninject; an injected one undoes.
        #[test]
        fn arbitrary_pod_specs_never_panic(spec in value(), containers in proptest::collection::vec(proptest::prop_oneof![value(), container()], 0..4)) {
            let mut spec = spec;
            if let Value::Object(m) = &mut spec {
                m.insert("containers".into(), Value::Array(containers));
            }
            let original = json!({"kind": "Deployment", "metadata": {"name": "d"}, "spec": {"template": {"spec": spec}}});
            let source = crate::manifest::load::parse("p.yaml", crate::manifest::emit::to_yaml(&original)).unwrap();
            crate::manifest::check::check(&[source], &Default::default());
            let mut doc = original.clone();
            if inject(&mut doc, &opts()).is_ok() {
                uninject(&mut doc).unwrap();
                proptest::prop_assert_eq!(doc, original);
            }
        }
    }

    #[test]
    fn an_existing_name_is_an_error() {
        let mut doc = json!({"kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{"name": "hooklog"}]}});
        let e = inject(&mut doc, &opts()).unwrap_err();
        assert!(e.to_string().contains("exists already"), "{e}");
    }
}
