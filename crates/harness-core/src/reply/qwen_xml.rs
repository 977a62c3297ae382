//! Qwen3-Coder / Qwen3.5: `<tool_call><function=NAME><parameter=KEY>VALUE</parameter>...
//! </function></tool_call>`. Values are text, one newline trimmed on each side, typed by the
//! tool's schema.

use serde_json::{Map, Value};

use super::{Reading, find_from, find_within, skip_ws, starts};

const FUNCTION: &str = "<function=";
const FUNCTION_END: &str = "</function>";
const PARAMETER: &str = "<parameter=";
const PARAMETER_END: &str = "</parameter>";
const CLOSE: &str = "</tool_call>";

/// One block, from just after `<tool_call>` (at `body`); returns where it ends.
pub(super) fn read_block(text: &str, open: usize, body: usize, r: &mut Reading<'_>) -> Option<usize> {
    let f = skip_ws(text, body);
    if f >= text.len() {
        r.cut(open, None);
        return None;
    }
    if !starts(text, f, FUNCTION) {
        r.malformed(f, "expected <function=NAME> after <tool_call>");
        return None;
    }
    let name_start = f + FUNCTION.len();
    let Some(function_end) = find_from(text, name_start, FUNCTION_END) else {
        let name = find_from(text, name_start, ">").map(|gt| &text[name_start..gt]);
        r.cut(open, name);
        return None;
    };
    let Some(gt) = find_within(text, name_start, function_end, ">") else {
        r.malformed(name_start, "the <function= tag is not closed with >");
        return None;
    };
    let name = text[name_start..gt].trim();
    if name.is_empty() || name.contains('<') {
        r.malformed(name_start, "the function's name is empty or holds a tag");
        return None;
    }
    let arguments = read_parameters(text, name, gt + 1, function_end, r)?;
    let close = skip_ws(text, function_end + FUNCTION_END.len());
    if close >= text.len() {
        r.cut(open, Some(name));
        return None;
    }
    if !starts(text, close, CLOSE) {
        r.malformed(close, "expected </tool_call> after </function>");
        return None;
    }
    r.call(name, arguments);
    Some(close + CLOSE.len())
}

/// The `<parameter=…>` elements in `text[from..to]`.
fn read_parameters(text: &str, tool: &str, from: usize, to: usize, r: &mut Reading<'_>) -> Option<Value> {
    let mut arguments = Map::new();
    let mut p = from;
    loop {
        p = skip_ws(text, p);
        if p >= to {
            return Some(Value::Object(arguments));
        }
        if !starts(text, p, PARAMETER) {
            r.malformed(p, &format!("expected <parameter=NAME> or </function> in the call to {tool:?}"));
            return None;
        }
        let key_start = p + PARAMETER.len();
        let Some(gt) = find_within(text, key_start, to, ">") else {
            r.malformed(key_start, "the <parameter= tag is not closed with >");
            return None;
        };
        let key = text[key_start..gt].trim();
        let Some(value_end) = find_within(text, gt + 1, to, PARAMETER_END) else {
            r.malformed(gt + 1, &format!("the parameter {key:?} of {tool:?} has no </parameter>"));
            return None;
        };
        let raw = &text[gt + 1..value_end];
        if raw.contains(PARAMETER) {
            r.malformed(gt + 1, &format!("the parameter {key:?} of {tool:?} is not closed before the next one"));
            return None;
        }
        let raw = raw.strip_prefix('\n').unwrap_or(raw);
        let raw = raw.strip_suffix('\n').unwrap_or(raw);
        arguments.insert(key.to_owned(), r.typed(tool, key, raw));
        p = value_end + PARAMETER_END.len();
    }
}
