//! A hook that cannot finish in time: bounded hook durations against
//! `terminationGracePeriodSeconds`, and for pods with hooklog the shutdown budget
//! ([`crate::manifest::budget`]) and `--peers`.

use std::time::Duration;

use super::{Pod, Rule, Severity, Sink, secs};
use crate::manifest::budget::{self, BudgetError, SidecarMode};
use crate::manifest::hooks::{self, Hook, bound, wrapped};
use crate::manifest::podspec::Container;

pub const EXCEEDS_GRACE: Rule = Rule {
    id: "hook-exceeds-grace-period",
    severity: Severity::Error,
    description: "A hook alone lasts longer than terminationGracePeriodSeconds: the container is killed mid-hook.",
};
pub const BUDGET: Rule = Rule {
    id: "sidecar-shutdown-budget",
    severity: Severity::Error,
    description: "The hooks and hooklog's --grace do not fit the budget the README states for the sidecar's mode.",
};
pub const GRACE_PERIOD: Rule = Rule {
    id: "sidecar-grace-not-below-period",
    severity: Severity::Error,
    description: "hooklog's --grace is not below terminationGracePeriodSeconds: the kubelet can kill it before hooks.summary.",
};
pub const NOT_IN_PEERS: Rule = Rule {
    id: "hook-container-not-in-peers",
    severity: Severity::Warning,
    description: "A classic sidecar's --peers lacks a container whose preStop `hooklog hook` wraps: a late hook is not waited for.",
};
pub const UNBOUNDED: Rule = Rule {
    id: "hook-unbounded",
    severity: Severity::Warning,
    description: "A wrapped preStop has no --timeout and no known length, so the shutdown budget cannot be checked.",
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

pub fn check_pod(pod: &Pod, sink: &mut Sink) {
    let Some(sidecar) = &pod.sidecar else {
        return;
    };
    let mut longest = Duration::ZERO;
    for c in pod.containers.iter().filter(|c| !c.init) {
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
