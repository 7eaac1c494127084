//! Integration tests: the real `hooklog` binary, real shells writing, real signals.

mod util;

mod bench;
mod cli;
mod cost;
mod deadlines;
mod dockerfile;
mod docs;
mod faithful;
mod hook;
mod hostile;
mod image;
mod k8s;
mod kubelet;
mod layers;
mod lifecycle;
mod manifest;
mod registry;
// After registry: uses its helpers.
mod hostile_registry;
mod rotation;
mod routes;
// After image: uses its helpers.
mod sidecar;
mod socket;
mod tail;
mod tail_workaround;
mod torture;
mod webhook;
mod webhook_limits;
mod yaml;
// After yaml: uses its helpers.
mod yaml_suite;
// After yaml and manifest: uses their helpers.
mod yaml_values;
// After webhook: uses its helpers.
mod apiserver;
// After apiserver and webhook: uses their helpers.
mod events;
// After webhook: uses its helpers.
mod events_faults;
// After webhook and manifest: uses their helpers.
mod adoption;
// After manifest: uses its helpers.
mod rules;
// Last rather than alphabetical: keeps merges with the other test modules clean.
mod cloudwatch;
// After webhook, manifest and k8s: uses their helpers.
mod helm;
// After helm and cli: uses their helpers.
mod release;
// After webhook: uses its helpers.
mod schema_pods;
// After schema_pods and webhook: uses their helpers.
mod webhook_hostile;
// After image: uses its helpers.
mod log_format;
// After manifest: uses its helpers.
mod day_one;
// After manifest: uses its helpers.
mod sidecar_settings;
