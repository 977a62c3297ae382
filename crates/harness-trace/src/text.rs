//! Trace text made fit for a terminal: escaped, cut, summed up in one line.

use serde_json::Value;

use crate::format::Step;

/// Text from a trace made safe to print on a terminal: control and bidirectional-override
/// characters (which could move the cursor or reorder what is shown) are written as escapes.
pub fn printable(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        let sneaky = c.is_control()
            || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{feff}');
        if sneaky {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// At most `max` characters of `text`, with `…` when cut.
pub fn cut(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        None => text.to_owned(),
        Some((i, _)) => format!("{}…", &text[..i]),
    }
}

/// One line saying what a step did: its arguments, then its result or its error.
pub fn brief(step: &Step, max: usize) -> String {
    let called = match (&step.arguments, &step.reply_text) {
        (Some(args), _) => args.to_string(),
        (None, Some(text)) => format!("text {}", Value::from(text.as_str())),
        (None, None) => String::new(),
    };
    let outcome = match (&step.error, &step.result) {
        (Some(e), _) => e.message.clone(),
        (None, Some(r)) => r.to_string(),
        (None, None) => String::new(),
    };
    let line = match (called.is_empty(), outcome.is_empty()) {
        (false, false) => format!("{called} → {outcome}"),
        (false, true) => called,
        (true, _) => outcome,
    };
    cut(&printable(&line), max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminal_escapes_are_defused() {
        assert_eq!(printable("a\u{1b}[2Jb\u{202e}c"), "a\\u{1b}[2Jb\\u{202e}c");
        assert_eq!(cut("héllo", 2), "hé…");
        assert_eq!(cut("hé", 2), "hé");
    }
}
