//! (the sidecar) The CloudWatch Logs client: built from aws-config's default chains (credentials: env, web
//! identity for IRSA, container and instance metadata; region; `AWS_ENDPOINT_URL`), over rustls
//! with the ring provider only (no aws-lc in the build). Creates the group and stream when
//! missing and sends PutLogEvents calls. Every answer's `Date` updates the [`ServerClock`],
//! which is also the SDK's time source: requests are signed with CloudWatch's clock.

use std::ops::Range;
use std::sync::Arc;
use std::time::Duration;

use aws_config::BehaviorVersion;
use aws_config::retry::RetryConfig;
use aws_config::timeout::TimeoutConfig;
use aws_sdk_cloudwatchlogs::Client;
use aws_sdk_cloudwatchlogs::types::InputLogEvent;
use aws_smithy_http_client::tls::{self, rustls_provider::CryptoMode};

use super::batch::Event;
use super::clock::{DateObserver, ServerClock, ServerTimeSource};
use super::retry::CallError;
use crate::config::CloudWatchSettings;

/// Longest wait for a TCP (and TLS) connection to CloudWatch.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// Longest one call may take. A 1 MiB PutLogEvents normally takes well under a second.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);

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

/// How long the start-up look for credentials may take before it gives up saying nothing (the
/// instance metadata chain retries on its own timeouts).
const CREDENTIALS_LOOK: Duration = Duration::from_secs(5);

/// Says once, in one line each, what makes every request fail before the first one does: no
/// region, no credentials (issue 25.5: the first sign was a 1 KB debug dump per retry).
fn warn_if_unusable(sdk: &aws_config::SdkConfig) {
    if sdk.region().is_none() {
        tracing::warn!("cloudwatch: no region (set AWS_REGION): nothing can be sent");
    }
    let Some(provider) = sdk.credentials_provider() else {
        tracing::warn!("cloudwatch: no credentials provider: nothing can be sent");
        return;
    };
    tokio::spawn(async move {
        use aws_sdk_cloudwatchlogs::config::ProvideCredentials;
        if let Ok(Err(e)) =
            tokio::time::timeout(CREDENTIALS_LOOK, provider.provide_credentials()).await
        {
            tracing::warn!(error = %e, "cloudwatch: no credentials (env, web identity, container or instance metadata): nothing can be sent");
        }
    });
}

impl LogsClient {
    /// Loads the AWS configuration from the environment and builds the client. Makes no call.
    pub async fn new(settings: &CloudWatchSettings) -> Self {
        let clock = Arc::new(ServerClock::default());
        let http = aws_smithy_http_client::Builder::new()
            .tls_provider(tls::Provider::Rustls(CryptoMode::Ring))
            .build_https();
        let sdk = aws_config::defaults(BehaviorVersion::latest())
            .http_client(http)
            // The sink retries on its own (retry.rs).
            .retry_config(RetryConfig::disabled())
            .timeout_config(
                TimeoutConfig::builder()
                    .connect_timeout(CONNECT_TIMEOUT)
                    .operation_attempt_timeout(ATTEMPT_TIMEOUT)
                    .build(),
            )
            // Signing (and credential expiry) on CloudWatch's clock, once known.
            .time_source(ServerTimeSource(clock.clone()))
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
