//! The functions and constants, under their usual names, and nothing else.

use std::cmp::Ordering;
use std::f64::consts::{E, LN_2, LOG10_2, PI, TAU};

use num_bigint::BigInt;
use num_rational::BigRational;
use num_traits::{One, Signed, ToPrimitive};

use crate::error::{CalcError, ErrorKind};
use crate::limits::{MAX_EXACT_BITS, MAX_ROUND_DIGITS};
use crate::number::{Num, add, div, exact_pow, exact_to_f64, float, float_as_decimal, int, log2_abs, settle};

/// A function: its name, how it is called, how many arguments it takes, what it computes.
pub(crate) struct Function {
    /// Its name (also accepted with a `math::` prefix).
    pub(crate) name: &'static str,
    /// How to call it, for error messages: `log(x) or log(x, base)`.
    pub(crate) usage: &'static str,
    /// The fewest arguments.
    pub(crate) min: usize,
    /// The most arguments.
    pub(crate) max: usize,
    eval: fn(&[Num], usize) -> Result<Num, CalcError>,
}

impl Function {
    /// Calls the function on `args` (their count already checked); `at` is the name's offset.
    pub(crate) fn call(&self, args: &[Num], at: usize) -> Result<Num, CalcError> {
        (self.eval)(args, at)
    }
}

const fn f(
    name: &'static str,
    usage: &'static str,
    arity: (usize, usize),
    eval: fn(&[Num], usize) -> Result<Num, CalcError>,
) -> Function {
    Function { name, usage, min: arity.0, max: arity.1, eval }
}

const ONE: (usize, usize) = (1, 1);

/// Every function, in the order the error message of an unknown name lists them.
const FUNCTIONS: &[Function] = &[
    f("sqrt", "sqrt(x)", ONE, |a, at| root(&a[0], 2, at)),
    f("cbrt", "cbrt(x)", ONE, |a, at| root(&a[0], 3, at)),
    f("abs", "abs(x)", ONE, |a, _| Ok(abs(&a[0]))),
    f("exp", "exp(x)", ONE, |a, at| float_of(&a[0], at, f64::exp)),
    f("ln", "ln(x)", ONE, |a, at| positive(&a[0], at).and_then(|()| float(logarithm(&a[0], f64::ln, LN_2), at))),
    f("log", "log(x) (base 10) or log(x, base)", (1, 2), |a, at| log(&a[0], a.get(1).unwrap_or(&int(10)), at)),
    f("log2", "log2(x)", ONE, |a, at| log(&a[0], &int(2), at)),
    f("sin", "sin(x) (radians)", ONE, |a, at| float_of(&a[0], at, f64::sin)),
    f("cos", "cos(x) (radians)", ONE, |a, at| float_of(&a[0], at, f64::cos)),
    f("tan", "tan(x) (radians)", ONE, |a, at| float_of(&a[0], at, f64::tan)),
    f("asin", "asin(x)", ONE, |a, at| unit_interval("asin", &a[0], at, f64::asin)),
    f("acos", "acos(x)", ONE, |a, at| unit_interval("acos", &a[0], at, f64::acos)),
    f("atan", "atan(x)", ONE, |a, at| float_of(&a[0], at, f64::atan)),
    f("atan2", "atan2(y, x)", (2, 2), |a, at| float(a[0].to_f64(at)?.atan2(a[1].to_f64(at)?), at)),
    f("sinh", "sinh(x)", ONE, |a, at| float_of(&a[0], at, f64::sinh)),
    f("cosh", "cosh(x)", ONE, |a, at| float_of(&a[0], at, f64::cosh)),
    f("tanh", "tanh(x)", ONE, |a, at| float_of(&a[0], at, f64::tanh)),
    f("floor", "floor(x)", ONE, |a, at| whole_part(&a[0], at, BigRational::floor, f64::floor)),
    f("ceil", "ceil(x)", ONE, |a, at| whole_part(&a[0], at, BigRational::ceil, f64::ceil)),
    f("round", "round(x) or round(x, digits)", (1, 2), round),
    f("min", "min(a, b, …)", (1, usize::MAX), |a, _| Ok(extreme(a, true))),
    f("max", "max(a, b, …)", (1, usize::MAX), |a, _| Ok(extreme(a, false))),
    f("mean", "mean(a, b, …)", (1, usize::MAX), mean),
    f("average", "average(a, b, …) (the mean)", (1, usize::MAX), mean),
];

/// Every constant: floats, since none of them is rational.
const CONSTANTS: &[(&str, f64)] = &[("pi", PI), ("e", E), ("tau", TAU)];

/// What a name means.
pub(crate) enum Named {
    Function(&'static Function),
    Constant(f64),
}

/// The meaning of `name`, `math::sqrt` being read as `sqrt`.
pub(crate) fn lookup(name: &str) -> Option<Named> {
    let name = name.strip_prefix("math::").unwrap_or(name);
    if let Some(function) = FUNCTIONS.iter().find(|f| f.name == name) {
        return Some(Named::Function(function));
    }
    CONSTANTS.iter().find(|(n, _)| *n == name).map(|(_, v)| Named::Constant(*v))
}

/// The list an unknown name's error gives.
pub(crate) fn known_names() -> String {
    let functions: Vec<&str> = FUNCTIONS.iter().map(|f| f.usage).collect();
    let constants: Vec<&str> = CONSTANTS.iter().map(|(n, _)| *n).collect();
    format!("the functions {} and the constants {}", functions.join(", "), constants.join(", "))
}

/// A hint for a likely intended name, or nothing.
pub(crate) fn unknown_hint(name: &str) -> String {
    let lower = name.to_ascii_lowercase();
    if lower != name && lookup(&lower).is_some() {
        return format!(" (names are lower case: write `{lower}`)");
    }
    let hint = match lower.as_str() {
        "pow" => "write a^b or a**b for a power",
        "mod" => "write a mod b or a % b for a remainder",
        "log10" => "log(x) is base 10",
        "arcsin" | "arccos" | "arctan" => "the inverse functions are asin, acos, atan",
        "inf" | "infinity" | "nan" => "calc has no infinity or NaN",
        _ if name.len() == 1 => "calc has no variables: write the number itself",
        _ if crate::units::is_unit(name) => "a unit converts only as a whole expression, as in 6 hours in minutes",
        _ => return String::new(),
    };
    format!(" ({hint})")
}

/// A function computed on floats; the result is checked for overflow.
fn float_of(x: &Num, at: usize, f: fn(f64) -> f64) -> Result<Num, CalcError> {
    float(f(x.to_f64(at)?), at)
}

fn domain(at: usize, message: &str) -> CalcError {
    CalcError::new(at, ErrorKind::Domain(message.to_owned()))
}

/// `asin` and `acos`, defined on [-1, 1] only.
fn unit_interval(name: &str, x: &Num, at: usize, f: fn(f64) -> f64) -> Result<Num, CalcError> {
    let v = x.to_f64(at)?;
    if !(-1.0..=1.0).contains(&v) {
        return Err(domain(at, &format!("{name}(x) needs -1 ≤ x ≤ 1; got {v}")));
    }
    float(f(v), at)
}

/// Square and cube roots: exact for exact perfect powers (`sqrt(16)`, `cbrt(-1/8)`).
fn root(x: &Num, k: u32, at: usize) -> Result<Num, CalcError> {
    if k == 2 && x.is_negative() {
        return Err(domain(at, "sqrt(x) needs x ≥ 0: calc has no complex numbers"));
    }
    if let Num::Exact(r) = x {
        let exact = |n: &BigInt| Some(n.nth_root(k)).filter(|root| root.pow(k) == *n);
        if let (Some(n), Some(d)) = (exact(r.numer()), exact(r.denom())) {
            return Ok(Num::Exact(BigRational::new(n, d)));
        }
    }
    float_of(x, at, if k == 2 { f64::sqrt } else { f64::cbrt })
}

fn abs(x: &Num) -> Num {
    match x {
        Num::Exact(r) => Num::Exact(r.abs()),
        Num::Float(v) => Num::Float(v.abs()),
    }
}

/// `floor` and `ceil`: exact integers from exact numbers.
fn whole_part(
    x: &Num,
    at: usize,
    exact: fn(&BigRational) -> BigRational,
    floating: fn(f64) -> f64,
) -> Result<Num, CalcError> {
    match x {
        Num::Exact(r) => settle(exact(r), at),
        Num::Float(v) => float(floating(*v), at),
    }
}

/// `round(x, digits)`: halves away from zero, on the decimal people see (a float is read as its
/// shortest decimal, so `round(2.675, 2)` is 2.68 whether 2.675 came exact or as a float).
fn round(args: &[Num], at: usize) -> Result<Num, CalcError> {
    let digits = match args.get(1) {
        None => 0,
        Some(d) => d
            .whole()
            .and_then(|d| d.to_i64())
            .filter(|d| d.abs() <= MAX_ROUND_DIGITS)
            .ok_or(CalcError::new(at, ErrorKind::RoundDigits))?,
    };
    let power = BigInt::from(10).pow(u32::try_from(digits.unsigned_abs()).unwrap_or(0));
    let scale = if digits < 0 { BigRational::new(BigInt::one(), power) } else { BigRational::from_integer(power) };
    match &args[0] {
        Num::Exact(r) => settle((r * &scale).round() / scale, at),
        Num::Float(v) => float(exact_to_f64(&((float_as_decimal(*v) * &scale).round() / scale)), at),
    }
}

/// The arithmetic mean, exact for exact arguments: `mean(12, 15, 21)` is 16. A function, not
/// only `(12+15+21)/3`, because a small model writes the request's word as a name far more
/// reliably than it brackets a sum (SmolLM2-135M wrote `12+15+21/3`).
fn mean(args: &[Num], at: usize) -> Result<Num, CalcError> {
    let total = args.iter().try_fold(int(0), |total, arg| add(total, arg.clone(), at))?;
    div(total, Num::Exact(BigRational::from_integer(BigInt::from(args.len()))), at)
}

/// The least (or greatest) argument, compared exactly; it keeps its exactness.
fn extreme(args: &[Num], least: bool) -> Num {
    let exact = |n: &Num| match n {
        Num::Exact(r) => r.clone(),
        Num::Float(v) => BigRational::from_float(*v).unwrap_or_default(),
    };
    let wanted = if least { Ordering::Less } else { Ordering::Greater };
    let mut best = &args[0];
    for candidate in &args[1..] {
        if compare(&exact(candidate), &exact(best)) == wanted {
            best = candidate;
        }
    }
    best.clone()
}

/// `a` against `b` by cross-multiplication (denominators are positive): two products, where
/// `Ratio`'s own ordering divides step by step and is far slower on numbers of thousands of bits.
fn compare(a: &BigRational, b: &BigRational) -> Ordering {
    (a.numer() * b.denom()).cmp(&(b.numer() * a.denom()))
}

/// `log(x, base)`: exact when `x` is an exact power of an exact base (`log(1000)` is 3,
/// `log2(1/8)` is -3); base 10 and 2 use their own float functions, which are exact on powers.
fn log(x: &Num, base: &Num, at: usize) -> Result<Num, CalcError> {
    positive(x, at)?;
    let b = base.to_f64(at)?;
    if base.is_negative() || base.is_zero() || b == 1.0 {
        return Err(domain(at, "log(x, base) needs base > 0 and base ≠ 1"));
    }
    if let (Num::Exact(r), Num::Exact(rb)) = (x, base)
        && let Some(k) = exact_log(r, rb)
    {
        return Ok(k);
    }
    let value = if b == 10.0 {
        logarithm(x, f64::log10, LOG10_2)
    } else if b == 2.0 {
        logarithm(x, f64::log2, 1.0)
    } else {
        logarithm(x, f64::ln, LN_2) / logarithm(base, f64::ln, LN_2)
    };
    float(value, at)
}

/// Logarithms are defined for x > 0 only.
fn positive(x: &Num, at: usize) -> Result<(), CalcError> {
    if x.is_negative() || x.is_zero() {
        return Err(domain(
            at,
            "logarithms need x > 0: ln(0) is -infinity and the log of a negative number is not real",
        ));
    }
    Ok(())
}

/// The whole `k` with `base^k == x`, if there is one.
fn exact_log(x: &BigRational, base: &BigRational) -> Option<Num> {
    let k = (log2_exact(x) / log2_exact(base)).round();
    if !k.is_finite() || k.abs() > MAX_EXACT_BITS as f64 {
        return None;
    }
    let k = k as i64;
    (exact_pow(base, &BigInt::from(k)).as_ref() == Some(x)).then(|| int(k))
}

/// A logarithm of a positive number: `f` on its float, or, for an exact number beyond the
/// float range, its base-2 logarithm times `per_log2`.
fn logarithm(x: &Num, f: fn(f64) -> f64, per_log2: f64) -> f64 {
    match x {
        Num::Float(v) => f(*v),
        Num::Exact(r) => match exact_to_f64(r) {
            v if v.is_normal() => f(v),
            _ => log2_exact(r) * per_log2,
        },
    }
}

/// log2 of a positive rational of any size: each side shifted into the float range first.
fn log2_exact(r: &BigRational) -> f64 {
    log2_abs(r.numer()) - log2_abs(r.denom())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exact(n: i64, d: i64) -> Num {
        Num::Exact(BigRational::new(n.into(), d.into()))
    }

    #[test]
    fn exact_where_the_answer_is_exact() {
        assert_eq!(root(&int(16), 2, 0).unwrap(), int(4));
        assert_eq!(root(&exact(-1, 8), 3, 0).unwrap(), exact(-1, 2));
        assert_eq!(root(&int(2), 2, 0).unwrap(), Num::Float(std::f64::consts::SQRT_2));
        assert_eq!(log(&int(1000), &int(10), 0).unwrap(), int(3));
        assert_eq!(log(&exact(1, 8), &int(2), 0).unwrap(), int(-3));
        assert_eq!(log(&int(8), &int(2), 0).unwrap(), int(3));
        assert_eq!(log(&Num::Float(1000.0), &int(10), 0).unwrap(), Num::Float(3.0));
    }

    #[test]
    fn logarithms_of_numbers_beyond_the_float_range() {
        let big = Num::Exact(BigRational::from_integer(BigInt::from(10).pow(400) + 1));
        let Num::Float(v) = log(&big, &int(10), 0).unwrap() else { panic!("a float") };
        assert!((v - 400.0).abs() < 1e-12, "{v}");
    }

    #[test]
    fn rounding_and_extremes() {
        assert_eq!(round(&[exact(2675, 1000), int(2)], 0).unwrap(), exact(268, 100));
        assert_eq!(round(&[Num::Float(2.675), int(2)], 0).unwrap(), Num::Float(2.68));
        assert_eq!(round(&[exact(-5, 2)], 0).unwrap(), int(-3));
        assert_eq!(round(&[int(1250), int(-2)], 0).unwrap(), int(1300));
        assert_eq!(round(&[int(1), exact(1, 2)], 7).unwrap_err(), CalcError::new(7, ErrorKind::RoundDigits));
        assert_eq!(extreme(&[int(3), Num::Float(2.5), int(7)], true), Num::Float(2.5));
        assert_eq!(extreme(&[int(3), Num::Float(2.5), int(7)], false), int(7));
        assert_eq!(extreme(&[exact(-1, 3), exact(-1, 2), exact(-1, 2)], true), exact(-1, 2));
        assert_eq!(extreme(&[int(2), Num::Float(2.0)], false), int(2));
        assert_eq!(mean(&[int(12), int(15), int(21)], 0).ok(), Some(int(16)));
        assert_eq!(mean(&[int(1), int(2)], 0).ok(), Some(exact(3, 2)));
        assert!(matches!(lookup("average"), Some(Named::Function(f)) if f.name == "average"));
    }

    #[test]
    fn lookup_knows_the_names_and_only_them() {
        assert!(matches!(lookup("math::sqrt"), Some(Named::Function(f)) if f.name == "sqrt"));
        assert!(matches!(lookup("tau"), Some(Named::Constant(v)) if v == TAU));
        assert!(lookup("Pi").is_none() && lookup("x").is_none() && lookup("str::from").is_none());
        assert_eq!(unknown_hint("Pi"), " (names are lower case: write `pi`)");
    }
}
