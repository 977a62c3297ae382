//! DeepSeek, two grammars.
//!
//! V3 / R1 / V3.1 special tokens: `<｜tool▁calls▁begin｜>` then, per call, either
//! `<｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME` and the arguments in a ```` ```json ````
//! fence (V3, R1), or `<｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{...}` (V3.1), each closed by
//! `<｜tool▁call▁end｜>`; `<｜tool▁calls▁end｜>` closes the section.
//!
//! V3.2 DSML: `<｜DSML｜function_calls>` holding `<｜DSML｜invoke name="NAME">` elements whose
//! arguments are a JSON object or `<｜DSML｜parameter name="K" string="true|false">V
//! </｜DSML｜parameter>` elements (`string="true"`: V is text; otherwise V is JSON). The same
//! tags without `｜DSML｜` are read too, as engines do.

use serde_json::{Map, Value};

use super::{Reading, Seeker, find_from, skip_ws, starts};

const CALLS_BEGIN: &str = "<｜tool▁calls▁begin｜>";
const CALLS_END: &str = "<｜tool▁calls▁end｜>";
const CALL_BEGIN: &str = "<｜tool▁call▁begin｜>";
const SEP: &str = "<｜tool▁sep｜>";
const CALL_END: &str = "<｜tool▁call▁end｜>";
const END_OF_SENTENCE: &str = "<｜end▁of▁sentence｜>";

/// Content without the section markers, which are structure, not text.
fn content_v3(piece: &str, r: &mut Reading<'_>) {
    let mut piece = piece.to_owned();
    for marker in [CALLS_BEGIN, CALLS_END, END_OF_SENTENCE] {
        piece = piece.replace(marker, "");
    }
    r.content(&piece);
}

/// Reads the V3 / V3.1 calls of `text`.
pub(super) fn read_v3(text: &str, r: &mut Reading<'_>) {
    let mut pos = 0;
    while let Some(begin) = find_from(text, pos, CALL_BEGIN) {
        content_v3(&text[pos..begin], r);
        let Some(end) = read_v3_call(text, begin, r) else { return };
        pos = end;
    }
    content_v3(&text[pos..], r);
}

fn read_v3_call(text: &str, begin: usize, r: &mut Reading<'_>) -> Option<usize> {
    let head_start = begin + CALL_BEGIN.len();
    let Some(sep) = find_from(text, head_start, SEP) else {
        r.cut(begin, None);
        return None;
    };
    let head = text[head_start..sep].trim();
    if head.contains("<｜") {
        r.malformed(head_start, "expected <｜tool▁sep｜> after the call's name");
        return None;
    }
    let after_sep = sep + SEP.len();
    let (name, arguments, after) =
        if head == "function" { fenced(text, begin, after_sep, r)? } else { bare(text, begin, head, after_sep, r)? };
    let close = skip_ws(text, after);
    if close >= text.len() {
        r.cut(begin, Some(name));
        return None;
    }
    if !starts(text, close, CALL_END) {
        r.malformed(close, &format!("expected <｜tool▁call▁end｜> after the arguments of {name:?}"));
        return None;
    }
    r.call(name, arguments);
    Some(close + CALL_END.len())
}

/// V3.1: the JSON arguments right after the separator.
fn bare<'t>(
    text: &'t str,
    begin: usize,
    name: &'t str,
    at: usize,
    r: &mut Reading<'_>,
) -> Option<(&'t str, Value, usize)> {
    if name.is_empty() {
        r.malformed(begin + CALL_BEGIN.len(), "the call has no name before <｜tool▁sep｜>");
        return None;
    }
    let start = skip_ws(text, at);
    let (value, after) = r.json_at(text, start, begin, Some(name))?;
    let arguments = r.object_arguments(start, name, value)?;
    Some((name, arguments, after))
}

/// V3 / R1: `NAME` on the separator's line, then the arguments in a ```` ```json ```` fence.
fn fenced<'t>(text: &'t str, begin: usize, at: usize, r: &mut Reading<'_>) -> Option<(&'t str, Value, usize)> {
    let Some(line_end) = find_from(text, at, "\n") else {
        r.cut(begin, Some(&text[at..]));
        return None;
    };
    let name = text[at..line_end].trim();
    let fence = skip_ws(text, line_end);
    if fence >= text.len() {
        r.cut(begin, Some(name));
        return None;
    }
    if !starts(text, fence, "```") {
        r.malformed(fence, &format!("expected a ```json fence holding the arguments of {name:?}"));
        return None;
    }
    let mut p = fence + 3;
    if starts(text, p, "json") {
        p += 4;
    }
    let start = skip_ws(text, p);
    let (value, after) = r.json_at(text, start, begin, Some(name))?;
    let arguments = r.object_arguments(start, name, value)?;
    let close = skip_ws(text, after);
    if close >= text.len() {
        r.cut(begin, Some(name));
        return None;
    }
    if !starts(text, close, "```") {
        r.malformed(close, &format!("expected ``` closing the arguments of {name:?}"));
        return None;
    }
    Some((name, arguments, close + 3))
}

const DSML: &str = "｜DSML｜";

/// Whether `text` at `at` holds the tag `<NAME` or `<｜DSML｜NAME` (with `/` for a closing tag);
/// returns where the tag's name ends.
fn tag(text: &str, at: usize, closing: bool, name: &str) -> Option<usize> {
    let mut p = at;
    if !starts(text, p, "<") {
        return None;
    }
    p += 1;
    if closing {
        if !starts(text, p, "/") {
            return None;
        }
        p += 1;
    }
    if starts(text, p, DSML) {
        p += DSML.len();
    }
    starts(text, p, name).then_some(p + name.len())
}

/// Reads the V3.2 DSML calls of `text`.
pub(super) fn read_dsml(text: &str, r: &mut Reading<'_>) {
    let mut pos = 0;
    let mut openers = [Seeker::new("<｜DSML｜function_calls>"), Seeker::new("<function_calls>")];
    loop {
        let open = openers.iter_mut().filter_map(|s| s.next_at(text, pos)).min();
        let Some(open) = open else {
            return r.content(&text[pos..]);
        };
        r.content(&text[pos..open]);
        let Some(mut p) = find_from(text, open, ">").map(|gt| gt + 1) else { return };
        loop {
            p = skip_ws(text, p);
            if p >= text.len() {
                // The section never closed; the calls read so far were complete.
                return;
            }
            if let Some(name_end) = tag(text, p, true, "function_calls>") {
                p = name_end;
                break;
            }
            let Some(end) = read_invoke(text, p, r) else { return };
            p = end;
        }
        pos = p;
    }
}

/// `key="value"` attributes from `p` up to `>`: the pairs and where the tag ends.
fn attributes<'t>(
    text: &'t str,
    mut p: usize,
    opened: usize,
    r: &mut Reading<'_>,
) -> Option<(Vec<(&'t str, &'t str)>, usize)> {
    let mut pairs = Vec::new();
    loop {
        p = skip_ws(text, p);
        if p >= text.len() {
            r.cut(opened, None);
            return None;
        }
        if starts(text, p, ">") {
            return Some((pairs, p + 1));
        }
        let Some(eq) = find_from(text, p, "=\"") else {
            r.cut(opened, None);
            return None;
        };
        let key = text[p..eq].trim();
        if key.is_empty() || key.contains(['>', '<']) {
            r.malformed(p, "expected key=\"value\" attributes in the tag");
            return None;
        }
        let Some(quote) = find_from(text, eq + 2, "\"") else {
            r.cut(opened, None);
            return None;
        };
        pairs.push((key, &text[eq + 2..quote]));
        p = quote + 1;
    }
}

fn attribute<'t>(pairs: &[(&'t str, &'t str)], key: &str) -> Option<&'t str> {
    pairs.iter().find(|(k, _)| *k == key).map(|(_, v)| *v)
}

/// One `<invoke name="…">…</invoke>` at `p`.
fn read_invoke(text: &str, p: usize, r: &mut Reading<'_>) -> Option<usize> {
    let Some(after_tag) = tag(text, p, false, "invoke") else {
        r.malformed(p, "expected <｜DSML｜invoke name=\"…\"> or </｜DSML｜function_calls>");
        return None;
    };
    let (attrs, mut q) = attributes(text, after_tag, p, r)?;
    let Some(name) = attribute(&attrs, "name").filter(|n| !n.trim().is_empty()) else {
        r.malformed(p, "the invoke tag has no name attribute");
        return None;
    };
    q = skip_ws(text, q);
    let arguments = if starts(text, q, "{") {
        let (value, after) = r.json_at(text, q, p, Some(name))?;
        let arguments = r.object_arguments(q, name, value)?;
        q = skip_ws(text, after);
        arguments
    } else {
        let (arguments, after) = read_parameters(text, q, p, name, r)?;
        q = after;
        arguments
    };
    if q >= text.len() {
        r.cut(p, Some(name));
        return None;
    }
    let Some(end) = tag(text, q, true, "invoke>") else {
        r.malformed(q, &format!("expected </｜DSML｜invoke> closing the call to {name:?}"));
        return None;
    };
    r.call(name, arguments);
    Some(end)
}

/// The `<parameter name="…" string="…">` elements from `p`; stops before `</invoke>`.
fn read_parameters(text: &str, mut p: usize, opened: usize, tool: &str, r: &mut Reading<'_>) -> Option<(Value, usize)> {
    let mut arguments = Map::new();
    loop {
        p = skip_ws(text, p);
        if p >= text.len() || tag(text, p, true, "invoke>").is_some() {
            return Some((Value::Object(arguments), p));
        }
        let Some(after_tag) = tag(text, p, false, "parameter") else {
            r.malformed(p, &format!("expected <｜DSML｜parameter name=\"…\"> in the call to {tool:?}"));
            return None;
        };
        let (attrs, value_start) = attributes(text, after_tag, opened, r)?;
        let Some(key) = attribute(&attrs, "name") else {
            r.malformed(p, "the parameter tag has no name attribute");
            return None;
        };
        let Some((value_end, after)) = parameter_close(text, value_start) else {
            r.cut(opened, Some(tool));
            return None;
        };
        let raw = &text[value_start..value_end];
        let value = if attribute(&attrs, "string") == Some("true") {
            Value::String(raw.to_owned())
        } else {
            serde_json::from_str(raw.trim()).unwrap_or_else(|_| r.typed(tool, key, raw.trim()))
        };
        arguments.insert(key.to_owned(), value);
        p = after;
    }
}

/// The closing `</parameter>` or `</｜DSML｜parameter>` after `from`: its start and its end.
fn parameter_close(text: &str, from: usize) -> Option<(usize, usize)> {
    let mut search = from;
    loop {
        let at = find_from(text, search, "parameter>")?;
        for prefix in ["</｜DSML｜", "</"] {
            if at >= from + prefix.len() && text.get(at - prefix.len()..at) == Some(prefix) {
                return Some((at - prefix.len(), at + "parameter>".len()));
            }
        }
        search = at + 1;
    }
}
