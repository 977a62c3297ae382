//! Argument objects that break a schema on purpose, each with what it breaks.
//!
//! Every object is derived from a valid one by one change the schema itself forbids: a
//! required property taken out, a property given a type the schema does not allow, an unknown
//! property where `additionalProperties` is `false`, a string or number just past its bound,
//! a value outside an `enum`, and the arguments as a whole not an object. Types are read
//! conservatively (a `type`, or the union of an `anyOf`/`oneOf`, or the types of an `enum`),
//! so that the harness's validator must refuse every one of them.

use std::collections::BTreeSet;

use serde_json::{Map, Value, json};

use super::resolve;

/// One argument object that must be refused, and the rule it breaks.
#[derive(Debug, Clone, PartialEq)]
pub struct Violation {
    /// The arguments.
    pub arguments: Value,
    /// What they break, for messages: `missing required property "x"`.
    pub breaks: String,
}

/// The name used for an unknown property; it never collides with a declared one.
const UNKNOWN: &str = "__harness_check_unknown";

/// Values of each JSON type, to put where the schema wants another type.
fn samples() -> [(&'static str, Value); 7] {
    [
        ("string", json!("wrong type")),
        ("integer", json!(12345)),
        ("number", json!(1.5)),
        ("boolean", json!(true)),
        ("array", json!([1])),
        ("object", json!({"wrong": "type"})),
        ("null", Value::Null),
    ]
}

fn type_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// The JSON types a schema allows, or `None` when it may allow any.
fn allowed_types(schema: &Value, root: &Value, depth: usize) -> Option<BTreeSet<&'static str>> {
    if depth > 16 {
        return None;
    }
    let obj = schema.as_object()?;
    if let Some(r) = obj.get("$ref").and_then(Value::as_str) {
        return allowed_types(resolve(root, r).ok()?, root, depth + 1);
    }
    let named = |t: &str| samples().iter().map(|(n, _)| *n).find(|n| *n == t);
    match obj.get("type") {
        Some(Value::String(t)) => return named(t).map(|t| BTreeSet::from([t])),
        Some(Value::Array(ts)) => return ts.iter().map(|t| t.as_str().and_then(named)).collect(),
        _ => {}
    }
    if let Some(c) = obj.get("const") {
        return Some(BTreeSet::from([type_of(c)]));
    }
    if let Some(Value::Array(values)) = obj.get("enum") {
        return Some(values.iter().map(type_of).collect());
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(Value::Array(branches)) = obj.get(key) {
            let mut all = BTreeSet::new();
            for b in branches {
                all.extend(allowed_types(b, root, depth + 1)?);
            }
            return Some(all);
        }
    }
    None
}

/// Whether a value of type `sample` could pass where `allowed` types are allowed.
fn could_pass(sample: &str, allowed: &BTreeSet<&str>) -> bool {
    allowed.contains(sample) || (sample == "integer" && allowed.contains("number"))
}

/// The object schema at the root, following a `$ref`.
fn root_object(root: &Value) -> Option<&Map<String, Value>> {
    let obj = root.as_object()?;
    match obj.get("$ref").and_then(Value::as_str) {
        Some(r) => resolve(root, r).ok()?.as_object(),
        None => Some(obj),
    }
}

/// Argument objects that break `schema`, derived from `valid`, an object it accepts.
pub fn violations(schema: &Value, valid: &Value) -> Vec<Violation> {
    let mut out = vec![Violation {
        arguments: json!([]),
        breaks: "the arguments are an array, where the schema wants an object".to_owned(),
    }];
    let (Some(obj), Some(base)) = (root_object(schema), valid.as_object()) else {
        return out;
    };
    let with = |name: &str, value: Value| {
        let mut changed = base.clone();
        changed.insert(name.to_owned(), value);
        Value::Object(changed)
    };
    let empty = Map::new();
    let properties = obj.get("properties").and_then(Value::as_object).unwrap_or(&empty);
    for name in obj.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str) {
        if base.contains_key(name) {
            let mut missing = base.clone();
            missing.remove(name);
            out.push(Violation {
                arguments: Value::Object(missing),
                breaks: format!("required property {name:?} is missing"),
            });
        }
    }
    for (name, sub) in properties {
        if let Some(allowed) = allowed_types(sub, schema, 0)
            && let Some((kind, value)) = samples().into_iter().find(|(t, _)| !could_pass(t, &allowed))
        {
            let allowed: Vec<&str> = allowed.into_iter().collect();
            out.push(Violation {
                arguments: with(name, value),
                breaks: format!("property {name:?} is {kind}, where the schema allows {}", allowed.join(" or ")),
            });
        }
        out.extend(bound_violations(name, sub, &with));
    }
    if obj.get("additionalProperties") == Some(&Value::Bool(false)) && !properties.contains_key(UNKNOWN) {
        out.push(Violation {
            arguments: with(UNKNOWN, json!(1)),
            breaks: format!("unknown property {UNKNOWN:?}, where additionalProperties is false"),
        });
    }
    out
}

/// Values just past a property's own bounds: lengths, ranges, enums.
fn bound_violations(name: &str, sub: &Value, with: &dyn Fn(&str, Value) -> Value) -> Vec<Violation> {
    let mut out = Vec::new();
    let Some(obj) = sub.as_object() else {
        return out;
    };
    let mut push = |value: Value, breaks: String| out.push(Violation { arguments: with(name, value), breaks });
    if let Some(min) = obj.get("minLength").and_then(Value::as_u64).filter(|m| (1..=100_000).contains(m)) {
        let short = "a".repeat(usize::try_from(min - 1).unwrap_or(0));
        push(Value::String(short), format!("property {name:?} is shorter than its minLength {min}"));
    }
    if let Some(max) = obj.get("maxLength").and_then(Value::as_u64).filter(|m| *m <= 100_000) {
        let long = "a".repeat(usize::try_from(max + 1).unwrap_or(0));
        push(Value::String(long), format!("property {name:?} is longer than its maxLength {max}"));
    }
    let integer =
        obj.get("type").is_some_and(|t| t == "integer" || t.as_array().is_some_and(|a| a.contains(&json!("integer"))));
    let step = if integer { 1.0 } else { 0.5 };
    if let Some(min) = obj.get("minimum").and_then(Value::as_f64) {
        push(number(min - step), format!("property {name:?} is below its minimum {min}"));
    }
    if let Some(min) = obj.get("exclusiveMinimum").and_then(Value::as_f64) {
        push(number(min), format!("property {name:?} is not above its exclusiveMinimum {min}"));
    }
    if let Some(max) = obj.get("maximum").and_then(Value::as_f64) {
        push(number(max + step), format!("property {name:?} is above its maximum {max}"));
    }
    if let Some(max) = obj.get("exclusiveMaximum").and_then(Value::as_f64) {
        push(number(max), format!("property {name:?} is not below its exclusiveMaximum {max}"));
    }
    if let Some(Value::Array(values)) = obj.get("enum") {
        let outside = json!("__harness_check_not_in_enum");
        if !values.contains(&outside) {
            push(outside, format!("property {name:?} is not one of its enum values"));
        }
    }
    out
}

/// A JSON number for a bound: an integer when it is one (so `-1`, not `-1.0`).
fn number(v: f64) -> Value {
    if v.fract() == 0.0 && v >= i64::MIN as f64 && v < i64::MAX as f64 {
        json!(v as i64)
    } else if v.fract() == 0.0 && v >= 0.0 && v < u64::MAX as f64 {
        json!(v as u64)
    } else {
        serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_violation_per_rule() {
        let schema = json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "minLength": 1, "maxLength": 3},
                "n": {"type": ["integer", "null"], "minimum": 0},
                "mode": {"$ref": "#/$defs/Mode"},
                "anything": {"description": "any JSON"}
            },
            "required": ["name"],
            "additionalProperties": false,
            "$defs": {"Mode": {"oneOf": [{"const": "a"}, {"const": "b"}]}}
        });
        let found = violations(&schema, &json!({"name": "ab", "n": 1, "mode": "a"}));
        let breaks: Vec<&str> = found.iter().map(|v| v.breaks.as_str()).collect();
        for want in [
            "the arguments are an array",
            "required property \"name\" is missing",
            "property \"name\" is integer, where the schema allows string",
            "property \"name\" is shorter than its minLength 1",
            "property \"name\" is longer than its maxLength 3",
            "property \"n\" is string, where the schema allows integer or null",
            "property \"n\" is below its minimum 0",
            "property \"mode\" is integer, where the schema allows string",
            "unknown property",
        ] {
            assert!(breaks.iter().any(|b| b.starts_with(want)), "{want:?} not in {breaks:#?}");
        }
        assert!(!breaks.iter().any(|b| b.contains("\"anything\"")), "{breaks:#?}");
        let below = found.iter().find(|v| v.breaks.contains("below its minimum")).unwrap();
        assert_eq!(below.arguments["n"], json!(-1));
    }

    #[test]
    fn nothing_but_the_root_when_nothing_is_declared() {
        let found = violations(&json!({"type": "object"}), &json!({}));
        assert_eq!(found.len(), 1);
    }
}
