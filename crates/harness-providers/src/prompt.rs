//! What the router is told: the system prompt of each router mode, and results written as text.

use std::fmt::Write as _;

use harness_core::ToolDefinition;
use serde_json::{Value, json};

/// The system prompt when the API forces the tool choice itself.
pub(crate) const NATIVE: &str = "You are the router of a tool-using agent: you never run anything yourself. \
Answer every turn with exactly one call of one of the offered tools (if you make several calls, they run in the order given). \
Never answer with plain text. When the request is done, call finish with the answer.";

/// The system prompt of the text modes (constrained and prompt): the tools and the reply shape,
/// for servers with no tool calling. It depends on the tools alone, so that it stays the same
/// from step to step and a server's prompt cache keeps it.
///
/// `compact` lists each tool on one line (name, first sentence, arguments), for a small
/// context: the full listing of the default plugins is about a thousand tokens, and a tiny
/// model copies the examples it is shown instead of doing the task.
pub(crate) fn prompt_mode(tools: &[ToolDefinition], compact: bool) -> String {
    if compact {
        return compact_prompt(tools);
    }
    let mut s = String::from(
        "You are the router of a tool-using agent: you never run anything yourself. At every turn you choose one \
tool call; the harness runs it and tells you the result.\n\nTools:\n",
    );
    for tool in tools {
        let _ = writeln!(s, "- {}: {}", tool.name, tool.description.trim());
        let _ = writeln!(s, "  arguments (JSON Schema): {}", tool.parameters);
        if let Some(example) = tool.examples.first() {
            let _ = writeln!(s, "  example: {}", json!({ "tool": tool.name, "arguments": example.arguments }));
        }
    }
    s.push_str(
        "\nAnswer every turn with exactly one JSON object and nothing else:\n{\"tool\": \"<tool name>\", \"arguments\": {...}}\n\
When the request is done, call finish: {\"tool\": \"finish\", \"arguments\": {\"answer\": <the answer>}}",
    );
    s
}

/// Prompt mode's system prompt in few words, one line a tool.
fn compact_prompt(tools: &[ToolDefinition]) -> String {
    let mut s = String::from(
        "You route a tool-using agent. Answer each turn with one tool call as JSON: {\"tool\": NAME, \"arguments\": {...}}. \
The harness runs it and tells you the result. When the request is done, call finish with the answer.\nTools:\n",
    );
    for tool in tools {
        let _ =
            writeln!(s, "- {}({}): {}", tool.name, argument_list(&tool.parameters), first_sentence(&tool.description));
    }
    s
}

/// The longest summary of a description in the compact listing, in bytes.
const SUMMARY_BYTES: usize = 80;

/// A description's first sentence (or clause, before a colon or semicolon), on one line and
/// cut at a word near [`SUMMARY_BYTES`].
fn first_sentence(description: &str) -> String {
    let text = description.trim().replace(['\n', '\r'], " ");
    let end = [". ", ": ", "; "].iter().filter_map(|stop| text.find(stop)).min().unwrap_or(text.len());
    let sentence = text[..end].trim_end_matches('.');
    if sentence.len() <= SUMMARY_BYTES {
        return format!("{sentence}.");
    }
    let cut = (0..=SUMMARY_BYTES).rev().find(|&i| sentence.is_char_boundary(i)).unwrap_or(0);
    let word = sentence[..cut].rfind(' ').unwrap_or(cut);
    format!("{}...", &sentence[..word])
}

/// A schema's arguments as `name: type` pairs, optional ones marked with `?`.
fn argument_list(parameters: &Value) -> String {
    let required: Vec<&str> = parameters
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let Some(Value::Object(properties)) = parameters.get("properties") else {
        return String::new();
    };
    let arguments: Vec<String> = properties
        .iter()
        .map(|(name, schema)| {
            let optional = if required.contains(&name.as_str()) { "" } else { "?" };
            // An argument of any type is its name alone: a word standing for the type (`any`)
            // is what a small model copies as the value.
            match schema.get("type") {
                Some(Value::String(t)) => format!("{name}{optional}: {t}"),
                Some(Value::Array(types)) => {
                    let names: Vec<&str> = types.iter().filter_map(Value::as_str).collect();
                    format!("{name}{optional}: {}", names.join("|"))
                }
                _ => format!("{name}{optional}"),
            }
        })
        .collect();
    arguments.join(", ")
}

/// The note that ends the conversation when one tool is forced, in the text modes.
pub(crate) fn forced_note(name: &str) -> String {
    format!("At this turn you must call {name}.")
}

/// The note that ends the conversation when the step offers a shortlist, in prompt mode.
pub(crate) fn shortlist_note(names: &[String]) -> String {
    format!("At this turn call one of: {}.", names.join(", "))
}

/// A step's outcome in the text modes, in few tokens: the call, its result, and what to do
/// next, e.g. `calculate({"expression":"6*7"}) = 42. If this answers the request, call finish
/// with answer 42.` A small model copies what it is shown: shown the call and the value to
/// finish with, it finishes with the value instead of calling again or copying a JSON error.
/// `call` is the tool and its arguments, when known; `again` marks a call made before;
/// `request` is the user's request, which names the member of an object result it asks for.
pub(crate) fn text_result(
    call: Option<(&str, Option<&Value>)>,
    content: &Value,
    is_error: bool,
    again: bool,
    request: &str,
) -> String {
    let Some((tool, arguments)) = call else {
        return result_note(None, content, is_error);
    };
    let called = match arguments {
        Some(arguments) => format!("{tool}({arguments})"),
        None => tool.to_owned(),
    };
    if is_error {
        let message = content.get("message").and_then(Value::as_str).map_or_else(|| content.to_string(), str::to_owned);
        return format!("{called} failed: {message}. Correct the call, or call another tool.");
    }
    let known = if again { " (known already: not run again)" } else { "" };
    match answer_in(tool, content, request) {
        Some(answer) => {
            format!("{called} = {content}{known}. If this answers the request, call finish with answer {answer}.")
        }
        None if asks_yes_or_no(request) => {
            format!("{called} = {content}{known}. If this answers the request, call finish with answer true or false.")
        }
        None => format!("{called} = {content}{known}. If this answers the request, call finish with the answer."),
    }
}

/// The words that open a question answered yes or no ("Is 391 divisible by 17?", "Does CCO
/// have 3 heavy atoms?").
const YES_OR_NO_OPENERS: &[&str] =
    &["is", "are", "was", "were", "does", "do", "did", "can", "could", "will", "would", "has", "have", "had", "should"];

/// Words that ask for more than yes or no ("is CCO valid, and what is 6*7?").
const OPEN_QUESTION_WORDS: &[&str] = &["what", "what's", "how", "which", "who", "when", "where", "why"];

/// Whether `request` is a question answered yes or no: it opens with a verb that asks one,
/// holds a question mark, and no word that asks for more. Its answer is `true` or `false`,
/// never the number a tool answered: Gemma 3 270M finished "Is 2^20 more than a million?" with
/// `1048576`, the value it was told to finish with.
pub(crate) fn asks_yes_or_no(request: &str) -> bool {
    request.contains('?')
        && question_words(request).next().is_some_and(|w| YES_OR_NO_OPENERS.contains(&w.as_str()))
        && !asks_open_question(request)
}

/// Whether `request` asks for more than yes or no ("How many heavy atoms does CCO have?",
/// "What's the formula of ...?"): it holds a word such as what, how or which.
pub(crate) fn asks_open_question(request: &str) -> bool {
    question_words(request).any(|w| OPEN_QUESTION_WORDS.contains(&w.as_str()))
}

/// The request's words as the two questions above read them: lower case, without the
/// punctuation around them (an apostrophe kept, for "what's").
fn question_words(request: &str) -> impl Iterator<Item = String> + '_ {
    request.split_whitespace().map(|w| w.trim_matches(|c: char| !c.is_alphanumeric() && c != '\'').to_lowercase())
}

/// The value of a result to finish with: the result itself when it is a number, a string or
/// a boolean; in an object, the member named like the tool (`molecular_weight` of
/// `molecular_weight`'s result), else the one member whose name the request says (`valid` for
/// "is CCO a valid SMILES?", `atom_count` for "how many atoms"); otherwise none. For a
/// yes-or-no question ([`asks_yes_or_no`]) only a boolean is an answer.
pub(crate) fn answer_in<'v>(tool: &str, content: &'v Value, request: &str) -> Option<&'v Value> {
    // A yes-or-no question is answered by a boolean alone.
    let yes_or_no = asks_yes_or_no(request);
    member_answer(tool, content, request).filter(|v| answers_kind(v, yes_or_no))
}

/// Whether `v` is an answer to a request of this kind: a yes-or-no question is answered by a
/// boolean alone, any other by any value.
pub(crate) fn answers_kind(v: &Value, yes_or_no: bool) -> bool {
    !yes_or_no || v.is_boolean()
}

/// [`answer_in`], whatever kind of question the request is.
pub(crate) fn member_answer<'v>(tool: &str, content: &'v Value, request: &str) -> Option<&'v Value> {
    let scalar = |v: &&Value| matches!(v, Value::Number(_) | Value::String(_) | Value::Bool(_));
    match content {
        Value::Number(_) | Value::String(_) | Value::Bool(_) => Some(content),
        Value::Object(members) => {
            let asked = request.to_lowercase();
            let named = |all: bool| -> Option<&'v Value> {
                let named: Vec<&Value> =
                    members.iter().filter(|(k, v)| scalar(v) && names(&asked, k, all)).map(|(_, v)| v).collect();
                // Two members named: the request does not say which; none is suggested.
                if let [only] = named.as_slice() { Some(*only) } else { None }
            };
            // "the molecular formula of CC(=O)O" names `formula` whole, and `molecular_weight`
            // only in part: the member named whole wins over the one named like the tool.
            named(true).or_else(|| members.get(tool).filter(scalar)).or_else(|| named(false))
        }
        _ => None,
    }
}

/// Whether `asked` (lower case) holds a word of the member name `key` (`atom` of `atom_count`),
/// or with `all` every such word: a word of four letters or more, at the start of a word of
/// the request.
fn names(asked: &str, key: &str, all: bool) -> bool {
    let said = |part: &str| {
        let part = part.to_lowercase();
        asked.match_indices(&part).any(|(at, _)| at == 0 || !asked.as_bytes()[at - 1].is_ascii_alphanumeric())
    };
    let mut parts = key.split('_').filter(|part| part.len() >= 4).peekable();
    match all {
        true => parts.peek().is_some() && parts.all(said),
        false => parts.any(said),
    }
}

/// A step's outcome written for a user turn, when it answers no structured call.
pub(crate) fn result_note(tool: Option<&str>, content: &Value, is_error: bool) -> String {
    match (tool, is_error) {
        (Some(tool), false) => format!("Result of {tool}: {content}"),
        (Some(tool), true) => format!("Error from the call to {tool}: {content}"),
        (None, _) => format!("Your reply could not be used: {content}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use harness_core::{ToolExample, ToolSource};

    #[test]
    fn a_yes_or_no_question_is_answered_by_a_boolean_alone() {
        for yes_or_no in ["Is 391 divisible by 17?", "Is 2^20 more than a million?", "does CCO have 3 heavy atoms?"] {
            assert!(asks_yes_or_no(yes_or_no), "{yes_or_no}");
        }
        for open in [
            "is CCO valid, and what is 6*7?",
            "Is 391 divisible by 17",
            "What is 6*7?",
            "If CCO is valid, how heavy is it?",
        ] {
            assert!(!asks_yes_or_no(open), "{open}");
        }
        let asked = "Is 2^20 more than a million?";
        assert_eq!(answer_in("calculate", &json!(1048576), asked), None);
        assert_eq!(answer_in("calculate", &json!(1048576), "What is 2^20?"), Some(&json!(1048576)));
        assert_eq!(
            answer_in("validate_smiles", &json!({"valid": false, "formula": null}), "Is CC(C a valid SMILES?"),
            Some(&json!(false))
        );
        let note = text_result(
            Some(("calculate", Some(&json!({"expression": "2^20"})))),
            &json!(1048576),
            false,
            false,
            asked,
        );
        assert!(note.ends_with("call finish with answer true or false."), "{note}");
    }

    #[test]
    fn the_compact_listing_is_one_line_a_tool_without_schemas_or_examples() {
        let tool = ToolDefinition {
            name: "calculate".into(),
            description: "Evaluate an arithmetic expression. Supports + - * / and parentheses.".into(),
            parameters: json!({"type": "object", "properties": {"expression": {"type": "string"}, "digits": {"type": "integer"}}, "required": ["expression"]}),
            examples: vec![ToolExample {
                arguments: json!({"expression": "17/100*2340"}),
                result: None,
                request: None,
            }],
            source: ToolSource::Builtin,
        };
        let compact = prompt_mode(std::slice::from_ref(&tool), true);
        assert!(
            compact.contains("- calculate(digits?: integer, expression: string): Evaluate an arithmetic expression.\n"),
            "{compact}"
        );
        assert_eq!(first_sentence("Evaluate arithmetic: + - * /"), "Evaluate arithmetic.");
        let long = first_sentence(&"word ".repeat(40));
        assert!(long.len() <= SUMMARY_BYTES + 3 && long.ends_with("word..."), "{long}");
        assert!(!compact.contains("17/100") && !compact.contains("Supports"), "{compact}");
        let full = prompt_mode(&[tool], false);
        assert!(full.contains("17/100*2340") && full.len() > compact.len(), "{full}");
    }

    #[test]
    fn a_result_is_fed_back_with_its_call_and_the_value_to_finish_with() {
        let calc = text_result(Some(("calculate", Some(&json!({"expression": "6*7"})))), &json!(42), false, false, "");
        assert_eq!(
            calc,
            r#"calculate({"expression":"6*7"}) = 42. If this answers the request, call finish with answer 42."#
        );
        let valid = json!({"atom_count": 3, "error": null, "formula": "C2H6O", "valid": true});
        let shown = Some(("validate_smiles", Some(&json!({"smiles": "CCO"}))));
        let note = text_result(shown, &valid, false, true, "Is CCO a valid SMILES?");
        assert!(
            note.ends_with(
                "(known already: not run again). If this answers the request, call finish with answer true."
            ),
            "{note}"
        );
        let atoms = text_result(shown, &valid, false, false, "how many heavy atoms in CCO");
        assert!(atoms.ends_with("call finish with answer 3."), "{atoms}");
        // A member named whole beats the one named like the tool, named in part.
        let weight = json!({"molecular_weight": 60.052, "formula": "C2H4O2"});
        let formula =
            text_result(Some(("molecular_weight", None)), &weight, false, false, "the molecular formula of CC(=O)O?");
        assert!(formula.ends_with("call finish with answer \"C2H4O2\"."), "{formula}");
        let weighed = text_result(Some(("molecular_weight", None)), &weight, false, false, "how heavy is CC(=O)O?");
        assert!(weighed.ends_with("call finish with answer 60.052."), "{weighed}");
        // Nothing named: no value is suggested.
        let open = text_result(shown, &valid, false, false, "tell me about CCO");
        assert!(open.ends_with("call finish with the answer."), "{open}");
        let failed = text_result(
            Some(("calculate", None)),
            &json!({"code": "tool_error", "message": "division by zero"}),
            true,
            false,
            "",
        );
        assert_eq!(failed, "calculate failed: division by zero. Correct the call, or call another tool.");
    }
}
