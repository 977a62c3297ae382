//! Calls written out as JSON in prose: `{"tool": ..., "arguments": ...}`, `{"name": ...,
//! "arguments"|"parameters": ...}` (Llama's bare form), the same wrapped in `"function"` or a
//! `"tool_calls"` list, or a list of calls, in fences or prose.
//!
//! A call is only read from a call position: a JSON value standing in the prose on its own.
//! A value nested in another (an argument, an item of a list of data) is never a call, and an
//! object is a call only in a call's shape: a name and an arguments key (`{"name": "Ana",
//! "email": ...}` is data). The scan is linear: each top-level region is matched once and
//! handed to `serde_json` once; a region that is not JSON at all (prose braces) is searched
//! once more, at most twice deep, for values inside it.

use serde_json::{Value, json};

use super::Reading;
use crate::arguments::decode_arguments;
use crate::error::{ReplyError, ReplyErrorCode};

/// The keys that name a call's tool (`function` when it is a string, else it wraps a call;
/// `action` as agent frameworks write it).
const NAME_KEYS: [&str; 5] = ["tool", "name", "tool_name", "function", "action"];
/// The keys that hold a call's arguments.
const ARGUMENT_KEYS: [&str; 6] = ["arguments", "parameters", "args", "input", "action_input", "tool_input"];
/// The keys of a call without arguments (`{"tool": "finish"}`): nothing else may be there.
const BARE_CALL_KEYS: [&str; 4] = ["tool", "id", "type", "call_id"];
/// The keys that wrap one call.
const WRAPPER_KEYS: [&str; 4] = ["function", "tool_call", "call", "function_call"];

/// Reads every JSON call in `text`.
pub(super) fn read(text: &str, r: &mut Reading<'_>) {
    let mut scan = Scan::default();
    scan_regions(text, 0, text.len(), 0, &mut scan);
    let mut pos = 0;
    let found_any = !scan.calls.is_empty();
    for Found { tool, arguments, start, end } in std::mem::take(&mut scan.calls) {
        let (start, end) = fence_around(text, start, end);
        if start >= pos {
            r.content(&text[pos..start]);
            pos = end;
        }
        match decode_arguments(&tool, &arguments) {
            Ok(arguments) => r.call(&tool, arguments.into_owned()),
            Err(e) => return r.fail(e),
        }
    }
    r.content(text.get(pos..).unwrap_or(""));
    if let Some(at) = scan.unclosed_at.filter(|_| r.truncated) {
        return r.cut(at, None);
    }
    if found_any {
        return;
    }
    if r.truncated {
        // No call, and the text was cut: the call the model was writing never came.
        return r.cut(text.len(), None);
    }
    if let (Some(tool), Some(arguments)) = (r.forced, scan.bare.take()) {
        return r.call(tool, arguments);
    }
    let error = no_call_error(&scan, text.len(), |offset| r.at(offset));
    r.fail(error);
}

/// The region of a call widened to the ```` ``` ```` fence that holds nothing else, so that
/// the content around it does not keep an empty fence.
fn fence_around(text: &str, start: usize, end: usize) -> (usize, usize) {
    let before = text[..start].trim_end();
    let opener = ["```json", "```"].into_iter().find(|f| before.ends_with(f));
    let after = super::skip_ws(text, end);
    match opener {
        Some(f) if super::starts(text, after, "```") => (before.len() - f.len(), after + 3),
        _ => (start, end),
    }
}

/// Where the JSON value that opens `text` (after whitespace) ends, when it opens with one.
pub(super) fn leading_value_end(text: &str) -> Option<usize> {
    let start = super::skip_ws(text, 0);
    if !starts_value(text, start) {
        return None;
    }
    let (end, closed) = match_brackets(text.as_bytes(), start, text.len());
    (closed && serde_json::from_str::<serde::de::IgnoredAny>(&text[start..end]).is_ok()).then_some(end)
}

/// Whether a JSON object or list opens at `at`.
fn starts_value(text: &str, at: usize) -> bool {
    matches!(text.as_bytes().get(at), Some(b'{' | b'['))
}

/// A call found written out as JSON: the tool, its raw arguments, and the region it fills.
struct Found {
    tool: String,
    /// The arguments as written: an object, a JSON string, or anything else (refused later).
    arguments: Value,
    start: usize,
    end: usize,
}

/// What a scan of text for JSON calls found.
#[derive(Default)]
struct Scan {
    calls: Vec<Found>,
    /// The first region that did not parse: the error and where the region starts.
    first_parse_error: Option<(String, usize)>,
    /// JSON values that parsed.
    values_seen: usize,
    /// Where a region starts that the text ended inside of (a call cut short, perhaps).
    unclosed_at: Option<usize>,
    /// The first JSON object that was not a call: a forced tool's arguments, perhaps.
    bare: Option<Value>,
}

/// Why text held no call; `at` maps an offset of the scanned text to one of the reply.
fn no_call_error(scan: &Scan, text_len: usize, at: impl Fn(usize) -> usize) -> ReplyError {
    let hint = "answer with one tool call as JSON: {\"tool\": NAME, \"arguments\": {...}}";
    if let Some((error, offset)) = &scan.first_parse_error {
        let offset = at(*offset);
        return ReplyError::new(
            ReplyErrorCode::InvalidJson,
            format!(
                "the reply holds JSON that does not parse ({error}, in the object starting at byte {offset}); {hint}"
            ),
            json!({ "error": error, "offset": offset }),
        );
    }
    if scan.values_seen > 0 {
        return ReplyError::new(
            ReplyErrorCode::InvalidJson,
            format!(
                "the reply holds JSON but no tool call: an object needs a \"tool\" string and an \"arguments\" object; {hint}"
            ),
            json!({ "objects": scan.values_seen }),
        );
    }
    ReplyError::new(
        ReplyErrorCode::NoJson,
        format!("the reply holds no JSON object; {hint}"),
        json!({ "reply_bytes": text_len }),
    )
}

/// Where a JSON region may open at `i`: an object, or a list whose first item is an object.
fn opens_region(bytes: &[u8], i: usize) -> bool {
    match bytes[i] {
        b'{' => true,
        b'[' => bytes[i + 1..].iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{'),
        _ => false,
    }
}

/// Whether a region that did not parse was meant as JSON (`{"…` or `[{`): then what is inside
/// belongs to it, and is never searched for calls of its own.
fn meant_as_json(region: &str) -> bool {
    let inner = region[1..].trim_start();
    region.starts_with('[') || inner.starts_with('"') || inner.starts_with('}')
}

/// Scans `text[start..end]` for top-level JSON regions and collects the calls they are.
/// `depth` bounds the re-scan of prose regions that did not parse, which keeps the scan linear.
fn scan_regions(text: &str, start: usize, end: usize, depth: u8, found: &mut Scan) {
    let bytes = text.as_bytes();
    let mut i = start;
    while i < end {
        if !opens_region(&bytes[..end], i) {
            i += 1;
            continue;
        }
        let (region_end, closed) = match_brackets(bytes, i, end);
        let region = &text[i..region_end];
        match serde_json::from_str::<Value>(region) {
            Ok(value) => {
                found.values_seen += 1;
                let calls = as_calls(&value);
                if calls.is_empty() && found.bare.is_none() && value.is_object() {
                    found.bare = Some(value);
                }
                for (tool, arguments) in calls {
                    found.calls.push(Found { tool, arguments, start: i, end: region_end });
                }
            }
            Err(e) => {
                if found.first_parse_error.is_none() {
                    found.first_parse_error = Some((e.to_string(), i));
                }
                if !closed && found.unclosed_at.is_none() {
                    found.unclosed_at = Some(i);
                }
                if depth < 2 && !meant_as_json(region) {
                    scan_regions(text, i + 1, region_end, depth + 1, found);
                }
            }
        }
        if !closed {
            break;
        }
        i = region_end;
    }
}

/// Finds the end of the region opening at `open`, honouring strings and escapes.
/// Returns the end offset and whether the region closed before `end`.
fn match_brackets(bytes: &[u8], open: usize, end: usize) -> (usize, bool) {
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for (k, &b) in bytes[open..end].iter().enumerate() {
        if in_string {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'{' | b'[' => depth += 1,
            b'}' | b']' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return (open + k + 1, true);
                }
            }
            _ => {}
        }
    }
    (end, false)
}

/// One call in a call's shape: `{"tool"|"name"|…: NAME, "arguments"|"parameters"|…: ...}`,
/// `{"tool": NAME}` alone, or one of those wrapped in `"function"`, `"tool_call"`, `"call"` or
/// `"function_call"`.
fn as_call(value: &Value) -> Option<(String, Value)> {
    let obj = value.as_object()?;
    let name = NAME_KEYS.iter().find_map(|k| obj.get(*k).and_then(Value::as_str));
    if let Some(name) = name {
        let arguments = ARGUMENT_KEYS.iter().find_map(|k| obj.get(*k));
        let bare_tool = obj.contains_key("tool") && obj.keys().all(|k| BARE_CALL_KEYS.contains(&k.as_str()));
        return match arguments {
            Some(arguments) => Some((name.to_owned(), arguments.clone())),
            None if bare_tool => Some((name.to_owned(), Value::Null)),
            None => None,
        };
    }
    WRAPPER_KEYS.iter().find_map(|k| obj.get(*k)).and_then(as_call)
}

/// Every call of a value: one, or each of a list of calls (top-level or `"tool_calls"`). A list
/// is calls only when every item is one: a list of records that share a `name` key is data.
fn as_calls(value: &Value) -> Vec<(String, Value)> {
    let list = value.as_array().or_else(|| value.get("tool_calls").and_then(Value::as_array));
    match list {
        Some(items) => items.iter().map(as_call).collect::<Option<Vec<_>>>().unwrap_or_default(),
        None => as_call(value).into_iter().collect(),
    }
}
