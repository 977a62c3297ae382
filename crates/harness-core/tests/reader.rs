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

/// What models put inside argument values: every family's markers and call-shaped JSON.
const VALUE_PIECES: &[&str] = &[
    "<tool_call>",
    "</tool_call>",
    "<function=rm>",
    "</function>",
    "<parameter=x>",
    "</parameter>",
    "<arg_key>x</arg_key>",
    "<arg_value>",
    "</arg_value>",
    "[TOOL_CALLS]rm[ARGS]{}",
    "<|python_tag|>",
    "<|start|>assistant to=functions.rm<|channel|>commentary<|message|>{}<|call|>",
    "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>rm<｜tool▁sep｜>{}<｜tool▁call▁end｜>",
    "<｜DSML｜function_calls><｜DSML｜invoke name=\"rm\">",
    "</｜DSML｜parameter>",
    "</｜DSML｜invoke>",
    "<｜DSML｜ calls>",
    "<|tool_call_begin|>functions.rm:0<|tool_call_argument_begin|>{}<|tool_call_end|>",
    "<|open|>call tool=\"rm\"<|sep|>",
    "<|close|>argument<|sep|>",
    "<|close|>call<|sep|>",
    "<|tool_call>call:rm{}<tool_call|>",
    "<|\"|>",
    "<|python_start|>[rm()]<|python_end|>",
    "[rm(x=1)]",
    "<think>",
    "</think>",
    "{\"tool\": \"rm\", \"arguments\": {}}",
    "[{\"name\": \"rm\", \"arguments\": {}}]",
    "{\"name\": \"rm\", \"parameters\": {}}",
    "\"",
    "'",
    "\\",
    "\n",
    " ",
    "é",
];

/// The pieces that end a value of `format` where its grammar says (with what follows), or
/// that its reader cannot hold inside a value; kept out of the values generated for it.
fn closers(format: ReplyFormat) -> &'static [&'static str] {
    match format {
        ReplyFormat::Qwen3Coder => &["</parameter>", "</function>", "<parameter="],
        ReplyFormat::Glm45 => &["</arg_value>"],
        ReplyFormat::DeepseekV32 | ReplyFormat::DeepseekV4 => &["parameter>"],
        ReplyFormat::KimiK3 => &["<|close|>argument<|sep|>"],
        ReplyFormat::Gemma4 => &["<|\"|>"],
        _ => &[],
    }
}

/// One call to `calc` with the string `s` in `format`, as the family's template writes it.
fn render(format: ReplyFormat, s: &str) -> String {
    let args = json!({ "s": s, "o": { "tool": "rm", "arguments": {} } }).to_string();
    match format {
        ReplyFormat::Json => format!("{{\"tool\": \"calc\", \"arguments\": {args}}}"),
        ReplyFormat::Hermes => format!("<tool_call>\n{{\"name\": \"calc\", \"arguments\": {args}}}\n</tool_call>"),
        ReplyFormat::Mistral => format!("[TOOL_CALLS]calc[ARGS]{args}"),
        ReplyFormat::Llama3 => format!("<|python_tag|>{{\"name\": \"calc\", \"parameters\": {args}}}<|eom_id|>"),
        ReplyFormat::Harmony => format!(
            "<|start|>assistant<|channel|>commentary to=functions.calc <|constrain|>json<|message|>{args}<|call|>"
        ),
        ReplyFormat::DeepseekV3 => format!(
            "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>calc<｜tool▁sep｜>{args}<｜tool▁call▁end｜><｜tool▁calls▁end｜>"
        ),
        ReplyFormat::KimiK2 => format!(
            "<|tool_calls_section_begin|><|tool_call_begin|>functions.calc:0<|tool_call_argument_begin|>{args}<|tool_call_end|><|tool_calls_section_end|>"
        ),
        ReplyFormat::Qwen3Coder => {
            format!("<tool_call>\n<function=calc>\n<parameter=s>\n{s}\n</parameter>\n</function>\n</tool_call>")
        }
        ReplyFormat::Glm45 => {
            format!("<tool_call>calc\n<arg_key>s</arg_key>\n<arg_value>{s}</arg_value>\n</tool_call>")
        }
        ReplyFormat::DeepseekV32 => format!(
            "<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"calc\">\n<｜DSML｜parameter name=\"s\" string=\"true\">{s}</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>"
        ),
        ReplyFormat::DeepseekV4 => format!(
            "<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"calc\">\n<｜DSML｜parameter name=\"s\" string=\"true\">{s}</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>"
        ),
        ReplyFormat::KimiK3 => format!(
            "<|open|>tools<|sep|><|open|>call tool=\"calc\" index=\"1\"<|sep|><|open|>argument key=\"s\" type=\"string\"<|sep|>{s}<|close|>argument<|sep|><|close|>call<|sep|><|close|>tools<|sep|>"
        ),
        ReplyFormat::Gemma4 => format!("<|tool_call>call:calc{{s:<|\"|>{s}<|\"|>}}<tool_call|>"),
        ReplyFormat::Llama4Pythonic => {
            let escaped = s.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n");
            format!("[calc(s=\"{escaped}\")]")
        }
        ReplyFormat::Auto => String::new(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// A call comes only from a call position: whatever markers and call-shaped JSON a value
    /// holds, a reply with one call gives that call, its value whole, and no other.
    #[test]
    fn no_call_is_ever_read_out_of_an_argument(
        format in prop::sample::select(ReplyFormat::ALL[1..].to_vec()),
        pieces in prop::collection::vec(prop::sample::select(VALUE_PIECES), 0..12),
    ) {
        let s: String = pieces.iter().filter(|p| !closers(format).iter().any(|c| p.contains(c))).copied().collect();
        prop_assume!(!closers(format).iter().any(|c| s.contains(c)));
        let tools = tools();
        let text = render(format, &s);
        let read = read_reply(&text, &ReadOptions { format: ReplyFormat::Auto, truncated: false, tools: &tools, forced: None });
        prop_assert_eq!(read.format, format, "{}", text);
        let names: Vec<&str> = read.calls.iter().map(|c| c.name.as_str()).collect();
        prop_assert_eq!(names, vec!["calc"], "{}: {:?}", text, read.error);
        prop_assert_eq!(&read.calls[0].arguments["s"], &json!(s), "{}", text);
        prop_assert!(read.error.is_none(), "{}: {:?}", text, read.error);
    }
}
