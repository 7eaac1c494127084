//! Build script: the commit and the target that `hooklog --version` names.
//!
//! The commit is `HOOKLOG_COMMIT` when set (scripts/release.sh sets it; a build without a Git
//! checkout, as in the Dockerfile, can pass it), else `git rev-parse --short=12 HEAD`, else
//! `unknown`. The target is Cargo's `TARGET`.

use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=HOOKLOG_COMMIT");
    let commit = std::env::var("HOOKLOG_COMMIT")
        .ok()
        .filter(|c| !c.trim().is_empty())
        .or_else(git_commit)
        .unwrap_or_else(|| "unknown".to_string());
    println!("cargo:rustc-env=HOOKLOG_COMMIT={}", commit.trim());
    let target = std::env::var("TARGET").unwrap_or_else(|_| "unknown".to_string());
    println!("cargo:rustc-env=HOOKLOG_TARGET={target}");
}

/// HEAD's commit, watching HEAD and the branch it names (loose or packed) so that a new commit
/// rebuilds. Only files that exist are watched: Cargo reruns a build script on every build when
/// a watched file is missing (a fresh clone's branch is in packed-refs, not a file of its own).
fn git_commit() -> Option<String> {
    let mut watched = vec![git(&["rev-parse", "--git-path", "HEAD"])?];
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
        watched.extend(git(&["rev-parse", "--git-path", &branch]));
    }
    watched.extend(git(&["rev-parse", "--git-path", "packed-refs"]));
    for path in watched {
        if std::path::Path::new(&path).exists() {
            println!("cargo:rerun-if-changed={path}");
        }
    }
    git(&["rev-parse", "--short=12", "HEAD"])
}

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let s = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (!s.is_empty()).then_some(s)
}
