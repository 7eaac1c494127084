//! Pods from the Pod's own schema (issue 36 §1): the v1 Pod's OpenAPI definitions as
//! `kubernetes-validate` ships them (1.30) give every field path of a pod; each case sets one
//! path absent, null, of the wrong JSON type, empty, duplicated, huge or deeply nested, in a
//! realistic pod (as written, or injected before), wrapped in each workload kind. Mutating
//! admission runs before the API server's schema validation, so any of these can reach the
//! webhook. Every case goes through `check`, `inject` and the webhook's review in process, and
//! through the real binary's webhook over TLS (one keep-alive connection, as the API server
//! keeps one); every 20th through the real `hooklog check` and `hooklog inject` too. None may
//! panic, every review is allowed with its uid, and every patch applies.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};

use crate::util::webhook::{Certs, IMAGE, KeepAlive, Webhook, patched, pod_review};
use crate::util::{hooklog, in_ci};

/// The schema's version: the API server tier's (scripts/apiserver.sh) and the oldest whose
/// `matchConditions` the chart uses.
const SCHEMA_VERSION: &str = "v1.30.0-local-strict";
/// Cases in the suite, scripts/test.sh's and CI's alike (about a minute idle, 10 under
/// the suite's load); `HOOKLOG_PROPTEST_CASES=10000` is the local run (1,471 s under
/// load). In CI each run starts at a fresh case, so runs add up to the whole.
const CASES: usize = 500;
/// Deepest a field path is followed into the schema (Pod.spec.affinity...'s longest is 12).
const MAX_DEPTH: usize = 14;
/// One case in this many also runs the real `hooklog check` and `hooklog inject`.
const BINARY_EVERY: usize = 20;

/// One step of a field path.
#[derive(Clone, Debug)]
enum Step {
    Key(String),
    /// An element of an array (one of those there, or a new one).
    Item,
    /// A value of a map (`labels`, `annotations`, `resources.limits`): one there, or `k`.
    AnyKey,
}

/// The field paths of `def` (every node the schema describes), depth-first.
fn fields(defs: &Map<String, Value>, def: &str) -> Vec<Vec<Step>> {
    fn walk(
        defs: &Map<String, Value>,
        s: &Value,
        path: &mut Vec<Step>,
        stack: &mut Vec<String>,
        out: &mut Vec<Vec<Step>>,
    ) {
        if let Some(r) = s["$ref"].as_str() {
            let name = r.rsplit('/').next().unwrap_or(r).to_string();
            if stack.contains(&name) || path.len() > MAX_DEPTH {
                return;
            }
            stack.push(name.clone());
            walk(defs, &defs[&name], path, stack, out);
            stack.pop();
            return;
        }
        if !path.is_empty() {
            out.push(path.clone());
        }
        for (k, v) in s["properties"].as_object().into_iter().flatten() {
            path.push(Step::Key(k.clone()));
            walk(defs, v, path, stack, out);
            path.pop();
        }
        if s["items"].is_object() {
            path.push(Step::Item);
            walk(defs, &s["items"], path, stack, out);
            path.pop();
        }
        if s["additionalProperties"].is_object() {
            path.push(Step::AnyKey);
            walk(defs, &s["additionalProperties"], path, stack, out);
            path.pop();
        }
    }
    let mut out = Vec::new();
    walk(
        defs,
        &json!({"$ref": format!("#/$defs/{def}")}),
        &mut Vec::new(),
        &mut Vec::new(),
        &mut out,
    );
    out
}

/// The schemas' folder in the installed kubernetes-validate.
fn schema_dir() -> PathBuf {
    let out = Command::new("python3")
        .args([
            "-c",
            "import kubernetes_validate, os; print(os.path.dirname(kubernetes_validate.__file__))",
        ])
        .output()
        .expect("python3");
    assert!(
        out.status.success(),
        "kubernetes-validate is not installed (pip install kubernetes-validate; scripts/test.sh does): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
        .join("kubernetes-json-schema")
        .join(SCHEMA_VERSION)
}

/// What a case does at its path.
#[derive(Clone, Copy, Debug)]
enum Mutation {
    Absent,
    Null,
    EmptyString,
    String,
    Zero,
    Negative,
    Int,
    Float,
    Max,
    HugeFloat,
    True,
    False,
    EmptyObject,
    EmptyArray,
    /// An object of the wrong shape: `{"name": 5, "command": null}`.
    WrongObject,
    /// An array of the wrong shapes: `[5, null, "x", {}]`.
    WrongArray,
    /// The array element the path is in, twice (two containers of one name, ...).
    Duplicated,
    /// 200,000 characters.
    HugeString,
    /// 3,000 copies of the value there (or of `"x"`).
    HugeArray,
    /// 100 arrays deep (under serde_json's 128).
    Nested,
    /// 1,000 mappings deep.
    DeepNested,
}

const MUTATIONS: [Mutation; 21] = [
    Mutation::Absent,
    Mutation::Null,
    Mutation::EmptyString,
    Mutation::String,
    Mutation::Zero,
    Mutation::Negative,
    Mutation::Int,
    Mutation::Float,
    Mutation::Max,
    Mutation::HugeFloat,
    Mutation::True,
    Mutation::False,
    Mutation::EmptyObject,
    Mutation::EmptyArray,
    Mutation::WrongObject,
    Mutation::WrongArray,
    Mutation::Duplicated,
    Mutation::HugeString,
    Mutation::HugeArray,
    Mutation::Nested,
    Mutation::DeepNested,
];

fn replacement(m: Mutation, was: Option<&Value>) -> Option<Value> {
    Some(match m {
        Mutation::Absent | Mutation::Duplicated => return None,
        Mutation::Null => Value::Null,
        Mutation::EmptyString => json!(""),
        Mutation::String => json!("x"),
        Mutation::Zero => json!(0),
        Mutation::Negative => json!(-1),
        Mutation::Int => json!(7),
        Mutation::Float => json!(1.5),
        Mutation::Max => json!(u64::MAX),
        Mutation::HugeFloat => json!(1e308),
        Mutation::True => json!(true),
        Mutation::False => json!(false),
        Mutation::EmptyObject => json!({}),
        Mutation::EmptyArray => json!([]),
        Mutation::WrongObject => json!({"name": 5, "command": null, "exec": "x"}),
        Mutation::WrongArray => json!([5, null, "x", {}, []]),
        Mutation::HugeString => json!("9".repeat(200_000)),
        Mutation::HugeArray => {
            let one = was
                .filter(|v| v.to_string().len() < 200)
                .cloned()
                .unwrap_or(json!("x"));
            Value::Array(vec![one; 3_000])
        }
        Mutation::Nested => (0..100).fold(json!(1), |v, _| json!([v])),
        Mutation::DeepNested => (0..1_000).fold(json!(1), |v, _| json!({ "a": v })),
    })
}

/// A small deterministic generator (splitmix64): a case is its index.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        ((z ^ (z >> 31)) % n.max(1) as u64) as usize
    }
}

/// The value at `path`, parents made as needed (a parent of the wrong type replaced); an
/// array's element picked at random, a map's value too.
fn walk_mut<'a>(mut at: &'a mut Value, path: &[Step], rng: &mut Rng) -> &'a mut Value {
    for step in path {
        at = match step {
            Step::Key(k) => {
                if !at.is_object() {
                    *at = json!({});
                }
                let map = at.as_object_mut().unwrap();
                map.entry(k.clone()).or_insert(json!({}))
            }
            Step::AnyKey => {
                if !at.is_object() {
                    *at = json!({});
                }
                let map = at.as_object_mut().unwrap();
                let key = match map.len() {
                    0 => "k".to_string(),
                    n => map.keys().nth(rng.below(n)).unwrap().clone(),
                };
                map.entry(key).or_insert(json!({}))
            }
            Step::Item => {
                let (arr, i) = some_item(at, rng);
                &mut arr[i]
            }
        };
    }
    at
}

/// `at` made an array of at least one element (`{}` when empty), and the index of one drawn.
fn some_item<'a>(at: &'a mut Value, rng: &mut Rng) -> (&'a mut Vec<Value>, usize) {
    if !at.is_array() {
        *at = json!([]);
    }
    let arr = at.as_array_mut().unwrap();
    if arr.is_empty() {
        arr.push(json!({}));
    }
    let i = rng.below(arr.len());
    (arr, i)
}

/// `doc` with `m` at `path`.
fn mutate(doc: &mut Value, path: &[Step], m: Mutation, rng: &mut Rng) {
    if let Mutation::Duplicated = m {
        // The array the path last passes through gets one of its elements again; a path
        // through none duplicates a container.
        let containers = [
            Step::Key("spec".into()),
            Step::Key("containers".into()),
            Step::Item,
        ];
        let path = match path.iter().rposition(|s| matches!(s, Step::Item)) {
            Some(i) => &path[..=i],
            None => &containers[..],
        };
        let arr = walk_mut(doc, &path[..path.len() - 1], rng);
        if !arr.is_array() {
            *arr = json!([]);
        }
        let arr = arr.as_array_mut().unwrap();
        let one = arr.first().cloned().unwrap_or(json!({}));
        let at = rng.below(arr.len() + 1);
        arr.insert(at, one);
        return;
    }
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let at = walk_mut(doc, parents, rng);
    match last {
        Step::Key(_) | Step::AnyKey => {
            if !at.is_object() {
                *at = json!({});
            }
            let map = at.as_object_mut().unwrap();
            let key = match last {
                Step::Key(k) => k.clone(),
                _ => match map.len() {
                    0 => "k".to_string(),
                    n => map.keys().nth(rng.below(n)).unwrap().clone(),
                },
            };
            let was = map.get(&key).cloned();
            match replacement(m, was.as_ref()) {
                Some(v) => {
                    map.insert(key, v);
                }
                None => {
                    map.shift_remove(&key);
                }
            }
        }
        Step::Item => {
            let (arr, i) = some_item(at, rng);
            let was = arr[i].clone();
            match replacement(m, Some(&was)) {
                Some(v) => arr[i] = v,
                None => {
                    arr.remove(i);
                }
            }
        }
    }
}

/// The workload kinds a pod template stands in, and where.
const KINDS: [(&str, &str, &str); 7] = [
    ("v1", "Pod", ""),
    ("apps/v1", "Deployment", "/spec/template"),
    ("apps/v1", "StatefulSet", "/spec/template"),
    ("apps/v1", "DaemonSet", "/spec/template"),
    ("apps/v1", "ReplicaSet", "/spec/template"),
    ("batch/v1", "Job", "/spec/template"),
    ("batch/v1", "CronJob", "/spec/jobTemplate/spec/template"),
];

/// A pod as people write them: an init container, two containers with an exec and a sleep
/// preStop, env, a mount, a volume, the opt-in annotation.
fn written_pod() -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "web",
            "namespace": "shop",
            "labels": {"app": "web"},
            "annotations": {"hooklog.dev/inject": "enabled"}
        },
        "spec": {
            "terminationGracePeriodSeconds": 60,
            "initContainers": [{"name": "init", "image": "busybox", "command": ["sh", "-c", "true"]}],
            "containers": [
                {
                    "name": "app",
                    "image": "nginx:1.27",
                    "env": [{"name": "MODE", "value": "prod"}],
                    "ports": [{"containerPort": 80, "protocol": "TCP"}],
                    "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                    "lifecycle": {"preStop": {"exec": {"command": ["sh", "-c", "sleep 5; nginx -s quit"]}}}
                },
                {
                    "name": "envoy",
                    "image": "envoyproxy/envoy:v1.31.0",
                    "lifecycle": {"preStop": {"sleep": {"seconds": 5}}, "postStart": {"exec": {"command": ["true"]}}}
                }
            ],
            "volumes": [{"name": "data", "emptyDir": {}}]
        }
    })
}

/// The bases a case mutates: the pod as written, and as `hooklog inject` made it (native and
/// classic), so a mutation reaches the wiring of a pod injected before (the reinvocation).
fn bases() -> Vec<(&'static str, Value)> {
    let written = written_pod();
    vec![
        (
            "injected native",
            crate::util::webhook::injected(&written, &["--sidecar", "native"]),
        ),
        (
            "injected classic",
            crate::util::webhook::injected(&written, &["--sidecar", "classic"]),
        ),
        ("written", written),
    ]
}

/// `pod` as the template of `kind` (a Pod as itself).
fn wrap(pod: &Value, kind: usize) -> Value {
    let (api, kind, at) = KINDS[kind];
    if at.is_empty() {
        return pod.clone();
    }
    let mut doc =
        json!({"apiVersion": api, "kind": kind, "metadata": {"name": "w", "namespace": "shop"}});
    let mut template = Map::new();
    for k in ["metadata", "spec"] {
        if let Some(v) = pod.get(k) {
            template.insert(k.into(), v.clone());
        }
    }
    let parts: Vec<&str> = at.split('/').skip(1).collect();
    let mut v = &mut doc;
    for p in &parts {
        v = v
            .as_object_mut()
            .unwrap()
            .entry(p.to_string())
            .or_insert(json!({}));
    }
    *v = Value::Object(template);
    doc
}

/// One case's document, by index: its path, mutation, kind and base, and what it is.
struct Case {
    doc: Value,
    pod: Value,
    kind: usize,
    what: String,
}

fn case(i: usize, paths: &[Vec<Step>], bases: &[(&str, Value)]) -> (Case, usize, usize) {
    let mut rng = Rng(i as u64);
    // Every path in turn; the rest drawn.
    let p = i % paths.len();
    let m = rng.below(MUTATIONS.len());
    let kind = rng.below(KINDS.len());
    // The pod as written half the time: the one a CREATE patches.
    let b = rng.below(2 * bases.len()).min(bases.len() - 1);
    let mut pod = bases[b].1.clone();
    mutate(&mut pod, &paths[p], MUTATIONS[m], &mut rng);
    let what = format!(
        "case {i}: {:?} at {} of a {} pod, in a {}",
        MUTATIONS[m],
        paths[p]
            .iter()
            .map(|s| match s {
                Step::Key(k) => k.as_str(),
                Step::Item => "[]",
                Step::AnyKey => "*",
            })
            .collect::<Vec<_>>()
            .join("."),
        bases[b].0,
        KINDS[kind].1
    );
    let doc = wrap(&pod, kind);
    (
        Case {
            doc,
            pod,
            kind,
            what,
        },
        p,
        m,
    )
}

/// What the lib does with the case, in process: check, inject (native and classic) and the
/// webhook's review of the pod (or the workload). A panic is caught and named.
fn in_process(c: &Case) -> Result<(), String> {
    use hooklog::manifest::{budget::SidecarMode, check, inject, load};
    use hooklog::webhook::review::{self, Policy, Scope};
    let text = serde_json::to_string(&c.doc).unwrap();
    std::panic::catch_unwind(|| {
        if let Ok(source) = load::parse("case.yaml", text.clone()) {
            check::check(&[source], &check::Options::default());
        }
        for mode in [SidecarMode::Native, SidecarMode::Classic] {
            let opts = inject::Options {
                image: IMAGE.into(),
                mode,
                prestop_sleep: vec![("envoy".into(), "5s".into())],
                events: true,
                settings: Default::default(),
            };
            let _ = inject::inject(&mut c.doc.clone(), &opts);
            let policy = Policy {
                inject: opts,
                own_namespace: Some("hooklog".into()),
                namespaces: Default::default(),
            };
            for workload in [false, c.kind != 0] {
                let body = review_of(c, "uid-1", workload);
                let r = review::review(&body, Scope::NamespaceEnabled, &policy);
                assert_eq!(r.response["response"]["allowed"], true);
                assert_eq!(r.response["response"]["uid"], "uid-1");
            }
        }
    })
    .map_err(|e| {
        e.downcast_ref::<String>()
            .cloned()
            .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default()
    })
}

/// The case's AdmissionReview: the pod's, or the workload's (as the workload webhook sees it).
fn review_of(c: &Case, uid: &str, workload: bool) -> Vec<u8> {
    let mut r: Value = serde_json::from_slice(&pod_review(uid, "shop", &json!({}))).unwrap();
    r["request"]["object"] = reviewed(c, workload);
    if workload {
        let (api, kind, _) = KINDS[c.kind];
        let (group, version) = api.split_once('/').unwrap_or(("", api));
        r["request"]["kind"] = json!({"group": group, "version": version, "kind": kind});
    }
    r.to_string().into_bytes()
}

/// The object the case's review holds: the pod (without a status: a CREATE has none), or the
/// workload.
fn reviewed(c: &Case, workload: bool) -> Value {
    if workload {
        return c.doc.clone();
    }
    let mut pod = c.pod.clone();
    if let Some(m) = pod.as_object_mut() {
        m.remove("status");
    }
    pod
}

/// The real `hooklog check -` and `hooklog inject -` on the case: no panic (exit 101, or a
/// signal with the release profile's abort), whatever they make of it.
fn binary(c: &Case) -> Result<(), String> {
    let text = serde_json::to_string(&c.doc).unwrap();
    for args in [
        &["check", "-"][..],
        &["inject", "--image", IMAGE, "-"][..],
        &["inject", "--image", IMAGE, "--sidecar", "classic", "-"][..],
    ] {
        let mut child = hooklog()
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let writer = {
            let text = text.clone();
            std::thread::spawn(move || {
                // The binary may stop reading at an error: what it did not read is its business.
                let _ = stdin.write_all(text.as_bytes());
            })
        };
        let out = child.wait_with_output().unwrap();
        let _ = writer.join();
        let stderr = String::from_utf8_lossy(&out.stderr);
        if out.status.code().is_none_or(|c| c == 101) || stderr.contains("panicked") {
            return Err(format!(
                "hooklog {}: {:?}\n{stderr}",
                args.join(" "),
                out.status
            ));
        }
    }
    Ok(())
}

/// The case's review (the pod's, or the workload's) through the real webhook on `conn`: a 200,
/// allowed, with its uid, its patch (if any) applying. Whether it was patched.
fn over_tls(
    conn: &mut KeepAlive,
    webhook: &Webhook,
    certs: &Certs,
    c: &Case,
    uid: &str,
    workload: bool,
) -> Result<bool, String> {
    let body = review_of(c, uid, workload);
    let path = "/mutate/namespace-enabled";
    let (status, bytes, keep) = match conn.post(path, &body) {
        Ok(a) => a,
        Err(_) => {
            // A connection the server closed between requests (an answer with Connection:
            // close is read whole): once more on a new one, then it is the webhook's failure.
            *conn = KeepAlive::open(webhook.port, &certs.ca_pem);
            conn.post(path, &body).map_err(|e| e.to_string())?
        }
    };
    if !keep {
        *conn = KeepAlive::open(webhook.port, &certs.ca_pem);
    }
    let review: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    if status != 200 || review["response"]["allowed"] != true || review["response"]["uid"] != uid {
        return Err(format!(
            "answered {status}: {}",
            String::from_utf8_lossy(&bytes[..bytes.len().min(400)])
        ));
    }
    if !review["response"]["patch"].is_string() {
        return Ok(false);
    }
    let object = reviewed(c, workload);
    std::panic::catch_unwind(|| patched(&object, &review))
        .map_err(|e| format!("the patch does not apply: {e:?}"))?;
    Ok(true)
}

/// Every mutation at every path of the Pod's schema, in every workload kind, through check,
/// inject and the webhook (in process and the real binary over TLS): no panic, every review
/// allowed with its uid, every patch applies. Prints its reach.
#[test]
fn schema_hostile_pods_never_panic() {
    // The test's own copies and drops of 1,000-deep values recurse (a debug build's frames are
    // large): its thread has room; the binary's are what is tested.
    std::thread::Builder::new()
        .stack_size(512 << 20)
        .spawn(run_schema_hostile_pods)
        .unwrap()
        .join()
        .unwrap();
}

fn run_schema_hostile_pods() {
    let dir = schema_dir();
    let all: Value =
        serde_json::from_slice(&std::fs::read(dir.join("_definitions.json")).unwrap()).unwrap();
    let defs = all["$defs"].as_object().unwrap();
    let paths = fields(defs, "io.k8s.api.core.v1.Pod");
    assert!(paths.len() > 1_000, "{} paths", paths.len());
    let bases = bases();
    let cases = std::env::var("HOOKLOG_PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(CASES);

    let tmp = tempfile::tempdir().unwrap();
    let certs = Certs::make(tmp.path(), "schema-pods-ca");
    let mut webhook = Webhook::start(&certs, &["--sidecar", "native"]);
    let mut conn = KeepAlive::open(webhook.port, &certs.ca_pem);

    let started = Instant::now();
    let mut failures = Vec::new();
    let (mut seen_paths, mut seen_mutations, mut seen_kinds) = (
        vec![false; paths.len()],
        [false; MUTATIONS.len()],
        [false; KINDS.len()],
    );
    let (mut patched_count, mut binary_runs) = (0usize, 0usize);
    // A case is its index: `HOOKLOG_SCHEMA_FIRST=N HOOKLOG_PROPTEST_CASES=1` runs case N again
    // (`HOOKLOG_SCHEMA_TRACE` prints each case before it runs). CI's cases start at a fresh
    // index each run, so that its runs together reach every path; locally from 0.
    let first: usize = std::env::var("HOOKLOG_SCHEMA_FIRST")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| {
            if in_ci() {
                let nanos = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.subsec_nanos());
                nanos as usize % 1_000_000
            } else {
                0
            }
        });
    eprintln!(
        "schema_hostile_pods_never_panic: cases {first} to {}",
        first + cases - 1
    );
    let mut slowest: Vec<(Duration, String)> = Vec::new();
    for i in first..first + cases {
        let case_started = Instant::now();
        let (c, p, m) = case(i, &paths, &bases);
        seen_paths[p] = true;
        seen_mutations[m] = true;
        seen_kinds[c.kind] = true;
        if std::env::var_os("HOOKLOG_SCHEMA_TRACE").is_some() {
            eprintln!("{}", c.what);
        }
        if let Err(e) = in_process(&c) {
            failures.push(format!("{}: in process: {e}", c.what));
        }
        for workload in [false, true] {
            if workload && c.kind == 0 {
                continue;
            }
            let uid = format!("uid-{i}-{workload}");
            match over_tls(&mut conn, &webhook, &certs, &c, &uid, workload) {
                Ok(true) => patched_count += 1,
                Ok(false) => {}
                Err(e) => failures.push(format!("{}: webhook: {e}", c.what)),
            }
        }
        if webhook.child.try_wait().unwrap().is_some() {
            failures.push(format!("the webhook died: {:#?}", webhook.log()));
            break;
        }
        if i % BINARY_EVERY == 0 {
            binary_runs += 1;
            if let Err(e) = binary(&c) {
                failures.push(format!("{}: {e}", c.what));
            }
        }
        slowest.push((case_started.elapsed(), c.what.clone()));
        if failures.len() >= 20 {
            break;
        }
    }
    slowest.sort();
    for (t, what) in slowest.iter().rev().take(3) {
        eprintln!("slowest: {t:.1?} {what}");
    }
    let took = started.elapsed();
    eprintln!(
        "property schema_hostile_pods_never_panic: {cases} cases in {took:.1?}: {} of {} Pod schema paths ({SCHEMA_VERSION}), {} of {} mutations, {} of {} kinds, {} bases; {patched_count} reviews patched, {binary_runs} cases through the binary's check and inject",
        seen_paths.iter().filter(|s| **s).count(),
        paths.len(),
        seen_mutations.iter().filter(|s| **s).count(),
        MUTATIONS.len(),
        seen_kinds.iter().filter(|s| **s).count(),
        KINDS.len(),
        bases.len(),
    );
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(
        webhook.child.try_wait().unwrap().is_none(),
        "the webhook exited"
    );
    // Reach: a run of more than a handful of cases gets past inject's early exits to a patch
    // (6,364 of 10,000 here).
    assert!(
        cases < 100 || patched_count > cases / 4,
        "too few reviews reached inject's patch: {patched_count}"
    );
}
