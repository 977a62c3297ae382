//! GLM 4.5 / 4.6 / 4.7: `<tool_call>NAME<arg_key>K</arg_key><arg_value>V</arg_value>...
//! </tool_call>`, with or without newlines between the parts. Values are text typed by the
//! tool's schema (a value that is JSON for an object or array parameter becomes that value).
//! A value ends at the `</arg_value>` followed by the next `<arg_key>` or by `</tool_call>`,
//! as the chat template writes it: a closer inside a value, followed by more of it, is text, and
//! so is a whole call quoted in a value, `</tool_call>` included, when the value's own
//! `</arg_value>` follows before the next `<tool_call>`.

use serde_json::{Map, Value};

use super::{Closer, Reading, find_from, skip_ws, starts};

const OPEN: &str = "<tool_call>";
const KEY: &str = "<arg_key>";
const KEY_END: &str = "</arg_key>";
const VALUE: &str = "<arg_value>";
const VALUE_END: &str = "</arg_value>";
const CLOSE: &str = "</tool_call>";

/// Reads every `<tool_call>` block of `text`.
pub(super) fn read(text: &str, r: &mut Reading<'_>) {
    let mut value_end = Closer::new(VALUE_END, &[KEY, CLOSE]).quoting_calls(CLOSE, OPEN);
    r.each_call(text, OPEN, Reading::content, |text, open, r| read_block(text, open, r, &mut value_end));
}

/// One block at `open`; returns where it ends.
fn read_block(text: &str, open: usize, r: &mut Reading<'_>, value_end: &mut Closer) -> Option<usize> {
    let body = open + OPEN.len();
    let name_end = text[body..].find(['<', '\n']).map_or(text.len(), |i| body + i);
    let name = text[body..name_end].trim();
    if name_end >= text.len() {
        r.cut(open, Some(name));
        return None;
    }
    if name.is_empty() || name.contains(['>', '{', '}']) {
        r.malformed(body, "expected the tool's name right after <tool_call>");
        return None;
    }
    let mut arguments = Map::new();
    let mut p = name_end;
    loop {
        p = skip_ws(text, p);
        if p >= text.len() {
            r.cut(open, Some(name));
            return None;
        }
        if starts(text, p, CLOSE) {
            r.call(name, Value::Object(arguments));
            return Some(p + CLOSE.len());
        }
        let (key, after_key) = key(text, open, p, name, r)?;
        let v = skip_ws(text, after_key);
        if v >= text.len() {
            r.cut(open, Some(name));
            return None;
        }
        if !starts(text, v, VALUE) {
            r.malformed(v, &format!("expected {VALUE} in the call to {name:?}"));
            return None;
        }
        let Some(end) = value_end.next_at(text, v + VALUE.len()) else {
            r.cut(open, Some(name));
            return None;
        };
        arguments.insert(key.to_owned(), r.typed(name, key, &text[v + VALUE.len()..end]));
        p = end + VALUE_END.len();
    }
}

/// `<arg_key>K</arg_key>` at `p`: the key and where it ends. A key is one line, without tags.
fn key<'t>(text: &'t str, open: usize, p: usize, tool: &str, r: &mut Reading<'_>) -> Option<(&'t str, usize)> {
    if !starts(text, p, KEY) {
        r.malformed(p, &format!("expected {KEY} or {CLOSE} in the call to {tool:?}"));
        return None;
    }
    let start = p + KEY.len();
    let Some(end) = find_from(text, start, KEY_END) else {
        r.cut(open, Some(tool));
        return None;
    };
    if text[start..end].contains(['<', '\n']) {
        r.malformed(start, &format!("{KEY} is not closed with {KEY_END} in the call to {tool:?}"));
        return None;
    }
    Some((text[start..end].trim(), end + KEY_END.len()))
}
