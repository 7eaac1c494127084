//! Pods that must complete: a regular container that never ends on its own (`hooklog run` as a
//! classic sidecar, `sleep infinity`) keeps a Job's pod running, so the Job never completes.

use super::{Pod, Rule, Severity, Sink};
use crate::cli::Command;
use crate::manifest::hooks::{container_hooklog_argv, is_sleep, parse_hooklog};
use crate::manifest::podspec::{Container, RUN_TO_COMPLETION};

pub const NEVER_ENDS: Rule = Rule {
    id: "job-container-never-ends",
    severity: Severity::Error,
    description: "A regular container that never ends on its own (`hooklog run`, `sleep infinity`) in a Job or CronJob: the Job's pod never completes.",
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
    if !RUN_TO_COMPLETION.contains(&pod.object.kind.as_str()) {
        return;
    }
    for c in pod.containers.iter().filter(|c| !c.init) {
        let Some(why) = never_ends(c) else { continue };
        sink.add(
            &NEVER_ENDS,
            Some(&c.name),
            &c.path,
            format!(
                "{why}, and {} is a regular container of a {}: the pod never completes, so the Job never does",
                c.name, pod.object.kind
            ),
            "run it as a native sidecar (an init container with `restartPolicy: Always`, Kubernetes 1.29+: `hooklog inject` does), or leave it out",
        );
    }
}
