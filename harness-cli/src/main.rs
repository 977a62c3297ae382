//! `harness`: a router-first agent harness. The model proposes one tool call per step; the
//! harness validates it against the tool's schema and only then runs it, from a plugin.
//!
//! This binary only parses arguments, builds the configuration and wires a provider to the
//! plugins that load; the loop, the loader and the providers live in their own crates.

mod config;
mod error;
mod plugins;
mod run;
mod setup;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::error::CliError;

/// A router-first agent harness: the model proposes, the harness validates and disposes.
#[derive(Debug, Parser)]
#[command(name = "harness", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the agent loop on one request.
    Run(run::RunArgs),
    /// Inspect the plugins the harness finds.
    Plugins {
        #[command(subcommand)]
        command: plugins::PluginsCommand,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let outcome = match cli.command {
        Command::Run(args) => run::run(args),
        Command::Plugins { command } => plugins::plugins(command),
    };
    match outcome {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("harness: error: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}

/// Keeps `CliError` reachable from submodules without a path.
pub(crate) type Result<T> = std::result::Result<T, CliError>;
