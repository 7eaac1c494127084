//! What ships: the static release binary alone in an empty root (no shell, no libc, no sleep:
//! the distroless incident), the image the top-level Dockerfile builds (tests/dockerfile.rs
//! builds it) run with podman in a pod beside writer containers that share its volume, then
//! stopped like a kubelet would, and the arm64 binary under qemu.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::util::binaries::{Built, release_bin, runs_the_daemon_under_qemu, shared_libraries};
use crate::util::podman::{dockerfile_image, empty_dir, output_of as run};
use crate::util::{POD_ENV, in_ci, text, wait_until};

/// Grace given to hooklog in the pod test; `podman pod stop -t` gives the runtime a little more.
const POD_GRACE_SECS: u64 = 10;
/// The pod's stop timeout (terminationGracePeriodSeconds): SIGKILL after this.
const POD_STOP_TIMEOUT_SECS: u64 = 20;

/// `unshare --mount --pid --fork chroot ROOT ARGS...`.
fn in_empty_root(root: &Path, args: &[&str]) -> Output {
    run(Command::new("unshare")
        .args(["--mount", "--pid", "--fork", "chroot"])
        .arg(root)
        .args(args)
        .env_clear()
        .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin"))
}

#[test]
fn release_binary_alone_in_an_empty_root_installs_and_runs_a_hook() {
    // Are namespaces and chroot allowed here at all? Asked with the host's own `true`.
    let probe = Command::new("unshare")
        .args(["--mount", "--pid", "--fork", "chroot", "/", "true"])
        .output();
    match probe {
        Ok(o) if o.status.success() => {}
        other => {
            let why = match &other {
                Ok(o) => text(&o.stderr),
                Err(e) => e.to_string(),
            };
            assert!(!in_ci(), "unshare/chroot must work in CI: {why}");
            eprintln!("SKIPPED: unshare --mount --pid --fork chroot is not permitted here ({why})");
            return;
        }
    }

    let bin = release_bin();
    let root = tempfile::tempdir().unwrap();
    std::fs::copy(&bin, root.path().join("hooklog")).unwrap();
    let libs = shared_libraries(&bin);
    for lib in &libs {
        let dest = root.path().join(lib.strip_prefix("/").unwrap());
        std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
        std::fs::copy(lib, &dest).unwrap();
    }
    eprintln!(
        "empty root holds the binary and {} libraries: {libs:?}",
        libs.len()
    );
    std::fs::create_dir(root.path().join("shared")).unwrap();

    let out = in_empty_root(root.path(), &["/hooklog", "install", "/shared/bin"]);
    assert!(
        out.status.success(),
        "install failed: {}",
        text(&out.stderr)
    );
    assert_eq!(text(&out.stdout).trim(), "/shared/bin/hooklog");

    let out = in_empty_root(
        root.path(),
        &[
            "/shared/bin/hooklog",
            "hook",
            "--container",
            "envoy",
            "--file",
            "/shared/prestop.log",
            "--",
            "/shared/bin/hooklog",
            "sleep",
            "0.2",
        ],
    );
    assert!(
        out.status.success(),
        "the hook failed: {}",
        text(&out.stderr)
    );

    let log = std::fs::read_to_string(root.path().join("shared/prestop.log"))
        .expect("the hook wrote the file");
    let records: Vec<Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON line"))
        .collect();
    let events: Vec<&str> = records.iter().filter_map(|r| r["event"].as_str()).collect();
    assert_eq!(events, ["hook.started", "hook.finished"], "{log}");
    for r in &records {
        assert_eq!(r["container_name"], "envoy");
    }
    let finished = &records[1];
    assert_eq!(finished["outcome"], "ok", "{log}");
    assert_eq!(finished["exit_code"], 0);
    let ms = finished["duration_ms"].as_u64().expect("duration_ms");
    assert!(ms >= 200, "slept 0.2 s but took {ms} ms");
}

/// A podman pod and its containers, removed on drop (the image stays: the next run reuses it).
struct Pod {
    name: String,
    image: String,
}

impl Pod {
    fn podman(&self) -> Command {
        crate::util::podman::podman()
    }
}

impl Drop for Pod {
    fn drop(&mut self) {
        // Best effort: a leftover pod only costs disk space.
        let _ = self
            .podman()
            .args(["pod", "rm", "-f", "-t", "0", &self.name])
            .output();
    }
}

#[test]
fn image_runs_in_a_pod_beside_a_writer_and_stops_within_grace() {
    // The real Dockerfile's amd64 image (built once; tests/dockerfile.rs checks its config).
    let image = dockerfile_image("amd64");
    let work = tempfile::tempdir().unwrap();
    // The emptyDir: world-writable, like the kubelet makes it.
    let shared = work.path().join("shared");
    empty_dir(&shared);

    let id = format!("hooklog-test-{}", std::process::id());
    let pod = Pod {
        name: id.clone(),
        image,
    };

    // No infra container (its pause image would have to be pulled); each container gets
    // `--network none` instead of a shared network namespace, which hooklog does not need.
    let out = run(pod
        .podman()
        .args(["pod", "create", "--infra=false", "--name", &id]));
    assert!(
        out.status.success(),
        "podman pod create failed: {}",
        text(&out.stderr)
    );

    let volume = format!("{}:/shared-logs", shared.display());
    let mut daemon = pod.podman();
    daemon.args([
        "run",
        "-d",
        "--pod",
        &id,
        "--name",
        &format!("{id}-hooklog"),
        "-v",
        &volume,
        "--read-only",
    ]);
    daemon.args(["--network", "none"]);
    daemon.args(["--cap-drop", "ALL", "--security-opt", "no-new-privileges"]);
    for (k, v) in POD_ENV {
        daemon.args(["-e", &format!("{k}={v}")]);
    }
    daemon.args([
        &pod.image,
        "run",
        "--file",
        "/shared-logs/prestop.log",
        "--socket",
        "/shared-logs/hooklog.sock",
    ]);
    daemon.args([
        "--peers",
        "api-server,envoy",
        "--grace",
        &format!("{POD_GRACE_SECS}s"),
    ]);
    let out = run(&mut daemon);
    assert!(
        out.status.success(),
        "podman run (hooklog) failed: {}",
        text(&out.stderr)
    );
    let logs = |stream: &str| -> String {
        let out = run(pod.podman().args(["logs", &format!("{id}-hooklog")]));
        if stream == "stdout" {
            text(&out.stdout)
        } else {
            text(&out.stderr)
        }
    };
    assert!(
        wait_until(Duration::from_secs(30), || logs("stderr")
            .contains("hooklog ready")),
        "hooklog did not become ready in the pod:\n{}",
        logs("stderr")
    );

    // The writers: the same image (it has no shell), as another user, like envoy's uid 101.
    let writer = |name: &str, args: &[&str]| -> Output {
        run(pod
            .podman()
            .args([
                "run",
                "--rm",
                "--pod",
                &id,
                "--name",
                &format!("{id}-{name}"),
                "-v",
                &volume,
            ])
            .args([
                "--user",
                "101:101",
                "--read-only",
                "--cap-drop",
                "ALL",
                "--network",
                "none",
                &pod.image,
            ])
            .args(args))
    };
    let hook = [
        "hook",
        "--socket",
        "/shared-logs/hooklog.sock",
        "--file",
        "/shared-logs/prestop.log",
        "--container",
    ];
    let out = writer(
        "emit",
        &[
            "emit",
            "--container",
            "api-server",
            "--socket",
            "/shared-logs/hooklog.sock",
            "--field",
            "phase=drain",
            "draining connections",
        ],
    );
    assert!(out.status.success(), "emit failed: {}", text(&out.stderr));
    let out = writer(
        "envoy",
        &[
            &hook[..],
            &["envoy", "--", "/usr/local/bin/hooklog", "sleep", "0.2"],
        ]
        .concat(),
    );
    assert!(
        out.status.success(),
        "envoy's hook failed: {}",
        text(&out.stderr)
    );
    // A failing upload: the wrapped command does not exist in the image (exit 127).
    let out = writer(
        "api",
        &[
            &hook[..],
            &["api-server", "--", "/app/bin/upload-heap-dump"],
        ]
        .concat(),
    );
    assert_eq!(out.status.code(), Some(127), "{}", text(&out.stderr));

    // Stop the pod as the kubelet would: SIGTERM, SIGKILL after the timeout.
    let started = Instant::now();
    let out =
        run(pod
            .podman()
            .args(["pod", "stop", "-t", &POD_STOP_TIMEOUT_SECS.to_string(), &id]));
    let took = started.elapsed();
    assert!(
        out.status.success(),
        "podman pod stop: {}",
        text(&out.stderr)
    );
    let out = run(pod.podman().args([
        "inspect",
        "--format",
        "{{.State.ExitCode}}",
        &format!("{id}-hooklog"),
    ]));
    assert_eq!(
        text(&out.stdout).trim(),
        "0",
        "hooklog's exit code; stderr:\n{}",
        logs("stderr")
    );
    assert!(
        took < Duration::from_secs(POD_GRACE_SECS + 2),
        "the pod took {took:?} to stop; hooklog's --grace is {POD_GRACE_SECS}s"
    );

    let records: Vec<Value> = logs("stdout")
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    for r in &records {
        assert_eq!(r["kubernetes"]["pod_name"], POD_ENV[0].1, "{r}");
        assert_eq!(r["kubernetes"]["namespace_name"], POD_ENV[1].1);
        assert_eq!(r["kubernetes"]["host"], POD_ENV[4].1);
    }
    let find = |event: &str, container: &str| {
        records
            .iter()
            .find(|r| r["event"] == event && r["container_name"] == container)
            .unwrap_or_else(|| panic!("no {event} from {container}: {records:#?}"))
    };
    find("hook.started", "envoy");
    assert_eq!(find("hook.finished", "envoy")["outcome"], "ok");
    find("hook.started", "api-server");
    let failed = find("hook.finished", "api-server");
    assert_eq!(failed["outcome"], "failed");
    assert_eq!(failed["exit_code"], 127);
    assert!(
        records
            .iter()
            .any(|r| r["message"] == "draining connections" && r["phase"] == "drain")
    );
    let summary = records.last().expect("records");
    assert_eq!(
        summary["event"], "hooks.summary",
        "the summary comes last: {records:#?}"
    );
    assert_eq!(summary["counts"]["ok"], 1);
    assert_eq!(summary["counts"]["failed"], 1);
    assert_eq!(summary["peers"]["api-server"]["outcome"], "failed");
}

/// The arm64 binary (Fargate on Graviton), cross-built on the host as the Dockerfile does, runs
/// under qemu (see [`runs_the_daemon_under_qemu`]). `scripts/test.sh` builds it and sets
/// `HOOKLOG_AARCH64_BIN`; tests/dockerfile.rs does the same with the image's own binary.
#[test]
fn aarch64_binary_runs_the_daemon_under_qemu() {
    let Some(bin) = std::env::var_os("HOOKLOG_AARCH64_BIN").map(PathBuf::from) else {
        assert!(
            !in_ci(),
            "HOOKLOG_AARCH64_BIN is not set: scripts/test.sh builds the arm64 binary"
        );
        eprintln!("SKIPPED: HOOKLOG_AARCH64_BIN is not set (run bash scripts/test.sh)");
        return;
    };
    runs_the_daemon_under_qemu(&bin, Built::Here);
}
