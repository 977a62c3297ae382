//! GLM 4.5 / 4.6 / 4.7: `<tool_call>NAME<arg_key>K</arg_key><arg_value>V</arg_value>...
//! </tool_call>`, with or without newlines between the parts. Values are text typed by the
//! tool's schema (a value that is JSON for an object or array parameter becomes that value).

use serde_json::{Map, Value};

use super::{Reading, find_from, find_within, skip_ws, starts};

const KEY: &str = "<arg_key>";
const KEY_END: &str = "</arg_key>";
const VALUE: &str = "<arg_value>";
const VALUE_END: &str = "</arg_value>";
const CLOSE: &str = "</tool_call>";

/// One block, from just after `<tool_call>` (at `body`); returns where it ends.
pub(super) fn read_block(text: &str, open: usize, body: usize, r: &mut Reading<'_>) -> Option<usize> {
    let Some(close) = find_from(text, body, CLOSE) else {
        let name_end = find_from(text, body, KEY).unwrap_or(text.len());
        r.cut(open, Some(&text[body..name_end]));
        return None;
    };
    let name_end = find_within(text, body, close, KEY).unwrap_or(close);
    let name = text[body..name_end].trim();
    if name.is_empty() || name.contains(['<', '>', '{', '}']) {
        r.malformed(body, "expected the tool's name right after <tool_call>");
        return None;
    }
    let mut arguments = Map::new();
    let mut p = name_end;
    loop {
        p = skip_ws(text, p);
        if p >= close {
            break;
        }
        let (key, after_key) = element(text, p, close, KEY, KEY_END, name, r)?;
        let v = skip_ws(text, after_key);
        let (raw, after_value) = element(text, v, close, VALUE, VALUE_END, name, r)?;
        arguments.insert(key.trim().to_owned(), r.typed(name, key.trim(), raw));
        p = after_value;
    }
    r.call(name, Value::Object(arguments));
    Some(close + CLOSE.len())
}

/// `<open>TEXT</close>` at `p`, within the block ending at `limit`: the text and where it ends.
fn element<'t>(
    text: &'t str,
    p: usize,
    limit: usize,
    open: &str,
    close: &str,
    tool: &str,
    r: &mut Reading<'_>,
) -> Option<(&'t str, usize)> {
    if !starts(text, p, open) || p >= limit {
        r.malformed(p, &format!("expected {open} in the call to {tool:?}"));
        return None;
    }
    let start = p + open.len();
    let Some(end) = find_within(text, start, limit, close) else {
        r.malformed(start, &format!("{open} is not closed with {close} in the call to {tool:?}"));
        return None;
    };
    Some((&text[start..end], end + close.len()))
}
