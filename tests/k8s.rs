//! The shipped manifests in k8s/: strict schema validation against every Kubernetes version the
//! installed `kubernetes-validate` knows from 1.29 on; every hooklog command line in them parsed
//! and validated by hooklog's own parser, with the shutdown budget checked; Fargate's Fluent Bit
//! configuration applied to real hooklog output by a simulation of Fluent Bit (no Fluent Bit
//! here: `through_fluent_bit` reads the ConfigMap's own parsers and filters and applies them, with
//! Python's `re` for Onigmo); the CloudWatch query's filters and the alarm's metric filter
//! evaluated on the records hooklog really writes; the IAM files' scope.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use clap::{CommandFactory, Parser};
use hooklog::cli::{Cli, Command as Sub, HookArgs, Output, RunArgs};
use hooklog::manifest::budget::{self, SidecarMode};
use serde_json::{Value, json};

use crate::util::manifests::{documents, validate_strictly, validator_versions};
use crate::util::{Daemon, POD_ENV, hooklog_bin, output_with_input, wait_until};

/// Fargate's limit on the aws-logging ConfigMap
/// (<https://docs.aws.amazon.com/eks/latest/userguide/fargate-logging.html>).
const FARGATE_CONFIGMAP_MAX_CHARS: usize = 5300;
/// Filters Fargate's log router accepts (same page).
const FARGATE_FILTERS: [&str; 8] = [
    "grep",
    "parser",
    "record_modifier",
    "rewrite_tag",
    "throttle",
    "nest",
    "modify",
    "kubernetes",
];
/// Outputs Fargate's log router accepts (same page).
const FARGATE_OUTPUTS: [&str; 6] = [
    "es",
    "firehose",
    "kinesis_firehose",
    "cloudwatch",
    "cloudwatch_logs",
    "kinesis",
];

fn k8s_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("k8s")
}

/// Every file directly in k8s/ (the manifests); sub-folders hold AWS-side files.
fn manifests() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(k8s_dir())
        .expect("read k8s/")
        .map(|e| e.expect("k8s/ entry").path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    assert!(
        files.len() >= 4,
        "expected the manifests in k8s/, found {files:?}"
    );
    for f in &files {
        assert!(
            f.extension().is_some_and(|e| e == "yaml"),
            "{} is in k8s/ but is not a .yaml manifest: every file there is validated",
            f.display()
        );
    }
    files
}

#[test]
fn every_manifest_validates_strictly_from_1_29_to_the_newest_schema() {
    every_resource_passes(&manifests());
}

/// [`validate_strictly`], and every resource in `files` passed for every version (none left
/// unread).
fn every_resource_passes(files: &[PathBuf]) {
    let stdout = validate_strictly(files);
    let versions = validator_versions();
    let resources: usize = files.iter().map(|f| documents(f).len()).sum();
    let passed = stdout.lines().filter(|l| l.contains(" passed ")).count();
    assert_eq!(
        passed,
        resources * versions.len(),
        "each of {resources} resources must pass for each of {versions:?}:\n{stdout}"
    );
}

/// A hooklog command line found in a manifest.
struct Found {
    file: String,
    /// Pod spec's terminationGracePeriodSeconds.
    grace_period: u64,
    /// Whether it runs as a native sidecar (an init container with restartPolicy Always).
    native_sidecar: bool,
    argv: Vec<String>,
}

/// Every hooklog invocation in the pod templates: the hooklog image's containers (ENTRYPOINT
/// /usr/local/bin/hooklog), exec hooks calling .../hooklog, and hooklog commands a hook wraps.
fn hooklog_commands() -> (Vec<Found>, BTreeSet<String>) {
    let mut found = Vec::new();
    let mut env_names = BTreeSet::new();
    for file in manifests() {
        for doc in documents(&file) {
            let Some(spec) = doc.pointer("/spec/template/spec") else {
                continue;
            };
            let grace_period = spec["terminationGracePeriodSeconds"].as_u64().unwrap_or(30);
            let name = file.file_name().unwrap().to_string_lossy().to_string();
            let init = spec["initContainers"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            let main = spec["containers"].as_array().cloned().unwrap_or_default();
            for (is_init, c) in init
                .iter()
                .map(|c| (true, c))
                .chain(main.iter().map(|c| (false, c)))
            {
                for e in c["env"].as_array().into_iter().flatten() {
                    env_names.insert(e["name"].as_str().unwrap().to_string());
                }
                let strings = |v: &Value| -> Vec<String> {
                    v.as_array()
                        .map(|a| {
                            a.iter()
                                .map(|s| s.as_str().expect("string arg").to_string())
                                .collect()
                        })
                        .unwrap_or_default()
                };
                let native_sidecar = is_init && c["restartPolicy"] == "Always";
                let mut push = |argv: Vec<String>| {
                    found.push(Found {
                        file: name.clone(),
                        grace_period,
                        native_sidecar,
                        argv,
                    })
                };
                let image = c["image"].as_str().unwrap_or_default();
                if image.contains("/hooklog:") || image.contains("/hooklog-sidecar:") {
                    let mut argv = vec!["/usr/local/bin/hooklog".to_string()];
                    argv.extend(strings(&c["command"]));
                    argv.extend(strings(&c["args"]));
                    push(argv);
                }
                for hook in ["preStop", "postStart"] {
                    let cmd = strings(&c["lifecycle"][hook]["exec"]["command"]);
                    if cmd.first().is_some_and(|p| p.ends_with("/hooklog")) {
                        if let Some(i) = cmd.iter().position(|a| a == "--")
                            && cmd.get(i + 1).is_some_and(|p| p.ends_with("/hooklog"))
                        {
                            push(cmd[i + 1..].to_vec());
                        }
                        push(cmd);
                    }
                }
            }
        }
    }
    (found, env_names)
}

/// Environment variable names hooklog reads, from its own command definition.
fn hooklog_env_names() -> BTreeSet<String> {
    fn walk(cmd: &clap::Command, out: &mut BTreeSet<String>) {
        for a in cmd.get_arguments() {
            if let Some(e) = a.get_env() {
                out.insert(e.to_string_lossy().to_string());
            }
        }
        for s in cmd.get_subcommands() {
            walk(s, out);
        }
    }
    let mut out = BTreeSet::new();
    walk(&Cli::command(), &mut out);
    out
}

/// Validates a `run` command as the daemon would, with the pod's paths moved under `root`.
fn validate_run(argv: &[String], root: &Path) -> Result<(), String> {
    let moved: Vec<OsString> = argv
        .iter()
        .map(|a| {
            let mut s = a.clone();
            for prefix in ["/hooklog/", "/etc/podinfo"] {
                if let Some(rest) = a.strip_prefix(prefix) {
                    s = format!("{}{prefix}{rest}", root.display());
                }
            }
            OsString::from(s)
        })
        .collect();
    let cli = Cli::try_parse_from(&moved).map_err(|e| e.to_string())?;
    let Sub::Run(args) = cli.command else {
        unreachable!("checked by the caller")
    };
    // EKS's IRSA sets AWS_REGION in the pod (docs/cloudwatch.md), as the direct variant's
    // service account gets it.
    let eks = |k: &str| (k == "AWS_REGION").then(|| "eu-west-1".to_string());
    hooklog::config::RunConfig::from_args_in(args, eks)
        .map(drop)
        .map_err(|e| e.to_string())
}

#[test]
fn every_hooklog_command_in_the_manifests_is_one_hooklog_accepts() {
    let (found, env_names) = hooklog_commands();
    let known_env = hooklog_env_names();
    for name in env_names.iter().filter(|n| n.starts_with("HOOKLOG_")) {
        assert!(
            known_env.contains(name),
            "the manifests set {name}, which hooklog does not read"
        );
    }

    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(root.path().join("hooklog")).unwrap();
    crate::util::podinfo::write(
        &root.path().join("etc/podinfo"),
        "app=\"api-server\"\n",
        "team=\"payments\"\n",
    );

    // Per file: the run command, the hooks, what else was seen.
    let mut runs: BTreeMap<String, Vec<(RunArgs, bool, u64)>> = BTreeMap::new();
    let mut hooks: BTreeMap<String, Vec<HookArgs>> = BTreeMap::new();
    let mut kinds: BTreeMap<String, BTreeSet<&'static str>> = BTreeMap::new();
    for f in &found {
        let cli = Cli::try_parse_from(&f.argv)
            .unwrap_or_else(|e| panic!("{}: hooklog rejects {:?}:\n{e}", f.file, f.argv));
        let kind = match cli.command {
            Sub::Run(args) => {
                validate_run(&f.argv, root.path())
                    .unwrap_or_else(|e| panic!("{}: {:?}: {e}", f.file, f.argv));
                runs.entry(f.file.clone()).or_default().push((
                    args,
                    f.native_sidecar,
                    f.grace_period,
                ));
                "run"
            }
            Sub::Hook(args) => {
                hooks.entry(f.file.clone()).or_default().push(args);
                "hook"
            }
            Sub::Sleep(_) => "sleep",
            Sub::Install(_) => "install",
            Sub::Emit(_) => "emit",
            Sub::Check(_) | Sub::Inject(_) | Sub::Uninject(_) => "manifest",
            Sub::Webhook(_) => "webhook",
        };
        kinds.entry(f.file.clone()).or_default().insert(kind);
    }

    let deployments: Vec<&String> = kinds.keys().collect();
    assert!(
        deployments.len() >= 3,
        "expected three deployments with hooklog, found {deployments:?}"
    );
    for (file, k) in &kinds {
        for want in ["install", "run", "hook", "sleep"] {
            assert!(
                k.contains(want),
                "{file}: no `hooklog {want}` found ({k:?})"
            );
        }
        let [(run, native, grace_period)] = runs[file].as_slice() else {
            panic!("{file}: expected exactly one `hooklog run`")
        };
        let hooks = &hooks[file];
        // Every hook reaches the daemon, and the daemon waits for exactly these containers.
        let hook_containers: BTreeSet<&str> = hooks.iter().map(|h| h.container.as_str()).collect();
        let peers: BTreeSet<&str> = run.peers.iter().map(String::as_str).collect();
        assert_eq!(
            peers, hook_containers,
            "{file}: --peers must name the containers with hooks"
        );
        for h in hooks {
            let socket = h.socket.as_ref().expect("hooks report to the socket");
            assert!(
                run.sockets.contains(socket),
                "{file}: {} reports to {socket:?}, not served",
                h.container
            );
            let hook_file = h.file.as_ref().expect("hooks fall back to the file");
            assert!(
                run.files.contains(hook_file),
                "{file}: {} falls back to {hook_file:?}, not followed",
                h.container
            );
            assert!(
                h.timeout.is_some(),
                "{file}: {}'s hook has no --timeout",
                h.container
            );
        }
        // The shutdown budget: hooklog must print its summary before the kubelet's SIGKILL.
        // A native sidecar says so: it is signalled after its peers are gone, perhaps with only
        // the kubelet's 2-second window left, and must not wait for them then.
        assert_eq!(
            run.native_sidecar, *native,
            "{file}: --native-sidecar must be given exactly when hooklog runs as a native sidecar"
        );
        // The inequalities are the ones `hooklog check` uses (docs/fargate.md).
        let longest_hook = hooks.iter().filter_map(|h| h.timeout).max().unwrap();
        let kill_at = Duration::from_secs(*grace_period);
        let mode = if *native {
            // The sidecar gets SIGTERM only after the app containers ended (hooks, then shutdown).
            SidecarMode::Native
        } else {
            // A regular container gets SIGTERM at once and waits for the hooks itself.
            SidecarMode::Classic
        };
        let broken = budget::check(mode, longest_hook, run.grace, kill_at);
        assert!(
            broken.is_empty(),
            "{file}: the {mode:?} sidecar's shutdown budget does not hold: {broken:?}"
        );
        if run.outputs.contains(&Output::Cloudwatch) {
            assert!(
                run.log_group.is_some(),
                "{file}: --output cloudwatch without --log-group"
            );
        }
    }
    assert!(
        runs.values()
            .flatten()
            .any(|(r, _, _)| r.outputs == vec![Output::Cloudwatch]),
        "the direct CloudWatch variant must run with --output cloudwatch"
    );
}

/// One `[SECTION]` of a Fluent Bit classic config: its name and its keys (lowercased).
type Section = (String, BTreeMap<String, String>);

fn fluent_sections(text: &str) -> Vec<Section> {
    let mut out: Vec<Section> = Vec::new();
    for line in text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
    {
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            out.push((name.to_uppercase(), BTreeMap::new()));
        } else {
            let (k, v) = line.split_once(char::is_whitespace).expect("key value");
            let section = out.last_mut().expect("a key before any [SECTION]");
            section.1.insert(k.to_lowercase(), v.trim().to_string());
        }
    }
    out
}

/// Fluent Bit's Match: `*` matches any run of characters.
fn glob_match(pattern: &str, s: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == s,
        Some((head, rest)) => {
            let Some(s) = s.strip_prefix(head) else {
                return false;
            };
            (0..=s.len()).any(|i| s.is_char_boundary(i) && glob_match(rest, &s[i..]))
        }
    }
}

fn on(section: &BTreeMap<String, String>, key: &str) -> bool {
    section
        .get(key)
        .is_some_and(|v| v.eq_ignore_ascii_case("on") || v.eq_ignore_ascii_case("true"))
}

/// Applies the named regex parsers (Onigmo syntax; Python's `re` spells named groups `(?P<`)
/// to `lines`; None where a line does not match.
fn regex_captures(regex: &str, lines: &[String]) -> Vec<Option<BTreeMap<String, String>>> {
    let py_regex = regex.replace("(?<", "(?P<");
    let input = serde_json::to_string(lines).expect("lines as JSON");
    let out = python_stdin(
        "import sys, re, json\nr = re.compile(sys.argv[1])\nlines = json.load(sys.stdin)\n\
         print(json.dumps([(m.groupdict() if m else None) for m in map(r.match, lines)]))",
        &[&py_regex],
        &input,
    );
    serde_json::from_str(&out).expect("captures as JSON")
}

/// Runs a python script that reads JSON on stdin.
fn python_stdin(script: &str, args: &[&str], input: &str) -> String {
    let out = output_with_input(
        Command::new("python3").arg("-c").arg(script).args(args),
        input.as_bytes(),
    );
    assert!(
        out.status.success(),
        "python3 failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The aws-logging ConfigMap's data.
fn aws_logging() -> BTreeMap<String, String> {
    let docs = documents(&k8s_dir().join("aws-observability.yaml"));
    let cm = docs
        .iter()
        .find(|d| d["kind"] == "ConfigMap" && d["metadata"]["name"] == "aws-logging")
        .expect("the aws-logging ConfigMap");
    assert_eq!(cm["metadata"]["namespace"], "aws-observability");
    let ns = docs
        .iter()
        .find(|d| d["kind"] == "Namespace")
        .expect("the aws-observability Namespace");
    assert_eq!(
        ns["metadata"]["labels"]["aws-observability"], "enabled",
        "Fargate requires this label"
    );
    serde_json::from_value(cm["data"].clone()).expect("string data")
}

#[test]
fn aws_logging_configmap_uses_only_what_fargate_accepts() {
    assert_fargate_accepts(&aws_logging());
}

/// Fargate's rules for an aws-logging ConfigMap's data (the page FARGATE_FILTERS cites).
fn assert_fargate_accepts(data: &BTreeMap<String, String>) {
    let chars: usize = data
        .iter()
        .map(|(k, v)| k.chars().count() + v.chars().count())
        .sum();
    assert!(
        chars <= FARGATE_CONFIGMAP_MAX_CHARS,
        "{chars} characters, Fargate takes {FARGATE_CONFIGMAP_MAX_CHARS}"
    );
    for (key, section, required) in [
        ("filters.conf", "FILTER", ["name", "match"]),
        ("output.conf", "OUTPUT", ["name", "match"]),
        ("parsers.conf", "PARSER", ["name", "format"]),
    ] {
        let text = data.get(key).unwrap_or_else(|| panic!("{key} is missing"));
        assert!(
            !text.contains("${"),
            "{key}: Fargate refuses environment variables"
        );
        let sections = fluent_sections(text);
        assert!(!sections.is_empty(), "{key} is empty");
        for (name, keys) in &sections {
            assert_eq!(name, section, "{key} may only hold [{section}]");
            for r in required {
                assert!(
                    keys.contains_key(r),
                    "{key}: [{section}] without {r}: {keys:?}"
                );
            }
            if section == "FILTER" {
                assert!(
                    FARGATE_FILTERS.contains(&keys["name"].as_str()),
                    "filter {} is refused",
                    keys["name"]
                );
                for k in [
                    "kube_url",
                    "kube_ca_file",
                    "kube_token_command",
                    "kube_token_file",
                ] {
                    assert!(!keys.contains_key(k), "{k} is Fargate's to set");
                }
            }
            if section == "OUTPUT" {
                assert!(
                    FARGATE_OUTPUTS.contains(&keys["name"].as_str()),
                    "output {} is refused",
                    keys["name"]
                );
            }
        }
    }
    for k in data.keys() {
        assert!(
            ["filters.conf", "output.conf", "parsers.conf", "flb_log_cw"].contains(&k.as_str()),
            "unknown aws-logging key {k}"
        );
    }
}

/// Metadata the kubernetes filter attaches to the lines a pod's hooklog container prints.
fn sidecar_metadata() -> Value {
    json!({
        "pod_name": POD_ENV[0].1, "namespace_name": POD_ENV[1].1, "pod_id": POD_ENV[2].1,
        "host": POD_ENV[4].1, "container_name": "hooklog",
        "docker_id": "4f1c2d", "container_image": "hooklog:0.1.0", "labels": {"app": "api-server"}
    })
}

/// Applies the aws-logging filters, in order, to the lines hooklog printed, as Fargate's Fluent
/// Bit sees them: CRI lines in the hooklog container's log file, tagged `kube.<path>`.
fn through_fluent_bit(lines: &[String]) -> Vec<Value> {
    through_fluent_bit_with(&aws_logging(), lines)
}

/// [`through_fluent_bit`] with the ConfigMap data `data`.
fn through_fluent_bit_with(data: &BTreeMap<String, String>, lines: &[String]) -> Vec<Value> {
    let parsers: BTreeMap<String, BTreeMap<String, String>> =
        fluent_sections(&data["parsers.conf"])
            .into_iter()
            .map(|(_, k)| (k["name"].clone(), k))
            .collect();
    let tag = format!(
        "kube.var.log.containers.{}_{}_hooklog-4f1c2d.log",
        POD_ENV[0].1, POD_ENV[1].1
    );
    let outputs = fluent_sections(&data["output.conf"]);
    assert!(
        outputs.iter().any(|(_, o)| glob_match(&o["match"], &tag)),
        "no output matches hooklog's tag {tag}"
    );
    let mut records: Vec<serde_json::Map<String, Value>> = lines
        .iter()
        .map(|l| {
            let mut m = serde_json::Map::new();
            m.insert(
                "log".into(),
                json!(format!("2026-11-30T01:10:37.728123456+00:00 stdout F {l}")),
            );
            m
        })
        .collect();
    for (_, filter) in fluent_sections(&data["filters.conf"]) {
        if !glob_match(&filter["match"], &tag) {
            continue;
        }
        match filter["name"].as_str() {
            "parser" => {
                let key = filter["key_name"].to_string();
                let parser = &parsers[&filter["parser"]];
                let raw: Vec<String> = records
                    .iter()
                    .map(|r| {
                        r[&key]
                            .as_str()
                            .expect("the key holds a string")
                            .to_string()
                    })
                    .collect();
                let parsed: Vec<Option<serde_json::Map<String, Value>>> =
                    match parser["format"].as_str() {
                        "regex" | "Regex" => regex_captures(&parser["regex"], &raw)
                            .into_iter()
                            .map(|c| c.map(|c| c.into_iter().map(|(k, v)| (k, json!(v))).collect()))
                            .collect(),
                        "json" => raw.iter().map(|s| serde_json::from_str(s).ok()).collect(),
                        other => panic!("the simulation does not model parser format {other}"),
                    };
                for (r, p) in records.iter_mut().zip(parsed) {
                    let Some(mut p) = p else { continue }; // a failed parse leaves the record
                    if let Some(tk) = parser.get("time_key")
                        && !on(parser, "time_keep")
                    {
                        p.remove(tk);
                    }
                    let mut new = if on(&filter, "reserve_data") {
                        r.clone()
                    } else {
                        Default::default()
                    };
                    if !on(&filter, "preserve_key") {
                        new.remove(&key);
                    }
                    new.extend(p);
                    *r = new;
                }
            }
            "kubernetes" => {
                for r in records.iter_mut() {
                    if on(&filter, "merge_log")
                        && let Some(Value::String(log)) = r.get("log")
                        && let Ok(Value::Object(fields)) = serde_json::from_str::<Value>(log)
                    {
                        match filter.get("merge_log_key") {
                            Some(k) => {
                                r.insert(k.clone(), Value::Object(fields));
                            }
                            None => r.extend(fields),
                        }
                        if !on(&filter, "keep_log") {
                            r.remove("log");
                        }
                    }
                    // The filter's own map, for the container that printed the line.
                    r.insert("kubernetes".into(), sidecar_metadata());
                }
            }
            // grep: `Regex KEY RE` keeps the records whose KEY matches (a record without KEY
            // does not), `Exclude KEY RE` drops those whose KEY matches.
            "grep" => {
                for (mode, keep_on_match) in [("regex", true), ("exclude", false)] {
                    let Some(rule) = filter.get(mode) else {
                        continue;
                    };
                    let (key, re) = rule.split_once(char::is_whitespace).expect("KEY REGEX");
                    let values: Vec<String> = records
                        .iter()
                        .map(|r| r.get(key).and_then(Value::as_str).unwrap_or("").to_string())
                        .collect();
                    let matched = regex_captures(&format!("(?:{})", re.trim()), &values);
                    let keep: Vec<bool> = matched
                        .into_iter()
                        .zip(&records)
                        .map(|(m, r)| (r.get(key).is_some() && m.is_some()) == keep_on_match)
                        .collect();
                    let mut keep = keep.into_iter();
                    records.retain(|_| keep.next().unwrap_or(true));
                }
            }
            // modify: `Add KEY VALUE` sets KEY when the record has none.
            "modify" => {
                for r in records.iter_mut() {
                    if let Some(add) = filter.get("add") {
                        let (k, v) = add.split_once(char::is_whitespace).expect("KEY VALUE");
                        r.entry(k.to_string()).or_insert(json!(v.trim()));
                    }
                }
            }
            other => panic!("the simulation does not model filter {other}: extend it"),
        }
    }
    records.into_iter().map(Value::Object).collect()
}

/// k8s/aws/merge-aws-logging.py of the ConfigMap `configmap`: the ConfigMap it prints.
fn merged_aws_logging(configmap: &Value) -> Result<Value, String> {
    let out = crate::util::output_with_input(
        Command::new("python3").arg(k8s_dir().join("aws/merge-aws-logging.py")),
        configmap.to_string().as_bytes(),
    );
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    Ok(serde_json::from_slice(&out.stdout).expect("the script prints JSON"))
}

fn data_of(configmap: &Value) -> BTreeMap<String, String> {
    serde_json::from_value(configmap["data"].clone()).expect("string data")
}

/// The ConfigMap AWS documents (with a team's grep and modify filters), as a cluster has it.
fn aws_default_configmap() -> Value {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/manifests/aws/aws-logging-default.yaml");
    documents(&path).remove(0)
}

#[test]
fn the_merge_adds_hooklog_to_the_configmap_aws_documents_and_keeps_the_teams_own() {
    let before = aws_default_configmap();
    let merged = merged_aws_logging(&before).unwrap();
    let (old, new) = (data_of(&before), data_of(&merged));
    assert_fargate_accepts(&new);
    // Everything the team had is kept, in order, byte for byte: each of their sections still in
    // the merged text, and the output's only change the `log_format json/emf` that `run --emf`
    // needs (issue 41: the metrics silently did not appear), read as Fluent Bit reads it.
    assert_eq!(old["flb_log_cw"], new["flb_log_cw"]);
    let (outputs_before, outputs_after) = (
        fluent_sections(&old["output.conf"]),
        fluent_sections(&new["output.conf"]),
    );
    assert_eq!(outputs_before.len(), outputs_after.len());
    for ((name, mut before), (name_after, after)) in outputs_before.into_iter().zip(outputs_after) {
        assert_eq!(name, name_after);
        assert_eq!(before.get("log_format"), None, "the fixture has none");
        before.insert("log_format".into(), "json/emf".into());
        assert_eq!(before, after, "{}", new["output.conf"]);
    }
    assert!(
        new["output.conf"].starts_with(old["output.conf"].trim_end()),
        "{}",
        new["output.conf"]
    );
    for key in ["filters.conf", "parsers.conf"] {
        let kept: Vec<Section> = fluent_sections(&old[key]);
        let now: Vec<Section> = fluent_sections(&new[key]);
        let mut at = 0;
        for section in &kept {
            let found = now[at..].iter().position(|s| s == section);
            let Some(i) = found else {
                panic!("{key}: {section:?} lost or moved in\n{}", new[key])
            };
            at += i + 1;
        }
        assert_eq!(
            now.len(),
            kept.len() + 1,
            "{key}: one section added\n{}",
            new[key]
        );
    }
    // hooklog's filter right after the CRI parser, before the grep and the kubernetes filter.
    let filters = fluent_sections(&new["filters.conf"]);
    let names: Vec<&str> = filters
        .iter()
        .map(|(_, k)| k.get("parser").unwrap_or(&k["name"]).as_str())
        .collect();
    assert_eq!(
        names,
        ["crio", "hooklog_json", "grep", "kubernetes", "modify"]
    );
    // The merged ConfigMap is valid, and ships hooklog's records as the example ConfigMap does
    // (with the team's modify filter's field added).
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("aws-logging.yaml");
    std::fs::write(&file, serde_json::to_string_pretty(&merged).unwrap()).unwrap();
    crate::util::manifests::validate_strictly(&[file]);
    let lines = real_hooklog_lines();
    let example = through_fluent_bit(&lines);
    let shipped = through_fluent_bit_with(&new, &lines);
    assert_eq!(shipped.len(), example.len());
    for (mut got, want) in shipped.into_iter().zip(example) {
        assert_eq!(got["cluster"], "shop-prod");
        got.as_object_mut().unwrap().remove("cluster");
        assert_eq!(got, want);
    }
    // Merging again changes nothing.
    assert_eq!(merged_aws_logging(&merged).unwrap(), merged);
}

#[test]
fn the_merge_is_what_the_whole_configmap_example_holds_and_handles_the_odd_ones() {
    // The example for a cluster without aws-logging already has every addition: nothing to add.
    let example = documents(&k8s_dir().join("aws-observability.yaml"))
        .into_iter()
        .find(|d| d["kind"] == "ConfigMap")
        .unwrap();
    assert_eq!(
        data_of(&merged_aws_logging(&example).unwrap()),
        data_of(&example)
    );
    // ... and they are the additions' own sections, key for key.
    let data = data_of(&example);
    for (addition, key) in [
        ("hooklog-parsers.conf", "parsers.conf"),
        ("hooklog-filters.conf", "filters.conf"),
    ] {
        let ours = fluent_sections(
            &std::fs::read_to_string(k8s_dir().join("aws").join(addition)).unwrap(),
        );
        assert_eq!(ours.len(), 1, "{addition}");
        assert!(
            fluent_sections(&data[key]).contains(&ours[0]),
            "{addition} is not in the example's {key}"
        );
    }
    // A ConfigMap without a CRI parser (an output and the kubernetes filter): the crio parser
    // and its filter come first, then hooklog's; it ships as the example does.
    let filters = example["data"]["filters.conf"].as_str().unwrap();
    let kubernetes = &filters[filters
        .rfind("[FILTER]")
        .filter(|&at| filters[at..].contains("Name kubernetes"))
        .expect("the example's last filter is the kubernetes filter")..];
    let mut bare = example.clone();
    bare["data"] =
        json!({"output.conf": example["data"]["output.conf"], "filters.conf": kubernetes});
    let merged = data_of(&merged_aws_logging(&bare).unwrap());
    assert_fargate_accepts(&merged);
    let lines = real_hooklog_lines();
    let want: Vec<Value> = through_fluent_bit(&lines);
    let got = through_fluent_bit_with(&merged, &lines);
    assert_eq!(got, want);
    // One that the additions would push over Fargate's limit is refused, naming the limit.
    let mut full = aws_default_configmap();
    full["data"]["output.conf"] = json!(format!(
        "{}# {}\n",
        full["data"]["output.conf"].as_str().unwrap(),
        "x".repeat(FARGATE_CONFIGMAP_MAX_CHARS - 900)
    ));
    let err = merged_aws_logging(&full).unwrap_err();
    assert!(
        err.contains(&FARGATE_CONFIGMAP_MAX_CHARS.to_string()),
        "{err}"
    );
    // Not a ConfigMap: refused.
    let err = merged_aws_logging(&json!({"kind": "Secret"})).unwrap_err();
    assert!(err.contains("not the aws-logging ConfigMap"), "{err}");
}

/// Real hooklog output: two hooks through the socket (one ok, one failing) and the summary.
fn real_hooklog_lines() -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("hooklog.sock");
    let file = dir.path().join("prestop.log");
    let (s, f) = (sock.to_str().unwrap(), file.to_str().unwrap());
    let mut d = Daemon::start(
        &[
            "--socket",
            s,
            "--file",
            f,
            "--peers",
            "api-server,envoy",
            "--linger",
            "100ms",
        ],
        &POD_ENV,
    );
    let hook = |container: &str, cmd: &[&str]| {
        let st = crate::util::hooklog()
            .args([
                "hook",
                "--container",
                container,
                "--socket",
                s,
                "--file",
                f,
                "--",
            ])
            .args(cmd)
            .status()
            .expect("run hooklog hook");
        st.code()
    };
    let bin = hooklog_bin();
    assert_eq!(
        hook("envoy", &[bin.to_str().unwrap(), "sleep", "0.05"]),
        Some(0)
    );
    assert_eq!(
        hook(
            "api-server",
            &["sh", "-c", "echo uploading heap dump; exit 3"]
        ),
        Some(3)
    );
    assert!(
        wait_until(Duration::from_secs(10), || d.stdout.len() >= 5),
        "{:#?}",
        d.stdout.lines()
    );
    d.terminate();
    assert!(d.wait_exit(Duration::from_secs(10)).success());
    d.stdout.lines()
}

#[test]
fn fargate_kubernetes_filter_replaces_the_map_but_container_name_names_the_writer() {
    let lines = real_hooklog_lines();
    let originals: Vec<Value> = lines
        .iter()
        .map(|l| serde_json::from_str(l).expect("JSON line"))
        .collect();
    let shipped = through_fluent_bit(&lines);
    assert_eq!(shipped.len(), originals.len());
    let mut writers = BTreeSet::new();
    for (orig, rec) in originals.iter().zip(&shipped) {
        // hooklog's fields became searchable fields, not a string inside `log`.
        assert!(rec.get("log").is_none(), "still a string in log: {rec}");
        assert_eq!(rec["time"], orig["time"], "hooklog's time is kept: {rec}");
        assert_eq!(rec["event"], orig["event"]);
        // The filter replaced the map with the sidecar's own metadata ...
        assert_eq!(rec["kubernetes"]["container_name"], "hooklog", "{rec}");
        assert_ne!(rec["kubernetes"], orig["kubernetes"]);
        // ... but the writer survives at the top level.
        assert_eq!(rec["container_name"], orig["container_name"], "{rec}");
        if let Some(w) = rec["container_name"].as_str() {
            writers.insert(w.to_string());
        }
    }
    assert_eq!(
        writers,
        BTreeSet::from(["api-server".to_string(), "envoy".to_string()])
    );
    let failed = shipped
        .iter()
        .find(|r| r["event"] == "hook.finished" && r["container_name"] == "api-server")
        .expect("api-server's hook.finished");
    assert_eq!(failed["outcome"], "failed");
    assert_eq!(failed["exit_code"], 3);

    // Fluent Bit reads hooklog's `time` with the hooklog_json parser's Time_Format (%L is
    // Fluent Bit's fractional seconds, Python's %f).
    let parsers = fluent_sections(&aws_logging()["parsers.conf"]);
    let (_, json_parser) = parsers
        .iter()
        .find(|(_, p)| p["format"] == "json")
        .expect("a json parser");
    let format = json_parser["time_format"].replace("%L", "%f");
    let times: Vec<&str> = originals
        .iter()
        .map(|r| r["time"].as_str().expect("time"))
        .collect();
    let parsed = python_stdin(
        "import sys, json, datetime\nfor t in json.load(sys.stdin): datetime.datetime.strptime(t, sys.argv[1])\nprint('ok')",
        &[&format],
        &serde_json::to_string(&times).unwrap(),
    );
    assert_eq!(parsed.trim(), "ok");

    // The Insights query and the alarm's metric filter read fields the shipped summary has.
    let summary = shipped
        .iter()
        .find(|r| r["event"] == "hooks.summary")
        .expect("the summary");
    let query = std::fs::read_to_string(k8s_dir().join("aws/failed-hooks.insights")).unwrap();
    let alarm = std::fs::read_to_string(k8s_dir().join("aws/failed-hooks-alarm.cfn.yaml")).unwrap();
    // The query's filters and the metric filter's pattern, evaluated on the shipped summary (a
    // failed hook: both match), on it with every count 0 (neither does), and with each one
    // problem count raised alone (both do): what they select, not which words they hold.
    let filters: Vec<&str> = query
        .lines()
        .filter_map(|l| l.trim().strip_prefix("| filter "))
        .collect();
    assert!(filters.len() >= 2, "{query}");
    let pattern = alarm
        .lines()
        .find_map(|l| l.trim().strip_prefix("FilterPattern: "))
        .expect("the metric filter's pattern")
        .trim_matches('\'');
    let selects = |r: &Value| {
        let q = filters.iter().all(|f| filter_matches(f, r));
        let a = filter_matches(pattern, r);
        assert_eq!(q, a, "the query and the metric filter disagree on {r}");
        q
    };
    assert!(
        selects(summary),
        "the failed hook's summary is not selected: {summary}"
    );
    let mut clean = summary.clone();
    for outcome in ["failed", "timed_out", "missing", "unfinished"] {
        clean["counts"][outcome] = json!(0);
    }
    assert!(
        !selects(&clean),
        "a summary without problems is selected: {clean}"
    );
    for outcome in ["failed", "timed_out", "missing", "unfinished"] {
        assert!(
            summary["counts"][outcome].is_u64(),
            "the summary has no counts.{outcome}"
        );
        let mut one = clean.clone();
        one["counts"][outcome] = json!(1);
        assert!(selects(&one), "counts.{outcome} = 1 is not selected");
    }
    let mut other = summary.clone();
    other["event"] = json!("hook.finished");
    assert!(
        !selects(&other),
        "a record that is not the summary is selected"
    );
    assert_eq!(summary["counts"]["failed"], 1, "{summary}");
    // Every field the query shows is one the summary has.
    let fields: String = query
        .lines()
        .skip_while(|l| !l.starts_with("fields "))
        .take_while(|l| !l.trim_start().starts_with('|'))
        .collect::<Vec<_>>()
        .join(" ");
    for item in fields.trim_start_matches("fields ").split(',') {
        let field = item.split_whitespace().next().expect("a field");
        if field.starts_with('@') {
            continue;
        }
        let ptr = format!("/{}", field.replace('.', "/"));
        assert!(
            summary.pointer(&ptr).is_some(),
            "the query shows {field}, absent: {summary}"
        );
    }
}

/// Evaluates a CloudWatch filter on `record`: a metric filter's JSON pattern (`{ ($.a = "x") &&
/// ($.b.c > 0) }`) or a Logs Insights `filter` expression (`a = "x" and b.c > 0 or ...`), with
/// `=`, `!=`, `<`, `<=`, `>`, `>=` on numbers and strings, `&&`/`and` binding tighter than
/// `||`/`or`, and parentheses. Panics on anything else: the checks must read what AWS reads.
fn filter_matches(filter: &str, record: &Value) -> bool {
    let text = filter.trim();
    let text = text
        .strip_prefix('{')
        .and_then(|t| t.strip_suffix('}'))
        .unwrap_or(text);
    let mut tokens = Vec::new();
    let mut rest = text.trim();
    while !rest.is_empty() {
        let len = if let Some(quoted) = rest.strip_prefix('"') {
            quoted.find('"').expect("a closing quote") + 2
        } else if rest.starts_with(['(', ')']) {
            1
        } else {
            rest.find(|c: char| c.is_whitespace() || c == '(' || c == ')')
                .unwrap_or(rest.len())
        };
        tokens.push(&rest[..len]);
        rest = rest[len..].trim_start();
    }
    fn or(t: &[&str], i: &mut usize, r: &Value) -> bool {
        let mut v = and(t, i, r);
        while t.get(*i).is_some_and(|w| *w == "||" || *w == "or") {
            *i += 1;
            v |= and(t, i, r);
        }
        v
    }
    fn and(t: &[&str], i: &mut usize, r: &Value) -> bool {
        let mut v = term(t, i, r);
        while t.get(*i).is_some_and(|w| *w == "&&" || *w == "and") {
            *i += 1;
            v &= term(t, i, r);
        }
        v
    }
    fn term(t: &[&str], i: &mut usize, r: &Value) -> bool {
        if t[*i] == "(" {
            *i += 1;
            let v = or(t, i, r);
            assert_eq!(t[*i], ")", "{t:?}");
            *i += 1;
            return v;
        }
        let (field, op, want) = (t[*i], t[*i + 1], t[*i + 2]);
        *i += 3;
        let ptr = format!("/{}", field.trim_start_matches("$.").replace('.', "/"));
        let got = r.pointer(&ptr);
        let ord = match (
            got,
            want.strip_prefix('"').and_then(|w| w.strip_suffix('"')),
        ) {
            (Some(Value::String(s)), Some(w)) => Some(s.as_str().cmp(w)),
            (Some(Value::Number(n)), None) => {
                let w: f64 = want
                    .parse()
                    .unwrap_or_else(|_| panic!("not a number: {want}"));
                n.as_f64().and_then(|n| n.partial_cmp(&w))
            }
            _ => None,
        };
        let Some(ord) = ord else { return op == "!=" };
        match op {
            "=" => ord.is_eq(),
            "!=" => ord.is_ne(),
            "<" => ord.is_lt(),
            "<=" => ord.is_le(),
            ">" => ord.is_gt(),
            ">=" => ord.is_ge(),
            other => panic!("the check does not read the operator {other}"),
        }
    }
    let mut i = 0;
    let v = or(&tokens, &mut i, record);
    assert_eq!(
        i,
        tokens.len(),
        "left unread in {filter}: {:?}",
        &tokens[i..]
    );
    v
}

#[test]
fn iam_policies_are_least_privilege() {
    for (file, group) in [
        ("hooklog-iam-policy.json", "/eks/shop/hooks"),
        ("fluent-bit-iam-policy.json", "/eks/shop/containers"),
    ] {
        let text = std::fs::read_to_string(k8s_dir().join("aws").join(file)).unwrap();
        let policy: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{file}: {e}"));
        assert_eq!(policy["Version"], "2012-10-17");
        let mut actions = BTreeSet::new();
        for st in policy["Statement"].as_array().expect("statements") {
            assert_eq!(st["Effect"], "Allow");
            let resources: Vec<&str> = match &st["Resource"] {
                Value::String(r) => vec![r.as_str()],
                Value::Array(rs) => rs
                    .iter()
                    .map(|r| r.as_str().expect("a resource ARN"))
                    .collect(),
                other => panic!("{file}: resource {other}"),
            };
            for resource in resources {
                assert!(
                    resource.contains(&format!(":log-group:{group}")),
                    "{file}: {resource} is not scoped to {group}"
                );
            }
            for a in st["Action"].as_array().expect("actions") {
                let a = a.as_str().unwrap();
                assert!(
                    a.starts_with("logs:") && !a.contains('*'),
                    "{file}: {a} is too broad"
                );
                actions.insert(a.to_string());
            }
        }
        for need in ["logs:CreateLogStream", "logs:PutLogEvents"] {
            assert!(actions.contains(need), "{file} lacks {need}");
        }
    }
    // docs/cloudwatch.md shows the very policy that ships in k8s/aws.
    let page =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/cloudwatch.md"))
            .unwrap();
    let section = &page[page
        .find("## IAM policy")
        .expect("docs/cloudwatch.md has an IAM policy section")..];
    let block = &section[section.find("```json\n").expect("a JSON block") + 8..];
    let block = &block[..block.find("```").expect("closed block")];
    let shown: Value = serde_json::from_str(block).expect("the shown policy is JSON");
    let shipped: Value = serde_json::from_str(
        &std::fs::read_to_string(k8s_dir().join("aws/hooklog-iam-policy.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        shown, shipped,
        "docs/cloudwatch.md's IAM policy differs from k8s/aws/hooklog-iam-policy.json"
    );
    // The IRSA role in the manifest is the one the policy is for.
    let sa = documents(&k8s_dir().join("api-server-cloudwatch.yaml"))
        .into_iter()
        .find(|d| d["kind"] == "ServiceAccount")
        .expect("a ServiceAccount");
    assert!(
        sa["metadata"]["annotations"]["eks.amazonaws.com/role-arn"]
            .as_str()
            .is_some_and(|a| a.starts_with("arn:aws:iam::"))
    );
}

#[test]
fn alarm_template_alarms_on_the_metric_its_filter_makes() {
    let docs = documents(&k8s_dir().join("aws/failed-hooks-alarm.cfn.yaml"));
    let [template] = docs.as_slice() else {
        panic!("one CloudFormation template")
    };
    let resources = template["Resources"].as_object().expect("Resources");
    let of_type =
        |t: &str| -> Vec<&Value> { resources.values().filter(|r| r["Type"] == t).collect() };
    let [filter] = of_type("AWS::Logs::MetricFilter")[..] else {
        panic!("one metric filter")
    };
    let [alarm] = of_type("AWS::CloudWatch::Alarm")[..] else {
        panic!("one alarm")
    };
    let metric = &filter["Properties"]["MetricTransformations"][0];
    assert_eq!(alarm["Properties"]["Namespace"], metric["MetricNamespace"]);
    assert_eq!(alarm["Properties"]["MetricName"], metric["MetricName"]);
    for p in template["Parameters"]
        .as_object()
        .expect("Parameters")
        .keys()
    {
        assert!(
            serde_json::to_string(resources)
                .unwrap()
                .contains(&format!("{{\"Ref\":\"{p}\"}}")),
            "parameter {p} is never used"
        );
    }
}

fn webhook_dir() -> PathBuf {
    k8s_dir().join("webhook")
}

/// k8s/webhook/: the admission webhook's manifests.
fn webhook_manifests() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(webhook_dir())
        .expect("read k8s/webhook/")
        .map(|e| e.expect("entry").path())
        .collect();
    files.sort();
    assert_eq!(files.len(), 4, "{files:?}");
    files
}

#[test]
fn webhook_manifests_validate_strictly_from_1_29_to_the_newest_schema() {
    every_resource_passes(&webhook_manifests());
}

#[test]
fn the_webhook_configuration_is_what_the_server_and_the_issue_ask_for() {
    let docs: Vec<Value> = webhook_manifests()
        .iter()
        .flat_map(|f| documents(f))
        .collect();
    let find = |kind: &str| -> Vec<&Value> { docs.iter().filter(|d| d["kind"] == kind).collect() };
    let deploy = find("Deployment")[0];
    let service = find("Service")[0];
    let pdb = find("PodDisruptionBudget")[0];
    let mwc = find("MutatingWebhookConfiguration")[0];
    let namespace = deploy["metadata"]["namespace"].as_str().unwrap();

    // RBAC: get and patch on its own webhook configuration, by name (auto-TLS keeps the
    // caBundle; `GET /version` needs none), and list on namespaces (their hooklog.dev/
    // annotations, issue 41); nothing else.
    for kind in ["Role", "RoleBinding"] {
        assert!(
            find(kind).is_empty(),
            "{kind}: the webhook needs no namespaced RBAC"
        );
    }
    let (roles, bindings) = (find("ClusterRole"), find("ClusterRoleBinding"));
    assert_eq!((roles.len(), bindings.len()), (2, 2));
    let rules: Vec<&Value> = roles.iter().map(|r| &r["rules"]).collect();
    assert_eq!(
        rules,
        [
            &json!([{"apiGroups": [""], "resources": ["namespaces"], "verbs": ["list"]}]),
            &json!([{
                "apiGroups": ["admissionregistration.k8s.io"],
                "resources": ["mutatingwebhookconfigurations"],
                "resourceNames": [mwc["metadata"]["name"]],
                "verbs": ["get", "patch"],
            }]),
        ]
    );
    for (role, binding) in roles.iter().zip(&bindings) {
        assert_eq!(binding["roleRef"]["kind"], "ClusterRole");
        assert_eq!(binding["roleRef"]["name"], role["metadata"]["name"]);
        assert_eq!(
            binding["subjects"],
            json!([{
                "kind": "ServiceAccount",
                "name": deploy["spec"]["template"]["spec"]["serviceAccountName"],
                "namespace": namespace,
            }])
        );
    }
    // Two replicas that a drain cannot take down together; non-root, read-only root.
    assert_eq!(deploy["spec"]["replicas"], 2);
    assert_eq!(pdb["spec"]["minAvailable"], 1);
    let labels = &deploy["spec"]["template"]["metadata"]["labels"];
    for selector in [
        &pdb["spec"]["selector"]["matchLabels"],
        &service["spec"]["selector"],
    ] {
        for (k, v) in selector.as_object().unwrap() {
            assert_eq!(&labels[k], v, "{k}");
        }
    }
    let pod = &deploy["spec"]["template"]["spec"];
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    let c = &pod["containers"][0];
    assert_eq!(c["securityContext"]["readOnlyRootFilesystem"], true);
    assert_eq!(c["securityContext"]["allowPrivilegeEscalation"], false);

    // The container's command line (flags and env) is one `hooklog webhook` accepts.
    let webhook = Cli::command()
        .find_subcommand("webhook")
        .expect("a webhook subcommand")
        .clone();
    let mut argv: Vec<String> = vec!["hooklog".into()];
    argv.extend(
        c["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap().to_string()),
    );
    for e in c["env"].as_array().unwrap() {
        let name = e["name"].as_str().unwrap();
        let arg = webhook
            .get_arguments()
            .find(|a| a.get_env().is_some_and(|v| v == name))
            .unwrap_or_else(|| panic!("hooklog webhook reads no {name}"));
        let value = match e["value"].as_str() {
            Some(v) => v.to_string(),
            None => {
                assert_eq!(
                    e["valueFrom"]["fieldRef"]["fieldPath"],
                    "metadata.namespace"
                );
                namespace.to_string()
            }
        };
        argv.push(format!("--{}={value}", arg.get_long().unwrap()));
    }
    let cli = Cli::try_parse_from(&argv).unwrap_or_else(|e| panic!("{argv:?}: {e}"));
    let Sub::Webhook(args) = cli.command else {
        panic!("{argv:?}")
    };
    assert_eq!(args.own_namespace.as_deref(), Some(namespace));
    let port = &c["ports"][0];
    assert_eq!(
        args.listen.port() as u64,
        port["containerPort"].as_u64().unwrap()
    );
    // Auto-TLS: no certificate files; the CA goes into this configuration, the certificate is
    // for this Service's names.
    assert_eq!((&args.tls_cert_file, &args.tls_key_file), (&None, &None));
    assert_eq!(
        args.webhook_config,
        mwc["metadata"]["name"].as_str().unwrap()
    );
    assert_eq!(args.service, service["metadata"]["name"].as_str().unwrap());

    // Every webhook: the Service, a path the server routes, and the issue's settings. No
    // cert-manager annotation: its cainjector would overwrite the replicas' CAs.
    assert!(
        mwc["metadata"]["annotations"]
            .get("cert-manager.io/inject-ca-from")
            .is_none()
    );
    let hooks = mwc["webhooks"].as_array().unwrap();
    assert_eq!(hooks.len(), 3);
    for h in hooks {
        let name = h["name"].as_str().unwrap();
        let svc = &h["clientConfig"]["service"];
        assert_eq!(svc["name"], service["metadata"]["name"], "{name}");
        assert_eq!(svc["namespace"], namespace, "{name}");
        assert_eq!(svc["port"], service["spec"]["ports"][0]["port"], "{name}");
        assert!(
            ["/mutate", "/mutate/namespace-enabled"].contains(&svc["path"].as_str().unwrap()),
            "{name}"
        );
        assert_eq!(h["failurePolicy"], "Ignore", "{name}");
        assert_eq!(h["sideEffects"], "None", "{name}");
        assert_eq!(h["timeoutSeconds"], 10, "{name}");
        assert_eq!(h["admissionReviewVersions"], json!(["v1"]), "{name}");
        let excluded = h["namespaceSelector"]["matchExpressions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["key"] == "kubernetes.io/metadata.name" && e["operator"] == "NotIn")
            .unwrap_or_else(|| panic!("{name} excludes no namespace"));
        for ns in [namespace, "kube-system", "kube-public", "kube-node-lease"] {
            assert!(
                excluded["values"].as_array().unwrap().contains(&json!(ns)),
                "{name}: {ns}"
            );
        }
        let pods = h["rules"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["resources"] == json!(["pods"]));
        if pods {
            // Pods cannot change after creation: CREATE only, and once more after later webhooks.
            assert_eq!(
                h["rules"],
                json!([{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"], "scope": "Namespaced"}]),
                "{name}"
            );
            assert_eq!(h["reinvocationPolicy"], "IfNeeded", "{name}");
        }
    }
    let paths: BTreeSet<&str> = hooks
        .iter()
        .map(|h| h["clientConfig"]["service"]["path"].as_str().unwrap())
        .collect();
    assert_eq!(
        paths,
        BTreeSet::from(["/mutate", "/mutate/namespace-enabled"])
    );
}
