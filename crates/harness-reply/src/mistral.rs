//! Mistral: `[TOOL_CALLS]NAME[ARGS]{...}` (tokenizer v11 and later, one marker per call),
//! `[TOOL_CALLS]NAME[CALL_ID]ID[ARGS]{...}` (v13), and the older `[TOOL_CALLS] [{"name": ...,
//! "arguments": {...}}, ...]` list. There is no closing marker: the JSON's end ends the call.

use serde_json::Value;

use super::{Reading, find_from, skip_ws, starts};

const MARKER: &str = "[TOOL_CALLS]";
const ARGS: &str = "[ARGS]";
const CALL_ID: &str = "[CALL_ID]";

/// Reads every `[TOOL_CALLS]` of `text`.
pub(super) fn read(text: &str, r: &mut Reading<'_>) {
    r.each_call(text, MARKER, Reading::content, |text, marker, r| {
        let p = skip_ws(text, marker + MARKER.len());
        if starts(text, p, "[") { read_list(text, marker, p, r) } else { read_named(text, marker, p, r) }
    });
}

/// `NAME[ARGS]{...}` or `NAME[CALL_ID]ID[ARGS]{...}` at `p`; also `NAME{...}`, as servers
/// that drop special tokens from the text (`skip_special_tokens`) hand it back.
fn read_named(text: &str, marker: usize, p: usize, r: &mut Reading<'_>) -> Option<usize> {
    let bytes = text.as_bytes();
    let mut q = p;
    while q < bytes.len() && !matches!(bytes[q], b'[' | b'{' | b'"') && !bytes[q].is_ascii_whitespace() {
        q += 1;
    }
    let name = &text[p..q];
    if q >= bytes.len() {
        r.cut(marker, Some(name));
        return None;
    }
    if name.is_empty() || !matches!(bytes[q], b'[' | b'{') {
        r.malformed(p, "expected the tool's name, then [ARGS], right after [TOOL_CALLS]");
        return None;
    }
    let args = if bytes[q] == b'{' {
        q
    } else if starts(text, q, ARGS) {
        q + ARGS.len()
    } else if starts(text, q, CALL_ID) {
        let Some(args) = find_from(text, q, ARGS) else {
            r.cut(marker, Some(name));
            return None;
        };
        args + ARGS.len()
    } else if ARGS.starts_with(&text[q..]) || CALL_ID.starts_with(&text[q..]) {
        r.cut(marker, Some(name));
        return None;
    } else {
        r.malformed(q, &format!("expected [ARGS] or [CALL_ID] after the name {name:?}"));
        return None;
    };
    let (value, end) = r.json_at(text, skip_ws(text, args), marker, Some(name))?;
    let arguments = r.object_arguments(args, name, value)?;
    r.call(name, arguments);
    Some(end)
}

/// The older form: a JSON list of `{"name", "arguments"}` objects at `p`.
fn read_list(text: &str, marker: usize, p: usize, r: &mut Reading<'_>) -> Option<usize> {
    let (value, end) = r.json_at(text, p, marker, None)?;
    let Value::Array(items) = value else {
        r.malformed(p, "expected a JSON list of calls after [TOOL_CALLS]");
        return None;
    };
    for item in items {
        let Some(name) = item.get("name").and_then(Value::as_str) else {
            r.malformed(p, "a call in the [TOOL_CALLS] list has no \"name\" string");
            return None;
        };
        let raw = item.get("arguments").or_else(|| item.get("parameters")).cloned().unwrap_or_default();
        let arguments = r.object_arguments(p, name, raw)?;
        r.call(name, arguments);
    }
    Some(end)
}
