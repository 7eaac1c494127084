//! (the control plane) A hook that cannot finish in time: bounded hook durations against
//! `terminationGracePeriodSeconds`, and for pods with hooklog the shutdown budget
//! ([`crate::manifest::budget`]) and `--peers`.

use std::time::Duration;

use super::Options;
use super::{Pod, Rule, Severity, Sink, secs};
use crate::manifest::adoption::Adoption;
use crate::manifest::budget::{self, BudgetError, SidecarMode};
use crate::manifest::hooks::{self, Handler, Hook, bound, wrapped};
use crate::manifest::layout::own_prefix;
use crate::manifest::podspec::Container;

pub const EXCEEDS_GRACE: Rule = Rule {
    id: "hook-exceeds-grace-period",
    severity: Severity::Error,
    description: "A hook alone lasts longer than terminationGracePeriodSeconds: the container is killed mid-hook.",
    remediation: "Shorten the hook or raise terminationGracePeriodSeconds above its length.",
};
pub const BUDGET: Rule = Rule {
    id: "sidecar-shutdown-budget",
    severity: Severity::Error,
    description: "The hooks and hooklog's --grace do not fit the shutdown budget of the sidecar's mode (docs/fargate.md).",
    remediation: "Raise terminationGracePeriodSeconds, lower hooklog's --grace, or give the hook a shorter --timeout, until the budget of the sidecar's mode holds.",
};
pub const GRACE_PERIOD: Rule = Rule {
    id: "sidecar-grace-not-below-period",
    severity: Severity::Error,
    description: "hooklog's --grace is not below terminationGracePeriodSeconds: the kubelet can kill it before hooks.summary.",
    remediation: "Set hooklog's --grace below terminationGracePeriodSeconds (`hooklog inject` sets it).",
};
pub const NOT_IN_PEERS: Rule = Rule {
    id: "hook-container-not-in-peers",
    severity: Severity::Warning,
    description: "A classic sidecar's --peers lacks a container whose preStop `hooklog hook` wraps: a late hook is not waited for.",
    remediation: "Add the container to the sidecar's --peers (`hooklog inject` does).",
};
pub const CANNOT_FIT: Rule = Rule {
    id: budget::UNFIT_RULE,
    severity: Severity::Warning,
    description: "terminationGracePeriodSeconds cannot hold the hooks' known sleeps plus hooklog's 2 s: `hooklog inject` leaves the pod unchanged rather than cut a hook short.",
    remediation: "Raise terminationGracePeriodSeconds to the period the finding names, then run `hooklog inject`.",
};
pub const UNBOUNDED: Rule = Rule {
    id: "hook-unbounded",
    severity: Severity::Warning,
    description: "A wrapped preStop has no --timeout and no known length, so the shutdown budget cannot be checked.",
    remediation: "Give `hooklog hook` a --timeout below the shutdown budget (`hooklog inject` adds one), or make the hook a known sleep.",
};

pub fn check_hook(pod: &Pod, c: &Container, hook: &Hook, sink: &mut Sink) {
    let b = bound(&hook.handler, &c.literal_env());
    if b.min > pod.period {
        sink.add(
            &EXCEEDS_GRACE,
            Some(&c.name),
            &hook.path,
            format!(
                "{} lasts at least {} but terminationGracePeriodSeconds is {}: the container is killed mid-hook",
                hook.name,
                secs(b.min),
                pod.period.as_secs()
            ),
            format!(
                "shorten the hook or raise terminationGracePeriodSeconds above {}",
                b.min.as_secs_f64().ceil() as u64
            ),
        );
    }
}

/// The containers whose preStop a hooklog sidecar reports: the app containers and the native
/// sidecars other than hooklog itself (as `hooklog inject` wires them).
fn reported<'a>(pod: &'a Pod) -> impl Iterator<Item = &'a Container<'a>> {
    let own = pod.sidecar.as_ref().map(|s| s.container.path.as_str());
    pod.containers
        .iter()
        .filter(move |c| (!c.init || c.native_sidecar()) && Some(c.path.as_str()) != own)
}

/// The sidecar form `hooklog inject` would write for the cluster (native without a version).
pub(super) fn inject_mode(opts: &Options) -> SidecarMode {
    match opts.kubernetes_version {
        Some(v) if v < super::version::NATIVE_SIDECAR_SINCE => SidecarMode::Classic,
        _ => SidecarMode::Native,
    }
}

/// Why `hooklog inject` and the webhook leave `pod` unchanged on purpose, when its period cannot
/// hold its hooks' known sleeps and hooklog's margin (the same [`budget::plan`] decides).
pub fn unfit(pod: &Pod, opts: &Options) -> Option<budget::Unfit> {
    let mode = inject_mode(opts);
    let mut longest = Duration::ZERO;
    let mut unknown = false;
    for c in reported(pod).filter(|c| !c.init || mode == SidecarMode::Native) {
        let env = c.literal_env();
        for hook in hooks::hooks(c).into_iter().filter(|h| h.name == "preStop") {
            let handler = match &hook.handler {
                Handler::Exec(argv) if argv.is_empty() => continue,
                Handler::Exec(argv) => match own_prefix(argv) {
                    Some((len, _)) => Handler::Exec(argv[len..].to_vec()),
                    None => hook.handler.clone(),
                },
                Handler::Sleep(_) => hook.handler.clone(),
                _ => continue,
            };
            let b = bound(&handler, &env);
            match b.max {
                Some(m) => longest = longest.max(m),
                None => {
                    longest = longest.max(b.min);
                    unknown = true;
                }
            }
        }
    }
    budget::plan(mode, longest, unknown, pod.period).err()
}

/// A pod without hooklog whose period cannot hold its hooks' known sleeps and hooklog's
/// margin: the one `hooklog inject` leaves unchanged.
fn check_fit(pod: &Pod, opts: &Options, sink: &mut Sink) {
    if let Some(unfit) = unfit(pod, opts) {
        sink.add(
            &CANNOT_FIT,
            None,
            &format!("{}.terminationGracePeriodSeconds", pod.spec_path),
            format!(
                "{unfit}: `hooklog inject` leaves this pod unchanged rather than cut a hook short"
            ),
            format!(
                "raise terminationGracePeriodSeconds to at least {} to add hooklog",
                unfit.needed()
            ),
        );
    }
}

pub fn check_pod(pod: &Pod, opts: &Options, sink: &mut Sink) {
    let Some(sidecar) = &pod.sidecar else {
        // A pod inject leaves alone anyway (opted out, Windows) is not "left unchanged" for
        // its grace period.
        if !matches!(pod.adoption, Adoption::LeaveAlone(_)) {
            check_fit(pod, opts, sink);
        }
        return;
    };
    let mut longest = Duration::ZERO;
    for c in reported(pod) {
        let env = c.literal_env();
        for hook in hooks::hooks(c).into_iter().filter(|h| h.name == "preStop") {
            let b = bound(&hook.handler, &env);
            let hooks::Handler::Exec(argv) = &hook.handler else {
                longest = longest.max(b.max.unwrap_or(b.min));
                continue;
            };
            let Some(h) = wrapped(argv, &env) else {
                longest = longest.max(b.max.unwrap_or(b.min));
                continue;
            };
            match b.max {
                Some(m) => longest = longest.max(m),
                None => sink.add(
                    &UNBOUNDED,
                    Some(&c.name),
                    &hook.path,
                    "the wrapped preStop has no --timeout: it may run until the kubelet's SIGKILL, past hooklog's --grace".to_string(),
                    "add `--timeout` to `hooklog hook` (`hooklog inject` does)",
                ),
            }
            if sidecar.mode == SidecarMode::Classic && !sidecar.args.peers.contains(&h.container) {
                sink.add(
                    &NOT_IN_PEERS,
                    Some(&c.name),
                    &hook.path,
                    format!(
                        "`hooklog hook --container {}` is not in the sidecar's --peers ({}): if its hook starts late hooklog does not wait for it",
                        h.container,
                        sidecar.args.peers.join(",")
                    ),
                    format!("add {} to --peers", h.container),
                );
            }
        }
    }
    let path = format!("{}.args", sidecar.container.path);
    for e in budget::check(sidecar.mode, longest, sidecar.args.grace, pod.period) {
        let (rule, fix) = match &e {
            BudgetError::GraceNotBelowPeriod { .. } => (
                &GRACE_PERIOD,
                format!(
                    "lower --grace below {}s, or raise terminationGracePeriodSeconds",
                    pod.period.as_secs()
                ),
            ),
            BudgetError::NativeOverPeriod { .. } => (
                &BUDGET,
                "lower the hooks' --timeout or --grace, or raise terminationGracePeriodSeconds (`hooklog inject` computes them)".to_string(),
            ),
            BudgetError::ClassicHooksOutlastGrace { .. } => (
                &BUDGET,
                "raise --grace above the longest hook (and below terminationGracePeriodSeconds), or lower the hooks' --timeout".to_string(),
            ),
        };
        sink.add(
            rule,
            Some(&sidecar.container.name),
            &path,
            e.to_string(),
            fix,
        );
    }
}
