//! The trace: one JSON object per step, as JSON Lines, flushed as each step ends.

use std::io::{self, Write};

use serde::Serialize;
use serde_json::Value;

use crate::error::HarnessError;

/// How a step ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
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
    /// Wall time of the whole step, model included, in microseconds.
    pub duration_us: u64,
    /// Wall time of the model call alone, in microseconds.
    pub model_us: u64,
}

/// Receives each step as it ends.
pub trait TraceSink: Send {
    /// Records one step; an error stops the run, since a run must stay inspectable.
    fn record(&mut self, entry: &TraceEntry<'_>) -> io::Result<()>;
}

/// Discards the trace (no `--trace` given).
pub struct NoTrace;

impl TraceSink for NoTrace {
    fn record(&mut self, _: &TraceEntry<'_>) -> io::Result<()> {
        Ok(())
    }
}

/// Writes the trace as JSON Lines, flushing after every line so a killed run keeps its steps.
pub struct TraceWriter<W: Write + Send> {
    out: W,
}

impl<W: Write + Send> TraceWriter<W> {
    /// A trace written to `out`.
    pub fn new(out: W) -> Self {
        Self { out }
    }

    /// Gives the writer back.
    pub fn into_inner(self) -> W {
        self.out
    }
}

impl<W: Write + Send> TraceSink for TraceWriter<W> {
    fn record(&mut self, entry: &TraceEntry<'_>) -> io::Result<()> {
        serde_json::to_writer(&mut self.out, entry)?;
        self.out.write_all(b"\n")?;
        self.out.flush()
    }
}

/// Keeps every line in memory; for tests and for callers that post-process a run.
impl TraceSink for Vec<Value> {
    fn record(&mut self, entry: &TraceEntry<'_>) -> io::Result<()> {
        self.push(serde_json::to_value(entry)?);
        Ok(())
    }
}
