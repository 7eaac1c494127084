//! Integration tests: the real `hooklog` binary, real shells writing, real signals.

mod util;

mod adoption;
mod apiserver;
mod bench;
mod cli;
mod cost;
mod deadlines;
mod dockerfile;
mod docs;
mod events;
mod events_faults;
mod faithful;
mod hook;
mod hostile;
mod hostile_registry;
mod image;
mod k8s;
mod kubelet;
mod layers;
mod lifecycle;
mod manifest;
mod registry;
mod rotation;
mod routes;
mod rules;
mod sidecar;
mod socket;
mod tail;
mod tail_workaround;
mod torture;
mod webhook;
mod webhook_limits;
mod yaml;
mod yaml_suite;
mod yaml_values;
// Last rather than alphabetical: keeps merges with the other test modules clean.
mod cloudwatch;
mod day_one;
mod helm;
mod log_format;
mod reinject;
mod release;
mod schema_pods;
mod sidecar_settings;
mod webhook_hostile;
