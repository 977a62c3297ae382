//! A structured call's arguments and id: the API's own calls, decoded defensively. Parse,
//! never eval. Calls written in a reply's text are read by [`harness_reply`], whose rule for
//! arguments this shares.

use std::borrow::Cow;

use serde_json::Value;

use crate::error::HarnessError;
use crate::provider::{Arguments, ProposedCall};

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
#[cfg(test)]
fn decode_arguments(tool: &str, raw: &Value) -> Result<Value, HarnessError> {
    decode_value(tool, raw).map(Cow::into_owned)
}

/// [`harness_reply::decode_arguments`] for a structured call, borrowing arguments that already
/// are a parsed object rather than copying them; arguments kept as JSON text are parsed here,
/// once a step.
pub(crate) fn decode_arguments_in_place<'a>(tool: &str, raw: &'a Arguments) -> Result<Cow<'a, Value>, HarnessError> {
    match raw {
        Arguments::Value(value) => decode_value(tool, value),
        Arguments::Json(text) => match serde_json::from_str::<Value>(text.get()) {
            Ok(value @ Value::Object(_)) => Ok(Cow::Owned(value)),
            Ok(other) => decode_value(tool, &other).map(|v| Cow::Owned(v.into_owned())),
            Err(e) => Err(harness_reply::invalid_json(tool, &e).into()),
        },
    }
}

/// The reply crate's rule for a parsed value, its error made the loop's.
fn decode_value<'a>(tool: &str, raw: &'a Value) -> Result<Cow<'a, Value>, HarnessError> {
    harness_reply::decode_arguments(tool, raw).map_err(HarnessError::from)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::error::ErrorCode;

    fn kept(text: &str) -> Result<Value, HarnessError> {
        decode_arguments_in_place("t", &Arguments::kept(text)).map(Cow::into_owned)
    }

    fn given(arguments: Value) -> Result<Value, HarnessError> {
        decode_arguments("calculate", &arguments)
    }

    #[test]
    fn arguments_kept_as_text_follow_the_same_rules_as_parsed_ones() {
        assert_eq!(kept("{\"a\": 1}").unwrap(), json!({"a": 1}));
        assert_eq!(kept("null").unwrap(), json!({}));
        assert_eq!(kept("\"{\\\"a\\\": 2}\"").unwrap(), json!({"a": 2}));
        assert_eq!(kept("[1]").unwrap_err().code, ErrorCode::InvalidArguments);
        assert_eq!(kept("\"{oops\"").unwrap_err().code, ErrorCode::InvalidJson);
    }

    #[test]
    fn arguments_as_a_json_string_are_decoded() {
        assert_eq!(given(json!("{\"expression\": \"6*7\"}")).unwrap(), json!({"expression": "6*7"}));
        assert_eq!(given(json!("")).unwrap(), json!({}));
        assert_eq!(given(json!({"expression": "1"})).unwrap(), json!({"expression": "1"}));
    }

    #[test]
    fn arguments_string_that_is_broken_json_is_invalid_json() {
        let e = given(json!("{\"expression\": ")).unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidJson);
        assert_eq!(e.details["tool"], "calculate");
        assert_eq!(given(json!("[1]")).unwrap_err().code, ErrorCode::InvalidArguments);
        assert_eq!(given(json!(3)).unwrap_err().code, ErrorCode::InvalidArguments);
    }

    #[test]
    fn a_call_without_an_id_takes_its_steps() {
        let call = ProposedCall { id: None, name: "t".into(), arguments: json!({}).into() };
        assert_eq!(call_id(&call, 12), "call_12");
        let call = ProposedCall { id: Some("c9".into()), ..call };
        assert_eq!(call_id(&call, 12), "c9");
    }
}
