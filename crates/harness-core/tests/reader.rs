//! Properties of the reply reader over generated input: no input makes it panic, whatever the
//! format pinned and whether the reply was cut; and a call it reads is one the text holds.

use harness_core::{ReadOptions, ReplyFormat, ToolDefinition, ToolSource, read_reply};
use proptest::prelude::*;
use serde_json::json;

/// Pieces of every family's grammar, so that generated text walks deep into each reader.
const PIECES: &[&str] = &[
    "<tool_call>",
    "</tool_call>",
    "<function=",
    "</function>",
    "<parameter=",
    "</parameter>",
    "<arg_key>",
    "</arg_key>",
    "<arg_value>",
    "</arg_value>",
    "[TOOL_CALLS]",
    "[ARGS]",
    "[CALL_ID]",
    "<|python_tag|>",
    "<|eom_id|>",
    "<|start|>",
    "<|channel|>",
    "<|message|>",
    "<|constrain|>",
    "<|end|>",
    "<|call|>",
    " to=functions.",
    "analysis",
    "commentary",
    "final",
    "<｜tool▁calls▁begin｜>",
    "<｜tool▁call▁begin｜>",
    "<｜tool▁sep｜>",
    "<｜tool▁call▁end｜>",
    "<｜DSML｜function_calls>",
    "</｜DSML｜function_calls>",
    "<｜DSML｜invoke name=\"",
    "</｜DSML｜invoke>",
    "<｜DSML｜parameter name=\"",
    "\" string=\"true\">",
    "</｜DSML｜parameter>",
    "<function_calls>",
    "<|tool_calls_section_begin|>",
    "<|tool_call_begin|>",
    "<|tool_call_argument_begin|>",
    "<|tool_call_end|>",
    "<|tool_call>",
    "call:",
    "<tool_call|>",
    "<|\"|>",
    "<｜DSML｜tool_calls>",
    "<｜DSML｜ calls>",
    "</｜DSML｜ calls>",
    "<｜DSML｜ invoke name=\"",
    "\"/>",
    "<|open|>tools<|sep|>",
    "<|open|>call tool=\"",
    "<|open|>argument key=\"",
    "\" type=\"string\"<|sep|>",
    "\" type=\"integer\"<|sep|>",
    "<|close|>argument<|sep|>",
    "<|open|>json type=\"object\"<|sep|>",
    "<|close|>json<|sep|>",
    "<|close|>call<|sep|>",
    "<|close|>tools<|sep|>",
    "<|close|>think<|sep|>",
    "&quot;",
    "<|python_start|>",
    "<|python_end|>",
    "[calc(",
    "n=",
    ")",
    "'",
    "True",
    "None",
    "\"\"\"",
    "<think>",
    "</think>",
    "[THINK]",
    "[/THINK]",
    "<|channel>thought",
    "<channel|>",
    "function",
    "```json",
    "```",
    "calc",
    "{",
    "}",
    "[",
    "]",
    ":",
    ",",
    "\"",
    "\\",
    "\n",
    " ",
    "{\"name\": \"calc\", \"arguments\": {",
    "{\"tool\": \"calc\", \"arguments\": {}}",
    "1",
    "true",
    "null",
    "é",
    "東",
    "\u{0}",
];

fn reply_text() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        4 => prop::sample::select(PIECES).prop_map(str::to_owned),
        1 => ".{0,6}",
    ];
    prop::collection::vec(piece, 0..60).prop_map(|pieces| pieces.concat())
}

fn tools() -> Vec<ToolDefinition> {
    vec![ToolDefinition {
        name: "calc".into(),
        description: String::new(),
        parameters: json!({"type": "object", "properties": {"n": {"type": "integer"}, "o": {"type": "object"}}}),
        examples: Vec::new(),
        source: ToolSource::Builtin,
    }]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2048, ..ProptestConfig::default() })]

    #[test]
    fn no_input_makes_the_reader_panic(
        text in reply_text(),
        format in prop::sample::select(ReplyFormat::ALL.to_vec()),
        truncated in any::<bool>(),
    ) {
        let tools = tools();
        let read = read_reply(&text, &ReadOptions { format, truncated, tools: &tools, forced: None });
        prop_assert!(read.format != ReplyFormat::Auto);
        // A reply read without a fault has calls; one with none always says why.
        prop_assert!(!read.calls.is_empty() || read.error.is_some());
        // Every error offset points into the reply.
        if let Some(offset) = read.error.as_ref().and_then(|e| e.details.get("offset")).and_then(|o| o.as_u64()) {
            prop_assert!(offset as usize <= text.len(), "offset {} past {}", offset, text.len());
        }
    }

    #[test]
    fn arbitrary_unicode_never_panics(text in ".{0,300}", truncated in any::<bool>()) {
        let tools = tools();
        let _ = read_reply(&text, &ReadOptions { format: ReplyFormat::Auto, truncated, tools: &tools, forced: Some("calc") });
    }
}
