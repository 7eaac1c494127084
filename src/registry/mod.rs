//! (the control plane) Images read from their registries, as the container runtime would pull them: the OCI
//! distribution API ([`client`]) resolves a reference to the manifest of the wanted platform,
//! and each layer is streamed, decompressed and listed ([`layer`]), never stored, then the
//! layers are laid over each other with their whiteouts. Credentials come from where the
//! container tools keep them ([`auth`]); layer lists and configs are cached by digest
//! ([`cache`]). Knows nothing of Kubernetes manifests: `check` asks for `(image, arch)` pairs.

pub mod auth;
pub mod cache;
pub mod client;
pub mod layer;

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures_util::StreamExt;
use serde::{Deserialize, Serialize};

use auth::Credentials;
use client::{Client, Reference};

/// Connecting to a registry (the TCP connect). A registry that does not answer in this time is
/// unreadable, and `check` falls back to patterns.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Waiting for a response's headers (after the connect), and between two chunks of its body: a
/// stalled layer download ends after this long.
pub const READ_TIMEOUT: Duration = Duration::from_secs(30);
/// One manifest or config request, token exchange included.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
/// One layer, start to end: 1 GB at 10 Mbit/s takes about 14 minutes.
pub const LAYER_TIMEOUT: Duration = Duration::from_secs(20 * 60);
/// Images read at the same time, and layers of one image at the same time (containerd pulls
/// three layers at once by default: `max_concurrent_downloads = 3`).
pub const IMAGES_IN_FLIGHT: usize = 4;
pub const LAYERS_IN_FLIGHT: usize = 3;
/// The largest image config read (configs are a few KB; the OCI distribution spec lets a
/// registry refuse manifests over 4 MiB, the same bound serves here).
pub const MAX_CONFIG_BYTES: usize = 4 << 20;
/// Progress goes to stderr (a terminal only) once a lookup has taken this long.
const PROGRESS_AFTER: Duration = Duration::from_secs(1);

/// A file system entry, as far as command lookup cares.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Entry {
    File { mode: u32 },
    Dir,
    Symlink(String),
}

pub use crate::kube::Arch;

/// How images are read.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Registries (`host[:port]`) spoken to over plain HTTP.
    pub insecure: Vec<String>,
    pub cache: cache::Cache,
    /// All images together, from the first request on (`--image-timeout`): an image not read
    /// by then is unreadable, and its error names what was being read.
    pub deadline: Duration,
}

/// `--image-timeout`'s default: every image of a check, together. A registry that trickles a
/// byte every few seconds held a check 20 minutes a layer (issue 26); ten minutes is room for
/// a few GB at CI speeds, and a cached layer costs nothing.
pub const DEFAULT_DEADLINE: Duration = Duration::from_secs(10 * 60);

/// What one image's lookup is reading now, for the error when the deadline passes.
#[derive(Default)]
struct Reading(std::sync::Mutex<Vec<String>>);

impl Reading {
    fn start(&self, what: String) {
        self.with(|v| v.push(what));
    }
    fn end(&self, what: &str) {
        self.with(|v| v.retain(|w| w != what));
    }
    fn now(&self) -> String {
        self.with(|v| {
            if v.is_empty() {
                "not started".to_string()
            } else {
                format!("was reading {}", v.join(", "))
            }
        })
    }
    fn with<T>(&self, f: impl FnOnce(&mut Vec<String>) -> T) -> T {
        f(&mut self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner))
    }
}

/// An image, read: what command lookup needs.
#[derive(Debug, Clone)]
pub struct Image {
    /// The digest of the platform's manifest, which names what was checked.
    pub digest: String,
    /// `linux/amd64`.
    pub platform: String,
    pub files: BTreeMap<String, Entry>,
    /// `PATH` from the config's `Env`, if it sets one.
    pub path: Option<String>,
    pub working_dir: Option<String>,
    pub entrypoint: Vec<String>,
    pub cmd: Vec<String>,
}

/// The parts of an image config (OCI image spec, config.md) that lookup uses.
#[derive(Debug, Default, Deserialize)]
struct ConfigFile {
    #[serde(default)]
    architecture: Option<String>,
    #[serde(default)]
    config: Option<ExecConfig>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase")]
struct ExecConfig {
    #[serde(default)]
    env: Option<Vec<String>>,
    #[serde(default)]
    entrypoint: Option<Vec<String>>,
    #[serde(default)]
    cmd: Option<Vec<String>>,
    #[serde(default)]
    working_dir: Option<String>,
}

/// A manifest or an index (OCI image spec manifest.md and image-index.md; Docker's v2 schema 2
/// and manifest list have the same fields).
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Manifest {
    #[serde(default)]
    media_type: Option<String>,
    #[serde(default)]
    config: Option<Descriptor>,
    #[serde(default)]
    layers: Vec<Descriptor>,
    #[serde(default)]
    manifests: Vec<IndexEntry>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Descriptor {
    media_type: String,
    digest: String,
    #[serde(default)]
    size: u64,
}

#[derive(Debug, Deserialize)]
struct IndexEntry {
    digest: String,
    #[serde(default)]
    platform: Option<Platform>,
}

#[derive(Debug, Deserialize)]
struct Platform {
    architecture: String,
    os: String,
}

/// Index media types; the other two of [`client::MANIFEST_TYPES`] are image manifests.
const INDEX_TYPES: [&str; 2] = [
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
];

/// Reads every wanted `(image reference, arch)`, concurrently within [`IMAGES_IN_FLIGHT`]. Each
/// answer is the image or a one-line reason it could not be read.
pub fn read_images(
    wanted: &[(String, Arch)],
    settings: &Settings,
) -> Vec<((String, Arch), Result<Image, String>)> {
    if wanted.is_empty() {
        return Vec::new();
    }
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            let why = format!("cannot start the runtime: {e}");
            return wanted
                .iter()
                .map(|w| (w.clone(), Err(why.clone())))
                .collect();
        }
    };
    rt.block_on(read_all(wanted, settings))
}

async fn read_all(
    wanted: &[(String, Arch)],
    settings: &Settings,
) -> Vec<((String, Arch), Result<Image, String>)> {
    let client = match Client::new(settings.insecure.clone(), CONNECT_TIMEOUT, READ_TIMEOUT) {
        Ok(c) => c,
        Err(e) => {
            let why = format!("cannot make a registry client: {e}");
            return wanted
                .iter()
                .map(|w| (w.clone(), Err(why.clone())))
                .collect();
        }
    };
    let done = Arc::new(AtomicUsize::new(0));
    let progress = tokio::spawn(progress(done.clone(), wanted.len()));
    let until = tokio::time::Instant::now() + settings.deadline;
    let results = futures_util::stream::iter(wanted.iter().cloned())
        .map(|(image, arch)| {
            let client = client.clone();
            let done = done.clone();
            async move {
                let reading = Reading::default();
                let r = tokio::time::timeout_at(
                    until,
                    read_image(&client, &image, arch, settings, &reading),
                )
                .await
                .unwrap_or_else(|_| {
                    Err(format!(
                        "not read within --image-timeout {}s (every image of the check together): {}",
                        settings.deadline.as_secs(),
                        reading.now()
                    ))
                });
                done.fetch_add(1, Ordering::Relaxed);
                ((image, arch), r.map_err(|e| one_line(&e)))
            }
        })
        .buffered(IMAGES_IN_FLIGHT)
        .collect::<Vec<_>>()
        .await;
    progress.abort();
    if std::io::stderr().is_terminal() && progress.await.is_err() {
        // Aborted while it may have drawn a line: clear it.
        eprint!("\r\x1b[K");
    }
    results
}

/// `hooklog: reading images 2/5` on stderr, redrawn each second, once [`PROGRESS_AFTER`] passed;
/// only on a terminal.
async fn progress(done: Arc<AtomicUsize>, total: usize) {
    if !std::io::stderr().is_terminal() {
        return;
    }
    tokio::time::sleep(PROGRESS_AFTER).await;
    loop {
        eprint!(
            "\r\x1b[Khooklog: reading images {}/{total}",
            done.load(Ordering::Relaxed)
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// An error with its causes, `a: b: c`.
pub(crate) fn chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut cur = e.source();
    while let Some(s) = cur {
        let t = s.to_string();
        if !out.contains(&t) {
            out.push_str(": ");
            out.push_str(&t);
        }
        cur = s.source();
    }
    out
}

async fn read_image(
    client: &Client,
    image: &str,
    arch: Arch,
    settings: &Settings,
    reading: &Reading,
) -> Result<Image, String> {
    let r = Reference::parse(image)?;
    reading.start("its manifest".to_string());
    let creds = credentials_for(&r).await?;
    let (manifest, digest) = platform_manifest(client, &r, &creds, arch).await?;
    let config_desc = manifest
        .config
        .clone()
        .ok_or("its manifest has no config")?;
    reading.end("its manifest");
    reading.start("its config".to_string());
    let config = read_config(client, &r, &creds, &config_desc, settings).await?;
    reading.end("its config");
    let files = read_files(client, &r, &creds, &manifest, settings, reading).await?;
    let exec = config.config.unwrap_or_default();
    let path = exec
        .env
        .unwrap_or_default()
        .iter()
        .find_map(|e| e.strip_prefix("PATH=").map(str::to_string));
    Ok(Image {
        digest,
        platform: format!(
            "linux/{}",
            config.architecture.as_deref().unwrap_or(arch.as_str())
        ),
        files,
        path,
        working_dir: exec.working_dir.filter(|w| !w.is_empty()),
        entrypoint: exec.entrypoint.unwrap_or_default(),
        cmd: exec.cmd.unwrap_or_default(),
    })
}

/// The credentials docker and podman keep for `r`'s registry; an identity token is refused.
async fn credentials_for(r: &Reference) -> Result<Credentials, String> {
    let creds = tokio::task::spawn_blocking({
        let registry = r.registry.clone();
        move || auth::credentials(&registry)
    })
    .await
    .map_err(|e| format!("credentials: {e}"))??;
    if let Credentials::Token(_) = creds {
        // An identity token is an OAuth2 refresh token, exchanged at the realm with
        // `grant_type=refresh_token`: not done here, and no registry takes it as a token.
        return Err(format!(
            "the credentials for {} are an identity token (OAuth2 refresh token), which hooklog cannot exchange; give a user and password or a credential helper",
            r.registry
        ));
    }
    Ok(creds)
}

/// `r`'s image manifest for linux/`arch`, through its index when it has one, and its digest.
async fn platform_manifest(
    client: &Client,
    r: &Reference,
    creds: &Credentials,
    arch: Arch,
) -> Result<(Manifest, String), String> {
    let (body, media_type, digest) =
        timed(REQUEST_TIMEOUT, client.manifest(r, &r.reference, creds)).await?;
    let manifest = parse_manifest(&body, &media_type)?;
    if !is_index(&manifest, &media_type) {
        return Ok((manifest, digest));
    }
    let entry = manifest
        .manifests
        .iter()
        .find(|m| {
            m.platform
                .as_ref()
                .is_some_and(|p| p.os == "linux" && p.architecture == arch.as_str())
        })
        .ok_or_else(|| {
            let has: Vec<String> = manifest
                .manifests
                .iter()
                .filter_map(|m| m.platform.as_ref())
                .map(|p| format!("{}/{}", p.os, p.architecture))
                .collect();
            format!(
                "no linux/{} image in its index (it has {})",
                arch.as_str(),
                has.join(", ")
            )
        })?;
    let pinned = entry.digest.clone();
    let (body, media_type, digest) =
        timed(REQUEST_TIMEOUT, client.manifest(r, &pinned, creds)).await?;
    let manifest = parse_manifest(&body, &media_type)?;
    if is_index(&manifest, &media_type) {
        return Err("its index names another index".to_string());
    }
    Ok((manifest, digest))
}

/// The image's file tree: its layers' lists, read within [`LAYERS_IN_FLIGHT`] at once, applied
/// in order.
async fn read_files(
    client: &Client,
    r: &Reference,
    creds: &Credentials,
    manifest: &Manifest,
    settings: &Settings,
    reading: &Reading,
) -> Result<BTreeMap<String, Entry>, String> {
    let count = manifest.layers.len();
    let layers: Vec<Vec<layer::Change>> =
        futures_util::stream::iter(manifest.layers.iter().cloned().enumerate())
            .map(|(i, d)| async move {
                let what = format!("layer {} ({} of {count})", d.digest, i + 1);
                reading.start(what.clone());
                let listed = read_layer(client, r, creds, d, settings).await;
                reading.end(&what);
                listed
            })
            .buffered(LAYERS_IN_FLIGHT)
            .collect::<Vec<_>>()
            .await
            .into_iter()
            .collect::<Result<_, _>>()?;
    let mut files = BTreeMap::new();
    files.insert("/".to_string(), Entry::Dir);
    for l in &layers {
        layer::apply(&mut files, l)?;
    }
    Ok(files)
}

async fn timed<T>(
    limit: Duration,
    f: impl std::future::Future<Output = Result<T, String>>,
) -> Result<T, String> {
    tokio::time::timeout(limit, f)
        .await
        .map_err(|_| format!("no answer within {}s", limit.as_secs()))?
}

fn parse_manifest(body: &[u8], media_type: &str) -> Result<Manifest, String> {
    let m: Manifest =
        serde_json::from_slice(body).map_err(|e| format!("its manifest is not JSON: {e}"))?;
    let t = m.media_type.as_deref().unwrap_or(media_type);
    if !client::MANIFEST_TYPES.contains(&t) {
        return Err(format!("unknown manifest media type {t:?}"));
    }
    Ok(m)
}

fn is_index(m: &Manifest, media_type: &str) -> bool {
    INDEX_TYPES.contains(&m.media_type.as_deref().unwrap_or(media_type))
}

async fn read_config(
    client: &Client,
    r: &Reference,
    creds: &Credentials,
    d: &Descriptor,
    settings: &Settings,
) -> Result<ConfigFile, String> {
    let bytes = match settings.cache.config(&d.digest) {
        Some(b) => b,
        None => {
            if d.size > MAX_CONFIG_BYTES as u64 {
                return Err(format!(
                    "its config is {} bytes, more than {MAX_CONFIG_BYTES}",
                    d.size
                ));
            }
            let b = timed(
                REQUEST_TIMEOUT,
                client.small_blob(r, &d.digest, creds, MAX_CONFIG_BYTES),
            )
            .await
            .map_err(|e| format!("config: {e}"))?;
            settings.cache.put_config(&d.digest, &b);
            b
        }
    };
    serde_json::from_slice(&bytes).map_err(|e| format!("config {}: {e}", d.digest))
}

async fn read_layer(
    client: &Client,
    r: &Reference,
    creds: &Credentials,
    d: Descriptor,
    settings: &Settings,
) -> Result<Vec<layer::Change>, String> {
    if let Some(c) = settings.cache.layer(&d.digest) {
        return Ok(c);
    }
    let compression = layer::Compression::from_media_type(&d.media_type)
        .ok_or_else(|| format!("layer {}: unknown media type {}", d.digest, d.media_type))?;
    let what = format!("layer {}", d.digest);
    let verifier = client::Verifier::new(&d.digest)?;
    let listed = tokio::time::timeout(LAYER_TIMEOUT, async {
        let stream = timed(REQUEST_TIMEOUT, client.blob(r, &d.digest, creds))
            .await
            .map_err(|e| format!("{what}: {e}"))?;
        let reader = tokio_util::io::StreamReader::new(stream);
        let bridge = tokio_util::io::SyncIoBridge::new(reader);
        tokio::task::spawn_blocking(move || {
            let mut src = client::Verifying {
                inner: bridge,
                verifier,
            };
            let changes = layer::list(&mut src, compression).map_err(|e| chain(&e))?;
            // Read what the tar left (its padding) so that the digest covers every byte.
            std::io::copy(&mut src, &mut std::io::sink()).map_err(|e| chain(&e))?;
            src.verifier.finish()?;
            Ok::<_, String>(changes)
        })
        .await
        .map_err(|e| format!("{what}: {e}"))?
        .map_err(|e| format!("{what}: {e}"))
    })
    .await
    .map_err(|_| format!("{what}: not read within {}s", LAYER_TIMEOUT.as_secs()))??;
    settings.cache.put_layer(&d.digest, &listed);
    Ok(listed)
}
