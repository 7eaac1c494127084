//! (the control plane) `--platform fargate`: what EKS Fargate refuses, said before the user finds out from an event
//! (<https://docs.aws.amazon.com/eks/latest/userguide/fargate.html>, "Fargate considerations").

use super::{Container, Pod, Rule, Severity, Sink};

pub const CAPABILITIES: Rule = Rule {
    id: "fargate-capabilities-added",
    severity: Severity::Error,
    description: "Fargate refuses containers that add Linux capabilities.",
    remediation: "Drop `securityContext.capabilities.add`, or run the pod on EC2 nodes.",
};
pub const PRIVILEGED: Rule = Rule {
    id: "fargate-privileged",
    severity: Severity::Error,
    description: "Fargate refuses privileged containers.",
    remediation: "Drop `privileged: true`, or run the pod on EC2 nodes.",
};
pub const HOST_NAMESPACE: Rule = Rule {
    id: "fargate-host-namespace",
    severity: Severity::Error,
    description: "Fargate refuses hostNetwork, hostPID, hostIPC and hostPort.",
    remediation: "Drop hostNetwork, hostPID, hostIPC and hostPort, or run the pod on EC2 nodes.",
};
pub const HOST_PATH: Rule = Rule {
    id: "fargate-hostpath-volume",
    severity: Severity::Error,
    description: "Fargate has no hostPath volumes.",
    remediation: "Use an emptyDir (or another volume Fargate has) instead of hostPath.",
};
pub const DAEMONSET: Rule = Rule {
    id: "fargate-daemonset",
    severity: Severity::Error,
    description: "Fargate does not run DaemonSets.",
    remediation: "Run the DaemonSet's work as a sidecar in each pod, or on EC2 nodes.",
};

const FIX_PROFILE: &str =
    "remove it, or schedule this workload on EC2 nodes instead of a Fargate profile";

pub fn check_pod(pod: &Pod, sink: &mut Sink) {
    if pod.object.kind == "DaemonSet" {
        sink.add(
            &DAEMONSET,
            None,
            pod.spec_path,
            "Fargate does not run DaemonSets: its pods never start there".to_string(),
            "run it on EC2 nodes, or as a sidecar in the pods that need it",
        );
    }
    for field in ["hostNetwork", "hostPID", "hostIPC"] {
        if pod.spec[field] == true {
            sink.add(
                &HOST_NAMESPACE,
                None,
                &format!("{}.{field}", pod.spec_path),
                format!("{field}: true is refused on Fargate"),
                FIX_PROFILE,
            );
        }
    }
    for (i, v) in pod.spec["volumes"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        if v.get("hostPath").is_some() {
            sink.add(
                &HOST_PATH,
                None,
                &format!("{}.volumes[{i}]", pod.spec_path),
                format!(
                    "volume {} is a hostPath: Fargate has none",
                    v["name"].as_str().unwrap_or_default()
                ),
                "use an emptyDir, or EFS through a PersistentVolumeClaim",
            );
        }
    }
    for c in &pod.containers {
        check_container(c, sink);
    }
}

/// What Fargate refuses in one container: added capabilities, privileged, host ports.
fn check_container(c: &Container, sink: &mut Sink) {
    let sc = &c.value["securityContext"];
    if sc["capabilities"]["add"]
        .as_array()
        .is_some_and(|a| !a.is_empty())
    {
        sink.add(
            &CAPABILITIES,
            Some(&c.name),
            &format!("{}.securityContext.capabilities.add", c.path),
            format!(
                "adds capabilities {}: Fargate refuses the pod",
                sc["capabilities"]["add"]
            ),
            FIX_PROFILE,
        );
    }
    if sc["privileged"] == true {
        sink.add(
            &PRIVILEGED,
            Some(&c.name),
            &format!("{}.securityContext.privileged", c.path),
            "privileged: true is refused on Fargate".to_string(),
            FIX_PROFILE,
        );
    }
    for (i, p) in c.value["ports"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        if p.get("hostPort").is_some() {
            sink.add(
                &HOST_NAMESPACE,
                Some(&c.name),
                &format!("{}.ports[{i}].hostPort", c.path),
                "hostPort is refused on Fargate".to_string(),
                FIX_PROFILE,
            );
        }
    }
}
