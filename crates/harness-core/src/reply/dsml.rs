//! DeepSeek V3.2 DSML: `<｜DSML｜function_calls>` holding `<｜DSML｜invoke name="NAME">` elements whose
//! arguments are a JSON object or `<｜DSML｜parameter name="K" string="true|false">V
//! </｜DSML｜parameter>` elements (`string="true"`: V is text; otherwise V is JSON). The same
//! tags without `｜DSML｜` are read too, as engines do.

use serde_json::{Map, Value};

use super::{Reading, Seeker, find_from, skip_ws, starts};

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
pub(super) fn read(text: &str, r: &mut Reading<'_>) {
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
