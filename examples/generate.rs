//! Release-time generator: shell completions and man pages from the CLI's own definition
//! (`hooklog::cli::Cli`), so that the binary carries neither (scripts/release.sh runs it).
//!
//! `cargo run --example generate -- OUT_DIR` writes OUT_DIR/completions/{hooklog.bash, _hooklog,
//! hooklog.fish, hooklog.elv, _hooklog.ps1} and OUT_DIR/man/hooklog.1 plus one page per
//! subcommand (hooklog-run.1, ...).

use std::path::PathBuf;

use anyhow::Context;
use clap::CommandFactory;
use clap_complete::Shell;

fn main() -> anyhow::Result<()> {
    let out = PathBuf::from(
        std::env::args_os()
            .nth(1)
            .context("usage: generate OUT_DIR")?,
    );
    let mut cmd = hooklog::cli::Cli::command();
    let completions = out.join("completions");
    std::fs::create_dir_all(&completions)?;
    for shell in [
        Shell::Bash,
        Shell::Zsh,
        Shell::Fish,
        Shell::Elvish,
        Shell::PowerShell,
    ] {
        let path = clap_complete::generate_to(shell, &mut cmd, "hooklog", &completions)
            .with_context(|| format!("completions for {shell}"))?;
        println!("{}", path.display());
    }
    let man = out.join("man");
    std::fs::create_dir_all(&man)?;
    cmd.build();
    clap_mangen::generate_to(cmd, &man).context("man pages")?;
    for entry in std::fs::read_dir(&man)? {
        let path = entry?.path();
        // `hooklog help SUB` is clap's, and says what `hooklog SUB --help` says.
        if path
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("hooklog-help"))
        {
            std::fs::remove_file(&path)?;
        } else {
            println!("{}", path.display());
        }
    }
    Ok(())
}
