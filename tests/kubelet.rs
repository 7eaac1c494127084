//! The real-kubelet tier (issue 16): pods run by a real kubelet (1.20.2, built from Debian
//! bookworm's source package) on Debian's containerd and runc, started by scripts/kubelet.sh,
//! which scripts/test.sh runs and whose state folder it exports as `HOOKLOG_TEST_KUBELET`.
//!
//! Every pod is a static pod in hostNetwork (no API server): created by writing its manifest
//! into the kubelet's manifest folder, deleted by removing it, which runs the preStop hooks and
//! stops the containers as on any node. Container state and exit codes are read from
//! containerd (`ctr`, and the CRI plugin's status file), hooklog's stdout from the log file the
//! kubelet writes (`/var/log/pods/NS_POD_UID/CONTAINER/N.log`, CRI format). Images: hooklog's,
//! built from the Dockerfile (tests/util/podman.rs) and imported into containerd, and the busybox,
//! shell-less and pause images scripts/kubelet.sh makes. Nothing is pulled.
//!
//! Native sidecars are not tested here: Kubernetes 1.20 has none. Its API drops
//! `restartPolicy: Always` on an init container, so inject's native form runs `hooklog run` as
//! an ordinary init container that never ends, and the pod stays Pending (the app containers
//! never start). Native mode keeps its pod simulation (tests/manifest.rs runs an injected native
//! pod's hooks, tests/k8s.rs checks k8s/'s native manifest) until the tier's kubelet is 1.29 or
//! newer; [`native_form_under_kubelet_1_20_never_starts_the_app`] pins that difference.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::util::in_ci;
use crate::util::podman::{dockerfile_image, host_arch, podman};
use crate::util::summary::outcome_of;

/// How long a pod may take to get every container running: image unpack, the install init
/// container, then the app containers (about 3 s on an idle machine; the rest is for a loaded
/// CI machine).
const START_TIMEOUT: Duration = Duration::from_secs(90);
/// Grace period of the test pods, in seconds: long enough for their hooks (3 s of sleep) and
/// hooklog's linger, short enough that a stuck pod fails the test quickly.
const TEST_GRACE_SECS: u64 = 20;
/// How long a deleted pod may take until hooklog's summary is out and it has exited: its grace
/// period plus the kubelet's own pace (file check every 1 s, status sync).
const STOP_TIMEOUT: Duration = Duration::from_secs(TEST_GRACE_SECS + 40);
/// The envoy sleep the test pods keep (k8s/ has 20 s; the incident 15 s): long enough to be
/// measured, short enough for a test.
const ENVOY_SLEEP: &str = "3s";

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn run(cmd: &mut Command) -> Output {
    cmd.output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"))
}

/// The running tier: scripts/kubelet.sh's state folder and what its `env` file says.
struct Tier {
    state: PathBuf,
    env: BTreeMap<String, String>,
}

impl Tier {
    fn manifests(&self) -> PathBuf {
        self.state.join("manifests")
    }

    /// A value from scripts/kubelet.sh's `env` file.
    fn var(&self, key: &str) -> String {
        self.env
            .get(key)
            .unwrap_or_else(|| panic!("{} has no {key}", self.state.join("env").display()))
            .clone()
    }

    /// `ctr` on the tier's own containerd, in the CRI plugin's namespace.
    fn ctr(&self) -> Command {
        let mut c = Command::new("ctr");
        c.arg("--address")
            .arg(self.state.join("containerd.sock"))
            .args(["-n", "k8s.io"]);
        c
    }

    /// The kubelet's log, for failure messages (its last lines).
    fn kubelet_log_tail(&self) -> String {
        let log = std::fs::read_to_string(self.state.join("kubelet.log")).unwrap_or_default();
        // Without the lines it repeats every few seconds on a node without CNI or API server.
        let lines: Vec<&str> = log
            .lines()
            .filter(|l| !l.contains("network not ready") && !l.contains("kubelet_node_status"))
            .collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }
}

/// The tier, or None (skipped) outside CI when `HOOKLOG_TEST_KUBELET` is not set. In CI a
/// missing or stopped tier fails the test.
fn tier() -> Option<Tier> {
    let Some(state) = std::env::var_os("HOOKLOG_TEST_KUBELET") else {
        assert!(
            !in_ci(),
            "HOOKLOG_TEST_KUBELET is not set: the kubelet tests need scripts/kubelet.sh's kubelet \
             (run bash scripts/test.sh)"
        );
        eprintln!(
            "\n!!!!! SKIPPED: HOOKLOG_TEST_KUBELET is not set, so no kubelet to run pods on.\n\
             !!!!! bash scripts/test.sh starts one (scripts/kubelet.sh start DIR, then\n\
             !!!!! HOOKLOG_TEST_KUBELET=DIR). In CI this is a failure.\n"
        );
        return None;
    };
    let state = PathBuf::from(state);
    let env_file = state.join("env");
    let env: BTreeMap<String, String> = std::fs::read_to_string(&env_file)
        .unwrap_or_else(|e| {
            panic!(
                "HOOKLOG_TEST_KUBELET={}: no {} ({e}): is the kubelet running?",
                state.display(),
                env_file.display()
            )
        })
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let pid = std::fs::read_to_string(state.join("kubelet.pid")).unwrap_or_default();
    assert!(
        Path::new("/proc").join(pid.trim()).exists() && !pid.trim().is_empty(),
        "the tier's kubelet (pid '{}') is not running",
        pid.trim()
    );
    Some(Tier { state, env })
}

/// A unique suffix: pods, images and annotations of one run never meet another's.
fn unique() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!("{}-{nanos:08x}", std::process::id())
}

/// Imports an OCI image layout folder into the tier's containerd under `name`.
fn import_layout(tier: &Tier, layout: &Path, name: &str) {
    let mut index: Value = serde_json::from_slice(
        &std::fs::read(layout.join("index.json")).expect("index.json of the OCI layout"),
    )
    .expect("index.json is JSON");
    // ctr names an imported image after this annotation (else after a prefix and the tag).
    for m in index["manifests"].as_array_mut().expect("manifests") {
        m["annotations"]["io.containerd.image.name"] = json!(name);
    }
    std::fs::write(layout.join("index.json"), index.to_string()).unwrap();
    let archive = layout.with_extension("tar");
    let out = run(Command::new("tar")
        .arg("-C")
        .arg(layout)
        .arg("-cf")
        .arg(&archive)
        .arg("."));
    assert!(out.status.success(), "tar: {}", text(&out.stderr));
    let out = run(tier.ctr().args(["images", "import"]).arg(&archive));
    assert!(
        out.status.success(),
        "ctr images import {name}: {}",
        text(&out.stderr)
    );
}

fn imported(tier: &Tier, name: &str) -> bool {
    let out = run(tier.ctr().args(["images", "ls", "-q"]));
    text(&out.stdout).lines().any(|l| l == name)
}

/// hooklog's image as the Dockerfile builds it (tests/util/podman.rs), imported into the tier's
/// containerd as `localhost/hooklog-kubelet/hooklog:<podman image id>`.
fn hooklog_image(tier: &Tier) -> String {
    static IMAGE: OnceLock<String> = OnceLock::new();
    IMAGE
        .get_or_init(|| {
            // A tag named by the build's own id (tests/util/podman.rs): it names that image.
            let built = dockerfile_image(host_arch());
            let out = run(podman().args(["image", "inspect", "--format", "{{.Id}}", &built]));
            assert!(out.status.success(), "{}", text(&out.stderr));
            let id = text(&out.stdout).trim().to_string();
            let built_id = built.rsplit('-').next().unwrap_or_default();
            assert!(id.starts_with(built_id), "{built} is {id}, not the build's");
            let name = format!("localhost/hooklog-kubelet/hooklog:{}", &id[..12]);
            // Once per tier: a second test process waits, then finds it imported.
            let lock = tier.state.join("import.lock");
            let _guard = FileLock::take(&lock);
            if !imported(tier, &name) {
                let dir = tempfile::tempdir().unwrap();
                let layout = dir.path().join("hooklog");
                let out = run(podman()
                    .args(["save", "--format", "oci-dir", "-o"])
                    .arg(&layout)
                    .arg(&id));
                assert!(out.status.success(), "podman save: {}", text(&out.stderr));
                import_layout(tier, &layout, &name);
            }
            name
        })
        .clone()
}

/// An image with hooklog's binary at the file `/hooklog`, as the Dockerfile laid it out before
/// issue 16 (the release binary, entrypoint `/hooklog`), for the test that shows the tier
/// catches that layout.
fn old_layout_image(tier: &Tier) -> String {
    let bin = crate::util::binaries::release_bin();
    binary_image(tier, &bin, "/hooklog", "hooklog-old-layout")
}

/// An image of `bin` alone at `at`, its entrypoint, imported into the tier's containerd as
/// `localhost/hooklog-kubelet/REPO:UNIQUE` (built by tests/support/oci-archive.py: no Docker
/// build); returns its name.
fn binary_image(tier: &Tier, bin: &Path, at: &str, repo_name: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    let inside = root.join(at.trim_start_matches('/'));
    std::fs::create_dir_all(inside.parent().unwrap()).unwrap();
    std::fs::copy(bin, &inside).unwrap();
    let name = format!("localhost/hooklog-kubelet/{repo_name}:{}", unique());
    let archive = dir.path().join("image.tar");
    let out = run(Command::new("python3")
        .arg(repo().join("tests/support/oci-archive.py"))
        .arg(&root)
        .arg(&name)
        .arg(json!([at]).to_string())
        .arg(&archive));
    assert!(
        out.status.success(),
        "oci-archive.py: {}",
        text(&out.stderr)
    );
    let out = run(tier.ctr().args(["images", "import"]).arg(&archive));
    assert!(out.status.success(), "ctr import: {}", text(&out.stderr));
    name
}

/// An exclusive `flock` on a file, released on drop (the `flock` command holds it).
struct FileLock(std::process::Child);

impl FileLock {
    fn take(path: &Path) -> FileLock {
        let mut child = Command::new("flock")
            .arg(path)
            .args(["sh", "-c", "echo locked; exec cat"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("run flock");
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(child.stdout.as_mut().unwrap()),
            &mut line,
        )
        .unwrap();
        assert_eq!(line.trim(), "locked", "flock {}", path.display());
        FileLock(child)
    }
}

impl Drop for FileLock {
    fn drop(&mut self) {
        // Closing stdin ends `cat`, which releases the lock.
        drop(self.0.stdin.take());
        let _ = self.0.wait();
    }
}

/// One container of a pod, as containerd's CRI plugin records it.
#[derive(Debug, Clone)]
struct State {
    /// The container's name in the pod spec.
    name: String,
    /// Which start of it this is (0 first; the kubelet restarts a failed init container).
    attempt: u64,
    /// Whether the process has started (CRI StartedAt).
    started: bool,
    /// Its exit code once it has finished (CRI FinishedAt).
    exit_code: Option<i64>,
    /// When it finished (CRI FinishedAt), in Unix milliseconds as records' `started_ms` are.
    finished_ms: Option<i64>,
    /// CRI's reason and message (StartError, "not a directory", ...).
    reason: String,
    message: String,
    /// The file the kubelet logs its output to.
    log_path: Option<PathBuf>,
}

/// A container's CRI log, followed as `tail -F` follows a path: every file seen at it, held
/// open, and what was read from each. Kubelet 1.20's container GC deletes a removed static pod's
/// `/var/log/pods` folder while its containers may still be stopping (`evictPodLogsDirectories`),
/// and the log manager's periodic check then has containerd reopen the log at the same path
/// (`ReopenContainerLog`): later lines go to a new file there. Reading only the first file lost
/// the tail of hooklog's log, its summary included (the rare failure once retried here).
struct ContainerLog {
    path: PathBuf,
    files: Vec<(std::fs::File, Vec<u8>)>,
}

impl ContainerLog {
    fn open(path: PathBuf) -> Option<ContainerLog> {
        let file = std::fs::File::open(&path).ok()?;
        Some(ContainerLog {
            path,
            files: vec![(file, Vec::new())],
        })
    }

    /// Reads each file on to its end, first opening the file now at the path if it is another;
    /// returns the lines of all of them, in order.
    fn read(&mut self) -> Vec<String> {
        use std::io::Read;
        use std::os::unix::fs::MetadataExt;
        let id = |m: std::fs::Metadata| (m.dev(), m.ino());
        let last = self
            .files
            .last()
            .and_then(|(f, _)| f.metadata().ok())
            .map(id);
        let now = std::fs::metadata(&self.path).ok().map(id);
        if now.is_some()
            && now != last
            && let Ok(file) = std::fs::File::open(&self.path)
        {
            self.files.push((file, Vec::new()));
        }
        let mut lines = Vec::new();
        for (file, bytes) in &mut self.files {
            // Bytes, not text: a read may end inside a character the next one completes. A
            // read error keeps what was read before.
            let _ = file.read_to_end(bytes);
            lines.extend(String::from_utf8_lossy(bytes).lines().map(str::to_string));
        }
        lines
    }
}

/// A static pod on the tier: its manifest file exists while the pod should run.
struct Pod<'a> {
    tier: &'a Tier,
    /// metadata.name in the manifest; the kubelet names the pod `<name>-<node>`.
    name: String,
    namespace: String,
    file: PathBuf,
    /// Each container's log as read so far, from a handle kept open on its file: the kubelet
    /// removes a deleted pod's containers and their log files within moments of their exit, and
    /// an open handle still reads the file to its end (a poll that reopened it by path lost the
    /// last records, the summary among them).
    logs: std::cell::RefCell<BTreeMap<String, ContainerLog>>,
    /// The last state seen of each container (see [`Pod::latest`]).
    seen: std::cell::RefCell<BTreeMap<String, State>>,
    /// When [`Pod::wait_running`] last saw its containers running (see [`Pod::delete`]).
    running_at: std::cell::Cell<Option<Instant>>,
}

/// How stale the kubelet's list of running containers may be: kubelet 1.20's runtime cache
/// (`defaultCachePeriod`, pkg/kubelet/container/runtime_cache.go). A static pod removed before
/// the cache has seen its containers is killed from a list without them: the kubelet runs no
/// preStop hook and stops the sandbox, which SIGKILLs every container (seen in CI: a pod deleted
/// 0.8 s after its containers started ended with hooklog's exit 137 and no hook run).
const KUBELET_RUNTIME_CACHE: Duration = Duration::from_secs(2);

impl<'a> Pod<'a> {
    /// Writes `pod` (a v1 Pod) into the kubelet's manifest folder, atomically, with a run-unique
    /// annotation: a static pod's UID is a hash of its manifest, and the same manifest again
    /// would inherit the last run's exited containers, logs and restart back-off.
    fn create(tier: &'a Tier, mut pod: Value) -> Pod<'a> {
        let name = pod["metadata"]["name"].as_str().unwrap().to_string();
        let namespace = pod["metadata"]["namespace"]
            .as_str()
            .unwrap_or("default")
            .to_string();
        pod["metadata"]["annotations"]["hooklog.dev/test-run"] = json!(unique());
        let file = tier.manifests().join(format!("{name}.json"));
        // Files starting with a dot are ignored by the kubelet's file source.
        let tmp = tier.manifests().join(format!(".{name}.json.tmp"));
        std::fs::write(&tmp, serde_json::to_vec_pretty(&pod).unwrap()).unwrap();
        std::fs::rename(&tmp, &file).unwrap();
        Pod {
            tier,
            name,
            namespace,
            file,
            logs: Default::default(),
            seen: Default::default(),
            running_at: Default::default(),
        }
    }

    /// Deletes the pod as the API server's deletion would: the kubelet runs the preStop hooks,
    /// then stops the containers within the grace period. It waits first until the kubelet's
    /// runtime cache has surely seen the containers [`Pod::wait_running`] saw running
    /// ([`KUBELET_RUNTIME_CACHE`], and a second's margin for the cache's own refresh).
    fn delete(&self) {
        if let Some(at) = self.running_at.get() {
            let safe = at + KUBELET_RUNTIME_CACHE + Duration::from_secs(1);
            std::thread::sleep(safe.saturating_duration_since(Instant::now()));
        }
        let _ = std::fs::remove_file(&self.file);
    }

    /// Every container of the pod (the sandbox excluded), every attempt.
    fn states(&self) -> Vec<State> {
        let node = self.tier.var("HOOKLOG_TEST_KUBELET_NODE");
        let pod_name = format!("{}-{node}", self.name);
        let out = run(self.tier.ctr().args(["containers", "ls", "-q"]));
        let mut states = Vec::new();
        for id in text(&out.stdout).lines() {
            let info = run(self.tier.ctr().args(["containers", "info", id]));
            let Ok(info) = serde_json::from_slice::<Value>(&info.stdout) else {
                continue; // removed between ls and info
            };
            let labels = &info["Labels"];
            if labels["io.kubernetes.pod.name"] != pod_name.as_str()
                || labels["io.kubernetes.pod.namespace"] != self.namespace.as_str()
                || labels["io.cri-containerd.kind"] != "container"
            {
                continue;
            }
            let status_file = self
                .tier
                .state
                .join("containerd/root/io.containerd.grpc.v1.cri/containers")
                .join(id)
                .join("status");
            let status: Value = std::fs::read(&status_file)
                .ok()
                .and_then(|b| serde_json::from_slice(&b).ok())
                .unwrap_or(Value::Null);
            let set = |k: &str| status[k].as_i64().is_some_and(|t| t > 0);
            let cri = cri_metadata(&info);
            states.push(State {
                name: labels["io.kubernetes.container.name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                attempt: cri["Config"]["metadata"]["attempt"].as_u64().unwrap_or(0),
                log_path: cri["LogPath"].as_str().map(PathBuf::from),
                started: set("StartedAt"),
                exit_code: set("FinishedAt").then(|| status["ExitCode"].as_i64().unwrap_or(-1)),
                finished_ms: status["FinishedAt"]
                    .as_i64()
                    .filter(|t| *t > 0)
                    .map(|t| t / 1_000_000),
                reason: status["Reason"].as_str().unwrap_or_default().to_string(),
                message: status["Message"].as_str().unwrap_or_default().to_string(),
            });
        }
        states.sort_by(|a, b| (&a.name, a.attempt).cmp(&(&b.name, b.attempt)));
        states
    }

    /// The latest attempt of each container, as last seen: a deleted pod's containers are
    /// removed by the kubelet soon after they exit, and their exit codes with them.
    fn latest(&self) -> BTreeMap<String, State> {
        let mut seen = self.seen.borrow_mut();
        for s in self.states() {
            if seen.get(&s.name).is_none_or(|old| old.attempt <= s.attempt) {
                seen.insert(s.name.clone(), s);
            }
        }
        seen.clone()
    }

    /// Polls until every container in `names` runs (started, not finished) and returns how long
    /// that took; fails with what each container did and the kubelet's log.
    fn wait_running(&self, names: &[&str]) -> Duration {
        let start = Instant::now();
        loop {
            let latest = self.latest();
            if names.iter().all(|n| {
                latest
                    .get(*n)
                    .is_some_and(|s| s.started && s.exit_code.is_none())
            }) {
                self.running_at.set(Some(Instant::now()));
                return start.elapsed();
            }
            assert!(
                start.elapsed() < START_TIMEOUT,
                "pod {} did not get {names:?} running in {START_TIMEOUT:?}: {:#?}\nkubelet log:\n{}",
                self.name,
                self.states(),
                self.tier.kubelet_log_tail()
            );
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    /// The container's stdout and stderr lines as the kubelet logged them (CRI format
    /// `<time> <stream> <P|F> <text>`, partial lines joined), latest attempt, as last read.
    fn log_lines(&self, container: &str, stream: &str) -> Vec<String> {
        if let Some(path) = self
            .latest()
            .get(container)
            .and_then(|s| s.log_path.clone())
        {
            let mut logs = self.logs.borrow_mut();
            let stale = logs.get(container).is_none_or(|l| l.path != path);
            if stale && let Some(log) = ContainerLog::open(path) {
                logs.insert(container.to_string(), log);
            }
        }
        let Some(log) = self
            .logs
            .borrow_mut()
            .get_mut(container)
            .map(ContainerLog::read)
        else {
            return Vec::new();
        };
        let mut lines = Vec::new();
        let mut partial = String::new();
        for l in &log {
            let mut parts = l.splitn(4, ' ');
            let (_time, s, tag, body) = (
                parts.next(),
                parts.next().unwrap_or_default(),
                parts.next().unwrap_or_default(),
                parts.next().unwrap_or_default(),
            );
            if s != stream {
                continue;
            }
            partial.push_str(body);
            if tag == "F" {
                lines.push(std::mem::take(&mut partial));
            }
        }
        lines
    }

    /// hooklog's records: its stdout, each line a JSON object.
    fn records(&self, container: &str) -> Vec<Value> {
        self.log_lines(container, "stdout")
            .iter()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
            .collect()
    }
}

impl Drop for Pod<'_> {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.file);
    }
}

/// The CRI plugin's record of a container (an extension of containerd's container, JSON in
/// base64): its attempt (`Config.metadata.attempt`) and the log file the kubelet asked for.
fn cri_metadata(info: &Value) -> Value {
    info["Extensions"]["io.cri-containerd.container.metadata"]["value"]
        .as_str()
        .map(base64_decode)
        .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
        .map_or(Value::Null, |m| m["Metadata"].clone())
}

/// Standard base64 (how `ctr` prints the extension's bytes), without a dependency for it.
fn base64_decode(s: &str) -> Vec<u8> {
    let digit = |c: u8| match c {
        b'A'..=b'Z' => Some(c - b'A'),
        b'a'..=b'z' => Some(c - b'a' + 26),
        b'0'..=b'9' => Some(c - b'0' + 52),
        b'+' => Some(62),
        b'/' => Some(63),
        _ => None,
    };
    let mut out = Vec::new();
    let (mut acc, mut bits) = (0u32, 0);
    for d in s.bytes().filter_map(digit) {
        acc = (acc << 6) | u32::from(d);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    out
}

/// Reads a YAML document with one pod template (a Deployment) into JSON.
fn yaml_documents(yaml: &str) -> Vec<Value> {
    hooklog::manifest::load::parse("yaml", yaml.to_string())
        .expect("YAML documents")
        .documents
        .into_iter()
        .map(|d| d.value)
        .collect()
}

/// Which of the tier's local images stands for an image a manifest names.
#[derive(Clone, Copy)]
enum Local {
    /// The hooklog image the test runs (the sidecar build, the release one, an old layout).
    Hooklog,
    /// A busybox image: a shell and coreutils.
    Busybox,
    /// An image with no shell, as distroless ones are.
    ShellLess,
}

/// Every image the manifests the kubelet tests run name (k8s/'s and the incident's), with its
/// stand-in: the one map of them (a manifest that names another fails, naming it). The image
/// given to `inject` is the test's hooklog image itself.
const TEST_IMAGES: &[(&str, Local)] = &[
    (
        "123456789012.dkr.ecr.eu-west-1.amazonaws.com/hooklog-sidecar:0.1.0",
        Local::Hooklog,
    ),
    (
        "123456789012.dkr.ecr.eu-west-1.amazonaws.com/api-server:1.4.2",
        Local::Busybox,
    ),
    ("envoyproxy/envoy-distroless:v1.31.2", Local::ShellLess),
    ("registry.example.com/shop/checkout:2.3.1", Local::Busybox),
    ("envoyproxy/envoy-distroless:v1.31.0", Local::ShellLess),
    ("registry.example.com/shop/api-server:1.4.2", Local::Busybox),
    ("envoyproxy/envoy:v1.31.2", Local::Busybox),
    ("busybox:1.36", Local::Busybox),
];

/// The local image that stands for `image` in this tier, with `hooklog` as the hooklog image.
fn local_image(tier: &Tier, hooklog: &str, image: &str) -> String {
    if image == hooklog {
        return hooklog.to_string();
    }
    let (_, local) = TEST_IMAGES
        .iter()
        .find(|(from, _)| *from == image)
        .unwrap_or_else(|| panic!("no local image for {image}: add it to TEST_IMAGES"));
    match local {
        Local::Hooklog => hooklog.to_string(),
        Local::Busybox => tier.var("HOOKLOG_TEST_KUBELET_BUSYBOX_IMAGE"),
        Local::ShellLess => tier.var("HOOKLOG_TEST_KUBELET_SHELL_LESS_IMAGE"),
    }
}

/// The manifests the kubelet tests run, each in the form they run it (the incident after inject,
/// whose image is the test's own).
const KUBELET_MANIFESTS: [&str; 3] = [
    "k8s/api-server-classic-sidecar.yaml",
    "tests/manifests/incidents/distroless-envoy-sleep.yaml",
    "tests/manifests/incidents/busybox-tail-workaround.yaml",
];

/// Tier-free: the log reader follows its path as the kubelet's GC and containerd's reopen move
/// it: lines written to the old file after the new one appeared, the new file's, and a third's,
/// each once and in order; a path with no file for a while loses nothing either.
#[test]
fn a_container_log_reopened_at_its_path_is_read_on_in_the_new_file() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("ns_pod_uid/hooklog");
    std::fs::create_dir_all(&folder).unwrap();
    let path = folder.join("0.log");
    let line = |n: u32| format!("2026-12-02T00:00:00.{n:09}Z stdout F {{\"n\":{n}}}\n");
    let mut first = std::fs::File::create(&path).unwrap();
    first.write_all(line(1).as_bytes()).unwrap();
    let mut log = ContainerLog::open(path.clone()).unwrap();
    assert_eq!(log.read().len(), 1);
    // The GC removes the pod's folder; the old file is still written until the reopen.
    std::fs::remove_dir_all(dir.path().join("ns_pod_uid")).unwrap();
    first.write_all(line(2).as_bytes()).unwrap();
    assert_eq!(log.read().len(), 2);
    // containerd reopens the log at the same path.
    std::fs::create_dir_all(&folder).unwrap();
    let mut second = std::fs::File::create(&path).unwrap();
    second.write_all(line(3).as_bytes()).unwrap();
    first.write_all(line(4).as_bytes()).unwrap();
    assert_eq!(log.read().len(), 4);
    second.write_all(line(5).as_bytes()).unwrap();
    // And once more, by rename this time (what a rotation does).
    std::fs::rename(&path, folder.join("0.log.1")).unwrap();
    let mut third = std::fs::File::create(&path).unwrap();
    third.write_all(line(6).as_bytes()).unwrap();
    let got: Vec<u32> = log
        .read()
        .iter()
        .map(|l| {
            let v: Value = serde_json::from_str(l.splitn(4, ' ').nth(3).unwrap()).unwrap();
            v["n"].as_u64().unwrap() as u32
        })
        .collect();
    // Per file, in the order the files appeared: all six, once each.
    assert_eq!(got, [1, 2, 4, 3, 5, 6]);
}

/// Runs without the tier: every image the manifests name has its stand-in in [`TEST_IMAGES`], so
/// a renamed image (the split's `hooklog-sidecar`) fails here at once rather than in the tier.
#[test]
fn every_image_the_kubelet_tests_run_has_a_stand_in() {
    for file in KUBELET_MANIFESTS {
        let yaml = std::fs::read_to_string(repo().join(file)).unwrap();
        let mut named = 0;
        for doc in yaml_documents(&yaml) {
            let spec = &doc["spec"]["template"]["spec"];
            for list in ["initContainers", "containers"] {
                for c in spec[list].as_array().into_iter().flatten() {
                    let image = c["image"].as_str().unwrap();
                    assert!(
                        TEST_IMAGES.iter().any(|(from, _)| *from == image),
                        "{file}: {image} has no stand-in in TEST_IMAGES"
                    );
                    named += 1;
                }
            }
        }
        assert!(named >= 2, "{file}: {named} images");
    }
}

/// A static Pod from a Deployment's pod template, as the tier runs it: hostNetwork, each image
/// mapped to its stand-in ([`local_image`]: nothing is pulled) with `hooklog` as the hooklog
/// image, `imagePullPolicy: Never`, no `ports`, and the test's grace period.
fn pod_from_deployment(tier: &Tier, deployment: &Value, name: &str, hooklog: &str) -> Value {
    let template = &deployment["spec"]["template"];
    let mut spec = template["spec"].clone();
    spec["hostNetwork"] = json!(true);
    spec["terminationGracePeriodSeconds"] = json!(TEST_GRACE_SECS);
    for list in ["initContainers", "containers"] {
        for c in spec[list].as_array_mut().into_iter().flatten() {
            let image = c["image"].as_str().unwrap().to_string();
            c["image"] = json!(local_image(tier, hooklog, &image));
            c["imagePullPolicy"] = json!("Never");
            // In hostNetwork every containerPort is a port of the node: two of the tests' pods
            // declaring the same one (they run at once) and the kubelet refuses the second
            // ("Predicate NodePorts failed"). Nothing here listens on them.
            if let Some(c) = c.as_object_mut() {
                c.remove("ports");
            }
        }
    }
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": deployment["metadata"]["namespace"],
            "labels": template["metadata"]["labels"],
            "annotations": template["metadata"]["annotations"].as_object().cloned().unwrap_or_default(),
        },
        "spec": spec,
    })
}

/// The container named `name` in a pod spec.
fn container<'v>(spec: &'v mut Value, name: &str) -> &'v mut Value {
    for list in ["initContainers", "containers"] {
        if let Some(i) = spec[list]
            .as_array()
            .and_then(|a| a.iter().position(|c| c["name"] == name))
        {
            return &mut spec[list][i];
        }
    }
    panic!("no container {name}");
}

/// Replaces `from` by `to` in a container's exec preStop command (exactly one occurrence).
fn edit_prestop(c: &mut Value, from: &str, to: &str) {
    let cmd = c["lifecycle"]["preStop"]["exec"]["command"]
        .as_array_mut()
        .expect("an exec preStop");
    let hits: Vec<usize> = (0..cmd.len()).filter(|&i| cmd[i] == from).collect();
    assert_eq!(hits.len(), 1, "{from} in {cmd:?}");
    cmd[hits[0]] = json!(to);
}

/// Replaces the value after `flag` in a container's args.
fn edit_arg(c: &mut Value, flag: &str, to: &str) {
    let args = c["args"].as_array_mut().expect("args");
    let i = args
        .iter()
        .position(|a| a == flag)
        .unwrap_or_else(|| panic!("no {flag} in {args:?}"));
    args[i + 1] = json!(to);
}

/// Waits until hooklog has exited and its stdout holds `hooks.summary`; checks that the summary
/// is the last record and that hooklog exited 0, and returns the records.
fn wait_summary(pod: &Pod) -> Vec<Value> {
    let container = "hooklog";
    let start = Instant::now();
    loop {
        let records = pod.records(container);
        let exit = pod.latest().get(container).and_then(|s| s.exit_code);
        if let Some(code) = exit
            && let Some(at) = records.iter().position(|r| r["event"] == "hooks.summary")
        {
            assert_eq!(
                at + 1,
                records.len(),
                "{container}: records after hooks.summary: {:#?}\nstderr {:#?}",
                &records[at..],
                pod.log_lines(container, "stderr"),
            );
            assert_eq!(code, 0, "hooklog's exit code; records {records:#?}");
            return records;
        }
        // The short facts first and the long ones last: a CI excerpt keeps the head and the
        // tail of a failure and cuts the middle.
        assert!(
            start.elapsed() < STOP_TIMEOUT,
            "{container} did not end with hooks.summary and exit in {STOP_TIMEOUT:?}: exit {exit:?} \
             at {:?} Unix ms (the last record's `started_ms` or time says whether it left before \
             the last hook ended or its log lost the tail), {} records: {:?}\nstderr {:#?}\nstates \
             {:#?}\nrecords {records:#?}\nkubelet log:\n{}",
            pod.latest().get(container).and_then(|s| s.finished_ms),
            records.len(),
            records
                .iter()
                .map(|r| format!("{} {}", r["event"], r["container_name"]))
                .collect::<Vec<_>>(),
            pod.log_lines(container, "stderr"),
            pod.states(),
            pod.tier.kubelet_log_tail()
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// Deletes the pod and waits for hooklog's summary ([`wait_summary`]); returns the records and
/// how long after the deletion hooklog exited.
fn delete_and_wait(pod: &Pod) -> (Vec<Value>, Duration) {
    pod.delete();
    let deleted = Instant::now();
    let records = wait_summary(pod);
    (records, deleted.elapsed())
}

/// The hook records of one peer: its `hook.finished` record.
fn finished<'r>(records: &'r [Value], peer: &str) -> &'r Value {
    records
        .iter()
        .find(|r| r["event"] == "hook.finished" && r["container_name"] == peer)
        .unwrap_or_else(|| panic!("no hook.finished for {peer}: {records:#?}"))
}

/// envoy's preStop really slept inside the kubelet's: its hook took a duration in `ms`.
fn assert_envoy_slept(records: &[Value], ms: std::ops::Range<u64>) {
    let envoy = finished(records, "envoy");
    let took = envoy["duration_ms"].as_u64().unwrap();
    assert!(ms.contains(&took), "envoy's sleep took {took} ms: {envoy}");
}

/// Whether a record of `container`'s says `said` (its hook's output, relayed).
fn said(records: &[Value], container: &str, said: &str) -> bool {
    records.iter().any(|r| {
        r["container_name"] == container && r["message"].as_str().is_some_and(|m| m.contains(said))
    })
}

/// Waits until hooklog says it is ready (its socket is listening: a hook that starts before
/// would be reported from the file instead, a different path than the one under test).
fn assert_ready(pod: &Pod) {
    let ready = crate::util::wait_until(START_TIMEOUT, || {
        pod.log_lines("hooklog", "stderr")
            .iter()
            .any(|l| l.contains("hooklog ready"))
    });
    assert!(
        ready,
        "hooklog never said it was ready: {:?}",
        pod.log_lines("hooklog", "stderr")
    );
}

/// k8s/'s classic manifest as the static pod `name`, as shipped except for what a node without a
/// registry or an API server needs: local images, no ConfigMap volume (envoy's config: the
/// stand-in envoy reads none), a shorter grace, sleep and timeouts.
fn classic_pod(tier: &Tier, hooklog: &str, name: &str) -> Value {
    let yaml = std::fs::read_to_string(repo().join(KUBELET_MANIFESTS[0])).unwrap();
    let deployment = yaml_documents(&yaml).remove(0);
    let mut pod = pod_from_deployment(tier, &deployment, name, hooklog);
    let spec = &mut pod["spec"];
    for v in spec["volumes"].as_array_mut().unwrap() {
        if v["name"] == "envoy-config" {
            *v = json!({"name": "envoy-config", "emptyDir": {}});
        }
    }
    edit_arg(container(spec, "hooklog"), "--grace", "15s");
    let envoy = container(spec, "envoy");
    edit_prestop(envoy, "20s", ENVOY_SLEEP);
    edit_prestop(envoy, "30s", "15s");
    edit_prestop(container(spec, "api-server"), "30s", "15s");
    pod
}

/// k8s/'s classic manifest ([`classic_pod`]). The hooks really run: envoy's preStop sleeps 3 s
/// through the binary the init container installed, and api-server's upload script does not
/// exist in the busybox image, so its hook fails (exit 127), as a broken hook would.
#[test]
fn kubelet_runs_the_classic_manifest_and_hooklog_reports_every_hook() {
    let Some(tier) = tier() else { return };
    let hooklog = hooklog_image(&tier);
    let name = format!("classic-{}", std::process::id());
    let pod = Pod::create(&tier, classic_pod(&tier, &hooklog, &name));
    let took = pod.wait_running(&["hooklog", "api-server", "envoy"]);
    eprintln!("classic pod running after {took:.1?}");
    let install = &pod.latest()["hooklog-install"];
    assert_eq!(install.exit_code, Some(0), "{install:?}");
    assert_ready(&pod);

    let (records, took) = delete_and_wait(&pod);
    eprintln!("classic pod: hooklog exited after {took:.1?}");
    let summary = records.last().unwrap();
    assert_eq!(outcome_of(summary, "envoy"), ("ok", Some(0)), "{summary}");
    assert_eq!(
        outcome_of(summary, "api-server"),
        ("failed", Some(127)),
        "{summary}"
    );
    assert_eq!(summary["counts"]["ok"], 1, "{summary}");
    assert_eq!(summary["counts"]["failed"], 1, "{summary}");
    // envoy's sleep really ran for its 3 s inside the kubelet's preStop.
    assert_envoy_slept(&records, 3000..10_000);
    // The Downward API the kubelet filled in.
    assert_eq!(summary["kubernetes"]["namespace_name"], "shop", "{summary}");
    assert_eq!(
        summary["kubernetes"]["labels"]["app"], "api-server",
        "{summary}"
    );
}

/// The seed incident (tests/manifests/incidents/distroless-envoy-sleep.yaml) with a checkout app
/// whose own preStop fails (exit 3), put through `hooklog inject --sidecar classic` with the
/// image built from the Dockerfile, then run unchanged but for local images and a shorter grace
/// and sleep. Before issue 16 the install init container could not start (the image's binary
/// was the file /hooklog, where inject mounts its emptyDir) and no app container ever ran.
#[test]
fn kubelet_runs_injected_incident_pod_and_summary_names_true_outcomes() {
    let Some(tier) = tier() else { return };
    let hooklog = hooklog_image(&tier);
    let (pod, took) = run_injected_incident(&tier, &hooklog, ENVOY_SLEEP);
    eprintln!("injected pod running after {took:.1?}");
    let (records, took) = delete_and_wait(&pod);
    eprintln!("injected pod: hooklog exited after {took:.1?}");
    let summary = records.last().unwrap();
    assert_incident_outcomes(summary);
    assert_envoy_slept(&records, 3000..10_000);
    let checkout = finished(&records, "checkout");
    assert_eq!(checkout["exit_code"], 3, "{checkout}");
    // The hook's own output is in the pod's log stream, attributed to it.
    assert!(
        said(&records, "checkout", "upload failed: AccessDenied"),
        "checkout's hook output: {records:#?}"
    );
}

/// The seed incident's true outcomes in its summary: envoy's sleep ok, checkout's upload failed
/// with its exit 3.
fn assert_incident_outcomes(summary: &Value) {
    assert_eq!(
        [
            outcome_of(summary, "envoy"),
            outcome_of(summary, "checkout")
        ],
        [("ok", Some(0)), ("failed", Some(3))],
        "{summary}"
    );
}

/// What the seed incident's injected pod needs (envoy's preStop sleeping `sleep`), started and
/// running; returns the pod and how long it took to get every container running.
fn run_injected_incident<'t>(tier: &'t Tier, hooklog: &str, sleep: &str) -> (Pod<'t>, Duration) {
    let pod = create_injected_incident(tier, hooklog, "classic", sleep);
    let took = pod.wait_running(&["hooklog", "checkout", "envoy"]);
    assert_eq!(pod.latest()["hooklog-install"].exit_code, Some(0));
    assert_ready(&pod);
    (pod, took)
}

/// inject's output for the seed incident (with checkout's failing hook added first), as a
/// static pod with local images.
/// envoy's preStop sleeps `sleep`.
fn create_injected_incident<'t>(
    tier: &'t Tier,
    hooklog: &str,
    sidecar: &str,
    sleep: &str,
) -> Pod<'t> {
    create_injected_incident_with(tier, hooklog, sidecar, sleep, &[])
}

/// [`create_injected_incident`], with `peers` added to the Deployment's containers before
/// inject (so that inject wires those with a preStop as it wires the others).
fn create_injected_incident_with<'t>(
    tier: &'t Tier,
    hooklog: &str,
    sidecar: &str,
    sleep: &str,
    peers: &[Value],
) -> Pod<'t> {
    let yaml = std::fs::read_to_string(repo().join(KUBELET_MANIFESTS[1])).unwrap();
    let mut deployment = yaml_documents(&yaml).remove(0);
    deployment["spec"]["template"]["spec"]["containers"]
        .as_array_mut()
        .unwrap()
        .extend(peers.iter().cloned());
    // The app whose hook fails: a heap-dump upload that prints its error and exits 3.
    container(&mut deployment["spec"]["template"]["spec"], "checkout")["lifecycle"] = json!({
        "preStop": {"exec": {"command": [
            "sh", "-c", "echo 'heap dump written'; echo 'upload failed: AccessDenied' >&2; exit 3"
        ]}}
    });
    // envoy's sleep, shortened for the test (inject keeps the command it wraps as it is).
    let envoy = container(&mut deployment["spec"]["template"]["spec"], "envoy");
    envoy["lifecycle"]["preStop"]["exec"]["command"] = json!(["sleep", sleep]);
    // The pod's grace period before inject, which plans hooklog's `--grace` and the hooks'
    // `--timeout` from it: a shorter one set afterwards kills hooklog before its own deadline.
    deployment["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] =
        json!(TEST_GRACE_SECS);
    let input = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(input.path(), serde_json::to_string(&deployment).unwrap()).unwrap();
    let out = run(crate::util::hooklog()
        .args(["inject", "--sidecar", sidecar, "--image", hooklog])
        .arg(input.path()));
    assert!(out.status.success(), "inject: {}", text(&out.stderr));
    let injected = yaml_documents(&text(&out.stdout)).remove(0);
    let name = format!("incident-{sidecar}-{}", std::process::id());
    let pod = pod_from_deployment(tier, &injected, &name, hooklog);
    Pod::create(tier, pod)
}

/// What the kubelet tier's rare lost summary was, made to happen every time: while the pod's
/// hooks run (envoy's sleep spans the log manager's 10 s check), the pod's `/var/log/pods`
/// folder is deleted, as kubelet 1.20's container GC deletes a removed static pod's; the log
/// manager then has containerd reopen hooklog's log at the same path, and what hooklog writes
/// after goes to the new file. Every record is read, the summary last, from the two files.
#[test]
fn kubelet_reopening_a_stopping_pods_log_loses_no_record() {
    let Some(tier) = tier() else { return };
    let hooklog = hooklog_image(&tier);
    let (pod, _) = run_injected_incident(&tier, &hooklog, "13s");
    let log = pod.latest()["hooklog"].log_path.clone().unwrap();
    let folder = log.parent().and_then(Path::parent).unwrap().to_path_buf();
    assert!(folder.starts_with("/var/log/pods"), "{folder:?}");
    pod.delete();
    assert!(
        crate::util::wait_until(STOP_TIMEOUT, || pod
            .records("hooklog")
            .iter()
            .any(|r| r["event"] == "hook.started" && r["container_name"] == "envoy")),
        "envoy's hook never started: {:#?}",
        pod.records("hooklog")
    );
    let old = std::fs::metadata(&log).unwrap();
    std::fs::remove_dir_all(&folder).unwrap();
    let records = wait_summary(&pod);
    // The reopen happened: a new file is (or was, if the GC took it again) at the path, and the
    // summary came after it.
    use std::os::unix::fs::MetadataExt;
    let reopened = pod.logs.borrow()["hooklog"].files.len();
    assert!(
        reopened >= 2 || std::fs::metadata(&log).is_ok_and(|m| m.ino() != old.ino()),
        "no second log file: the reopen did not happen, so this tested nothing"
    );
    let summary = records.last().unwrap();
    assert_incident_outcomes(summary);
    assert_envoy_slept(&records, 13_000..20_000);
}

/// Issue 16, item 1: with hooklog's binary at the file `/hooklog` in the image (the layout
/// before the fix), inject's emptyDir mount at `/hooklog` makes runc fail the sidecar ("not a
/// directory"): it never runs, and no hook is reported. (Before issue 37 the install init
/// container mounted it too, and no app container ever started; it now fills `/hooklog-bin`,
/// where that image has nothing, and succeeds.) The tier must see that: this is the failure the
/// tests above would show if the Dockerfile went back.
#[test]
fn kubelet_never_starts_injected_pod_with_binary_at_slash_hooklog() {
    let Some(tier) = tier() else { return };
    let old = old_layout_image(&tier);
    let pod = create_injected_incident(&tier, &old, "classic", ENVOY_SLEEP);
    let start = Instant::now();
    let failed = loop {
        let sidecar = pod.latest().get("hooklog").cloned();
        if let Some(s) = sidecar.filter(|s| s.exit_code.is_some()) {
            break s;
        }
        assert!(
            start.elapsed() < START_TIMEOUT,
            "hooklog never ended: {:#?}\n{}",
            pod.states(),
            tier.kubelet_log_tail()
        );
        std::thread::sleep(Duration::from_millis(250));
    };
    assert_ne!(failed.exit_code, Some(0), "{failed:?}");
    eprintln!(
        "hooklog: exit {:?}, {}: {}",
        failed.exit_code, failed.reason, failed.message
    );
    assert!(
        failed.message.contains("not a directory"),
        "the sidecar failed for another reason: {failed:?}"
    );
    assert!(!failed.started, "{failed:?}");
    let install = &pod.latest()["hooklog-install"];
    assert_eq!(install.exit_code, Some(0), "{install:?}");
}

/// Kubernetes 1.20 has no native sidecars: it drops `restartPolicy: Always` on init containers,
/// so inject's native form (the default) runs `hooklog run` as an init container that never
/// ends, and the app containers never start. This is why native mode is tested by its pod
/// simulation (tests/k8s.rs) and not here, and why inject must know the cluster's version.
#[test]
fn native_form_under_kubelet_1_20_never_starts_the_app() {
    let Some(tier) = tier() else { return };
    let hooklog = hooklog_image(&tier);
    let pod = create_injected_incident(&tier, &hooklog, "native", ENVOY_SLEEP);
    pod.wait_running(&["hooklog"]);
    // hooklog runs, as an init container: the kubelet waits for it to end before the others.
    std::thread::sleep(Duration::from_secs(5));
    let latest = pod.latest();
    assert!(
        latest["hooklog"].exit_code.is_none(),
        "{:?}",
        latest["hooklog"]
    );
    assert!(
        !latest.contains_key("checkout") && !latest.contains_key("envoy"),
        "the app containers started under 1.20 ({latest:#?}): the tier's kubelet knows native \
         sidecars, so native mode can be tested here now"
    );
}

/// An image of the sidecar under test (the release build of `--no-default-features`, what pods
/// run: issue 27; the full CLI where scripts/test.sh did not build it) at /usr/local/bin/hooklog,
/// its entrypoint, as the Dockerfile lays it out (the manifests set the user): for the tests of
/// one branch's binary without a Docker build.
fn release_image(tier: &Tier) -> String {
    let bin =
        crate::util::binaries::sidecar_bin().unwrap_or_else(crate::util::binaries::release_bin);
    binary_image(tier, &bin, "/usr/local/bin/hooklog", "hooklog-release")
}

/// The host file the kubelet mounted at `container`'s `/dev/termination-log`, opened while the
/// pod runs (the kubelet removes a deleted pod's folder soon after its containers exit).
fn termination_log(pod: &Pod, container: &str) -> std::fs::File {
    let state = &pod.latest()[container];
    // /var/log/pods/NS_NAME_UID/CONTAINER/N.log
    let folder = state
        .log_path
        .as_ref()
        .and_then(|p| {
            p.parent()?
                .parent()?
                .file_name()?
                .to_str()
                .map(str::to_string)
        })
        .expect("a log path");
    let uid = folder.rsplit('_').next().unwrap();
    let dir = pod
        .tier
        .state
        .join("kubelet/pods")
        .join(uid)
        .join("containers")
        .join(container);
    let files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    std::fs::File::open(&files[0]).unwrap()
}

/// Issue 29: `--events` on a node with no API server reachable from the pod (this tier's
/// standalone kubelet: no `KUBERNETES_SERVICE_HOST`, no token) changes nothing in the records
/// or the timing, and the summary's line is the container's termination message.
#[test]
fn kubelet_events_without_an_api_change_nothing_and_the_termination_message_is_the_summary() {
    use std::io::{Read, Seek};
    let Some(tier) = tier() else { return };
    let hooklog = release_image(&tier);
    let mut runs = Vec::new();
    for events in [false, true] {
        let name = format!("events-{events}-{}", std::process::id());
        let mut pod = classic_pod(&tier, &hooklog, &name);
        if events {
            container(&mut pod["spec"], "hooklog")["args"]
                .as_array_mut()
                .unwrap()
                .push(json!("--events"));
        }
        let pod = Pod::create(&tier, pod);
        pod.wait_running(&["hooklog", "api-server", "envoy"]);
        assert_ready(&pod);
        let mut message = termination_log(&pod, "hooklog");
        let (records, took) = delete_and_wait(&pod);
        let mut written = String::new();
        message.rewind().unwrap();
        message.read_to_string(&mut written).unwrap();
        let summary = records.last().unwrap().clone();
        assert_eq!(written, summary["message"].as_str().unwrap(), "{summary}");
        eprintln!(
            "events={events}: hooklog exited after {took:.1?}; termination message {written:?}"
        );
        runs.push((records, took, pod.log_lines("hooklog", "stderr")));
    }
    let shape = |records: &[Value]| -> Vec<(Value, Value, Value, Value)> {
        records
            .iter()
            .map(|r| {
                let mut r = r.clone();
                if let Some(o) = r.as_object_mut() {
                    o.remove("events");
                }
                (
                    r["event"].clone(),
                    r["container_name"].clone(),
                    r["outcome"].clone(),
                    r["counts"].clone(),
                )
            })
            .collect()
    };
    let (without, with) = (&runs[0], &runs[1]);
    let (mut a, mut b) = (shape(&without.0), shape(&with.0));
    // Lines of several containers interleave differently from run to run; the summary is last.
    let (last_a, last_b) = (a.pop(), b.pop());
    assert_eq!(last_a, last_b);
    a.sort_by_key(|t| format!("{t:?}"));
    b.sort_by_key(|t| format!("{t:?}"));
    assert_eq!(a, b);
    let summary = with.0.last().unwrap();
    assert_eq!(summary["events"]["posted"], 0, "{summary}");
    assert_eq!(summary["events"]["not_posted"], 1, "{summary}");
    assert!(without.0.last().unwrap().get("events").is_none());
    // The same timing: envoy's 3 s hook, then the linger, either way.
    let diff = with.1.abs_diff(without.1);
    assert!(
        diff < Duration::from_secs(2),
        "with --events {:?}, without {:?}",
        with.1,
        without.1
    );
    assert!(
        with.2.iter().any(|l| l.contains("no event will be posted")),
        "{:#?}",
        with.2
    );
}

/// The busybox `tail -F` workaround (issue 40) migrated by `hooklog inject` and run by a real
/// kubelet: hooklog in the forwarder's place reads the shared file, so every line the hooks
/// append (their hand-written JSON, read as JSON, and their commands' output: the missing upload
/// script's and curl's errors) arrives in hooklog's stdout, with each hook's outcome, the
/// summary last. Only the grace period (before inject) and envoy's drain sleep are shortened.
#[test]
fn kubelet_runs_the_migrated_tail_workaround_and_every_appended_line_arrives() {
    let Some(tier) = tier() else { return };
    let hooklog = hooklog_image(&tier);
    let yaml = std::fs::read_to_string(repo().join(KUBELET_MANIFESTS[2])).unwrap();
    let mut deployment = yaml_documents(&yaml).remove(0);
    let spec = &mut deployment["spec"]["template"]["spec"];
    spec["terminationGracePeriodSeconds"] = json!(TEST_GRACE_SECS);
    let envoy = container(spec, "envoy");
    let script = envoy["lifecycle"]["preStop"]["exec"]["command"][2]
        .as_str()
        .unwrap()
        .replace("sleep 15", &format!("sleep {ENVOY_SLEEP}"));
    envoy["lifecycle"]["preStop"]["exec"]["command"][2] = json!(script);
    let input = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(input.path(), serde_json::to_string(&deployment).unwrap()).unwrap();
    let out = run(crate::util::hooklog()
        .args(["inject", "--offline", "--image", &hooklog])
        .arg(input.path()));
    assert!(out.status.success(), "inject: {}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("log-forwarder: its `tail -F`"),
        "{}",
        text(&out.stderr)
    );
    let injected = yaml_documents(&text(&out.stdout)).remove(0);
    let name = format!("tail-workaround-{}", std::process::id());
    let pod = Pod::create(
        &tier,
        pod_from_deployment(&tier, &injected, &name, &hooklog),
    );
    pod.wait_running(&["hooklog", "api-server", "envoy"]);
    assert_ready(&pod);
    let (records, _) = delete_and_wait(&pod);
    let summary = records.last().unwrap();
    assert_eq!(summary["counts"]["ok"], 2, "{summary}");
    let from_file: Vec<&Value> = records
        .iter()
        .filter(|r| r["hooklog"]["input"] == "file:/shared-logs/prestop.log")
        .collect();
    for msg in ["prestop start", "prestop done", "draining"] {
        assert!(
            from_file.iter().any(|r| r["msg"] == msg),
            "{msg}: {from_file:#?}"
        );
    }
    for said in ["upload-heap-dump.sh", "curl"] {
        assert!(
            from_file
                .iter()
                .any(|r| r["message"].as_str().is_some_and(|m| m.contains(said))),
            "the appended output naming {said}: {records:#?}"
        );
    }
    assert_eq!(finished(&records, "envoy")["outcome"], "ok");
}

/// What a hostile peer tries on the hooks' binary (issue 37), each step's outcome a line on its
/// stdout (`refused: STEP` or `replaced: STEP`), then `attacks done`: rename the binary's folder
/// away and put its own in its place, rename the file, overwrite it, and swap in a copy by
/// rename. Its program, were it run as a hook's wrapper, would say nothing and exit 0: every
/// hook it took over would vanish from the records, or look fine.
const ATTACK: &str = r#"trap 'exit 0' TERM
evil=/hooklog/evil-$(id -u)
printf '#!/bin/sh\nexit 0\n' > "$evil" && chmod 755 "$evil"
try() { if "$@"; then echo "replaced: $*"; else echo "refused: $*"; fi; }
try mv /hooklog-bin /hooklog/bin-taken-$(id -u)
try mkdir -p /hooklog-bin/x
try mv /hooklog-bin/hooklog /hooklog-bin/hooklog.old
try cp "$evil" /hooklog-bin/hooklog
try sh -c "cp '$evil' /hooklog-bin/.new && mv /hooklog-bin/.new /hooklog-bin/hooklog"
echo 'attacks done'
while :; do sleep 1; done
"#;

/// Issue 37: the binary every wrapped container's preStop runs is on `hooklog-bin`, which only
/// `hooklog-install` writes; the others mount it `readOnly: true`. A peer of another uid (which
/// could rename the 0777 shared emptyDir's `bin/` before) and a root peer (which could overwrite
/// the file) each try every way to replace it and are refused, and the summary names every
/// hook's true outcome: envoy's 3 s sleep ok, checkout's upload failed with its exit 3 and its
/// output, the peers' own hooks ok.
#[test]
fn kubelet_a_peer_of_another_uid_or_root_cannot_replace_the_hooks_binary() {
    let Some(tier) = tier() else { return };
    let hooklog = release_image(&tier);
    let peer = |name: &str, uid: u32| {
        json!({
            "name": name,
            "image": "busybox:1.36",
            "command": ["sh", "-c", ATTACK],
            "securityContext": {"runAsUser": uid, "runAsGroup": uid, "runAsNonRoot": uid != 0},
            "lifecycle": {"preStop": {"exec": {"command": ["sh", "-c", "echo bye from $(id -u)"]}}},
        })
    };
    let peers = [peer("peer-uid", 4242), peer("peer-root", 0)];
    let pod = create_injected_incident_with(&tier, &hooklog, "classic", ENVOY_SLEEP, &peers);
    pod.wait_running(&["hooklog", "checkout", "envoy", "peer-uid", "peer-root"]);
    assert_eq!(pod.latest()["hooklog-install"].exit_code, Some(0));
    assert_ready(&pod);
    for name in ["peer-uid", "peer-root"] {
        assert!(
            crate::util::wait_until(START_TIMEOUT, || pod
                .log_lines(name, "stdout")
                .iter()
                .any(|l| l == "attacks done")),
            "{name} never finished its attacks: {:?} {:?}",
            pod.log_lines(name, "stdout"),
            pod.log_lines(name, "stderr")
        );
        let lines = pod.log_lines(name, "stdout");
        let tried: Vec<&String> = lines.iter().filter(|l| l.contains(": ")).collect();
        eprintln!(
            "{name}: {tried:#?}\nstderr {:#?}",
            pod.log_lines(name, "stderr")
        );
        assert_eq!(tried.len(), 5, "{name}: {lines:#?}");
        assert!(
            tried.iter().all(|l| l.starts_with("refused: ")),
            "{name} replaced the hooks' binary: {lines:#?}"
        );
    }

    let (records, _) = delete_and_wait(&pod);
    let summary = records.last().unwrap();
    assert_incident_outcomes(summary);
    for ok in ["peer-uid", "peer-root"] {
        assert_eq!(outcome_of(summary, ok), ("ok", Some(0)), "{ok}: {summary}");
    }
    assert_eq!(summary["counts"]["ok"], 3, "{summary}");
    assert_envoy_slept(&records, 3000..10_000);
    for (name, output) in [
        ("checkout", "upload failed: AccessDenied"),
        ("peer-uid", "bye from 4242"),
        ("peer-root", "bye from 0"),
    ] {
        assert!(
            said(&records, name, output),
            "{name}'s hook output {output:?}: {records:#?}"
        );
    }
}
