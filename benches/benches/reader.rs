//! The reply reader's cost, per family and per KB of reply:
//! `cargo bench -p harness-bench --bench reader`.
//!
//! Each family's reply is built from calls in that family's own format (a `<think>` block
//! first), repeated until the reply reaches 1, 16 or 256 KB; divan reports the time per reply
//! and the throughput. Linear time shows as the same throughput at every size. The last two
//! groups are shapes that would be quadratic in a careless reader: thousands of reasoning
//! blocks with other blocks' closers absent, and one long value.

use std::hint::black_box;

use divan::Bencher;
use divan::counter::BytesCount;
use harness_reply::{ReadOptions, ReplyFormat, ToolSchema, read_reply};
use serde_json::json;

fn main() {
    divan::main();
}

const SIZES_KB: [usize; 3] = [1, 16, 256];

/// One call in each family's format, with arguments `{"city": ..., "days": ...}`.
fn one_call(format: ReplyFormat, i: usize) -> String {
    let city = format!("Zürich {i}");
    match format {
        ReplyFormat::Hermes => format!(
            "<tool_call>\n{{\"name\": \"get_weather\", \"arguments\": {{\"city\": \"{city}\", \"days\": {i}}}}}\n</tool_call>\n"
        ),
        ReplyFormat::Qwen3Coder => format!(
            "<tool_call>\n<function=get_weather>\n<parameter=city>\n{city}\n</parameter>\n<parameter=days>\n{i}\n</parameter>\n</function>\n</tool_call>\n"
        ),
        ReplyFormat::Glm45 => format!(
            "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>{city}</arg_value>\n<arg_key>days</arg_key>\n<arg_value>{i}</arg_value>\n</tool_call>\n"
        ),
        ReplyFormat::Mistral => format!("[TOOL_CALLS]get_weather[ARGS]{{\"city\": \"{city}\", \"days\": {i}}}"),
        ReplyFormat::Llama3 => {
            format!("{{\"name\": \"get_weather\", \"parameters\": {{\"city\": \"{city}\", \"days\": {i}}}}}; ")
        }
        ReplyFormat::Harmony => format!(
            "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{{\"city\": \"{city}\", \"days\": {i}}}<|call|>"
        ),
        ReplyFormat::DeepseekV3 => format!(
            "<｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{{\"city\": \"{city}\", \"days\": {i}}}<｜tool▁call▁end｜>"
        ),
        ReplyFormat::DeepseekV32 => format!(
            "<｜DSML｜invoke name=\"get_weather\">\n<｜DSML｜parameter name=\"city\" string=\"true\">{city}</｜DSML｜parameter>\n<｜DSML｜parameter name=\"days\" string=\"false\">{i}</｜DSML｜parameter>\n</｜DSML｜invoke>\n"
        ),
        ReplyFormat::DeepseekV4 => format!(
            "<｜DSML｜ invoke name=\"get_weather\">\n<｜DSML｜ parameter name=\"city\" string=\"true\">{city}</｜DSML｜ parameter>\n<｜DSML｜ parameter name=\"days\" string=\"false\">{i}</｜DSML｜ parameter>\n</｜DSML｜ invoke>\n"
        ),
        ReplyFormat::KimiK2 => format!(
            "<|tool_call_begin|>functions.get_weather:{i}<|tool_call_argument_begin|>{{\"city\": \"{city}\", \"days\": {i}}}<|tool_call_end|>"
        ),
        ReplyFormat::KimiK3 => format!(
            "<|open|>call tool=\"get_weather\" index=\"{i}\"<|sep|><|open|>argument key=\"city\" type=\"string\"<|sep|>{city}<|close|>argument<|sep|><|open|>argument key=\"days\" type=\"integer\"<|sep|>{i}<|close|>argument<|sep|><|close|>call<|sep|>"
        ),
        ReplyFormat::Llama4Pythonic => format!("get_weather(city=\"{city}\", days={i}), "),
        ReplyFormat::Gemma4 => format!("<|tool_call>call:get_weather{{city:<|\"|>{city}<|\"|>,days:{i}}}<tool_call|>"),
        ReplyFormat::Json | ReplyFormat::Auto => {
            format!("{{\"tool\": \"get_weather\", \"arguments\": {{\"city\": \"{city}\", \"days\": {i}}}}}\n")
        }
    }
}

/// A reply of about `kb` KB: reasoning, the family's opening, calls until the size, closing.
fn reply(format: ReplyFormat, kb: usize) -> String {
    let (open, close) = match format {
        ReplyFormat::Llama3 => ("<|python_tag|>", "<|eom_id|>"),
        ReplyFormat::DeepseekV3 => ("<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>"),
        ReplyFormat::DeepseekV32 => ("<｜DSML｜function_calls>\n", "</｜DSML｜function_calls>"),
        ReplyFormat::DeepseekV4 => ("<｜DSML｜ calls>\n", "</｜DSML｜ calls>"),
        ReplyFormat::KimiK2 => ("<|tool_calls_section_begin|>", "<|tool_calls_section_end|>"),
        ReplyFormat::KimiK3 => ("<|open|>tools<|sep|>", "<|close|>tools<|sep|>"),
        ReplyFormat::Llama4Pythonic => ("<|python_start|>[", "]<|python_end|>"),
        _ => ("", ""),
    };
    let mut text =
        format!("<think>The user wants the weather in several cities; one call each.</think>Checking.{open}");
    let mut i = 0;
    while text.len() + close.len() < kb * 1024 {
        text.push_str(&one_call(format, i));
        i += 1;
    }
    text.push_str(close);
    text
}

fn tools() -> Vec<ToolSchema> {
    vec![ToolSchema {
        name: "get_weather".into(),
        parameters: json!({"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}),
    }]
}

fn bench_read(bencher: Bencher, format: ReplyFormat, text: String) {
    let tools = tools();
    let options = ReadOptions { format: ReplyFormat::Auto, truncated: false, tools: &tools, forced: None };
    let read = read_reply(&text, &options);
    assert!(read.error.is_none() && !read.calls.is_empty(), "{format}: the fixture reads: {:?}", read.error);
    assert_eq!(read.format, format, "the fixture is detected as its family");
    bencher.counter(BytesCount::new(text.len())).bench(|| black_box(read_reply(black_box(&text), &options)));
}

macro_rules! family {
    ($name:ident, $format:expr) => {
        #[divan::bench(args = SIZES_KB)]
        fn $name(bencher: Bencher, kb: usize) {
            bench_read(bencher, $format, reply($format, kb));
        }
    };
}

family!(json, ReplyFormat::Json);
family!(hermes, ReplyFormat::Hermes);
family!(qwen3_coder, ReplyFormat::Qwen3Coder);
family!(glm45, ReplyFormat::Glm45);
family!(mistral, ReplyFormat::Mistral);
family!(llama3, ReplyFormat::Llama3);
family!(harmony, ReplyFormat::Harmony);
family!(deepseek_v3, ReplyFormat::DeepseekV3);
family!(deepseek_v32, ReplyFormat::DeepseekV32);
family!(deepseek_v4, ReplyFormat::DeepseekV4);
family!(kimi_k2, ReplyFormat::KimiK2);
family!(kimi_k3, ReplyFormat::KimiK3);
family!(llama4_pythonic, ReplyFormat::Llama4Pythonic);
family!(gemma4, ReplyFormat::Gemma4);

/// Thousands of `<think>` blocks, no other reasoning markers: each absent marker is searched
/// for once, not once a block.
#[divan::bench(args = SIZES_KB)]
fn many_think_blocks(bencher: Bencher, kb: usize) {
    let mut text = String::new();
    while text.len() < kb * 1024 {
        text.push_str("<think>a</think>b ");
    }
    text.push_str(&one_call(ReplyFormat::Hermes, 0));
    bench_read(bencher, ReplyFormat::Hermes, text);
}

/// One Qwen3-Coder call whose value is the whole reply.
#[divan::bench(args = SIZES_KB)]
fn one_long_value(bencher: Bencher, kb: usize) {
    let value = "x<y ".repeat(kb * 256);
    let text = format!(
        "<tool_call>\n<function=get_weather>\n<parameter=city>\n{value}\n</parameter>\n</function>\n</tool_call>"
    );
    bench_read(bencher, ReplyFormat::Qwen3Coder, text);
}

/// One Qwen3-Coder value full of `</parameter>` closers that its grammar does not let end it
/// (none is followed by the next parameter or `</function>`): each is looked at once.
#[divan::bench(args = SIZES_KB)]
fn closers_inside_one_value(bencher: Bencher, kb: usize) {
    let value = "a </parameter> b ".repeat(kb * 64);
    let text = format!(
        "<tool_call>\n<function=get_weather>\n<parameter=city>\n{value}\n</parameter>\n</function>\n</tool_call>"
    );
    bench_read(bencher, ReplyFormat::Qwen3Coder, text);
}

/// One DeepSeek V4 value full of closing parameter tags and invokes, as text.
#[divan::bench(args = SIZES_KB)]
fn dsml_tags_inside_one_value(bencher: Bencher, kb: usize) {
    let value = "</｜DSML｜parameter> <｜DSML｜invoke name=\"x\"> ".repeat(kb * 20);
    let text = format!(
        "<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"get_weather\">\n<｜DSML｜parameter name=\"city\" string=\"true\">{value}</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>"
    );
    bench_read(bencher, ReplyFormat::DeepseekV4, text);
}

/// Prose full of JSON objects that break, then a call: each is parsed once, never searched
/// inside (what is inside a value meant as JSON is its own).
#[divan::bench(args = SIZES_KB)]
fn json_broken_objects_then_a_call(bencher: Bencher, kb: usize) {
    let mut text = "{\"a\": [{\"name\": \"x\", \"arguments\": {}}, oops] } ".repeat(kb * 22);
    text.push_str(&one_call(ReplyFormat::Json, 0));
    bench_read(bencher, ReplyFormat::Json, text);
}
