//! (the control plane) Auto-TLS, the default without `--tls-cert-file`: as Vault's agent injector does, the webhook
//! makes its own CA and an ECDSA P-256 serving certificate at start, puts the CA into its
//! MutatingWebhookConfiguration's `caBundle`, and renews the serving certificate before it
//! expires, in memory, without a restart.
//!
//! Replicas agree without talking to each other: each has its own CA (in memory only, never
//! written anywhere but the bundle) and *adds* it to every webhook's bundle, which keeps the
//! newest [`MAX_BUNDLE`] CAs. The API server trusts any CA in a bundle, so it trusts every live
//! replica. Each replica checks every [`BUNDLE_RECHECK`] (and at each renewal) that its CA is still there (another
//! replica's restarts may have pushed it out, or a `kubectl apply` of the manifest emptied the
//! bundle) and adds it again. Writes are a GET and a PATCH with the `resourceVersion` read, so
//! two replicas writing at once cannot lose each other's CA: the later one gets a 409 and
//! retries. RBAC: get and patch on that one configuration, by name (k8s/webhook/rbac.yaml).

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use base64::Engine;
use hyper::{Method, StatusCode};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose,
};
use rustls::sign::CertifiedKey;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio_util::sync::CancellationToken;

use super::apiserver::{Client, json_answer};
use super::tls::Reloading;

/// The CA's lifetime. It lives in memory as long as the process, and a pod runs for days to
/// months: ten years means it never expires under a running replica (the leaf is what is short).
pub const CA_VALIDITY: Duration = Duration::from_secs(10 * 365 * 24 * 3600);
/// How far back a certificate's `notBefore` is set, for API servers whose clock is behind this
/// node's (the same minute of slack cert-manager's `notBefore` allows for).
pub const CLOCK_SKEW: Duration = Duration::from_secs(60);
/// The serving certificate is renewed when this share of its validity has passed: 2/3, the point
/// at which cert-manager renews by default (`renewBefore` a third of the duration).
pub const RENEW_AFTER: (u32, u32) = (2, 3);
/// Most CAs a bundle keeps (the newest): room for both replicas of k8s/webhook/ and the CAs of a
/// few rollouts, while replicas that died long ago drop out.
pub const MAX_BUNDLE: usize = 8;
/// How often a replica checks that its CA is still in the bundle (and at every renewal).
pub const BUNDLE_RECHECK: Duration = Duration::from_secs(60);
/// PATCHes that lose to another writer (409) are retried this often, at once.
pub const PATCH_ATTEMPTS: usize = 5;
/// The wait before trying again after the API server could not be reached.
pub const RETRY_AFTER: Duration = Duration::from_secs(5);

/// The webhook's own CA.
pub struct Ca {
    cert: rcgen::Certificate,
    key: KeyPair,
    /// The CA certificate as the bundle holds it.
    pub pem: String,
}

fn validity(params: &mut CertificateParams, lasts: Duration) {
    let now = time::OffsetDateTime::now_utc();
    params.not_before = now - CLOCK_SKEW;
    params.not_after = now + lasts;
}

impl Ca {
    /// A new CA, named for the configuration it serves.
    pub fn new(name: &str) -> Result<Ca> {
        let key = KeyPair::generate().context("a CA key")?;
        let mut params = CertificateParams::new(Vec::<String>::new()).context("CA parameters")?;
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        params
            .distinguished_name
            .push(DnType::CommonName, format!("hooklog webhook CA ({name})"));
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        validity(&mut params, CA_VALIDITY);
        let cert = params.self_signed(&key).context("the CA certificate")?;
        let pem = cert.pem();
        Ok(Ca { cert, key, pem })
    }

    /// A serving certificate for `sans` (IP addresses or DNS names) valid for `lasts`.
    pub fn leaf(&self, sans: &[String], lasts: Duration) -> Result<CertifiedKey> {
        let key = KeyPair::generate().context("a serving key")?;
        let mut params = CertificateParams::new(sans.to_vec()).context("--tls-san")?;
        params.distinguished_name.push(
            DnType::CommonName,
            sans.first().cloned().unwrap_or_default(),
        );
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.use_authority_key_identifier_extension = true;
        validity(&mut params, lasts);
        let cert = params
            .signed_by(&key, &self.cert, &self.key)
            .context("the serving certificate")?;
        let der = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        let signer = rustls::crypto::ring::sign::any_supported_type(&der)
            .context("a key rustls signs with")?;
        Ok(CertifiedKey::new(
            vec![
                CertificateDer::from(cert.der().to_vec()),
                CertificateDer::from(self.cert.der().to_vec()),
            ],
            signer,
        ))
    }
}

/// When a certificate valid for `lasts` is renewed.
pub fn renew_after(lasts: Duration) -> Duration {
    lasts * RENEW_AFTER.0 / RENEW_AFTER.1
}

/// The PEM certificates in `text`, each as written (`-----BEGIN` to `-----END ...-----`).
fn pems(text: &str) -> Vec<&str> {
    const END: &str = "-----END CERTIFICATE-----";
    let mut out = Vec::new();
    let mut rest = text;
    while let (Some(b), Some(e)) = (rest.find("-----BEGIN CERTIFICATE-----"), rest.find(END)) {
        if e < b {
            rest = &rest[e + END.len()..];
            continue;
        }
        out.push(&rest[b..e + END.len()]);
        rest = &rest[e + END.len()..];
    }
    out
}

/// The bundle (base64 of PEM, as `caBundle` holds it) with `ca` added, keeping the newest
/// [`MAX_BUNDLE`]; `None` when `ca` is in it already. What is not a PEM certificate is dropped.
pub fn with_ca(bundle_b64: Option<&str>, ca: &str) -> Option<String> {
    let b64 = base64::engine::general_purpose::STANDARD;
    let text = bundle_b64
        .and_then(|b| b64.decode(b.trim()).ok())
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default();
    let mine = ca.trim();
    let mut kept: Vec<&str> = pems(&text);
    if kept.contains(&mine) {
        return None;
    }
    kept.push(mine);
    let drop = kept.len().saturating_sub(MAX_BUNDLE);
    let joined: String = kept[drop..].iter().map(|p| format!("{p}\n")).collect();
    Some(b64.encode(joined))
}

/// Makes sure every webhook of the configuration `name` trusts `ca`: GET it, and PATCH the
/// bundles that lack it, with the `resourceVersion` read (a 409 means another replica wrote in
/// between: read again). True when it wrote.
pub async fn keep_bundle(client: &Client, name: &str, ca: &str) -> Result<bool> {
    let path =
        format!("/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/{name}");
    for _ in 0..PATCH_ATTEMPTS {
        let config = client.get_json(&path).await?;
        let Some(patch) = bundle_patch(&config, ca) else {
            return Ok(false);
        };
        let (status, body) = client
            .request(
                Method::PATCH,
                &path,
                Some("application/strategic-merge-patch+json"),
                patch.to_string().into_bytes(),
            )
            .await?;
        if status == StatusCode::CONFLICT {
            continue;
        }
        json_answer(status, &body).with_context(|| format!("PATCH {path}"))?;
        return Ok(true);
    }
    anyhow::bail!("PATCH {path}: still conflicting after {PATCH_ATTEMPTS} attempts")
}

/// The strategic merge patch (webhooks merge by `name`) that adds `ca` to each webhook's bundle
/// that lacks it, with `config`'s `resourceVersion` as the precondition; `None` when none does.
pub fn bundle_patch(config: &serde_json::Value, ca: &str) -> Option<serde_json::Value> {
    let hooks: Vec<serde_json::Value> = config["webhooks"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|w| {
            let bundle = with_ca(w["clientConfig"]["caBundle"].as_str(), ca)?;
            Some(serde_json::json!({"name": w["name"], "clientConfig": {"caBundle": bundle}}))
        })
        .collect();
    if hooks.is_empty() {
        return None;
    }
    Some(serde_json::json!({
        "metadata": {"resourceVersion": config["metadata"]["resourceVersion"]},
        "webhooks": hooks,
    }))
}

/// What auto-TLS needs after start.
pub struct AutoTls {
    pub ca: Ca,
    /// The serving certificate's names.
    pub sans: Vec<String>,
    /// Each serving certificate's validity (`--cert-validity`).
    pub lasts: Duration,
    pub client: Client,
    /// The MutatingWebhookConfiguration whose bundles hold the CA (`--webhook-config`).
    pub config: String,
}

impl AutoTls {
    /// Until `stop`: renews the serving certificate at [`RENEW_AFTER`] of its validity, and
    /// puts the CA back into the bundle, every [`BUNDLE_RECHECK`] and at each renewal, if it
    /// went missing.
    pub async fn run(self, certs: Arc<Reloading>, stop: CancellationToken) {
        let mut renew = tokio::time::Instant::now() + renew_after(self.lasts);
        let mut recheck = tokio::time::interval(BUNDLE_RECHECK);
        recheck.tick().await;
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep_until(renew) => {
                    match self.ca.leaf(&self.sans, self.lasts) {
                        Ok(ck) => {
                            certs.replace(ck);
                            renew = tokio::time::Instant::now() + renew_after(self.lasts);
                            tracing::info!(valid = ?self.lasts, next = ?renew_after(self.lasts), "serving certificate renewed");
                            self.check_bundle().await;
                        }
                        Err(e) => {
                            renew = tokio::time::Instant::now() + RETRY_AFTER;
                            tracing::warn!(error = %format!("{e:#}"), "serving certificate not renewed; trying again");
                        }
                    }
                }
                _ = recheck.tick() => self.check_bundle().await,
            }
        }
    }

    /// Puts the CA back into the bundle if it went missing; a failure is logged and tried again
    /// at the next check.
    async fn check_bundle(&self) {
        match keep_bundle(&self.client, &self.config, &self.ca.pem).await {
            Ok(true) => {
                tracing::info!(config = %self.config, "CA was missing from caBundle; added again")
            }
            Ok(false) => {}
            Err(e) => {
                tracing::warn!(config = %self.config, error = %format!("{e:#}"), "caBundle not checked")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::client::danger::ServerCertVerifier;

    fn pem(n: usize) -> String {
        format!("-----BEGIN CERTIFICATE-----\nCA{n}\n-----END CERTIFICATE-----")
    }

    fn decoded(b64: &str) -> String {
        String::from_utf8(
            base64::engine::general_purpose::STANDARD
                .decode(b64)
                .expect("base64"),
        )
        .expect("utf-8")
    }

    #[test]
    fn a_ca_is_added_once_and_the_oldest_fall_out() {
        let one = with_ca(None, &pem(1)).expect("added");
        assert_eq!(decoded(&one), format!("{}\n", pem(1)));
        assert_eq!(with_ca(Some(&one), &pem(1)), None, "added twice");
        let mut bundle = one;
        for n in 2..=MAX_BUNDLE + 2 {
            bundle = with_ca(Some(&bundle), &pem(n)).expect("added");
        }
        let text = decoded(&bundle);
        assert_eq!(pems(&text).len(), MAX_BUNDLE);
        assert!(!text.contains("CA1\n") && !text.contains("CA2\n") && text.contains("CA3\n"));
        assert!(text.ends_with(&format!("{}\n", pem(MAX_BUNDLE + 2))));
    }

    #[test]
    fn garbage_in_a_bundle_is_dropped() {
        let junk = base64::engine::general_purpose::STANDARD.encode("not a cert\n");
        let got = with_ca(Some(&junk), &pem(1)).expect("added");
        assert_eq!(decoded(&got), format!("{}\n", pem(1)));
        assert!(with_ca(Some("%%% not base64"), &pem(1)).is_some());
    }

    #[test]
    fn the_patch_touches_only_bundles_without_the_ca_and_carries_the_version() {
        let has = with_ca(None, &pem(1)).expect("added");
        let config = serde_json::json!({
            "metadata": {"name": "hooklog-webhook", "resourceVersion": "42"},
            "webhooks": [
                {"name": "a.hooklog.dev", "clientConfig": {"caBundle": has}},
                {"name": "b.hooklog.dev", "clientConfig": {"url": "https://x"}},
            ]
        });
        let patch = bundle_patch(&config, &pem(1)).expect("b lacks it");
        assert_eq!(patch["metadata"]["resourceVersion"], "42");
        assert_eq!(patch["webhooks"].as_array().expect("list").len(), 1);
        assert_eq!(patch["webhooks"][0]["name"], "b.hooklog.dev");
        let mut done = config.clone();
        done["webhooks"][1]["clientConfig"]["caBundle"] =
            patch["webhooks"][0]["clientConfig"]["caBundle"].clone();
        assert_eq!(bundle_patch(&done, &pem(1)), None);
    }

    #[test]
    fn a_leaf_is_signed_by_the_ca_for_its_names_and_renewed_at_two_thirds() {
        let ca = Ca::new("t").expect("CA");
        let sans = [
            "127.0.0.1".to_string(),
            "hooklog-webhook.hooklog.svc".into(),
        ];
        let ck = ca.leaf(&sans, Duration::from_secs(30)).expect("leaf");
        ck.keys_match().expect("the key is the leaf's");
        assert_eq!(ck.cert.len(), 2);
        let mut roots = rustls::RootCertStore::empty();
        roots
            .add(CertificateDer::from(ca.cert.der().to_vec()))
            .expect("root");
        let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(
            Arc::new(roots),
            Arc::new(rustls::crypto::ring::default_provider()),
        )
        .build()
        .expect("verifier");
        for name in ["127.0.0.1", "hooklog-webhook.hooklog.svc"] {
            verifier
                .verify_server_cert(
                    &ck.cert[0],
                    &ck.cert[1..],
                    &rustls_pki_types::ServerName::try_from(name).expect("name"),
                    &[],
                    rustls_pki_types::UnixTime::now(),
                )
                .unwrap_or_else(|e| panic!("{name}: {e}"));
        }
        assert!(
            verifier
                .verify_server_cert(
                    &ck.cert[0],
                    &[],
                    &rustls_pki_types::ServerName::try_from("other.svc").expect("name"),
                    &[],
                    rustls_pki_types::UnixTime::now(),
                )
                .is_err()
        );
        assert_eq!(
            renew_after(Duration::from_secs(30)),
            Duration::from_secs(20)
        );
    }
}
