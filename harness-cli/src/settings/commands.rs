//! Each command's flags and layers resolved once, by `main`, into what the command works from:
//! after this, no command reads its clap struct or the configuration again.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use harness_batch::{Shard, ShardSpec};
use harness_core::{ApprovalPolicy, ReplyFormat};
use harness_loader::isolation::Isolation;
use harness_trace::Resumable;
use harness_trust::ConfigFile;
use serde_json::Value;

use super::{Settings, ToolSettings, approval_policy, batch_provider, reply_format, resumed_provider};
use crate::Result;
use crate::batch::{BatchArgs, BatchCli, BatchCommand};
use crate::config::{LoadedConfig, Origin};
use crate::error::CliError;
use crate::eval::EvalArgs;
use crate::mcp::ServeArgs;
use crate::plugins::CheckArgs;
use crate::provider::{LoopArgs, ProviderArgs};
use crate::replay::ReplayArgs;
use crate::run::RunArgs;
use crate::tools_cmd::CallArgs;

/// What `harness run` works from: its request, provider, limits, policy, tools and outputs.
pub(crate) struct RunSettings {
    /// The request (read from stdin for `-`); `None` when resuming.
    pub(crate) request: Option<String>,
    /// The stopped run to go on with, checked against the answer given for its pending call.
    pub(crate) resumed: Option<Resumable>,
    /// The provider and the loop's limits.
    pub(crate) run: Settings,
    /// The longest outage waited out (`--max-outage`); `None` fails at once.
    pub(crate) max_outage: Option<Duration>,
    /// The approval policy (a resumed run's pending id among `--deny` left out: it is the answer).
    pub(crate) policy: ApprovalPolicy,
    /// `--approve` was given: the resumed call runs; else it is denied with `reason`.
    pub(crate) approved: bool,
    /// `--reason`: what the model is told of a denied call.
    pub(crate) reason: Option<String>,
    /// Where the trace goes: `--trace`, else the trace resumed.
    pub(crate) trace: Option<PathBuf>,
    /// `--otlp URL`.
    pub(crate) otlp: Option<String>,
    /// Plugins and tools.
    pub(crate) tools: ToolSettings,
    /// Refuse to start when the tools differ from harness.lock (`--locked`, or `locked = true`).
    pub(crate) locked: bool,
    /// `--json`: one JSON object on stdout.
    pub(crate) json: bool,
}

impl RunSettings {
    /// Reads the request (`-`: stdin) and the stopped run to resume, and resolves the rest.
    pub(crate) fn resolve(args: RunArgs) -> Result<Self> {
        let request = match args.request {
            Some(dash) if dash == "-" => Some(crate::run::from_stdin("the request")?),
            other => other,
        };
        let config = LoadedConfig::load(args.plugins.config.as_deref())?;
        let resumed = match &args.resume {
            Some(path) => Some(crate::run::resumable(path, &args.policy.deny, args.approve.as_deref())?),
            None => None,
        };
        let provider = match &resumed {
            Some(r) => resumed_provider(&args.provider, r, crate::log::quiet())?,
            None => args.provider.clone(),
        };
        let run = Settings::resolve(&provider, &args.limits, &config)?;
        let max_outage = outage_wait(args.max_outage)?;
        let pending = resumed.as_ref().map(|r| r.pending_id.as_str());
        let policy = approval_policy(&args.policy, &config, pending)?;
        let tools = ToolSettings::resolve(&args.plugins, &config)?;
        Ok(Self {
            request,
            resumed,
            run,
            max_outage,
            policy,
            approved: args.approve.is_some(),
            reason: args.reason,
            trace: args.trace.or(args.resume),
            otlp: args.otlp,
            tools,
            locked: args.locked || config.config.locked.unwrap_or(false),
            json: args.json,
        })
    }
}

/// `run --max-outage`: `None` for 0 (no wait), else the longest outage waited out.
fn outage_wait(seconds: f64) -> Result<Option<Duration>> {
    if seconds == 0.0 {
        return Ok(None);
    }
    super::seconds("--max-outage", seconds).map(Some)
}

/// What `harness tools call` works from: the tool, its arguments, the policy and the tools.
pub(crate) struct CallSettings {
    /// The tool's name, as a run offers it.
    pub(crate) tool: String,
    /// The arguments, read and parsed (from the argument, stdin or `--args FILE`).
    pub(crate) arguments: Value,
    /// Which calls run; no one is asked.
    pub(crate) policy: ApprovalPolicy,
    /// `--trace FILE`: the call as one trace step.
    pub(crate) trace: Option<PathBuf>,
    /// Plugins and tools.
    pub(crate) tools: ToolSettings,
}

impl CallSettings {
    /// Reads the arguments, then resolves the layers under the flags.
    pub(crate) fn resolve(args: &CallArgs) -> Result<Self> {
        let arguments = crate::tools_cmd::arguments(args.arguments.as_deref(), args.args_file.as_deref())?;
        let config = LoadedConfig::load(args.plugins.config.as_deref())?;
        let policy = approval_policy(&args.policy, &config, None)?;
        let tools = ToolSettings::resolve(&args.plugins, &config)?;
        Ok(Self { tool: args.tool.clone(), arguments, policy, trace: args.trace.clone(), tools })
    }
}

/// What `harness mcp serve` works from: the policy, the tools, and where and how it serves.
pub(crate) struct ServeSettings {
    /// `--trace FILE`: one JSON object per call.
    pub(crate) trace: Option<PathBuf>,
    /// `--otlp URL`.
    pub(crate) otlp: Option<String>,
    /// `--http`: Streamable HTTP instead of stdio, and how.
    pub(crate) http: Option<HttpServe>,
    /// Which calls run; no one is asked.
    pub(crate) policy: ApprovalPolicy,
    /// Plugins and tools.
    pub(crate) tools: ToolSettings,
}

/// How `harness mcp serve --http` serves.
pub(crate) struct HttpServe {
    /// The address to listen on.
    pub(crate) addr: String,
    /// `--token-env`: the variable holding the bearer token (else a random one).
    pub(crate) token_env: Option<String>,
    /// `--stateless`.
    pub(crate) stateless: bool,
    /// `--allow-origin`, repeated.
    pub(crate) allow_origin: Vec<String>,
    /// `--max-connections`.
    pub(crate) max_connections: usize,
    /// `--max-sessions`.
    pub(crate) max_sessions: usize,
    /// `--request-timeout`.
    pub(crate) request_timeout: Duration,
}

impl ServeSettings {
    /// Resolves the layers under the flags.
    pub(crate) fn resolve(args: ServeArgs) -> Result<Self> {
        let config = LoadedConfig::load(args.plugins.config.as_deref())?;
        let policy = approval_policy(&args.policy, &config, None)?;
        let tools = ToolSettings::resolve(&args.plugins, &config)?;
        let http = args.http.map(|addr| HttpServe {
            addr,
            token_env: args.token_env,
            stateless: args.stateless,
            allow_origin: args.allow_origin,
            max_connections: args.max_connections as usize,
            max_sessions: args.max_sessions as usize,
            request_timeout: Duration::from_secs(args.request_timeout),
        });
        Ok(Self { trace: args.trace, otlp: args.otlp, http, policy, tools })
    }
}

/// What `harness eval` works from: the tasks, and either answers made elsewhere or how to run.
pub(crate) struct EvalSettings {
    /// The tasks file.
    pub(crate) tasks: PathBuf,
    /// What is scored: answers made elsewhere, or the tasks' runs.
    pub(crate) scored: Scored,
    /// `--json`: the report as JSON.
    pub(crate) json: bool,
    /// `--min-score`, checked to be a share.
    pub(crate) min_score: Option<f64>,
}

/// What `harness eval` scores.
pub(crate) enum Scored {
    /// `--answers FILE`: answers made elsewhere; no configuration is read.
    Answers(PathBuf),
    /// The tasks, run as this says.
    Runs(Box<EvalRuns>),
}

/// How `harness eval` runs its tasks.
pub(crate) struct EvalRuns {
    /// The provider and the loop's limits.
    pub(crate) run: Settings,
    /// Which calls run.
    pub(crate) policy: ApprovalPolicy,
    /// Plugins and tools.
    pub(crate) tools: ToolSettings,
    /// `--out FILE`: the results kept there (else in a temporary file).
    pub(crate) out: Option<PathBuf>,
    /// `--traces DIR`.
    pub(crate) traces: Option<PathBuf>,
    /// `--concurrency`.
    pub(crate) concurrency: u16,
}

impl EvalSettings {
    /// Checks `--min-score`, then resolves the layers under the flags when the tasks are to run.
    pub(crate) fn resolve(args: EvalArgs) -> Result<Self> {
        if let Some(min) = args.min_score
            && !(0.0..=1.0).contains(&min)
        {
            return Err(CliError::Usage(format!(
                "--min-score {min}: give a share of the tasks, from 0 to 1 (0.75 for 75%)"
            )));
        }
        let scored = match args.answers {
            Some(answers) => Scored::Answers(answers),
            None => {
                let config = LoadedConfig::load(args.plugins.config.as_deref())?;
                let run = Settings::resolve(&args.provider, &args.limits, &config)?;
                let policy = approval_policy(&args.policy, &config, None)?;
                let tools = ToolSettings::resolve(&args.plugins, &config)?;
                let (out, traces, concurrency) = (args.out, args.traces, args.concurrency);
                Scored::Runs(Box::new(EvalRuns { run, policy, tools, out, traces, concurrency }))
            }
        };
        Ok(Self { tasks: args.tasks, scored, json: args.json, min_score: args.min_score })
    }
}

/// What `harness batch` does: merge shards' results, or run a batch.
pub(crate) enum BatchJob {
    /// `harness batch merge`.
    Merge {
        /// The shards' results files.
        inputs: Vec<PathBuf>,
        /// The merged file.
        out: PathBuf,
        /// `--requests FILE`: check every good line of it has a result.
        requests: Option<PathBuf>,
        /// `--partial`.
        partial: bool,
    },
    /// A batch to run.
    Run(Box<BatchSettings>),
}

/// What a batch runs from: its files, provider, limits, policy, tools and pace.
pub(crate) struct BatchSettings {
    /// The requests file.
    pub(crate) requests: PathBuf,
    /// The results file.
    pub(crate) out: PathBuf,
    /// The provider and the loop's limits.
    pub(crate) run: Settings,
    /// Which calls run.
    pub(crate) policy: ApprovalPolicy,
    /// Plugins and tools.
    pub(crate) tools: ToolSettings,
    /// `--max-outage`.
    pub(crate) max_outage: Duration,
    /// `--retry-budget`, checked to be a share from 0 to 100.
    pub(crate) retry_budget: f64,
    /// `--progress-every`, checked.
    pub(crate) progress_every: f64,
    /// `--shard`, all of the file when not given.
    pub(crate) shard: ShardSpec,
    /// `--shards`.
    pub(crate) shards: Option<usize>,
    /// `--approvals FILE`.
    pub(crate) approvals: Option<PathBuf>,
    /// `--retry-failed`.
    pub(crate) retry_failed: bool,
    /// `--allow-failures`.
    pub(crate) allow_failures: bool,
    /// `--traces DIR`.
    pub(crate) traces: Option<PathBuf>,
    /// `--otlp URL`.
    pub(crate) otlp: Option<String>,
    /// `--concurrency`.
    pub(crate) concurrency: u16,
    /// `--rpm`.
    pub(crate) rpm: Option<u32>,
}

impl BatchJob {
    /// Resolves `harness batch`'s command line and the layers under its flags.
    pub(crate) fn resolve(cli: BatchCli) -> Result<Self> {
        match (cli.command, cli.run.requests.clone(), cli.run.out.clone()) {
            (Some(BatchCommand::Merge(m)), _, _) => {
                Ok(Self::Merge { inputs: m.inputs, out: m.out, requests: m.requests, partial: m.partial })
            }
            (None, Some(requests), Some(out)) => Ok(Self::Run(Box::new(BatchSettings::resolve(cli.run, requests, out)?))),
            _ => Err(CliError::Usage(
                "give a requests file and --out (harness batch REQUESTS --out FILE), or a subcommand (merge); see harness batch --help".to_owned(),
            )),
        }
    }
}

impl BatchSettings {
    /// Checks the batch's own numbers, then resolves the layers under the flags.
    fn resolve(args: BatchArgs, requests: PathBuf, out: PathBuf) -> Result<Self> {
        if !(args.progress_every.is_finite() && args.progress_every > 0.0 && args.progress_every <= 86_400.0) {
            return Err(CliError::Usage(format!(
                "--progress-every {}: give a number of seconds above 0, at most 86400",
                args.progress_every
            )));
        }
        let max_outage = super::seconds("--max-outage", args.max_outage)?;
        if !(args.retry_budget.is_finite() && args.retry_budget >= 0.0 && args.retry_budget <= 100.0) {
            return Err(CliError::Usage(format!(
                "--retry-budget {}: give a share of the requests, from 0 (only the first 10 retries) to 100",
                args.retry_budget
            )));
        }
        let config = LoadedConfig::load(args.plugins.config.as_deref())?;
        let provider = batch_provider(&args.provider, &config, &requests)?;
        let run = Settings::resolve(&provider, &args.limits, &config)?;
        let policy = approval_policy(&args.policy, &config, None)?;
        let tools = ToolSettings::resolve(&args.plugins, &config)?;
        Ok(Self {
            requests,
            out,
            run,
            policy,
            tools,
            max_outage,
            retry_budget: args.retry_budget,
            progress_every: args.progress_every,
            shard: args.shard.unwrap_or(ShardSpec::Fixed(Shard::ALL)),
            shards: args.shards.map(|n| n as usize),
            approvals: args.approvals,
            retry_failed: args.retry_failed,
            allow_failures: args.allow_failures,
            traces: args.traces,
            otlp: args.otlp,
            concurrency: args.concurrency,
            rpm: args.rpm,
        })
    }
}

/// What `harness replay` works from: the trace, and today's policy, reply format and tools.
pub(crate) struct ReplaySettings {
    /// The trace to replay; `-` is stdin.
    pub(crate) trace: PathBuf,
    /// `--json`: the report as one JSON object.
    pub(crate) json: bool,
    /// The reply format the layers give, over the trace's.
    pub(crate) reply_format: Option<ReplyFormat>,
    /// Which recorded calls run; no one is asked.
    pub(crate) policy: ApprovalPolicy,
    /// Plugins and tools.
    pub(crate) tools: ToolSettings,
}

impl ReplaySettings {
    /// Resolves the layers under the flags.
    pub(crate) fn resolve(args: ReplayArgs) -> Result<Self> {
        let config = LoadedConfig::load(args.plugins.config.as_deref())?;
        let reply_format = reply_format(&config)?;
        let policy = approval_policy(&args.policy, &config, None)?;
        let tools = ToolSettings::resolve(&args.plugins, &config)?;
        Ok(Self { trace: args.trace, json: args.json, reply_format, policy, tools })
    }
}

/// What `harness plugins check` works from: the file, the test kit's settings, and the
/// configuration's plugin sections (passed to `init` whole).
pub(crate) struct CheckSettings {
    /// The plugin library file.
    pub(crate) file: PathBuf,
    /// `--json`.
    pub(crate) json: bool,
    /// `--junit FILE`.
    pub(crate) junit: Option<PathBuf>,
    /// `--cases`.
    pub(crate) cases: usize,
    /// `--seed`.
    pub(crate) seed: u64,
    /// `--tool-timeout`, checked.
    pub(crate) tool_timeout: Duration,
    /// `--isolation`.
    pub(crate) isolation: Isolation,
    /// `--allow-insecure-plugins`.
    pub(crate) allow_insecure: bool,
    /// Each `[plugins.NAME]` section of the layers, as JSON.
    pub(crate) sections: BTreeMap<String, Value>,
    /// `[limits] result_bytes`, when set.
    pub(crate) result_bytes: Option<usize>,
}

impl CheckSettings {
    /// Resolves the layers `--config` names, and checks the flags.
    pub(crate) fn resolve(args: CheckArgs) -> Result<Self> {
        let config = LoadedConfig::load(args.config.as_deref())?;
        let config_name = config.path.as_ref().map_or_else(|| "config".to_owned(), |p| p.display().to_string());
        let mut sections = BTreeMap::new();
        for (name, table) in &config.config.plugins.sections {
            let value = serde_json::to_value(table).map_err(|e| {
                CliError::Usage(format!("{config_name}: [plugins.{name}] cannot be passed to the plugin: {e}"))
            })?;
            sections.insert(name.clone(), value);
        }
        let secs = args.tool_timeout;
        if !(secs.is_finite() && secs > 0.0 && secs <= 86_400.0) {
            return Err(CliError::Usage(format!(
                "--tool-timeout {secs}: give a number of seconds between 0 and 86400"
            )));
        }
        let isolation = super::tooling::isolation_flag(&args.isolation)?;
        Ok(Self {
            file: args.file,
            json: args.json,
            junit: args.junit,
            cases: args.cases,
            seed: args.seed,
            tool_timeout: Duration::from_secs_f64(secs),
            isolation,
            allow_insecure: args.allow_insecure_plugins,
            sections,
            result_bytes: config.config.limits.result_bytes,
        })
    }
}

/// What `harness config show` shows: the settings as a run would resolve them, and the files.
pub(crate) struct ShowSettings {
    /// The settings, the flags given laid over the layers.
    pub(crate) settings: Settings,
    /// The project file, when one is used.
    pub(crate) file: Option<ConfigFile>,
    /// How the project file was chosen.
    pub(crate) origin: Option<Origin>,
    /// The user's file, when there is one.
    pub(crate) user: Option<ConfigFile>,
    /// `--json`.
    pub(crate) json: bool,
}

impl ShowSettings {
    /// Loads the layers (`explicit`: `--config`) and lays the run's flags over them, checked as
    /// a run checks them.
    pub(crate) fn resolve(
        explicit: Option<&std::path::Path>,
        provider: &ProviderArgs,
        limits: &LoopArgs,
        json: bool,
    ) -> Result<Self> {
        let loaded = LoadedConfig::load(explicit)?;
        let settings = Settings::resolve(provider, limits, &loaded)?;
        Ok(Self { settings, file: loaded.file, origin: loaded.origin, user: loaded.user, json })
    }
}
