//! (the sidecar) The CloudWatch Logs client, hand-written on the HTTP client the sidecar
//! already links (http.rs: hyper's HTTP/1.1 client half, tokio-rustls with ring): the four calls
//! hooklog makes (CreateLogGroup, CreateLogStream, PutRetentionPolicy, PutLogEvents) in the
//! AWS JSON 1.1 protocol, signed with SigV4 (sigv4.rs), with the credential chain a pod needs
//! (credentials.rs). It replaced the AWS SDK (aws-config, aws-sdk-cloudwatchlogs), whose own
//! HTTP stack beside the events client's took the sidecar past its 6 MB budget (issue 27; the
//! figures are in Cargo.toml and docs/performance.md).
//!
//! Region from `AWS_REGION` (or `AWS_DEFAULT_REGION`); endpoint `https://logs.REGION.amazonaws.com`
//! unless `AWS_ENDPOINT_URL_CLOUDWATCH_LOGS` or `AWS_ENDPOINT_URL` name another (plain `http`
//! too: moto, LocalStack). Every answer's `Date` updates the [`ServerClock`], and requests are
//! signed with that clock. One try per call: the sink retries (retry.rs).

use std::ops::Range;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;

use super::batch::Event;
use super::clock::{ServerClock, parse_http_date};
use super::credentials::{self, Provider};
use super::http::{self, Failed, Url};
use super::retry::{CallError, Failure};
use super::sigv4;
use crate::config::CloudWatchSettings;

/// Longest wait for a TCP (and TLS) connection to CloudWatch.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// Longest one call may take. A 1 MiB PutLogEvents normally takes well under a second.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);

/// How long the start-up look for credentials may take before it gives up saying nothing more
/// than the provider's own warning.
const CREDENTIALS_LOOK: Duration = Duration::from_secs(10);

/// The service's name in SigV4's scope and in its endpoint's host.
const SERVICE: &str = "logs";

/// The JSON protocol's content type and the API's target prefix
/// (<https://docs.aws.amazon.com/AmazonCloudWatchLogs/latest/APIReference/CommonParameters.html>:
/// `X-Amz-Target: Logs_20140328.PutLogEvents`).
const CONTENT_TYPE: &str = "application/x-amz-json-1.1";
const TARGET_PREFIX: &str = "Logs_20140328.";

/// The `User-Agent` of every call.
const USER_AGENT: &str = concat!("hooklog/", env!("CARGO_PKG_VERSION"));

/// Longest part of an error answer kept for the logs.
const ERROR_BODY_SHOWN: usize = 300;

/// A client bound to one group and stream.
#[derive(Debug)]
pub struct LogsClient {
    /// The connection (kept between calls).
    http: Arc<http::Client>,
    /// Where calls go, or why nowhere.
    endpoint: Result<Url, String>,
    /// The signing region, `None` when not set.
    region: Option<String>,
    /// The credential chain and its cache.
    credentials: Arc<Provider>,
    /// The group records go to.
    group: String,
    /// The stream records go to.
    stream: String,
    /// Retention to set when hooklog creates the group.
    retention_days: Option<i32>,
    /// CloudWatch's clock as learned from its answers.
    clock: Arc<ServerClock>,
}

impl std::fmt::Debug for http::Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("http::Client")
    }
}

/// How a PutLogEvents call ended when CloudWatch answered.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Put {
    /// Indexes of events CloudWatch refused (`rejectedLogEventsInfo`): too old, expired or too
    /// new. They are not stored; the caller must send them another way.
    pub rejected: Vec<Range<usize>>,
}

/// One event of a PutLogEvents body.
#[derive(Serialize)]
struct InputLogEvent<'a> {
    timestamp: i64,
    message: &'a str,
}

/// A PutLogEvents body.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct PutLogEvents<'a> {
    log_group_name: &'a str,
    log_stream_name: &'a str,
    log_events: Vec<InputLogEvent<'a>>,
}

/// The AWS error code of an answer: the `X-Amzn-ErrorType` header, else the body's `__type`
/// (or `code`), without its namespace (`com.amazonaws.logs#`) or a trailing `:URL`, as the AWS
/// SDKs read it (smithy-rs `aws-smithy-json` `sanitize_error_code`); and the message.
pub fn error_of(headers: &::http::HeaderMap, body: &[u8]) -> (Option<String>, String) {
    let v: serde_json::Value = serde_json::from_slice(body).unwrap_or_default();
    let raw = headers
        .get("x-amzn-errortype")
        .and_then(|h| h.to_str().ok())
        .map(str::to_string)
        .or_else(|| v.get("__type").and_then(|t| t.as_str()).map(str::to_string))
        .or_else(|| v.get("code").and_then(|t| t.as_str()).map(str::to_string));
    let code = raw.and_then(|r| {
        let r = r.split(':').next().unwrap_or_default();
        let r = r.rsplit('#').next().unwrap_or_default().trim();
        (!r.is_empty()).then(|| r.to_string())
    });
    let message = ["message", "Message", "errorMessage"]
        .iter()
        .find_map(|k| v.get(*k).and_then(|m| m.as_str()))
        .map(str::to_string)
        .unwrap_or_else(|| {
            String::from_utf8_lossy(body)
                .trim()
                .chars()
                .take(ERROR_BODY_SHOWN)
                .collect()
        });
    (code, message)
}

impl LogsClient {
    /// Reads region, endpoint and credential source from the environment. Makes no call but
    /// the start-up look for credentials (in the background), which warns when they fail.
    pub async fn new(settings: &CloudWatchSettings) -> Self {
        Self::from_env(settings, |k| std::env::var(k).ok())
    }

    fn from_env(settings: &CloudWatchSettings, env: impl Fn(&str) -> Option<String>) -> Self {
        let get = |k: &str| {
            env(k)
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
        };
        let region = get("AWS_REGION").or_else(|| get("AWS_DEFAULT_REGION"));
        let endpoint = match credentials::configured_endpoint(&env, "CLOUDWATCH_LOGS") {
            Some(u) => Url::parse(&u).map_err(|e| format!("the CloudWatch Logs endpoint: {e}")),
            None => match &region {
                Some(r) => Url::parse(&format!(
                    "https://{SERVICE}.{r}.{}",
                    credentials::dns_suffix(r)
                ))
                .map_err(|e| format!("the region's endpoint: {e}")),
                None => Err("AWS_REGION is not set: no endpoint to send to".into()),
            },
        };
        let provider = Arc::new(Provider::from_env(&env, region.as_deref()));
        let clock = Arc::new(ServerClock::default());
        let http = Arc::new(http::Client::default());
        tracing::debug!(
            region = ?region,
            endpoint = ?endpoint.as_ref().map(Url::authority),
            credentials = provider.source_name(),
            "cloudwatch client configured"
        );
        if region.is_none() {
            tracing::warn!("cloudwatch: no region (set AWS_REGION): nothing can be sent");
        } else if let Err(e) = &endpoint {
            tracing::warn!(error = %e, "cloudwatch: nothing can be sent");
        }
        if !provider.is_configured() {
            tracing::warn!(
                "cloudwatch: no credentials (env, web identity, container or instance metadata): nothing can be sent"
            );
        } else {
            let (p, h, c) = (provider.clone(), http.clone(), clock.clone());
            // The provider warns once if the source fails; this look makes that happen at
            // start, not at the first flush.
            tokio::spawn(async move {
                let _ = tokio::time::timeout(CREDENTIALS_LOOK, p.credentials(&h, c.now_ms())).await;
            });
        }
        LogsClient {
            http,
            endpoint,
            region,
            credentials: provider,
            group: settings.log_group.clone(),
            stream: settings.log_stream.clone(),
            retention_days: settings.retention_days,
            clock,
        }
    }

    /// CloudWatch's clock as learned so far.
    pub fn clock(&self) -> &ServerClock {
        &self.clock
    }

    /// The group name.
    pub fn group(&self) -> &str {
        &self.group
    }

    /// The stream name.
    pub fn stream(&self) -> &str {
        &self.stream
    }

    /// One call: `operation` with its JSON `body`, signed, within [`ATTEMPT_TIMEOUT`]. The
    /// answer's body when CloudWatch says 200.
    async fn call(&self, operation: &str, body: Vec<u8>) -> Result<bytes::Bytes, CallError> {
        let endpoint = self
            .endpoint
            .as_ref()
            .map_err(|e| CallError::new(Failure::Construction, e.clone()))?;
        let region = self.region.as_deref().ok_or_else(|| {
            CallError::new(Failure::Construction, "AWS_REGION is not set: cannot sign")
        })?;
        let creds = self
            .credentials
            .credentials(&self.http, self.clock.now_ms())
            .await
            .map_err(|e| CallError::new(Failure::Credentials, e))?;
        let date = sigv4::amz_date(self.clock.now_ms());
        let host = endpoint.authority();
        let target = format!("{TARGET_PREFIX}{operation}");
        let mut signed: Vec<(&str, &str)> = vec![
            ("host", &host),
            ("content-type", CONTENT_TYPE),
            ("x-amz-date", &date),
            ("x-amz-target", &target),
        ];
        if let Some(token) = &creds.session_token {
            signed.push(("x-amz-security-token", token));
        }
        let authorization = sigv4::sign(
            &creds,
            region,
            SERVICE,
            &date,
            &sigv4::Request {
                method: "POST",
                path: &endpoint.path,
                query: "",
                headers: &signed,
                payload: &body,
            },
        );
        let build = || {
            let mut req = ::http::Request::builder()
                .method(::http::Method::POST)
                .uri(endpoint.path.as_str());
            // `host` is the transport's to set.
            for (k, v) in signed.iter().filter(|(k, _)| *k != "host") {
                req = req.header(*k, *v);
            }
            req.header(::http::header::AUTHORIZATION, authorization.as_str())
                .header(::http::header::USER_AGENT, USER_AGENT)
        };
        let sent = crate::timefmt::now_ms();
        let answer = tokio::time::timeout(
            ATTEMPT_TIMEOUT,
            self.http
                .send(endpoint, &build, body, true, CONNECT_TIMEOUT),
        )
        .await
        .map_err(|_| {
            CallError::new(
                Failure::Timeout,
                format!(
                    "{operation}: no answer within {} ms",
                    ATTEMPT_TIMEOUT.as_millis()
                ),
            )
        })?
        .map_err(|e| {
            let failure = match e {
                Failed::Answer(_) => Failure::Response,
                Failed::Request(_) => Failure::Construction,
                Failed::Connect(_) | Failed::Send(_) => Failure::Dispatch,
            };
            CallError::new(failure, format!("{operation} to {host}: {e}"))
        })?;
        let received = crate::timefmt::now_ms();
        // A cached answer (RFC 9111, section 5.1: `Age`) carries an old `Date`. No `Date` (or a
        // bad one): nothing learned; the call itself goes on as usual.
        if !answer.headers.contains_key(::http::header::AGE)
            && let Some(date) = answer
                .headers
                .get(::http::header::DATE)
                .and_then(|d| d.to_str().ok())
                .and_then(parse_http_date)
        {
            self.clock.observe(sent, received, date);
        }
        if answer.status == 200 {
            return Ok(answer.body);
        }
        let (code, message) = error_of(&answer.headers, &answer.body);
        Err(CallError::new(
            Failure::Service {
                status: answer.status,
                code: code.clone(),
            },
            format!(
                "{operation}: HTTP {} {}: {message}",
                answer.status,
                code.as_deref().unwrap_or("(no error code)")
            ),
        ))
    }

    /// Creates the stream, and the group (with its retention) first if it is missing; "already
    /// exists" (another pod, or an earlier run) counts as success. The stream is tried first, so
    /// a group made beforehand needs no `logs:CreateLogGroup` permission.
    pub async fn ensure_stream(&self) -> Result<(), CallError> {
        match self.create_stream().await {
            Err(e) if e.failure.code() == Some("ResourceNotFoundException") => {}
            other => return other,
        }
        let body = serde_json::json!({ "logGroupName": self.group });
        match self
            .call("CreateLogGroup", body.to_string().into_bytes())
            .await
        {
            Ok(_) => {
                tracing::info!(group = %self.group, "created log group");
                self.set_retention().await;
            }
            Err(e) if e.failure.code() == Some("ResourceAlreadyExistsException") => {}
            Err(e) => return Err(e),
        }
        self.create_stream().await
    }

    async fn create_stream(&self) -> Result<(), CallError> {
        let body = serde_json::json!({ "logGroupName": self.group, "logStreamName": self.stream });
        match self
            .call("CreateLogStream", body.to_string().into_bytes())
            .await
        {
            Ok(_) => {
                tracing::info!(group = %self.group, stream = %self.stream, "created log stream");
                Ok(())
            }
            Err(e) if e.failure.code() == Some("ResourceAlreadyExistsException") => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Sets `--retention-days` on a group just created. A failure is reported, not fatal: the
    /// records matter more than their expiry.
    async fn set_retention(&self) {
        let Some(days) = self.retention_days else {
            return;
        };
        let body = serde_json::json!({ "logGroupName": self.group, "retentionInDays": days });
        if let Err(e) = self
            .call("PutRetentionPolicy", body.to_string().into_bytes())
            .await
        {
            tracing::warn!(group = %self.group, days, error = %e.detail, "cannot set the log group's retention");
        }
    }

    /// Sends one request's events (already valid: sorted, within the limits). No sequence
    /// token: CloudWatch ignores it since January 2023.
    pub async fn put(&self, events: &[Event]) -> Result<Put, CallError> {
        let body = PutLogEvents {
            log_group_name: &self.group,
            log_stream_name: &self.stream,
            log_events: events
                .iter()
                .map(|e| InputLogEvent {
                    timestamp: e.timestamp,
                    message: &e.message,
                })
                .collect(),
        };
        let body = serde_json::to_vec(&body)
            .map_err(|e| CallError::new(Failure::Construction, format!("PutLogEvents: {e}")))?;
        let answer = self.call("PutLogEvents", body).await?;
        put_answer(events.len(), &answer)
    }
}

/// Reads a PutLogEvents answer (`{}` or with `rejectedLogEventsInfo`) for a request of `n`
/// events. An empty body counts as `{}`.
pub fn put_answer(n: usize, body: &[u8]) -> Result<Put, CallError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(Put::default());
    }
    let v: serde_json::Value = serde_json::from_slice(body).map_err(|e| {
        CallError::new(
            Failure::Response,
            format!("PutLogEvents: the answer is not JSON: {e}"),
        )
    })?;
    let mut put = Put::default();
    if let Some(info) = v.get("rejectedLogEventsInfo") {
        let index = |k: &str| {
            info.get(k)
                .and_then(serde_json::Value::as_i64)
                .map(|i| i32::try_from(i).unwrap_or(if i < 0 { -1 } else { i32::MAX }))
        };
        put.rejected = rejected_ranges(
            n,
            index("tooNewLogEventStartIndex"),
            index("tooOldLogEventEndIndex"),
            index("expiredLogEventEndIndex"),
        );
    }
    Ok(put)
}

/// The index ranges `rejectedLogEventsInfo` names, for a request of `n` events: events up to
/// (and including) the "too old" and "expired" end indexes, and from the "too new" start index
/// on. Merged, in order.
pub fn rejected_ranges(
    n: usize,
    too_new_start: Option<i32>,
    too_old_end: Option<i32>,
    expired_end: Option<i32>,
) -> Vec<Range<usize>> {
    let idx = |i: i32| usize::try_from(i).unwrap_or(0).min(n);
    let head_end = [too_old_end, expired_end]
        .into_iter()
        .flatten()
        .filter(|i| *i >= 0)
        .map(|i| idx(i).saturating_add(1).min(n))
        .max()
        .unwrap_or(0);
    let tail_start = too_new_start.map(idx).unwrap_or(n).max(head_end);
    let mut out = Vec::new();
    if head_end > 0 {
        out.push(0..head_end);
    }
    if tail_start < n {
        if head_end == tail_start && head_end > 0 {
            out[0] = 0..n;
        } else {
            out.push(tail_start..n);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejected_ranges_follow_the_api_reference() {
        assert_eq!(
            rejected_ranges(10, None, None, None),
            Vec::<Range<usize>>::new()
        );
        assert_eq!(rejected_ranges(10, None, Some(2), None), vec![0..3]);
        assert_eq!(rejected_ranges(10, None, Some(1), Some(4)), vec![0..5]);
        assert_eq!(rejected_ranges(10, Some(7), None, None), vec![7..10]);
        assert_eq!(
            rejected_ranges(10, Some(7), Some(0), None),
            vec![0..1, 7..10]
        );
        assert_eq!(rejected_ranges(10, Some(3), Some(2), None), vec![0..10]);
        // Out-of-range answers stay within the request.
        assert_eq!(rejected_ranges(4, Some(9), Some(99), None), vec![0..4]);
    }

    #[test]
    fn error_codes_are_read_as_the_sdks_read_them() {
        let none = ::http::HeaderMap::new();
        let body = br#"{"__type":"com.amazonaws.logs#ResourceNotFoundException","message":"The specified log group does not exist."}"#;
        assert_eq!(
            error_of(&none, body),
            (
                Some("ResourceNotFoundException".into()),
                "The specified log group does not exist.".into()
            )
        );
        let body = br#"{"__type":"ThrottlingException:http://internal.amazon.com/coral/com.amazon.coral.availability/","Message":"Rate exceeded"}"#;
        assert_eq!(
            error_of(&none, body).0.as_deref(),
            Some("ThrottlingException")
        );
        assert_eq!(error_of(&none, body).1, "Rate exceeded");
        let mut h = ::http::HeaderMap::new();
        h.insert(
            "x-amzn-errortype",
            "InvalidSignatureException:".parse().unwrap(),
        );
        assert_eq!(
            error_of(&h, b"{}").0.as_deref(),
            Some("InvalidSignatureException")
        );
        assert_eq!(
            error_of(&none, b"<html>bad gateway</html>"),
            (None, "<html>bad gateway</html>".into())
        );
        assert_eq!(error_of(&none, b"").0, None);
        assert_eq!(error_of(&none, br##"{"__type":"#"}"##).0, None);
    }

    #[test]
    fn put_answers_are_read_with_their_rejections() {
        assert_eq!(put_answer(3, b"").unwrap(), Put::default());
        assert_eq!(put_answer(3, b"{}").unwrap(), Put::default());
        assert_eq!(
            put_answer(10, br#"{"nextSequenceToken":"x","rejectedLogEventsInfo":{"tooOldLogEventEndIndex":2}}"#)
                .unwrap()
                .rejected,
            vec![0..3]
        );
        // Indexes out of i32's range stay within the request.
        assert_eq!(
            put_answer(4, br#"{"rejectedLogEventsInfo":{"tooNewLogEventStartIndex":99999999999,"expiredLogEventEndIndex":-5}}"#)
                .unwrap()
                .rejected,
            Vec::<Range<usize>>::new()
        );
        assert_eq!(
            put_answer(4, b"<xml/>").unwrap_err().failure,
            Failure::Response
        );
    }

    fn settings() -> CloudWatchSettings {
        CloudWatchSettings {
            log_group: "g".into(),
            log_stream: "s".into(),
            retention_days: None,
            flush_interval: Duration::from_secs(1),
        }
    }

    #[tokio::test]
    async fn the_endpoint_follows_the_region_and_the_sdks_variables() {
        let client = |pairs: &[(&str, &str)]| {
            let map: std::collections::HashMap<String, String> = pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            let mut all = map.clone();
            all.insert("AWS_EC2_METADATA_DISABLED".into(), "true".into());
            LogsClient::from_env(&settings(), move |k| all.get(k).cloned())
        };
        let c = client(&[("AWS_REGION", "eu-west-1")]);
        assert_eq!(
            c.endpoint.as_ref().unwrap().authority(),
            "logs.eu-west-1.amazonaws.com"
        );
        assert!(c.endpoint.as_ref().unwrap().https);
        let c = client(&[("AWS_DEFAULT_REGION", "cn-north-1")]);
        assert_eq!(
            c.endpoint.as_ref().unwrap().authority(),
            "logs.cn-north-1.amazonaws.com.cn"
        );
        let c = client(&[
            ("AWS_REGION", "us-east-1"),
            ("AWS_ENDPOINT_URL", "http://127.0.0.1:5000"),
        ]);
        assert_eq!(c.endpoint.as_ref().unwrap().authority(), "127.0.0.1:5000");
        let c = client(&[
            ("AWS_REGION", "us-east-1"),
            ("AWS_ENDPOINT_URL", "http://127.0.0.1:5000"),
            ("AWS_ENDPOINT_URL_CLOUDWATCH_LOGS", "http://127.0.0.1:6000"),
        ]);
        assert_eq!(c.endpoint.as_ref().unwrap().port, 6000);
        let c = client(&[
            ("AWS_REGION", "us-east-1"),
            ("AWS_ENDPOINT_URL", "http://127.0.0.1:5000"),
            ("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "true"),
        ]);
        assert_eq!(
            c.endpoint.as_ref().unwrap().authority(),
            "logs.us-east-1.amazonaws.com"
        );
        let c = client(&[]);
        assert!(c.endpoint.is_err() && c.region.is_none());
        let err = c.call("PutLogEvents", Vec::new()).await.unwrap_err();
        assert_eq!(err.failure, Failure::Construction);
    }
}
