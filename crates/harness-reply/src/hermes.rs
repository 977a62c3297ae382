//! `<tool_call>` blocks, three families in one wrapper, told apart by what follows the tag:
//! Hermes / Qwen 2.5 / Qwen3 write JSON (`<tool_call>{"name": ..., "arguments": ...}</tool_call>`),
//! read here; Qwen3-Coder writes `<function=NAME>` ([`super::qwen_xml`]), GLM 4.5+ writes the
//! bare name and `<arg_key>` pairs ([`super::glm`]). Several blocks in a row are several calls.

use super::{Reading, ReplyFormat, skip_ws, starts};

const OPEN: &str = "<tool_call>";
const CLOSE: &str = "</tool_call>";

/// Which family a block is, from the text right after its `<tool_call>`.
pub(super) fn kind_of_block(after_open: &str) -> ReplyFormat {
    let body = after_open.trim_start();
    if body.is_empty() || body.starts_with('{') {
        ReplyFormat::Hermes
    } else if body.starts_with("<function=") {
        ReplyFormat::Qwen3Coder
    } else {
        ReplyFormat::Glm45
    }
}

/// Reads every Hermes `<tool_call>` block of `text`. A reply without one is read for calls
/// written as JSON (fenced or bare), as llama.cpp's Hermes parsing takes the tag as optional.
pub(super) fn read_tagged(text: &str, r: &mut Reading<'_>) {
    if !text.contains(OPEN) {
        return super::json::read(text, r);
    }
    r.each_call(text, OPEN, Reading::content, |text, open, r| read_json_block(text, open, open + OPEN.len(), r));
}

/// One Hermes block: a JSON object with `name` and `arguments`, then `</tool_call>`.
/// Returns where the block ends, or `None` after recording the fault.
fn read_json_block(text: &str, open: usize, body: usize, r: &mut Reading<'_>) -> Option<usize> {
    let start = skip_ws(text, body);
    if start < text.len() && !starts(text, start, "{") {
        r.malformed(start, "expected a JSON object after <tool_call>");
        return None;
    }
    let (value, after) = r.json_at(text, start, open, None)?;
    let Some(name) = value.get("name").and_then(|n| n.as_str()) else {
        r.malformed(start, "the object in <tool_call> has no \"name\" string");
        return None;
    };
    let raw = value.get("arguments").or_else(|| value.get("parameters")).cloned().unwrap_or_default();
    let arguments = r.object_arguments(start, name, raw)?;
    let close = skip_ws(text, after);
    if close >= text.len() {
        if r.truncated {
            r.cut(open, Some(name));
            return None;
        }
        // A whole call whose `</tool_call>` the server dropped (the stop token), as vLLM's
        // hermes parser reads it.
        r.call(name, arguments);
        return Some(close);
    }
    if !starts(text, close, CLOSE) {
        r.malformed(close, "expected </tool_call> after the call's JSON object");
        return None;
    }
    r.call(name, arguments);
    Some(close + CLOSE.len())
}
