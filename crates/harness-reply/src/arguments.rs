//! A call's arguments as the model gave them, made an object: objects pass, JSON strings are
//! decoded, nothing is evaluated. Used for calls read from text and, by the core, for the
//! API's own structured calls, so both follow one rule.

use std::borrow::Cow;

use serde_json::{Map, Value, json};

use crate::error::{ReplyError, ReplyErrorCode};

/// Turns the arguments a model gave into an object, borrowing them when they already are one.
pub fn decode_arguments<'a>(tool: &str, raw: &'a Value) -> Result<Cow<'a, Value>, ReplyError> {
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

/// The error of arguments that are not valid JSON.
pub fn invalid_json(tool: &str, e: &serde_json::Error) -> ReplyError {
    ReplyError::new(
        ReplyErrorCode::InvalidJson,
        format!("the arguments of the call to {tool:?} are not valid JSON: {e}; send the arguments as one JSON object"),
        json!({ "tool": tool, "error": e.to_string(), "line": e.line(), "column": e.column() }),
    )
}

/// The JSON Schema name of a value's type.
pub fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn not_an_object(tool: &str, v: &Value) -> ReplyError {
    ReplyError::new(
        ReplyErrorCode::InvalidArguments,
        format!("the arguments of the call to {tool:?} must be a JSON object, not {}", json_type(v)),
        json!({ "tool": tool, "violations": [{ "pointer": "", "message": format!("expected an object, got {}", json_type(v)) }] }),
    )
}
