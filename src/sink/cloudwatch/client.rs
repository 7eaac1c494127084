//! (the sidecar) The CloudWatch Logs client: `aws-sdk-cloudwatchlogs` configured from
//! `aws-config`'s defaults (`aws_config::defaults(BehaviorVersion::latest())`: region, endpoint,
//! FIPS and dual-stack settings; credentials from the default chain: environment, profiles with
//! SSO and `credential_process`, web identity for IRSA, container credentials, IMDSv2), on the
//! SDK's hyper client with rustls and ring, the stack `run --events` uses. Signing, credentials
//! and retry classification are the SDK's; hooklog sets what would hold a pod past its grace
//! (timeouts, tries, IMDS's probing) and points the SDK's time source at CloudWatch's clock
//! ([`ServerClock`], learned from every answer's `Date` by [`DateObserver`]).

use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime};

use aws_config::default_provider::credentials::DefaultCredentialsChain;
use aws_config::identity::IdentityCache;
use aws_config::meta::region::RegionProviderChain;
use aws_config::provider_config::ProviderConfig;
use aws_config::retry::RetryConfig;
use aws_config::timeout::TimeoutConfig;
use aws_config::{BehaviorVersion, Region};
use aws_credential_types::provider::error::CredentialsError;
use aws_credential_types::provider::{ProvideCredentials, future};
use aws_sdk_cloudwatchlogs::Client;
use aws_sdk_cloudwatchlogs::config::interceptors::BeforeTransmitInterceptorContextRef;
use aws_sdk_cloudwatchlogs::config::{ConfigBag, Intercept, RuntimeComponents};
use aws_sdk_cloudwatchlogs::error::DisplayErrorContext;
use aws_sdk_cloudwatchlogs::types::InputLogEvent;
use aws_smithy_http_client::tls::{self, rustls_provider::CryptoMode};
use aws_smithy_types::config_bag::{Storable, StoreReplace};

use super::CloudWatchSettings;
use super::batch::Event;
use super::clock::{DateObserver, ServerClock, ServerTimeSource};
use super::region::{imds_client, region_chain};
use super::retry::{self, CallError};
use crate::sink::Counters;

/// Longest wait for a TCP (and TLS) connection to CloudWatch, STS or a credential endpoint (the
/// SDK's default is 3.1 s).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// Longest one try of a call may take (unset in the SDK: no limit). A 1 MiB PutLogEvents
/// normally takes well under a second.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);

/// Longest one call may take with the SDK's own retries (unset in the SDK: no limit). At
/// shutdown the sink's deadline cuts it shorter.
const OPERATION_TIMEOUT: Duration = Duration::from_secs(30);

/// Longest the SDK's credential cache waits for the provider chain before the call fails with
/// "no credentials" (the SDK's default, set explicitly): the sink then retries with backoff.
const CREDENTIALS_LOAD_TIMEOUT: Duration = Duration::from_secs(5);

/// A client bound to one group and stream.
#[derive(Debug, Clone)]
pub struct LogsClient {
    /// The SDK client.
    client: Client,
    /// The group records go to.
    group: String,
    /// The stream records go to.
    stream: String,
    /// Retention to set when hooklog creates the group.
    retention_days: Option<i32>,
    /// CloudWatch's clock as learned from its answers.
    clock: Arc<ServerClock>,
}

/// How a PutLogEvents call ended when CloudWatch answered.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Put {
    /// Indexes of events CloudWatch refused (`rejectedLogEventsInfo`): too old, expired or too
    /// new. They are not stored; the caller must send them another way.
    pub rejected: Vec<Range<usize>>,
}

/// The default credential chain, saying in one warning when it fails (`cloudwatch: cannot get
/// credentials`, with the SDK's reason) until it works again, and refusing credentials already
/// expired (a source's bad answer), which AWS would refuse.
#[derive(Debug)]
struct Reported {
    /// The SDK's default chain.
    chain: DefaultCredentialsChain,
    /// The last try failed (and was said).
    failing: AtomicBool,
}

impl Reported {
    async fn provide(&self) -> Result<aws_credential_types::Credentials, CredentialsError> {
        let got = self
            .chain
            .provide_credentials()
            .await
            .and_then(|c| match c.expiry() {
                Some(at) if at <= SystemTime::now() => {
                    Err(CredentialsError::provider_error(format!(
                        "the credentials expired at {}",
                        String::from_utf8_lossy(&crate::timefmt::rfc3339_ms(
                            at.duration_since(SystemTime::UNIX_EPOCH)
                                .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
                        ))
                    )))
                }
                _ => Ok(c),
            });
        match &got {
            Err(e) if !self.failing.swap(true, Ordering::Relaxed) => {
                tracing::warn!(error = %DisplayErrorContext(e), "cloudwatch: cannot get credentials (environment, profile, SSO, credential_process, web identity, container or instance metadata): retrying");
            }
            Ok(_) if self.failing.swap(false, Ordering::Relaxed) => {
                tracing::info!("cloudwatch: credentials obtained");
            }
            _ => {}
        }
        got
    }
}

impl ProvideCredentials for Reported {
    fn provide_credentials<'a>(&'a self) -> future::ProvideCredentials<'a>
    where
        Self: 'a,
    {
        future::ProvideCredentials::new(self.provide())
    }
}

/// Marks an operation whose first try has been made: a later try is a retry.
#[derive(Debug, Clone, Copy)]
struct Tried;

impl Storable for Tried {
    type Storer = StoreReplace<Self>;
}

/// Counts the SDK's own retries into `cloudwatch_retried`, beside the sink's.
#[derive(Debug)]
struct RetryCounter(Arc<Counters>);

type BoxError = Box<dyn std::error::Error + Send + Sync>;

impl Intercept for RetryCounter {
    fn name(&self) -> &'static str {
        "hooklog::RetryCounter"
    }

    fn read_before_attempt(
        &self,
        _ctx: &BeforeTransmitInterceptorContextRef<'_>,
        _rc: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        if cfg.load::<Tried>().is_some() {
            Counters::add(&self.0.cloudwatch_retried, 1);
        } else {
            cfg.interceptor_state().store_put(Tried);
        }
        Ok(())
    }
}

/// Says once, in one line, what makes every request fail before the first one does: no region
/// (issue 25.5: the first sign was a 1 KB debug dump per retry). A failing credential source
/// is said by [`Reported`] at the first call.
fn warn_if_unusable(sdk: &aws_config::SdkConfig) {
    if sdk.region().is_none() {
        tracing::warn!(
            "cloudwatch: no region (AWS_REGION, the profile's region or instance metadata): nothing can be sent"
        );
    }
}

impl LogsClient {
    /// Loads the AWS configuration from the environment and builds the client. Makes no call
    /// to CloudWatch; the region chain may ask IMDS (bounded: [`super::region::IMDS_OPERATION_TIMEOUT`]).
    pub async fn new(settings: &CloudWatchSettings, counters: Arc<Counters>) -> Self {
        let clock = Arc::new(ServerClock::default());
        let http = aws_smithy_http_client::Builder::new()
            .tls_provider(tls::Provider::Rustls(CryptoMode::Ring))
            .build_https();
        let time = ServerTimeSource(clock.clone());
        let timeouts = TimeoutConfig::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .operation_attempt_timeout(ATTEMPT_TIMEOUT)
            .operation_timeout(OPERATION_TIMEOUT)
            .build();
        let conf = ProviderConfig::without_region()
            .with_http_client(http.clone())
            .with_time_source(time.clone());
        let imds = imds_client(&conf);
        let region = || match &settings.region {
            Some(found) => RegionProviderChain::first_try(Region::new(found.clone())),
            None => region_chain(&conf, &imds),
        };
        let credentials = Reported {
            chain: DefaultCredentialsChain::builder()
                .configure(conf.clone())
                .region(region())
                .imds_client(imds.clone())
                .build()
                .await,
            failing: AtomicBool::new(false),
        };
        let sdk = aws_config::defaults(BehaviorVersion::latest())
            .http_client(http)
            .region(region())
            .credentials_provider(credentials)
            .identity_cache(
                IdentityCache::lazy()
                    .load_timeout(CREDENTIALS_LOAD_TIMEOUT)
                    .build(),
            )
            .retry_config(
                RetryConfig::standard()
                    .with_max_attempts(retry::SDK_MAX_ATTEMPTS)
                    .with_initial_backoff(retry::BACKOFF_BASE)
                    .with_max_backoff(retry::BACKOFF_MAX),
            )
            .timeout_config(timeouts)
            // Signing (and credential expiry) on CloudWatch's clock, once known.
            .time_source(time)
            .load()
            .await;
        tracing::debug!(
            region = ?sdk.region(),
            endpoint = ?sdk.endpoint_url(),
            "cloudwatch client configured"
        );
        warn_if_unusable(&sdk);
        let conf = aws_sdk_cloudwatchlogs::config::Builder::from(&sdk)
            .interceptor(DateObserver(clock.clone()))
            .interceptor(RetryCounter(counters))
            .build();
        LogsClient {
            client: Client::from_conf(conf),
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

    /// Creates the stream, and the group (with its retention) first if it is missing; "already
    /// exists" (another pod, or an earlier run) counts as success. The stream is tried first, so
    /// a group made beforehand needs no `logs:CreateLogGroup` permission.
    pub async fn ensure_stream(&self) -> Result<(), CallError> {
        match self.create_stream().await {
            Err(e) if e.failure.code() == Some("ResourceNotFoundException") => {}
            other => return other,
        }
        match self
            .client
            .create_log_group()
            .log_group_name(&self.group)
            .send()
            .await
        {
            Ok(_) => {
                tracing::info!(group = %self.group, "created log group");
                self.set_retention().await;
            }
            Err(e)
                if e.as_service_error()
                    .is_some_and(|s| s.is_resource_already_exists_exception()) => {}
            Err(e) => return Err(CallError::of(&e)),
        }
        self.create_stream().await
    }

    async fn create_stream(&self) -> Result<(), CallError> {
        match self
            .client
            .create_log_stream()
            .log_group_name(&self.group)
            .log_stream_name(&self.stream)
            .send()
            .await
        {
            Ok(_) => {
                tracing::info!(group = %self.group, stream = %self.stream, "created log stream");
                Ok(())
            }
            Err(e)
                if e.as_service_error()
                    .is_some_and(|s| s.is_resource_already_exists_exception()) =>
            {
                Ok(())
            }
            Err(e) => Err(CallError::of(&e)),
        }
    }

    /// Sets `--retention-days` on a group just created. A failure is reported, not fatal: the
    /// records matter more than their expiry.
    async fn set_retention(&self) {
        let Some(days) = self.retention_days else {
            return;
        };
        let res = self
            .client
            .put_retention_policy()
            .log_group_name(&self.group)
            .retention_in_days(days)
            .send()
            .await;
        if let Err(e) = res {
            tracing::warn!(group = %self.group, days, error = %CallError::of(&e).detail, "cannot set the log group's retention");
        }
    }

    /// Sends one request's events (already valid: sorted, within the limits). No sequence
    /// token: CloudWatch ignores it since January 2023.
    pub async fn put(&self, events: &[Event]) -> Result<Put, CallError> {
        let input = events
            .iter()
            .map(|e| {
                InputLogEvent::builder()
                    .timestamp(e.timestamp)
                    .message(e.message.clone())
                    .build()
                    .expect("timestamp and message are both set")
            })
            .collect();
        let out = self
            .client
            .put_log_events()
            .log_group_name(&self.group)
            .log_stream_name(&self.stream)
            .set_log_events(Some(input))
            .send()
            .await
            .map_err(|e| CallError::of(&e))?;
        let mut put = Put::default();
        if let Some(info) = out.rejected_log_events_info() {
            put.rejected = rejected_ranges(
                events.len(),
                info.too_new_log_event_start_index(),
                info.too_old_log_event_end_index(),
                info.expired_log_event_end_index(),
            );
        }
        Ok(put)
    }
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
}
