//! An injected pod run on this machine, as the kubelet would run it: its containers' commands
//! with the volumes' paths mapped into the test's folders.

use hooklog::manifest::podspec::Container;

use super::{hooklog, text};

/// Runs the pod's `hooklog-install` init container as the kubelet does: the image's ENTRYPOINT
/// (the binary under test) with its args, each mapped by `in_pod` to the test's stand-in for its
/// volume. A failed install fails the test.
pub fn run_installer(containers: &[Container], in_pod: impl Fn(&str) -> String) {
    let install = containers
        .iter()
        .find(|c| c.name == "hooklog-install")
        .expect("the pod has no hooklog-install");
    let args: Vec<String> = install.argv().1.iter().map(|a| in_pod(a)).collect();
    let out = hooklog().args(&args).output().expect("run hooklog install");
    assert!(
        out.status.success(),
        "hooklog-install {args:?}: {}",
        text(&out.stderr)
    );
}
