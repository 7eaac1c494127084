//! Images read from their registries, as the container runtime would pull them: the OCI
//! distribution API (through `oci-client`) resolves a reference to the manifest of the wanted
//! platform, and each layer is streamed, decompressed and listed ([`layer`]), never stored, then
//! the layers are laid over each other with their whiteouts. Credentials come from where the
//! container tools keep them ([`auth`]); layer lists and configs are cached by digest
//! ([`cache`]). Knows nothing of manifests: `check` asks for `(image, arch)` pairs.

pub mod auth;
pub mod cache;
pub mod layer;

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures_util::StreamExt;
use oci_client::client::{ClientConfig, ClientProtocol};
use oci_client::manifest::{OciDescriptor, OciManifest};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};
use serde::{Deserialize, Serialize};

/// Connecting to a registry (a TCP and TLS handshake; reqwest's `connect_timeout`). A registry
/// that does not answer in this time is unreadable, and `check` falls back to patterns.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Between two reads of one response (reqwest's `read_timeout`, reset by each chunk): a stalled
/// layer download ends after this long.
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
pub const MAX_CONFIG_BYTES: i64 = 4 << 20;
/// Progress goes to stderr (a terminal only) once a lookup has taken this long.
const PROGRESS_AFTER: Duration = Duration::from_secs(1);

/// A file system entry, as far as command lookup cares.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Entry {
    File { mode: u32 },
    Dir,
    Symlink(String),
}

/// The CPU architectures nodes run (EKS and Fargate: amd64 and arm64).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, clap::ValueEnum)]
pub enum Arch {
    Amd64,
    Arm64,
}

impl Arch {
    /// Go's GOARCH, as image indexes spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Arch::Amd64 => "amd64",
            Arch::Arm64 => "arm64",
        }
    }

    pub fn parse(s: &str) -> Option<Arch> {
        match s {
            "amd64" => Some(Arch::Amd64),
            "arm64" => Some(Arch::Arm64),
            _ => None,
        }
    }
}

/// How images are read.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Registries (`host[:port]`) spoken to over plain HTTP.
    pub insecure: Vec<String>,
    pub cache: cache::Cache,
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
    // rustls needs one process-wide provider: ring, which the AWS SDK already links. Already
    // installed is fine.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let config = ClientConfig {
        protocol: ClientProtocol::HttpsExcept(settings.insecure.clone()),
        connect_timeout: Some(CONNECT_TIMEOUT),
        read_timeout: Some(READ_TIMEOUT),
        ..Default::default()
    };
    let client = match Client::try_from(config) {
        Ok(c) => c,
        Err(e) => {
            let why = format!("cannot make a registry client: {}", chain(&e));
            return wanted
                .iter()
                .map(|w| (w.clone(), Err(why.clone())))
                .collect();
        }
    };
    let done = Arc::new(AtomicUsize::new(0));
    let progress = tokio::spawn(progress(done.clone(), wanted.len()));
    let results = futures_util::stream::iter(wanted.iter().cloned())
        .map(|(image, arch)| {
            let client = client.clone();
            let done = done.clone();
            async move {
                let r = read_image(&client, &image, arch, settings).await;
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
fn chain(e: &dyn std::error::Error) -> String {
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

async fn timed<T, E: std::error::Error>(
    what: &str,
    limit: Duration,
    f: impl std::future::Future<Output = Result<T, E>>,
) -> Result<T, String> {
    match tokio::time::timeout(limit, f).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(format!("{what}: {}", chain(&e))),
        Err(_) => Err(format!("{what}: no answer within {}s", limit.as_secs())),
    }
}

async fn read_image(
    client: &Client,
    image: &str,
    arch: Arch,
    settings: &Settings,
) -> Result<Image, String> {
    let reference =
        Reference::try_from(image).map_err(|e| format!("not an image reference: {e}"))?;
    let registry = reference.resolve_registry().to_string();
    let creds = tokio::task::spawn_blocking({
        let registry = registry.clone();
        move || auth::credentials(&registry)
    })
    .await
    .map_err(|e| format!("credentials: {e}"))??;
    let auth = match creds {
        auth::Credentials::Anonymous => RegistryAuth::Anonymous,
        auth::Credentials::Basic { username, password } => RegistryAuth::Basic(username, password),
        // An identity token is an OAuth2 refresh token, exchanged at the realm with
        // `grant_type=refresh_token`: oci-client has no such exchange, and sending it as a
        // registry token would be refused anyway.
        auth::Credentials::Token(_) => {
            return Err(format!(
                "the credentials for {registry} are an identity token (OAuth2 refresh token), which hooklog cannot exchange; give a user and password or a credential helper"
            ));
        }
    };
    let (manifest, digest) = timed(
        "manifest",
        REQUEST_TIMEOUT,
        client.pull_manifest(&reference, &auth),
    )
    .await?;
    let (manifest, digest) = match manifest {
        OciManifest::Image(m) => (m, digest),
        OciManifest::ImageIndex(index) => {
            let entry = index
                .manifests
                .iter()
                .find(|m| {
                    m.platform.as_ref().is_some_and(|p| {
                        p.os.to_string() == "linux" && p.architecture.to_string() == arch.as_str()
                    })
                })
                .ok_or_else(|| {
                    let has: Vec<String> = index
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
            let pinned = reference.clone_with_digest(entry.digest.clone());
            match timed(
                "manifest",
                REQUEST_TIMEOUT,
                client.pull_manifest(&pinned, &auth),
            )
            .await?
            {
                (OciManifest::Image(m), _) => (m, entry.digest.clone()),
                _ => return Err("its index names another index".to_string()),
            }
        }
    };
    let config = read_config(client, &reference, &manifest.config, settings).await?;
    let layers: Vec<Vec<layer::Change>> =
        futures_util::stream::iter(manifest.layers.iter().cloned())
            .map(|d| read_layer(client, &reference, d, settings))
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

async fn read_config(
    client: &Client,
    reference: &Reference,
    d: &OciDescriptor,
    settings: &Settings,
) -> Result<ConfigFile, String> {
    let bytes = match settings.cache.config(&d.digest) {
        Some(b) => b,
        None => {
            if d.size > MAX_CONFIG_BYTES {
                return Err(format!(
                    "its config is {} bytes, more than {MAX_CONFIG_BYTES}",
                    d.size
                ));
            }
            let mut buf = Vec::new();
            timed(
                "config",
                REQUEST_TIMEOUT,
                client.pull_blob(reference, d, &mut buf),
            )
            .await?;
            settings.cache.put_config(&d.digest, &buf);
            buf
        }
    };
    serde_json::from_slice(&bytes).map_err(|e| format!("config {}: {e}", d.digest))
}

async fn read_layer(
    client: &Client,
    reference: &Reference,
    d: OciDescriptor,
    settings: &Settings,
) -> Result<Vec<layer::Change>, String> {
    if let Some(c) = settings.cache.layer(&d.digest) {
        return Ok(c);
    }
    let compression = layer::Compression::from_media_type(&d.media_type)
        .ok_or_else(|| format!("layer {}: unknown media type {}", d.digest, d.media_type))?;
    let what = format!("layer {}", d.digest);
    let listed = tokio::time::timeout(LAYER_TIMEOUT, async {
        let blob = timed(
            &what,
            REQUEST_TIMEOUT,
            client.pull_blob_stream(reference, &d),
        )
        .await?;
        let reader = tokio_util::io::StreamReader::new(blob.stream);
        let mut bridge = tokio_util::io::SyncIoBridge::new(reader);
        tokio::task::spawn_blocking(move || {
            let changes = layer::list(&mut bridge, compression)?;
            // Read what the tar left (its padding) so that the digest is checked at the end.
            std::io::copy(&mut bridge, &mut std::io::sink())?;
            Ok::<_, std::io::Error>(changes)
        })
        .await
        .map_err(|e| format!("{what}: {e}"))?
        .map_err(|e| format!("{what}: {}", chain(&e)))
    })
    .await
    .map_err(|_| format!("{what}: not read within {}s", LAYER_TIMEOUT.as_secs()))??;
    settings.cache.put_layer(&d.digest, &listed);
    Ok(listed)
}
