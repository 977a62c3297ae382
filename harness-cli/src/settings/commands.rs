//! Each command's flags and layers resolved once, by `main`, into what the command works from:
//! after this, no command reads its clap struct or the configuration again.

use std::path::PathBuf;
use std::time::Duration;

use harness_core::ApprovalPolicy;
use harness_trace::Resumable;
use serde_json::Value;

use super::{Settings, ToolSettings, approval_policy, resumed_provider};
use crate::Result;
use crate::config::LoadedConfig;
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
        let max_outage = crate::run::outage_wait(args.max_outage)?;
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
