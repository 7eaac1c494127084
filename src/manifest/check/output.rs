//! (the control plane) Output nobody will see: hooks writing to PID 1's stdout or stderr, and exec preStop hooks
//! that nothing reports.

use super::{Options, Pod, Rule, Severity, Sink};
use crate::manifest::adoption::Adoption;
use crate::manifest::budget::SidecarMode;
use crate::manifest::hooks::{Handler, Hook, container_hooklog_argv, wrapped};
use crate::manifest::layout::{INSTALLER, SIDECAR};
use crate::manifest::podspec::Container;

pub const PROC_1: Rule = Rule {
    id: "hook-output-to-proc-1",
    severity: Severity::Warning,
    description: "A hook writes to /proc/1/fd/1 or /proc/1/fd/2, which non-root users and Fargate cannot open (an error with --platform fargate).",
    remediation: "Let `hooklog hook` carry the hook's output (`hooklog inject` wraps it and writes /dev/stdout instead), or `hooklog emit` a record.",
};
pub const NOT_REPORTED: Rule = Rule {
    id: "hook-not-reported",
    severity: Severity::Info,
    description: "An exec preStop hook is not wrapped in `hooklog hook` and no hooklog sidecar reports it (none in the pod, or a classic one, stopped before a native sidecar's hook): its output and failure go nowhere.",
    remediation: "Run `hooklog inject`: it adds the sidecar and wraps the hook in `hooklog hook` (a native sidecar reports a native sidecar's hook).",
};

pub const NOT_WRAPPED: Rule = Rule {
    id: "hook-not-wrapped",
    severity: Severity::Warning,
    description: "An exec preStop hook in a pod with a hooklog sidecar is not wrapped in `hooklog hook` (a container added after inject, a hook left as it was): the sidecar neither reports it nor waits for it.",
    remediation: "Run `hooklog inject` again: on an injected pod it wires the containers added since.",
};

/// PID 1's stdout and stderr, as hooks write to them to reach `kubectl logs`.
const PROC_1_FDS: [&str; 2] = ["/proc/1/fd/1", "/proc/1/fd/2"];

pub fn check_hook(pod: &Pod, c: &Container, hook: &Hook, opts: &Options, sink: &mut Sink) {
    let Handler::Exec(argv) = &hook.handler else {
        return;
    };
    if let Some(fd) = PROC_1_FDS
        .iter()
        .find(|fd| argv.iter().any(|a| a.contains(*fd)))
    {
        // On Fargate it fails for every user: there it is an error.
        let severity = if opts.fargate {
            Severity::Error
        } else {
            PROC_1.severity
        };
        sink.add_as(
            severity,
            &PROC_1,
            Some(&c.name),
            &hook.path,
            format!(
                "{} writes to {fd}: opening it is denied for non-root users and on Fargate, so the output is lost (and with `set -e` the hook fails)",
                hook.name
            ),
            "let `hooklog hook` carry the hook's output (`hooklog inject` wraps it), or `hooklog emit` a record",
        );
    }
    if hook.name != "preStop" || wrapped(argv, &c.literal_env()).is_some() {
        return;
    }
    let program = argv.first().map(String::as_str).unwrap_or_default();
    if argv.is_empty() {
        return;
    }
    match &pod.sidecar {
        // A pod inject leaves alone (opted out, Windows): "hooklog inject" is no fix.
        None if matches!(pod.adoption, Adoption::LeaveAlone(_)) => {}
        None => sink.add(
            &NOT_REPORTED,
            Some(&c.name),
            &hook.path,
            format!(
                "preStop `{program}` is not reported: if it fails, the FailedPreStopHook event says only \"PreStopHook failed\" and the detail is in the kubelet's log"
            ),
            "hooklog inject",
        ),
        // A native sidecar's hook runs once the app containers are gone: a classic hooklog
        // has stopped by then (`hooklog inject` notes it and leaves it unwrapped).
        Some(s) if s.mode == SidecarMode::Classic && c.native_sidecar() => sink.add(
            &NOT_REPORTED,
            Some(&c.name),
            &hook.path,
            format!(
                "preStop `{program}` of native sidecar {} runs after the app containers ended, when the classic hooklog sidecar has stopped: nothing reports it",
                c.name
            ),
            "a native hooklog sidecar reports it (Kubernetes 1.29+: `hooklog inject --kubernetes-version 1.29`)",
        ),
        // hooklog's own containers have no hook of their own to wrap.
        Some(s) if s.container.path == c.path || is_own(c) => {}
        Some(_) => sink.add(
            &NOT_WRAPPED,
            Some(&c.name),
            &hook.path,
            format!(
                "preStop `{program}` is not wrapped in `hooklog hook`, though the pod has a hooklog sidecar: it is not reported, and the sidecar does not wait for it"
            ),
            "hooklog inject (run again on an injected pod, it wires the containers added since)",
        ),
    }
}

/// hooklog's installer or sidecar, known by its name and what it runs.
fn is_own(c: &Container) -> bool {
    (c.name == SIDECAR || c.name == INSTALLER) && container_hooklog_argv(c).is_some()
}
