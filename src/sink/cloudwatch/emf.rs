//! (the sidecar) CloudWatch Embedded Metric Format for the `hooks.summary` record (`--emf`): CloudWatch Logs
//! turns the record into metrics on ingestion, whether it arrives through PutLogEvents or
//! through Fluent Bit from stdout, so an alarm needs no metric filter.
//!
//! Specification:
//! <https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/CloudWatch_Embedded_Metric_Format_Specification.html>.
//! One EMF document holds one value per dimension, so the pod's totals ride on the summary
//! record (dimension `namespace`) and each peer gets a `hooks.metrics` record of its own
//! (dimensions `namespace` and `container`).

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use crate::lifecycle::peers::PeerOutcome;

/// The count metrics and the outcome each one counts.
const COUNT_METRICS: [(&str, &str); 4] = [
    ("HooksFailed", "failed"),
    ("HooksMissing", "missing"),
    ("HooksUnfinished", "unfinished"),
    ("HooksTimedOut", "timed_out"),
];

/// The duration metric.
const DURATION_METRIC: &str = "HookDurationMs";

/// Most values one EMF metric may carry as an array (EMF specification: "up to 100 values").
const MAX_VALUES: usize = 100;

/// Dimension value when the pod's namespace is unknown (CloudWatch rejects empty values).
const UNKNOWN: &str = "unknown";

fn directive(metric_ns: &str, dimensions: &[&str], metrics: &[(&str, &str)], now_ms: i64) -> Value {
    let metrics: Vec<Value> = metrics
        .iter()
        .map(|(name, unit)| json!({"Name": name, "Unit": unit}))
        .collect();
    json!({
        "Timestamp": now_ms,
        "CloudWatchMetrics": [{
            "Namespace": metric_ns,
            "Dimensions": [dimensions],
            "Metrics": metrics,
        }]
    })
}

/// Adds the pod's totals to the summary's members: `namespace`, one count per metric in
/// [`COUNT_METRICS`], `HookDurationMs` as the list of every hook's duration, and `_aws`.
pub fn add_to_summary(
    members: &mut Map<String, Value>,
    metric_ns: &str,
    pod_ns: Option<&str>,
    outcomes: &BTreeMap<String, PeerOutcome>,
    now_ms: i64,
) {
    members.insert(
        "namespace".into(),
        json!(pod_ns.filter(|n| !n.is_empty()).unwrap_or(UNKNOWN)),
    );
    let mut metrics = Vec::new();
    for (name, outcome) in COUNT_METRICS {
        let n = outcomes.values().filter(|p| p.outcome == outcome).count();
        members.insert(name.into(), json!(n));
        metrics.push((name, "Count"));
    }
    let durations: Vec<u64> = outcomes
        .values()
        .filter_map(|p| p.duration_ms)
        .take(MAX_VALUES)
        .collect();
    if !durations.is_empty() {
        members.insert(DURATION_METRIC.into(), json!(durations));
        metrics.push((DURATION_METRIC, "Milliseconds"));
    }
    members.insert(
        "_aws".into(),
        directive(metric_ns, &["namespace"], &metrics, now_ms),
    );
}

/// One `hooks.metrics` record's members per peer: the same metrics for that container alone
/// (0 or 1 each), dimensioned by `namespace` and `container`.
pub fn per_peer(
    metric_ns: &str,
    pod_ns: Option<&str>,
    outcomes: &BTreeMap<String, PeerOutcome>,
    now_ms: i64,
) -> Vec<Map<String, Value>> {
    outcomes
        .iter()
        .map(|(container, p)| {
            let mut m = Map::new();
            m.insert("event".into(), json!("hooks.metrics"));
            m.insert(
                "message".into(),
                json!(format!("hook metrics: {container} {}", p.outcome)),
            );
            m.insert(
                "namespace".into(),
                json!(pod_ns.filter(|n| !n.is_empty()).unwrap_or(UNKNOWN)),
            );
            m.insert("container".into(), json!(container));
            m.insert("outcome".into(), json!(p.outcome));
            let mut metrics = Vec::new();
            for (name, outcome) in COUNT_METRICS {
                m.insert(name.into(), json!(u8::from(p.outcome == outcome)));
                metrics.push((name, "Count"));
            }
            if let Some(d) = p.duration_ms {
                m.insert(DURATION_METRIC.into(), json!(d));
                metrics.push((DURATION_METRIC, "Milliseconds"));
            }
            m.insert(
                "_aws".into(),
                directive(metric_ns, &["namespace", "container"], &metrics, now_ms),
            );
            m
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(o: &str, d: Option<u64>) -> PeerOutcome {
        PeerOutcome {
            outcome: o.into(),
            exit_code: None,
            duration_ms: d,
        }
    }

    fn outcomes() -> BTreeMap<String, PeerOutcome> {
        BTreeMap::from([
            ("api".to_string(), outcome("failed", Some(1200))),
            ("envoy".to_string(), outcome("ok", Some(15_000))),
            ("worker".to_string(), outcome("missing", None)),
        ])
    }

    /// Checks what the EMF specification requires of a document: every metric and dimension
    /// named in `_aws` has a value at the root, numbers for metrics, strings for dimensions.
    fn assert_valid_emf(doc: &Map<String, Value>, now: i64) {
        let aws = &doc["_aws"];
        assert_eq!(aws["Timestamp"], now);
        for d in aws["CloudWatchMetrics"].as_array().unwrap() {
            assert!(d["Namespace"].as_str().is_some_and(|n| !n.is_empty()));
            for set in d["Dimensions"].as_array().unwrap() {
                for key in set.as_array().unwrap() {
                    let v = &doc[key.as_str().unwrap()];
                    assert!(
                        v.as_str().is_some_and(|s| !s.is_empty()),
                        "dimension {key} = {v}"
                    );
                }
            }
            for m in d["Metrics"].as_array().unwrap() {
                let v = &doc[m["Name"].as_str().unwrap()];
                let ok = v.is_number()
                    || v.as_array().is_some_and(|a| {
                        !a.is_empty() && a.len() <= MAX_VALUES && a.iter().all(Value::is_number)
                    });
                assert!(ok, "metric {} = {v}", m["Name"]);
            }
        }
    }

    #[test]
    fn summary_carries_the_pods_totals() {
        let mut m = Map::new();
        m.insert("event".into(), json!("hooks.summary"));
        add_to_summary(&mut m, "hooklog", Some("shop"), &outcomes(), 1000);
        assert_valid_emf(&m, 1000);
        assert_eq!(m["HooksFailed"], 1);
        assert_eq!(m["HooksMissing"], 1);
        assert_eq!(m["HooksUnfinished"], 0);
        assert_eq!(m["HooksTimedOut"], 0);
        assert_eq!(m["HookDurationMs"], json!([1200, 15000]));
        assert_eq!(m["namespace"], "shop");
        assert_eq!(m["_aws"]["CloudWatchMetrics"][0]["Namespace"], "hooklog");
        assert_eq!(
            m["_aws"]["CloudWatchMetrics"][0]["Dimensions"],
            json!([["namespace"]])
        );
        assert_eq!(m["event"], "hooks.summary");
    }

    #[test]
    fn no_hooks_means_zero_counts_and_no_duration() {
        let mut m = Map::new();
        add_to_summary(&mut m, "ns", None, &BTreeMap::new(), 5);
        assert_valid_emf(&m, 5);
        assert_eq!(m["HooksFailed"], 0);
        assert!(!m.contains_key("HookDurationMs"));
        assert_eq!(m["namespace"], "unknown");
    }

    #[test]
    fn each_peer_gets_its_own_document() {
        let docs = per_peer("hooklog", Some("shop"), &outcomes(), 7);
        assert_eq!(docs.len(), 3);
        for d in &docs {
            assert_valid_emf(d, 7);
            assert_eq!(
                d["_aws"]["CloudWatchMetrics"][0]["Dimensions"],
                json!([["namespace", "container"]])
            );
        }
        assert_eq!(docs[0]["container"], "api");
        assert_eq!(docs[0]["HooksFailed"], 1);
        assert_eq!(docs[0]["HookDurationMs"], 1200);
        assert_eq!(docs[1]["HooksFailed"], 0);
        assert_eq!(docs[2]["HooksMissing"], 1);
        assert!(!docs[2].contains_key("HookDurationMs"));
    }
}
