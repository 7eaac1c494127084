//! (the control plane) The generated no-panic property (issue 26): pod specs with numbers, strings and sizes at
//! their extremes go through `check`, `inject` and the webhook's review, and none of them may
//! panic (the release profile aborts on a panic, so one would kill the whole webhook).

use proptest::prelude::*;
use serde_json::{Value, json};

use crate::manifest::budget::SidecarMode;
use crate::manifest::inject;
use crate::webhook::review::{self, Policy, Scope};

/// Numbers as people (or attackers) write them in a command line: every edge of f64 and u64.
const NUMBERS: [&str; 24] = [
    "0",
    "1",
    "-1",
    "1e20",
    "1e19",
    "1e308",
    "1e309",
    "-1e308",
    "NaN",
    "nan",
    "inf",
    "infinity",
    "-inf",
    "18446744073709551615",
    "18446744073709551616",
    "9223372036854775807",
    "0.0000000001",
    "4.9e-324",
    "1e19s",
    "1e19d",
    "99999999999999999999d",
    "1e11m",
    "",
    "1.5h",
];

/// JSON numbers where the pod spec has integers (`sleep.seconds`,
/// `terminationGracePeriodSeconds`): every edge serde_json can hold.
fn json_number() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(json!(0)),
        Just(json!(u64::MAX)),
        Just(json!(u64::MAX - 1)),
        Just(json!(i64::MAX)),
        Just(json!(i64::MIN)),
        Just(json!(-1)),
        Just(json!(1e308)),
        Just(json!(-1e308)),
        Just(json!(0.5)),
        Just(json!(f64::MIN_POSITIVE)),
        Just(json!("NaN")),
        Just(json!("30")),
        Just(Value::Null),
        any::<u64>().prop_map(|n| json!(n)),
        any::<i64>().prop_map(|n| json!(n)),
        any::<f64>().prop_map(|f| json!(f)),
    ]
}

/// A word of a hook's command line.
fn word() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(NUMBERS.to_vec()).prop_map(str::to_string),
        prop::sample::select(vec![
            "sleep",
            "/bin/sleep",
            "hooklog",
            "/hooklog/bin/hooklog",
            "/hooklog-bin/hooklog",
            "sh",
            "-c",
            "hook",
            "--timeout",
            "--",
            ";",
            "&&",
        ])
        .prop_map(str::to_string),
        // Sizes at their extremes: a long word.
        (0usize..3).prop_map(|n| "9".repeat([1, 400, 70_000][n])),
    ]
}

/// A preStop or postStart handler.
fn handler() -> impl Strategy<Value = Value> {
    prop_oneof![
        prop::collection::vec(word(), 0..5).prop_map(|c| json!({"exec": {"command": c}})),
        (prop::sample::select(NUMBERS.to_vec()), prop::sample::select(NUMBERS.to_vec())).prop_map(
            |(a, b)| json!({"exec": {"command": ["sh", "-c", format!("sleep {a}; sleep {b} {a}")]}})
        ),
        (prop::sample::select(NUMBERS.to_vec()), prop::sample::select(NUMBERS.to_vec())).prop_map(
            |(a, b)| json!({"exec": {"command": ["/hooklog/bin/hooklog", "hook", "--timeout", a, "--", "/hooklog/bin/hooklog", "sleep", b, a]}})
        ),
        prop::sample::select(NUMBERS.to_vec())
            .prop_map(|a| json!({"exec": {"command": ["sleep", a, a]}})),
        json_number().prop_map(|n| json!({"sleep": {"seconds": n}})),
        Just(json!({"httpGet": {"port": 8080}})),
    ]
}

fn container() -> impl Strategy<Value = Value> {
    (
        prop_oneof![
            Just("app".to_string()),
            Just("envoy".to_string()),
            Just("hooklog".to_string()),
            Just("a".repeat(300)),
        ],
        prop::option::of(handler()),
        prop::option::of(handler()),
    )
        .prop_map(|(name, pre, post)| {
            let mut c = json!({"name": name, "image": "registry.example/app:1"});
            if let Some(h) = pre {
                c["lifecycle"]["preStop"] = h;
            }
            if let Some(h) = post {
                c["lifecycle"]["postStart"] = h;
            }
            c
        })
}

fn pod_spec() -> impl Strategy<Value = Value> {
    (
        prop::collection::vec(container(), 1..4),
        prop::option::of(json_number()),
    )
        .prop_map(|(containers, grace)| {
            let mut spec = json!({"containers": containers});
            if let Some(g) = grace {
                spec["terminationGracePeriodSeconds"] = g;
            }
            spec
        })
}

fn policy() -> Policy {
    Policy {
        inject: inject::Options {
            image: "hooklog:test".into(),
            mode: SidecarMode::Native,
            prestop_sleep: vec![],
            events: false,
            settings: Default::default(),
        },
        own_namespace: Some("hooklog".into()),
        namespaces: Default::default(),
    }
}

/// check, inject and review never panic, whatever numbers and sizes the pod spec holds; the
/// review admits every one. Every case reaches the assertion (nothing is filtered).
#[test]
fn extreme_pod_specs_never_panic() {
    crate::testkit::property(
        file!(),
        "extreme_pod_specs_never_panic",
        256,
        1.0,
        (pod_spec(), any::<bool>()),
        |(spec, classic), reach| {
            let deployment = json!({"kind": "Deployment", "metadata": {"name": "d"},
            "spec": {"template": {"metadata": {"annotations": {"hooklog.dev/inject": "enabled"}}, "spec": spec}}});
            let source =
                crate::manifest::load::parse("p.yaml", crate::yaml::emit::to_yaml(&deployment))
                    .expect("the generated manifest is YAML");
            crate::manifest::check::check(&[source], &Default::default());
            let mut opts = policy().inject;
            if classic {
                opts.mode = SidecarMode::Classic;
            }
            let _ = inject::inject(&mut deployment.clone(), &opts);
            let body = json!({
                "apiVersion": "admission.k8s.io/v1",
                "kind": "AdmissionReview",
                "request": {
                    "uid": "0df28fbd-5f5f-11e8-bc74-36e6bb280816",
                    "kind": {"group": "", "version": "v1", "kind": "Pod"},
                    "namespace": "default",
                    "operation": "CREATE",
                    "object": {"metadata": {"name": "p", "annotations": {"hooklog.dev/inject": "enabled"}}, "spec": deployment["spec"]["template"]["spec"]},
                }
            });
            let r = review::review(
                body.to_string().as_bytes(),
                Scope::NamespaceEnabled,
                &policy(),
            );
            reach.reached();
            prop_assert_eq!(&r.response["response"]["allowed"], &json!(true));
            Ok(())
        },
    );
}
