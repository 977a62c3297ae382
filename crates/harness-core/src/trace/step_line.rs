//! A step's trace line, written straight into a byte buffer: the same bytes as serde_json
//! writes for a [`TraceEntry`], at a fraction of the cost. A long scripted run spends a fifth of
//! each step writing this line, most of it in serde_json's per-fragment writes and the
//! escaping of keys that never need it; here the keys are fixed text and a string is copied
//! whole unless it holds a character to escape.
//!
//! Every struct is taken apart field by field with no `..`, so that a field added to
//! [`TraceEntry`], [`ModelReply`] or [`ProposedCall`] does not compile until it is written here
//! too; a test holds the bytes equal to serde_json's.

use std::io;

use super::TraceEntry;
use crate::json_text::{write_str, write_value};
use crate::provider::{Arguments, ModelReply, ProposedCall, Usage};

/// Appends the JSON of `entry` to `out`, byte for byte what `serde_json::to_writer` writes.
pub(super) fn write_entry(out: &mut Vec<u8>, entry: &TraceEntry<'_>) -> io::Result<()> {
    let TraceEntry {
        step,
        tool,
        arguments,
        status,
        result,
        error,
        plugin,
        plugin_version,
        mcp_server,
        mcp_session,
        mcp_protocol,
        offered,
        call_index,
        reply_text,
        reply_format,
        reasoning,
        router_mode,
        usage,
        reply,
        duration_us,
        model_us,
        repeat_penalty,
    } = entry;
    out.extend_from_slice(b"{\"step\":");
    write_u64(out, u64::from(*step));
    out.extend_from_slice(b",\"tool\":");
    write_opt_str(out, *tool);
    out.extend_from_slice(b",\"arguments\":");
    match arguments {
        Some(v) => write_value(out, v)?,
        None => out.extend_from_slice(b"null"),
    }
    out.extend_from_slice(b",\"status\":");
    serde_json::to_writer(&mut *out, status)?;
    if let Some(v) = result {
        out.extend_from_slice(b",\"result\":");
        write_value(out, v)?;
    }
    if let Some(e) = error {
        out.extend_from_slice(b",\"error\":");
        serde_json::to_writer(&mut *out, e)?;
    }
    write_some_str(out, b",\"plugin\":", *plugin);
    write_some_str(out, b",\"plugin_version\":", *plugin_version);
    write_some_str(out, b",\"mcp_server\":", *mcp_server);
    write_some_str(out, b",\"mcp_session\":", *mcp_session);
    write_some_str(out, b",\"mcp_protocol\":", *mcp_protocol);
    out.extend_from_slice(b",\"offered\":");
    write_str(out, offered);
    if let Some(i) = call_index {
        out.extend_from_slice(b",\"call_index\":");
        write_u64(out, *i as u64);
    }
    write_some_str(out, b",\"reply_text\":", *reply_text);
    write_some_str(out, b",\"reply_format\":", *reply_format);
    write_some_str(out, b",\"reasoning\":", *reasoning);
    write_some_str(out, b",\"router_mode\":", *router_mode);
    if let Some(u) = usage {
        out.extend_from_slice(b",\"usage\":");
        write_usage(out, u);
    }
    if let Some(r) = reply {
        out.extend_from_slice(b",\"reply\":");
        write_reply(out, r)?;
    }
    out.extend_from_slice(b",\"duration_us\":");
    write_u64(out, *duration_us);
    out.extend_from_slice(b",\"model_us\":");
    write_u64(out, *model_us);
    if *repeat_penalty {
        out.extend_from_slice(b",\"repeat_penalty\":true");
    }
    out.push(b'}');
    Ok(())
}

/// A [`ModelReply`] as serde derives it: optional fields skipped when empty, as declared there.
fn write_reply(out: &mut Vec<u8>, reply: &ModelReply) -> io::Result<()> {
    let ModelReply { calls, text, reasoning, finish_reason, truncated, usage, router_mode, retries } = reply;
    out.extend_from_slice(b"{\"calls\":[");
    for (i, call) in calls.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        let ProposedCall { id, name, arguments } = call;
        out.extend_from_slice(b"{\"id\":");
        write_opt_str(out, id.as_deref());
        out.extend_from_slice(b",\"name\":");
        write_str(out, name);
        out.extend_from_slice(b",\"arguments\":");
        match arguments {
            Arguments::Value(v) => write_value(out, v)?,
            // One line of valid JSON, as kept: serde_json writes a raw value as it is, too.
            Arguments::Json(text) => out.extend_from_slice(text.get().as_bytes()),
        }
        out.push(b'}');
    }
    out.extend_from_slice(b"],\"text\":");
    write_opt_str(out, text.as_deref());
    write_some_str(out, b",\"reasoning\":", reasoning.as_deref());
    write_some_str(out, b",\"finish_reason\":", finish_reason.as_deref());
    if *truncated {
        out.extend_from_slice(b",\"truncated\":true");
    }
    out.extend_from_slice(b",\"usage\":");
    match usage {
        Some(u) => write_usage(out, u),
        None => out.extend_from_slice(b"null"),
    }
    out.extend_from_slice(b",\"router_mode\":");
    write_opt_str(out, router_mode.as_deref());
    out.extend_from_slice(b",\"retries\":");
    write_u64(out, u64::from(*retries));
    out.push(b'}');
    Ok(())
}

fn write_usage(out: &mut Vec<u8>, usage: &Usage) {
    let Usage { input_tokens, output_tokens, cached_input_tokens } = usage;
    out.extend_from_slice(b"{\"input_tokens\":");
    write_u64(out, *input_tokens);
    out.extend_from_slice(b",\"output_tokens\":");
    write_u64(out, *output_tokens);
    out.extend_from_slice(b",\"cached_input_tokens\":");
    write_u64(out, *cached_input_tokens);
    out.push(b'}');
}

/// `,"key":"value"` when there is a value, nothing otherwise (serde's `skip_serializing_if`).
fn write_some_str(out: &mut Vec<u8>, key: &[u8], value: Option<&str>) {
    if let Some(s) = value {
        out.extend_from_slice(key);
        write_str(out, s);
    }
}

fn write_opt_str(out: &mut Vec<u8>, value: Option<&str>) {
    match value {
        Some(s) => write_str(out, s),
        None => out.extend_from_slice(b"null"),
    }
}

/// A number in decimal, as serde_json (itoa) prints it.
fn write_u64(out: &mut Vec<u8>, n: u64) {
    out.extend_from_slice(crate::json_text::decimal(n, &mut [0u8; 20]));
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::error::{ErrorCode, HarnessError};
    use crate::trace::StepStatus;

    fn fast(entry: &TraceEntry<'_>) -> String {
        let mut out = Vec::new();
        write_entry(&mut out, entry).unwrap();
        String::from_utf8(out).unwrap()
    }

    fn bare(step: u32) -> TraceEntry<'static> {
        TraceEntry { model_us: u64::MAX, ..TraceEntry::new(step, StepStatus::Rejected, "all", 0) }
    }

    /// Strings that exercise every escape serde_json makes, and the characters it leaves alone.
    const AWKWARD: &str =
        "quote \" backslash \\ nl \n cr \r tab \t bs \x08 ff \x0c nul \0 us \x1f del \x7f slash / é 😀 \u{2028}";

    #[test]
    fn every_field_matches_serde_json() {
        let arguments =
            json!({"expression": AWKWARD, "n": [1, -2, 3.5, 1e300, 0.1, null, true, false], "o": {}, "a": []});
        let result =
            json!({"value": 27, "big": u64::MAX, "neg": i64::MIN, "f": -0.0, "nested": {"z": [{"k": AWKWARD}]}});
        let reply = ModelReply {
            calls: vec![
                ProposedCall { id: Some("c\"1".into()), name: "calculate".into(), arguments: arguments.clone().into() },
                ProposedCall { id: None, name: "f".into(), arguments: Value::String("{\"x\": 1}".into()).into() },
                // Kept as the reply's text: written as it is, spaces and all, as serde_json does.
                ProposedCall { id: None, name: "g".into(), arguments: Arguments::kept("{ \"x\" : [1, \"\\u00e9\"] }") },
            ],
            text: Some(AWKWARD.into()),
            reasoning: Some("why\n".into()),
            finish_reason: Some("length".into()),
            truncated: true,
            usage: Some(Usage { input_tokens: 12, output_tokens: 0, cached_input_tokens: 10 }),
            router_mode: Some("native".into()),
            retries: 4_000_000_000,
        };
        let error = HarnessError::new(ErrorCode::InvalidArguments, AWKWARD, json!({"tool": "t", "violations": []}));
        let full = TraceEntry {
            step: u32::MAX,
            tool: Some("calculate"),
            arguments: Some(&arguments),
            status: StepStatus::Ok,
            result: Some(&result),
            error: Some(&error),
            plugin: Some("calc"),
            plugin_version: Some("0.1.0"),
            mcp_server: Some("srv"),
            mcp_session: Some("a1b2"),
            mcp_protocol: Some("2025-06-18"),
            offered: "finish",
            call_index: Some(usize::MAX),
            reply_text: Some(AWKWARD),
            reply_format: Some("hermes"),
            reasoning: Some("r"),
            router_mode: Some("prompt"),
            usage: Some(Usage { input_tokens: 1, output_tokens: 2, cached_input_tokens: 3 }),
            reply: Some(&reply),
            duration_us: 0,
            model_us: 10,
            repeat_penalty: true,
        };
        let plain = ModelReply::default();
        let entries = [full, bare(1), TraceEntry { reply: Some(&plain), ..bare(10) }];
        for entry in &entries {
            assert_eq!(fast(entry), serde_json::to_string(entry).unwrap());
        }
    }

    #[test]
    fn numbers_print_as_serde_json_prints_them() {
        for n in [0, 9, 10, 99, 100, 12_345, u64::from(u32::MAX), u64::MAX] {
            let mut out = Vec::new();
            write_u64(&mut out, n);
            assert_eq!(String::from_utf8(out).unwrap(), n.to_string());
        }
    }
}
