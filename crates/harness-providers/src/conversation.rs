//! The loop's conversation regrouped into the turns a chat API takes.
//!
//! The loop records one `Assistant` message per reply and then one `ToolResult` per call, in
//! order. A chat API wants each result tied to a call of the reply just before it: results
//! that answer no such call (a reply with no usable call, or a call read from text) go back
//! as text in a user turn instead, and a call left unanswered is answered with a note, so
//! that no API refuses the history.

use harness_core::{Message, ModelReply, ProposedCall, ToolDefinition};
use serde_json::{Value, json};

use crate::prompt;

/// A structured call, with the id the API knows it by.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct CallOut<'a> {
    pub(crate) id: String,
    pub(crate) call: &'a ProposedCall,
}

/// A result that answers one call of the previous assistant turn.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ResultOut {
    pub(crate) call_id: String,
    /// The result as text: a string as it is, anything else as JSON.
    pub(crate) content: String,
    pub(crate) is_error: bool,
}

/// One turn of the conversation, as the APIs group them.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Turn<'a> {
    /// Text from the user's side.
    User(String),
    /// A model reply: its text and its structured calls.
    Assistant { text: Option<String>, calls: Vec<CallOut<'a>> },
    /// The results of the previous assistant turn's calls, in order, then any notes that
    /// answer no call.
    Results { results: Vec<ResultOut>, notes: Vec<String> },
}

/// The conversation for an API that takes structured tool calls and results.
pub(crate) fn native(conversation: &[Message]) -> Vec<Turn<'_>> {
    let mut turns = Vec::new();
    // Calls of the last assistant turn not yet answered: (id, whether the model gave the id).
    let mut pending: Vec<(String, bool)> = Vec::new();
    for (at, message) in conversation.iter().enumerate() {
        match message {
            Message::User { content } => push_note(&mut turns, content.clone()),
            Message::Assistant { reply } => {
                answer_leftovers(&mut turns, &mut pending);
                let calls: Vec<CallOut<'_>> = reply
                    .calls
                    .iter()
                    .enumerate()
                    .map(|(i, call)| CallOut { id: call.id.clone().unwrap_or_else(|| format!("call_{at}_{i}")), call })
                    .collect();
                pending = reply.calls.iter().zip(&calls).map(|(c, out)| (out.id.clone(), c.id.is_some())).collect();
                turns.push(Turn::Assistant { text: reply.text.clone().filter(|t| !t.is_empty()), calls });
            }
            Message::ToolResult { call_id, tool, content, is_error } => {
                let matched = match call_id {
                    Some(id) => pending.iter().position(|(p, _)| p == id),
                    None => None,
                }
                // A call the model gave no id to is answered in order.
                .or_else(|| pending.first().filter(|(_, given)| !given).map(|_| 0));
                match matched {
                    Some(i) => {
                        let (id, _) = pending.remove(i);
                        let result = ResultOut { call_id: id, content: as_text(content), is_error: *is_error };
                        results_turn(&mut turns).0.push(result);
                    }
                    None => push_note(&mut turns, prompt::result_note(tool.as_deref(), content, *is_error)),
                }
            }
        }
    }
    answer_leftovers(&mut turns, &mut pending);
    turns
}

/// The conversation as plain text, for the text modes: calls written out as JSON, each result
/// as user text that names its call (see [`prompt::text_result`]), consecutive user texts
/// joined so that the roles alternate.
pub(crate) fn text_only(conversation: &[Message]) -> Vec<Turn<'_>> {
    let mut turns = Vec::new();
    // Every call made so far, to say when one is made again.
    let mut calls = PendingCalls::default();
    let mut made: Vec<(String, Option<Value>)> = Vec::new();
    let request = request_of(conversation);
    for message in conversation {
        match message {
            Message::User { content } => push_note(&mut turns, content.clone()),
            Message::Assistant { reply } => {
                calls.replied(reply);
                turns.push(assistant_as_text(reply));
            }
            Message::ToolResult { tool, content, is_error, .. } => {
                let call = match (calls.answered(tool.as_ref()), tool) {
                    (Some(call), _) => Some(call),
                    (None, Some(tool)) => Some((tool.clone(), None)),
                    (None, None) => None,
                };
                let again = call.as_ref().is_some_and(|c| c.1.is_some() && made.contains(c));
                let shown = call.as_ref().map(|(name, arguments)| (name.as_str(), arguments.as_ref()));
                push_note(&mut turns, prompt::text_result(shown, content, *is_error, again, request));
                if let Some(call) = call.filter(|_| !*is_error) {
                    made.push(call);
                }
            }
        }
    }
    turns
}

/// The calls that ended in an error (a tool's error, a refused argument, a repeat refused), as
/// tool names and arguments, in order: what a small model must not be offered again, since
/// greedy decoding answers the same conversation with the same call.
pub(crate) fn failed_calls(conversation: &[Message]) -> Vec<(String, Value)> {
    let mut calls = PendingCalls::default();
    let mut failed = Vec::new();
    for message in conversation {
        match message {
            Message::Assistant { reply } => calls.replied(reply),
            Message::ToolResult { tool, is_error, .. } => {
                if let Some((name, Some(arguments))) = calls.answered(tool.as_ref()).filter(|_| *is_error) {
                    failed.push((name, arguments));
                }
            }
            Message::User { .. } => {}
        }
    }
    failed
}

/// The last reply's calls not yet answered, in order: each result answers the next one, when
/// it names that call's tool. One rule for every reader of the conversation that pairs results
/// with calls ([`text_only`], [`failed_calls`]).
#[derive(Default)]
struct PendingCalls(std::collections::VecDeque<(String, Option<Value>)>);

impl PendingCalls {
    /// A new reply: its calls are the ones pending now.
    fn replied(&mut self, reply: &ModelReply) {
        self.0 = calls_of(reply).into();
    }

    /// The call a result of `tool` answers, if the next pending call is of that tool.
    fn answered(&mut self, tool: Option<&String>) -> Option<(String, Option<Value>)> {
        self.0.pop_front().filter(|(name, _)| Some(name) == tool)
    }
}

/// The user's request ([`harness_core::request_of`]), or empty when there is none.
pub(crate) fn request_of(conversation: &[Message]) -> &str {
    harness_core::request_of(conversation).unwrap_or_default()
}

/// A call as the text modes write it, `{"tool": NAME, "arguments": {...}}`: written by hand so
/// that the keys come in the order the prompt shows.
fn call_text(name: &str, arguments: impl std::fmt::Display) -> String {
    format!("{{\"tool\": {}, \"arguments\": {}}}", Value::from(name), arguments)
}

/// The most worked exchanges shown for one tool: enough to show the pattern, few enough that a
/// small context keeps room for the run. Two, not three: the small models of the eval answered
/// at least as many requests right on fewer tokens, and with one they answered fewer (the
/// figures are in docs/benchmarks.md).
const WORKED_PER_TOOL: usize = 2;

/// Worked exchanges built from the tools' declared examples that name a request: the request,
/// the call, its result as [`prompt::text_result`] writes it, and `finish` with the answer,
/// turn by turn. A small model copies what it is shown; shown how a request becomes arguments
/// (`What is 7 times 8?` to `7*8`), it translates the next one instead of copying its
/// words. Of a tool's worked examples, the [`WORKED_PER_TOOL`] most like `request` are shown
/// (the first declared where none is alike), so that a plugin may declare one for each way its
/// requests are phrased and a small model sees the steps nearest its own: told how "6 squared"
/// becomes `6^2`, it writes `3.5^2` for "3.5 squared" where it wrote `3.5*3.5*3.5`. The most
/// alike come last, nearest the request: a small model follows the last exchange it saw, and
/// with the chemistry examples last SmolLM2-135M and Gemma 3 270M sent "how much is 12 times
/// 17" to `molecular_weight`. Both depend on the request alone, so the exchanges stay the same
/// from step to step and a server's prompt cache keeps them.
pub(crate) fn worked_exchanges(tools: &[ToolDefinition], request: &str) -> Vec<Turn<'static>> {
    let worked: Vec<Worked<'_>> = tools.iter().flat_map(worked_examples).collect();
    let likeness = likeness(request, worked.iter().map(|w| w.1));
    let tools: Vec<&str> = worked.iter().map(|w| w.0).collect();
    shown(&tools, &likeness).into_iter().flat_map(|i| exchange(worked[i])).collect()
}

/// A worked example as its exchange needs it: the tool's name, the request, the arguments and
/// the result.
type Worked<'t> = (&'t str, &'t str, &'t Value, &'t Value);

/// The examples of `tool` that name a request and a result: those shown as worked exchanges.
fn worked_examples(tool: &ToolDefinition) -> impl Iterator<Item = Worked<'_>> {
    let name = tool.name.as_str();
    tool.examples.iter().filter_map(move |e| Some((name, e.request.as_deref()?, &e.arguments, e.result.as_ref()?)))
}

/// One worked exchange: the request, the call, its result, and `finish` with the answer.
fn exchange((tool, asked, arguments, result): Worked<'_>) -> [Turn<'static>; 4] {
    let call =
        |name: &str, arguments: &Value| Turn::Assistant { text: Some(call_text(name, arguments)), calls: Vec::new() };
    let answer = prompt::answer_in(tool, result, asked).unwrap_or(result);
    [
        Turn::User(asked.to_owned()),
        call(tool, arguments),
        Turn::User(prompt::text_result(Some((tool, Some(arguments))), result, false, false, asked)),
        call(harness_core::FINISH, &json!({ "answer": answer })),
    ]
}

/// Which worked examples are shown, in the order shown, given each one's tool and likeness:
/// each tool's [`WORKED_PER_TOOL`] most alike (ties to the first declared), the least alike
/// first; examples alike to the request keep the listing's order (a stable sort).
fn shown(tools: &[&str], likeness: &[f64]) -> Vec<usize> {
    let mut best_first: Vec<usize> = (0..tools.len()).collect();
    best_first.sort_by(|a, b| likeness[*b].total_cmp(&likeness[*a]));
    let mut kept: Vec<usize> = Vec::new();
    for i in best_first {
        if kept.iter().filter(|&&k| tools[k] == tools[i]).count() < WORKED_PER_TOOL {
            kept.push(i);
        }
    }
    kept.sort_by(|a, b| likeness[*a].total_cmp(&likeness[*b]).then(a.cmp(b)));
    kept
}

/// How like `request` each of the `examples` is: the words they share, each weighted by how
/// few examples hold it (a word every example holds says nothing), over the square root of the
/// example's own count of words, so that of two examples sharing the same words the one that
/// says little else is the more alike ("what's 15% of 80?" is more like "What is 10% of 50?"
/// than "An $80 jacket is 15% off. What does it cost now?").
fn likeness<'e>(request: &str, examples: impl Iterator<Item = &'e str>) -> Vec<f64> {
    let asked = example_words(request);
    let examples: Vec<Vec<String>> = examples.map(example_words).collect();
    let holding = |word: &String| examples.iter().filter(|e| e.contains(word)).count();
    let n = examples.len() as f64;
    let shared = |e: &Vec<String>| -> f64 {
        e.iter().filter(|w| asked.contains(w)).map(|w| ((n + 1.0) / holding(w) as f64).ln()).sum()
    };
    examples.iter().map(|e| shared(e) / (e.len().max(1) as f64).sqrt()).collect()
}

/// The words of a request that say what it asks, once each: lower-cased runs of letters of
/// three or more, a plural's `s` dropped (`costs` is `cost`, `hours` is `hour`); `#` for any run
/// that holds a digit (the numbers of an arithmetic request); and `%`, the one sign that says
/// what a request asks ("25% off", "7% sales tax").
fn example_words(text: &str) -> Vec<String> {
    // Not `many`: "how many days are in 9 weeks?" is like "How many minutes are in 3 hours?"
    // by that word alone, and without it SmolLM2-135M and Gemma 3 270M were shown no
    // conversion (and wrote `9 weeks in 9 weeks`, `9weeks`).
    const STOP: [&str; 11] = ["what", "the", "how", "much", "and", "for", "with", "does", "are", "this", "that"];
    let mut words: Vec<String> = Vec::new();
    for run in text.split_inclusive(|c: char| !c.is_alphanumeric()) {
        let (run, sign) = match run.strip_suffix(|c: char| !c.is_alphanumeric()) {
            Some(letters) => (letters, run.ends_with('%')),
            None => (run, false),
        };
        let word = match run.chars().any(|c| c.is_ascii_digit()) {
            true => Some("#".to_owned()),
            false => Some(run.to_lowercase()).filter(|w| w.chars().count() >= 3 && !STOP.contains(&w.as_str())),
        };
        for word in word.into_iter().map(singular).chain(sign.then(|| "%".to_owned())) {
            if !words.contains(&word) {
                words.push(word);
            }
        }
    }
    words
}

/// A word without its plural's `s`: `hours` and `hour` are one word, `glass` stays `glass`.
fn singular(word: String) -> String {
    match word.strip_suffix('s') {
        Some(stem) if stem.chars().count() >= 3 && !stem.ends_with('s') => stem.to_owned(),
        _ => word,
    }
}

/// The text of the longest [`worked_exchanges`] a request can select, for counting its tokens:
/// the context estimate holds for any request.
pub(crate) fn worked_text(tools: &[ToolDefinition]) -> String {
    let text = |turns: [Turn<'static>; 4]| {
        let texts = turns.into_iter().filter_map(|turn| match turn {
            Turn::User(text) | Turn::Assistant { text: Some(text), .. } => Some(text),
            _ => None,
        });
        texts.collect::<Vec<_>>().join("\n")
    };
    let mut longest: Vec<String> = Vec::new();
    for tool in tools {
        let mut texts: Vec<String> = worked_examples(tool).map(|w| text(exchange(w))).collect();
        texts.sort_by_key(|t| std::cmp::Reverse(t.len()));
        longest.extend(texts.into_iter().take(WORKED_PER_TOOL));
    }
    longest.join("\n")
}

/// A reply's calls as tool names and arguments: its structured calls, or the one call its
/// text holds as `{"tool": NAME, "arguments": {...}}` (how the text modes answer).
fn calls_of(reply: &ModelReply) -> Vec<(String, Option<Value>)> {
    if !reply.calls.is_empty() {
        let arguments = |c: &ProposedCall| match c.arguments.to_value().into_owned() {
            // An API's arguments are JSON text: shown as the object they hold.
            Value::String(text) => serde_json::from_str(&text).unwrap_or(Value::String(text)),
            other => other,
        };
        return reply.calls.iter().map(|c| (c.name.clone(), Some(arguments(c)))).collect();
    }
    let parsed = reply.text.as_deref().and_then(|t| serde_json::from_str::<Value>(t.trim()).ok());
    match parsed {
        Some(Value::Object(mut call)) => match (call.remove("tool"), call.remove("arguments")) {
            (Some(Value::String(name)), arguments) => vec![(name, arguments)],
            _ => Vec::new(),
        },
        _ => Vec::new(),
    }
}

/// A reply as text: its own text, then each structured call written out as JSON.
fn assistant_as_text(reply: &ModelReply) -> Turn<'static> {
    let mut parts: Vec<String> = reply.text.iter().filter(|t| !t.is_empty()).cloned().collect();
    for call in &reply.calls {
        parts.push(call_text(&call.name, &call.arguments));
    }
    Turn::Assistant { text: Some(parts.join("\n")).filter(|t| !t.is_empty()), calls: Vec::new() }
}

/// Answers every call still pending with a note saying it did not run.
fn answer_leftovers(turns: &mut Vec<Turn<'_>>, pending: &mut Vec<(String, bool)>) {
    for (id, _) in pending.drain(..) {
        let content = json!({ "code": "not_run", "message": "this call did not run" }).to_string();
        results_turn(turns).0.push(ResultOut { call_id: id, content, is_error: true });
    }
}

/// The results turn right after the last assistant turn, made when needed.
fn results_turn<'t>(turns: &'t mut Vec<Turn<'_>>) -> (&'t mut Vec<ResultOut>, &'t mut Vec<String>) {
    if !matches!(turns.last(), Some(Turn::Results { .. })) {
        turns.push(Turn::Results { results: Vec::new(), notes: Vec::new() });
    }
    match turns.last_mut() {
        Some(Turn::Results { results, notes }) => (results, notes),
        _ => unreachable!("a results turn was just pushed"),
    }
}

/// Adds user text: to the notes of a results turn, to the user turn before it, or as a new turn.
pub(crate) fn push_note(turns: &mut Vec<Turn<'_>>, text: String) {
    match turns.last_mut() {
        Some(Turn::Results { notes, .. }) => notes.push(text),
        Some(Turn::User(prev)) => {
            prev.push_str("\n\n");
            prev.push_str(&text);
        }
        _ => turns.push(Turn::User(text)),
    }
}

/// A result as the text APIs carry: a string as it is, anything else as compact JSON.
pub(crate) fn as_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool_with(examples: Vec<harness_core::ToolExample>) -> ToolDefinition {
        ToolDefinition {
            name: "calculate".into(),
            description: "Evaluate arithmetic.".into(),
            parameters: json!({"type": "object"}),
            examples,
            source: harness_core::ToolSource::Builtin,
        }
    }

    fn example(request: Option<&str>, expression: &str, result: Value) -> harness_core::ToolExample {
        harness_core::ToolExample {
            arguments: json!({ "expression": expression }),
            result: Some(result),
            request: request.map(str::to_owned),
        }
    }

    fn text(turn: &Turn<'_>) -> String {
        match turn {
            Turn::User(text) | Turn::Assistant { text: Some(text), .. } => text.clone(),
            _ => panic!("a worked exchange is text"),
        }
    }

    #[test]
    fn a_worked_exchange_is_the_request_the_call_its_result_and_finish() {
        let tool = tool_with(vec![
            example(None, "17/100*2340", json!(397.8)),
            example(Some("What is 10% of 50?"), "10/100*50", json!(5)),
        ]);
        let turns: Vec<String> = worked_exchanges(&[tool], "").iter().map(text).collect();
        assert_eq!(
            turns,
            [
                "What is 10% of 50?",
                r#"{"tool": "calculate", "arguments": {"expression":"10/100*50"}}"#,
                r#"calculate({"expression":"10/100*50"}) = 5. If this answers the request, call finish with answer 5."#,
                r#"{"tool": "finish", "arguments": {"answer":5}}"#,
            ]
        );
    }

    #[test]
    fn the_worked_exchange_most_like_the_request_comes_last() {
        let calc = tool_with(vec![
            example(Some("What is 7 times 8?"), "7*8", json!(56)),
            example(Some("What is 10% of 50?"), "10/100*50", json!(5)),
        ]);
        let weight = ToolDefinition {
            name: "molecular_weight".into(),
            examples: vec![example(Some("What is the molecular weight of propane, CCC?"), "CCC", json!(44.097))],
            ..tool_with(vec![])
        };
        let tools = [calc, weight];
        let first_of_last = |request: &str| text(&worked_exchanges(&tools, request)[8]);
        assert_eq!(first_of_last("how much is 12 times 17"), "What is 7 times 8?");
        assert_eq!(first_of_last("what's 15% of 80?"), "What is 10% of 50?");
        assert_eq!(
            first_of_last("molecular weight of benzene c1ccccc1"),
            "What is the molecular weight of propane, CCC?"
        );
        // Nothing alike: the listing's order.
        assert_eq!(first_of_last("hello"), "What is the molecular weight of propane, CCC?");
    }

    #[test]
    fn the_worked_examples_shown_are_a_tools_two_most_like_the_request() {
        let calc = tool_with(vec![
            example(Some("What is 7 times 8?"), "7*8", json!(56)),
            example(Some("What is 10% of 50?"), "10/100*50", json!(5)),
            example(Some("What is the square root of 81?"), "sqrt(81)", json!(9)),
            example(Some("What is 16 squared?"), "16^2", json!(256)),
        ]);
        let tools = std::slice::from_ref(&calc);
        let asked = |request: &str| worked_exchanges(tools, request).iter().step_by(4).map(text).collect::<Vec<_>>();
        // The fourth declared is the one alike, shown last; ties keep the first declared.
        assert_eq!(asked("what is 3.5 squared?"), ["What is 7 times 8?", "What is 16 squared?"]);
        // Nothing alike: the first two, in the listing's order.
        assert_eq!(asked("hello"), ["What is 7 times 8?", "What is 10% of 50?"]);
        // A conversion is like a conversion by its shape, whatever its units.
        let with_conversion = tool_with(
            calc.examples
                .iter()
                .cloned()
                .chain([example(Some("How many minutes are in 3 hours?"), "3 hours in minutes", json!(180))])
                .collect(),
        );
        let shown = worked_exchanges(std::slice::from_ref(&with_conversion), "How many days are in 9 weeks?");
        assert_eq!(text(&shown[4]), "How many minutes are in 3 hours?");
        // The context estimate counts the longest two, whichever a request selects.
        let counted = worked_text(tools);
        assert!(counted.contains("square root") && counted.contains("10% of 50"), "{counted}");
        assert!(!counted.contains("16 squared") && !counted.contains("7 times"), "{counted}");
    }

    #[test]
    fn a_request_s_words_are_its_signs_numbers_and_singular_words() {
        assert_eq!(example_words("A shirt costs $40 and is 25% off."), ["shirt", "cost", "#", "%", "off"]);
        assert_eq!(example_words("How many hours? 2.5 hours, a glass"), ["many", "hour", "#", "glass"]);
        // Of two examples that share the request's words, the one that says little else.
        let examples = ["An $80 jacket is 15% off. What does it cost now?", "What is 10% of 50?"];
        let alike = likeness("what's 15% of 80?", examples.into_iter());
        assert!(alike[1] > alike[0], "{alike:?}");
    }

    #[test]
    fn worked_exchanges_are_few_a_tool() {
        let many = (0..5).map(|i| example(Some("What is 1+1?"), "1+1", json!(i))).collect();
        assert_eq!(worked_exchanges(&[tool_with(many)], "").len(), 4 * WORKED_PER_TOOL);
        assert!(worked_text(&[tool_with(vec![example(None, "1", json!(1))])]).is_empty());
    }

    fn reply(calls: &[(Option<&str>, &str)], text: Option<&str>) -> Message {
        let calls = calls
            .iter()
            .map(|(id, name)| ProposedCall {
                id: id.map(str::to_owned),
                name: (*name).to_owned(),
                arguments: json!({}).into(),
            })
            .collect();
        Message::Assistant { reply: ModelReply { calls, text: text.map(str::to_owned), ..Default::default() } }
    }

    fn result(call_id: Option<&str>, tool: Option<&str>, content: Value, is_error: bool) -> Message {
        Message::ToolResult { call_id: call_id.map(str::to_owned), tool: tool.map(str::to_owned), content, is_error }
    }

    #[test]
    fn the_calls_that_failed_are_those_an_error_answered() {
        let text = |t: &str| Message::Assistant { reply: ModelReply { text: Some(t.into()), ..Default::default() } };
        let conversation = vec![
            Message::User { content: "weight of 12".into() },
            text(r#"{"tool": "molecular_weight", "arguments": {"smiles": "12"}}"#),
            result(None, Some("molecular_weight"), json!({"code": "tool_error"}), true),
            text(r#"{"tool": "molecular_weight", "arguments": {"smiles": "C"}}"#),
            result(None, Some("molecular_weight"), json!({"molecular_weight": 16.043}), false),
            reply(&[(Some("a"), "calculate")], None),
            result(Some("a"), Some("calculate"), json!({"code": "invalid_arguments"}), true),
            text("not a call"),
            result(None, None, json!({"code": "no_json"}), true),
        ];
        assert_eq!(
            failed_calls(&conversation),
            [("molecular_weight".to_owned(), json!({"smiles": "12"})), ("calculate".to_owned(), json!({}))]
        );
    }

    #[test]
    fn results_answer_their_calls_and_everything_else_is_user_text() {
        let conversation = vec![
            Message::User { content: "go".into() },
            reply(&[(Some("a"), "t"), (None, "u")], Some("thinking")),
            result(Some("a"), Some("t"), json!(1), false),
            result(Some("call_2"), Some("u"), json!("two"), false),
            reply(&[], Some("prose")),
            result(None, None, json!({"code": "no_json"}), true),
            reply(&[(Some("b"), "t")], None),
        ];
        let turns = native(&conversation);
        let ids = |t: &Turn<'_>| match t {
            Turn::Assistant { calls, .. } => calls.iter().map(|c| c.id.clone()).collect::<Vec<_>>(),
            _ => vec![],
        };
        assert_eq!(turns[0], Turn::User("go".into()));
        assert_eq!(ids(&turns[1]), ["a", "call_1_1"]);
        assert_eq!(
            turns[2],
            Turn::Results {
                results: vec![
                    ResultOut { call_id: "a".into(), content: "1".into(), is_error: false },
                    // The call the model gave no id to is answered in order.
                    ResultOut { call_id: "call_1_1".into(), content: "two".into(), is_error: false },
                ],
                notes: vec![],
            }
        );
        assert_eq!(turns[3], Turn::Assistant { text: Some("prose".into()), calls: vec![] });
        assert_eq!(turns[4], Turn::User("Your reply could not be used: {\"code\":\"no_json\"}".into()));
        // The run ended before the last call was answered: it is answered, so the history stays valid.
        let Turn::Results { results, .. } = &turns[6] else { panic!("{:?}", turns[6]) };
        assert_eq!((results[0].call_id.as_str(), results[0].is_error), ("b", true));
        assert_eq!(turns.len(), 7);
    }

    #[test]
    fn text_only_writes_calls_as_json_and_joins_user_texts() {
        let conversation = vec![
            Message::User { content: "go".into() },
            reply(&[(Some("a"), "t")], None),
            result(Some("a"), Some("t"), json!(1), false),
            result(Some("b"), Some("t"), json!({"code": "tool_error"}), true),
        ];
        let turns = text_only(&conversation);
        assert_eq!(turns.len(), 3);
        assert_eq!(
            turns[1],
            Turn::Assistant { text: Some("{\"tool\": \"t\", \"arguments\": {}}".into()), calls: vec![] }
        );
        assert_eq!(
            turns[2],
            Turn::User(
                "t({}) = 1. If this answers the request, call finish with answer 1.\n\nt failed: {\"code\":\"tool_error\"}. Correct the call, or call another tool.".into()
            )
        );
    }
}
