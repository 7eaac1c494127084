//! (the sidecar) Small tools for distroless images, which have no shell and no coreutils: `sleep`, `install`
//! (copy this executable into a shared folder) and `emit` (one well-formed record).

use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use anyhow::Context;
use serde_json::{Value, json};

use crate::cli::EmitArgs;
use crate::client::{LastResort, Reporter};

/// Longest `emit` waits for its record to be delivered (the socket gives up within
/// `client::SOCKET_STALL`, then the file takes it).
const EMIT_FINISH: std::time::Duration = std::time::Duration::from_secs(2);

/// Mode of the installed executable: every user may run it (containers often run as other
/// users than the one that installed it).
pub const INSTALL_MODE: u32 = 0o755;

/// Copies the running executable to `<dir>/hooklog`, atomically (a container starting at the same
/// moment sees the old file or the whole new one), executable by every user. Returns the path.
pub fn install(dir: &Path) -> anyhow::Result<PathBuf> {
    let exe = own_executable()?;
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let target = dir.join("hooklog");
    let tmp = dir.join(format!(".hooklog.{}.tmp", std::process::id()));
    // The folder is shared: whatever sits at the temporary name (a stale copy, or a symlink a
    // peer planted to have this copy overwrite a file of its choosing) is removed, never
    // followed (unlink removes a link itself), and the copy is created anew (`O_EXCL`).
    match std::fs::remove_file(&tmp) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Err(e).with_context(|| format!("cannot remove {}", tmp.display()));
        }
        _ => {}
    }
    let mut out = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(INSTALL_MODE)
        .open(&tmp)
        .with_context(|| format!("cannot create {}", tmp.display()))?;
    std::fs::File::open(&exe)
        .and_then(|mut src| std::io::copy(&mut src, &mut out))
        .with_context(|| format!("cannot copy {} to {}", exe.display(), tmp.display()))?;
    // On the file created (fchmod): the umask narrowed the mode at creation.
    out.set_permissions(std::fs::Permissions::from_mode(INSTALL_MODE))
        .with_context(|| format!("cannot make {} executable", tmp.display()))?;
    // Closed before it can be run: a file still open for writing cannot be executed (ETXTBSY).
    drop(out);
    std::fs::rename(&tmp, &target)
        .with_context(|| format!("cannot move {} into place", target.display()))?;
    Ok(target)
}

/// This executable's path: `/proc/self/exe`, or, where no /proc is mounted (a bare chroot, some
/// sandboxes), the path it was started by when that names a file.
fn own_executable() -> anyhow::Result<PathBuf> {
    match std::env::current_exe() {
        Ok(p) => Ok(p),
        Err(e) => std::env::args_os()
            .next()
            .map(PathBuf::from)
            .filter(|p| p.components().count() > 1 && p.is_file())
            .with_context(|| {
                format!("cannot find my own executable ({e}) and argv[0] is not a path")
            }),
    }
}

/// `hooklog sleep`: sleeps for the sum of `durations` (`infinity` is forever).
pub fn sleep(durations: &[std::time::Duration]) {
    let total = durations
        .iter()
        .fold(std::time::Duration::ZERO, |a, d| a.saturating_add(*d));
    if total == std::time::Duration::MAX {
        loop {
            std::thread::park();
        }
    }
    std::thread::sleep(total);
}

/// Builds the record `emit` writes: `container_name`, the fields, then `message`.
pub fn emit_record(args: &EmitArgs) -> String {
    let mut m = serde_json::Map::new();
    if let Some(c) = &args.container {
        m.insert("container_name".into(), json!(c));
    }
    for (k, v) in &args.fields {
        m.insert(k.clone(), json!(v));
    }
    m.insert("message".into(), json!(args.message));
    Value::Object(m).to_string()
}

/// Writes one record to the socket, the file, or stdout when neither is given.
pub fn emit(args: &EmitArgs) {
    let last = if args.socket.is_none() && args.file.is_none() {
        LastResort::Stdout
    } else {
        LastResort::Stderr
    };
    let r = Reporter::new(args.socket.clone(), args.file.clone(), last);
    r.send(&emit_record(args));
    let d = r.finish(EMIT_FINISH);
    if d.unsent > 0 {
        eprintln!(
            "hooklog: emit: the record was not delivered within {} ms",
            EMIT_FINISH.as_millis()
        );
    }
    // Nothing to report a flush failure to.
    let _ = std::io::stdout().flush();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emit_quotes_what_echo_gets_wrong() {
        let args = EmitArgs {
            container: Some("api-server".into()),
            fields: vec![("phase".into(), "drain \"now\"".into())],
            socket: None,
            file: None,
            message: "it's 100% \\ done\n".into(),
        };
        let v: Value = serde_json::from_str(&emit_record(&args)).unwrap();
        assert_eq!(v["container_name"], "api-server");
        assert_eq!(v["phase"], "drain \"now\"");
        assert_eq!(v["message"], "it's 100% \\ done\n");
    }

    #[test]
    fn install_copies_an_executable_for_everyone() {
        let dir = tempfile::tempdir().unwrap();
        let target = install(&dir.path().join("bin")).unwrap();
        let m = std::fs::metadata(&target).unwrap();
        assert_eq!(m.permissions().mode() & 0o777, 0o755);
        assert_eq!(
            m.len(),
            std::fs::metadata(std::env::current_exe().unwrap())
                .unwrap()
                .len()
        );
    }

    #[test]
    fn install_never_writes_through_a_link_planted_at_its_temporary_name() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "precious").unwrap();
        let bin = dir.path().join("bin");
        std::fs::create_dir(&bin).unwrap();
        let tmp = bin.join(format!(".hooklog.{}.tmp", std::process::id()));
        std::os::unix::fs::symlink(&victim, &tmp).unwrap();
        let target = install(&bin).unwrap();
        assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
        assert!(std::fs::symlink_metadata(&target).unwrap().is_file());
        assert!(!tmp.exists());
    }
}
