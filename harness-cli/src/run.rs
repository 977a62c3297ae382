//! `harness run`: one request through the loop.

use std::io::{self, Write};
use std::path::PathBuf;

use clap::Args;
use harness_core::{
    Answer, ApprovalPolicy, Approvals, Compaction, Loop, ProcessTuning, RunAbout, RunEnd, RunStart, StepStatus,
    TraceEntry, TraceSink, TraceWriter,
};
use harness_trace::{Resumable, resumption};
use serde_json::{Value, json};

use crate::Result;
use crate::discovery::{PluginArgs, report_late_failures};
use crate::error::CliError;
use crate::provider::{LoopArgs, ProviderArgs, build_provider, check_tool_choice, run_about, runtime};
use crate::settings::RunSettings;
use crate::tools::{Tools, Wants};
use harness_trace::{Tee, cut, printable};

/// Arguments of `harness run`.
#[derive(Debug, Args)]
#[command(after_help = crate::exit::RunExit::help())]
pub(crate) struct RunArgs {
    /// The request for the agent; `-` reads it from standard input (UTF-8, one trailing newline
    /// dropped). Not with --resume: the trace holds it.
    #[arg(required_unless_present = "resume")]
    pub(crate) request: Option<String>,
    #[command(flatten, next_help_heading = "Provider")]
    pub(crate) provider: ProviderArgs,
    /// Seconds to wait out a model server that is still down after a request's retries (no connection, no
    /// answer, 5xx), probing it with backoff, within --max-seconds. 0, the default, fails at once (exit 1);
    /// `batch` waits out 300 s by default.
    #[arg(long, value_name = "SECS", default_value_t = 0.0, help_heading = "Provider")]
    pub(crate) max_outage: f64,
    #[command(flatten, next_help_heading = "Limits")]
    pub(crate) limits: LoopArgs,
    #[command(flatten, next_help_heading = "Plugins and tools")]
    pub(crate) plugins: PluginArgs,
    /// Refuse to start when the offered tools differ from harness.lock (see `harness lock`).
    #[arg(long, help_heading = "Plugins and tools")]
    pub(crate) locked: bool,
    #[command(flatten, next_help_heading = "Policy")]
    pub(crate) policy: crate::approve::PolicyArgs,
    /// Print one JSON object with status, answer, steps and error instead of the answer alone.
    #[arg(long, help_heading = "Output")]
    pub(crate) json: bool,
    /// Write the trace to FILE: a first line saying what was asked and with what, one line per step, a last
    /// line saying how the run ended (see docs/traces.md).
    #[arg(long, value_name = "FILE", help_heading = "Trace and resume")]
    pub(crate) trace: Option<PathBuf>,
    /// Export the run's spans (OpenTelemetry GenAI conventions) over OTLP/HTTP to the collector at URL, such as
    /// http://localhost:4318; OTEL_EXPORTER_OTLP_ENDPOINT does the same (see docs/traces.md).
    #[arg(long, value_name = "URL", help_heading = "Trace and resume")]
    pub(crate) otlp: Option<String>,
    /// Continue a run that stopped for approval, from its trace (rewritten in place unless --trace
    /// names another file); give --approve ID or --deny ID for its pending call.
    #[arg(long, value_name = "TRACE", conflicts_with = "request", help_heading = "Trace and resume")]
    pub(crate) resume: Option<PathBuf>,
    /// With --resume: run the pending call with this id. `ID@DIGEST`, as the stopped run's hint
    /// prints it, also holds the trace's call to the digest (a prefix of 16 or more hex digits)
    /// of the call that was shown, should the trace have been edited since.
    #[arg(long, value_name = "ID", requires = "resume", help_heading = "Trace and resume")]
    pub(crate) approve: Option<String>,
    /// With --resume and --deny ID: the reason the model is told.
    #[arg(long, value_name = "TEXT", requires = "resume", help_heading = "Trace and resume")]
    pub(crate) reason: Option<String>,
}

/// Tees each step to the trace file and, unless quiet, a progress line on stderr.
struct Progress<'a> {
    inner: &'a mut dyn TraceSink,
    quiet: bool,
    /// Each model call's tokens, by step, for `--json` (what a prompt cache saved, step by step).
    usage_by_step: Vec<Value>,
}

impl TraceSink for Progress<'_> {
    fn begin(&mut self, start: &RunStart) -> io::Result<()> {
        self.inner.begin(start)
    }
    fn end(&mut self, end: &RunEnd) -> io::Result<()> {
        self.inner.end(end)
    }
    fn compacted(&mut self, line: &Compaction) -> io::Result<()> {
        self.inner.compacted(line)?;
        if !self.quiet {
            eprintln!(
                "harness: compacted steps {}-{} before step {}: {} -> {} tokens",
                line.steps[0], line.steps[1], line.before_step, line.tokens_before, line.tokens_after
            );
        }
        Ok(())
    }
    fn record(&mut self, entry: &TraceEntry<'_>) -> io::Result<()> {
        self.inner.record(entry)?;
        if let Some(usage) = &entry.usage {
            let mut line = json!({ "step": entry.step });
            if let (Value::Object(line), Ok(Value::Object(usage))) = (&mut line, serde_json::to_value(usage)) {
                line.extend(usage);
            }
            self.usage_by_step.push(line);
        }
        if !self.quiet {
            let tool = entry.tool.unwrap_or("-");
            let args = entry.arguments.map(|a| cut(&a.to_string(), 80)).unwrap_or_default();
            let what = match (entry.status, entry.error, entry.result) {
                (_, Some(e), _) => format!("{} {}", e.code.as_str(), e.message),
                (StepStatus::Finished, _, _) => "finished".to_owned(),
                (_, _, Some(r)) => format!("ok {}", cut(&r.to_string(), 80)),
                _ => String::new(),
            };
            // The line carries model and tool output: printed as `trace show` prints it, with
            // control characters escaped, so that it cannot drive the terminal.
            let line = format!("step {} {tool} {args} -> {what}", entry.step);
            eprintln!("harness: {}", printable(&line));
        }
        Ok(())
    }
}

/// Runs `harness run` with its resolved settings and returns the exit code.
pub(crate) fn run(resolved: RunSettings) -> Result<u8> {
    let RunSettings {
        request,
        resumed,
        run: settings,
        max_outage,
        policy,
        approved,
        reason,
        trace,
        otlp,
        tools,
        locked,
        json,
    } = resolved;
    let provider = build_provider(&settings, crate::log::quiet())?;
    // A single run fails as soon as its request's retries are spent, as people expect of a
    // command; an outage is waited out only when asked for (--max-outage), within the run's
    // time budget.
    let breaker = harness_providers::Breaker::new(
        max_outage.unwrap_or_default(),
        std::sync::Arc::new(|said: &str| eprintln!("harness: {said}")),
    );
    let waits = max_outage.is_some() && settings.retries != Some(0);
    let guarded = waits.then(|| harness_providers::Guarded::new(provider.as_ref(), &breaker));
    let provider = guarded.as_ref().map_or(provider.as_ref(), |g| g as &dyn harness_core::ModelProvider);
    let options = settings.options;
    let approvals = approvals_of(policy, approved, reason, resumed.as_ref());
    let trace_path = trace;
    let mut trace_file = match &trace_path {
        Some(path) => {
            let mut file = harness_core::no_follow::create_file(path)
                .map_err(|e| CliError::Usage(format!("cannot create trace file {}: {e}", path.display())))?;
            // A resumed run's trace is the whole run: what came before the pending call, then the rest.
            for line in resumed.iter().flat_map(|r| &r.kept_lines) {
                writeln!(file, "{line}")
                    .map_err(|e| CliError::Failure(format!("cannot write trace file {}: {e}", path.display())))?;
            }
            // TraceWriter builds each line whole and writes it at once: no BufWriter needed.
            Some(TraceWriter::new(file))
        }
        None => None,
    };

    // Plugins the cache answers for are opened at their first call, not before the first request.
    let wants = Wants {
        report: !crate::log::quiet(),
        open_lazily: true,
        mcp: true,
        otlp: Some(otlp.as_deref()),
        mcp_only: None,
    };
    let tool_settings = tools;
    let tools = Tools::wire(&tool_settings, wants)?;
    check_tool_choice(&settings, &tools.registry)?;
    crate::lock_cmd::check(&tools, &tool_settings, locked)?;

    let runtime = runtime(1)?;
    let mut sinks = Tee::new();
    if let Some(file) = trace_file.as_mut() {
        sinks.push(file);
    }
    if let Some(otlp) = tools.otlp() {
        sinks.push(otlp.sink());
    }
    let mut progress = Progress { inner: &mut sinks, quiet: crate::log::quiet(), usage_by_step: Vec::new() };
    let about = RunAbout {
        mcp_servers: tools.mcp().map(crate::mcp::peers).unwrap_or_default(),
        unenforced: tools.found.unenforced(),
        ..run_about(&tool_settings.project, &settings)
    };
    // One loop on a current-thread runtime: nothing else waits while an in-process plugin call
    // runs, so the thread handoff (most of a step's cost) is skipped. And the process ends
    // right after the run: the conversation is not freed piece by piece. (A batch runs many
    // loops on a shared runtime and goes on after each: it keeps the defaults.)
    let tuning = ProcessTuning { inline_calls: true, exits_after: true };
    let mut agent = Loop::new(provider, &tools.registry).options(options).tuning(tuning).approvals(approvals);
    let outcome = match resumed {
        Some(r) => runtime.block_on(agent.resume_traced(r.resumption, &mut progress)),
        None => {
            let request = request.as_deref().unwrap_or_default();
            runtime.block_on(agent.run_traced(request, &about, &mut progress))
        }
    };
    let usage_by_step = std::mem::take(&mut progress.usage_by_step);
    drop(agent);
    drop(sinks);
    if !crate::log::quiet() {
        report_late_failures(&tools.found);
    }
    // An abandoned in-process call may still be running; the process must not wait for it.
    runtime.shutdown_background();
    drop(tools);

    let stdout = io::stdout();
    let mut out = stdout.lock();
    let status = outcome.status.as_str();
    let printed = if json {
        let mut obj = json!({ "status": status, "answer": outcome.answer, "steps": outcome.steps, "usage": outcome.usage, "usage_by_step": usage_by_step, "retries": outcome.retries, "context": outcome.context });
        if let Some(e) = &outcome.error {
            obj["error"] = e.to_value();
            if let Some(pending) = e.details.get("pending") {
                obj["pending"] = pending.clone();
            }
        }
        writeln!(out, "{obj}")
    } else {
        if let Some(e) = &outcome.error {
            // The message names the call's id, which the provider chose.
            let said = crate::trace_cmd::ended_with(status, e.code.as_str(), &e.message);
            eprintln!("harness: {}", printable(&said));
        }
        if let Some(hint) = resume_hint(&outcome, trace_path.as_deref()) {
            eprintln!("harness: {hint}");
        }
        // The model's answer is exact for a pipe or a file; on a terminal, its escape
        // sequences are shown, not obeyed (line breaks kept).
        let on_terminal = std::io::IsTerminal::is_terminal(&std::io::stdout());
        let shown = |text: &str| match on_terminal {
            true => text.split('\n').map(printable).collect::<Vec<_>>().join("\n"),
            false => text.to_owned(),
        };
        match &outcome.answer {
            Some(Value::String(s)) => writeln!(out, "{}", shown(s)),
            Some(v) => writeln!(out, "{}", shown(&v.to_string())),
            None => Ok(()),
        }
    };
    printed.map_err(|e| CliError::Failure(format!("cannot write to stdout: {e}")))?;
    Ok(crate::exit::RunExit::of(outcome.status).code())
}

/// What `-` stands for, read whole from standard input: UTF-8, one trailing newline (`\n` or
/// `\r\n`, as `echo` and editors leave it) dropped; empty is a usage error naming `what`.
pub(crate) fn from_stdin(what: &str) -> Result<String> {
    use std::io::Read as _;
    let mut bytes = Vec::new();
    io::stdin()
        .lock()
        .read_to_end(&mut bytes)
        .map_err(|e| CliError::Usage(format!("cannot read {what} from stdin (`-`): {e}")))?;
    let text = String::from_utf8(bytes)
        .map_err(|e| CliError::Usage(format!("{what} read from stdin (`-`) is not UTF-8: {e}")))?;
    let text = match text.strip_suffix('\n') {
        Some(rest) => rest.strip_suffix('\r').unwrap_or(rest).to_owned(),
        None => text,
    };
    if text.trim().is_empty() {
        return Err(CliError::Usage(format!(
            "{what} read from stdin (`-`) is empty: pipe it in (`echo TEXT | harness ...`), or give it as an argument"
        )));
    }
    Ok(text)
}

/// How to resume a run that stopped for approval, or why it cannot be: the call as the
/// operator is asked to judge it (tool, arguments), every part escaped.
fn resume_hint(outcome: &harness_core::RunOutcome, trace: Option<&std::path::Path>) -> Option<String> {
    let pending = outcome.error.as_ref()?.details.get("pending")?;
    let text = |key: &str| printable(pending.get(key).and_then(Value::as_str).unwrap_or("?"));
    let arguments = printable(&cut(&pending.get("arguments").map(Value::to_string).unwrap_or_default(), 400));
    let Some(path) = trace else {
        return Some(
            "without --trace FILE this run cannot resume; run it again with --trace to answer its call later"
                .to_owned(),
        );
    };
    let (id, digest) = (text("id"), text("digest"));
    let short = digest.get(..DIGEST_SHOWN).unwrap_or(&digest);
    Some(format!(
        "the call {id} to {} ({}) waits with {arguments}\nharness: to answer: harness run --resume {} --approve {id}@{short} (or --deny {id} --reason TEXT)",
        text("key"),
        text("effect"),
        printable(&path.display().to_string())
    ))
}

/// Hex digits of a call's digest the resume hint prints: short enough to copy, long enough
/// (64 bits) that forging an edited call with the same prefix is out of reach.
const DIGEST_SHOWN: usize = 16;

/// Whether `given` (`--approve ID` or `ID@DIGEST`) names the pending call of `r`: its id, and
/// when a digest is given, a prefix of at least [`DIGEST_SHOWN`] hex digits of the call's.
fn approves(given: &str, r: &Resumable, path: &std::path::Path) -> std::result::Result<(), String> {
    if given == r.pending_id {
        return Ok(());
    }
    let Some((id, digest)) = given.rsplit_once('@').filter(|(id, _)| *id == r.pending_id) else {
        return Err(format!(
            "the pending call of {} is {} ({}); approve or deny that id",
            path.display(),
            printable(&r.pending_id),
            printable(&r.pending_tool)
        ));
    };
    if digest.len() < DIGEST_SHOWN || !digest.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(format!(
            "{digest:?} is not a call digest: give at least {DIGEST_SHOWN} hex digits, as the hint printed them"
        ));
    }
    if !r.pending_digest.starts_with(&digest.to_ascii_lowercase()) {
        return Err(format!(
            "the call {} in the trace changed since it was shown to you (its digest is {}, not {digest}); it was not run. Read it with `harness trace show`, and approve it again if you mean to",
            printable(id),
            printable(r.pending_digest.get(..DIGEST_SHOWN).unwrap_or(&r.pending_digest))
        ));
    }
    Ok(())
}

/// The stopped run in `path`, checked against the answer given for its pending call.
/// `deny` is what `--deny` lists (the pending call's id among them, to deny it), `approve`
/// what `--approve` gives.
pub(crate) fn resumable(path: &std::path::Path, deny: &[String], approve: Option<&str>) -> Result<Resumable> {
    let trace = harness_trace::read(path).map_err(|e| CliError::Usage(e.to_string()))?;
    let r = resumption(&trace).map_err(|e| CliError::Usage(format!("--resume {}: {e}", path.display())))?;
    let denied = deny.contains(&r.pending_id);
    let answered = match approve {
        Some(given) => {
            approves(given, &r, path)
                .map_err(|why| CliError::Usage(format!("--approve {}: {why}", printable(given))))?;
            !denied
        }
        None => denied,
    };
    if !answered {
        return Err(CliError::Usage(format!(
            "--resume {}: give --approve {id} or --deny {id} (the pending call to {})",
            path.display(),
            printable(&r.pending_tool),
            id = printable(&r.pending_id)
        )));
    }
    Ok(r)
}

/// The run's approvals: the policy, a terminal prompt, and the answer given for a resumed call
/// (`approved` with `--approve`, else denied with `reason`).
fn approvals_of(
    policy: ApprovalPolicy,
    approved: bool,
    reason: Option<String>,
    resumed: Option<&Resumable>,
) -> Approvals {
    let mut approvals = crate::approve::approvals(policy);
    if let Some(r) = resumed {
        let answer = if approved { Answer::Yes } else { Answer::No(reason) };
        approvals.decide(&r.pending_id, answer);
        // The call the resumed loop reads again must be the one the trace recorded as shown.
        approvals.bind(&r.pending_id, &r.pending_digest);
    }
    approvals
}
