//! `hooklog webhook` as a child process for the tests: a CA and serving certificate made here,
//! the webhook started on them, AdmissionReviews sent over HTTPS (one request a connection, or a
//! kept-alive connection), and what `hooklog inject` makes of the same pod to compare with.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine;
use serde_json::{Value, json};

use super::{hooklog, output_with_input, wait_until};

pub const IMAGE: &str = "registry.example/hooklog:test";
const STARTUP: Duration = Duration::from_secs(20);

/// A CA and a serving certificate for 127.0.0.1 it signed, as PEM files in `dir`.
pub struct Certs {
    pub ca_pem: String,
    pub cert_file: PathBuf,
    pub key_file: PathBuf,
}

impl Certs {
    /// A new CA (named `cn`) and a serving certificate for `127.0.0.1` and `localhost`, written
    /// to `dir/tls.crt` and `dir/tls.key` (replaced as a whole, as the kubelet swaps a Secret's
    /// files).
    pub fn make(dir: &Path, cn: &str) -> Certs {
        use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};
        let ca_key = KeyPair::generate().unwrap();
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params.distinguished_name.push(DnType::CommonName, cn);
        let ca = ca_params.self_signed(&ca_key).unwrap();
        let key = KeyPair::generate().unwrap();
        let mut params =
            CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()]).unwrap();
        params
            .distinguished_name
            .push(DnType::CommonName, "hooklog-webhook");
        let cert = params.signed_by(&key, &ca, &ca_key).unwrap();
        let cert_file = dir.join("tls.crt");
        let key_file = dir.join("tls.key");
        for (path, text) in [(&cert_file, cert.pem()), (&key_file, key.serialize_pem())] {
            let tmp = path.with_extension("tmp");
            std::fs::write(&tmp, text).unwrap();
            std::fs::rename(&tmp, path).unwrap();
        }
        Certs {
            ca_pem: ca.pem(),
            cert_file,
            key_file,
        }
    }
}

/// A running `hooklog webhook`, its stderr collected, killed on drop.
pub struct Webhook {
    pub child: Child,
    pub port: u16,
    pub stderr: Arc<Mutex<Vec<String>>>,
}

impl Webhook {
    /// Starts `hooklog webhook --listen 127.0.0.1:0 ARGS` and waits until it serves.
    pub fn start(certs: &Certs, args: &[&str]) -> Webhook {
        Self::start_with(certs, args, &[])
    }

    /// [`Webhook::start`] with more environment variables.
    pub fn start_with(certs: &Certs, args: &[&str], env: &[(&str, &str)]) -> Webhook {
        let mut cmd = hooklog();
        cmd.envs(env.iter().copied());
        cmd.args(["webhook", "--listen", "127.0.0.1:0", "--image", IMAGE])
            .arg("--tls-cert-file")
            .arg(&certs.cert_file)
            .arg("--tls-key-file")
            .arg(&certs.key_file)
            .args(args)
            .env("RUST_LOG", "info");
        Self::spawn(cmd)
    }

    pub fn spawn(mut cmd: Command) -> Webhook {
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn hooklog webhook");
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let lines = stderr.clone();
        let pipe = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                lines.lock().unwrap().push(line);
            }
        });
        let mut port = None;
        let started = wait_until(STARTUP, || {
            port = stderr.lock().unwrap().iter().find_map(|l| {
                let at = l.find("webhook serving")?;
                let addr = l[at..].split("listen=").nth(1)?.split(' ').next()?;
                addr.rsplit(':').next()?.parse::<u16>().ok()
            });
            port.is_some()
        });
        assert!(
            started,
            "webhook did not start: {:#?}",
            stderr.lock().unwrap()
        );
        Webhook {
            child,
            port: port.unwrap(),
            stderr,
        }
    }

    pub fn log(&self) -> Vec<String> {
        self.stderr.lock().unwrap().clone()
    }

    /// POSTs a review to `path` and returns the AdmissionReview answered.
    pub fn review(&self, ca_pem: &str, path: &str, body: &[u8]) -> Value {
        let (status, answer) = https(self.port, ca_pem, "POST", path, body).expect("an answer");
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&answer));
        serde_json::from_slice(&answer).expect("an AdmissionReview")
    }
}

impl Drop for Webhook {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A TLS client configuration that trusts only the certificates in `ca_pem`.
pub fn tls_config(ca_pem: &str) -> Result<Arc<rustls::ClientConfig>, String> {
    use rustls_pki_types::CertificateDer;
    use rustls_pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots
            .add(c.map_err(|e| e.to_string())?)
            .map_err(|e| e.to_string())?;
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| e.to_string())?
    .with_root_certificates(roots)
    .with_no_client_auth();
    Ok(Arc::new(config))
}

/// A TLS client session for `127.0.0.1` that trusts only the certificates in `ca_pem`.
pub fn client_connection(ca_pem: &str) -> Result<rustls::ClientConnection, String> {
    let name = rustls_pki_types::ServerName::try_from("127.0.0.1").map_err(|e| e.to_string())?;
    rustls::ClientConnection::new(tls_config(ca_pem)?, name).map_err(|e| e.to_string())
}

/// One HTTPS request to 127.0.0.1:`port`, verified against `ca_pem`: `(status, body)`.
pub fn https(
    port: u16,
    ca_pem: &str,
    method: &str,
    path: &str,
    body: &[u8],
) -> Result<(u16, Vec<u8>), String> {
    request(port, ca_pem, method, path, &[], body)
}

/// [`https`] with more headers.
pub fn request(
    port: u16,
    ca_pem: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Result<(u16, Vec<u8>), String> {
    let conn = client_connection(ca_pem)?;
    let tcp = TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
    tcp.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut tls = rustls::StreamOwned::new(conn, tcp);
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\nAccept: application/json\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    tls.write_all(head.as_bytes()).map_err(|e| e.to_string())?;
    // A server that stops reading (a body over its bound) may close before all is written.
    let _ = tls.write_all(body);
    let _ = tls.flush();
    let mut answer = Vec::new();
    if let Err(e) = tls.read_to_end(&mut answer) {
        if answer.is_empty() {
            return Err(e.to_string());
        }
    }
    let split = answer
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| format!("no HTTP answer: {}", String::from_utf8_lossy(&answer)))?;
    let head = String::from_utf8_lossy(&answer[..split]).to_string();
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or("no status")?;
    let body = answer[split + 4..].to_vec();
    if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        return Ok((status, dechunk(&body)?));
    }
    Ok((status, body))
}

/// An HTTP/1.1 chunked body, joined (the API server sends large answers so).
fn dechunk(mut rest: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    loop {
        let eol = rest
            .windows(2)
            .position(|w| w == b"\r\n")
            .ok_or("a chunk without its size line")?;
        let size_text = String::from_utf8_lossy(&rest[..eol]);
        let size = usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16)
            .map_err(|e| format!("chunk size {size_text:?}: {e}"))?;
        rest = &rest[eol + 2..];
        if size == 0 {
            return Ok(out);
        }
        if rest.len() < size + 2 {
            return Err("a chunk cut short".into());
        }
        out.extend_from_slice(&rest[..size]);
        rest = &rest[size + 2..];
    }
}

/// An AdmissionReview as the API server sends it for a pod CREATE (admission.k8s.io/v1; the
/// fields 1.20 and 1.29 both send).
pub fn pod_review(uid: &str, namespace: &str, pod: &Value) -> Vec<u8> {
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "requestKind": {"group": "", "version": "v1", "kind": "Pod"},
            "requestResource": {"group": "", "version": "v1", "resource": "pods"},
            "namespace": namespace,
            "operation": "CREATE",
            "userInfo": {"username": "system:serviceaccount:kube-system:replicaset-controller", "groups": ["system:serviceaccounts", "system:authenticated"]},
            "object": pod,
            "oldObject": null,
            "dryRun": false,
            "options": {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"}
        }
    })
    .to_string()
    .into_bytes()
}

/// A pod as a ReplicaSet creates it (defaults filled in by the API server before admission).
pub fn web_pod(annotations: Value) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "generateName": "web-5d9c7b8f6d-",
            "namespace": "shop",
            "labels": {"app": "web", "pod-template-hash": "5d9c7b8f6d"},
            "annotations": annotations,
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-5d9c7b8f6d", "uid": "6a3f2b8e-0000-4000-8000-000000000001", "controller": true, "blockOwnerDeletion": true}]
        },
        "spec": {
            "containers": [{
                "name": "app",
                "image": "nginx:1.25",
                "ports": [{"containerPort": 80, "protocol": "TCP"}],
                "lifecycle": {"preStop": {"exec": {"command": ["sh", "-c", "sleep 5; nginx -s quit"]}}},
                "resources": {},
                "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "File",
                "imagePullPolicy": "IfNotPresent"
            }],
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst",
            "securityContext": {},
            "schedulerName": "default-scheduler",
            "enableServiceLinks": true
        }
    })
}

/// What `hooklog inject ARGS` makes of `pod`, read back as JSON.
pub fn injected(pod: &Value, args: &[&str]) -> Value {
    let out = output_with_input(
        hooklog()
            .args(["inject", "--image", IMAGE])
            .args(args)
            .arg("-"),
        serde_json::to_string_pretty(pod).unwrap().as_bytes(),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let source = hooklog::manifest::load::parse("inject", text).unwrap();
    source.documents[0].value.clone()
}

/// `object` with the answer's JSONPatch applied (unchanged when there is none).
pub fn patched(object: &Value, answer: &Value) -> Value {
    let mut out = object.clone();
    if let Some(b64) = answer["response"]["patch"].as_str() {
        assert_eq!(answer["response"]["patchType"], "JSONPatch");
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(b64)
            .unwrap();
        let p: json_patch::Patch = serde_json::from_slice(&bytes).unwrap();
        json_patch::patch(&mut out, &p).unwrap();
    }
    out
}

/// Facts about a pod the webhook patched that do not come from inject's core (the tests'
/// other oracle): it validates with `kubernetes-validate --strict` for every version from 1.29;
/// every exec preStop of `original` is wrapped as `/hooklog-bin/hooklog hook --container NAME ...
/// -- COMMAND` around its own command; the shared, binary and podinfo volumes are there, every
/// mount names a volume of the pod, and each wrapped container mounts the shared one at /hooklog
/// and the binary's read-only at /hooklog-bin; the install init container, the binary's volume's
/// only writer, fills it, and a `hooklog run` sidecar (a container or, `native`, an init container
/// that restarts `Always`) reads the shared one; every original container keeps its image.
pub fn assert_structurally_injected(original: &Value, got: &Value, native: bool) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("pod.yaml");
    // The API server names a `generateName` pod before it stores it; the validator needs a name.
    let mut named_pod = got.clone();
    if named_pod["metadata"]["name"].is_null() {
        let prefix = named_pod["metadata"]["generateName"]
            .as_str()
            .unwrap_or("pod-");
        named_pod["metadata"]["name"] = json!(format!("{prefix}x7k2q"));
    }
    std::fs::write(&file, serde_json::to_string_pretty(&named_pod).unwrap()).unwrap();
    super::manifests::validate_strictly(&[file]);
    let spec = &got["spec"];
    let list = |v: &Value, f: &str| v[f].as_array().cloned().unwrap_or_default();
    let all: Vec<Value> = list(spec, "initContainers")
        .into_iter()
        .chain(list(spec, "containers"))
        .collect();
    let named = |n: &str| all.iter().find(|c| c["name"] == n).cloned();
    let volumes: Vec<String> = list(spec, "volumes")
        .iter()
        .filter_map(|v| v["name"].as_str().map(String::from))
        .collect();
    for v in ["hooklog-shared", "hooklog-bin", "hooklog-podinfo"] {
        assert!(volumes.iter().any(|n| n == v), "no volume {v}: {got:#}");
    }
    for c in &all {
        for m in list(c, "volumeMounts") {
            let n = m["name"].as_str().unwrap_or_default();
            assert!(
                volumes.iter().any(|v| v == n),
                "{} mounts {n}, no such volume",
                c["name"]
            );
        }
    }
    let mounts_shared = |c: &Value| {
        list(c, "volumeMounts")
            .iter()
            .any(|m| m["name"] == "hooklog-shared" && m["mountPath"] == "/hooklog")
    };
    // How `c` mounts the binary's volume: `Some(read-only)`, or None.
    let mounts_bin = |c: &Value| {
        list(c, "volumeMounts")
            .iter()
            .find(|m| m["name"] == "hooklog-bin" && m["mountPath"] == "/hooklog-bin")
            .map(|m| m["readOnly"] == true)
    };
    for c in &all {
        let writable = list(c, "volumeMounts")
            .iter()
            .any(|m| m["name"] == "hooklog-bin" && m["readOnly"] != true);
        assert_eq!(
            writable,
            c["name"] == "hooklog-install",
            "only the installer mounts the binary's volume writable: {c:#}"
        );
    }
    for c in list(&original["spec"], "containers") {
        let name = c["name"].as_str().unwrap();
        let now = named(name).unwrap_or_else(|| panic!("container {name} is gone: {got:#}"));
        assert_eq!(now["image"], c["image"], "{name}'s image");
        let Some(before) = c["lifecycle"]["preStop"]["exec"]["command"].as_array() else {
            continue;
        };
        let after = now["lifecycle"]["preStop"]["exec"]["command"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let words: Vec<&str> = after.iter().filter_map(Value::as_str).collect();
        assert_eq!(
            words.get(..2),
            Some(&["/hooklog-bin/hooklog", "hook"][..]),
            "{name}: {words:?}"
        );
        assert!(
            words.windows(2).any(|w| w == ["--container", name]),
            "{name}'s hook does not name it: {words:?}"
        );
        let dashes = words.iter().position(|w| *w == "--").expect("a `--`");
        assert_eq!(
            &after[dashes + 1..],
            &before[..],
            "{name}'s own command, after `--`"
        );
        assert!(
            mounts_shared(&now),
            "{name} calls hooklog but does not mount it: {now:#}"
        );
        assert_eq!(
            mounts_bin(&now),
            Some(true),
            "{name} calls hooklog but does not mount its binary read-only: {now:#}"
        );
    }
    let install = named("hooklog-install").expect("the install init container");
    assert!(
        list(spec, "initContainers")
            .iter()
            .any(|c| c["name"] == "hooklog-install")
    );
    assert_eq!(mounts_bin(&install), Some(false), "{install:#}");
    assert_eq!(
        list(&install, "args"),
        [json!("install"), json!("/hooklog-bin")],
        "{install:#}"
    );
    let sidecar = named("hooklog").expect("the hooklog sidecar");
    let (command, args) = (list(&sidecar, "command"), list(&sidecar, "args"));
    let argv: Vec<&str> = command
        .iter()
        .chain(args.iter())
        .filter_map(Value::as_str)
        .collect();
    assert!(argv.contains(&"run"), "the sidecar runs {argv:?}");
    assert!(mounts_shared(&sidecar), "{sidecar:#}");
    let in_init = list(spec, "initContainers")
        .iter()
        .any(|c| c["name"] == "hooklog");
    assert_eq!(
        in_init, native,
        "native: {native}, the sidecar among init containers: {in_init}"
    );
    if native {
        assert_eq!(sidecar["restartPolicy"], "Always");
    }
}

/// A TLS connection kept open across requests, as the API server keeps one to a webhook.
pub struct KeepAlive {
    tls: rustls::StreamOwned<rustls::ClientConnection, std::net::TcpStream>,
}

impl KeepAlive {
    pub fn open(port: u16, ca_pem: &str) -> KeepAlive {
        let conn = client_connection(ca_pem).unwrap();
        let tcp = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        tcp.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        KeepAlive {
            tls: rustls::StreamOwned::new(conn, tcp),
        }
    }

    /// POSTs `body` to `path`: the status, the body, and whether the server keeps the
    /// connection.
    pub fn post(&mut self, path: &str, body: &[u8]) -> std::io::Result<(u16, Vec<u8>, bool)> {
        let head = format!(
            "POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        self.tls.write_all(head.as_bytes())?;
        self.tls.write_all(body)?;
        self.tls.flush()?;
        let mut reader = BufReader::new(&mut self.tls);
        let mut status_line = String::new();
        reader.read_line(&mut status_line)?;
        let status = status_line
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| std::io::Error::other(format!("no status: {status_line:?}")))?;
        let (mut length, mut keep) = (0usize, true);
        loop {
            let mut line = String::new();
            reader.read_line(&mut line)?;
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            let (k, v) = line.split_once(':').unwrap_or((line, ""));
            match k.to_ascii_lowercase().as_str() {
                "content-length" => length = v.trim().parse().unwrap_or(0),
                "connection" => keep &= !v.trim().eq_ignore_ascii_case("close"),
                _ => {}
            }
        }
        let mut out = vec![0; length];
        reader.read_exact(&mut out)?;
        Ok((status, out, keep))
    }
}

impl Webhook {
    /// Whether a line of the webhook's log holds every one of `words`.
    pub fn logged(&self, words: &[&str]) -> bool {
        self.log()
            .iter()
            .any(|l| words.iter().all(|w| l.contains(w)))
    }

    /// Fails the test, saying `why` with the webhook's log, unless it [`Webhook::logged`] `words`.
    pub fn assert_logged(&self, words: &[&str], why: &str) {
        assert!(self.logged(words), "{why}: {:#?}", self.log());
    }
}

/// A webhook serving with `args` on a CA and serving certificate made for it: the folder that
/// holds them (keep it while the webhook runs), the certificates and the webhook.
pub fn serving(args: &[&str]) -> (tempfile::TempDir, Certs, Webhook) {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let certs = Certs::make(dir.path(), "hooklog test CA");
    let w = Webhook::start(&certs, args);
    (dir, certs, w)
}
