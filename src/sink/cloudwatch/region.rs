//! (the sidecar) The region the SDK's default chain finds (environment, profile, instance
//! metadata) and the bounded IMDS client it asks, shared by the client and `run`'s start-up check.

use std::time::Duration;

use aws_config::environment::EnvironmentVariableRegionProvider;
use aws_config::imds;
use aws_config::meta::region::RegionProviderChain;
use aws_config::profile::ProfileFileRegionProvider;
use aws_config::provider_config::ProviderConfig;
use aws_smithy_http_client::tls::{self, rustls_provider::CryptoMode};

/// IMDS (region and credentials on an EC2 node): connect and read timeouts per try, and tries.
/// The SDK's defaults (1 s, 1 s, 4 tries, 30 s per operation) probe an absent IMDS (Fargate,
/// a laptop) for up to 8 s at start before the region chain gives up; these keep it to 2 s.
const IMDS_CONNECT_TIMEOUT: Duration = Duration::from_millis(500);
/// See [`IMDS_CONNECT_TIMEOUT`].
const IMDS_READ_TIMEOUT: Duration = Duration::from_millis(500);
/// See [`IMDS_CONNECT_TIMEOUT`].
const IMDS_ATTEMPTS: u32 = 2;
/// See [`IMDS_CONNECT_TIMEOUT`].
pub(crate) const IMDS_OPERATION_TIMEOUT: Duration = Duration::from_secs(2);

/// The IMDS client of the region and credential chains, with [`IMDS_CONNECT_TIMEOUT`] and the
/// rest (`AWS_EC2_METADATA_SERVICE_ENDPOINT` and `AWS_EC2_METADATA_DISABLED` still apply).
pub(crate) fn imds_client(conf: &ProviderConfig) -> imds::Client {
    imds::Client::builder()
        .configure(conf)
        .connect_timeout(IMDS_CONNECT_TIMEOUT)
        .read_timeout(IMDS_READ_TIMEOUT)
        .max_attempts(IMDS_ATTEMPTS)
        .operation_timeout(IMDS_OPERATION_TIMEOUT)
        .build()
}

/// The SDK's default region chain (environment, profile, IMDS), its IMDS client bounded.
pub(crate) fn region_chain(conf: &ProviderConfig, imds: &imds::Client) -> RegionProviderChain {
    RegionProviderChain::first_try(EnvironmentVariableRegionProvider::new())
        .or_else(ProfileFileRegionProvider::builder().configure(conf).build())
        .or_else(
            imds::region::ImdsRegionProvider::builder()
                .configure(conf)
                .imds_client(imds.clone())
                .build(),
        )
}

/// The region the SDK's default chain finds at start (environment, the profile's `region`,
/// instance metadata within [`IMDS_OPERATION_TIMEOUT`]), or `None`: asked before the daemon's
/// runtime starts, on a runtime of its own, so that CloudWatch output with no region is a
/// start-up error (issue 41) found where the client will look (issue 35), not by a reader of ours.
pub fn region_at_start() -> Option<String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .ok()?;
    runtime.block_on(async {
        let conf = ProviderConfig::without_region().with_http_client(
            aws_smithy_http_client::Builder::new()
                .tls_provider(tls::Provider::Rustls(CryptoMode::Ring))
                .build_https(),
        );
        let imds = imds_client(&conf);
        region_chain(&conf, &imds)
            .region()
            .await
            .map(|r| r.to_string())
    })
}
