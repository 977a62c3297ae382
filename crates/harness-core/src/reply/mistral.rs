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
    let mut pos = 0;
    while let Some(marker) = find_from(text, pos, MARKER) {
        r.content(&text[pos..marker]);
        let p = skip_ws(text, marker + MARKER.len());
        let end = if starts(text, p, "[") { read_list(text, marker, p, r) } else { read_named(text, marker, p, r) };
        let Some(end) = end else { return };
        pos = end;
    }
    r.content(&text[pos..]);
}

/// `NAME[ARGS]{...}` or `NAME[CALL_ID]ID[ARGS]{...}` at `p`.
fn read_named(text: &str, marker: usize, p: usize, r: &mut Reading<'_>) -> Option<usize> {
    let Some(bracket) = find_from(text, p, "[") else {
        r.cut(marker, Some(&text[p..]));
        return None;
    };
    let name = text[p..bracket].trim();
    if name.is_empty() || name.contains(char::is_whitespace) || name.contains(['{', '}', '"']) {
        r.malformed(p, "expected the tool's name right after [TOOL_CALLS]");
        return None;
    }
    let args = if starts(text, bracket, ARGS) {
        bracket
    } else if starts(text, bracket, CALL_ID) {
        let Some(args) = find_from(text, bracket, ARGS) else {
            r.cut(marker, Some(name));
            return None;
        };
        args
    } else if ARGS.starts_with(&text[bracket..]) || CALL_ID.starts_with(&text[bracket..]) {
        r.cut(marker, Some(name));
        return None;
    } else {
        r.malformed(bracket, &format!("expected [ARGS] or [CALL_ID] after the name {name:?}"));
        return None;
    };
    let (value, end) = r.json_at(text, skip_ws(text, args + ARGS.len()), marker, Some(name))?;
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
