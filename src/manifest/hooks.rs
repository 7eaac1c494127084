//! What a container's lifecycle hooks do: their handler, whether `hooklog hook` wraps them, how
//! long they can last; and hooklog command lines parsed by hooklog's own parser.

use std::collections::BTreeMap;
use std::time::Duration;

use clap::{CommandFactory, FromArgMatches};
use serde_json::Value;

use super::podspec::{Container, strings};
use crate::cli::{Cli, Command};

/// The two lifecycle hooks, as spelled in `lifecycle`.
pub const HOOK_NAMES: [&str; 2] = ["preStop", "postStart"];

/// A hook's handler.
#[derive(Debug, Clone, PartialEq)]
pub enum Handler {
    Exec(Vec<String>),
    HttpGet,
    TcpSocket,
    /// The native `sleep` action (Kubernetes 1.30+), in seconds.
    Sleep(u64),
    Unknown,
}

impl Handler {
    pub fn of(hook: &Value) -> Handler {
        if let Some(exec) = hook.get("exec") {
            Handler::Exec(strings(&exec["command"]))
        } else if hook.get("httpGet").is_some() {
            Handler::HttpGet
        } else if hook.get("tcpSocket").is_some() {
            Handler::TcpSocket
        } else if let Some(s) = hook.get("sleep") {
            Handler::Sleep(super::number::json_seconds(&s["seconds"]).unwrap_or(0))
        } else {
            Handler::Unknown
        }
    }
}

/// One hook of a container.
#[derive(Debug, Clone)]
pub struct Hook {
    /// `preStop` or `postStart`.
    pub name: &'static str,
    /// `...containers[1].lifecycle.preStop`.
    pub path: String,
    pub handler: Handler,
}

/// A container's hooks.
pub fn hooks(c: &Container) -> Vec<Hook> {
    HOOK_NAMES
        .iter()
        .filter_map(|name| {
            let v = c.value["lifecycle"].get(*name)?;
            Some(Hook {
                name,
                path: format!("{}.lifecycle.{name}", c.path),
                handler: Handler::of(v),
            })
        })
        .collect()
}

/// True when `program` is the hooklog binary (`hooklog`, or a path ending in `/hooklog`).
pub fn is_hooklog(program: &str) -> bool {
    program == "hooklog" || program.ends_with("/hooklog")
}

/// True when `program` is `sleep` or a path to one.
pub fn is_sleep(program: &str) -> bool {
    program == "sleep" || program.ends_with("/sleep")
}

/// Parses a hooklog command line (`argv[0]` is the program) with hooklog's own parser, as the
/// binary in the container would: the container's literal env stands in for the environment
/// (the checking process's own `HOOKLOG_*` variables never leak in).
pub fn parse_hooklog(argv: &[String], env: &BTreeMap<String, String>) -> Result<Command, String> {
    let cmd = with_env(Cli::command(), env);
    let matches = cmd
        .try_get_matches_from(argv)
        .map_err(|e| first_line(&e.render().to_string()))?;
    Cli::from_arg_matches(&matches)
        .map(|c| c.command)
        .map_err(|e| first_line(&e.render().to_string()))
}

fn first_line(s: &str) -> String {
    s.lines()
        .next()
        .unwrap_or_default()
        .trim_start_matches("error: ")
        .to_string()
}

/// Replaces every argument's environment variable by the value `env` gives it, as a default.
fn with_env(mut cmd: clap::Command, env: &BTreeMap<String, String>) -> clap::Command {
    let fill = |a: clap::Arg| {
        let value = a
            .get_env()
            .and_then(|e| env.get(e.to_str().unwrap_or_default()))
            .cloned();
        let a = a.env(None);
        match value {
            Some(v) => a.default_value(v).required(false),
            None => a,
        }
    };
    cmd = cmd.mut_args(fill);
    let names: Vec<String> = cmd
        .get_subcommands()
        .map(|s| s.get_name().to_string())
        .collect();
    for n in names {
        cmd = cmd.mut_subcommand(n, |s| s.mut_args(fill));
    }
    cmd
}

/// Where hooklog's image keeps its binary, the ENTRYPOINT (the Dockerfile's layout: a file in
/// `/usr/local/bin`, so that nothing inject mounts, at `/hooklog`, lies over it).
pub const IMAGE_BINARY: &str = "/usr/local/bin/hooklog";

/// Flags only `hooklog run` has among them: with one of them, `run ...` args are hooklog's.
const RUN_FLAGS: [&str; 6] = [
    "--file",
    "--socket",
    "--podinfo",
    "--peers",
    "--grace",
    "--native-sidecar",
];

/// The names `hooklog inject` gives its containers.
const INJECTED_NAMES: [&str; 2] = [super::layout::SIDECAR, super::layout::INSTALLER];

/// The argv a container runs when it is hooklog: `command` calling the hooklog binary, or
/// hooklog's image ENTRYPOINT ([`IMAGE_BINARY`]) then `args` for a container without a
/// `command`. Such a container is known by what it does, whatever its image is called: its
/// image is named hooklog, or its args are `install DIR`, or `run` with hooklog's own flags, or
/// it has a name inject gives and args hooklog's parser takes.
pub fn container_hooklog_argv(c: &Container) -> Option<Vec<String>> {
    let (command, args) = c.argv();
    if let Some(first) = command.first() {
        return is_hooklog(first).then(|| command.into_iter().chain(args).collect());
    }
    let argv: Vec<String> = std::iter::once(IMAGE_BINARY.to_string())
        .chain(args)
        .collect();
    if image_is_hooklog(c.image()) {
        return Some(argv);
    }
    let parsed = parse_hooklog(&argv, &c.literal_env());
    let does_hooklog = match &parsed {
        Ok(Command::Install(_)) => argv.len() == 3,
        Ok(Command::Run(_)) => argv[2..].iter().any(|a| {
            RUN_FLAGS
                .iter()
                .any(|f| a == f || a.starts_with(&format!("{f}=")))
        }),
        _ => false,
    };
    let injected_name = INJECTED_NAMES.contains(&c.name.as_str())
        && matches!(parsed, Ok(Command::Run(_) | Command::Install(_)));
    (does_hooklog || injected_name).then_some(argv)
}

/// An image whose repository's last segment is `hooklog`.
pub fn image_is_hooklog(image: &str) -> bool {
    let repo = image.split('@').next().unwrap_or_default();
    let last = repo.rsplit('/').next().unwrap_or_default();
    last.split(':').next() == Some("hooklog")
}

/// The parsed `hooklog hook` wrapping an exec command, if it is one.
pub fn wrapped(argv: &[String], env: &BTreeMap<String, String>) -> Option<crate::cli::HookArgs> {
    if !argv.first().is_some_and(|p| is_hooklog(p)) {
        return None;
    }
    match parse_hooklog(argv, env) {
        Ok(Command::Hook(h)) => Some(h),
        _ => None,
    }
}

/// How long a hook lasts, as far as the manifest tells.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Bound {
    /// It lasts at least this long (the sleeps it runs).
    pub min: Duration,
    /// It lasts at most this long (a `--timeout`, a bare sleep), when known.
    pub max: Option<Duration>,
}

/// The bound of a hook handler.
pub fn bound(handler: &Handler, env: &BTreeMap<String, String>) -> Bound {
    match handler {
        Handler::Sleep(s) => {
            let d = Duration::from_secs(*s);
            Bound {
                min: d,
                max: Some(d),
            }
        }
        Handler::Exec(argv) => exec_bound(argv, env),
        _ => Bound::default(),
    }
}

fn exec_bound(argv: &[String], env: &BTreeMap<String, String>) -> Bound {
    let Some(program) = argv.first() else {
        return Bound::default();
    };
    if is_hooklog(program) {
        return match parse_hooklog(argv, env) {
            Ok(Command::Sleep(s)) => {
                let total = s
                    .durations
                    .iter()
                    .fold(Duration::ZERO, |a, d| super::number::add(a, *d));
                Bound {
                    min: total,
                    max: Some(total),
                }
            }
            Ok(Command::Hook(h)) => {
                let inner: Vec<String> = h
                    .command
                    .iter()
                    .map(|s| s.to_string_lossy().to_string())
                    .collect();
                let b = exec_bound(&inner, env);
                match h.timeout.map(super::number::clamp) {
                    Some(t) => Bound {
                        min: b.min.min(t),
                        max: Some(b.max.map_or(t, |m| m.min(t))),
                    },
                    None => b,
                }
            }
            _ => Bound::default(),
        };
    }
    if is_sleep(program) {
        return match sleep_args(&argv[1..]) {
            Some(d) => Bound {
                min: d,
                max: Some(d),
            },
            None => Bound::default(),
        };
    }
    if let Some(script) = shell_script(argv) {
        return Bound {
            min: script_sleeps(script),
            max: None,
        };
    }
    Bound::default()
}

/// GNU `sleep N...`: the sum of its arguments (seconds, or with an `s`/`m`/`h`/`d` suffix).
pub fn sleep_args(args: &[String]) -> Option<Duration> {
    if args.is_empty() {
        return None;
    }
    let mut total = Duration::ZERO;
    for a in args {
        let (num, scale) = match a.char_indices().last()? {
            (i, 's') => (&a[..i], 1.0),
            (i, 'm') => (&a[..i], 60.0),
            (i, 'h') => (&a[..i], 3600.0),
            (i, 'd') => (&a[..i], 86400.0),
            _ => (a.as_str(), 1.0),
        };
        let secs: f64 = num.parse().ok()?;
        if !(secs.is_finite() && secs >= 0.0) {
            return None;
        }
        total = super::number::add(total, super::number::float_seconds(secs * scale)?);
    }
    Some(total)
}

/// The shells whose `-c SCRIPT` is read.
pub const SHELLS: [&str; 5] = ["sh", "bash", "ash", "dash", "zsh"];

/// The script of `sh -c SCRIPT` (any shell of [`SHELLS`], by path or name).
pub fn shell_script(argv: &[String]) -> Option<&str> {
    let program = argv.first()?;
    let base = program.rsplit('/').next().unwrap_or_default();
    if !SHELLS.contains(&base) {
        return None;
    }
    let c = argv.iter().position(|a| {
        a == "-c" || (a.starts_with('-') && !a.starts_with("--") && a.ends_with('c'))
    })?;
    argv.get(c + 1).map(String::as_str)
}

/// The sum of the `sleep N` (and `hooklog sleep D`) commands in a simple script: its words split
/// on `;`, `&&`, `||`, `|` and newlines.
pub fn script_sleeps(script: &str) -> Duration {
    let mut total = Duration::ZERO;
    for part in script.split([';', '\n', '&', '|']) {
        let words: Vec<String> = part
            .split_whitespace()
            .map(|w| w.trim_matches(['"', '\'']).to_string())
            .collect();
        let Some(first) = words.first() else { continue };
        if is_sleep(first) {
            total = super::number::add(total, sleep_args(&words[1..]).unwrap_or_default());
        } else if is_hooklog(first) && words.get(1).is_some_and(|w| w == "sleep") {
            let d = words.get(2).and_then(|d| crate::duration::parse(d).ok());
            total = super::number::add(total, d.unwrap_or_default());
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &[&str]) -> Vec<String> {
        s.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn bounds() {
        let env = BTreeMap::new();
        assert_eq!(
            exec_bound(&v(&["sleep", "15"]), &env).max,
            Some(Duration::from_secs(15))
        );
        assert_eq!(
            exec_bound(&v(&["/bin/sleep", "1m"]), &env).min,
            Duration::from_secs(60)
        );
        assert_eq!(
            exec_bound(
                &v(&["sh", "-c", "echo a; sleep 5 && /x/hooklog sleep 1m"]),
                &env
            ),
            Bound {
                min: Duration::from_secs(65),
                max: None
            }
        );
        let wrapped = v(&[
            "/h/hooklog",
            "hook",
            "--container=a",
            "--timeout",
            "30s",
            "--",
            "/app/x",
        ]);
        assert_eq!(
            exec_bound(&wrapped, &env).max,
            Some(Duration::from_secs(30))
        );
        let sleep = v(&[
            "/h/hooklog",
            "hook",
            "--container=a",
            "--",
            "/h/hooklog",
            "sleep",
            "20s",
        ]);
        assert_eq!(exec_bound(&sleep, &env).max, Some(Duration::from_secs(20)));
    }

    #[test]
    fn parse_uses_container_env_not_ours() {
        let argv = v(&["/h/hooklog", "hook", "--", "true"]);
        assert!(parse_hooklog(&argv, &BTreeMap::new()).is_err());
        let env = BTreeMap::from([("HOOKLOG_CONTAINER".to_string(), "envoy".to_string())]);
        match parse_hooklog(&argv, &env) {
            Ok(Command::Hook(h)) => assert_eq!(h.container, "envoy"),
            other => panic!("{other:?}"),
        }
        let err = parse_hooklog(&v(&["hooklog", "sleep", "soon"]), &env).unwrap_err();
        assert!(err.contains("soon"), "{err}");
    }

    #[test]
    fn hooklog_images() {
        assert!(image_is_hooklog(
            "123.dkr.ecr.eu-west-1.amazonaws.com/hooklog:0.1.0"
        ));
        assert!(image_is_hooklog("hooklog"));
        assert!(!image_is_hooklog("example.com/hooklog-ui:1"));
    }

    /// check on inject's own output with `--image .../platform/hooklog-sidecar:0.1.0` found
    /// no sidecar and no installer: hooklog was known only by its image's name.
    #[test]
    fn hooklog_known_by_what_it_does_whatever_the_image() {
        use serde_json::json;
        let known = |v: Value| {
            let c = Container {
                name: v["name"].as_str().unwrap().to_string(),
                init: false,
                path: String::new(),
                value: &v,
            };
            container_hooklog_argv(&c)
        };
        let image = "registry.example.com/platform/hooklog-sidecar:0.1.0";
        assert_eq!(
            known(json!({"name": "x", "image": image, "args": ["install", "/hooklog/bin"]})),
            Some(v(&[IMAGE_BINARY, "install", "/hooklog/bin"]))
        );
        assert!(
            known(json!({"name": "x", "image": image, "args": ["run", "--file", "/h/p.log"]}))
                .is_some()
        );
        assert!(known(json!({"name": "hooklog", "image": image, "args": ["run"]})).is_some());
        // Another program's `run` or `install`.
        assert!(known(json!({"name": "web", "image": "app", "args": ["run"]})).is_none());
        assert!(
            known(json!({"name": "web", "image": "app", "args": ["run", "--port", "80"]}))
                .is_none()
        );
        assert!(
            known(json!({"name": "web", "image": "app", "args": ["install", "a", "b"]})).is_none()
        );
    }
}

#[cfg(test)]
mod env_tests {
    use super::*;

    #[test]
    fn list_and_bool_flags_from_the_container_env() {
        let env = BTreeMap::from([
            ("HOOKLOG_PEERS".to_string(), "api,envoy".to_string()),
            ("HOOKLOG_EMF".to_string(), "true".to_string()),
            ("HOOKLOG_GRACE".to_string(), "15s".to_string()),
        ]);
        let argv: Vec<String> = ["hooklog", "run", "--file", "/x"]
            .map(String::from)
            .to_vec();
        match parse_hooklog(&argv, &env) {
            Ok(Command::Run(r)) => {
                assert_eq!(r.peers, ["api", "envoy"]);
                assert!(r.emf);
                assert_eq!(r.grace, Duration::from_secs(15));
            }
            other => panic!("{other:?}"),
        }
    }
}
