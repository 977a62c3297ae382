//! Random expressions, written out as text and evaluated by `calc`, against an evaluation of
//! the same random tree written here independently (big rationals while exact, `f64` after);
//! and random text, which must never make `calc` panic or hang.

use calc::{Answer, Num, calculate, evaluate};
use num_bigint::BigInt;
use num_rational::BigRational;
use num_traits::{One, Signed, ToPrimitive, Zero};
use proptest::prelude::*;

#[derive(Debug, Clone, Copy)]
enum Op {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
}

#[derive(Debug, Clone, Copy)]
enum Func {
    Sqrt,
    Exp,
    Ln,
    Sin,
    Cos,
    Atan,
    Abs,
    Floor,
    Min,
    Max,
}

/// A random expression; literals are never negative (a sign is a `Neg`).
#[derive(Debug, Clone)]
enum Ast {
    Leaf(String, BigRational),
    Constant(&'static str, f64),
    Neg(Box<Ast>),
    Bin(Op, Box<Ast>, Box<Ast>),
    Pow(Box<Ast>, i32),
    Call(Func, Vec<Ast>),
}

/// How tightly a node binds when written without parentheses.
fn precedence(ast: &Ast) -> u8 {
    match ast {
        Ast::Bin(Op::Add | Op::Sub, ..) => 1,
        Ast::Bin(..) => 2,
        Ast::Neg(_) => 3,
        Ast::Pow(..) => 4,
        Ast::Leaf(..) | Ast::Constant(..) | Ast::Call(..) => 5,
    }
}

/// How to write a tree out.
#[derive(Debug, Clone, Copy)]
struct Style {
    /// Parentheses around every operation, or only where precedence needs them.
    all_parens: bool,
    /// `**` instead of `^`.
    stars: bool,
    /// Spaces around binary operators.
    spaced: bool,
}

fn render(ast: &Ast, style: Style) -> String {
    let wrap = |child: &Ast, needs: bool| {
        let text = render(child, style);
        if needs || (style.all_parens && precedence(child) < 5) { format!("({text})") } else { text }
    };
    let space = if style.spaced { " " } else { "" };
    match ast {
        Ast::Leaf(text, _) => text.clone(),
        Ast::Constant(name, _) => (*name).to_owned(),
        Ast::Neg(child) => format!("-{}", wrap(child, precedence(child) < 3)),
        Ast::Bin(op, a, b) => {
            let p = precedence(ast);
            let symbol = match op {
                Op::Add => "+",
                Op::Sub => "-",
                Op::Mul => "*",
                Op::Div => "/",
                Op::Rem => "%",
            };
            format!("{}{space}{symbol}{space}{}", wrap(a, precedence(a) < p), wrap(b, precedence(b) <= p))
        }
        Ast::Pow(base, e) => format!("{}{}{e}", wrap(base, precedence(base) < 5), if style.stars { "**" } else { "^" }),
        Ast::Call(f, args) => {
            let args: Vec<String> = args.iter().map(|a| render(a, style)).collect();
            format!("{}({})", format!("{f:?}").to_lowercase(), args.join(", "))
        }
    }
}

/// The reference value: exact while every step is, then a float.
#[derive(Debug, Clone, PartialEq)]
enum Val {
    Exact(BigRational),
    Float(f64),
}

/// Why the reference has no value: `calc` must fail too, or the case is out of scope.
#[derive(Debug)]
enum NoValue {
    Error,
    TooBig,
}

fn to_float(v: &Val) -> Result<f64, NoValue> {
    let f = match v {
        Val::Exact(r) => r.to_f64().ok_or(NoValue::Error)?,
        Val::Float(f) => *f,
    };
    if f.is_finite() { Ok(f) } else { Err(NoValue::Error) }
}

fn finite(f: f64) -> Result<Val, NoValue> {
    if f.is_finite() { Ok(Val::Float(f)) } else { Err(NoValue::Error) }
}

fn exact_of(v: &Val) -> BigRational {
    match v {
        Val::Exact(r) => r.clone(),
        Val::Float(f) => BigRational::from_float(*f).unwrap_or_default(),
    }
}

fn is_zero(v: &Val) -> bool {
    exact_of(v).is_zero()
}

/// Floored remainder of floats, through `rem_euclid` (a different route from `calc`'s).
fn floored_rem(a: f64, b: f64) -> f64 {
    if b > 0.0 { a.rem_euclid(b) } else { -(-a).rem_euclid(-b) }
}

fn reference(ast: &Ast) -> Result<Val, NoValue> {
    let value = match ast {
        Ast::Leaf(_, r) => Val::Exact(r.clone()),
        Ast::Constant(_, f) => Val::Float(*f),
        Ast::Neg(a) => match reference(a)? {
            Val::Exact(r) => Val::Exact(-r),
            Val::Float(f) => Val::Float(-f),
        },
        Ast::Bin(op, a, b) => binary(*op, reference(a)?, reference(b)?)?,
        Ast::Pow(a, e) => power(reference(a)?, *e)?,
        Ast::Call(f, args) => {
            let args = args.iter().map(reference).collect::<Result<Vec<_>, _>>()?;
            call(*f, &args)?
        }
    };
    if let Val::Exact(r) = &value
        && r.numer().bits().max(r.denom().bits()) > 4000
    {
        return Err(NoValue::TooBig);
    }
    Ok(value)
}

fn binary(op: Op, a: Val, b: Val) -> Result<Val, NoValue> {
    if matches!(op, Op::Div | Op::Rem) && is_zero(&b) {
        return Err(NoValue::Error);
    }
    if let (Val::Exact(x), Val::Exact(y)) = (&a, &b) {
        return Ok(Val::Exact(match op {
            Op::Add => x + y,
            Op::Sub => x - y,
            Op::Mul => x * y,
            Op::Div => x / y,
            Op::Rem => x - y * (x / y).floor(),
        }));
    }
    let (x, y) = (to_float(&a)?, to_float(&b)?);
    finite(match op {
        Op::Add => x + y,
        Op::Sub => x - y,
        Op::Mul => x * y,
        Op::Div => x / y,
        Op::Rem => floored_rem(x, y),
    })
}

fn power(base: Val, e: i32) -> Result<Val, NoValue> {
    if is_zero(&base) && e < 0 {
        return Err(NoValue::Error);
    }
    match base {
        Val::Exact(r) => {
            let mut p = BigRational::one();
            for _ in 0..e.unsigned_abs() {
                p *= &r;
            }
            Ok(Val::Exact(if e < 0 { p.recip() } else { p }))
        }
        Val::Float(f) => finite(f.powf(f64::from(e))),
    }
}

fn call(f: Func, args: &[Val]) -> Result<Val, NoValue> {
    let x = &args[0];
    let float = |g: fn(f64) -> f64| to_float(x).and_then(|v| finite(g(v)));
    match f {
        Func::Sqrt if exact_of(x).is_negative() => Err(NoValue::Error),
        Func::Sqrt => match x {
            Val::Exact(r) => {
                let (n, d) = (r.numer().sqrt(), r.denom().sqrt());
                if &n * &n == *r.numer() && &d * &d == *r.denom() {
                    Ok(Val::Exact(BigRational::new(n, d)))
                } else {
                    float(f64::sqrt)
                }
            }
            Val::Float(_) => float(f64::sqrt),
        },
        Func::Ln if !exact_of(x).is_positive() => Err(NoValue::Error),
        Func::Ln => float(f64::ln),
        Func::Exp => float(f64::exp),
        Func::Sin => float(f64::sin),
        Func::Cos => float(f64::cos),
        Func::Atan => float(f64::atan),
        Func::Abs => Ok(match x {
            Val::Exact(r) => Val::Exact(r.abs()),
            Val::Float(v) => Val::Float(v.abs()),
        }),
        Func::Floor => Ok(match x {
            Val::Exact(r) => Val::Exact(r.floor()),
            Val::Float(v) => Val::Float(v.floor()),
        }),
        Func::Min | Func::Max => {
            let mut best = x;
            for candidate in &args[1..] {
                let (c, b) = (exact_of(candidate), exact_of(best));
                if (matches!(f, Func::Min) && c < b) || (matches!(f, Func::Max) && c > b) {
                    best = candidate;
                }
            }
            Ok(best.clone())
        }
    }
}

/// A non-negative decimal literal `m × 10^s`, written plainly or in scientific notation, with
/// `_` between groups of digits sometimes.
fn decimal(m: u32, s: i32, scientific: bool, underscores: bool) -> Ast {
    let ten = BigInt::from(10u32).pow(s.unsigned_abs());
    let value = if s < 0 { BigRational::new(m.into(), ten) } else { BigRational::from_integer(BigInt::from(m) * ten) };
    let text = if scientific {
        format!("{m}e{s}")
    } else if s >= 0 {
        let digits = format!("{m}{}", "0".repeat(s.unsigned_abs() as usize));
        if underscores && m != 0 { group(&digits) } else { digits }
    } else {
        let digits = format!("{m:0>width$}", width = s.unsigned_abs() as usize + 1);
        let (whole, fraction) = digits.split_at(digits.len() - s.unsigned_abs() as usize);
        format!("{whole}.{fraction}")
    };
    Ast::Leaf(text, value)
}

/// `1234567` as `1_234_567`.
fn group(digits: &str) -> String {
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push('_');
        }
        out.push(c);
    }
    out
}

fn leaf() -> impl Strategy<Value = Ast> {
    prop_oneof![
        4 => (0u32..2000, -3i32..=2, any::<bool>(), any::<bool>()).prop_map(|(m, s, sci, us)| decimal(m, s, sci, us)),
        1 => "[1-9][0-9]{12,30}".prop_map(|d| {
            let value = BigRational::from_integer(d.parse().expect("digits"));
            Ast::Leaf(d, value)
        }),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![Just(Op::Add), Just(Op::Sub), Just(Op::Mul), Just(Op::Div), Just(Op::Rem)]
}

fn operations(inner: BoxedStrategy<Ast>) -> BoxedStrategy<Ast> {
    prop_oneof![
        1 => inner.clone().prop_map(|a| Ast::Neg(Box::new(a))),
        4 => (op(), inner.clone(), inner.clone()).prop_map(|(o, a, b)| Ast::Bin(o, Box::new(a), Box::new(b))),
        1 => (inner, -3i32..=4).prop_map(|(a, e)| Ast::Pow(Box::new(a), e)),
    ]
    .boxed()
}

/// Expressions of literals and operations only: every step is exact.
fn exact_ast() -> impl Strategy<Value = Ast> {
    leaf().prop_recursive(4, 24, 2, |inner| operations(inner.boxed()))
}

/// Expressions with constants and functions too, so floats meet exact numbers.
fn mixed_ast() -> impl Strategy<Value = Ast> {
    let leaf = prop_oneof![
        6 => leaf(),
        1 => prop_oneof![Just(Ast::Constant("pi", std::f64::consts::PI)), Just(Ast::Constant("e", std::f64::consts::E))],
    ];
    leaf.prop_recursive(4, 24, 3, |inner| {
        let one = prop_oneof![
            Just(Func::Sqrt),
            Just(Func::Exp),
            Just(Func::Ln),
            Just(Func::Sin),
            Just(Func::Cos),
            Just(Func::Atan),
            Just(Func::Abs),
            Just(Func::Floor),
        ];
        let call = (one, inner.clone()).prop_map(|(f, a)| Ast::Call(f, vec![a]));
        let extreme = (prop_oneof![Just(Func::Min), Just(Func::Max)], prop::collection::vec(inner.clone(), 1..4))
            .prop_map(|(f, args)| Ast::Call(f, args));
        prop_oneof![3 => operations(inner.boxed()), 1 => call, 1 => extreme]
    })
}

fn style() -> impl Strategy<Value = Style> {
    (any::<bool>(), any::<bool>(), any::<bool>()).prop_map(|(all_parens, stars, spaced)| Style {
        all_parens,
        stars,
        spaced,
    })
}

/// How far apart two floats are, in units in the last place.
fn ulps(a: f64, b: f64) -> u64 {
    if a == b {
        return 0;
    }
    if a.is_sign_negative() != b.is_sign_negative() {
        return u64::MAX;
    }
    a.to_bits().abs_diff(b.to_bits())
}

/// `calc` on the written tree agrees with the reference: the same exact number, a float
/// within one ulp, or an error for both.
fn agrees(ast: &Ast, style: Style) -> Result<(), TestCaseError> {
    let text = render(ast, style);
    let want = match reference(ast) {
        Err(NoValue::TooBig) => return Ok(()),
        other => other,
    };
    let got = evaluate(&text);
    match (&want, &got) {
        (Ok(Val::Exact(w)), Ok(Num::Exact(g))) => prop_assert_eq!(w, g, "{}", text),
        (Ok(Val::Float(w)), Ok(Num::Float(g))) => prop_assert!(ulps(*w, *g) <= 1, "{text}: want {w}, got {g}"),
        (Err(NoValue::Error), Err(_)) => {}
        _ => prop_assert!(false, "{text}: want {want:?}, got {got:?}"),
    }
    if let Ok(Val::Exact(w)) = &want
        && w.is_integer()
    {
        let digits = match calculate(&text).map_err(|e| TestCaseError::fail(e.message))? {
            Answer::Number(n) => n.to_string(),
            Answer::Digits(d) => d,
        };
        prop_assert_eq!(digits, w.to_integer().to_string(), "{}", text);
    }
    Ok(())
}

/// Integer expressions of `+`, `-`, `*`, signs and parentheses, with literals up to 19 digits,
/// so that some steps overflow an `i64`: the fast path on machine integers must answer what
/// the exact evaluator does, or leave the expression to it.
fn integer_expression() -> impl Strategy<Value = String> {
    let literal = prop_oneof![0u64..100, 0u64..=u64::from(u32::MAX), (1u64 << 62)..=(i64::MAX as u64 + 2)]
        .prop_map(|n| n.to_string());
    literal.prop_recursive(6, 48, 2, |inner| {
        prop_oneof![
            (inner.clone(), prop_oneof![Just("+"), Just("-"), Just("*")], inner.clone())
                .prop_map(|(a, op, b)| format!("{a} {op} {b}")),
            inner.clone().prop_map(|a| format!("-({a})")),
            inner.prop_map(|a| format!("({a})")),
        ]
    })
}

/// The exact evaluator's answer, as `calculate` would show it without its fast path.
fn exact_answer(text: &str) -> Result<String, TestCaseError> {
    match evaluate(text) {
        Ok(Num::Exact(r)) if r.is_integer() => Ok(r.to_integer().to_string()),
        other => Err(TestCaseError::fail(format!("{text}: not an exact integer: {other:?}"))),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn integer_expressions_answer_as_the_exact_evaluator_does(text in integer_expression()) {
        let got = match calculate(&text).map_err(|e| TestCaseError::fail(e.message))? {
            Answer::Number(n) => n.to_string(),
            Answer::Digits(d) => d,
        };
        prop_assert_eq!(got, exact_answer(&text)?, "{}", text);
    }

    #[test]
    fn exact_expressions_agree_with_big_rational_arithmetic(ast in exact_ast(), style in style()) {
        agrees(&ast, style)?;
    }

    #[test]
    fn mixed_expressions_agree_with_the_reference(ast in mixed_ast(), style in style()) {
        agrees(&ast, style)?;
    }

    /// One operation on floats that are exact as decimals: rounding the exact result once is
    /// what IEEE arithmetic does, so the answer is the `f64` operation's, bit for bit.
    #[test]
    fn one_operation_is_the_f64_operation(
        a in -(1i64 << 40)..(1i64 << 40), b in 1i64..(1i64 << 40), sa in 0u32..8, sb in 0u32..8, op in 0usize..4,
    ) {
        let (x, y) = (a as f64 / f64::from(1u32 << sa), b as f64 / f64::from(1u32 << sb));
        let text = format!("{} {} {}", exact_decimal(a, sa), ["+", "-", "*", "/"][op], exact_decimal(b, sb));
        let want = [x + y, x - y, x * y, x / y][op];
        let got = match evaluate(&text) {
            Ok(Num::Exact(r)) => r.to_f64().unwrap_or(f64::NAN),
            other => return Err(TestCaseError::fail(format!("{text}: {other:?}"))),
        };
        prop_assert_eq!(got.to_bits(), want.to_bits(), "{}: want {}, got {}", text, want, got);
    }

    #[test]
    fn no_text_makes_calc_panic(text in ".{0,200}") {
        let _ = calculate(&text);
    }

    #[test]
    fn no_soup_of_tokens_makes_calc_panic_or_hang(tokens in prop::collection::vec(prop::sample::select(SOUP), 0..40)) {
        let _ = calculate(&tokens.concat());
    }
}

/// Pieces of expressions, valid and not, for [`no_soup_of_tokens_makes_calc_panic_or_hang`].
const SOUP: &[&str] = &[
    "0",
    "1",
    "9",
    "2.5",
    "1e3",
    "1e-400",
    "9e9999",
    "99999999999999999999",
    ".",
    "_",
    ",",
    "1,000",
    " ",
    "^",
    "**",
    "*",
    "/",
    "%",
    "+",
    "-",
    "(",
    ")",
    "sqrt",
    "cbrt",
    "log",
    "ln",
    "round",
    "min",
    "max",
    "atan2",
    "pi",
    "e",
    "tau",
    "math::",
    "x",
    "é",
    "=",
];

/// `a / 2^s` written as a decimal, exactly.
fn exact_decimal(a: i64, s: u32) -> String {
    let value = BigRational::new(a.into(), BigInt::from(1u32 << s));
    let scaled = value * BigRational::from_integer(BigInt::from(10u32).pow(s));
    let digits = scaled.to_integer().abs().to_string();
    let digits = format!("{digits:0>width$}", width = s as usize + 1);
    let (whole, fraction) = digits.split_at(digits.len() - s as usize);
    let sign = if a < 0 { "(-" } else { "" };
    let close = if a < 0 { ")" } else { "" };
    if fraction.is_empty() { format!("{sign}{whole}{close}") } else { format!("{sign}{whole}.{fraction}{close}") }
}

#[test]
fn huge_powers_are_refused_at_once() {
    for text in ["9^9^9^9", "9**9**9**9**9", "2^2^2^2^2^2", "(10^3000)^(10^3000)", "(1/3)^99999999999", "1.0000001^1e9"]
    {
        let _ = calculate(text);
    }
    assert_eq!(calculate("2^2^2^2").ok(), Some(Answer::Number(65536.into())));
    assert!(calculate("2^2^2^2^2").is_err_and(|e| e.message.contains("overflow")));
}
