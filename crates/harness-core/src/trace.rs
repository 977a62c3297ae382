//! The trace: one JSON object per step, as JSON Lines, flushed as each step ends; a first line
//! says what the run was asked and with what ([`RunStart`]), a last line how it ended
//! ([`RunEnd`]). A [`TraceSink`] receives all three; the JSON Lines file is one receiver, an
//! OpenTelemetry exporter (crate `harness-trace`) another, and the loop knows neither.

mod lines;
mod step_line;

use std::io::{self, Write};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::HarnessError;
use crate::provider::ModelReply;
use crate::run::Compaction;

pub use lines::{
    Limits, McpPeer, OfferedTool, RunAbout, RunEnd, RunStart, TRACE_FORMAT, Unenforced, definition_hash, rfc3339,
};

/// How a step ended: the one definition, which the loop writes and harness-trace reads back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepStatus {
    /// The tool ran and returned a result.
    Ok,
    /// The call never ran: bad JSON, unknown tool, invalid arguments, not offered, repeated.
    Rejected,
    /// The tool ran and failed, or the provider failed.
    Error,
    /// The router called `finish`.
    Finished,
    /// The call waits for the operator's approval; the run stopped before it.
    AwaitingApproval,
}

impl StepStatus {
    /// Every status, in the order summaries list them.
    pub const ALL: [StepStatus; 5] =
        [StepStatus::Ok, StepStatus::Rejected, StepStatus::Error, StepStatus::Finished, StepStatus::AwaitingApproval];

    /// The name written in the trace.
    pub fn as_str(self) -> &'static str {
        match self {
            StepStatus::Ok => "ok",
            StepStatus::Rejected => "rejected",
            StepStatus::Error => "error",
            StepStatus::Finished => "finished",
            StepStatus::AwaitingApproval => "awaiting_approval",
        }
    }
}

/// One step of a run, as written to the trace.
#[derive(Debug, Clone, Serialize)]
pub struct TraceEntry<'a> {
    /// Step number, from 1.
    pub step: u32,
    /// The tool called, when a call could be parsed.
    pub tool: Option<&'a str>,
    /// The arguments, when a call could be parsed.
    pub arguments: Option<&'a Value>,
    /// How the step ended.
    pub status: StepStatus,
    /// The tool's result (or `finish`'s answer).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<&'a Value>,
    /// The error object, when the step did not succeed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<&'a HarnessError>,
    /// The plugin that offered the tool.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plugin: Option<&'a str>,
    /// That plugin's version.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plugin_version: Option<&'a str>,
    /// The MCP server that offered the tool.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mcp_server: Option<&'a str>,
    /// The MCP session the call came in on, when the harness serves MCP over HTTP with
    /// sessions (its `Mcp-Session-Id`), so that one client's calls can be told from another's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mcp_session: Option<&'a str>,
    /// The MCP protocol version the call was made in, when the harness serves MCP.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mcp_protocol: Option<&'a str>,
    /// The tools offered at this step: `all`, or `finish` when only it was.
    pub offered: &'a str,
    /// Which call of a reply with several this step ran (from 0); absent for single calls.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub call_index: Option<usize>,
    /// The model's raw text, kept when the call was read from text or could not be read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reply_text: Option<&'a str>,
    /// The call format the reply's text was read as (`json`, `hermes`, ...), for calls read from text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reply_format: Option<&'a str>,
    /// The model's reasoning, split off its text or out of the API's reply; never read for calls.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<&'a str>,
    /// How the provider forced the tool choice (`native` or `prompt`), when it says.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub router_mode: Option<&'a str>,
    /// Tokens of the model call made at this step (absent for later calls of one reply).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<crate::provider::Usage>,
    /// The model's whole reply as it gave it (calls with their ids, text, reasoning, finish
    /// reason), on the step that asked for it; later calls of the same reply leave it out.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reply: Option<&'a ModelReply>,
    /// Wall time of the whole step, model included, in microseconds.
    pub duration_us: u64,
    /// Wall time of the model call alone, in microseconds.
    pub model_us: u64,
    /// The request asked the server for a repetition penalty, the reply before it being cut.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub repeat_penalty: bool,
}

impl<'a> TraceEntry<'a> {
    /// The line of step `step` that ended with `status`, with the tools `offered` (`all`, or
    /// `finish`) and its wall time: no call, result, error or model call in it yet. The other
    /// fields are set with struct update syntax (`TraceEntry { tool, ..TraceEntry::new(..) }`).
    pub fn new(step: u32, status: StepStatus, offered: &'a str, duration_us: u64) -> Self {
        Self {
            step,
            tool: None,
            arguments: None,
            status,
            result: None,
            error: None,
            plugin: None,
            plugin_version: None,
            mcp_server: None,
            mcp_session: None,
            mcp_protocol: None,
            offered,
            call_index: None,
            reply_text: None,
            reply_format: None,
            reasoning: None,
            router_mode: None,
            usage: None,
            reply: None,
            duration_us,
            model_us: 0,
            repeat_penalty: false,
        }
    }
}

/// Receives each step as it ends, and the run's first and last lines around them.
pub trait TraceSink: Send {
    /// Records what the run was asked and with what, before its first step.
    fn begin(&mut self, _start: &RunStart) -> io::Result<()> {
        Ok(())
    }
    /// Records one step; an error stops the run, since a run must stay inspectable.
    fn record(&mut self, entry: &TraceEntry<'_>) -> io::Result<()>;
    /// Records how the run ended, after its last step.
    fn end(&mut self, _end: &RunEnd) -> io::Result<()> {
        Ok(())
    }
    /// Records a compaction of the conversation, between two steps.
    fn compacted(&mut self, _line: &Compaction) -> io::Result<()> {
        Ok(())
    }
}

/// Discards the trace (no `--trace` given).
pub struct NoTrace;

impl TraceSink for NoTrace {
    fn record(&mut self, _: &TraceEntry<'_>) -> io::Result<()> {
        Ok(())
    }
}

/// Writes the trace as JSON Lines, flushing after every line so a killed run keeps its steps.
///
/// Each line is built whole in a buffer kept from line to line and handed to `out` in one
/// write: given a `File`, that is one write(2) a step, with no `BufWriter` copy in between.
pub struct TraceWriter<W: Write + Send> {
    out: W,
    line: Vec<u8>,
}

impl<W: Write + Send> TraceWriter<W> {
    /// A trace written to `out`.
    pub fn new(out: W) -> Self {
        Self { out, line: Vec::with_capacity(1024) }
    }

    /// Gives the writer back.
    pub fn into_inner(self) -> W {
        self.out
    }

    /// Writes the line in the buffer, then a newline, and flushes.
    fn send(&mut self) -> io::Result<()> {
        self.line.push(b'\n');
        self.out.write_all(&self.line)?;
        self.out.flush()
    }

    fn line(&mut self, line: &impl Serialize) -> io::Result<()> {
        self.line.clear();
        serde_json::to_writer(&mut self.line, line)?;
        self.send()
    }
}

impl<W: Write + Send> TraceSink for TraceWriter<W> {
    fn begin(&mut self, start: &RunStart) -> io::Result<()> {
        self.line(start)
    }
    fn record(&mut self, entry: &TraceEntry<'_>) -> io::Result<()> {
        self.line.clear();
        step_line::write_entry(&mut self.line, entry)?;
        self.send()
    }
    fn end(&mut self, end: &RunEnd) -> io::Result<()> {
        self.line(end)
    }
    fn compacted(&mut self, line: &Compaction) -> io::Result<()> {
        self.line(line)
    }
}

/// Keeps every line in memory; for tests and for callers that post-process a run.
impl TraceSink for Vec<Value> {
    fn begin(&mut self, start: &RunStart) -> io::Result<()> {
        self.push(serde_json::to_value(start)?);
        Ok(())
    }
    fn record(&mut self, entry: &TraceEntry<'_>) -> io::Result<()> {
        self.push(serde_json::to_value(entry)?);
        Ok(())
    }
    fn end(&mut self, end: &RunEnd) -> io::Result<()> {
        self.push(serde_json::to_value(end)?);
        Ok(())
    }
    fn compacted(&mut self, line: &Compaction) -> io::Result<()> {
        self.push(serde_json::to_value(line)?);
        Ok(())
    }
}

/// Forwards to a sink held by reference, so that a caller keeps its sink after a run.
impl<S: TraceSink + ?Sized> TraceSink for &mut S {
    fn begin(&mut self, start: &RunStart) -> io::Result<()> {
        (**self).begin(start)
    }
    fn record(&mut self, entry: &TraceEntry<'_>) -> io::Result<()> {
        (**self).record(entry)
    }
    fn end(&mut self, end: &RunEnd) -> io::Result<()> {
        (**self).end(end)
    }
    fn compacted(&mut self, line: &Compaction) -> io::Result<()> {
        (**self).compacted(line)
    }
}
