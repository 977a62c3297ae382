//! Gemma 4: `<|tool_call>call:NAME{key:VALUE,...}<tool_call|>`. Values are strings between
//! `<|"|>` delimiters, nested `{...}` objects, `[...]` lists, or bare numbers, booleans and
//! `null`; keys are bare (or delimited like strings). Read by a small recursive-descent parser,
//! depth-limited so that no input can exhaust the stack.

use serde_json::{Map, Number, Value};

use super::{Fault, Reading, find_from, skip_ws, starts};

const OPEN: &str = "<|tool_call>";
const CLOSE: &str = "<tool_call|>";
const QUOTE: &str = "<|\"|>";
const MAX_DEPTH: u32 = 64;

/// Reads every call of `text`.
pub(super) fn read(text: &str, r: &mut Reading<'_>) {
    r.each_call(text, OPEN, Reading::content, read_call);
}

fn read_call(text: &str, open: usize, r: &mut Reading<'_>) -> Option<usize> {
    let p = skip_ws(text, open + OPEN.len());
    if p >= text.len() || "call:".starts_with(&text[p..]) {
        r.cut(open, None);
        return None;
    }
    if !starts(text, p, "call:") {
        r.malformed(p, "expected call:NAME{...} after <|tool_call>");
        return None;
    }
    let name_start = p + "call:".len();
    let bytes = text.as_bytes();
    let mut q = name_start;
    while q < bytes.len() && bytes[q] != b'{' && bytes[q] != b'<' && !bytes[q].is_ascii_whitespace() {
        q += 1;
    }
    let name = &text[name_start..q];
    if q >= bytes.len() {
        r.cut(open, Some(name));
        return None;
    }
    if bytes[q] != b'{' || name.is_empty() {
        r.malformed(q, "expected the tool's name then { after call:");
        return None;
    }
    let arguments = match object(text, q, 0) {
        Ok((value, after)) => (value, after),
        Err(fault) => {
            r.fault(open, Some(name), fault);
            return None;
        }
    };
    let close = skip_ws(text, arguments.1);
    if close >= text.len() {
        r.cut(open, Some(name));
        return None;
    }
    if !starts(text, close, CLOSE) {
        r.malformed(close, &format!("expected <tool_call|> after the arguments of {name:?}"));
        return None;
    }
    r.call(name, arguments.0);
    Some(close + CLOSE.len())
}

/// A `{key:value,...}` object at `p` (which holds `{`).
fn object(text: &str, p: usize, depth: u32) -> Result<(Value, usize), Fault> {
    if depth > MAX_DEPTH {
        return Err(Fault::Bad(p, format!("the arguments are nested more than {MAX_DEPTH} deep")));
    }
    let mut map = Map::new();
    let mut q = skip_ws(text, p + 1);
    loop {
        if q >= text.len() {
            return Err(Fault::Cut);
        }
        if starts(text, q, "}") {
            return Ok((Value::Object(map), q + 1));
        }
        let (key, after_key) = key(text, q)?;
        let v = skip_ws(text, after_key + 1);
        let (value, after) = value(text, v, depth + 1)?;
        map.insert(key, value);
        q = skip_ws(text, after);
        if starts(text, q, ",") {
            q = skip_ws(text, q + 1);
        } else if q < text.len() && !starts(text, q, "}") {
            return Err(Fault::Bad(q, "expected , or } after a value".to_owned()));
        }
    }
}

/// A key at `p`, bare or delimited: the key and the offset of its `:`.
fn key(text: &str, p: usize) -> Result<(String, usize), Fault> {
    let (key, after) = if starts(text, p, QUOTE) {
        let end = find_from(text, p + QUOTE.len(), QUOTE).ok_or(Fault::Cut)?;
        (text[p + QUOTE.len()..end].to_owned(), skip_ws(text, end + QUOTE.len()))
    } else {
        let bytes = text.as_bytes();
        let mut q = p;
        while q < bytes.len() && !matches!(bytes[q], b':' | b'{' | b'}' | b',' | b'[' | b']' | b'<') {
            q += 1;
        }
        (text[p..q].trim().to_owned(), q)
    };
    if after >= text.len() {
        return Err(Fault::Cut);
    }
    if !starts(text, after, ":") || key.is_empty() {
        return Err(Fault::Bad(p, "expected key: in the arguments".to_owned()));
    }
    Ok((key, after))
}

/// A value at `p`.
fn value(text: &str, p: usize, depth: u32) -> Result<(Value, usize), Fault> {
    if p >= text.len() {
        return Err(Fault::Cut);
    }
    if starts(text, p, QUOTE) {
        let end = find_from(text, p + QUOTE.len(), QUOTE).ok_or(Fault::Cut)?;
        return Ok((Value::String(text[p + QUOTE.len()..end].to_owned()), end + QUOTE.len()));
    }
    if starts(text, p, "{") {
        return object(text, p, depth);
    }
    if starts(text, p, "[") {
        return list(text, p, depth);
    }
    let bytes = text.as_bytes();
    let mut q = p;
    while q < bytes.len() && !matches!(bytes[q], b',' | b'}' | b']' | b'<') {
        q += 1;
    }
    if q >= bytes.len() {
        return Err(Fault::Cut);
    }
    Ok((bare(text[p..q].trim()), q))
}

/// A `[...]` list at `p` (which holds `[`).
fn list(text: &str, p: usize, depth: u32) -> Result<(Value, usize), Fault> {
    if depth > MAX_DEPTH {
        return Err(Fault::Bad(p, format!("the arguments are nested more than {MAX_DEPTH} deep")));
    }
    let mut items = Vec::new();
    let mut q = skip_ws(text, p + 1);
    loop {
        if q >= text.len() {
            return Err(Fault::Cut);
        }
        if starts(text, q, "]") {
            return Ok((Value::Array(items), q + 1));
        }
        let (item, after) = value(text, q, depth + 1)?;
        items.push(item);
        q = skip_ws(text, after);
        if starts(text, q, ",") {
            q = skip_ws(text, q + 1);
        } else if q < text.len() && !starts(text, q, "]") {
            return Err(Fault::Bad(q, "expected , or ] after a list item".to_owned()));
        }
    }
}

/// A bare token: a boolean, `null`, a number, or else the text itself.
fn bare(token: &str) -> Value {
    match token {
        "true" => Value::Bool(true),
        "false" => Value::Bool(false),
        "null" => Value::Null,
        _ => token
            .parse::<i64>()
            .map(Value::from)
            .ok()
            .or_else(|| token.parse::<f64>().ok().and_then(Number::from_f64).map(Value::Number))
            .unwrap_or_else(|| Value::String(token.to_owned())),
    }
}
