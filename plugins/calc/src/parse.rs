//! A recursive-descent parser that computes as it reads: no syntax tree, so a long chain such
//! as `1+1+…+1` is a loop, and only real nesting (bounded by [`MAX_DEPTH`]) recurses.
//!
//! Grammar, loosest first (`^` binds tighter than a sign, so `-2^2` is -4; it is right
//! associative, so `2^3^2` is 2^9, and its exponent may carry a sign, `2^-1`):
//!
//! ```text
//! sum     = product (("+" | "-") product)*
//! product = signed (("*" | "/" | "%" | "of" | ("%" | "percent") "of") signed)*
//! signed  = ("+" | "-") signed | power
//! power   = atom (("^" | "**") signed | "squared" | "cubed")?
//! atom    = number | constant | function "(" sum ("," sum)* ")" | function "of" listed
//!         | "(" sum ")"
//! listed  = signed                                   (a function of one argument)
//!         | sum (("," | "and" | "," "and") sum)*     (of more)
//! ```
//!
//! The lexer reads `mod` and `modulo` as `%`, `square root` as `sqrt`, `cube root` as `cbrt`
//! ([`crate::lex`]): `3/4 of 120`, `square root of 64`, `mean of 3, 5 and 7` and `100 mod 7`
//! are how people, and the small models that copy them, write these.

use crate::error::{CalcError, ErrorKind};
use crate::functions::{Named, known_names, lookup, unknown_hint};
use crate::lex::{Tok, Token};
use crate::limits::MAX_DEPTH;
use crate::number::{self, Num};

/// Evaluates the tokens of a whole expression.
pub(crate) fn evaluate(text: &str, tokens: &[Token<'_>]) -> Result<Num, CalcError> {
    let mut parser = Parser { text, tokens, pos: 0, depth: 0 };
    let value = parser.sum()?;
    let next = parser.peek();
    let kind = match next.tok {
        Tok::End => return Ok(value),
        Tok::Comma => ErrorKind::StrayComma,
        Tok::Close => ErrorKind::UnmatchedClose,
        Tok::Name("percent") => ErrorKind::PercentOfNothing,
        Tok::Name(unit) if crate::units::is_stray(unit) => ErrorKind::StrayUnit(unit.to_owned()),
        other => ErrorKind::MissingOperator(other.describe()),
    };
    Err(CalcError::new(next.at, kind))
}

struct Parser<'t, 'a> {
    text: &'t str,
    tokens: &'t [Token<'a>],
    pos: usize,
    depth: usize,
}

impl<'a> Parser<'_, 'a> {
    fn peek(&self) -> Token<'a> {
        // The lexer always ends the tokens with `End`, and `advance` never passes it.
        self.tokens[self.pos.min(self.tokens.len() - 1)]
    }

    fn advance(&mut self) -> Token<'a> {
        let token = self.peek();
        if token.tok != Tok::End {
            self.pos += 1;
        }
        token
    }

    /// Reads `% of` or `percent of` (`15% of 80`, `15 percent of 80`), if it comes next: a
    /// percentage as people write it, where `%` alone is the remainder.
    fn percent_of(&mut self) -> bool {
        let next = |k: usize| self.tokens.get(self.pos + k).map(|t| t.tok);
        let sign = matches!(next(0), Some(Tok::Percent | Tok::Name("percent")));
        if sign && next(1) == Some(Tok::Name("of")) {
            self.pos += 2;
            return true;
        }
        false
    }

    /// Runs `f` one level deeper, refusing to pass [`MAX_DEPTH`].
    fn nested<T>(&mut self, at: usize, f: impl FnOnce(&mut Self) -> Result<T, CalcError>) -> Result<T, CalcError> {
        if self.depth >= MAX_DEPTH {
            return Err(CalcError::new(at, ErrorKind::TooDeep));
        }
        self.depth += 1;
        let result = f(self);
        self.depth -= 1;
        result
    }

    fn sum(&mut self) -> Result<Num, CalcError> {
        let mut value = self.product()?;
        loop {
            let op = self.peek();
            let apply = match op.tok {
                Tok::Plus => number::add,
                Tok::Minus => number::sub,
                _ => return Ok(value),
            };
            self.advance();
            value = apply(value, self.product()?, op.at)?;
        }
    }

    fn product(&mut self) -> Result<Num, CalcError> {
        let mut value = self.signed()?;
        loop {
            let op = self.peek();
            if self.percent_of() {
                // `15% of 80`: the product first, so that the result stays exact.
                let whole = self.signed()?;
                value = number::div(number::mul(value, whole, op.at)?, number::literal("100", op.at)?, op.at)?;
                continue;
            }
            let apply = match op.tok {
                // `3/4 of 120`: a fraction, or any value, of a quantity is their product.
                Tok::Star | Tok::Name("of") => number::mul,
                Tok::Slash => number::div,
                Tok::Percent => number::rem,
                _ => return Ok(value),
            };
            self.advance();
            let sign = op.tok == Tok::Percent && self.text[op.at..].starts_with('%');
            if sign && !starts_operand(self.peek().tok) {
                return Err(CalcError::new(op.at, ErrorKind::PercentSign));
            }
            value = apply(value, self.signed()?, op.at)?;
        }
    }

    fn signed(&mut self) -> Result<Num, CalcError> {
        let sign = self.peek();
        match sign.tok {
            Tok::Minus | Tok::Plus => {
                self.advance();
                let value = self.nested(sign.at, Self::signed)?;
                Ok(if sign.tok == Tok::Minus { value.neg() } else { value })
            }
            _ => self.power(),
        }
    }

    fn power(&mut self) -> Result<Num, CalcError> {
        let base = self.atom()?;
        let op = self.peek();
        // `3.5 squared`, `2 cubed`: the words people write for the two commonest powers.
        if let Tok::Name(word @ ("squared" | "cubed")) = op.tok {
            self.advance();
            let exponent = number::literal(if word == "squared" { "2" } else { "3" }, op.at)?;
            return number::pow(base, exponent, op.at);
        }
        if op.tok != Tok::Power {
            return Ok(base);
        }
        self.advance();
        let exponent = self.nested(op.at, Self::signed)?;
        number::pow(base, exponent, op.at)
    }

    fn atom(&mut self) -> Result<Num, CalcError> {
        let token = self.advance();
        match token.tok {
            Tok::Num(text) => number::literal(text, token.at),
            Tok::Name(name) => self.named(name, token.at),
            Tok::Open => {
                let value = self.nested(token.at, Self::sum)?;
                self.close(token.at)?;
                Ok(value)
            }
            other => Err(CalcError::new(token.at, ErrorKind::ExpectedOperand(other.describe()))),
        }
    }

    /// Expects the `)` of the `(` at byte offset `open`.
    fn close(&mut self, open: usize) -> Result<(), CalcError> {
        let next = self.advance();
        if next.tok == Tok::Close {
            return Ok(());
        }
        let column = self.text.get(..open).map_or(open, |before| before.chars().count()) + 1;
        Err(CalcError::new(next.at, ErrorKind::MissingClose(next.tok.describe(), column)))
    }

    /// A constant, or a call of the function `name` at byte offset `at`.
    fn named(&mut self, name: &str, at: usize) -> Result<Num, CalcError> {
        let next = self.peek().tok;
        let (called, of) = (next == Tok::Open, next == Tok::Name("of"));
        match lookup(name) {
            None => Err(CalcError::new(at, ErrorKind::UnknownName(name.to_owned(), unknown_hint(name), known_names()))),
            Some(Named::Constant(_)) if called => Err(CalcError::new(at, ErrorKind::NotAFunction(name.to_owned()))),
            Some(Named::Constant(v)) => Ok(Num::Float(v)),
            Some(Named::Function(f)) if !called && !of => {
                Err(CalcError::new(at, ErrorKind::NotAValue(name.to_owned(), f.usage)))
            }
            Some(Named::Function(f)) => {
                // `sqrt(64)` or `square root of 64`.
                let opened = self.advance().at;
                let args = match of {
                    true => self.nested(opened, |p| p.listed(f.max))?,
                    false => self.nested(opened, |p| p.arguments(opened))?,
                };
                if args.len() < f.min || args.len() > f.max {
                    return Err(CalcError::new(at, ErrorKind::Arity(name.to_owned(), args.len(), f.usage)));
                }
                f.call(&args, at)
            }
        }
    }

    /// The arguments after a function's `of`: one operand for a function of one argument
    /// (`square root of 64 + 1` is 9), else sums separated by `,`, `and` or both (`mean of
    /// 4, 9 and 20`) to the end of the list.
    fn listed(&mut self, max: usize) -> Result<Vec<Num>, CalcError> {
        if max == 1 {
            return Ok(vec![self.signed()?]);
        }
        let mut args = vec![self.sum()?];
        loop {
            let comma = self.peek().tok == Tok::Comma;
            if comma {
                self.advance();
            }
            if self.peek().tok == Tok::Name("and") {
                self.advance();
            } else if !comma {
                return Ok(args);
            }
            args.push(self.sum()?);
        }
    }

    /// The arguments after a function's `(` (at byte offset `open`), through its `)`.
    fn arguments(&mut self, open: usize) -> Result<Vec<Num>, CalcError> {
        let mut args = Vec::new();
        if self.peek().tok == Tok::Close {
            self.advance();
            return Ok(args);
        }
        loop {
            args.push(self.sum()?);
            if self.peek().tok != Tok::Comma {
                self.close(open)?;
                return Ok(args);
            }
            self.advance();
        }
    }
}

/// Whether `tok` can begin an operand; `17%` followed by anything else is a percent sign.
fn starts_operand(tok: Tok<'_>) -> bool {
    matches!(tok, Tok::Num(_) | Tok::Name(_) | Tok::Open | Tok::Minus | Tok::Plus)
}
