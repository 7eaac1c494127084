//! The `hooks.summary` record as the tests read it: what it says of one peer.

use serde_json::Value;

/// `peer`'s outcome and exit code in `summary` (`("", None)` for a peer it does not name), to
/// assert both at once: `assert_eq!(outcome_of(&summary, "envoy"), ("failed", Some(3)))`.
pub fn outcome_of<'s>(summary: &'s Value, peer: &str) -> (&'s str, Option<i64>) {
    let p = &summary["peers"][peer];
    (
        p["outcome"].as_str().unwrap_or_default(),
        p["exit_code"].as_i64(),
    )
}
