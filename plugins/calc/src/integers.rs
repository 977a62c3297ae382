//! The common case on machine integers: an expression of integer literals, `+`, `-`, `*`,
//! signs and parentheses whose every step fits in an `i64` is computed here, with no big
//! number (each one is an allocation or two); anything else, and any overflow or syntax
//! error, is left to the exact evaluator, which gives the same value, or the error message.
//!
//! Same grammar and precedence as [`crate::parse`], restricted to those tokens; `/`, `%`, `^`,
//! names, decimal literals and `_` in literals are not read here.

use crate::lex::{Tok, Token};
use crate::limits::{MAX_DEPTH, MAX_LENGTH};

/// The value of `expression`, when it is of the restricted kind and every step fits an `i64`.
pub(crate) fn evaluate(expression: &str) -> Option<i64> {
    if expression.len() > MAX_LENGTH {
        return None;
    }
    let tokens = crate::lex::tokens(expression).ok()?;
    let mut reader = Reader { tokens: &tokens, pos: 0, depth: 0 };
    let value = reader.sum()?;
    (reader.peek() == Tok::End).then_some(value)
}

struct Reader<'t, 'a> {
    tokens: &'t [Token<'a>],
    pos: usize,
    depth: usize,
}

impl<'a> Reader<'_, 'a> {
    fn peek(&self) -> Tok<'a> {
        self.tokens.get(self.pos).map_or(Tok::End, |t| t.tok)
    }

    fn sum(&mut self) -> Option<i64> {
        let mut value = self.product()?;
        loop {
            match self.peek() {
                Tok::Plus => {
                    self.pos += 1;
                    value = value.checked_add(self.product()?)?;
                }
                Tok::Minus => {
                    self.pos += 1;
                    value = value.checked_sub(self.product()?)?;
                }
                _ => return Some(value),
            }
        }
    }

    fn product(&mut self) -> Option<i64> {
        let mut value = self.signed()?;
        while self.peek() == Tok::Star {
            self.pos += 1;
            value = value.checked_mul(self.signed()?)?;
        }
        match self.peek() {
            Tok::Slash | Tok::Percent => None,
            _ => Some(value),
        }
    }

    fn signed(&mut self) -> Option<i64> {
        match self.peek() {
            Tok::Plus | Tok::Minus => {
                let minus = self.peek() == Tok::Minus;
                self.pos += 1;
                let value = self.deeper(Self::signed)?;
                if minus { value.checked_neg() } else { Some(value) }
            }
            _ => {
                let value = self.atom()?;
                // A power binds tighter than a sign: left to the exact evaluator.
                (self.peek() != Tok::Power).then_some(value)
            }
        }
    }

    fn atom(&mut self) -> Option<i64> {
        match self.peek() {
            Tok::Num(text) if text.bytes().all(|b| b.is_ascii_digit()) => {
                self.pos += 1;
                text.parse().ok()
            }
            Tok::Open => {
                self.pos += 1;
                let value = self.deeper(Self::sum)?;
                (self.peek() == Tok::Close).then(|| self.pos += 1)?;
                Some(value)
            }
            _ => None,
        }
    }

    /// Runs `f` one level deeper; past [`MAX_DEPTH`], the exact evaluator says so.
    fn deeper(&mut self, f: fn(&mut Self) -> Option<i64>) -> Option<i64> {
        if self.depth >= MAX_DEPTH {
            return None;
        }
        self.depth += 1;
        let value = f(self);
        self.depth -= 1;
        value
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integer_expressions_are_computed_and_the_rest_left_to_the_exact_evaluator() {
        assert_eq!(evaluate("(14 + 3) * 7 - 1"), Some(118));
        assert_eq!(evaluate("-2 * -(3 + +4)"), Some(14));
        assert_eq!(evaluate(" 007 "), Some(7));
        assert_eq!(evaluate("9223372036854775807"), Some(i64::MAX));
        for other in [
            "10 / 4",
            "7 % 3",
            "2 ^ 3",
            "-2 ** 2",
            "1.5 + 1",
            "1_000",
            "1e3",
            "pi",
            "sqrt(4)",
            "9223372036854775807 + 1",
            "9223372036854775808",
            "3037000500 * 3037000500",
            "(1",
            "1)",
            "1 2",
            "",
            "2 * 50%",
        ] {
            assert_eq!(evaluate(other), None, "{other}");
        }
        let deep = format!("{}1{}", "(".repeat(MAX_DEPTH + 1), ")".repeat(MAX_DEPTH + 1));
        assert_eq!(evaluate(&deep), None);
    }

    /// Nesting near the limit: the fast path answers exactly where the exact evaluator does.
    #[test]
    fn nesting_is_refused_at_the_same_depth_as_the_exact_evaluator() {
        for n in MAX_DEPTH - 3..=MAX_DEPTH + 3 {
            let parens = format!("{}7{}", "(".repeat(n), ")".repeat(n));
            let signs = format!("{}7", "-".repeat(n));
            let mixed = format!("{}7{}", "-(".repeat(n / 2), ")".repeat(n / 2));
            for text in [parens, signs, mixed] {
                let exact = crate::evaluate(&text).is_ok();
                assert_eq!(evaluate(&text).is_some(), exact, "{n}: {text}");
            }
        }
    }
}
