//! Trace file names from request ids: safe in any directory and never the same for two ids.

/// Longest encoded id kept whole in a file name; longer ones are cut and get a hash.
const MAX_STEM: usize = 180;

/// The trace file name of a request id: the id percent-encoded as jq's `@uri` does (every byte
/// but `A-Z a-z 0-9 - _ . ~` becomes `%XX`), then `.jsonl`. So `a/b` is `a%2Fb.jsonl`, no id
/// can name a path outside the directory, and two ids never share a name. An id longer than
/// 180 encoded bytes is cut there and followed by `+` and a 64-bit hash of the whole id (`+` is
/// always encoded, so such a name is never another id's).
pub fn trace_file_name(id: &str) -> String {
    let mut stem = String::with_capacity(id.len());
    for b in id.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            stem.push(char::from(b));
        } else {
            stem.push_str(&format!("%{b:02X}"));
        }
    }
    if stem.len() > MAX_STEM {
        // Every character of the stem is ASCII, so any byte index is a character boundary.
        stem.truncate(MAX_STEM);
        if let Some(cut) = stem.get(MAX_STEM - 2..).and_then(|end| end.find('%')) {
            stem.truncate(MAX_STEM - 2 + cut);
        }
        stem.push_str(&format!("+{:016x}", fnv1a(id.as_bytes())));
    }
    stem + ".jsonl"
}

/// FNV-1a, 64 bits: stable across runs and versions, which a resumed batch needs.
pub(crate) fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_become_safe_distinct_names() {
        assert_eq!(trace_file_name("case-17_v2.1"), "case-17_v2.1.jsonl");
        assert_eq!(trace_file_name("a/b"), "a%2Fb.jsonl");
        assert_eq!(trace_file_name("a_b"), "a_b.jsonl");
        assert_eq!(trace_file_name("../../etc/passwd"), "..%2F..%2Fetc%2Fpasswd.jsonl");
        assert_eq!(trace_file_name(".."), "...jsonl");
        assert_eq!(trace_file_name("é"), "%C3%A9.jsonl");
        assert_eq!(trace_file_name("a b%"), "a%20b%25.jsonl");
    }

    #[test]
    fn long_ids_are_cut_with_a_hash_and_stay_distinct() {
        let a = "x".repeat(300);
        let b = format!("{}y", "x".repeat(299));
        let (na, nb) = (trace_file_name(&a), trace_file_name(&b));
        assert_ne!(na, nb);
        assert!(na.len() < 210 && na.contains('+'), "{na}");
        // A cut never splits an escape.
        let c = format!("{}/{}", "x".repeat(179), "z".repeat(50));
        let nc = trace_file_name(&c);
        assert!(nc.starts_with(&format!("{}+", "x".repeat(179))), "{nc}");
        assert_eq!(trace_file_name(&a), na, "stable");
    }
}
