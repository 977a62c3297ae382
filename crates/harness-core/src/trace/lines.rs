//! The first and last lines of a trace: what the run was asked and with what, and how it ended.
//! Neither has a `step` field, so a reader that wants steps keeps only the lines with one.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::digest::sha256_hex;
use serde::Serialize;
use serde_json::Value;

use crate::error::HarnessError;
use crate::provider::{ContextWindow, Usage};
use crate::registry::{ToolDefinition, ToolRegistry, ToolSource};
use crate::run::{ContextUse, RunOptions, RunOutcome, RunStatus};

/// The version of the trace format this harness writes; readers accept older and newer ones.
pub const TRACE_FORMAT: u32 = 2;

/// What only the caller knows about a run: the program, the model, the configuration.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunAbout {
    /// The version of the program that runs the loop (`harness --version`).
    pub harness_version: String,
    /// The model id the provider was given, when it takes one.
    pub model: Option<String>,
    /// How the tool choice is forced, as configured (`auto`, `native`, `prompt`).
    pub router_mode: Option<String>,
    /// Where the configuration came from (its path), when a file was read.
    pub config_source: Option<String>,
    /// SHA-256 of the configuration file's bytes, hex.
    pub config_hash: Option<String>,
    /// The MCP servers that started, with the protocol version each one settled on.
    pub mcp_servers: Vec<McpPeer>,
    /// The plugins whose declared effects this platform does not enforce in full.
    pub unenforced: Vec<Unenforced>,
}

/// A plugin whose declared effects are not all enforced where it runs (a kernel without the
/// Landlock features they need, or Windows), as the first line lists it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Unenforced {
    /// The plugin's name.
    pub plugin: String,
    /// The effects its offered tools declare, as `reads+writes` (`pure` when none).
    pub effects: String,
    /// What is not enforced, in one line.
    pub reason: String,
}

/// An MCP server the run reached, as the first line lists it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct McpPeer {
    /// Its name in `[[mcp.servers]]`.
    pub name: String,
    /// The protocol version the handshake settled on (`2025-06-18`, ...); versions differ in
    /// what a server may send, so a trace read later must say which one was spoken.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub protocol_version: Option<String>,
}

/// One tool offered to the router, as the first line lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OfferedTool {
    /// The tool's name.
    pub name: String,
    /// `builtin`, `plugin` or `mcp`.
    pub source: &'static str,
    /// The plugin that offers it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plugin: Option<String>,
    /// That plugin's version.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plugin_version: Option<String>,
    /// The MCP server that offers it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mcp_server: Option<String>,
    /// SHA-256 (hex) of the definition the router saw: name, description, parameters.
    pub definition_hash: String,
}

/// The run's limits, as the first line records them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Limits {
    /// Steps the run may take.
    pub max_steps: u32,
    /// Identical calls in a row before `repeated_call`; 0 is off.
    pub max_repeats: u32,
    /// Cut replies in a row before the run ends `reply_truncated`; 0 is off.
    pub max_truncated: u32,
    /// Largest router reply, in bytes.
    pub max_reply_bytes: usize,
    /// Largest arguments of one call, in bytes.
    pub max_arguments_bytes: usize,
    /// Largest conversation, in bytes.
    pub max_conversation_bytes: usize,
    /// Wall-clock limit, in milliseconds, when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_duration_ms: Option<u64>,
}

impl From<&RunOptions> for Limits {
    fn from(o: &RunOptions) -> Self {
        Self {
            max_steps: o.max_steps,
            max_repeats: o.max_repeats,
            max_truncated: o.max_truncated,
            max_reply_bytes: o.max_reply_bytes,
            max_arguments_bytes: o.max_arguments_bytes,
            max_conversation_bytes: o.max_conversation_bytes,
            max_duration_ms: o.max_duration.map(millis),
        }
    }
}

/// The first line of a trace.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunStart {
    /// Always `start`.
    pub kind: &'static str,
    /// The trace format, [`TRACE_FORMAT`].
    pub format: u32,
    /// The version of the program that ran the loop.
    pub harness_version: String,
    /// The request the run was given.
    pub request: String,
    /// The provider's name.
    pub provider: String,
    /// The model id, when the provider takes one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// How the tool choice is forced, as configured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub router_mode: Option<String>,
    /// Where the configuration came from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub config_source: Option<String>,
    /// SHA-256 of the configuration file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub config_hash: Option<String>,
    /// How the reply's text was read (`auto`, or a model family's call format).
    pub reply_format: &'static str,
    /// Every tool offered, `finish` first.
    pub tools: Vec<OfferedTool>,
    /// The MCP servers reached, with their protocol versions.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub mcp_servers: Vec<McpPeer>,
    /// The plugins whose declared effects are not enforced in full, and what is not.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unenforced: Vec<Unenforced>,
    /// The run's limits.
    pub limits: Limits,
    /// The model's context, where its size came from, and what the system prompt and the tool
    /// listing cost of it; absent when the provider declares none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context: Option<ContextWindow>,
    /// When the run started, RFC 3339 in UTC.
    pub started_at: String,
}

impl RunStart {
    /// The first line of a run of `request` with these tools and limits.
    pub fn new(about: &RunAbout, provider: &str, request: &str, registry: &ToolRegistry, options: &RunOptions) -> Self {
        Self {
            kind: "start",
            format: TRACE_FORMAT,
            harness_version: about.harness_version.clone(),
            request: request.to_owned(),
            provider: provider.to_owned(),
            model: about.model.clone(),
            router_mode: about.router_mode.clone(),
            config_source: about.config_source.clone(),
            config_hash: about.config_hash.clone(),
            reply_format: options.reply_format.as_str(),
            tools: registry.definitions().iter().map(offered_tool).collect(),
            mcp_servers: about.mcp_servers.clone(),
            unenforced: about.unenforced.clone(),
            limits: Limits::from(options),
            context: None,
            started_at: rfc3339(SystemTime::now()),
        }
    }
}

/// The last line of a trace.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunEnd {
    /// Always `end`.
    pub kind: &'static str,
    /// How the run ended: `finished`, `step_budget_exhausted`, `time_budget_exhausted`, `failed`.
    pub status: RunStatus,
    /// `finish`'s answer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub answer: Option<Value>,
    /// Steps taken.
    pub steps: u32,
    /// Tokens over the run.
    pub usage: Usage,
    /// Model requests the provider retried.
    pub retries: u32,
    /// Why it did not finish.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<HarnessError>,
    /// The largest prompt sent, and the compactions made and the tokens they saved.
    pub context: ContextUse,
    /// Wall time of the whole run, in microseconds.
    pub duration_us: u64,
    /// When the run ended, RFC 3339 in UTC.
    pub ended_at: String,
}

impl RunEnd {
    /// The last line of a run that came to `outcome` after `duration`.
    pub fn new(outcome: &RunOutcome, duration: Duration) -> Self {
        Self {
            kind: "end",
            status: outcome.status,
            answer: outcome.answer.clone(),
            steps: outcome.steps,
            usage: outcome.usage,
            retries: outcome.retries,
            error: outcome.error.clone(),
            context: outcome.context.clone(),
            duration_us: u64::try_from(duration.as_micros()).unwrap_or(u64::MAX),
            ended_at: rfc3339(SystemTime::now()),
        }
    }
}

/// The SHA-256 (hex) of what the router sees of a tool; a changed description or schema
/// changes it, so replay can say that a tool is not the one recorded.
pub fn definition_hash(definition: &ToolDefinition) -> String {
    let seen = serde_json::json!({
        "name": definition.name,
        "description": definition.description,
        "parameters": definition.parameters,
    });
    sha256_hex(seen.to_string().as_bytes())
}

fn offered_tool(definition: &ToolDefinition) -> OfferedTool {
    let (source, plugin, plugin_version, mcp_server) = match &definition.source {
        ToolSource::Builtin => ("builtin", None, None, None),
        ToolSource::Plugin { name, version } => ("plugin", Some(name.clone()), Some(version.clone()), None),
        ToolSource::Mcp { server } => ("mcp", None, None, Some(server.clone())),
    };
    OfferedTool {
        name: definition.name.clone(),
        source,
        plugin,
        plugin_version,
        mcp_server,
        definition_hash: definition_hash(definition),
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// `2026-12-03T09:48:11.123456Z`: a time as RFC 3339 in UTC, to the microsecond.
pub fn rfc3339(time: SystemTime) -> String {
    let since = time.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = since.as_secs();
    let (days, rest) = (secs / 86_400, secs % 86_400);
    let (year, month, day) = civil_from_days(i64::try_from(days).unwrap_or(i64::MAX));
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:06}Z",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60,
        since.subsec_micros()
    )
}

/// Year, month, day of a count of days since 1970-01-01 (Howard Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = u32::try_from(doy - (153 * mp + 2) / 5 + 1).unwrap_or(1);
    let month = u32::try_from(if mp < 10 { mp + 3 } else { mp - 9 }).unwrap_or(1);
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_rfc3339() {
        let t = UNIX_EPOCH + Duration::from_micros(1_764_755_291_123_456);
        assert_eq!(rfc3339(t), "2025-12-03T09:48:11.123456Z");
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00.000000Z");
        assert_eq!(rfc3339(UNIX_EPOCH + Duration::from_secs(951_782_400)), "2000-02-29T00:00:00.000000Z");
    }

    #[test]
    fn the_first_line_lists_unenforced_plugins_only_when_there_are_some() {
        let registry = ToolRegistry::new();
        let options = RunOptions::default();
        let start = |about: &RunAbout| serde_json::to_value(RunStart::new(about, "p", "r", &registry, &options));
        let plain = start(&RunAbout::default()).unwrap();
        assert!(plain.get("unenforced").is_none(), "{plain}");
        let files = Unenforced { plugin: "files".into(), effects: "reads+writes".into(), reason: "none".into() };
        let about = RunAbout { unenforced: vec![files], ..RunAbout::default() };
        let listed = start(&about).unwrap();
        assert_eq!(listed["unenforced"][0]["plugin"], "files");
        assert_eq!(listed["unenforced"][0]["effects"], "reads+writes");
    }
}
