//! Lifecycle: the shutdown trigger, who still runs a hook, and the summary of how hooks ended.

pub mod peers;
pub mod signal;
