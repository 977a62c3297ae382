//! DeepSeek DSML: a block holding `<｜DSML｜invoke name="NAME">` elements whose arguments are a
//! JSON object or `<｜DSML｜parameter name="K" string="true|false">V</｜DSML｜parameter>`
//! elements (`string="true"`: V is text; otherwise V is JSON: numbers, booleans, null,
//! objects). The block is `function_calls` (V3.2), `tool_calls` (V4) or `calls` (V4.1, which
//! writes a space after the marker: `<｜DSML｜ invoke name="…">`); an invoke may close itself
//! (`/>`, no parameters). The same tags without `｜DSML｜`, or with the ASCII `|DSML|` some
//! checkpoints write, are read too, as engines do; so are invokes written without the block.
//!
//! A value ends at the closing parameter tag followed by the next parameter or by the
//! invoke's closing tag: a tag inside a value, followed by more of it, is text.

use serde_json::{Map, Value};

use super::{Reading, Seeker, find_from, skip_ws, starts};

/// The marker, as the tokenizer writes it and in the ASCII spelling of older checkpoints.
const DSML: [&str; 2] = ["｜DSML｜", "|DSML|"];

/// The names of the block that holds the calls, V3.2's first.
const BLOCKS: [&str; 3] = ["function_calls", "tool_calls", "calls"];

/// Whether `text` at `at` holds the tag `<NAME`, `<｜DSML｜NAME` or `<｜DSML｜ NAME` (with `/` for
/// a closing tag; `|DSML|` too); returns where the tag's name ends.
pub(super) fn tag(text: &str, at: usize, closing: bool, name: &str) -> Option<usize> {
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
    if let Some(marker) = DSML.iter().find(|m| starts(text, p, m)) {
        p += marker.len();
        while starts(text, p, " ") {
            p += 1;
        }
    }
    starts(text, p, name).then_some(p + name.len())
}

/// The block tag at `at` (`<｜DSML｜tool_calls>`, `</function_calls>`, …): where it ends.
fn block_tag(text: &str, at: usize, closing: bool) -> Option<usize> {
    BLOCKS.iter().find_map(|b| tag(text, at, closing, b).filter(|end| starts(text, *end, ">")).map(|end| end + 1))
}

/// Where calls start at or after `pos`: a block opener (and where its tag ends), or an invoke
/// written without the block (`<｜DSML｜invoke`, whose tag it does not consume).
fn next_calls(text: &str, mut pos: usize, openers: &mut [Seeker; 3]) -> Option<(usize, usize, bool)> {
    loop {
        let at = openers.iter_mut().filter_map(|s| s.next_at(text, pos)).min()?;
        if let Some(end) = block_tag(text, at, false) {
            return Some((at, end, true));
        }
        if !starts(text, at, "<function_calls>") && tag(text, at, false, "invoke").is_some() {
            return Some((at, at, false));
        }
        pos = at + 1;
    }
}

/// Reads the DSML calls of `text`.
pub(super) fn read(text: &str, r: &mut Reading<'_>) {
    let mut pos = 0;
    let mut openers = [Seeker::new("<｜DSML｜"), Seeker::new("<|DSML|"), Seeker::new("<function_calls>")];
    loop {
        let Some((open, mut p, in_block)) = next_calls(text, pos, &mut openers) else {
            return r.content(&text[pos..]);
        };
        r.content(&text[pos..open]);
        loop {
            let next = skip_ws(text, p);
            if next >= text.len() {
                // The section never closed; the calls read so far were complete.
                return;
            }
            if in_block && let Some(end) = block_tag(text, next, true) {
                p = end;
                break;
            }
            if !in_block && tag(text, next, false, "invoke").is_none() {
                // Invokes without a block end where the next thing is not one.
                break;
            }
            let Some(end) = read_invoke(text, next, r) else { return };
            p = end;
        }
        pos = p;
    }
}

/// A tag's `key="value"` attributes, and how it ends.
struct Attributes<'t> {
    pairs: Vec<(&'t str, &'t str)>,
    /// Where the tag ends.
    end: usize,
    /// The tag closes itself (`/>`): an invoke with no parameters.
    closed: bool,
}

/// `key="value"` attributes from `p` up to `>` or `/>`; a cut names `tool`, the call they are in.
fn attributes<'t>(
    text: &'t str,
    mut p: usize,
    opened: usize,
    tool: Option<&str>,
    r: &mut Reading<'_>,
) -> Option<Attributes<'t>> {
    let mut pairs = Vec::new();
    loop {
        p = skip_ws(text, p);
        if p >= text.len() {
            r.cut(opened, tool);
            return None;
        }
        if starts(text, p, ">") {
            return Some(Attributes { pairs, end: p + 1, closed: false });
        }
        if starts(text, p, "/>") {
            return Some(Attributes { pairs, end: p + 2, closed: true });
        }
        let Some(eq) = find_from(text, p, "=\"") else {
            r.cut(opened, tool);
            return None;
        };
        let key = text[p..eq].trim();
        if key.is_empty() || key.contains(['>', '<']) {
            r.malformed(p, "expected key=\"value\" attributes in the tag");
            return None;
        }
        let Some(quote) = find_from(text, eq + 2, "\"") else {
            r.cut(opened, tool);
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
    let attrs = attributes(text, after_tag, p, None, r)?;
    let Some(name) = attribute(&attrs.pairs, "name").filter(|n| !n.trim().is_empty()) else {
        r.malformed(p, "the invoke tag has no name attribute");
        return None;
    };
    if attrs.closed {
        r.call(name, Value::Object(Map::new()));
        return Some(attrs.end);
    }
    let mut q = skip_ws(text, attrs.end);
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
        let attrs = attributes(text, after_tag, opened, Some(tool), r)?;
        let Some(key) = attribute(&attrs.pairs, "name") else {
            r.malformed(p, "the parameter tag has no name attribute");
            return None;
        };
        let value_start = attrs.end;
        let Some((value_end, after)) = parameter_close(text, value_start) else {
            r.cut(opened, Some(tool));
            return None;
        };
        let raw = &text[value_start..value_end];
        let value = if attribute(&attrs.pairs, "string") == Some("true") {
            Value::String(raw.to_owned())
        } else {
            serde_json::from_str(raw.trim()).unwrap_or_else(|_| r.typed(tool, key, raw.trim()))
        };
        arguments.insert(key.to_owned(), value);
        p = after;
    }
}

/// The closing parameter tag that ends the value from `from`: its start and its end. It is
/// the first one followed by the next parameter, the invoke's closing tag, or the end.
fn parameter_close(text: &str, from: usize) -> Option<(usize, usize)> {
    let mut search = from;
    loop {
        let at = find_from(text, search, "parameter>")?;
        search = at + 1;
        let Some(start) = ["</｜DSML｜ ", "</｜DSML｜", "</|DSML| ", "</|DSML|", "</"]
            .iter()
            .find(|prefix| at >= from + prefix.len() && text.get(at - prefix.len()..at) == Some(**prefix))
            .map(|prefix| at - prefix.len())
        else {
            continue;
        };
        let end = at + "parameter>".len();
        let next = skip_ws(text, end);
        if next >= text.len()
            || tag(text, next, false, "parameter").is_some()
            || tag(text, next, true, "invoke>").is_some()
        {
            return Some((start, end));
        }
    }
}
