//! (the control plane) A small client of the OCI distribution API (distribution-spec v1.1, "Pull"): `GET` of
//! manifests and blobs with the token and basic auth flows registries use (Docker's token
//! spec: a 401's `WWW-Authenticate: Bearer realm=...,service=...,scope=...` is answered at the
//! realm). Built on the hyper and ring rustls the sidecar already links (its CloudWatch and
//! Events clients), plus hyper-rustls, so that reading registries adds no HTTP stack of its own
//! (oci-client's reqwest, oci-spec and regex cost 2.5 MB, past the 10 MB limit then).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures_util::Stream;
use http::{HeaderValue, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Empty};
use hyper::body::Incoming;
use hyper_util::client::legacy::Client as HyperClient;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use sha2::{Digest as _, Sha256};

use super::auth::Credentials;

/// Redirects followed for one request (blobs are often served from a CDN or S3 behind a 307).
pub const MAX_REDIRECTS: usize = 5;
/// The largest manifest or token answer read (the distribution spec lets registries refuse
/// manifests over 4 MiB).
pub const MAX_DOCUMENT_BYTES: usize = 4 << 20;

/// What a manifest request accepts: Docker v2 and OCI, images and indexes.
pub const MANIFEST_TYPES: [&str; 4] = [
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
    "application/vnd.docker.distribution.manifest.v2+json",
];

/// An image reference, as the runtime reads it: `nginx` is `docker.io/library/nginx:latest`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reference {
    /// `host[:port]` as written (`docker.io` for Docker Hub): the key for credentials.
    pub registry: String,
    pub repository: String,
    /// A tag or a digest (`sha256:...`).
    pub reference: String,
    /// The digest of a pinned reference (`name@sha256:...`).
    pub digest: Option<String>,
}

impl Reference {
    pub fn parse(s: &str) -> Result<Reference, String> {
        let (name, digest) = match s.split_once('@') {
            Some((n, d)) => (n, Some(d.to_string())),
            None => (s, None),
        };
        let (mut registry, mut rest) = match name.split_once('/') {
            Some((first, rest))
                if first.contains('.') || first.contains(':') || first == "localhost" =>
            {
                (first.to_string(), rest.to_string())
            }
            _ => ("docker.io".to_string(), name.to_string()),
        };
        let last = rest.rsplit('/').next().unwrap_or_default();
        let tag = last.split_once(':').map(|(_, t)| t.to_string());
        if let Some(t) = &tag {
            rest.truncate(rest.len() - t.len() - 1);
        }
        if registry == "docker.io" && !rest.contains('/') {
            rest = format!("library/{rest}");
        }
        if registry == "index.docker.io" {
            registry = "docker.io".to_string();
        }
        let ok = !rest.is_empty()
            && rest
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"._-/".contains(&b));
        if !ok {
            return Err(format!("{s:?} is not an image reference"));
        }
        let reference = digest
            .clone()
            .or(tag)
            .unwrap_or_else(|| "latest".to_string());
        Ok(Reference {
            registry,
            repository: rest,
            reference,
            digest,
        })
    }

    /// The host requests go to (Docker Hub's API is at registry-1.docker.io).
    fn host(&self) -> &str {
        if self.registry == "docker.io" {
            "registry-1.docker.io"
        } else {
            &self.registry
        }
    }
}

type Http = HyperClient<hyper_rustls::HttpsConnector<HttpConnector>, Empty<Bytes>>;

/// Sent with every request, as registries log it.
const USER_AGENT: &str = concat!("hooklog/", env!("CARGO_PKG_VERSION"));

/// A registry client for one run: one connection pool, tokens kept per repository.
#[derive(Clone)]
pub struct Client {
    http: Http,
    /// Registries spoken to over plain HTTP.
    insecure: Arc<Vec<String>>,
    /// `Authorization` values that worked, by `registry/repository`.
    tokens: Arc<Mutex<HashMap<String, HeaderValue>>>,
    connect_timeout: Duration,
    read_timeout: Duration,
}

/// A response body as a stream of chunks, each within the read timeout.
pub type ByteStream = std::pin::Pin<Box<dyn Stream<Item = std::io::Result<Bytes>> + Send>>;

impl Client {
    /// TLS with the system's CA store (`SSL_CERT_FILE` / `SSL_CERT_DIR` override it, as
    /// OpenSSL reads them).
    pub fn new(
        insecure: Vec<String>,
        connect_timeout: Duration,
        read_timeout: Duration,
    ) -> Result<Client, String> {
        let mut roots = rustls::RootCertStore::empty();
        let found = rustls_native_certs::load_native_certs();
        let (added, _ignored) = roots.add_parsable_certificates(found.certs);
        if added == 0 && insecure.is_empty() {
            return Err(format!(
                "no CA certificates found (system store, SSL_CERT_FILE): {:?}",
                found.errors
            ));
        }
        let tls = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?
        .with_root_certificates(roots)
        .with_no_client_auth();
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        http.set_connect_timeout(Some(connect_timeout));
        let https = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_http1()
            .wrap_connector(http);
        Ok(Client {
            http: HyperClient::builder(TokioExecutor::new()).build(https),
            insecure: Arc::new(insecure),
            tokens: Arc::default(),
            connect_timeout,
            read_timeout,
        })
    }

    fn base(&self, r: &Reference) -> String {
        let scheme = if self
            .insecure
            .iter()
            .any(|h| h == &r.registry || h == r.host())
        {
            "http"
        } else {
            "https"
        };
        format!("{scheme}://{}/v2/{}", r.host(), r.repository)
    }

    /// A manifest: its bytes, media type and digest (checked against a pinned reference).
    pub async fn manifest(
        &self,
        r: &Reference,
        reference: &str,
        creds: &Credentials,
    ) -> Result<(Vec<u8>, String, String), String> {
        let url = format!("{}/manifests/{reference}", self.base(r));
        let resp = self.get(r, &url, &MANIFEST_TYPES.join(", "), creds).await?;
        let media_type = resp
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .split(';')
            .next()
            .unwrap_or_default()
            .trim()
            .to_string();
        let body = self.read_all(resp.into_body(), MAX_DOCUMENT_BYTES).await?;
        let digest = format!("sha256:{}", hex(&Sha256::digest(&body)));
        // A digest (any algorithm) is verified in its own algorithm, or refused.
        if reference.contains(':') {
            let mut v = Verifier::new(reference).map_err(|e| format!("manifest {e}"))?;
            v.update(&body);
            v.finish()
                .map_err(|e| format!("manifest {reference}: the registry sent {e}"))?;
            return Ok((body, media_type, reference.to_string()));
        }
        Ok((body, media_type, digest))
    }

    /// A blob's bytes as they arrive; the caller checks the digest with [`Verifier`].
    pub async fn blob(
        &self,
        r: &Reference,
        digest: &str,
        creds: &Credentials,
    ) -> Result<ByteStream, String> {
        let url = format!("{}/blobs/{digest}", self.base(r));
        let resp = self.get(r, &url, "*/*", creds).await?;
        let read_timeout = self.read_timeout;
        let body = resp.into_body();
        Ok(Box::pin(futures_util::stream::unfold(
            Some(body),
            move |body| async move {
                let mut body = body?;
                loop {
                    match tokio::time::timeout(read_timeout, body.frame()).await {
                        Err(_) => {
                            let e = std::io::Error::new(
                                std::io::ErrorKind::TimedOut,
                                format!("no data for {}s", read_timeout.as_secs()),
                            );
                            return Some((Err(e), None));
                        }
                        Ok(None) => return None,
                        Ok(Some(Err(e))) => {
                            return Some((Err(std::io::Error::other(e)), None));
                        }
                        Ok(Some(Ok(frame))) => {
                            if let Ok(data) = frame.into_data() {
                                return Some((Ok(data), Some(body)));
                            }
                        }
                    }
                }
            },
        )))
    }

    /// A whole small blob (a config), at most `limit` bytes, its digest checked.
    pub async fn small_blob(
        &self,
        r: &Reference,
        digest: &str,
        creds: &Credentials,
        limit: usize,
    ) -> Result<Vec<u8>, String> {
        let url = format!("{}/blobs/{digest}", self.base(r));
        let resp = self.get(r, &url, "*/*", creds).await?;
        let body = self.read_all(resp.into_body(), limit).await?;
        let mut v = Verifier::new(digest)?;
        v.update(&body);
        v.finish()?;
        Ok(body)
    }

    async fn read_all(&self, mut body: Incoming, limit: usize) -> Result<Vec<u8>, String> {
        let mut out = Vec::new();
        loop {
            match tokio::time::timeout(self.read_timeout, body.frame()).await {
                Err(_) => return Err(format!("no data for {}s", self.read_timeout.as_secs())),
                Ok(None) => return Ok(out),
                Ok(Some(Err(e))) => return Err(format!("reading the answer: {e}")),
                Ok(Some(Ok(frame))) => {
                    if let Ok(data) = frame.into_data() {
                        if out.len() + data.len() > limit {
                            return Err(format!("answer larger than {limit} bytes"));
                        }
                        out.extend_from_slice(&data);
                    }
                }
            }
        }
    }

    /// One GET: with the token or credentials that worked before, answering a 401's challenge
    /// once, following redirects (credentials go only to the registry's own host).
    async fn get(
        &self,
        r: &Reference,
        url: &str,
        accept: &str,
        creds: &Credentials,
    ) -> Result<Response<Incoming>, String> {
        let key = format!("{}/{}", r.registry, r.repository);
        let mut url = url.to_string();
        let mut challenged = false;
        let mut hops = 0;
        let scheme = scheme_of(&url).unwrap_or("https").to_string();
        loop {
            // Credentials go only where the registry itself is: its host, and never over
            // plain HTTP when it was asked over HTTPS (a 307 to `http://` on the same host
            // received them in clear text: issue 26). Docker does no less: moby's
            // registry/registry.go `addRequiredHeadersToRedirectedRequests` keeps
            // Authorization on a redirect only between two https locations it trusts.
            let same_host = host_of(&url) == Some(r.host()) && scheme_of(&url) == Some(&scheme);
            let auth = if same_host {
                self.tokens
                    .lock()
                    .expect("no panic while holding the token map")
                    .get(&key)
                    .cloned()
            } else {
                None
            };
            let mut req = Request::get(&url)
                .header(header::ACCEPT, accept)
                .header(header::USER_AGENT, USER_AGENT);
            if let Some(a) = auth {
                req = req.header(header::AUTHORIZATION, a);
            }
            let req = req.body(Empty::new()).map_err(|e| format!("{url}: {e}"))?;
            let resp = self.send(req, &url).await?;
            let status = resp.status();
            if status.is_success() {
                return Ok(resp);
            }
            if status.is_redirection() {
                let loc = resp
                    .headers()
                    .get(header::LOCATION)
                    .and_then(|v| v.to_str().ok())
                    .ok_or_else(|| format!("{url}: {status} without a Location"))?;
                hops += 1;
                if hops > MAX_REDIRECTS {
                    return Err(format!("{url}: more than {MAX_REDIRECTS} redirects"));
                }
                url = join(&url, loc);
                continue;
            }
            if status == StatusCode::UNAUTHORIZED && !challenged && same_host {
                challenged = true;
                let challenge = resp
                    .headers()
                    .get(header::WWW_AUTHENTICATE)
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or_default()
                    .to_string();
                let value = self.answer(&challenge, r, creds).await?;
                self.tokens
                    .lock()
                    .expect("no panic while holding the token map")
                    .insert(key.clone(), value);
                continue;
            }
            return Err(self.refusal(&url, resp, creds).await);
        }
    }

    /// What a refused request says: its status and the start of its body, and for a 401
    /// whether there were credentials to give.
    async fn refusal(&self, url: &str, resp: Response<Incoming>, creds: &Credentials) -> String {
        let status = resp.status();
        let body = self
            .read_all(resp.into_body(), 64 << 10)
            .await
            .unwrap_or_default();
        let text = String::from_utf8_lossy(&body);
        let text: String = text.chars().take(300).collect();
        match status {
            StatusCode::UNAUTHORIZED => format!(
                "{url}: 401 unauthorized ({}): {text}",
                match creds {
                    Credentials::Anonymous => "no credentials for this registry",
                    _ => "the credentials were refused",
                }
            ),
            _ => format!("{url}: {status}: {text}"),
        }
    }

    async fn send(
        &self,
        req: Request<Empty<Bytes>>,
        url: &str,
    ) -> Result<Response<Incoming>, String> {
        // Connecting has its own timeout (the connector's); this bounds the wait for the headers.
        let limit = self.connect_timeout + self.read_timeout;
        match tokio::time::timeout(limit, self.http.request(req)).await {
            Ok(Ok(r)) => Ok(r),
            Ok(Err(e)) => Err(format!("{url}: {}", super::chain(&e))),
            Err(_) => Err(format!("{url}: no answer within {}s", limit.as_secs())),
        }
    }

    /// The `Authorization` value that answers `challenge`: Basic with the credentials, or a
    /// Bearer token from the challenge's realm (with the credentials, if any).
    async fn answer(
        &self,
        challenge: &str,
        r: &Reference,
        creds: &Credentials,
    ) -> Result<HeaderValue, String> {
        let (scheme, params) = parse_challenge(challenge);
        let basic = match creds {
            Credentials::Basic { username, password } => Some(format!(
                "Basic {}",
                base64(format!("{username}:{password}").as_bytes())
            )),
            _ => None,
        };
        let value = if scheme.eq_ignore_ascii_case("basic") {
            basic.ok_or(
                "401 unauthorized: the registry wants basic credentials and none are configured",
            )?
        } else if scheme.eq_ignore_ascii_case("bearer") {
            let realm = params
                .get("realm")
                .ok_or("401 with a Bearer challenge without a realm")?;
            let mut url = format!(
                "{realm}{}scope={}",
                if realm.contains('?') { "&" } else { "?" },
                percent(&format!("repository:{}:pull", r.repository))
            );
            if let Some(s) = params.get("service") {
                url.push_str(&format!("&service={}", percent(s)));
            }
            let mut req = Request::get(&url)
                .header(header::ACCEPT, "application/json")
                .header(header::USER_AGENT, USER_AGENT);
            let basic = basic.filter(|_| {
                let ok = realm_may_have_credentials(&self.base(r), realm);
                if !ok {
                    tracing::warn!(%realm, registry = %r.registry, "credentials not sent to a token realm on another scheme or host");
                }
                ok
            });
            if let Some(b) = &basic {
                req = req.header(header::AUTHORIZATION, b);
            }
            let req = req.body(Empty::new()).map_err(|e| format!("{url}: {e}"))?;
            let resp = self.send(req, &url).await?;
            let status = resp.status();
            let body = self.read_all(resp.into_body(), MAX_DOCUMENT_BYTES).await?;
            if !status.is_success() {
                return Err(format!(
                    "token from {realm}: {status} ({})",
                    if basic.is_some() {
                        "the credentials were refused"
                    } else {
                        "anonymous access refused"
                    }
                ));
            }
            #[derive(serde::Deserialize)]
            struct Token {
                token: Option<String>,
                access_token: Option<String>,
            }
            let t: Token =
                serde_json::from_slice(&body).map_err(|e| format!("token from {realm}: {e}"))?;
            let t = t
                .token
                .or(t.access_token)
                .ok_or_else(|| format!("token from {realm}: no token in the answer"))?;
            format!("Bearer {t}")
        } else {
            return Err(format!("401 with an unknown challenge {challenge:?}"));
        };
        HeaderValue::from_str(&value).map_err(|_| "a token that is no header value".to_string())
    }
}

/// `Bearer realm="https://auth",service="x",scope="repository:a:pull,push"` -> ("Bearer", map).
fn parse_challenge(s: &str) -> (String, HashMap<String, String>) {
    let (scheme, rest) = s.trim().split_once(' ').unwrap_or((s.trim(), ""));
    let mut params = HashMap::new();
    let mut chars = rest.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| *c == ',' || c.is_whitespace()) {
            chars.next();
        }
        let key: String = chars.by_ref().take_while(|c| *c != '=').collect();
        if key.is_empty() {
            break;
        }
        let mut value = String::new();
        if chars.peek() == Some(&'"') {
            chars.next();
            while let Some(c) = chars.next() {
                match c {
                    '\\' => value.extend(chars.next()),
                    '"' => break,
                    c => value.push(c),
                }
            }
        } else {
            value = chars.by_ref().take_while(|c| *c != ',').collect();
        }
        params.insert(key.trim().to_ascii_lowercase(), value);
    }
    (scheme.to_string(), params)
}

fn scheme_of(url: &str) -> Option<&str> {
    url.split_once("://").map(|(s, _)| s)
}

/// Whether a Bearer realm may receive the registry's Basic credentials: over the registry's
/// own scheme (never `http://` for an https registry), on its host, or on a host of the
/// registry's parent domain (Docker Hub's `registry-1.docker.io` has its realm at
/// `auth.docker.io`, GitLab's `registry.gitlab.com` at `gitlab.com`). An IP address has no
/// parent. Anywhere else the token is asked for without them.
fn realm_may_have_credentials(base: &str, realm: &str) -> bool {
    let (Some(host), Some(realm_host)) = (host_of(base), host_of(realm)) else {
        return false;
    };
    if scheme_of(base) != scheme_of(realm) {
        return false;
    }
    let name = |h: &str| {
        h.rsplit_once(':')
            .map_or(h, |(n, _)| n)
            .to_ascii_lowercase()
    };
    let (host, realm_host) = (name(host), name(realm_host));
    if host == realm_host {
        return true;
    }
    if host.parse::<std::net::IpAddr>().is_ok() || host.starts_with('[') {
        return false;
    }
    // The parent domain, if it is more than a top-level one.
    match host.split_once('.') {
        Some((_, parent)) if parent.contains('.') => {
            realm_host == parent || realm_host.ends_with(&format!(".{parent}"))
        }
        _ => false,
    }
}

fn host_of(url: &str) -> Option<&str> {
    let rest = url.split_once("://")?.1;
    Some(rest.split(['/', '?']).next().unwrap_or_default())
}

/// A Location against the URL it answered.
fn join(base: &str, loc: &str) -> String {
    if loc.contains("://") {
        return loc.to_string();
    }
    let (scheme, rest) = base.split_once("://").unwrap_or(("https", base));
    let host = rest.split('/').next().unwrap_or_default();
    if loc.starts_with('/') {
        format!("{scheme}://{host}{loc}")
    } else {
        let dir = base.rsplit_once('/').map_or(base, |(d, _)| d);
        format!("{dir}/{loc}")
    }
}

/// Percent-encodes a query value (RFC 3986 unreserved characters stay).
fn percent(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

fn base64(b: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(b.len().div_ceil(3) * 4);
    for chunk in b.chunks(3) {
        let n =
            chunk.iter().fold(0u32, |acc, &x| (acc << 8) | u32::from(x)) << (8 * (3 - chunk.len()));
        for i in 0..4 {
            out.push(if i <= chunk.len() {
                A[((n >> (18 - 6 * i)) & 63) as usize] as char
            } else {
                '='
            });
        }
    }
    out
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The digest algorithms the OCI image spec registers (descriptor.md, "Registered
/// algorithms"): `sha256` and `sha512`, with their lengths in hex. Any other is refused.
const ALGORITHMS: [(&str, usize); 2] = [("sha256", 64), ("sha512", 128)];

enum Hasher {
    Sha256(Sha256),
    Sha512(sha2::Sha512),
}

/// Checks bytes against their digest (`sha256:` or `sha512:`) as they pass.
pub struct Verifier {
    algorithm: &'static str,
    expected: String,
    hasher: Hasher,
}

impl Verifier {
    pub fn new(digest: &str) -> Result<Verifier, String> {
        let (alg, hex) = digest
            .split_once(':')
            .ok_or_else(|| format!("digest {digest:?} is not algorithm:hex"))?;
        let &(algorithm, len) = ALGORITHMS.iter().find(|(a, _)| *a == alg).ok_or_else(|| {
            format!("digest {digest}: algorithm {alg:?} is not one OCI registers (sha256, sha512), so it cannot be verified")
        })?;
        if hex.len() != len || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(format!("digest {digest}: not {len} hex digits"));
        }
        Ok(Verifier {
            algorithm,
            expected: hex.to_ascii_lowercase(),
            hasher: match algorithm {
                "sha512" => Hasher::Sha512(sha2::Sha512::new()),
                _ => Hasher::Sha256(Sha256::new()),
            },
        })
    }

    pub fn update(&mut self, b: &[u8]) {
        match &mut self.hasher {
            Hasher::Sha256(h) => h.update(b),
            Hasher::Sha512(h) => h.update(b),
        }
    }

    pub fn finish(self) -> Result<(), String> {
        let got = match self.hasher {
            Hasher::Sha256(h) => hex(&h.finalize()),
            Hasher::Sha512(h) => hex(&h.finalize()),
        };
        if got == self.expected {
            Ok(())
        } else {
            let alg = self.algorithm;
            Err(format!(
                "content of digest {alg}:{got}, not {alg}:{}",
                self.expected
            ))
        }
    }
}

/// The sha256 of `b` in hex.
pub fn hex_digest(b: &[u8]) -> String {
    hex(&Sha256::digest(b))
}

/// A reader that feeds a [`Verifier`].
pub struct Verifying<R> {
    pub inner: R,
    pub verifier: Verifier,
}

impl<R: std::io::Read> std::io::Read for Verifying<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.verifier.update(&buf[..n]);
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 26: sha512 pins were not verified. Both registered algorithms are, any other is
    /// refused with a reason.
    #[test]
    fn every_registered_digest_algorithm_is_verified_and_others_refused() {
        let body = b"{}";
        let sha512 = format!("sha512:{}", hex(&sha2::Sha512::digest(body)));
        let mut v = Verifier::new(&sha512).unwrap();
        v.update(body);
        assert_eq!(v.finish(), Ok(()));
        let mut v = Verifier::new(&sha512).unwrap();
        v.update(b"[]");
        assert!(v.finish().unwrap_err().contains("sha512:"));
        let sha256 = format!("sha256:{}", hex_digest(body));
        let mut v = Verifier::new(&sha256).unwrap();
        v.update(body);
        assert_eq!(v.finish(), Ok(()));
        for bad in ["md5:00", "sha256:00", "blake3:ab", "sha512", &sha512[..20]] {
            assert!(Verifier::new(bad).is_err(), "{bad}");
        }
    }

    /// Issue 26: a Bearer realm on `http://` of an https registry received the Basic password.
    #[test]
    fn basic_credentials_go_only_to_realms_of_the_registry() {
        let hub = "https://registry-1.docker.io/v2/library/nginx";
        assert!(realm_may_have_credentials(
            hub,
            "https://auth.docker.io/token"
        ));
        assert!(!realm_may_have_credentials(
            hub,
            "http://auth.docker.io/token"
        ));
        assert!(!realm_may_have_credentials(
            hub,
            "https://auth.evil.example/token"
        ));
        let gitlab = "https://registry.gitlab.com/v2/a/b";
        assert!(realm_may_have_credentials(
            gitlab,
            "https://gitlab.com/jwt/auth"
        ));
        let local = "https://127.0.0.1:5000/v2/a";
        assert!(realm_may_have_credentials(
            local,
            "https://127.0.0.1:5001/token"
        ));
        assert!(!realm_may_have_credentials(
            local,
            "http://127.0.0.1:5000/token"
        ));
        assert!(!realm_may_have_credentials(
            local,
            "https://127.0.0.2/token"
        ));
        let plain = "http://127.0.0.1:5000/v2/a";
        assert!(realm_may_have_credentials(
            plain,
            "http://127.0.0.1:5000/token"
        ));
        assert!(!realm_may_have_credentials(
            "https://ghcr.io/v2/a",
            "https://evil.io/t"
        ));
    }

    #[test]
    fn references_are_read_as_the_runtime_reads_them() {
        let r = Reference::parse("nginx").unwrap();
        assert_eq!(
            (
                r.registry.as_str(),
                r.repository.as_str(),
                r.reference.as_str()
            ),
            ("docker.io", "library/nginx", "latest")
        );
        let r = Reference::parse("127.0.0.1:5000/a/b:1.2@sha256:ab").unwrap();
        assert_eq!(
            (
                r.registry.as_str(),
                r.repository.as_str(),
                r.reference.as_str()
            ),
            ("127.0.0.1:5000", "a/b", "sha256:ab")
        );
        let r = Reference::parse("localhost/x:y").unwrap();
        assert_eq!(
            (r.registry.as_str(), r.reference.as_str()),
            ("localhost", "y")
        );
        assert!(Reference::parse("Bad/Name").is_err());
    }

    #[test]
    fn challenges_and_urls() {
        let (s, p) = parse_challenge(
            r#"Bearer realm="https://auth.docker.io/token",service="registry.docker.io",scope="repository:a:pull,push""#,
        );
        assert_eq!(s, "Bearer");
        assert_eq!(p["realm"], "https://auth.docker.io/token");
        assert_eq!(p["scope"], "repository:a:pull,push");
        assert_eq!(join("https://h/v2/a/blobs/x", "/b?y"), "https://h/b?y");
        assert_eq!(join("https://h/v2/a", "https://s3/x"), "https://s3/x");
        assert_eq!(base64(b"ci:s3cret"), "Y2k6czNjcmV0");
        assert_eq!(percent("repository:a/b:pull"), "repository%3Aa%2Fb%3Apull");
    }
}
