//! Kimi K3's markup (engines call it XTML): elements `<|open|>NAME attrs<|sep|>` … `<|close|>NAME
//! <|sep|>`. Calls sit in `<|open|>tools<|sep|>` … `<|close|>tools<|sep|>`, each `<|open|>call
//! tool="NAME" index="1"<|sep|>` holding arguments, one element each (`<|open|>argument
//! key="city" type="string"<|sep|>Paris<|close|>argument<|sep|>`) or all in one JSON block
//! (`<|open|>json type="object"<|sep|>{...}<|close|>json<|sep|>`), then `<|close|>call<|sep|>`.
//! Visible text sits in `<|open|>response<|sep|>` … `<|close|>response<|sep|>`; reasoning (ended
//! by `<|close|>think<|sep|>`) is split off before this reader runs.
//!
//! `type` says how to read a value: `string` (the default) is the raw text, any other type is
//! JSON (a value that is not stays the raw text), as vLLM's kimi_k3 parser decodes it;
//! attribute values are escaped as in XML (`&amp;`, `&quot;`, …). A value ends
//! only at its closing marker followed by the next element or the call's end: marker-like
//! text inside a value is text, and so is a whole call's end quoted in it when the value's own
//! closing marker follows before the next call opens. A call with no tool name, or a JSON
//! block that does not parse, is a malformed call.

use serde_json::{Map, Value};

use super::{Closer, Reading, find_from, skip_ws, starts};

const CALL: &str = "<|open|>call";
const CALL_END: &str = "<|close|>call<|sep|>";
const ARGUMENT: &str = "<|open|>argument";
const ARGUMENT_END: &str = "<|close|>argument<|sep|>";
const JSON_BLOCK: &str = "<|open|>json";
const JSON_END: &str = "<|close|>json<|sep|>";
const SEP: &str = "<|sep|>";
/// What may follow the end of one argument element.
const AFTER_ELEMENT: &[&str] = &[ARGUMENT, JSON_BLOCK, CALL_END];
/// Markers of structure around calls and text, dropped from the content.
const STRUCTURE: [&str; 5] = [
    "<|open|>tools<|sep|>",
    "<|close|>tools<|sep|>",
    "<|open|>response<|sep|>",
    "<|close|>response<|sep|>",
    "<|close|>message<|sep|>",
];

/// An element's attributes, unescaped.
type Attributes = Vec<(String, String)>;

/// The closers of one reading, kept so that no stretch of text is searched twice.
struct Closers {
    argument: Closer,
    json: Closer,
}

fn content(piece: &str, r: &mut Reading<'_>) {
    let mut piece = piece.to_owned();
    for marker in STRUCTURE {
        piece = piece.replace(marker, "");
    }
    r.content(&piece);
}

/// Reads every call of `text`.
pub(super) fn read(text: &str, r: &mut Reading<'_>) {
    let mut closers = Closers {
        argument: Closer::new(ARGUMENT_END, AFTER_ELEMENT).quoting_calls(CALL_END, CALL),
        json: Closer::new(JSON_END, AFTER_ELEMENT).quoting_calls(CALL_END, CALL),
    };
    r.each_call(text, CALL, |r, piece| content(piece, r), |text, open, r| read_call(text, open, r, &mut closers));
}

/// An element's header from `at` (just after its name) to `<|sep|>`: its attributes and
/// where its body starts.
fn header(text: &str, at: usize, open: usize, r: &mut Reading<'_>) -> Option<(Attributes, usize)> {
    let Some(sep) = find_from(text, at, SEP) else {
        r.cut(open, None);
        return None;
    };
    match attributes(&text[at..sep]) {
        Some(pairs) => Some((pairs, sep + SEP.len())),
        None => {
            r.malformed(at, "expected key=\"value\" attributes before <|sep|>");
            None
        }
    }
}

fn attribute<'p>(pairs: &'p [(String, String)], key: &str) -> Option<&'p str> {
    pairs.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
}

/// One call at `open`; returns where it ends.
fn read_call(text: &str, open: usize, r: &mut Reading<'_>, closers: &mut Closers) -> Option<usize> {
    let after_name = open + CALL.len();
    if !(starts(text, after_name, " ") || starts(text, after_name, SEP)) {
        // `<|open|>callback…` is not a call element: keep it as text.
        r.content(CALL);
        return Some(after_name);
    }
    let (attrs, body) = header(text, after_name, open, r)?;
    let Some(name) = attribute(&attrs, "tool").map(str::trim).filter(|n| !n.is_empty()).map(str::to_owned) else {
        r.malformed(open, "the call has no tool=\"NAME\" attribute");
        return None;
    };
    let mut call = Call { open, tool: &name, arguments: Map::new() };
    let mut p = body;
    loop {
        p = skip_ws(text, p);
        if p >= text.len() {
            r.cut(open, Some(&name));
            return None;
        }
        if starts(text, p, CALL_END) {
            r.call(&name, Value::Object(call.arguments));
            return Some(p + CALL_END.len());
        }
        p = if starts(text, p, ARGUMENT) {
            read_argument(text, p, &mut call, r, &mut closers.argument)?
        } else if starts(text, p, JSON_BLOCK) {
            read_json_block(text, p, &mut call, r, &mut closers.json)?
        } else {
            let problem = format!("expected an argument, a json block or <|close|>call<|sep|> in the call to {name:?}");
            r.malformed(p, &problem);
            return None;
        };
    }
}

/// A call being read: where it opened, its tool, the arguments so far.
struct Call<'c> {
    open: usize,
    tool: &'c str,
    arguments: Map<String, Value>,
}

/// The body of an element whose header starts at `at`, up to its closer: the attributes,
/// where the body starts and where the closer is.
fn element_body(
    text: &str,
    at: usize,
    call: &Call<'_>,
    r: &mut Reading<'_>,
    closer: &mut Closer,
) -> Option<(Attributes, usize, usize)> {
    let (attrs, body) = header(text, at, call.open, r)?;
    let Some(end) = closer.next_at(text, body) else {
        r.cut(call.open, Some(call.tool));
        return None;
    };
    Some((attrs, body, end))
}

/// `<|open|>argument key="K" type="T"<|sep|>V<|close|>argument<|sep|>` at `p`.
fn read_argument(text: &str, p: usize, call: &mut Call<'_>, r: &mut Reading<'_>, closer: &mut Closer) -> Option<usize> {
    let (attrs, body, end) = element_body(text, p + ARGUMENT.len(), call, r, closer)?;
    let tool = call.tool;
    let Some(key) = attribute(&attrs, "key").filter(|k| !k.is_empty()) else {
        r.malformed(p, &format!("an argument of {tool:?} has no key=\"NAME\" attribute"));
        return None;
    };
    let raw = &text[body..end];
    // As the engines decode it: a string is the raw text; any other type is JSON, and a value
    // that is not stays the raw text (the schema check then says what is wrong).
    let value = match attribute(&attrs, "type").unwrap_or("string") {
        "string" => Value::String(raw.to_owned()),
        _ => serde_json::from_str(raw.trim()).unwrap_or_else(|_| Value::String(raw.to_owned())),
    };
    call.arguments.insert(key.to_owned(), value);
    Some(end + ARGUMENT_END.len())
}

/// `<|open|>json type="object"<|sep|>{...}<|close|>json<|sep|>` at `p`: every argument at once.
fn read_json_block(
    text: &str,
    p: usize,
    call: &mut Call<'_>,
    r: &mut Reading<'_>,
    closer: &mut Closer,
) -> Option<usize> {
    let (_, body, end) = element_body(text, p + JSON_BLOCK.len(), call, r, closer)?;
    let tool = call.tool;
    match serde_json::from_str::<Value>(text[body..end].trim()) {
        Ok(Value::Object(map)) => call.arguments.extend(map),
        Ok(Value::Null) => {}
        Ok(_) => {
            r.malformed(body, &format!("the json block of {tool:?} is not a JSON object"));
            return None;
        }
        Err(e) => {
            r.bad_json(body, Some(tool), &e);
            return None;
        }
    }
    Some(end + JSON_END.len())
}

/// `key="value"` pairs, values unescaped; `None` when the header is not such pairs.
fn attributes(header: &str) -> Option<Attributes> {
    let mut pairs = Vec::new();
    let mut rest = header.trim_start();
    while !rest.is_empty() {
        let (key, after) = rest.split_once('=')?;
        let key = key.trim();
        if key.is_empty() || key.contains(char::is_whitespace) {
            return None;
        }
        let after = after.trim_start();
        let quote = after.chars().next().filter(|c| *c == '"' || *c == '\'')?;
        let (value, tail) = after[1..].split_once(quote)?;
        pairs.push((key.to_owned(), unescape(value)));
        rest = tail.trim_start();
    }
    Some(pairs)
}

/// XML character references: `&amp;`, `&lt;`, `&gt;`, `&quot;`, `&apos;`, `&#N;`, `&#xH;`.
pub(super) fn unescape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    while let Some(amp) = rest.find('&') {
        out.push_str(&rest[..amp]);
        rest = &rest[amp..];
        let decoded =
            rest.find(';').filter(|semi| *semi <= 10).and_then(|semi| entity(&rest[1..semi]).map(|c| (c, semi)));
        match decoded {
            Some((c, semi)) => {
                out.push(c);
                rest = &rest[semi + 1..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

fn entity(name: &str) -> Option<char> {
    match name {
        "amp" => Some('&'),
        "lt" => Some('<'),
        "gt" => Some('>'),
        "quot" => Some('"'),
        "apos" => Some('\''),
        _ => {
            let code = name.strip_prefix("#x").or_else(|| name.strip_prefix("#X"));
            let number = match code {
                Some(hex) => u32::from_str_radix(hex, 16).ok()?,
                None => name.strip_prefix('#')?.parse().ok()?,
            };
            char::from_u32(number)
        }
    }
}
