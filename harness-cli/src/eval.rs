//! `harness eval`: runs a tasks file through the batch engine (any provider), or reads answers
//! produced elsewhere, and scores each answer by `harness-eval`'s rules; prints the report as a
//! table or JSON. The tasks, the scoring and the report are `harness-eval`'s; the runs are
//! `harness-batch`'s; this module parses the flags and wires them.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use harness_batch::{Answers, Batch, ResultsFile, Router, Shard, input, plan};
use harness_eval::{EvalError, Outcome, Report, Task};
use harness_providers::{Breaker, RetryBudget};

use crate::Result;
use crate::batch::progress::BatchProgress;
use crate::discovery::PluginArgs;
use crate::error::CliError;
use crate::provider::{LoopArgs, ProviderArgs, check_tool_choice, run_about, runtime};
use crate::settings::{EvalRuns, EvalSettings, Scored};
use crate::tools::{Tools, Wants};

const EXIT_CODES: &str = "\
Exit codes:
  0  the eval ran and was scored, whatever the score (unless --min-score)
  1  the score is below --min-score; or the runs could not be made (plugins failed to load, the results file
     or a trace could not be written)
  2  usage error: a bad flag, an unreadable file, a line of the tasks or answers file that is not one (its
     line and field are named), a missing API key or model name; nothing was scored";

/// Arguments of `harness eval`.
#[derive(Debug, Args)]
#[command(
    after_help = EXIT_CODES,
    mut_arg("max_steps", |a| a.help("Steps each run may take, unless its task sets max_steps; the last offers only finish. [default: 8]")),
    mut_arg("script", |a| a.help("JSON Lines file of router replies, replayed for every task without a \"script\" of its own (implies --provider scripted)")),
)]
pub(crate) struct EvalArgs {
    /// JSON Lines file of tasks: one {"id", "request", "expect", "tools"?, "steps"?, "script"?} object a line (docs/eval.md).
    pub(crate) tasks: PathBuf,
    /// Score these answers instead of running the tasks: one {"id", "answer", "steps"?, "tokens"?, "seconds"?,
    /// "error"?} object a line, produced elsewhere (another framework).
    #[arg(long, value_name = "FILE")]
    pub(crate) answers: Option<PathBuf>,
    /// Keep the runs' results (a batch's results file) here; rerun with the same --out to resume, scoring what it holds.
    /// Without it the results go to a temporary file.
    #[arg(long, value_name = "FILE", conflicts_with = "answers")]
    pub(crate) out: Option<PathBuf>,
    /// Write each run's trace to DIR/ID.jsonl.
    #[arg(long, value_name = "DIR", conflicts_with = "answers")]
    pub(crate) traces: Option<PathBuf>,
    /// Runs in flight at once (one llama-server slot serves one run at a time).
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..))]
    pub(crate) concurrency: u16,
    /// Print the report as JSON instead of a table.
    #[arg(long)]
    pub(crate) json: bool,
    /// Exit 1 when fewer than this share of the tasks (from 0 to 1) is answered right.
    #[arg(long, value_name = "SHARE")]
    pub(crate) min_score: Option<f64>,
    #[command(flatten)]
    pub(crate) policy: crate::approve::PolicyArgs,
    #[command(flatten)]
    pub(crate) provider: ProviderArgs,
    #[command(flatten)]
    pub(crate) limits: LoopArgs,
    #[command(flatten)]
    pub(crate) plugins: PluginArgs,
}

/// Runs `harness eval` with its resolved settings and returns the exit code.
pub(crate) fn eval(args: EvalSettings) -> Result<u8> {
    let tasks = harness_eval::tasks::read(&args.tasks).map_err(usage)?;
    let outcomes = match args.scored {
        Scored::Answers(answers) => harness_eval::outcome::read_answers(&answers, &tasks).map_err(usage)?,
        Scored::Runs(runs) => run_tasks(&args.tasks, *runs, &tasks)?,
    };
    let report = Report::new(&tasks, &outcomes);
    if args.json {
        let text = serde_json::to_string_pretty(&report).map_err(|e| CliError::Failure(e.to_string()))?;
        println!("{text}");
    } else {
        print!("{}", report.table());
    }
    match args.min_score {
        Some(min) if report.score < min => {
            eprintln!(
                "harness: eval: {}/{} right ({:.1}%), below --min-score {min}",
                report.right,
                report.total,
                report.score * 100.0
            );
            Ok(1)
        }
        _ => Ok(0),
    }
}

fn usage(e: EvalError) -> CliError {
    CliError::Usage(e.to_string())
}

/// Runs every task without a result in the results file through the batch engine, and reads
/// back every task's outcome.
fn run_tasks(tasks_file: &Path, args: EvalRuns, tasks: &[Task]) -> Result<HashMap<String, Outcome>> {
    let EvalRuns { run: settings, policy, tools: tool_settings, .. } = args;
    let budget = Arc::new(RetryBudget::new(1.0));
    let (router, scripts) = crate::batch::router(&settings, crate::log::quiet(), &budget)?;
    // The batch engine reads the same file for what it runs: ids, requests, budgets, scripts.
    let input = input::read(tasks_file, Shard::ALL, scripts)?;
    if !input.bad.is_empty() {
        let name = tasks_file.display();
        let lines: Vec<String> = input.bad.iter().map(|b| format!("  {name}:line {}: {}", b.line, b.problem)).collect();
        return Err(CliError::Usage(format!("{name}: {} bad lines:\n{}", lines.len(), lines.join("\n"))));
    }
    let scratch;
    let results = match &args.out {
        Some(path) => path.clone(),
        None => {
            scratch = tempfile::tempdir()
                .map_err(|e| CliError::Failure(format!("cannot make a temporary directory for the results: {e}")))?;
            scratch.path().join("results.jsonl")
        }
    };
    let (mut out, earlier) = ResultsFile::open(&results)?;
    let plan = plan(input.requests, &earlier, &Answers::default(), &results)?;
    if let Some(dir) = &args.traces {
        harness_batch::create_traces_dir(dir)?;
    }
    let mut tools = Tools::wire(&tool_settings, Wants { report: !crate::log::quiet(), mcp: true, ..Wants::default() })?;
    check_tool_choice(&settings, &tools.registry)?;
    if !crate::log::quiet() {
        eprintln!(
            "harness: eval: {} tasks, {} already in {}, {} to run, {} at a time",
            tasks.len(),
            plan.skipped,
            results.display(),
            plan.todo.len(),
            args.concurrency
        );
    }
    let shared = matches!(router, Router::Shared(_));
    let mut batch = Batch::new(router, tools.take_registry(), settings.options)
        .with_policy(policy)
        .with_source(input.fingerprint, Shard::ALL)
        .with_about(run_about(&tool_settings.project, &settings));
    if let Some(dir) = &args.traces {
        batch = batch.with_traces(dir.clone());
    }
    if shared {
        let said = Arc::new(|said: &str| eprintln!("harness: eval: {said}"));
        batch = batch.with_breaker(Breaker::new(Duration::from_secs(300), said));
    }
    run_batch(Arc::new(batch), plan, args.concurrency, &mut out)?;
    drop(tools);
    drop(out);
    harness_eval::outcome::from_results(&results).map_err(usage)
}

/// The batch itself, with progress on stderr.
fn run_batch(batch: Arc<Batch>, plan: harness_batch::Plan, concurrency: u16, out: &mut ResultsFile) -> Result<()> {
    let concurrency = usize::from(concurrency).min(plan.todo.len()).max(1);
    let mut progress = BatchProgress::new(plan.todo.len(), Duration::from_secs(10), crate::log::quiet());
    let threads = std::thread::available_parallelism().map_or(1, usize::from).min(concurrency).max(1);
    let rt = runtime(threads)?;
    let ran = rt.block_on(batch.clone().run(plan.todo, concurrency, out, &mut progress));
    // An abandoned in-process call may still be running; the process must not wait for it.
    rt.shutdown_background();
    progress.finish();
    ran?;
    if batch.breaker().is_some_and(|b| b.stats().stopped) {
        eprintln!("harness: eval: the model server stayed down; the tasks that did not run score wrong (not_run)");
    }
    Ok(())
}
