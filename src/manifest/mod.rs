//! (the control plane) Manifests, offline: `hooklog check` finds broken lifecycle hooks before deploy, `hooklog
//! inject` / `uninject` add and remove hooklog in a pipe. Nothing here touches the daemon.
//!
//! [`adoption`] is the one rule of which pods get hooklog, in which form (inject, the webhook
//! and check share it). [`load`] reads YAML and JSON into generic value trees (unknown fields and their order
//! survive), [`podspec`] finds pod templates and their field paths, [`hooks`] reads what a hook
//! does (with hooklog's own parser for hooklog command lines), [`budget`] holds the shutdown
//! inequalities, [`layout`] names hooklog's pieces in a pod, [`check`] the rules, [`report`]
//! text/JSON/SARIF, [`inject`] and [`uninject`], [`image_notes`] what inject says on stderr
//! from the images (never in its output). [`tree`] reads YAML as Kubernetes does, with
//! every node's place in the text, [`splice`] writes a change back into that text, [`spool`]
//! holds inject's and uninject's output until it all reads back ([`digest`] what it compares),
//! [`emit`] YAML that YAML 1.1 readers (kubectl, Helm) read the same.

pub mod adoption;
pub mod budget;
pub mod check;
mod digest;
pub mod emit;
pub mod hooks;
pub mod image_notes;
pub mod inject;
pub mod layout;
pub mod load;
pub mod number;
pub mod podspec;
pub mod report;
pub mod splice;
pub mod spool;
pub mod tree;
pub mod uninject;
#[cfg(test)]
mod whole;

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;

use crate::cli::{CheckArgs, CheckFormat, ImageArgs, InjectArgs, Platform, SidecarKind};

/// Usage error or input that does not parse (BSD sysexits EX_USAGE), as for the other
/// subcommands.
pub const EXIT_USAGE: u8 = 64;
/// `check` found something at or above `--fail-on`.
pub const EXIT_FINDINGS: u8 = 1;
/// `check --require-image` could not read an image (BSD sysexits EX_UNAVAILABLE).
pub const EXIT_UNAVAILABLE: u8 = 69;

/// A fatal error of `check`, `inject` or `uninject` on stderr, in `--log-format`
/// ([`crate::cli::fatal`]).
fn error_line(message: &str) {
    crate::cli::fatal(message);
}

/// Writes `text` to stdout; a reader that went away (`| head`) is not an error.
fn write_stdout(text: &str) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|_| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other,
    }
}

/// `hooklog check`: returns the exit code.
pub fn check_command(args: CheckArgs) -> u8 {
    if args.list_rules {
        let text = match args.format {
            CheckFormat::Json => format!("{:#}\n", report::rules_json()),
            _ => report::rules_text(),
        };
        return match write_stdout(&text) {
            Ok(()) => 0,
            Err(e) => {
                error_line(&format!("cannot write the rules: {e}"));
                EXIT_FINDINGS
            }
        };
    }
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    let control = match check::control::resolve(
        args.include.as_deref(),
        args.exclude.as_deref(),
        args.fail_on,
        args.config.as_deref(),
        &cwd,
    ) {
        Ok(c) => c,
        Err(e) => {
            error_line(&e);
            return EXIT_USAGE;
        }
    };
    let mut opts = check::Options {
        fargate: args.platform == Some(Platform::Fargate),
        kubernetes_version: args.kubernetes_version,
        ..Default::default()
    };
    if args.no_default_shell_less {
        opts.shell_less.0.clear();
    }
    opts.shell_less
        .0
        .extend(args.shell_less_images.iter().cloned());
    opts.image_platform = args.images.image_platform;
    match image_roots(&args.images) {
        Ok(roots) => opts.image_roots = roots,
        Err(code) => return code,
    }
    // Every input is checked that can be: one that cannot (unreadable, not YAML, a Helm
    // chart, a folder without manifests) is one line on stderr, and exit 64 at the end.
    let survey = survey(load::read_each(&args.paths), &opts);
    for e in &survey.errors {
        error_line(e);
    }
    for note in &survey.notes {
        eprintln!("{note}");
    }
    let then = if args.require_image {
        "--require-image: exit 69"
    } else {
        "checked by its name's patterns"
    };
    let (images, unreadable) = read_images(&survey.wanted, &args.images, then);
    opts.images = images;
    let findings = check_surveyed(&survey, &opts, |f| control.selection.keeps(f.rule));
    let (templates, unloadable) = (survey.templates, survey.errors.len());
    let text = match args.format {
        // Nothing read, nothing checked: no `0 error(s)` summary beside the error (issue 41).
        CheckFormat::Text if unloadable > 0 && templates == 0 && findings.is_empty() => {
            String::new()
        }
        CheckFormat::Text => {
            let colour = std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none();
            report::text(&findings, templates, colour)
        }
        CheckFormat::Json => format!("{:#}\n", report::json(&findings, templates)),
        CheckFormat::Sarif => format!("{:#}\n", report::sarif(&findings)),
    };
    if let Err(e) = write_stdout(&text) {
        error_line(&format!("cannot write the report: {e}"));
        return EXIT_FINDINGS;
    }
    // An input that could not be read, or an image under --require-image, makes the check
    // incomplete: that outranks its findings.
    if unloadable > 0 {
        EXIT_USAGE
    } else if unreadable > 0 && args.require_image {
        EXIT_UNAVAILABLE
    } else if findings
        .iter()
        .any(|f| check::control::counts_for_fail(f, control.fail_on))
    {
        EXIT_FINDINGS
    } else {
        0
    }
}

/// What `check` learns of its inputs before it checks any document: the inputs that read (their
/// text, to be read again document by document), what could not be read, and the facts that
/// come from the whole stream. Each input is read one document (or List item) at a time and
/// nothing of a document is kept but these (issue 24 §4).
#[derive(Debug)]
pub(crate) struct Survey {
    pub inputs: Vec<load::Input>,
    /// One line per input that cannot be read (unreadable, not YAML, a Helm chart, a folder
    /// without manifests), in order.
    pub errors: Vec<String>,
    /// What was left out of the inputs that read, one line each.
    pub notes: Vec<String>,
    /// How many pod templates the inputs that read hold.
    pub templates: usize,
    /// The images the image rules look in ([`check::wanted_images`]).
    pub wanted: Vec<(String, crate::registry::Arch)>,
    /// The namespaces opted in to the webhook.
    pub opted_in: std::collections::BTreeSet<String>,
    /// The service accounts the inputs' RBAC lets create events.
    pub grants: check::events::Grants,
}

/// Reads every input once, for [`Survey`]; an input that does not read adds nothing but its
/// error, as when each was read whole.
pub(crate) fn survey(
    inputs: Vec<Result<load::Input, load::LoadError>>,
    opts: &check::Options,
) -> Survey {
    let mut survey = Survey {
        inputs: Vec::new(),
        errors: Vec::new(),
        notes: Vec::new(),
        templates: 0,
        wanted: Vec::new(),
        opted_in: Default::default(),
        grants: Default::default(),
    };
    let mut wanted = std::collections::BTreeSet::new();
    let mut rbac_all = Vec::new();
    let mut objects = 0;
    for input in inputs {
        let input = match input {
            Ok(input) => input,
            Err(e) if e.is_note() => {
                survey.notes.push(e.to_string());
                continue;
            }
            Err(e) => {
                survey.errors.push(e.to_string());
                continue;
            }
        };
        let (mut templates, mut images, mut opted_in) = (0, Default::default(), Default::default());
        let mut rbac = Vec::new();
        let read = input.each_part(|part| {
            let (load::Part::Item { doc: d, .. } | load::Part::Document { doc: d, .. }) = part;
            objects += usize::from(d.value.is_object());
            check::summarize(
                &d.value,
                opts,
                &mut templates,
                &mut images,
                &mut opted_in,
                &mut rbac,
            )
        });
        match read {
            Ok(notes) => {
                survey.notes.extend(notes);
                survey.templates += templates;
                wanted.append(&mut images);
                survey.opted_in.append(&mut opted_in);
                rbac_all.append(&mut rbac);
                survey.inputs.push(input);
            }
            Err(e) => survey.errors.push(e.to_string()),
        }
    }
    if survey.errors.is_empty() {
        survey.errors = nothing_to_check(survey.inputs.iter().map(|i| i.name.as_str()), objects);
    }
    survey.wanted = wanted.into_iter().collect();
    survey.grants = check::events::grants_of(&rbac_all);
    survey
}

/// Nothing at all to check (an empty file, only comments, an empty pipe: `helm template`
/// failed before `|`) is an error, as a folder without manifests is: a check of nothing must
/// not pass. One line for each input read, when together they hold no object.
pub(crate) fn nothing_to_check<'a>(
    names: impl Iterator<Item = &'a str>,
    objects: usize,
) -> Vec<String> {
    nothing_to("check", names, objects)
}

/// [`nothing_to_check`] for any command: `verb` is what there is nothing to do (`inject`: an
/// empty pipe injected "successfully" let a pipeline apply nothing, issue 41).
pub(crate) fn nothing_to<'a>(
    verb: &str,
    names: impl Iterator<Item = &'a str>,
    objects: usize,
) -> Vec<String> {
    if objects > 0 {
        return Vec::new();
    }
    names
        .map(|name| {
            let hint = if name == "-" {
                "; did the command before `|` fail?"
            } else {
                ""
            };
            format!("{name}: no objects in it (empty, or only comments): nothing to {verb}{hint}")
        })
        .collect()
}

/// Checks every document of the surveyed inputs, each read again and dropped once checked;
/// keeps the findings `keep` selects.
pub(crate) fn check_surveyed(
    survey: &Survey,
    opts: &check::Options,
    keep: impl Fn(&check::Finding) -> bool,
) -> Vec<check::Finding> {
    let mut findings = Vec::new();
    for input in &survey.inputs {
        // It read once: it reads the same again.
        let _ = input.each_part(|part| {
            let (load::Part::Item { doc: d, .. } | load::Part::Document { doc: d, .. }) = part;
            findings.extend(
                check::check_document(&input.name, &d, &survey.opted_in, &survey.grants, opts)
                    .into_iter()
                    .filter(&keep),
            )
        });
    }
    findings
}

/// Opens each `--image-root`; one that cannot be opened is a usage error, said on stderr.
fn image_roots(args: &ImageArgs) -> Result<BTreeMap<String, check::image::ImageRoot>, u8> {
    let mut roots = BTreeMap::new();
    for (image, path) in &args.image_roots {
        match check::image::ImageRoot::open(path) {
            Ok(root) => {
                roots.insert(image.clone(), root);
            }
            Err(e) => {
                error_line(&format!("--image-root {image}={}: {e}", path.display()));
                return Err(EXIT_USAGE);
            }
        }
    }
    Ok(roots)
}

/// The images read from their registries, by `(reference, arch)`, or why each could not be.
pub type Images = BTreeMap<(String, crate::registry::Arch), Result<crate::registry::Image, String>>;

/// Reads `wanted` from their registries (none with `--offline`), with a one-line note on
/// stderr for each that cannot be read, ending in `then` (what happens instead). Returns the
/// answers and how many could not be read.
fn read_images(
    wanted: &[(String, crate::registry::Arch)],
    args: &ImageArgs,
    then: &str,
) -> (Images, usize) {
    let mut images = Images::new();
    if args.offline {
        return (images, 0);
    }
    let settings = crate::registry::Settings {
        insecure: args.insecure_registries.clone(),
        cache: crate::registry::cache::Cache::from_env(),
        deadline: args.image_timeout,
    };
    let mut unreadable = 0;
    for ((image, arch), result) in crate::registry::read_images(wanted, &settings) {
        if let Err(why) = &result {
            unreadable += 1;
            eprintln!(
                "hooklog: note: cannot read image {image} (linux/{}): {why}; {then}",
                arch.as_str()
            );
        }
        images.insert((image, arch), result);
    }
    (images, unreadable)
}

/// `hooklog inject` (and `inject --undo`): returns the exit code.
pub fn inject_command(args: InjectArgs) -> u8 {
    if args.undo {
        return uninject_command(&args.paths);
    }
    let Some(image) = args.image else {
        error_line("inject needs --image (or HOOKLOG_INJECT_IMAGE): the hooklog image to run");
        return EXIT_USAGE;
    };
    let requested = args.sidecar.map(|s| match s {
        SidecarKind::Native => budget::SidecarMode::Native,
        SidecarKind::Classic => budget::SidecarMode::Classic,
    });
    let mode = match inject::sidecar_mode(requested, args.kubernetes_version) {
        Ok(m) => m,
        Err(e) => {
            error_line(&e.to_string());
            return EXIT_USAGE;
        }
    };
    let roots = match image_roots(&args.images) {
        Ok(r) => r,
        Err(code) => return code,
    };
    let opts = inject::Options {
        image,
        mode,
        prestop_sleep: args.prestop_sleep,
        events: args.events,
    };
    let events = args.events;
    let mut lookup = check::Options {
        image_roots: roots,
        image_platform: args.images.image_platform,
        ..Default::default()
    };
    // `--sidecar classic` asked for on a cluster that runs native sidecars (its version given):
    // a pod it cannot take is an error, not a pod silently shipped uninjected (issue 41).
    let classic_asked = args.sidecar == Some(SidecarKind::Classic)
        && args.kubernetes_version.is_some()
        && inject::sidecar_mode(None, args.kubernetes_version) == Ok(budget::SidecarMode::Native);
    let mut wanted = std::collections::BTreeSet::new();
    let inputs = match transform_command(
        "inject",
        &args.paths,
        |doc| {
            let lines = inject::inject(doc, &opts)?;
            match lines
                .iter()
                .find(|l| l.contains(adoption::CLASSIC_NEVER_ENDS))
            {
                Some(note) if classic_asked => Err(classic_blocks(doc, note)),
                _ => Ok(lines),
            }
        },
        |before, after| {
            wanted.extend(image_notes::wanted_images(&[(before, after)], &lookup));
        },
    ) {
        Ok(inputs) => inputs,
        Err(code) => return code,
    };
    let wanted: Vec<_> = wanted.into_iter().collect();
    let then = "inject says nothing about its hooks";
    lookup.images = read_images(&wanted, &args.images, then).0;
    // The notes need each document's pods before and after: read again, one at a time, only
    // when an image can say something.
    let images_say = !lookup.image_roots.is_empty() || lookup.images.values().any(Result::is_ok);
    for input in inputs.iter().filter(|_| images_say) {
        // It read once: it reads the same again, and inject did not fail on it.
        let _ = input.each_part(|part| {
            let (load::Part::Item { doc, .. } | load::Part::Document { doc, .. }) = part;
            let mut after = doc.value.clone();
            if inject::inject(&mut after, &opts).is_ok() {
                for line in image_notes::notes(&[(&doc.value, &after)], &lookup) {
                    eprintln!("{line}");
                }
            }
        });
    }
    if events {
        eprintln!("hooklog: --events: {}", inject::EVENTS_RBAC);
    }
    0
}

/// The error for a pod `--sidecar classic` leaves uninjected that a native sidecar would take:
/// the flag is the blocker, not the cluster's version.
fn classic_blocks(doc: &serde_json::Value, note: &str) -> inject::InjectError {
    let text = |v: &serde_json::Value| v.as_str().map(str::to_string);
    inject::InjectError {
        object: podspec::ObjectRef {
            kind: text(&doc["kind"]).unwrap_or_default(),
            namespace: text(&doc["metadata"]["namespace"]),
            name: text(&doc["metadata"]["name"]).unwrap_or_default(),
        },
        why: format!(
            "--sidecar classic cannot inject it ({}); leave --sidecar out for the native sidecar, which the cluster's version runs",
            note.trim()
                .split(": a native sidecar")
                .next()
                .unwrap_or_default()
        ),
    }
}

/// `hooklog uninject`: returns the exit code.
pub fn uninject_command(paths: &[PathBuf]) -> u8 {
    match transform_command("uninject", paths, uninject::uninject, |_, _| {}) {
        Ok(_) => 0,
        Err(code) => code,
    }
}

/// A document transform: [`inject::inject`] or [`uninject::uninject`].
type Change<'a> =
    dyn FnMut(&mut serde_json::Value) -> Result<Vec<String>, inject::InjectError> + 'a;

/// Runs [`transform`] on `paths` and writes what it made: the manifests to stdout, the report
/// to stderr. Returns the inputs (for a second look) or the exit code of a failure.
fn transform_command(
    verb: &str,
    paths: &[PathBuf],
    mut f: impl FnMut(&mut serde_json::Value) -> Result<Vec<String>, inject::InjectError>,
    mut observe: impl FnMut(&serde_json::Value, &serde_json::Value),
) -> Result<Vec<load::Input>, u8> {
    let mut objects = 0;
    let mut counted = |doc: &mut serde_json::Value| {
        objects += usize::from(doc.is_object());
        f(doc)
    };
    let mut made = match transform(load::read_each(paths), &mut counted, &mut observe) {
        Ok(made) => made,
        Err(e) => {
            error_line(&e.to_string());
            return Err(EXIT_USAGE);
        }
    };
    // Nothing to change is a usage error, as for `check`: said before anything is written.
    let nothing = nothing_to(verb, made.inputs.iter().map(|i| i.name.as_str()), objects);
    if !nothing.is_empty() {
        for line in &nothing {
            error_line(line);
        }
        return Err(EXIT_USAGE);
    }
    let mut stdout = std::io::stdout().lock();
    match made.out.copy_to(&mut stdout).and_then(|_| stdout.flush()) {
        // A reader that went away (`| head`) is not an error.
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            error_line(&format!("cannot write the manifests: {e}"));
            return Err(EXIT_FINDINGS);
        }
        _ => {}
    }
    for line in &made.report {
        eprintln!("{line}");
    }
    Ok(made.inputs)
}

/// What [`transform`] made: every input written back, the report, and the inputs read.
#[derive(Debug)]
pub(crate) struct Transformed {
    /// Every input written back, in order, with `---` between them: in a temporary file, not
    /// in memory (inject's output is about 5 times its input, issue 24 §4).
    pub out: spool::Spool,
    pub report: Vec<String>,
    pub inputs: Vec<load::Input>,
}

/// Why an input is not written back as it was edited.
enum NotApplied {
    /// The edit cannot be made in place (said in the report; the input is written anew).
    Edit(String),
    /// The temporary file failed: nothing is written.
    Spool(std::io::Error),
}

fn spool_error(e: std::io::Error) -> String {
    format!("cannot write the manifests to a temporary file: {e}")
}

/// One input's place in the output: where its text starts (past the `---` before it), once any
/// of it is written.
struct Place {
    /// The output's length before this input: what a failed edit goes back to.
    before: u64,
    start: Option<u64>,
}

impl Place {
    fn new(out: &spool::Spool) -> Place {
        Place {
            before: out.len(),
            start: None,
        }
    }

    /// Writes `text`, the next piece of this input's output; before its first piece, the
    /// separator from the inputs before, as when the outputs were joined whole: a line break
    /// if the last did not end with one, and `---` unless this one starts with it.
    fn put(&mut self, out: &mut spool::Spool, text: &str) -> std::io::Result<()> {
        if self.start.is_none() {
            if !out.is_empty() {
                if !out.ends_with_newline() {
                    out.push("\n")?;
                }
                if !text.starts_with("---") {
                    out.push("---\n")?;
                }
            }
            self.start = Some(out.len());
        }
        out.push(text)
    }

    /// Takes back all this input wrote, separator included.
    fn undo(&mut self, out: &mut spool::Spool) -> std::io::Result<()> {
        self.start = None;
        out.truncate(self.before)
    }
}

/// Applies `f` to each document of every input and writes every input back with only the
/// changed parts rewritten ([`splice`]), with the report (what `f` says and what could not be
/// edited in place); `observe` sees each document before and after. Nothing is made when any
/// input or document fails: the error is the first input that cannot be read, else the first
/// document `f` refuses (as when every input was read whole before any was changed).
///
/// Each input is read one document at a time, a `kind: *List` one item at a time (read, changed,
/// its edits written into the output by [`splice::Applier`], dropped), and the output goes to a
/// temporary file ([`spool`]) a piece at a time: what is held is the input's text and one
/// document or item, not a value tree of every document nor the output (issue 24 §4). A List
/// whose items cannot be edited each on its own is read again, its items' edits made as one
/// ([`Mode::Shared`]), then whole; a last read writes the input anew when it cannot be edited
/// in place.
pub(crate) fn transform(
    inputs: Vec<Result<load::Input, load::LoadError>>,
    f: &mut Change,
    observe: &mut Observe,
) -> Result<Transformed, String> {
    let mut out = spool::Spool::new();
    let mut report = Vec::new();
    let mut read = Vec::new();
    // The first document `f` refused: reported only if every input reads.
    let mut refused: Option<String> = None;
    for input in inputs {
        let input = input.map_err(|e| e.to_string())?;
        let mut place = Place::new(&out);
        let mut edited = edit_input(
            &input,
            Mode::Split,
            f,
            Some(&mut *observe),
            &mut out,
            &mut place,
            &mut refused,
        )?;
        if refused.is_some() {
            continue;
        }
        // An edit of a List's item that cannot be made on its own (inside an anchor that
        // another item names, say) is made in the List: its items' edits as one splice, else
        // the List read whole as before Lists were read an item at a time.
        let redo = std::mem::take(&mut edited.redo);
        for mode in [Mode::Shared(&redo), Mode::Whole] {
            let retry = matches!(&edited.written, Err(NotApplied::Edit(_))) && edited.split;
            if !retry || matches!(mode, Mode::Shared(set) if set.is_empty()) {
                continue;
            }
            place.undo(&mut out).map_err(spool_error)?;
            edited = edit_input(&input, mode, f, None, &mut out, &mut place, &mut refused)?;
        }
        report.extend(edited.notes);
        report.extend(edited.lines);
        match edited.written {
            Ok(()) => {
                report.extend(
                    edited
                        .placed
                        .into_iter()
                        .map(|n| format!("  {}:{n}", input.name)),
                );
            }
            Err(NotApplied::Spool(e)) => return Err(spool_error(e)),
            Err(NotApplied::Edit(why)) => {
                // Meaning first: the whole input written anew, and said so.
                report.push(format!(
                    "hooklog: {}: could not edit in place ({why}); written anew, comments and layout not kept",
                    input.name
                ));
                place
                    .undo(&mut out)
                    .and_then(|_| place.put(&mut out, &written_anew(&input, f)))
                    .map_err(spool_error)?;
            }
        }
        read.push(input);
    }
    if let Some(e) = refused {
        return Err(e);
    }
    Ok(Transformed {
        out,
        report,
        inputs: read,
    })
}

/// What [`edit_list`] made of a List.
enum ListEdited {
    Made {
        lines: Vec<String>,
        /// Its edits, or why they cannot be made in place.
        edits: Result<Vec<splice::Edit>, String>,
        notes: Vec<String>,
        /// The digest of the List changed.
        digest: u128,
    },
    /// `f` refused one of its items (said in `refused`).
    Refused,
}

/// `doc`, when it is a `kind: *List` read whole, changed by `f` an item at a time and its
/// edits made as the whole List's ([`splice::ListEdits`]): held are its trees (read whole, since
/// its items share anchors) and its edits, never the List changed beside it (inject's output is
/// about 5 times its input). Any other document is given back.
fn edit_list(
    input: &load::Input,
    mut doc: load::Document,
    f: &mut Change,
    refused: &mut Option<String>,
) -> Result<ListEdited, Box<load::Document>> {
    use serde_json::Value;
    let is_list = doc.value["kind"]
        .as_str()
        .is_some_and(|k| k.ends_with("List"));
    let count = root_items(&doc.node).and_then(|n| match &n.kind {
        tree::Kind::Seq { items, .. } => Some(items.len()),
        _ => None,
    });
    let fits = count.is_some_and(|n| doc.value["items"].as_array().is_some_and(|a| a.len() == n));
    if !is_list || !fits {
        return Err(Box::new(doc));
    }
    let Some(items_node) = root_items(&doc.node) else {
        return Err(Box::new(doc));
    };
    let old_items = match doc.value.get_mut("items") {
        Some(Value::Array(a)) => std::mem::take(a),
        // `fits` found them.
        _ => return Err(Box::new(doc)),
    };
    let mut list = splice::ListEdits::new(&input.text, &doc.node);
    let mut lines = Vec::new();
    let mut folded = digest::Items::new();
    let mut failed: Option<String> = None;
    for (index, old) in old_items.into_iter().enumerate() {
        let mut new = old.clone();
        match f(&mut new) {
            Ok(l) => lines.extend(l),
            Err(e) => {
                let line = doc
                    .node
                    .at(&format!("/items/{index}"))
                    .map_or(doc.line, |n| n.line);
                *refused = Some(format!("{}:{line}: {e}", input.name));
                return Ok(ListEdited::Refused);
            }
        }
        if failed.is_none()
            && let Err(e) = list.item(items_node, index, &old, &new)
        {
            failed = Some(format!("document at line {}: {e}", doc.line));
        }
        folded.push(&new);
    }
    // The List's own keys, its items left out of both.
    let mut wrapper = doc.value.clone();
    match f(&mut wrapper) {
        Ok(l) => lines.extend(l),
        Err(e) => {
            *refused = Some(format!("{}:{}: {e}", input.name, doc.line));
            return Ok(ListEdited::Refused);
        }
    }
    let (edits, notes) = match failed {
        Some(why) => (Err(why), Vec::new()),
        None => match list.finish(&doc.node, &doc.value, &wrapper) {
            Ok((e, n)) => (Ok(e), n),
            Err(e) => (
                Err(format!("document at line {}: {e}", doc.line)),
                Vec::new(),
            ),
        },
    };
    Ok(ListEdited::Made {
        lines,
        edits,
        notes,
        digest: folded.of(&wrapper),
    })
}

/// The value node of a root mapping's `items`, unless a merge key (`<<`) may set them anew.
fn root_items(root: &tree::Node) -> Option<&tree::Node> {
    match &root.kind {
        tree::Kind::Map { entries, .. } if !entries.iter().any(|e| e.key == "<<") => {
            entries.iter().find(|e| e.key == "items").map(|e| &e.value)
        }
        _ => None,
    }
}

/// What sees each document (or List item) before and after `f`.
type Observe<'a> = dyn FnMut(&serde_json::Value, &serde_json::Value) + 'a;

/// What [`edit_input`] made of one input.
struct Edited {
    /// What it left out, and what `f` said.
    notes: Vec<String>,
    lines: Vec<String>,
    /// The notes of the edits made in place.
    placed: Vec<String>,
    /// Whether its edits were written and read back.
    written: Result<(), NotApplied>,
    /// Whether a List's items were read one at a time.
    split: bool,
    /// The documents whose items must be edited as one ([`Mode::Shared`]).
    redo: std::collections::BTreeSet<usize>,
}

/// How [`edit_input`] reads an input's Lists.
#[derive(Clone, Copy)]
enum Mode<'a> {
    /// An item at a time, each edited on its own.
    Split,
    /// The same, but the Lists these document ordinals name (whose items share anchors, found
    /// by [`Mode::Split`]) edited as one: every item's edits in one splice of the List's text
    /// ([`splice::ListEdits`]), an alias of one item seeing the anchor of another.
    Shared(&'a std::collections::BTreeSet<usize>),
    /// Every document whole (a List still changed an item at a time, [`edit_list`]).
    Whole,
}

/// Applies `f` to each document of `input` (a List's items as `mode` says) and writes its
/// edits to `out` at `place`; `observe` sees each document (or item) before and after. A
/// document `f` refuses is `refused`, and the rest is not written.
fn edit_input(
    input: &load::Input,
    mode: Mode,
    f: &mut Change,
    mut observe: Option<&mut Observe>,
    out: &mut spool::Spool,
    place: &mut Place,
    refused: &mut Option<String>,
) -> Result<Edited, String> {
    let mut lines = Vec::new();
    let mut applier = splice::Applier::new(&input.text);
    let mut placed = Vec::new();
    let mut why: Option<String> = None;
    let mut wants = Vec::new();
    let mut failed: Option<std::io::Error> = None;
    let mut any_split = false;
    // The digests of the List items read so far, for the List's own digest.
    let mut items = digest::Items::new();
    // Which document the next part is of, and those whose items must be edited as one.
    let mut ordinal = 0usize;
    let mut redo = std::collections::BTreeSet::new();
    let mut joint: Option<splice::ListEdits> = None;
    let each = |part: load::Part| {
        if refused.is_some() {
            return;
        }
        let (doc, list, root, index) = match part {
            load::Part::Item { doc, root, index } => {
                if matches!(mode, Mode::Split) && written_out_in(input, &doc) {
                    // An alias inject wrote out here may go back to another item's anchor.
                    redo.insert(ordinal);
                    why.get_or_insert_with(|| {
                        format!(
                            "document at line {}: an alias written out in one of its items",
                            doc.line
                        )
                    });
                }
                (doc, None, root, index)
            }
            load::Part::Document {
                doc,
                items,
                tangled,
            } => {
                if tangled && matches!(mode, Mode::Split) {
                    redo.insert(ordinal);
                    why.get_or_insert_with(|| {
                        format!(
                            "document at line {}: an alias crosses its items' bounds",
                            doc.line
                        )
                    });
                }
                (doc, Some(items), 0, 0)
            }
        };
        let this = ordinal;
        ordinal += usize::from(list.is_some());
        let doc = match (mode, list) {
            (Mode::Whole, Some(_)) => match edit_list(input, doc, f, refused) {
                Ok(ListEdited::Made {
                    lines: l,
                    edits,
                    notes,
                    digest: d,
                }) => {
                    // A List read whole (its items share anchors): edited an item at a time.
                    lines.extend(l);
                    if why.is_none() {
                        match edits {
                            Ok(e) => {
                                applier.push(e);
                                placed.extend(notes);
                            }
                            Err(e) => why = Some(e),
                        }
                    }
                    wants.push(d);
                    None
                }
                Ok(ListEdited::Refused) => None,
                Err(doc) => Some(*doc),
            },
            _ => Some(doc),
        };
        if let Some(doc) = doc {
            let mut value = doc.value.clone();
            match f(&mut value) {
                Ok(l) => lines.extend(l),
                Err(e) => {
                    *refused = Some(format!("{}:{}: {e}", input.name, doc.line));
                    return;
                }
            }
            if let Some(observe) = observe.as_mut() {
                observe(&doc.value, &value);
            }
            let joined = matches!(mode, Mode::Shared(set) if set.contains(&this));
            if why.is_none() {
                let made = match (joined, list) {
                    // An item of a List edited as one.
                    (true, None) => joint
                        .get_or_insert_with(|| splice::ListEdits::open(&input.text, root))
                        .next_item(index, &doc.node, &doc.value, &value)
                        .map(|()| (Vec::new(), Vec::new())),
                    (true, Some(_)) => match joint.take() {
                        Some(list) => list.finish(&doc.node, &doc.value, &value),
                        None => splice::edits_noted(&input.text, &doc.node, &doc.value, &value),
                    },
                    (false, _) => splice::edits_noted(&input.text, &doc.node, &doc.value, &value),
                };
                match made {
                    Ok((e, n)) => {
                        applier.push(e);
                        placed.extend(n);
                    }
                    Err(e) => why = Some(format!("document at line {}: {e}", doc.line)),
                }
            }
            match list {
                None => items.push(&value),
                Some(Some(_)) => {
                    any_split = true;
                    wants.push(std::mem::replace(&mut items, digest::Items::new()).of(&value));
                }
                Some(None) => {
                    items = digest::Items::new();
                    wants.push(digest::digest(&value));
                }
            }
        }
        if failed.is_none() && applier.written_len() >= spool::PIECE_BYTES {
            failed = place.put(out, &applier.take_written()).err();
        }
    };
    let notes = match mode {
        Mode::Whole => input.each_document_part(each),
        Mode::Split | Mode::Shared(_) => input.each_part(each),
    };
    let notes = notes.map_err(|e| e.to_string())?;
    if let Some(e) = failed {
        return Err(spool_error(e));
    }
    let written = match why {
        _ if refused.is_some() => Ok(()),
        Some(why) => Err(NotApplied::Edit(why)),
        None => applied(input, applier, &wants, f, out, place),
    };
    Ok(Edited {
        notes,
        lines,
        placed,
        written,
        split: any_split,
        redo,
    })
}

/// Whether a List's item, read on its own, holds an alias inject wrote out (to its last line's
/// end: the mark follows what was written out).
fn written_out_in(input: &load::Input, doc: &load::Document) -> bool {
    let rest = input.text.get(doc.node.end..).unwrap_or_default();
    let end = doc.node.end + rest.find('\n').unwrap_or(rest.len());
    input
        .text
        .get(doc.node.start..end)
        .is_some_and(|t| t.contains(splice::WRITTEN_OUT))
}

/// `input` written anew from `f` of each document, in its BOM and line endings: each document
/// read again and changed again (it read and changed once: the same again).
fn written_anew(input: &load::Input, f: &mut Change) -> String {
    let mut anew = String::new();
    let mut first = true;
    let _ = input.each_document(|doc| {
        let mut value = doc.value;
        let _ = f(&mut value);
        if !first {
            anew.push_str("---\n");
        }
        first = false;
        anew.push_str(&emit::to_yaml(&value));
    });
    splice::as_written(&input.text, anew)
}

/// `source`'s text with each document changed to `values` (in order), read back to check that
/// it holds exactly those values.
#[cfg(test)]
pub(crate) fn rewrite(
    source: &load::Source,
    values: &[serde_json::Value],
) -> Result<(String, Vec<String>), String> {
    let mut edits = Vec::new();
    let mut notes = Vec::new();
    for (doc, new) in source.documents.iter().zip(values) {
        let (e, n) = splice::edits_noted(&source.text, &doc.node, &doc.value, new)
            .map_err(|e| format!("document at line {}: {e}", doc.line))?;
        edits.extend(e);
        notes.extend(n);
    }
    if edits.is_empty() {
        return Ok((source.text.clone(), notes));
    }
    let text = splice::apply(&source.text, edits).map_err(|e| e.to_string())?;
    let wants: Vec<u128> = values.iter().map(digest::digest).collect();
    read_back(&source.name, text.as_bytes(), &wants)?;
    Ok((text, notes))
}

/// Writes the rest of `input`'s output (the edits of `applier` applied, after what was written
/// already) and reads all of it back, to check that its documents are those whose [`digest`]s
/// are `wants`, in order; no edit at all is the text as it was, not read back. Edits that do
/// not come in the text's order are made again (`f` of every document) and applied at once.
fn applied(
    input: &load::Input,
    applier: splice::Applier,
    wants: &[u128],
    f: &mut Change,
    out: &mut spool::Spool,
    place: &mut Place,
) -> Result<(), NotApplied> {
    let edit = |e: String| NotApplied::Edit(e);
    let text = match applier.finish().map_err(|e| edit(e.to_string()))? {
        splice::Applied::Unchanged => {
            return place.put(out, &input.text).map_err(NotApplied::Spool);
        }
        splice::Applied::Changed(text) => text,
        splice::Applied::Unordered => {
            place.undo(out).map_err(NotApplied::Spool)?;
            let mut edits = Vec::new();
            let _ = input.each_document(|doc| {
                let mut value = doc.value.clone();
                if f(&mut value).is_ok()
                    && let Ok((e, _)) =
                        splice::edits_noted(&input.text, &doc.node, &doc.value, &value)
                {
                    edits.extend(e);
                }
            });
            splice::apply(&input.text, edits).map_err(|e| edit(e.to_string()))?
        }
    };
    place.put(out, &text).map_err(NotApplied::Spool)?;
    drop(text);
    let start = place.start.unwrap_or(place.before);
    let written = out.read_from(start).map_err(NotApplied::Spool)?;
    read_back(&input.name, written, wants).map_err(edit)
}

/// Reads an input's output (input `name`) back, to check that its documents are those whose
/// [`digest`]s are `wants`, in order.
fn read_back(name: &str, text: impl std::io::Read, wants: &[u128]) -> Result<(), String> {
    // Read back one document at a time, each compared and dropped as it is read, from the
    // temporary file: holding the whole stream read back was most of inject's peak memory
    // (issue 24 §4). A text that does not read back at all is said first, as when it was read
    // whole.
    // The items of any root `items` one at a time, as the List items were read: a List's digest
    // is its items'.
    let mut want = wants.iter();
    let mut same = true;
    let mut index = 0;
    let mut read = Vec::new();
    let mut ignored = Vec::new();
    let mut items = digest::Items::new();
    let input = std::io::BufReader::with_capacity(READ_BACK_CHUNK_BYTES, text);
    tree::values_parts(input, &mut |part| match part {
        tree::Part::Item { doc, .. } => items.push(&doc.value),
        tree::Part::Doc {
            doc, items: split, ..
        } => {
            load::add_document(name, index, doc, &mut read, &mut ignored);
            index += 1;
            // A split document is a mapping: one document. Its items are its own (or, when a
            // merge key set `items` anew after them, no part of it).
            let folded = std::mem::replace(&mut items, digest::Items::new());
            let mut folded = split.map(|_| folded);
            for d in read.drain(..) {
                let got = match folded.take() {
                    Some(items) => items.of(&d.value),
                    None => digest::digest(&d.value),
                };
                same = same && want.next() == Some(&got);
            }
        }
    })
    .map_err(|e| format!("the edit does not read back: {}", load::yaml_error(name, e)))?;
    if !same || want.next().is_some() {
        return Err("the edit reads back as something else".into());
    }
    Ok(())
}

/// How much of the output the read-back reads at a time: as tree.rs's `PARSE_CHUNK_BYTES`.
const READ_BACK_CHUNK_BYTES: usize = 64 * 1024;

#[cfg(test)]
mod tests {
    use super::*;

    /// The read-back, one document at a time, still sees every document: an edit reads back
    /// only when the stream holds exactly the values asked for, no more and no fewer.
    #[test]
    fn rewrite_reads_back_every_document() {
        let text = "a: 1\n---\n[{b: 2}, {c: 3}]\n---\njust text\n---\nd: 4\n";
        let source = load::parse("t", text.to_string()).unwrap();
        let mut values: Vec<serde_json::Value> =
            source.documents.iter().map(|d| d.value.clone()).collect();
        values[0]["a"] = 5.into();
        values[3]["d"] = 6.into();
        let (out, _) = rewrite(&source, &values).unwrap();
        assert_eq!(
            out,
            "a: 5\n---\n[{b: 2}, {c: 3}]\n---\njust text\n---\nd: 6\n"
        );
        // Fewer values than documents: the rest reads back as more than was asked for.
        let first = [values[0].clone()];
        assert_eq!(
            rewrite(&source, &first).unwrap_err(),
            "the edit reads back as something else"
        );
        // No edit at all is the text as it was, never read back.
        let same: Vec<serde_json::Value> =
            source.documents.iter().map(|d| d.value.clone()).collect();
        assert_eq!(rewrite(&source, &same).unwrap().0, text);
    }
}
