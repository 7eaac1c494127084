//! The hook wrapper as a container's preStop runs it: `hooklog hook --container NAME FLAGS --
//! CMD...`, the binary under test with no stdin (an exec hook has none), and the processes of the
//! command it wraps.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use super::{hooklog, wait_until};

/// `hooklog hook --container CONTAINER FLAGS -- CMD...`, for the caller to run.
pub fn wrapper(container: &str, flags: &[&str], cmd: &[&str]) -> Command {
    let mut c = hooklog();
    c.args(["hook", "--container", container])
        .args(flags)
        .arg("--")
        .args(cmd)
        .stdin(Stdio::null());
    c
}

/// A file a wrapped script writes a pid to, for the test to watch that process.
pub struct PidFile(PathBuf);

impl PidFile {
    /// `NAME` in `dir`, not yet written.
    pub fn new(dir: &Path, name: &str) -> PidFile {
        PidFile(dir.join(name))
    }

    /// The shell command that writes `pid` there: `$$` (the script's own shell) or `$!` (its
    /// last background job).
    pub fn echo(&self, pid: &str) -> String {
        format!("echo {pid} > {}", self.0.display())
    }

    /// Waits until the script has written it, and returns the pid.
    pub fn read(&self) -> i32 {
        let ok = wait_until(Duration::from_secs(5), || {
            std::fs::read_to_string(&self.0).is_ok_and(|s| s.ends_with('\n'))
        });
        assert!(ok, "{} was not written", self.0.display());
        std::fs::read_to_string(&self.0)
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    }
}

/// True while the process exists and is not a zombie.
pub fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            // The state follows the parenthesised command name.
            let state = stat
                .rsplit(')')
                .next()
                .unwrap_or("")
                .trim_start()
                .chars()
                .next();
            !matches!(state, Some('Z') | Some('X') | None)
        }
        Err(_) => false,
    }
}
