//! (the sidecar) The summary's one-line message as the sidecar's termination message: the kubelet reads the
//! container's `terminationMessagePath` (default `/dev/termination-log`) when it exits and shows
//! it in the pod's status, where `kubectl get pod -o jsonpath=…state.terminated.message` finds
//! it for pods that stay around (Jobs, failed pods).

use std::io::Write;
use std::path::{Path, PathBuf};

/// The kubelet's default `terminationMessagePath`, which it mounts into every container
/// (<https://kubernetes.io/docs/tasks/debug/debug-application/determine-reason-pod-failure/>).
pub const DEFAULT_PATH: &str = "/dev/termination-log";

/// The most the kubelet reads of one container's termination message: "Kubelet truncates
/// messages that are longer than 4096 bytes" (same page; `maxContainerTerminationMessageLength`
/// in pkg/kubelet/kuberuntime). The pod's total is 12 KiB, shared equally among its containers
/// (1 KiB each in a pod of 12): the summary's line is a few hundred bytes.
pub const MAX_BYTES: usize = 4096;

/// Where the summary's line goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TerminationMessage {
    /// The file.
    path: PathBuf,
    /// Created when missing: only a path the user gave. The default is written only when the
    /// kubelet made it (outside a pod there is none, and hooklog makes no file in `/dev`).
    create: bool,
}

impl TerminationMessage {
    /// `--termination-message-path`: `None` (or empty) is the kubelet's default, `-` none.
    pub fn from_flag(path: Option<&Path>) -> Option<TerminationMessage> {
        match path {
            Some(p) if p.as_os_str() == "-" => None,
            Some(p) if !p.as_os_str().is_empty() => Some(TerminationMessage {
                path: p.to_path_buf(),
                create: true,
            }),
            _ => Some(TerminationMessage {
                path: PathBuf::from(DEFAULT_PATH),
                create: false,
            }),
        }
    }

    /// Writes `message` (its first [`MAX_BYTES`], cut at a character boundary), replacing what
    /// the file held. A default path that does not exist is no error (not in a pod).
    pub fn write(&self, message: &str) {
        let text = super::note::prefix(message, MAX_BYTES);
        let opened = std::fs::OpenOptions::new()
            .write(true)
            .truncate(true)
            .create(self.create)
            .open(&self.path);
        let result = match opened {
            Ok(mut f) => f.write_all(text.as_bytes()),
            Err(e) if !self.create && e.kind() == std::io::ErrorKind::NotFound => {
                tracing::debug!(path = %self.path.display(), "no termination message file");
                return;
            }
            Err(e) => Err(e),
        };
        match result {
            Ok(()) => {
                tracing::debug!(path = %self.path.display(), bytes = text.len(), "termination message written")
            }
            Err(e) => tracing::warn!(
                path = %self.path.display(),
                error = %e,
                "cannot write the termination message"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_message_replaces_the_file_and_is_cut_at_the_kubelets_limit() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("termination-log");
        let t = TerminationMessage::from_flag(Some(&path)).unwrap();
        t.write("hooks: 1 failed (envoy=failed)");
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "hooks: 1 failed (envoy=failed)"
        );
        for n in [MAX_BYTES - 1, MAX_BYTES, MAX_BYTES + 1, 100_000] {
            // A three-byte character across the limit is left out whole.
            let long = "€".repeat(n / 3 + 1);
            t.write(&long);
            let written = std::fs::read_to_string(&path).unwrap();
            assert!(written.len() <= MAX_BYTES, "{n}: {}", written.len());
            assert!(written.len() > MAX_BYTES - 3, "{n}: {}", written.len());
        }
        t.write("short");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "short");
    }

    #[test]
    fn the_default_path_is_never_created_and_a_dash_turns_it_off() {
        assert_eq!(TerminationMessage::from_flag(Some(Path::new("-"))), None);
        let d = TerminationMessage::from_flag(None).unwrap();
        assert_eq!(d.path, Path::new(DEFAULT_PATH));
        assert!(!d.create);
        let dir = tempfile::tempdir().unwrap();
        let missing = TerminationMessage {
            path: dir.path().join("not-there"),
            create: false,
        };
        missing.write("hooks: 1 ok");
        assert!(!dir.path().join("not-there").exists());
    }
}
