//! `harness completions SHELL` and `harness man`: shell completion scripts and roff man pages,
//! both generated from the command-line parser itself, so that they can never name a flag the
//! binary does not take.

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::Args;
use clap_complete::Shell;

use crate::Result;
use crate::error::CliError;

/// Arguments of `harness completions`.
#[derive(Debug, Args)]
#[command(
    after_help = "Install, for example:\n  bash: harness completions bash > ~/.local/share/bash-completion/completions/harness\n  zsh:  harness completions zsh > ~/.zfunc/_harness  (with fpath+=~/.zfunc before compinit)\n  fish: harness completions fish > ~/.config/fish/completions/harness.fish"
)]
pub(crate) struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    pub(crate) shell: Shell,
}

/// Arguments of `harness man`.
#[derive(Debug, Args)]
pub(crate) struct ManArgs {
    /// Write one page per command and subcommand (harness.1, harness-run.1, ...) into DIR,
    /// created if need be, instead of printing the main page on stdout.
    #[arg(long, value_name = "DIR")]
    pub(crate) out: Option<PathBuf>,
}

/// Prints the completion script of `shell` for `cli`, the whole command line.
pub(crate) fn completions(shell: Shell, mut cli: clap::Command) -> Result<u8> {
    // Generated whole in memory first: clap_complete panics on a failed write (a closed pipe).
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut cli, "harness", &mut script);
    stdout(&script)?;
    Ok(0)
}

/// Prints the man page of `cli`, or with `--out DIR` (`out`) writes one page per (sub)command.
pub(crate) fn man(out: Option<&Path>, cli: clap::Command) -> Result<u8> {
    match out {
        Some(dir) => write_pages(dir, cli),
        None => {
            let mut page = Vec::new();
            clap_mangen::Man::new(cli)
                .render(&mut page)
                .map_err(|e| CliError::Failure(format!("cannot render the man page: {e}")))?;
            stdout(&page)?;
            Ok(0)
        }
    }
}

/// Writes `harness.1` and a page per subcommand, at any depth, into `dir`.
fn write_pages(dir: &Path, cli: clap::Command) -> Result<u8> {
    std::fs::create_dir_all(dir)
        .map_err(|e| CliError::Usage(format!("--out {}: cannot create the directory: {e}", dir.display())))?;
    clap_mangen::generate_to(cli, dir)
        .map_err(|e| CliError::Failure(format!("--out {}: cannot write the man pages: {e}", dir.display())))?;
    crate::log::notice!("harness: wrote the man pages into {}", harness_core::printable(&dir.display().to_string()));
    Ok(0)
}

/// Writes `bytes` to stdout. A reader that stopped early (`harness man | head`) is no failure:
/// it read what it wanted.
fn stdout(bytes: &[u8]) -> Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(CliError::Failure(format!("cannot write to stdout: {e}")))
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tiny() -> clap::Command {
        clap::Command::new("harness").subcommand(clap::Command::new("run").arg(clap::Arg::new("x").long("max-steps")))
    }

    #[test]
    fn every_shell_gets_a_script_that_names_the_subcommands() {
        for shell in [Shell::Bash, Shell::Zsh, Shell::Fish, Shell::PowerShell, Shell::Elvish] {
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut tiny(), "harness", &mut script);
            let text = String::from_utf8(script).unwrap_or_default();
            assert!(text.contains("run") && text.contains("max-steps"), "{shell}: {text}");
        }
    }

    #[test]
    fn pages_are_written_per_subcommand() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let out = dir.path().join("man1");
        assert_eq!(write_pages(&out, tiny()).ok(), Some(0));
        assert!(out.join("harness.1").is_file() && out.join("harness-run.1").is_file());
    }
}
