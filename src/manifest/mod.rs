//! (the control plane) Manifests, offline: `hooklog check` finds broken lifecycle hooks before deploy, `hooklog
//! inject` / `uninject` add and remove hooklog in a pipe. Nothing here touches the daemon.
//!
//! [`adoption`] is the one rule of which pods get hooklog, in which form (inject, the webhook
//! and check share it). [`load`] reads YAML and JSON into generic value trees (unknown fields and their order
//! survive), [`podspec`] finds pod templates and their field paths, [`hooks`] reads what a hook
//! does (with hooklog's own parser for hooklog command lines; `shell` reads the `sh -c` scripts
//! it and [`tailer`] look into), [`budget`] holds the shutdown
//! inequalities, [`layout`] names hooklog's pieces in a pod ([`relayout`] moves an earlier one), [`check`] the rules, [`report`]
//! text/JSON/SARIF, [`inject`] and [`uninject`], [`image_notes`] what inject says on stderr
//! from the images (never in its output). The YAML they read and edit in place is
//! [`crate::yaml`]'s, the layer below.

pub mod adoption;
pub mod budget;
pub mod check;
pub mod hooks;
pub mod image_notes;
pub mod inject;
pub mod layout;
pub mod load;
pub mod migrate;
pub mod number;
pub mod podspec;
pub mod relayout;
pub mod report;
mod shape;
#[cfg(test)]
mod shapes;
mod shell;
pub mod tailer;
pub(crate) mod transform;
pub mod uninject;
mod update;
#[cfg(test)]
mod whole;

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;

use crate::cli::{CheckArgs, CheckFormat, ImageArgs, InjectArgs, Platform, SidecarKind};
use crate::sidecar_settings;

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
    let mode = match inject::sidecar_mode(requested, args.common.kubernetes_version) {
        Ok(m) => m,
        Err(e) => {
            error_line(&e.to_string());
            return EXIT_USAGE;
        }
    };
    let settings = match args.settings.settings(args.common.events) {
        Ok(s) => s,
        Err(e) => {
            error_line(&e);
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
        prestop_sleep: args.common.prestop_sleep,
        events: args.common.events,
        settings,
    };
    let events = args.common.events;
    let mut lookup = check::Options {
        image_roots: roots,
        image_platform: args.images.image_platform,
        ..Default::default()
    };
    // `--sidecar classic` asked for on a cluster that runs native sidecars (its version given):
    // a pod it cannot take is an error, not a pod silently shipped uninjected (issue 41).
    let classic_asked = args.sidecar == Some(SidecarKind::Classic)
        && args.common.kubernetes_version.is_some()
        && inject::sidecar_mode(None, args.common.kubernetes_version)
            == Ok(budget::SidecarMode::Native);
    // A pod injected before with other settings is updated; it changes form only when one is
    // asked for.
    let again = inject::Again {
        undo: &uninject::undo_pod,
        form_asked: args.sidecar.is_some() || args.common.kubernetes_version.is_some(),
    };
    let mut wanted = std::collections::BTreeSet::new();
    let mut namespaces = sidecar_settings::SeenNamespaces::default();
    let inputs = match transform_command(
        "inject",
        &args.paths,
        |doc| {
            // A Namespace's settings before its workloads', as the webhook reads them.
            let refused = |name: &str, why: String| inject::InjectError {
                object: podspec::ObjectRef {
                    kind: "Namespace".into(),
                    namespace: None,
                    name: name.to_string(),
                },
                why,
                at: None,
            };
            namespaces
                .note(doc)
                .map_err(|(name, why)| refused(&name, why))?;
            let namespaced;
            let opts = match namespaces.annotations_for(doc) {
                None => &opts,
                Some((name, a)) => {
                    let install = sidecar_settings::Settings {
                        events: opts.settings.events || opts.events,
                        ..opts.settings.clone()
                    };
                    let settings = sidecar_settings::resolve(&install, Some(a))
                        .map_err(|why| refused(name, why))?;
                    namespaced = inject::Options {
                        events: settings.events,
                        settings,
                        ..opts.clone()
                    };
                    &namespaced
                }
            };
            let lines = inject::inject_updating(doc, opts, Some(again))?.0;
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
            if inject::inject_updating(&mut after, &opts, Some(again)).is_ok() {
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
        at: None,
    }
}

/// `hooklog uninject`: returns the exit code.
pub fn uninject_command(paths: &[PathBuf]) -> u8 {
    match transform_command("uninject", paths, uninject::uninject, |_, _| {}) {
        Ok(_) => 0,
        Err(code) => code,
    }
}

/// Runs [`transform::transform`] on `paths` and writes what it made: the manifests to stdout, the report
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
    let mut made = match transform::transform(load::read_each(paths), &mut counted, &mut observe) {
        Ok(made) => made,
        Err(e) => {
            error_line(&e.to_string());
            return Err(EXIT_USAGE);
        }
    };
    // Nothing to change is a usage error, as for `check`: said before anything is written. A
    // document that is no object (a kustomize json6902 patch is a list) is something, passed
    // on as it is: only inputs of empty documents and comments are nothing (read again only
    // then, to find such a document's note).
    if objects == 0
        && made
            .inputs
            .iter()
            .any(|i| i.each_document(|_| {}).is_ok_and(|notes| !notes.is_empty()))
    {
        objects = 1;
    }
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
