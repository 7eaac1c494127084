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
//! every node's place in the text, [`splice`] writes a change back into that text, [`emit`]
//! YAML that YAML 1.1 readers (kubectl, Helm) read the same.

pub mod adoption;
pub mod budget;
pub mod check;
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
pub mod tree;
pub mod uninject;

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

/// Whether `--log-format json` was given: `check`'s fatal errors are then JSON lines too.
static LOG_JSON: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Says which `--log-format` stderr lines take (main sets it before running a subcommand).
pub fn set_log_format(format: crate::cli::LogFormat) {
    LOG_JSON.store(
        format == crate::cli::LogFormat::Json,
        std::sync::atomic::Ordering::Relaxed,
    );
}

/// A fatal error of `check` on stderr: `hooklog: MESSAGE`, or with `--log-format json` one
/// JSON object `{"level": "ERROR", "message": MESSAGE}` as hooklog's JSON diagnostics have.
fn error_line(message: &str) {
    if LOG_JSON.load(std::sync::atomic::Ordering::Relaxed) {
        eprintln!(
            "{}",
            serde_json::json!({"level": "ERROR", "message": message})
        );
    } else {
        eprintln!("hooklog: {message}");
    }
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
    let mut sources = Vec::new();
    let mut unloadable = 0;
    for loaded in load::load_each(&args.paths) {
        match loaded {
            Ok(s) => sources.push(s),
            Err(e) => {
                unloadable += 1;
                error_line(&e.to_string());
            }
        }
    }
    for note in sources.iter().flat_map(|s| &s.notes) {
        eprintln!("{note}");
    }
    let templates: usize = sources
        .iter()
        .flat_map(|s| &s.documents)
        .map(|d| podspec::templates(&d.value).len())
        .sum();
    let then = if args.require_image {
        "--require-image: exit 69"
    } else {
        "checked by its name's patterns"
    };
    let wanted = check::wanted_images(&sources, &opts);
    let (images, unreadable) = read_images(&wanted, &args.images, then);
    opts.images = images;
    let mut findings = check::check(&sources, &opts);
    findings.retain(|f| control.selection.keeps(f.rule));
    let text = match args.format {
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

/// Opens each `--image-root`; one that cannot be opened is a usage error, said on stderr.
fn image_roots(args: &ImageArgs) -> Result<BTreeMap<String, check::image::ImageRoot>, u8> {
    let mut roots = BTreeMap::new();
    for (image, path) in &args.image_roots {
        match check::image::ImageRoot::open(path) {
            Ok(root) => {
                roots.insert(image.clone(), root);
            }
            Err(e) => {
                eprintln!("hooklog: --image-root {image}={}: {e}", path.display());
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
        eprintln!(
            "hooklog: inject needs --image (or HOOKLOG_INJECT_IMAGE): the hooklog image to run"
        );
        return EXIT_USAGE;
    };
    let requested = args.sidecar.map(|s| match s {
        SidecarKind::Native => budget::SidecarMode::Native,
        SidecarKind::Classic => budget::SidecarMode::Classic,
    });
    let mode = match inject::sidecar_mode(requested, args.kubernetes_version) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("hooklog: {e}");
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
    };
    let images = &args.images;
    transform(
        &args.paths,
        |doc| inject::inject(doc, &opts),
        |docs| {
            let mut lookup = check::Options {
                image_roots: roots,
                image_platform: images.image_platform,
                ..Default::default()
            };
            let wanted = image_notes::wanted_images(docs, &lookup);
            let then = "inject says nothing about its hooks";
            lookup.images = read_images(&wanted, images, then).0;
            image_notes::notes(docs, &lookup)
        },
    )
}

/// `hooklog uninject`: returns the exit code.
pub fn uninject_command(paths: &[PathBuf]) -> u8 {
    transform(paths, uninject::uninject, |_| Vec::new())
}

/// Loads every input, applies `f` to each document, writes every input back to stdout with
/// only the changed parts rewritten ([`splice`]), and the report to stderr, then what `notes`
/// says about the `(before, after)` documents. Nothing is written when any input or document
/// fails; `notes` never changes what is.
fn transform(
    paths: &[PathBuf],
    mut f: impl FnMut(&mut serde_json::Value) -> Result<Vec<String>, inject::InjectError>,
    notes: impl FnOnce(&[(&serde_json::Value, &serde_json::Value)]) -> Vec<String>,
) -> u8 {
    let sources = match load::load(paths) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("hooklog: {e}");
            return EXIT_USAGE;
        }
    };
    let mut out = String::new();
    let mut report = Vec::new();
    let mut all_changed = Vec::new();
    for source in &sources {
        report.extend(source.notes.iter().cloned());
        let mut changed = Vec::new();
        for doc in &source.documents {
            let mut value = doc.value.clone();
            match f(&mut value) {
                Ok(lines) => report.extend(lines),
                Err(e) => {
                    eprintln!("hooklog: {}:{}: {e}", source.name, doc.line);
                    return EXIT_USAGE;
                }
            }
            changed.push(value);
        }
        let text = match rewrite(source, &changed) {
            Ok((text, notes)) => {
                report.extend(notes.into_iter().map(|n| format!("  {}:{n}", source.name)));
                text
            }
            Err(why) => {
                // Meaning first: the whole input written anew, and said so.
                report.push(format!(
                    "hooklog: {}: could not edit in place ({why}); written anew, comments and layout not kept",
                    source.name
                ));
                let anew = changed
                    .iter()
                    .map(emit::to_yaml)
                    .collect::<Vec<_>>()
                    .join("---\n");
                splice::as_written(&source.text, anew)
            }
        };
        if !out.is_empty() {
            if !out.ends_with('\n') {
                out.push('\n');
            }
            if !text.starts_with("---") {
                out.push_str("---\n");
            }
        }
        out.push_str(&text);
        all_changed.push(changed);
    }
    if let Err(e) = write_stdout(&out) {
        eprintln!("hooklog: cannot write the manifests: {e}");
        return EXIT_FINDINGS;
    }
    for line in report {
        eprintln!("{line}");
    }
    let pairs: Vec<(&serde_json::Value, &serde_json::Value)> = sources
        .iter()
        .zip(&all_changed)
        .flat_map(|(s, changed)| s.documents.iter().map(|d| &d.value).zip(changed))
        .collect();
    for line in notes(&pairs) {
        eprintln!("{line}");
    }
    0
}

/// `source`'s text with each document changed to `values` (in order), read back to check that
/// it holds exactly those values.
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
    // Read back one document at a time, each compared and dropped as it is read: holding the
    // whole stream read back was most of inject's peak memory (issue 24 §4). A text that does
    // not read back at all is said first, as when it was read whole.
    let mut want = values.iter();
    let mut same = true;
    let mut index = 0;
    let mut read = Vec::new();
    let mut ignored = Vec::new();
    tree::parse_each(&text, |doc| {
        load::add_document(&source.name, index, doc, &mut read, &mut ignored);
        index += 1;
        for d in read.drain(..) {
            same = same && want.next() == Some(&d.value);
        }
    })
    .map_err(|e| {
        format!(
            "the edit does not read back: {}",
            load::yaml_error(&source.name, e)
        )
    })?;
    if !same || want.next().is_some() {
        return Err("the edit reads back as something else".into());
    }
    Ok((text, notes))
}

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
