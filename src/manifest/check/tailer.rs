//! (the control plane) The busybox `tail -F` workaround ([`crate::manifest::tailer`]) and hook
//! output no container reads: lines a hook writes to a shared file that nothing follows.

use std::collections::BTreeSet;

use super::{Pod, Rule, Severity, Sink};
use crate::manifest::migrate;
use crate::manifest::tailer::{self, SharedFile};

pub const TAIL_WORKAROUND: Rule = Rule {
    id: "tail-sidecar-workaround",
    severity: Severity::Warning,
    description: "A container follows a file of a shared volume with `tail -F` (the busybox workaround, kept alive by a sleeping preStop while other hooks append to the file): tail stops at its own SIGTERM, lines written after are lost, and nothing reports how each hook ended.",
    remediation: "Run `hooklog inject`: hooklog's sidecar takes the tailer's place and reads the same file (`run --file`), the hooks are wrapped, and the keep-alive sleep goes (docs/lifecycle.md, \"Migrating from a tail -F sidecar\").",
};

pub const OUTPUT_UNREAD: Rule = Rule {
    id: "hook-output-unread",
    severity: Severity::Warning,
    description: "A hook writes to a file of a volume it shares (`>`, `>>`, `tee`) that no container reads: no `tail`, no hooklog `--file`, no command naming it, no other container mounting it but writers: its lines are lost.",
    remediation: "Give hooklog's sidecar the file (`run --file PATH`, with its volume mounted), or write to the hook's own stdout, which `hooklog hook` reports, or `hooklog emit` a record.",
};

pub fn check_pod(pod: &Pod, sink: &mut Sink) {
    let writes = tailer::writes(&pod.containers);
    workaround(pod, &writes, sink);
    unread(pod, &writes, sink);
}

/// Each tailer: its files, its keep-alive, the hooks that write to its files, and whether
/// inject migrates it.
fn workaround(pod: &Pod, writes: &[tailer::Write], sink: &mut Sink) {
    let found = tailer::tailers(&pod.containers);
    for t in &found {
        let Some(c) = pod.containers.iter().find(|c| c.name == t.name) else {
            continue;
        };
        let shared: Vec<&SharedFile> = t.files.iter().filter_map(|f| f.shared.as_ref()).collect();
        // A tail of its own filesystem is no workaround for other containers' hooks.
        if shared.is_empty() {
            continue;
        }
        let writers: BTreeSet<String> = writes
            .iter()
            .filter(|w| w.container != t.name)
            .filter(|w| w.shared.as_ref().is_some_and(|s| shared.contains(&s)))
            .map(|w| format!("{}'s {}", w.container, w.hook))
            .collect();
        let written = if writers.is_empty() {
            "no hook writes to it".to_string()
        } else {
            format!(
                "written by {}",
                writers.into_iter().collect::<Vec<_>>().join(", ")
            )
        };
        let alive = t
            .keep_alive
            .as_ref()
            .map(|k| format!(", kept alive by its preStop `{k}`"))
            .unwrap_or_default();
        let fix = match migrate::blocker(t, c, pod.spec, found.len()) {
            None if pod.sidecar.is_none() => format!(
                "hooklog inject (hooklog's sidecar takes {}'s place and reads {}; the keep-alive goes)",
                t.name,
                migrate::files(t)
            ),
            None => format!(
                "hooklog uninject, then hooklog inject: it migrates {} (hooklog's sidecar takes its place and reads {})",
                t.name,
                migrate::files(t)
            ),
            Some(why) => format!(
                "hooklog inject leaves it ({why}): give hooklog's sidecar `--file` for {} and remove {} by hand",
                migrate::files(t),
                t.name
            ),
        };
        sink.add(
            &TAIL_WORKAROUND,
            Some(&t.name),
            &t.path,
            format!(
                "{} follows {} with `tail`{alive}; {written}: tail stops at its SIGTERM, and no hook's outcome is reported",
                t.name,
                migrate::files(t)
            ),
            fix,
        );
    }
}

/// Each file a hook writes on a volume shared with another container that no container reads.
fn unread(pod: &Pod, writes: &[tailer::Write], sink: &mut Sink) {
    let hooklog = pod.sidecar.as_ref().map(|s| {
        (
            s.container.name.as_str(),
            tailer::hooklog_reads(&s.container, &s.args.files),
        )
    });
    let mut said = BTreeSet::new();
    for w in writes {
        let Some(file) = &w.shared else { continue };
        let mounted_by = pod
            .containers
            .iter()
            .filter(|c| c.mounts().iter().any(|m| m.volume == file.volume))
            .count();
        if mounted_by < 2 || !said.insert((w.container.clone(), w.hook, file.clone())) {
            continue;
        }
        let writers: Vec<&str> = writes
            .iter()
            .filter(|o| o.shared.as_ref() == Some(file))
            .map(|o| o.container.as_str())
            .collect();
        let reads = hooklog.as_ref().map(|(n, r)| (*n, r.as_slice()));
        if tailer::read_by(&pod.containers, file, &writers, reads) {
            continue;
        }
        sink.add(
            &OUTPUT_UNREAD,
            Some(&w.container),
            &w.hook_path,
            format!(
                "{} writes to {} (volume {}), which no container reads: its lines are lost",
                w.hook, w.path, file.volume
            ),
            match &pod.sidecar {
                Some(s) => format!(
                    "add `--file {}` to hooklog's sidecar {} (mounting volume {}), or write to the hook's stdout, which `hooklog hook` reports",
                    w.path, s.container.name, file.volume
                ),
                None => "write to the hook's stdout and run `hooklog inject` (`hooklog hook` reports it), or `hooklog emit` a record".to_string(),
            },
        );
    }
}
