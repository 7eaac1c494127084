//! (the control plane) Broken hooklog wiring: a hooklog binary on a volume the container does not mount or that no
//! init container fills, socket and file paths the sidecar does not share, a sidecar without
//! the Downward API env, and hooklog command lines hooklog's own parser rejects.

use std::path::PathBuf;

use super::image::Entry;
use super::{Options, Pod, Rule, Severity, Sink};
use crate::cli::Command;
use crate::manifest::hooks::{
    Handler, Hook, IMAGE_BINARY, container_hooklog_argv, is_hooklog, parse_hooklog,
};
use crate::manifest::podspec::Container;

pub const BINARY_NOT_MOUNTED: Rule = Rule {
    id: "hooklog-binary-not-mounted",
    severity: Severity::Error,
    description: "A hook calls the hooklog binary at a path on no volume the container mounts.",
    remediation: "Mount the volume `hooklog install` fills at the path the hook calls (`hooklog inject` does).",
};
pub const BINARY_WRITABLE: Rule = Rule {
    id: "hooklog-binary-writable",
    severity: Severity::Warning,
    description: "A container mounts writable the volume holding the hooklog binary that another container's hook runs (the init container that installs it aside): it can replace that program, which then runs as the other container's user.",
    remediation: "Give the binary a volume of its own, written only by the init container that runs `hooklog install` and mounted `readOnly: true` in every other container (`hooklog inject` does: hooklog-bin at /hooklog-bin).",
};
pub const BINARY_NOT_INSTALLED: Rule = Rule {
    id: "hooklog-binary-not-installed",
    severity: Severity::Error,
    description: "A hook calls the hooklog binary from a volume that no init container fills with `hooklog install`.",
    remediation: "Add an init container that runs `hooklog install DIR` into that volume (`hooklog inject` does).",
};
pub const PATH_NOT_SHARED: Rule = Rule {
    id: "hooklog-path-not-shared",
    severity: Severity::Error,
    description: "A --socket or --file path is not on a volume shared with the hooklog sidecar, or the sidecar does not serve it.",
    remediation: "Put the --socket or --file path on a volume the hooklog sidecar mounts, and give the sidecar the same --socket or --file (`hooklog inject` does).",
};
pub const NO_SIDECAR: Rule = Rule {
    id: "hooklog-sidecar-missing",
    severity: Severity::Warning,
    description: "Hooks are wrapped in `hooklog hook` but the pod has no `hooklog run` sidecar to read their records.",
    remediation: "Add the `hooklog run` sidecar (`hooklog inject` does), or unwrap the hooks (`hooklog uninject`).",
};
pub const NAME_MISMATCH: Rule = Rule {
    id: "hook-container-name-mismatch",
    severity: Severity::Warning,
    description: "`hooklog hook --container` names another container than the one whose hook it is: its records and the summary say the wrong name.",
    remediation: "Make `hooklog hook --container` the name of the container whose hook it is.",
};
pub const DOWNWARD_API: Rule = Rule {
    id: "sidecar-downward-api-missing",
    severity: Severity::Warning,
    description: "The hooklog sidecar lacks Downward API env (POD_NAME, POD_NAMESPACE, POD_UID, POD_IP, NODE_NAME): records lose their pod metadata.",
    remediation: "Give the sidecar POD_NAME, POD_NAMESPACE, POD_UID, POD_IP and NODE_NAME from the Downward API (`hooklog inject` does).",
};
pub const INVALID_COMMAND: Rule = Rule {
    id: "hooklog-command-invalid",
    severity: Severity::Error,
    description: "A hooklog command line that hooklog's own parser rejects.",
    remediation: "Fix the hooklog command line as the message says (`hooklog help` lists the flags), or let `hooklog inject` write it.",
};

pub const MOUNT_OVER_IMAGE: Rule = Rule {
    id: "hooklog-mount-over-image-path",
    severity: Severity::Error,
    description: "A hooklog container mounts a volume over a file of its image, or over the folder holding its binary: the runtime refuses the mount (\"not a directory\") or the binary is hidden, and the container never starts.",
    remediation: "Mount hooklog's volumes where its image has no file (`hooklog inject` mounts /hooklog), and use an image that keeps the binary at /usr/local/bin/hooklog.",
};

/// The Downward API variables hooklog reads (docs/inputs-and-records.md, "The record").
pub const DOWNWARD_ENV: [&str; 5] = [
    "POD_NAME",
    "POD_NAMESPACE",
    "POD_UID",
    "POD_IP",
    "NODE_NAME",
];

pub fn check_hook(pod: &Pod, c: &Container, hook: &Hook, sink: &mut Sink) {
    let Handler::Exec(argv) = &hook.handler else {
        return;
    };
    if !argv.first().is_some_and(|p| is_hooklog(p)) {
        return;
    }
    let env = c.literal_env();
    let parsed = match parse_hooklog(argv, &env) {
        Ok(p) => p,
        Err(e) => {
            invalid(sink, c, &hook.path, argv, &e);
            return;
        }
    };
    let mut binaries = vec![argv[0].clone()];
    if let Command::Hook(h) = &parsed {
        if h.container != c.name {
            sink.add(
                &NAME_MISMATCH,
                Some(&c.name),
                &hook.path,
                format!(
                    "the hook of {} reports as --container {}: records and hooks.summary name the wrong container",
                    c.name, h.container
                ),
                format!("use --container {}", c.name),
            );
        }
        let inner: Vec<String> = h
            .command
            .iter()
            .map(|s| s.to_string_lossy().to_string())
            .collect();
        if inner.first().is_some_and(|p| is_hooklog(p)) {
            if let Err(e) = parse_hooklog(&inner, &env) {
                invalid(sink, c, &hook.path, &inner, &e);
            }
            binaries.push(inner[0].clone());
        }
        shared_paths(pod, c, hook, h, sink);
    }
    binaries.dedup();
    // hooklog's own container runs its image, which holds the binary there.
    let own_image = container_hooklog_argv(c).is_some();
    for b in binaries
        .iter()
        .filter(|b| b.starts_with('/') && !(own_image && *b == IMAGE_BINARY))
    {
        match c.on_volume(b) {
            None => sink.add(
                &BINARY_NOT_MOUNTED,
                Some(&c.name),
                &hook.path,
                format!(
                    "{} calls {b}, but {} mounts no volume there",
                    hook.name, c.name
                ),
                "mount the volume `hooklog install` fills (`hooklog inject` does)",
            ),
            Some(place) => {
                if !installed(pod, &place) {
                    sink.add(
                        &BINARY_NOT_INSTALLED,
                        Some(&c.name),
                        &hook.path,
                        format!(
                            "{} calls {b} (volume {}, {}), but no init container runs `hooklog install` into it",
                            hook.name, place.0, place.1
                        ),
                        format!(
                            "add an init container `hooklog install {}` with that volume mounted (`hooklog inject` does)",
                            std::path::Path::new(b).parent().map(|p| p.display().to_string()).unwrap_or_default()
                        ),
                    );
                }
            }
        }
    }
}

fn invalid(sink: &mut Sink, c: &Container, path: &str, argv: &[String], e: &str) {
    sink.add(
        &INVALID_COMMAND,
        Some(&c.name),
        path,
        format!("hooklog rejects `{}`: {e}", argv.join(" ")),
        "fix the command line (`hooklog --help`)",
    );
}

/// True when an init container runs `hooklog install DIR` with `DIR/hooklog` at `place`.
fn installed(pod: &Pod, place: &(String, String)) -> bool {
    pod.containers.iter().filter(|c| c.init).any(|c| {
        let Some(argv) = container_hooklog_argv(c) else {
            return false;
        };
        match parse_hooklog(&argv, &c.literal_env()) {
            Ok(Command::Install(i)) => {
                let target = i.dir.join("hooklog");
                c.on_volume(&target.to_string_lossy()).as_ref() == Some(place)
            }
            _ => false,
        }
    })
}

fn shared_paths(pod: &Pod, c: &Container, hook: &Hook, h: &crate::cli::HookArgs, sink: &mut Sink) {
    let Some(sidecar) = &pod.sidecar else {
        return;
    };
    if h.socket.is_none() && h.file.is_none() {
        sink.add(
            &PATH_NOT_SHARED,
            Some(&c.name),
            &hook.path,
            "`hooklog hook` has neither --socket nor --file: its records go to the hook's stderr, which nobody reads".to_string(),
            "add the sidecar's --socket and --file",
        );
        return;
    }
    let served = |list: &[PathBuf]| -> Vec<(String, String)> {
        list.iter()
            .filter_map(|p| sidecar.container.on_volume(&p.to_string_lossy()))
            .collect()
    };
    for (flag, path, list) in [
        ("--socket", &h.socket, &sidecar.args.sockets),
        ("--file", &h.file, &sidecar.args.files),
    ] {
        let Some(path) = path else { continue };
        let p = path.to_string_lossy();
        let message = match c.on_volume(&p) {
            None => format!(
                "{flag} {p} is on no volume {} mounts: the sidecar cannot see it",
                c.name
            ),
            Some(place) if !served(list).contains(&place) => format!(
                "{flag} {p} (volume {}, {}) is not one the sidecar {} serves",
                place.0, place.1, sidecar.container.name
            ),
            Some(_) => continue,
        };
        sink.add(
            &PATH_NOT_SHARED,
            Some(&c.name),
            &hook.path,
            message,
            format!("use the sidecar's {flag} path on the shared emptyDir"),
        );
    }
}

/// Why mounting at `path` in a hooklog container breaks it, as far as its image is known: the
/// image's filesystem (`--image-root`), else the layout of hooklog's own image (its binary at
/// [`IMAGE_BINARY`], the ENTRYPOINT a container without `command` runs).
fn mount_collision(c: &Container, path: &str, opts: &Options) -> Option<String> {
    let entrypoint = c.argv().0.is_empty().then_some(IMAGE_BINARY);
    if let Some(e) = entrypoint
        && e.starts_with(&format!("{path}/"))
    {
        return Some(format!(
            "it hides the folder holding the image's binary {e}: the container cannot start"
        ));
    }
    match opts.image_roots.get(c.image()) {
        Some(root) => match root.resolve(path) {
            Ok((p, Entry::File { .. })) => Some(format!(
                "{p} is a file in {}: the runtime cannot mount a volume there (\"not a directory\") and the container never starts",
                c.image()
            )),
            Err(why) if why.ends_with("is not a folder") => Some(format!(
                "{why} in {}: the runtime cannot mount a volume under it and the container never starts",
                c.image()
            )),
            _ => None,
        },
        None => {
            let e = entrypoint?;
            (path == e || path.starts_with(&format!("{e}/"))).then(|| {
                format!(
                    "{e} is hooklog's binary, a file in its image: the runtime cannot mount a volume there (\"not a directory\") and the container never starts"
                )
            })
        }
    }
}

/// hooklog's own containers' mounts against what their image holds.
fn check_mounts(pod: &Pod, opts: &Options, sink: &mut Sink) {
    for c in pod
        .containers
        .iter()
        .filter(|c| container_hooklog_argv(c).is_some() && c.argv().0.is_empty())
    {
        for m in c.mounts() {
            let Some(why) = mount_collision(c, &m.path, opts) else {
                continue;
            };
            sink.add(
                &MOUNT_OVER_IMAGE,
                Some(&c.name),
                &format!("{}.volumeMounts", c.path),
                format!("{} mounts volume {} at {}: {why}", c.name, m.volume, m.path),
                "mount it at a path the image does not use (`hooklog inject` uses /hooklog, and hooklog's image keeps its binary at /usr/local/bin/hooklog)",
            );
        }
    }
}

/// Volumes holding a binary some hook calls, and every container but their installers that
/// mounts one of them without `readOnly: true` while another container's hook calls it: it can
/// replace what that hook runs, as that container's user (issue 37).
fn check_binary_writable(pod: &Pod, sink: &mut Sink) {
    // Each volume, with the containers whose hooks call a hooklog binary on it.
    let mut volumes: Vec<(String, Vec<&str>)> = Vec::new();
    for c in &pod.containers {
        for hook in crate::manifest::hooks::hooks(c) {
            let Handler::Exec(argv) = &hook.handler else {
                continue;
            };
            let Some(b) = argv.first().filter(|b| b.starts_with('/') && is_hooklog(b)) else {
                continue;
            };
            if let Some((volume, _)) = c.on_volume(b) {
                match volumes.iter_mut().find(|(v, _)| *v == volume) {
                    Some((_, callers)) if callers.contains(&c.name.as_str()) => {}
                    Some((_, callers)) => callers.push(&c.name),
                    None => volumes.push((volume, vec![&c.name])),
                }
            }
        }
    }
    for c in pod.containers.iter().filter(|c| !installs(c)) {
        for (i, m) in c.value["volumeMounts"]
            .as_array()
            .into_iter()
            .flatten()
            .enumerate()
        {
            let Some((volume, callers)) = volumes.iter().find(|(v, _)| m["name"] == v.as_str())
            else {
                continue;
            };
            let others: Vec<&str> = callers.iter().copied().filter(|n| *n != c.name).collect();
            if m["readOnly"] != true && !others.is_empty() {
                sink.add(
                    &BINARY_WRITABLE,
                    Some(&c.name),
                    &format!("{}.volumeMounts[{i}]", c.path),
                    format!(
                        "{} mounts volume {volume} writable, and the hooklog binary there is what the preStop hooks of {} run: {} can replace it, or rename its folder and put its own program there, and the next hook runs that as its container's user",
                        c.name,
                        others.join(", "),
                        c.name
                    ),
                    "give the binary a volume of its own, written only by the init container that runs `hooklog install` and mounted `readOnly: true` everywhere else (a volume that also holds the socket or the file cannot be read-only); `hooklog inject` does (hooklog-bin at /hooklog-bin)",
                );
            }
        }
    }
}

/// An init container that runs `hooklog install`: the one writer a binary's volume needs.
fn installs(c: &Container) -> bool {
    c.init
        && container_hooklog_argv(c).is_some_and(|argv| {
            matches!(
                parse_hooklog(&argv, &c.literal_env()),
                Ok(Command::Install(_))
            )
        })
}

pub fn check_pod(pod: &Pod, opts: &Options, sink: &mut Sink) {
    check_mounts(pod, opts, sink);
    check_binary_writable(pod, sink);
    for c in &pod.containers {
        if let Some(argv) = container_hooklog_argv(c)
            && let Err(e) = parse_hooklog(&argv, &c.literal_env())
        {
            invalid(sink, c, &format!("{}.args", c.path), &argv, &e);
        }
    }
    let Some(sidecar) = &pod.sidecar else {
        let wrapped_any = pod.containers.iter().any(|c| {
            crate::manifest::hooks::hooks(c)
                .iter()
                .any(|h| match &h.handler {
                    Handler::Exec(argv) => {
                        crate::manifest::hooks::wrapped(argv, &c.literal_env()).is_some()
                    }
                    _ => false,
                })
        });
        if wrapped_any {
            sink.add(
                &NO_SIDECAR,
                None,
                pod.spec_path,
                "hooks are wrapped in `hooklog hook` but no container runs `hooklog run`: their records land in a file nobody reads".to_string(),
                "add the hooklog sidecar (`hooklog inject`)",
            );
        }
        return;
    };
    let c = &sidecar.container;
    let have: Vec<&str> = c.value["env"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["valueFrom"]["fieldRef"].is_object())
        .filter_map(|e| e["name"].as_str())
        .collect();
    let missing: Vec<&str> = DOWNWARD_ENV
        .iter()
        .copied()
        .filter(|n| !have.contains(n))
        .collect();
    if !missing.is_empty() {
        sink.add(
            &DOWNWARD_API,
            Some(&c.name),
            &format!("{}.env", c.path),
            format!("the hooklog sidecar lacks the Downward API env {}: its records lack that pod metadata", missing.join(", ")),
            "add them as `valueFrom.fieldRef` env (see k8s/ or `hooklog inject`)",
        );
    }
    for (flag, list) in [
        ("--socket", &sidecar.args.sockets),
        ("--file", &sidecar.args.files),
    ] {
        for p in list {
            let p = p.to_string_lossy();
            if c.on_volume(&p).is_none() {
                sink.add(
                    &PATH_NOT_SHARED,
                    Some(&c.name),
                    &format!("{}.args", c.path),
                    format!("the sidecar's {flag} {p} is on no volume it mounts: no other container can reach it"),
                    "put it on the shared emptyDir",
                );
            }
        }
    }
}
