//! `hooklog webhook` against hostile clients (issue 26): the real binary over TLS on 127.0.0.1.
//! Its memory per review is a bounded multiple of the body, whatever the body's shape, and the
//! review budget keeps the whole process under its Deployment's limit.

use serde_json::{Value, json};

use crate::webhook::{Certs, Webhook, pod_review, web_pod};

/// The memory limit of the shipped Deployment (k8s/webhook/webhook.yaml).
const DEPLOYMENT_LIMIT: u64 = 64 << 20;

/// The process's peak resident set (VmHWM), in bytes.
pub fn peak_rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    kb * 1024
}

/// A review of about `size` bytes in one of the shapes a large body can take.
pub fn body_of(shape: &str, size: usize) -> Vec<u8> {
    let opted = json!({"hooklog.dev/inject": "enabled"});
    let mut pod = match shape {
        "hostile" | "hostile-opted-in" => {
            let mut p = web_pod(if shape == "hostile" { json!({}) } else { opted });
            // The shape that costs serde_json the most per byte: empty arrays, 3 bytes each.
            p["spec"]["x"] = Value::Array(vec![json!([]); size / 3]);
            p
        }
        "env" => {
            let mut p = web_pod(opted);
            let env: Vec<Value> = (0..size / 40)
                .map(|i| json!({"name": format!("VAR_{i}"), "value": "some value"}))
                .collect();
            p["spec"]["containers"][0]["env"] = Value::Array(env);
            p
        }
        _ => {
            let mut p = web_pod(opted);
            p["metadata"]["annotations"]["big"] = json!("a".repeat(size));
            p
        }
    };
    let mut body = pod_review("u-mem", "shop", &pod);
    // Trim the filler to the size asked for (the arrays are a little over).
    while body.len() > size {
        let over = body.len() - size;
        match shape {
            "hostile" | "hostile-opted-in" => {
                let a = pod["spec"]["x"].as_array_mut().unwrap();
                a.truncate(a.len() - over.div_ceil(3));
            }
            "env" => {
                let a = pod["spec"]["containers"][0]["env"].as_array_mut().unwrap();
                a.truncate(a.len() - over.div_ceil(40).max(1));
            }
            _ => {
                let s = pod["metadata"]["annotations"]["big"]
                    .as_str()
                    .unwrap()
                    .len();
                pod["metadata"]["annotations"]["big"] = json!("a".repeat(s - over));
            }
        }
        body = pod_review("u-mem", "shop", &pod);
    }
    body
}

/// The webhook's peak RSS after one review of each shape and size up to the largest body it
/// reads: a review it reads costs at most its estimate (and so fits the budget), one too
/// costly is answered without being parsed, and the process stays under its Deployment's limit.
#[test]
fn one_review_of_any_shape_and_size_costs_what_the_webhook_budgets() {
    use hooklog::webhook::server::{MAX_BODY, REVIEW_BUDGET, review_cost};
    let dir = tempfile::tempdir().unwrap();
    let certs = Certs::make(dir.path(), "hooklog test CA");
    let mut failed = Vec::new();
    for shape in ["annotation", "env", "hostile", "hostile-opted-in"] {
        for size in [64 << 10, 1 << 20, 3 << 20, MAX_BODY - 1024] {
            let w = Webhook::start(&certs, &["--sidecar", "classic"]);
            // One small review first: the TLS session, the runtime's threads and the
            // allocator's first segments (about 4 MiB) are the idle process's, not the review's.
            let small = pod_review(
                "u-warm",
                "shop",
                &web_pod(json!({"hooklog.dev/inject": "enabled"})),
            );
            w.review(&certs.ca_pem, "/mutate", &small);
            let idle = peak_rss(w.child.id());
            let body = body_of(shape, size);
            let answer = w.review(&certs.ca_pem, "/mutate", &body);
            assert_eq!(answer["response"]["allowed"], json!(true), "{shape}");
            assert_eq!(answer["response"]["uid"], json!("u-mem"), "{shape}");
            let peak = peak_rss(w.child.id());
            let took = peak.saturating_sub(idle);
            let cost = review_cost(&body) as u64;
            let read = cost <= REVIEW_BUDGET as u64;
            eprintln!(
                "{shape}: body {} bytes, estimate {cost}, read {read}, idle {idle}, peak {peak}, review {took}",
                body.len()
            );
            // Read: within its estimate. Not read: no more than the body twice and a little.
            // Both with the allocator's granularity (a segment of 4 MiB) as slack.
            let bound = (4 << 20) + if read { cost } else { 2 * body.len() as u64 };
            if took > bound || peak >= DEPLOYMENT_LIMIT {
                failed.push(format!(
                    "{shape} {size}: review {took} > {bound} or peak {peak}"
                ));
            }
        }
    }
    assert!(failed.is_empty(), "{failed:#?}");
}

/// Eight reviews at once with the largest bodies, in every shape: the process stays under the
/// Deployment's limit.
#[test]
fn concurrent_largest_reviews_stay_under_the_deployment_limit() {
    use hooklog::webhook::server::MAX_BODY;
    let dir = tempfile::tempdir().unwrap();
    let certs = Certs::make(dir.path(), "hooklog test CA");
    let w = Webhook::start(&certs, &["--sidecar", "classic"]);
    let shapes = ["annotation", "env", "hostile", "hostile-opted-in"];
    let threads: Vec<_> = (0..8)
        .map(|i| {
            let body = body_of(shapes[i % shapes.len()], MAX_BODY - 1024);
            let (ca, port) = (certs.ca_pem.clone(), w.port);
            std::thread::spawn(move || {
                crate::webhook::https(port, &ca, "POST", "/mutate", &body).map(|(s, _)| s)
            })
        })
        .collect();
    for t in threads {
        assert_eq!(t.join().unwrap(), Ok(200));
    }
    let peak = peak_rss(w.child.id());
    eprintln!("8 reviews of {MAX_BODY} bytes at once: peak {peak}");
    assert!(peak < DEPLOYMENT_LIMIT, "peak {peak}");
}
