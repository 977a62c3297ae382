//! Text for an operator's terminal: whatever a model, a provider, a plugin or a configuration
//! file wrote is shown, never obeyed.
//!
//! A call ID, a tool's argument or an MCP command can hold `ESC[2K` and `CR`, which would erase
//! and rewrite the line the operator reads (suggesting, say, an `--approve` argument of the
//! sender's choosing), or a bidirectional override that reorders it. Every such text goes
//! through [`printable`] before it reaches stderr or stdout.

/// `text` with control and bidirectional-formatting characters written as Rust escapes
/// (`\u{1b}`, `\r`, `\u{202e}`), everything else unchanged.
pub fn printable(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if moves_or_reorders(c) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// Whether `c` moves the cursor, clears the screen or reorders what is shown: the one rule of
/// what text from outside may not bring to a terminal as it is.
pub fn moves_or_reorders(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{feff}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminal_escapes_and_overrides_are_shown_not_obeyed() {
        assert_eq!(printable("a\u{1b}[2Jb\u{202e}c"), "a\\u{1b}[2Jb\\u{202e}c");
        assert_eq!(printable("call_1\u{1b}[2K\r--approve x"), "call_1\\u{1b}[2K\\r--approve x");
        assert_eq!(printable("line\nnext\t\u{7f}"), "line\\nnext\\t\\u{7f}");
        assert_eq!(printable("héllo → ok"), "héllo → ok");
    }
}
