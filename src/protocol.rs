//! (below both) The hook record's wire schema, spelled once: the events `hooklog hook` writes
//! ([`Event`]), the names of their members ([`field`]), and the seal that ties a run's finish to
//! its start ([`seal`]). [`crate::hook`] writes through it, [`crate::record`] reads through it,
//! and [`crate::events`] and [`crate::lifecycle::peers`] match on its names.

/// The events of one wrapped hook run, in the order `hooklog hook` writes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// The command runs (or could not be started): the run's id, start and seal.
    Started,
    /// One line of the command's stdout or stderr.
    Output,
    /// The command ended: outcome, exit code or signal, duration and the run's key.
    Finished,
}

impl Event {
    /// Every event, as [`Event::parse`] reads them.
    pub const ALL: [Event; 3] = [Event::Started, Event::Output, Event::Finished];

    /// The event's name, the `event` member's value.
    pub const fn name(self) -> &'static str {
        match self {
            Event::Started => "hook.started",
            Event::Output => "hook.output",
            Event::Finished => "hook.finished",
        }
    }

    /// The event a name is, if it is one of the wrapper's.
    pub fn parse(name: &str) -> Option<Event> {
        Event::ALL.into_iter().find(|e| e.name() == name)
    }

    /// The members the wrapper writes in every such event: a `hook.*` record without them is
    /// not the wrapper's.
    pub const fn members(self) -> &'static [&'static str] {
        match self {
            Event::Started | Event::Finished => &[field::HOOK, field::RUN_ID, field::STARTED_MS],
            Event::Output => &[field::HOOK, field::STREAM],
        }
    }
}

/// What every wrapper event's name starts with.
pub const HOOK_PREFIX: &str = "hook.";
/// What the events only the daemon writes start with (`hooks.summary`).
pub const DAEMON_PREFIX: &str = "hooks.";
/// The daemon's summary of its peers' hooks, written once on shutdown.
pub const SUMMARY: &str = "hooks.summary";

/// The members of the wrapper's records.
pub mod field {
    /// The event's name ([`super::Event::name`]).
    pub const EVENT: &str = "event";
    /// The container whose hook ran.
    pub const CONTAINER: &str = "container_name";
    /// Which hook: `preStop` or `postStart`.
    pub const HOOK: &str = "hook";
    /// The run's id, unique in the container: its start (ms, hex) and the wrapper's pid.
    pub const RUN_ID: &str = "run_id";
    /// The run's start, wall clock, ms since the epoch.
    pub const STARTED_MS: &str = "started_ms";
    /// In `hook.started`: the SHA-256 (hex) of the run's key ([`super::seal`]).
    pub const SEAL: &str = "seal";
    /// In `hook.finished`: the run's key, which opens the start's seal.
    pub const KEY: &str = "key";
    /// In `hook.started`: the command line, cut to fit one line.
    pub const COMMAND: &str = "command";
    /// In `hook.started`: present (true) when the command line was cut.
    pub const COMMAND_TRUNCATED: &str = "command_truncated";
    /// A line for people.
    pub const MESSAGE: &str = "message";
    /// In `hook.output`: `stdout` or `stderr`.
    pub const STREAM: &str = "stream";
    /// In `hook.output`: present (true) when the line was cut before its newline.
    pub const PARTIAL: &str = "partial";
    /// In `hook.finished`: `ok`, `failed`, `timeout`...
    pub const OUTCOME: &str = "outcome";
    /// In `hook.finished`: the command's exit code, if it exited.
    pub const EXIT_CODE: &str = "exit_code";
    /// In `hook.finished`: the signal that ended the command, if one did.
    pub const SIGNAL: &str = "signal";
    /// In `hook.finished`: how long the command ran, ms.
    pub const DURATION_MS: &str = "duration_ms";
}

/// The seal of a run's key: its SHA-256, in lowercase hex.
pub fn seal(key: &str) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(key.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_event_reads_back_by_its_name_and_is_a_hook_event() {
        for e in Event::ALL {
            assert_eq!(Event::parse(e.name()), Some(e));
            assert!(e.name().starts_with(HOOK_PREFIX));
        }
        assert_eq!(Event::parse("hooks.summary"), None);
        assert!(SUMMARY.starts_with(DAEMON_PREFIX));
    }

    #[test]
    fn the_seal_is_the_keys_sha256_in_hex() {
        // sha256("abc"), FIPS 180-2 appendix B.1.
        assert_eq!(
            seal("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
