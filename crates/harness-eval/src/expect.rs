//! What a right answer is, and the scoring of one answer against it (the rules are in
//! docs/eval.md; they are strict: an answer a person would have to interpret is wrong).

use serde_json::{Map, Value};

use crate::numbers::numbers_in;

/// What a right answer is, from a task's `expect`.
#[derive(Debug, Clone, PartialEq)]
pub enum Expect {
    /// A number, within `tolerance` (absolute); without one, float rounding only.
    Number {
        /// The expected value.
        value: f64,
        /// The largest difference that is still right.
        tolerance: Option<f64>,
    },
    /// Yes (`true`) or no.
    YesNo(bool),
    /// A string, compared trimmed, case-insensitively unless `case_sensitive`.
    Text {
        /// The expected text.
        text: String,
        /// Whether case matters.
        case_sensitive: bool,
    },
    /// A JSON value, compared as JSON (numbers by value, objects in any key order).
    Json(Value),
    /// Right by any of these.
    OneOf(Vec<Expect>),
}

/// Whether an answer is right, and why not when it is not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// Right or wrong.
    pub right: bool,
    /// Why it is wrong (`3 numbers in the answer, want exactly one`), or None when right.
    pub why: Option<String>,
}

impl Verdict {
    fn right() -> Self {
        Self { right: true, why: None }
    }

    /// A wrong answer, for this reason.
    pub fn wrong(why: impl Into<String>) -> Self {
        Self { right: false, why: Some(why.into()) }
    }
}

/// The kinds an `expect` may be, for messages.
const KINDS: &str = "\"number\", \"yes_no\", \"text\", \"json\" or \"one_of\"";

/// A field at fault (its path, `expect.tolerance`) and what is wrong with it.
pub type FieldError = (String, String);

impl Expect {
    /// Reads an `expect` object; `at` is its field path (`expect`, `expect.one_of[1]`).
    pub fn parse(value: &Value, at: &str) -> Result<Self, FieldError> {
        let fail = |field: &str, problem: String| Err((format!("{at}{field}"), problem));
        let Value::Object(obj) = value else {
            return fail("", format!("must be an object with one of {KINDS}, as {{\"number\": 42}}"));
        };
        let kinds: Vec<&str> =
            ["number", "yes_no", "text", "json", "one_of"].into_iter().filter(|k| obj.contains_key(*k)).collect();
        let [kind] = kinds[..] else {
            return fail("", format!("give exactly one of {KINDS}; it has {}", kinds.len()));
        };
        let allowed: &[&str] = match kind {
            "number" => &["number", "tolerance"],
            "text" => &["text", "case_sensitive"],
            other => &[other],
        };
        if let Some(extra) = obj.keys().find(|k| !allowed.contains(&k.as_str())) {
            return fail(&format!(".{extra}"), format!("not a field of a \"{kind}\" expect (it takes {allowed:?})"));
        }
        Self::parse_kind(kind, obj, at)
    }

    fn parse_kind(kind: &str, obj: &Map<String, Value>, at: &str) -> Result<Self, FieldError> {
        let field = |name: &str| format!("{at}.{name}");
        match kind {
            "number" => {
                let value = obj["number"].as_f64().ok_or_else(|| (field("number"), "must be a number".to_owned()))?;
                let tolerance = match obj.get("tolerance") {
                    None => None,
                    Some(t) => Some(t.as_f64().filter(|t| *t >= 0.0).ok_or_else(|| {
                        (field("tolerance"), "must be a number from 0 (the largest difference still right)".to_owned())
                    })?),
                };
                Ok(Self::Number { value, tolerance })
            }
            "yes_no" => match obj["yes_no"].as_str() {
                Some("yes") => Ok(Self::YesNo(true)),
                Some("no") => Ok(Self::YesNo(false)),
                _ => Err((field("yes_no"), "must be \"yes\" or \"no\"".to_owned())),
            },
            "text" => {
                let text = obj["text"].as_str().ok_or_else(|| (field("text"), "must be a string".to_owned()))?;
                let case_sensitive = match obj.get("case_sensitive") {
                    None => false,
                    Some(v) => {
                        v.as_bool().ok_or_else(|| (field("case_sensitive"), "must be true or false".to_owned()))?
                    }
                };
                Ok(Self::Text { text: text.to_owned(), case_sensitive })
            }
            "json" => Ok(Self::Json(obj["json"].clone())),
            _ => {
                let Some(list) = obj["one_of"].as_array().filter(|l| !l.is_empty()) else {
                    return Err((field("one_of"), "must be a non-empty array of expects".to_owned()));
                };
                let parsed = list.iter().enumerate().map(|(i, e)| Self::parse(e, &format!("{at}.one_of[{i}]")));
                Ok(Self::OneOf(parsed.collect::<Result<_, _>>()?))
            }
        }
    }

    /// The expected answer, short, for a report.
    pub fn describe(&self) -> String {
        match self {
            Self::Number { value, tolerance: Some(t) } => format!("{value} ± {t}"),
            Self::Number { value, tolerance: None } => value.to_string(),
            Self::YesNo(yes) => (if *yes { "yes" } else { "no" }).to_owned(),
            Self::Text { text, .. } => format!("{text:?}"),
            Self::Json(v) => v.to_string(),
            Self::OneOf(list) => list.iter().map(Self::describe).collect::<Vec<_>>().join(" | "),
        }
    }
}

/// Scores one answer against what is expected.
pub fn score(expect: &Expect, answer: &Value) -> Verdict {
    match expect {
        Expect::Number { value, tolerance } => number(*value, *tolerance, answer),
        Expect::YesNo(yes) => yes_no(*yes, answer),
        Expect::Text { text, case_sensitive } => same_text(text, *case_sensitive, answer),
        Expect::Json(want) => {
            let parsed = answer.as_str().and_then(|s| serde_json::from_str::<Value>(s).ok());
            if json_eq(want, answer) || parsed.is_some_and(|p| json_eq(want, &p)) {
                Verdict::right()
            } else {
                Verdict::wrong("not the expected JSON value")
            }
        }
        Expect::OneOf(list) => {
            let verdicts: Vec<Verdict> = list.iter().map(|e| score(e, answer)).collect();
            if verdicts.iter().any(|v| v.right) {
                return Verdict::right();
            }
            let whys: Vec<String> = verdicts.into_iter().filter_map(|v| v.why).collect();
            Verdict::wrong(format!("none of the expects: {}", whys.join("; ")))
        }
    }
}

fn number(want: f64, tolerance: Option<f64>, answer: &Value) -> Verdict {
    let got = match answer {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => match numbers_in(s)[..] {
            [one] => Some(one),
            [] => return Verdict::wrong("no number in the answer"),
            ref many => return Verdict::wrong(format!("{} numbers in the answer, want exactly one", many.len())),
        },
        other => return Verdict::wrong(format!("the answer is {}, not a number or a string", kind(other))),
    };
    let Some(got) = got else { return Verdict::wrong("the answer is not a finite number") };
    let tolerance = tolerance.unwrap_or(1e-9 * want.abs().max(1.0));
    if (got - want).abs() <= tolerance { Verdict::right() } else { Verdict::wrong(format!("{got} is not {want}")) }
}

fn yes_no(want: bool, answer: &Value) -> Verdict {
    let got = match answer {
        Value::Bool(b) => Some(*b),
        Value::String(s) => {
            let first: String = s.trim().chars().take_while(char::is_ascii_alphabetic).collect();
            match first.to_ascii_lowercase().as_str() {
                "yes" | "true" => Some(true),
                "no" | "false" => Some(false),
                _ => None,
            }
        }
        _ => None,
    };
    match got {
        Some(got) if got == want => Verdict::right(),
        Some(got) => Verdict::wrong(format!("said {}", if got { "yes" } else { "no" })),
        None => Verdict::wrong("neither yes nor no (a string must start with yes, no, true or false)"),
    }
}

fn same_text(want: &str, case_sensitive: bool, answer: &Value) -> Verdict {
    let got = match answer {
        Value::String(s) => s.clone(),
        Value::Number(_) | Value::Bool(_) => answer.to_string(),
        other => return Verdict::wrong(format!("the answer is {}, not text", kind(other))),
    };
    let (got, want) = (got.trim(), want.trim());
    let same = if case_sensitive { got == want } else { got.to_lowercase() == want.to_lowercase() };
    if same { Verdict::right() } else { Verdict::wrong("not the expected text") }
}

/// JSON equality with numbers compared by value (`1` equals `1.0`).
fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x == y || x.as_f64().is_some_and(|x| y.as_f64() == Some(x)),
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(x, y)| json_eq(x, y)),
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| json_eq(v, w)))
        }
        _ => a == b,
    }
}

/// A JSON value's kind, for messages: the batch reader's, so both say it alike.
pub(crate) use harness_batch::input::kind;

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn expect(v: Value) -> Expect {
        Expect::parse(&v, "expect").unwrap()
    }

    fn right(e: &Value, answer: Value) -> bool {
        score(&expect(e.clone()), &answer).right
    }

    #[test]
    fn numbers_are_read_strictly() {
        let e = json!({"number": 42});
        for answer in [json!(42), json!(42.0), json!("42"), json!("The answer is 42."), json!(" 42 ")] {
            assert!(right(&e, answer.clone()), "{answer}");
        }
        for answer in
            [json!(43), json!("6*7 = 42"), json!("forty-two"), json!(true), json!({"result": 42}), json!(null)]
        {
            assert!(!right(&e, answer.clone()), "{answer}");
        }
        let why = score(&expect(e), &json!("6*7 = 42")).why.unwrap();
        assert_eq!(why, "3 numbers in the answer, want exactly one");
    }

    #[test]
    fn a_tolerance_is_absolute_and_without_one_only_rounding_passes() {
        let e = json!({"number": 180.159, "tolerance": 0.01});
        assert!(right(&e, json!("180.16 g/mol")));
        assert!(right(&e, json!(180.15)));
        assert!(!right(&e, json!(180.17)));
        let exact = json!({"number": 0.3});
        assert!(right(&exact, json!(0.1 + 0.2)), "float rounding is within the default");
        assert!(!right(&exact, json!(0.3001)));
    }

    #[test]
    fn yes_and_no_are_read_by_the_first_word() {
        let e = json!({"yes_no": "yes"});
        for answer in [json!(true), json!("yes"), json!("Yes, CCO is valid."), json!("TRUE")] {
            assert!(right(&e, answer.clone()), "{answer}");
        }
        for answer in [json!(false), json!("no"), json!("valid"), json!("It is valid"), json!(1), json!("yesterday")] {
            assert!(!right(&e, answer.clone()), "{answer}");
        }
        assert!(right(&json!({"yes_no": "no"}), json!("No, the ring is not closed")));
        assert_eq!(score(&expect(e), &json!("no")).why.as_deref(), Some("said no"));
    }

    #[test]
    fn text_is_trimmed_and_case_insensitive_unless_told() {
        let e = json!({"text": "C8H10N4O2"});
        assert!(right(&e, json!(" c8h10n4o2\n")));
        assert!(!right(&e, json!("C8H10N4O2.")));
        assert!(!right(&e, json!(["C8H10N4O2"])));
        let strict = json!({"text": "Ab", "case_sensitive": true});
        assert!(right(&strict, json!("Ab ")));
        assert!(!right(&strict, json!("ab")));
        assert!(right(&json!({"text": "42"}), json!(42)));
    }

    #[test]
    fn json_compares_values_and_reads_a_string() {
        let e = json!({"json": {"a": [1, 2], "b": null}});
        assert!(right(&e, json!({"b": null, "a": [1.0, 2]})));
        assert!(right(&e, json!("{\"a\": [1, 2], \"b\": null}")));
        assert!(!right(&e, json!({"a": [2, 1], "b": null})));
        assert!(right(&json!({"json": "abc"}), json!("abc")));
    }

    #[test]
    fn one_of_is_right_by_any() {
        let e = json!({"one_of": [{"number": 3}, {"text": "three"}]});
        assert!(right(&e, json!("Three")));
        assert!(right(&e, json!(3)));
        assert!(!right(&e, json!("four")));
    }

    #[test]
    fn bad_expects_name_their_field() {
        let bad = |v: Value| Expect::parse(&v, "expect").unwrap_err();
        assert_eq!(bad(json!(42)).0, "expect");
        assert_eq!(bad(json!({})).0, "expect");
        assert_eq!(bad(json!({"number": 1, "text": "1"})).0, "expect");
        assert_eq!(bad(json!({"number": "12"})).0, "expect.number");
        assert_eq!(bad(json!({"number": 1, "tolerance": -1})).0, "expect.tolerance");
        assert_eq!(bad(json!({"number": 1, "tolrance": 1})).0, "expect.tolrance");
        assert_eq!(bad(json!({"yes_no": true})).0, "expect.yes_no");
        assert_eq!(bad(json!({"text": "a", "case_sensitive": "no"})).0, "expect.case_sensitive");
        assert_eq!(bad(json!({"one_of": []})).0, "expect.one_of");
        assert_eq!(bad(json!({"one_of": [{"number": 1}, {"yes_no": 1}]})).0, "expect.one_of[1].yes_no");
    }
}
