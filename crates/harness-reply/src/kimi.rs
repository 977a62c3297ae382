//! Kimi K2: `<|tool_calls_section_begin|>` then, per call, `<|tool_call_begin|>functions.NAME:IDX
//! <|tool_call_argument_begin|>{...}<|tool_call_end|>`, and `<|tool_calls_section_end|>`. The
//! singular section markers some checkpoints write are read too.

use super::{Reading, find_from, skip_ws, starts};

const CALL_BEGIN: &str = "<|tool_call_begin|>";
const ARGUMENT_BEGIN: &str = "<|tool_call_argument_begin|>";
const CALL_END: &str = "<|tool_call_end|>";
const SECTION_MARKERS: [&str; 4] = [
    "<|tool_calls_section_begin|>",
    "<|tool_calls_section_end|>",
    "<|tool_call_section_begin|>",
    "<|tool_call_section_end|>",
];

fn content(piece: &str, r: &mut Reading<'_>) {
    let mut piece = piece.to_owned();
    for marker in SECTION_MARKERS {
        piece = piece.replace(marker, "");
    }
    r.content(&piece);
}

/// The tool's name in a call id: `functions.NAME:IDX`, or `NAME:IDX`.
fn name_of(id: &str) -> &str {
    let id = id.strip_prefix("functions.").unwrap_or(id);
    match id.rsplit_once(':') {
        Some((name, index)) if index.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => id,
    }
}

/// Reads every call of `text`.
pub(super) fn read(text: &str, r: &mut Reading<'_>) {
    r.each_call(text, CALL_BEGIN, |r, piece| content(piece, r), read_call);
}

fn read_call(text: &str, begin: usize, r: &mut Reading<'_>) -> Option<usize> {
    let id_start = begin + CALL_BEGIN.len();
    let Some(arguments_at) = find_from(text, id_start, ARGUMENT_BEGIN) else {
        r.cut(begin, None);
        return None;
    };
    let id = text[id_start..arguments_at].trim();
    if id.is_empty() || id.contains("<|") {
        r.malformed(id_start, "expected functions.NAME:IDX before <|tool_call_argument_begin|>");
        return None;
    }
    let name = name_of(id);
    let start = skip_ws(text, arguments_at + ARGUMENT_BEGIN.len());
    let (value, after) = r.json_at(text, start, begin, Some(name))?;
    let arguments = r.object_arguments(start, name, value)?;
    let close = skip_ws(text, after);
    if close >= text.len() {
        r.cut(begin, Some(name));
        return None;
    }
    if !starts(text, close, CALL_END) {
        r.malformed(close, &format!("expected <|tool_call_end|> after the arguments of {name:?}"));
        return None;
    }
    r.call(name, arguments);
    Some(close + CALL_END.len())
}
