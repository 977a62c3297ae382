//! Qwen3-Coder / Qwen3.5: `<tool_call><function=NAME><parameter=KEY>VALUE</parameter>...
//! </function></tool_call>`. Values are text, one newline trimmed on each side, typed by the
//! tool's schema.
//!
//! Read as the engines accept it (vLLM's and SGLang's qwen3_coder parsers): the `<tool_call>`
//! opener may be missing, so bare `<function=…>` blocks, one or several in a row, are calls;
//! a missing `</parameter>` is read as ended by the next `<parameter=` starting a line or by
//! `</function>`, unless a `</parameter>` follows that `</function>` before another block opens
//! (then the value quotes a call). Otherwise a value ends only where the grammar puts its end: a
//! `</parameter>` followed by the next `<parameter=` or by `</function>`; a `</parameter>`,
//! `<function=x>` or `</function>` inside the value, followed by more of it, is text. `<function=NAME>{...}</function>` with
//! JSON arguments (Llama 3.1's custom tool format) is read as well.

use serde_json::{Map, Value};

use super::{Closer, Reading, Seeker, find_from, skip_ws, starts};

const TOOL_CALL: &str = "<tool_call>";
const TOOL_CALL_END: &str = "</tool_call>";
const FUNCTION: &str = "<function=";
const FUNCTION_END: &str = "</function>";
const PARAMETER: &str = "<parameter=";
const PARAMETER_END: &str = "</parameter>";
/// What may follow the `</function>` that closes a block.
const AFTER_FUNCTION: &[&str] = &[TOOL_CALL_END, FUNCTION, TOOL_CALL];
/// What may follow the `</parameter>` that closes a value.
const AFTER_PARAMETER: &[&str] = &[PARAMETER, FUNCTION_END, TOOL_CALL_END];

/// The closers of one reading, kept so that no stretch of text is searched twice.
struct Closers {
    parameter: Closer,
    function: Closer,
    /// The next parameter on a line of its own, which ends a value whose `</parameter>` is missing.
    next_parameter: Seeker,
    /// Block openers, which tell a `</function>` that ends a block from one inside a value.
    openers: [Seeker; 2],
}

impl Closers {
    /// Whether a block opens between `from` and `to`.
    fn opens_between(&mut self, text: &str, from: usize, to: usize) -> bool {
        self.openers.iter_mut().filter_map(|s| s.next_at(text, from)).any(|at| at < to)
    }
}

/// Reads every call of `text`: `<tool_call>` blocks and bare `<function=…>` blocks.
pub(super) fn read(text: &str, r: &mut Reading<'_>) {
    let mut openers = [Seeker::new(TOOL_CALL), Seeker::new(FUNCTION)];
    let mut closers = Closers {
        parameter: Closer::new(PARAMETER_END, AFTER_PARAMETER),
        function: Closer::new(FUNCTION_END, AFTER_FUNCTION),
        next_parameter: Seeker::new("\n<parameter="),
        openers: [Seeker::new(TOOL_CALL), Seeker::new(FUNCTION)],
    };
    let mut pos = 0;
    while let Some(open) = openers.iter_mut().filter_map(|s| s.next_at(text, pos)).min() {
        r.content(&text[pos..open]);
        let Some(end) = read_block(text, open, r, &mut closers) else { return };
        pos = end;
    }
    r.content(&text[pos..]);
}

/// One block at `open` (`<tool_call>` or `<function=`); returns where it ends.
fn read_block(text: &str, open: usize, r: &mut Reading<'_>, closers: &mut Closers) -> Option<usize> {
    let wrapped = starts(text, open, TOOL_CALL);
    let f = if wrapped { skip_ws(text, open + TOOL_CALL.len()) } else { open };
    if f >= text.len() {
        r.cut(open, None);
        return None;
    }
    if !starts(text, f, FUNCTION) {
        r.malformed(f, "expected <function=NAME> after <tool_call>");
        return None;
    }
    let (name, body) = function_name(text, open, f + FUNCTION.len(), r)?;
    let (arguments, function_end) = if starts(text, skip_ws(text, body), "{") {
        json_arguments(text, open, skip_ws(text, body), name, r)?
    } else {
        read_parameters(text, open, name, body, r, closers)?
    };
    // `</function>` may be missing before `</tool_call>`, as the engines accept.
    let after = if starts(text, function_end, FUNCTION_END) { function_end + FUNCTION_END.len() } else { function_end };
    let close = skip_ws(text, after);
    if starts(text, close, TOOL_CALL_END) {
        r.call(name, arguments);
        return Some(close + TOOL_CALL_END.len());
    }
    if wrapped && close >= text.len() && r.truncated {
        // Cut at the token limit before its `</tool_call>`: the call may not be whole.
        r.cut(open, Some(name));
        return None;
    }
    r.call(name, arguments);
    Some(after)
}

/// The name in `<function=NAME>`, from `start`: the name and where the tag ends.
fn function_name<'t>(text: &'t str, open: usize, start: usize, r: &mut Reading<'_>) -> Option<(&'t str, usize)> {
    let Some(gt) = find_from(text, start, ">") else {
        r.cut(open, None);
        return None;
    };
    let name = text[start..gt].trim();
    if name.is_empty() || name.contains(['<', '\n']) {
        r.malformed(start, "the function's name is empty or holds a tag");
        return None;
    }
    Some((name, gt + 1))
}

/// `{...}` arguments at `at`, then `</function>`: the arguments and where `</function>` is.
fn json_arguments(text: &str, open: usize, at: usize, name: &str, r: &mut Reading<'_>) -> Option<(Value, usize)> {
    let (value, after) = r.json_at(text, at, open, Some(name))?;
    let arguments = r.object_arguments(at, name, value)?;
    let end = skip_ws(text, after);
    if end >= text.len() {
        r.cut(open, Some(name));
        return None;
    }
    if !starts(text, end, FUNCTION_END) {
        r.malformed(end, &format!("expected </function> after the JSON arguments of {name:?}"));
        return None;
    }
    Some((arguments, end))
}

/// The `<parameter=…>` elements from `p` up to the `</function>` that closes the block (or the
/// `</tool_call>`, when `</function>` is missing): the arguments and where that closer is.
fn read_parameters(
    text: &str,
    open: usize,
    tool: &str,
    mut p: usize,
    r: &mut Reading<'_>,
    closers: &mut Closers,
) -> Option<(Value, usize)> {
    let mut arguments = Map::new();
    loop {
        p = skip_ws(text, p);
        if p >= text.len() {
            r.cut(open, Some(tool));
            return None;
        }
        if starts(text, p, FUNCTION_END) || starts(text, p, TOOL_CALL_END) {
            return Some((Value::Object(arguments), p));
        }
        if !starts(text, p, PARAMETER) {
            r.malformed(p, &format!("expected <parameter=NAME> or </function> in the call to {tool:?}"));
            return None;
        }
        let key_start = p + PARAMETER.len();
        let Some(gt) = find_from(text, key_start, ">") else {
            r.cut(open, Some(tool));
            return None;
        };
        let key = text[key_start..gt].trim();
        if key.is_empty() || key.contains(['<', '\n']) {
            r.malformed(key_start, "the <parameter= tag is not closed with > on its line");
            return None;
        }
        let value_start = gt + 1;
        // The value ends at its own `</parameter>`, or, when that is missing, at the next
        // `<parameter=` starting a line or at `</function>` (as vLLM's parser reads it);
        // a block followed by prose has no closer the grammar vouches for: its first one ends it.
        // A `</function>` before the value's own `</parameter>` ends it only when a block opens
        // between them: else it is text of the value (a value quoting a whole call).
        let own = closers.parameter.next_at(text, value_start);
        let function = closers.function.next_at(text, value_start);
        let function = function.filter(|f| own.is_none_or(|o| o < *f || closers.opens_between(text, *f, o)));
        let ends = [own, function, closers.next_parameter.next_at(text, value_start)];
        let plain = || find_from(text, value_start, FUNCTION_END);
        let Some(value_end) = ends.into_iter().flatten().min().or_else(plain) else {
            r.cut(open, Some(tool));
            return None;
        };
        let raw = &text[value_start..value_end];
        let raw = raw.strip_prefix('\n').unwrap_or(raw);
        let raw = raw.strip_suffix('\n').unwrap_or(raw);
        arguments.insert(key.to_owned(), r.typed(tool, key, raw));
        p = if starts(text, value_end, PARAMETER_END) { value_end + PARAMETER_END.len() } else { value_end };
    }
}
