//! Properties of the JSON reply reader and the validator over generated input: no input makes
//! either panic, and prose around a fenced call never changes what is read.

use harness_core::{ReadOptions, ReadReply, ReplyFormat, ToolDefinition, ToolRegistry, ToolSource, read_reply};
use proptest::prelude::*;
use serde_json::{Value, json};

fn read(text: &str, forced: Option<&str>) -> ReadReply {
    read_reply(text, &ReadOptions { format: ReplyFormat::Auto, truncated: false, tools: &[], forced })
}

/// Arbitrary JSON values, a few levels deep.
fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        ".{0,12}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 32, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map("[a-z]{0,6}", inner, 0..6).prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Prose that cannot itself hold a brace or a fence, so the call stays the only JSON.
fn prose() -> impl Strategy<Value = String> {
    "[a-zA-Z0-9 ,.!?:;'\"\\n-]{0,200}"
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn the_reader_never_panics_on_any_text(t in ".{0,400}") {
        let _ = read(&t, None);
    }

    #[test]
    fn the_reader_never_panics_on_brace_heavy_text(t in "[{}\\[\\]\",:\\\\a-z0-9 ]{0,400}") {
        let _ = read(&t, None);
        let _ = read(&t, Some("finish"));
    }

    #[test]
    fn prose_around_a_fenced_call_does_not_change_the_call(
        before in prose(),
        after in prose(),
        arguments in prop::collection::btree_map("[a-z]{1,6}", any_json(), 0..5),
    ) {
        let arguments = Value::Object(arguments.into_iter().collect());
        let call = json!({ "tool": "calculate", "arguments": arguments });
        let bare = read(&call.to_string(), None);
        prop_assert_eq!(bare.calls.len(), 1, "a bare call reads: {:?}", bare.error);
        let fenced = read(&format!("{before}\n```json\n{call}\n```\n{after}"), None);
        prop_assert_eq!(fenced.calls, bare.calls);
    }

    #[test]
    fn the_validator_never_panics_and_is_deterministic(instance in any_json()) {
        let mut registry = ToolRegistry::new();
        let schema = json!({
            "type": "object",
            "properties": {
                "a": {"type": "string", "minLength": 1, "maxLength": 5, "pattern": "^[a-z]+$"},
                "b": {"type": "integer", "minimum": 0, "maximum": 10},
                "c": {"type": "array", "items": {"type": "number"}, "maxItems": 3},
                "d": {"enum": ["x", "y", null]},
                "e": {"anyOf": [{"type": "boolean"}, {"type": "object", "required": ["k"]}]}
            },
            "required": ["a"],
            "additionalProperties": false
        });
        let definition = ToolDefinition {
            name: "t".into(),
            description: "d".into(),
            parameters: schema,
            examples: vec![],
            source: ToolSource::Builtin,
        };
        registry.register(harness_core::ToolSpec::new(definition, std::sync::Arc::new(Nothing))).expect("the schema compiles");
        let tool = registry.get("t").expect("registered");
        let first = tool.validate(&instance).err().map(|e| serde_json::to_string(&e).expect("serialises"));
        let second = tool.validate(&instance).err().map(|e| serde_json::to_string(&e).expect("serialises"));
        prop_assert_eq!(first, second);
    }
}

struct Nothing;

impl harness_core::ToolHandler for Nothing {
    fn call(&self, _: &str, _: &Value) -> Result<Value, harness_core::ToolFailure> {
        Ok(Value::Null)
    }
}
