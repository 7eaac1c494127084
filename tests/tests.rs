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
mod hostile_registry;
mod rotation;
mod routes;
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
mod apiserver;
mod events;
mod events_faults;
mod adoption;
mod rules;
// Last rather than alphabetical: keeps merges with the other test modules clean.
mod cloudwatch;
mod helm;
mod release;
mod schema_pods;
mod webhook_hostile;
mod log_format;
mod day_one;
