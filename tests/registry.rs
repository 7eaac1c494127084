//! `check` reads real images from a real registry: Debian's `docker-registry` (distribution
//! 2.8) on 127.0.0.1, over plain HTTP, over TLS with htpasswd basic auth (a CA made here, given
//! through SSL_CERT_FILE), and with Bearer tokens from tests/support/token-server.py.
//! tests/support/oci-push.py builds the images from tar layers and pushes them over the
//! registry's HTTP API; the registry's access log shows what hooklog fetched.

use std::path::PathBuf;

use serde_json::Value;

use crate::util::registry::{
    Auth, PASSWORD, Registry, USER, check, manifest, run, tools_present, write_documents,
};

/// The tier's registry, started and the test images pushed, with a folder for a test's files.
struct Tier {
    reg: Registry,
    /// The pushed images' digests, by `name:tag` (and `name@arch` for an index's images).
    digests: Value,
    tmp: tempfile::TempDir,
}

impl Tier {
    /// The registry over TLS or not, with `auth`; `None` when a tool is missing outside CI
    /// (`tools_present` says so).
    fn start(tls: bool, auth: Auth) -> Option<Tier> {
        if !tools_present() {
            return None;
        }
        let reg = Registry::start(tls, auth);
        let digests = reg.push();
        let tmp = tempfile::tempdir().unwrap();
        Some(Tier { reg, digests, tmp })
    }

    /// `name` in the test's folder.
    fn path(&self, name: &str) -> PathBuf {
        self.tmp.path().join(name)
    }

    /// [`manifest`] of Deployments running images of the registry: `(name, image in the
    /// registry, preStop argv, arch)`.
    fn deployments(&self, pods: &[(&str, &str, &[&str], Option<&str>)]) -> PathBuf {
        let pods: Vec<_> = pods
            .iter()
            .map(|&(name, image, argv, arch)| (name, self.reg.image(image), argv, arch))
            .collect();
        manifest(self.tmp.path(), &pods)
    }
}

/// `check` read the image (no note says it could not) and the image decides: the `sleep` of
/// `envoy`'s hook is not in it, an error.
fn assert_envoy_read_from_image(code: Option<i32>, doc: &Value, stderr: &str) {
    assert!(!stderr.contains("cannot read image"), "{stderr}");
    assert_eq!(
        image_findings(doc),
        [(
            "envoy".into(),
            "hook-command-not-in-image".into(),
            "image".into()
        )],
        "{doc:#}"
    );
    assert_eq!(code, Some(1));
}

/// The one line of `stderr` that holds `part`.
fn one_line<'a>(stderr: &'a str, part: &str) -> &'a str {
    let lines: Vec<&str> = stderr.lines().filter(|l| l.contains(part)).collect();
    assert_eq!(lines.len(), 1, "not one line with {part:?}: {stderr}");
    lines[0]
}

/// `(object name, rule, source)` of each finding about a hook command in an image.
fn image_findings(doc: &Value) -> Vec<(String, String, String)> {
    doc["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["rule"].as_str().unwrap().starts_with("hook-command-"))
        .map(|f| {
            (
                f["object"]["name"].as_str().unwrap().to_string(),
                f["rule"].as_str().unwrap().to_string(),
                f["source"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn finding<'a>(doc: &'a Value, object: &str) -> &'a Value {
    doc["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["object"]["name"] == object && f["rule"] == "hook-command-not-in-image")
        .unwrap_or_else(|| panic!("no finding for {object}: {doc:#}"))
}

#[test]
fn the_seed_incident_is_an_error_by_image_and_a_second_check_reads_no_layer() {
    let Some(t) = Tier::start(false, Auth::None) else {
        return;
    };
    let cache = t.path("cache");
    let r = &t.reg.addr;
    let pinned = format!("busybox@{}", t.digests["busybox:1"].as_str().unwrap());
    let m = t.deployments(&[
        ("envoy", "envoy:1", &["sleep", "5"], None),
        ("busybox", "busybox:1", &["sh", "-c", "sleep 5"], None),
        ("merged", "merged:1", &["/bin/sleep", "5"], None),
        ("merged-sh", "merged:1", &["sh", "-c", "sleep 5"], None),
        ("whiteout", "whiteout:1", &["/bin/sleep", "5"], None),
        ("opaque", "whiteout:1", &["/opt/tools/drain"], None),
        ("multi-amd64", "multi:1", &["sleep", "5"], Some("amd64")),
        ("multi-arm64", "multi:1", &["sleep", "5"], Some("arm64")),
        ("pinned", &pinned, &["sh", "-c", "exec sleep 5"], None),
    ]);
    // An exec probe and a container command, in the shell-less image and in busybox.
    let mut text = std::fs::read_to_string(&m).unwrap();
    for (name, image) in [
        ("probe-envoy", t.reg.image("envoy:1")),
        ("probe-busybox", t.reg.image("busybox:1")),
    ] {
        text.push_str(&format!(
            "---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  containers:\n  - name: app\n    image: {image}\n    command: [\"/bin/sh\", \"-c\", \"exec sleep 3600\"]\n    readinessProbe:\n      exec:\n        command: [\"sh\", \"-c\", \"test -f /tmp/ready\"]\n"
        ));
    }
    std::fs::write(&m, text).unwrap();
    let insecure = ["--insecure-registry", r.as_str(), m.to_str().unwrap()];
    let (code, doc, stderr) = check(&cache, &insecure, &[]);
    assert!(!stderr.contains("cannot read image"), "{stderr}");
    let mut got = image_findings(&doc);
    got.sort();
    let want = |n: &str| {
        (
            n.to_string(),
            "hook-command-not-in-image".to_string(),
            "image".to_string(),
        )
    };
    assert_eq!(
        got,
        [
            want("envoy"),
            want("multi-arm64"),
            want("opaque"),
            want("probe-envoy"),
            want("probe-envoy"),
            want("whiteout")
        ],
        "{doc:#}"
    );
    assert_eq!(code, Some(1));
    let envoy = finding(&doc, "envoy");
    assert_eq!(envoy["severity"], "error");
    let message = envoy["message"].as_str().unwrap();
    assert!(
        message.contains(t.digests["envoy:1"].as_str().unwrap()) && message.contains("linux/amd64"),
        "{message}"
    );
    let probe: Vec<&str> = doc["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["object"]["name"] == "probe-envoy")
        .map(|f| f["path"].as_str().unwrap())
        .collect();
    assert_eq!(
        probe,
        [
            "spec.containers[0].command",
            "spec.containers[0].readinessProbe"
        ]
    );
    let arm = finding(&doc, "multi-arm64")["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        arm.contains(t.digests["multi@arm64"].as_str().unwrap()),
        "{arm}"
    );
    let blobs = t.reg.blob_gets();
    assert!(blobs >= 6, "the first check read the layers: {blobs}");

    // A second check: the same findings, and no blob (layer or config) fetched again.
    let (code2, doc2, _) = check(&cache, &insecure, &[]);
    assert_eq!(code2, code);
    assert_eq!(doc2["findings"], doc["findings"]);
    assert_eq!(t.reg.blob_gets(), blobs, "the second check fetched blobs");

    // --offline: no request at all; the pattern rules decide (no pattern matches these names).
    let before = t.reg.requests().len();
    let mut offline = vec!["--offline"];
    offline.extend(insecure);
    let (code3, doc3, _) = check(&cache, &offline, &[]);
    assert_eq!(t.reg.requests().len(), before, "--offline made a request");
    assert_eq!(code3, Some(0), "{doc3:#}");
    assert!(image_findings(&doc3).is_empty());
}

/// Standard base64 (for a docker auth file's `auth`).
fn base64(s: &str) -> String {
    const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let b = s.as_bytes();
    let mut out = String::new();
    for chunk in b.chunks(3) {
        let n =
            chunk.iter().fold(0u32, |acc, &x| (acc << 8) | u32::from(x)) << (8 * (3 - chunk.len()));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(A[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[test]
fn tls_with_basic_auth_from_an_auth_file_a_credential_helper_and_wrong_credentials() {
    let Some(t) = Tier::start(true, Auth::Basic) else {
        return;
    };
    let r = &t.reg.addr;
    let m = t.deployments(&[("envoy", "envoy-distroless:1", &["sleep", "5"], None)]);
    let ca = t.reg.ca.as_ref().unwrap().to_str().unwrap().to_string();
    let m = m.to_str().unwrap();

    // REGISTRY_AUTH_FILE with `auths`: read over TLS, decided by the image.
    let auth = t.path("auth.json");
    let entry = |user: &str, pass: &str| {
        serde_json::json!({"auths": {r.as_str(): {"auth": base64(&format!("{user}:{pass}"))}}})
            .to_string()
    };
    std::fs::write(&auth, entry(USER, PASSWORD)).unwrap();
    let cache = t.path("c1");
    let env = [
        ("SSL_CERT_FILE", ca.as_str()),
        ("REGISTRY_AUTH_FILE", auth.to_str().unwrap()),
    ];
    let (code, doc, stderr) = check(&cache, &[m], &env);
    assert_envoy_read_from_image(code, &doc, &stderr);

    // Wrong credentials: a one-line note naming the image, and the name's pattern decides.
    std::fs::write(&auth, entry(USER, "wrong")).unwrap();
    let (code, doc, stderr) = check(&t.path("c2"), &[m], &env);
    assert!(
        one_line(&stderr, "cannot read image").contains(&t.reg.image("envoy-distroless:1")),
        "{stderr}"
    );
    assert_eq!(
        image_findings(&doc),
        [(
            "envoy".into(),
            "hook-command-in-shell-less-image".into(),
            "pattern".into()
        )]
    );
    // A guess from the name is a warning, not the image's definitive error: the run passes.
    assert_eq!(code, Some(0));
    // ... and --require-image makes it fail the run by itself (no pattern for this one).
    let plain = t.deployments(&[("app", "busybox:1", &["sleep", "5"], None)]);
    let (code, _, _) = check(
        &t.path("c3"),
        &["--require-image", plain.to_str().unwrap()],
        &env,
    );
    assert_eq!(code, Some(69));

    // A credential helper on PATH, named by DOCKER_CONFIG's config.json.
    let bin = t.path("bin");
    let docker = t.path("docker");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::create_dir_all(&docker).unwrap();
    let asked = t.path("asked");
    let helper = bin.join("docker-credential-hooklogtest");
    std::fs::write(
        &helper,
        format!(
            "#!/bin/sh\n[ \"$1\" = get ] || exit 1\ncat > {}\necho '{{\"ServerURL\":\"{r}\",\"Username\":\"{USER}\",\"Secret\":\"{PASSWORD}\"}}'\n",
            asked.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&helper, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(
        docker.join("config.json"),
        serde_json::json!({"credHelpers": {r.as_str(): "hooklogtest"}}).to_string(),
    )
    .unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let m = t.deployments(&[("envoy", "envoy-distroless:1", &["sleep", "5"], None)]);
    let (code, doc, stderr) = check(
        &t.path("c4"),
        &[m.to_str().unwrap()],
        &[
            ("SSL_CERT_FILE", ca.as_str()),
            ("DOCKER_CONFIG", docker.to_str().unwrap()),
            ("PATH", &path),
        ],
    );
    assert_envoy_read_from_image(code, &doc, &stderr);
    assert_eq!(std::fs::read_to_string(&asked).unwrap().trim(), r.as_str());
}

#[test]
fn bearer_token_challenges_anonymous_and_with_credentials() {
    let Some(t) = Tier::start(false, Auth::Token) else {
        return;
    };
    let r = &t.reg.addr;
    let m = t.deployments(&[("envoy", "envoy:1", &["sleep", "5"], None)]);
    let m = m.to_str().unwrap();
    let tokens = || std::fs::read_to_string(&t.reg.token_log).unwrap_or_default();

    // Anonymous: the registry's 401 names the token server, which grants pull.
    let (code, doc, stderr) = check(&t.path("c1"), &["--insecure-registry", r, m], &[]);
    assert_envoy_read_from_image(code, &doc, &stderr);
    assert!(
        tokens().contains("anonymous repository:envoy:pull"),
        "{}",
        tokens()
    );

    // With credentials from an auth file: sent to the token server.
    let auth = t.path("auth.json");
    std::fs::write(
        &auth,
        serde_json::json!({"auths": {r.as_str(): {"username": USER, "password": PASSWORD}}})
            .to_string(),
    )
    .unwrap();
    let (code, doc, stderr) = check(
        &t.path("c2"),
        &["--insecure-registry", r, m],
        &[("REGISTRY_AUTH_FILE", auth.to_str().unwrap())],
    );
    assert_envoy_read_from_image(code, &doc, &stderr);
    assert!(
        tokens().contains(&format!("{USER} repository:envoy:pull\n")),
        "{}",
        tokens()
    );
}

/// `(name, image in the registry, command, args)` of a Pod without hooks.
type PodRun<'a> = (
    &'a str,
    &'a str,
    Option<&'a [&'a str]>,
    Option<&'a [&'a str]>,
);

impl Tier {
    /// One Pod per [`PodRun`], running an image of the registry: what the container itself runs.
    fn pods(&self, pods: &[PodRun]) -> PathBuf {
        let documents = pods.iter().map(|(name, image, command, args)| {
        let image = self.reg.image(image);
        let mut doc = format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  containers:\n  - name: app\n    image: {image}\n"
        );
        for (key, v) in [("command", command), ("args", args)] {
            if let Some(v) = v {
                doc.push_str(&format!("    {key}: {}\n", serde_json::to_string(v).unwrap()));
            }
        }
        doc
    });
        write_documents(self.path("pods.yaml"), documents)
    }
}

/// `(object, rule, source, path)` of every finding.
fn all_findings(doc: &Value) -> Vec<(String, String, String, String)> {
    let mut out: Vec<_> = doc["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            let s = |k: &str| f[k].as_str().unwrap().to_string();
            (
                f["object"]["name"].as_str().unwrap().to_string(),
                s("rule"),
                s("source"),
                s("path"),
            )
        })
        .collect();
    out.sort();
    out
}

/// What the container runs when its pod sets no `command` is the image's ENTRYPOINT (args
/// replacing CMD), else its args, else its CMD; with none of them the runtime refuses it.
#[test]
fn the_image_entrypoint_and_cmd_decide_what_a_container_without_command_runs() {
    let Some(t) = Tier::start(false, Auth::None) else {
        return;
    };
    let r = &t.reg.addr;
    let m = t.pods(&[
        // ENTRYPOINT ["/bin/app"], which the image lacks; args do not change that.
        ("entrypoint-missing", "app:1", None, None),
        (
            "entrypoint-missing-args",
            "app:1",
            None,
            Some(&["--port", "80"]),
        ),
        // `command` replaces the entrypoint: /bin/sh is there.
        ("command-present", "app:1", Some(&["/bin/sh"]), None),
        // CMD only: args replace it and args[0] runs; without args CMD runs.
        ("args-missing", "cmd:1", None, Some(&["/opt/nothere", "-v"])),
        ("args-present", "cmd:1", None, Some(&["sleep", "5"])),
        ("cmd-present", "cmd:1", None, None),
        // Neither in the image nor in the pod: "no command specified".
        ("nothing", "bare:1", None, None),
        ("nothing-but-args", "bare:1", None, Some(&["sh"])),
        // ENTRYPOINT ["/usr/local/bin/envoy"], present.
        ("envoy", "envoy:1", None, None),
    ]);
    let m = m.to_str().unwrap();
    let (code, doc, stderr) = check(&t.path("c"), &["--insecure-registry", r, m], &[]);
    assert!(!stderr.contains("cannot read image"), "{stderr}");
    let f = |n: &str, rule: &str, path: &str| {
        (
            n.to_string(),
            rule.to_string(),
            "image".to_string(),
            path.to_string(),
        )
    };
    let not_in = "hook-command-not-in-image";
    assert_eq!(
        all_findings(&doc),
        [
            f("args-missing", not_in, "spec.containers[0].args"),
            f("entrypoint-missing", not_in, "spec.containers[0].image"),
            f(
                "entrypoint-missing-args",
                not_in,
                "spec.containers[0].image"
            ),
            f(
                "nothing",
                "container-command-not-set",
                "spec.containers[0].image"
            ),
        ],
        "{doc:#}"
    );
    assert_eq!(code, Some(1));
    let message = finding(&doc, "entrypoint-missing")["message"]
        .as_str()
        .unwrap();
    assert!(
        message.contains("/bin/app")
            && message.contains("ENTRYPOINT")
            && message.contains(t.digests["app:1"].as_str().unwrap()),
        "{message}"
    );
    let message = finding(&doc, "args-missing")["message"].as_str().unwrap();
    assert!(message.contains("/opt/nothere"), "{message}");
    let nothing = doc["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["object"]["name"] == "nothing")
        .unwrap();
    let message = nothing["message"].as_str().unwrap();
    assert!(
        message.contains("no command specified")
            && message.contains(t.digests["bare:1"].as_str().unwrap()),
        "{message}"
    );
    assert_eq!(nothing["severity"], "error");

    // --image-root has no config, so no entrypoint: nothing is said about a pod without command.
    let root = t.path("root");
    std::fs::create_dir_all(root.join("bin")).unwrap();
    let arg = |n: &str| format!("{}={}", t.reg.image(n), root.display());
    let (_, doc, _) = check(
        &t.path("c"),
        &[
            "--offline",
            "--image-root",
            &arg("app:1"),
            "--image-root",
            &arg("bare:1"),
            m,
        ],
        &[],
    );
    let by_root: Vec<_> = all_findings(&doc)
        .into_iter()
        .filter(|f| f.2 == "image-root")
        .map(|f| f.0)
        .collect();
    // Only the pod whose own `command` names /bin/sh, which the empty root lacks.
    assert_eq!(by_root, ["command-present"], "{doc:#}");
}

/// inject's output never depends on the registry; what the images say goes to stderr.
#[test]
fn inject_warns_of_a_hook_program_the_image_lacks_and_writes_the_same_yaml_offline() {
    let Some(t) = Tier::start(false, Auth::None) else {
        return;
    };
    let r = &t.reg.addr;
    let m = t.deployments(&[
        (
            "envoy",
            "envoy:1",
            &["sh", "-c", "sleep 5; envoy --drain"],
            None,
        ),
        ("bare-sleep", "envoy:1", &["sleep", "5"], None),
        ("busybox", "busybox:1", &["sh", "-c", "sleep 5"], None),
        ("busybox-sleep", "busybox:1", &["sleep", "5"], None),
    ]);
    let m = m.to_str().unwrap();
    let cache = t.path("c");
    let inject = [
        "inject",
        "--image",
        "hooklog:test",
        "--insecure-registry",
        r,
        m,
    ];
    let (code, online, stderr) = run(&cache, &inject, &[]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(!stderr.contains("cannot read image"), "{stderr}");
    let envoy_digest = t.digests["envoy:1"].as_str().unwrap();
    let w = one_line(&stderr, "warning");
    for part in ["\"envoy\"", "`sh`", envoy_digest, "127", "hooklog check"] {
        assert!(w.contains(part), "{part} not in: {w}");
    }
    let fixed = one_line(&stderr, "failed before");
    assert!(
        fixed.contains("bare-sleep") && fixed.contains(envoy_digest),
        "{fixed}"
    );

    // --offline: the same YAML, byte for byte, no such line, and no request to the registry.
    let before = t.reg.requests().len();
    let mut offline = inject.to_vec();
    offline.insert(1, "--offline");
    let (code, off, stderr) = run(&cache, &offline, &[]);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(t.reg.requests().len(), before, "--offline made a request");
    assert!(
        !stderr.contains("warning") && !stderr.contains("failed before"),
        "{stderr}"
    );
    assert_eq!(
        String::from_utf8_lossy(&online),
        String::from_utf8_lossy(&off)
    );
    assert_eq!(online, off);

    // An image that cannot be read: one note, the same YAML, exit 0.
    let gone = t.deployments(&[("envoy", "nosuch:1", &["sh", "-c", "sleep 5"], None)]);
    let gone = gone.to_str().unwrap();
    let (code, _, stderr) = run(
        &cache,
        &[
            "inject",
            "--image",
            "hooklog:test",
            "--insecure-registry",
            r,
            gone,
        ],
        &[],
    );
    assert_eq!(code, Some(0), "{stderr}");
    one_line(&stderr, "cannot read image");
    assert!(!stderr.contains("warning"), "{stderr}");
}
