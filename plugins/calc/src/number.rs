//! Numbers: exact rationals while every step is exact, floats once one is not.
//!
//! An exact number is a `BigRational` (so `1/3*3` is exactly 1 and `0.1+0.2` exactly 0.3); it
//! becomes a float when it meets a float (`pi`, `sqrt(2)`, `2^0.5`), or when it would grow past
//! [`MAX_EXACT_BITS`]. Float results are checked after every step: an infinity is an overflow
//! error, and inputs that would give NaN are refused before by their operation.

use num_bigint::BigInt;
use num_integer::Integer;
use num_rational::BigRational;
use num_traits::{One, Signed, ToPrimitive, Zero};

use crate::error::{CalcError, ErrorKind};
use crate::limits::MAX_EXACT_BITS;

/// A value of an expression.
#[derive(Debug, Clone, PartialEq)]
pub enum Num {
    /// Exact: integers of any size up to the limit, and fractions.
    Exact(BigRational),
    /// A finite float.
    Float(f64),
}

/// The larger of a rational's numerator and denominator sizes, in bits.
fn bits(r: &BigRational) -> u64 {
    r.numer().bits().max(r.denom().bits())
}

/// An exact result, or its float when it is past the exact limit.
pub(crate) fn settle(r: BigRational, at: usize) -> Result<Num, CalcError> {
    if bits(&r) <= MAX_EXACT_BITS { Ok(Num::Exact(r)) } else { float(exact_to_f64(&r), at) }
}

/// A float result, checked: an infinity is an overflow, NaN a value with no real result.
pub(crate) fn float(f: f64, at: usize) -> Result<Num, CalcError> {
    if f.is_infinite() {
        return Err(CalcError::new(at, ErrorKind::Overflow));
    }
    if f.is_nan() {
        return Err(CalcError::new(at, ErrorKind::Domain("the result is not a real number".into())));
    }
    Ok(Num::Float(f))
}

/// The float nearest to `r` (num-rational rounds correctly, ties to even).
pub(crate) fn exact_to_f64(r: &BigRational) -> f64 {
    r.to_f64().unwrap_or(f64::NAN)
}

/// An integer as an exact number.
pub(crate) fn int(i: i64) -> Num {
    Num::Exact(BigRational::from_integer(BigInt::from(i)))
}

impl Num {
    /// This value as a float; an exact value beyond the float range is an overflow at `at`.
    pub(crate) fn to_f64(&self, at: usize) -> Result<f64, CalcError> {
        match self {
            Num::Float(f) => Ok(*f),
            Num::Exact(r) => match exact_to_f64(r) {
                f if f.is_finite() => Ok(f),
                _ => Err(CalcError::new(at, ErrorKind::Overflow)),
            },
        }
    }

    /// Whether this is zero.
    pub(crate) fn is_zero(&self) -> bool {
        match self {
            Num::Exact(r) => r.is_zero(),
            Num::Float(f) => *f == 0.0,
        }
    }

    /// Whether this is below zero.
    pub(crate) fn is_negative(&self) -> bool {
        match self {
            Num::Exact(r) => r.is_negative(),
            Num::Float(f) => *f < 0.0,
        }
    }

    /// This value as an exact integer, if it is a whole number (a float one included).
    pub(crate) fn whole(&self) -> Option<BigInt> {
        match self {
            Num::Exact(r) => r.is_integer().then(|| r.to_integer()),
            Num::Float(f) if f.fract() == 0.0 => BigRational::from_float(*f).map(|r| r.to_integer()),
            Num::Float(_) => None,
        }
    }

    /// `-self`.
    pub(crate) fn neg(self) -> Num {
        match self {
            Num::Exact(r) => Num::Exact(-r),
            Num::Float(f) => Num::Float(-f),
        }
    }
}

/// Applies `exact` when both sides are exact, else `floating` on their floats.
fn binary(
    a: Num,
    b: Num,
    at: usize,
    exact: impl FnOnce(BigRational, BigRational) -> BigRational,
    floating: impl FnOnce(f64, f64) -> f64,
) -> Result<Num, CalcError> {
    match (a, b) {
        (Num::Exact(x), Num::Exact(y)) => settle(exact(x, y), at),
        (a, b) => float(floating(a.to_f64(at)?, b.to_f64(at)?), at),
    }
}

/// `f` on two integers, without the `gcd`s that `Ratio`'s operators always compute: on numbers
/// of thousands of bits those cost far more than the operation itself.
fn integers(x: &BigRational, y: &BigRational, f: fn(&BigInt, &BigInt) -> BigInt) -> Option<BigRational> {
    (x.is_integer() && y.is_integer()).then(|| BigRational::from_integer(f(x.numer(), y.numer())))
}

/// `a + b`.
pub(crate) fn add(a: Num, b: Num, at: usize) -> Result<Num, CalcError> {
    binary(a, b, at, |x, y| integers(&x, &y, |p, q| p + q).unwrap_or_else(|| x + y), |x, y| x + y)
}

/// `a - b`.
pub(crate) fn sub(a: Num, b: Num, at: usize) -> Result<Num, CalcError> {
    binary(a, b, at, |x, y| integers(&x, &y, |p, q| p - q).unwrap_or_else(|| x - y), |x, y| x - y)
}

/// `a * b`.
pub(crate) fn mul(a: Num, b: Num, at: usize) -> Result<Num, CalcError> {
    binary(a, b, at, |x, y| integers(&x, &y, |p, q| p * q).unwrap_or_else(|| x * y), |x, y| x * y)
}

/// `a / b`: true division, never truncated.
pub(crate) fn div(a: Num, b: Num, at: usize) -> Result<Num, CalcError> {
    if b.is_zero() {
        return Err(CalcError::new(at, ErrorKind::DivisionByZero));
    }
    binary(a, b, at, |x, y| x / y, |x, y| x / y)
}

/// `a % b`: the remainder of floored division, which has the sign of `b` (as in Python, Excel
/// and Wolfram: `-7 % 3` is 2, `7 % -3` is -2).
pub(crate) fn rem(a: Num, b: Num, at: usize) -> Result<Num, CalcError> {
    if b.is_zero() {
        return Err(CalcError::new(at, ErrorKind::RemainderByZero));
    }
    let exact = |x: BigRational, y: BigRational| {
        integers(&x, &y, Integer::mod_floor).unwrap_or_else(|| &x - &y * (&x / &y).floor())
    };
    binary(a, b, at, exact, float_rem)
}

/// Floored remainder of floats: `%` truncates, so a remainder of the wrong sign moves by `b`.
pub(crate) fn float_rem(x: f64, y: f64) -> f64 {
    let r = x % y;
    if r != 0.0 && (r < 0.0) != (y < 0.0) { r + y } else { r }
}

/// `base ^ exponent`.
pub(crate) fn pow(base: Num, exponent: Num, at: usize) -> Result<Num, CalcError> {
    if base.is_zero() && exponent.is_negative() {
        return Err(CalcError::new(at, ErrorKind::ZeroToNegativePower));
    }
    if let (Num::Exact(b), Num::Exact(e)) = (&base, &exponent)
        && e.is_integer()
        && let Some(exact) = exact_pow(b, e.numer())
    {
        return settle(exact, at);
    }
    let (b, e) = (base.to_f64(at)?, exponent_f64(&exponent));
    if b < 0.0 && e.fract() != 0.0 {
        return Err(CalcError::new(
            at,
            ErrorKind::Domain(
                "a negative number to a fractional power has no real value (for a real cube root write cbrt(-8))"
                    .into(),
            ),
        ));
    }
    float(b.powf(e), at)
}

/// An exponent as a float; one beyond the float range is infinite, which `powf` handles.
fn exponent_f64(e: &Num) -> f64 {
    match e {
        Num::Float(f) => *f,
        Num::Exact(r) => exact_to_f64(r),
    }
}

/// `b ^ e` exactly, when the result stays within [`MAX_EXACT_BITS`] (estimated first, so a
/// huge power is never computed); `None` sends the power to floats.
pub(crate) fn exact_pow(b: &BigRational, e: &BigInt) -> Option<BigRational> {
    let one = BigInt::one();
    if b.is_zero() {
        return Some(if e.is_zero() { BigRational::one() } else { BigRational::zero() });
    }
    if b.denom() == &one && b.numer().abs() == one {
        let odd = e.is_odd() && b.is_negative();
        return Some(BigRational::from_integer(BigInt::from(if odd { -1 } else { 1 })));
    }
    let n = e.abs().to_u32()?;
    // log2 of the result, from log2 of each side: `bits` alone would be off by up to a factor
    // of 2 (3 has 2 bits, yet 3^6000 has 9510, not 12000).
    let size = f64::from(n) * log2_abs(b.numer()).max(log2_abs(b.denom()));
    if size > MAX_EXACT_BITS as f64 + 1.0 {
        return None;
    }
    let p = BigRational::new_raw(b.numer().pow(n), b.denom().pow(n));
    Some(if e.is_negative() { p.recip() } else { p })
}

/// log2 of `|n|` (n ≠ 0) for integers of any size: shifted into the float range first.
pub(crate) fn log2_abs(n: &BigInt) -> f64 {
    let shift = n.bits().saturating_sub(64);
    (n.abs() >> shift).to_f64().unwrap_or(f64::NAN).log2() + shift as f64
}

/// The exact value of a decimal literal (`1_000.5e-3`), `_` already allowed by the lexer.
/// A literal too large for an exact number is read as a float; out of the float range too,
/// it is an error naming it.
pub(crate) fn literal(text: &str, at: usize) -> Result<Num, CalcError> {
    // Most literals are small integers: read them without the decimal machinery below, which
    // costs most of an evaluation (a big-integer parse of a formatted copy, a power of ten).
    if text.len() <= 18
        && text.bytes().all(|b| b.is_ascii_digit())
        && let Ok(n) = text.parse::<u64>()
    {
        return Ok(Num::Exact(BigRational::from_integer(BigInt::from(n))));
    }
    let clean: String = text.chars().filter(|c| *c != '_').collect();
    let shown = match text.char_indices().nth(24) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    };
    let out_of_range = || CalcError::new(at, ErrorKind::LiteralOutOfRange(shown.clone()));
    let (mantissa, exponent) = match clean.find(['e', 'E']) {
        Some(i) => (&clean[..i], clean[i + 1..].parse::<i64>().map_err(|_| out_of_range())?),
        None => (clean.as_str(), 0),
    };
    let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits: BigInt = format!("0{whole}{fraction}").parse().map_err(|_| out_of_range())?;
    let scale = exponent - fraction.len() as i64;
    // 10^k has log2(10) k (about 3.322 k) bits: keep exact values within the limit, else read a float.
    if digits.is_zero() || scale.unsigned_abs().saturating_mul(3322) / 1000 < MAX_EXACT_BITS {
        let power = BigInt::from(10).pow(u32::try_from(scale.unsigned_abs()).map_err(|_| out_of_range())?);
        let r = if scale < 0 { BigRational::new(digits, power) } else { BigRational::from_integer(digits * power) };
        return settle(r, at).map_err(|_| out_of_range());
    }
    match clean.parse::<f64>() {
        Ok(f) if f.is_finite() && f != 0.0 => Ok(Num::Float(f)),
        _ => Err(out_of_range()),
    }
}

/// A float's shortest round-trip decimal, as an exact number: `round(x, 2)` then rounds what
/// people see (2.675 to 2.68), not the binary value just below it.
pub(crate) fn float_as_decimal(f: f64) -> BigRational {
    match literal(&format!("{:e}", f.abs()), 0) {
        Ok(Num::Exact(r)) if f < 0.0 => -r,
        Ok(Num::Exact(r)) => r,
        _ => BigRational::from_float(f).unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exact(n: i64, d: i64) -> Num {
        Num::Exact(BigRational::new(n.into(), d.into()))
    }

    #[test]
    fn literals_are_exact_decimals() {
        assert_eq!(literal("42", 0).unwrap(), int(42));
        assert_eq!(literal("007", 0).unwrap(), int(7));
        assert_eq!(literal("999999999999999999", 0).unwrap(), int(999_999_999_999_999_999));
        assert_eq!(
            literal("9999999999999999999", 0).unwrap(),
            Num::Exact(BigRational::from_integer(BigInt::from(9_999_999_999_999_999_999u64)))
        );
        assert_eq!(literal("0.1", 0).unwrap(), exact(1, 10));
        assert_eq!(literal("1_000.5e-3", 0).unwrap(), exact(10005, 10000));
        assert_eq!(literal("2.5E3", 0).unwrap(), int(2500));
        assert_eq!(literal(".5", 0).unwrap(), exact(1, 2));
        assert_eq!(literal("1e308", 0).unwrap(), Num::Exact(BigRational::from_integer(BigInt::from(10).pow(308))));
        assert_eq!(literal("1e-5000", 0).unwrap_err().kind, ErrorKind::LiteralOutOfRange("1e-5000".into()));
        let long = "9".repeat(1300);
        assert_eq!(literal(&long, 0).unwrap_err().kind, ErrorKind::LiteralOutOfRange(format!("{}…", &long[..24])));
        assert!(matches!(literal("1e1200", 0).unwrap(), Num::Exact(_)));
        assert!(matches!(literal("1e99999999999999999999", 3).unwrap_err(), CalcError { at: 3, .. }));
        assert_eq!(literal("0e999999", 0).unwrap(), int(0));
    }

    #[test]
    fn remainder_has_the_sign_of_the_divisor() {
        assert_eq!(rem(int(-7), int(3), 0).unwrap(), int(2));
        assert_eq!(rem(int(7), int(-3), 0).unwrap(), int(-2));
        assert_eq!(rem(Num::Float(-7.5), int(2), 0).unwrap(), Num::Float(0.5));
        assert_eq!(rem(int(1), int(0), 4).unwrap_err(), CalcError::new(4, ErrorKind::RemainderByZero));
    }

    #[test]
    fn powers_stay_exact_within_the_limit() {
        assert_eq!(pow(int(2), int(-2), 0).unwrap(), exact(1, 4));
        assert_eq!(pow(int(-1), int(i64::MAX), 0).unwrap(), int(-1));
        assert_eq!(pow(int(0), int(0), 0).unwrap(), int(1));
        assert_eq!(pow(int(2), int(20_000), 1).unwrap_err(), CalcError::new(1, ErrorKind::Overflow));
        let Num::Exact(big) = pow(int(3), int(2580), 0).unwrap() else { panic!("3^2580 has 4090 bits: exact") };
        assert_eq!(big.numer().bits(), 4090);
        assert_eq!(pow(int(2), int(4095), 0).map(|n| matches!(n, Num::Exact(_))), Ok(true));
        assert_eq!(pow(int(2), int(4096), 0).unwrap_err().kind, ErrorKind::Overflow);
        assert_eq!(pow(exact(1, 2), int(20_000), 0).unwrap(), Num::Float(0.0));
        assert!(matches!(pow(int(-8), exact(1, 3), 0).unwrap_err().kind, ErrorKind::Domain(_)));
    }

    #[test]
    fn floats_read_as_their_shortest_decimal() {
        assert_eq!(float_as_decimal(2.675), BigRational::new(2675.into(), 1000.into()));
        assert_eq!(float_as_decimal(-0.0), BigRational::zero());
        assert_eq!(float_as_decimal(-1.5e-7), BigRational::new((-15).into(), 100_000_000.into()));
    }
}
