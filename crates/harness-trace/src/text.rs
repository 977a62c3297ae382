//! Trace text made fit for a terminal: escaped, cut, summed up in one line.

use serde_json::Value;

use crate::format::Step;

/// Text made safe to print on a terminal; the one helper every crate uses (see
/// [`harness_core::printable`]).
pub use harness_core::printable;

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
    fn cut_counts_characters() {
        assert_eq!(cut("héllo", 2), "hé…");
        assert_eq!(cut("hé", 2), "hé");
    }
}
