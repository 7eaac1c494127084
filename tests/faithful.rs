//! `inject` and `uninject` keep what the user wrote (issue 16): real public manifests
//! (tests/manifests/real, sources in its SOURCES.md) and the project's own come back byte for
//! byte, inject only adds (a YAML 1.1 reader, PyYAML, finds every original value unchanged in
//! its output), documents without a pod template are untouched, and what it writes validates.

use std::path::{Path, PathBuf};

use hooklog::manifest::{load, podspec};
use hooklog::yaml::splice;

use crate::util::manifests::{assert_python, every_manifest, first_difference, python_output, run};
use crate::util::text;

const IMAGE: &str = "registry.example.com/hooklog:0.1.0";

fn manifests() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/manifests")
}

/// Every input: the real public manifests, the faithful-editing fixture and the project's own.
/// Files that already carry a hand-wired hooklog are refused by inject (a name it would
/// overwrite): those are left out.
fn inputs() -> Vec<PathBuf> {
    let out = every_manifest();
    assert!(out.len() >= 30, "{out:?}");
    out
}

/// `inject --sidecar MODE FILE`, or `None` when inject refuses the file because a hooklog is
/// wired there by hand already, or for an annotation's value.
fn inject(file: &Path, mode: &str) -> Option<String> {
    let out = run(
        &[
            "inject",
            "--image",
            IMAGE,
            "--sidecar",
            mode,
            file.to_str().unwrap(),
        ],
        None,
    );
    let err = text(&out.stderr);
    if !out.status.success() && err.contains("exists already") {
        return None;
    }
    // A file whose `hooklog.dev/` annotations hold a value inject refuses on purpose
    // (corpus/sidecar-settings-annotations.yaml) is refused whole: no round trip to check.
    if !out.status.success() && err.contains(": annotation hooklog.dev/") {
        return None;
    }
    // A file that was inject's output already (corpus/events-rbac.yaml) comes out unchanged, or
    // updated to the form asked for (tests/reinject.rs), and uninject then takes hooklog out:
    // no round trip to the file to check.
    if out.status.success()
        && (err.contains("already injected, unchanged") || err.contains("\" updated: "))
    {
        return None;
    }
    assert!(out.status.success(), "{}: {err}", file.display());
    assert!(
        !err.contains("could not edit in place"),
        "{}: inject fell back to writing the file anew: {err}",
        file.display()
    );
    Some(text(&out.stdout))
}

/// `hooklog ARGS` of `stdin`, which must succeed: its stdout.
fn run_ok(args: &[&str], stdin: &str) -> String {
    let out = run(args, Some(stdin));
    assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
    text(&out.stdout)
}

/// `got` is `want`, byte for byte; a failure says `what` and shows where they part.
fn assert_same_bytes(got: &str, want: &str, what: &str) {
    assert!(got == want, "{what}:\n{}", first_difference(want, got));
}

#[test]
fn every_manifest_comes_back_byte_for_byte_and_inject_is_idempotent() {
    let mut injected_files = 0;
    for file in inputs() {
        let original = std::fs::read_to_string(&file).unwrap();
        for mode in ["native", "classic"] {
            let Some(injected) = inject(&file, mode) else {
                continue;
            };
            injected_files += 1;
            let what = format!("{} ({mode})", file.display());
            for undo in [&["uninject", "-"][..], &["inject", "--undo", "-"][..]] {
                let back = run_ok(undo, &injected);
                let why = format!("{undo:?} of inject's output is not the file, byte for byte");
                assert_same_bytes(&back, &original, &format!("{what}: {why}"));
            }
            let again = run_ok(
                &["inject", "--image", IMAGE, "--sidecar", mode, "-"],
                &injected,
            );
            let why = "injecting twice changed the output";
            assert_same_bytes(&again, &injected, &format!("{what}: {why}"));
        }
    }
    assert!(injected_files >= 50, "{injected_files}");
}

/// The lines of `a` that a longest-common-subsequence diff against `b` removes.
fn removed_lines<'a>(a: &'a str, b: &str) -> Vec<&'a str> {
    let (a, b): (Vec<&str>, Vec<&str>) = (a.lines().collect(), b.lines().collect());
    let kept: std::collections::HashSet<usize> =
        splice::lcs(&a, &b).into_iter().map(|(i, _)| i).collect();
    a.iter()
        .enumerate()
        .filter(|(i, _)| !kept.contains(i))
        .map(|(_, l)| *l)
        .collect()
}

/// A `tail -F` forwarder's `name:` or `image:` line, which inject replaces when hooklog takes
/// the forwarder's container (its record keeps the forwarder, `"migrated":{"name":...}`).
fn migrated(line: &str, injected: &str) -> bool {
    let line = line.trim_start_matches([' ', '-']).trim_end_matches(',');
    let (key, value) = line.split_once(':').unwrap_or_default();
    let (key, value) = (key.trim_matches('"'), value.trim().trim_matches('"'));
    ["name", "image"].contains(&key)
        && injected.contains("migrated")
        && [
            format!("\"{key}\":\"{value}\""),
            format!("\\\"{key}\\\":\\\"{value}\\\""),
        ]
        .iter()
        .any(|v| injected.contains(v.as_str()))
}

#[test]
fn inject_only_adds_lines_and_leaves_other_documents_untouched() {
    for file in inputs() {
        let original = std::fs::read_to_string(&file).unwrap();
        let Some(injected) = inject(&file, "native") else {
            continue;
        };
        // A line of the file changes only where a flow collection gains items: a wrapped
        // command (`command: ["sh", "-c", "..."]`, hooklog's prefix inside its brackets), or
        // JSON, whose closing brackets share a line and whose last key gains a comma; and the
        // one rewrite inject makes and reports, a hook's `/proc/1/fd/1` to its own stdout.
        let output_lines: std::collections::HashSet<&str> = injected.lines().collect();
        for line in removed_lines(&original, &injected) {
            assert!(
                line.contains(['[', ']', '{', '}'])
                    || output_lines.contains(format!("{line},").as_str())
                    || line.contains("/proc/1/fd/")
                    || migrated(line, &injected),
                "{}: inject changed or removed a line it does not own: {line:?}",
                file.display()
            );
        }
        // Every document without a pod template is in the output exactly as written.
        let source = load::parse("in", original.clone()).unwrap();
        for doc in &source.documents {
            if podspec::templates(&doc.value).is_empty() {
                let written = &original[doc.node.start..doc.node.end];
                assert!(
                    injected.contains(written),
                    "{}: the document at line {} changed",
                    file.display(),
                    doc.line
                );
            }
        }
    }
}

/// Python that reads two YAML streams with PyYAML (YAML 1.1, as Kubernetes reads YAML) and
/// checks that every value of the first is in the second: mappings may gain keys, sequences
/// items (the original's items in order, so a command may gain a prefix), scalars are equal
/// and of the same type. Prints `changed meaning: ` and the first path that differs, and exits 1
/// (a crash, or PyYAML missing, exits otherwise or says something else).
const CONTAINED: &str = r#"
import re, sys, yaml
MIGRATED = set()

class Loader(yaml.SafeLoader):
    pass

def contained(a, b, path):
    if a is None and isinstance(b, (dict, list)):
        return None  # an empty key (`annotations:`) that inject filled
    if isinstance(a, dict):
        if not isinstance(b, dict):
            return path
        if a.get("name") in MIGRATED and "image" in a:
            return None
        for k, v in a.items():
            if k not in b:
                return f"{path}.{k} (gone)"
            bad = contained(v, b[k], f"{path}.{k}")
            if bad:
                return bad
        return None
    if isinstance(a, list):
        if not isinstance(b, list):
            return path
        j = 0
        for i, item in enumerate(a):
            while j < len(b) and contained(item, b[j], "") is not None:
                j += 1
            if j == len(b):
                return f"{path}[{i}] (not found in order)"
            j += 1
        return None
    if isinstance(a, str) and isinstance(b, str) and b == a.replace(
            "/proc/1/fd/1", "/dev/stdout").replace("/proc/1/fd/2", "/dev/stderr"):
        return None  # inject's one rewrite, which it reports and uninject undoes
    if type(a) is not type(b) or a != b:
        return f"{path}: {a!r} became {b!r}"
    return None

with open(sys.argv[1]) as f:
    before = [d for d in yaml.load_all(f, Loader) if d is not None]
with open(sys.argv[2]) as f:
    injected = f.read()
    after = [d for d in yaml.load_all(injected, Loader) if d is not None]
# A `tail -F` forwarder hooklog's sidecar took the place of (issue 40): its record names it
# (`"migrated":{"name":...}`), and its container is hooklog's now; tests/tail_workaround.rs
# holds what it became, and uninject gives its bytes back.
MIGRATED.update(re.findall(r'\\?"migrated\\?":\{\\?"name\\?":\\?"([^"\\]+)', injected))
if len(before) != len(after):
    print(f"changed meaning: {len(before)} documents became {len(after)}")
    sys.exit(1)
for i, (a, b) in enumerate(zip(before, after)):
    bad = contained(a, b, f"document {i + 1}")
    if bad:
        print(f"changed meaning: {bad}")
        sys.exit(1)
"#;

#[test]
fn a_yaml_1_1_reader_finds_every_original_value_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let mut checked = 0;
    for file in inputs() {
        for mode in ["native", "classic"] {
            let Some(injected) = inject(&file, mode) else {
                continue;
            };
            let out_file = dir.path().join("injected.yaml");
            std::fs::write(&out_file, &injected).unwrap();
            // PyYAML: kubernetes-validate installs it.
            let changed = "a value changed meaning for a YAML 1.1 reader";
            let what = format!("{} ({mode}): {changed}", file.display());
            assert_python(CONTAINED, [&file, &out_file], &what);
            checked += 1;
        }
    }
    assert!(checked >= 50, "{checked}");
}

/// The check above can fail: a value written bare that YAML 1.1 reads otherwise is caught.
#[test]
fn the_yaml_1_1_check_catches_a_changed_meaning() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a.yaml"), dir.path().join("b.yaml"));
    for (before, after, said) in [
        (
            "mode: 0755\n",
            "mode: '0755'\n",
            "document 1.mode: 493 became '0755'",
        ),
        (
            "v: \"0xFF\"\n",
            "v: 0xFF\n",
            "document 1.v: '0xFF' became 255",
        ),
        ("v: \"no\"\n", "v: no\n", "document 1.v: 'no' became False"),
        (
            "t: \"2024-03-01T10:00:00Z\"\n",
            "t: 2024-03-01T10:00:00Z\n",
            "document 1.t: '2024-03-01T10:00:00Z' became datetime.datetime(2024, 3, 1, 10, 0",
        ),
        (
            "c: [a, b]\n",
            "c: [b, a]\n",
            "document 1.c[1] (not found in order)",
        ),
        ("a: 1\n", "a: 1\n---\nb: 2\n", "1 documents became 2"),
    ] {
        std::fs::write(&a, before).unwrap();
        std::fs::write(&b, after).unwrap();
        let out = python_output(CONTAINED, [&a, &b]);
        // Its own verdict, not any failure: a crash or a missing PyYAML exits 1 too.
        let stdout = text(&out.stdout);
        assert_eq!(
            out.status.code(),
            Some(1),
            "{before:?} -> {after:?}: {stdout}{}",
            text(&out.stderr)
        );
        assert!(
            stdout.starts_with(&format!("changed meaning: {said}")),
            "{before:?} -> {after:?}: {stdout}{}",
            text(&out.stderr)
        );
    }
}

#[test]
fn the_fixture_keeps_its_comments_quoting_and_yaml_1_1_values() {
    let file = manifests().join("faithful/yaml-1.1.yaml");
    let original = std::fs::read_to_string(&file).unwrap();
    let injected = inject(&file, "native").expect("injectable");
    for kept in [
        "  name: flags   # kpt: {\"$ref\":\"#/definitions/io.k8s.cli.setters.name\"}",
        "  replicas: 3 # {\"$ref\":\"#/definitions/io.k8s.cli.setters.replicas\"}",
        "    rolled-at: \"2024-03-01T10:00:00Z\"",
        "  mask: \"0xFF\"",
        "  small: '0x1f'",
        "      automountServiceAccountToken: no",
        "      terminationGracePeriodSeconds: 0x2d   # 45, in hex",
        "            defaultMode: 0755",
        "                # drain: the load balancer stops sending first",
        "  labels: &labels {app: web, tier: \"1\"}",
    ] {
        assert!(injected.contains(kept), "{kept:?} is gone:\n{injected}");
    }
    // The drain's command keeps its quoting, with hooklog's words before it, and no timeout (a
    // known sleep, 20 s); the sidecar's --grace is a quarter of the period read as Kubernetes
    // reads 0x2d (45 s).
    let drain = injected
        .lines()
        .find(|l| l.contains("\"sleep 20\""))
        .expect("the drain command");
    assert!(
        drain.starts_with("                command: [\"/hooklog-bin/hooklog\", \"hook\",")
            && drain.ends_with(", \"--\", \"sh\", \"-c\", \"sleep 20\"]"),
        "{drain}"
    );
    assert!(
        !drain.contains("--timeout"),
        "a known sleep got a timeout: {drain}"
    );
    assert!(
        injected.contains("            - --grace\n            - 11s\n"),
        "the sidecar's --grace is not a quarter of 0x2d = 45 s:\n{injected}"
    );
    // The second hook is a block sequence: hooklog's words are new lines before it.
    assert!(
        injected.contains(
            "                  - --\n                  - /bin/sh\n                  - -c\n                  - >-\n"
        ),
        "{injected}"
    );
    assert_ne!(injected, original);
}

#[test]
fn inject_output_of_real_manifests_validates_strictly() {
    // No schema for these: a CRD (Rollout), kustomize patches (no objects), a kind:List
    // (tests/manifest.rs splits those) and an old API version (batch/v2alpha1).
    let no_schema = |name: &str| {
        name.starts_with("argo-rollout")
            || name.contains("json6902")
            || name.contains("list")
            || name.starts_with("istio-cronjob")
    };
    validate_injected("real", no_schema, 16);
}

/// inject's output, native and classic, of each input in the folder `folder` (but those `skip`
/// names), at least `min` files: `kubernetes-validate --strict` accepts every one.
fn validate_injected(folder: &str, skip: impl Fn(&str) -> bool, min: usize) {
    let dir = tempfile::tempdir().unwrap();
    let mut files = Vec::new();
    for file in inputs()
        .into_iter()
        .filter(|f| f.parent().unwrap().ends_with(folder))
    {
        let name = file.file_name().unwrap().to_str().unwrap();
        if skip(name) {
            continue;
        }
        for mode in ["native", "classic"] {
            let injected = inject(&file, mode).unwrap_or_else(|| panic!("{name}: not injectable"));
            let out = dir.path().join(format!("{mode}-{name}"));
            std::fs::write(&out, injected).unwrap();
            files.push(out);
        }
    }
    assert!(files.len() >= min, "{files:?}");
    crate::util::manifests::validate_strictly(&files);
}

/// docs/check-and-inject.md's "Fixing it with `hooklog inject`" shows a real `diff -u` of inject's output: every
/// added line in it is a line inject writes for that file, every removed one a line of the
/// file that inject's output no longer has.
#[test]
fn the_docs_diff_is_what_inject_writes() {
    let page = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("docs/check-and-inject.md"),
    )
    .unwrap();
    let section = page
        .split("## Fixing it with `hooklog inject`")
        .nth(1)
        .expect("docs/check-and-inject.md has the inject section");
    let diff = section
        .split("```diff\n")
        .nth(1)
        .and_then(|d| d.split("\n```").next())
        .expect("a diff block");
    let file = manifests().join("e2e/checkout.yaml");
    let original = std::fs::read_to_string(&file).unwrap();
    let out = run(
        &[
            "inject",
            "--image",
            "123456789012.dkr.ecr.eu-west-1.amazonaws.com/hooklog-sidecar:0.1.0",
            file.to_str().unwrap(),
        ],
        None,
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let injected = text(&out.stdout);
    let (ins, outs): (Vec<&str>, Vec<&str>) =
        (injected.lines().collect(), original.lines().collect());
    let (mut added, mut removed) = (0, 0);
    for line in diff.lines() {
        if let Some(l) = line.strip_prefix('+') {
            assert!(
                ins.contains(&l) && !outs.contains(&l),
                "the docs' {line:?} is not what inject adds"
            );
            added += 1;
        } else if let Some(l) = line.strip_prefix('-') {
            assert!(
                outs.contains(&l) && !ins.contains(&l),
                "the docs' {line:?} is not what inject removes"
            );
            removed += 1;
        } else if let Some(l) = line.strip_prefix(' ') {
            assert!(
                ins.contains(&l) && outs.contains(&l),
                "the docs' context {line:?} is not in both"
            );
        }
    }
    assert!(
        added >= 20 && removed == 2,
        "{added} added, {removed} removed"
    );
}

/// `check DIR` exited 64 with no findings when one file in it was a kustomize JSON 6902 patch
/// (a top-level list): such a document is left out with a note, the rest is checked.
#[test]
fn regression_check_dir_with_a_json6902_patch_checks_the_rest() {
    let dir = manifests().join("real");
    let out = run(&["check", "--format", "json", dir.to_str().unwrap()], None);
    let err = text(&out.stderr);
    assert_ne!(out.status.code(), Some(64), "{err}");
    assert!(
        err.contains("argocd-redis-ha-statefulset-json6902-patch.yaml:1: document 1 is not a Kubernetes object (it is a sequence), left as it is"),
        "{err}"
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(doc["pod_templates"].as_u64().unwrap() >= 15, "{doc:#}");
}

/// True when `a` is `b` with text taken out: what `b` adds is only insertions.
fn only_inserted(a: &str, b: &str) -> bool {
    let mut rest = b.chars();
    a.chars().all(|c| rest.any(|d| d == c))
}

/// Issue 24 §3: each shape of file a Windows editor, the Kubernetes website or a JSON tool
/// writes is edited in place in its own style: the BOM first, CRLF on every line of a CRLF file,
/// no final newline where there was none, flow documents and empty flow collections in flow
/// style, anchors, aliases and merge keys as written, and inject's text only inserted.
#[test]
fn regression_inject_rewrote_or_restyled_boms_crlf_flow_and_anchors() {
    let dir = manifests().join("faithful");
    let read = |name: &str| std::fs::read_to_string(dir.join(name)).unwrap();
    let injected = |name: &str| inject(&dir.join(name), "native").expect("injectable");
    for file in inputs()
        .into_iter()
        .filter(|f| f.parent().unwrap().ends_with("faithful"))
    {
        let (original, out) = (
            std::fs::read_to_string(&file).unwrap(),
            injected(file.file_name().unwrap().to_str().unwrap()),
        );
        assert!(
            only_inserted(&original, &out),
            "{}: inject changed text of the file, not only inserted:\n{out}",
            file.display()
        );
        assert_eq!(
            original.ends_with('\n'),
            out.ends_with('\n'),
            "{}: the final newline",
            file.display()
        );
    }
    let bom = injected("bom-deployment.yaml");
    assert!(bom.starts_with("\u{feff}apiVersion: apps/v1\n"), "{bom}");
    assert_eq!(bom.matches('\u{feff}').count(), 1);
    let crlf = injected("crlf-daemonset.yaml");
    let lf_only = crlf
        .split_inclusive('\n')
        .filter(|l| !l.ends_with("\r\n"))
        .count();
    assert_eq!(lf_only, 0, "LF-only lines in a CRLF file:\n{crlf}");
    assert!(
        crlf.contains("\r\n        - name: hooklog-shared\r\n"),
        "{crlf}"
    );
    let flow = injected("lifecycle-events-flow.yaml");
    assert!(flow.contains("\n{\n  \"apiVersion\": \"v1\",\n"), "{flow}");
    assert!(
        !flow.lines().any(|l| l.trim_start().starts_with("- ")),
        "a flow document gained block lines:\n{flow}"
    );
    let empty = injected("empty-flow-collections.yaml");
    for kept in [
        "          volumes: [{\"name\": \"hooklog-shared\"",
        "            volumeMounts: [{\"name\": \"hooklog-shared\", \"mountPath\": \"/hooklog\"}, {\"name\": \"hooklog-bin\", \"mountPath\": \"/hooklog-bin\", \"readOnly\": true}]\n",
        "          annotations: {\"hooklog.dev/injected\": ",
    ] {
        assert!(empty.contains(kept), "{kept:?}:\n{empty}");
    }
    let anchors = injected("anchors-merge-keys.yaml");
    for kept in [
        "  labels: &labels\n",
        "    matchLabels: *labels\n",
        "      labels: *labels\n",
        "      - &web\n        name: web\n",
        "        env: &env\n",
        "      - <<: *web\n        name: worker\n",
        "        args: [worker]\n        env: *env\n",
    ] {
        assert!(anchors.contains(kept), "{kept:?}:\n{anchors}");
    }
    for json in ["pod-pretty.json", "deployment-compact.json"] {
        let out = injected(json);
        serde_json::from_str::<serde_json::Value>(&out)
            .unwrap_or_else(|e| panic!("{json} is no longer JSON: {e}\n{out}"));
        assert!(read(json).lines().count() == 1 || out.lines().count() > 20);
    }
    let directives = injected("comments-directives.yaml");
    assert!(directives.starts_with("%YAML 1.1\n--- # the job runner\n"));
    assert!(
        directives.ends_with("...\n# end of the runner\n"),
        "{directives}"
    );
}

/// What inject writes for every shape of file validates as Kubernetes objects.
#[test]
fn inject_output_of_every_file_shape_validates_strictly() {
    validate_injected("faithful", |_| false, 20);
}
