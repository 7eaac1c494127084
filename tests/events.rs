//! `hooklog run --events` (issue 29): the Warning Event a hook that does not end ok leaves on
//! its pod, read back from a real kube-apiserver 1.20.2 (the API server tier, scripts/
//! apiserver.sh) as the pod's service account with k8s/events/rbac.yaml applied; and what no
//! API server, a 403 or a server that never answers cost: tries within the grace (issue 37;
//! faults one by one in tests/events_faults.rs), counted in the summary, warned once, the
//! summary still last. The termination message, with and
//! without a tier.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::util::apiserver::Api;
use crate::util::events::{
    NOT_POSTED, not_posted_warning, rbac_unknown_findings, run_events, serviceaccount_mount,
};
use crate::util::{Daemon, hook, hooklog, pod_dir, wait_until};

/// Slack for a loaded 2-core machine on top of what hooklog itself allows.
const SLACK: Duration = Duration::from_millis(2000);

/// What hooklog's exit may take past the moment it chose (the runtime's shutdown, the test's
/// polling).
const EXIT_SLACK: Duration = Duration::from_millis(1200);

/// How long an Event may take to show up in the API after the hook ended.
const EVENT_SHOWS: Duration = Duration::from_secs(20);

/// The pod's name in every test (each test has a namespace of its own).
const POD: &str = "checkout-7d9f-x2x4b";

/// A namespace with a pod object, its `default` service account and a token of it, and (when
/// asked) the shipped Role and RoleBinding; the mount's files in a folder, as the kubelet
/// projects them.
struct PodTier<'a> {
    api: &'a Api,
    ns: String,
    uid: String,
    /// The pod's folder: the service account mount, the file hooklog follows.
    dir: tempfile::TempDir,
    sa_dir: PathBuf,
    /// The pod's `prestop.log`, which hooklog follows and the hooks write.
    file: PathBuf,
}

impl<'a> PodTier<'a> {
    fn new(api: &'a Api, name: &str, with_role: bool) -> PodTier<'a> {
        let ns = format!("ev-{name}-{}", std::process::id());
        let ok = |method: &str, path: &str, body: &Value| {
            let (status, v) = api.call(method, path, Some(body));
            assert!(
                (200..300).contains(&status),
                "{method} {path}: {status} {v:#}"
            );
            v
        };
        ok(
            "POST",
            "/api/v1/namespaces",
            &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
        );
        let pod = ok(
            "POST",
            &format!("/api/v1/namespaces/{ns}/pods"),
            &json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": POD},
                    "spec": {"containers": [{"name": "envoy", "image": "envoy"}, {"name": "hooklog", "image": "hooklog"}]}}),
        );
        let uid = pod["metadata"]["uid"].as_str().unwrap().to_string();
        ok(
            "POST",
            &format!("/api/v1/namespaces/{ns}/serviceaccounts"),
            &json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}}),
        );
        if with_role {
            let rbac = Path::new(env!("CARGO_MANIFEST_DIR")).join("k8s/events/rbac.yaml");
            for doc in crate::util::manifests::documents(&rbac) {
                let plural = match doc["kind"].as_str().unwrap() {
                    "Role" => "roles",
                    "RoleBinding" => "rolebindings",
                    other => panic!("k8s/events/rbac.yaml has a {other}"),
                };
                ok(
                    "POST",
                    &format!("/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/{plural}"),
                    &doc,
                );
            }
        }
        // A token of the pod's service account, as the kubelet projects one (TokenRequest).
        let answer = ok(
            "POST",
            &format!("/api/v1/namespaces/{ns}/serviceaccounts/default/token"),
            &json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                    "spec": {"audiences": ["https://kubernetes.default.svc"], "expirationSeconds": 3600}}),
        );
        let token = answer["status"]["token"].as_str().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let sa_dir = serviceaccount_mount(dir.path(), &api.ca_pem, token, &ns);
        PodTier {
            api,
            ns,
            uid,
            file: dir.path().join("prestop.log"),
            dir,
            sa_dir,
        }
    }

    /// The pod's first Event, once it shows (within `within`); `d`'s stderr if none does.
    fn first_event(&self, d: &Daemon, within: Duration) -> Value {
        let shown = wait_until(within, || !self.events().is_empty());
        assert!(shown, "no Event; stderr {:#?}", d.stderr.lines());
        self.events().remove(0)
    }

    /// The pod's Events through the core v1 API, selected by the pod's uid as `kubectl
    /// describe pod` selects them.
    fn events(&self) -> Vec<Value> {
        let (status, v) = self.api.call(
            "GET",
            &format!(
                "/api/v1/namespaces/{}/events?fieldSelector=involvedObject.uid%3D{}",
                self.ns, self.uid
            ),
            None,
        );
        assert_eq!(status, 200, "{v:#}");
        v["items"].as_array().cloned().unwrap_or_default()
    }

    /// `hooklog run --events` for this pod, following its file.
    fn daemon(&self, extra: &[&str]) -> Daemon {
        run_events(
            &self.file,
            &self.sa_dir,
            self.api.port,
            &[&["--linger", "100ms"], extra].concat(),
            &[
                ("POD_NAME", POD),
                ("POD_NAMESPACE", &self.ns),
                ("POD_UID", &self.uid),
            ],
        )
    }
}

impl Drop for PodTier<'_> {
    fn drop(&mut self) {
        // Best effort: a failed test leaves its namespace, which the next run's names avoid.
        let _ = self
            .api
            .call("DELETE", &format!("/api/v1/namespaces/{}", self.ns), None);
    }
}

/// SIGTERM, the exit within `within` (whatever its status), and the summary, last.
fn summary_at_exit(d: &mut Daemon, within: Duration) -> Value {
    d.terminate();
    d.wait_exit(within);
    d.summary()
}

/// The warnings of hooklog's stderr that say an Event was not posted.
fn not_posted_warnings(d: &Daemon) -> usize {
    d.stderr.count(NOT_POSTED)
}

#[test]
fn a_failed_hook_leaves_a_warning_event_on_its_pod_with_its_exit_status_and_last_output() {
    let Some(api) = Api::from_env() else { return };
    let t = PodTier::new(&api, "failed", true);
    let file = &t.file;
    let termination = t.dir.path().join("termination-log");
    let mut d = t.daemon(&["--termination-message-path", termination.to_str().unwrap()]);
    // An ok hook posts nothing; a failed one posts at once, before any signal.
    assert!(hook(file, "app", "echo fine").success());
    let st = hook(
        file,
        "envoy",
        "echo 'draining listeners'; echo 'upstream cluster gone' >&2; exit 3",
    );
    assert_eq!(st.code(), Some(3));
    let e = &t.first_event(&d, EVENT_SHOWS);
    assert_eq!(t.events().len(), 1, "{:#?}", t.events());
    assert_eq!(e["type"], "Warning");
    assert_eq!(e["reason"], "PreStopHookFailed");
    assert_eq!(e["involvedObject"]["kind"], "Pod");
    assert_eq!(e["involvedObject"]["name"], POD);
    assert_eq!(e["involvedObject"]["uid"], t.uid.as_str());
    // The container, as the kubelet names it in its own hook Events (issue 29's leftover).
    assert_eq!(e["involvedObject"]["fieldPath"], "spec.containers{envoy}");
    assert_eq!(e["reportingComponent"], "hooklog.dev/sidecar");
    assert_eq!(e["reportingInstance"], POD);
    let message = e["message"].as_str().unwrap();
    assert!(
        message.starts_with("container envoy: preStop hook failed"),
        "{message}"
    );
    assert!(message.contains("exit status 3"), "{message}");
    assert!(
        message.ends_with("last output:\ndraining listeners\nupstream cluster gone"),
        "{message}"
    );

    // The same outcome again is the same Event's series, not a second Event.
    let st = hook(file, "envoy", "echo 'second try'; exit 3");
    assert_eq!(st.code(), Some(3));
    let series = wait_until(EVENT_SHOWS, || {
        let (_, v) = api.call(
            "GET",
            &format!("/apis/events.k8s.io/v1/namespaces/{}/events", t.ns),
            None,
        );
        v["items"][0]["series"]["count"] == 2
    });
    assert!(series, "no series; stderr {:#?}", d.stderr.lines());
    assert_eq!(t.events().len(), 1);

    let summary = summary_at_exit(&mut d, Duration::from_secs(20));
    assert_eq!(
        summary["events"],
        json!({"posted": 2, "not_posted": 0, "pending": 0}),
        "{summary:#}"
    );
    assert_eq!(not_posted_warnings(&d), 0, "{:#?}", d.stderr.lines());
    assert_eq!(
        std::fs::read_to_string(&termination).unwrap(),
        summary["message"].as_str().unwrap()
    );
}

#[test]
fn a_hook_that_prints_10_mb_gives_an_event_within_the_note_limit_ending_with_its_last_line() {
    let Some(api) = Api::from_env() else { return };
    let t = PodTier::new(&api, "big", true);
    let mut d = t.daemon(&[]);
    // 10 MB of lines, one line of 200 KB among them, then the last words; and a timeout.
    let st = hook(
        &t.file,
        "envoy",
        "yes 'flushing the request log to s3, chunk after chunk' | head -c 10000000; \
         head -c 200000 /dev/zero | tr '\\0' y; echo; echo 'THE LAST LINE'; exit 1",
    );
    assert_eq!(st.code(), Some(1));
    let e = &t.first_event(&d, Duration::from_secs(60));
    let message = e["message"].as_str().unwrap();
    // events.k8s.io/v1's note limit (NoteLengthLimit, k8s.io/kubernetes/pkg/apis/core/validation/events.go).
    assert!(message.len() <= 1024, "{} bytes", message.len());
    assert!(message.len() > 900, "the note is not filled: {message}");
    assert!(message.ends_with("\nTHE LAST LINE"), "{message}");
    let summary = summary_at_exit(&mut d, Duration::from_secs(30));
    assert_eq!(summary["events"]["posted"], 1);
}

#[test]
fn a_missing_hook_is_posted_at_the_summary_which_comes_out_first() {
    let Some(api) = Api::from_env() else { return };
    let t = PodTier::new(&api, "missing", true);
    let mut d = t.daemon(&["--peers", "api-server", "--announce-timeout", "300ms"]);
    let summary = summary_at_exit(&mut d, Duration::from_secs(20));
    // Counted as pending when the summary was written: it is not waited for.
    assert_eq!(summary["events"]["pending"], 1, "{summary:#}");
    let e = &t.first_event(&d, EVENT_SHOWS);
    assert_eq!(e["reason"], "PreStopHookMissing");
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("container api-server"),
        "{e:#}"
    );
}

#[test]
fn without_the_role_a_403_costs_one_call_is_warned_once_and_counted() {
    let Some(api) = Api::from_env() else { return };
    let t = PodTier::new(&api, "forbidden", false);
    let mut d = t.daemon(&["--peers", "api-server", "--announce-timeout", "300ms"]);
    for _ in 0..3 {
        assert_eq!(hook(&t.file, "envoy", "exit 3").code(), Some(3));
    }
    d.expect(
        EVENT_SHOWS,
        "a warning that the event was not posted",
        || not_posted_warnings(&d) == 1,
    );
    let signalled = Instant::now();
    d.terminate();
    d.wait_exit(Duration::from_secs(20));
    // No call after the 403: the missing hook costs nothing at exit.
    assert!(
        signalled.elapsed() < Duration::from_millis(300 + 100) + SLACK,
        "{:?}",
        signalled.elapsed()
    );
    let summary = d.summary();
    let events = &summary["events"];
    assert_eq!(events["posted"], 0, "{summary:#}");
    assert_eq!(events["not_posted"], 3, "{summary:#}");
    assert!(
        events["error"].as_str().unwrap().contains("HTTP 403"),
        "{summary:#}"
    );
    assert_eq!(not_posted_warnings(&d), 1, "{:#?}", d.stderr.lines());
    assert!(t.events().is_empty());
}

/// A service account mount for a server that is not the tier: any CA, any token.
fn fake_mount(dir: &Path) -> PathBuf {
    let certs = crate::util::webhook::Certs::make(dir, "no-such-apiserver");
    serviceaccount_mount(dir, &certs.ca_pem, "not-a-token", "shop")
}

/// `hooklog run --events` against `port` on 127.0.0.1, a missing peer (posted at the summary)
/// and `extra` flags; returns the daemon, the time from the signal to the summary and to the
/// exit.
fn run_against(port: u16, dir: &Path, extra: &[&str]) -> (Daemon, Duration, Duration) {
    let sa = fake_mount(dir);
    let file = dir.join("prestop.log");
    let flags = [
        "--linger",
        "50ms",
        "--peers",
        "api-server",
        "--announce-timeout",
        "100ms",
    ];
    let mut d = run_events(
        &file,
        &sa,
        port,
        &[&flags[..], extra].concat(),
        &[("POD_NAME", POD), ("POD_UID", "0f1e2d3c")],
    );
    let signalled = Instant::now();
    d.terminate();
    let summary_seen = wait_until(Duration::from_secs(20), || {
        d.stdout.contains("hooks.summary")
    });
    let to_summary = signalled.elapsed();
    assert!(summary_seen, "no summary; stderr {:#?}", d.stderr.lines());
    d.wait_exit(Duration::from_secs(20));
    (d, to_summary, signalled.elapsed())
}

/// A port nothing listens on.
fn closed_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

#[test]
fn an_unreachable_api_server_is_tried_until_the_grace_and_the_summary_is_last() {
    let dir = tempfile::tempdir().unwrap();
    let (d, to_summary, to_exit) = run_against(closed_port(), dir.path(), &["--grace", "3s"]);
    // The announce timeout and the linger, then at once.
    assert!(
        to_summary < Duration::from_millis(400) + SLACK,
        "{to_summary:?}"
    );
    // Tried again (issue 37) until the grace leaves no time: never past it.
    assert!(to_exit < Duration::from_secs(3) + EXIT_SLACK, "{to_exit:?}");
    let summary = d.summary();
    assert_eq!(summary["events"]["pending"], 1, "{summary:#}");
    assert_eq!(summary["counts"]["missing"], 1);
    assert_eq!(not_posted_warnings(&d), 1, "{:#?}", d.stderr.lines());
}

#[test]
fn a_server_that_never_answers_is_tried_within_the_grace_and_never_delays_the_summary() {
    // Accepts connections and never says a word: the TLS handshake waits for ever.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let held = std::thread::spawn(move || {
        let mut conns = Vec::new();
        for c in listener.incoming() {
            match c {
                Ok(c) => conns.push(c),
                Err(_) => break,
            }
            if conns.len() > 64 {
                break;
            }
        }
    });
    for (grace, bound) in [
        ("3s", Duration::from_secs(3)),
        // A grace shorter than a call's deadline: the call ends before the grace does.
        ("800ms", Duration::from_millis(800)),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let (d, to_summary, to_exit) = run_against(port, dir.path(), &["--grace", grace]);
        assert!(
            to_summary < Duration::from_millis(400) + SLACK,
            "{to_summary:?}"
        );
        eprintln!("--grace {grace}: summary after {to_summary:?}, exit after {to_exit:?}");
        // Never past the grace, whatever the tries.
        assert!(
            to_exit < bound.max(to_summary) + EXIT_SLACK,
            "{grace}: summary after {to_summary:?}, exit after {to_exit:?}"
        );
        let summary = d.summary();
        assert_eq!(summary["events"]["pending"], 1, "{summary:#}");
        assert_eq!(not_posted_warnings(&d), 1, "{:#?}", d.stderr.lines());
        let warning = not_posted_warning(&d);
        assert!(warning.contains("no answer within"), "{warning}");
    }
    drop(held); // The thread ends with the process.
}

#[test]
fn events_without_an_api_server_change_nothing_in_the_records() {
    let dir = tempfile::tempdir().unwrap();
    let mut runs = Vec::new();
    for events in [false, true] {
        let file = dir.path().join(format!("prestop-{events}.log"));
        let mut args = vec![
            "--file".to_string(),
            file.to_str().unwrap().to_string(),
            "--linger".into(),
            "100ms".into(),
        ];
        if events {
            args.push("--events".into());
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        // Not in a cluster: no KUBERNETES_SERVICE_HOST, no mount.
        let mut cmd = hooklog();
        cmd.arg("run")
            .args(&args)
            .env_remove("KUBERNETES_SERVICE_HOST")
            .env("POD_NAME", POD);
        let mut d = Daemon::spawn(cmd);
        assert_eq!(hook(&file, "envoy", "echo bye; exit 2").code(), Some(2));
        d.expect(Duration::from_secs(10), "the hook's records", || {
            d.stdout.contains("hook.finished")
        });
        d.terminate();
        d.wait_exit(Duration::from_secs(20));
        let records = d.records();
        let shape: Vec<(Value, Value, Value)> = records
            .iter()
            .map(|r| {
                (
                    r["event"].clone(),
                    r["message"].clone(),
                    r["counts"].clone(),
                )
            })
            .filter(|(e, _, _)| e != "hook.started" && e != "hook.finished")
            .collect();
        runs.push((shape, d.summary(), d.stderr.lines()));
    }
    assert_eq!(runs[0].0, runs[1].0);
    assert!(runs[0].1.get("events").is_none());
    assert_eq!(
        runs[1].1["events"],
        json!({"posted": 0, "not_posted": 1, "pending": 0, "error": "KUBERNETES_SERVICE_HOST is not set (no API server to post to)"})
    );
    let warned = runs[1]
        .2
        .iter()
        .filter(|l| l.contains("no event will be posted"))
        .count();
    assert_eq!(warned, 1, "{:#?}", runs[1].2);
    let again = runs[1].2.iter().filter(|l| l.contains(NOT_POSTED)).count();
    assert_eq!(again, 0, "{:#?}", runs[1].2);
}

#[test]
fn the_summary_line_is_the_termination_message_and_a_missing_default_is_left_alone() {
    let (dir, file, _) = pod_dir();
    let termination = dir.path().join("termination-log");
    std::fs::write(&termination, "left by an earlier run, longer than the summary line ...........................................").unwrap();
    let mut d = Daemon::follow(
        &file,
        None,
        &[
            "--linger",
            "100ms",
            "--termination-message-path",
            termination.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(hook(&file, "envoy", "exit 7").code(), Some(7));
    d.expect(Duration::from_secs(10), "the hook's records", || {
        d.stdout.contains("hook.finished")
    });
    d.stop(Duration::from_secs(20));
    let summary = d.summary();
    assert_eq!(
        std::fs::read_to_string(&termination).unwrap(),
        summary["message"].as_str().unwrap()
    );
    assert_eq!(summary["message"], "hooks: 1 failed (envoy=failed)");
    // The default path outside a pod: /dev/termination-log does not exist and is not made.
    if !Path::new("/dev/termination-log").exists() {
        let mut d = Daemon::follow(&file, None, &["--linger", "50ms"], &[]);
        d.stop(Duration::from_secs(20));
        assert!(!Path::new("/dev/termination-log").exists());
        assert!(
            !d.stderr.contains("termination message"),
            "{:#?}",
            d.stderr.lines()
        );
    }
}

#[test]
fn inject_events_adds_the_flag_names_the_rbac_and_check_warns_until_it_is_there() {
    let dir = tempfile::tempdir().unwrap();
    let incident = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/manifests/incidents/distroless-envoy-sleep.yaml");
    let original = std::fs::read_to_string(&incident).unwrap();
    let inject = |events: bool| {
        let mut cmd = hooklog();
        cmd.args(["inject", "--image", "registry.example.com/hooklog:0.1.0"]);
        if events {
            cmd.arg("--events");
        }
        let out = cmd.arg(&incident).output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        (
            String::from_utf8(out.stdout).unwrap(),
            String::from_utf8(out.stderr).unwrap(),
        )
    };
    let check =
        |text: &str, extra: &str| rbac_unknown_findings(dir.path(), &format!("{text}{extra}"), &[]);
    let (plain, plain_report) = inject(false);
    let (with, report) = inject(true);
    assert!(!plain.contains("--events") && !plain_report.contains("rbac"));
    assert!(report.contains("k8s/events/rbac.yaml"), "{report}");
    // Only the flag differs.
    let added: Vec<&str> = with
        .lines()
        .filter(|l| !plain.lines().any(|p| p == *l))
        .collect();
    assert_eq!(added, ["            - --events"], "{with}");
    assert!(check(&plain, "").is_empty());
    let found = check(&with, "");
    assert_eq!(found.len(), 1, "{found:#?}");
    assert_eq!(found[0]["severity"], "warning");
    assert_eq!(found[0]["container"], "hooklog");
    // The shipped RBAC beside it, in the pod's namespace: nothing to warn about.
    let ns = "shop";
    let rbac =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("k8s/events/rbac.yaml"))
            .unwrap()
            .replace(
                "  name: hooklog-events\nr",
                &format!("  name: hooklog-events\n  namespace: {ns}\nr"),
            )
            .replace(
                "  name: hooklog-events\nroleRef",
                &format!("  name: hooklog-events\n  namespace: {ns}\nroleRef"),
            );
    let with_ns = with.clone();
    assert!(with_ns.contains("namespace: shop"), "{with_ns}");
    assert!(check(&with_ns, &format!("---\n{rbac}")).is_empty());
    // Another namespace's grant is not this pod's.
    assert_eq!(
        check(&with_ns, &format!("---\n{}", rbac.replace(ns, "other"))).len(),
        1
    );
    // uninject takes the flag out with the rest.
    let back = hooklog()
        .args(["uninject", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write;
            c.stdin.take().unwrap().write_all(with.as_bytes())?;
            c.wait_with_output()
        })
        .unwrap();
    assert_eq!(String::from_utf8(back.stdout).unwrap(), original);
}

/// `inject --events` on what `inject` wrote gives what `inject --events` writes at once, for
/// every manifest of tests/manifests that inject takes (issue 29's leftover: re-inject did not
/// change the sidecar's args); a third run changes nothing, and `inject` without the flag does
/// not take it away.
#[test]
fn inject_events_on_an_injected_file_adds_the_flag_as_a_first_inject_would() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/manifests");
    let mut files = Vec::new();
    let mut dirs = vec![root];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "yaml") {
                files.push(p);
            }
        }
    }
    files.sort();
    let inject = |input: &[u8], events: bool| {
        let mut cmd = hooklog();
        cmd.args(["inject", "--image", "registry.example.com/hooklog:0.1.0"]);
        if events {
            cmd.arg("--events");
        }
        let mut child = cmd
            .arg("-")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let input = input.to_vec();
        let writer = std::thread::spawn(move || {
            use std::io::Write;
            // inject may refuse before reading it all.
            let _ = stdin.write_all(&input);
        });
        let out = child.wait_with_output().unwrap();
        writer.join().unwrap();
        (
            out.status.success(),
            out.stdout,
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let mut tried = 0;
    for file in &files {
        let original = std::fs::read(file).unwrap();
        let (ok, direct, _) = inject(&original, true);
        let (plain_ok, plain, _) = inject(&original, false);
        if !ok || !plain_ok || !String::from_utf8_lossy(&direct).contains("- --events") {
            continue;
        }
        let name = file.display();
        let (ok, again, report) = inject(&plain, true);
        assert!(ok, "{name}: {report}");
        assert_eq!(
            String::from_utf8_lossy(&again),
            String::from_utf8_lossy(&direct),
            "{name}: inject --events on inject's output is not inject --events"
        );
        // Unless every pod of it had the flag already (a file injected with it).
        if plain != direct {
            assert!(report.contains("now with --events"), "{name}: {report}");
        }
        let (ok, third, report) = inject(&again, true);
        assert!(
            ok && third == again,
            "{name}: a third inject changed it: {report}"
        );
        assert!(!report.contains("now with --events"), "{name}: {report}");
        let (ok, without, _) = inject(&again, false);
        assert!(
            ok && without == again,
            "{name}: inject without --events took it out"
        );
        tried += 1;
    }
    assert!(
        tried >= 5,
        "only {tried} manifests of {} tried",
        files.len()
    );
    eprintln!("{tried} manifests of {}", files.len());
}

#[test]
fn the_token_is_read_again_for_every_call_as_the_kubelet_rotates_it() {
    let Some(api) = Api::from_env() else { return };
    let t = PodTier::new(&api, "token", true);
    let mut d = t.daemon(&[]);
    assert_eq!(hook(&t.file, "envoy", "exit 3").code(), Some(3));
    t.first_event(&d, EVENT_SHOWS);
    // The kubelet replaces a projected token's file (atomically, by a rename); here with one the
    // API server does not know: the next call uses it and is refused.
    let token = t.sa_dir.join("token");
    let tmp = t.sa_dir.join(".token.tmp");
    std::fs::write(&tmp, "not-a-token-the-api-server-knows").unwrap();
    std::fs::rename(&tmp, &token).unwrap();
    assert_eq!(hook(&t.file, "app", "exit 4").code(), Some(4));
    d.expect(EVENT_SHOWS, "the refused call's warning", || {
        not_posted_warnings(&d) == 1
    });
    let summary = summary_at_exit(&mut d, Duration::from_secs(20));
    assert_eq!(summary["events"]["posted"], 1, "{summary:#}");
    assert_eq!(summary["events"]["not_posted"], 1, "{summary:#}");
    assert!(
        summary["events"]["error"]
            .as_str()
            .unwrap()
            .contains("HTTP 401"),
        "{summary:#}"
    );
    assert_eq!(t.events().len(), 1);
}
