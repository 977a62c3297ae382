//! Llama 4 (and Llama 3.2) pythonic calls: a Python list of calls with keyword arguments,
//! `[get_weather(city="LA", metric="C"), register_user(name="Doe", age=9)]`, alone in the
//! reply or inside `<|python_start|>` … `<|python_end|>`. Values are Python literals: strings
//! (either quote, escapes, triple quotes), numbers, `True`, `False`, `None`, lists, tuples and
//! dicts. Read by a small recursive-descent parser, depth-limited; nothing is ever evaluated.
//! As vLLM's pythonic and llama4_pythonic parsers do, arguments are keyword arguments only.

use serde_json::{Map, Number, Value};

use super::{Fault, Reading, skip_ws, starts};

const START: &str = "<|python_start|>";
const END: &str = "<|python_end|>";
const MAX_DEPTH: u32 = 64;

type Parsed<T> = Result<(T, usize), Fault>;

/// Whether `text` opens (after whitespace) with pythonic calls: `<|python_start|>`, or `[`
/// then a name then `(`.
pub(super) fn opens_with_calls(text: &str) -> bool {
    let p = skip_ws(text, 0);
    if starts(text, p, START) {
        return true;
    }
    if !starts(text, p, "[") {
        return false;
    }
    let q = skip_ws(text, p + 1);
    let name_end = identifier_end(text, q);
    name_end > q && starts(text, skip_ws(text, name_end), "(")
}

/// Reads the calls of `text`: the list that opens it, or those inside `<|python_start|>`
/// blocks. A list that opens the reply holds any marker in its values as text.
pub(super) fn read(text: &str, r: &mut Reading<'_>) {
    let p = skip_ws(text, 0);
    if opens_with_calls(text) && !starts(text, p, START) {
        if let Some(end) = read_calls_at(text, p, r) {
            r.content(&text[end..]);
        }
        return;
    }
    r.each_call(text, START, Reading::content, read_block);
}

/// One `<|python_start|>` block at `open`: its calls, then `<|python_end|>` (which servers may drop).
fn read_block(text: &str, open: usize, r: &mut Reading<'_>) -> Option<usize> {
    let p = skip_ws(text, open + START.len());
    let end = read_calls_at(text, p, r)?;
    let close = skip_ws(text, end);
    if starts(text, close, END) {
        return Some(close + END.len());
    }
    Some(end)
}

/// The calls at `p`: a `[...]` list of them, or bare calls separated by commas, semicolons or
/// whitespace. Records them; returns the end.
pub(super) fn read_calls_at(text: &str, p: usize, r: &mut Reading<'_>) -> Option<usize> {
    let parsed = if starts(text, p, "[") { call_list(text, p) } else { bare_calls(text, p) };
    match parsed {
        Ok((calls, end)) => {
            for (name, arguments) in calls {
                r.call(&name, arguments);
            }
            Some(end)
        }
        Err(fault) => {
            r.fault(p, None, fault);
            None
        }
    }
}

fn bare_calls(text: &str, p: usize) -> Parsed<Vec<(String, Value)>> {
    let mut calls = Vec::new();
    let mut q = p;
    loop {
        let (one, end) = call(text, q, 0)?;
        calls.push(one);
        let next = skip_ws(text, end);
        let after_separator =
            if starts(text, next, ",") || starts(text, next, ";") { skip_ws(text, next + 1) } else { next };
        let name_end = identifier_end(text, after_separator);
        if name_end == after_separator || !starts(text, skip_ws(text, name_end), "(") {
            return Ok((calls, end));
        }
        q = after_separator;
    }
}

fn call_list(text: &str, p: usize) -> Parsed<Vec<(String, Value)>> {
    let mut calls = Vec::new();
    let end = sequence(text, p, ']', |text, q| {
        let (call, after) = call(text, q, 0)?;
        calls.push(call);
        Ok(((), after))
    })?;
    Ok((calls, end))
}

/// Items from just after `p` (which holds the opening bracket) to `close`, separated by commas
/// (a trailing one allowed); each read by `item`. Returns where the sequence ends.
fn sequence(
    text: &str,
    p: usize,
    close: char,
    mut item: impl FnMut(&str, usize) -> Parsed<()>,
) -> Result<usize, Fault> {
    let mut q = skip_ws(text, p + 1);
    loop {
        if q >= text.len() {
            return Err(Fault::Cut);
        }
        if text[q..].starts_with(close) {
            return Ok(q + 1);
        }
        let ((), after) = item(text, q)?;
        q = skip_ws(text, after);
        if starts(text, q, ",") {
            q = skip_ws(text, q + 1);
        } else if q < text.len() && !text[q..].starts_with(close) {
            return Err(Fault::Bad(q, format!("expected , or {close}")));
        }
    }
}

/// Where a Python name (dotted names allowed: `tools.search`) starting at `p` ends.
fn identifier_end(text: &str, p: usize) -> usize {
    let bytes = text.as_bytes();
    let mut q = p;
    while q < bytes.len() && (bytes[q].is_ascii_alphanumeric() || bytes[q] == b'_' || (bytes[q] == b'.' && q > p)) {
        if q == p && bytes[q].is_ascii_digit() {
            break;
        }
        q += 1;
    }
    q
}

/// `name(key=value, ...)` at `p`.
fn call(text: &str, p: usize, depth: u32) -> Parsed<(String, Value)> {
    let name_end = identifier_end(text, p);
    if name_end >= text.len() {
        return Err(Fault::Cut);
    }
    let open = skip_ws(text, name_end);
    if name_end == p || !starts(text, open, "(") {
        return Err(Fault::Bad(p, "expected a call NAME(key=value, ...)".to_owned()));
    }
    let mut arguments = Map::new();
    let end = sequence(text, open, ')', |text, q| {
        let key_end = identifier_end(text, q);
        let eq = skip_ws(text, key_end);
        if eq >= text.len() {
            return Err(Fault::Cut);
        }
        if key_end == q || !starts(text, eq, "=") {
            return Err(Fault::Bad(
                q,
                "expected a keyword argument key=value (positional arguments are not read)".to_owned(),
            ));
        }
        let (value, after) = value(text, skip_ws(text, eq + 1), depth + 1)?;
        arguments.insert(text[q..key_end].to_owned(), value);
        Ok(((), after))
    })?;
    Ok(((text[p..name_end].to_owned(), Value::Object(arguments)), end))
}

/// A Python literal at `p`.
fn value(text: &str, p: usize, depth: u32) -> Parsed<Value> {
    if depth > MAX_DEPTH {
        return Err(Fault::Bad(p, format!("the arguments are nested more than {MAX_DEPTH} deep")));
    }
    let Some(first) = text[p..].chars().next() else { return Err(Fault::Cut) };
    match first {
        '"' | '\'' => string(text, p).map(|(s, e)| (Value::String(s), e)),
        '[' | '(' => {
            let mut items = Vec::new();
            let close = if first == '[' { ']' } else { ')' };
            let end = sequence(text, p, close, |text, q| {
                let (item, after) = value(text, q, depth + 1)?;
                items.push(item);
                Ok(((), after))
            })?;
            Ok((Value::Array(items), end))
        }
        '{' => dict(text, p, depth),
        _ => bare(text, p),
    }
}

/// `{key: value, ...}` at `p`; keys are strings, or other literals written as text.
fn dict(text: &str, p: usize, depth: u32) -> Parsed<Value> {
    let mut map = Map::new();
    let end = sequence(text, p, '}', |text, q| {
        let (key, after_key) = value(text, q, depth + 1)?;
        let colon = skip_ws(text, after_key);
        if colon >= text.len() {
            return Err(Fault::Cut);
        }
        if !starts(text, colon, ":") {
            return Err(Fault::Bad(colon, "expected : after a dict key".to_owned()));
        }
        let (item, after) = value(text, skip_ws(text, colon + 1), depth + 1)?;
        let key = match key {
            Value::String(s) => s,
            other => other.to_string(),
        };
        map.insert(key, item);
        Ok(((), after))
    })?;
    Ok((Value::Object(map), end))
}

/// `True`, `False`, `None`, or a number at `p`.
fn bare(text: &str, p: usize) -> Parsed<Value> {
    let bytes = text.as_bytes();
    let mut q = p;
    while q < bytes.len() && (bytes[q].is_ascii_alphanumeric() || matches!(bytes[q], b'.' | b'-' | b'+' | b'_')) {
        q += 1;
    }
    if q >= bytes.len() {
        return Err(Fault::Cut);
    }
    let token = &text[p..q];
    let value = match token {
        "True" | "true" => Value::Bool(true),
        "False" | "false" => Value::Bool(false),
        "None" | "null" => Value::Null,
        _ => number(&token.replace('_', "")).ok_or_else(|| {
            Fault::Bad(
                p,
                format!("{token:?} is not a value a call may hold: a finite number, a string, True, False or None"),
            )
        })?,
    };
    Ok((value, q))
}

fn number(token: &str) -> Option<Value> {
    token
        .parse::<i64>()
        .map(Value::from)
        .ok()
        .or_else(|| token.parse::<f64>().ok().filter(|f| f.is_finite()).and_then(Number::from_f64).map(Value::Number))
}

/// A quoted string at `p` (single, double, or tripled quotes), escapes decoded.
fn string(text: &str, p: usize) -> Parsed<String> {
    let quote = &text[p..p + 1];
    let triple = quote.repeat(3);
    let (delimiter, mut i) = if starts(text, p, &triple) { (triple.as_str(), p + 3) } else { (quote, p + 1) };
    let mut out = String::new();
    loop {
        let rest = text.get(i..).ok_or(Fault::Cut)?;
        if rest.starts_with(delimiter) {
            return Ok((out, i + delimiter.len()));
        }
        let mut chars = rest.chars();
        let c = chars.next().ok_or(Fault::Cut)?;
        if c != '\\' {
            if c == '\n' && delimiter.len() == 1 {
                return Err(Fault::Bad(i, "a string runs past the end of its line".to_owned()));
            }
            out.push(c);
            i += c.len_utf8();
            continue;
        }
        let e = chars.next().ok_or(Fault::Cut)?;
        let (decoded, used) =
            escape(rest, e).ok_or_else(|| Fault::Bad(i, "a \\x or \\u escape is malformed".to_owned()))?;
        out.extend(decoded);
        i += used;
    }
}

/// The escape `\e…` at the start of `rest`: the character it stands for (none for a line
/// continuation) and its length in bytes.
fn escape(rest: &str, e: char) -> Option<(Option<char>, usize)> {
    let simple = match e {
        'n' => Some('\n'),
        't' => Some('\t'),
        'r' => Some('\r'),
        '0' => Some('\0'),
        '\\' | '\'' | '"' => Some(e),
        '\n' => return Some((None, 2)),
        'x' | 'u' | 'U' => None,
        // Python keeps an unknown escape as written: the backslash stays.
        _ => return Some((Some('\\'), 1)),
    };
    if let Some(c) = simple {
        return Some((Some(c), 2));
    }
    let digits = match e {
        'x' => 2,
        'u' => 4,
        _ => 8,
    };
    let hex = rest.get(2..2 + digits)?;
    let c = char::from_u32(u32::from_str_radix(hex, 16).ok()?)?;
    Some((Some(c), 2 + digits))
}
