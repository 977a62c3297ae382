//! `calc`: a harness plugin with one tool, `calculate`, which evaluates arithmetic as people and
//! models write it, and gives answers a model can report as fact.
//!
//! - `+ - * /` with true division (`10/4` is 2.5), `%` the remainder of floored division (its
//!   sign is the divisor's), `^` or `**` for powers (right associative, tighter than a sign:
//!   `-2^2` is -4), parentheses, decimals and scientific notation (`1.5e3`), `_` between digits
//!   (`1_000_000`). `,` only separates a function's arguments: `1,000` is refused as ambiguous.
//! - The words people write: `times`, `plus`, `minus`, `divided by`, `to the power of`,
//!   `squared`, `cubed`, `15% of 80`, `3/4 of 120`, `100 mod 7`, `square root of 64`, `mean
//!   of 4, 9 and 20`, and a whole conversion `6 hours in minutes`.
//! - Numbers are exact while every step is: integers of any size up to about 1233 digits and
//!   fractions (`1/3*3` is 1, `0.1+0.2` is 0.3). A float enters with `pi`, `e`, `tau`, a
//!   function with no exact answer (`sqrt(2)`, `sin(1)`) or a fractional power, and stays.
//! - The answer is a JSON number: an integer when the value is whole (`2^10` gives `1024`),
//!   else the shortest decimal that reads back as the same float. An exact integer beyond 64
//!   bits is a string of its digits, since JSON readers would round it.
//! - The functions: see [`functions`]. Errors name the column and say what to write instead.
//!
//! The numbers are `num-bigint` and `num-rational` (correctly rounded conversion to floats);
//! the parser is a small recursive descent that computes as it reads ([`parse`]).
#![forbid(unsafe_code)]

mod error;
mod functions;
mod integers;
mod lex;
pub mod limits;
mod number;
mod parse;
mod units;

pub use error::{CalcError, ErrorKind};
pub use number::Num;

use harness_sdk::schemars::JsonSchema;
use harness_sdk::serde::{Deserialize, Serialize};
use harness_sdk::serde_json::{Number, json};
use harness_sdk::{Effects, NoConfig, Plugin, Tool, ToolError};
use num_traits::ToPrimitive;

use crate::limits::MAX_LENGTH;

/// Arguments of `calculate`.
#[derive(Deserialize, JsonSchema)]
#[serde(crate = "harness_sdk::serde", deny_unknown_fields)]
#[schemars(crate = "harness_sdk::schemars")]
pub struct CalculateArgs {
    /// An arithmetic expression, e.g. `17/100*2340` or `sqrt(2)*3`: numbers, + - * / % ^,
    /// parentheses, functions and constants; no variables. Or a unit conversion: `6 hours in minutes`.
    #[schemars(length(min = 1, max = 4096))]
    pub expression: String,
}

/// The result of `calculate`.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[serde(crate = "harness_sdk::serde", untagged)]
#[schemars(crate = "harness_sdk::schemars")]
pub enum Answer {
    /// A whole number within 64 bits, or a float as its shortest round-trip decimal.
    Number(Number),
    /// An exact integer beyond 64 bits, as its decimal digits.
    Digits(#[schemars(pattern(r"^-?[0-9]+$"))] String),
}

/// The `calc` plugin; it holds no state.
pub struct Calc;

/// Evaluates `expression` to a number, or says what is wrong and where.
pub fn evaluate(expression: &str) -> Result<Num, CalcError> {
    let length = expression.chars().count();
    if length > MAX_LENGTH {
        return Err(CalcError::new(0, ErrorKind::TooLong(length)));
    }
    if expression.trim().is_empty() {
        return Err(CalcError::new(0, ErrorKind::Empty));
    }
    let tokens = lex::tokens(expression)?;
    if let Some(converted) = units::convert(expression, &tokens) {
        return converted;
    }
    parse::evaluate(expression, &tokens)
}

/// Evaluates `expression` to the tool's answer; failures are `tool_error`s whose message
/// names the column.
pub fn calculate(expression: &str) -> Result<Answer, ToolError> {
    // Most expressions are integer arithmetic that fits a machine word: no big numbers then.
    if let Some(value) = integers::evaluate(expression) {
        return Ok(Answer::Number(value.into()));
    }
    evaluate(expression).and_then(|n| answer(n, expression)).map_err(|e| ToolError::tool_error(e.describe(expression)))
}

/// How a value is shown: whole numbers as integers, other values as floats.
fn answer(n: Num, expression: &str) -> Result<Answer, CalcError> {
    let end = expression.len();
    let f = match n {
        Num::Exact(r) if r.is_integer() => {
            let i = r.to_integer();
            return Ok(match (i.to_i64(), i.to_u64()) {
                (Some(v), _) => Answer::Number(v.into()),
                (None, Some(v)) => Answer::Number(v.into()),
                (None, None) => Answer::Digits(i.to_string()),
            });
        }
        // Not whole, so never shown as an integer, even when the nearest float is (`1.0` for
        // (10^20+1)/10^20): an integer answer says the value is exactly that integer.
        Num::Exact(r) => {
            return match number::exact_to_f64(&r) {
                0.0 => Err(CalcError::new(end, ErrorKind::TooSmall)),
                f => Number::from_f64(f).map(Answer::Number).ok_or(CalcError::new(end, ErrorKind::Overflow)),
            };
        }
        Num::Float(f) => f,
    };
    // Below 2^53 every whole float is an integer exactly; above, its digits would be made up.
    if f.fract() == 0.0 && f.abs() < 9_007_199_254_740_992.0 {
        return Ok(Answer::Number((f as i64).into()));
    }
    Number::from_f64(f).map(Answer::Number).ok_or(CalcError::new(end, ErrorKind::Overflow))
}

impl Plugin for Calc {
    const NAME: &'static str = "calc";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const DESCRIPTION: &'static str = "Arithmetic: evaluate an expression to a number, exactly where it can be.";
    type Config = NoConfig;

    fn init(_: NoConfig) -> Result<Self, String> {
        Ok(Calc)
    }

    fn tools() -> Vec<Tool<Self>> {
        vec![
            Tool::new(
                "calculate",
                "Evaluate arithmetic: + - * / (true division: 10/4 = 2.5), % remainder, 15% of 80, ^ or ** power, 3.5 squared, plus minus times divided by, parentheses, 1.5e3; \
                 functions sqrt cbrt abs exp ln log(x[, base]) log2 sin cos tan asin acos atan atan2 sinh cosh tanh floor ceil \
                 round(x[, digits]) min max mean average; constants pi e tau; a unit conversion as a whole expression, \
                 6 hours in minutes or 100 fahrenheit to celsius. Integers and fractions are exact; an integer past 64 bits comes back as a string of digits.",
                Effects::Pure,
                |_: &Calc, args: CalculateArgs| calculate(&args.expression),
            )
            .output::<Answer>()
            // Shown to a small model as worked exchanges, the two most like its request: how
            // words become an expression, one for each common way of asking. The first two
            // are shown when no other is alike. A percentage keeps the request's own words
            // (`15% of 80`, which calc reads): shown `10/100*50`, Gemma 3 270M wrote `15/80*10`
            // for "what's 15% of 80?"; a small model copies words better than it translates.
            .worked_example("What is 7 times 8?", json!({"expression": "7*8"}), json!(56))
            .worked_example("What is 10% of 50?", json!({"expression": "10% of 50"}), json!(5))
            .worked_example("What is the square root of 81?", json!({"expression": "sqrt(81)"}), json!(9))
            .worked_example("What is 6 squared?", json!({"expression": "6^2"}), json!(36))
            .worked_example("What's 2 to the power of 8?", json!({"expression": "2^8"}), json!(256))
            .worked_example("What is the average of 4, 8 and 9?", json!({"expression": "mean(4, 8, 9)"}), json!(7))
            .worked_example(
                "We share $60 equally between 5 friends. How much does each get?",
                json!({"expression": "60/5"}),
                json!(12),
            )
            .worked_example("How many grams are in 2.5 kilograms?", json!({"expression": "2.5 kilograms in grams"}), json!(2500))
            .worked_example(
                "A cyclist rides at 12 km/h for 4 hours. How far does she ride?",
                json!({"expression": "12*4"}),
                json!(48),
            )
            .worked_example("I used 20 liters to drive 300 km. How many km per liter?", json!({"expression": "300/20"}), json!(15))
            .worked_example("How much do 5 pens cost at $1.20 each?", json!({"expression": "5*1.20"}), json!(6))
            .worked_example(
                "An $80 jacket is 15% off. What does it cost now?",
                json!({"expression": "80 - 15% of 80"}),
                json!(68),
            )
            .worked_example(
                "By what percent did the price rise from 50 to 60?",
                json!({"expression": "(60-50)/50*100"}),
                json!(20),
            )
            .worked_example("What is 20 percent of 150?", json!({"expression": "20 percent of 150"}), json!(30))
            .worked_example("What's 15% of 200, minus 10?", json!({"expression": "15% of 200 - 10"}), json!(20))
            .worked_example(
                "I had 90 marbles and lost 1/3 of them. How many do I have left?",
                json!({"expression": "90-90*1/3"}),
                json!(60),
            )
            .worked_example("How many minutes are in 3 hours?", json!({"expression": "3 hours in minutes"}), json!(180))
            .worked_example("Round 7.4567 to 2 decimal places", json!({"expression": "round(7.4567, 2)"}), json!(7.46))
            .example(json!({"expression": "17/100*2340"}), json!(397.8))
            .example(json!({"expression": "2^10 + sqrt(16)"}), json!(1028))
            .example(json!({"expression": "sqrt(2)"}), json!(std::f64::consts::SQRT_2))
            .example_error(json!({"expression": "1/0"}), "tool_error"),
        ]
    }
}

harness_sdk::export_plugin!(Calc);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declared_examples_hold() {
        let calc = Calc;
        for tool in Calc::tools() {
            for ex in &tool.manifest().examples {
                let got = tool.call(&calc, ex.arguments.clone());
                match (&ex.result, &ex.error_code) {
                    (Some(want), _) => assert_eq!(got.as_ref().ok(), Some(want)),
                    (None, Some(code)) => assert_eq!(&got.unwrap_err().code, code),
                    (None, None) => panic!("example without an expectation"),
                }
            }
        }
    }

    #[test]
    fn whole_floats_are_integers_and_big_integers_are_digits() {
        assert_eq!(calculate("sin(0)").unwrap(), Answer::Number(0.into()));
        assert_eq!(calculate("-0.0").unwrap(), Answer::Number(0.into()));
        assert_eq!(calculate("exp(0) * 2^60").unwrap(), Answer::Number(Number::from_f64(2f64.powi(60)).unwrap()));
        assert_eq!(calculate("2^64-1").unwrap(), Answer::Number(u64::MAX.into()));
        assert_eq!(calculate("-2^64").unwrap(), Answer::Digits("-18446744073709551616".into()));
        assert!(calculate("1/10^400").unwrap_err().message.contains("smaller than the smallest float"));
        let almost_one = Answer::Number(Number::from_f64(1.0).unwrap());
        assert_eq!(calculate("(10^20+1)/10^20").unwrap(), almost_one);
        assert!(calculate("10^400+1/2").unwrap_err().message.contains("overflow"));
    }
}
