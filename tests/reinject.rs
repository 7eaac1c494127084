//! `inject` run again on what it wrote, with other settings (issue 38's upgrade gap): hooklog's
//! parts become what inject with the new settings writes into the original, byte for byte, and
//! nothing else changes; run again with the same settings it changes nothing, and `uninject`
//! gives the original back. The real binary, on every manifest of tests/manifests inject takes,
//! for every pair of a set of settings; what it writes validates strictly.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::util::manifests::{
    every_manifest, first_difference, run, validate_strictly, validator_input,
};
use crate::util::text;

/// Settings drawn from every kind inject has: the image, each output, a log group, EMF,
/// resources, env, events, and both sidecar forms (through `--kubernetes-version` and
/// `--sidecar`). Each asks for a form: without one, a pod injected before keeps its own
/// ([`a_pod_keeps_its_form_when_none_is_asked_for`]).
const SETTINGS: [&[&str]; 6] = [
    &[
        "--image",
        "reg/hooklog-sidecar:0.1.0",
        "--kubernetes-version",
        "1.30",
    ],
    &[
        "--image",
        "reg/hooklog-sidecar:0.2.0",
        "--kubernetes-version",
        "1.28",
        "--sidecar-output",
        "cloudwatch",
        "--sidecar-log-group",
        "g",
        "--sidecar-emf",
    ],
    &[
        "--image",
        "reg/hooklog-sidecar:0.1.0",
        "--sidecar",
        "native",
        "--sidecar-output",
        "stdout,cloudwatch",
        "--sidecar-log-group",
        "other",
        "--sidecar-cpu-limit",
        "100m",
        "--sidecar-memory-request",
        "32Mi",
        "--sidecar-env",
        "AWS_REGION=eu-west-1",
    ],
    &[
        "--image",
        "reg/hooklog-sidecar:0.2.0",
        "--sidecar",
        "native",
        "--events",
    ],
    &[
        "--image",
        "reg/hooklog-sidecar:0.2.0",
        "--kubernetes-version",
        "1.28",
        "--events",
        "--sidecar-env",
        "A=b",
    ],
    &[
        "--image",
        "reg/hooklog-sidecar:0.1.0",
        "--kubernetes-version",
        "1.28",
    ],
];

/// Every manifest of tests/manifests (as tests/faithful.rs reads them).
fn inputs() -> Vec<PathBuf> {
    let out = every_manifest();
    assert!(out.len() >= 40, "{out:?}");
    out
}

/// `inject` with `settings` on `input` (a path, or `-` with `stdin`): its stdout and stderr,
/// `None` when it refuses.
fn inject(settings: &[&str], input: &str, stdin: Option<&str>) -> Option<(String, String)> {
    let mut args = vec!["inject", "--offline"];
    args.extend(settings);
    args.push(input);
    let out = run(&args, stdin);
    let err = text(&out.stderr);
    assert!(!err.contains("could not edit in place"), "{input}: {err}");
    out.status.success().then(|| (text(&out.stdout), err))
}

/// `uninject` of `text`.
fn uninject(text_in: &str) -> String {
    let out = run(&["uninject", "-"], Some(text_in));
    assert!(out.status.success(), "{}", text(&out.stderr));
    text(&out.stdout)
}

/// The settings B over A writes as into the original: B's, except that a sidecar with
/// `--events` keeps it (`inject` without the flag never takes it away, docs/check-and-inject.md).
fn expected(a: &[&str], b: &[&str]) -> Vec<String> {
    let mut e: Vec<String> = b.iter().map(|s| s.to_string()).collect();
    if sticky(a, b) {
        e.push("--events".into());
    }
    e
}

/// B over A keeps A's `--events`: in the pods A injected. A pod A left alone (a Job's, with a
/// classic A) is injected by B as B says.
fn sticky(a: &[&str], b: &[&str]) -> bool {
    a.contains(&"--events") && !b.contains(&"--events")
}

#[test]
fn inject_again_with_other_settings_is_inject_of_the_original_with_them() {
    let dir = tempfile::tempdir().unwrap();
    let mut written = Vec::new();
    let (mut pairs, mut updated, mut mixed) = (0, 0, 0);
    for file in inputs() {
        let path = file.to_str().unwrap();
        let original = std::fs::read_to_string(&file).unwrap();
        let back = uninject(&original);
        // What each set of settings writes into the original (refused: `None`).
        let mut once: BTreeMap<Vec<String>, Option<(String, String)>> = BTreeMap::new();
        let mut first = |s: &[String]| {
            once.entry(s.to_vec())
                .or_insert_with(|| {
                    let s: Vec<&str> = s.iter().map(String::as_str).collect();
                    inject(&s, path, None)
                })
                .clone()
        };
        for a in SETTINGS {
            let a_owned: Vec<String> = a.iter().map(|s| s.to_string()).collect();
            let Some((injected, a_said)) = first(&a_owned) else {
                continue;
            };
            let (again, said) = inject(a, "-", Some(&injected)).expect("takes its own output");
            assert!(
                again == injected,
                "{path} {a:?}: the same settings again changed it ({said}):\n{}",
                first_difference(&injected, &again)
            );
            assert!(!said.contains("updated:"), "{path} {a:?}: {said}");
            for b in SETTINGS {
                let (want, _) = first(&expected(a, b)).expect("B takes what A takes");
                let (got, said) = inject(b, "-", Some(&injected)).expect("B takes A's output");
                pairs += 1;
                if sticky(a, b) && a_said.contains("not injected") {
                    // Pods of both kinds: B again changes nothing, and uninject gives it back.
                    let (again, _) = inject(b, "-", Some(&got)).unwrap();
                    assert!(again == got, "{path}: {b:?} over {a:?} is not stable");
                    assert!(uninject(&got) == back, "{path}: {b:?} over {a:?}");
                    mixed += 1;
                    continue;
                }
                assert!(
                    got == want,
                    "{path}: {b:?} over {a:?} is not {b:?} on the original ({said}):\n{}",
                    first_difference(&want, &got)
                );
                updated += usize::from(said.contains("updated:"));
                assert!(
                    uninject(&got) == back,
                    "{path}: uninject of {b:?} over {a:?} is not the original"
                );
            }
        }
        for (i, (out, _)) in once.into_values().flatten().enumerate() {
            let name = file.file_stem().unwrap().to_str().unwrap();
            let to = dir.path().join(format!("{name}-{i}.yaml"));
            std::fs::write(&to, validatable(&validator_input(&out))).unwrap();
            written.push(to);
        }
    }
    eprintln!(
        "{pairs} pairs ({mixed} with pods of both kinds), {updated} updates, {} outputs",
        written.len()
    );
    assert!(
        pairs >= 1000 && updated >= 500,
        "{pairs} pairs, {updated} updates"
    );
    validate_strictly(&written);
}

/// The documents the validator has schemas for: objects, not a kustomize patch (a list), nor an
/// alpha API (batch/v2alpha1); and that PyYAML reads (not tests/manifests/faithful's DEL, which
/// JSON writes as it is).
fn validatable(stream: &str) -> String {
    stream
        .split("---\n")
        .filter(|d| !d.chars().any(|c| c.is_control() && c != '\n'))
        .filter(|d| {
            serde_json::from_str::<serde_json::Value>(d).is_ok_and(|v| {
                v["kind"].is_string()
                    && !v["apiVersion"]
                        .as_str()
                        .is_some_and(|a| a.contains("alpha"))
            })
        })
        .map(|d| format!("---\n{d}"))
        .collect()
}

/// The report's words: the example, the image upgrade said; the same again unchanged.
#[test]
fn an_image_upgrade_is_said_and_the_same_again_is_unchanged() {
    let deployment = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  \
        selector:\n    matchLabels: {app: web}\n  template:\n    metadata:\n      labels: {app: web}\n    \
        spec:\n      containers:\n        - name: web\n          image: nginx:1.25\n          \
        lifecycle:\n            preStop:\n              exec:\n                command: [\"sh\", \"-c\", \"sleep 5\"]\n";
    let old = ["--image", "reg/hooklog-sidecar:0.1.0"];
    let (d1, _) = inject(&old, "-", Some(deployment)).unwrap();
    let new = [
        "--image",
        "reg/hooklog-sidecar:0.2.0",
        "--sidecar-output",
        "cloudwatch",
        "--sidecar-log-group",
        "g",
    ];
    let (d2, said) = inject(&new, "-", Some(&d1)).unwrap();
    assert_eq!(
        said.trim(),
        "deployment \"web\" updated: image reg/hooklog-sidecar:0.1.0 -> reg/hooklog-sidecar:0.2.0, sidecar args"
    );
    assert!(!d2.contains("0.1.0") && d2.contains("--log-group"), "{d2}");
    let (d3, said) = inject(&new, "-", Some(&d2)).unwrap();
    assert_eq!(d3, d2);
    assert_eq!(
        said.trim(),
        "deployment \"web\" already injected, unchanged"
    );
    assert_eq!(uninject(&d3), deployment);
}

/// Without `--sidecar` or `--kubernetes-version`, inject cannot tell the cluster: a pod injected
/// before keeps its form (a classic sidecar for a 1.28 cluster stays classic), and takes the rest.
#[test]
fn a_pod_keeps_its_form_when_none_is_asked_for() {
    let file = Path::new("tests/manifests/corpus/drain-curl-sleep.yaml");
    let path = file.to_str().unwrap();
    let classic = ["--image", "reg/h:0.1.0", "--kubernetes-version", "1.28"];
    let (injected, _) = inject(&classic, path, None).unwrap();
    let (got, said) = inject(&["--image", "reg/h:0.2.0"], "-", Some(&injected)).unwrap();
    let want = ["--image", "reg/h:0.2.0", "--kubernetes-version", "1.28"];
    assert_eq!(got, inject(&want, path, None).unwrap().0, "{said}");
    assert!(
        said.contains("updated: image reg/h:0.1.0 -> reg/h:0.2.0"),
        "{said}"
    );
    assert!(said.contains("keeps its classic sidecar"), "{said}");
}
