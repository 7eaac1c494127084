//! `hooklog check` against a registry that misbehaves on purpose (tests/support/
//! hostile-registry.py, on 127.0.0.1): what Debian's docker-registry cannot do (issue 26).
//! Credentials never reach plain HTTP, a pin of any digest algorithm is verified, and a
//! registry that trickles ends at `--image-timeout` with the layer named, and a layer whose bytes
//! are not its digest's is refused and never cached (issue 36).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::util::registry::{Tls, make_tls, manifest, run};

/// A running hostile registry, killed on drop.
struct Hostile {
    child: Child,
    port: u16,
    state: PathBuf,
}

impl Drop for Hostile {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Hostile {
    fn start(mode: &str, dir: &Path, tls: Option<(&Path, &Path)>) -> Hostile {
        let script =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/hostile-registry.py");
        let state = dir.join(format!("state-{mode}"));
        std::fs::create_dir_all(&state).unwrap();
        let mut cmd = Command::new("python3");
        cmd.arg(script).arg(mode).arg(&state);
        if let Some((cert, key)) = tls {
            cmd.arg(cert).arg(key);
        }
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line
            .split_whitespace()
            .nth(1)
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("no ready line: {line:?}"));
        Hostile { child, port, state }
    }

    /// Each Authorization header the plain-HTTP listener received (`-` for none).
    fn plain_auth(&self) -> Vec<String> {
        std::fs::read_to_string(self.state.join("plain-auth"))
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    }
}

fn auth_file(dir: &Path, port: u16) -> PathBuf {
    let p = dir.join("auth.json");
    let auths =
        serde_json::json!({"auths": {format!("127.0.0.1:{port}"): {"auth": "dXNlcjpzZWNyZXQ="}}});
    std::fs::write(&p, auths.to_string()).unwrap();
    p
}

/// `hooklog check --format json ARGS` of a pod running `image` from `h`, with its own cache in
/// `dir`: over TLS with `tls`'s CA and a Basic credential for `h`, else as an insecure registry.
/// Its stderr.
fn check_image(dir: &Path, h: &Hostile, image: String, tls: Option<&Tls>, args: &[&str]) -> String {
    let m = manifest(dir, &[("web", image, &["sleep", "5"], None)]);
    let mut all = vec!["check", "--format", "json"];
    let mut env = Vec::new();
    let insecure = format!("127.0.0.1:{}", h.port);
    let auth;
    match tls {
        Some(tls) => {
            auth = auth_file(dir, h.port);
            env.push(("SSL_CERT_FILE", tls.ca.to_str().unwrap()));
            env.push(("REGISTRY_AUTH_FILE", auth.to_str().unwrap()));
        }
        None => all.extend(["--insecure-registry", &insecure]),
    }
    all.extend(args);
    all.push(m.to_str().unwrap());
    run(&dir.join("cache"), &all, &env).2
}

/// An https registry misbehaving as `mode`, read by `check` with its CA and a Basic credential
/// for it: each Authorization header its plain-HTTP listener received, and check's stderr.
fn plain_auth_seen_by(mode: &str) -> (Vec<String>, String) {
    let dir = tempfile::tempdir().unwrap();
    let tls = make_tls(dir.path());
    let h = Hostile::start(mode, dir.path(), Some((&tls.cert, &tls.key)));
    let image = format!("127.0.0.1:{}/app:1", h.port);
    let stderr = check_image(dir.path(), &h, image, Some(&tls), &[]);
    (h.plain_auth(), stderr)
}

/// Issue 26: an https registry that answered a blob with a 307 to `http://` on the same host
/// received the Basic password in clear text. The blob is still read, without it.
#[test]
fn a_redirect_to_plain_http_gets_no_credentials() {
    let (seen, stderr) = plain_auth_seen_by("downgrade");
    assert!(!seen.is_empty(), "the redirect was not followed: {stderr}");
    assert!(seen.iter().all(|a| a == "-"), "plain HTTP got {seen:?}");
    assert!(!stderr.contains("cannot read image"), "{stderr}");
}

/// Issue 26: a Bearer realm on `http://` of an https registry received the Basic password.
#[test]
fn a_token_realm_on_plain_http_gets_no_basic_credentials() {
    let (seen, stderr) = plain_auth_seen_by("realm");
    assert!(!seen.is_empty(), "no token asked for: {stderr}");
    assert!(
        seen.iter().all(|a| !a.starts_with("Basic")),
        "the realm got {seen:?}"
    );
}

/// Issue 26: a `name@sha512:...` pin was not verified; content of another digest passed.
#[test]
fn a_sha512_pin_is_verified() {
    let dir = tempfile::tempdir().unwrap();
    let h = Hostile::start("sha512", dir.path(), None);
    let pin = std::fs::read_to_string(h.state.join("manifest-sha512")).unwrap();
    let image = format!("127.0.0.1:{}/app@{pin}", h.port);
    let stderr = check_image(dir.path(), &h, image, None, &[]);
    assert!(
        stderr.contains("cannot read image") && stderr.contains("sha512:"),
        "{stderr}"
    );
}

/// Issue 26: a registry sending a byte every few seconds held a check about 20 minutes a layer.
/// `--image-timeout` ends the whole lookup and names the layer it was reading.
#[test]
fn a_trickling_registry_ends_at_the_image_timeout_naming_the_layer() {
    let dir = tempfile::tempdir().unwrap();
    let h = Hostile::start("trickle", dir.path(), None);
    let image = format!("127.0.0.1:{}/app:1", h.port);
    let started = Instant::now();
    let stderr = check_image(dir.path(), &h, image, None, &["--image-timeout", "3s"]);
    let took = started.elapsed();
    assert!(took < Duration::from_secs(20), "{took:?}: {stderr}");
    assert!(
        stderr.contains("--image-timeout 3s")
            && stderr.contains("was reading layer sha256:")
            && stderr.contains("(1 of 1)"),
        "{stderr}"
    );
}

/// Issue 36: a layer whose bytes are not its digest's (a registry or a proxy between that lies)
/// is refused, in every compression a layer comes in: `check` names the layer, trusts nothing
/// read from it (no finding from the tampered listing), and caches nothing of it. Skipping the
/// digest check (`src.verifier.finish()?` as `let _ =`) fails this test.
#[test]
fn a_layer_that_lies_about_its_digest_is_refused_and_not_cached() {
    for compression in ["gzip", "zstd", "none"] {
        let dir = tempfile::tempdir().unwrap();
        let h = Hostile::start(&format!("tampered-{compression}"), dir.path(), None);
        let digest = std::fs::read_to_string(h.state.join("layer-digest")).unwrap();
        let image = format!("127.0.0.1:{}/app:1", h.port);
        let cache = dir.path().join("cache");
        let stderr = check_image(dir.path(), &h, image, None, &[]);
        assert!(
            stderr.contains("cannot read image") && stderr.contains(&format!("layer {digest}")),
            "{compression}: {stderr}"
        );
        let hex = digest.trim_start_matches("sha256:");
        let cached: Vec<String> = walk(&cache)
            .into_iter()
            .filter(|p| p.contains(hex))
            .collect();
        assert!(cached.is_empty(), "{compression}: cached {cached:?}");
    }
}

/// Every file under `dir`, as text paths.
fn walk(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p.display().to_string());
        }
    }
    out
}
