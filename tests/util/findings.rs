//! `hooklog check --format json`'s report read back: its findings, by rule.

use serde_json::Value;

/// The findings of a `check --format json` report.
pub fn all(doc: &Value) -> &[Value] {
    doc["findings"]
        .as_array()
        .unwrap_or_else(|| panic!("a report without findings: {doc:#}"))
}

/// Every finding of `rule`, in the report's order.
pub fn of_rule<'a>(doc: &'a Value, rule: &str) -> Vec<&'a Value> {
    all(doc).iter().filter(|f| f["rule"] == rule).collect()
}

/// The first finding of `rule`; a report without one fails the test, shown whole.
pub fn first<'a>(doc: &'a Value, rule: &str) -> &'a Value {
    all(doc)
        .iter()
        .find(|f| f["rule"] == rule)
        .unwrap_or_else(|| panic!("no {rule} finding: {doc:#}"))
}

/// The containers the findings of `rule` name, in the report's order.
pub fn containers<'a>(doc: &'a Value, rule: &str) -> Vec<&'a str> {
    of_rule(doc, rule)
        .into_iter()
        .map(|f| f["container"].as_str().unwrap_or_default())
        .collect()
}

/// A report's exit code and findings are (0, none): `what` and the report name a failure.
pub fn assert_clean(code: i32, doc: &Value, what: &str) {
    assert_eq!(
        (code, all(doc)),
        (0, &[][..]),
        "{what}: check found something: {doc:#}"
    );
}
