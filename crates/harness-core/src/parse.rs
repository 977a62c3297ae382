//! Defensive parsing of a router reply into one tool call. Parse, never eval.
//!
//! Structured calls win. Otherwise the text is scanned for JSON objects with a real scanner
//! that knows strings and escapes, so braces inside strings never end an object early. The
//! scan is linear in the text: each top-level `{ ... }` region is handed to `serde_json`
//! once, and a region that fails is searched once more for objects nested inside it.

use std::borrow::Cow;

use serde_json::{Map, Value, json};

use crate::error::{ErrorCode, HarnessError};
use crate::provider::{Arguments, ModelReply, ProposedCall};

/// A call that parsed: the tool name and an arguments object.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    /// The provider's call id, or `call_<step>` when the call came from text.
    pub id: String,
    /// The tool name.
    pub tool: String,
    /// The arguments object.
    pub arguments: Value,
}

/// Parses a reply into one call.
///
/// `forced` is the tool the router was forced to call, if any: a bare arguments object in the
/// text is then taken as that tool's arguments. Only the first structured call is used.
pub fn parse_reply(reply: &ModelReply, step: u32, forced: Option<&str>) -> Result<ToolCall, HarnessError> {
    if let Some(call) = reply.calls.first() {
        return parse_call(call, step);
    }
    let text = reply.text.as_deref().unwrap_or("");
    parse_text(text, step, forced)
}

/// Parses one structured call: its arguments, an object or a JSON string, become an object.
pub fn parse_call(call: &ProposedCall, step: u32) -> Result<ToolCall, HarnessError> {
    let arguments = decode_arguments_in_place(&call.name, &call.arguments)?.into_owned();
    Ok(ToolCall { id: call_id(call, step), tool: call.name.clone(), arguments })
}

/// A structured call's id: the provider's, or `call_<step>` when it gave none.
pub(crate) fn call_id(call: &ProposedCall, step: u32) -> String {
    call.id.clone().unwrap_or_else(|| step_call_id(step))
}

/// `call_<step>`, the id of a call that came without one. Written without `format!`, whose
/// formatting machinery cost about 300 instructions a step (1.5% of a scripted step).
pub(crate) fn step_call_id(step: u32) -> String {
    let mut buf = [0u8; 20];
    let digits = crate::json_text::decimal(u64::from(step), &mut buf);
    let mut id = String::with_capacity(5 + digits.len());
    id.push_str("call_");
    id.extend(digits.iter().map(|&d| char::from(d)));
    id
}

/// Turns the arguments a model gave into an object: objects pass, JSON strings are decoded.
pub(crate) fn decode_arguments(tool: &str, raw: &Value) -> Result<Value, HarnessError> {
    decode_value(tool, raw).map(Cow::into_owned)
}

/// [`decode_arguments`], borrowing arguments that already are a parsed object rather than
/// copying them; arguments kept as JSON text are parsed here, once a step.
pub(crate) fn decode_arguments_in_place<'a>(tool: &str, raw: &'a Arguments) -> Result<Cow<'a, Value>, HarnessError> {
    match raw {
        Arguments::Value(value) => decode_value(tool, value),
        Arguments::Json(text) => match serde_json::from_str::<Value>(text.get()) {
            Ok(value @ Value::Object(_)) => Ok(Cow::Owned(value)),
            Ok(other) => decode_value(tool, &other).map(|v| Cow::Owned(v.into_owned())),
            Err(e) => Err(invalid_json(tool, &e)),
        },
    }
}

/// The rules of [`decode_arguments`] for a parsed value.
fn decode_value<'a>(tool: &str, raw: &'a Value) -> Result<Cow<'a, Value>, HarnessError> {
    match raw {
        Value::Object(_) => Ok(Cow::Borrowed(raw)),
        Value::Null => Ok(Cow::Owned(Value::Object(Map::new()))),
        Value::String(s) if s.trim().is_empty() => Ok(Cow::Owned(Value::Object(Map::new()))),
        Value::String(s) => match serde_json::from_str::<Value>(s) {
            Ok(v @ Value::Object(_)) => Ok(Cow::Owned(v)),
            Ok(other) => Err(not_an_object(tool, &other)),
            Err(e) => Err(invalid_json(tool, &e)),
        },
        other => Err(not_an_object(tool, other)),
    }
}

fn invalid_json(tool: &str, e: &serde_json::Error) -> HarnessError {
    HarnessError::new(
        ErrorCode::InvalidJson,
        format!("the arguments of the call to {tool:?} are not valid JSON: {e}; send the arguments as one JSON object"),
        json!({ "tool": tool, "error": e.to_string(), "line": e.line(), "column": e.column() }),
    )
}

pub(crate) fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn not_an_object(tool: &str, v: &Value) -> HarnessError {
    HarnessError::new(
        ErrorCode::InvalidArguments,
        format!("the arguments of the call to {tool:?} must be a JSON object, not {}", json_type(v)),
        json!({ "tool": tool, "violations": [{ "pointer": "", "message": format!("expected an object, got {}", json_type(v)) }] }),
    )
}

/// What the text scan found that was not a call, for the error message.
#[derive(Default)]
pub(crate) struct ScanNotes {
    /// The first region that did not parse: the error and where the region starts.
    pub(crate) first_parse_error: Option<(String, usize)>,
    /// JSON values that parsed.
    pub(crate) objects_seen: usize,
    /// Where a region starts that the text ended inside of (a call cut short, perhaps).
    pub(crate) unclosed_at: Option<usize>,
}

/// A call found written out as JSON: the tool, its raw arguments, and the region it fills.
pub(crate) struct Found {
    /// The tool name.
    pub(crate) tool: String,
    /// The arguments as written: an object, a JSON string, or anything else (refused later).
    pub(crate) arguments: Value,
    /// Where the region holding the call starts.
    pub(crate) start: usize,
    /// Where it ends.
    pub(crate) end: usize,
}

/// What a scan of text for JSON calls found.
#[derive(Default)]
pub(crate) struct Scan {
    /// The calls, in order.
    pub(crate) calls: Vec<Found>,
    /// What was seen besides.
    pub(crate) notes: ScanNotes,
    /// The first JSON object that was not a call: a forced tool's arguments, perhaps.
    pub(crate) bare: Option<Value>,
}

/// Scans text for calls written out as JSON; with `first_only`, stops at the first.
pub(crate) fn scan_text(text: &str, first_only: bool) -> Scan {
    let mut found = Scan::default();
    scan(text, 0, text.len(), 0, first_only, &mut found);
    found
}

/// Finds a call written out as JSON in a model's text; see [`parse_reply`] for `forced`.
pub fn parse_text(text: &str, step: u32, forced: Option<&str>) -> Result<ToolCall, HarnessError> {
    let Scan { calls, notes, bare } = scan_text(text, true);
    if let Some(Found { tool, arguments, .. }) = calls.into_iter().next() {
        let arguments = decode_arguments(&tool, &arguments)?;
        return Ok(ToolCall { id: step_call_id(step), tool, arguments });
    }
    if let (Some(tool), Some(arguments)) = (forced, bare) {
        return Ok(ToolCall { id: step_call_id(step), tool: tool.to_owned(), arguments });
    }
    Err(no_call_error(&notes, text.len(), |offset| offset))
}

/// Why text held no call; `at` maps an offset of the scanned text to one of the reply.
pub(crate) fn no_call_error(notes: &ScanNotes, text_len: usize, at: impl Fn(usize) -> usize) -> HarnessError {
    let hint = "answer with one tool call as JSON: {\"tool\": NAME, \"arguments\": {...}}";
    if let Some((error, offset)) = &notes.first_parse_error {
        let offset = at(*offset);
        return HarnessError::new(
            ErrorCode::InvalidJson,
            format!(
                "the reply holds JSON that does not parse ({error}, in the object starting at byte {offset}); {hint}"
            ),
            json!({ "error": error, "offset": offset }),
        );
    }
    if notes.objects_seen > 0 {
        return HarnessError::new(
            ErrorCode::InvalidJson,
            format!(
                "the reply holds JSON but no tool call: an object needs a \"tool\" string and an \"arguments\" object; {hint}"
            ),
            json!({ "objects": notes.objects_seen }),
        );
    }
    HarnessError::new(
        ErrorCode::NoJson,
        format!("the reply holds no JSON object; {hint}"),
        json!({ "reply_bytes": text_len }),
    )
}

/// Scans `text[start..end]` for top-level `{...}` regions and collects the tool calls.
/// Returns true when it stopped at the first call (`first_only`).
///
/// `depth` bounds the re-scan of regions that did not parse, which keeps the scan linear.
fn scan(text: &str, start: usize, end: usize, depth: u8, first_only: bool, found: &mut Scan) -> bool {
    let bytes = text.as_bytes();
    let mut i = start;
    while i < end {
        if bytes[i] != b'{' {
            i += 1;
            continue;
        }
        let (region_end, closed) = match_braces(bytes, i, end);
        let region = &text[i..region_end];
        match serde_json::from_str::<Value>(region) {
            Ok(value) => {
                found.notes.objects_seen += 1;
                let calls = as_calls(&value);
                if calls.is_empty() {
                    if found.bare.is_none() && value.is_object() {
                        found.bare = Some(value);
                    }
                } else {
                    for (tool, arguments) in calls {
                        found.calls.push(Found { tool, arguments, start: i, end: region_end });
                        if first_only {
                            return true;
                        }
                    }
                }
            }
            Err(e) => {
                if found.notes.first_parse_error.is_none() {
                    found.notes.first_parse_error = Some((e.to_string(), i));
                }
                if !closed && found.notes.unclosed_at.is_none() {
                    found.notes.unclosed_at = Some(i);
                }
                if depth < 2 && scan(text, i + 1, region_end, depth + 1, first_only, found) {
                    return true;
                }
            }
        }
        if !closed {
            break;
        }
        i = region_end;
    }
    false
}

/// Finds the end of the `{...}` region opening at `open`, honouring strings and escapes.
/// Returns the end offset and whether the region closed before `end`.
fn match_braces(bytes: &[u8], open: usize, end: usize) -> (usize, bool) {
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

/// Recognises the shapes models write calls in: `{"tool", "arguments"}`, `{"name",
/// "arguments"|"parameters"}`, and the same wrapped in `"function"`, `"tool_call"` or a
/// `"tool_calls"` list.
fn as_call(value: &Value) -> Option<(String, Value)> {
    let obj = value.as_object()?;
    let name = obj.get("tool").or_else(|| obj.get("name")).and_then(Value::as_str);
    if let Some(name) = name {
        let arguments = ["arguments", "parameters", "args", "input"]
            .iter()
            .find_map(|k| obj.get(*k))
            .cloned()
            .unwrap_or(Value::Null);
        return Some((name.to_owned(), arguments));
    }
    for key in ["function", "tool_call", "call"] {
        if let Some(inner) = obj.get(key)
            && let Some(call) = as_call(inner)
        {
            return Some(call);
        }
    }
    obj.get("tool_calls").and_then(Value::as_array).and_then(|calls| calls.first()).and_then(as_call)
}

/// Every call in a value: one, or each of a `"tool_calls"` list (or of a top-level list).
fn as_calls(value: &Value) -> Vec<(String, Value)> {
    let list = value.as_array().or_else(|| value.get("tool_calls").and_then(Value::as_array));
    match list {
        Some(items) => items.iter().filter_map(as_call).collect(),
        None => as_call(value).into_iter().collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(t: &str) -> Result<ToolCall, HarnessError> {
        parse_reply(&ModelReply { text: Some(t.to_owned()), ..Default::default() }, 1, None)
    }

    fn structured(name: &str, arguments: Value) -> Result<ToolCall, HarnessError> {
        let call = ProposedCall { id: Some("c9".into()), name: name.into(), arguments: arguments.into() };
        parse_reply(&ModelReply { calls: vec![call], ..Default::default() }, 1, None)
    }

    fn kept(text: &str) -> Result<ToolCall, HarnessError> {
        let call = ProposedCall { id: None, name: "t".into(), arguments: Arguments::kept(text) };
        parse_call(&call, 3)
    }

    #[test]
    fn arguments_kept_as_text_follow_the_same_rules_as_parsed_ones() {
        assert_eq!(kept("{\"a\": 1}").unwrap().arguments, json!({"a": 1}));
        assert_eq!(kept("null").unwrap().arguments, json!({}));
        assert_eq!(kept("\"{\\\"a\\\": 2}\"").unwrap().arguments, json!({"a": 2}));
        assert_eq!(kept("[1]").unwrap_err().code, ErrorCode::InvalidArguments);
        assert_eq!(kept("\"{oops\"").unwrap_err().code, ErrorCode::InvalidJson);
    }

    #[test]
    fn structured_call_with_object_arguments() {
        let c = structured("calculate", json!({"expression": "6*7"})).unwrap();
        assert_eq!((c.id.as_str(), c.tool.as_str()), ("c9", "calculate"));
        assert_eq!(c.arguments, json!({"expression": "6*7"}));
    }

    #[test]
    fn structured_arguments_as_a_json_string_are_decoded() {
        let c = structured("calculate", json!("{\"expression\": \"6*7\"}")).unwrap();
        assert_eq!(c.arguments, json!({"expression": "6*7"}));
        assert_eq!(structured("finish", json!("")).unwrap().arguments, json!({}));
    }

    #[test]
    fn structured_arguments_string_that_is_broken_json_is_invalid_json() {
        let e = structured("calculate", json!("{\"expression\": ")).unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidJson);
        assert_eq!(e.details["tool"], "calculate");
        let e = structured("calculate", json!("[1]")).unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidArguments);
    }

    #[test]
    fn fenced_json() {
        let c =
            text("Sure!\n```json\n{\"tool\": \"calculate\", \"arguments\": {\"expression\": \"1+1\"}}\n```\n").unwrap();
        assert_eq!(c.tool, "calculate");
        assert_eq!(c.id, "call_1");
        assert_eq!(c.arguments["expression"], "1+1");
    }

    #[test]
    fn json_surrounded_by_prose() {
        let c = text("I will call {\"name\": \"list_dir\", \"parameters\": {\"path\": \".\"}} now.").unwrap();
        assert_eq!((c.tool.as_str(), &c.arguments), ("list_dir", &json!({"path": "."})));
    }

    #[test]
    fn braces_and_quotes_inside_strings() {
        let c = text(r#"ok {"tool": "echo", "arguments": {"value": "a } b { \" } c"}} done"#).unwrap();
        assert_eq!(c.arguments["value"], "a } b { \" } c");
    }

    #[test]
    fn two_objects_the_first_call_wins() {
        let c = text(r#"{"tool": "a", "arguments": {}} and {"tool": "b", "arguments": {}}"#).unwrap();
        assert_eq!(c.tool, "a");
        let c = text(r#"{"note": 1} then {"tool": "b", "arguments": {}}"#).unwrap();
        assert_eq!(c.tool, "b");
    }

    #[test]
    fn wrapped_shapes() {
        let c = text(r#"{"type":"function","function":{"name":"f","arguments":"{\"x\":1}"}}"#).unwrap();
        assert_eq!((c.tool.as_str(), &c.arguments), ("f", &json!({"x": 1})));
        let c = text(r#"{"tool_calls":[{"function":{"name":"g","arguments":{}}}]}"#).unwrap();
        assert_eq!(c.tool, "g");
    }

    #[test]
    fn call_nested_in_a_broken_region_is_still_found() {
        let c = text(r#"note {see: {"tool": "a", "arguments": {}}} end"#).unwrap();
        assert_eq!(c.tool, "a");
    }

    #[test]
    fn no_json() {
        for t in ["I cannot help with that.", "", "   \n", "[1, 2, 3]"] {
            assert_eq!(text(t).unwrap_err().code, ErrorCode::NoJson, "{t:?}");
        }
        let empty = parse_reply(&ModelReply::default(), 1, None).unwrap_err();
        assert_eq!(empty.code, ErrorCode::NoJson);
    }

    #[test]
    fn truncated_json_is_invalid_json_with_position() {
        let e = text(
            r#"```json
{"tool": "calculate", "arguments": {"expression": "6*"#,
        )
        .unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidJson);
        assert_eq!(e.details["offset"], 8);
        assert!(e.message.contains("EOF"), "{}", e.message);
    }

    #[test]
    fn json_that_is_not_a_call_is_invalid_json() {
        let e = text(r#"{"answer": 42}"#).unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidJson);
        assert!(e.message.contains("no tool call"));
    }

    #[test]
    fn bare_object_is_the_forced_tools_arguments() {
        let reply = ModelReply { text: Some(r#"{"answer": 42}"#.into()), ..Default::default() };
        let c = parse_reply(&reply, 3, Some("finish")).unwrap();
        assert_eq!((c.tool.as_str(), &c.arguments, c.id.as_str()), ("finish", &json!({"answer": 42}), "call_3"));
    }

    #[test]
    fn errors_are_deterministic() {
        let a = serde_json::to_string(&text("{\"tool\": ").unwrap_err()).unwrap();
        let b = serde_json::to_string(&text("{\"tool\": ").unwrap_err()).unwrap();
        assert_eq!(a, b);
    }

    #[test]
    fn a_megabyte_of_noise_then_a_call() {
        let mut t = String::with_capacity(1 << 20);
        let noise = "lorem { ipsum \" dolor } sit [amet] {{ \\ }} ";
        while t.len() < 1 << 20 {
            t.push_str(noise);
        }
        assert!(text(&t).is_err());
        t.push_str(r#"{"tool": "calculate", "arguments": {"expression": "2"}}"#);
        // The noise's unbalanced braces swallow the call into one broken region; the bounded
        // re-scan must still find it.
        let c = text(&t).unwrap();
        assert_eq!(c.tool, "calculate");
    }

    #[test]
    fn a_megabyte_of_noise_without_braces_is_no_json() {
        let t = "x".repeat(1 << 20);
        assert_eq!(text(&t).unwrap_err().code, ErrorCode::NoJson);
    }
}
