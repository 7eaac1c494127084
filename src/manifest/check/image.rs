//! A hook command that cannot exist in its image: looked up in the image's filesystem
//! (`--image-root`, a folder or a `docker export` tar) the way the container runtime does, or
//! known from the image's name (shell-less image patterns).

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use super::{Pod, Rule, Severity, Sink};
use crate::manifest::hooks::{Handler, Hook, is_hooklog, is_sleep, wrapped};
use crate::manifest::podspec::Container;

pub const NOT_IN_IMAGE: Rule = Rule {
    id: "hook-command-not-in-image",
    severity: Severity::Error,
    description: "An exec hook's command is missing or not executable in the image's filesystem (--image-root).",
};
pub const SHELL_LESS: Rule = Rule {
    id: "hook-command-in-shell-less-image",
    severity: Severity::Error,
    description: "An exec hook runs a shell or coreutil in an image known to have none (distroless, chainguard, ...).",
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
pub const DEFAULT_SHELL_LESS: [&str; 9] = [
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
    // hooklog's own image is FROM scratch
    "hooklog",
    "hooklog:*",
    "*/hooklog:*",
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

/// A file system entry, as far as command lookup cares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    File { mode: u32 },
    Dir,
    Symlink(String),
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
            ImageRoot::Tar(map) => map.get(path).cloned().or_else(|| {
                // Folders a tar names only through their files.
                let prefix = format!("{path}/");
                map.keys()
                    .any(|k| k.starts_with(&prefix))
                    .then_some(Entry::Dir)
            }),
        }
    }

    /// Follows `path` inside the root as the kernel would in a chroot: absolute symlinks start
    /// at the root, `..` stops there. Returns the final entry and its resolved path, or why not.
    pub fn resolve(&self, path: &str) -> Result<(String, Entry), String> {
        let mut pending: Vec<String> = components(path).into_iter().rev().collect();
        let mut cur: Vec<String> = Vec::new();
        let mut hops = 0;
        while let Some(c) = pending.pop() {
            if c == ".." {
                cur.pop();
                continue;
            }
            cur.push(c);
            let here = format!("/{}", cur.join("/"));
            match self.entry(&here) {
                None => return Err(format!("{here} does not exist")),
                Some(Entry::Symlink(target)) => {
                    hops += 1;
                    if hops > MAX_SYMLINKS {
                        return Err(format!("{here}: too many levels of symbolic links"));
                    }
                    cur.pop();
                    if target.starts_with('/') {
                        cur.clear();
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
    root: &ImageRoot,
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
        match root.resolve(&c) {
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
fn command_in_container(c: &Container, hook: &Hook) -> Option<Vec<String>> {
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

pub fn check_hook(_pod: &Pod, c: &Container, hook: &Hook, opts: &super::Options, sink: &mut Sink) {
    let Some(argv) = command_in_container(c, hook) else {
        return;
    };
    let Some(program) = argv.first() else {
        return;
    };
    if is_hooklog(program) {
        return; // from the shared volume: the wiring rules look at it
    }
    // A program on one of the container's volumes is not the image's.
    if program.starts_with('/') && c.on_volume(program).is_some() {
        return;
    }
    let image = c.image();
    if let Some(root) = opts.image_roots.get(image) {
        let env = c.literal_env();
        let path_var = env.get("PATH").map(String::as_str).unwrap_or(DEFAULT_PATH);
        let workdir = c.value["workingDir"].as_str().unwrap_or("/");
        if let Err(tried) = lookup(root, program, path_var, workdir) {
            sink.add(
                &NOT_IN_IMAGE,
                Some(&c.name),
                &hook.path,
                format!(
                    "{} runs `{program}`, which is not in {image}: tried {}; {}",
                    hook.name,
                    tried.join(", "),
                    what_fails(c, hook, program)
                ),
                fix_for(&argv),
            );
        }
        return;
    }
    let base = program.rsplit('/').next().unwrap_or_default();
    if !SHELL_TOOLS.contains(&base) {
        return;
    }
    if let Some(pattern) = opts.shell_less.shell_less(image) {
        sink.add(
            &SHELL_LESS,
            Some(&c.name),
            &hook.path,
            format!(
                "{} runs `{program}`, but {image} has no shell or coreutils (image pattern `{pattern}`): {}",
                hook.name,
                what_fails(c, hook, program)
            ),
            fix_for(&argv),
        );
    }
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
