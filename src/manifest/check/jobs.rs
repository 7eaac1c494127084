//! (the control plane) Pods that must complete: a regular container that never ends on its own (`hooklog run` as a
//! classic sidecar, `sleep infinity`) keeps a pod that runs to completion (a Job's, a bare Pod's
//! with restartPolicy Never or OnFailure: [`crate::manifest::adoption::runs_to_completion`])
//! running, so it never completes.

use super::{Pod, Rule, Severity, Sink};
use crate::cli::Command;
use crate::manifest::adoption::{self, PodView};
use crate::manifest::hooks::{container_hooklog_argv, is_sleep, parse_hooklog};
use crate::manifest::podspec::Container;

pub const NEVER_ENDS: Rule = Rule {
    id: "job-container-never-ends",
    severity: Severity::Error,
    description: "A regular container that never ends on its own (`hooklog run` as a classic sidecar, `sleep infinity`) in a pod that runs to completion (a Job's or CronJob's, a Pod whose restartPolicy is Never or OnFailure, a batch kind's): the pod never completes.",
    remediation: "Run hooklog as a native sidecar (`hooklog inject --sidecar native`, Kubernetes 1.29+) or not at all in a pod that runs to completion.",
};

/// Why `c` runs until it is signalled, if it does.
fn never_ends(c: &Container) -> Option<&'static str> {
    if let Some(argv) = container_hooklog_argv(c) {
        return match parse_hooklog(&argv, &c.literal_env()) {
            Ok(Command::Run(_)) => Some("`hooklog run` ends only on SIGTERM"),
            Ok(Command::Sleep(s)) if s.durations.contains(&std::time::Duration::MAX) => {
                Some("`hooklog sleep infinity` never ends")
            }
            _ => None,
        };
    }
    let (command, args) = c.argv();
    let argv: Vec<String> = command.into_iter().chain(args).collect();
    match argv.as_slice() {
        [program, arg] if is_sleep(program) && (arg == "infinity" || arg == "inf") => {
            Some("`sleep infinity` never ends")
        }
        _ => None,
    }
}

pub fn check_pod(pod: &Pod, sink: &mut Sink) {
    // The same rule inject and the webhook follow.
    let Some(completion) = adoption::runs_to_completion(&PodView {
        kind: &pod.object.kind,
        metadata: pod.metadata,
        spec: pod.spec,
    }) else {
        return;
    };
    for c in pod.containers.iter().filter(|c| !c.init) {
        let Some(why) = never_ends(c) else { continue };
        sink.add(
            &NEVER_ENDS,
            Some(&c.name),
            &c.path,
            format!(
                "{why}, and {} is a regular container of {}: the pod never completes, so the {} never does",
                c.name, completion.why, completion.what
            ),
            "run it as a native sidecar (an init container with `restartPolicy: Always`, Kubernetes 1.29+: `hooklog inject` does), or leave it out",
        );
    }
}
