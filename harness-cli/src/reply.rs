//! `harness reply read`: reads one raw model reply exactly as the loop would, and prints what
//! was read: the calls, the reasoning, the content, the format, and the fault if any. The
//! operator's tool for "why did my model's reply not parse?"

use std::io::Read;
use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};
use harness_core::{ReadOptions, ReplyFormat, ToolDefinition, ToolSource, read_reply};
use serde_json::{Value, json};

use crate::Result;
use crate::error::CliError;

/// `harness reply ...`
#[derive(Debug, Subcommand)]
pub(crate) enum ReplyCommand {
    /// Read one raw reply (FILE, or stdin) and print one JSON object: calls, reasoning, content, format, error.
    Read(ReadArgs),
}

/// `harness reply read`'s arguments.
#[derive(Debug, Args)]
pub(crate) struct ReadArgs {
    /// The offered tools, as a JSON array in OpenAI's function format:
    /// [{"type": "function", "function": {"name", "description", "parameters"}}]. Their schemas
    /// type the values of XML-style formats.
    #[arg(long, value_name = "FILE")]
    tools: Option<PathBuf>,
    /// Why the model stopped, as the API said: `length` or `max_tokens` mean the reply was cut
    /// at the token limit, and its last call never counts.
    #[arg(long, value_name = "REASON")]
    finish_reason: Option<String>,
    /// The format to read: auto, or one family (json, hermes, qwen3_coder, mistral, llama3,
    /// harmony, deepseek_v3, deepseek_v32, deepseek_v4, kimi_k2, kimi_k3, llama4_pythonic,
    /// glm45, gemma4).
    #[arg(long, value_name = "FORMAT", default_value = "auto")]
    reply_format: String,
    /// The file holding the reply's raw text; stdin when absent or `-`.
    file: Option<PathBuf>,
}

/// Runs a `harness reply` command.
pub(crate) fn reply(command: ReplyCommand) -> Result<u8> {
    match command {
        ReplyCommand::Read(args) => {
            read(args.tools.as_deref(), args.finish_reason.as_deref(), &args.reply_format, args.file.as_deref())
        }
    }
}

/// Reads the reply in `file` (or stdin) as `reply_format` says, the offered tools from `tools`,
/// cut when `finish_reason` says so; prints what was read.
fn read(tools: Option<&Path>, finish_reason: Option<&str>, reply_format: &str, file: Option<&Path>) -> Result<u8> {
    let format: ReplyFormat = crate::settings::reply_format_flag(reply_format)?;
    let tools = match tools {
        Some(path) => load_tools(path)?,
        None => Vec::new(),
    };
    let text = read_input(file)?;
    let truncated = finish_reason.is_some_and(|r| matches!(r, "length" | "max_tokens"));
    let read = read_reply(&text, &ReadOptions { format, truncated, tools: &tools, forced: None });
    let calls: Vec<Value> = read.calls.iter().map(|c| json!({ "name": c.name, "arguments": c.arguments })).collect();
    let out = json!({
        "calls": calls,
        "reasoning": read.reasoning,
        "content": read.content,
        "format": read.format,
        "error": read.error,
    });
    println!("{out}");
    Ok(0)
}

/// The reply's text from `file`, or stdin.
fn read_input(file: Option<&Path>) -> Result<String> {
    let (bytes, from) = match file.filter(|f| f.as_os_str() != "-") {
        Some(path) => {
            let bytes = std::fs::read(path)
                .map_err(|e| CliError::Usage(format!("cannot read the reply file {}: {e}", path.display())))?;
            (bytes, path.display().to_string())
        }
        None => {
            let mut bytes = Vec::new();
            std::io::stdin()
                .read_to_end(&mut bytes)
                .map_err(|e| CliError::Usage(format!("cannot read the reply from stdin: {e}")))?;
            (bytes, "stdin".to_owned())
        }
    };
    String::from_utf8(bytes).map_err(|e| {
        CliError::Usage(format!(
            "the reply in {from} is not UTF-8 text (invalid byte at offset {}); a model's reply is text",
            e.utf8_error().valid_up_to()
        ))
    })
}

/// The tools of a `--tools` file, in OpenAI's function format.
fn load_tools(path: &Path) -> Result<Vec<ToolDefinition>> {
    let shown = path.display();
    let text =
        std::fs::read_to_string(path).map_err(|e| CliError::Usage(format!("cannot read --tools file {shown}: {e}")))?;
    let value: Value = serde_json::from_str(&text)
        .map_err(|e| CliError::Usage(format!("--tools file {shown} is not valid JSON: {e}")))?;
    let Value::Array(items) = value else {
        return Err(CliError::Usage(format!(
            "--tools file {shown} must hold a JSON array of tools: [{{\"type\": \"function\", \"function\": {{\"name\": ..., \"parameters\": {{...}}}}}}]"
        )));
    };
    items
        .iter()
        .enumerate()
        .map(|(i, item)| tool(item).map_err(|why| CliError::Usage(format!("--tools file {shown}, tool {i}: {why}"))))
        .collect()
}

/// One tool in OpenAI's function format (a bare `{"name", "parameters"}` is taken too).
fn tool(item: &Value) -> std::result::Result<ToolDefinition, String> {
    let function = item.get("function").unwrap_or(item);
    let name = function
        .get("name")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .ok_or("expected {\"type\": \"function\", \"function\": {\"name\": \"...\", \"parameters\": {...}}}: the name is missing")?;
    let parameters = function.get("parameters").cloned().unwrap_or_else(|| json!({ "type": "object" }));
    if !parameters.is_object() {
        return Err(format!("the parameters of {name:?} must be a JSON Schema object"));
    }
    Ok(ToolDefinition {
        name: name.to_owned(),
        description: function.get("description").and_then(Value::as_str).unwrap_or_default().to_owned(),
        parameters,
        examples: Vec::new(),
        source: ToolSource::Builtin,
    })
}
