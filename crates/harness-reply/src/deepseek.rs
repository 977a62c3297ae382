//! DeepSeek V3 / R1 / V3.1 special tokens: `<｜tool▁calls▁begin｜>` then, per call, either
//! `<｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME` and the arguments in a ```` ```json ````
//! fence (V3, R1), or `<｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{...}` (V3.1), each closed by
//! `<｜tool▁call▁end｜>`; `<｜tool▁calls▁end｜>` closes the section.

use serde_json::Value;

use super::{Reading, find_from, skip_ws, starts};

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
    r.each_call(text, CALL_BEGIN, |r, piece| content_v3(piece, r), read_v3_call);
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
