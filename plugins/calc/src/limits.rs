//! The bounds that keep every expression cheap: none can hang the tool or exhaust memory.

/// The longest expression, in characters (the schema's `maxLength`).
pub const MAX_LENGTH: usize = 4096;

/// How deep parentheses, function calls, signs and powers may nest. The parser recurses once
/// per level, so this bounds its stack; chains such as `1+1+…+1` are loops, not nesting.
pub const MAX_DEPTH: usize = 100;

/// The largest exact number: numerator and denominator each below 2^10000 (about 3010 decimal
/// digits). A result beyond it is computed as a float instead, like any calculator would, and
/// a float beyond ±1.8e308 is an overflow error. Powers are estimated before they are computed,
/// so `9^9^9^9` is refused at once instead of filling memory.
pub const MAX_EXACT_BITS: u64 = 10_000;

/// The most digits `round(x, digits)` rounds to (either side of the decimal point).
pub const MAX_ROUND_DIGITS: i64 = 1000;
