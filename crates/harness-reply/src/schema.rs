//! Typing the string values of XML-style formats by the offered tool's JSON Schema, as the
//! serving engines do: `<parameter=n>3</parameter>` is the integer 3 when `n` is an integer.

use serde_json::{Number, Value};

/// `raw` as the schema's type: the first declared type it parses as, other than string, else
/// the string itself (the schema check then says precisely what is wrong).
pub(super) fn typed(raw: &str, schema: Option<&Value>) -> Value {
    let Some(schema) = schema else {
        return Value::String(raw.to_owned());
    };
    let mut types = Vec::new();
    declared_types(schema, &mut types, 0);
    let trimmed = raw.trim();
    for kind in types.iter().filter(|k| **k != "string") {
        if let Some(value) = as_type(trimmed, kind) {
            return value;
        }
    }
    Value::String(raw.to_owned())
}

/// The types a schema allows: `type` (one or a list), and those of `anyOf`/`oneOf` members,
/// `enum` and `const` values.
fn declared_types<'s>(schema: &'s Value, out: &mut Vec<&'s str>, depth: u8) {
    if depth > 4 {
        return;
    }
    match schema.get("type") {
        Some(Value::String(t)) => out.push(t),
        Some(Value::Array(ts)) => out.extend(ts.iter().filter_map(Value::as_str)),
        _ => {}
    }
    for key in ["anyOf", "oneOf"] {
        for member in schema.get(key).and_then(Value::as_array).into_iter().flatten() {
            declared_types(member, out, depth + 1);
        }
    }
    let values = schema.get("enum").and_then(Value::as_array).into_iter().flatten().chain(schema.get("const"));
    for value in values {
        out.push(crate::arguments::json_type(value));
    }
}

fn as_type(raw: &str, kind: &str) -> Option<Value> {
    match kind {
        "integer" => raw
            .parse::<i64>()
            .map(Value::from)
            .or_else(|_| raw.parse::<u64>().map(Value::from))
            .ok()
            // `3.0` is an integer in JSON Schema.
            .or_else(|| {
                raw.parse::<f64>().ok().filter(|f| f.fract() == 0.0 && f.abs() < 9e15).map(|f| Value::from(f as i64))
            }),
        "number" => raw
            .parse::<i64>()
            .map(Value::from)
            .ok()
            .or_else(|| raw.parse::<f64>().ok().and_then(Number::from_f64).map(Value::Number)),
        "boolean" => match raw.to_ascii_lowercase().as_str() {
            "true" => Some(Value::Bool(true)),
            "false" => Some(Value::Bool(false)),
            _ => None,
        },
        "null" => matches!(raw, "null" | "None").then_some(Value::Null),
        "object" => serde_json::from_str::<Value>(raw).ok().filter(Value::is_object),
        "array" => serde_json::from_str::<Value>(raw).ok().filter(Value::is_array),
        _ => None,
    }
}
