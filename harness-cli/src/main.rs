//! `harness`: a router-first agent harness. The model proposes one tool call per step; the
//! harness validates it against the tool's schema and only then runs it, from a plugin.
//!
//! This binary only parses arguments, builds the configuration and wires a provider to the
//! plugins that load; the loop, the loader and the providers live in their own crates.

mod approve;
mod batch;
mod color;
mod completions;
mod config;
mod config_cmd;
mod discovery;
mod error;
mod eval;
mod exit;
mod install;
#[cfg(test)]
mod layering;
mod lock_cmd;
mod log;
mod mcp;
mod plugins;
mod provider;
mod replay;
mod reply;
mod run;
mod settings;
mod signing;
mod tools;
mod tools_cmd;
mod trace_cmd;

use std::process::ExitCode;

use clap::{ColorChoice, CommandFactory, Parser, Subcommand};

use crate::error::CliError;

/// A router-first agent harness: the model proposes, the harness validates and disposes.
#[derive(Debug, Parser)]
#[command(name = "harness", version, about, long_about = None)]
struct Cli {
    #[command(flatten)]
    color: color::ColorArgs,
    #[command(flatten)]
    log: log::LogArgs,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the agent loop on one request.
    Run(Box<run::RunArgs>),
    /// List, inspect, check and scaffold plugins.
    Plugins {
        #[command(subcommand)]
        command: plugins::PluginsCommand,
    },
    /// Speak the Model Context Protocol: serve the plugins' tools to an MCP client (see docs/mcp.md).
    Mcp {
        #[command(subcommand)]
        command: mcp::McpCommand,
    },
    /// Run many requests from a JSON Lines file, several at once, resumably (see docs/batch.md).
    Batch(Box<batch::BatchCli>),
    /// Score the answers to a tasks file: run it with any provider, or read answers made elsewhere (see docs/eval.md).
    Eval(Box<eval::EvalArgs>),
    /// Trust a configuration file, or show the effective configuration and where each value came from.
    Config {
        #[command(subcommand)]
        command: config_cmd::ConfigCommand,
    },
    /// Read one raw model reply exactly as the loop would: its calls, reasoning and format (see docs/providers.md).
    Reply {
        #[command(subcommand)]
        command: reply::ReplyCommand,
    },
    /// Run a recorded trace again (its model replies as the router) against today's plugins, and report any drift.
    Replay(Box<replay::ReplayArgs>),
    /// Write harness.lock beside the configuration: each offered tool's source and definition hash.
    Lock(Box<lock_cmd::LockArgs>),
    /// Read a run's trace: a table of its steps, or a self-contained HTML report (see docs/traces.md).
    Trace {
        #[command(subcommand)]
        command: trace_cmd::TraceCommand,
    },
    /// Run one tool with JSON arguments, without a model, as a run would (validated, confined, held to the policy).
    Tools {
        #[command(subcommand)]
        command: tools_cmd::ToolsCommand,
    },
    /// Print a shell completion script for bash, zsh, fish, powershell or elvish.
    Completions(completions::CompletionsArgs),
    /// Print the man page (roff), or write one page per command with --out DIR.
    Man(completions::ManArgs),
}

/// `harness run`'s arguments alone: parsing them builds one subcommand, not all nine.
#[derive(Debug, Parser)]
#[command(name = "harness")]
struct RunOnly {
    #[command(flatten)]
    color: color::ColorArgs,
    #[command(flatten)]
    log: log::LogArgs,
    #[command(subcommand)]
    command: RunCommand,
}

/// The one subcommand of [`RunOnly`].
#[derive(Debug, Subcommand)]
enum RunCommand {
    /// Run the agent loop on one request.
    Run(Box<run::RunArgs>),
}

/// The command line. `harness run`, which starts every run, is parsed by a parser that knows
/// only `run`: clap builds every subcommand's arguments before it parses, 0.2 ms of the 1 ms
/// from `main` to a run's first model request (docs/benchmarks.md). Anything that parser does
/// not accept (help, a mistake) is parsed again by the whole one, so that help and errors are
/// the whole command line's.
fn parse() -> Cli {
    let color = color::from_args(std::env::args_os());
    if std::env::args_os().nth(1).is_some_and(|a| a == "run")
        && let Ok(RunOnly { color, log, command: RunCommand::Run(args) }) = parse_with::<RunOnly>(color)
    {
        return Cli { color, log, command: Command::Run(args) };
    }
    parse_with::<Cli>(color).unwrap_or_else(|e| e.exit())
}

/// Parses this process's arguments with `P`, its help and errors coloured as `color` says.
fn parse_with<P: Parser>(color: ColorChoice) -> std::result::Result<P, clap::Error> {
    let mut cmd = P::command().color(color);
    let mut matches = cmd.try_get_matches_from_mut(std::env::args_os())?;
    P::from_arg_matches_mut(&mut matches).map_err(|e| e.format(&mut cmd))
}

/// The hidden first argument that turns this process into a plugin host (`process` isolation).
pub(crate) const PLUGIN_HOST_MODE: &str = "__plugin-host";

fn main() -> ExitCode {
    // A plugin-host child skips argument parsing: it is the harness talking to itself.
    if std::env::args_os().nth(1).is_some_and(|a| a == PLUGIN_HOST_MODE) {
        return plugin_host();
    }
    let cli = parse();
    color::apply(cli.color.color);
    if let Err(why) = log::init(cli.log.verbose, cli.log.quiet) {
        anstream::eprintln!("harness: {}error{0:#}: {why}", color::ERROR);
        return ExitCode::from(exit::RunExit::Usage.code());
    }
    let outcome = match cli.command {
        Command::Run(args) => {
            // The first schema compile builds jsonschema's metaschema validator (most of a
            // start-up's work): started now, it overlaps reading the configuration, the script
            // and the plugins.
            harness_loader::prepare_schema_compiler();
            settings::RunSettings::resolve(*args).and_then(run::run)
        }
        Command::Plugins { command } => plugins::plugins(command),
        Command::Mcp { command } => mcp::mcp(command),
        Command::Batch(args) => settings::BatchJob::resolve(*args).and_then(batch::batch),
        Command::Eval(args) => settings::EvalSettings::resolve(*args).and_then(eval::eval),
        Command::Trace { command } => trace_cmd::trace(command),
        Command::Replay(args) => settings::ReplaySettings::resolve(*args).and_then(replay::replay),
        Command::Reply { command } => reply::reply(command),
        Command::Config { command } => config_cmd::config(command),
        Command::Lock(args) => settings::ToolSettings::load(&args.plugins).and_then(|s| lock_cmd::lock(&s)),
        Command::Tools { command } => tools_cmd::tools(command),
        Command::Completions(args) => completions::completions(args.shell, Cli::command()),
        Command::Man(args) => completions::man(args.out.as_deref(), Cli::command()),
    };
    match outcome {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            anstream::eprintln!("harness: {}error{0:#}: {e}", color::ERROR);
            ExitCode::from(e.exit_code())
        }
    }
}

fn plugin_host() -> ExitCode {
    ExitCode::from(u8::try_from(harness_loader::isolation::serve_plugin_host()).unwrap_or(1))
}

/// Keeps `CliError` reachable from submodules without a path.
pub(crate) type Result<T> = std::result::Result<T, CliError>;

#[cfg(test)]
mod tests {
    use clap::{CommandFactory, Parser};

    use super::{Cli, RunOnly};

    /// What a command accepts, argument by argument (id, long and short names, value count).
    fn shape(cmd: &clap::Command) -> Vec<String> {
        let mut args: Vec<String> = cmd
            .get_arguments()
            .map(|a| {
                format!(
                    "{} {:?} {:?} {:?} {:?}",
                    a.get_id(),
                    a.get_long(),
                    a.get_short(),
                    a.get_num_args(),
                    a.get_env()
                )
            })
            .collect();
        args.sort();
        args
    }

    #[test]
    fn the_run_only_parser_accepts_what_the_whole_one_accepts_for_run() {
        RunOnly::command().debug_assert();
        let whole = Cli::command();
        let only = RunOnly::command();
        let find = |c: &clap::Command| c.find_subcommand("run").map(shape);
        assert_eq!(find(&whole), find(&only));
        // A global argument on the whole parser would be one the run-only parser does not know.
        assert_eq!(shape(&whole), shape(&only));
    }

    #[test]
    fn the_run_only_parser_gives_the_same_arguments() {
        let argv = ["harness", "run", "add 2 and 2", "--script", "s.jsonl", "--max-steps", "3", "-q", "--json"];
        let whole = Cli::try_parse_from(argv).map(|c| format!("{:?}", c.command));
        let only = RunOnly::try_parse_from(argv).map(|c| format!("{:?}", c.command));
        assert_eq!(whole.ok().map(|w| w.replacen("Run(", "", 1)), only.ok().map(|o| o.replacen("Run(", "", 1)));
    }
}
