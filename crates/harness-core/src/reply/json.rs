//! Calls written out as JSON anywhere in the text: `{"tool": ..., "arguments": ...}`,
//! `{"name": ..., "arguments"|"parameters": ...}` (Llama's bare form), the same wrapped in
//! `"function"` or a `"tool_calls"` list, in fences or prose. The core's scanner does the
//! reading ([`crate::parse`]); this adds every call, the content around them, and the cut.

use super::Reading;
use crate::parse::{Found, decode_arguments, no_call_error, scan_text};

/// Reads every JSON call in `text`.
pub(super) fn read(text: &str, r: &mut Reading<'_>) {
    let scan = scan_text(text, false);
    let mut pos = 0;
    let found_any = !scan.calls.is_empty();
    for Found { tool, arguments, start, end } in scan.calls {
        if start >= pos {
            r.content(&text[pos..start]);
            pos = end;
        }
        match decode_arguments(&tool, &arguments) {
            Ok(arguments) => r.call(&tool, arguments),
            Err(e) => return r.fail(e),
        }
    }
    r.content(text.get(pos..).unwrap_or(""));
    if let Some(at) = scan.notes.unclosed_at.filter(|_| r.truncated) {
        return r.cut(at, None);
    }
    if found_any {
        return;
    }
    if r.truncated {
        // No call, and the text was cut: the call the model was writing never came.
        return r.cut(text.len(), None);
    }
    if let (Some(tool), Some(arguments)) = (r.forced, scan.bare) {
        return r.call(tool, arguments);
    }
    let error = no_call_error(&scan.notes, text.len(), |offset| r.at(offset));
    r.fail(error);
}
