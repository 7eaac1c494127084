//! `hooklog webhook` at the AdmissionReview level: the real binary serving HTTPS on 127.0.0.1,
//! with a CA and serving certificate the test makes, answering reviews shaped as the API server
//! sends them; every patched pod is compared with what `hooklog inject` makes of the same pod.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};

use crate::util::webhook::{
    Certs, IMAGE, Webhook, assert_structurally_injected, https, injected, patched, pod_review,
    serving, web_pod,
};
use crate::util::{hooklog, wait_until};

fn warnings(answer: &Value) -> Vec<String> {
    answer["response"]["warnings"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|w| w.as_str().map(String::from))
        .collect()
}

#[test]
fn an_opted_in_pod_is_patched_into_what_inject_classic_makes_of_it() {
    let (_dir, certs, w) = serving(&["--sidecar", "classic"]);
    let want = injected(&web_pod(json!({})), &["--sidecar", "classic"]);
    assert_ne!(want, web_pod(json!({})), "inject changed nothing");

    // The namespace has the label: the configuration's namespace-enabled webhook calls.
    let pod = web_pod(json!({}));
    let answer = w.review(
        &certs.ca_pem,
        "/mutate/namespace-enabled",
        &pod_review("u-1", "shop", &pod),
    );
    assert_eq!(answer["apiVersion"], "admission.k8s.io/v1");
    assert_eq!(answer["kind"], "AdmissionReview");
    assert_eq!(answer["response"]["uid"], "u-1");
    assert_eq!(answer["response"]["allowed"], true);
    assert_eq!(patched(&pod, &answer), want);
    assert_structurally_injected(&pod, &patched(&pod, &answer), false);

    // Any namespace, the pod's annotation asks.
    let pod = web_pod(json!({"hooklog.dev/inject": "enabled"}));
    let answer = w.review(&certs.ca_pem, "/mutate", &pod_review("u-2", "shop", &pod));
    assert_eq!(
        patched(&pod, &answer),
        injected(&pod, &["--sidecar", "classic"])
    );
    assert!(
        w.log()
            .iter()
            .any(|l| l.contains("injected") && l.contains("shop/web-5d9c7b8f6d-")),
        "{:#?}",
        w.log()
    );
}

#[test]
fn opted_out_pods_are_untouched_and_nothing_is_said() {
    let dir = tempfile::tempdir().unwrap();
    let certs = Certs::make(dir.path(), "hooklog test CA");
    let w = Webhook::start(&certs, &["--sidecar", "classic"]);
    for (path, annotations) in [
        ("/mutate", json!({})),
        (
            "/mutate/namespace-enabled",
            json!({"hooklog.dev/inject": "disabled"}),
        ),
        ("/mutate", json!({"hooklog.dev/inject": "disabled"})),
    ] {
        let pod = web_pod(annotations.clone());
        let answer = w.review(&certs.ca_pem, path, &pod_review("u-3", "shop", &pod));
        assert_eq!(answer["response"]["allowed"], true);
        assert!(
            answer["response"].get("patch").is_none(),
            "{path} {annotations}: {answer}"
        );
        assert!(warnings(&answer).is_empty(), "{answer}");
    }
}

#[test]
fn skipped_pods_get_an_injection_skipped_warning_and_a_log_line() {
    let (_dir, certs, w) = serving(&["--sidecar", "classic", "--own-namespace", "hooklog"]);
    let on = json!({"hooklog.dev/inject": "enabled"});
    let mut host = web_pod(on.clone());
    host["spec"]["hostNetwork"] = json!(true);
    let mut job = web_pod(on.clone());
    job["spec"]["restartPolicy"] = json!("Never");
    job["metadata"]["ownerReferences"] = json!([{"apiVersion": "batch/v1", "kind": "Job", "name": "migrate", "uid": "6a3f2b8e-0000-4000-8000-000000000002", "controller": true}]);
    for (namespace, pod, why) in [
        (
            "kube-system",
            web_pod(on.clone()),
            "kube-system is a system namespace",
        ),
        ("kube-node-lease", web_pod(on.clone()), "system namespace"),
        (
            "hooklog",
            web_pod(on.clone()),
            "the webhook's own namespace",
        ),
        ("shop", host, "hostNetwork"),
        ("shop", job, "a Job's pod"),
    ] {
        let answer = w.review(
            &certs.ca_pem,
            "/mutate",
            &pod_review("u-4", namespace, &pod),
        );
        assert_eq!(answer["response"]["allowed"], true);
        assert!(answer["response"].get("patch").is_none(), "{why}: {answer}");
        let ws = warnings(&answer);
        assert!(
            ws.len() == 1 && ws[0].starts_with("InjectionSkipped: ") && ws[0].contains(why),
            "{why}: {ws:?}"
        );
        assert!(
            wait_until(Duration::from_secs(5), || w
                .log()
                .iter()
                .any(|l| l.contains("InjectionSkipped") && l.contains(why))),
            "{why}: {:#?}",
            w.log()
        );
    }

    // Already injected (a reinvocation, or a pod injected by `hooklog inject`): unchanged.
    let done = injected(&web_pod(on.clone()), &["--sidecar", "classic"]);
    let answer = w.review(&certs.ca_pem, "/mutate", &pod_review("u-5", "shop", &done));
    assert!(answer["response"].get("patch").is_none(), "{answer}");
}

#[test]
fn an_annotation_on_the_deployment_instead_of_its_template_is_reported() {
    let (_dir, certs, w) = serving(&["--sidecar", "classic"]);
    let deploy = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "shop", "annotations": {"hooklog.dev/inject": "enabled"}},
        "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": {
            "metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "app", "image": "nginx:1.25"}]}}}
    });
    let mut review: Value = serde_json::from_slice(&pod_review("u-6", "shop", &deploy)).unwrap();
    review["request"]["kind"] = json!({"group": "apps", "version": "v1", "kind": "Deployment"});
    review["request"]["resource"] =
        json!({"group": "apps", "version": "v1", "resource": "deployments"});
    let answer = w.review(&certs.ca_pem, "/mutate", review.to_string().as_bytes());
    assert!(answer["response"].get("patch").is_none());
    let ws = warnings(&answer);
    assert!(
        ws.len() == 1
            && ws[0].starts_with("InjectionSkipped: ")
            && ws[0].contains("spec.template.metadata.annotations"),
        "{ws:?}"
    );
    assert!(
        wait_until(Duration::from_secs(5), || w
            .log()
            .iter()
            .any(|l| l.contains("InjectionSkipped") && l.contains("shop/web"))),
        "{:#?}",
        w.log()
    );
}

#[test]
fn bad_input_is_admitted_unchanged_with_a_warning_never_a_500() {
    let (_dir, certs, w) = serving(&["--sidecar", "classic"]);
    let configmap = {
        let mut r: Value = serde_json::from_slice(&pod_review(
            "u-7",
            "shop",
            &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {}}),
        ))
        .unwrap();
        r["request"]["kind"] = json!({"group": "", "version": "v1", "kind": "ConfigMap"});
        r.to_string().into_bytes()
    };
    // Over the 4 MiB bound, with the uid first as the API server writes it.
    let mut huge = br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u-8","object":{"x":""#.to_vec();
    huge.extend(std::iter::repeat_n(b'a', 5 * 1024 * 1024));
    huge.extend(br#""}}}"#);
    for (body, uid, why) in [
        (b"{\"apiVersion\": \"admission.k8s.io/v1\", \"kind\": \"AdmissionRev".to_vec(), "", "not JSON"),
        (b"[1, 2, 3]".to_vec(), "", "not an AdmissionReview"),
        (br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u-9"}}"#.to_vec(), "u-9", "no object"),
        (configmap, "u-7", "not a Pod"),
        (huge, "u-8", "larger than"),
    ] {
        let answer = w.review(&certs.ca_pem, "/mutate", &body);
        assert_eq!(answer["response"]["allowed"], true, "{why}");
        assert_eq!(answer["response"]["uid"], uid, "{why}");
        assert!(answer["response"].get("patch").is_none(), "{why}");
        let ws = warnings(&answer);
        assert!(ws.len() == 1 && ws[0].contains(why), "{why}: {ws:?}");
    }
    // Still serving.
    let (status, body) = https(w.port, &certs.ca_pem, "GET", "/healthz", b"").unwrap();
    assert_eq!((status, body.as_slice()), (200, &b"ok\n"[..]));
    let (status, _) = https(w.port, &certs.ca_pem, "GET", "/readyz", b"").unwrap();
    assert_eq!(status, 200);
}

/// 1.20, the newest API server Debian builds, has no native sidecars: this path is tested with
/// reviews as a 1.29+ API server sends them (the same `admission.k8s.io/v1` review, `kind`
/// `{"group": "", "version": "v1", "kind": "Pod"}`), the webhook told the cluster's version.
#[test]
fn native_sidecars_for_a_1_29_cluster_as_inject_makes_them_jobs_included() {
    let (_dir, certs, w) = serving(&["--sidecar", "auto", "--kubernetes-version", "1.29"]);
    assert!(
        w.log().iter().any(|l| l.contains("sidecar=Native")),
        "{:#?}",
        w.log()
    );
    let mut job = web_pod(json!({}));
    job["spec"]["restartPolicy"] = json!("Never");
    job["metadata"]["ownerReferences"] = json!([{"apiVersion": "batch/v1", "kind": "Job", "name": "migrate", "uid": "6a3f2b8e-0000-4000-8000-000000000002", "controller": true}]);
    for pod in [web_pod(json!({})), job] {
        let answer = w.review(
            &certs.ca_pem,
            "/mutate/namespace-enabled",
            &pod_review("u-10", "shop", &pod),
        );
        let got = patched(&pod, &answer);
        assert_eq!(got, injected(&pod, &["--kubernetes-version", "1.29"]));
        assert_structurally_injected(&pod, &got, true);
        let init = got["spec"]["initContainers"].as_array().unwrap();
        assert!(
            init.iter()
                .any(|c| c["name"] == "hooklog" && c["restartPolicy"] == "Always"),
            "{got:#}"
        );
    }
}

#[test]
fn a_renewed_certificate_is_served_without_a_restart_and_admissions_keep_working() {
    let dir = tempfile::tempdir().unwrap();
    let old = Certs::make(dir.path(), "hooklog CA 1");
    let w = Webhook::start(&old, &["--sidecar", "classic"]);
    let pod = web_pod(json!({}));
    let want = injected(&pod, &["--sidecar", "classic"]);
    let review = pod_review("u-11", "shop", &pod);
    assert_eq!(
        patched(
            &pod,
            &w.review(&old.ca_pem, "/mutate/namespace-enabled", &review)
        ),
        want
    );

    // cert-manager renews: a new CA and certificate in the same files.
    let new = Certs::make(dir.path(), "hooklog CA 2");
    let both = format!("{}{}", old.ca_pem, new.ca_pem);
    let mut served_new = false;
    let renewed = wait_until(Duration::from_secs(20), || {
        // Every admission during the renewal succeeds (the API server trusts both CAs).
        let answer = w.review(&both, "/mutate/namespace-enabled", &review);
        assert_eq!(patched(&pod, &answer), want);
        served_new = https(w.port, &new.ca_pem, "GET", "/readyz", b"").is_ok_and(|(s, _)| s == 200);
        served_new
    });
    assert!(
        renewed,
        "the new certificate was never served: {:#?}",
        w.log()
    );
    assert!(
        https(w.port, &old.ca_pem, "GET", "/readyz", b"").is_err(),
        "still the old certificate"
    );
    assert!(
        w.log()
            .iter()
            .any(|l| l.contains("serving certificate reloaded"))
    );
    assert_eq!(
        patched(
            &pod,
            &w.review(&new.ca_pem, "/mutate/namespace-enabled", &review)
        ),
        want
    );
}

#[test]
fn sigterm_ends_the_webhook_at_once_with_its_counts() {
    let (_dir, certs, mut w) = serving(&["--sidecar", "classic"]);
    let pod = web_pod(json!({}));
    w.review(
        &certs.ca_pem,
        "/mutate/namespace-enabled",
        &pod_review("u-12", "shop", &pod),
    );
    let started = std::time::Instant::now();
    let status = Command::new("kill")
        .args(["-TERM", &w.child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let mut exit = None;
    assert!(
        wait_until(Duration::from_secs(10), || {
            exit = w.child.try_wait().unwrap();
            exit.is_some()
        }),
        "still running 10 s after SIGTERM: {:#?}",
        w.log()
    );
    assert!(exit.unwrap().success(), "{:#?}", w.log());
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(
        wait_until(Duration::from_secs(2), || w
            .log()
            .iter()
            .any(|l| l.contains("webhook stopped")
                && l.contains("reviews=1")
                && l.contains("injected=1"))),
        "{:#?}",
        w.log()
    );
}

/// A client that sends headers and then stalls holds nothing for long: after the body timeout
/// (10 s, the API server's own webhook timeout) it gets its allowed answer, and others are served
/// meanwhile. The same whether its first bytes come after the handshake or in the same flight as
/// its `Finished` (then they are in rustls's buffer when the handshake ends, and the webhook
/// never reads them off the wire: it once waited out the body timeout then, CI saw it).
#[test]
fn a_stalled_body_is_answered_after_the_body_timeout_and_blocks_nobody() {
    let (_dir, certs, w) = serving(&["--sidecar", "classic"]);
    let config = crate::util::webhook::tls_config(&certs.ca_pem).unwrap();
    let start = b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\nConnection: close\r\n\r\n{\"apiVersion\"";
    for with_the_handshake in [false, true] {
        let name = rustls_pki_types::ServerName::try_from("127.0.0.1").unwrap();
        let mut conn = rustls::ClientConnection::new(config.clone(), name).unwrap();
        let mut tcp = TcpStream::connect(("127.0.0.1", w.port)).unwrap();
        tcp.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let started = std::time::Instant::now();
        if with_the_handshake {
            // Queued while handshaking: rustls sends it right behind the client's Finished, in
            // the same write.
            conn.writer().write_all(start).unwrap();
            while conn.is_handshaking() || conn.wants_write() {
                conn.complete_io(&mut tcp).unwrap();
            }
        }
        let mut tls = rustls::StreamOwned::new(conn, tcp);
        if !with_the_handshake {
            tls.write_all(start).unwrap();
            tls.flush().unwrap();
        }
        // Meanwhile another review is answered at once.
        let pod = web_pod(json!({}));
        let answer = w.review(
            &certs.ca_pem,
            "/mutate/namespace-enabled",
            &pod_review("u-13", "shop", &pod),
        );
        assert!(answer["response"]["patch"].is_string());
        assert!(started.elapsed() < Duration::from_secs(5));
        let mut out = Vec::new();
        let _ = tls.read_to_end(&mut out);
        let took = started.elapsed();
        let text = String::from_utf8_lossy(&out);
        assert!(
            text.starts_with("HTTP/1.1 200"),
            "{with_the_handshake}: {text}"
        );
        // 13 bytes of 1000 and then nothing: past the minimum rate (the request's first byte on,
        // PACE_GRACE plus its bytes at MIN_RATE), the answer comes and the connection closes.
        assert!(
            text.contains("\"allowed\":true") && text.contains("body slower than"),
            "{with_the_handshake}: {text}"
        );
        assert!(
            took >= Duration::from_secs(1) && took < Duration::from_secs(5),
            "{with_the_handshake}: {took:?}"
        );
    }
}

#[test]
fn auto_tls_without_a_certificate_name_or_with_too_short_a_validity_is_a_usage_error() {
    for (args, why) in [
        (vec![], "needs a name for the certificate"),
        (
            vec!["--tls-san", "127.0.0.1", "--cert-validity", "5s"],
            "--cert-validity is shorter than",
        ),
    ] {
        let out = hooklog()
            .env_remove("POD_NAMESPACE")
            .args(["webhook", "--image", IMAGE, "--sidecar", "classic"])
            .args(&args)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(64), "{args:?}: {stderr}");
        assert!(stderr.contains(why), "{args:?}: {stderr}");
    }
    // Outside a cluster, auto-TLS says it needs the API server (and serves nothing).
    let out = hooklog()
        .env_remove("KUBERNETES_SERVICE_HOST")
        .args(["webhook", "--image", IMAGE, "--sidecar", "classic"])
        .args(["--tls-san", "127.0.0.1", "--listen", "127.0.0.1:0"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("writes the caBundle through the API server")
            && stderr.contains("KUBERNETES_SERVICE_HOST"),
        "{stderr}"
    );
}

/// A pod from a template an earlier version injected (tests/manifests/injected/: the hooks'
/// binary in the shared emptyDir, which any container could replace) is patched into the
/// current layout, as `inject` moves it: the binary on hooklog-bin, read-only but for the
/// installer.
#[test]
fn a_pod_injected_by_an_earlier_version_is_patched_into_the_binarys_own_volume() {
    let read = |path: &str| -> Value {
        let text = std::fs::read_to_string(
            std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(path),
        )
        .unwrap();
        let source = hooklog::manifest::load::parse(path, text).unwrap();
        let deployment = &source.documents[0].value;
        let template = &deployment["spec"]["template"];
        json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "generateName": "checkout-5d9c7b8f6d-",
                "namespace": "shop",
                "labels": template["metadata"]["labels"],
                "annotations": template["metadata"]["annotations"],
            },
            "spec": template["spec"],
        })
    };
    let original = read("tests/manifests/incidents/distroless-envoy-sleep.yaml");
    let legacy = read("tests/manifests/injected/distroless-envoy-sleep.before-issue-37.yaml");
    assert!(legacy.to_string().contains("/hooklog/bin/hooklog"));
    let (_dir, certs, w) = serving(&["--sidecar", "native"]);
    let answer = w.review(
        &certs.ca_pem,
        "/mutate/namespace-enabled",
        &pod_review("u-1", "shop", &legacy),
    );
    assert_eq!(answer["response"]["allowed"], true, "{answer:#}");
    let got = patched(&legacy, &answer);
    assert_ne!(got, legacy, "the webhook left the old layout: {answer:#}");
    // The webhook moves the layout and keeps what inject wrote (its image, which `inject` run
    // again would update): inject's answer with the legacy pod's image is the oracle.
    let mut want = injected(&legacy, &["--sidecar", "native"]);
    let legacy_image = legacy["spec"]["initContainers"][0]["image"].clone();
    assert!(legacy_image.is_string(), "{legacy:#}");
    for c in want["spec"]["initContainers"].as_array_mut().unwrap() {
        c["image"] = legacy_image.clone();
    }
    assert_eq!(got, want);
    assert!(!got.to_string().contains("/hooklog/bin"), "{got:#}");
    // The oracle compares what follows `--` with the original command: envoy's bare `sleep 15`
    // is the one inject rewrites, to hooklog's own sleep from the binary's volume.
    let mut original = original;
    original["spec"]["containers"][1]["lifecycle"]["preStop"]["exec"]["command"] =
        json!(["/hooklog-bin/hooklog", "sleep", "15"]);
    assert_structurally_injected(&original, &got, true);
}
