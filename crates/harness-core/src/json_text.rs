//! JSON text of a [`Value`] without serde_json's writer: the bytes it would write, or just
//! their count. The loop measures every call's arguments against its limits and writes each
//! step's trace line; through serde_json's writer each string goes out in three writes and is
//! escaped byte by byte, here a string without a character to escape is copied whole.

use std::io;

use serde_json::Value;

/// A JSON value in serde_json's compact form; numbers are left to serde_json, which alone
/// knows how it prints a float.
pub(crate) fn write_value(out: &mut Vec<u8>, value: &Value) -> io::Result<()> {
    match value {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        Value::Number(n) => serde_json::to_writer(&mut *out, n)?,
        Value::String(s) => write_str(out, s),
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_value(out, item)?;
            }
            out.push(b']');
        }
        Value::Object(map) => {
            out.push(b'{');
            for (i, (key, item)) in map.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_str(out, key);
                out.push(b':');
                write_value(out, item)?;
            }
            out.push(b'}');
        }
    }
    Ok(())
}

/// A JSON value in canonical form: compact, every object's keys in byte order, whatever
/// order the map keeps them in (serde_json's `preserve_order`, if any crate turns it on). What
/// an approval is bound to must not depend on the order a model or an editor wrote keys in.
pub(crate) fn write_canonical(out: &mut Vec<u8>, value: &Value) -> io::Result<()> {
    match value {
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_canonical(out, item)?;
            }
            out.push(b']');
        }
        Value::Object(map) => {
            let mut entries: Vec<_> = map.iter().collect();
            entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
            out.push(b'{');
            for (i, (key, item)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_str(out, key);
                out.push(b':');
                write_canonical(out, item)?;
            }
            out.push(b'}');
        }
        leaf => write_value(out, leaf)?,
    }
    Ok(())
}

/// Whether serde_json escapes this byte: a quote, a backslash, or a control character.
fn needs_escape(b: u8) -> bool {
    b < 0x20 || b == b'"' || b == b'\\'
}

/// How many leading bytes of `bytes` need no escape. Eight bytes are tested at once (a byte
/// under 0x20, a quote or a backslash shows as a set high bit), so a string without escapes
/// costs about a step per word instead of a step per byte.
fn plain_prefix(bytes: &[u8]) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    // A high bit for each byte of `w` that is zero (exact as to whether there is one).
    let zero = |w: u64| w.wrapping_sub(ONES) & !w & HIGH;
    let mut plain = 0;
    for chunk in bytes.chunks_exact(8) {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let w = u64::from_le_bytes(word);
        let control = w.wrapping_sub(ONES * 0x20) & !w & HIGH;
        if control | zero(w ^ (ONES * u64::from(b'"'))) | zero(w ^ (ONES * u64::from(b'\\'))) != 0 {
            break;
        }
        plain += 8;
    }
    plain + bytes[plain..].iter().position(|&b| needs_escape(b)).unwrap_or(bytes.len() - plain)
}

/// A quoted JSON string, escaped exactly as serde_json escapes it: the runs between escapes
/// are copied whole.
pub(crate) fn write_str(out: &mut Vec<u8>, s: &str) {
    let bytes = s.as_bytes();
    out.reserve(bytes.len() + 2);
    out.push(b'"');
    let mut start = 0;
    loop {
        let end = start + plain_prefix(&bytes[start..]);
        out.extend_from_slice(&bytes[start..end]);
        let Some(&b) = bytes.get(end) else {
            break;
        };
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\x08' => out.extend_from_slice(b"\\b"),
            b'\x0c' => out.extend_from_slice(b"\\f"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            _ => {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                out.extend_from_slice(b"\\u00");
                out.push(HEX[usize::from(b >> 4)]);
                out.push(HEX[usize::from(b & 0xf)]);
            }
        }
        start = end + 1;
    }
    out.push(b'"');
}

/// The length of `value` as compact JSON text, counted without writing it.
pub(crate) fn encoded_len(value: &Value) -> usize {
    match value {
        Value::Null | Value::Bool(true) => 4,
        Value::Bool(false) => 5,
        Value::Number(n) => {
            let mut count = ByteCount(0);
            // Writing to a counter cannot fail.
            let _ = serde_json::to_writer(&mut count, n);
            count.0
        }
        Value::String(s) => str_len(s),
        Value::Array(items) => 2 + items.len().saturating_sub(1) + items.iter().map(encoded_len).sum::<usize>(),
        Value::Object(map) => {
            2 + map.len().saturating_sub(1) + map.iter().map(|(k, v)| str_len(k) + 1 + encoded_len(v)).sum::<usize>()
        }
    }
}

/// The length of a quoted, escaped string: two quotes, and one or five more bytes per escape.
fn str_len(s: &str) -> usize {
    let bytes = s.as_bytes();
    let mut len = bytes.len() + 2;
    let mut start = 0;
    loop {
        let end = start + plain_prefix(&bytes[start..]);
        let Some(&b) = bytes.get(end) else {
            return len;
        };
        len += match b {
            b'"' | b'\\' | b'\x08' | b'\x0c' | b'\n' | b'\r' | b'\t' => 1,
            _ => 5,
        };
        start = end + 1;
    }
}

/// `n` in decimal, written into `buf` without `fmt`: the ASCII digits serde_json (itoa) prints.
pub(crate) fn decimal(mut n: u64, buf: &mut [u8; 20]) -> &[u8] {
    let mut at = buf.len();
    loop {
        at -= 1;
        buf[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    &buf[at..]
}

/// Counts bytes without keeping them.
struct ByteCount(usize);

impl io::Write for ByteCount {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0 += buf.len();
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const AWKWARD: &str =
        "quote \" backslash \\ nl \n cr \r tab \t bs \x08 ff \x0c nul \0 us \x1f del \x7f slash / é 😀 \u{2028}";

    #[test]
    fn every_control_character_is_escaped_as_serde_json_does() {
        let all: String = (0u8..0x80).map(char::from).collect();
        let mut out = Vec::new();
        write_str(&mut out, &all);
        assert_eq!(String::from_utf8(out).unwrap(), serde_json::to_string(&all).unwrap());
    }

    #[test]
    fn escapes_are_found_at_every_place_in_a_word() {
        for len in 0..20 {
            for at in 0..len {
                for special in ['"', '\\', '\n', '\x01', '\x1f', ' ', '!', '#', '[', ']', '\x7f', 'é'] {
                    let s: String = (0..len).map(|i| if i == at { special } else { 'a' }).collect();
                    let mut out = Vec::new();
                    write_str(&mut out, &s);
                    let want = serde_json::to_string(&s).unwrap();
                    assert_eq!(String::from_utf8(out).unwrap(), want);
                    assert_eq!(str_len(&s), want.len());
                }
            }
        }
    }

    #[test]
    fn values_and_their_lengths_match_serde_json() {
        let values = [
            json!(null),
            json!(true),
            json!(false),
            json!(0),
            json!(-12),
            json!(u64::MAX),
            json!(1e300),
            json!(0.1),
            json!(-0.0),
            json!(""),
            json!(AWKWARD),
            json!([]),
            json!({}),
            json!([1, [2, [3, {}]], "x"]),
            json!({"expression": AWKWARD, AWKWARD: {"n": [1.5, null, true]}, "": ""}),
        ];
        for v in &values {
            let mut out = Vec::new();
            write_value(&mut out, v).unwrap();
            let want = serde_json::to_string(v).unwrap();
            assert_eq!(String::from_utf8(out).unwrap(), want);
            assert_eq!(encoded_len(v), want.len(), "{want}");
        }
    }
}
