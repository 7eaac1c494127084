//! (the sidecar) Where the CloudWatch client's credentials come from: the part of the AWS SDK's
//! default chain a pod can use, in its order, the first source that is configured being the
//! one used:
//! 1. the environment: `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`;
//! 2. web identity (EKS IRSA): `AWS_WEB_IDENTITY_TOKEN_FILE` and `AWS_ROLE_ARN` (and
//!    `AWS_ROLE_SESSION_NAME`), exchanged with STS `AssumeRoleWithWebIdentity` at the region's
//!    endpoint (`AWS_ENDPOINT_URL_STS` or `AWS_ENDPOINT_URL` override it);
//! 3. container credentials (EKS Pod Identity, ECS): `AWS_CONTAINER_CREDENTIALS_RELATIVE_URI`
//!    on 169.254.170.2, or `AWS_CONTAINER_CREDENTIALS_FULL_URI` with the token of
//!    `AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE` (read again each time) or
//!    `AWS_CONTAINER_AUTHORIZATION_TOKEN`;
//! 4. the EC2 instance metadata service, IMDSv2 (a session token, then the role and its
//!    credentials), unless `AWS_EC2_METADATA_DISABLED=true`; `AWS_EC2_METADATA_SERVICE_ENDPOINT`
//!    moves it.
//!
//! Temporary credentials are kept until [`REFRESH_BEFORE`] their expiry, then fetched again.
//! A source that fails or answers with expired credentials is said once, in one warning, until
//! it works again; the caller retries with its backoff (retry.rs), so there is no busy loop.
//! Profiles (`~/.aws/credentials`, `AWS_PROFILE`), SSO and `credential_process` are not read:
//! a pod has none of them.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::clock::parse_rfc3339_ms;
use super::http::{self, Url};
use super::sigv4::Credentials;

/// Temporary credentials are fetched again this long before they expire. EC2 makes new role
/// credentials available "at least five minutes before the expiration of the old credentials"
/// (<https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/iam-roles-for-amazon-ec2.html>,
/// "Retrieve security credentials from instance metadata").
pub const REFRESH_BEFORE: Duration = Duration::from_secs(5 * 60);

/// Longest one fetch from a source may take, all its calls together (the SDK's container
/// provider reads for at most 5 s, its IMDS client 1 s per call with retries).
const FETCH_TIMEOUT: Duration = Duration::from_secs(5);

/// Longest wait for the connection to a credential source. The metadata services are
/// link-local: they answer within milliseconds or are not there (the SDK's IMDS client waits 1 s,
/// its container provider 2 s).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// The ECS / EKS container credentials host for `AWS_CONTAINER_CREDENTIALS_RELATIVE_URI`
/// (<https://docs.aws.amazon.com/AmazonECS/latest/developerguide/task-iam-roles.html>).
const ECS_HOST: &str = "http://169.254.170.2";

/// The hosts `AWS_CONTAINER_CREDENTIALS_FULL_URI` may name over plain http besides loopback:
/// ECS's, and EKS Pod Identity's agent (IPv4 and IPv6,
/// <https://docs.aws.amazon.com/eks/latest/userguide/pod-id-how-it-works.html>), as the SDK
/// allows.
const CONTAINER_HOSTS: [&str; 3] = ["169.254.170.2", "169.254.170.23", "fd00:ec2::23"];

/// The instance metadata service (IPv4).
const IMDS_ENDPOINT: &str = "http://169.254.169.254";

/// Lifetime asked for an IMDSv2 session token, the SDK's (6 hours, the most IMDS allows).
const IMDS_TOKEN_TTL_S: &str = "21600";

/// STS's API version for the Query protocol.
const STS_VERSION: &str = "2011-06-15";

/// Where the credentials come from.
#[derive(Debug)]
enum Source {
    /// Keys in the environment.
    Static(Arc<Credentials>),
    /// IRSA: a projected service account token exchanged with STS.
    WebIdentity {
        /// The token, read again for each exchange (the kubelet rotates it).
        token_file: PathBuf,
        /// The role to assume.
        role_arn: String,
        /// The session's name, in CloudTrail.
        session_name: String,
        /// STS's endpoint.
        sts: Url,
    },
    /// ECS or EKS Pod Identity.
    Container {
        /// The credentials URL.
        url: Url,
        /// `AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE`, read for each fetch.
        token_file: Option<PathBuf>,
        /// `AWS_CONTAINER_AUTHORIZATION_TOKEN`.
        token: Option<Secret>,
    },
    /// IMDSv2.
    Imds {
        /// The service's base URL.
        base: Url,
    },
    /// A source is configured but unusable (a bad URL): the reason.
    Broken(String),
    /// Nothing configured.
    Nothing,
}

/// A token never shown in `Debug`.
#[derive(Clone)]
struct Secret(String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<redacted>")
    }
}

/// The credentials in use and whether the source is failing.
#[derive(Debug, Default)]
struct State {
    /// The last credentials fetched.
    creds: Option<Arc<Credentials>>,
    /// The last fetch failed: already warned.
    failing: bool,
}

/// The credential chain, with its cache.
#[derive(Debug)]
pub struct Provider {
    /// The source picked at start.
    source: Source,
    /// Serialises fetches, so callers at the same moment make one.
    state: tokio::sync::Mutex<State>,
}

fn nonempty(env: &impl Fn(&str) -> Option<String>, key: &str) -> Option<String> {
    env(key)
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
}

/// The endpoint a service's calls go to: `AWS_ENDPOINT_URL_<SERVICE>`, then
/// `AWS_ENDPOINT_URL` (unless `AWS_IGNORE_CONFIGURED_ENDPOINT_URLS=true`), as the SDKs read them
/// (<https://docs.aws.amazon.com/sdkref/latest/guide/feature-ss-endpoints.html>).
pub fn configured_endpoint(
    env: &impl Fn(&str) -> Option<String>,
    service_key: &str,
) -> Option<String> {
    if nonempty(env, "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS")
        .is_some_and(|v| v.eq_ignore_ascii_case("true"))
    {
        return None;
    }
    nonempty(env, &format!("AWS_ENDPOINT_URL_{service_key}"))
        .or_else(|| nonempty(env, "AWS_ENDPOINT_URL"))
}

/// The domain of a region's AWS endpoints: `amazonaws.com`, or `amazonaws.com.cn` in China.
pub fn dns_suffix(region: &str) -> &'static str {
    if region.starts_with("cn-") {
        "amazonaws.com.cn"
    } else {
        "amazonaws.com"
    }
}

impl Provider {
    /// Picks the first configured source from `env`. `region` gives STS's regional endpoint.
    pub fn from_env(env: impl Fn(&str) -> Option<String>, region: Option<&str>) -> Provider {
        Provider {
            source: pick(&env, region),
            state: tokio::sync::Mutex::new(State::default()),
        }
    }

    /// The source's name, for the logs.
    pub fn source_name(&self) -> &'static str {
        match self.source {
            Source::Static(_) => "env",
            Source::WebIdentity { .. } => "web identity",
            Source::Container { .. } => "container",
            Source::Imds { .. } => "instance metadata",
            Source::Broken(_) => "misconfigured",
            Source::Nothing => "none",
        }
    }

    /// Whether any source is configured.
    pub fn is_configured(&self) -> bool {
        !matches!(self.source, Source::Nothing)
    }

    /// Credentials valid at `now_ms` (CloudWatch's clock: the issuer's): the cached ones until
    /// [`REFRESH_BEFORE`] their expiry, else fetched again. A failure is warned once per streak.
    pub async fn credentials(
        &self,
        client: &http::Client,
        now_ms: i64,
    ) -> Result<Arc<Credentials>, String> {
        if let Source::Static(c) = &self.source {
            return Ok(c.clone());
        }
        let mut state = self.state.lock().await;
        let refresh_ms = i64::try_from(REFRESH_BEFORE.as_millis()).unwrap_or(i64::MAX);
        if let Some(c) = &state.creds
            && c.expires_ms
                .is_none_or(|e| e.saturating_sub(refresh_ms) > now_ms)
        {
            return Ok(c.clone());
        }
        let fetched = match tokio::time::timeout(FETCH_TIMEOUT, self.fetch(client)).await {
            Ok(r) => r,
            Err(_) => Err(format!("no answer within {} ms", FETCH_TIMEOUT.as_millis())),
        }
        .and_then(|c| match c.expires_ms {
            Some(e) if e <= now_ms => Err(format!(
                "the credentials it gave expired at {}",
                String::from_utf8_lossy(&crate::timefmt::rfc3339_ms(e))
            )),
            _ => Ok(c),
        });
        match fetched {
            Ok(c) => {
                if state.failing {
                    tracing::info!(
                        source = self.source_name(),
                        "cloudwatch: credentials obtained"
                    );
                }
                tracing::debug!(source = self.source_name(), expires_ms = ?c.expires_ms, "cloudwatch credentials fetched");
                let c = Arc::new(c);
                state.creds = Some(c.clone());
                state.failing = false;
                Ok(c)
            }
            Err(e) => {
                let e = format!("credentials ({}): {e}", self.source_name());
                if !state.failing {
                    tracing::warn!(error = %e, "cloudwatch: cannot get credentials: nothing can be sent until they come");
                    state.failing = true;
                } else {
                    tracing::debug!(error = %e, "cloudwatch: still no credentials");
                }
                // Credentials near their expiry but not past it still sign.
                match &state.creds {
                    Some(c) if c.expires_ms.is_some_and(|x| x > now_ms) => Ok(c.clone()),
                    _ => Err(e),
                }
            }
        }
    }

    async fn fetch(&self, client: &http::Client) -> Result<Credentials, String> {
        match &self.source {
            Source::Static(c) => Ok((**c).clone()),
            Source::WebIdentity {
                token_file,
                role_arn,
                session_name,
                sts,
            } => web_identity(client, token_file, role_arn, session_name, sts).await,
            Source::Container {
                url,
                token_file,
                token,
            } => {
                container(
                    client,
                    url,
                    token_file.as_ref(),
                    token.as_ref().map(|t| t.0.as_str()),
                )
                .await
            }
            Source::Imds { base } => imds(client, base).await,
            Source::Broken(why) => Err(why.clone()),
            Source::Nothing => {
                Err("none configured (env, web identity, container or instance metadata)".into())
            }
        }
    }
}

/// The first configured source, in the SDK's order.
fn pick(env: &impl Fn(&str) -> Option<String>, region: Option<&str>) -> Source {
    if let (Some(id), Some(secret)) = (
        nonempty(env, "AWS_ACCESS_KEY_ID"),
        nonempty(env, "AWS_SECRET_ACCESS_KEY"),
    ) {
        return Source::Static(Arc::new(Credentials {
            access_key_id: id,
            secret_access_key: secret,
            session_token: nonempty(env, "AWS_SESSION_TOKEN"),
            expires_ms: None,
        }));
    }
    if let (Some(token_file), Some(role_arn)) = (
        nonempty(env, "AWS_WEB_IDENTITY_TOKEN_FILE"),
        nonempty(env, "AWS_ROLE_ARN"),
    ) {
        let sts = match configured_endpoint(env, "STS") {
            Some(u) => u,
            None => match region {
                Some(r) => format!("https://sts.{r}.{}", dns_suffix(r)),
                None => "https://sts.amazonaws.com".into(),
            },
        };
        let session_name = nonempty(env, "AWS_ROLE_SESSION_NAME")
            .unwrap_or_else(|| format!("hooklog-{}", crate::timefmt::now_ms()));
        return match Url::parse(&sts) {
            Ok(sts) => Source::WebIdentity {
                token_file: token_file.into(),
                role_arn,
                session_name,
                sts,
            },
            Err(e) => Source::Broken(format!("STS endpoint: {e}")),
        };
    }
    let container_url = nonempty(env, "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI")
        .map(|rel| (format!("{ECS_HOST}{rel}"), false))
        .or_else(|| nonempty(env, "AWS_CONTAINER_CREDENTIALS_FULL_URI").map(|u| (u, true)));
    if let Some((url, full)) = container_url {
        let url = match Url::parse(&url) {
            Ok(u) => u,
            Err(e) => return Source::Broken(format!("container credentials URL: {e}")),
        };
        if full && !url.https && !url.is_loopback() && !CONTAINER_HOSTS.contains(&url.host.as_str())
        {
            return Source::Broken(format!(
                "AWS_CONTAINER_CREDENTIALS_FULL_URI: plain http only to loopback, {} (got {})",
                CONTAINER_HOSTS.join(", "),
                url.host
            ));
        }
        return Source::Container {
            url,
            token_file: nonempty(env, "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE").map(PathBuf::from),
            token: nonempty(env, "AWS_CONTAINER_AUTHORIZATION_TOKEN").map(Secret),
        };
    }
    if nonempty(env, "AWS_EC2_METADATA_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true")) {
        return Source::Nothing;
    }
    let base =
        nonempty(env, "AWS_EC2_METADATA_SERVICE_ENDPOINT").unwrap_or_else(|| IMDS_ENDPOINT.into());
    match Url::parse(&base) {
        Ok(base) => Source::Imds { base },
        Err(e) => Source::Broken(format!("AWS_EC2_METADATA_SERVICE_ENDPOINT: {e}")),
    }
}

/// One call to a credential source (its own connection); the body as text when 2xx.
async fn call(
    client: &http::Client,
    url: &Url,
    method: ::http::Method,
    headers: &[(&str, &str)],
    body: Vec<u8>,
) -> Result<String, String> {
    let build = || {
        let mut req = ::http::Request::builder()
            .method(method.clone())
            .uri(url.path.as_str());
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        req
    };
    let answer = client
        .send(url, &build, body, false, CONNECT_TIMEOUT)
        .await
        .map_err(|e| format!("{}: {e}", url.authority()))?;
    let text = String::from_utf8_lossy(&answer.body).into_owned();
    if !(200..300).contains(&answer.status) {
        let shown: String = text.trim().chars().take(300).collect();
        return Err(format!(
            "{}{}: HTTP {}: {shown}",
            url.authority(),
            url.path,
            answer.status
        ));
    }
    Ok(text)
}

/// `application/x-www-form-urlencoded` of `pairs` (every byte but the unreserved encoded).
fn form(pairs: &[(&str, &str)]) -> String {
    let enc = |s: &str| {
        let mut out = String::with_capacity(s.len());
        for b in s.bytes() {
            if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
                out.push(char::from(b));
            } else {
                out.push_str(&format!("%{b:02X}"));
            }
        }
        out
    };
    pairs
        .iter()
        .map(|(k, v)| format!("{}={}", enc(k), enc(v)))
        .collect::<Vec<_>>()
        .join("&")
}

/// The text of the first `<tag>...</tag>` in `xml`, entities resolved.
fn xml_text(xml: &str, tag: &str) -> Option<String> {
    let open = format!("<{tag}>");
    let close = format!("</{tag}>");
    let start = xml.find(&open)? + open.len();
    let end = start + xml[start..].find(&close)?;
    Some(
        xml[start..end]
            .trim()
            .replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&quot;", "\"")
            .replace("&apos;", "'")
            .replace("&amp;", "&"),
    )
}

/// STS `AssumeRoleWithWebIdentity` (unsigned: the token is the proof), its XML answer
/// (<https://docs.aws.amazon.com/STS/latest/APIReference/API_AssumeRoleWithWebIdentity.html>).
async fn web_identity(
    client: &http::Client,
    token_file: &std::path::Path,
    role_arn: &str,
    session_name: &str,
    sts: &Url,
) -> Result<Credentials, String> {
    let token = std::fs::read_to_string(token_file)
        .map_err(|e| format!("{}: {e}", token_file.display()))?;
    let body = form(&[
        ("Action", "AssumeRoleWithWebIdentity"),
        ("Version", STS_VERSION),
        ("RoleArn", role_arn),
        ("RoleSessionName", session_name),
        ("WebIdentityToken", token.trim()),
    ]);
    let answer = call(
        client,
        sts,
        ::http::Method::POST,
        &[(
            "content-type",
            "application/x-www-form-urlencoded; charset=utf-8",
        )],
        body.into_bytes(),
    )
    .await
    .map_err(|e| {
        // STS's error answer: <ErrorResponse><Error><Code>..</Code><Message>..</Message>.
        match (xml_text(&e, "Code"), xml_text(&e, "Message")) {
            (Some(code), message) => format!(
                "STS AssumeRoleWithWebIdentity: {code}: {}",
                message.unwrap_or_default()
            ),
            _ => format!("STS AssumeRoleWithWebIdentity: {e}"),
        }
    })?;
    let field =
        |tag: &str| xml_text(&answer, tag).ok_or_else(|| format!("STS's answer has no {tag}"));
    let expiration = field("Expiration")?;
    Ok(Credentials {
        access_key_id: field("AccessKeyId")?,
        secret_access_key: field("SecretAccessKey")?,
        session_token: Some(field("SessionToken")?),
        expires_ms: Some(
            parse_rfc3339_ms(&expiration)
                .ok_or_else(|| format!("STS's Expiration {expiration:?} is not a time"))?,
        ),
    })
}

/// The JSON the container and instance metadata services answer with.
fn from_json(text: &str) -> Result<Credentials, String> {
    let v: serde_json::Value =
        serde_json::from_str(text).map_err(|e| format!("the answer is not JSON: {e}"))?;
    if let Some(code) = v.get("Code").and_then(|c| c.as_str())
        && code != "Success"
    {
        let msg = v
            .get("Message")
            .and_then(|m| m.as_str())
            .unwrap_or_default();
        return Err(format!("{code}: {msg}"));
    }
    let field = |k: &str| {
        v.get(k)
            .and_then(|x| x.as_str())
            .filter(|x| !x.is_empty())
            .map(str::to_string)
            .ok_or_else(|| format!("the answer has no {k}"))
    };
    let expires_ms = match v.get("Expiration").and_then(|x| x.as_str()) {
        Some(e) => {
            Some(parse_rfc3339_ms(e).ok_or_else(|| format!("Expiration {e:?} is not a time"))?)
        }
        None => None,
    };
    Ok(Credentials {
        access_key_id: field("AccessKeyId")?,
        secret_access_key: field("SecretAccessKey")?,
        session_token: field("Token").ok(),
        expires_ms,
    })
}

/// ECS / EKS Pod Identity: one GET, with the authorization token when there is one.
async fn container(
    client: &http::Client,
    url: &Url,
    token_file: Option<&PathBuf>,
    token: Option<&str>,
) -> Result<Credentials, String> {
    let token = match token_file {
        Some(f) => Some(
            std::fs::read_to_string(f)
                .map_err(|e| format!("{}: {e}", f.display()))?
                .trim()
                .to_string(),
        ),
        None => token.map(str::to_string),
    };
    if token.as_deref().is_some_and(|t| t.contains(['\r', '\n'])) {
        return Err("the authorization token holds a line break".into());
    }
    let mut headers = vec![("accept", "application/json")];
    if let Some(t) = token.as_deref() {
        headers.push(("authorization", t));
    }
    let text = call(client, url, ::http::Method::GET, &headers, Vec::new()).await?;
    from_json(&text)
}

/// IMDSv2: a session token (PUT), the role's name, then its credentials
/// (<https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/instance-metadata-retrieval.html>).
async fn imds(client: &http::Client, base: &Url) -> Result<Credentials, String> {
    let token = call(
        client,
        &base.join("/latest/api/token"),
        ::http::Method::PUT,
        &[("x-aws-ec2-metadata-token-ttl-seconds", IMDS_TOKEN_TTL_S)],
        Vec::new(),
    )
    .await?;
    let token = token.trim();
    let auth = [("x-aws-ec2-metadata-token", token)];
    let roles = call(
        client,
        &base.join("/latest/meta-data/iam/security-credentials/"),
        ::http::Method::GET,
        &auth,
        Vec::new(),
    )
    .await?;
    let role = roles
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .ok_or("the instance has no IAM role")?;
    let text = call(
        client,
        &base.join(&format!(
            "/latest/meta-data/iam/security-credentials/{role}"
        )),
        ::http::Method::GET,
        &auth,
        Vec::new(),
    )
    .await?;
    from_json(&text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: std::collections::HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| map.get(k).cloned()
    }

    fn source(pairs: &[(&str, &str)]) -> &'static str {
        Provider::from_env(env(pairs), Some("eu-west-1")).source_name()
    }

    #[test]
    fn the_first_configured_source_wins_in_the_sdks_order() {
        let all = [
            ("AWS_ACCESS_KEY_ID", "a"),
            ("AWS_SECRET_ACCESS_KEY", "s"),
            ("AWS_WEB_IDENTITY_TOKEN_FILE", "/t"),
            ("AWS_ROLE_ARN", "arn:aws:iam::1:role/r"),
            (
                "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
                "/v2/credentials/x",
            ),
        ];
        assert_eq!(source(&all), "env");
        assert_eq!(source(&all[1..]), "web identity");
        assert_eq!(source(&all[3..]), "container");
        assert_eq!(source(&[]), "instance metadata");
        assert_eq!(source(&[("AWS_EC2_METADATA_DISABLED", "TRUE")]), "none");
        // A key without its secret is not a source.
        assert_eq!(
            source(&[
                ("AWS_ACCESS_KEY_ID", "a"),
                ("AWS_EC2_METADATA_DISABLED", "true")
            ]),
            "none"
        );
    }

    #[test]
    fn web_identity_uses_the_regional_sts_endpoint_unless_told() {
        let p = Provider::from_env(
            env(&[("AWS_WEB_IDENTITY_TOKEN_FILE", "/t"), ("AWS_ROLE_ARN", "r")]),
            Some("cn-north-1"),
        );
        let Source::WebIdentity {
            sts, session_name, ..
        } = &p.source
        else {
            panic!("{p:?}")
        };
        assert_eq!(sts.authority(), "sts.cn-north-1.amazonaws.com.cn");
        assert!(session_name.starts_with("hooklog-"));
        let p = Provider::from_env(
            env(&[
                ("AWS_WEB_IDENTITY_TOKEN_FILE", "/t"),
                ("AWS_ROLE_ARN", "r"),
                ("AWS_ENDPOINT_URL", "http://127.0.0.1:1"),
                ("AWS_ENDPOINT_URL_STS", "http://127.0.0.1:2"),
            ]),
            None,
        );
        let Source::WebIdentity { sts, .. } = &p.source else {
            panic!("{p:?}")
        };
        assert_eq!(sts.port, 2);
    }

    #[test]
    fn debug_shows_no_secret() {
        let p = Provider::from_env(
            env(&[
                ("AWS_CONTAINER_CREDENTIALS_FULL_URI", "http://127.0.0.1/c"),
                ("AWS_CONTAINER_AUTHORIZATION_TOKEN", "TOKEN-SECRET"),
            ]),
            None,
        );
        let p2 = Provider::from_env(
            env(&[
                ("AWS_ACCESS_KEY_ID", "a"),
                ("AWS_SECRET_ACCESS_KEY", "KEY-SECRET"),
            ]),
            None,
        );
        let shown = format!("{p:?} {p2:?}");
        assert!(!shown.contains("SECRET"), "{shown}");
    }

    #[test]
    fn a_full_uri_over_plain_http_must_be_local() {
        for ok in [
            "http://127.0.0.1:9/c",
            "http://169.254.170.23/v1/credentials",
            "http://[fd00:ec2::23]/v1",
            "https://creds.example.com/",
        ] {
            assert_eq!(
                source(&[("AWS_CONTAINER_CREDENTIALS_FULL_URI", ok)]),
                "container",
                "{ok}"
            );
        }
        for bad in ["http://10.0.0.1/c", "http://example.com/c", "not a url"] {
            assert_eq!(
                source(&[("AWS_CONTAINER_CREDENTIALS_FULL_URI", bad)]),
                "misconfigured",
                "{bad}"
            );
        }
    }

    #[test]
    fn reads_sts_xml_and_metadata_json() {
        let xml = "<AssumeRoleWithWebIdentityResponse><AssumeRoleWithWebIdentityResult><Credentials>\
            <AccessKeyId>ASIA1</AccessKeyId><SecretAccessKey>s&amp;k</SecretAccessKey>\
            <SessionToken>tok</SessionToken><Expiration>2026-12-02T03:00:00Z</Expiration>\
            </Credentials></AssumeRoleWithWebIdentityResult></AssumeRoleWithWebIdentityResponse>";
        assert_eq!(xml_text(xml, "SecretAccessKey").as_deref(), Some("s&k"));
        assert_eq!(xml_text(xml, "Nope"), None);
        let c = from_json(
            r#"{"Code":"Success","AccessKeyId":"A","SecretAccessKey":"S","Token":"T","Expiration":"2026-12-02T03:00:00Z"}"#,
        )
        .unwrap();
        assert_eq!(
            (c.access_key_id.as_str(), c.session_token.as_deref()),
            ("A", Some("T"))
        );
        assert_eq!(c.expires_ms, parse_rfc3339_ms("2026-12-02T03:00:00Z"));
        assert!(
            from_json(r#"{"Code":"Failure","Message":"no role"}"#)
                .unwrap_err()
                .contains("no role")
        );
        assert!(
            from_json(r#"{"AccessKeyId":"A"}"#)
                .unwrap_err()
                .contains("SecretAccessKey")
        );
        assert!(from_json("<html>").is_err());
        assert!(
            from_json(r#"{"AccessKeyId":"A","SecretAccessKey":"S","Expiration":"soon"}"#).is_err()
        );
    }

    #[test]
    fn form_encodes_everything_but_the_unreserved() {
        assert_eq!(form(&[("a", "x y+/=&é~")]), "a=x%20y%2B%2F%3D%26%C3%A9~");
    }
}
