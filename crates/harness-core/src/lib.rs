//! The router-first agent loop.
//!
//! A model never runs anything: at each step the [`ModelProvider`] is asked, with a forced tool
//! choice, to propose one call; the reply is read defensively ([`read_reply`] for text in any
//! model family's own call format, reasoning split off first), validated
//! against the tool's schema compiled once at registration ([`ToolRegistry`]), dispatched to
//! its [`ToolHandler`] off the async workers, and written to the trace ([`TraceSink`]). Every
//! failure is a deterministic [`HarnessError`] fed back to the model as the step's result.
//!
//! ```
//! use harness_core::{Loop, NoTrace, RunStatus, ToolRegistry};
//! # use harness_core::{ModelProvider, ModelReply, ProposedCall, ProviderError, RouterRequest};
//! # struct Done;
//! # #[async_trait::async_trait]
//! # impl ModelProvider for Done {
//! #     fn name(&self) -> &str { "done" }
//! #     async fn complete(&self, _: RouterRequest<'_>) -> Result<ModelReply, ProviderError> {
//! #         Ok(ModelReply { calls: vec![ProposedCall { id: None, name: "finish".into(),
//! #             arguments: serde_json::json!({"answer": 42}).into() }], ..Default::default() })
//! #     }
//! # }
//! # let rt = tokio::runtime::Runtime::new().unwrap();
//! # rt.block_on(async {
//! let registry = ToolRegistry::new(); // `finish` only; the loader adds plugin tools
//! let outcome = Loop::new(&Done, &registry).run("answer", &mut NoTrace).await;
//! assert_eq!(outcome.status, RunStatus::Finished);
//! assert_eq!(outcome.answer, Some(serde_json::json!(42)));
//! # });
//! ```
#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod approval;
mod digest;
mod error;
mod json_text;
pub mod no_follow;
mod parse;
mod printable;
mod provider;
pub mod quoting;
mod registry;
pub mod retry;
mod run;
mod trace;

pub use approval::{Answer, ApprovalPolicy, Approvals, Approver, Decision, Effect, PendingCall, call_digest};
pub use digest::sha256_hex;
pub use error::{ErrorCode, HarnessError};
pub use harness_reply::{ReadReply, ReplyError, ReplyErrorCode, ReplyFormat, TextCall, read_reply};
pub use printable::{moves_or_reorders, printable};
pub use provider::{
    Arguments, ContextWindow, Message, ModelProvider, ModelReply, ProposedCall, ProviderDecorator, ProviderError,
    RouterRequest, ToolChoice, Usage, request_of,
};
pub use registry::{
    CompiledSchema, EXTERNAL_REF_REFUSED, FINISH, RegisteredTool, RegistryError, ToolDefinition, ToolExample,
    ToolFailure, ToolHandler, ToolRegistry, ToolSource, ToolSpec, compile_schema,
};
/// How to read one reply, with the registry's tool definitions as the tools offered.
pub type ReadOptions<'a> = harness_reply::ReadOptions<'a, ToolDefinition>;
pub use run::{
    Compaction, ContextUse, EarlyFinish, Loop, ProcessTuning, Resumption, RunOptions, RunOutcome, RunStatus, call_tool,
    estimate_tokens,
};
pub use trace::{
    Limits, McpPeer, NoTrace, OfferedTool, RunAbout, RunEnd, RunStart, StepStatus, TRACE_FORMAT, TraceEntry, TraceSink,
    TraceWriter, Unenforced, definition_hash, rfc3339,
};
