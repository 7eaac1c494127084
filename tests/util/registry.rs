//! A real registry for the tests: Debian's `docker-registry` on 127.0.0.1, over plain HTTP or
//! TLS (a CA made here) with htpasswd basic auth or Bearer tokens
//! (tests/support/token-server.py); tests/support/oci-push.py pushes the images; and
//! `hooklog check` run against it with its own cache.

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use serde_json::Value;

use super::{hooklog, in_ci, wait_until};

/// Starting the registry: it listens in well under a second.
pub const START_TIMEOUT: Duration = Duration::from_secs(30);
/// One `hooklog check` against the local registry.
pub const CHECK_TIMEOUT: Duration = Duration::from_secs(120);
pub const USER: &str = "ci";
pub const PASSWORD: &str = "s3cret";

/// The tools the tier needs, or `false` (after a loud message) when one is missing outside CI.
pub fn tools_present() -> bool {
    let missing: Vec<&str> = ["docker-registry", "htpasswd", "openssl", "zstd", "python3"]
        .into_iter()
        .filter(|t| {
            !Command::new("sh")
                .args(["-c", &format!("command -v {t}")])
                .stdout(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        })
        .collect();
    if missing.is_empty() {
        return true;
    }
    let msg = format!(
        "registry tests need {} (apt-get install docker-registry apache2-utils openssl zstd; scripts/test.sh installs them)",
        missing.join(", ")
    );
    assert!(!in_ci(), "{msg}");
    eprintln!("\n!!!!! SKIPPED: {msg}. In CI this is a failure.\n");
    false
}

/// Reads `WORD PORT` lines until one names the port (a child that listens on port 0 says which).
pub fn reported_port(out: impl std::io::Read, word: &str) -> u16 {
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(out));
    let line = lines
        .next()
        .and_then(Result::ok)
        .unwrap_or_else(|| panic!("no {word:?} line"));
    line.strip_prefix(word)
        .and_then(|p| p.trim().parse().ok())
        .unwrap_or_else(|| panic!("not {word:?} PORT: {line:?}"))
}

pub fn run_ok(cmd: &mut Command) {
    let out = cmd.output().expect("spawn");
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A CA and a server certificate for 127.0.0.1 signed by it.
pub struct Tls {
    pub(crate) ca: PathBuf,
    pub(crate) cert: PathBuf,
    pub(crate) key: PathBuf,
}

/// A self-signed certificate named `cn` (valid two days, RSA 2048) and its key, by openssl.
fn self_signed(cn: &str, key: &Path, cert: &Path) {
    run_ok(
        Command::new("openssl")
            .args([
                "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
            ])
            .arg("-subj")
            .arg(format!("/CN={cn}"))
            .arg("-keyout")
            .arg(key)
            .arg("-out")
            .arg(cert),
    );
}

pub fn make_tls(dir: &Path) -> Tls {
    let p = |n: &str| dir.join(n);
    self_signed("hooklog test CA", &p("ca.key"), &p("ca.pem"));
    run_ok(
        Command::new("openssl")
            .args([
                "req",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-subj",
                "/CN=127.0.0.1",
            ])
            .arg("-keyout")
            .arg(p("server.key"))
            .arg("-out")
            .arg(p("server.csr")),
    );
    std::fs::write(
        p("ext.cnf"),
        "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n",
    )
    .unwrap();
    run_ok(
        Command::new("openssl")
            .args(["x509", "-req", "-days", "2", "-CAcreateserial"])
            .arg("-in")
            .arg(p("server.csr"))
            .arg("-CA")
            .arg(p("ca.pem"))
            .arg("-CAkey")
            .arg(p("ca.key"))
            .arg("-extfile")
            .arg(p("ext.cnf"))
            .arg("-out")
            .arg(p("server.pem")),
    );
    Tls {
        ca: p("ca.pem"),
        cert: p("server.pem"),
        key: p("server.key"),
    }
}

/// How a registry authenticates.
#[derive(Clone, Copy, PartialEq)]
pub enum Auth {
    None,
    /// htpasswd (bcrypt) basic auth.
    Basic,
    /// Bearer tokens from tests/support/token-server.py (anonymous: pull only).
    Token,
}

/// A running registry, killed on drop; its access log in `log`.
pub struct Registry {
    pub child: Child,
    /// The token server, for `Auth::Token`.
    pub token_server: Option<Child>,
    /// What the token server was asked: `anonymous|USER|denied SCOPE` lines.
    pub token_log: PathBuf,
    /// `127.0.0.1:PORT`, the port the registry reported.
    pub(crate) addr: String,
    pub log: PathBuf,
    pub ca: Option<PathBuf>,
    pub basic: bool,
    pub _dir: tempfile::TempDir,
}

impl Registry {
    pub(crate) fn start(tls: bool, auth: Auth) -> Registry {
        let basic = auth != Auth::None;
        let dir = tempfile::tempdir().unwrap();
        // Port 0: the registry says which port it took ("listening on 127.0.0.1:PORT"), so no
        // other process can take one found free between the finding and the binding.
        let mut config = format!(
            "version: 0.1\nlog:\n  level: info\n  accesslog:\n    disabled: false\nstorage:\n  filesystem:\n    rootdirectory: {}\nhttp:\n  addr: 127.0.0.1:0\n",
            dir.path().join("data").display()
        );
        let mut ca = None;
        if tls {
            let t = make_tls(dir.path());
            config.push_str(&format!(
                "  tls:\n    certificate: {}\n    key: {}\n",
                t.cert.display(),
                t.key.display()
            ));
            ca = Some(t.ca);
        }
        let token_log = dir.path().join("tokens.log");
        let mut token_server = None;
        if auth == Auth::Token {
            let (key, cert) = (dir.path().join("token.key"), dir.path().join("token.pem"));
            self_signed("hooklog test tokens", &key, &cert);
            let mut server = Command::new("python3")
                .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/token-server.py"))
                .arg("0")
                .args([&key, &cert])
                .args(["hooklog-test", "hooklog-test-issuer", USER, PASSWORD])
                .arg(&token_log)
                .stdout(Stdio::piped())
                .spawn()
                .expect("spawn token-server.py");
            let tport = reported_port(server.stdout.take().unwrap(), "listening ");
            token_server = Some(server);
            config.push_str(&format!(
                "auth:\n  token:\n    realm: http://127.0.0.1:{tport}/token\n    service: hooklog-test\n    issuer: hooklog-test-issuer\n    rootcertbundle: {}\n",
                cert.display()
            ));
        } else if basic {
            let out = Command::new("htpasswd")
                .args(["-Bbn", USER, PASSWORD])
                .output()
                .unwrap();
            assert!(out.status.success());
            let file = dir.path().join("htpasswd");
            std::fs::write(&file, &out.stdout).unwrap();
            config.push_str(&format!(
                "auth:\n  htpasswd:\n    realm: hooklog-test\n    path: {}\n",
                file.display()
            ));
        }
        let cfg = dir.path().join("config.yml");
        std::fs::write(&cfg, config).unwrap();
        let log = dir.path().join("registry.log");
        let err = dir.path().join("registry.err");
        let child = Command::new("docker-registry")
            .arg("serve")
            .arg(&cfg)
            .stdout(std::fs::File::create(&log).unwrap())
            .stderr(std::fs::File::create(&err).unwrap())
            .spawn()
            .expect("spawn docker-registry");
        let mut addr = String::new();
        let listening = wait_until(START_TIMEOUT, || {
            let text = std::fs::read_to_string(&err).unwrap_or_default();
            let found = text.split("msg=\"listening on ").nth(1);
            found
                .and_then(|rest| rest.split(['"', ',']).next())
                .map(|a| addr = a.to_string())
                .is_some()
        });
        assert!(
            listening,
            "docker-registry did not say where it listens: {}",
            std::fs::read_to_string(&err).unwrap_or_default()
        );
        let r = Registry {
            child,
            token_server,
            token_log,
            addr,
            log,
            ca,
            basic,
            _dir: dir,
        };
        assert!(
            wait_until(START_TIMEOUT, || TcpStream::connect(&r.addr).is_ok()),
            "docker-registry did not listen on {}",
            r.addr
        );
        r
    }

    pub fn url(&self) -> String {
        let scheme = if self.ca.is_some() { "https" } else { "http" };
        format!("{scheme}://{}", self.addr)
    }

    /// Pushes the test images; returns their manifest digests by `name:tag`.
    pub(crate) fn push(&self) -> Value {
        let mut cmd = Command::new("python3");
        cmd.arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/oci-push.py"))
            .arg(self.url());
        if self.basic {
            cmd.args(["--user", USER, "--password", PASSWORD]);
        }
        if let Some(ca) = &self.ca {
            cmd.arg("--cafile").arg(ca);
        }
        let out = cmd.output().expect("run oci-push.py");
        assert!(
            out.status.success(),
            "oci-push.py: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).expect("oci-push.py prints JSON")
    }

    /// Blob GETs the registry served (its access log, one line per request; the stdout and
    /// stderr logs both, as distribution writes the access log to stdout).
    pub fn blob_gets(&self) -> usize {
        self.requests()
            .iter()
            .filter(|l| l.contains("\"GET /v2/") && l.contains("/blobs/sha256:"))
            .count()
    }

    pub fn requests(&self) -> Vec<String> {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        text.lines()
            .filter(|l| l.contains("\"GET /v2/") || l.contains("\"HEAD /v2/"))
            .map(str::to_string)
            .collect()
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        // Already gone is fine: nothing to clean up then.
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(t) = &mut self.token_server {
            let _ = t.kill();
            let _ = t.wait();
        }
    }
}

/// `hooklog check` as a user runs it: online, with its own cache folder.
pub fn check(cache: &Path, args: &[&str], env: &[(&str, &str)]) -> (Option<i32>, Value, String) {
    let mut all = vec!["check", "--format", "json"];
    all.extend(args);
    let (code, stdout, stderr) = run(cache, &all, env);
    let doc = serde_json::from_slice(&stdout)
        .unwrap_or_else(|e| panic!("{e}: {}\n{stderr}", String::from_utf8_lossy(&stdout)));
    (code, doc, stderr)
}

/// `hooklog ARGS` as a user runs it (online, with its own cache folder): its exit code, stdout
/// and stderr.
pub fn run(cache: &Path, args: &[&str], env: &[(&str, &str)]) -> (Option<i32>, Vec<u8>, String) {
    let mut cmd = hooklog();
    cmd.env_remove("HOOKLOG_OFFLINE")
        .env("HOOKLOG_CACHE_DIR", cache)
        .env("HOME", cache)
        .env_remove("DOCKER_CONFIG")
        .env_remove("REGISTRY_AUTH_FILE")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let child = cmd.spawn().expect("spawn hooklog");
    let pid = child.id();
    let waiter = std::thread::spawn(move || child.wait_with_output());
    assert!(
        wait_until(CHECK_TIMEOUT, || waiter.is_finished()),
        "hooklog {args:?} (pid {pid}) did not end within {CHECK_TIMEOUT:?}"
    );
    let out: Output = waiter.join().unwrap().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    (out.status.code(), out.stdout, stderr)
}

/// One Deployment per `(name, image, preStop argv, arch)`.
pub fn manifest(dir: &Path, pods: &[(&str, String, &[&str], Option<&str>)]) -> PathBuf {
    let documents = pods.iter().map(|(name, image, argv, arch)| {
        let selector = arch
            .map(|a| format!("      nodeSelector:\n        kubernetes.io/arch: {a}\n"))
            .unwrap_or_default();
        format!(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {name}\nspec:\n  selector:\n    matchLabels: {{app: {name}}}\n  template:\n    metadata:\n      labels: {{app: {name}}}\n    spec:\n{selector}      containers:\n      - name: {name}\n        image: {image}\n        lifecycle:\n          preStop:\n            exec:\n              command: {}\n",
            serde_json::to_string(argv).unwrap()
        )
    });
    write_documents(dir.join("deploy.yaml"), documents)
}

/// Writes `documents` (YAML, each ending in a line break) to `path` as one file: `path`.
pub fn write_documents(path: PathBuf, documents: impl IntoIterator<Item = String>) -> PathBuf {
    let text: String = documents.into_iter().map(|d| format!("---\n{d}")).collect();
    std::fs::write(&path, text).unwrap();
    path
}

impl Registry {
    /// The image `name` (`repository:tag`) in this registry.
    pub fn image(&self, name: &str) -> String {
        format!("{}/{name}", self.addr)
    }
}
