//! (below both) What hooklog itself writes on stderr: `--log-format`'s [`LogFormat`], the one
//! line of a fatal error or a warning ([`fatal`], [`diagnostic`]) in either format, and a clap
//! error said on that one line ([`clap_message`]), also for a command line that does not parse.

use std::ffi::OsString;

use clap::ValueEnum;

use super::Command;

/// Format of stderr diagnostics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum LogFormat {
    #[default]
    /// One human-readable line per event.
    Text,
    /// One JSON object per event.
    Json,
}

/// Whether fatal errors are JSON lines (`--log-format json`); set once by main.
static ERRORS_JSON: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
/// The subcommand a fatal error names (`command`): set once by main, `hooklog` before.
static ERRORS_COMMAND: std::sync::OnceLock<&'static str> = std::sync::OnceLock::new();

/// Sets how [`fatal`] writes, and the subcommand it names: main calls it once, before the
/// subcommand runs (or with what [`log_format_of`] found when the command line did not parse).
pub fn set_error_format(format: LogFormat, command: &'static str) {
    ERRORS_JSON.store(
        format == LogFormat::Json,
        std::sync::atomic::Ordering::Relaxed,
    );
    // Set once per process; a second call keeps the first subcommand.
    let _ = ERRORS_COMMAND.set(command);
}

/// The `--log-format` a command line asks for when it does not parse as a whole: its last
/// `--log-format VALUE` or `--log-format=VALUE` before `--` (clap's global flag, wherever it
/// stands), else `HOOKLOG_LOG_FORMAT`, else text. A value that is neither `text` nor `json`
/// reads as text.
pub fn log_format_of(args: &[OsString]) -> LogFormat {
    let mut found: Option<String> = None;
    let mut words = args.iter().skip(1).map(|a| a.to_string_lossy());
    while let Some(a) = words.next() {
        if a == "--" {
            break;
        }
        if a == "--log-format" {
            found = words.next().map(|v| v.into_owned());
        } else if let Some(v) = a.strip_prefix("--log-format=") {
            found = Some(v.to_string());
        }
    }
    let value = found.or_else(|| std::env::var("HOOKLOG_LOG_FORMAT").ok());
    match value.as_deref().map(str::trim) {
        Some(v) if v.eq_ignore_ascii_case("json") => LogFormat::Json,
        _ => LogFormat::Text,
    }
}

/// The subcommand a command line names, as [`Command::name`] would, when it does not parse: its
/// first word that is a subcommand of `cmd`, else `hooklog`.
pub fn command_of(cmd: &clap::Command, args: &[OsString]) -> &'static str {
    args.iter()
        .skip(1)
        .take_while(|a| *a != "--")
        .find_map(|a| {
            let a = a.to_str()?;
            cmd.get_subcommands().find(|s| s.get_name() == a).map(|_| {
                Command::NAMES
                    .iter()
                    .find(|n| **n == a)
                    .copied()
                    .unwrap_or("hooklog")
            })
        })
        .unwrap_or("hooklog")
}

/// One line of hooklog's own on stderr at `level` (`ERROR`, `WARN`): `hooklog: MESSAGE`, or with
/// `--log-format json` one JSON object shaped as the JSON diagnostics are (`timestamp`, `level`,
/// `message`) with the subcommand as `command`. Newlines in `message` are kept inside the one
/// line (escaped in JSON, as `; ` in text).
pub fn diagnostic_line(level: &str, message: &str) -> String {
    let command = ERRORS_COMMAND.get().copied().unwrap_or("hooklog");
    if ERRORS_JSON.load(std::sync::atomic::Ordering::Relaxed) {
        let now = crate::timefmt::rfc3339_ms(crate::timefmt::now_ms());
        // Each value a JSON string, escaped by serde_json; the keys are fixed.
        let quote = |v: &str| serde_json::to_string(v).unwrap_or_else(|_| "\"\"".into());
        format!(
            "{{\"timestamp\":{},\"level\":{},\"message\":{},\"command\":{}}}",
            quote(&String::from_utf8_lossy(&now)),
            quote(level),
            quote(message),
            quote(command)
        )
    } else {
        let one: Vec<&str> = message.lines().filter(|l| !l.trim().is_empty()).collect();
        format!("hooklog: {}", one.join("; "))
    }
}

/// Writes a fatal error as [`diagnostic_line`] says, at level `ERROR`; a stderr that cannot be
/// written leaves the exit code to tell.
pub fn fatal(message: &str) {
    diagnostic("ERROR", message);
}

/// Writes one [`diagnostic_line`] at `level` on stderr.
pub fn diagnostic(level: &str, message: &str) {
    use std::io::Write;
    let line = diagnostic_line(level, message);
    // Nothing to report a stderr failure to: the exit code still tells.
    let _ = writeln!(std::io::stderr().lock(), "{line}");
}

/// What a clap error says, on one line: its first line without clap's `error: `, and where to
/// read more (clap's usage and tips follow it in its own rendering).
pub fn clap_message(e: &clap::Error, command: &str) -> String {
    // What comes before clap's `Usage:`, its lines joined (a list of missing arguments, a tip).
    let rendered = e.render().to_string();
    let said: Vec<&str> = rendered
        .lines()
        .take_while(|l| !l.starts_with("Usage:") && !l.starts_with("For more information"))
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    // A line that ends in `:` introduces the next (a list of missing arguments).
    let mut joined = String::new();
    for line in said {
        if !joined.is_empty() {
            joined.push_str(if joined.ends_with(':') { " " } else { "; " });
        }
        joined.push_str(line);
    }
    let said = joined;
    let first = said.strip_prefix("error: ").unwrap_or(&said);
    let first = if first.is_empty() {
        "invalid command line"
    } else {
        first
    };
    let help = if command == "hooklog" {
        "hooklog --help".to_string()
    } else {
        format!("hooklog {command} --help")
    };
    format!("{first} (see '{help}')")
}
