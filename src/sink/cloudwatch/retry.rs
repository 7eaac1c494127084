//! (the sidecar) Which CloudWatch failures are worth another try, and how long to wait before it.
//!
//! Two layers. Within one call the SDK retries with its standard mode (its own classifiers:
//! throttling, transient errors, 5xx, timeouts, broken connections; [`SDK_MAX_ATTEMPTS`] tries,
//! backoff from [`BACKOFF_BASE`] to [`BACKOFF_MAX`], configured in `client.rs`). Past them the
//! call fails and the sink decides here whether the same call may succeed later: it keeps
//! trying for as long as hooklog runs (the inputs wait meanwhile: back-pressure), re-signs once
//! CloudWatch's `Date` corrected the clock ([`is_clock_skew`], which the SDK does not retry),
//! and stops in time for the grace deadline.

use std::time::Duration;

use aws_credential_types::provider::error::CredentialsError;
use aws_sdk_cloudwatchlogs::config::http::HttpResponse;
use aws_sdk_cloudwatchlogs::error::{ProvideErrorMetadata, SdkError};

/// Tries the SDK makes of one call (its standard mode's default, set explicitly) before the
/// sink sees the failure.
pub const SDK_MAX_ATTEMPTS: u32 = 3;

/// First wait before a retry.
pub const BACKOFF_BASE: Duration = Duration::from_millis(100);

/// Longest wait between two tries. AWS's retry guidance ("Retry with backoff pattern",
/// <https://docs.aws.amazon.com/prescriptive-guidance/latest/cloud-design-patterns/retry-backoff.html>)
/// caps the exponential growth; 20 s is the SDK's own cap for its standard mode.
pub const BACKOFF_MAX: Duration = Duration::from_secs(20);

/// Error codes that mean "try again later" (CloudWatch Logs' common errors,
/// <https://docs.aws.amazon.com/AmazonCloudWatchLogs/latest/APIReference/CommonErrors.html>).
const RETRIABLE_CODES: [&str; 8] = [
    "ThrottlingException",
    "Throttling",
    "TooManyRequestsException",
    "RequestLimitExceeded",
    "ServiceUnavailableException",
    "ServiceUnavailable",
    "InternalFailure",
    "RequestTimeout",
];

/// Error codes with which AWS refuses a request signed with a time too far from its own
/// (SigV4: "Signature expired", "Signature not yet current"), as the AWS SDKs list them
/// (aws-sdk-js-v3 `service-error-classification` `CLOCK_SKEW_ERROR_CODES`, smithy-rs
/// `aws-runtime` `CLOCK_SKEW_ERROR_CODES`). The same codes also mean a wrong key or a missing
/// permission, so they are retried only when the answer moved the clock offset (mod.rs).
const CLOCK_SKEW_CODES: [&str; 7] = [
    "InvalidSignatureException",
    "SignatureDoesNotMatch",
    "AuthFailure",
    "RequestTimeTooSkewed",
    "RequestExpired",
    "RequestInTheFuture",
    "AccessDeniedException",
];

/// What went wrong with one call, reduced to what decides a retry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// The request could not be built (bad input, no credentials).
    Construction,
    /// The call did not complete in time.
    Timeout,
    /// The request could not be sent or the connection broke (server down, DNS, TLS).
    Dispatch,
    /// No credentials to sign with (the source failed, timed out or gave expired ones): the
    /// credential provider has warned already; worth another try, as the source may recover.
    Credentials,
    /// An answer came but could not be read.
    Response,
    /// CloudWatch answered with an error.
    Service {
        /// HTTP status.
        status: u16,
        /// AWS error code, e.g. `ThrottlingException`.
        code: Option<String>,
    },
}

impl Failure {
    /// Classifies an SDK error of any operation.
    pub fn of<E: ProvideErrorMetadata + std::error::Error + 'static>(
        e: &SdkError<E, HttpResponse>,
    ) -> Failure {
        if no_credentials(e) {
            return Failure::Credentials;
        }
        match e {
            SdkError::ConstructionFailure(_) => Failure::Construction,
            SdkError::TimeoutError(_) => Failure::Timeout,
            SdkError::DispatchFailure(d) if d.is_user() => Failure::Construction,
            SdkError::DispatchFailure(_) => Failure::Dispatch,
            SdkError::ResponseError(_) => Failure::Response,
            SdkError::ServiceError(s) => Failure::Service {
                status: s.raw().status().as_u16(),
                code: s.err().code().map(str::to_string),
            },
            _ => Failure::Response,
        }
    }

    /// The AWS error code, when CloudWatch answered.
    pub fn code(&self) -> Option<&str> {
        match self {
            Failure::Service { code, .. } => code.as_deref(),
            _ => None,
        }
    }
}

/// A failed call: its classification, and the SDK's full description for the logs (such as
/// "no credentials" behind a dispatch failure).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallError {
    /// What decides a retry.
    pub failure: Failure,
    /// The error and its causes, one line.
    pub detail: String,
}

impl CallError {
    /// From an SDK error of any operation.
    pub fn of<E: ProvideErrorMetadata + std::error::Error + 'static>(
        e: &SdkError<E, HttpResponse>,
    ) -> CallError {
        CallError {
            failure: Failure::of(e),
            detail: aws_smithy_types::error::display::DisplayErrorContext(e).to_string(),
        }
    }

    /// A call cut short by the shutdown deadline.
    pub fn deadline() -> CallError {
        CallError {
            failure: Failure::Timeout,
            detail: "no answer before the shutdown deadline".into(),
        }
    }
}

/// True when the call failed for want of credentials: a [`CredentialsError`] from the
/// provider chain, or the identity cache's load timeout (`identity resolver timed out`, an
/// error type of its own the SDK does not export), somewhere in the error's causes.
fn no_credentials(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(c) = cause {
        if c.downcast_ref::<CredentialsError>().is_some()
            || c.to_string().starts_with("identity resolver timed out")
        {
            return true;
        }
        cause = c.source();
    }
    false
}

/// True when the same call may succeed later: throttling, server errors, timeouts and
/// connection failures. Client errors (bad parameters, access denied) are not.
pub fn is_retriable(f: &Failure) -> bool {
    match f {
        Failure::Construction => false,
        Failure::Timeout | Failure::Dispatch | Failure::Credentials | Failure::Response => true,
        Failure::Service { status, code } => {
            *status >= 500
                || *status == 429
                || code
                    .as_deref()
                    .is_some_and(|c| RETRIABLE_CODES.contains(&c))
        }
    }
}

/// True when CloudWatch may have refused the call because of its signing time: worth another
/// try once the clock offset has been corrected.
pub fn is_clock_skew(f: &Failure) -> bool {
    f.code().is_some_and(|c| CLOCK_SKEW_CODES.contains(&c))
}

/// The wait before try number `attempt + 1` (attempt counts from 0): exponential from
/// [`BACKOFF_BASE`] up to [`BACKOFF_MAX`], with "full jitter" (a uniform draw below that bound,
/// <https://aws.amazon.com/blogs/architecture/exponential-backoff-and-jitter/>) so that many pods
/// throttled together do not retry together. `unit` is a uniform draw in [0, 1).
pub fn backoff(attempt: u32, unit: f64) -> Duration {
    let bound = BACKOFF_BASE
        .saturating_mul(1u32 << attempt.min(16))
        .min(BACKOFF_MAX);
    // Never zero: at least a tenth of the bound, so a retry loop cannot spin.
    bound.mul_f64(0.1 + 0.9 * unit.clamp(0.0, 1.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn service(status: u16, code: &str) -> Failure {
        Failure::Service {
            status,
            code: Some(code.into()),
        }
    }

    #[test]
    fn throttling_and_server_errors_are_retried() {
        assert!(is_retriable(&service(400, "ThrottlingException")));
        assert!(is_retriable(&service(400, "ServiceUnavailableException")));
        assert!(is_retriable(&service(500, "InternalFailure")));
        assert!(is_retriable(&service(503, "Whatever")));
        assert!(is_retriable(&Failure::Service {
            status: 502,
            code: None
        }));
        assert!(is_retriable(&service(429, "TooManyRequestsException")));
    }

    #[test]
    fn connection_problems_are_retried() {
        assert!(is_retriable(&Failure::Timeout));
        assert!(is_retriable(&Failure::Dispatch));
        assert!(is_retriable(&Failure::Credentials));
        assert!(is_retriable(&Failure::Response));
    }

    #[test]
    fn client_errors_are_not_retried() {
        assert!(!is_retriable(&service(400, "InvalidParameterException")));
        assert!(!is_retriable(&service(400, "ResourceNotFoundException")));
        assert!(!is_retriable(&service(400, "AccessDeniedException")));
        assert!(!is_retriable(&service(400, "UnrecognizedClientException")));
        assert!(!is_retriable(&Failure::Construction));
    }

    #[test]
    fn signature_time_errors_are_clock_skew_and_not_retried_by_themselves() {
        let sig = service(403, "InvalidSignatureException");
        assert!(is_clock_skew(&sig));
        assert!(!is_retriable(&sig));
        assert!(is_clock_skew(&service(403, "AccessDeniedException")));
        assert!(!is_clock_skew(&service(400, "ThrottlingException")));
        assert!(!is_clock_skew(&service(400, "InvalidParameterException")));
        assert!(!is_clock_skew(&Failure::Timeout));
    }

    #[test]
    fn classifies_real_sdk_errors() {
        use aws_sdk_cloudwatchlogs::operation::put_log_events::PutLogEventsError;
        use aws_smithy_types::body::SdkBody;
        use aws_smithy_types::error::ErrorMetadata;
        let meta = ErrorMetadata::builder().code("ThrottlingException").build();
        let raw = HttpResponse::new(400.try_into().unwrap(), SdkBody::empty());
        let e: SdkError<PutLogEventsError, HttpResponse> =
            SdkError::service_error(PutLogEventsError::generic(meta), raw);
        assert_eq!(Failure::of(&e), service(400, "ThrottlingException"));
        let t: SdkError<PutLogEventsError, HttpResponse> = SdkError::timeout_error("slow");
        assert_eq!(Failure::of(&t), Failure::Timeout);
        let c: SdkError<PutLogEventsError, HttpResponse> = SdkError::construction_failure("bad");
        assert_eq!(Failure::of(&c), Failure::Construction);
        // No credentials: the identity resolver's error inside a dispatch failure, as the
        // orchestrator wraps it; the cache's timeout has a type of its own, said in its text.
        use aws_sdk_cloudwatchlogs::error::ConnectorError;
        let none: SdkError<PutLogEventsError, HttpResponse> = SdkError::dispatch_failure(
            ConnectorError::other(CredentialsError::not_loaded("no source").into(), None),
        );
        assert_eq!(Failure::of(&none), Failure::Credentials);
        let slow: SdkError<PutLogEventsError, HttpResponse> = SdkError::dispatch_failure(
            ConnectorError::other("identity resolver timed out after 5s".into(), None),
        );
        assert_eq!(Failure::of(&slow), Failure::Credentials);
        let down: SdkError<PutLogEventsError, HttpResponse> =
            SdkError::dispatch_failure(ConnectorError::other("connection refused".into(), None));
        assert_eq!(Failure::of(&down), Failure::Dispatch);
    }

    #[test]
    fn backoff_grows_is_capped_and_never_zero() {
        assert_eq!(backoff(0, 0.999_999).as_millis(), 99);
        assert_eq!(backoff(3, 1.0), Duration::from_millis(800));
        assert_eq!(backoff(40, 1.0), BACKOFF_MAX);
        assert_eq!(backoff(0, 0.0), Duration::from_millis(10));
        for a in 0..30 {
            let d = backoff(a, 0.5);
            assert!(d > Duration::ZERO && d <= BACKOFF_MAX);
        }
    }
}
