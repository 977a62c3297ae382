//! `calc`: a harness plugin with one tool, `calculate`, which evaluates arithmetic.
//!
//! Evaluation is done by the `evalexpr` crate. Integer arithmetic is checked: overflow and
//! division by zero are tool errors, as are results that are not finite numbers and
//! expressions that are not arithmetic (strings, booleans, assignments).

use evalexpr::{EvalexprError, Value as ExprValue};
use harness_sdk::schemars::JsonSchema;
use harness_sdk::serde::Deserialize;
use harness_sdk::serde_json::{Number, Value, json};
use harness_sdk::{Effects, NoConfig, Plugin, Tool, ToolError};

/// Arguments of `calculate`.
#[derive(Deserialize, JsonSchema)]
#[serde(crate = "harness_sdk::serde", deny_unknown_fields)]
#[schemars(crate = "harness_sdk::schemars")]
pub struct CalculateArgs {
    /// An arithmetic expression, e.g. `6*7` or `(1.5 + 2) / 4`.
    #[schemars(length(min = 1, max = 4096))]
    pub expression: String,
}

/// The `calc` plugin; it holds no state.
pub struct Calc;

/// Evaluates `expression` to a JSON number.
pub fn calculate(expression: &str) -> Result<Value, ToolError> {
    let value = evalexpr::eval(expression).map_err(|e| ToolError::tool_error(describe(expression, &e)))?;
    match value {
        ExprValue::Int(i) => Ok(Value::from(i)),
        ExprValue::Float(f) => Number::from_f64(f).map(Value::Number).ok_or_else(|| {
            ToolError::tool_error(format!("{expression:?} does not evaluate to a finite number (got {f})"))
        }),
        other => Err(ToolError::tool_error(format!(
            "{expression:?} is not arithmetic: it evaluates to {other:?}, not a number"
        ))),
    }
}

fn describe(expression: &str, error: &EvalexprError) -> String {
    match error {
        EvalexprError::DivisionError { divisor, .. } if is_zero(divisor) => {
            format!("division by zero in {expression:?}")
        }
        EvalexprError::ModulationError { divisor, .. } if is_zero(divisor) => {
            format!("remainder by zero in {expression:?}")
        }
        EvalexprError::AdditionError { .. }
        | EvalexprError::SubtractionError { .. }
        | EvalexprError::MultiplicationError { .. }
        | EvalexprError::DivisionError { .. }
        | EvalexprError::NegationError { .. } => {
            format!(
                "integer overflow in {expression:?} ({error}); write a number with a decimal point to use floating point"
            )
        }
        _ => format!("cannot evaluate {expression:?}: {error}"),
    }
}

fn is_zero(v: &ExprValue) -> bool {
    matches!(v, ExprValue::Int(0)) || matches!(v, ExprValue::Float(f) if *f == 0.0)
}

impl Plugin for Calc {
    const NAME: &'static str = "calc";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const DESCRIPTION: &'static str = "Arithmetic: evaluate an expression to a number.";
    type Config = NoConfig;

    fn init(_: NoConfig) -> Result<Self, String> {
        Ok(Calc)
    }

    fn tools() -> Vec<Tool<Self>> {
        vec![
            Tool::new(
                "calculate",
                "Calculate the value of an arithmetic expression (+ - * / % ^, parentheses, integers and decimals).",
                Effects::Pure,
                |_: &Calc, args: CalculateArgs| calculate(&args.expression),
            )
            .example(json!({"expression": "6*7"}), json!(42))
            .example(json!({"expression": "(1.5 + 2) / 4"}), json!(0.875))
            .example_error(json!({"expression": "1/0"}), "tool_error"),
        ]
    }
}

harness_sdk::export_plugin!(Calc);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_and_floats() {
        assert_eq!(calculate("6*7").unwrap(), json!(42));
        assert_eq!(calculate("(1.5 + 2) / 4").unwrap(), json!(0.875));
        assert_eq!(calculate("-3 + 10 % 4").unwrap(), json!(-1));
    }

    #[test]
    fn division_by_zero_is_a_clear_tool_error() {
        let e = calculate("1/0").unwrap_err();
        assert_eq!(e.code, "tool_error");
        assert!(e.message.contains("division by zero"), "{}", e.message);
        assert!(calculate("5 % 0").unwrap_err().message.contains("remainder by zero"));
        assert!(calculate("1.0/0.0").unwrap_err().message.contains("finite"));
    }

    #[test]
    fn overflow_is_a_tool_error() {
        let e = calculate("9223372036854775807 + 1").unwrap_err();
        assert!(e.message.contains("overflow"), "{}", e.message);
        assert!(calculate("9223372036854775807 * 2").unwrap_err().message.contains("overflow"));
    }

    #[test]
    fn syntax_errors_and_non_numbers() {
        assert!(calculate("6 *").unwrap_err().message.contains("cannot evaluate"));
        assert!(calculate("\"a\"").unwrap_err().message.contains("not arithmetic"));
        assert!(calculate("1 == 1").unwrap_err().message.contains("not arithmetic"));
    }

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
}
