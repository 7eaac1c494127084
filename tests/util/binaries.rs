//! The binaries that ship, for the tests that run them: the static release build and the
//! sidecar's, what a binary loads, its `--version` line, and the arm64 daemon under qemu.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;
use std::time::Duration;

use super::{Daemon, POD_ENV, in_ci, text};

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn run(cmd: &mut Command) -> Output {
    cmd.output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"))
}

/// The musl target the release binary is built for here.
pub const MUSL_TARGET: &str = "x86_64-unknown-linux-musl";

/// The static release binary: `$HOOKLOG_RELEASE_BIN` when scripts/test.sh built it before the
/// tests, else built here once (cargo's own lock makes concurrent test processes wait for one
/// build, and the later builds find it fresh).
pub fn release_bin() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| static_bin("HOOKLOG_RELEASE_BIN"))
        .clone()
}

/// The sidecar's static binary (`--no-default-features`), as scripts/test.sh builds it and
/// copies it aside: `$HOOKLOG_SIDECAR_BIN`. Not built here (another fat-LTO build while other
/// tests run). Without it a test says it skipped, and fails in CI.
pub fn sidecar_bin() -> Option<PathBuf> {
    match std::env::var_os("HOOKLOG_SIDECAR_BIN") {
        Some(p) => {
            let p = PathBuf::from(p);
            assert!(
                p.is_file(),
                "HOOKLOG_SIDECAR_BIN={} does not exist",
                p.display()
            );
            Some(p)
        }
        None => {
            assert!(
                !in_ci(),
                "HOOKLOG_SIDECAR_BIN is not set: scripts/test.sh builds the sidecar and sets it"
            );
            eprintln!(
                "SKIPPED: HOOKLOG_SIDECAR_BIN is not set (cargo build --release --target \
                 {MUSL_TARGET} --no-default-features, then copy the binary aside; scripts/test.sh does)"
            );
            None
        }
    }
}

/// `$var`, else the static musl release build, built here.
fn static_bin(var: &str) -> PathBuf {
    if let Some(p) = std::env::var_os(var) {
        let p = PathBuf::from(p);
        assert!(p.is_file(), "{var}={} does not exist", p.display());
        return p;
    }
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut build = Command::new(cargo);
    build
        .args([
            "build",
            "--profile",
            "control",
            "--locked",
            "--target",
            MUSL_TARGET,
        ])
        .current_dir(repo());
    // The variables cargo and nextest set for a test would make build scripts rerun: build
    // in the environment a shell has, so this finds the build scripts/test.sh made.
    for (k, _) in std::env::vars_os() {
        let k = k.to_string_lossy();
        if (k.starts_with("CARGO_") && k != "CARGO_HOME" && k != "CARGO_TARGET_DIR")
            || k.starts_with("NEXTEST")
            || k.starts_with("RUST_")
        {
            build.env_remove(&*k);
        }
    }
    let out = run(&mut build);
    assert!(
        out.status.success(),
        "cannot build the static release binary (needs `rustup target add {MUSL_TARGET}` and \
         Debian's musl-tools; scripts/test.sh installs both):\n{}",
        text(&out.stderr)
    );
    let target_dir =
        std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| repo().join("target"), PathBuf::from);
    target_dir.join(MUSL_TARGET).join("control").join("hooklog")
}

/// The files `ldd` says a binary loads (none for a static binary).
pub fn shared_libraries(bin: &Path) -> Vec<PathBuf> {
    let out = run(Command::new("ldd").arg(bin));
    let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
    if all.contains("not a dynamic executable") || all.contains("statically linked") {
        return Vec::new();
    }
    assert!(out.status.success(), "ldd {} failed: {all}", bin.display());
    all.lines()
        .filter_map(|l| l.split_whitespace().find(|w| w.starts_with('/')))
        .map(PathBuf::from)
        .collect()
}

/// Where an arm64 binary was built: its `--version` names HEAD's commit when built here, and
/// `unknown` (the Dockerfile's build argument's default: no .git in the build) in an image.
pub enum Built {
    Here,
    InImage,
}

/// A static arm64 `bin` runs under qemu's user-mode emulation: `--version`, then the daemon
/// follows a file and a socket, and stops on SIGTERM with its summary.
pub fn runs_the_daemon_under_qemu(bin: &Path, built: Built) {
    assert!(bin.is_file(), "{} does not exist", bin.display());
    let qemu = Path::new("/usr/bin/qemu-aarch64-static");
    assert!(
        qemu.is_file(),
        "{} is missing: apt-get install qemu-user-static (scripts/test.sh does it)",
        qemu.display()
    );
    let elf = run(Command::new("file").arg(bin));
    assert!(
        text(&elf.stdout).contains("ARM aarch64"),
        "{}",
        text(&elf.stdout)
    );
    assert!(
        shared_libraries(bin).is_empty(),
        "the arm64 binary must be static"
    );
    let version = run(Command::new(qemu).arg(bin).arg("--version"));
    assert!(version.status.success(), "{}", text(&version.stderr));
    let printed = text(&version.stdout);
    match built {
        Built::Here => assert_version(&printed, Some("aarch64-unknown-linux-musl")),
        Built::InImage => assert!(
            printed.trim().starts_with(&format!(
                "hooklog {} (commit unknown, aarch64-unknown-linux-musl)",
                env!("CARGO_PKG_VERSION")
            )),
            "{printed}"
        ),
    }

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("prestop.log");
    let sock = dir.path().join("hooklog.sock");
    let mut cmd = Command::new(qemu);
    cmd.arg(bin)
        .args([
            "run",
            "--file",
            file.to_str().unwrap(),
            "--socket",
            sock.to_str().unwrap(),
        ])
        .args(["--peers", "envoy"])
        .envs(POD_ENV);
    let mut daemon = Daemon::spawn(cmd);
    std::fs::write(&file, "from a plain writer\n").unwrap();
    let hook = run(Command::new(qemu).arg(bin).args([
        "hook",
        "--container",
        "envoy",
        "--socket",
        sock.to_str().unwrap(),
        "--",
        "/bin/sh",
        "-c",
        "echo draining",
    ]));
    assert!(hook.status.success(), "{}", text(&hook.stderr));
    daemon.wait_records(4, Duration::from_secs(30));
    daemon.stop(Duration::from_secs(30));
    let records = daemon.records();
    let msgs: Vec<&str> = records
        .iter()
        .filter_map(|r| r["message"].as_str())
        .collect();
    assert!(msgs.contains(&"from a plain writer"), "{msgs:?}");
    assert!(msgs.contains(&"draining"), "{msgs:?}");
    let summary = records.last().unwrap();
    assert_eq!(summary["event"], "hooks.summary");
    assert_eq!(summary["peers"]["envoy"]["outcome"], "ok", "{summary}");
    assert_eq!(summary["kubernetes"]["pod_name"], "api-server-7d9f5");
}

/// `hooklog --version`'s line: `hooklog VERSION (commit COMMIT, TARGET)`, the commit this
/// checkout's HEAD (when git can say) and the target `target` (when given): a triple that names
/// this machine's architecture otherwise.
pub fn assert_version(printed: &str, target: Option<&str>) {
    let printed = printed.trim();
    let want = format!("hooklog {} (commit ", env!("CARGO_PKG_VERSION"));
    let rest = printed
        .strip_prefix(&want)
        .unwrap_or_else(|| panic!("{printed:?} does not start with {want:?}"));
    let (commit, target_got) = rest
        .strip_suffix(')')
        .and_then(|r| r.split_once(", "))
        .unwrap_or_else(|| panic!("{printed:?}: no (commit C, TARGET)"));
    let head = std::process::Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
    match (&head, std::env::var("HOOKLOG_COMMIT")) {
        (_, Ok(c)) if !c.is_empty() => assert_eq!(commit, c, "{printed}"),
        (Some(h), _) => assert_eq!(commit, h, "{printed}: not HEAD's commit"),
        (None, _) => assert_eq!(commit, "unknown", "{printed}"),
    }
    match target {
        Some(t) => assert_eq!(target_got, t, "{printed}"),
        None => assert!(
            target_got.starts_with(std::env::consts::ARCH) && target_got.contains("-linux-"),
            "{printed}: not a target of this machine"
        ),
    }
}
