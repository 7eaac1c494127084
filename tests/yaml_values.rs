//! What hooklog acts on, spelled every way YAML lets a user spell it (issue 39): a tag in a
//! flow sequence (the distroless incident's `command: [!!str, sleep, "15"]`, as go-yaml reads
//! it), every spelling of null where inject adds (given back byte for byte by uninject), and a
//! field of the wrong shape where inject would change it (refused, naming its line).

use serde_json::{Value, json};

use crate::util::goyaml::GoYaml;
use crate::util::manifests::{ToValidate, assert_reinject_and_uninject, run, web_deployment};
use crate::util::text;

const IMAGE: &str = "registry.example.com/hooklog:0.1.0";
const INCIDENT: &str = "tests/manifests/incidents/distroless-envoy-sleep.yaml";
const COMMAND: &str = r#"command: ["sleep", "15"]"#;

fn incident() -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(INCIDENT);
    let text = std::fs::read_to_string(path).unwrap();
    assert!(
        text.contains(COMMAND),
        "{INCIDENT} changed: {COMMAND} not in it"
    );
    text
}

fn check(input: &str) -> Value {
    let out = run(&["check", "--format", "json", "-"], Some(input));
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}\n{input}", text(&out.stderr)))
}

/// The envoy container's preStop command in go-yaml's reading of `yaml`.
fn envoy_command(go: &mut GoYaml, yaml: &str) -> Vec<Value> {
    let docs = go
        .read(yaml)
        .unwrap_or_else(|e| panic!("go-yaml: {e}\n{yaml}"));
    docs[0]["spec"]["template"]["spec"]["containers"][1]["lifecycle"]["preStop"]["exec"]["command"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// The incident's `sleep 15` spelled with tags in its flow sequence: each is read as go-yaml
/// (Kubernetes) reads it, so the shell-less finding is there exactly when go-yaml's command is
/// `sleep`, and inject makes that `hooklog sleep 15` (go-yaml's reading of its output), which
/// uninject gives back byte for byte.
#[test]
fn a_tagged_command_in_a_flow_sequence_is_read_as_kubernetes_reads_it() {
    let Some(mut go) = GoYaml::start() else {
        return;
    };
    let base = incident();
    let spellings = [
        r#"[!!str, sleep, "15"]"#,
        r#"[!!str, sleep, !!str, "15"]"#,
        r#"[!!str sleep, "15"]"#,
        r#"[ !!str,  sleep , "15" ]"#,
        r#"[!local, sleep, "15"]"#,
        r#"[!!str,sleep, "15"]"#,
        r#"[!<tag:yaml.org,2002:str> sleep, "15"]"#,
    ];
    let mut found = 0;
    for spelling in spellings {
        let input = base.replace(COMMAND, &format!("command: {spelling}"));
        let go_command = envoy_command(&mut go, &input);
        let sleeps = go_command.first().is_some_and(|p| p == "sleep");
        let doc = check(&input);
        let shell_less =
            doc["findings"].as_array().unwrap().iter().any(|f| {
                f["rule"] == "hook-command-in-shell-less-image" && f["container"] == "envoy"
            });
        assert_eq!(
            shell_less, sleeps,
            "{spelling}: go-yaml reads {go_command:?}; check: {doc:#}"
        );
        if !sleeps {
            continue;
        }
        found += 1;
        let out = run(&["inject", "--image", IMAGE, "-"], Some(&input));
        assert!(out.status.success(), "{spelling}: {}", text(&out.stderr));
        let injected = text(&out.stdout);
        let wrapped: Vec<Value> = envoy_command(&mut go, &injected);
        let dashes = wrapped
            .iter()
            .position(|a| a == "--")
            .expect("hooklog's prefix");
        let mut want = vec![Value::from("/hooklog-bin/hooklog")];
        want.extend(go_command);
        assert_eq!(wrapped[dashes + 1..], want[..], "{spelling}:\n{injected}");
        let back = run(&["uninject", "-"], Some(&injected));
        assert_eq!(text(&back.stdout), input, "{spelling}: uninject");
    }
    assert!(found >= 6, "only {found} spellings read as sleep");
}

/// The places inject adds to, each written as `{place}` in [`NULL_BASE`], with the text that
/// fills it when it is not the one under test.
const PLACES: &[(&str, &str)] = &[
    ("{metadata}", " \n      labels: {app: web}"),
    ("{annotations}", " {note: x}"),
    ("{initContainers}", " []"),
    ("{volumes}", " []"),
    ("{volumeMounts}", " []"),
];

/// A Deployment whose template has each place inject adds to.
const NULL_BASE: &str = "\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  annotations:{annotations}
spec:
  selector:
    matchLabels: {app: web}
  template:
    metadata:{metadata}
    spec:
      initContainers:{initContainers}
      containers:
        - name: web
          image: nginx:1.25
          volumeMounts:{volumeMounts}
          lifecycle:
            preStop:
              exec:
                command: [\"sh\", \"-c\", \"sleep 5\"]
      volumes:{volumes}
";

/// Every spelling of a null after `key:` at `indent` (the key's column): each token, alone,
/// with a comment after it, anchored, on the next line, empty.
fn null_spellings(indent: usize) -> Vec<String> {
    let mut out = vec![String::new(), "  # nothing".to_string()];
    for token in ["~", "null", "Null", "NULL"] {
        out.push(format!(" {token}"));
        out.push(format!(" {token}  # a comment"));
        out.push(format!(" &n {token}"));
        out.push(format!("\n{}{token}", " ".repeat(indent + 2)));
        out.push(format!(" # a comment\n{}{token}", " ".repeat(indent + 2)));
    }
    out
}

/// `base` with each of its `places` filled: `place`, the one under test, with `spelling`, the
/// others with their filler.
fn fill_places(base: &str, places: &[(&str, &str)], place: &str, spelling: &str) -> String {
    let mut text = base.to_string();
    for (p, filler) in places {
        let value = if *p == place { spelling } else { filler };
        text = text.replace(p, value);
    }
    text
}

/// [`NULL_BASE`] with `place` filled with `spelling`; the template's `annotations` is a place
/// too, under `metadata`.
fn fill(place: &str, spelling: &str) -> String {
    let mut text = fill_places(NULL_BASE, PLACES, place, spelling);
    // The template's annotations go under its metadata (the object's are the base's).
    if place == "{template-annotations}" {
        text = text.replace(
            "      labels: {app: web}\n",
            &format!("      labels: {{app: web}}\n      annotations:{spelling}\n"),
        );
    }
    text
}

/// Every spelling of null, at every place inject adds to (the template's metadata and
/// annotations, initContainers, volumes, a container's volumeMounts), in a block document and
/// as CRLF: go-yaml reads inject's output as inject meant, the output validates
/// (`kubernetes-validate --strict`), inject again changes nothing, and uninject gives back
/// every byte.
#[test]
fn every_spelling_of_null_where_inject_adds_comes_back() {
    let Some(mut go) = GoYaml::start() else {
        return;
    };
    let places = [
        ("{metadata}", 4),
        ("{template-annotations}", 6),
        ("{initContainers}", 6),
        ("{volumes}", 6),
        ("{volumeMounts}", 10),
    ];
    let mut outputs = ToValidate::default();
    for (place, indent) in places {
        for spelling in null_spellings(indent) {
            let input = fill(place, &spelling);
            let what = format!("{place} = {spelling:?}");
            round_trip_lf_and_crlf(&mut go, &input, &what, &mut outputs);
        }
    }
    assert_eq!(outputs.count(), 5 * 22);
    outputs.validate();
}

/// inject of `input` (made CRLF when `crlf`) wires the pod as go-yaml reads it, keeps the
/// rest of the object, is done once for all, and uninject gives back every byte: the
/// injected text (CRLF or not as the input).
fn round_trip(go: &mut GoYaml, input: &str, crlf: bool, what: &str) -> String {
    let input = if crlf {
        input.replace('\n', "\r\n")
    } else {
        input.to_string()
    };
    let Ok(before) = go.read(&input) else {
        panic!("go-yaml refuses the test's own input:\n{input}");
    };
    let out = run(&["inject", "--image", IMAGE, "-"], Some(&input));
    assert!(out.status.success(), "{what}: {}", text(&out.stderr));
    assert!(
        !text(&out.stderr).contains("written anew"),
        "{what}: {}",
        text(&out.stderr)
    );
    let once = text(&out.stdout);
    let after = go
        .read(&once)
        .unwrap_or_else(|e| panic!("{what}: {e}\n{once}"));
    let spec = &after[0]["spec"]["template"]["spec"];
    assert_eq!(
        spec["initContainers"][0]["name"], "hooklog-install",
        "{what}:\n{once}"
    );
    assert!(spec["volumes"].as_array().is_some_and(|v| v.len() >= 2));
    assert_eq!(
        spec["containers"][0]["volumeMounts"][0]["name"],
        "hooklog-shared"
    );
    assert_eq!(before[0]["spec"]["selector"], after[0]["spec"]["selector"]);
    assert_reinject_and_uninject(&["inject", "--image", IMAGE, "-"], &input, &once, what);
    once
}

/// [`round_trip`] of `input` as LF and as CRLF; the LF output is kept for
/// `kubernetes-validate --strict`.
fn round_trip_lf_and_crlf(go: &mut GoYaml, input: &str, what: &str, outputs: &mut ToValidate) {
    for crlf in [false, true] {
        let once = round_trip(go, input, crlf, &format!("{what} (crlf {crlf})"));
        if !crlf {
            outputs.add(&once);
        }
    }
}

/// [`NULL_BASE`]'s pod template in flow style: each place inject adds to is written as its
/// key followed by `{place}`, which the spelling under test fills from the key's end on (`:
/// ~`, `:` for an empty value, nothing for a key without one).
const FLOW_NULL_BASE: &str = web_deployment!(template: " {metadata{metadata}, spec: {initContainers{initContainers}, containers: [{name: web, image: \"nginx:1.25\", volumeMounts{volumeMounts}, lifecycle: {preStop: {exec: {command: [\"sh\", \"-c\", \"sleep 5\"]}}}}], volumes{volumes}}}
");

/// The places of [`FLOW_NULL_BASE`], with the text that fills each when it is not the one
/// under test (the template's metadata holds the place of its annotations).
const FLOW_PLACES: &[(&str, &str)] = &[
    (
        "{metadata}",
        ": {labels: {app: web}, annotations{annotations}}",
    ),
    ("{annotations}", ": {note: x}"),
    ("{initContainers}", ": []"),
    ("{volumes}", ": []"),
    ("{volumeMounts}", ": []"),
];

/// Every spelling of a null in a flow mapping, from its key's end: each token after `: `,
/// after a tag or an anchor, on the next line, with a comment after it (then a line break, as a flow
/// collection needs), with spaces before the `,` or `}` after it; empty after its `:`; and
/// no `:` at all (`{volumes}`, null to go-yaml).
fn flow_null_spellings(indent: usize) -> Vec<String> {
    let mut out = vec![":".to_string(), ": ".to_string(), String::new()];
    for token in ["~", "null", "Null", "NULL"] {
        out.push(format!(": {token}"));
        out.push(format!(": {token}  "));
        out.push(format!(": !!null {token}"));
        out.push(format!(": &n {token}"));
        out.push(format!(":\n{}{token}", " ".repeat(indent)));
        out.push(format!(": {token} # a comment\n    "));
    }
    out
}

fn fill_flow(place: &str, spelling: &str) -> String {
    fill_places(FLOW_NULL_BASE, FLOW_PLACES, place, spelling)
}

/// Every spelling of null in a flow mapping, at every place inject adds to, as LF and CRLF:
/// inject keeps the null's text in a comment after its key's `:` (a flow collection has room
/// for one only before a line break), its output validates (`kubernetes-validate
/// --strict`) and reads in go-yaml as inject meant, inject again changes nothing, and uninject
/// gives back every byte.
#[test]
fn every_spelling_of_null_in_a_flow_mapping_comes_back() {
    let Some(mut go) = GoYaml::start() else {
        return;
    };
    let places = [
        "{metadata}",
        "{annotations}",
        "{initContainers}",
        "{volumes}",
        "{volumeMounts}",
    ];
    let mut outputs = ToValidate::default();
    for place in places {
        for spelling in flow_null_spellings(6) {
            // `{annotations:}` is the key `annotations:` to go-yaml (a flow plain scalar may
            // end in `:` before `}`): no null, and no place of inject's.
            let input = fill_flow(place, &spelling);
            let read = go.read(&input).unwrap_or_else(|e| panic!("{e}\n{input}"));
            let pointer = match place {
                "{metadata}" => "/metadata".to_string(),
                "{annotations}" => "/metadata/annotations".to_string(),
                "{volumeMounts}" => "/spec/containers/0/volumeMounts".to_string(),
                other => format!("/spec/{}", other.trim_matches(['{', '}'])),
            };
            if read[0]["spec"]["template"].pointer(&pointer) != Some(&Value::Null) {
                assert_eq!(spelling, ":", "{place}: go-yaml reads no null\n{input}");
                continue;
            }
            let what = format!("flow {place} = {spelling:?}");
            round_trip_lf_and_crlf(&mut go, &input, &what, &mut outputs);
        }
    }
    assert_eq!(outputs.count(), 5 * 26);
    outputs.validate();
}

/// A Deployment whose one container `web` has no hook, or the lifecycle `{lifecycle}` stands
/// for (lines from the container's keys' column on).
const HOOK_BASE: &str = web_deployment!(image: "nginx:1.25\n{lifecycle}");

/// `lifecycle: ~`, `preStop: ~` (beside a postStart or alone) and the container's lifecycle in
/// flow style, each null spelled every way: the container has no hook, as Kubernetes reads it.
fn null_hooks() -> Vec<String> {
    let mut out = Vec::new();
    for s in null_spellings(10) {
        out.push(format!("          lifecycle:{s}\n"));
    }
    for s in null_spellings(12) {
        out.push(format!("          lifecycle:\n            preStop:{s}\n"));
        out.push(format!(
            "          lifecycle:\n            postStart: {{exec: {{command: [\"true\"]}}}}\n            preStop:{s}\n"
        ));
    }
    for s in flow_null_spellings(12) {
        out.push(format!("          lifecycle: {{preStop{s}}}\n"));
        out.push(format!(
            "          lifecycle: {{postStart: {{exec: {{command: [\"true\"]}}}}, preStop{s}}}\n"
        ));
    }
    out
}

/// A null hook is no hook (issue 39): `check` finds what it finds in a container without one
/// (not a handler it does not know), inject without `--prestop-sleep` leaves the container as
/// it is, and with it gives the container `hooklog sleep` in the null's place (go-yaml reads
/// it, `kubernetes-validate --strict` accepts it), inject again changes nothing, and uninject
/// gives back every byte of each null, LF and CRLF.
#[test]
fn a_null_lifecycle_or_pre_stop_is_no_hook_and_comes_back() {
    let Some(mut go) = GoYaml::start() else {
        return;
    };
    let none = HOOK_BASE.replace("{lifecycle}", "");
    let findings = |input: &str| check(input)["findings"].clone();
    let want = findings(&none);
    let sleep = ["--prestop-sleep", "web=5s"];
    let mut outputs = ToValidate::default();
    let mut cases = 0;
    for hook in null_hooks() {
        let input = HOOK_BASE.replace("{lifecycle}", &hook);
        let read = go.read(&input).unwrap_or_else(|e| panic!("{e}\n{input}"));
        let web = &read[0]["spec"]["template"]["spec"]["containers"][0];
        if !web["lifecycle"].is_null() && web["lifecycle"].get("preStop") != Some(&Value::Null) {
            // `{preStop:}`: the key `preStop:` to go-yaml, no null.
            assert!(hook.contains("preStop:}"), "{hook:?}: {web}");
            continue;
        }
        assert_eq!(findings(&input), want, "{hook:?}: check");
        for crlf in [false, true] {
            let input = if crlf {
                input.replace('\n', "\r\n")
            } else {
                input.clone()
            };
            let what = format!("{hook:?} (crlf {crlf})");
            for extra in [&[][..], &sleep[..]] {
                let mut args = vec!["inject", "--image", IMAGE];
                args.extend(extra);
                args.push("-");
                let out = run(&args, Some(&input));
                let err = text(&out.stderr);
                assert!(out.status.success(), "{what}: {err}");
                assert!(!err.contains("preStop"), "{what} {extra:?}: {err}");
                assert!(!err.contains("written anew"), "{what}: {err}");
                let once = text(&out.stdout);
                let after = go
                    .read(&once)
                    .unwrap_or_else(|e| panic!("{what}: {e}\n{once}"));
                let web = &after[0]["spec"]["template"]["spec"]["containers"][0];
                let command = web["lifecycle"]["preStop"]["exec"]["command"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
                if extra.is_empty() {
                    assert!(command.is_empty(), "{what}:\n{once}");
                } else {
                    let tail = command.len().saturating_sub(3);
                    assert_eq!(
                        command[tail..],
                        [json!("/hooklog-bin/hooklog"), json!("sleep"), json!("5s")],
                        "{what}:\n{once}"
                    );
                    if !crlf {
                        outputs.add(&once);
                    }
                }
                assert_reinject_and_uninject(&args, &input, &once, &format!("{what} {extra:?}"));
                cases += 1;
            }
        }
    }
    assert_eq!(cases, 118 * 2 * 2);
    outputs.validate();
}

/// The busybox `tail -F` forwarder of the incident, its keep-alive preStop a null in every
/// spelling (block and flow): no hook, so inject migrates it as it does a forwarder without one
/// (it refused: "does more than sleep"), its output validates, and uninject gives back every
/// byte.
#[test]
fn a_forwarder_whose_pre_stop_is_null_is_migrated() {
    const FORWARDER: &str = "tests/manifests/incidents/busybox-tail-workaround.yaml";
    const KEEP_ALIVE: &str = "          lifecycle:
            preStop:
              exec:
                command: [\"sleep\", \"55\"]   # outlive the others, and hope
";
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(FORWARDER);
    let base = std::fs::read_to_string(path).unwrap();
    assert!(base.contains(KEEP_ALIVE), "{FORWARDER} changed");
    let mut lifecycles: Vec<String> = null_spellings(12)
        .iter()
        .map(|s| format!("          lifecycle:\n            preStop:{s}\n"))
        .collect();
    lifecycles.extend(
        flow_null_spellings(12)
            .iter()
            .filter(|s| *s != ":")
            .map(|s| format!("          lifecycle: {{preStop{s}}}\n")),
    );
    let mut outputs = ToValidate::default();
    for lifecycle in &lifecycles {
        let input = base.replace(KEEP_ALIVE, lifecycle);
        let out = run(&["inject", "--image", IMAGE, "-"], Some(&input));
        let err = text(&out.stderr);
        assert!(out.status.success(), "{lifecycle:?}: {err}");
        assert!(
            err.contains("log-forwarder: its `tail -F` of /shared-logs/prestop.log migrated"),
            "{lifecycle:?}: {err}"
        );
        let once = text(&out.stdout);
        let back = run(&["uninject", "-"], Some(&once));
        assert_eq!(text(&back.stdout), input, "{lifecycle:?}\n{once}");
        outputs.add(&once);
    }
    assert_eq!(outputs.count(), 22 + 26);
    outputs.validate();
}

/// Each field inject would change, holding each shape Kubernetes does not give it, written as
/// YAML and as JSON: inject refuses the document with one line naming the input, the field's
/// line and the field, writes nothing, and the text is unchanged (never replaced silently).
#[test]
fn a_field_of_the_wrong_shape_is_refused_naming_its_line() {
    let wrong = ["{a: b}", "[a]", "x", "3", "true", "\"\""];
    // (field, where it is written, whether it wants a list)
    let fields = [
        ("{metadata}", "spec.template.metadata", false),
        (
            "{template-annotations}",
            "spec.template.metadata.annotations",
            false,
        ),
        (
            "{initContainers}",
            "spec.template.spec.initContainers",
            true,
        ),
        ("{volumes}", "spec.template.spec.volumes", true),
        (
            "{volumeMounts}",
            "spec.template.spec.containers[0].volumeMounts",
            true,
        ),
    ];
    let mut cases = 0;
    for (place, path, list) in fields {
        for value in wrong {
            let is_list = value.starts_with('[');
            let is_map = value.starts_with('{');
            if (list && is_list) || (!list && is_map) {
                continue;
            }
            let yaml = fill(place, &format!(" {value}"));
            let json = {
                let v: Value = serde_yaml_reading(&yaml);
                serde_json::to_string_pretty(&v).unwrap()
            };
            for input in [&yaml, &json] {
                let out = run(&["inject", "--image", IMAGE, "-"], Some(input));
                let err = text(&out.stderr);
                assert_eq!(out.status.code(), Some(64), "{path} = {value}: {err}");
                assert!(out.stdout.is_empty(), "{path} = {value}: wrote output");
                // The field's key line: the last of its name (the template's come after the
                // object's own `metadata` and `annotations`).
                let key = path.rsplit('.').next().unwrap();
                let line = input
                    .lines()
                    .collect::<Vec<_>>()
                    .iter()
                    .rposition(|l| {
                        let l = l.trim_start();
                        l.starts_with(&format!("{key}:")) || l.starts_with(&format!("\"{key}\":"))
                    })
                    .map(|i| i + 1)
                    .unwrap_or_else(|| panic!("{path} = {value} not found in\n{input}"));
                assert_eq!(err.lines().count(), 1, "{err}");
                assert!(
                    err.starts_with(&format!("hooklog: -:{line}: ")) && err.contains(path),
                    "{path} = {value} (line {line}): {err}"
                );
                cases += 1;
            }
        }
    }
    assert!(cases >= 40, "{cases}");
}

/// `yaml` as JSON, read by hooklog's own reader (every case here is plain YAML).
fn serde_yaml_reading(yaml: &str) -> Value {
    hooklog::yaml::tree::parse(yaml).unwrap().remove(0).value
}
