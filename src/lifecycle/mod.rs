//! (the sidecar) Lifecycle: the shutdown trigger, who still runs a hook, one copy of each of its lifecycle
//! records, and the summary of how hooks ended.

pub mod once;
pub mod peers;
pub mod signal;
