//! (the control plane) The whole-input path of `inject`, `uninject` and `check` as it was before they read one
//! document at a time (issue 24 §4), kept as the oracle of a differential test: on generated
//! multi-document streams (errors in any document, BOM, CRLF, every `---` and `...`, empty and
//! scalar documents, lists and JSON arrays, several inputs) the streaming path writes the same
//! stdout, the same stderr and the same exit code.

use serde_json::Value;

use super::layout::OWN_CONTAINERS;
use super::load::{self, Input, LoadError, Source};
use super::{check, inject, uninject};
use crate::yaml::{emit, splice};

/// What the whole-input transform made: stdout, the report, each document before and after.
type Transformed = (String, Vec<String>, Vec<(Value, Value)>);

/// What `check` says before its report: errors, notes, templates counted, images wanted, and
/// the findings as JSON.
type Checked = (
    Vec<String>,
    Vec<String>,
    usize,
    Vec<(String, crate::registry::Arch)>,
    String,
);

/// main's `transform`: every input read whole first, then changed, then written back.
fn transform_whole(
    inputs: Vec<Result<Input, LoadError>>,
    f: &mut super::transform::Change,
) -> Result<Transformed, String> {
    let sources = inputs
        .into_iter()
        .map(|i| i.and_then(Input::parse))
        .collect::<Result<Vec<Source>, _>>()
        .map_err(|e| e.to_string())?;
    let mut out = String::new();
    let mut report = Vec::new();
    let mut pairs = Vec::new();
    for source in &sources {
        report.extend(source.notes.iter().cloned());
        let mut changed = Vec::new();
        for doc in &source.documents {
            let mut value = doc.value.clone();
            match f(&mut value) {
                Ok(lines) => report.extend(list_report(&doc.value, f).unwrap_or(lines)),
                Err(e) => return Err(format!("{}:{}: {e}", source.name, doc.line)),
            }
            changed.push(value);
        }
        let text = match rewrite_whole(source, &changed) {
            Ok((text, notes)) => {
                report.extend(notes.into_iter().map(|n| format!("  {}:{n}", source.name)));
                text
            }
            Err(why) => {
                report.push(format!(
                    "hooklog: {}: could not edit in place ({why}); written anew, comments and layout not kept",
                    source.name
                ));
                let anew = changed
                    .iter()
                    .map(emit::to_yaml)
                    .collect::<Vec<_>>()
                    .join("---\n");
                splice::as_written(&source.text, anew)
            }
        };
        if !out.is_empty() {
            if !out.ends_with('\n') {
                out.push('\n');
            }
            if !text.starts_with("---") {
                out.push_str("---\n");
            }
        }
        out.push_str(&text);
        for (d, v) in source.documents.iter().zip(changed) {
            pairs.push((d.value.clone(), v));
        }
    }
    Ok((out, report, pairs))
}

/// What `f` says of a `kind: *List`, an item at a time in their order (as the streaming path
/// reads a List, like a stream of its items; main said every object that it skipped first).
fn list_report(doc: &Value, f: &mut super::transform::Change) -> Option<Vec<String>> {
    let kind = doc["kind"].as_str()?;
    let items = doc["items"].as_array().filter(|_| kind.ends_with("List"))?;
    let mut report = Vec::new();
    for item in items {
        report.extend(f(&mut item.clone()).ok()?);
    }
    Some(report)
}

/// main's `rewrite`: the whole text edited, read back whole, compared value by value.
fn rewrite_whole(source: &Source, values: &[Value]) -> Result<(String, Vec<String>), String> {
    let mut edits = Vec::new();
    let mut notes = Vec::new();
    for (doc, new) in source.documents.iter().zip(values) {
        let (e, n) = splice::edits_noted(&source.text, &doc.node, &doc.value, new, OWN_CONTAINERS)
            .map_err(|e| format!("document at line {}: {e}", doc.line))?;
        edits.extend(e);
        notes.extend(n);
    }
    if edits.is_empty() {
        return Ok((source.text.clone(), notes));
    }
    let text = splice::apply(&source.text, edits).map_err(|e| e.to_string())?;
    let back = load::parse(&source.name, text.clone())
        .map_err(|e| format!("the edit does not read back: {e}"))?;
    let read: Vec<&Value> = back.documents.iter().map(|d| &d.value).collect();
    if read != values.iter().collect::<Vec<_>>() {
        return Err("the edit reads back as something else".into());
    }
    Ok((text, notes))
}

/// main's `check` up to the report: the errors and notes on stderr, the templates counted, the
/// images wanted, and the findings (as JSON, to compare).
fn check_whole(inputs: Vec<Result<Input, LoadError>>, opts: &check::Options) -> Checked {
    let mut sources = Vec::new();
    let mut errors = Vec::new();
    let mut notes = Vec::new();
    for loaded in inputs.into_iter().map(|i| i.and_then(Input::parse)) {
        match loaded {
            Ok(s) => {
                notes.extend(s.notes.clone());
                sources.push(s);
            }
            Err(e) if e.is_note() => notes.push(e.to_string()),
            Err(e) => errors.push(e.to_string()),
        }
    }
    if errors.is_empty() {
        let objects = sources
            .iter()
            .flat_map(|s| &s.documents)
            .map(|d| usize::from(d.value.is_object()))
            .sum();
        errors = super::nothing_to_check(sources.iter().map(|s| s.name.as_str()), objects);
    }
    let templates = sources
        .iter()
        .flat_map(|s| &s.documents)
        .map(|d| super::podspec::templates(&d.value).len())
        .sum();
    let wanted = check::wanted_images(&sources, opts);
    let findings = check::check(&sources, opts);
    (errors, notes, templates, wanted, findings_json(&findings))
}

fn findings_json(findings: &[check::Finding]) -> String {
    serde_json::to_string(findings).unwrap_or_default()
}

/// The streaming path's answer to [`check_whole`].
fn check_streaming(inputs: Vec<Result<Input, LoadError>>, opts: &check::Options) -> Checked {
    let survey = super::survey(inputs, opts);
    let findings = super::check_surveyed(&survey, opts, |_| true);
    (
        survey.errors,
        survey.notes,
        survey.templates,
        survey.wanted,
        findings_json(&findings),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    /// Cases of the differential property per run; `HOOKLOG_PROPTEST_CASES` asks for more.
    const DEFAULT_CASES: u32 = 64;

    fn cases() -> u32 {
        std::env::var("HOOKLOG_PROPTEST_CASES")
            .ok()
            .and_then(|n| n.parse().ok())
            .unwrap_or(DEFAULT_CASES)
    }

    /// One document's text (without its separator) as files have them.
    fn document() -> impl Strategy<Value = String> {
        let workload = crate::testkit::workload;
        prop_oneof![
            6 => workload().prop_map(|w| emit::to_yaml(&w)),
            2 => workload().prop_map(|w| format!("{}\n", serde_json::to_string(&w).unwrap_or_default())),
            1 => workload().prop_map(|w| format!("{:#}\n", w)),
            1 => (workload(), workload()).prop_map(|(a, b)| format!("[{}, {}]\n", a, b)),
            2 => Just(DEPLOYMENT.to_string()),
            1 => Just("{apiVersion: v1, kind: Pod, metadata: {name: f, namespace: shop}, spec: {containers: [{name: a, image: busybox, lifecycle: {preStop: {exec: {command: [sleep, '5']}}}},],},}\n".to_string()),
            1 => Just("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: shop\n  labels:\n    hooklog.dev/inject: enabled\n".to_string()),
            1 => Just("apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Pod\n  metadata: {name: l, namespace: shop}\n  spec:\n    containers:\n    - name: a\n      image: nginx\n      lifecycle: {preStop: {exec: {command: [sh, -c, 'sleep 3']}}}\n".to_string()),
            // A List as `kubectl get -o yaml` writes it (`kind` after `items`), as JSON, of
            // another `*List` kind; an object with `items` that is no List; a List whose merge
            // key sets `items` anew (go-yaml: over the keys written before it).
            2 => (prop::collection::vec(workload(), 0..4), 0u8..5).prop_map(|(items, form)| {
                let list = |kind: &str| serde_json::json!({"apiVersion": "v1", "items": items, "kind": kind, "metadata": {"resourceVersion": ""}});
                match form {
                    0 => emit::to_yaml(&list("List")),
                    1 => format!("{}\n", serde_json::to_string(&list("List")).unwrap_or_default()),
                    2 => format!("{:#}\n", list("DeploymentList")),
                    3 => emit::to_yaml(&list("Holder")),
                    _ => format!("{}<<: {{items: []}}\n", emit::to_yaml(&list("List"))),
                }
            }),
            1 => Just("kind: List\napiVersion: v1\nitems:\n- &pod\n  apiVersion: v1\n  kind: Pod\n  metadata: {name: p, namespace: shop}\n  spec:\n    containers:\n    - {name: a, image: nginx, lifecycle: {preStop: {exec: {command: [sleep, '3']}}}}\n- *pod\n- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    <<: {name: c}\n".to_string()),
            1 => Just("apiVersion: v1\nkind: ConfigMap\nmetadata: &m\n  name: c\ndata:\n  a: *m\n  b: |\n    text\n".to_string()),
            // A key whose `:` is on the next line: the whole input written anew.
            1 => Just("kind: Pod\nmetadata: {name: complex, namespace: shop}\n? spec\n: containers: [{name: a, image: b, lifecycle: {preStop: {exec: {command: [sleep, '5']}}}}]\n".to_string()),
            // An edit inside an anchored node.
            1 => Just("kind: Pod\nmetadata: {name: anchored, namespace: shop}\nspec: &spec\n  containers:\n  - name: a\n    image: busybox\n    lifecycle: {preStop: {exec: {command: [sleep, '5']}}}\n".to_string()),
            1 => Just("just text\n".to_string()),
            1 => Just("# only a comment\n".to_string()),
            1 => Just("- op: add\n  path: /spec/replicas\n  value: 3\n".to_string()),
            1 => Just("[]\n".to_string()),
            // Not YAML: the error outranks every document's.
            1 => Just("kind: Pod\nmetadata: {name: [\n".to_string()),
            // inject refuses it: two containers of one name.
            1 => Just("kind: Pod\nmetadata: {name: twice}\nspec:\n  containers:\n  - {name: a, image: a}\n  - {name: a, image: b}\n".to_string()),
        ]
    }

    static ANEW: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

    const DEPLOYMENT: &str = "# a deployment\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: app\n  labels: {app: app, tier: \"web\"}\nspec:\n  template:\n    metadata:\n      labels:\n        app: app\n    spec:\n      terminationGracePeriodSeconds: 60\n      containers:\n      - name: web\n        image: nginx:1.25\n        ports: [{containerPort: 80}]\n        lifecycle:\n          preStop:\n            exec:\n              command: [\"sh\", \"-c\", \"nginx -s quit; sleep 5\"]\n      - name: log\n        image: busybox:1.36\n        args: [sh, -c, 'tail -F /var/log/app.log']\n";

    /// A separator before a document, in every form a stream has.
    fn separator() -> impl Strategy<Value = &'static str> {
        prop::sample::select(vec![
            "---\n",
            "--- \n",
            "---   # next\n",
            "...\n---\n",
            "...\n%YAML 1.1\n---\n",
            "\n---\n# between\n",
        ])
    }

    /// One input: documents joined by separators, maybe a BOM, a leading `---`, CRLF, no final
    /// newline, a trailing `...`.
    fn stream() -> impl Strategy<Value = String> {
        (
            prop::collection::vec((separator(), document()), 1..5),
            any::<bool>(),
            any::<bool>(),
            prop::sample::select(vec!["", "...\n", "# the end\n"]),
            0u8..4,
        )
            .prop_map(|(docs, bom, lead, tail, ending)| {
                let mut text = String::new();
                if bom {
                    text.push('\u{feff}');
                }
                for (i, (sep, doc)) in docs.iter().enumerate() {
                    if i > 0 || lead {
                        text.push_str(sep.trim_start_matches("...\n"));
                    }
                    text.push_str(doc);
                }
                text.push_str(tail);
                match ending {
                    // CRLF throughout.
                    0 => text.replace('\n', "\r\n"),
                    // No final newline.
                    1 => text.trim_end_matches('\n').to_string(),
                    _ => text,
                }
            })
    }

    /// Several inputs, one of them maybe unreadable.
    fn inputs() -> impl Strategy<Value = (Vec<String>, Option<usize>)> {
        (
            prop::collection::vec(stream(), 1..4),
            prop::option::weighted(0.2, 0usize..4),
        )
    }

    fn read(texts: &[String], unreadable: Option<usize>) -> Vec<Result<Input, LoadError>> {
        texts
            .iter()
            .enumerate()
            .map(|(i, t)| {
                if unreadable == Some(i) {
                    Err(LoadError::Read {
                        file: format!("in{i}.yaml"),
                        why: "Permission denied (os error 13)".into(),
                    })
                } else {
                    Ok(Input::new(&format!("in{i}.yaml"), t.clone()))
                }
            })
            .collect()
    }

    /// Streaming and whole agree on one input set for `f`; returns the streaming output.
    fn same_transform(
        texts: &[String],
        unreadable: Option<usize>,
        f: &mut super::super::transform::Change,
    ) -> Result<Option<String>, TestCaseError> {
        let mut pairs = Vec::new();
        let streamed =
            super::super::transform::transform(read(texts, unreadable), f, &mut |b, a| {
                pairs.push((b.clone(), a.clone()))
            });
        let whole = transform_whole(read(texts, unreadable), f);
        match (streamed, whole) {
            (Ok(mut s), Ok((out, report, want_pairs))) => {
                if report.iter().any(|l| l.contains("could not edit in place")) {
                    ANEW.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
                prop_assert_eq!(&s.out.read_text(), &out);
                prop_assert_eq!(&s.report, &report);
                prop_assert_eq!(&pairs, &as_parts(want_pairs));
                Ok(Some(out))
            }
            (Err(s), Err(w)) => {
                prop_assert_eq!(s, w);
                Ok(None)
            }
            (s, w) => Err(TestCaseError::fail(format!(
                "streaming {:?}, whole {:?}",
                s.map(|mut t| t.out.read_text()),
                w.map(|t| t.0)
            ))),
        }
    }

    /// Each document's values before and after as the streaming path hands them on: a
    /// `kind: *List`'s items each on its own, then the List with its `items` empty.
    fn as_parts(pairs: Vec<(Value, Value)>) -> Vec<(Value, Value)> {
        let mut out = Vec::new();
        for (mut before, mut after) in pairs {
            let is_list = before["kind"].as_str().is_some_and(|k| k.ends_with("List"));
            if let (true, Some(b), Some(a)) = (
                is_list,
                before.get_mut("items").and_then(Value::as_array_mut),
                after.get_mut("items").and_then(Value::as_array_mut),
            ) {
                out.extend(std::mem::take(b).into_iter().zip(std::mem::take(a)));
            }
            out.push((before, after));
        }
        out
    }

    fn same_check(texts: &[String], unreadable: Option<usize>) -> Result<(), TestCaseError> {
        let opts = check::Options::default();
        prop_assert_eq!(
            check_streaming(read(texts, unreadable), &opts),
            check_whole(read(texts, unreadable), &opts)
        );
        Ok(())
    }

    /// inject, uninject of inject's output and check of both: the streaming path writes what the
    /// whole-input path wrote, errors and reports included.
    #[test]
    fn streaming_writes_what_the_whole_input_path_wrote() {
        crate::testkit::property(
            file!(),
            "streaming_writes_what_the_whole_input_path_wrote",
            cases(),
            // The rest compare the error each path gives (a document that is no YAML, one inject
            // refuses, an input that cannot be read).
            0.4,
            inputs(),
            |(texts, unreadable), reach| {
                same_check(&texts, unreadable)?;
                let opts = inject::Options {
                    image: "registry.example.com/hooklog:0.1.0".into(),
                    mode: super::super::budget::SidecarMode::Native,
                    prestop_sleep: vec![],
                    events: false,
                    settings: Default::default(),
                };
                let mut f = |v: &mut Value| inject::inject(v, &opts);
                let Some(injected) = same_transform(&texts, unreadable, &mut f)? else {
                    return Ok(());
                };
                let injected = [injected];
                same_check(&injected, None)?;
                let mut f = uninject::uninject;
                same_transform(&injected, None, &mut f)?;
                reach.reached();
                Ok(())
            },
        );
        eprintln!(
            "written anew: {}",
            ANEW.load(std::sync::atomic::Ordering::Relaxed)
        );
    }

    /// The digest the read-back compares is equality as `serde_json` has it.
    #[test]
    fn digests_are_equal_exactly_for_equal_values() {
        let same = [
            (
                json!({"a": 1, "b": [true, null]}),
                json!({"b": [true, null], "a": 1}),
            ),
            (json!(0.0), json!(-0.0)),
            (
                json!({"x": {"p": "q", "r": 2.5}}),
                json!({"x": {"r": 2.5, "p": "q"}}),
            ),
        ];
        for (a, b) in same {
            assert_eq!(a, b);
            assert_eq!(
                crate::yaml::digest::digest(&a),
                crate::yaml::digest::digest(&b),
                "{a} {b}"
            );
        }
        let differ = [
            (json!(1), json!(1.0)),
            (json!(1), json!("1")),
            (json!(-1), json!(u64::MAX)),
            (json!([1, 2]), json!([2, 1])),
            (json!({"a": 1}), json!({"a": 1, "b": null})),
            (json!({"a": {"b": 1}}), json!({"a": {"c": 1}})),
            (json!([[]]), json!([])),
            (json!(null), json!(false)),
            (json!({}), json!([])),
        ];
        for (a, b) in differ {
            assert_ne!(a, b);
            assert_ne!(
                crate::yaml::digest::digest(&a),
                crate::yaml::digest::digest(&b),
                "{a} {b}"
            );
        }
    }
}
