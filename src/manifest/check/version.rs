//! (the control plane) `--kubernetes-version`: the native `sleep` action and native sidecars need minimum versions.

use super::{Options, Pod, Rule, Severity, Sink};
use crate::manifest::hooks::{Handler, Hook};
use crate::manifest::podspec::Container;

pub const NATIVE_SLEEP: Rule = Rule {
    id: "native-sleep-action-unsupported",
    severity: Severity::Error,
    description: "The native `sleep` hook action needs Kubernetes 1.30+ (PodLifecycleSleepAction, on by default from 1.30).",
    remediation: "Use `hooklog sleep D` in an exec hook (`hooklog inject` does on such a version), or upgrade to Kubernetes 1.30+.",
};
pub const NATIVE_SIDECAR: Rule = Rule {
    id: "native-sidecar-unsupported",
    severity: Severity::Error,
    description: "Native sidecars (init containers with restartPolicy: Always) need Kubernetes 1.29+ (SidecarContainers, on by default from 1.29): below, one is a blocking init container and the pod stays Pending forever.",
    remediation: "Use a classic sidecar (`hooklog inject --kubernetes-version` with the cluster's version picks it), or upgrade to Kubernetes 1.29+.",
};

/// KEP-3960 PodLifecycleSleepAction: beta and on by default in 1.30.
pub const SLEEP_ACTION_SINCE: (u32, u32) = (1, 30);
pub use crate::manifest::budget::NATIVE_SIDECAR_SINCE;

pub fn check_hook(c: &Container, hook: &Hook, opts: &Options, sink: &mut Sink) {
    let Some(v) = opts.kubernetes_version else {
        return;
    };
    if let Handler::Sleep(s) = hook.handler
        && v < SLEEP_ACTION_SINCE
    {
        sink.add(
            &NATIVE_SLEEP,
            Some(&c.name),
            &format!("{}.sleep", hook.path),
            format!("the native sleep action needs Kubernetes 1.30+, the cluster runs {}.{}", v.0, v.1),
            format!("use `hooklog sleep {s}` from the shared volume (`hooklog inject --prestop-sleep`), or upgrade"),
        );
    }
}

pub fn check_pod(pod: &Pod, opts: &Options, sink: &mut Sink) {
    let Some(v) = opts.kubernetes_version else {
        return;
    };
    if v >= NATIVE_SIDECAR_SINCE {
        return;
    }
    for c in pod.containers.iter().filter(|c| c.native_sidecar()) {
        sink.add(
            &NATIVE_SIDECAR,
            Some(&c.name),
            &format!("{}.restartPolicy", c.path),
            format!(
                "native sidecars need Kubernetes 1.29+, the cluster runs {}.{}: its kubelet drops `restartPolicy: Always` and runs {} as a blocking init container, which never ends, so the pod stays Pending forever",
                v.0, v.1, c.name
            ),
            format!(
                "run it as a regular container (`hooklog inject --kubernetes-version {}.{}` writes that form), or upgrade",
                v.0, v.1
            ),
        );
    }
}
