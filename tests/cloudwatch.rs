//! `--output cloudwatch` against a real CloudWatch Logs API: moto's server (started by
//! scripts/test.sh, its URL in `HOOKLOG_TEST_MOTO`), reached through `AWS_ENDPOINT_URL`, with
//! tests/support/cwproxy.py in between to check every PutLogEvents request as AWS would and to
//! inject throttling, 5xx answers and outages. Records are read back with the SDK.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aws_sdk_cloudwatchlogs::Client;
use aws_sdk_cloudwatchlogs::config::{BehaviorVersion, Credentials, Region};
use serde_json::Value;

use crate::util::{Daemon, POD_ENV, in_ci, sh, wait_until};

/// The stream name the default template gives for `POD_ENV`.
const STREAM: &str = "shop/api-server-7d9f5";

/// moto's URL, or `None` (after a loud message) when it is not configured outside CI.
fn moto() -> Option<String> {
    let Ok(url) = std::env::var("HOOKLOG_TEST_MOTO") else {
        assert!(
            !in_ci(),
            "HOOKLOG_TEST_MOTO is not set: the CloudWatch tests need moto's server (run bash scripts/test.sh)"
        );
        eprintln!(
            "\n!!!!! SKIPPED: HOOKLOG_TEST_MOTO is not set, so no CloudWatch Logs server to test against.\n\
             !!!!! Run `bash scripts/test.sh`, or start `moto_server -H 127.0.0.1 -p PORT` and set\n\
             !!!!! HOOKLOG_TEST_MOTO=http://127.0.0.1:PORT. In CI this is a failure.\n"
        );
        return None;
    };
    let addr = url
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_string();
    assert!(
        TcpStream::connect(&addr).is_ok(),
        "HOOKLOG_TEST_MOTO={url}: moto's server does not answer"
    );
    Some(url)
}

/// A name no other test (or earlier run against the same moto) uses.
fn unique(prefix: &str) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{prefix}-{}-{nanos}", std::process::id())
}

/// The validating, fault-injecting proxy in front of moto.
struct Proxy {
    child: Child,
    /// moto's URL, where it forwards.
    upstream: String,
    port: u16,
    /// It answers HTTPS.
    https: bool,
    /// The proxy's stdout, where it says `listening PORT` once it listens.
    out: BufReader<std::process::ChildStdout>,
}

impl Proxy {
    fn start(upstream: &str) -> Proxy {
        Proxy::spawn(upstream, &[], "listening")
    }

    /// A proxy that answers HTTPS with `cert` and `key` (PEM files).
    fn start_tls(upstream: &str, cert: &Path, key: &Path) -> Proxy {
        let pair = format!("{}:{}", cert.display(), key.display());
        Proxy::spawn(upstream, &["--tls", &pair], "listening")
    }

    /// A proxy that holds its port but refuses connections (as a server that is down) until
    /// [`Proxy::listen`]: the port is the one the proxy bound, so nothing else takes it between
    /// (a port found free, released and bound again later could be).
    fn start_refusing(upstream: &str) -> Proxy {
        Proxy::spawn(upstream, &["--listen-on-stdin"], "bound")
    }

    /// A proxy that accepts the signatures of `keys` (`ACCESS:SECRET,...`) only.
    fn start_with_keys(upstream: &str, keys: &str) -> Proxy {
        Proxy::spawn(upstream, &["--keys", keys], "listening")
    }

    /// Runs cwproxy.py with `args` and waits for its `WORD PORT` line.
    fn spawn(upstream: &str, args: &[&str], word: &str) -> Proxy {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/cwproxy.py");
        let mut child = Command::new("python3")
            .arg(&script)
            .args(["--upstream", upstream])
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3 is needed for tests/support/cwproxy.py");
        let out = BufReader::new(child.stdout.take().unwrap());
        let mut p = Proxy {
            child,
            upstream: upstream.to_string(),
            port: 0,
            https: args.contains(&"--tls"),
            out,
        };
        p.expect_line(word);
        p
    }

    /// Reads the proxy's `WORD PORT` line and keeps the port.
    fn expect_line(&mut self, word: &str) {
        let mut line = String::new();
        self.out.read_line(&mut line).unwrap();
        let port = line
            .trim()
            .strip_prefix(word)
            .and_then(|p| p.trim().parse().ok())
            .unwrap_or_else(|| panic!("cwproxy did not say {word:?}: {line:?}"));
        assert!(
            self.port == 0 || self.port == port,
            "cwproxy moved to {port}"
        );
        self.port = port;
    }

    /// Starts listening on the port a [`Proxy::start_refusing`] holds.
    fn listen(&mut self) {
        let stdin = self.child.stdin.as_mut().expect("the proxy's stdin");
        stdin.write_all(b"listen\n").unwrap();
        stdin.flush().unwrap();
        self.expect_line("listening");
    }

    fn url(&self) -> String {
        let scheme = if self.https { "https" } else { "http" };
        format!("{scheme}://127.0.0.1:{}", self.port)
    }

    fn http(&self, method: &str, path: &str, body: &str) -> Value {
        if self.https {
            return self.https_control(method, path, body);
        }
        self.exchange(&format!("{method} {path} HTTP/1.1\r\nHost: x\r\n"), body)
            .1
    }

    /// Sends a PutLogEvents request with the extra `headers` as given (no signing) and returns
    /// the answer's status and AWS error type.
    fn raw_put(&self, headers: &str) -> (u16, String) {
        let body = r#"{"logGroupName":"g","logStreamName":"s","logEvents":[{"timestamp":1,"message":"m"}]}"#;
        let (status, v) = self.exchange(
            &format!(
                "POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Amz-Target: Logs_20140328.PutLogEvents\r\n{headers}"
            ),
            body,
        );
        (status, v["__type"].as_str().unwrap_or_default().to_string())
    }

    /// One plain-HTTP request (`head`: its request line and headers, each ending in `\r\n`) with
    /// `body`, on a connection of its own: the answer's status and JSON body.
    fn exchange(&self, head: &str, body: &str) -> (u16, Value) {
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        write!(
            s,
            "{head}Connection: close\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        let mut resp = String::new();
        s.read_to_string(&mut resp).unwrap();
        let status = resp
            .split(' ')
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or_else(|| panic!("not an HTTP answer: {resp}"));
        let (_, json) = resp.split_once("\r\n\r\n").expect("an HTTP answer");
        (status, serde_json::from_str(json).unwrap())
    }

    /// The control calls of an HTTPS proxy, by python (no TLS client in the tests otherwise).
    fn https_control(&self, method: &str, path: &str, body: &str) -> Value {
        let script = "import json, ssl, sys, urllib.request\n\
            ctx = ssl._create_unverified_context()\n\
            req = urllib.request.Request(sys.argv[1], data=sys.argv[3].encode() or None, method=sys.argv[2])\n\
            print(urllib.request.urlopen(req, context=ctx).read().decode())";
        let out = Command::new("python3")
            .args(["-c", script, &format!("{}{path}", self.url()), method, body])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    }

    fn faults(&self, json: &str) {
        self.http("POST", "/__cwproxy/faults", json);
    }

    fn stats(&self) -> Value {
        self.http("GET", "/__cwproxy/stats", "")
    }

    /// Fails the test if hooklog ever sent a request AWS would reject.
    fn assert_no_invalid_requests(&self) {
        let st = self.stats();
        assert_eq!(
            st["put_invalid"], 0,
            "hooklog sent requests AWS would reject: {st}"
        );
        assert_eq!(
            st["signature_invalid"], 0,
            "hooklog sent requests whose SigV4 signature AWS would refuse: {st}"
        );
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The SDK, pointed at moto, for reading back.
fn reader(moto: &str) -> (tokio::runtime::Runtime, Client) {
    reader_in(moto, "us-east-1")
}

/// [`reader`] for `region` (moto keeps each region's groups apart, as AWS does).
fn reader_in(moto: &str, region: &str) -> (tokio::runtime::Runtime, Client) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    (rt, sdk_client(moto, region, "testing"))
}

/// The SDK's client for `endpoint` in `region`, signing as `testing` with `secret`.
fn sdk_client(endpoint: &str, region: &str, secret: &str) -> Client {
    let conf = aws_sdk_cloudwatchlogs::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new(region.to_string()))
        .endpoint_url(endpoint)
        .credentials_provider(Credentials::new("testing", secret, None, None, "tests"))
        .http_client(aws_smithy_http_client::Builder::new().build_http())
        .build();
    Client::from_conf(conf)
}

/// Every message in the stream, oldest first, following the forward token to the end. An
/// absent group or stream reads as empty.
fn read_back(moto: &str, group: &str, stream: &str) -> Vec<String> {
    read_back_in(moto, "us-east-1", group, stream)
}

/// [`read_back`] from `region`.
fn read_back_in(moto: &str, region: &str, group: &str, stream: &str) -> Vec<String> {
    read_back_events_in(moto, region, group, stream)
        .into_iter()
        .map(|(_, m)| m)
        .collect()
}

/// Every (timestamp, message) in the stream, in CloudWatch's order (by timestamp; moto keeps
/// the order of arrival among equal timestamps).
fn read_back_events(moto: &str, group: &str, stream: &str) -> Vec<(i64, String)> {
    read_back_events_in(moto, "us-east-1", group, stream)
}

/// [`read_back_events`] from `region`.
fn read_back_events_in(moto: &str, region: &str, group: &str, stream: &str) -> Vec<(i64, String)> {
    let (rt, client) = reader_in(moto, region);
    rt.block_on(async {
        let mut out = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let res = client
                .get_log_events()
                .log_group_name(group)
                .log_stream_name(stream)
                .start_from_head(true)
                .set_next_token(token.clone())
                .send()
                .await;
            let page = match res {
                Ok(p) => p,
                Err(e)
                    if e.as_service_error()
                        .is_some_and(|s| s.is_resource_not_found_exception()) =>
                {
                    return out;
                }
                Err(e) => panic!("GetLogEvents: {e:?}"),
            };
            let events = page.events();
            out.extend(events.iter().filter_map(|e| {
                Some((e.timestamp().unwrap_or_default(), e.message()?.to_string()))
            }));
            let next = page.next_forward_token().map(str::to_string);
            if events.is_empty() || next.is_none() || next == token {
                return out;
            }
            token = next;
        }
    })
}

/// The env that points hooklog at `endpoint` with fake credentials.
fn aws_env(endpoint: &str) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = POD_ENV
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    for (k, v) in [
        ("AWS_ENDPOINT_URL", endpoint),
        ("AWS_ACCESS_KEY_ID", "testing"),
        ("AWS_SECRET_ACCESS_KEY", "testing"),
        ("AWS_SESSION_TOKEN", "testing"),
        ("AWS_REGION", "us-east-1"),
        ("AWS_EC2_METADATA_DISABLED", "true"),
    ] {
        env.push((k.to_string(), v.to_string()));
    }
    env
}

fn start(dir: &Path, group: &str, endpoint: &str, extra: &[&str]) -> Daemon {
    let file = dir.join("prestop.log");
    let mut args = vec![
        "--file",
        file.to_str().unwrap(),
        "--output",
        "cloudwatch",
        "--log-group",
        group,
        "--flush-interval",
        "200ms",
    ];
    args.extend_from_slice(extra);
    let env = aws_env(endpoint);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    Daemon::start(&args, &env)
}

/// Parses records (CloudWatch messages or stdout lines) and counts each `message`.
fn count_messages<'a>(lines: impl IntoIterator<Item = &'a String>) -> HashMap<String, usize> {
    let mut counts = HashMap::new();
    for l in lines {
        *counts.entry(message_key(l)).or_default() += 1;
    }
    counts
}

/// What [`count_messages`] counts a record (a CloudWatch message or a stdout line) as: its
/// `message`, or `<summary>` for the summary.
fn message_key(record: &str) -> String {
    let v: Value = serde_json::from_str(record)
        .unwrap_or_else(|e| panic!("not a JSON record ({e}): {record:.200}"));
    match v["event"].as_str() {
        Some("hooks.summary") => "<summary>".to_string(),
        _ => v["message"].as_str().unwrap_or("<none>").to_string(),
    }
}

/// Asserts every `want` message (and one summary) appears exactly once in `counts`, and nothing
/// else does.
fn assert_exactly_once(counts: &HashMap<String, usize>, want: &[String]) {
    let mut missing = Vec::new();
    for w in want {
        match counts.get(w) {
            Some(1) => {}
            Some(n) => panic!("{w:?} appears {n} times"),
            None => missing.push(w.clone()),
        }
    }
    assert!(
        missing.is_empty(),
        "{} records missing, e.g. {:?}",
        missing.len(),
        &missing[..missing.len().min(5)]
    );
    assert_eq!(
        counts.get("<summary>"),
        Some(&1),
        "the hooks.summary record, once"
    );
    assert_eq!(
        counts.len(),
        want.len() + 1,
        "unexpected records: {} distinct",
        counts.len()
    );
}

/// The value of `key=N` in hooklog's last "hooklog stopped" line.
fn stopped_counter(d: &Daemon, key: &str) -> u64 {
    logged_number(d, "hooklog stopped", key) as u64
}

/// The value of `key=N` (N may be negative) in hooklog's last stderr line containing `line`.
fn logged_number(d: &Daemon, line: &str, key: &str) -> i64 {
    let lines = d.stderr.lines();
    let found = lines
        .iter()
        .rev()
        .find(|l| l.contains(line))
        .unwrap_or_else(|| panic!("no {line:?} line: {lines:#?}"));
    let pat = format!(" {key}=");
    let at = found
        .find(&pat)
        .unwrap_or_else(|| panic!("{key} not in {found}"))
        + pat.len();
    let digits = found[at..]
        .char_indices()
        .take_while(|&(i, c)| c.is_ascii_digit() || (i == 0 && c == '-'))
        .count();
    found[at..at + digits].parse().unwrap()
}

/// The committed offset in a file's checkpoint (`.hooklog/NAME.offset` beside it).
fn checkpoint_offset(file: &Path) -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    let name = file.file_name().unwrap().to_str().unwrap();
    let cp = file
        .with_file_name(".hooklog")
        .join(format!("{name}.offset"));
    let text = std::fs::read_to_string(cp).ok()?;
    // One `dev ino offset fingerprint-len fingerprint-crc born` line per file being read.
    let ino = std::fs::metadata(file).ok()?.ino().to_string();
    text.lines()
        .map(|l| l.split(' ').collect::<Vec<_>>())
        .find(|f| f.len() == 6 && f[1] == ino)
        .and_then(|f| f[2].parse().ok())
}

fn lines(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}-{i:06}")).collect()
}

/// Appends `lines` to the file at `path`, each with its newline, in one write.
fn append(path: &Path, lines: &[String]) {
    let mut buf = lines.join("\n");
    buf.push('\n');
    crate::util::append(path, buf);
}

/// One test's `hooklog run --output cloudwatch` to a log group of its own: the pod's folder (its
/// `prestop.log`), the group, and where the stream is read back (moto, in `region`).
struct Shipping {
    /// Dropped (killed, if a test failed before it stopped) before its folder goes.
    d: Daemon,
    moto: String,
    region: String,
    group: String,
    dir: tempfile::TempDir,
}

impl Shipping {
    /// Hooklog as [`start`] runs it, to `proxy` (read back from moto behind it) with `extra`
    /// arguments, for a group named after `name`.
    fn through(proxy: &Proxy, name: &str, extra: &[&str]) -> Shipping {
        Shipping::start(&proxy.upstream, name, &proxy.url(), extra)
    }

    /// Hooklog as [`start`] runs it, to `endpoint` with `extra` arguments, for a group named
    /// after `name`.
    fn start(moto: &str, name: &str, endpoint: &str, extra: &[&str]) -> Shipping {
        Shipping::spawn(moto, "us-east-1", name, |dir, group| {
            start(dir, group, endpoint, extra)
        })
    }

    /// Hooklog as [`start_with_aws_env`] runs it, to `proxy` with only `aws` of the AWS
    /// variables; its stream is read back from `region`.
    fn with_aws_env(proxy: &Proxy, region: &str, name: &str, aws: &[(&str, String)]) -> Shipping {
        Shipping::spawn(&proxy.upstream, region, name, |dir, group| {
            start_with_aws_env(dir, group, &proxy.url(), aws)
        })
    }

    fn spawn(
        moto: &str,
        region: &str,
        name: &str,
        daemon: impl FnOnce(&Path, &str) -> Daemon,
    ) -> Shipping {
        let dir = tempfile::tempdir().unwrap();
        let group = unique(name);
        let d = daemon(dir.path(), &group);
        Shipping {
            d,
            moto: moto.to_string(),
            region: region.to_string(),
            group,
            dir,
        }
    }

    /// The pod's file hooklog follows.
    fn file(&self) -> PathBuf {
        self.dir.path().join("prestop.log")
    }

    fn write(&self, lines: &[String]) {
        append(&self.file(), lines);
    }

    /// Every message in the group's stream so far.
    fn shipped(&self) -> Vec<String> {
        read_back_in(&self.moto, &self.region, &self.group, STREAM)
    }

    /// Waits up to `secs` until the stream holds `n` messages; fails with `what` when it does not.
    fn await_shipped(&self, n: usize, secs: u64, what: &str) {
        self.d.expect(Duration::from_secs(secs), what, || {
            self.shipped().len() >= n
        });
    }

    /// Writes `lines` and waits up to `secs` until the stream holds them too.
    fn ship(&self, lines: &[String], secs: u64, what: &str) {
        let before = self.shipped().len();
        self.write(lines);
        self.await_shipped(before + lines.len(), secs, what);
    }

    /// Stops hooklog (SIGTERM) within 15 s.
    fn stop(&mut self) {
        self.d.stop(Duration::from_secs(15));
    }

    /// SIGTERM, and a clean exit within `secs`; `name` says which case failed.
    fn exits_cleanly(&mut self, secs: u64, name: &str) {
        self.d.terminate();
        let st = self.d.wait_exit(Duration::from_secs(secs));
        assert!(
            st.success(),
            "{name}: exit {st}; stderr: {:#?}",
            self.d.stderr.lines()
        );
    }

    /// Every `want` record (and one summary) exactly once in the stream, and none on stdout.
    fn assert_all_shipped(&self, want: &[String]) {
        assert_exactly_once(&count_messages(&self.shipped()), want);
        self.assert_nothing_fell_back();
    }

    fn assert_nothing_fell_back(&self) {
        assert!(
            self.d.stdout.lines().is_empty(),
            "nothing should fall back to stdout: {:?}; stderr: {:#?}",
            self.d.stdout.lines(),
            self.d.stderr.lines()
        );
    }

    /// Every `want` record (and one summary) exactly once on stdout.
    fn assert_all_on_stdout(&self, want: &[String]) {
        assert_exactly_once(&count_messages(&self.d.stdout.lines()), want);
    }

    /// Every `want` record (and one summary) exactly once, in the stream or on stdout.
    fn assert_shipped_or_fell_back_once(&self, want: &[String]) {
        let mut all = self.shipped();
        all.extend(self.d.stdout.lines());
        assert_exactly_once(&count_messages(&all), want);
    }
}

#[test]
fn creates_group_and_stream_and_ships_thousands_of_records_exactly_once() {
    let Some(moto) = moto() else { return };
    let proxy = Proxy::start(&moto);
    let mut s = Shipping::through(&proxy, "hooklog-happy", &["--retention-days", "7", "--emf"]);
    let want = lines("rec", 6000);
    // Written by a real shell, in pieces, while hooklog runs.
    sh(s.dir.path(), "seq -f 'rec-%06g' 0 2999 >> prestop.log");
    s.write(&want[3000..]);
    s.await_shipped(want.len(), 30, "records did not reach CloudWatch");
    s.stop();
    s.assert_all_shipped(&want);
    proxy.assert_no_invalid_requests();
    let st = proxy.stats();
    assert!(
        st["put_ok"].as_u64().unwrap() >= 2,
        "expected several batches: {st}"
    );
    assert_eq!(
        stopped_counter(&s.d, "cloudwatch_shipped"),
        want.len() as u64 + 1
    );
    assert_eq!(stopped_counter(&s.d, "cloudwatch_fell_back"), 0);

    // The retention was set on the group hooklog created.
    let (rt, client) = reader(&moto);
    let groups = rt
        .block_on(
            client
                .describe_log_groups()
                .log_group_name_prefix(&s.group)
                .send(),
        )
        .unwrap();
    assert_eq!(groups.log_groups()[0].retention_in_days(), Some(7));

    // --emf: the summary carries Embedded Metric Format as it lands in CloudWatch.
    let summary: Value = s
        .shipped()
        .iter()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|v| v["event"] == "hooks.summary")
        .unwrap();
    assert_eq!(
        summary["_aws"]["CloudWatchMetrics"][0]["Namespace"],
        "hooklog"
    );
    assert_eq!(summary["namespace"], "shop");
    assert_eq!(summary["HooksFailed"], 0);
    assert_eq!(summary["kubernetes"]["pod_name"], "api-server-7d9f5");
}

#[test]
fn a_second_pod_on_the_same_group_and_stream_is_fine() {
    let Some(moto) = moto() else { return };
    let dir = tempfile::tempdir().unwrap();
    let group = unique("hooklog-exists");
    for round in 0..2 {
        let mut d = start(dir.path(), &group, &moto, &[]);
        append(&dir.path().join("prestop.log"), &[format!("round-{round}")]);
        d.stop(Duration::from_secs(15));
        assert!(
            d.stdout.lines().is_empty(),
            "stderr: {:#?}",
            d.stderr.lines()
        );
    }
    let got = read_back(&moto, &group, STREAM);
    let counts = count_messages(&got);
    assert_eq!(counts.get("round-0"), Some(&1));
    assert_eq!(counts.get("round-1"), Some(&1));
    assert_eq!(counts.get("<summary>"), Some(&2));
}

#[test]
fn an_oversize_record_is_split_into_events_not_dropped() {
    let Some(moto) = moto() else { return };
    let proxy = Proxy::start(&moto);
    // A 1.5 MB line: one record (the cap is raised above it), more than one CloudWatch event.
    let mut s = Shipping::through(&proxy, "hooklog-big", &["--max-line-bytes", "2000000"]);
    let big = format!("big-{}", "x".repeat(1_500_000));
    s.write(std::slice::from_ref(&big));
    s.exits_cleanly(20, "a 1.5 MB record");
    proxy.assert_no_invalid_requests();
    let got = s.shipped();
    // The summary is one event; the big record is the concatenation of the others, in order.
    let (summary, parts): (Vec<&String>, Vec<&String>) =
        got.iter().partition(|m| m.contains("hooks.summary"));
    assert_eq!(summary.len(), 1);
    assert!(
        parts.len() >= 2,
        "expected the record in parts, got {} events",
        parts.len()
    );
    let joined: String = parts.iter().map(|s| s.as_str()).collect();
    let record: Value = serde_json::from_str(&joined).expect("the parts join into the record");
    assert_eq!(record["message"], big.as_str());
    s.assert_nothing_fell_back();
}

#[test]
fn interleaved_inputs_go_out_in_arrival_order_with_timestamps_that_never_go_down() {
    let Some(moto) = moto() else { return };
    let proxy = Proxy::start(&moto);
    let inputs = tempfile::tempdir().unwrap();
    let other = inputs.path().join("other.log");
    let sock: PathBuf = inputs.path().join("hooklog.sock");
    let mut s = Shipping::through(
        &proxy,
        "hooklog-order",
        &[
            "--file",
            other.to_str().unwrap(),
            "--socket",
            sock.to_str().unwrap(),
        ],
    );
    let a = lines("a", 3000);
    let b = lines("b", 3000);
    let c = lines("c", 3000);
    // Three writers at once, each in small pieces, so batches from the inputs interleave.
    let main = s.file();
    std::thread::scope(|s| {
        s.spawn(|| {
            for chunk in a.chunks(100) {
                append(&main, chunk);
            }
        });
        s.spawn(|| {
            for chunk in b.chunks(100) {
                append(&other, chunk);
            }
        });
        s.spawn(|| {
            let mut conn = UnixStream::connect(&sock).unwrap();
            for chunk in c.chunks(100) {
                conn.write_all((chunk.join("\n") + "\n").as_bytes())
                    .unwrap();
            }
        });
    });
    let total = a.len() + b.len() + c.len();
    s.await_shipped(total, 30, "records did not reach CloudWatch");
    s.stop();
    // Every request was in chronological order (the proxy checks, as does moto)...
    proxy.assert_no_invalid_requests();
    // ...and so were the requests one after another: none started before the one before ended.
    let st = proxy.stats();
    assert_eq!(st["stamp_went_back"], 0, "{st}");
    assert!(
        st["put_ok"].as_u64().unwrap() >= 3,
        "several requests: {st}"
    );
    let got = s.shipped();
    let want: Vec<String> = a.iter().chain(&b).chain(&c).cloned().collect();
    assert_exactly_once(&count_messages(&got), &want);
    // In the stream's order, each input's lines are in the order they were written, and the
    // summary is last.
    let order: Vec<String> = got.iter().map(|m| message_key(m)).collect();
    for (prefix, written) in [("a-", &a), ("b-", &b), ("c-", &c)] {
        let seen: Vec<&String> = order.iter().filter(|m| m.starts_with(prefix)).collect();
        let first_wrong = seen.iter().zip(written.iter()).position(|(s, w)| *s != w);
        assert_eq!(
            first_wrong, None,
            "input {prefix}: the stream's order is not the order written"
        );
    }
    assert_eq!(order.last().map(String::as_str), Some("<summary>"));
}

#[test]
fn server_down_at_start_and_up_later_loses_nothing() {
    let Some(moto) = moto() else { return };
    let mut proxy = Proxy::start_refusing(&moto);
    let mut s = Shipping::through(&proxy, "hooklog-late", &[]);
    let want = lines("late", 500);
    s.write(&want);
    s.d.expect(
        Duration::from_secs(10),
        "hooklog should be retrying",
        || s.d.stderr.contains("retrying"),
    );
    // Nothing is acknowledged while CloudWatch has not taken it: the file's checkpoint stays
    // behind (it is saved every second; three saves pass).
    let file = s.file();
    let at_end = || checkpoint_offset(&file) == Some(std::fs::metadata(&file).unwrap().len());
    assert!(
        !wait_until(Duration::from_secs(3), at_end),
        "the checkpoint moved past records CloudWatch never accepted"
    );
    // The server comes up on the address hooklog was given.
    proxy.listen();
    s.await_shipped(
        want.len(),
        40,
        "records did not arrive once the server was up",
    );
    assert!(
        wait_until(Duration::from_secs(10), at_end),
        "the checkpoint should follow once accepted"
    );
    s.stop();
    s.assert_all_shipped(&want);
    assert!(stopped_counter(&s.d, "cloudwatch_retried") >= 1);
    proxy.assert_no_invalid_requests();
}

/// Ships `first`, then takes the server behind `proxy` down and writes `second`, until hooklog
/// has tried the downed server.
fn ship_then_go_down(s: &Shipping, proxy: &Proxy, first: &[String], second: &[String]) {
    s.ship(first, 20, "first records did not arrive");
    proxy.faults(r#"{"down": true}"#);
    s.write(second);
    s.d.expect(
        Duration::from_secs(10),
        "hooklog should be trying the downed server",
        || proxy.stats()["dropped"].as_u64().unwrap() > 0,
    );
}

#[test]
fn server_down_through_shutdown_falls_back_to_stdout_exactly_once() {
    let Some(moto) = moto() else { return };
    let proxy = Proxy::start(&moto);
    let mut s = Shipping::through(&proxy, "hooklog-down", &["--grace", "5s"]);
    let first = lines("before", 200);
    let second = lines("after", 300);
    ship_then_go_down(&s, &proxy, &first, &second);
    s.exits_cleanly(10, "down through the shutdown");
    assert!(s.d.started.elapsed() < Duration::from_secs(60));
    assert!(
        !s.d.stdout.lines().is_empty(),
        "the fallback should have written records to stdout"
    );
    let want: Vec<String> = first.into_iter().chain(second).collect();
    s.assert_shipped_or_fell_back_once(&want);
    assert_eq!(
        stopped_counter(&s.d, "cloudwatch_fell_back"),
        s.d.stdout.len() as u64
    );
}

#[test]
fn throttling_and_server_errors_are_retried_until_accepted() {
    let Some(moto) = moto() else { return };
    let proxy = Proxy::start(&moto);
    proxy.faults(r#"{"throttle": 3, "error5xx": 2}"#);
    let mut s = Shipping::through(&proxy, "hooklog-throttle", &[]);
    let want = lines("thr", 300);
    s.ship(&want, 30, "records did not arrive");
    s.stop();
    let st = proxy.stats();
    assert_eq!(st["throttled"], 3, "{st}");
    assert_eq!(st["errors5xx"], 2, "{st}");
    s.assert_all_shipped(&want);
    assert!(stopped_counter(&s.d, "cloudwatch_retried") >= 5);
}

/// The proxy must be able to fail hooklog: it rejects what AWS rejects, in AWS's error shape.
#[test]
fn the_validating_proxy_rejects_what_aws_rejects() {
    use aws_sdk_cloudwatchlogs::types::InputLogEvent;
    let Some(moto) = moto() else { return };
    let proxy = Proxy::start(&moto);
    let (rt, client) = reader(&proxy.url());
    let group = unique("hooklog-proxy");
    rt.block_on(async {
        client
            .create_log_group()
            .log_group_name(&group)
            .send()
            .await
            .unwrap();
        client
            .create_log_stream()
            .log_group_name(&group)
            .log_stream_name("s")
            .send()
            .await
            .unwrap();
    });
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let ev = |t: i64, len: usize| {
        InputLogEvent::builder()
            .timestamp(t)
            .message("x".repeat(len))
            .build()
            .unwrap()
    };
    let bad: Vec<(&str, Vec<InputLogEvent>)> = vec![
        ("chronological", vec![ev(now, 1), ev(now - 1, 1)]),
        ("more than 10000", (0..10_001).map(|_| ev(now, 1)).collect()),
        (
            "more than 1048576",
            vec![ev(now, 600_000), ev(now, 600_000)],
        ),
        ("more than 1048550", vec![ev(now, 1_048_551)]),
        ("24 hours", vec![ev(now - 25 * 3600 * 1000, 1), ev(now, 1)]),
    ];
    for (why, events) in bad {
        let err = rt
            .block_on(
                client
                    .put_log_events()
                    .log_group_name(&group)
                    .log_stream_name("s")
                    .set_log_events(Some(events))
                    .send(),
            )
            .expect_err(why);
        let se = err
            .as_service_error()
            .unwrap_or_else(|| panic!("{why}: {err:?}"));
        assert!(se.is_invalid_parameter_exception(), "{why}: {se:?}");
        assert!(format!("{se:?}").contains(why), "{why}: {se:?}");
    }
    // At the limits exactly, AWS (and the proxy) accept.
    let ok = vec![ev(now - 24 * 3600 * 1000, 1_048_550 - 27), ev(now, 1)];
    rt.block_on(
        client
            .put_log_events()
            .log_group_name(&group)
            .log_stream_name("s")
            .set_log_events(Some(ok))
            .send(),
    )
    .unwrap();
    assert_eq!(proxy.stats()["put_invalid"], 5);

    // SigV4, checked with botocore's signer: a request signed with another secret is refused as
    // AWS refuses it, and so is one without a date or without a signature.
    let err = rt
        .block_on(
            sdk_client(&proxy.url(), "us-east-1", "not-the-secret")
                .put_log_events()
                .log_group_name(&group)
                .log_stream_name("s")
                .set_log_events(Some(vec![ev(now, 1)]))
                .send(),
        )
        .expect_err("signed with the wrong secret");
    {
        use aws_sdk_cloudwatchlogs::error::ProvideErrorMetadata;
        assert_eq!(err.code(), Some("InvalidSignatureException"), "{err:?}");
    }
    let undated = "Authorization: AWS4-HMAC-SHA256 Credential=testing/20260101/us-east-1/logs/aws4_request, SignedHeaders=host;x-amz-target, Signature=0000\r\n";
    assert_eq!(
        proxy.raw_put(undated),
        (400, "IncompleteSignatureException".to_string())
    );
    assert_eq!(
        proxy.raw_put(""),
        (400, "MissingAuthenticationTokenException".to_string())
    );
    let st = proxy.stats();
    assert_eq!(st["signature_invalid"], 3, "{st}");
    assert_eq!(
        st["put_ok"], 1,
        "only the request at the limits was taken: {st}"
    );
}

#[test]
fn events_cloudwatch_rejects_as_too_old_go_to_stdout_exactly_once() {
    let Some(moto) = moto() else { return };
    let proxy = Proxy::start(&moto);
    proxy.faults(r#"{"reject_old": 7}"#);
    let mut s = Shipping::through(&proxy, "hooklog-rejected", &[]);
    let want = lines("rej", 100);
    s.write(&want);
    s.await_shipped(want.len() - 7, 20, "records did not arrive");
    s.stop();
    assert_eq!(proxy.stats()["rejected_old"], 7);
    // The first 7 of the first request (in timestamp order) are on stdout, the rest on CloudWatch.
    let stdout = s.d.stdout.lines();
    assert_eq!(stdout.len(), 7, "stdout: {stdout:#?}");
    s.assert_shipped_or_fell_back_once(&want);
    assert_eq!(stopped_counter(&s.d, "cloudwatch_fell_back"), 7);
}

#[test]
fn a_group_deleted_while_running_is_created_again() {
    let Some(moto) = moto() else { return };
    let mut s = Shipping::start(&moto, "hooklog-deleted", &moto, &[]);
    s.ship(&lines("first", 10), 20, "first records did not arrive");
    let (rt, client) = reader(&moto);
    rt.block_on(client.delete_log_group().log_group_name(&s.group).send())
        .unwrap();
    let want = lines("second", 10);
    s.write(&want);
    s.await_shipped(want.len(), 20, "records after the deletion did not arrive");
    s.stop();
    s.assert_all_shipped(&want);
}

#[test]
fn with_both_outputs_the_fallback_does_not_write_records_twice() {
    let Some(moto) = moto() else { return };
    let proxy = Proxy::start(&moto);
    let mut s = Shipping::through(
        &proxy,
        "hooklog-both",
        &["--output", "stdout,cloudwatch", "--grace", "5s"],
    );
    let first = lines("both-a", 100);
    let second = lines("both-b", 100);
    ship_then_go_down(&s, &proxy, &first, &second);
    s.d.stop(Duration::from_secs(10));
    let want: Vec<String> = first.iter().chain(&second).cloned().collect();
    // stdout holds every record once (the stdout sink), the fallback added nothing...
    s.assert_all_on_stdout(&want);
    // ...and CloudWatch holds what it took before the outage, once.
    let cw = count_messages(&s.shipped());
    assert!(first.iter().all(|m| cw.get(m) == Some(&1)), "{cw:?}");
    assert!(second.iter().all(|m| !cw.contains_key(m)), "{cw:?}");
    assert!(stopped_counter(&s.d, "cloudwatch_fell_back") >= second.len() as u64);
}

/// The record's own `time` field (when hooklog read it, on the pod's clock), in ms.
fn record_time_ms(message: &str) -> i64 {
    let v: Value = serde_json::from_str(message).unwrap();
    let t = v["time"]
        .as_str()
        .unwrap_or_else(|| panic!("no time: {message}"));
    // YYYY-MM-DDTHH:MM:SS.mmmZ
    let n = |a: usize, b: usize| t[a..b].parse::<i64>().unwrap();
    let (y, m, d) = (n(0, 4), n(5, 7), n(8, 10));
    // Days from the civil date (Howard Hinnant's days_from_civil).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    ((days * 24 + n(11, 13)) * 60 + n(14, 16)) * 60_000 + n(17, 19) * 1000 + n(20, 23)
}

/// CloudWatch's clock is `offset_s` away from the pod's: every record still lands on
/// CloudWatch (none on stdout), at the time hooklog read it on CloudWatch's clock. moto, on the
/// pod's clock, stores them `store_shift_s` earlier (to keep them within its own window).
fn lands_at_cloudwatch_s_time(offset_s: i64, store_shift_s: i64, name: &str) {
    let Some(moto) = moto() else { return };
    let proxy = Proxy::start(&moto);
    proxy.faults(&format!(
        r#"{{"clock_offset_s": {offset_s}, "store_shift_s": {store_shift_s}}}"#
    ));
    let mut s = Shipping::through(&proxy, name, &[]);
    let want = lines(name, 300);
    s.ship(&want, 30, "records did not arrive");
    s.stop();
    s.assert_all_shipped(&want);
    let got = read_back_events(&moto, &s.group, STREAM);
    let st = proxy.stats();
    proxy.assert_no_invalid_requests();
    assert_eq!(st["rejected_new"], 0, "{st}");
    assert_eq!(st["rejected_old"], 0, "{st}");
    // The first call was signed with the pod's clock and refused, as AWS refuses it; its
    // answer's Date taught hooklog CloudWatch's clock, and every call after was signed with it.
    assert!(st["signature_refused"].as_u64().unwrap() >= 1, "{st}");
    // On CloudWatch's clock, every event is stamped when it was read (within the flush
    // interval and the retry), not hours or days away.
    let error = st["max_stamp_error_ms"].as_i64().unwrap();
    assert!(
        error < 30_000,
        "events stamped {error} ms from CloudWatch's now: {st}"
    );
    // Each event's timestamp is its record's `time` (the pod's clock) moved to CloudWatch's,
    // give or take the offset's error.
    for (ts, m) in &got {
        let diff = ts + store_shift_s * 1000 - record_time_ms(m) - offset_s * 1000;
        assert!(diff.abs() <= 2_500, "timestamp {ts}: {diff} ms off: {m}");
    }
    let offset = logged_number(&s.d, "cloudwatch sink stopped", "clock_offset_ms");
    assert!(
        (offset - offset_s * 1000).abs() <= 2_500,
        "clock_offset_ms={offset}"
    );
    assert!(
        logged_number(&s.d, "cloudwatch sink stopped", "adjusted") >= want.len() as i64,
        "every record's timestamp was corrected"
    );
}

/// Issue 9: a pod clock 3 hours ahead of CloudWatch's made every event "too new"; CloudWatch
/// rejected them and they went to stdout.
#[test]
fn a_pod_clock_three_hours_ahead_of_cloudwatch_s_still_ships_every_record() {
    lands_at_cloudwatch_s_time(-3 * 3600, 0, "hooklog-ahead");
}

/// Issue 9: a pod clock 20 days behind CloudWatch's made every event "too old".
#[test]
fn a_pod_clock_twenty_days_behind_cloudwatch_s_still_ships_every_record() {
    // moto would take nothing 20 days ahead of the machine's clock: it stores them 20 days back.
    lands_at_cloudwatch_s_time(20 * 24 * 3600, 20 * 24 * 3600, "hooklog-behind");
}

/// Issue 9: a clock that steps back must not reorder the stream. Here CloudWatch's clock, as
/// hooklog sees it, steps back an hour between two runs of records (the proxy's `Date` goes
/// back, as when a pod clock running ahead is put right): the later records would sort before
/// the earlier ones. They are held at the stream's last timestamp instead, and the summary
/// stays last. (A step back of the pod's own clock goes through the same code, `batch::stamp`;
/// its unit tests cover it.)
#[test]
fn a_clock_step_back_keeps_the_stream_in_order_with_the_summary_last() {
    let Some(moto) = moto() else { return };
    let proxy = Proxy::start(&moto);
    let mut s = Shipping::through(&proxy, "hooklog-stepback", &[]);
    let first = lines("before-step", 100);
    s.ship(&first, 20, "first records did not arrive");
    proxy.faults(r#"{"clock_offset_s": -3600}"#);
    let second = lines("after-step", 100);
    s.ship(&second, 20, "records after the step did not arrive");
    s.stop();
    proxy.assert_no_invalid_requests();
    let want: Vec<String> = first.iter().chain(&second).cloned().collect();
    s.assert_all_shipped(&want);
    // CloudWatch's order (by timestamp) is the order the records were written in, then the
    // summary.
    let got = read_back_events(&moto, &s.group, STREAM);
    let order: Vec<String> = got.iter().map(|(_, m)| message_key(m)).collect();
    let mut expected = want.clone();
    expected.push("<summary>".into());
    assert_eq!(order, expected);
    // Everything after the step sits at the last timestamp before it.
    let last_before = got[first.len() - 1].0;
    let after: Vec<i64> = got[first.len()..]
        .iter()
        .map(|(ts, _)| ts - last_before)
        .collect();
    assert!(
        after.iter().all(|d| *d == 0),
        "after the step, ms past the last timestamp before it: {after:?}"
    );
    assert!(
        s.d.stderr.contains("clock stepped back"),
        "a warning says why: {:#?}",
        s.d.stderr.lines()
    );
    assert!(
        logged_number(&s.d, "cloudwatch sink stopped", "adjusted") > second.len() as i64,
        "the held records (and the summary) count as adjusted"
    );
}

/// One request a [`CredServer`] received.
#[derive(Debug, Clone)]
struct Seen {
    method: String,
    path: String,
    /// Header names lower-cased.
    headers: HashMap<String, String>,
    body: String,
}

/// A credential source on 127.0.0.1 (STS, container credentials or IMDS, as `answer` plays
/// it): real sockets, one request per connection, every request kept.
struct CredServer {
    port: u16,
    seen: std::sync::Arc<std::sync::Mutex<Vec<Seen>>>,
}

type Answer = (u16, String);

impl CredServer {
    fn start(answer: impl Fn(&Seen) -> Answer + Send + Sync + 'static) -> CredServer {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let kept = seen.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut conn) = conn else { return };
                let Some((head, body)) = crate::util::http::read_request(&mut conn) else {
                    continue;
                };
                let mut head = head.lines();
                let mut line = head.next().unwrap_or_default().split_whitespace();
                let method = line.next().unwrap_or_default().to_string();
                let path = line.next().unwrap_or_default().to_string();
                let headers = head
                    .filter_map(|h| h.split_once(':'))
                    .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
                    .collect();
                let req = Seen {
                    method,
                    path,
                    headers,
                    body: String::from_utf8_lossy(&body).into_owned(),
                };
                let (status, text) = answer(&req);
                // IMDS answers a session token with its TTL (the SDK requires it).
                let ttl = req
                    .headers
                    .get("x-aws-ec2-metadata-token-ttl-seconds")
                    .map(|t| format!("x-aws-ec2-metadata-token-ttl-seconds: {t}\r\n"))
                    .unwrap_or_default();
                kept.lock().unwrap().push(req);
                let _ = write!(
                    conn,
                    "HTTP/1.1 {status} X\r\nContent-Length: {}\r\n{ttl}Connection: close\r\n\r\n{text}",
                    text.len()
                );
            }
        });
        CredServer { port, seen }
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

/// An RFC 3339 UTC time `from_now_s` seconds from now.
fn rfc3339_from_now(from_now_s: i64) -> String {
    let ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
        + from_now_s * 1000;
    let s = String::from_utf8(hooklog::timefmt::rfc3339_ms(ms).to_vec()).unwrap();
    format!("{}Z", &s[..19])
}

/// The JSON the container and instance metadata services answer with: the proxy's test key.
fn metadata_json(expires_in_s: i64) -> String {
    serde_json::json!({
        "Code": "Success",
        "AccessKeyId": "testing",
        "SecretAccessKey": "testing",
        "Token": "session-token-from-the-source",
        "Expiration": rfc3339_from_now(expires_in_s),
    })
    .to_string()
}

/// Starts `hooklog run --output cloudwatch` to `endpoint` with only `aws` of the AWS
/// variables (every other one the tests' environment has is removed; an empty value removes
/// `AWS_REGION` too). `HOME` is an empty folder: no `~/.aws` of the machine's is read.
fn start_with_aws_env(dir: &Path, group: &str, endpoint: &str, aws: &[(&str, String)]) -> Daemon {
    Daemon::spawn(start_command(dir, group, endpoint, aws))
}

/// The command [`start_with_aws_env`] runs.
fn start_command(
    dir: &Path,
    group: &str,
    endpoint: &str,
    aws: &[(&str, String)],
) -> std::process::Command {
    let file = dir.join("prestop.log");
    let mut cmd = crate::util::hooklog();
    for (k, _) in std::env::vars() {
        if k.starts_with("AWS_") {
            cmd.env_remove(k);
        }
    }
    cmd.args(["run", "--file"])
        .arg(&file)
        .env("HOME", dir)
        .args(["--output", "cloudwatch", "--log-group", group])
        .args(["--flush-interval", "200ms", "--grace", "3s"])
        .envs(POD_ENV.iter().copied())
        .env("AWS_ENDPOINT_URL_CLOUDWATCH_LOGS", endpoint)
        .env("AWS_REGION", "us-east-1");
    for (k, v) in aws {
        if v.is_empty() {
            cmd.env_remove(k);
        } else {
            cmd.env(k, v);
        }
    }
    cmd
}

/// Ships `n` records with the credentials `aws` points at and checks they all arrived,
/// signed (the proxy checks every signature against the key the source gave).
fn ships_with(moto: &str, name: &str, aws: &[(&str, String)], n: usize) -> Daemon {
    ships_through(&Proxy::start(moto), "us-east-1", name, aws, n)
}

/// [`ships_with`] through `proxy` (one that accepts other keys, or whose stats the test reads).
fn ships_through(
    proxy: &Proxy,
    region: &str,
    name: &str,
    aws: &[(&str, String)],
    n: usize,
) -> Daemon {
    let mut s = Shipping::with_aws_env(proxy, region, name, aws);
    // In a few pieces, so that several calls are made.
    let want = lines(name, n);
    for chunk in want.chunks(n.div_ceil(3)) {
        s.ship(chunk, 20, "records did not arrive");
    }
    s.stop();
    s.assert_all_shipped(&want);
    proxy.assert_no_invalid_requests();
    s.d
}

/// Every request `proxy` took was signed with `key` for `region`, and at least three were (one
/// for each piece [`ships_through`] writes).
fn assert_signed_only_with(proxy: &Proxy, key: &str, region: &str) {
    let stats = proxy.stats();
    for (field, only) in [("signed_by", key), ("signed_in", region)] {
        let counts = stats[field].as_object().unwrap();
        assert_eq!(
            counts.keys().collect::<Vec<_>>(),
            [only],
            "{field}: {stats:#}"
        );
        assert!(counts[only].as_u64().unwrap() >= 3, "{field}: {stats:#}");
    }
}

/// A file holding `token` as the kubelet projects a service account token: no final newline
/// (the SDK sends the file as it is), in a folder of its own.
fn projected_token(token: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("token");
    std::fs::write(&file, token).unwrap();
    (dir, file)
}

/// IRSA: the projected token goes to STS's AssumeRoleWithWebIdentity (the XML answer's key
/// signs every call), once for as long as the credentials are valid.
#[test]
fn web_identity_credentials_come_from_sts_once() {
    let Some(moto) = moto() else { return };
    let (_token_dir, token_file) = projected_token("eyJ.projected.token");
    let sts = CredServer::start(|_| {
        (
            200,
            format!(
                "<AssumeRoleWithWebIdentityResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\">\
                 <AssumeRoleWithWebIdentityResult><Credentials>\
                 <AccessKeyId>testing</AccessKeyId><SecretAccessKey>testing</SecretAccessKey>\
                 <SessionToken>sts-session-token</SessionToken><Expiration>{}</Expiration>\
                 </Credentials></AssumeRoleWithWebIdentityResult></AssumeRoleWithWebIdentityResponse>",
                rfc3339_from_now(3600)
            ),
        )
    });
    ships_with(
        &moto,
        "hooklog-irsa",
        &[
            (
                "AWS_WEB_IDENTITY_TOKEN_FILE",
                token_file.display().to_string(),
            ),
            (
                "AWS_ROLE_ARN",
                "arn:aws:iam::123456789012:role/hooklog".into(),
            ),
            ("AWS_ROLE_SESSION_NAME", "pod-session".into()),
            ("AWS_ENDPOINT_URL_STS", sts.url("/")),
        ],
        90,
    );
    let seen = sts.seen();
    assert_eq!(
        seen.len(),
        1,
        "one exchange for an hour's credentials: {seen:#?}"
    );
    let form: HashMap<&str, &str> = seen[0]
        .body
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .collect();
    assert_eq!(seen[0].method, "POST");
    assert_eq!(form["Action"], "AssumeRoleWithWebIdentity");
    assert_eq!(form["Version"], "2011-06-15");
    assert_eq!(
        form["RoleArn"],
        "arn%3Aaws%3Aiam%3A%3A123456789012%3Arole%2Fhooklog"
    );
    assert_eq!(form["RoleSessionName"], "pod-session");
    assert_eq!(form["WebIdentityToken"], "eyJ.projected.token");
}

/// EKS Pod Identity (and ECS): AWS_CONTAINER_CREDENTIALS_FULL_URI with the token file's
/// authorization, read again at each fetch. Credentials that expire are fetched again before
/// they do (the SDK's identity cache: 5 to 10 s ahead), and the new key signs what follows.
#[test]
fn container_credentials_are_fetched_with_the_token_and_refreshed_before_expiry() {
    let Some(moto) = moto() else { return };
    let (_token_dir, token_file) = projected_token("pod-identity-token");
    // The first answer expires in 12 s, inside the cache's margin within 2 to 7 s; the next
    // ones hold an hour, with another key.
    let fetches = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = fetches.clone();
    let server = CredServer::start(move |req| match req.headers.get("authorization") {
        Some(t) if t == "pod-identity-token" => {
            let first = counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0;
            let (key, expires) = if first {
                ("first", 12)
            } else {
                ("second", 3600)
            };
            (
                200,
                metadata_json(expires).replace(
                    "\"testing\",\"SecretAccessKey\"",
                    &format!("\"{key}\",\"SecretAccessKey\""),
                ),
            )
        }
        _ => (
            401,
            r#"{"code":"AccessDeniedException","message":"bad token"}"#.into(),
        ),
    });
    let proxy = Proxy::start_with_keys(&moto, "first:testing,second:testing");
    let mut s = Shipping::with_aws_env(
        &proxy,
        "us-east-1",
        "hooklog-podid",
        &[
            (
                "AWS_CONTAINER_CREDENTIALS_FULL_URI",
                server.url("/v1/credentials"),
            ),
            (
                "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE",
                token_file.display().to_string(),
            ),
        ],
    );
    let mut want = Vec::new();
    let started = std::time::Instant::now();
    // A record every 300 ms until the second key has signed a call (at most 20 s).
    while proxy.stats()["signed_by"]["second"].as_u64().unwrap_or(0) == 0 {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "never refreshed: {:#?} {:#?}",
            server.seen(),
            s.d.stderr.lines()
        );
        let line = lines(&format!("refresh{}", want.len()), 1);
        s.write(&line);
        want.extend(line);
        std::thread::sleep(Duration::from_millis(300));
    }
    s.await_shipped(want.len(), 20, "records did not arrive");
    s.stop();
    assert_exactly_once(&count_messages(&s.shipped()), &want);
    proxy.assert_no_invalid_requests();
    assert!(proxy.stats()["signed_by"]["first"].as_u64().unwrap_or(0) >= 1);
    let seen = server.seen();
    assert!(
        seen.iter()
            .all(|s| s.method == "GET" && s.path == "/v1/credentials"),
        "{seen:#?}"
    );
    assert!(
        !s.d.stderr.contains("cannot get credentials"),
        "{:#?}",
        s.d.stderr.lines()
    );
}

/// A named profile: its keys in `AWS_SHARED_CREDENTIALS_FILE`, its region in `AWS_CONFIG_FILE`,
/// chosen by `AWS_PROFILE` (no `AWS_REGION`, no key in the environment). Every call is signed
/// with the profile's key for the profile's region.
#[test]
fn a_profile_s_keys_and_region_come_from_the_shared_files() {
    let Some(moto) = moto() else { return };
    ships_as_profile(
        &moto,
        "hooklog",
        (
            "[default]\nregion = us-east-1\n\n[profile hooklog]\nregion = eu-west-3\n",
            Some(
                "[default]\naws_access_key_id = wrong\naws_secret_access_key = wrong\n\n\
                 [hooklog]\naws_access_key_id = profilekey\naws_secret_access_key = profilesecret\n",
            ),
        ),
        ("profilekey", "profilesecret"),
        "eu-west-3",
    );
}

/// Ships as `profile` of the shared files (the `config` file's text, and the `credentials`
/// file's, if any), with no `AWS_REGION`, no key in the environment and no instance metadata,
/// through a proxy that takes `key`'s signatures only: every call must be signed with it for
/// `region`.
fn ships_as_profile(
    moto: &str,
    profile: &str,
    (config, credentials): (&str, Option<&str>),
    (key, secret): (&str, &str),
    region: &str,
) {
    let files = tempfile::tempdir().unwrap();
    std::fs::write(files.path().join("config"), config).unwrap();
    if let Some(credentials) = credentials {
        std::fs::write(files.path().join("credentials"), credentials).unwrap();
    }
    let proxy = Proxy::start_with_keys(moto, &format!("{key}:{secret}"));
    let path = |name: &str| files.path().join(name).display().to_string();
    ships_through(
        &proxy,
        region,
        &format!("hooklog-{profile}"),
        &[
            ("AWS_REGION", String::new()),
            ("AWS_SHARED_CREDENTIALS_FILE", path("credentials")),
            ("AWS_CONFIG_FILE", path("config")),
            ("AWS_PROFILE", profile.into()),
            ("AWS_EC2_METADATA_DISABLED", "true".into()),
        ],
        60,
    );
    assert_signed_only_with(&proxy, key, region);
}

/// `credential_process` in the profile: the command's JSON (version 1) signs every call, and it
/// runs once while its credentials hold.
#[test]
fn credential_process_credentials_sign_every_call() {
    let Some(moto) = moto() else { return };
    let files = tempfile::tempdir().unwrap();
    let script = files.path().join("creds.sh");
    let runs = files.path().join("runs");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\necho run >> '{}'\nprintf '%s' '{{\"Version\": 1, \"AccessKeyId\": \"prockey\", \"SecretAccessKey\": \"procsecret\", \"SessionToken\": \"proc-token\", \"Expiration\": \"{}\"}}'\n",
            runs.display(),
            rfc3339_from_now(3600)
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let config = format!(
        "[profile proc]\nregion = ap-southeast-2\ncredential_process = {}\n",
        script.display()
    );
    // No credentials file: the process is the profile's only source.
    ships_as_profile(
        &moto,
        "proc",
        (&config, None),
        ("prockey", "procsecret"),
        "ap-southeast-2",
    );
    let runs = std::fs::read_to_string(&runs).unwrap();
    assert_eq!(runs.lines().count(), 1, "one run for an hour's credentials");
}

/// A credential source that never answers (it accepts the connection and says nothing): the
/// container endpoint, or instance metadata as the chain's last source: neither holds hooklog
/// past `--grace` (3 s), and the records go to stdout, each once. With no region either, a
/// silent instance metadata service is a start-up error (issue 41) within its 2 s bound.
#[test]
fn a_credential_source_that_never_answers_does_not_hold_the_sidecar_past_its_grace() {
    let Some(moto) = moto() else { return };
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", silent.local_addr().unwrap());
    // Accepted and kept open, never answered.
    let held = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let keep = held.clone();
    std::thread::spawn(move || {
        for c in silent.incoming().flatten() {
            keep.lock().unwrap().push(c);
        }
    });
    let cases: [(&str, Vec<(&str, String)>); 2] = [
        (
            "container",
            vec![("AWS_CONTAINER_CREDENTIALS_FULL_URI", format!("{url}/creds"))],
        ),
        (
            "imds",
            vec![("AWS_EC2_METADATA_SERVICE_ENDPOINT", url.clone())],
        ),
    ];
    let started = std::time::Instant::now();
    let refused = start_command(
        tempfile::tempdir().unwrap().path(),
        "hooklog-silent",
        "http://127.0.0.1:9",
        &[
            ("AWS_REGION", String::new()),
            ("AWS_EC2_METADATA_SERVICE_ENDPOINT", url.clone()),
        ],
    )
    .output()
    .unwrap();
    let err = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(64), "{err}");
    assert!(err.contains("instance metadata (no answer)"), "{err}");
    assert!(
        started.elapsed() < Duration::from_secs(6),
        "{:?}",
        started.elapsed()
    );
    for (name, aws) in cases {
        let proxy = Proxy::start(&moto);
        let mut s = Shipping::with_aws_env(&proxy, "us-east-1", "hooklog-silent", &aws);
        let want = lines(name, 20);
        s.write(&want);
        // Read by the daemon (its checkpoint-free pipeline has them once they are in the sink).
        std::thread::sleep(Duration::from_millis(500));
        let stop = std::time::Instant::now();
        s.exits_cleanly(15, name);
        let took = stop.elapsed();
        assert!(
            took < Duration::from_millis(4_500),
            "{name}: {took:?} after SIGTERM with --grace 3s; {:#?}",
            s.d.stderr.lines()
        );
        assert!(
            s.d.stdout.lines().len() >= want.len(),
            "{name}: {:#?}",
            s.d.stderr.lines()
        );
        fell_back_unsigned(&s, &proxy, name, &want);
    }
}

/// EC2 / managed node groups: IMDSv2's session token, then the region (no `AWS_REGION`) and
/// the role's credentials from it: every call signed with them, for that region.
#[test]
fn instance_metadata_supplies_the_region_and_credentials_through_an_imdsv2_session() {
    let Some(moto) = moto() else { return };
    let server = CredServer::start(|req| {
        let token = req
            .headers
            .get("x-aws-ec2-metadata-token")
            .map(String::as_str);
        match (req.method.as_str(), req.path.as_str(), token) {
            ("PUT", "/latest/api/token", _)
                if req
                    .headers
                    .contains_key("x-aws-ec2-metadata-token-ttl-seconds") =>
            {
                (200, "imds-session".into())
            }
            ("GET", "/latest/meta-data/placement/region", Some("imds-session")) => {
                (200, "eu-north-1".into())
            }
            ("GET", "/latest/meta-data/iam/security-credentials/", Some("imds-session")) => {
                (200, "hooklog-node-role".into())
            }
            (
                "GET",
                "/latest/meta-data/iam/security-credentials/hooklog-node-role",
                Some("imds-session"),
            ) => (200, metadata_json(6 * 3600)),
            _ => (404, String::new()),
        }
    });
    let proxy = Proxy::start(&moto);
    ships_through(
        &proxy,
        "eu-north-1",
        "hooklog-imds",
        &[
            ("AWS_REGION", String::new()),
            ("AWS_EC2_METADATA_SERVICE_ENDPOINT", server.url("")),
        ],
        60,
    );
    // The key is the role's, from metadata_json.
    assert_signed_only_with(&proxy, "testing", "eu-north-1");
    let seen = server.seen();
    assert!(
        seen.iter().all(|s| s.method == "PUT"
            || s.headers
                .get("x-aws-ec2-metadata-token")
                .is_some_and(|t| t == "imds-session")),
        "every read within the session: {seen:#?}"
    );
    let creds = seen
        .iter()
        .filter(|s| s.path == "/latest/meta-data/iam/security-credentials/hooklog-node-role")
        .count();
    assert_eq!(creds, 1, "one fetch for six hours' credentials: {seen:#?}");
    let regions = seen
        .iter()
        .filter(|s| s.path == "/latest/meta-data/placement/region")
        .count();
    assert_eq!(
        regions, 1,
        "the region asked once, at start, and the client takes it: {seen:#?}"
    );
}

/// The `name` case's records, every `want` and the summary, came out on stdout exactly once, none
/// was signed (so none went through `proxy`), and nothing panicked.
fn fell_back_unsigned(s: &Shipping, proxy: &Proxy, name: &str, want: &[String]) {
    assert!(!s.d.stderr.contains("panicked"), "{name}");
    s.assert_all_on_stdout(want);
    assert_eq!(proxy.stats()["put_ok"], 0, "{name}: nothing was signed");
}

/// A source that answers badly (an error, garbage, credentials already expired): one clear
/// warning, no panic, no busy loop (the fetches follow the sink's backoff), and the records
/// still come out, on stdout at the shutdown.
#[test]
fn a_bad_credential_answer_is_one_warning_and_no_busy_loop() {
    let Some(moto) = moto() else { return };
    let cases: [(&str, Answer); 4] = [
        ("expired", (200, metadata_json(-60))),
        ("error", (500, "internal error".into())),
        ("garbage", (200, "<html>captive portal</html>".into())),
        ("no-secret", (200, r#"{"AccessKeyId":"testing"}"#.into())),
    ];
    for (name, answer) in cases {
        let proxy = Proxy::start(&moto);
        let server = CredServer::start(move |_| answer.clone());
        let mut s = Shipping::with_aws_env(
            &proxy,
            "us-east-1",
            "hooklog-badcreds",
            &[("AWS_CONTAINER_CREDENTIALS_FULL_URI", server.url("/creds"))],
        );
        let want = lines(name, 20);
        s.write(&want);
        s.d.expect(Duration::from_secs(10), "the credentials warning", || {
            s.d.stderr.contains("cannot get credentials")
        });
        // Three seconds of retrying: the backoff spaces the fetches (100 ms, then doubling; the
        // SDK's three tries of a call each ask the source, its backoff between them). A busy
        // loop would be hundreds; 10 were seen.
        let before = server.seen().len();
        std::thread::sleep(Duration::from_secs(3));
        let fetches = server.seen().len() - before;
        assert!(fetches <= 20, "{name}: {fetches} fetches in 3 s");
        s.exits_cleanly(15, name);
        let warnings = s.d.stderr.count("cannot get credentials");
        assert_eq!(warnings, 1, "{name}: {:#?}", s.d.stderr.lines());
        // ...and no retry warning repeating it.
        assert!(
            !s.d.stderr.contains("cloudwatch call failed"),
            "{name}: {:#?}",
            s.d.stderr.lines()
        );
        let detail = match name {
            "expired" => "expired at",
            "error" => "StatusCode(500)",
            "garbage" => "invalid JSON",
            _ => "`SecretAccessKey` in response but it was missing",
        };
        assert!(
            s.d.stderr
                .lines()
                .iter()
                .any(|l| l.contains("cannot get credentials") && l.contains(detail)),
            "{name}: the warning says why ({detail}): {:#?}",
            s.d.stderr.lines()
        );
        fell_back_unsigned(&s, &proxy, name, &want);
    }
}

/// `https` endpoints: TLS (rustls, ring) trusting the roots the AWS SDK trusted, here
/// `SSL_CERT_FILE` naming the test CA. Without it (the system's roots, which do not hold the test
/// CA) the certificate is refused: nothing is sent, the records go to stdout at shutdown.
#[test]
fn an_https_endpoint_is_trusted_through_ssl_cert_file_and_only_then() {
    let Some(moto) = moto() else { return };
    let dir = tempfile::tempdir().unwrap();
    let tls = crate::util::registry::make_tls(dir.path());
    let proxy = Proxy::start_tls(&moto, &tls.cert, &tls.key);
    let keys = [
        ("AWS_ACCESS_KEY_ID", "testing".to_string()),
        ("AWS_SECRET_ACCESS_KEY", "testing".to_string()),
    ];
    for trusted in [true, false] {
        let mut aws = keys.to_vec();
        if trusted {
            aws.push(("SSL_CERT_FILE", tls.ca.display().to_string()));
        }
        let mut s = Shipping::with_aws_env(&proxy, "us-east-1", "hooklog-tls", &aws);
        let want = lines(if trusted { "tls" } else { "untrusted" }, 50);
        if trusted {
            s.ship(&want, 20, "records did not arrive over TLS");
        } else {
            s.write(&want);
            s.d.expect(Duration::from_secs(10), "the TLS failure", || {
                s.d.stderr
                    .lines()
                    .iter()
                    .any(|l| l.contains("retrying") && l.contains("invalid peer certificate"))
            });
        }
        s.stop();
        if trusted {
            s.assert_all_shipped(&want);
        } else {
            assert!(s.shipped().is_empty());
            s.assert_all_on_stdout(&want);
        }
    }
    proxy.assert_no_invalid_requests();
}

/// Issue 41: a sidecar that inject configured for CloudWatch by the pod's annotations starts as
/// inject wrote it (its args, its env: the region is the annotation's `AWS_REGION`, none is
/// given besides) and ships its summary, with EMF, to the group the annotation names.
#[test]
fn a_sidecar_injected_for_cloudwatch_starts_and_ships_its_summary_with_emf() {
    let Some(moto) = moto() else { return };
    let group = unique("/eks/shop/injected");
    let mut annotations = crate::util::settings::ANNOTATIONS.to_vec();
    annotations.retain(|(k, _)| *k != "hooklog.dev/log-group");
    annotations.push(("hooklog.dev/log-group", &group));
    let out = crate::util::manifests::run(
        &["inject", "--image", crate::util::settings::IMAGE, "-"],
        Some(&crate::util::settings::deployment(&annotations)),
    );
    assert!(out.status.success(), "{}", crate::util::text(&out.stderr));
    let sidecar = crate::util::settings::sidecar(&crate::util::text(&out.stdout));
    let pod = tempfile::tempdir().unwrap();
    let in_pod = |a: &str| -> String {
        for prefix in ["/hooklog", "/etc/hooklog-podinfo"] {
            if a == prefix || a.starts_with(&format!("{prefix}/")) {
                return format!("{}{a}", pod.path().display());
            }
        }
        a.to_string()
    };
    let podinfo = pod.path().join("etc/hooklog-podinfo");
    crate::util::podinfo::write(&podinfo, "app=\"api\"\n", "");
    std::fs::create_dir_all(pod.path().join("hooklog")).unwrap();
    let args: Vec<String> = sidecar["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| in_pod(a.as_str().unwrap()))
        .collect();
    // The container's literal env as the kubelet sets it, the Downward API's as POD_ENV, and the
    // endpoint and fake credentials; no region but the annotation's.
    let mut cmd = crate::util::hooklog();
    cmd.args(&args)
        .env_remove("AWS_REGION")
        .env_remove("AWS_DEFAULT_REGION");
    for e in sidecar["env"].as_array().unwrap() {
        if let Some(v) = e["value"].as_str() {
            cmd.env(e["name"].as_str().unwrap(), v);
        }
    }
    for (k, v) in aws_env(&moto) {
        if k != "AWS_REGION" {
            cmd.env(k, v);
        }
    }
    let mut daemon = Daemon::spawn(cmd);
    daemon.terminate();
    let st = daemon.wait_exit(Duration::from_secs(20));
    assert!(st.success(), "{st}: {:#?}", daemon.stderr.lines());
    let shipped = read_back(&moto, &group, STREAM);
    let summary: Value = shipped
        .iter()
        .filter_map(|m| serde_json::from_str::<Value>(m).ok())
        .find(|r| r["event"] == "hooks.summary")
        .unwrap_or_else(|| panic!("no summary in {group}: {shipped:#?}"));
    assert!(
        summary["_aws"]["CloudWatchMetrics"].is_array(),
        "{summary:#}"
    );
    // `stdout,cloudwatch`: the summary is on stdout too.
    assert!(
        daemon
            .records()
            .iter()
            .any(|r| r["event"] == "hooks.summary")
    );
}
