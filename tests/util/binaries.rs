//! The binaries that ship, as the tests find them: the static release build ([`release_bin`]),
//! the sidecar's ([`sidecar_bin`]), what each links ([`shared_libraries`]), and what
//! `--version` says ([`assert_version`]).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use super::in_ci;

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn run(cmd: &mut Command) -> Output {
    cmd.output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"))
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The musl target the release binary is built for here.
pub(crate) const MUSL_TARGET: &str = "x86_64-unknown-linux-musl";

/// The static release binary: `$HOOKLOG_RELEASE_BIN` when scripts/test.sh built it before the
/// tests, else built here once (cargo's own lock makes concurrent test processes wait for one
/// build, and the later builds find it fresh).
pub(crate) fn release_bin() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| static_bin("HOOKLOG_RELEASE_BIN"))
        .clone()
}

/// The sidecar's static binary (`--no-default-features`), as scripts/test.sh builds it and
/// copies it aside: `$HOOKLOG_SIDECAR_BIN`. Not built here (another fat-LTO build while other
/// tests run). Without it a test says it skipped, and fails in CI.
pub(crate) fn sidecar_bin() -> Option<PathBuf> {
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
pub(crate) fn static_bin(var: &str) -> PathBuf {
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
pub(crate) fn shared_libraries(bin: &Path) -> Vec<PathBuf> {
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

/// `hooklog --version`'s line: `hooklog VERSION (commit COMMIT, TARGET)`, the commit this
/// checkout's HEAD (when git can say) and the target `target` (when given): a triple that names
/// this machine's architecture otherwise.
pub(crate) fn assert_version(printed: &str, target: Option<&str>) {
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
