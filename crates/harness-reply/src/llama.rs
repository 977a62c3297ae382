//! Llama 3.1 / 3.2 / 3.3 / 4 JSON tool calls: `<|python_tag|>{"name": ..., "parameters": {...}}`,
//! several separated by `;`, ended by `<|eom_id|>` or `<|eot_id|>` when the server keeps them.
//! Without the tag, a reply that is a bare JSON call is read the same way. After the tag,
//! Llama 3.1's built-in tools are Python calls: `brave_search.call(query="...")`.

use serde_json::Value;

use super::{Reading, skip_ws, starts};

const TAG: &str = "<|python_tag|>";
const ENDS: [&str; 2] = ["<|eom_id|>", "<|eot_id|>"];

/// Reads the calls after `<|python_tag|>` (or at the start of a reply that is bare JSON).
pub(super) fn read(text: &str, r: &mut Reading<'_>) {
    // A reply that opens with the JSON call holds any tag inside that call's values: the call
    // comes first.
    let first = skip_ws(text, 0);
    let (calls_at, open) = match text.find(TAG) {
        _ if starts(text, first, "{") => (first, first),
        Some(tag) => (tag + TAG.len(), tag),
        None => return r.content(text),
    };
    r.content(&text[..open]);
    let mut p = skip_ws(text, calls_at);
    if !starts(text, p, "{") && starts(text, open, TAG) {
        return read_builtin(text, p, r);
    }
    loop {
        let (value, end) = match r.json_at(text, p, open, None) {
            Some(read) => read,
            None => return,
        };
        let Some(name) = value.get("name").and_then(Value::as_str) else {
            return r.malformed(p, "the call's JSON object has no \"name\" string");
        };
        let raw = value.get("parameters").or_else(|| value.get("arguments")).cloned().unwrap_or_default();
        let Some(arguments) = r.object_arguments(p, name, raw) else { return };
        r.call(name, arguments);
        p = skip_ws(text, end);
        if starts(text, p, ";") {
            p = skip_ws(text, p + 1);
        }
        if !starts(text, p, "{") {
            break;
        }
    }
    let mut rest = &text[p..];
    for end in ENDS {
        rest = rest.strip_prefix(end).unwrap_or(rest);
    }
    r.content(rest);
}

/// Llama 3.1's built-in tools after the tag: `brave_search.call(query="...")`, read as Python
/// calls; the tool is `brave_search`.
fn read_builtin(text: &str, p: usize, r: &mut Reading<'_>) {
    let first = r.calls.len();
    let Some(end) = super::pythonic::read_calls_at(text, p, r) else { return };
    for call in &mut r.calls[first..] {
        if let Some(name) = call.name.strip_suffix(".call") {
            call.name = name.to_owned();
        }
    }
    let mut rest = &text[end..];
    for end in ENDS {
        rest = rest.trim_start().strip_prefix(end).unwrap_or(rest);
    }
    r.content(rest);
}
