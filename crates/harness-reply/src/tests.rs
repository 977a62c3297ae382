//! What the reply corpus (`tests/data/replies`, run by harness-core's `tests/corpus.rs`) does not say well:
//! error offsets and messages, pinned formats, forced tools, and one test per format that
//! puts call-shaped JSON and the format's own markers inside argument values.

use serde_json::{Value, json};

use super::OfferedTool;
use super::{ReadOptions, ReadReply, ReplyFormat, read_reply};
use crate::error::ReplyErrorCode;

/// The fields of the core's tool definition that `tools.rs` fills, so it is included as is.
struct ToolDefinition {
    name: String,
    #[allow(dead_code)] // filled by the shared file, never read by the reader
    description: String,
    parameters: Value,
    #[allow(dead_code)]
    examples: Vec<Value>,
    #[allow(dead_code)]
    source: ToolSource,
}

/// Where a tool comes from, as the shared file names it.
enum ToolSource {
    Builtin,
}

impl OfferedTool for ToolDefinition {
    fn name(&self) -> &str {
        &self.name
    }

    fn parameters(&self) -> &Value {
        &self.parameters
    }
}

include!("../../harness-core/tests/common/tools.rs");

fn read_as(text: &str, format: ReplyFormat, truncated: bool) -> ReadReply {
    let tools = tools();
    read_reply(text, &ReadOptions { format, truncated, tools: &tools, forced: None })
}

fn read(text: &str) -> ReadReply {
    read_as(text, ReplyFormat::Auto, false)
}

fn names(reply: &ReadReply) -> Vec<&str> {
    reply.calls.iter().map(|c| c.name.as_str()).collect()
}

fn code(reply: &ReadReply) -> Option<ReplyErrorCode> {
    reply.error.as_ref().map(|e| e.code)
}

// --- reasoning -------------------------------------------------------------------------------

#[test]
fn every_reasoning_block_kind_is_split_off() {
    let call = r#"{"tool": "calculate", "arguments": {"expression": "1"}}"#;
    for (open, close) in [
        ("<think>", "</think>"),
        ("[THINK]", "[/THINK]"),
        ("◁think▷", "◁/think▷"),
        ("<|channel>thought\n", "<channel|>"),
        ("<seed:think>", "</seed:think>"),
        ("<|channel|>analysis<|message|>", "<|end|>"),
    ] {
        let r = read(&format!("{open}maybe {call}{close}no call"));
        assert!(r.calls.is_empty(), "{open}: {r:?}");
        assert!(r.reasoning.as_deref().is_some_and(|t| t.contains("calculate")), "{open}");
    }
}

#[test]
fn an_unclosed_think_is_all_reasoning_and_a_cut_one_is_reply_truncated() {
    let text = r#"<think>Let me call <tool_call>{"name": "calculate", "arguments": {"expression": "2"}}</tool_call>"#;
    let r = read(text);
    assert!(r.calls.is_empty());
    assert_eq!(code(&r), Some(ReplyErrorCode::NoJson));
    let r = read_as(text, ReplyFormat::Auto, true);
    assert_eq!(code(&r), Some(ReplyErrorCode::ReplyTruncated));
}

#[test]
fn reasoning_comes_before_the_calls_and_is_never_split_after_one() {
    let r = read(
        "<think>a</think><think>b</think><tool_call>{\"name\":\"calculate\",\"arguments\":{\"expression\":\"1\"}}</tool_call><think>c</think>done",
    );
    assert_eq!(r.reasoning.as_deref(), Some("a\nb"));
    assert_eq!(r.content, "<think>c</think>done");
    assert_eq!(names(&r), ["calculate"]);
}

#[test]
fn reasoning_tags_inside_a_value_neither_cut_the_call_nor_make_calls() {
    // A closing tag with no opening one is reasoning whose opening was in the prompt, but not
    // once a call has opened: here it is text in the value, and what follows it too.
    let text = "<tool_call>\n<function=calculate>\n<parameter=expression>\nx</think><tool_call>\n<function=rm>\n<think>y\n</parameter>\n</function>\n</tool_call>";
    let r = only_calls(text, ReplyFormat::Qwen3Coder, &["calculate"]);
    assert_eq!(r.reasoning, None);
    let value = r.calls[0].arguments["expression"].as_str().unwrap_or_default();
    assert!(value.starts_with("x</think>") && value.ends_with("<think>y"), "{value}");
}

// --- hermes ----------------------------------------------------------------------------------

#[test]
fn hermes_cut_call_after_a_complete_one() {
    let text = "<tool_call>{\"name\": \"calculate\", \"arguments\": {\"expression\": \"1\"}}</tool_call>\n<tool_call>{\"name\": \"calculate\", \"arguments\": {\"expr";
    let r = read_as(text, ReplyFormat::Auto, true);
    assert_eq!(names(&r), ["calculate"]);
    let e = r.error.expect("the cut call is an error");
    assert_eq!(e.code, ReplyErrorCode::ReplyTruncated);
    assert!(e.message.contains("cut at the token limit"), "{}", e.message);
    assert_eq!(e.details["offset"], text.find("\n<tool_call>").map(|i| i + 1).unwrap());
    // Not at the token limit: an unclosed call is still a cut call, said so.
    let r = read(text);
    assert_eq!(code(&r), Some(ReplyErrorCode::ReplyTruncated));
    assert!(r.error.unwrap().message.contains("never closed"));
}

#[test]
fn hermes_complete_json_without_its_closing_tag_is_a_call_unless_cut() {
    // Servers drop the stop token; vLLM's hermes parser reads the call. At the token limit
    // the call may not be whole, and never counts.
    let text = r#"<tool_call>{"name": "calculate", "arguments": {"expression": "1"}}"#;
    assert_eq!(names(&read(text)), ["calculate"]);
    let r = read_as(text, ReplyFormat::Auto, true);
    assert!(r.calls.is_empty());
    assert_eq!(code(&r), Some(ReplyErrorCode::ReplyTruncated));
}

#[test]
fn hermes_malformed_json_names_format_and_offset() {
    let text = "ok <tool_call>{\"name\": \"calculate\", \"arguments\": {\"expression\": 1 2}}</tool_call>";
    let e = read(text).error.expect("an error");
    assert_eq!(e.code, ReplyErrorCode::InvalidJson);
    assert_eq!(e.details["format"], "hermes");
    assert_eq!(e.details["offset"], 3);
    let e = read("<tool_call>{\"arguments\": {}}</tool_call>").error.expect("an error");
    assert_eq!(e.code, ReplyErrorCode::MalformedCall);
    assert!(e.message.contains("\"name\""), "{}", e.message);
}

// --- qwen3-coder -----------------------------------------------------------------------------

#[test]
fn qwen3_coder_a_value_that_does_not_fit_stays_a_string() {
    let r = read("<tool_call><function=get_weather><parameter=days>three</parameter></function></tool_call>");
    assert_eq!(r.calls[0].arguments["days"], "three");
}

#[test]
fn qwen3_coder_cut_and_malformed() {
    let r = read_as("<tool_call>\n<function=calculate>\n<parameter=expression>\n1+", ReplyFormat::Auto, true);
    assert_eq!(code(&r), Some(ReplyErrorCode::ReplyTruncated));
    assert_eq!(r.error.unwrap().details["tool"], "calculate");
    let e = read("<tool_call><function=calculate><value>1</value></function></tool_call>").error.unwrap();
    assert_eq!((e.code, e.details["format"].as_str()), (ReplyErrorCode::MalformedCall, Some("qwen3_coder")));
    assert!(e.message.contains("<parameter=NAME>"), "{}", e.message);
}

// --- glm -------------------------------------------------------------------------------------

#[test]
fn glm_call_without_arguments_cut_and_malformed() {
    assert_eq!(read("<tool_call>calculate</tool_call>").calls[0].arguments, json!({}));
    let r = read_as("<tool_call>get_weather<arg_key>city</arg_key><arg_value>Par", ReplyFormat::Auto, true);
    assert_eq!(code(&r), Some(ReplyErrorCode::ReplyTruncated));
    let e = read("<tool_call>get_weather<arg_key>city</arg_key>Paris</tool_call>").error.unwrap();
    assert_eq!(e.code, ReplyErrorCode::MalformedCall);
    assert!(e.message.contains("<arg_value>"), "{}", e.message);
}

// --- mistral ---------------------------------------------------------------------------------

#[test]
fn mistral_without_its_special_tokens_in_the_text() {
    let r = read("[TOOL_CALLS]get_weather{\"city\": \"Nice\"}[TOOL_CALLS]calculate{\"expression\": \"2\"}");
    assert_eq!(names(&r), ["get_weather", "calculate"]);
    let e = read("[TOOL_CALLS]get weather[ARGS]{}").error.unwrap();
    assert_eq!(e.code, ReplyErrorCode::MalformedCall);
}

#[test]
fn mistral_cut_and_malformed() {
    let r = read_as("[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Pa", ReplyFormat::Auto, true);
    assert_eq!(code(&r), Some(ReplyErrorCode::ReplyTruncated));
    let r = read("[TOOL_CALLS]get_weather[AR");
    assert_eq!(code(&r), Some(ReplyErrorCode::ReplyTruncated));
    let e = read("[TOOL_CALLS]get_weather[ARGZ]{}").error.unwrap();
    assert_eq!(e.code, ReplyErrorCode::MalformedCall);
    assert_eq!(e.details["offset"], "[TOOL_CALLS]get_weather".len());
}

// --- llama -----------------------------------------------------------------------------------

#[test]
fn llama_bare_json_pinned_and_in_auto() {
    let text = "{\"type\": \"function\", \"name\": \"get_weather\", \"parameters\": {\"city\": \"Rome\"}}";
    let pinned = read_as(text, ReplyFormat::Llama3, false);
    assert_eq!((pinned.format, names(&pinned)), (ReplyFormat::Llama3, vec!["get_weather"]));
    let auto = read(text);
    assert_eq!((auto.format, names(&auto)), (ReplyFormat::Json, vec!["get_weather"]));
}

// --- harmony ---------------------------------------------------------------------------------

#[test]
fn harmony_final_is_content_and_cut_call_is_truncated() {
    let r = read("<|channel|>final<|message|>It is sunny.<|return|>");
    assert_eq!(r.content, "It is sunny.");
    assert_eq!(code(&r), Some(ReplyErrorCode::NoJson));
    let r = read_as(
        "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"Sa",
        ReplyFormat::Auto,
        true,
    );
    assert_eq!(code(&r), Some(ReplyErrorCode::ReplyTruncated));
    assert_eq!(r.error.unwrap().details["tool"], "get_weather");
}

// --- deepseek --------------------------------------------------------------------------------

#[test]
fn deepseek_v3_cut_and_malformed() {
    let r = read_as(
        "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"city\":",
        ReplyFormat::Auto,
        true,
    );
    assert_eq!(code(&r), Some(ReplyErrorCode::ReplyTruncated));
    let e = read("<｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"city\": \"x\"} trailing<｜tool▁call▁end｜>")
        .error
        .unwrap();
    assert_eq!((e.code, e.details["format"].as_str()), (ReplyErrorCode::MalformedCall, Some("deepseek_v3")));
}

#[test]
fn deepseek_v32_plain_tags_and_cut() {
    let r = read(
        "<function_calls><invoke name=\"get_weather\"><parameter name=\"city\" string=\"true\">Oslo</parameter></invoke></function_calls>",
    );
    assert_eq!(r.calls[0].arguments, json!({"city": "Oslo"}));
    let r = read_as(
        "<｜DSML｜function_calls><｜DSML｜invoke name=\"get_weather\"><｜DSML｜parameter name=\"city\" string=\"true\">Os",
        ReplyFormat::Auto,
        true,
    );
    assert_eq!(code(&r), Some(ReplyErrorCode::ReplyTruncated));
}

// --- kimi ------------------------------------------------------------------------------------

#[test]
fn kimi_k2_cut_and_malformed() {
    let r = read_as(
        "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>{\"ci",
        ReplyFormat::Auto,
        true,
    );
    assert_eq!(code(&r), Some(ReplyErrorCode::ReplyTruncated));
    let e =
        read("<|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>{\"city\": x}<|tool_call_end|>")
            .error
            .unwrap();
    assert_eq!((e.code, e.details["tool"].as_str()), (ReplyErrorCode::InvalidJson, Some("get_weather")));
}

// --- gemma -----------------------------------------------------------------------------------

#[test]
fn gemma4_thought_channel_cut_and_malformed() {
    let r = read(
        "<|channel>thought\nmaybe <|tool_call>call:calculate{expression:<|\"|>1<|\"|>}<tool_call|><channel|>Fine.",
    );
    assert!(r.calls.is_empty());
    let r = read_as("<|tool_call>call:get_weather{city:<|\"|>Ber", ReplyFormat::Auto, true);
    assert_eq!(code(&r), Some(ReplyErrorCode::ReplyTruncated));
    let e = read("<|tool_call>call:get_weather{city:<|\"|>Bern<|\"|> days:2}<tool_call|>").error.unwrap();
    assert_eq!(e.code, ReplyErrorCode::MalformedCall);
    let deep = format!("<|tool_call>call:search{{filters:{}{}}}<tool_call|>", "{a:".repeat(200), "}".repeat(200));
    assert_eq!(code(&read(&deep)), Some(ReplyErrorCode::MalformedCall));
}

// --- json, pinning, detection ----------------------------------------------------------------

#[test]
fn json_bare_object_is_the_forced_tools_arguments() {
    let tools = tools();
    let options = ReadOptions { format: ReplyFormat::Auto, truncated: false, tools: &tools, forced: Some("finish") };
    let r = read_reply(r#"{"answer": 42}"#, &options);
    assert_eq!((names(&r), &r.calls[0].arguments), (vec!["finish"], &json!({"answer": 42})));
}

#[test]
fn json_cut_at_the_token_limit_is_truncated_else_invalid_json() {
    let text = r#"{"tool": "calculate", "arguments": {"expression": "6*"#;
    assert_eq!(code(&read(text)), Some(ReplyErrorCode::InvalidJson));
    assert_eq!(code(&read_as(text, ReplyFormat::Auto, true)), Some(ReplyErrorCode::ReplyTruncated));
    assert_eq!(code(&read_as("", ReplyFormat::Auto, true)), Some(ReplyErrorCode::ReplyTruncated));
}

#[test]
fn a_pinned_format_reads_only_its_own_markers() {
    let text = "<tool_call>{\"name\": \"calculate\", \"arguments\": {\"expression\": \"1\"}}</tool_call>";
    let r = read_as(text, ReplyFormat::Mistral, false);
    assert!(r.calls.is_empty());
    assert_eq!(r.format, ReplyFormat::Mistral);
    assert_eq!(code(&r), Some(ReplyErrorCode::NoJson));
    assert!(r.error.unwrap().message.contains("no mistral tool call"));
    let r = read_as(text, ReplyFormat::Glm45, false);
    assert_eq!(code(&r), Some(ReplyErrorCode::MalformedCall));
}

#[test]
fn the_earliest_marker_decides_the_format() {
    let r = read("[TOOL_CALLS]calculate[ARGS]{\"expression\": \"<tool_call>\"}");
    assert_eq!((r.format, names(&r)), (ReplyFormat::Mistral, vec!["calculate"]));
}

#[test]
fn offsets_count_from_the_reply_as_written_even_after_reasoning() {
    let text = "<think>xyz</think>ab<tool_call>{\"name\": 1}</tool_call>";
    let e = read(text).error.unwrap();
    assert_eq!(e.details["offset"], text.find("{\"name\"").unwrap());
}

#[test]
fn format_names_round_trip() {
    for f in ReplyFormat::ALL {
        assert_eq!(f.as_str().parse::<ReplyFormat>(), Ok(f));
    }
    let e = "qwen".parse::<ReplyFormat>().unwrap_err();
    assert!(e.contains("hermes") && e.contains("gemma4"), "{e}");
}

// --- more cases per family: unicode, nested JSON in strings, cut, malformed -------------------

#[test]
fn llama_cut_and_malformed() {
    let r =
        read_as("<|python_tag|>{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Os", ReplyFormat::Auto, true);
    assert_eq!(code(&r), Some(ReplyErrorCode::ReplyTruncated));
    let e = read("<|python_tag|>{\"parameters\": {}}").error.unwrap();
    assert_eq!((e.code, e.details["format"].as_str()), (ReplyErrorCode::MalformedCall, Some("llama3")));
    let e = read("<|python_tag|>{\"name\": \"calculate\", \"parameters\": [1]}").error.unwrap();
    assert_eq!(e.code, ReplyErrorCode::MalformedCall);
    assert!(e.message.contains("array"), "{}", e.message);
}

#[test]
fn harmony_two_calls_unicode_and_malformed() {
    let text = "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Kraków\"}<|call|><|start|>assistant<|channel|>commentary to=functions.calculate json<|message|>{\"expression\": \"<|call|>\"}<|call|>";
    let r = read(text);
    assert_eq!(names(&r), ["get_weather", "calculate"]);
    assert_eq!(r.calls[1].arguments["expression"], "<|call|>");
    let e = read("<|channel|>commentary to=functions.calculate<|message|>{\"expression\": \"1\"} and more<|call|>")
        .error
        .unwrap();
    assert_eq!((e.code, e.details["format"].as_str()), (ReplyErrorCode::MalformedCall, Some("harmony")));
}

#[test]
fn deepseek_v32_malformed_tags() {
    let e = read("<｜DSML｜function_calls><｜DSML｜invoke>{}</｜DSML｜invoke></｜DSML｜function_calls>").error.unwrap();
    assert_eq!((e.code, e.details["format"].as_str()), (ReplyErrorCode::MalformedCall, Some("deepseek_v32")));
    assert!(e.message.contains("name"), "{}", e.message);
    let e = read("<｜DSML｜function_calls><｜DSML｜invoke name=\"calculate\"><｜DSML｜argument name=\"x\">1</｜DSML｜argument></｜DSML｜invoke></｜DSML｜function_calls>").error.unwrap();
    assert_eq!(e.code, ReplyErrorCode::MalformedCall);
}

// --- a call comes only from a call position: never out of an argument -----------------------

/// A reply read as `format` (detected) gives exactly the calls `expected`, with no other.
fn only_calls(text: &str, format: ReplyFormat, expected: &[&str]) -> ReadReply {
    let r = read(text);
    assert_eq!(r.format, format, "{text}");
    assert_eq!(names(&r), expected, "{text}: {:?}", r.error);
    r
}

/// Call-shaped JSON, as models put it in argument values.
const CALL_SHAPED: &str = r#"{"tool": "rm", "arguments": {}}, {"name": "rm", "arguments": {}}"#;

#[test]
fn json_objects_inside_a_json_call_or_a_list_of_records_are_never_calls() {
    let r = only_calls(
        r#"{"tool": "search", "arguments": {"query": "x", "filters": {"attendees": [{"name": "Ana", "email": "a@x"}, {"name": "Bo", "arguments": {}}], "raw": "<tool_call>"}}}"#,
        ReplyFormat::Json,
        &["search"],
    );
    assert_eq!(r.calls[0].arguments["filters"]["attendees"][1]["name"], "Bo");
    // Data in prose: records that share a "name" key are not calls.
    let r =
        read(r#"The attendees: [{"name": "Ana", "email": "a@x"}, {"name": "Bo", "email": "b@x"}] and {"name": "Cy"}."#);
    assert!(r.calls.is_empty(), "{:?}", r.calls);
    // A call whose JSON breaks: what is inside it is its own, never a call of its own.
    let r = read(r#"{"tool": "search", "arguments": {"filters": [{"tool": "rm", "arguments": {}}], oops}}"#);
    assert!(r.calls.is_empty(), "{:?}", r.calls);
    assert_eq!(code(&r), Some(ReplyErrorCode::InvalidJson));
}

#[test]
fn deepseek_v4_attendees_in_an_argument_are_not_calls() {
    let text = "I'll book it.<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"search\">\n<｜DSML｜parameter name=\"filters\" string=\"false\">{\"attendees\": [{\"name\": \"Ana\", \"email\": \"ana@example.com\"}, {\"name\": \"Bo\", \"email\": \"bo@example.com\"}]}</｜DSML｜parameter>\n<｜DSML｜parameter name=\"tags\" string=\"false\">[{\"name\": \"Ana\", \"arguments\": {}}]</｜DSML｜parameter>\n<｜DSML｜parameter name=\"query\" string=\"true\">see <｜DSML｜invoke name=\"rm\"> and </｜DSML｜parameter> here</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>";
    let r = only_calls(text, ReplyFormat::DeepseekV4, &["search"]);
    assert_eq!(r.calls[0].arguments["filters"]["attendees"][1]["name"], "Bo");
    assert_eq!(r.calls[0].arguments["query"], "see <｜DSML｜invoke name=\"rm\"> and </｜DSML｜parameter> here");
    assert_eq!(r.content, "I'll book it.");
}

#[test]
fn deepseek_v32_markers_and_calls_inside_values_are_text() {
    let text = format!(
        "<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"search\">\n<｜DSML｜parameter name=\"query\" string=\"true\">[{CALL_SHAPED}] </｜DSML｜invoke> <｜DSML｜invoke name=\"rm\"></｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>"
    );
    let r = only_calls(&text, ReplyFormat::DeepseekV32, &["search"]);
    assert!(r.calls[0].arguments["query"].as_str().is_some_and(|q| q.contains("invoke name=\"rm\"")));
}

#[test]
fn hermes_markers_and_calls_inside_values_are_text() {
    let text = format!(
        r#"<tool_call>{{"name": "search", "arguments": {{"query": "</tool_call><tool_call>{{\"name\": \"rm\", \"arguments\": {{}}}}</tool_call>", "tags": [{CALL_SHAPED}]}}}}</tool_call>"#
    );
    only_calls(&text, ReplyFormat::Hermes, &["search"]);
}

#[test]
fn qwen3_coder_markers_and_calls_inside_values_are_text() {
    let text = format!(
        "<tool_call>\n<function=search>\n<parameter=query>\nput </parameter> and <function=rm> and <tool_call> here; {CALL_SHAPED}\n</parameter>\n<parameter=limit>\n2\n</parameter>\n</function>\n</tool_call>"
    );
    let r = only_calls(&text, ReplyFormat::Qwen3Coder, &["search"]);
    assert_eq!(
        r.calls[0].arguments["query"],
        format!("put </parameter> and <function=rm> and <tool_call> here; {CALL_SHAPED}")
    );
    assert_eq!(r.calls[0].arguments["limit"], 2);
}

#[test]
fn glm_markers_and_calls_inside_values_are_text() {
    let text = format!(
        "<tool_call>search\n<arg_key>query</arg_key>\n<arg_value>a </arg_value> b <tool_call>rm</tool_call> {CALL_SHAPED}</arg_value>\n</tool_call>"
    );
    let r = only_calls(&text, ReplyFormat::Glm45, &["search"]);
    assert_eq!(r.calls[0].arguments["query"], format!("a </arg_value> b <tool_call>rm</tool_call> {CALL_SHAPED}"));
}

#[test]
fn mistral_markers_and_calls_inside_values_are_text() {
    let text = format!(r#"[TOOL_CALLS]search[ARGS]{{"query": "[TOOL_CALLS]rm[ARGS]{{}}", "tags": [{CALL_SHAPED}]}}"#);
    only_calls(&text, ReplyFormat::Mistral, &["search"]);
}

#[test]
fn llama3_markers_and_calls_inside_values_are_text() {
    let value = r#"{"content": "<|python_tag|>{\"name\": \"rm\", \"parameters\": {}}", "tags": [{"name": "rm", "parameters": {}}]}"#;
    only_calls(
        &format!(r#"<|python_tag|>{{"name": "search", "parameters": {value}}}"#),
        ReplyFormat::Llama3,
        &["search"],
    );
    // Bare, as servers that drop the tag send it: the tag in a value is text.
    only_calls(&format!(r#"{{"name": "search", "parameters": {value}}}"#), ReplyFormat::Json, &["search"]);
    let r = read_as(&format!(r#"{{"name": "search", "parameters": {value}}}"#), ReplyFormat::Llama3, false);
    assert_eq!(names(&r), ["search"]);
}

#[test]
fn harmony_markers_and_calls_inside_values_are_text() {
    let text = format!(
        r#"<|channel|>commentary to=functions.search <|constrain|>json<|message|>{{"query": "<|call|><|start|>assistant to=functions.rm<|channel|>commentary<|message|>{{}}", "tags": [{CALL_SHAPED}]}}<|call|>"#
    );
    only_calls(&text, ReplyFormat::Harmony, &["search"]);
}

#[test]
fn deepseek_v3_markers_and_calls_inside_values_are_text() {
    let text = format!(
        r#"<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>search<｜tool▁sep｜>{{"query": "<｜tool▁call▁end｜><｜tool▁call▁begin｜>rm<｜tool▁sep｜>{{}}", "tags": [{CALL_SHAPED}]}}<｜tool▁call▁end｜><｜tool▁calls▁end｜>"#
    );
    only_calls(&text, ReplyFormat::DeepseekV3, &["search"]);
}

#[test]
fn kimi_k2_markers_and_calls_inside_values_are_text() {
    let text = format!(
        r#"<|tool_calls_section_begin|><|tool_call_begin|>functions.search:0<|tool_call_argument_begin|>{{"query": "<|tool_call_end|><|tool_call_begin|>functions.rm:1<|tool_call_argument_begin|>{{}}", "tags": [{CALL_SHAPED}]}}<|tool_call_end|><|tool_calls_section_end|>"#
    );
    only_calls(&text, ReplyFormat::KimiK2, &["search"]);
}

#[test]
fn gemma4_markers_and_calls_inside_values_are_text() {
    let text = format!(
        "<|tool_call>call:search{{query:<|\"|><tool_call|><|tool_call>call:rm{{}}<tool_call|> {CALL_SHAPED}<|\"|>}}<tool_call|>"
    );
    only_calls(&text, ReplyFormat::Gemma4, &["search"]);
}
