//! podman for the image tests: this machine's workarounds in one containers.conf, and the real
//! Dockerfile built for a platform on a local stand-in for `rust:<RUST_VERSION>-bookworm`
//! (tests/support/rust-standin.sh), once per platform and source tree however many test
//! processes ask (a file lock, then podman's layer cache).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// This machine's limits (see docs/testing.md): crun refuses its hybrid cgroups, and root cannot
/// raise the open-files limit to podman's default.
const CONTAINERS_CONF: &str = "[containers]\ndefault_ulimits = [\"nofile=20000:20000\", \"nproc=32768:32768\"]\n\n[engine]\nruntime = \"runc\"\n";

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Where the stand-in's Debian root, the lock and the containers.conf live between runs:
/// `$HOOKLOG_CACHE_DIR`, else `$XDG_CACHE_HOME/hooklog`, else `~/.cache/hooklog` (the same
/// rule as tests/support/rust-standin.sh).
pub fn cache_dir() -> PathBuf {
    let dir = if let Some(d) = std::env::var_os("HOOKLOG_CACHE_DIR") {
        PathBuf::from(d)
    } else if let Some(d) = std::env::var_os("XDG_CACHE_HOME") {
        PathBuf::from(d).join("hooklog")
    } else {
        PathBuf::from(std::env::var_os("HOME").expect("HOME is set")).join(".cache/hooklog")
    };
    std::fs::create_dir_all(&dir)
        .unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
    dir
}

/// This machine's containers.conf, for `CONTAINERS_CONF`.
fn containers_conf() -> &'static Path {
    static CONF: OnceLock<PathBuf> = OnceLock::new();
    CONF.get_or_init(|| {
        // Written whole and renamed, so a concurrent test process never reads half of it.
        let dir = cache_dir();
        let path = dir.join("containers.conf");
        let tmp = dir.join(format!("containers.conf.{}", std::process::id()));
        std::fs::write(&tmp, CONTAINERS_CONF).expect("write containers.conf");
        std::fs::rename(&tmp, &path).expect("rename containers.conf");
        path
    })
}

/// A `podman` command with this machine's containers.conf.
pub fn podman() -> Command {
    let mut c = Command::new("podman");
    c.env("CONTAINERS_CONF", containers_conf());
    c
}

/// Fails the test, naming the package, when podman or runc is missing.
pub fn require_podman() {
    for tool in ["podman", "runc"] {
        let found = Command::new(tool)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success());
        assert!(
            found,
            "{tool} is missing: apt-get install podman runc (scripts/test.sh does it)"
        );
    }
}

/// This machine's architecture as Docker names platforms (the builder's, in the build).
pub fn host_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => panic!("no image build on {other}: the Dockerfile builds on amd64 or arm64"),
    }
}

/// The Dockerfile's `ARG RUST_VERSION=...`, the base image's tag.
pub fn dockerfile_rust_version() -> String {
    let dockerfile = std::fs::read_to_string(repo().join("Dockerfile")).expect("read Dockerfile");
    dockerfile
        .lines()
        .find_map(|l| l.strip_prefix("ARG RUST_VERSION="))
        .map(|v| v.trim().to_string())
        .expect("the Dockerfile has ARG RUST_VERSION=...")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The Dockerfile's sidecar image (its last stage, what inject puts into pods) for `linux/<arch>`.
pub fn dockerfile_image(arch: &str) -> String {
    dockerfile_target(arch, SIDECAR_TARGET)
}

/// The Dockerfile's stage of the sidecar image (`hooklog-sidecar`, the default).
pub const SIDECAR_TARGET: &str = "hooklog-sidecar";
/// The Dockerfile's stage of the full CLI's image (`hooklog`, what the webhook Deployment runs).
pub const FULL_TARGET: &str = "hooklog";

/// The image of the top-level Dockerfile's stage `target` for `linux/<arch>` (amd64 or arm64),
/// built here as a user would with podman (docs/fargate.md): on this machine's platform, with
/// `--build-arg BUILDPLATFORM` (podman 4.3 leaves `$BUILDPLATFORM` empty in FROM), from the
/// stand-in base image, with the network (apt, rustup and cargo download in the build stage).
/// Tagged `localhost/<target>-test:<arch>` and kept: the next run's build is a cache hit unless
/// the sources or the Dockerfile changed. Returned as `localhost/<target>-test:<arch>-<id>`, a
/// tag of the id this build made (podman's `--iidfile`): the shared `<arch>` tag is locked only
/// during the build, and another process's build of other sources could move it before this one
/// uses it; a tag named by its content cannot point at anything else.
pub fn dockerfile_target(arch: &str, target: &str) -> String {
    require_podman();
    let cache = cache_dir();
    let rust_version = dockerfile_rust_version();
    let standin = output_of(
        Command::new("bash")
            .arg(repo().join("tests/support/rust-standin.sh"))
            .arg(&rust_version)
            .env("HOOKLOG_CACHE_DIR", &cache)
            .env("CONTAINERS_CONF", containers_conf()),
    );
    assert!(
        standin.status.success(),
        "cannot make the stand-in for rust:{rust_version}-bookworm:\n{}",
        text(&standin.stderr)
    );
    eprintln!("{}", text(&standin.stderr).trim_end());

    let image = format!("localhost/{target}-test:{arch}");
    let iid_dir = tempfile::tempdir().unwrap();
    let iidfile = iid_dir.path().join("iid");
    // One build at a time on this machine: a second process waits, then hits the layer cache.
    let mut build = Command::new("flock");
    build.arg(cache.join("build.lock")).arg("podman");
    build.env("CONTAINERS_CONF", containers_conf());
    build
        .args(["build", "--pull=never", "--platform"])
        .arg(format!("linux/{arch}"))
        .arg("--build-arg")
        .arg(format!("BUILDPLATFORM=linux/{}", host_arch()))
        .arg("--iidfile")
        .arg(&iidfile)
        .args(["--target", target, "-t", &image, "-f", "Dockerfile", "."])
        .current_dir(repo());
    let started = std::time::Instant::now();
    let out = output_of(&mut build);
    let log = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert!(
        out.status.success(),
        "podman build --platform linux/{arch} --target {target} of the Dockerfile failed:\n{log}"
    );
    let iid = std::fs::read_to_string(&iidfile).expect("podman build --iidfile");
    let id = iid.trim().trim_start_matches("sha256:");
    assert!(
        id.len() >= 12 && id.bytes().all(|b| b.is_ascii_hexdigit()),
        "podman build --iidfile wrote {iid:?}"
    );
    let by_id = format!("{image}-{}", &id[..12]);
    let out = output_of(podman().args(["tag", id, &by_id]));
    assert!(out.status.success(), "podman tag: {}", text(&out.stderr));
    eprintln!(
        "built {by_id} from the Dockerfile in {:.0?} (cached layers: {})",
        started.elapsed(),
        log.matches("Using cache").count()
    );
    by_id
}

/// `cmd`'s output; a command that cannot start fails the test, naming it.
pub fn output_of(cmd: &mut Command) -> std::process::Output {
    cmd.output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"))
}

/// The folder `path` made as the kubelet makes an emptyDir: world-writable, sticky (1777), so
/// containers of other users can write in it.
pub fn empty_dir(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o1777)).unwrap();
}
