//! (the control plane) inject's and uninject's edits of whole files in every shape go-yaml reads.

use crate::manifest::{inject, load, uninject};
use serde_json::Value;

use crate::yaml::splice::{BOM, apply};

fn opts() -> inject::Options {
    inject::Options {
        image: "registry.example.com/hooklog:0.1.0".into(),
        mode: crate::manifest::budget::SidecarMode::Native,
        prestop_sleep: Vec::new(),
        events: false,
        settings: Default::default(),
    }
}

/// The text of `f` applied to every document, spliced; the raw splice on error, to debug.
fn transform(
    text: &str,
    f: impl Fn(&mut Value) -> Result<Vec<String>, inject::InjectError>,
) -> Result<String, String> {
    let source = load::parse("t", text.to_string()).map_err(|e| e.to_string())?;
    let mut values = Vec::new();
    for d in &source.documents {
        let mut v = d.value.clone();
        f(&mut v).map_err(|e| e.to_string())?;
        values.push(v);
    }
    crate::manifest::transform::rewrite(&source, &values)
        .map(|(text, _)| text)
        .map_err(|why| {
            let mut edits = Vec::new();
            for (d, v) in source.documents.iter().zip(&values) {
                edits.extend(
                    crate::yaml::splice::edits(text, &d.node, &d.value, v).unwrap_or_default(),
                );
            }
            format!("{why}\n{}", apply(text, edits).unwrap_or_default())
        })
}

pub(crate) fn round_trip(text: &str) -> String {
    let injected = transform(text, |v| inject::inject(v, &opts()))
        .unwrap_or_else(|e| panic!("inject of {text:?}: {e}"));
    let again = transform(&injected, |v| inject::inject(v, &opts())).unwrap();
    assert_eq!(again, injected, "inject twice changed it");
    let back = transform(&injected, uninject::uninject)
        .unwrap_or_else(|e| panic!("uninject of {injected}: {e}"));
    assert_eq!(back, text, "uninject of:\n{injected}");
    injected
}

fn fixture(name: &str) -> String {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/manifests/faithful/");
    std::fs::read_to_string(format!("{dir}{name}")).unwrap()
}

#[test]
fn the_faithful_fixtures_round_trip() {
    for name in [
        "lifecycle-events-flow.yaml",
        "anchors-merge-keys.yaml",
        "bom-deployment.yaml",
        "crlf-daemonset.yaml",
        "no-final-newline-pod.yaml",
        "no-final-newline-deploy.yaml",
        "comments-directives.yaml",
        "empty-flow-collections.yaml",
        "pod-pretty.json",
        "deployment-compact.json",
        "json-stream.json",
    ] {
        round_trip(&fixture(name));
    }
}

/// True when `a` is `b` with text taken out: `b` only inserts.
fn only_inserted(a: &str, b: &str) -> bool {
    let mut rest = b.chars();
    a.chars().all(|c| rest.any(|d| d == c))
}

#[test]
fn an_alias_that_must_differ_becomes_a_merge_and_back() {
    let text = "kind: Pod\nspec:\n  containers:\n  - name: a\n    image: x\n    lifecycle: &hooks\n      postStart: {exec: {command: [sh, -c, 'echo up']}}\n      preStop: {exec: {command: [sleep, '5']}}\n  - name: b\n    image: y\n    lifecycle:  *hooks  # the same\n";
    let out = round_trip(text);
    assert!(only_inserted(text, &out), "{out}");
    assert!(
        out.contains("    lifecycle:\n      <<:  *hooks  # the same\n      preStop:\n"),
        "{out}"
    );
}

#[test]
fn a_sequence_alias_that_must_differ_is_written_out_and_back() {
    let text = "kind: Pod\nspec:\n  containers:\n  - name: a\n    image: x\n    lifecycle: {preStop: {exec: {command: &drain [sleep, '5']}}}\n  - name: b\n    image: y\n    lifecycle:\n      preStop:\n        exec:\n          command: *drain\n";
    let out = round_trip(text);
    assert!(
        out.contains(
            "          command: [\"/hooklog-bin/hooklog\", \"hook\", \"--container\", \"b\""
        ) && out.contains(", \"sleep\", \"5\"] # hooklog: written out from *drain\n"),
        "{out}"
    );
    let source = load::parse("t", text.to_string()).unwrap();
    let mut v = source.documents[0].value.clone();
    inject::inject(&mut v, &opts()).unwrap();
    let (_, notes) = crate::manifest::transform::rewrite(&source, &[v]).unwrap();
    assert_eq!(
        notes,
        [
            "12: `*drain` written out: it repeats `&drain`, and hooklog's change here must not change that one too (uninject writes `*drain` back)"
        ]
    );
}

#[test]
fn a_copy_written_by_hand_is_not_turned_into_an_alias() {
    let text = "kind: Pod\nspec:\n  containers:\n  - name: a\n    image: x\n    volumeMounts: &m [{name: v, mountPath: /v}]\n    lifecycle: {preStop: {exec: {command: [sleep, '5']}}}\n  - name: b\n    image: y\n    volumeMounts: [{name: v, mountPath: /v}]\n    lifecycle: {preStop: {exec: {command: [sleep, '5']}}}\n  volumes: [{name: v, emptyDir: {}}]\n";
    let out = round_trip(text);
    assert!(only_inserted(text, &out), "{out}");
}

#[test]
fn keys_after_a_block_scalar_that_ends_the_file_go_before_it() {
    let text = "kind: Pod\nspec:\n  containers:\n  - name: a\n    image: x\n    lifecycle: {preStop: {exec: {command: [sleep, '5']}}}\n    args:\n    - |\n      last";
    let out = round_trip(text);
    assert!(out.ends_with("    args:\n    - |\n      last"), "{out}");
}

/// A file in one of the fixtures' shapes, varied: line endings (LF, CRLF, or each line's
/// own), a BOM, no final newline, a comment at the end.
fn neighbour(base: &str, endings: &[bool], bom: bool, last: u8) -> String {
    let mut out = String::new();
    if bom {
        out.push(BOM);
    }
    let base = base.replace("\r\n", "\n");
    let lines: Vec<&str> = base.lines().collect();
    for (i, line) in lines.iter().enumerate() {
        out.push_str(line);
        out.push_str(if endings[i % endings.len()] {
            "\r\n"
        } else {
            "\n"
        });
    }
    match last {
        0 => {
            out.pop();
            if out.ends_with('\r') {
                out.pop();
            }
        }
        1 => {
            out.push_str("# the end");
            out.push_str(if endings[lines.len() % endings.len()] {
                "\r\n"
            } else {
                "\n"
            });
        }
        _ => {}
    }
    out
}

/// Every fixture's neighbours round-trip byte for byte, only gain text, and end every
/// line they gain as its neighbour does. Every case reaches the assertions.
#[test]
fn neighbours_of_every_shape_round_trip() {
    let strategy = (
        0usize..9,
        proptest::collection::vec(proptest::bool::ANY, 1..4),
        proptest::bool::ANY,
        0u8..3,
    );
    crate::testkit::property(
        file!(),
        "neighbours_of_every_shape_round_trip",
        64,
        1.0,
        strategy,
        |(which, endings, bom, last), reach| {
            let names = [
                "lifecycle-events-flow.yaml",
                "anchors-merge-keys.yaml",
                "bom-deployment.yaml",
                "crlf-daemonset.yaml",
                "no-final-newline-pod.yaml",
                "no-final-newline-deploy.yaml",
                "comments-directives.yaml",
                "empty-flow-collections.yaml",
                "pod-pretty.json",
            ];
            let base = fixture(names[which]).trim_start_matches(BOM).to_string();
            let text = neighbour(&base, &endings, bom, last);
            let out = round_trip(&text);
            reach.reached();
            proptest::prop_assert!(only_inserted(&text, &out), "{out}");
            proptest::prop_assert_eq!(out.starts_with(BOM), bom);
            if endings.iter().all(|e| *e) {
                proptest::prop_assert!(
                    !out.replace("\r\n", "").contains('\n'),
                    "LF in CRLF:\n{out:?}"
                );
            }
            if endings.iter().all(|e| !*e) {
                proptest::prop_assert!(!out.contains('\r'));
            }
            Ok(())
        },
    );
}
