//! (below both) The command line: the sidecar's `run`, `hook`, `sleep`, `install`, `emit`
//! and, built with the `control` feature, the control plane's `check`, `inject`, `uninject` for
//! manifests and `webhook` for the cluster, one file of flags each; [`Cli`] and [`Command`] put
//! them together, and [`command`] adds each help's `Docs:`. `check` reads hook command lines with
//! the sidecar's types, which are below both; the control plane's flags, typed with
//! [`crate::kube`]'s words, are the control plane's own files, built only with `control`. Every
//! flag but `emit --field` has an environment variable, because pods are configured through env
//! (lists are comma-separated).

use clap::{Parser, Subcommand};

mod diagnostic;
mod hook;
mod run;
mod tools;
mod values;

#[cfg(feature = "control")]
mod check;
#[cfg(feature = "control")]
mod images;
#[cfg(feature = "control")]
mod inject;
#[cfg(feature = "control")]
mod webhook;

pub use diagnostic::{
    LogFormat, clap_message, command_of, diagnostic, diagnostic_line, fatal, log_format_of,
    set_error_format,
};
pub use hook::HookArgs;
pub use run::{DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_LINE_BYTES, Output, PodMetadata, RunArgs};
pub use tools::{EmitArgs, InstallArgs, SleepArgs};
pub use values::{MAX_DURATION, bounded_duration, env_bool};

#[cfg(feature = "control")]
pub use check::{CheckArgs, CheckFormat, Platform};
#[cfg(feature = "control")]
pub use images::ImageArgs;
#[cfg(feature = "control")]
pub use inject::{InjectArgs, InjectFlags, SidecarKind, UninjectArgs};
#[cfg(feature = "control")]
pub use webhook::{WebhookArgs, WebhookSidecar};

/// The sidecar's examples, which both builds print.
macro_rules! sidecar_examples {
    () => {
        "\
Examples:
  # The sidecar: follow a file and a socket, print JSON records on stdout
  hooklog run --file /hooklog/prestop.log \\
    --socket /hooklog/hooklog.sock --peers envoy,api-server

  # A container's preStop hook, reported from start to exit status
  /hooklog-bin/hooklog hook --container envoy \\
    --socket /hooklog/hooklog.sock -- /hooklog-bin/hooklog sleep 15

  # Distroless images have no sleep, cp or echo
  hooklog sleep 1m30s
  hooklog install /hooklog-bin
  hooklog emit --container api-server --file /hooklog/prestop.log \\
    --field phase=drain 'draining connections'"
    };
}

#[cfg(not(feature = "control"))]
const EXAMPLES: &str = sidecar_examples!();
#[cfg(feature = "control")]
const EXAMPLES: &str = concat!(
    sidecar_examples!(),
    "

  # Before deploy: find broken preStop hooks, then wire hooklog in
  hooklog check k8s/
  hooklog inject \\
    --image registry.example.com/hooklog-sidecar:0.1.0 \\
    deploy.yaml | kubectl apply -f -
  kubectl get deploy api-server -o yaml | hooklog uninject - \\
    | kubectl apply -f -

  # Cluster-wide: a webhook injecting the pods of opted-in namespaces
  hooklog webhook \\
    --image registry.example.com/hooklog-sidecar:0.1.0"
);

/// The pages that explain each subcommand, relative to the repository root (where README.md's
/// table of contents links them), listed under `Docs:` at the end of its `--help`, one a line.
/// tests/cli.rs checks that every subcommand has one and that each page and heading exists. A
/// name with no subcommand (one another branch adds) is skipped.
const DOCS: &[(&str, &str)] = &[
    ("", "README.md#documentation"),
    (
        "run",
        "docs/flags.md#hooklog-run, docs/inputs-and-records.md, docs/lifecycle.md#the-daemon-end",
    ),
    (
        "hook",
        "docs/flags.md#hooklog-hook, docs/lifecycle.md#the-hook-end",
    ),
    (
        "sleep",
        "docs/flags.md#hooklog-sleep-hooklog-install-hooklog-emit, docs/lifecycle.md#tools-for-images-without-a-shell",
    ),
    (
        "install",
        "docs/flags.md#hooklog-sleep-hooklog-install-hooklog-emit, docs/lifecycle.md#tools-for-images-without-a-shell",
    ),
    (
        "emit",
        "docs/flags.md#hooklog-sleep-hooklog-install-hooklog-emit, docs/lifecycle.md#tools-for-images-without-a-shell",
    ),
    (
        "check",
        "docs/flags.md#hooklog-check, docs/check-and-inject.md#hooklog-check",
    ),
    (
        "inject",
        "docs/flags.md#hooklog-inject-and-hooklog-uninject, docs/check-and-inject.md#hooklog-inject-and-hooklog-uninject",
    ),
    (
        "uninject",
        "docs/flags.md#hooklog-inject-and-hooklog-uninject, docs/check-and-inject.md#hooklog-inject-and-hooklog-uninject",
    ),
    ("webhook", "docs/webhook.md"),
];

/// What `--log-format` shapes, in each subcommand's help: what the subcommand writes on stderr
/// besides fatal errors, and what it leaves as it is. Every subcommand has a line (tests/cli.rs).
const LOG_FORMAT_HELP: &[(&str, &str)] = &[
    (
        "run",
        "Format of stderr: the daemon's diagnostics and a fatal error. Never of stdout: the \
         records, always JSON",
    ),
    (
        "hook",
        "Format of stderr: how the hook ended, when not ok, and a fatal error. Never of stdout \
         or of the hook's own output, passed through as it is; the records go to the socket or \
         the file",
    ),
    (
        "sleep",
        "Format of stderr: a fatal error (a duration that does not parse). Never of stdout: \
         sleep writes nothing",
    ),
    (
        "install",
        "Format of stderr: a fatal error (the copy failed). Never of stdout: the installed path",
    ),
    (
        "emit",
        "Format of stderr: diagnostics (a record not delivered) and a fatal error. Never of \
         stdout or of the record, a JSON line wherever it goes",
    ),
    (
        "check",
        "Format of stderr: diagnostics (images not read) and a fatal error. Never of stdout: \
         the findings, in --format",
    ),
    (
        "inject",
        "Format of stderr: diagnostics and a fatal error. Never of stdout, the manifests, or of \
         the report lines (`deployment \"NS/NAME\" injected`)",
    ),
    (
        "uninject",
        "Format of stderr: diagnostics and a fatal error. Never of stdout, the manifests, or of \
         the report lines (`deployment \"NS/NAME\" uninjected`)",
    ),
    (
        "webhook",
        "Format of stderr: the webhook's diagnostics (one line per review) and a fatal error. \
         Never of stdout: the webhook writes nothing there",
    ),
];

/// The command line as clap reads it: [`Cli`] with each help's `Docs:` ([`DOCS`]) added.
pub fn command() -> clap::Command {
    use clap::CommandFactory;
    let with_docs = |cmd: clap::Command, pages: &str| {
        let before = cmd
            .get_after_help()
            .map(|h| format!("{h}\n\n"))
            .unwrap_or_default();
        let pages: String = pages.split(", ").map(|p| format!("\n  {p}")).collect();
        cmd.after_help(format!("{before}Docs:{pages}"))
    };
    let mut cmd = Cli::command();
    for (name, pages) in DOCS {
        if name.is_empty() {
            cmd = with_docs(cmd, pages);
        } else if cmd.find_subcommand(name).is_some() {
            cmd = cmd.mut_subcommand(name, |sub| with_docs(sub, pages));
        }
    }
    // Each subcommand gets the global flag with its own help; clap propagates a global flag
    // only to subcommands that do not have it, and reads it the same from either.
    let global = cmd
        .get_arguments()
        .find(|a| a.get_id() == "log_format")
        .cloned();
    if let Some(global) = global {
        for (name, help) in LOG_FORMAT_HELP {
            if cmd.find_subcommand(name).is_some() {
                let arg = global.clone().help(*help);
                cmd = cmd.mut_subcommand(name, |sub| sub.arg(arg));
            }
        }
    }
    cmd
}

/// Parses the process's arguments with [`command`], as `Cli::try_parse` would.
pub fn try_parse() -> Result<Cli, clap::Error> {
    use clap::FromArgMatches;
    let mut cmd = command();
    let matches = cmd.try_get_matches_from_mut(std::env::args_os())?;
    Cli::from_arg_matches(&matches).map_err(|e| e.format(&mut cmd))
}

/// What `hooklog --version` prints after the name: the version, the commit it was built from and
/// the target (build.rs), as `0.1.0 (commit 9b8ff3f1c2d4, x86_64-unknown-linux-musl)`.
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("HOOKLOG_COMMIT"),
    ", ",
    env!("HOOKLOG_TARGET"),
    ")"
);

/// hooklog: makes Kubernetes preStop hooks visible.
#[derive(Debug, Parser)]
#[command(name = "hooklog", version = VERSION, about, long_about = None, after_help = EXAMPLES)]
pub struct Cli {
    /// Format of what hooklog itself writes on stderr: its diagnostics and, in every subcommand,
    /// a fatal error (a bad flag or value included: one line, `hooklog: MESSAGE`, or one JSON
    /// object with timestamp, level, message and command). Never of stdout, the subcommand's
    /// output: run's records (always JSON), check's report (its --format), inject's and
    /// uninject's manifests, install's path; nor of a hook's own output, which hook passes
    /// through as it is.
    #[arg(long, global = true, env = "HOOKLOG_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,

    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
// One value per process, parsed once: boxing `run`'s arguments (the largest once the control
// plane's variants are compiled out of the sidecar) would save nothing that matters.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, Subcommand)]
pub enum Command {
    /// The sidecar daemon: follow files and sockets, write enriched JSON records.
    #[command(
        after_help = "Example:\n  hooklog run --file /hooklog/prestop.log \\\n    --socket /hooklog/hooklog.sock --podinfo /etc/podinfo \\\n    --peers envoy,api-server --grace 25s"
    )]
    Run(RunArgs),
    /// Run a lifecycle hook command and report its output and how it ended.
    #[command(
        after_help = "Example (a preStop exec command):\n  /hooklog-bin/hooklog hook --container envoy \\\n    --socket /hooklog/hooklog.sock --file /hooklog/prestop.log \\\n    -- /hooklog-bin/hooklog sleep 15"
    )]
    Hook(HookArgs),
    /// Sleep for a duration (for images without a sleep binary).
    #[command(
        after_help = "Examples:\n  hooklog sleep 50\n  hooklog sleep 1m30s\n  hooklog sleep 0.5"
    )]
    Sleep(SleepArgs),
    /// Copy this executable into a folder (an emptyDir), executable by every user.
    #[command(
        after_help = "Example (an init container or native sidecar at start):\n  hooklog install /hooklog-bin"
    )]
    Install(InstallArgs),
    /// Write one well-formed JSON record (instead of hand-written echo JSON).
    #[command(
        after_help = "Example:\n  hooklog emit --container api-server --file /hooklog/prestop.log \\\n    --field phase=heap-dump 'uploading heap dump to S3'"
    )]
    Emit(EmitArgs),
    #[cfg(feature = "control")]
    /// Find broken lifecycle hooks in Kubernetes manifests, before deploy (no cluster needed).
    #[command(
        after_help = "Examples:\n  hooklog check k8s/\n  kubectl get deploy -A -o yaml | hooklog check -\n  hooklog check --format sarif --platform fargate --kubernetes-version 1.29 \\\n    manifests/ > hooklog.sarif\n  hooklog check --image-root envoyproxy/envoy-distroless:v1.31.0=envoy.tar \\\n    deploy.yaml\n  hooklog check --insecure-registry localhost:5000 --image-platform arm64 \\\n    deploy.yaml\n  hooklog check --exclude hook-not-reported --fail-on warning k8s/\n  hooklog check --list-rules\n\nA finding is accepted on one object by the annotation hooklog.dev/ignore-check.RULE: \"REASON\" (on the object or its pod template).\n\nImages are read from their registries (credentials as docker and podman keep them; layer lists cached in $HOOKLOG_CACHE_DIR or ~/.cache/hooklog) unless --offline.\n\nExit code: 0 when nothing at or above --fail-on (suppressed findings do not count), 1 otherwise, 64 for usage errors (an unknown rule name, a bad configuration file) or input that does not parse, 69 when --require-image and an image cannot be read."
    )]
    Check(CheckArgs),
    #[cfg(feature = "control")]
    /// Add hooklog to every pod template of Kubernetes manifests (stdin to stdout by default).
    #[command(
        after_help = "Examples:\n  hooklog inject \\\n    --image registry.example.com/hooklog-sidecar:0.1.0 \\\n    deploy.yaml | kubectl apply -f -\n  # a 1.28 cluster: the classic sidecar (Jobs are left as they are)\n  hooklog inject --kubernetes-version 1.28 \\\n    --image registry.example.com/hooklog-sidecar:0.1.0 \\\n    deploy.yaml\n  # as a Helm 4 post-renderer (helm-plugin/hooklog), HOOKLOG_INJECT_IMAGE set:\n  helm install shop ./chart --post-renderer hooklog"
    )]
    Inject(InjectArgs),
    #[cfg(feature = "control")]
    /// Remove what `hooklog inject` added (same as `inject --undo`).
    #[command(
        after_help = "Example:\n  kubectl get deploy api-server -o yaml | hooklog uninject - \\\n    | kubectl apply -f -"
    )]
    Uninject(UninjectArgs),
    #[cfg(feature = "control")]
    /// A mutating admission webhook: injects hooklog into pods as they are created.
    #[command(
        after_help = "Example (in the cluster, k8s/webhook/ or charts/hooklog):\n  hooklog webhook \\\n    --image registry.example.com/hooklog-sidecar:0.1.0\n\nServes POST /mutate (AdmissionReview admission.k8s.io/v1), /healthz and /readyz over TLS:\nits own CA in the MutatingWebhookConfiguration's caBundle and a certificate renewed in\nmemory (auto-TLS), or --tls-cert-file and --tls-key-file (cert-manager)."
    )]
    Webhook(WebhookArgs),
}

impl Command {
    /// Every subcommand's name, in both builds (the sidecar has the first five).
    pub const NAMES: [&'static str; 9] = [
        "run", "hook", "sleep", "install", "emit", "check", "inject", "uninject", "webhook",
    ];

    /// The subcommand's name on the command line.
    pub fn name(&self) -> &'static str {
        match self {
            Command::Run(_) => "run",
            Command::Hook(_) => "hook",
            Command::Sleep(_) => "sleep",
            Command::Install(_) => "install",
            Command::Emit(_) => "emit",
            #[cfg(feature = "control")]
            Command::Check(_) => "check",
            #[cfg(feature = "control")]
            Command::Inject(_) => "inject",
            #[cfg(feature = "control")]
            Command::Uninject(_) => "uninject",
            #[cfg(feature = "control")]
            Command::Webhook(_) => "webhook",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;
    use std::ffi::OsString;

    /// Every boolean flag that a variable may set takes those words: each parses `1` through
    /// the real command line, the variable standing in as the flag's value.
    #[test]
    fn every_boolean_flag_with_a_variable_uses_the_pod_spec_words() {
        let cmd = Cli::command();
        let mut seen = 0;
        for sub in cmd.get_subcommands() {
            for arg in sub.get_arguments() {
                if arg.get_env().is_none() || !matches!(arg.get_action(), clap::ArgAction::SetTrue)
                {
                    continue;
                }
                seen += 1;
                // `--flag=1` goes through the same value parser the variable's value does.
                let one = arg.clone().action(clap::ArgAction::Set).num_args(1);
                let m = clap::Command::new("t").arg(one).try_get_matches_from([
                    "t",
                    &format!("--{}=yes", arg.get_long().expect("long")),
                ]);
                let m = m.unwrap_or_else(|e| panic!("{}: {e}", arg.get_id()));
                assert_eq!(
                    m.get_one::<bool>(arg.get_id().as_str()),
                    Some(&true),
                    "{}",
                    arg.get_id()
                );
            }
        }
        // The sidecar's (`run --native-sidecar`, `--emf`...) and, with `control`, check's and
        // inject's.
        let least = if cfg!(feature = "control") { 6 } else { 2 };
        assert!(seen >= least, "only {seen} boolean flags with a variable");
    }

    #[test]
    fn cli_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn every_flag_has_an_environment_variable() {
        let cmd = Cli::command();
        let mut missing = Vec::new();
        let mut checked = 0;
        for sub in cmd.get_subcommands() {
            for arg in sub.get_arguments().chain(cmd.get_arguments()) {
                let Some(long) = arg.get_long() else { continue };
                if ["help", "version"].contains(&long) {
                    continue;
                }
                checked += 1;
                if arg.get_env().is_none() {
                    missing.push(format!("{} --{long}", sub.get_name()));
                }
            }
        }
        assert!(checked > 20, "found only {checked} flags");
        // `--field` values may hold commas, so they cannot be a comma-separated env list; the
        // docs/flags.md names this one exception.
        assert_eq!(missing, ["emit --field"], "flags without env");
    }

    #[test]
    fn hook_takes_the_command_after_double_dash() {
        let cli = Cli::try_parse_from([
            "hooklog",
            "hook",
            "--container",
            "envoy",
            "--",
            "sleep",
            "-x",
        ])
        .unwrap();
        match cli.command {
            Command::Hook(h) => assert_eq!(
                h.command,
                vec![OsString::from("sleep"), OsString::from("-x")]
            ),
            other => panic!("{other:?}"),
        }
    }
}
