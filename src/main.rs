//! (below both) The binary, `hooklog` (the sidecar without the `control` feature, the full CLI
//! with it): parses the command line, sets up stderr diagnostics, and dispatches.

use std::ffi::OsString;
use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use hooklog::cli::{self, Command, LogFormat};
use hooklog::config::RunConfig;
use hooklog::{daemon, hook, lifecycle, tools};
#[cfg(feature = "control")]
use hooklog::{manifest, webhook};

/// musl's own allocator is slow for hooklog's many small, short-lived allocations (the static
/// binary, the one in the image, ran 2.8x slower per line than the glibc build).
#[cfg(target_env = "musl")]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Usage or configuration error (BSD sysexits EX_USAGE).
const EXIT_USAGE: u8 = 64;
/// The daemon failed while running.
const EXIT_FAILURE: u8 = 1;
/// Runtime worker threads: a sidecar's CPU request is a fraction of a core, and the file sources
/// and the stdout sink run on blocking threads of their own.
const WORKER_THREADS: usize = 2;
/// How long threads still blocked at exit (a stuck stdout) may hold the process once the grace
/// deadline has passed.
const RUNTIME_SHUTDOWN: Duration = Duration::from_millis(50);

fn main() -> ExitCode {
    // First thing: a SIGTERM from now on waits until its handler is installed (run, hook) or
    // until dispatch (the other subcommands keep the default action).
    lifecycle::signal::hold();
    let cli = match hooklog::cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            lifecycle::signal::release();
            if !e.use_stderr() {
                // --help and --version: clap's own text on stdout. If even this cannot be
                // printed, the exit code still tells.
                let _ = e.print();
                return ExitCode::from(0);
            }
            // A usage error is a fatal error like any other: one line, in --log-format.
            let args: Vec<OsString> = std::env::args_os().collect();
            let command = cli::command_of(&cli::command(), &args);
            let format = cli::log_format_of(&args);
            cli::set_error_format(format, command);
            if e.kind() == clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
                && format == LogFormat::Text
            {
                // A bare `hooklog`: its help is the answer, as clap prints it.
                let _ = e.print();
            } else {
                cli::fatal(&cli::clap_message(&e, command));
            }
            if let Some(command) = hook_command(args) {
                return ExitCode::from(run_unreported(&command));
            }
            return ExitCode::from(EXIT_USAGE);
        }
    };
    cli::set_error_format(cli.log_format, cli.command.name());
    let default_level = if long_lived(&cli.command) {
        // aws-config says at info which source gave the credentials (with their key id), and
        // warns at every failed fetch: the sink says a failing source once (cloudwatch.md).
        "info,aws_config=error"
    } else {
        "warn"
    };
    init_tracing(cli.log_format, default_level);
    if !long_lived(&cli.command) && !matches!(cli.command, Command::Hook(_)) {
        lifecycle::signal::release();
    }
    ExitCode::from(match cli.command {
        Command::Run(args) => run(args),
        Command::Hook(args) => hook::run(args),
        Command::Sleep(args) => {
            tools::sleep(&args.durations);
            0
        }
        Command::Install(args) => match tools::install(&args.dir) {
            Ok(path) => {
                // The copy is in place; a closed stdout (`| head -0`) is no reason to fail or
                // panic as println! would.
                let _ = writeln!(std::io::stdout(), "{}", path.display());
                0
            }
            Err(e) => {
                cli::fatal(&format!("{e:#}"));
                EXIT_FAILURE
            }
        },
        Command::Emit(args) => {
            tools::emit(&args);
            0
        }
        #[cfg(feature = "control")]
        Command::Check(args) => manifest::check_command(args),
        #[cfg(feature = "control")]
        Command::Inject(args) => manifest::inject_command(args),
        #[cfg(feature = "control")]
        Command::Uninject(args) => manifest::uninject_command(&args.paths),
        #[cfg(feature = "control")]
        Command::Webhook(args) => serve_webhook(args),
    })
}

/// The roles that run until a signal (`run`, `webhook`): they log at info, and hold SIGTERM
/// until their handler is installed.
fn long_lived(command: &Command) -> bool {
    match command {
        Command::Run(_) => true,
        #[cfg(feature = "control")]
        Command::Webhook(_) => true,
        _ => false,
    }
}

/// The command of a `hooklog hook ... -- CMD` line that did not parse: a preStop hook must still
/// run when only its reporting is misconfigured (a missing `--container`, a bad `--timeout`).
fn hook_command(args: Vec<OsString>) -> Option<Vec<OsString>> {
    let dashes = args.iter().position(|a| a == "--")?;
    let mut before = args.get(1..dashes)?.iter();
    // The subcommand is the first word that is not a global flag or its value.
    let sub = loop {
        let a = before.next()?;
        if a == "--log-format" {
            before.next()?;
        } else if !a.to_string_lossy().starts_with("--log-format=") {
            break a;
        }
    };
    let command = args.get(dashes + 1..)?;
    (sub == "hook" && !command.is_empty()).then(|| command.to_vec())
}

/// Replaces this process with `command`, so the hook's exit status is the command's own. Returns
/// only when it cannot be started: 127 when not found, 126 otherwise, as shells do.
fn run_unreported(command: &[OsString]) -> u8 {
    use std::os::unix::process::CommandExt;
    let Some((program, rest)) = command.split_first() else {
        return EXIT_USAGE;
    };
    cli::diagnostic(
        "WARN",
        &format!("running the hook unreported: {}", program.to_string_lossy()),
    );
    let e = std::process::Command::new(program).args(rest).exec();
    let (status, why) = hook::spawn_failure(&e);
    cli::fatal(&format!("{why}: {} ({e})", program.to_string_lossy()));
    status
}

fn run(args: hooklog::cli::RunArgs) -> u8 {
    let cfg = match RunConfig::from_args(args) {
        Ok(cfg) => cfg,
        Err(e) => {
            cli::fatal(&e.to_string());
            return EXIT_USAGE;
        }
    };
    // The signal is still held: installing the handler (in `terminate`) releases it.
    serve("hooklog", || {
        daemon::run(cfg, lifecycle::signal::terminate())
    })
}

#[cfg(feature = "control")]
fn serve_webhook(args: hooklog::cli::WebhookArgs) -> u8 {
    let cfg = match webhook::WebhookConfig::from_args(args) {
        Ok(cfg) => cfg,
        Err(e) => {
            cli::fatal(&format!("{e:#}"));
            return EXIT_USAGE;
        }
    };
    // The handler is installed inside the runtime, which tokio signals need.
    serve("hooklog-webhook", || {
        webhook::run(cfg, lifecycle::signal::terminate())
    })
}

/// Runs a long-lived role (`run`, `webhook`) on a runtime of its own threads until it ends; its
/// error is printed once, with its causes. `role` is called inside the runtime: tokio's signal
/// handlers (`lifecycle::signal::terminate`) need one.
fn serve<F>(thread_name: &str, role: impl FnOnce() -> F) -> u8
where
    F: std::future::Future<Output = anyhow::Result<()>>,
{
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(WORKER_THREADS)
        .thread_name(thread_name)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            cli::fatal(&format!("cannot start the runtime: {e}"));
            return EXIT_FAILURE;
        }
    };
    let result = rt.block_on(async { role().await });
    // Threads still blocked (a stuck stdout) must not keep the process past its deadline.
    rt.shutdown_timeout(RUNTIME_SHUTDOWN);
    match result {
        Ok(()) => 0,
        Err(e) => {
            cli::fatal(&format!("{e:#}"));
            EXIT_FAILURE
        }
    }
}

/// The diagnostics filter: `RUST_LOG` if it parses, else `default_level`. The full CLI reads
/// RUST_LOG's whole syntax (`EnvFilter`); the sidecar its `target=level` lists (`Targets`),
/// without the regex engine `EnvFilter` links in (Cargo.toml, `tracing-subscriber`).
#[cfg(feature = "control")]
fn log_filter(default_level: &str) -> tracing_subscriber::EnvFilter {
    use tracing_subscriber::EnvFilter;
    EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_level))
}

#[cfg(not(feature = "control"))]
fn log_filter(default_level: &str) -> tracing_subscriber::filter::Targets {
    use tracing_subscriber::filter::{LevelFilter, Targets};
    std::env::var("RUST_LOG")
        .ok()
        .and_then(|v| v.parse::<Targets>().ok())
        .or_else(|| default_level.parse().ok())
        .unwrap_or_else(|| Targets::new().with_default(LevelFilter::INFO))
}

fn init_tracing(format: LogFormat, default_level: &str) {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let filter = log_filter(default_level);
    let builder = tracing_subscriber::fmt()
        // Everything reaches the filter layer, which decides.
        .with_max_level(tracing::level_filters::LevelFilter::TRACE)
        // Never blocks on a stderr nobody reads (the wrapper's exit must not wait on it).
        .with_writer(|| hooklog::passthrough::OwnStderr)
        .with_target(false);
    match format {
        LogFormat::Text => builder.with_ansi(false).finish().with(filter).init(),
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .finish()
            .with(filter)
            .init(),
    }
}
