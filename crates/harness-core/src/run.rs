//! The loop itself: ask, parse, check, dispatch, trace, feed back; until `finish` or budget.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::{Value, json};

use crate::error::{ErrorCode, HarnessError};
use crate::parse::{ToolCall, parse_call, parse_text};
use crate::provider::{Message, ModelProvider, ModelReply, ProposedCall, RouterRequest, ToolChoice, Usage};
use crate::registry::{FINISH, ToolFailure, ToolRegistry, ToolSource};
use crate::trace::{StepStatus, TraceEntry, TraceSink};

/// Limits of one run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunOptions {
    /// Steps the run may take; the last one offers `finish` alone.
    pub max_steps: u32,
    /// The same call this many times in a row is `repeated_call`; 0 turns the check off.
    pub max_repeats: u32,
    /// Largest router reply (its text and all its calls' arguments), in bytes: over it, `reply_too_large`.
    pub max_reply_bytes: usize,
    /// Largest arguments of one call, in bytes: over it, `arguments_too_large`.
    pub max_arguments_bytes: usize,
    /// Largest conversation, in bytes: past it, the router is offered `finish` alone.
    pub max_conversation_bytes: usize,
    /// Wall-clock limit of the run: past it, `time_budget_exhausted`.
    pub max_duration: Option<Duration>,
    /// Call tools whose handlers allow it ([`ToolHandler::may_run_inline`]) on the loop's own
    /// thread instead of a blocking thread, saving the thread handoff (two wake-ups, about
    /// 20 us a call here). Only for a process that runs one loop at a time and has nothing
    /// else to schedule meanwhile. A call with a timeout goes to a blocking thread, unless its
    /// handler ends it at the deadline itself (a plugin in a child process).
    ///
    /// [`ToolHandler::may_run_inline`]: crate::ToolHandler::may_run_inline
    pub inline_calls: bool,
}

impl Default for RunOptions {
    fn default() -> Self {
        Self {
            max_steps: 8,
            max_repeats: 3,
            max_reply_bytes: 1 << 20,
            max_arguments_bytes: 256 << 10,
            max_conversation_bytes: 16 << 20,
            max_duration: None,
            inline_calls: false,
        }
    }
}

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// The router called `finish`.
    Finished,
    /// The step budget was spent without `finish`.
    StepBudgetExhausted,
    /// The wall-clock limit was reached without `finish`.
    TimeBudgetExhausted,
    /// The run could not go on (provider or trace failure).
    Failed,
}

/// The result of a run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunOutcome {
    /// How it ended.
    pub status: RunStatus,
    /// `finish`'s answer, when it was called.
    pub answer: Option<Value>,
    /// Steps taken.
    pub steps: u32,
    /// Why it did not finish.
    pub error: Option<HarnessError>,
    /// Tokens spent, as the provider reported them.
    pub usage: Usage,
    /// Requests the provider retried (rate limits, server errors), summed over the run.
    pub retries: u32,
}

/// Spots the same call made again and again.
struct RepeatGuard {
    max: u32,
    last: Option<(String, Value)>,
    count: u32,
}

impl RepeatGuard {
    /// Counts this call; true when it makes `max` identical calls in a row.
    fn tripped_by(&mut self, tool: &str, arguments: &Value) -> bool {
        if self.max == 0 {
            return false;
        }
        match &self.last {
            Some((t, a)) if t == tool && a == arguments => self.count += 1,
            _ => {
                self.last = Some((tool.to_owned(), arguments.clone()));
                self.count = 1;
            }
        }
        self.count >= self.max
    }

    fn reset(&mut self) {
        self.last = None;
        self.count = 0;
    }
}

/// What one step came to, before it is traced and fed back.
enum StepOutcome {
    Ran(Value),
    Finished(Value),
    Failed(HarnessError, StepStatus),
}

/// Counts bytes without keeping them: the size of a value as JSON, with no allocation.
struct ByteCount(usize);

impl std::io::Write for ByteCount {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 += buf.len();
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The size of a value as JSON text; a string of JSON (as APIs send arguments) is its length.
fn json_size(v: &Value) -> usize {
    if let Value::String(s) = v {
        return s.len();
    }
    let mut count = ByteCount(0);
    // Writing to a counter cannot fail.
    let _ = serde_json::to_writer(&mut count, v);
    count.0
}

fn micros(since: Instant) -> u64 {
    u64::try_from(since.elapsed().as_micros()).unwrap_or(u64::MAX)
}

/// Runs the router-first loop for one request.
pub async fn run(
    provider: &dyn ModelProvider,
    registry: &ToolRegistry,
    request: &str,
    options: &RunOptions,
    trace: &mut dyn TraceSink,
) -> RunOutcome {
    let mut conversation = vec![Message::User { content: request.to_owned() }];
    let mut usage = Usage::default();
    let mut retries = 0;
    let mut repeats = RepeatGuard { max: options.max_repeats, last: None, count: 0 };
    let mut finish_forced = false;
    let required = ToolChoice::Required;
    let finish_choice = ToolChoice::Tool(FINISH.to_owned());

    // The reply being worked through: where it sits in the conversation, and its next call.
    // A reply with several structured calls is executed in order, one call per step, before
    // the provider is asked again.
    let mut current: Option<(usize, usize)> = None;

    let deadline = options.max_duration.map(|d| Instant::now() + d);
    let mut conversation_bytes = request.len();

    for step in 1..=options.max_steps {
        let started = Instant::now();
        if deadline.is_some_and(|d| started >= d) {
            return time_budget_exhausted(step - 1, options, usage, retries);
        }
        let finish_only = finish_forced || step == options.max_steps;
        let mut model_us = 0;
        let mut step_usage = None;
        let pending = current.filter(|&(at, next)| match &conversation[at] {
            Message::Assistant { reply } => next < reply.calls.len(),
            _ => false,
        });
        let (reply_at, call_index, fresh) = match pending {
            Some((at, next)) => (at, next, false),
            None => {
                let (tools, tool_choice) = if finish_only {
                    (registry.finish_only(), &finish_choice)
                } else {
                    (registry.definitions(), &required)
                };
                let request = RouterRequest { conversation: &conversation, tools, tool_choice };
                let asked = match deadline {
                    None => provider.complete(request).await,
                    Some(d) => match tokio::time::timeout_at(d.into(), provider.complete(request)).await {
                        Ok(asked) => asked,
                        Err(_) => return time_budget_exhausted(step - 1, options, usage, retries),
                    },
                };
                model_us = micros(started);
                let reply = match asked {
                    Ok(reply) => reply,
                    Err(e) => {
                        let error = HarnessError::new(
                            ErrorCode::ProviderError,
                            format!("provider {:?} failed: {}", provider.name(), e.message),
                            json!({ "provider": provider.name() }),
                        );
                        let entry =
                            blank_entry(step, finish_only, StepStatus::Error, Some(&error), model_us, micros(started));
                        let traced = trace.record(&entry);
                        return failed(step, error, usage, retries + e.retries, traced);
                    }
                };
                if let Some(u) = reply.usage {
                    usage.add(u);
                }
                retries += reply.retries;
                step_usage = reply.usage;
                let arguments_bytes: usize = reply.calls.iter().map(|c| json_size(&c.arguments)).sum();
                let reply_bytes = reply.text.as_ref().map_or(0, String::len) + arguments_bytes;
                conversation_bytes += reply_bytes;
                if reply_bytes > options.max_reply_bytes {
                    // Not parsed, not kept: the reply is replaced by what the model is told.
                    let error = HarnessError::new(
                        ErrorCode::ReplyTooLarge,
                        format!(
                            "the reply is {reply_bytes} bytes, over the limit of {}; answer with one short tool call",
                            options.max_reply_bytes
                        ),
                        json!({ "bytes": reply_bytes, "limit": options.max_reply_bytes }),
                    );
                    let mut entry =
                        blank_entry(step, finish_only, StepStatus::Rejected, Some(&error), model_us, micros(started));
                    entry.usage = step_usage;
                    if let Err(e) = trace.record(&entry) {
                        return failed(step, trace_error(&e), usage, retries, Ok(()));
                    }
                    let omitted = format!("(a reply of {reply_bytes} bytes, omitted: over the size limit)");
                    conversation
                        .push(Message::Assistant { reply: ModelReply { text: Some(omitted), ..Default::default() } });
                    conversation.push(Message::ToolResult {
                        call_id: None,
                        tool: None,
                        content: error.to_value(),
                        is_error: true,
                    });
                    current = None;
                    continue;
                }
                conversation.push(Message::Assistant { reply });
                (conversation.len() - 1, 0, true)
            }
        };
        current = Some((reply_at, call_index + 1));
        let Message::Assistant { reply } = &conversation[reply_at] else {
            unreachable!("reply_at always points at an assistant message");
        };

        let forced = finish_only.then_some(FINISH);
        let proposed = reply.calls.get(call_index);
        let parsed = match proposed {
            Some(call) => parse_call(call, step),
            None => parse_text(reply.text.as_deref().unwrap_or(""), step, forced),
        };
        let (call, outcome) = match parsed {
            // A structured call whose arguments do not parse still has an id and a tool name:
            // keep them, so the error answers that call and the trace says which tool it was.
            Err(error) => (proposed.map(|c| unparsed_call(c, step)), StepOutcome::Failed(error, StepStatus::Rejected)),
            Ok(mut call) => match json_size(&call.arguments) {
                bytes if bytes > options.max_arguments_bytes => {
                    let error = HarnessError::new(
                        ErrorCode::ArgumentsTooLarge,
                        format!(
                            "the arguments of the call to {:?} are {bytes} bytes, over the limit of {}",
                            call.tool, options.max_arguments_bytes
                        ),
                        json!({ "tool": call.tool, "bytes": bytes, "limit": options.max_arguments_bytes }),
                    );
                    // The oversized arguments are not kept in the trace either.
                    let call = ToolCall { arguments: json!({ "omitted_bytes": bytes }), ..call };
                    (Some(call), StepOutcome::Failed(error, StepStatus::Rejected))
                }
                _ => {
                    let remaining = deadline.map(|d| d.saturating_duration_since(Instant::now()));
                    let outcome = decide(
                        registry,
                        &mut call,
                        finish_only,
                        &mut repeats,
                        &mut finish_forced,
                        remaining,
                        options.inline_calls,
                    )
                    .await;
                    (Some(call), outcome)
                }
            },
        };
        // A call that never ran breaks a row of repeats; one that ran and failed is part of it,
        // since failing again is the likeliest outcome of the same call.
        if matches!(outcome, StepOutcome::Failed(_, StepStatus::Rejected)) {
            repeats.reset();
        }

        let source = call.as_ref().and_then(|c| registry.get(&c.tool)).map(|t| &t.definition.source);
        let (plugin, plugin_version, mcp_server) = match source {
            Some(ToolSource::Plugin { name, version }) => (Some(name.as_str()), Some(version.as_str()), None),
            Some(ToolSource::Mcp { server }) => (None, None, Some(server.as_str())),
            _ => (None, None, None),
        };
        let (status, result, error) = match &outcome {
            StepOutcome::Ran(v) => (StepStatus::Ok, Some(v), None),
            StepOutcome::Finished(v) => (StepStatus::Finished, Some(v), None),
            StepOutcome::Failed(e, status) => (*status, None, Some(e)),
        };
        let entry = TraceEntry {
            step,
            tool: call.as_ref().map(|c| c.tool.as_str()),
            arguments: call.as_ref().map(|c| &c.arguments),
            status,
            result,
            error,
            plugin,
            plugin_version,
            mcp_server,
            offered: if finish_only { FINISH } else { "all" },
            call_index: (reply.calls.len() > 1).then_some(call_index),
            reply_text: if fresh { reply_text(reply) } else { None },
            router_mode: reply.router_mode.as_deref(),
            usage: step_usage,
            duration_us: micros(started),
            model_us,
        };
        if let Err(e) = trace.record(&entry) {
            return failed(step, trace_error(&e), usage, retries, Ok(()));
        }

        let (content, is_error) = match outcome {
            StepOutcome::Finished(answer) => {
                return RunOutcome {
                    status: RunStatus::Finished,
                    answer: Some(answer),
                    steps: step,
                    error: None,
                    usage,
                    retries,
                };
            }
            StepOutcome::Ran(result) => (result, false),
            StepOutcome::Failed(e, _) => (e.to_value(), true),
        };
        let (call_id, tool) = match call {
            Some(c) => (Some(c.id), Some(c.tool)),
            None => (None, None),
        };
        conversation_bytes += json_size(&content);
        if conversation_bytes > options.max_conversation_bytes {
            finish_forced = true;
        }
        conversation.push(Message::ToolResult { call_id, tool, content, is_error });
    }

    let error = HarnessError::new(
        ErrorCode::StepBudgetExhausted,
        format!(
            "the run took all {} steps without calling finish; raise --max-steps, or check the trace for why the model did not finish",
            options.max_steps
        ),
        json!({ "max_steps": options.max_steps }),
    );
    RunOutcome {
        status: RunStatus::StepBudgetExhausted,
        answer: None,
        steps: options.max_steps,
        error: Some(error),
        usage,
        retries,
    }
}

/// A structured call as proposed, raw arguments included, for a call that did not parse.
fn unparsed_call(call: &ProposedCall, step: u32) -> ToolCall {
    ToolCall {
        id: call.id.clone().unwrap_or_else(|| format!("call_{step}")),
        tool: call.name.clone(),
        arguments: call.arguments.clone(),
    }
}

fn time_budget_exhausted(steps: u32, options: &RunOptions, usage: Usage, retries: u32) -> RunOutcome {
    let limit_ms = options.max_duration.map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    let error = HarnessError::new(
        ErrorCode::TimeBudgetExhausted,
        format!("the run reached its wall-clock limit of {limit_ms} ms after {steps} steps without calling finish"),
        json!({ "limit_ms": limit_ms, "steps": steps }),
    );
    RunOutcome { status: RunStatus::TimeBudgetExhausted, answer: None, steps, error: Some(error), usage, retries }
}

fn reply_text(reply: &ModelReply) -> Option<&str> {
    if !reply.calls.is_empty() {
        return None;
    }
    reply.text.as_deref().filter(|t| !t.is_empty())
}

fn blank_entry<'a>(
    step: u32,
    finish_only: bool,
    status: StepStatus,
    error: Option<&'a HarnessError>,
    model_us: u64,
    duration_us: u64,
) -> TraceEntry<'a> {
    TraceEntry {
        step,
        tool: None,
        arguments: None,
        status,
        result: None,
        error,
        plugin: None,
        plugin_version: None,
        mcp_server: None,
        offered: if finish_only { FINISH } else { "all" },
        call_index: None,
        reply_text: None,
        router_mode: None,
        usage: None,
        duration_us,
        model_us,
    }
}

fn trace_error(e: &std::io::Error) -> HarnessError {
    HarnessError::new(
        ErrorCode::TraceError,
        format!("the trace could not be written ({e}); the run stopped so that no step goes unrecorded"),
        json!({ "error": e.to_string() }),
    )
}

fn failed(step: u32, error: HarnessError, usage: Usage, retries: u32, traced: std::io::Result<()>) -> RunOutcome {
    let error = match traced {
        Ok(()) => error,
        Err(e) => trace_error(&e),
    };
    RunOutcome { status: RunStatus::Failed, answer: None, steps: step, error: Some(error), usage, retries }
}

/// Checks a parsed call and, when it passes, runs it.
async fn decide(
    registry: &ToolRegistry,
    call: &mut ToolCall,
    finish_only: bool,
    repeats: &mut RepeatGuard,
    finish_forced: &mut bool,
    remaining: Option<Duration>,
    inline: bool,
) -> StepOutcome {
    let rejected = |e| StepOutcome::Failed(e, StepStatus::Rejected);
    let Some(tool) = registry.get(&call.tool) else {
        let offered: Vec<&str> =
            if finish_only { vec![FINISH] } else { registry.definitions().iter().map(|d| d.name.as_str()).collect() };
        return rejected(HarnessError::new(
            ErrorCode::UnknownTool,
            format!("there is no tool named {:?}; call one of: {}", call.tool, offered.join(", ")),
            json!({ "tool": call.tool, "offered": offered }),
        ));
    };
    if finish_only && call.tool != FINISH {
        return rejected(HarnessError::new(
            ErrorCode::ToolNotOffered,
            format!("{:?} is not offered at this step; only finish is: call finish with your best answer", call.tool),
            json!({ "tool": call.tool, "offered": [FINISH] }),
        ));
    }
    if let Err(e) = tool.validate(&call.arguments) {
        return rejected(e);
    }
    if call.tool == FINISH {
        return StepOutcome::Finished(call.arguments.get("answer").cloned().unwrap_or(Value::Null));
    }
    if repeats.tripped_by(&call.tool, &call.arguments) {
        *finish_forced = true;
        return rejected(HarnessError::new(
            ErrorCode::RepeatedCall,
            format!(
                "{:?} was called with the same arguments {} times in a row; its result will not change. Call finish with your best answer",
                call.tool, repeats.max
            ),
            json!({ "tool": call.tool, "times": repeats.max }),
        ));
    }
    let Some(handler) = tool.handler().cloned() else {
        return rejected(HarnessError::new(
            ErrorCode::UnknownTool,
            format!("the tool {:?} has no implementation", call.tool),
            json!({ "tool": call.tool }),
        ));
    };
    let timeout = match (tool.timeout, remaining) {
        (Some(t), Some(r)) => Some(t.min(r)),
        (t, r) => t.or(r),
    };
    execute(handler, call, timeout, inline).await
}

/// How long past its timeout a handler that enforces timeouts itself may take to report it.
const ENFORCEMENT_GRACE: Duration = Duration::from_secs(1);

/// Runs the handler on a blocking thread so that a slow tool never stalls the async workers.
/// The arguments travel to the thread and back, so they are never copied.
async fn execute(
    handler: Arc<dyn crate::registry::ToolHandler>,
    call: &mut ToolCall,
    timeout: Option<Duration>,
    inline: bool,
) -> StepOutcome {
    let tool = Arc::<str>::from(call.tool.as_str());
    // A call with a timeout stays inline only when its handler ends it at the deadline itself.
    let ran = if inline && (timeout.is_none() || handler.enforces_timeout()) && handler.may_run_inline() {
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| handler.call(&tool, &call.arguments)));
        Ok(result)
    } else {
        off_thread(handler, call, &tool, timeout).await
    };
    let failure = match ran {
        Ok(Ok(Ok(value))) => return StepOutcome::Ran(value),
        Ok(Ok(Err(failure))) => failure,
        Ok(Err(_)) => {
            ToolFailure { code: "tool_panicked".to_owned(), message: "the tool's host adapter panicked".to_owned() }
        }
        Err(outcome) => return outcome,
    };
    let code = ErrorCode::of_tool_failure(&failure.code);
    let details = if code.as_str() == failure.code {
        json!({ "tool": &*tool })
    } else {
        json!({ "tool": &*tool, "tool_code": failure.code })
    };
    StepOutcome::Failed(HarnessError::new(code, failure.message, details), StepStatus::Error)
}

type Caught = std::thread::Result<Result<Value, ToolFailure>>;

/// Runs the handler on a blocking thread; the arguments travel there and back, never copied.
/// `Err` is the step's outcome already decided: a timeout, or a thread that failed.
async fn off_thread(
    handler: Arc<dyn crate::registry::ToolHandler>,
    call: &mut ToolCall,
    tool: &Arc<str>,
    timeout: Option<Duration>,
) -> Result<Caught, StepOutcome> {
    let enforces = handler.enforces_timeout();
    // An abandoned call keeps its arguments; keep a copy for the trace only when that can happen.
    let kept = (timeout.is_some() && !enforces).then(|| call.arguments.clone());
    let arguments = std::mem::take(&mut call.arguments);
    let t = tool.clone();
    let task = tokio::task::spawn_blocking(move || {
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| handler.call(&t, &arguments)));
        (arguments, result)
    });
    let joined = match timeout {
        None => task.await,
        Some(limit) => {
            let wait = if enforces { limit + ENFORCEMENT_GRACE } else { limit };
            match tokio::time::timeout(wait, task).await {
                Ok(joined) => joined,
                Err(_) => {
                    if let Some(arguments) = kept {
                        call.arguments = arguments;
                    }
                    let ms = u64::try_from(limit.as_millis()).unwrap_or(u64::MAX);
                    return Err(StepOutcome::Failed(
                        HarnessError::new(
                            ErrorCode::ToolTimeout,
                            format!(
                                "{tool:?} did not answer within {ms} ms; the call was abandoned and its result will be ignored"
                            ),
                            json!({ "tool": &**tool, "timeout_ms": ms }),
                        ),
                        StepStatus::Error,
                    ));
                }
            }
        }
    };
    match joined {
        Ok((arguments, result)) => {
            call.arguments = arguments;
            Ok(result)
        }
        Err(e) => Err(StepOutcome::Failed(
            HarnessError::new(
                ErrorCode::ToolPanicked,
                format!("the tool's thread failed: {e}"),
                json!({ "tool": &**tool }),
            ),
            StepStatus::Error,
        )),
    }
}

/// Validates and runs one call outside a run, exactly as a step would (unknown tool, schema,
/// timeout, error mapping), for callers that are not a router: an MCP server, plugin checks.
///
/// `finish` is not a tool to call here and is `unknown_tool`.
pub async fn call_tool(registry: &ToolRegistry, tool: &str, arguments: Value) -> Result<Value, HarnessError> {
    let known = registry.get(tool).filter(|t| t.handler().is_some());
    let Some(found) = known else {
        let offered: Vec<&str> =
            registry.definitions().iter().map(|d| d.name.as_str()).filter(|n| *n != FINISH).collect();
        return Err(HarnessError::new(
            ErrorCode::UnknownTool,
            format!("there is no tool named {tool:?}; call one of: {}", offered.join(", ")),
            json!({ "tool": tool, "offered": offered }),
        ));
    };
    found.validate(&arguments)?;
    let Some(handler) = found.handler().cloned() else {
        unreachable!("filtered on having a handler above");
    };
    let mut call = ToolCall { id: String::new(), tool: tool.to_owned(), arguments };
    match execute(handler, &mut call, found.timeout, false).await {
        StepOutcome::Ran(result) | StepOutcome::Finished(result) => Ok(result),
        StepOutcome::Failed(error, _) => Err(error),
    }
}
