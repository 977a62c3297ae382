//! The bounds that keep every expression cheap: none can hang the tool or exhaust memory.

/// The longest expression, in characters (the schema's `maxLength`).
pub const MAX_LENGTH: usize = 4096;

/// How deep parentheses, function calls, signs and powers may nest. The parser recurses once
/// per level, so this bounds its stack; chains such as `1+1+…+1` are loops, not nesting.
pub const MAX_DEPTH: usize = 100;

/// The largest exact number: numerator and denominator each below 2^4096 (about 1233 decimal
/// digits; a float stops at 2^1024). A result beyond it is computed as a float instead, like
/// any calculator would, and a float beyond ±1.8e308 is an overflow error. The bound also
/// bounds the time: exact operations cost up to the square of the size (the `gcd`s of
/// fractions), so a 4096-character expression made only of the largest fractions takes under a
/// second in a release build (measured: 0.3 to 0.8 s), and an ordinary one microseconds. Powers are estimated before they are computed, so `9^9^9^9` is refused at once.
pub const MAX_EXACT_BITS: u64 = 4096;

/// [`MAX_EXACT_BITS`] in decimal digits, for messages.
pub const MAX_EXACT_DIGITS: u64 = MAX_EXACT_BITS * 30_103 / 100_000;

/// The most digits `round(x, digits)` rounds to (either side of the decimal point).
pub const MAX_ROUND_DIGITS: i64 = 1000;
