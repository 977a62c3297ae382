//! Strings that match a `pattern` keyword, drawn from the pattern's syntax tree.
//!
//! `regex-syntax` parses the pattern; the generator walks the tree: a literal is written out,
//! a class gives one of its characters (ASCII ones four times in five when it has any, so
//! that `\d` gives `7` rather than `٣`), a repetition repeats between its bounds (at most four
//! more than its minimum), an alternation takes one branch. Anchors and word boundaries are
//! ignored, so now and then a string does not match; the validator, which has the final
//! word, then asks for another draw. Lookaround and backreferences do not parse: the caller
//! reports those patterns as unsupported.

use regex_syntax::hir::{Class, Hir, HirKind};

use super::rng::Rng;

/// The most repetitions beyond a repetition's minimum.
const EXTRA_REPEATS: u32 = 4;
/// Past this many bytes repetitions stop (`(a{1000}){1000}` would be a megabyte): the string
/// may then be too short for the pattern, and the validator asks for another.
const LONGEST: usize = 1 << 20;

/// A pattern, parsed once.
#[derive(Debug)]
pub(crate) struct Pattern {
    hir: Hir,
}

impl Pattern {
    /// Parses a pattern; the error says why the generator cannot use it.
    pub(crate) fn parse(pattern: &str) -> Result<Self, String> {
        regex_syntax::ParserBuilder::new().build().parse(pattern).map(|hir| Self { hir }).map_err(|e| {
            format!("pattern {pattern:?} is beyond the argument generator ({})", first_line(&e.to_string()))
        })
    }

    /// A string that matches the pattern (anchors and word boundaries aside).
    pub(crate) fn draw(&self, rng: &mut Rng) -> String {
        let mut out = String::new();
        walk(&self.hir, rng, &mut out);
        out
    }
}

fn first_line(text: &str) -> &str {
    text.lines().rev().find(|l| l.starts_with("error:")).unwrap_or_else(|| text.lines().next().unwrap_or(""))
}

fn walk(hir: &Hir, rng: &mut Rng, out: &mut String) {
    match hir.kind() {
        HirKind::Empty | HirKind::Look(_) => {}
        HirKind::Literal(lit) => out.push_str(&String::from_utf8_lossy(&lit.0)),
        HirKind::Class(class) => {
            if let Some(c) = class_char(class, rng) {
                out.push(c);
            }
        }
        HirKind::Repetition(rep) => {
            let most = rep.max.unwrap_or(u32::MAX).min(rep.min.saturating_add(EXTRA_REPEATS));
            let times = rng.in_range(i128::from(rep.min), i128::from(most));
            for _ in 0..times {
                if out.len() > LONGEST {
                    break;
                }
                walk(&rep.sub, rng, out);
            }
        }
        HirKind::Capture(cap) => walk(&cap.sub, rng, out),
        HirKind::Concat(parts) => parts.iter().for_each(|p| walk(p, rng, out)),
        HirKind::Alternation(branches) => {
            if let Some(branch) = branches.get(rng.index(branches.len())) {
                walk(branch, rng, out);
            }
        }
    }
}

/// Printable ASCII, the range most classes are meant for.
const PRINTABLE: (u32, u32) = (0x20, 0x7e);

fn class_char(class: &Class, rng: &mut Rng) -> Option<char> {
    let ranges: Vec<(u32, u32)> = match class {
        Class::Unicode(c) => c.ranges().iter().map(|r| (u32::from(r.start()), u32::from(r.end()))).collect(),
        Class::Bytes(c) => c.ranges().iter().map(|r| (u32::from(r.start()), u32::from(r.end()))).collect(),
    };
    let printable: Vec<(u32, u32)> = ranges
        .iter()
        .filter_map(|&(lo, hi)| {
            let (lo, hi) = (lo.max(PRINTABLE.0), hi.min(PRINTABLE.1));
            (lo <= hi).then_some((lo, hi))
        })
        .collect();
    let pool = if !printable.is_empty() && !rng.one_in(5) { &printable } else { &ranges };
    let &(lo, hi) = pool.get(rng.index(pool.len()))?;
    // Byte classes above ASCII would be half a UTF-8 sequence; keep to their ASCII part.
    let hi = if matches!(class, Class::Bytes(_)) { hi.min(0x7f) } else { hi };
    let code = u32::try_from(rng.in_range(i128::from(lo), i128::from(hi.max(lo)))).ok()?;
    char::from_u32(code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_follow_the_pattern() {
        let p = Pattern::parse(r"^[a-z]{2,3}-\d{4}$").unwrap();
        for case in 0..200 {
            let s = p.draw(&mut Rng::for_case(1, "p", case));
            let (head, tail) = s.split_once('-').unwrap();
            assert!((2..=3).contains(&head.len()) && head.bytes().all(|b| b.is_ascii_lowercase()), "{s}");
            assert!(tail.chars().count() == 4 && tail.chars().all(char::is_numeric), "{s}");
        }
    }

    #[test]
    fn alternations_and_optional_parts() {
        let p = Pattern::parse(r"^(cat|dog)s?$").unwrap();
        let mut seen = std::collections::BTreeSet::new();
        for case in 0..200 {
            seen.insert(p.draw(&mut Rng::for_case(1, "p", case)));
        }
        assert_eq!(seen.into_iter().collect::<Vec<_>>(), ["cat", "cats", "dog", "dogs"]);
    }

    #[test]
    fn lookaround_is_reported_not_guessed() {
        let e = Pattern::parse(r"^(?=a)a$").unwrap_err();
        assert!(e.contains("beyond the argument generator"), "{e}");
    }
}
