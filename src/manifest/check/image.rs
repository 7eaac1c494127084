//! (the control plane) A hook command that cannot exist in its image: looked up the way the container runtime does
//! in the image's filesystem, as its registry serves it ([`crate::registry`]) or as
//! `--image-root` gives it (a folder or a `docker export` tar); else guessed from the image's
//! name (shell-less image patterns).

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use super::{Basis, Pod, Rule, Severity, Sink};
use crate::manifest::hooks::{Handler, Hook, is_hooklog, is_sleep, wrapped};
use crate::manifest::podspec::Container;
use crate::manifest::shell;
pub use crate::registry::Entry;
use crate::registry::{Arch, Image};

pub const NOT_IN_IMAGE: Rule = Rule {
    id: "hook-command-not-in-image",
    severity: Severity::Error,
    description: "An exec hook's command (or an exec probe's, or what the container runs: its command, else the image's ENTRYPOINT, args or CMD) is missing or not executable in the image's filesystem, as its registry serves it or --image-root gives it.",
    remediation: "Use a command the image has (`hooklog sleep D` instead of `sleep`: `hooklog inject` rewrites it), install it in the image, or use the native `sleep` action on Kubernetes 1.30+.",
};
/// Only an image read from its registry says this: `--image-root` has no config.
pub const NO_COMMAND: Rule = Rule {
    id: "container-command-not-set",
    severity: Severity::Error,
    description: "A container sets no command or args and its image (read from its registry) has no ENTRYPOINT or CMD: the runtime refuses to create it (\"no command specified\").",
    remediation: "Set the container's `command` (or `args`), or use an image with an ENTRYPOINT or CMD.",
};
/// A guess from the image's name, so a warning (issue 18): only the image's own files, read from
/// its registry or given by `--image-root`, make a definitive error (`NOT_IN_IMAGE`).
pub const SHELL_LESS: Rule = Rule {
    id: "hook-command-in-shell-less-image",
    severity: Severity::Warning,
    description: "An exec hook runs a shell or coreutil in an image whose name says it has none (distroless, chainguard, ...), and the image itself could not be read.",
    remediation: "Use `hooklog sleep D` (`hooklog inject` does it) or the native `sleep` action on Kubernetes 1.30+; if the image does have a shell, say so with `--shell-less-image '!PATTERN'`.",
};

/// Programs that shell-less images lack: shells and the coreutils hooks call.
pub const SHELL_TOOLS: [&str; 28] = [
    "sh", "bash", "ash", "dash", "zsh", "sleep", "echo", "cat", "curl", "wget", "printf", "test",
    "true", "false", "kill", "pkill", "ls", "cp", "mv", "rm", "touch", "date", "tee", "grep",
    "sed", "awk", "nc", "timeout",
];

/// The runtime's PATH when the container's env sets none (containerd, CRI-O and Docker use
/// this one; the image's own ENV PATH is not in the manifest).
pub const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// Images known to have no shell, as glob patterns (`*` is any text) over the image reference;
/// the last pattern that matches decides, `!` marks images that do have one. `--shell-less-image`
/// adds patterns after these; `--no-default-shell-less` drops them.
pub const DEFAULT_SHELL_LESS: [&str; 12] = [
    // gcr.io/distroless/*, envoyproxy/envoy-distroless, any `-distroless` tag
    "*distroless*",
    // distroless `:debug` tags carry busybox
    "!*:debug*",
    "!*:*-debug*",
    // Chainguard images; their `-dev` variants have a shell
    "cgr.dev/chainguard/*",
    "!cgr.dev/chainguard/*-dev*",
    // the pause container
    "*/pause:*",
    // hooklog's own images, the full CLI's and the sidecar's, are FROM scratch
    "hooklog",
    "hooklog:*",
    "*/hooklog:*",
    "hooklog-sidecar",
    "hooklog-sidecar:*",
    "*/hooklog-sidecar:*",
];

/// Symlinks followed in one lookup before giving up (Linux's MAXSYMLINKS).
const MAX_SYMLINKS: usize = 40;

/// Shell-less image patterns, in order.
#[derive(Debug, Clone)]
pub struct Patterns(pub Vec<String>);

impl Default for Patterns {
    fn default() -> Self {
        Patterns(DEFAULT_SHELL_LESS.iter().map(|s| s.to_string()).collect())
    }
}

impl Patterns {
    /// The pattern that says `image` is shell-less, if the last matching one does.
    pub fn shell_less(&self, image: &str) -> Option<&str> {
        let last = self
            .0
            .iter()
            .rev()
            .find(|p| glob(p.trim_start_matches('!'), image))?;
        (!last.starts_with('!')).then_some(last.as_str())
    }
}

/// `*` matches any run of characters.
pub fn glob(pattern: &str, s: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or_default();
    let Some(mut rest) = s.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else {
        return rest.is_empty();
    };
    for p in middle {
        match rest.find(p) {
            Some(i) => rest = &rest[i + p.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

/// An image's filesystem.
#[derive(Debug, Clone)]
pub enum ImageRoot {
    Dir(PathBuf),
    Tar(BTreeMap<String, Entry>),
}

/// A filesystem to look commands up in.
pub trait Tree {
    /// The entry at `path` (`/a/b`), not following a final symlink.
    fn entry(&self, path: &str) -> Option<Entry>;
}

impl Tree for BTreeMap<String, Entry> {
    fn entry(&self, path: &str) -> Option<Entry> {
        self.get(path).cloned().or_else(|| {
            // Folders a tar names only through their files.
            let prefix = format!("{path}/");
            self.range(prefix.clone()..)
                .next()
                .is_some_and(|(k, _)| k.starts_with(&prefix))
                .then_some(Entry::Dir)
        })
    }
}

impl Tree for ImageRoot {
    fn entry(&self, path: &str) -> Option<Entry> {
        match self {
            ImageRoot::Dir(root) => {
                let p = root.join(path.trim_start_matches('/'));
                let meta = std::fs::symlink_metadata(&p).ok()?;
                if meta.file_type().is_symlink() {
                    let target = std::fs::read_link(&p).ok()?;
                    Some(Entry::Symlink(target.to_string_lossy().to_string()))
                } else if meta.is_dir() {
                    Some(Entry::Dir)
                } else {
                    use std::os::unix::fs::PermissionsExt;
                    Some(Entry::File {
                        mode: meta.permissions().mode(),
                    })
                }
            }
            ImageRoot::Tar(map) => map.entry(path),
        }
    }
}

/// The architecture a pod's nodes have: `kubernetes.io/arch` in its nodeSelector, else in a
/// required node affinity term (`In` with one value, or `default` when it is among several);
/// else `default` (`--image-platform`).
pub fn pod_arch(spec: &serde_json::Value, default: Arch) -> Arch {
    const KEY: &str = "kubernetes.io/arch";
    if let Some(a) = spec["nodeSelector"][KEY].as_str().and_then(Arch::parse) {
        return a;
    }
    let terms = &spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        ["nodeSelectorTerms"];
    for term in terms.as_array().into_iter().flatten() {
        for e in term["matchExpressions"].as_array().into_iter().flatten() {
            if e["key"] != KEY || e["operator"] != "In" {
                continue;
            }
            let values: Vec<Arch> = e["values"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|v| v.as_str().and_then(Arch::parse))
                .collect();
            if values.contains(&default) {
                return default;
            }
            if let Some(a) = values.first() {
                return *a;
            }
        }
    }
    default
}

impl ImageRoot {
    /// Opens `PATH`: a folder, or a tar file (`docker export`).
    pub fn open(path: &Path) -> Result<ImageRoot, String> {
        let meta = std::fs::metadata(path).map_err(|e| format!("{}: {e}", path.display()))?;
        if meta.is_dir() {
            return Ok(ImageRoot::Dir(path.to_path_buf()));
        }
        let file = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
        read_tar(file)
            .map_err(|e| format!("{}: not a folder or a tar archive: {e}", path.display()))
    }

    /// Follows `path` inside the root as the kernel would in a chroot: absolute symlinks start
    /// at the root, `..` stops there. Returns the final entry and its resolved path, or why not.
    pub fn resolve(&self, path: &str) -> Result<(String, Entry), String> {
        resolve(self, path)
    }
}

/// Follows `path` inside `tree` as the kernel would in a chroot: absolute symlinks start at the
/// root, `..` stops there. Returns the final entry and its resolved path, or why not.
pub fn resolve(tree: &dyn Tree, path: &str) -> Result<(String, Entry), String> {
    let mut pending: Vec<String> = components(path).into_iter().rev().collect();
    // The path so far, and where each of its components starts: a component is added and
    // removed in place, so that each step costs its own length, not the whole path's (a
    // path 40,000 folders deep took a minute: issue 26).
    let mut here = String::new();
    let mut starts: Vec<usize> = Vec::new();
    let mut hops = 0;
    while let Some(c) = pending.pop() {
        if c == ".." {
            if let Some(at) = starts.pop() {
                here.truncate(at);
            }
            continue;
        }
        starts.push(here.len());
        here.push('/');
        here.push_str(&c);
        // As the kernel's ENAMETOOLONG: no entry of a listing is longer (layer::MAX_PATH).
        if here.len() > crate::registry::layer::MAX_PATH {
            let head: String = here.chars().take(64).collect();
            return Err(format!(
                "{head}...: a path longer than {} bytes",
                crate::registry::layer::MAX_PATH
            ));
        }
        match tree.entry(&here) {
            None => return Err(format!("{here} does not exist")),
            Some(Entry::Symlink(target)) => {
                hops += 1;
                if hops > MAX_SYMLINKS {
                    return Err(format!("{here}: too many levels of symbolic links"));
                }
                if let Some(at) = starts.pop() {
                    here.truncate(at);
                }
                if target.starts_with('/') {
                    here.clear();
                    starts.clear();
                }
                for t in components(&target).into_iter().rev() {
                    pending.push(t);
                }
            }
            Some(e) if pending.is_empty() => return Ok((here, e)),
            Some(Entry::Dir) => {}
            Some(_) => return Err(format!("{here} is not a folder")),
        }
    }
    Ok(("/".to_string(), Entry::Dir))
}

fn components(path: &str) -> Vec<String> {
    path.split('/')
        .filter(|c| !c.is_empty() && *c != ".")
        .map(str::to_string)
        .collect()
}

fn read_tar(r: impl Read) -> std::io::Result<ImageRoot> {
    let mut map = BTreeMap::new();
    let mut hardlinks = Vec::new();
    let mut archive = tar::Archive::new(r);
    for entry in archive.entries()? {
        let entry = entry?;
        let path = format!(
            "/{}",
            components(&entry.path()?.to_string_lossy()).join("/")
        );
        let header = entry.header();
        let e = match header.entry_type() {
            tar::EntryType::Directory => Entry::Dir,
            tar::EntryType::Symlink => Entry::Symlink(
                entry
                    .link_name()?
                    .map(|l| l.to_string_lossy().to_string())
                    .unwrap_or_default(),
            ),
            tar::EntryType::Link => {
                if let Some(l) = entry.link_name()? {
                    hardlinks.push((
                        path,
                        format!("/{}", components(&l.to_string_lossy()).join("/")),
                    ));
                }
                continue;
            }
            _ => Entry::File {
                mode: header.mode()?,
            },
        };
        map.insert(path, e);
    }
    for (path, target) in hardlinks {
        if let Some(e) = map.get(&target).cloned() {
            map.insert(path, e);
        }
    }
    if map.is_empty() {
        return Err(std::io::Error::other("no entries"));
    }
    Ok(ImageRoot::Tar(map))
}

/// Looks `program` up as the runtime does: a path as it is (relative to `workdir`), a bare
/// name in each folder of `path_var`. Ok(resolved path), or Err(the paths tried and why).
pub fn lookup(
    root: &dyn Tree,
    program: &str,
    path_var: &str,
    workdir: &str,
) -> Result<String, Vec<String>> {
    let candidates: Vec<String> = if program.contains('/') {
        if program.starts_with('/') {
            vec![program.to_string()]
        } else {
            vec![format!("{}/{program}", workdir.trim_end_matches('/'))]
        }
    } else {
        path_var
            .split(':')
            .filter(|d| !d.is_empty())
            .map(|d| format!("{}/{program}", d.trim_end_matches('/')))
            .collect()
    };
    let mut tried = Vec::new();
    for c in candidates {
        match resolve(root, &c) {
            Ok((p, Entry::File { mode })) if mode & 0o111 != 0 => return Ok(p),
            Ok((p, Entry::File { .. })) => tried.push(format!("{c} ({p} is not executable)")),
            Ok((p, _)) => tried.push(format!("{c} ({p} is a folder)")),
            Err(why) => tried.push(if why.starts_with(&format!("{c} ")) {
                why
            } else {
                format!("{c} ({why})")
            }),
        }
    }
    Err(tried)
}

/// The command a hook runs in its container: the exec command, or what `hooklog hook` wraps.
pub fn command_in_container(c: &Container, hook: &Hook) -> Option<Vec<String>> {
    let Handler::Exec(argv) = &hook.handler else {
        return None;
    };
    match wrapped(argv, &c.literal_env()) {
        Some(h) => Some(
            h.command
                .iter()
                .map(|s| s.to_string_lossy().to_string())
                .collect(),
        ),
        None => Some(argv.clone()),
    }
}

/// What a missing program does to the hook, as a v1.32 kubelet with containerd showed it:
/// unwrapped, the runtime refuses the exec and the `FailedPreStopHook` event says only
/// "PreStopHook failed" (the runtime's text is in the kubelet's log); under `hooklog hook` the
/// wrapper reports it and exits 127. Either way the container then gets SIGTERM at once.
fn what_fails(c: &Container, hook: &Hook, program: &str) -> String {
    let wrapped_hook =
        matches!(&hook.handler, Handler::Exec(argv) if wrapped(argv, &c.literal_env()).is_some());
    if wrapped_hook {
        return "`hooklog hook` reports `command not found` and exits 127, and the container gets SIGTERM at once".to_string();
    }
    let runtime = if program.contains('/') {
        "the runtime refuses the exec".to_string()
    } else {
        format!(
            "the runtime refuses the exec (containerd: `OCI runtime exec failed: exec: \"{program}\": executable file not found in $PATH`)"
        )
    };
    format!(
        "{runtime}, the FailedPreStopHook event says only \"PreStopHook failed\" (the detail is in the kubelet's log), and the container gets SIGTERM at once"
    )
}

/// The fix for a missing program.
fn fix_for(argv: &[String]) -> String {
    let program = argv.first().map(String::as_str).unwrap_or_default();
    if is_sleep(program) {
        let n = argv[1..].join(" ");
        format!(
            "use `hooklog sleep {n}` (`hooklog inject` does it) or the native `sleep` action on Kubernetes 1.30+"
        )
    } else if program.ends_with("echo") || program.ends_with("printf") {
        "use `hooklog emit` from the shared volume (`hooklog inject` adds it), or run a program the image has".to_string()
    } else {
        "run a program the image has, without a shell (`hooklog inject` puts hooklog's `sleep` and `emit` on a shared volume)".to_string()
    }
}

/// Shell builtins and keywords: a script starting with one runs no program of that name.
const SHELL_WORDS: [&str; 31] = [
    "echo", "printf", "test", "[", "true", "false", "kill", "exit", ":", "cd", "set", "export",
    "read", "trap", "wait", "eval", ".", "source", "command", "type", "ulimit", "umask", "shift",
    "return", "if", "for", "while", "until", "case", "local", "unset",
];

/// The programs a hook's argv runs, in order: argv[0], then for `SHELL -c SCRIPT` the program
/// of the script's first command, as [`shell`] reads it, when it is a plain word (no expansion
/// or glob) and not a builtin; `exec WORD`, `command WORD` and `NAME=value WORD` count as WORD.
pub fn programs(argv: &[String]) -> Vec<String> {
    let Some(first) = argv.first() else {
        return Vec::new();
    };
    let mut out = vec![first.clone()];
    let Some(command) = shell::shell_script(argv)
        .and_then(shell::read)
        .and_then(|commands| commands.into_iter().next())
        .filter(|c| !c.opaque)
    else {
        return out;
    };
    let plain = |w: &str| {
        !w.is_empty()
            && w.chars()
                .all(|ch| ch.is_ascii_alphanumeric() || "/._-+".contains(ch))
    };
    let (_, words) = shell::program(&command.words);
    if let Some(w) = words
        .first()
        .filter(|w| plain(w) && !SHELL_WORDS.contains(&w.as_str()))
    {
        out.push(w.clone());
    }
    out
}

/// The filesystem that decides for a container, and how to name it in a message.
pub struct Lookup<'a> {
    tree: &'a dyn Tree,
    pub basis: Basis,
    /// `envoy:1` or `envoy:1 (linux/amd64 sha256:...)`.
    pub label: String,
    path_var: String,
    workdir: String,
    /// The image as its registry serves it, config included; `None` for `--image-root`, which
    /// has no ENTRYPOINT or CMD.
    image: Option<&'a Image>,
}

impl Lookup<'_> {
    /// The first of `programs` that the image decides about and lacks: its index, name and
    /// the paths tried.
    pub fn first_missing(
        &self,
        c: &Container,
        programs: &[String],
    ) -> Option<(usize, String, Vec<String>)> {
        programs.iter().enumerate().find_map(|(i, p)| {
            if !from_image(c, p) {
                return None;
            }
            let tried = lookup(self.tree, p, &self.path_var, &self.workdir).err()?;
            Some((i, p.clone(), tried))
        })
    }
}

/// The lookup for container `c` of the pod spec `spec`: its `--image-root`, else its image as
/// read from the registry; `None` when neither is known.
pub fn lookup_for<'a>(
    spec: &serde_json::Value,
    c: &Container,
    opts: &'a super::Options,
) -> Option<Lookup<'a>> {
    let image = c.image();
    let env = c.literal_env();
    let workdir = c.value["workingDir"].as_str();
    if let Some(root) = opts.image_roots.get(image) {
        return Some(Lookup {
            tree: root,
            basis: Basis::ImageRoot,
            label: image.to_string(),
            path_var: env
                .get("PATH")
                .map_or(DEFAULT_PATH, String::as_str)
                .to_string(),
            workdir: workdir.unwrap_or("/").to_string(),
            image: None,
        });
    }
    let key = (image.to_string(), pod_arch(spec, opts.image_platform));
    let img: &Image = opts.images.get(&key)?.as_ref().ok()?;
    Some(Lookup {
        tree: &img.files,
        basis: Basis::Image,
        label: format!("{image} ({} {})", img.platform, img.digest),
        path_var: env
            .get("PATH")
            .cloned()
            .or_else(|| img.path.clone())
            .unwrap_or_else(|| DEFAULT_PATH.to_string()),
        workdir: workdir
            .map(str::to_string)
            .or_else(|| img.working_dir.clone())
            .unwrap_or_else(|| "/".to_string()),
        image: Some(img),
    })
}

/// A program the container runs that the image's filesystem decides about: not hooklog's own,
/// not on one of the container's volumes, not an `$(VAR)` the kubelet expands.
pub fn from_image(c: &Container, program: &str) -> bool {
    let on_volume = program.starts_with('/') && c.on_volume(program).is_some();
    !is_hooklog(program) && !on_volume && !program.contains("$(")
}

pub fn check_hook(pod: &Pod, c: &Container, hook: &Hook, opts: &super::Options, sink: &mut Sink) {
    let Some(argv) = command_in_container(c, hook) else {
        return;
    };
    let progs = programs(&argv);
    let Some(program) = progs.first() else {
        return;
    };
    if is_hooklog(program) {
        return; // from the shared volume: the wiring rules look at it
    }
    if let Some(l) = lookup_for(pod.spec, c, opts) {
        if let Some((i, p, tried)) = l.first_missing(c, &progs) {
            let how = if i == 0 {
                what_fails(c, hook, &p)
            } else {
                format!(
                    "its shell `{program}` runs, cannot find `{p}` and exits 127: the hook fails and the container gets SIGTERM at once"
                )
            };
            sink.add_from(
                l.basis,
                &NOT_IN_IMAGE,
                Some(&c.name),
                &hook.path,
                format!(
                    "{} runs `{p}`, which is not in {}: tried {}; {how}",
                    hook.name,
                    l.label,
                    tried.join(", "),
                ),
                fix_for(&argv),
            );
        }
        return;
    }
    // A program on one of the container's volumes is not the image's.
    if !from_image(c, program) {
        return;
    }
    let image = c.image();
    let base = program.rsplit('/').next().unwrap_or_default();
    if !SHELL_TOOLS.contains(&base) {
        return;
    }
    if let Some(pattern) = opts.shell_less.shell_less(image) {
        sink.add_from(
            Basis::Pattern,
            &SHELL_LESS,
            Some(&c.name),
            &hook.path,
            format!(
                "{} runs `{program}`, but {image} has no shell or coreutils by its name (image pattern `{pattern}`; the image itself was not read): {}",
                hook.name,
                what_fails(c, hook, program)
            ),
            fix_for(&argv),
        );
    }
}

/// The probes whose `exec.command` runs in the container.
pub const PROBES: [&str; 3] = ["startupProbe", "readinessProbe", "livenessProbe"];

/// A probe's exec command, if it has one.
pub fn probe_command(c: &Container, probe: &str) -> Option<Vec<String>> {
    let argv: Vec<String> = c.value[probe]["exec"]["command"]
        .as_array()?
        .iter()
        .filter_map(|v| v.as_str().map(str::to_string))
        .collect();
    (!argv.is_empty()).then_some(argv)
}

/// Exec probes, looked up where the image's filesystem is known: a missing command fails the
/// probe every time.
pub fn check_probes(pod: &Pod, c: &Container, opts: &super::Options, sink: &mut Sink) {
    for probe in PROBES {
        let Some(argv) = probe_command(c, probe) else {
            continue;
        };
        let Some(l) = lookup_for(pod.spec, c, opts) else {
            return;
        };
        if let Some((_, p, tried)) = l.first_missing(c, &programs(&argv)) {
            let effect = match probe {
                "livenessProbe" => "the kubelet restarts the container after each failureThreshold",
                "readinessProbe" => "the pod never becomes ready and gets no traffic",
                _ => "the container never starts up: the kubelet restarts it",
            };
            sink.add_from(
                l.basis,
                &NOT_IN_IMAGE,
                Some(&c.name),
                &format!("{}.{probe}", c.path),
                format!(
                    "{probe} runs `{p}`, which is not in {}: tried {}; the probe fails every time: {effect}",
                    l.label,
                    tried.join(", ")
                ),
                "probe with a program the image has, or an httpGet or tcpSocket probe",
            );
        }
    }
}

/// Where what a container runs was set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decided {
    /// The container's `command` (with its `args`).
    Command,
    /// The image's ENTRYPOINT (with the container's `args`, else the image's CMD).
    Entrypoint,
    /// The container's `args`, as the image has no ENTRYPOINT.
    Args,
    /// The image's CMD.
    Cmd,
}

/// What the runtime starts in a container.
#[derive(Debug, PartialEq, Eq)]
pub enum Started {
    Argv(Vec<String>, Decided),
    /// No command, args, ENTRYPOINT or CMD: the runtime refuses it.
    Nothing,
    /// The container sets no `command` and the image's config is not known (`--image-root`,
    /// an image not read): the entrypoint is not guessed.
    Unknown,
}

/// What the runtime starts, by the Kubernetes rules
/// (<https://kubernetes.io/docs/tasks/inject-data-application/define-command-argument-container/#notes>):
/// `command` replaces the image's ENTRYPOINT and `args` its CMD; with no `command` the
/// ENTRYPOINT runs with `args` if set, else with CMD; with no ENTRYPOINT either, `args` else
/// CMD. `image` is `(ENTRYPOINT, CMD)` from the image's config.
pub fn started(
    command: &[String],
    args: &[String],
    image: Option<(&[String], &[String])>,
) -> Started {
    let join = |a: &[String], b: &[String]| a.iter().chain(b).cloned().collect::<Vec<_>>();
    if !command.is_empty() {
        return Started::Argv(join(command, args), Decided::Command);
    }
    let Some((entrypoint, cmd)) = image else {
        return Started::Unknown;
    };
    if !entrypoint.is_empty() {
        let rest = if args.is_empty() { cmd } else { args };
        Started::Argv(join(entrypoint, rest), Decided::Entrypoint)
    } else if !args.is_empty() {
        Started::Argv(args.to_vec(), Decided::Args)
    } else if !cmd.is_empty() {
        Started::Argv(cmd.to_vec(), Decided::Cmd)
    } else {
        Started::Nothing
    }
}

/// What the container runs, looked up where the image's filesystem is known: its `command`,
/// else (with the image's config, read from its registry) its ENTRYPOINT, args or CMD. A
/// missing program keeps the container from starting; no command at all keeps it from being
/// created. A script's `#!` interpreter is not looked up: layers are listed, not read.
pub fn check_container(pod: &Pod, c: &Container, opts: &super::Options, sink: &mut Sink) {
    let (command, args) = c.argv();
    let Some(l) = lookup_for(pod.spec, c, opts) else {
        return;
    };
    let config = l.image.map(|i| (&i.entrypoint[..], &i.cmd[..]));
    let (argv, decided) = match started(&command, &args, config) {
        Started::Argv(argv, d) => (argv, d),
        Started::Unknown => return,
        Started::Nothing => {
            sink.add_from(
                l.basis,
                &NO_COMMAND,
                Some(&c.name),
                &format!("{}.image", c.path),
                format!(
                    "the container sets no command or args and {} no ENTRYPOINT or CMD: the runtime refuses to create it (containerd: \"no command specified\"), the pod shows CreateContainerError and never starts",
                    l.label
                ),
                "set the container's `command` to a program the image has",
            );
            return;
        }
    };
    let Some((i, p, tried)) = l.first_missing(c, &programs(&argv)) else {
        return;
    };
    let (field, what) = match decided {
        Decided::Command => ("command", "the container's command".to_string()),
        Decided::Args => (
            "args",
            "the container sets no command and its image no ENTRYPOINT, so its args run:"
                .to_string(),
        ),
        Decided::Entrypoint => (
            "image",
            "the container sets no command, so the image's ENTRYPOINT runs:".to_string(),
        ),
        Decided::Cmd => (
            "image",
            "the container sets no command or args, so the image's CMD runs:".to_string(),
        ),
    };
    let how = if i == 0 {
        "the runtime cannot start it (StartError, exit 128) and the pod restarts it forever"
            .to_string()
    } else {
        format!(
            "its shell `{}` starts, cannot find `{p}` and exits 127: the pod restarts it forever (CrashLoopBackOff)",
            argv[0]
        )
    };
    let fix = match decided {
        Decided::Command | Decided::Args => {
            "run a program the image has (its entrypoint, if the image has one, runs when `command` is left out)"
        }
        Decided::Entrypoint | Decided::Cmd => {
            "set the container's `command` to a program the image has, or fix the image"
        }
    };
    sink.add_from(
        l.basis,
        &NOT_IN_IMAGE,
        Some(&c.name),
        &format!("{}.{field}", c.path),
        format!(
            "{what} `{p}` is not in {}: tried {}; {how}",
            l.label,
            tried.join(", ")
        ),
        fix,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns() {
        let p = Patterns::default();
        assert!(
            p.shell_less("envoyproxy/envoy-distroless:v1.31.0")
                .is_some()
        );
        assert!(p.shell_less("gcr.io/distroless/static:nonroot").is_some());
        assert!(p.shell_less("gcr.io/distroless/base:debug").is_none());
        assert!(p.shell_less("cgr.dev/chainguard/nginx:latest").is_some());
        assert!(
            p.shell_less("cgr.dev/chainguard/nginx:latest-dev")
                .is_none()
        );
        assert!(p.shell_less("nginx:1.27").is_none());
        assert!(p.shell_less("envoyproxy/envoy:v1.31.0").is_none());
        assert!(glob("a*b*c", "aXbYc") && !glob("a*b", "ab c"));
    }

    #[test]
    fn shell_scripts_name_their_first_program() {
        let v = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(programs(&v(&["sh", "-c", "sleep 5"])), v(&["sh", "sleep"]));
        assert_eq!(
            programs(&v(&["/bin/sh", "-ec", "exec /usr/bin/curl -s x"])),
            v(&["/bin/sh", "/usr/bin/curl"])
        );
        assert_eq!(programs(&v(&["sh", "-c", "echo hi; sleep 1"])), v(&["sh"]));
        assert_eq!(programs(&v(&["sh", "-c", "$CMD"])), v(&["sh"]));
        assert_eq!(programs(&v(&["sleep", "-c", "x"])), v(&["sleep"]));
        // Read as sh reads it (manifest::shell): quotes removed, past assignments and
        // `command`; a subshell, a backslash at the end or a script starting with `-` runs
        // no program of that name.
        assert_eq!(
            programs(&v(&["sh", "-ce", "A=1 command 'curl' -s x"])),
            v(&["sh", "curl"])
        );
        assert_eq!(programs(&v(&["sh", "-c", "(curl x)"])), v(&["sh"]));
        assert_eq!(programs(&v(&["sh", "-c", "-x; curl"])), v(&["sh"]));
        let arm = serde_json::json!({"nodeSelector": {"kubernetes.io/arch": "arm64"}});
        assert_eq!(pod_arch(&arm, Arch::Amd64), Arch::Arm64);
        let either = serde_json::json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64", "amd64"]}]}]}}}});
        assert_eq!(pod_arch(&either, Arch::Amd64), Arch::Amd64);
        assert_eq!(pod_arch(&either, Arch::Arm64), Arch::Arm64);
    }

    #[test]
    fn what_runs_follows_the_kubernetes_rules() {
        let v = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let (ep, cmd) = (v(&["/ep"]), v(&["c1"]));
        let img = Some((&ep[..], &cmd[..]));
        let argv = |a: &[&str], d| Started::Argv(v(a), d);
        // command replaces ENTRYPOINT, and CMD is dropped with it.
        assert_eq!(
            started(&v(&["x"]), &[], img),
            argv(&["x"], Decided::Command)
        );
        assert_eq!(
            started(&v(&["x"]), &v(&["a"]), img),
            argv(&["x", "a"], Decided::Command)
        );
        // no command: ENTRYPOINT with args, else with CMD.
        assert_eq!(
            started(&[], &v(&["a"]), img),
            argv(&["/ep", "a"], Decided::Entrypoint)
        );
        assert_eq!(
            started(&[], &[], img),
            argv(&["/ep", "c1"], Decided::Entrypoint)
        );
        // no ENTRYPOINT: args, else CMD, else nothing.
        let no_ep = Some((&[][..], &cmd[..]));
        assert_eq!(started(&[], &v(&["a"]), no_ep), argv(&["a"], Decided::Args));
        assert_eq!(started(&[], &[], no_ep), argv(&["c1"], Decided::Cmd));
        assert_eq!(
            started(&[], &[], Some((&[][..], &[][..]))),
            Started::Nothing
        );
        // no config (--image-root): only a command is known.
        assert_eq!(started(&[], &v(&["a"]), None), Started::Unknown);
    }

    /// Issue 26: a file 40,000 folders deep behind `/bin/sh` took check 54-77 s to resolve.
    /// Resolving is linear in the path now, and a path past PATH_MAX ends as the kernel's does.
    #[test]
    fn deep_paths_resolve_in_linear_time() {
        let mut map = BTreeMap::new();
        // 5,000 folders (10 KB of path): deep enough to be past PATH_MAX, small enough that
        // the test's own map (every prefix a key) stays 25 MB.
        let deep: String = (0..5_000).map(|_| "/d").collect();
        let mut p = String::new();
        for _ in 0..5_000 {
            p.push_str("/d");
            map.insert(p.clone(), Entry::Dir);
        }
        map.insert(format!("{deep}/sh"), Entry::File { mode: 0o755 });
        map.insert("/bin".into(), Entry::Dir);
        map.insert("/bin/sh".into(), Entry::Symlink(format!("{deep}/sh")));
        let shallow: String = (0..1000).map(|_| "/d").collect();
        map.insert(format!("{shallow}/ok"), Entry::File { mode: 0o755 });
        map.insert("/bin/ok".into(), Entry::Symlink(format!("{shallow}/ok")));
        let started = std::time::Instant::now();
        let e = resolve(&map, "/bin/sh").unwrap_err();
        assert!(e.contains("longer than"), "{e}");
        assert_eq!(
            resolve(&map, "/bin/ok").unwrap(),
            (format!("{shallow}/ok"), Entry::File { mode: 0o755 })
        );
        assert!(
            started.elapsed() < std::time::Duration::from_secs(2),
            "{:?}",
            started.elapsed()
        );
    }

    #[test]
    fn tar_roots_follow_symlinks() {
        let mut b = tar::Builder::new(Vec::new());
        let mut add = |path: &str, kind: tar::EntryType, mode: u32, link: Option<&str>| {
            let mut h = tar::Header::new_gnu();
            h.set_entry_type(kind);
            h.set_mode(mode);
            h.set_size(0);
            if let Some(l) = link {
                h.set_link_name(l).unwrap();
            }
            b.append_data(&mut h, path, std::io::empty()).unwrap();
        };
        add("bin/", tar::EntryType::Directory, 0o755, None);
        add("bin/busybox", tar::EntryType::Regular, 0o755, None);
        add("bin/sleep", tar::EntryType::Symlink, 0o777, Some("busybox"));
        add(
            "bin/sh",
            tar::EntryType::Symlink,
            0o777,
            Some("../../../bin/busybox"),
        );
        add(
            "bin/cat",
            tar::EntryType::Symlink,
            0o777,
            Some("/nowhere/cat"),
        );
        add("bin/data", tar::EntryType::Regular, 0o644, None);
        let root = read_tar(&b.into_inner().unwrap()[..]).unwrap();
        assert_eq!(
            lookup(&root, "sleep", DEFAULT_PATH, "/"),
            Ok("/bin/busybox".into())
        );
        assert_eq!(
            lookup(&root, "/bin/sh", DEFAULT_PATH, "/"),
            Ok("/bin/busybox".into())
        );
        let e = lookup(&root, "cat", DEFAULT_PATH, "/").unwrap_err();
        assert!(
            e.iter().any(|t| t.contains("/nowhere does not exist")),
            "{e:?}"
        );
        assert!(
            lookup(&root, "/bin/data", DEFAULT_PATH, "/").unwrap_err()[0]
                .contains("not executable")
        );
    }
}
