//! The loop, in the seed's words: ask the router, read the reply, check the call, execute it,
//! record the step; feed the outcome back and go again, until `finish` or a budget is spent.
//!
//! The way in is a [`Loop`] ([`entry`]). Each stage is a module of its own: [`ask`], [`read`],
//! [`check`], [`execute`], [`record`]; a small model's first steps offer the tools its request
//! names ([`shortlist`]).
//! What the loop carries from one step to the next is [`Run`]; what one step knows is [`Step`].

mod ask;
mod check;
mod context;
mod entry;
mod execute;
mod read;
mod record;
mod shortlist;

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::approval::{Approvals, Decision, PendingCall, Verdict};
use crate::error::{ErrorCode, HarnessError};
use crate::provider::{Arguments, Message, ModelProvider, ModelReply, Usage};
use crate::registry::{RegisteredTool, ToolRegistry};
use crate::trace::{StepStatus, TraceSink};
use harness_reply::ReplyFormat;
use read::StepCall;

pub use context::{Compaction, ContextUse, estimate_tokens};
pub use entry::{Loop, Resumption};
pub use execute::call_tool;

/// What one run is: its limits, how its replies are read, when it may finish. How the process
/// running it tunes the loop is apart, in [`ProcessTuning`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunOptions {
    /// Steps the run may take; the last one offers `finish` alone.
    pub max_steps: u32,
    /// The same call this many times in a row is `repeated_call`; 0 turns the check off.
    pub max_repeats: u32,
    /// This many replies in a row cut at the token limit end the run `reply_truncated`; 0
    /// turns the check off.
    pub max_truncated: u32,
    /// Largest router reply (its text and all its calls' arguments), in bytes: over it, `reply_too_large`.
    pub max_reply_bytes: usize,
    /// Largest arguments of one call, in bytes: over it, `arguments_too_large`.
    pub max_arguments_bytes: usize,
    /// Largest conversation, in bytes: past it, the router is offered `finish` alone.
    pub max_conversation_bytes: usize,
    /// Wall-clock limit of the run: past it, `time_budget_exhausted`.
    pub max_duration: Option<Duration>,
    /// How to read a reply's text: `Auto` detects the model family's call format from its
    /// markers; a family reads that format only.
    pub reply_format: ReplyFormat,
    /// Whether `finish` may end the run before any tool has answered.
    pub early_finish: EarlyFinish,
}

/// How the process that runs the loop lets it use that process: not what a run is (that is
/// [`RunOptions`], which the trace records), but shortcuts only the process's owner can know
/// to be safe. Both off by default, for a process that runs many loops (a batch, a service);
/// given to the loop by [`Loop::tuning`]. A run's steps, trace and outcome are the same
/// either way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ProcessTuning {
    /// Call tools whose handlers allow it ([`ToolHandler::may_run_inline`]) on the loop's own
    /// thread instead of a blocking thread, saving the thread handoff (two wake-ups, about
    /// 20 us a call here). Only for a process that runs one loop at a time and has nothing
    /// else to schedule meanwhile. A call with a timeout goes to a blocking thread, unless its
    /// handler ends it at the deadline itself (a plugin in a child process).
    ///
    /// [`ToolHandler::may_run_inline`]: crate::ToolHandler::may_run_inline
    pub inline_calls: bool,
    /// The process exits right after the run (the CLI's `run`): the conversation is left to
    /// the OS, which takes the memory back at once, instead of being freed message by message
    /// (about 1,200 instructions a step of a scripted run, by callgrind).
    pub exits_after: bool,
}

/// Whether `finish` is offered before any tool has answered (where tools other than `finish`
/// are offered). Withheld, the step offers every other tool ([`ToolChoice::AnyBut`]) and a
/// `finish` called anyway is `tool_not_offered`: a first step cannot end the run with a guess.
///
/// [`ToolChoice::AnyBut`]: crate::ToolChoice::AnyBut
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EarlyFinish {
    /// As the provider says ([`ModelProvider::needs_a_tool_first`]): withheld for a small model.
    #[default]
    Provider,
    /// Always offered.
    Allowed,
    /// Withheld until a tool has answered.
    Refused,
}

impl Default for RunOptions {
    fn default() -> Self {
        Self {
            max_steps: 8,
            max_repeats: 3,
            max_truncated: 2,
            max_reply_bytes: 1 << 20,
            max_arguments_bytes: 256 << 10,
            max_conversation_bytes: 16 << 20,
            max_duration: None,
            reply_format: ReplyFormat::Auto,
            early_finish: EarlyFinish::Provider,
        }
    }
}

/// How a run ended; its snake_case name is what traces, `--json` and result lines write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
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
    /// A call waits for the operator's approval; the run stopped cleanly before it and can be
    /// resumed ([`Loop::resume`]). Its error's details hold the pending call.
    AwaitingApproval,
    /// The next request could not fit the model's context, even with earlier steps compacted.
    ContextExhausted,
    /// The model's replies were cut at the token limit `max_truncated` times in a row.
    ReplyTruncated,
}

impl RunStatus {
    /// The name written in traces and JSON: `finished`, `step_budget_exhausted`, ...
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Finished => "finished",
            RunStatus::StepBudgetExhausted => "step_budget_exhausted",
            RunStatus::TimeBudgetExhausted => "time_budget_exhausted",
            RunStatus::Failed => "failed",
            RunStatus::AwaitingApproval => "awaiting_approval",
            RunStatus::ContextExhausted => "context_exhausted",
            RunStatus::ReplyTruncated => "reply_truncated",
        }
    }
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
    /// The model's context, the largest prompt sent, and the compactions made to stay within it.
    pub context: ContextUse,
}

/// The loop, from step `first`; `fresh_first` marks the first step as the one that asked for
/// the current reply (a resumed step).
async fn drive(
    provider: &dyn ModelProvider,
    registry: &ToolRegistry,
    mut run: Run<'_>,
    first: u32,
    fresh_first: Option<bool>,
    trace: &mut dyn TraceSink,
) -> RunOutcome {
    let options = run.options;
    run.context.used.window = provider.context_window(registry.definitions()).await;
    if run.guards_a_small_model(provider) {
        run.gate.shortlist = run.request().and_then(|r| shortlist::shortlist(r, registry.definitions()));
    }
    for number in first..=options.max_steps {
        let mut step = Step::begin(number, run.finish_only(number));
        // Withheld on a forced step too: there the request still names `finish`, but a small
        // model's `finish` before any tool answered is a guess, refused, so that a run never
        // ends `finished` on one (it ends at its budget instead).
        step.finish_withheld = run.finish_withheld(provider, registry);
        step.shortlisted = step.finish_withheld && !step.finish_only && run.gate.shortlist.is_some();
        if number == first {
            step.fresh = fresh_first.unwrap_or(false);
        }
        if run.out_of_time(step.started) {
            return run.time_budget_exhausted(number - 1);
        }
        if !run.has_pending_call() {
            if let Some(outcome) = context::before_ask(&mut run, &step, trace) {
                return outcome;
            }
            step.repeat_penalty = run.context.cut_in_row > 0 && provider.penalizes_repeats();
            let reply = match ask::ask_router(provider, registry, &mut run, &mut step, trace).await {
                Ok(reply) => reply,
                Err(outcome) => return outcome,
            };
            run.context.after_reply(&reply);
            if let Err(error) = run.take_reply(reply, registry, &step) {
                if let Err(e) = trace.record(&record::refused_reply(&step, &error)) {
                    return run.failed(number, record::trace_error(&e));
                }
                run.feed_back(None, StepOutcome::Failed(error, StepStatus::Rejected));
                continue;
            }
            step.fresh = true;
        }
        let index = run.next_call();
        // Borrowed field by field: the call borrows the reply in the conversation while the
        // gate's checks change their own state.
        let (reply, calls) = reply_of_step(&run.conversation, run.current.as_ref());
        let read = read::read_call(reply, calls, index, &step);
        // Looked up once: the checks, the approval, the result check and the trace line all
        // need the tool, and each lookup hashes its name.
        let proposed = match &read.call {
            Ok(call) => Some(call),
            Err(unreadable) => unreadable.call.as_ref(),
        };
        let tool = proposed.and_then(|c| registry.get(&c.tool));
        let (call, outcome) = match read.call {
            Ok(mut call) => {
                let inline = run.tuning.inline_calls;
                let outcome =
                    check_and_execute(registry, tool, &mut run.gate, run.options, inline, &step, &mut call).await;
                let small = run.guards_a_small_model(provider);
                let outcome = check::copied_answer(&run.conversation, registry, small, outcome);
                (Some(call), outcome)
            }
            Err(unreadable) => (unreadable.call, StepOutcome::Failed(unreadable.error, StepStatus::Rejected)),
        };
        // A call that never ran breaks a row of repeats; one that ran and failed is part of it,
        // since failing again is the likeliest outcome of the same call.
        if matches!(outcome, StepOutcome::Failed(_, StepStatus::Rejected)) {
            run.gate.repeats.reset();
        }
        let source = tool.map(|t| &t.definition.source);
        let entry = record::step_entry(&step, reply, calls, read.index, source, call.as_ref(), &outcome);
        if let Err(e) = trace.record(&entry) {
            return run.failed(number, record::trace_error(&e));
        }
        if let StepOutcome::Finished(answer) = outcome {
            return run.finished(number, answer);
        }
        if let StepOutcome::Failed(error, StepStatus::AwaitingApproval) = outcome {
            return run.awaiting(number, error);
        }
        let answered = call.map(|c| (c.id, c.tool));
        run.feed_back(answered, outcome);
    }
    run.step_budget_exhausted()
}

/// Checks a call that was read and, when it passes, executes it (on the loop's thread when
/// `inline` and the tool allows it: [`ProcessTuning::inline_calls`]).
async fn check_and_execute(
    registry: &ToolRegistry,
    tool: Option<RegisteredTool<'_>>,
    gate: &mut Gate<'_>,
    options: &RunOptions,
    inline: bool,
    step: &Step,
    call: &mut StepCall<'_>,
) -> StepOutcome {
    let offered = check::Offered {
        finish_only: step.finish_only,
        finish_withheld: step.finish_withheld,
        shortlist: gate.shortlist.as_deref().filter(|_| step.shortlisted),
    };
    let cleared = check::check_call(registry, tool, call, offered, &mut gate.repeats, options.max_arguments_bytes);
    match cleared {
        Ok(check::Cleared::Finish(answer)) => StepOutcome::Finished(answer),
        Ok(check::Cleared::Execute { handler, timeout }) => {
            // Built once a step, and only where the map is filled: the repeat guard is on.
            let key = (options.max_repeats > 0).then(|| known_key(&call.tool, &call.arguments));
            // The same call again is answered with the result it had, not run a second time
            // (a tool with effects would act twice), and only `finish` is offered next: a
            // small model that calls again has the answer and should give it.
            if let Some(known) = key.as_deref().and_then(|k| gate.known_result(k)) {
                gate.finish_forced = true;
                return StepOutcome::Known(known, check::known_again(&call.tool));
            }
            match approve(tool, gate, step, call) {
                Verdict::Run => {}
                Verdict::Denied(error) => return StepOutcome::Failed(error, StepStatus::Rejected),
                Verdict::Wait(error) => return StepOutcome::Failed(error, StepStatus::AwaitingApproval),
            }
            let timeout = execute::within(timeout, gate.remaining());
            let outcome = execute::execute(handler, call, timeout, inline).await;
            let outcome = check::check_result(tool, outcome);
            if let StepOutcome::Ran(result) = &outcome {
                gate.answered = true;
                if let Some(key) = key {
                    gate.known.insert(key, result.clone());
                }
            }
            outcome
        }
        Err(error) => {
            // A repeated call will not change its result: from now on only `finish` is offered,
            // unless `finish` is withheld (nothing answered yet): forcing it then would leave the
            // run no call it accepts until its budget is spent.
            if error.code == ErrorCode::RepeatedCall {
                gate.finish_forced |= !step.finish_withheld;
                // One that answered before is answered so again, not with an error to copy.
                // No key is built while nothing is known.
                let known = (!gate.known.is_empty())
                    .then(|| known_key(&call.tool, &call.arguments))
                    .and_then(|key| gate.known_result(&key));
                if let Some(known) = known {
                    return StepOutcome::Known(known, check::known_again(&call.tool));
                }
            }
            StepOutcome::Failed(error, StepStatus::Rejected)
        }
    }
}

/// The approval policy's verdict on a call that passed its checks.
fn approve(tool: Option<RegisteredTool<'_>>, gate: &mut Gate<'_>, step: &Step, call: &StepCall<'_>) -> Verdict {
    let Some(tool) = tool else {
        return Verdict::Run;
    };
    let effect = tool.policy_effect();
    // An answer the operator gave to this very call (a resumed run's --deny ID) outranks the policy.
    let answered = gate.approvals.answered(&call.id);
    if !answered && gate.approvals.policy().allows_class_outright(effect) {
        return Verdict::Run;
    }
    let key = tool.policy_key();
    if !answered && gate.approvals.policy().decide(&key, effect) == Decision::Allow {
        return Verdict::Run;
    }
    let arguments = call.arguments.clone().into_owned();
    let pending = PendingCall {
        id: call.id.clone(),
        tool: call.tool.clone(),
        key,
        digest: crate::approval::call_digest(&call.tool, &arguments),
        arguments,
        effect,
        step: step.number,
    };
    gate.approvals.verdict(&pending)
}

/// What one step came to, before it is traced and fed back.
enum StepOutcome {
    /// The tool ran and returned this result.
    Ran(Value),
    /// `finish` was called with this answer.
    Finished(Value),
    /// The call was made before and answered with its known result; it did not run again.
    Known(Value, HarnessError),
    /// The call was refused or failed.
    Failed(HarnessError, StepStatus),
}

/// What one step knows about itself, for its trace line.
struct Step {
    number: u32,
    started: Instant,
    /// Only `finish` is offered at this step.
    finish_only: bool,
    /// Every tool but `finish` is offered at this step (no tool has answered yet).
    finish_withheld: bool,
    /// Only the run's shortlist is offered at this step ([`shortlist`]): `finish` is withheld
    /// and the request names some tools' words.
    shortlisted: bool,
    /// Wall time of this step's model call; 0 when the step ran a call of an earlier reply.
    model_us: u64,
    /// Tokens of this step's model call.
    usage: Option<Usage>,
    /// This step asked the router (rather than running a further call of an earlier reply).
    fresh: bool,
    /// This step's request asked the server for a repetition penalty, after a cut reply.
    repeat_penalty: bool,
}

impl Step {
    fn begin(number: u32, finish_only: bool) -> Self {
        Self {
            number,
            started: Instant::now(),
            finish_only,
            finish_withheld: false,
            shortlisted: false,
            model_us: 0,
            usage: None,
            fresh: false,
            repeat_penalty: false,
        }
    }
}

/// Steps whose messages the conversation reserves room for at the start: beyond, it grows.
const MAX_RESERVED_STEPS: u32 = 1 << 16;

/// What the loop carries from one step to the next.
struct Run<'o> {
    options: &'o RunOptions,
    tuning: ProcessTuning,
    conversation: Vec<Message>,
    /// Bytes of the conversation so far; past the limit, only `finish` is offered.
    conversation_bytes: usize,
    usage: Usage,
    retries: u32,
    gate: Gate<'o>,
    /// The reply being worked through. A reply with several calls is executed in order, one
    /// call per step, before the provider is asked again.
    current: Option<CurrentReply>,
    /// The model's context: what the last request cost, the steps compacted, the cut replies.
    context: context::ContextState,
}

impl Drop for Run<'_> {
    fn drop(&mut self) {
        if self.tuning.exits_after {
            std::mem::forget(std::mem::take(&mut self.conversation));
        }
    }
}

/// What decides whether a call may run, and for how long: kept apart from the conversation,
/// so that a step can borrow its call from the reply while the checks change their state.
struct Gate<'o> {
    approvals: &'o mut Approvals,
    repeats: check::RepeatGuard,
    /// Only `finish` is offered from now on (a repeated call, a conversation grown too large).
    finish_forced: bool,
    /// A tool has run and answered in this run: `finish` is offered even to a small model.
    answered: bool,
    /// The calls that ran and answered, by [`known_key`], with their results: the same call
    /// again is answered with its result and not run ([`StepOutcome::Known`]). A map: a long
    /// run would otherwise compare each call with every earlier one. Hashed with foldhash:
    /// SipHash over each key was about 700 instructions a step.
    known: std::collections::HashMap<Vec<u8>, Value, foldhash::fast::RandomState>,
    deadline: Option<Instant>,
    /// The tools a small model's request names ([`shortlist`]), offered alone while `finish`
    /// is withheld; `None` when none is singled out, or the run keeps no small model's guards.
    shortlist: Option<Vec<String>>,
}

impl Gate<'_> {
    fn remaining(&self) -> Option<Duration> {
        self.deadline.map(|d| d.saturating_duration_since(Instant::now()))
    }

    /// The result of an earlier call with this [`known_key`], if one answered.
    fn known_result(&self, key: &[u8]) -> Option<Value> {
        self.known.get(key).cloned()
    }
}

/// A call as a key: its tool, a NUL, and its arguments as JSON text (an object's keys sorted,
/// so the same arguments in any order are the same call). Written by the trace's own JSON
/// writer, the bytes `Display` writes: through `format!` a key cost about 2,500 instructions.
fn known_key(tool: &str, arguments: &Value) -> Vec<u8> {
    let mut key = Vec::with_capacity(tool.len() + 1 + 64);
    key.extend_from_slice(tool.as_bytes());
    key.push(0);
    // Only serde_json's number writer can fail, and never into a Vec; were it to, the
    // `Display` form is the same bytes.
    if crate::json_text::write_value(&mut key, arguments).is_err() {
        key.truncate(tool.len() + 1);
        key.extend_from_slice(arguments.to_string().as_bytes());
    }
    key
}

/// The reply being worked through: where it sits in the conversation, its calls, the next one.
struct CurrentReply {
    at: usize,
    calls: read::ReplyCalls,
    next: usize,
}

impl<'o> Run<'o> {
    fn start(request: &str, options: &'o RunOptions, tuning: ProcessTuning, approvals: &'o mut Approvals) -> Self {
        // A run that takes all its steps holds the request and two messages a step (more
        // only for replies with several calls). Reserved at once, that capacity costs no
        // memory until it is written (the pages are not touched), and the vector never grows
        // by copying itself into fresh pages: in a 10,000-step run it did, up to the size
        // where the allocator maps it apart, copying about 1.4 MB.
        let expected = 1 + 2 * options.max_steps.min(MAX_RESERVED_STEPS) as usize;
        let mut conversation = Vec::with_capacity(expected);
        conversation.push(Message::User { content: request.to_owned() });
        Self {
            options,
            tuning,
            conversation,
            conversation_bytes: request.len(),
            usage: Usage::default(),
            retries: 0,
            gate: Gate {
                approvals,
                repeats: check::RepeatGuard::new(options.max_repeats),
                finish_forced: false,
                answered: false,
                known: Default::default(),
                deadline: options.max_duration.map(|d| Instant::now() + d),
                shortlist: None,
            },
            current: None,
            context: context::ContextState::default(),
        }
    }

    /// Whether step `number` offers `finish` alone: the last step, or after a forcing event.
    fn finish_only(&self, number: u32) -> bool {
        self.gate.finish_forced || number == self.options.max_steps
    }

    /// Whether this step withholds `finish`: no tool has answered yet, there are other tools,
    /// and the operator (or else the provider, for a small model) wants one to answer first.
    fn finish_withheld(&self, provider: &dyn ModelProvider, registry: &ToolRegistry) -> bool {
        self.guards_a_small_model(provider) && !self.gate.answered && registry.definitions().len() > 1
    }

    /// Whether the run keeps a small model's guards: `finish` only once a tool has answered,
    /// and no answer taken from the request's text. The operator's word, else the provider's.
    fn guards_a_small_model(&self, provider: &dyn ModelProvider) -> bool {
        match self.options.early_finish {
            EarlyFinish::Allowed => false,
            EarlyFinish::Refused => true,
            EarlyFinish::Provider => provider.needs_a_tool_first(),
        }
    }

    /// The user's request: the conversation's first message.
    fn request(&self) -> Option<&str> {
        crate::provider::request_of(&self.conversation)
    }

    fn out_of_time(&self, now: Instant) -> bool {
        self.gate.deadline.is_some_and(|d| now >= d)
    }

    /// Whether the current reply still has a call to run.
    fn has_pending_call(&self) -> bool {
        self.current.as_ref().is_some_and(|c| c.next < c.calls.len())
    }

    /// Takes a new reply into the conversation and reads its calls, or refuses it whole when it
    /// is over the size limit: then it is neither read nor kept, and is replaced by a note of
    /// its size.
    fn take_reply(&mut self, reply: ModelReply, registry: &ToolRegistry, step: &Step) -> Result<(), HarnessError> {
        let arguments_bytes: usize = reply.calls.iter().map(|c| arguments_size(&c.arguments)).sum();
        let reply_bytes = reply.text.as_ref().map_or(0, String::len) + arguments_bytes;
        self.conversation_bytes += reply_bytes;
        if reply_bytes <= self.options.max_reply_bytes {
            let calls = read::read_reply_calls(&reply, registry.definitions(), self.options.reply_format, step);
            self.conversation.push(Message::Assistant { reply });
            self.current = Some(CurrentReply { at: self.conversation.len() - 1, calls, next: 0 });
            return Ok(());
        }
        let limit = self.options.max_reply_bytes;
        let omitted = format!("(a reply of {reply_bytes} bytes, omitted: over the size limit)");
        self.conversation.push(Message::Assistant { reply: ModelReply { text: Some(omitted), ..Default::default() } });
        self.current = None;
        Err(HarnessError::new(
            ErrorCode::ReplyTooLarge,
            format!("the reply is {reply_bytes} bytes, over the limit of {limit}; answer with one short tool call"),
            json!({ "bytes": reply_bytes, "limit": limit }),
        ))
    }

    /// The index of the call this step takes from the current reply; moves past it.
    fn next_call(&mut self) -> usize {
        let current = self.current.as_mut().expect("a step runs only once a reply was taken");
        current.next += 1;
        current.next - 1
    }

    /// Feeds a step's outcome back to the router as the next message; `call` is the id and
    /// tool of the call it answers, when there was one.
    fn feed_back(&mut self, call: Option<(String, String)>, outcome: StepOutcome) {
        let (content, is_error) = match outcome {
            StepOutcome::Ran(result) | StepOutcome::Finished(result) | StepOutcome::Known(result, _) => (result, false),
            StepOutcome::Failed(e, _) => (e.to_value(), true),
        };
        let (call_id, tool) = call.unzip();
        self.conversation_bytes += json_size(&content);
        if self.conversation_bytes > self.options.max_conversation_bytes {
            self.gate.finish_forced = true;
        }
        self.conversation.push(Message::ToolResult { call_id, tool, content, is_error });
    }

    fn finished(&self, steps: u32, answer: Value) -> RunOutcome {
        RunOutcome { answer: Some(answer), ..self.ended(RunStatus::Finished, steps, None) }
    }

    fn failed(&self, steps: u32, error: HarnessError) -> RunOutcome {
        self.ended(RunStatus::Failed, steps, error)
    }

    fn awaiting(&self, steps: u32, error: HarnessError) -> RunOutcome {
        self.ended(RunStatus::AwaitingApproval, steps, error)
    }

    /// The run's end with `status` after `steps` steps, for the reason `error` gives.
    fn ended(&self, status: RunStatus, steps: u32, error: impl Into<Option<HarnessError>>) -> RunOutcome {
        let (usage, retries, context) = (self.usage, self.retries, self.context.used.clone());
        RunOutcome { status, answer: None, steps, error: error.into(), usage, retries, context }
    }

    fn time_budget_exhausted(&self, steps: u32) -> RunOutcome {
        let limit = self.options.max_duration.unwrap_or_default();
        let limit_ms = u64::try_from(limit.as_millis()).unwrap_or(u64::MAX);
        let error = HarnessError::new(
            ErrorCode::TimeBudgetExhausted,
            format!(
                "the run reached its wall-clock limit of {limit_ms} ms after {steps} step{} without calling finish",
                if steps == 1 { "" } else { "s" }
            ),
            json!({ "limit_ms": limit_ms, "steps": steps }),
        );
        self.ended(RunStatus::TimeBudgetExhausted, steps, error)
    }

    fn step_budget_exhausted(&self) -> RunOutcome {
        let max_steps = self.options.max_steps;
        let error = HarnessError::new(
            ErrorCode::StepBudgetExhausted,
            format!(
                "the run took all {max_steps} steps without calling finish; raise --max-steps, or check the trace for why the model did not finish"
            ),
            json!({ "max_steps": max_steps }),
        );
        self.ended(RunStatus::StepBudgetExhausted, max_steps, error)
    }
}

/// The reply the current step takes its call from, and its calls.
fn reply_of_step<'r>(
    conversation: &'r [Message],
    current: Option<&'r CurrentReply>,
) -> (&'r ModelReply, &'r read::ReplyCalls) {
    let current = current.expect("a step runs only once a reply was taken");
    match &conversation[current.at] {
        Message::Assistant { reply } => (reply, &current.calls),
        _ => unreachable!("the current reply always points at an assistant message"),
    }
}

/// The size of a message as it counts towards the conversation limit.
fn message_size(message: &Message) -> usize {
    match message {
        Message::User { content } => content.len(),
        Message::Assistant { reply } => {
            reply.text.as_ref().map_or(0, String::len)
                + reply.calls.iter().map(|c| arguments_size(&c.arguments)).sum::<usize>()
        }
        Message::ToolResult { content, .. } => json_size(content),
    }
}

/// The size of a call's arguments as JSON text: kept text is its own length.
fn arguments_size(arguments: &Arguments) -> usize {
    match arguments {
        Arguments::Value(v) => json_size(v),
        Arguments::Json(text) => text.get().len(),
    }
}

/// The size of a value as JSON text; a string of JSON (as APIs send arguments) is its length.
fn json_size(v: &Value) -> usize {
    if let Value::String(s) = v {
        return s.len();
    }
    crate::json_text::encoded_len(v)
}

fn micros(since: Instant) -> u64 {
    u64::try_from(since.elapsed().as_micros()).unwrap_or(u64::MAX)
}
