//! `harness batch`: many requests from a JSON Lines file, at most `--concurrency` at once, one
//! result line each, appended as each run ends; rerun with the same `--out` to resume, and with
//! `--approvals` to resume the runs that stopped for approval. The engine is `harness-batch`;
//! this module parses the flags, wires the provider, plugins and policy to it, and reports.

pub(crate) mod progress;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, Subcommand};
use harness_batch::{
    Answers, Batch, DefaultScript, Earlier, Input, ResultsFile, Router, Scripts, ShardSpec, Tally, input, plan,
    read_answers,
};
use harness_core::{RunAbout, ToolRegistry};
use harness_providers::{Breaker, OutageStats, RetryBudget};

use crate::Result;
use crate::discovery::PluginArgs;
use crate::error::CliError;
use crate::provider::{
    LoopArgs, ProviderArgs, build_budgeted_provider, check_tool_choice, note_ignored_settings, run_about, runtime,
};
use crate::settings::{BatchJob, BatchSettings, ProviderKind, Settings};
use crate::tools::{Tools, Wants};
use progress::{BatchProgress, human_ms, human_secs};

const EXIT_CODES: &str = "\
Exit codes (when several apply, the first of 6, 5, 4):
  0  the batch ran to its end, and every request of the results file has a line that did not fail for the
     provider's reasons and does not await approval; bad input lines are reported and skipped
  1  the batch stopped: the results file or a trace could not be written, plugins failed to load
  2  usage or configuration error: a bad flag, an unreadable requests file, a results file another batch
     is writing, an invalid config, a missing API key or model name, a bad line in --approvals (nothing ran)
  4  the batch ran to its end, and runs of it await approval: answer their pending calls in an approvals
     file and rerun with --approvals FILE
  5  the batch ran to its end, and runs of the results file failed for the provider's reasons (status failed,
     error provider_error): rerun with --retry-failed once the server is right (--allow-failures: exit 0)
  6  the batch stopped: the model server stayed down past --max-outage; what did not run has no line:
     rerun the same command to resume";

/// `harness batch`: a batch to run, or `merge`.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub(crate) struct BatchCli {
    #[command(subcommand)]
    pub(crate) command: Option<BatchCommand>,
    #[command(flatten)]
    pub(crate) run: BatchArgs,
}

/// What `harness batch` does besides running a batch.
#[derive(Debug, Subcommand)]
pub(crate) enum BatchCommand {
    /// Join the results files of a batch's shards into one, as a single process would have written it.
    #[command(after_help = MERGE_EXIT_CODES)]
    Merge(MergeArgs),
}

const MERGE_EXIT_CODES: &str = "\
Exit codes:
  0  merged
  1  the merged file could not be written
  2  refused, nothing written: an unreadable input, a line that is not a result (or a torn one: resume that
     shard first), inputs from different requests files or splits, an id in two inputs, a missing shard or
     request (unless --partial), or an --out that exists";

/// Arguments of `harness batch merge`.
#[derive(Debug, Args)]
pub(crate) struct MergeArgs {
    /// The shards' results files (each worker's --out).
    #[arg(required = true, value_name = "RESULTS")]
    pub(crate) inputs: Vec<PathBuf>,
    /// The merged file; it must not exist (a merge never overwrites).
    #[arg(long, value_name = "FILE")]
    pub(crate) out: PathBuf,
    /// The requests file: check that every good line of it has a result.
    #[arg(long, value_name = "FILE")]
    pub(crate) requests: Option<PathBuf>,
    /// Merge what there is, even when a shard or a request has no results.
    #[arg(long)]
    pub(crate) partial: bool,
}

/// Arguments of `harness batch`.
#[derive(Debug, Args)]
#[command(
    after_help = EXIT_CODES,
    mut_arg("max_steps", |a| a.help("Steps each run may take, unless its line sets max_steps; the last offers only finish. [default: 8]")),
    mut_arg("max_seconds", |a| a.help("Wall-clock limit of each run in seconds: past it, time_budget_exhausted")),
    mut_arg("script", |a| a.help("JSON Lines file of router replies, replayed from its start for every request that has no \"script\" of its own (implies --provider scripted)")),
)]
pub(crate) struct BatchArgs {
    /// JSON Lines file of requests: one {"id": ..., "request": "...", "max_steps": N} object a line.
    // An Option only so that `harness batch merge` can do without it; clap requires it otherwise.
    #[arg(required = true)]
    pub(crate) requests: Option<PathBuf>,
    /// Runs in flight at once.
    #[arg(long, value_name = "N", default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..), help_heading = "Runs")]
    pub(crate) concurrency: u16,
    /// Run only every N-th line, starting at line I+1 (I from 0): N workers given 0/N .. N-1/N cover the file.
    /// `auto` reads a Slurm array task's SLURM_ARRAY_TASK_ID and SLURM_ARRAY_TASK_COUNT, or a Kubernetes indexed
    /// Job's JOB_COMPLETION_INDEX (with --shards N).
    #[arg(long, value_name = "I/N|auto", help_heading = "Runs")]
    pub(crate) shard: Option<ShardSpec>,
    /// With --shard auto: the number of shards, and the scheduler's index (JOB_COMPLETION_INDEX, SLURM_ARRAY_TASK_ID)
    /// is the shard. Needed under a Kubernetes indexed Job; under Slurm it lets one task resubmitted alone keep its place.
    #[arg(long, value_name = "N", requires = "shard", value_parser = clap::value_parser!(u32).range(1..), help_heading = "Runs")]
    pub(crate) shards: Option<u32>,
    /// At most N model requests a minute over the whole batch, spaced evenly (a hosted API's rate limit).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..), help_heading = "Runs")]
    pub(crate) rpm: Option<u32>,
    /// Also run again the requests whose latest line failed for the provider's reasons (status failed, error
    /// provider_error), appending their new lines.
    #[arg(long, help_heading = "Runs")]
    pub(crate) retry_failed: bool,
    /// Exit 0 even when runs failed for the provider's reasons (otherwise 5).
    #[arg(long, help_heading = "Runs")]
    pub(crate) allow_failures: bool,
    /// Seconds to wait out a model server that is down (no connection, no answer, 5xx) before the batch stops
    /// (exit 6, what did not run stays unrun). While it is down no run starts and the runs in flight wait.
    #[arg(long, value_name = "SECS", default_value_t = 300.0, help_heading = "Runs")]
    pub(crate) max_outage: f64,
    /// Retries over the whole batch, as a share of its model requests (0.5: one retry for every two requests;
    /// at least 10); past it, failed requests are not retried, and a notice says so.
    #[arg(long, value_name = "SHARE", default_value_t = 1.0, help_heading = "Runs")]
    pub(crate) retry_budget: f64,
    #[command(flatten, next_help_heading = "Provider")]
    pub(crate) provider: ProviderArgs,
    #[command(flatten, next_help_heading = "Limits")]
    pub(crate) limits: LoopArgs,
    #[command(flatten, next_help_heading = "Plugins and tools")]
    pub(crate) plugins: PluginArgs,
    #[command(flatten, next_help_heading = "Policy")]
    pub(crate) policy: crate::approve::PolicyArgs,
    /// JSON Lines answers to the calls that runs stopped before (status awaiting_approval):
    /// {"id": REQUEST_ID, "call": CALL_ID, "digest": DIGEST, "approve": true} (DIGEST: the result
    /// line's pending.digest, at least its first 16 hex digits) or {..., "approve": false, "reason": TEXT}.
    /// Those runs resume from their traces; awaiting runs without an answer keep waiting.
    #[arg(long, value_name = "FILE", help_heading = "Policy")]
    pub(crate) approvals: Option<PathBuf>,
    /// Results file (JSON Lines), one line per request as each run ends. Requests whose id already has a line
    /// in it are skipped: rerun with the same --out to resume.
    #[arg(long, value_name = "FILE", required = true, help_heading = "Output")]
    pub(crate) out: Option<PathBuf>,
    /// Seconds between progress lines when stderr is not a terminal.
    #[arg(long, value_name = "SECS", default_value_t = 10.0, help_heading = "Output")]
    pub(crate) progress_every: f64,
    /// Write each run's trace to DIR/ID.jsonl (the id percent-encoded for a file name).
    #[arg(long, value_name = "DIR", help_heading = "Traces")]
    pub(crate) traces: Option<PathBuf>,
    /// Export each run's spans (OpenTelemetry GenAI conventions) over OTLP/HTTP to the collector at URL;
    /// OTEL_EXPORTER_OTLP_ENDPOINT does the same (see docs/traces.md).
    #[arg(long, value_name = "URL", help_heading = "Traces")]
    pub(crate) otlp: Option<String>,
}

/// Runs `harness batch` (or `harness batch merge`) and returns the exit code.
pub(crate) fn batch(job: BatchJob) -> Result<u8> {
    match job {
        BatchJob::Merge { inputs, out, requests, partial } => merge(&inputs, &out, requests.as_deref(), partial),
        BatchJob::Run(settings) => run_batch(*settings),
    }
}

/// `harness batch merge`.
fn merge(inputs: &[PathBuf], out: &Path, requests: Option<&Path>, partial: bool) -> Result<u8> {
    let merged = harness_batch::merge(inputs, out, requests, partial)
        .map_err(|e| if e.is_usage() { CliError::Usage(e.to_string()) } else { CliError::Failure(e.to_string()) })?;
    let shards = match &merged.shards {
        Some((seen, count)) if *count > 1 => format!(", {} of {count} shards", seen.len()),
        _ => String::new(),
    };
    let batch = merged.batch.as_deref().map_or_else(String::new, |b| format!(" of batch {b}"));
    println!(
        "batch merge: {} results{batch} from {} files{shards}; written to {}",
        merged.records,
        inputs.len(),
        out.display()
    );
    Ok(0)
}

/// Runs a batch and returns the exit code.
fn run_batch(resolved: BatchSettings) -> Result<u8> {
    let BatchSettings {
        requests,
        out: out_path,
        run: settings,
        policy,
        tools: tool_settings,
        max_outage,
        retry_budget,
        progress_every,
        shard: spec,
        shards,
        approvals,
        retry_failed,
        allow_failures,
        traces,
        otlp,
        concurrency,
        rpm,
    } = resolved;
    let (requests, out_path) = (requests.as_path(), out_path.as_path());
    let budget = Arc::new(RetryBudget::new(retry_budget));
    let name = settings.provider;
    let (router, scripts) = router(&settings, crate::log::quiet(), &budget)?;

    let shard = spec.resolve(shards, |name| std::env::var(name).ok()).map_err(CliError::Usage)?;
    let input = input::read(requests, shard, scripts)?;
    let file = requests.display();
    for bad in &input.bad {
        eprintln!("harness: batch: {file}:{}: {}; skipped", bad.line, harness_core::printable(&bad.problem));
    }
    if let Some(line) = input.first_ignored_script {
        return Err(CliError::Usage(format!(
            "{file}:{line}: the request has a \"script\" ({} in all), which the {name} provider would ignore: run it with --provider scripted, or take the scripts out",
            input.ignored_scripts
        )));
    }

    let (mut out, mut earlier) = ResultsFile::open(out_path)?;
    let retrying = if retry_failed { earlier.retry_provider_failures() } else { 0 };
    let out_name = out_path.display();
    if let Some(error) = &earlier.unlocked {
        eprintln!("harness: warning: cannot lock {out_name}: {error}; make sure no other batch writes to it");
    }
    for (line, text) in &earlier.foreign {
        let text = harness_core::printable(text);
        eprintln!("harness: warning: {out_name}:{line}: not a result line, left as it is: {text}");
    }
    if earlier.torn {
        eprintln!(
            "harness: batch: {out_name}: cut off a torn last line (a batch was killed while writing it); its request runs again"
        );
    }
    let answers = answers(approvals.as_deref(), &input, &earlier, crate::log::quiet())?;
    let selected = input.requests.len();
    let fingerprint = input.fingerprint;
    let plan = plan(input.requests, &earlier, &answers, out_path)?;
    let (todo, skipped) = (plan.todo, plan.skipped);
    let resumed = todo.iter().filter(|j| j.resumes()).count();
    if let Some(dir) = &traces {
        harness_batch::create_traces_dir(dir)?;
    }

    let mut tools = Tools::wire(
        &tool_settings,
        Wants { report: !crate::log::quiet(), mcp: true, otlp: Some(otlp.as_deref()), ..Wants::default() },
    )?;
    check_tool_choice(&settings, &tools.registry)?;

    let shard_text = if shard.count > 1 { format!(" (shard {}/{})", shard.index, shard.count) } else { String::new() };
    if !crate::log::quiet() {
        let mut resuming = if resumed > 0 { format!(" ({resumed} resumed with their answers)") } else { String::new() };
        if retrying > 0 {
            resuming.push_str(&format!(" ({retrying} failed before, run again)"));
        }
        eprintln!(
            "harness: batch: {selected} requests{shard_text}, {skipped} already in {out_name}, {} to run{resuming}, {} at a time",
            todo.len(),
            concurrency
        );
    }
    let breaker = matches!(router, Router::Shared(_))
        .then(|| Breaker::new(max_outage, Arc::new(|said: &str| eprintln!("harness: batch: {said}"))));
    let mut batch = engine(router, tools.take_registry(), settings.options, traces.as_deref(), rpm)
        .with_policy(policy)
        .with_source(fingerprint, shard)
        .with_about(RunAbout {
            mcp_servers: tools.mcp().map(crate::mcp::peers).unwrap_or_default(),
            unenforced: tools.found.unenforced(),
            ..run_about(&tool_settings.project, &settings)
        });
    if let Some(otlp) = tools.otlp() {
        let tracer = otlp.sink_factory();
        batch = batch.with_sink(Box::new(move || Box::new(tracer.sink())));
    }
    if let Some(breaker) = breaker {
        batch = batch.with_breaker(breaker);
    }
    let batch = Arc::new(batch);
    let to_run = todo.len();
    let concurrency = usize::from(concurrency).min(todo.len());
    let mut progress = BatchProgress::new(todo.len(), Duration::from_secs_f64(progress_every), crate::log::quiet());
    let threads = std::thread::available_parallelism().map_or(1, usize::from).min(concurrency).max(1);
    let rt = runtime(threads)?;
    let ran = rt.block_on(batch.clone().run(todo, concurrency, &mut out, &mut progress));
    // An abandoned in-process call may still be running; the process must not wait for it.
    rt.shutdown_background();
    drop(tools);
    progress.finish();
    let tally = ran?;

    println!("{}", summary(&tally, progress.elapsed(), selected, skipped, input.bad.len(), &shard_text, out_path));
    let outage = batch.breaker().map(Breaker::stats).unwrap_or_default();
    let ending = Ending {
        outage,
        max_outage,
        unrun: to_run - tally.done(),
        failed: earlier.provider_failed.len() + tally.provider_failed,
        waiting: plan.waiting + tally.awaiting,
        budget_spent: budget.spent().then(|| budget.retries()),
    };
    Ok(ending.report(out_path, allow_failures))
}

/// Who answers a batch's runs (one provider, or each run's script), and what the requests'
/// scripts are then for.
pub(crate) fn router(settings: &Settings, quiet: bool, budget: &Arc<RetryBudget>) -> Result<(Router, Scripts)> {
    let name = settings.provider;
    if name != ProviderKind::Scripted {
        let shared = build_budgeted_provider(settings, quiet, Some(budget.clone()))?;
        return Ok((Router::Shared(shared), Scripts::Ignored));
    }
    note_ignored_settings(settings, quiet);
    Ok(match &settings.script {
        Some(path) => (Router::Scripted(Some(DefaultScript::read(path)?)), Scripts::Optional),
        None => (Router::Scripted(None), Scripts::Required),
    })
}

/// How a batch ended, as far as its exit code goes.
struct Ending {
    outage: OutageStats,
    max_outage: Duration,
    /// Requests this invocation meant to run that have no line from it.
    unrun: usize,
    /// Requests of the results file whose latest line failed for the provider's reasons.
    failed: usize,
    /// Runs of the results file that await approval.
    waiting: usize,
    /// The retries made, when the retry budget ran out.
    budget_spent: Option<u64>,
}

impl Ending {
    /// Prints what the operator should know and do, and returns the exit code.
    fn report(&self, out: &Path, allow_failures: bool) -> u8 {
        let out = out.display();
        if self.outage.outages > 0 {
            println!(
                "outages: {} (the model server down), waited {} in all",
                self.outage.outages,
                human_secs(self.outage.waited.as_secs_f64())
            );
        }
        if let Some(retries) = self.budget_spent {
            println!("the retry budget was spent ({retries} retries, --retry-budget): later failures were not retried");
        }
        if self.outage.stopped {
            println!(
                "stopped: the model server did not answer for {} (--max-outage); {} requests not run (no line): run the same command again to resume",
                human_secs(self.max_outage.as_secs_f64()),
                self.unrun
            );
            return 6;
        }
        if self.failed > 0 && !allow_failures {
            println!(
                "{} requests failed for the provider's reasons (their latest line in {out} is failed, provider_error): rerun with --retry-failed once the server is right, or pass --allow-failures to exit 0",
                self.failed
            );
            return 5;
        }
        if self.waiting == 0 {
            return 0;
        }
        println!(
            "{} await{} approval (the pending calls are in {out}, status awaiting_approval): write an approvals file, one {{\"id\": REQUEST_ID, \"call\": CALL_ID, \"digest\": PENDING_DIGEST, \"approve\": true}} (or \"approve\": false, \"reason\": TEXT) a line, and rerun with --approvals FILE",
            if self.waiting == 1 { "1 run".to_owned() } else { format!("{} runs", self.waiting) },
            if self.waiting == 1 { "s" } else { "" }
        );
        4
    }
}

/// The `--approvals` file's answers, checked against the requests and results; the lines for
/// runs that no longer wait are noted (a rerun of the same command is harmless).
fn answers(path: Option<&Path>, input: &Input, earlier: &Earlier, quiet: bool) -> Result<Answers> {
    let Some(path) = path else { return Ok(Answers::default()) };
    let answers = read_answers(path, input, earlier)?;
    if !quiet {
        for (line, id) in &answers.stale {
            eprintln!(
                "harness: note: {}:{line}: request {id:?} does not await approval (resumed already, or never stopped); line unused",
                path.display()
            );
        }
    }
    Ok(answers)
}

/// The engine, with this invocation's traces directory and request pace.
/// `traces` is `--traces DIR`, `rpm` is `--rpm`.
fn engine(
    router: Router,
    registry: ToolRegistry,
    options: harness_core::RunOptions,
    traces: Option<&Path>,
    rpm: Option<u32>,
) -> Batch {
    let mut batch = Batch::new(router, registry, options);
    if let Some(dir) = traces {
        batch = batch.with_traces(dir.to_path_buf());
    }
    if let Some(rpm) = rpm {
        batch = batch.with_rpm(rpm);
    }
    batch
}

/// The closing report: what ran, how it ended, how long it took, what it cost.
fn summary(
    tally: &Tally,
    elapsed: Duration,
    selected: usize,
    skipped: usize,
    bad: usize,
    shard: &str,
    out: &Path,
) -> String {
    let ran = tally.done();
    let secs = elapsed.as_secs_f64();
    let mut lines = vec![format!(
        "batch: {selected} requests{shard}: {ran} ran, {skipped} already done, {bad} bad lines skipped; results in {}",
        out.display()
    )];
    if ran > 0 {
        let rate = if secs > 0.0 { ran as f64 / secs } else { 0.0 };
        lines.push(format!(
            "status: finished {}, step_budget_exhausted {}, time_budget_exhausted {}, failed {}, awaiting_approval {}",
            tally.finished, tally.step_budget, tally.time_budget, tally.failed, tally.awaiting
        ));
        let p = |q| tally.percentile(q).map_or_else(|| "-".to_owned(), human_ms);
        lines.push(format!(
            "duration: p50 {}, p95 {}, max {}; wall {} ({rate:.1} runs/s)",
            p(50.0),
            p(95.0),
            p(100.0),
            human_secs(secs)
        ));
        lines.push(format!(
            "tokens: {} in, {} out; {} retries",
            tally.usage.input_tokens, tally.usage.output_tokens, tally.retries
        ));
    }
    lines.join("\n")
}
