//! What a network client reads of an error holds no path of the serving machine: absolute
//! paths (a plugin's root, the plugin host, a home directory) are replaced by `<path>`. The
//! trace keeps the error whole, for the operator.

use serde_json::Value;

/// What replaces each absolute path.
const WITHHELD: &str = "<path>";

/// `text` with every absolute path (`/srv/data`, `C:\Users\x`) replaced by `<path>`.
pub(crate) fn without_paths(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    let mut after_boundary = true;
    while let Some(c) = rest.chars().next() {
        if after_boundary && let Some(len) = path_len(rest) {
            out.push_str(WITHHELD);
            rest = &rest[len..];
            after_boundary = false;
            continue;
        }
        out.push(c);
        after_boundary = c.is_whitespace() || matches!(c, '"' | '\'' | '(' | '[' | '=' | '`' | '<' | '{' | ',');
        rest = &rest[c.len_utf8()..];
    }
    out
}

/// The length of the absolute path `text` starts with, if it starts with one.
fn path_len(text: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    let unix =
        bytes.first() == Some(&b'/') && bytes.get(1).is_some_and(|b| b.is_ascii_alphanumeric() || b"._~-".contains(b));
    let windows = bytes.len() > 3 && bytes[0].is_ascii_alphabetic() && bytes[1] == b':' && bytes[2] == b'\\';
    if !unix && !windows {
        return None;
    }
    let end = text.find(|c: char| {
        c.is_whitespace() || matches!(c, '"' | '\'' | '(' | ')' | '[' | ']' | '<' | '>' | ',' | ';' | '`')
    });
    Some(end.unwrap_or(text.len()))
}

/// `value` with every string in it (keys aside) passed through [`without_paths`].
pub(crate) fn value_without_paths(value: Value) -> Value {
    match value {
        Value::String(s) => Value::String(without_paths(&s)),
        Value::Array(items) => Value::Array(items.into_iter().map(value_without_paths).collect()),
        Value::Object(map) => Value::Object(map.into_iter().map(|(k, v)| (k, value_without_paths(v))).collect()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absolute_paths_are_withheld_and_the_rest_kept() {
        let cases = [
            (
                "\"../x\" is refused: it resolves outside the root directory /home/ada/data",
                "\"../x\" is refused: it resolves outside the root directory <path>",
            ),
            (
                "cannot start the plugin host (/opt/h/bin/harness-plugin-host): gone",
                "cannot start the plugin host (<path>): gone",
            ),
            ("read \"/etc/passwd\" failed", "read \"<path>\" failed"),
            ("root C:\\Users\\ada\\data is not a directory", "root <path> is not a directory"),
            ("see https://example.com/a/b and a/b and 3 / 4", "see https://example.com/a/b and a/b and 3 / 4"),
            ("", ""),
        ];
        for (given, shown) in cases {
            assert_eq!(without_paths(given), shown);
        }
        let error =
            serde_json::json!({"code": "tool_error", "message": "at /srv/x", "details": {"paths": ["/a/b", "rel"]}});
        let shown = value_without_paths(error);
        assert_eq!(shown["message"], "at <path>");
        assert_eq!(shown["details"]["paths"], serde_json::json!(["<path>", "rel"]));
    }
}
