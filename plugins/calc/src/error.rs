//! What can go wrong in an expression, and where.

use crate::limits::{MAX_DEPTH, MAX_EXACT_BITS, MAX_EXACT_DIGITS, MAX_LENGTH, MAX_ROUND_DIGITS};

/// One failure, at a byte offset of the expression (where the offending token starts).
#[derive(Debug, Clone, PartialEq)]
pub struct CalcError {
    /// Byte offset into the expression; shown to the model as a 1-based column.
    pub at: usize,
    /// What went wrong.
    pub kind: ErrorKind,
}

impl CalcError {
    /// A failure of `kind` at byte offset `at`.
    pub(crate) fn new(at: usize, kind: ErrorKind) -> Self {
        Self { at, kind }
    }

    /// The message for the model: what went wrong, at which column, with the expression (or
    /// the part of it around the column, when it is long) so that the model sees its mistake.
    pub fn describe(&self, expression: &str) -> String {
        let at = self.at.min(expression.len());
        let at = (0..=at).rev().find(|i| expression.is_char_boundary(*i)).unwrap_or(0);
        let column = expression[..at].chars().count() + 1;
        format!("{} (column {column} of {})", self.kind, excerpt(expression, at))
    }
}

/// The whole expression when short, else about 30 characters either side of `at`.
fn excerpt(expression: &str, at: usize) -> String {
    const SIDE: usize = 30;
    if expression.chars().count() <= 2 * SIDE + 10 {
        return format!("{expression:?}");
    }
    let before: String = expression[..at].chars().rev().take(SIDE).collect::<Vec<_>>().into_iter().rev().collect();
    let after: String = expression[at..].chars().take(SIDE).collect();
    let head = if before.len() < at { "…" } else { "" };
    let tail = if at + after.len() < expression.len() { "…" } else { "" };
    format!("\"{head}{before}{after}{tail}\"")
}

/// One kind of failure; the message says what was wrong and how to write it instead.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ErrorKind {
    /// Nothing but white space.
    #[error("the expression is empty; write arithmetic such as 17/100*2340")]
    Empty,
    /// More characters than [`MAX_LENGTH`].
    #[error("the expression is {0} characters long, over the limit of {MAX_LENGTH}")]
    TooLong(usize),
    /// Parentheses, calls, signs or powers nested deeper than [`MAX_DEPTH`].
    #[error("parentheses, function calls, signs and powers are nested more than {MAX_DEPTH} deep")]
    TooDeep,
    /// A character that is no part of the notation.
    #[error("unexpected character {0:?}: {1}")]
    UnexpectedChar(char, &'static str),
    /// `_` that is not between two digits.
    #[error("`_` may only separate digits, as in 1_000_000")]
    MisplacedUnderscore,
    /// `1,000`: a thousands separator or two arguments?
    #[error(
        "{0:?} is ambiguous: `,` is not a thousands separator here, it separates a function's arguments; write {1} for the number, or put a space after the comma for two arguments"
    )]
    AmbiguousComma(String, String),
    /// `,` outside a function's arguments.
    #[error(
        "`,` only separates a function's arguments: numbers have no thousands separator (write 1000 or 1_000) and their decimal point is `.` (write 3.5)"
    )]
    StrayComma,
    /// A literal whose exact value is out of reach and that is no finite float either.
    #[error(
        "the number {0} is out of range: exact numbers stop below 2^{MAX_EXACT_BITS} (about {MAX_EXACT_DIGITS} digits), floats at about 1.8e308, and the smallest float is about 5e-324"
    )]
    LiteralOutOfRange(String),
    /// A number or `(` was expected.
    #[error("{0} where a number, a name or `(` was expected")]
    ExpectedOperand(String),
    /// Two operands side by side: `2pi`, `2(3)`, `3 4`.
    #[error("{0} follows a complete value without an operator; write `*` to multiply, as in 2*pi or 2*(3+4)")]
    MissingOperator(String),
    /// `17 percent` with no `of`: a percentage of nothing.
    #[error("a percentage needs the number it is taken of: write 17 percent of 2340, 17% of 2340 or 17/100*2340")]
    PercentOfNothing,
    /// `17%` used as a percent sign.
    #[error("`%` is the remainder (7 % 3 is 1), not a percent sign: for 17% of 2340 write 17% of 2340 or 17/100*2340")]
    PercentSign,
    /// `in minutes` with nothing to convert.
    #[error("a conversion needs a quantity first: write 6 hours in minutes")]
    NoQuantity,
    /// Units of two kinds: `3 hours in kg`.
    #[error("`{0}` is a unit of {1} and `{2}` one of {3}: only units of one kind convert into each other")]
    UnitKinds(String, &'static str, String, &'static str),
    /// A unit inside arithmetic: `240 km / 3 hours`.
    #[error(
        "`{0}` is a unit: calc converts a whole expression such as 6 hours in minutes; in arithmetic write the numbers alone"
    )]
    StrayUnit(String),
    /// `)` with no `(` open.
    #[error("`)` has no matching `(`")]
    UnmatchedClose,
    /// `(` never closed.
    #[error("{0} where `)` was expected, to close the `(` at column {1}")]
    MissingClose(String, usize),
    /// A name that is neither a function nor a constant: the name, a hint, the known names.
    #[error("unknown name `{0}`{1}; the known names are {2}")]
    UnknownName(String, String, String),
    /// A function used as a value: `sqrt + 1`.
    #[error("`{0}` is a function: call it, as in {1}")]
    NotAValue(String, &'static str),
    /// A constant called: `pi(2)`.
    #[error("`{0}` is a constant, not a function; write {0}*(…) to multiply")]
    NotAFunction(String),
    /// A call with too few or too many arguments.
    #[error("`{0}` got {1} argument(s); write {2}")]
    Arity(String, usize, &'static str),
    /// `x / 0`.
    #[error("division by zero")]
    DivisionByZero,
    /// `x % 0`.
    #[error("division by zero: the remainder of x % 0 is undefined")]
    RemainderByZero,
    /// `0 ^ -1`.
    #[error("division by zero: 0 to a negative power is undefined")]
    ZeroToNegativePower,
    /// A float result beyond ±1.8e308, or an exact one beyond the exact limit and the float range.
    #[error(
        "overflow: the result is beyond a float's range (about ±1.8e308), and exact numbers stop below 2^{MAX_EXACT_BITS} (about {MAX_EXACT_DIGITS} digits)"
    )]
    Overflow,
    /// An exact, non-zero result that rounds to 0 as a float.
    #[error("the result is not zero but smaller than the smallest float (about 5e-324), so it cannot be shown")]
    TooSmall,
    /// A value outside a function's domain: `sqrt(-1)`, `ln(0)`, `asin(2)`, `(-8)^(1/3)`.
    #[error("{0}")]
    Domain(String),
    /// `round(x, d)` with `d` not a whole number or too large.
    #[error(
        "round's digits must be a whole number from -{MAX_ROUND_DIGITS} to {MAX_ROUND_DIGITS}, as in round(3.14159, 2)"
    )]
    RoundDigits,
}
