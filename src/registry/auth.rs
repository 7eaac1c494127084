//! (the control plane) Registry credentials, found where the container tools look: `$REGISTRY_AUTH_FILE` (podman,
//! skopeo), `$DOCKER_CONFIG/config.json`, `~/.docker/config.json`. An `auths` entry gives basic
//! credentials (ECR's token works as basic); `credHelpers` / `credsStore` name a
//! `docker-credential-NAME` program that is asked as docker asks it (`get`, the server on stdin).

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::Deserialize;

/// How long a credential helper may take (ecr-login calls AWS STS: a few hundred ms; docker
/// itself sets no bound). A helper that takes longer is killed and the image read anonymously.
pub const HELPER_TIMEOUT: Duration = Duration::from_secs(20);

/// Docker Hub's key in `auths`, as `docker login` writes it.
const DOCKER_HUB_KEY: &str = "https://index.docker.io/v1/";

/// Credentials for one registry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Credentials {
    Anonymous,
    Basic {
        username: String,
        password: String,
    },
    /// An identity token (`identitytoken`, a helper's `<token>` user): an OAuth2 refresh token.
    Token(String),
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct AuthFile {
    #[serde(default)]
    auths: std::collections::BTreeMap<String, AuthEntry>,
    #[serde(default)]
    cred_helpers: std::collections::BTreeMap<String, String>,
    #[serde(default)]
    creds_store: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct AuthEntry {
    #[serde(default)]
    auth: Option<String>,
    #[serde(default)]
    username: Option<String>,
    #[serde(default)]
    password: Option<String>,
    #[serde(default, rename = "identitytoken")]
    identity_token: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
struct HelperReply {
    username: String,
    secret: String,
}

/// The auth files to read, first match wins: `$REGISTRY_AUTH_FILE`, then
/// `$DOCKER_CONFIG/config.json` or `~/.docker/config.json`.
fn auth_files() -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Some(f) = std::env::var_os("REGISTRY_AUTH_FILE") {
        out.push(PathBuf::from(f));
    }
    match std::env::var_os("DOCKER_CONFIG") {
        Some(d) => out.push(PathBuf::from(d).join("config.json")),
        None => {
            if let Some(home) = std::env::var_os("HOME") {
                out.push(PathBuf::from(home).join(".docker/config.json"));
            }
        }
    }
    out
}

/// The keys an `auths` map may use for `registry` (`host[:port]`): the host itself, with a
/// scheme, with `/v1/` or `/v2/` (old `docker login`), and Docker Hub's historic key.
fn keys_for(registry: &str) -> Vec<String> {
    let mut keys = vec![
        registry.to_string(),
        format!("https://{registry}"),
        format!("http://{registry}"),
        format!("https://{registry}/v1/"),
        format!("https://{registry}/v2/"),
    ];
    if matches!(
        registry,
        "docker.io" | "index.docker.io" | "registry-1.docker.io"
    ) {
        keys.insert(0, DOCKER_HUB_KEY.to_string());
        keys.push("docker.io".to_string());
    }
    keys
}

/// Credentials for `registry`, or why they could not be had (a broken file, a failing helper).
/// No entry anywhere is anonymous access.
pub fn credentials(registry: &str) -> Result<Credentials, String> {
    for path in auth_files() {
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(format!("{}: {e}", path.display())),
        };
        let file: AuthFile = serde_json::from_str(&text)
            .map_err(|e| format!("{}: not an auth file: {e}", path.display()))?;
        let keys = keys_for(registry);
        if let Some(helper) = keys.iter().find_map(|k| file.cred_helpers.get(k)) {
            return helper_get(helper, registry);
        }
        if let Some(entry) = keys.iter().find_map(|k| file.auths.get(k)) {
            return from_entry(entry).map_err(|e| format!("{}: {registry}: {e}", path.display()));
        }
        if let Some(store) = &file.creds_store {
            return helper_get(store, registry);
        }
    }
    Ok(Credentials::Anonymous)
}

fn from_entry(e: &AuthEntry) -> Result<Credentials, String> {
    if let Some(t) = e.identity_token.as_ref().filter(|t| !t.is_empty()) {
        return Ok(Credentials::Token(t.clone()));
    }
    if let (Some(u), Some(p)) = (&e.username, &e.password) {
        return Ok(Credentials::Basic {
            username: u.clone(),
            password: p.clone(),
        });
    }
    let Some(auth) = &e.auth else {
        return Ok(Credentials::Anonymous);
    };
    let raw = decode_base64(auth.trim()).ok_or("`auth` is not base64")?;
    let text = String::from_utf8(raw).map_err(|_| "`auth` is not UTF-8")?;
    let (u, p) = text.split_once(':').ok_or("`auth` is not USER:PASSWORD")?;
    Ok(Credentials::Basic {
        username: u.to_string(),
        password: p.to_string(),
    })
}

/// Standard base64 (RFC 4648 section 4), padding optional.
fn decode_base64(s: &str) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    let mut acc: u32 = 0;
    let mut bits = 0;
    for c in s.bytes().filter(|c| *c != b'=') {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    Some(out)
}

/// Runs `docker-credential-NAME get` with the server on stdin, as docker does.
fn helper_get(name: &str, registry: &str) -> Result<Credentials, String> {
    let program = format!("docker-credential-{name}");
    let mut child = Command::new(&program)
        .arg("get")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("{program}: {e}"))?;
    if let Some(mut stdin) = child.stdin.take() {
        // A helper that exits without reading its stdin is judged by its exit status below.
        let _ = stdin.write_all(registry.as_bytes());
    }
    let started = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if started.elapsed() > HELPER_TIMEOUT => {
                // Already exiting or gone: nothing more to do about it.
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "{program} get: no answer within {}s",
                    HELPER_TIMEOUT.as_secs()
                ));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err(format!("{program}: {e}")),
        }
    }
    let out = child
        .wait_with_output()
        .map_err(|e| format!("{program}: {e}"))?;
    if !out.status.success() {
        let msg = String::from_utf8_lossy(&out.stdout);
        let msg = msg.trim();
        // docker's helpers say "credentials not found in native keychain": anonymous, as docker.
        if msg.contains("credentials not found") {
            return Ok(Credentials::Anonymous);
        }
        return Err(format!("{program} get: {} {msg}", out.status));
    }
    let reply: HelperReply = serde_json::from_slice(&out.stdout)
        .map_err(|e| format!("{program} get: not a credential reply: {e}"))?;
    Ok(if reply.username == "<token>" {
        Credentials::Token(reply.secret)
    } else {
        Credentials::Basic {
            username: reply.username,
            password: reply.secret,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auth_entries_decode() {
        let e = AuthEntry {
            auth: Some("dXNlcjpwYTpzcw==".into()),
            ..Default::default()
        };
        assert_eq!(
            from_entry(&e),
            Ok(Credentials::Basic {
                username: "user".into(),
                password: "pa:ss".into()
            })
        );
        assert!(keys_for("docker.io").contains(&DOCKER_HUB_KEY.to_string()));
    }
}
