//! (the control plane) What `hooklog inject` says on stderr from the images a manifest names (issue 18), looked up
//! as `check` does ([`check::image`]): a hook that, after inject's rewrite, runs a program its
//! image lacks fails whatever hooklog does; a bare `sleep` that inject made `hooklog sleep` in
//! an image without `sleep` fixes a hook that failed before. Only stderr: the manifests inject
//! writes never depend on an image, so its output is the same online and `--offline`, and the
//! webhook, which runs inject's core ([`super::inject::inject`]) and not this, reads none.

use std::collections::BTreeSet;

use serde_json::Value;

use super::check::{self, image};
use super::hooks::{self, Handler, Hook, is_hooklog, is_sleep};
use super::inject;
use super::podspec::{self, Container, ObjectRef};
use crate::registry::Arch;

/// What one container's hooks ask of its image.
struct Asks<'a> {
    /// `(hook, the programs it runs after inject)`, for hooks running a program of the image.
    runs: Vec<(Hook, Vec<String>)>,
    /// `(hook, the argv before inject)` for a bare `sleep N` that inject made `hooklog sleep N`.
    fixed_sleeps: Vec<(Hook, Vec<String>)>,
    before: Option<Container<'a>>,
}

/// Each pod template of the `(before, after)` documents with its containers after inject (not
/// hooklog's own) and what their hooks ask of the image.
fn each<'a>(
    docs: &[(&'a Value, &'a Value)],
    mut f: impl FnMut(&ObjectRef, &'a Value, &Container<'a>, Asks<'a>),
) {
    for (before, after) in docs {
        for t in podspec::templates(after) {
            let Some(spec) = after.pointer(&t.spec_pointer) else {
                continue;
            };
            let old: Vec<Container> = before
                .pointer(&t.spec_pointer)
                .map(|s| podspec::containers(s, &t.spec_path))
                .unwrap_or_default();
            for c in podspec::containers(spec, &t.spec_path) {
                if inject::is_own(&c) {
                    continue;
                }
                let before = old.iter().find(|o| o.name == c.name).cloned();
                let asks = asks(before, &c);
                if !asks.runs.is_empty() || !asks.fixed_sleeps.is_empty() {
                    f(&t.object, spec, &c, asks);
                }
            }
        }
    }
}

fn asks<'a>(before: Option<Container<'a>>, c: &Container) -> Asks<'a> {
    let mut runs = Vec::new();
    let mut fixed_sleeps = Vec::new();
    let old_hooks = before.as_ref().map(hooks::hooks).unwrap_or_default();
    for hook in hooks::hooks(c) {
        let Some(argv) = image::command_in_container(c, &hook) else {
            continue;
        };
        let programs = image::programs(&argv);
        if programs.first().is_some_and(|p| is_hooklog(p)) {
            // hooklog's own program: did inject make it of a bare `sleep`?
            let old = old_hooks.iter().find(|h| h.name == hook.name);
            if let Some(Handler::Exec(old_argv)) = old.map(|h| &h.handler)
                && old_argv.len() == 2
                && is_sleep(&old_argv[0])
                && argv.get(1).is_some_and(|a| a == "sleep")
            {
                fixed_sleeps.push((hook, old_argv.clone()));
            }
            continue;
        }
        if programs.iter().any(|p| image::from_image(c, p)) {
            runs.push((hook, programs));
        }
    }
    Asks {
        runs,
        fixed_sleeps,
        before,
    }
}

/// The `(image, arch)` pairs whose filesystem the notes look in, not given with `--image-root`.
pub fn wanted_images(docs: &[(&Value, &Value)], opts: &check::Options) -> Vec<(String, Arch)> {
    let mut out = BTreeSet::new();
    each(docs, |_, spec, c, _| {
        let img = c.image();
        if !img.is_empty() && !opts.image_roots.contains_key(img) {
            out.insert((img.to_string(), image::pod_arch(spec, opts.image_platform)));
        }
    });
    out.into_iter().collect()
}

/// One line per hook that runs a program its image lacks (a warning), and per bare `sleep` that
/// inject's rewrite fixed. Images neither read nor given with `--image-root` say nothing.
pub fn notes(docs: &[(&Value, &Value)], opts: &check::Options) -> Vec<String> {
    let mut out = Vec::new();
    each(docs, |object, spec, c, asks| {
        let Some(l) = image::lookup_for(spec, c, opts) else {
            return;
        };
        let who = format!(
            "{} \"{}\" container \"{}\"",
            object.kind.to_lowercase(),
            object.qualified_name(),
            c.name
        );
        for (hook, programs) in &asks.runs {
            let Some((i, p, tried)) = l.first_missing(c, programs) else {
                continue;
            };
            // 126: found but not executable; 127: not found (POSIX shells, `hooklog hook`).
            let code = if tried.iter().all(|t| t.contains("is not executable")) {
                126
            } else {
                127
            };
            let runs = if i == 0 {
                format!("runs `{p}`")
            } else {
                format!("runs `{}`, whose script runs `{p}`", programs[0])
            };
            out.push(format!(
                "hooklog: warning: {who}: its {} {runs}, which is not in {} (by {}): the hook fails (exit {code}) whatever hooklog does; `hooklog check` explains it",
                hook.name,
                l.label,
                l.basis.as_str()
            ));
        }
        for (hook, old) in &asks.fixed_sleeps {
            let c = asks.before.as_ref().unwrap_or(c);
            if l.first_missing(c, &old[..1]).is_some() {
                out.push(format!(
                    "hooklog: {who}: its {} `{}` failed before: {} has no `{}` (by {}); inject's `hooklog sleep {}` fixes it",
                    hook.name,
                    old.join(" "),
                    l.label,
                    old[0],
                    l.basis.as_str(),
                    old[1]
                ));
            }
        }
    });
    out
}
