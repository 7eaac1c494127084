//! (the control plane) The serving certificate: read from `--tls-cert-file`/`--tls-key-file`, and read again when
//! either file changes (cert-manager renews a Secret; the kubelet swaps the mounted files), so a
//! renewal needs no restart. A change that does not parse keeps the certificate in use. Or, with
//! auto-TLS ([`super::autotls`]), made in memory and swapped by [`Reloading::replace`] at renewal.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime};

use anyhow::{Context, Result};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio_util::sync::CancellationToken;

/// How often the files are looked at. A mounted Secret changes at most once per kubelet sync
/// (about a minute), and cert-manager renews a third of a lifetime early: seconds are plenty.
pub const RELOAD_POLL: Duration = Duration::from_secs(2);

/// The certificate in use, swapped whole when the files change (or auto-TLS renews it).
#[derive(Debug)]
pub struct Reloading {
    /// Empty for a certificate made in memory: nothing to read again.
    cert_file: PathBuf,
    key_file: PathBuf,
    current: RwLock<Arc<CertifiedKey>>,
    /// What the files looked like when `current` was read: `(modified, length)` of each.
    seen: RwLock<Stamp>,
}

type Stamp = [(Option<SystemTime>, u64); 2];

fn stamp(cert: &Path, key: &Path) -> Stamp {
    let one = |p: &Path| {
        std::fs::metadata(p)
            .map(|m| (m.modified().ok(), m.len()))
            .unwrap_or((None, 0))
    };
    [one(cert), one(key)]
}

/// Reads a PEM chain and key into a key rustls serves with.
pub fn load(cert_file: &Path, key_file: &Path) -> Result<CertifiedKey> {
    let certs = CertificateDer::pem_file_iter(cert_file)
        .with_context(|| format!("{}", cert_file.display()))?
        .collect::<Result<Vec<_>, _>>()
        .with_context(|| format!("{}: not a PEM certificate chain", cert_file.display()))?;
    anyhow::ensure!(!certs.is_empty(), "{}: no certificate", cert_file.display());
    let key = PrivateKeyDer::from_pem_file(key_file)
        .with_context(|| format!("{}: not a PEM private key", key_file.display()))?;
    let signer = rustls::crypto::ring::sign::any_supported_type(&key)
        .with_context(|| format!("{}: a key rustls cannot sign with", key_file.display()))?;
    let ck = CertifiedKey::new(certs, signer);
    ck.keys_match().with_context(|| {
        format!(
            "{} does not belong to {}",
            key_file.display(),
            cert_file.display()
        )
    })?;
    Ok(ck)
}

impl Reloading {
    /// Reads the files once: a certificate that cannot be read now is a usage error.
    pub fn open(cert_file: PathBuf, key_file: PathBuf) -> Result<Self> {
        let seen = stamp(&cert_file, &key_file);
        let ck = load(&cert_file, &key_file)?;
        Ok(Reloading {
            cert_file,
            key_file,
            current: RwLock::new(Arc::new(ck)),
            seen: RwLock::new(seen),
        })
    }

    /// A certificate made in memory (auto-TLS): [`Reloading::replace`] renews it.
    pub fn in_memory(ck: CertifiedKey) -> Self {
        Reloading {
            cert_file: PathBuf::new(),
            key_file: PathBuf::new(),
            current: RwLock::new(Arc::new(ck)),
            seen: RwLock::new([(None, 0); 2]),
        }
    }

    /// Serves `ck` from the next handshake on; connections already open keep theirs.
    pub fn replace(&self, ck: CertifiedKey) {
        *self.current.write().expect("no writer panics") = Arc::new(ck);
    }

    /// Reads the files again if they changed; true when a new certificate is in use.
    pub fn refresh(&self) -> bool {
        if self.cert_file.as_os_str().is_empty() {
            return false;
        }
        let now = stamp(&self.cert_file, &self.key_file);
        if *self.seen.read().expect("no writer panics") == now {
            return false;
        }
        // Remembered even when it fails: a half-written pair is read again at its next change.
        *self.seen.write().expect("no writer panics") = now;
        match load(&self.cert_file, &self.key_file) {
            Ok(ck) => {
                self.replace(ck);
                tracing::info!(cert = %self.cert_file.display(), "serving certificate reloaded");
                true
            }
            Err(e) => {
                tracing::warn!(error = %format!("{e:#}"), "serving certificate changed but does not load; keeping the old one");
                false
            }
        }
    }

    /// Polls the files every [`RELOAD_POLL`] until `stop`.
    pub async fn watch(self: Arc<Self>, stop: CancellationToken) {
        let mut tick = tokio::time::interval(RELOAD_POLL);
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tick.tick() => {
                    let me = self.clone();
                    // A stat and, rarely, two small reads: off the async threads all the same.
                    if let Err(e) = tokio::task::spawn_blocking(move || me.refresh()).await {
                        tracing::warn!(error = %e, "certificate reload task failed");
                    }
                }
            }
        }
    }
}

impl ResolvesServerCert for Reloading {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current.read().expect("no writer panics").clone())
    }
}

/// The TLS settings: TLS 1.2 and 1.3 (the API server's client speaks both), HTTP/1.1.
pub fn server_config(certs: Arc<Reloading>) -> Result<rustls::ServerConfig> {
    let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .context("TLS protocol versions")?
    .with_no_client_auth()
    .with_cert_resolver(certs);
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}
