//! The one way into the loop: a [`Loop`] holds what every run needs (the router, the tools,
//! the limits, the approval policy) and has two verbs, [`Loop::run`] a request and
//! [`Loop::resume`] a run that stopped for approval, each with its traced form that writes the
//! trace's first and last lines around the steps.

use std::io;
use std::time::Instant;

use serde_json::json;

use super::{CurrentReply, ProcessTuning, Run, RunOptions, RunOutcome, RunStatus, Step, drive, message_size, read};
use crate::approval::Approvals;
use crate::error::{ErrorCode, HarnessError};
use crate::provider::{Message, ModelProvider, Usage};
use crate::registry::ToolRegistry;
use crate::trace::{RunAbout, RunEnd, RunStart, TraceSink};

/// The loop, ready to run: the router it asks, the tools it offers, its limits and the policy
/// that decides which calls run. Built once, it runs any number of requests.
///
/// ```
/// use harness_core::{Loop, NoTrace, RunOptions, RunStatus, ToolRegistry};
/// # use harness_core::{ModelProvider, ModelReply, ProposedCall, ProviderError, RouterRequest};
/// # struct Done;
/// # #[async_trait::async_trait]
/// # impl ModelProvider for Done {
/// #     fn name(&self) -> &str { "done" }
/// #     async fn complete(&self, _: RouterRequest<'_>) -> Result<ModelReply, ProviderError> {
/// #         Ok(ModelReply { calls: vec![ProposedCall { id: None, name: "finish".into(),
/// #             arguments: serde_json::json!({"answer": 42}).into() }], ..Default::default() })
/// #     }
/// # }
/// # let rt = tokio::runtime::Runtime::new().unwrap();
/// # rt.block_on(async {
/// let registry = ToolRegistry::new();
/// let mut agent = Loop::new(&Done, &registry).options(RunOptions { max_steps: 4, ..RunOptions::default() });
/// let outcome = agent.run("answer", &mut NoTrace).await;
/// assert_eq!(outcome.status, RunStatus::Finished);
/// # });
/// ```
pub struct Loop<'a> {
    provider: &'a dyn ModelProvider,
    registry: &'a ToolRegistry,
    options: RunOptions,
    tuning: ProcessTuning,
    approvals: Approvals,
}

impl<'a> Loop<'a> {
    /// A loop over these tools with default limits, every call allowed.
    pub fn new(provider: &'a dyn ModelProvider, registry: &'a ToolRegistry) -> Self {
        Self {
            provider,
            registry,
            options: RunOptions::default(),
            tuning: ProcessTuning::default(),
            approvals: Approvals::allow_all(),
        }
    }

    /// The same loop with these limits.
    #[must_use]
    pub fn options(mut self, options: RunOptions) -> Self {
        self.options = options;
        self
    }

    /// The same loop with these shortcuts of the process it runs in (none by default).
    #[must_use]
    pub fn tuning(mut self, tuning: ProcessTuning) -> Self {
        self.tuning = tuning;
        self
    }

    /// The same loop with `approvals` deciding which calls run.
    #[must_use]
    pub fn approvals(mut self, approvals: Approvals) -> Self {
        self.approvals = approvals;
        self
    }

    /// Runs the loop for one request, writing its steps to `trace`.
    pub async fn run(&mut self, request: &str, trace: &mut dyn TraceSink) -> RunOutcome {
        let run = Run::start(request, &self.options, self.tuning, &mut self.approvals);
        drive(self.provider, self.registry, run, 1, None, trace).await
    }

    /// Continues a run that stopped for approval, exactly where it stopped: the pending call is
    /// checked again (the operator's answer given in the loop's approvals), and nothing already
    /// answered is asked of the model again.
    pub async fn resume(&mut self, from: Resumption, trace: &mut dyn TraceSink) -> RunOutcome {
        let (taken, fresh) = (from.steps_taken, from.fresh);
        let mut run = Run::start("", &self.options, self.tuning, &mut self.approvals);
        if let Err(error) = resume_into(&mut run, from, self.registry) {
            return run.failed(taken, error);
        }
        drive(self.provider, self.registry, run, taken + 1, Some(fresh), trace).await
    }

    /// [`Loop::run`] between a first and a last trace line, so that the trace alone tells what
    /// was asked, with what, and how it ended. A first line that cannot be written fails the
    /// run before any step; a last line that cannot be written fails it after.
    pub async fn run_traced(&mut self, request: &str, about: &RunAbout, trace: &mut dyn TraceSink) -> RunOutcome {
        let started = Instant::now();
        let mut start = RunStart::new(about, self.provider.name(), request, self.registry, &self.options);
        // Asked here for the first line; a provider asks its server once and keeps the answer.
        start.context = self.provider.context_window(self.registry.definitions()).await;
        if let Err(e) = trace.begin(&start) {
            let none = RunOutcome {
                status: RunStatus::Failed,
                answer: None,
                steps: 0,
                error: None,
                usage: Usage::default(),
                retries: 0,
                context: Default::default(),
            };
            return with_line_error(none, "first", &e);
        }
        let outcome = self.run(request, trace).await;
        ended(outcome, started, trace)
    }

    /// [`Loop::resume`], then the trace's last line; the caller has written the first line and
    /// the steps before the pending one again.
    pub async fn resume_traced(&mut self, from: Resumption, trace: &mut dyn TraceSink) -> RunOutcome {
        let started = Instant::now();
        let outcome = self.resume(from, trace).await;
        ended(outcome, started, trace)
    }
}

/// Where a run stopped for approval resumes: its conversation rebuilt from its trace, up to
/// and including the reply that holds the pending call.
#[derive(Debug, Clone)]
pub struct Resumption {
    /// The conversation, the request first; its last message is the reply with the pending call.
    pub conversation: Vec<Message>,
    /// Steps taken before the pending call's step (which runs again as the same step).
    pub steps_taken: u32,
    /// Which call of that reply is pending, from 0.
    pub call_index: usize,
    /// Whether the pending call's step was the one that asked for the reply (so its trace line
    /// carries the reply again).
    pub fresh: bool,
    /// Tokens spent so far.
    pub usage: Usage,
}

/// Rebuilds a run's state from `from`, its pending call next; a conversation that does not
/// end with a reply cannot resume.
fn resume_into(run: &mut Run<'_>, from: Resumption, registry: &ToolRegistry) -> Result<(), HarnessError> {
    let first = from.steps_taken + 1;
    let step = Step::begin(first, run.finish_only(first));
    let at = from.conversation.len().saturating_sub(1);
    let Some(Message::Assistant { reply }) = from.conversation.last() else {
        return Err(HarnessError::new(
            ErrorCode::AwaitingApproval,
            "the trace does not end with the reply of a pending call; there is nothing to resume",
            json!({}),
        ));
    };
    let calls = read::read_reply_calls(reply, registry.definitions(), run.options.reply_format, &step);
    run.conversation_bytes = from.conversation.iter().map(message_size).sum();
    run.gate.answered = from.conversation.iter().any(|m| matches!(m, Message::ToolResult { is_error: false, .. }));
    run.conversation = from.conversation;
    run.usage = from.usage;
    run.current = Some(CurrentReply { at, calls, next: from.call_index });
    Ok(())
}

/// Writes a run's last line; a line that cannot be written fails the run.
fn ended(outcome: RunOutcome, started: Instant, trace: &mut dyn TraceSink) -> RunOutcome {
    match trace.end(&RunEnd::new(&outcome, started.elapsed())) {
        Ok(()) => outcome,
        Err(e) => with_line_error(outcome, "last", &e),
    }
}

/// The run failed because its first or last trace line could not be written.
fn with_line_error(outcome: RunOutcome, which: &str, e: &io::Error) -> RunOutcome {
    let error = HarnessError::new(
        ErrorCode::TraceError,
        format!("the trace's {which} line could not be written ({e}); the run is not fully recorded"),
        json!({ "error": e.to_string(), "line": which }),
    );
    RunOutcome { status: RunStatus::Failed, answer: None, error: Some(error), ..outcome }
}
