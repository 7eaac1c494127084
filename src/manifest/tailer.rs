//! (the control plane) The busybox `tail -F` workaround as pods have it: a container that follows
//! files of a shared volume (`tail -F`, `-f`, `--follow`, busybox or coreutils, exec or `sh -c`),
//! the sleeping preStop that keeps it alive, and the hooks that write files (`>`, `>>`, `tee`).
//! Below `check` and `inject`, which both read it, so that the rule and the migration agree.

use serde_json::Value;

use super::hooks::{self, Handler};
use super::podspec::Container;
use super::shell::{self, RedirectKind, Simple, shell_script};

/// A file as the pod shares it: the volume and the path inside it (a mount's `subPath` in
/// front). Two containers mounting one volume at different paths name the same file.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct SharedFile {
    pub volume: String,
    pub inner: String,
}

/// A file a tailer follows.
#[derive(Debug, Clone)]
pub struct Followed {
    /// The path as the tailer names it.
    pub path: String,
    /// Where it lies, when on a volume.
    pub shared: Option<SharedFile>,
}

/// A container that follows files with `tail`.
#[derive(Debug, Clone)]
pub struct Tailer {
    /// The container's name.
    pub name: String,
    /// Its field path (`spec.containers[2]`).
    pub path: String,
    pub files: Vec<Followed>,
    /// The preStop that keeps it alive, as written (`sleep 55`), when it is one: a hook of known
    /// length made only of sleeps and quick builtins, or the native sleep action.
    pub keep_alive: Option<String>,
    /// What it does besides following, when it does more (`sed`, a pipe): inject leaves it.
    pub extra_work: Option<String>,
}

/// A hook that writes to a file.
#[derive(Debug, Clone)]
pub struct Write {
    /// The writing container's name.
    pub container: String,
    /// `preStop` or `postStart`.
    pub hook: &'static str,
    /// The hook's field path.
    pub hook_path: String,
    /// The path as the hook writes it.
    pub path: String,
    pub shared: Option<SharedFile>,
}

/// Setup commands a pure tailer may run besides `tail` (the workaround's `touch` and `chmod`).
const SETUP: [&str; 10] = [
    "touch", "chmod", "chown", "mkdir", "true", ":", "set", "wait", "echo", "printf",
];

/// Where a tailer's stdout may go: the container's own output.
const OWN_OUTPUT: [&str; 4] = [
    "/dev/stdout",
    "/proc/1/fd/1",
    "/proc/self/fd/1",
    "/dev/fd/1",
];

/// The tailers among `containers`: the app containers and native sidecars (what runs while
/// the hooks do).
pub fn tailers(containers: &[Container]) -> Vec<Tailer> {
    containers
        .iter()
        .filter(|c| !c.init || c.native_sidecar())
        .filter_map(tailer)
        .collect()
}

/// The container's argv (its `command` then `args`, or `args` alone) when it follows files.
pub fn tailer(c: &Container) -> Option<Tailer> {
    let (command, args) = c.argv();
    let argv: Vec<String> = command.into_iter().chain(args).collect();
    let (paths, extra_work) = followed(&argv)?;
    let files = paths
        .into_iter()
        .map(|path| Followed {
            shared: shared(c, &path),
            path,
        })
        .collect();
    Some(Tailer {
        name: c.name.clone(),
        path: c.path.clone(),
        files,
        keep_alive: keep_alive(c),
        extra_work,
    })
}

/// Where `path` of container `c` lies on a volume.
pub fn shared(c: &Container, path: &str) -> Option<SharedFile> {
    c.on_volume(path)
        .map(|(volume, inner)| SharedFile { volume, inner })
}

/// The files an argv follows and, when it does more than follow, what.
fn followed(argv: &[String]) -> Option<(Vec<String>, Option<String>)> {
    if let Some(files) = tail_files(argv) {
        return Some((files, None));
    }
    let script = shell_script(argv)?;
    let commands = shell::read(script)?;
    let mut files = Vec::new();
    let mut extra = None;
    for cmd in &commands {
        let (_, words) = shell::program(&cmd.words);
        if let Some(f) = tail_files(words) {
            files.extend(f);
            // Its stdout sent elsewhere (a file, not the container's own output); stderr may go
            // anywhere.
            let stdout_elsewhere = cmd.redirects.iter().any(|r| {
                r.sends_output()
                    && r.fd.is_none_or(|f| f == 1)
                    && r.kind != RedirectKind::Dup
                    && !OWN_OUTPUT.contains(&r.target.as_str())
            });
            if cmd.piped || cmd.opaque || stdout_elsewhere {
                extra.get_or_insert_with(|| {
                    "its `tail` is piped or redirected elsewhere".to_string()
                });
            }
            continue;
        }
        let program = words.first().map(String::as_str).unwrap_or_default();
        let quiet = SETUP.contains(&program) && !cmd.opaque && !cmd.piped;
        let nothing = words.is_empty() && cmd.redirects.is_empty();
        if !(quiet || nothing) {
            extra.get_or_insert_with(|| format!("it also runs `{}`", cmd.text()));
        }
    }
    (!files.is_empty()).then_some((files, extra))
}

/// The files of `tail` that follows (`-f`, `-F`, `--follow[=name|descriptor]`), as coreutils
/// and busybox take its options; `None` for any other command or a tail that does not follow.
pub fn tail_files(argv: &[String]) -> Option<Vec<String>> {
    let base = |p: &str| p.rsplit('/').next().unwrap_or_default().to_string();
    let rest = match argv {
        [program, rest @ ..] if base(program) == "tail" => rest,
        [program, applet, rest @ ..] if base(program) == "busybox" && applet == "tail" => rest,
        _ => return None,
    };
    let mut follow = false;
    let mut files = Vec::new();
    let mut i = 0;
    let mut options = true;
    while i < rest.len() {
        let a = &rest[i];
        i += 1;
        if !options || a == "-" || !a.starts_with('-') {
            files.push(a.clone());
            continue;
        }
        if a == "--" {
            options = false;
            continue;
        }
        if let Some(long) = a.strip_prefix("--") {
            let (name, value) = long
                .split_once('=')
                .map_or((long, None), |(n, v)| (n, Some(v)));
            match name {
                "follow" => follow = true,
                "lines" | "bytes" | "sleep-interval" | "pid" | "max-unchanged-stats"
                    if value.is_none() =>
                {
                    i += 1
                }
                _ => {}
            }
            continue;
        }
        // A cluster of short options: `-F`, `-qF`, `-n0`, `-n 0`, `-Fn 0`; `-10` is a count.
        for (at, ch) in a[1..].char_indices() {
            match ch {
                'f' | 'F' => follow = true,
                'n' | 'c' | 's' => {
                    if a.len() == at + 2 {
                        i += 1;
                    }
                    break;
                }
                _ => {}
            }
        }
    }
    (follow && !files.is_empty()).then_some(files)
}

/// The tailer's preStop, as written, when it only keeps the container alive.
fn keep_alive(c: &Container) -> Option<String> {
    let hook = hooks::hooks(c).into_iter().find(|h| h.name == "preStop")?;
    match &hook.handler {
        Handler::Sleep(s) => Some(format!("sleep action {s}s")),
        Handler::Exec(argv) => {
            let b = hooks::bound(&hook.handler, &c.literal_env());
            (b.max.is_some_and(|m| !m.is_zero())).then(|| argv.join(" "))
        }
        _ => None,
    }
}

/// Every file the exec hooks of `containers` write to (by `>`, `>>`, `&>` or `tee`), absolute
/// paths only (`$LOG` is not followed), `/dev` and `/proc` left out.
pub fn writes(containers: &[Container]) -> Vec<Write> {
    let mut out = Vec::new();
    for c in containers {
        for hook in hooks::hooks(c) {
            let Handler::Exec(argv) = &hook.handler else {
                continue;
            };
            for path in written(argv) {
                out.push(Write {
                    container: c.name.clone(),
                    hook: hook.name,
                    hook_path: hook.path.clone(),
                    shared: shared(c, &path),
                    path,
                });
            }
        }
    }
    out
}

/// The files one exec command writes to; what is inside `hooklog hook`'s wrapper counts.
pub fn written(argv: &[String]) -> Vec<String> {
    let inner = match argv.iter().position(|a| a == "--") {
        Some(i) if argv.first().is_some_and(|p| hooks::is_hooklog(p)) => &argv[i + 1..],
        _ => argv,
    };
    let commands = match shell_script(inner) {
        Some(script) => shell::read(script).unwrap_or_default(),
        None => vec![Simple::argv(inner)],
    };
    let mut out: Vec<String> = Vec::new();
    for cmd in &commands {
        for r in &cmd.redirects {
            if r.sends_output() && r.kind != RedirectKind::Dup {
                out.push(r.target.clone());
            }
        }
        let (_, words) = shell::program(&cmd.words);
        if words
            .first()
            .is_some_and(|p| p == "tee" || p.ends_with("/tee"))
        {
            out.extend(words[1..].iter().filter(|w| !w.starts_with('-')).cloned());
        }
    }
    out.retain(|p| {
        p.starts_with('/')
            && !p.contains('$')
            && !p.starts_with("/dev/")
            && !p.starts_with("/proc/")
    });
    out.dedup();
    out
}

/// The files hooklog's sidecar reads (`run --file`), as volume files, of a parsed `run`.
pub fn hooklog_reads(c: &Container, files: &[std::path::PathBuf]) -> Vec<SharedFile> {
    files
        .iter()
        .filter_map(|f| shared(c, &f.to_string_lossy()))
        .collect()
}

/// Whether any of `containers` (other than the writers in `writers`) may read `file`: a tailer of
/// it, a command, argument or exec probe that names it, or a container that mounts its volume and
/// writes nothing there from a hook (a log shipper reads by its configuration, unseen here).
/// hooklog's sidecar reads only its `--file`s, given in `hooklog_files`.
pub fn read_by(
    containers: &[Container],
    file: &SharedFile,
    writers: &[&str],
    hooklog: Option<(&str, &[SharedFile])>,
) -> bool {
    containers
        .iter()
        .filter(|c| !c.init || c.native_sidecar())
        .any(|c| {
            if let Some((name, reads)) = hooklog
                && c.name == name
            {
                return reads.contains(file);
            }
            if hooks::container_hooklog_argv(c).is_some() {
                return false;
            }
            if names(c, file) {
                return true;
            }
            !writers.contains(&c.name.as_str())
                && c.mounts().iter().any(|m| m.volume == file.volume)
        })
}

/// A container's command, args or exec probes name `file` (as that container sees it).
fn names(c: &Container, file: &SharedFile) -> bool {
    let (command, args) = c.argv();
    let probes = ["livenessProbe", "readinessProbe", "startupProbe"]
        .iter()
        .flat_map(|p| super::podspec::strings(&c.value[*p]["exec"]["command"]));
    let mounts = c.mounts();
    command.into_iter().chain(args).chain(probes).any(|arg| {
        mounts.iter().filter(|m| m.volume == file.volume).any(|m| {
            let within = file
                .inner
                .strip_prefix(m.sub_path.trim_matches('/'))
                .map(|r| r.trim_start_matches('/'));
            within.is_some_and(|r| arg.contains(&format!("{}/{r}", m.path)))
        })
    })
}

/// The value of a container of `spec` by name, mutable.
pub fn container_mut<'a>(spec: &'a mut Value, name: &str) -> Option<&'a mut Value> {
    spec.as_object_mut()?
        .iter_mut()
        .filter(|(k, _)| *k == "initContainers" || *k == "containers")
        .filter_map(|(_, v)| v.as_array_mut())
        .flat_map(|l| l.iter_mut())
        .find(|c| c["name"] == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &[&str]) -> Vec<String> {
        s.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn every_way_of_writing_tail_follow_is_read() {
        for argv in [
            v(&["tail", "-F", "/l/p.log"]),
            v(&["/usr/bin/tail", "-f", "/l/p.log"]),
            v(&["tail", "--follow=name", "--retry", "/l/p.log"]),
            v(&["tail", "--follow", "/l/p.log"]),
            v(&["busybox", "tail", "-n", "0", "-F", "/l/p.log"]),
            v(&["/bin/busybox", "tail", "-Fn0", "/l/p.log"]),
            v(&["tail", "-qF", "--lines", "+1", "/l/p.log"]),
            v(&["tail", "-n+1", "-F", "--", "/l/p.log"]),
        ] {
            assert_eq!(tail_files(&argv), Some(v(&["/l/p.log"])), "{argv:?}");
        }
        assert_eq!(tail_files(&v(&["tail", "-n", "5", "/l/p.log"])), None);
        assert_eq!(tail_files(&v(&["cat", "-F", "/l/p.log"])), None);
        for script in [
            "touch /l/p.log; chmod 666 /l/p.log; tail -F /l/p.log",
            "set -e\nmkdir -p /l && touch /l/p.log\nexec tail -F /l/p.log 2>/dev/null",
            "tail -F /l/p.log > /proc/1/fd/1",
        ] {
            let (files, extra) = followed(&v(&["sh", "-c", script])).expect(script);
            assert_eq!((files, extra), (v(&["/l/p.log"]), None), "{script}");
        }
        for script in [
            "tail -F /l/p.log | sed -u s/x/y/",
            "nginx; tail -F /l/p.log",
            "tail -F /l/p.log >> /l/copy.log",
            "tail -F \"$LOG\" /l/p.log",
        ] {
            let (_, extra) = followed(&v(&["sh", "-c", script])).expect(script);
            assert!(extra.is_some(), "{script}");
        }
        // What the readers before manifest::shell took for a tailer: `1A=2` is a program, not
        // an assignment; a here-document's text runs nothing; sh takes `-a;...` for options.
        for argv in [
            v(&["sh", "-c", "1A=2 tail -F /l/p.log"]),
            v(&["sh", "-c", "cat <<EOF > /l/x\ntail -F /l/p.log\nEOF"]),
            v(&["sh", "-c", "-a; tail -F /l/p.log"]),
        ] {
            assert_eq!(followed(&argv), None, "{argv:?}");
        }
        let (_, extra) = followed(&v(&["sh", "-c", "exec |\ntail -F /l/p.log"])).unwrap();
        assert!(extra.is_some(), "a pipe across a line break");
        // A loop is not read: no tailer inject would take.
        assert!(followed(&v(&["sh", "-c", "while true; do tail -F /l/p.log; done"])).is_none());
        let (files, _) = followed(&v(&["sh", "-c", "tail -F /a/x & tail -F /b/y & wait"])).unwrap();
        assert_eq!(files, v(&["/a/x", "/b/y"]));
    }

    #[test]
    fn hooks_write_files_by_redirection_and_tee() {
        let script = r#"echo '{"msg":"a > b"}' >> /l/p.log; /app/up.sh >>/l/p.log 2>&1; echo x 2> /l/err.log | tee -a /l/t.log; cmd &>> /l/both; echo $X > /dev/null; echo > "$F""#;
        assert_eq!(
            written(&v(&["sh", "-c", script])),
            v(&["/l/p.log", "/l/err.log", "/l/t.log", "/l/both"])
        );
        let wrapped = v(&[
            "/hooklog/bin/hooklog",
            "hook",
            "--container",
            "a",
            "--",
            "sh",
            "-c",
            "echo hi > /l/p.log",
        ]);
        assert_eq!(written(&wrapped), v(&["/l/p.log"]));
        assert!(written(&v(&["sh", "-c", "cat < /l/p.log; echo 2>&1"])).is_empty());
        assert!(written(&v(&["sh", "-c", "cat <<EOF\necho > /l/y\nEOF"])).is_empty());
    }
}
