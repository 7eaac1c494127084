//! (the control plane) hooklog's pieces in a pod, as `hooklog inject` writes them and `check` and `uninject`
//! recognise them: names, paths, and the prefix of a wrapped hook. Below both `inject` and
//! `check`, so that neither imports the other.

use std::time::Duration;

use super::budget::secs;

/// Names inject adds; a pod that already uses one is an error, never overwritten.
pub const SIDECAR: &str = "hooklog";
pub const INSTALLER: &str = "hooklog-install";
/// The containers inject writes whole (it refuses a pod that has one of its own): inject again
/// writes a changed string in them as a first inject does (`yaml::splice::edits_noted`'s `fresh`).
pub const OWN_CONTAINERS: &[&str] = &[SIDECAR, INSTALLER];
pub const VOLUME: &str = "hooklog-shared";
pub const PODINFO_VOLUME: &str = "hooklog-podinfo";
/// Where the shared emptyDir is mounted, in every container inject touches. hooklog's image
/// keeps its binary at [`super::hooks::IMAGE_BINARY`], so nothing of the image lies here.
pub const MOUNT: &str = "/hooklog";
pub const PODINFO_MOUNT: &str = "/etc/hooklog-podinfo";
/// The hooks' binary has an emptyDir of its own (issue 37): only the installer mounts it
/// writable; every wrapped container mounts it `readOnly: true`. In the shared emptyDir (0777,
/// no sticky bit) a peer of another uid could rename `bin/` and put its own program in its
/// place, and a root peer overwrite the file: the next container's preStop ran the peer's
/// program as that container's user.
pub const BIN_VOLUME: &str = "hooklog-bin";
pub const BIN_MOUNT: &str = "/hooklog-bin";
pub const BIN_DIR: &str = "/hooklog-bin";
pub const BIN: &str = "/hooklog-bin/hooklog";
/// Where the binary was before issue 37 (in the shared emptyDir): a prefix with it is still
/// inject's own, so that `uninject` and `check` read what earlier versions wrote.
pub const LEGACY_BIN: &str = "/hooklog/bin/hooklog";
/// The folder the installer filled before issue 37 (`hooklog install /hooklog/bin`).
pub const LEGACY_BIN_DIR: &str = "/hooklog/bin";
pub const SOCKET: &str = "/hooklog/hooklog.sock";
pub const FILE: &str = "/hooklog/prestop.log";
/// The pod annotation holding what `uninject` cannot recognise by itself: the keys inject
/// created, and the commands it rewrote.
pub const ANNOTATION: &str = "hooklog.dev/injected";
/// `hooklog webhook`'s opt-in: a namespace label `enabled`, or a pod annotation `enabled` or
/// `disabled` that overrides it.
pub const OPT_IN: &str = "hooklog.dev/inject";
/// Namespaces the webhook never injects: the control plane's own.
pub const SYSTEM_NAMESPACES: [&str; 3] = ["kube-system", "kube-public", "kube-node-lease"];

/// `hooklog hook`'s flags in inject's prefix.
const SOCKET_FLAG: &str = "--socket";
const FILE_FLAG: &str = "--file";

/// `[BIN, hook, --container, NAME, --socket, SOCKET, --file, FILE, (--timeout T), --]`: what
/// inject puts in front of a hook's command.
pub fn prefix(container: &str, timeout: Option<Duration>) -> Vec<String> {
    let mut p: Vec<String> = [
        BIN,
        "hook",
        "--container",
        container,
        SOCKET_FLAG,
        SOCKET,
        FILE_FLAG,
        FILE,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    if let Some(t) = timeout {
        p.extend(["--timeout".to_string(), secs(t)]);
    }
    p.push("--".into());
    p
}

/// The length of inject's own prefix at the start of `argv` and the container it names, when
/// `argv` starts with one (whatever `--container` says: the container may have been renamed).
pub fn own_prefix(argv: &[String]) -> Option<(usize, &str)> {
    let fixed = ["hook", "--container"];
    let rest = [SOCKET_FLAG, SOCKET, FILE_FLAG, FILE];
    if argv.len() < 9
        || (argv[0] != BIN && argv[0] != LEGACY_BIN)
        || argv[1..3] != fixed
        || argv[4..8] != rest
    {
        return None;
    }
    match argv.get(8).map(String::as_str) {
        Some("--") => Some((9, &argv[3])),
        Some("--timeout") if argv.get(10).is_some_and(|a| a == "--") => Some((11, &argv[3])),
        _ => None,
    }
}
