//! (the control plane) `hooklog inject`: adds hooklog to every pod template (the shared emptyDir, the `hooklog
//! install` init container, the sidecar, every exec preStop wrapped), changing as little as it
//! can: a wrapped hook's command is the original one with hooklog's prefix in front, and new
//! things are added after what is there. Run again, it wires containers added since.
//! [`super::uninject`] removes it again, with the [`Record`] this module writes.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::budget::{self, NATIVE_SIDECAR_SINCE, SidecarMode, secs};

use super::adoption::{self, Adoption, PodView};
use super::hooks::{self, Handler, container_hooklog_argv, is_sleep, parse_hooklog, wrapped};
use super::podspec::{self, Container, ObjectRef, TemplateRef};
use super::shape;
use crate::cli::Command;

use super::layout::prefix;
pub use super::layout::{
    ANNOTATION, BIN, BIN_DIR, BIN_MOUNT, BIN_VOLUME, FILE, INSTALLER, MOUNT, PODINFO_MOUNT,
    PODINFO_VOLUME, SIDECAR, SOCKET, VOLUME, own_prefix,
};

/// The annotation's format.
const RECORD_VERSION: u32 = 2;
/// The shared emptyDir's size limit (as in k8s/): the file only holds hook lines.
const VOLUME_SIZE_LIMIT: &str = "64Mi";
/// The binary's emptyDir's size limit (as in k8s/): it holds one copy of the image's binary,
/// at most docs/figures.md's `full-cli-max-bytes`.
const BIN_VOLUME_SIZE_LIMIT: &str = "32Mi";

/// What inject was told.
#[derive(Debug, Clone)]
pub struct Options {
    pub image: String,
    pub mode: SidecarMode,
    /// `(container, duration)`: a preStop `hooklog sleep DURATION` for a container without one.
    pub prestop_sleep: Vec<(String, String)>,
    /// `--events`: the sidecar posts an Event for each hook not ok (its service account needs
    /// [`EVENTS_RBAC`]).
    pub events: bool,
    /// The sidecar's settings before the pod's own `hooklog.dev/` annotations: the install's
    /// (`--sidecar-*`, `events` apart), with the namespace's annotations over them in the webhook.
    pub settings: crate::sidecar_settings::Settings,
}

/// What `--events` needs, for the notes of inject and the webhook.
pub const EVENTS_RBAC: &str = "the pod's service account needs create and patch on events.k8s.io events in its namespace (k8s/events/rbac.yaml)";

/// The sidecar form for the cluster: `--sidecar` when given, else native from 1.29 on
/// ([`NATIVE_SIDECAR_SINCE`]) and classic below; native without a version (1.29+ is assumed:
/// every release the Kubernetes project has supported since 1.28's end of life). A native
/// sidecar asked for a cluster below 1.29 is refused: its kubelet drops `restartPolicy:
/// Always`, and hooklog, a blocking init container that never ends, keeps the pod Pending.
pub fn sidecar_mode(
    requested: Option<SidecarMode>,
    version: Option<(u32, u32)>,
) -> Result<SidecarMode, String> {
    let native_ok = version.is_none_or(|v| v >= NATIVE_SIDECAR_SINCE);
    match (requested, version) {
        (Some(SidecarMode::Native), Some(v)) if !native_ok => Err(format!(
            "--sidecar native needs Kubernetes 1.29+, and --kubernetes-version is {}.{}: its kubelet would run hooklog as a blocking init container and the pod would stay Pending (leave --sidecar out, or use classic)",
            v.0, v.1
        )),
        (Some(mode), _) => Ok(mode),
        (None, _) if native_ok => Ok(SidecarMode::Native),
        (None, _) => Ok(SidecarMode::Classic),
    }
}

/// What happened to one object, for the report on stderr.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Injected,
    /// Injected before; these containers, added since, are wired now.
    Rewired(Vec<String>),
    AlreadyInjected,
    /// Injected before issue 37: the hooks' binary moved to a volume of its own.
    Relaid,
    /// Injected before with other settings: hooklog's containers now as inject writes them,
    /// what changed in words ([`super::update::change`]).
    Updated(String),
    /// Injected before, without `--events`; the sidecar has it now (`inject --events` again).
    EventsAdded,
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
    /// The JSON pointer (in the document changed) of the field refused, when one is.
    pub at: Option<String>,
}

/// One line of the stderr report, per object: `deployment "shop/api-server" injected`.
pub fn report_line(kind: &str, name: &str, outcome: &Outcome) -> String {
    let what = match outcome {
        Outcome::Injected => "injected".to_string(),
        Outcome::Rewired(names) => format!("injected before, now wired: {}", names.join(", ")),
        Outcome::AlreadyInjected => "already injected, unchanged".to_string(),
        Outcome::Relaid => {
            "injected before, its hooks' binary now on a read-only volume of its own".to_string()
        }
        Outcome::EventsAdded => "injected before, now with --events".to_string(),
        Outcome::Updated(what) => format!("updated: {what}"),
        Outcome::Uninjected => "uninjected".to_string(),
        Outcome::NotInjected => "not injected, unchanged".to_string(),
        Outcome::Skipped => "skipped".to_string(),
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
    inject_outcomes(doc, opts).map(|(report, _)| report)
}

/// [`inject`], with what happened to each pod template, in order.
pub fn inject_outcomes(
    doc: &mut Value,
    opts: &Options,
) -> Result<(Vec<String>, Vec<Outcome>), InjectError> {
    inject_updating(doc, opts, None)
}

/// Undoes inject on one pod template, returning its warnings: uninject's, passed in by the
/// commands (it is above this module). The webhook passes none: a pod inject wrote keeps the
/// settings it was given there.
pub type Undo = dyn Fn(&mut Value, &TemplateRef) -> Result<Vec<String>, String>;

/// What inject needs to update a pod injected before with other settings ([`update_pod`]).
#[derive(Clone, Copy)]
pub struct Again<'a> {
    /// uninject's step for one pod template.
    pub undo: &'a Undo,
    /// The sidecar form was asked for (`--sidecar`, `--kubernetes-version`): a pod injected in
    /// the other form is moved to this one.
    /// Without it, a pod keeps its form: inject cannot tell the cluster's version then.
    pub form_asked: bool,
}

/// [`inject_outcomes`]; with `again`, a pod injected before with other settings is updated
/// ([`update_pod`]).
pub fn inject_updating(
    doc: &mut Value,
    opts: &Options,
    again: Option<Again>,
) -> Result<(Vec<String>, Vec<Outcome>), InjectError> {
    let mut report = Vec::new();
    let mut outcomes = Vec::new();
    let templates = podspec::templates(doc);
    // Each template's object found by its pointer, once: a search of every object for each
    // template (and of every template for each object) made inject of one `kind: List` of
    // 5,371 Deployments take 13 s of CPU against 1.2 s for 1,348 (issue 24 §4).
    let (skipped, mut misplaced) = {
        let objects = podspec::objects(doc);
        let by_pointer: std::collections::HashMap<&str, &Value> =
            objects.iter().map(|(p, obj)| (p.as_str(), *obj)).collect();
        let object_of = |t: &podspec::TemplateRef| {
            // The object whose pointer, and a `/`, start the template's: one at most (only
            // a List's items are objects, never the List).
            std::iter::once(0)
                .chain(t.spec_pointer.match_indices('/').map(|(i, _)| i))
                .find_map(|i| by_pointer.get_key_value(&t.spec_pointer[..i]))
                .map(|(p, obj)| (*p, *obj))
        };
        let with_templates: std::collections::HashSet<&str> = templates
            .iter()
            .filter_map(|t| object_of(t).map(|(p, _)| p))
            .collect();
        let skipped: Vec<String> = objects
            .iter()
            .filter(|(p, _)| !with_templates.contains(p.as_str()))
            .map(|(_, obj)| {
                report_line(
                    obj["kind"].as_str().unwrap_or("object"),
                    &display_name(obj),
                    &Outcome::Skipped,
                )
            })
            .collect();
        let misplaced: Vec<Option<String>> = templates
            .iter()
            .map(|t| {
                object_of(t).and_then(|(p, obj)| {
                    adoption::misplaced_annotation(obj, &t.metadata_pointer[p.len()..])
                })
            })
            .collect();
        (skipped, misplaced)
    };
    report.extend(skipped);
    for (i, t) in templates.iter().enumerate() {
        let mut notes: Vec<String> = misplaced[i].take().into_iter().collect();
        if let Some((at, why)) = shape::misfit(doc, t) {
            return Err(InjectError {
                object: t.object.clone(),
                why,
                at: Some(at),
            });
        }
        let outcome = update_pod(doc, t, opts, again, &mut notes).map_err(|why| InjectError {
            object: t.object.clone(),
            why,
            at: None,
        })?;
        report.push(report_line(
            &t.object.kind,
            &t.object.qualified_name(),
            &outcome,
        ));
        report.extend(notes.into_iter().map(|n| format!("  {n}")));
        outcomes.push(outcome);
    }
    Ok((report, outcomes))
}

/// What inject records in [`ANNOTATION`]: only what cannot be recognised in the pod later.
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub struct Record {
    pub version: u32,
    /// Containers whose hooks inject wired, by name.
    #[serde(default)]
    pub containers: BTreeMap<String, ContainerRecord>,
    /// Keys of the pod spec and metadata inject created (`initContainers`, `volumes`,
    /// `metadata`, `annotations`): removed again once they hold nothing.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub created: Vec<String>,
    /// Keys inject found holding something other than a list or mapping (`null`): put back.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub replaced: Map<String, Value>,
    /// The `tail -F` forwarder whose place hooklog's sidecar took, as it was ([`super::migrate`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub migrated: Option<Value>,
}

/// What inject changed in one container that its prefix and mount do not show.
#[derive(Debug, Default, Clone, PartialEq, Serialize, Deserialize)]
pub struct ContainerRecord {
    /// The exec command as written, when inject changed more than the prefix (`sleep N`
    /// became `hooklog sleep N`, `/proc/1/fd/1` became `/dev/stdout`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<Value>,
    /// Keys inject created in the container: `lifecycle`, `preStop` (`--prestop-sleep`),
    /// `volumeMounts`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub created: Vec<String>,
    /// Keys inject found holding something it had to replace: `volumeMounts`, `lifecycle`,
    /// and `preStop` (inside `lifecycle`), each a null.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub replaced: Map<String, Value>,
}

/// The record of a pod template, if inject wrote one.
pub fn read_record(doc: &Value, t: &TemplateRef) -> Result<Option<Record>, String> {
    let Some(raw) = doc
        .pointer(&t.metadata_pointer)
        .and_then(|m| m.get("annotations"))
        .and_then(|a| a.get(ANNOTATION))
    else {
        return Ok(None);
    };
    raw.as_str()
        .and_then(|r| serde_json::from_str(r).ok())
        .map(Some)
        .ok_or_else(|| format!("annotation {ANNOTATION} is not what inject wrote: {raw}"))
}

pub(super) fn obj_mut<'a>(v: &'a mut Value, key: &str) -> &'a mut Map<String, Value> {
    let map = v.as_object_mut().expect("callers pass a mapping");
    let entry = map.entry(key.to_string()).or_insert_with(|| json!({}));
    if !entry.is_object() {
        *entry = json!({});
    }
    entry.as_object_mut().expect("just made a mapping")
}

pub(super) fn arr_mut<'a>(v: &'a mut Value, key: &str) -> &'a mut Vec<Value> {
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

/// The mapping holding the pod's `metadata`.
pub(super) fn metadata_parent<'a>(doc: &'a mut Value, t: &TemplateRef) -> Option<&'a mut Value> {
    let (parent, _) = split_pointer(&t.metadata_pointer);
    let parent = doc.pointer_mut(parent)?;
    parent.is_object().then_some(())?;
    Some(parent)
}

/// A hook inject wires.
struct Wrap {
    container: String,
    /// A native sidecar (in `initContainers`).
    init: bool,
    /// The exec command as written (`None`: the container had no preStop, `--prestop-sleep`).
    original: Option<Vec<String>>,
    /// The command `hooklog hook` runs.
    inner: Vec<String>,
    /// It ends by then (a sleep): no `--timeout`.
    known: Option<Duration>,
}

/// The pod's hooks as inject sees them: the ones to wire, and what bounds the shutdown.
#[derive(Default)]
struct Survey {
    wraps: Vec<Wrap>,
    /// Every container whose preStop hooklog reports (wired now or before).
    peers: Vec<String>,
    /// The longest known length of a hook (its sleeps).
    longest_known: Duration,
    /// A wired hook has no known end.
    unknown: bool,
}

/// hooklog's sidecar in a pod injected before.
struct Installed {
    mode: SidecarMode,
}

/// Injects one pod template, in named steps: look at what is there, decide which hooks to wire,
/// fit the budget, then change the pod (or, when injected before, wire what was added since).
fn inject_pod(
    doc: &mut Value,
    t: &TemplateRef,
    opts: &Options,
    notes: &mut Vec<String>,
) -> Result<Outcome, String> {
    let spec = doc.pointer(&t.spec_pointer).cloned().ok_or("no pod spec")?;
    let adoption = adoption::decide(&PodView {
        kind: &t.object.kind,
        metadata: doc.pointer(&t.metadata_pointer),
        spec: &spec,
    });
    if let Adoption::LeaveAlone(why) = &adoption {
        notes.push(why.to_string());
        return Ok(Outcome::NotInjected);
    }
    let record = read_record(doc, t)?;
    let settings = pod_settings(doc, t, opts, notes)?;
    let containers = podspec::containers(&spec, &t.spec_path);
    distinct_mappings(&containers)?;
    let installed = match &record {
        Some(_) => Some(installed(&containers)?),
        None => {
            free_names(&containers, &spec)?;
            None
        }
    };
    // A `tail -F` forwarder hooklog takes the place of: its container's form is hooklog's.
    let migration = match installed {
        None => super::migrate::plan(&containers, &spec, notes),
        Some(_) => None,
    };
    let mode = pod_mode(installed.as_ref(), migration.as_ref(), opts.mode, notes);
    if installed.is_none()
        && let Err(why) = adoption::form(&adoption, mode)
    {
        notes.push(why);
        return Ok(Outcome::NotInjected);
    }
    let mut hook_notes = Vec::new();
    let surveyed = super::migrate::without(&containers, migration.as_ref());
    let survey = survey(&surveyed, mode, opts, &mut hook_notes);
    if installed.is_some() && survey.wraps.is_empty() {
        return nothing_new(doc, t, opts, notes);
    }
    notes.extend(hook_notes);
    let Some(plan) = fit(&spec, mode, &survey, notes) else {
        return Ok(Outcome::NotInjected);
    };
    let mut record = record.unwrap_or(Record {
        version: RECORD_VERSION,
        ..Default::default()
    });
    let spec = doc.pointer_mut(&t.spec_pointer).ok_or("no pod spec")?;
    if installed.is_some() {
        relayout(spec, notes)?;
    }
    for w in &survey.wraps {
        let entry = wire(spec, w, plan.timeout)?;
        record.containers.insert(w.container.clone(), entry);
    }
    let outcome = if installed.is_some() {
        update_sidecar(spec, &survey.peers, plan.grace);
        if opts.events {
            add_events(spec);
        }
        Outcome::Rewired(survey.wraps.iter().map(|w| w.container.clone()).collect())
    } else {
        let peers = &survey.peers;
        add_hooklog(spec, opts, &settings, mode, peers, plan.grace, &mut record);
        if let Some(m) = &migration {
            super::migrate::take_place(spec, m, &mut record.migrated, notes);
        }
        Outcome::Injected
    };
    write_record(doc, t, &mut record)?;
    Ok(outcome)
}

/// A pod injected before, with `again`: injected again as before ("kept"), and also undone and
/// injected anew with these settings on a copy ("fresh"; its `--events` kept, and its sidecar's
/// form unless one was asked for). When hooklog's containers differ, the fresh pod is taken: the
/// same as inject with these settings on the pod as it was (hooklog out, said, when they leave
/// that pod alone), every other byte the user's. Kept when the undo warns (hooklog's pieces
/// edited since), with a note.
fn update_pod(
    doc: &mut Value,
    t: &TemplateRef,
    opts: &Options,
    again: Option<Again>,
    notes: &mut Vec<String>,
) -> Result<Outcome, String> {
    let Some(again) = again.filter(|_| matches!(read_record(doc, t), Ok(Some(_)))) else {
        return inject_pod(doc, t, opts, notes);
    };
    let Some((at, before, small)) = super::update::template(doc, t) else {
        return inject_pod(doc, t, opts, notes);
    };
    let mut kept = before.clone();
    let mut kept_notes = Vec::new();
    let outcome = inject_pod(&mut kept, &small, opts, &mut kept_notes)?;
    let mut fresh = before;
    let was = fresh
        .pointer(&small.spec_pointer)
        .cloned()
        .unwrap_or_default();
    let fresh_opts = Options {
        mode: match again.form_asked {
            true => opts.mode,
            false => super::update::form(&was).unwrap_or(opts.mode),
        },
        events: opts.events || super::update::has_events(&was),
        ..opts.clone()
    };
    let mut fresh_notes = Vec::new();
    let warnings = (again.undo)(&mut fresh, &small)?;
    let fresh_outcome = match warnings.is_empty() {
        true => inject_pod(&mut fresh, &small, &fresh_opts, &mut fresh_notes).ok(),
        false => None,
    };
    let spec_of = |v: &Value| v.pointer(&small.spec_pointer).cloned().unwrap_or_default();
    let change = super::update::change(&spec_of(&kept), &spec_of(&fresh));
    let (taken, outcome) = match (change, fresh_outcome) {
        (Some(what), Some(Outcome::Injected)) => {
            if fresh_opts.mode != opts.mode {
                notes.push(format!(
                    "keeps its {} sidecar (`--sidecar` or `--kubernetes-version` moves it to the other form)",
                    mode_name(fresh_opts.mode)
                ));
            }
            notes.extend(fresh_notes);
            (fresh, Outcome::Updated(what))
        }
        // The form asked for cannot take the pod (a classic sidecar in a Job's): as inject on
        // the pod as it was, hooklog is not in it, and the notes say why.
        (Some(_), Some(Outcome::NotInjected)) => {
            notes.extend(fresh_notes);
            let what = "hooklog taken out: with these settings inject leaves the pod as it was";
            (fresh, Outcome::Updated(what.to_string()))
        }
        (change, _) => {
            notes.extend(kept_notes);
            if change.is_some() {
                notes.push(format!(
                    "hooklog's containers not updated to these settings: {}; run `hooklog uninject`, then inject",
                    match warnings.is_empty() {
                        true => "inject refuses the pod as it was".to_string(),
                        false => warnings.join("; "),
                    }
                ));
            }
            (kept, outcome)
        }
    };
    *doc.pointer_mut(&at).ok_or("no pod template")? = taken;
    Ok(outcome)
}

/// The sidecar's settings for one pod: its annotations over the install's (and the
/// namespace's). A bad one refuses the pod, naming it, before anything changes.
fn pod_settings(
    doc: &Value,
    t: &TemplateRef,
    opts: &Options,
    notes: &mut Vec<String>,
) -> Result<crate::sidecar_settings::Settings, String> {
    let install = crate::sidecar_settings::Settings {
        events: opts.settings.events || opts.events,
        ..opts.settings.clone()
    };
    let annotations = doc
        .pointer(&t.metadata_pointer)
        .and_then(|m| m.get("annotations"))
        .and_then(Value::as_object);
    let settings = crate::sidecar_settings::resolve(&install, annotations)?;
    notes.extend(crate::sidecar_settings::unknown(annotations));
    Ok(settings)
}

/// The sidecar's mode: a migrated forwarder's, else the installed sidecar's (said when it is not
/// the one asked for), else the one asked for.
fn pod_mode(
    installed: Option<&Installed>,
    migration: Option<&super::migrate::Plan>,
    requested: SidecarMode,
    notes: &mut Vec<String>,
) -> SidecarMode {
    let mode = match migration {
        Some(m) => super::migrate::mode(m, requested, notes),
        None => installed.map_or(requested, |i| i.mode),
    };
    if installed.is_some_and(|i| i.mode != requested) {
        notes.push(format!(
            "keeps its {} sidecar (`--sidecar` or `--kubernetes-version` moves it to the other form)",
            mode_name(mode)
        ));
    }
    mode
}

/// A pod injected before with no new hook to wire: said when it was injected. `--events` asked
/// for now is the one change to the sidecar an injected pod can take without uninject; the
/// binary's volume of its own (issue 37) the one change of layout.
fn nothing_new(
    doc: &mut Value,
    t: &TemplateRef,
    opts: &Options,
    notes: &mut Vec<String>,
) -> Result<Outcome, String> {
    let spec = doc.pointer_mut(&t.spec_pointer).ok_or("no pod spec")?;
    let moved = relayout(spec, notes)?;
    if opts.events && add_events(spec) {
        return Ok(Outcome::EventsAdded);
    }
    Ok(if moved {
        Outcome::Relaid
    } else {
        Outcome::AlreadyInjected
    })
}

/// Fits the hooks into the pod's grace period, and says which get a `--timeout`; `None` (said
/// why) when they do not fit: the pod is left unchanged rather than cut a hook short.
fn fit(
    spec: &Value,
    mode: SidecarMode,
    survey: &Survey,
    notes: &mut Vec<String>,
) -> Option<budget::Plan> {
    let period = Duration::from_secs(podspec::termination_grace_seconds(spec));
    let plan = match budget::plan(mode, survey.longest_known, survey.unknown, period) {
        Ok(p) => p,
        Err(unfit) => {
            notes.push(format!(
                "{unfit}: left unchanged rather than cut a hook short; raise terminationGracePeriodSeconds to at least {} to add hooklog (`hooklog check`: {})",
                unfit.needed(),
                budget::UNFIT_RULE
            ));
            return None;
        }
    };
    note_timeouts(survey, plan.timeout, period, notes);
    Some(plan)
}

/// Says which hooks get a `--timeout`, and why that one: nothing is cut before the kubelet would.
fn note_timeouts(
    survey: &Survey,
    timeout: Option<Duration>,
    period: Duration,
    notes: &mut Vec<String>,
) {
    let Some(timeout) = timeout else { return };
    let names: Vec<&str> = survey
        .wraps
        .iter()
        .filter(|w| w.known.is_none())
        .map(|w| w.container.as_str())
        .collect();
    if !names.is_empty() {
        notes.push(format!(
            "{}: preStop of unknown length, `--timeout {}`: {}s before the kubelet's own kill at terminationGracePeriodSeconds {}, to report its end",
            names.join(", "),
            secs(timeout),
            budget::REPORT_MARGIN.as_secs(),
            period.as_secs()
        ));
    }
}

fn mode_name(mode: SidecarMode) -> &'static str {
    match mode {
        SidecarMode::Native => "native",
        SidecarMode::Classic => "classic",
    }
}

/// Every container is a mapping and has a name of its own: a string (the API server requires
/// one, but a mutating webhook sees the pod before its schema is checked; inject finds the
/// containers it wires by name).
fn distinct_mappings(containers: &[Container]) -> Result<(), String> {
    let mut seen = std::collections::BTreeSet::new();
    for c in containers {
        if !c.value.is_object() {
            return Err(format!("{} is not a mapping", c.path));
        }
        match &c.value["name"] {
            Value::String(n) if !n.is_empty() => {}
            Value::String(_) => return Err(format!("{}.name is empty", c.path)),
            Value::Null => return Err(format!("{} has no name", c.path)),
            Value::Bool(_) | Value::Number(_) | Value::Array(_) | Value::Object(_) => {
                return Err(format!("{}.name is not a string", c.path));
            }
        }
        if !seen.insert(c.name.as_str()) {
            return Err(format!(
                "two containers are named {:?} ({})",
                c.name, c.path
            ));
        }
    }
    Ok(())
}

/// A pod not injected yet uses none of the names and paths inject adds.
fn free_names(containers: &[Container], spec: &Value) -> Result<(), String> {
    for c in containers {
        if c.name == SIDECAR || c.name == INSTALLER {
            return Err(format!(
                "a container named {:?} exists already ({}); hooklog inject adds one of that name and will not overwrite it",
                c.name, c.path
            ));
        }
        for m in c.mounts() {
            if m.path == MOUNT
                || m.path.starts_with(&format!("{MOUNT}/"))
                || m.path == BIN_MOUNT
                || m.path.starts_with(&format!("{BIN_MOUNT}/"))
                || m.path == PODINFO_MOUNT
            {
                return Err(format!(
                    "container {} mounts something at {}, where hooklog inject mounts its volume",
                    c.name, m.path
                ));
            }
        }
    }
    for v in spec["volumes"].as_array().into_iter().flatten() {
        if let Some(n) = v["name"]
            .as_str()
            .filter(|n| *n == VOLUME || *n == BIN_VOLUME || *n == PODINFO_VOLUME)
        {
            return Err(format!(
                "a volume named {n:?} exists already; hooklog inject adds one of that name and will not overwrite it"
            ));
        }
    }
    Ok(())
}

/// True for hooklog's own containers in an injected pod: its name and what it does.
pub(super) fn is_own(c: &Container) -> bool {
    (c.name == SIDECAR || c.name == INSTALLER) && container_hooklog_argv(c).is_some()
}

/// The sidecar of a pod injected before, and its mode; an error when its pieces are gone.
fn installed(containers: &[Container]) -> Result<Installed, String> {
    let installer = containers
        .iter()
        .any(|c| c.init && c.name == INSTALLER && is_own(c));
    let sidecar = containers.iter().find(|c| c.name == SIDECAR && is_own(c));
    match (installer, sidecar) {
        (true, Some(s)) => Ok(Installed {
            mode: if s.native_sidecar() {
                SidecarMode::Native
            } else {
                SidecarMode::Classic
            },
        }),
        _ => Err(format!(
            "annotation {ANNOTATION} says hooklog was injected, but its {INSTALLER:?} or {SIDECAR:?} container is gone: run `hooklog uninject` first"
        )),
    }
}

/// The containers whose preStop hooklog reports: the app containers, and in native mode the
/// native sidecars (hooklog starts before them and so stops after them). A classic hooklog
/// stops with the app containers, before any native sidecar's hook.
fn reported(c: &Container, mode: SidecarMode) -> bool {
    !is_own(c) && (!c.init || (c.native_sidecar() && mode == SidecarMode::Native))
}

/// Decides, container by container, what to wire and what bounds the shutdown.
fn survey(
    containers: &[Container],
    mode: SidecarMode,
    opts: &Options,
    notes: &mut Vec<String>,
) -> Survey {
    let mut s = Survey::default();
    for c in containers {
        if c.native_sidecar() && !is_own(c) && mode == SidecarMode::Classic {
            if let Some(Handler::Exec(_)) = pre_stop(c) {
                notes.push(format!(
                    "{}: a native sidecar's preStop, left unwrapped: it runs after a classic hooklog has stopped (a native hooklog wraps it, on 1.29+)",
                    c.name
                ));
            }
            continue;
        }
        if !reported(c, mode) {
            continue;
        }
        survey_container(c, opts, notes, &mut s);
    }
    for (name, _) in &opts.prestop_sleep {
        let Some(c) = containers.iter().find(|c| !c.init && c.name == *name) else {
            continue;
        };
        let ours = matches!(pre_stop(c), Some(Handler::Exec(a)) if own_prefix(&a).is_some());
        if pre_stop(c).is_some() && !ours {
            notes.push(format!(
                "{name}: has a preStop already, --prestop-sleep ignored"
            ));
        }
    }
    s
}

fn pre_stop(c: &Container) -> Option<Handler> {
    hooks::hooks(c)
        .into_iter()
        .find(|h| h.name == "preStop")
        .map(|h| h.handler)
}

/// One container's preStop: wired before, wired by hand, to wire now, or left with a note.
fn survey_container(c: &Container, opts: &Options, notes: &mut Vec<String>, s: &mut Survey) {
    let env = c.literal_env();
    let known = |s: &mut Survey, b: hooks::Bound| match b.max {
        Some(m) => s.longest_known = s.longest_known.max(m),
        None => {
            s.longest_known = s.longest_known.max(b.min);
            s.unknown = true;
        }
    };
    match pre_stop(c) {
        Some(Handler::Exec(argv)) if argv.is_empty() => notes.push(format!(
            "{}: preStop exec has no command, left as it is",
            c.name
        )),
        Some(Handler::Exec(argv)) => {
            if let Some((len, _)) = own_prefix(&argv) {
                // Wired by inject before: the command it wraps bounds the shutdown.
                known(s, hooks::bound(&Handler::Exec(argv[len..].to_vec()), &env));
                s.peers.push(c.name.clone());
                return;
            }
            if let Some(h) = wrapped(&argv, &env) {
                notes.push(format!(
                    "{}: preStop already runs `hooklog hook`, left as it is",
                    c.name
                ));
                s.peers.push(h.container);
                known(s, hooks::bound(&Handler::Exec(argv), &env));
                return;
            }
            let inner = proc_1_to_own_output(sleep_to_hooklog(&argv, notes, &c.name), notes, &c.name);
            let b = hooks::bound(&Handler::Exec(inner.clone()), &env);
            known(s, b);
            s.peers.push(c.name.clone());
            s.wraps.push(Wrap {
                container: c.name.clone(),
                init: c.init,
                original: Some(argv),
                inner,
                known: b.max,
            });
        }
        Some(Handler::Sleep(secs)) => {
            notes.push(format!(
                "{}: preStop is the native sleep action ({secs}s), left as it is: the kubelet runs it, there is no command to wrap",
                c.name
            ));
            s.longest_known = s.longest_known.max(Duration::from_secs(secs));
        }
        Some(Handler::HttpGet) | Some(Handler::TcpSocket) => notes.push(format!(
            "{}: preStop is an httpGet/tcpSocket call, left as it is: the kubelet makes it from outside the container, there is no command to wrap",
            c.name
        )),
        Some(Handler::Unknown) => notes.push(format!(
            "{}: preStop has no handler hooklog knows, left as it is",
            c.name
        )),
        None if !c.init => {
            if let Some((_, d)) = opts.prestop_sleep.iter().find(|(n, _)| *n == c.name) {
                let inner = vec![BIN.to_string(), "sleep".to_string(), d.clone()];
                let b = hooks::bound(&Handler::Exec(inner.clone()), &env);
                known(s, b);
                s.peers.push(c.name.clone());
                s.wraps.push(Wrap {
                    container: c.name.clone(),
                    init: false,
                    original: None,
                    inner,
                    known: b.max,
                });
            }
        }
        None => {}
    }
}

/// Wraps one container's preStop and mounts the shared volume; returns what uninject needs.
/// The container and its exec preStop are the survey's ([`distinct_mappings`] made names
/// unique strings); an error, not a panic, if they are not there.
fn wire(spec: &mut Value, w: &Wrap, timeout: Option<Duration>) -> Result<ContainerRecord, String> {
    let list = if w.init {
        "initContainers"
    } else {
        "containers"
    };
    let c = arr_mut(spec, list)
        .iter_mut()
        .find(|c| c["name"] == w.container.as_str())
        .ok_or_else(|| format!("{list}: container {:?} not found again", w.container))?;
    let mut rec = ContainerRecord::default();
    let mut command: Vec<Value> =
        prefix(&w.container, if w.known.is_some() { None } else { timeout })
            .into_iter()
            .map(Value::String)
            .collect();
    match &w.original {
        Some(original) => {
            let pre = c
                .pointer_mut("/lifecycle/preStop/exec")
                .and_then(Value::as_object_mut)
                .ok_or_else(|| format!("{}: its exec preStop not found again", w.container))?;
            let items = pre
                .get("command")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            // The original items stay as they were, with hooklog's in front: `sleep 15`
            // becomes `<prefix> /hooklog-bin/hooklog sleep 15`.
            match w.inner.len().checked_sub(original.len()) {
                Some(extra) if w.inner[extra..] == original[..] => {
                    command.extend(w.inner[..extra].iter().cloned().map(Value::String));
                    command.extend(items.iter().cloned());
                }
                _ => command.extend(w.inner.iter().cloned().map(Value::String)),
            }
            if w.inner != *original {
                rec.command = Some(Value::Array(items));
            }
            pre.insert("command".into(), Value::Array(command));
        }
        None => {
            command.extend(w.inner.iter().cloned().map(Value::String));
            match c.get("lifecycle") {
                None => rec.created.push("lifecycle".into()),
                // `preStop: ~` is no hook: put back as it was.
                Some(Value::Object(l)) if l.get("preStop").is_some_and(Value::is_null) => {
                    rec.replaced.insert("preStop".into(), Value::Null);
                }
                Some(Value::Object(_)) => rec.created.push("preStop".into()),
                Some(other) => {
                    rec.replaced.insert("lifecycle".into(), other.clone());
                }
            }
            obj_mut(c, "lifecycle").insert("preStop".into(), json!({"exec": {"command": command}}));
        }
    }
    match c.get("volumeMounts") {
        None => rec.created.push("volumeMounts".into()),
        Some(Value::Array(_)) => {}
        Some(other) => {
            rec.replaced.insert("volumeMounts".into(), other.clone());
        }
    }
    let mounts = arr_mut(c, "volumeMounts");
    if !mounts.iter().any(|m| m["name"] == VOLUME) {
        mounts.push(json!({"name": VOLUME, "mountPath": MOUNT}));
    }
    if !mounts.iter().any(|m| m["name"] == BIN_VOLUME) {
        mounts.push(json!({"name": BIN_VOLUME, "mountPath": BIN_MOUNT, "readOnly": true}));
    }
    Ok(rec)
}

/// An injected pod of the layout before issue 37 moved to the current one (what it wires
/// next calls the binary from its own volume); whether it was, said in `notes`.
fn relayout(spec: &mut Value, notes: &mut Vec<String>) -> Result<bool, String> {
    let moved = super::relayout::upgrade(spec, bin_volume())?;
    if moved {
        notes.push(super::relayout::NOTE.to_string());
    }
    Ok(moved)
}

/// The binary's emptyDir, which only the installer mounts writable.
fn bin_volume() -> Value {
    json!({"name": BIN_VOLUME, "emptyDir": {"sizeLimit": BIN_VOLUME_SIZE_LIMIT}})
}

/// Adds the installer, the sidecar and the volumes to a pod injected for the first time.
fn add_hooklog(
    spec: &mut Value,
    opts: &Options,
    settings: &crate::sidecar_settings::Settings,
    mode: SidecarMode,
    peers: &[String],
    grace: Duration,
    record: &mut Record,
) {
    // Keys inject fills: absent ones are created, ones of another type (`null`) replaced; both
    // are recorded so that uninject puts back exactly what was there.
    for key in ["initContainers", "containers", "volumes"] {
        match spec.get(key) {
            None => record.created.push(key.into()),
            Some(Value::Array(_)) => {}
            Some(other) => {
                record.replaced.insert(key.to_string(), other.clone());
            }
        }
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
    let sidecar = sidecar(&opts.image, mode, peers, grace, settings);
    // First among the init containers: hooklog is there before any other starts (a native
    // sidecar whose preStop it wraps included), and, a native sidecar, stops after them.
    match mode {
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
    volumes.push(bin_volume());
    volumes.push(json!({"name": PODINFO_VOLUME, "downwardAPI": {"items": [
        {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}},
        {"path": "annotations", "fieldRef": {"fieldPath": "metadata.annotations"}},
    ]}}));
}

/// A pod injected before: the sidecar's `--peers` and `--grace` values, changed in place.
/// The args of hooklog's sidecar in `spec`, if it has them.
fn sidecar_args(spec: &mut Value) -> Option<&mut Vec<Value>> {
    spec.as_object_mut()?
        .iter_mut()
        .filter(|(k, _)| *k == "initContainers" || *k == "containers")
        .filter_map(|(_, v)| v.as_array_mut())
        .flat_map(|l| l.iter_mut())
        .find(|c| c["name"] == SIDECAR)
        .and_then(super::migrate::run_line_mut)
}

/// Adds `--events` to hooklog's sidecar, last as [`sidecar`] puts it, unless it has it (or an
/// `--events=...` of its own, left as the user set it); returns whether it added it.
fn add_events(spec: &mut Value) -> bool {
    let Some(args) = sidecar_args(spec) else {
        return false;
    };
    let has = args
        .iter()
        .filter_map(Value::as_str)
        .any(|a| a == "--events" || a.starts_with("--events="));
    if !has {
        let at = super::migrate::end_of_flags(args);
        args.insert(at, Value::String("--events".into()));
    }
    !has
}

fn update_sidecar(spec: &mut Value, peers: &[String], grace: Duration) {
    let Some(args) = sidecar_args(spec) else {
        return;
    };
    let mut set =
        |flag: &str, value: String, before: Option<&str>| match args.iter().position(|a| a == flag)
        {
            Some(i) if i + 1 < args.len() => {
                if args[i + 1] != value.as_str() {
                    args[i + 1] = Value::String(value);
                }
            }
            _ => {
                let at = before
                    .and_then(|b| args.iter().position(|a| a == b))
                    .unwrap_or_else(|| super::migrate::end_of_flags(args));
                args.insert(at, Value::String(value));
                args.insert(at, Value::String(flag.to_string()));
            }
        };
    set("--peers", peers.join(","), Some("--grace"));
    set("--grace", secs(grace), Some("--native-sidecar"));
}

/// Writes the record into the pod's annotations, creating what is missing (and recording
/// that it did).
fn write_record(doc: &mut Value, t: &TemplateRef, record: &mut Record) -> Result<(), String> {
    let parent = metadata_parent(doc, t).ok_or("no place for the pod's metadata")?;
    let fresh = parent["metadata"]["annotations"].get(ANNOTATION).is_none();
    if fresh {
        match parent.get("metadata") {
            None => record.created.push("metadata".into()),
            Some(Value::Object(_)) => {}
            Some(other) => {
                record.replaced.insert("metadata".into(), other.clone());
            }
        }
    }
    let meta = obj_mut(parent, "metadata");
    if fresh {
        match meta.get("annotations") {
            None => record.created.push("annotations".into()),
            Some(Value::Object(_)) => {}
            Some(other) => {
                record.replaced.insert("annotations".into(), other.clone());
            }
        }
    }
    let text = serde_json::to_string(record).map_err(|e| e.to_string())?;
    let annotations = meta
        .entry("annotations".to_string())
        .or_insert_with(|| json!({}));
    if !annotations.is_object() {
        *annotations = json!({});
    }
    annotations
        .as_object_mut()
        .expect("just made a mapping")
        .insert(ANNOTATION.to_string(), Value::String(text));
    Ok(())
}

/// What inject makes of a hook's command before wrapping it (`sleep N` to `hooklog sleep N`,
/// PID 1's output to the hook's own); uninject compares against it to see later edits.
pub(super) fn rewrite(argv: &[String], container: &str) -> Vec<String> {
    let mut notes = Vec::new();
    proc_1_to_own_output(
        sleep_to_hooklog(argv, &mut notes, container),
        &mut notes,
        container,
    )
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
        // The only writable mount of the binary's volume.
        "volumeMounts": [{"name": BIN_VOLUME, "mountPath": BIN_MOUNT}],
    })
}

fn sidecar(
    image: &str,
    mode: SidecarMode,
    peers: &[String],
    grace: Duration,
    settings: &crate::sidecar_settings::Settings,
) -> Value {
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
    args.extend(settings.run_args());
    let mut env: Vec<Value> = [
        ("POD_NAME", "metadata.name"),
        ("POD_NAMESPACE", "metadata.namespace"),
        ("POD_UID", "metadata.uid"),
        ("POD_IP", "status.podIP"),
        ("NODE_NAME", "spec.nodeName"),
    ]
    .iter()
    .map(|(n, f)| json!({"name": n, "valueFrom": {"fieldRef": {"fieldPath": f}}}))
    .collect();
    env.extend(settings.env_entries());
    let mut c = Map::new();
    c.insert("name".into(), json!(SIDECAR));
    c.insert("image".into(), json!(image));
    if mode == SidecarMode::Native {
        c.insert("restartPolicy".into(), json!("Always"));
    }
    c.insert("args".into(), json!(args));
    c.insert("env".into(), json!(env));
    // By default as k8s/: measured 2.0 MiB idle, 2.3 MiB and ~35 millicores at 10,000 lines/s
    // (docs/fargate.md; `sidecar_settings::DEFAULT_*`).
    c.insert("resources".into(), settings.resources());
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::uninject::uninject;

    fn opts() -> Options {
        Options {
            image: "registry.example.com/hooklog:0.1.0".into(),
            mode: SidecarMode::Native,
            prestop_sleep: vec![("web".into(), "10s".into())],
            events: false,
            settings: Default::default(),
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
                "/hooklog-bin/hooklog",
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
            "/hooklog-bin/hooklog",
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

    /// Malformed pod specs never panic check, inject or uninject; an injected one undoes. Every
    /// case reaches the assertion that nothing panicked; the round trip runs in about a fifth.
    #[test]
    fn arbitrary_pod_specs_never_panic() {
        use proptest::prelude::*;
        let strategy = (
            value(),
            proptest::collection::vec(proptest::prop_oneof![value(), container()], 0..4),
        );
        crate::testkit::property(
            file!(),
            "arbitrary_pod_specs_never_panic",
            256,
            1.0,
            strategy,
            |(spec, containers), reach| {
                let mut spec = spec;
                if let Value::Object(m) = &mut spec {
                    m.insert("containers".into(), Value::Array(containers));
                }
                let original = json!({"kind": "Deployment", "metadata": {"name": "d"}, "spec": {"template": {"spec": spec}}});
                let source = crate::manifest::load::parse(
                    "p.yaml",
                    crate::yaml::emit::to_yaml(&original),
                )
                .map_err(|e| TestCaseError::fail(format!("to_yaml does not read back: {e}")))?;
                crate::manifest::check::check(&[source], &Default::default());
                let mut doc = original.clone();
                if inject(&mut doc, &opts()).is_ok() {
                    uninject(&mut doc).map_err(|e| TestCaseError::fail(e.to_string()))?;
                    prop_assert_eq!(doc, original);
                }
                reach.reached();
                Ok(())
            },
        );
    }

    /// The check rules that say hooklog's own wiring is wrong: inject must never add one (a hook
    /// that called hooklog unmounted before may still). (`hook-not-reported` may stay: a native sidecar's preStop beside a classic hooklog
    /// is left unwrapped on purpose.)
    const WIRING_RULES: [&str; 8] = [
        "hooklog-binary-not-mounted",
        "hooklog-binary-not-installed",
        "hooklog-path-not-shared",
        "hooklog-sidecar-missing",
        "hook-container-name-mismatch",
        "sidecar-downward-api-missing",
        "hooklog-command-invalid",
        "hooklog-mount-over-image-path",
    ];

    /// Workloads in the shapes real manifests have (every kind with a pod template, containers
    /// with each kind of hook, init and native sidecars, grace periods from 0 to an hour), read
    /// from YAML text with a comment: `check`'s findings name lines of the file and containers of
    /// the pod; injected through the text splicer (as `hooklog inject` writes it), the comment is
    /// kept, the text reads back as inject's document, `check` finds nothing newly wrong with
    /// hooklog's wiring in it, injecting again changes nothing, and uninject gives the original back.
    #[test]
    fn realistic_workloads_inject_through_the_text_and_undo() {
        use proptest::prelude::*;
        let strategy = (crate::testkit::workload(), any::<bool>());
        // Inject leaves a workload as it was when its grace period is too short for its hooks,
        // or has nothing to wire: measured 169 of 258 cases change.
        crate::testkit::property(
            file!(),
            "realistic_workloads_inject_through_the_text_and_undo",
            256,
            0.5,
            strategy,
            |(original, native), reach| {
                let fail = |what: &str, e: String| TestCaseError::fail(format!("{what}: {e}"));
                let text = format!(
                    "# the shop's workload\n{}",
                    crate::yaml::emit::to_yaml(&original)
                );
                let lines = text.lines().count();
                let parse = |t: &str| {
                    crate::manifest::load::parse("p.yaml", t.to_string())
                        .map_err(|e| fail("does not read", e.to_string()))
                };
                let source = parse(&text)?;
                prop_assert_eq!(&source.documents[0].value, &original);
                let names: Vec<String> = ["containers", "initContainers"]
                    .iter()
                    .flat_map(|f| {
                        let spec = pod_spec_of(&original);
                        spec[*f].as_array().cloned().unwrap_or_default()
                    })
                    .filter_map(|c| c["name"].as_str().map(str::to_string))
                    .collect();
                let wiring = |findings: Vec<crate::manifest::check::Finding>| -> Vec<String> {
                    findings
                        .into_iter()
                        .filter(|f| WIRING_RULES.contains(&f.rule))
                        .map(|f| format!("{} ({:?}): {}", f.rule, f.container, f.message))
                        .collect()
                };
                let findings = crate::manifest::check::check(&[source], &Default::default());
                for f in &findings {
                    prop_assert!(
                        (1..=lines).contains(&f.line),
                        "{} at line {} of {}",
                        f.rule,
                        f.line,
                        lines
                    );
                    if let Some(c) = &f.container {
                        prop_assert!(
                            names.contains(c),
                            "{} names {:?}, not in {:?}",
                            f.rule,
                            c,
                            names
                        );
                    }
                }
                let opts = Options {
                    mode: if native {
                        SidecarMode::Native
                    } else {
                        SidecarMode::Classic
                    },
                    ..opts()
                };
                let mut doc = original.clone();
                inject(&mut doc, &opts).map_err(|e| fail("inject", e.to_string()))?;
                if doc == original {
                    return Ok(());
                }
                let source = parse(&text)?;
                let (out, _notes) =
                    crate::manifest::transform::rewrite(&source, std::slice::from_ref(&doc))
                        .map_err(|e| fail("the splicer", e))?;
                prop_assert!(
                    out.starts_with("# the shop's workload\n"),
                    "the comment is gone: {}",
                    out
                );
                let back = parse(&out)?;
                prop_assert_eq!(&back.documents[0].value, &doc);
                let before = wiring(findings);
                let wrong: Vec<String> =
                    wiring(crate::manifest::check::check(&[back], &Default::default()))
                        .into_iter()
                        .filter(|f| !before.contains(f))
                        .collect();
                prop_assert!(
                    wrong.is_empty(),
                    "check finds inject's wiring wrong: {:?}\n{}",
                    wrong,
                    out
                );
                let once = doc.clone();
                inject(&mut doc, &opts).map_err(|e| fail("inject again", e.to_string()))?;
                prop_assert_eq!(&doc, &once, "injecting again changed it");
                uninject(&mut doc).map_err(|e| fail("uninject", e.to_string()))?;
                prop_assert_eq!(doc, original);
                reach.reached();
                Ok(())
            },
        );
    }

    /// The pod spec of a generated workload (a Pod's, a template's, a CronJob's job's).
    fn pod_spec_of(doc: &Value) -> &Value {
        match doc["kind"].as_str() {
            Some("Pod") => &doc["spec"],
            Some("CronJob") => &doc["spec"]["jobTemplate"]["spec"]["template"]["spec"],
            _ => &doc["spec"]["template"]["spec"],
        }
    }

    #[test]
    fn an_existing_name_is_an_error() {
        let mut doc = json!({"kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{"name": "hooklog"}]}});
        let e = inject(&mut doc, &opts()).unwrap_err();
        assert!(e.to_string().contains("exists already"), "{e}");
    }
}
