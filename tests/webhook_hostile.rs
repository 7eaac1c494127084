//! `hooklog webhook` against what goes wrong (issue 36 §2, §3): a review whose handling panics is
//! answered (allowed, unpatched, with its uid and a warning) and the webhook goes on serving.

use serde_json::{Value, json};

use crate::schema_pods::KeepAlive;
use crate::webhook::{Certs, Webhook, pod_review, web_pod};

/// A pod opted in, annotated to meet the panic planted in debug builds
/// (src/webhook/review.rs `planted_panic`) when the webhook runs with `HOOKLOG_TEST_PANIC`.
fn panicking_pod() -> Value {
    web_pod(json!({"hooklog.dev/inject": "enabled", "hooklog.dev/test-panic": "yes"}))
}

/// A panic while one review is handled (planted in the real binary) answers that review allowed,
/// unpatched, with its uid and a warning; the reviews before and after it, on the same
/// connection and on new ones, are injected, and the process lives on.
#[test]
fn a_panic_in_one_review_leaves_the_webhook_serving() {
    let tmp = tempfile::tempdir().unwrap();
    let certs = Certs::make(tmp.path(), "isolation-ca");
    let mut webhook = Webhook::start_with(
        &certs,
        &["--sidecar", "native"],
        &[("HOOKLOG_TEST_PANIC", "1")],
    );
    let real = web_pod(json!({"hooklog.dev/inject": "enabled"}));
    let mut conn = KeepAlive::open(webhook.port, &certs.ca_pem);
    let path = "/mutate";
    for round in 0..3 {
        let uid = format!("real-{round}");
        let (status, body, _) = conn.post(path, &pod_review(&uid, "shop", &real)).unwrap();
        let answer: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(status, 200);
        assert_eq!(answer["response"]["uid"], uid.as_str(), "{answer}");
        assert!(
            answer["response"]["patch"].is_string(),
            "not injected: {answer}"
        );

        let uid = format!("panic-{round}");
        let (status, body, keep) = conn
            .post(path, &pod_review(&uid, "shop", &panicking_pod()))
            .unwrap();
        let answer: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(status, 200);
        assert_eq!(answer["response"]["uid"], uid.as_str(), "{answer}");
        assert_eq!(answer["response"]["allowed"], true, "{answer}");
        assert!(answer["response"].get("patch").is_none(), "{answer}");
        let warning = answer["response"]["warnings"][0]
            .as_str()
            .unwrap_or_default();
        assert!(warning.contains("a bug"), "{answer}");
        assert!(keep, "the connection was closed after the panic");
    }
    assert!(
        webhook.child.try_wait().unwrap().is_none(),
        "the webhook exited"
    );
    assert!(
        webhook
            .log()
            .iter()
            .any(|l| l.contains("review failed") && l.contains("planted panic")),
        "{:#?}",
        webhook.log()
    );
}
