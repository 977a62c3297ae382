//! Constrained mode's reply schema: a JSON schema that only a call of an offered tool matches,
//! sent as OpenAI's `response_format`, which llama.cpp, vLLM, Ollama and OpenAI turn into
//! grammar-constrained decoding. The model cannot write anything but such a call.
//!
//! The schema sent is bounded where a tool's own schema is not: every string has a
//! `maxLength`, every array a `maxItems`, and a free-form value is a string, a number, a
//! boolean, null, or an array of those: never an object, whose keys a grammar cannot keep from
//! repeating (a small model wrote `{"formula": {"formula": {...` and one key again and again
//! until the token limit). `finish`'s `answer` is a scalar: a short string, a number or a
//! boolean, what a small model can copy from a result; for a small model, once a tool has
//! answered, one of the values its tools answered, or yes/no ([`grounded_answers`]). The tools
//! keep their own schemas: arguments are still checked against those.

use harness_core::{FINISH, Message, ToolChoice, ToolDefinition, quoting};
use serde_json::{Map, Value, json};

/// Items an array may hold in the grammar, when its schema sets no bound.
const MAX_ITEMS: u64 = 32;
/// Properties an object with no declared properties may hold in the grammar.
const MAX_PROPERTIES: u64 = 16;
/// Levels of arrays a free-form value may nest in the grammar.
const FREE_DEPTH: u32 = 1;
/// The longest string `finish`'s answer may be in the grammar, in characters: an answer, not
/// an essay (a longer one was a small model echoing the conversation).
const MAX_ANSWER: u64 = 200;
/// The longest string the grammar allows, in characters: at most what the reply can hold
/// (a token is a few characters), and never so long that the grammar's rules balloon.
const MAX_STRING_CAP: u64 = 2000;
/// The longest free string a small model may write, in characters, even where the tool's
/// schema allows more (calc's 4096). Once a call had failed, SmolLM2-135M went on inside the
/// string (`2.4 kilometers in 2.4 meters}} 2.4 kilometers in...`) to the token limit: 65 s
/// of one step for a reply that could only fail. Its longest right argument in 2,035 calls
/// of both small models was 26 characters.
const SMALL_MODEL_STRING: u64 = 256;

/// The `response_format` member as JSON text, or `None` when the choice lets the model answer
/// without a tool (`auto`, `none`).
///
/// Written by hand because the order is part of the meaning: llama.cpp writes an object's
/// properties in the order of the schema, and `tool` must come before `arguments` so that the
/// model names the tool before it writes the arguments (a JSON value would sort `arguments`
/// first).
///
/// `grounded`, for a small model, holds the values its tools answered: once there are some,
/// `finish` may answer only one of them (see [`grounded_answers`]). `quoting`, for a small
/// model, holds the request's own words: an argument that the tool's worked examples always
/// quote from their request may be only one of them (see [`quoted_arguments`]).
pub(crate) fn response_format(
    tools: &[ToolDefinition],
    choice: &ToolChoice,
    max_tokens: u32,
    grounded: Option<&[Value]>,
    quoting: &Quoting,
) -> Option<String> {
    let allowed: Vec<&ToolDefinition> = match choice {
        ToolChoice::Required => tools.iter().collect(),
        ToolChoice::Tool(name) => tools.iter().filter(|t| &t.name == name).collect(),
        ToolChoice::AnyBut(name) => tools.iter().filter(|t| &t.name != name).collect(),
        ToolChoice::OneOf(names) => tools.iter().filter(|t| names.contains(&t.name)).collect(),
        ToolChoice::Auto | ToolChoice::None => return None,
    };
    // `grounded` is given, empty until a tool answers, for a small model alone.
    let small = grounded.is_some();
    let max_string = (u64::from(max_tokens) * 2).clamp(64, MAX_STRING_CAP);
    let bounds = match small {
        true => Bounds { max_string: max_string.min(SMALL_MODEL_STRING), tighten_declared: true },
        false => Bounds { max_string, tighten_declared: false },
    };
    let grounded = grounded.filter(|g| !g.is_empty());
    let mut branches: Vec<String> =
        allowed.iter().filter_map(|tool| branch(tool, &bounds, grounded, quoting)).collect();
    if branches.is_empty() {
        // No word of the request is left for any allowed tool: the tools as they are, rather
        // than a grammar that no reply can match.
        branches = allowed.iter().filter_map(|tool| branch(tool, &bounds, grounded, &Quoting::default())).collect();
    }
    Some(format!(
        r#"{{"type":"json_schema","json_schema":{{"name":"tool_call","schema":{{"oneOf":[{}]}}}}}}"#,
        branches.join(",")
    ))
}

/// One tool's call: `{"tool": NAME, "arguments": <its parameters, bounded>}`, nothing else;
/// `None` when an argument it quotes has no word of the request left.
fn branch(tool: &ToolDefinition, bounds: &Bounds, grounded: Option<&[Value]>, quoting: &Quoting) -> Option<String> {
    let arguments = match (tool.name == FINISH, grounded) {
        (true, Some(values)) => grounded_finish(values),
        (true, None) => finish_arguments(bounds),
        (false, _) => bounds.schema(&quoted_arguments(tool, quoting)?),
    };
    Some(format!(
        r#"{{"type":"object","properties":{{"tool":{{"const":{}}},"arguments":{}}},"required":["tool","arguments"],"additionalProperties":false}}"#,
        Value::from(tool.name.as_str()),
        arguments
    ))
}

/// What a small model's quoted arguments may be: the request's words, less those a tool has
/// already failed with. Empty (no narrowing) for a capable model.
#[derive(Debug, Default)]
pub(crate) struct Quoting {
    /// The request's words ([`quoting::request_spans`]).
    pub(crate) spans: Vec<String>,
    /// The calls that ended in an error so far, as tool names and arguments
    /// ([`crate::conversation::failed_calls`]).
    pub(crate) failed: Vec<(String, Value)>,
}

impl Quoting {
    /// The values `tool` failed with as its argument `argument`, in the order of the calls.
    fn failed_values<'q>(&'q self, tool: &'q str, argument: &'q str) -> impl Iterator<Item = &'q str> + 'q {
        self.failed
            .iter()
            .filter(move |(t, _)| t == tool)
            .filter_map(move |(_, arguments)| arguments.get(argument).and_then(Value::as_str))
    }
}

/// The tool's parameters, with each argument it quotes from the request
/// ([`harness_core::quoting`]) narrowed to the request's words that fit the argument's own
/// schema and that this tool has not failed with. Given "round 2/3 to 2 decimal places",
/// SmolLM2-135M asked for the weight of `2`, and then again, the same failing call until the
/// step budget ran out (greedy decoding writes the same reply to the same conversation).
/// `None` when such an argument has no word left: the tool cannot be called with this request.
/// Every argument is left open when there are no spans (a capable model).
pub(crate) fn quoted_arguments(tool: &ToolDefinition, quoting: &Quoting) -> Option<Value> {
    let mut parameters = tool.parameters.clone();
    if quoting.spans.is_empty() {
        return Some(parameters);
    }
    for argument in quoting::quoted_arguments(tool) {
        let failed = |word: &str| quoting.failed_values(&tool.name, argument).any(|v| v == word);
        let words = quoting::quotable_words(tool, argument, &quoting.spans, failed);
        if words.is_empty() {
            return None;
        }
        parameters["properties"][argument] = json!({ "type": "string", "enum": words });
    }
    exclude_failed(tool, quoting, &mut parameters);
    Some(parameters)
}

/// The longest failed value the grammar excludes, in characters: each character is a level of
/// the pattern's nesting, which llama.cpp caps at 100.
const MAX_EXCLUDED: usize = 60;

/// Keeps a small model from writing again a value its tool failed with, for a tool of one
/// free string argument (`calculate`'s `expression`): the argument's pattern takes any string
/// but those. Given "what is 17 percent of 2340", SmolLM2-135M wrote `17%` seven times
/// although the error said what to write instead: greedy decoding answers the same
/// conversation with the same call. Excluded, its next most likely string is another one.
/// A value the pattern cannot spell (past ASCII, a quote, a backslash, too long) stays open.
fn exclude_failed(tool: &ToolDefinition, quoting: &Quoting, parameters: &mut Value) {
    let Some(properties) = parameters.get("properties").and_then(Value::as_object) else { return };
    let [(name, schema)] = properties.iter().collect::<Vec<_>>()[..] else { return };
    let plain = schema.get("type") == Some(&json!("string"))
        && !["enum", "const", "pattern", "format"].iter().any(|k| schema.get(*k).is_some());
    if !plain {
        return;
    }
    let values: Vec<&str> = quoting
        .failed_values(&tool.name, name)
        .filter(|v| v.len() <= MAX_EXCLUDED && v.bytes().all(|b| b.is_ascii() && !matches!(b, b'"' | b'\\' | ..=0x1F)))
        .collect();
    if values.is_empty() {
        return;
    }
    let name = name.clone();
    parameters["properties"][name.as_str()]["pattern"] = Value::String(format!("^{}$", all_but(&values, 0)));
}

/// A string JSON holds without an escape, as a pattern's character class (before its `]`).
const PLAIN_CHARS: &str = r#"[^"\\\x00-\x1F"#;

/// A pattern for every string of plain characters that does not continue the `excluded`
/// strings' first `at` characters into one of them: a trie of the excluded strings, where at
/// each node the string may end (unless a string ends there), go on with a character no
/// excluded string has next, or go on along a child.
fn all_but(excluded: &[&str], at: usize) -> String {
    let ends_here = excluded.iter().any(|v| v.len() == at);
    let mut next: Vec<u8> = excluded.iter().filter_map(|v| v.as_bytes().get(at).copied()).collect();
    next.sort_unstable();
    next.dedup();
    let in_class: String = next.iter().map(|&b| escaped(b, b"[]-")).collect();
    let mut alternatives = vec![format!("{PLAIN_CHARS}{in_class}]{PLAIN_CHARS}]*")];
    for &b in &next {
        let below: Vec<&str> = excluded.iter().copied().filter(|v| v.as_bytes().get(at) == Some(&b)).collect();
        alternatives.push(format!("{}{}", escaped(b, b"^$.[](){}|*+?"), all_but(&below, at + 1)));
    }
    let optional = if ends_here { "" } else { "?" };
    format!("({}){optional}", alternatives.join("|"))
}

/// `b` as a pattern's character, with a backslash before it where it is one of `special`.
fn escaped(b: u8, special: &[u8]) -> String {
    let c = char::from(b);
    if special.contains(&b) { format!("\\{c}") } else { c.to_string() }
}

/// `finish`'s arguments in the grammar: `{"answer": <a short string, a number or a boolean>}`.
/// The loop still takes any JSON answer from a server that does not constrain.
fn finish_arguments(bounds: &Bounds) -> Value {
    let answer = json!({"anyOf": [
        {"type": "number"},
        {"type": "boolean"},
        {"type": "string", "maxLength": bounds.max_string.min(MAX_ANSWER)},
    ]});
    json!({"type": "object", "properties": {"answer": answer}, "required": ["answer"], "additionalProperties": false})
}

/// `finish`'s arguments for a small model whose tools have answered: `{"answer": <one of
/// them>}`. SmolLM2-135M finished with text the harness had written ("not run again", "your
/// answer was cut at the token limit", "finiShi") instead of the result it was shown.
fn grounded_finish(values: &[Value]) -> Value {
    json!({
        "type": "object",
        "properties": {"answer": {"enum": values}},
        "required": ["answer"],
        "additionalProperties": false
    })
}

/// The answers a small model may finish with: each scalar its tools answered (a result, or a
/// member of an object result, a string of at most [`MAX_ANSWER`] characters), once each, in
/// the order they came, then `true` and `false` when no result holds a boolean, the request
/// asks no open question ([`crate::prompt::asks_open_question`]) and names no member of an
/// object result outside a yes-or-no question ("Count the heavy atoms in CCO"): a yes-or-no request whose
/// tool answered with a number ("is 391 divisible by 17?": `391 % 17` is 0), but not "How many
/// heavy atoms does CCO have?", which SmolLM2 finished with `true` where 3 was offered.
/// Where a tool answered the yes-or-no itself (`valid`), that is the answer: offered both,
/// Gemma 3 270M answered `"true"` to all nine SMILES validity requests, whatever the tool
/// said. A number or a boolean is also offered as a string (`"42"`, `"true"`): a model that
/// opens a string commits the grammar to the string answers, and SmolLM2 then finished "check
/// whether c1ccccc1 is a valid SMILES" with the formula `"C6H6"` where it had written `"true"`
/// before. A question answered yes or no ([`crate::prompt::asks_yes_or_no`]) keeps only the
/// booleans, both of them where it asks about a member that is no boolean ("Does CCO have more
/// than 5 heavy atoms?" is not answered by `valid`). Empty until a tool answered.
pub(crate) fn grounded_answers(conversation: &[Message]) -> Vec<Value> {
    let mut values: Vec<Value> = Vec::new();
    let mut any = false;
    // Whether a result's member was the one the request named: "Count the heavy atoms in
    // CC(C)CO" asks for `atom_count`, not yes or no, and SmolLM2-135M finished it `true`.
    let mut named = false;
    // Whether a yes-or-no question is about a result's member that is no boolean.
    let mut about_a_member = false;
    let request = crate::conversation::request_of(conversation);
    let yes_or_no = crate::prompt::asks_yes_or_no(request);
    for message in conversation {
        let Message::ToolResult { content, is_error: false, tool, .. } = message else { continue };
        any = true;
        // The member the result note suggests, where the request names one: shown the
        // formula last in a worked exchange, SmolLM2 finished "molecular weight of aspirin"
        // with the formula it had been told was not the answer. That is what
        // `crate::prompt::answer_in` gives; its two steps are taken here, since both are used.
        let member = tool.as_deref().and_then(|tool| crate::prompt::member_answer(tool, content, request));
        let suggested = member.filter(|v| crate::prompt::answers_kind(v, yes_or_no));
        match (content, suggested, member) {
            (Value::Object(_), Some(member), _) => {
                named = true;
                offer(&mut values, member);
            }
            // "Does CCO have more than 5 heavy atoms?" asks about `atom_count`: the result's own
            // boolean (`valid`) is no answer to it, and alone in the grammar it would be forced.
            (Value::Object(_), None, Some(asked)) if !asked.is_boolean() => {
                about_a_member = true;
                offer(&mut values, asked);
            }
            (Value::Object(members), None, _) => members.values().for_each(|v| offer(&mut values, v)),
            (scalar, ..) => offer(&mut values, scalar),
        }
    }
    let open = crate::prompt::asks_open_question(request) || (named && !yes_or_no);
    if any && (about_a_member || !values.iter().any(Value::is_boolean)) && !open {
        offer(&mut values, &Value::Bool(true));
        offer(&mut values, &Value::Bool(false));
    }
    if yes_or_no {
        // "Is 2^20 more than a million?" is answered yes or no, not 1048576.
        values.retain(|v| v.is_boolean() || v == "true" || v == "false");
    }
    values
}

/// Adds `v` to the answers (and a number or boolean also as a string), each once; a long
/// string, null, an object or an array is no answer.
fn offer(values: &mut Vec<Value>, v: &Value) {
    let forms = match v {
        Value::String(s) if s.chars().count() as u64 <= MAX_ANSWER => vec![v.clone()],
        Value::Number(_) | Value::Bool(_) => vec![v.clone(), Value::String(v.to_string())],
        _ => Vec::new(),
    };
    for form in forms {
        if !values.contains(&form) {
            values.push(form);
        }
    }
}

/// The bounds the grammar puts on what a schema leaves open.
struct Bounds {
    /// The longest string, in characters.
    max_string: u64,
    /// Whether a string's declared `maxLength` above `max_string` comes down to it (a small
    /// model's); otherwise the tool's own bound stands.
    tighten_declared: bool,
}

impl Bounds {
    /// `schema` with every open string, array and free-form value bounded.
    fn schema(&self, schema: &Value) -> Value {
        let Value::Object(map) = schema else {
            // `true` (anything) is free-form; `false` stays as it is.
            return if schema == &Value::Bool(true) { self.free(FREE_DEPTH) } else { schema.clone() };
        };
        if is_free(map) {
            return self.free(FREE_DEPTH);
        }
        let mut out = Map::new();
        for (key, value) in map {
            let bounded = match key.as_str() {
                "properties" | "patternProperties" | "$defs" | "definitions" => match value {
                    Value::Object(props) => {
                        Value::Object(props.iter().map(|(k, v)| (k.clone(), self.schema(v))).collect())
                    }
                    other => other.clone(),
                },
                "items" | "additionalProperties" | "not" => self.schema(value),
                "anyOf" | "oneOf" | "allOf" | "prefixItems" => match value {
                    Value::Array(list) => Value::Array(list.iter().map(|v| self.schema(v)).collect()),
                    other => other.clone(),
                },
                _ => value.clone(),
            };
            out.insert(key.clone(), bounded);
        }
        let declared = map.get("maxLength").and_then(Value::as_u64);
        let tighten = declared.is_none_or(|d| self.tighten_declared && d > self.max_string);
        if has_type(map, "string") && tighten && !map.contains_key("enum") {
            out.insert("maxLength".into(), json!(self.max_string));
        }
        if has_type(map, "array") && !map.contains_key("maxItems") {
            out.insert("maxItems".into(), json!(MAX_ITEMS));
        }
        if has_type(map, "object") && !map.contains_key("properties") && !map.contains_key("additionalProperties") {
            out.insert("additionalProperties".into(), self.free(FREE_DEPTH - 1));
            out.insert("maxProperties".into(), json!(MAX_PROPERTIES));
        }
        Value::Object(out)
    }

    /// A free-form value: a bounded string, a number, a boolean, null, or (`depth` above 0) an
    /// array of free-form values one level shallower. No object: see the module's comment.
    fn free(&self, depth: u32) -> Value {
        let mut any = vec![
            json!({"type": "string", "maxLength": self.max_string}),
            json!({"type": "number"}),
            json!({"type": "boolean"}),
            json!({"type": "null"}),
        ];
        if depth > 0 {
            let inner = self.free(depth - 1);
            any.push(json!({"type": "array", "items": inner, "maxItems": MAX_ITEMS}));
        }
        json!({ "anyOf": any })
    }
}

/// Whether a schema object allows any value: no type, no constant, no choice, no reference.
fn is_free(map: &Map<String, Value>) -> bool {
    const SHAPING: [&str; 9] = ["type", "const", "enum", "anyOf", "oneOf", "allOf", "$ref", "properties", "items"];
    !SHAPING.iter().any(|k| map.contains_key(*k))
}

/// Whether a schema's `type` is or includes `name`.
fn has_type(map: &Map<String, Value>, name: &str) -> bool {
    match map.get("type") {
        Some(Value::String(t)) => t == name,
        Some(Value::Array(types)) => types.iter().any(|t| t == name),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use harness_core::ToolSource;
    use serde_json::json;

    fn tool(name: &str) -> ToolDefinition {
        ToolDefinition {
            name: name.into(),
            description: "d".into(),
            parameters: json!({"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}),
            examples: vec![],
            source: ToolSource::Builtin,
        }
    }

    fn smiles_tool(examples: &[(Option<&str>, &str)]) -> ToolDefinition {
        let examples = examples
            .iter()
            .map(|(request, smiles)| harness_core::ToolExample {
                arguments: json!({ "smiles": smiles }),
                result: Some(json!(1)),
                request: request.map(str::to_owned),
            })
            .collect();
        ToolDefinition {
            parameters: json!({"type": "object", "properties": {"smiles": {"type": "string"}}}),
            examples,
            ..tool("molecular_weight")
        }
    }

    /// A tool's parameters as the grammar bounds them for a reply of 1,024 tokens.
    fn bounded(parameters: &Value) -> Value {
        Bounds { max_string: 2000, tighten_declared: false }.schema(parameters)
    }

    fn quoting(request: &str, failed: &[(&str, &str)]) -> Quoting {
        Quoting {
            spans: quoting::request_spans(request),
            failed: failed.iter().map(|(tool, smiles)| ((*tool).to_owned(), json!({ "smiles": smiles }))).collect(),
        }
    }

    #[test]
    fn an_argument_the_worked_examples_quote_is_one_of_the_requests_words() {
        let request = "How heavy is aspirin (CC(=O)Oc1ccccc1C(=O)O), in g/mol?";
        let spans = quoting::request_spans(request);
        assert_eq!(spans, ["How", "heavy", "is", "aspirin", "CC(=O)Oc1ccccc1C(=O)O", "in", "g/mol"]);
        let quoting_tool = smiles_tool(&[(Some("Is CCN a valid SMILES?"), "CCN"), (None, "O")]);
        assert_eq!(
            quoted_arguments(&quoting_tool, &quoting(request, &[])).unwrap()["properties"]["smiles"],
            json!({"type": "string", "enum": spans})
        );
        // A capable model (no spans), or examples that compute the argument, leave it open.
        assert_eq!(quoted_arguments(&quoting_tool, &Quoting::default()), Some(quoting_tool.parameters.clone()));
        let computing = smiles_tool(&[(Some("Is ethanol a valid SMILES?"), "CCO")]);
        assert_eq!(quoted_arguments(&computing, &quoting(request, &[])), Some(computing.parameters.clone()));
        let plain = smiles_tool(&[]);
        assert_eq!(quoted_arguments(&plain, &quoting(request, &[])), Some(plain.parameters.clone()));
    }

    #[test]
    fn a_quoted_argument_is_a_word_its_schema_takes_and_not_one_that_failed() {
        let mut shaped = smiles_tool(&[(Some("Is CCN a valid SMILES?"), "CCN")]);
        shaped.parameters["properties"]["smiles"]["pattern"] = json!("^[CNOc1=()]+$");
        let words = |q: &Quoting| quoted_arguments(&shaped, q).map(|p| p["properties"]["smiles"]["enum"].clone());
        // Only the words the argument's own schema takes.
        let request = "what do 3 moles of water (SMILES O) weigh, in grams?";
        assert_eq!(words(&quoting(request, &[])), Some(json!(["O"])));
        // Less the words this tool failed with; another tool's failures do not count.
        let two = "weigh CCO or CCN";
        assert_eq!(words(&quoting(two, &[("molecular_weight", "CCO")])), Some(json!(["CCN"])));
        assert_eq!(words(&quoting(two, &[("validate_smiles", "CCO")])), Some(json!(["CCO", "CCN"])));
        // No word left: the tool cannot be called with this request, and leaves the grammar,
        // unless no tool would be left, when the tools are offered as they are.
        assert_eq!(words(&quoting("round 2/3 to 2 decimal places", &[])), None);
        let tools = [shaped.clone(), tool("calculate")];
        let quoting = quoting("average of 12 and 15", &[]);
        let text = response_format(&tools, &ToolChoice::Required, 1024, None, &quoting).unwrap();
        assert!(!text.contains("molecular_weight") && text.contains("calculate"), "{text}");
        let text = response_format(&tools[..1], &ToolChoice::Required, 1024, None, &quoting).unwrap();
        let value: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(value["json_schema"]["schema"]["oneOf"][0]["properties"]["arguments"], bounded(&shaped.parameters));
    }

    #[test]
    fn a_free_string_a_tool_failed_with_is_not_offered_again() {
        let mut calculate = tool("calculate");
        calculate.parameters = json!({"type": "object", "properties": {"expression": {"type": "string"}}});
        let failed = |values: &[&str]| Quoting {
            spans: quoting::request_spans("what is 17 percent of 2340"),
            failed: values.iter().map(|v| ("calculate".to_owned(), json!({ "expression": v }))).collect(),
        };
        let quoting = failed(&["17%", "17", "1[2]-3", "a\"b", "x".repeat(MAX_EXCLUDED + 1).as_str()]);
        let parameters = quoted_arguments(&calculate, &quoting).unwrap();
        let schema = jsonschema::validator_for(&parameters).unwrap();
        let takes = |v: &str| schema.is_valid(&json!({ "expression": v }));
        for refused in ["17%", "17", "1[2]-3"] {
            assert!(!takes(refused), "{refused} was offered again: {parameters}");
        }
        for offered in ["", "1", "17/100*2340", "17%%", "170", "1[2]-", "1[2]-34", "2340*0.17", "%"] {
            assert!(takes(offered), "{offered} was refused: {parameters}");
        }
        // Only this tool's failures, and only where a pattern can say so: the rest stay open.
        assert!(
            quoted_arguments(&calculate, &failed(&[]))
                .is_some_and(|p| p["properties"]["expression"].get("pattern").is_none())
        );
        let other = Quoting { failed: vec![("other".into(), json!({"expression": "17%"}))], ..failed(&[]) };
        assert!(quoted_arguments(&calculate, &other).unwrap()["properties"]["expression"].get("pattern").is_none());
        // Not for a capable model, nor for a tool of more than one argument.
        assert_eq!(
            quoted_arguments(&calculate, &Quoting { spans: vec![], ..failed(&["17%"]) }),
            Some(calculate.parameters.clone())
        );
        let mut two = calculate.clone();
        two.parameters["properties"]["precision"] = json!({"type": "integer"});
        assert_eq!(quoted_arguments(&two, &failed(&["17%"])), Some(two.parameters.clone()));
    }

    #[test]
    fn the_schema_is_one_branch_per_allowed_tool_with_the_tool_named_first() {
        let tools = [tool("finish"), tool("add \"quoted\"")];
        let text = response_format(&tools, &ToolChoice::Required, 1024, None, &Quoting::default()).unwrap();
        let value: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(value["type"], "json_schema");
        let branches = value["json_schema"]["schema"]["oneOf"].as_array().unwrap();
        assert_eq!(branches.len(), 2);
        assert_eq!(branches[1]["properties"]["tool"], json!({"const": "add \"quoted\""}));
        assert_eq!(branches[1]["properties"]["arguments"], tools[1].parameters);
        assert_eq!(branches[1]["additionalProperties"], false);
        // The order the grammar follows: the tool's name, then its arguments.
        let first = text.find(r#""tool":{"const""#).unwrap();
        assert!(first < text.find(r#""arguments":{"#).unwrap(), "{text}");

        let forced =
            response_format(&tools, &ToolChoice::Tool("finish".into()), 1024, None, &Quoting::default()).unwrap();
        let value: Value = serde_json::from_str(&forced).unwrap();
        assert_eq!(value["json_schema"]["schema"]["oneOf"].as_array().unwrap().len(), 1);
        assert_eq!(value["json_schema"]["schema"]["oneOf"][0]["properties"]["tool"]["const"], "finish");
        let shortlisted =
            response_format(&tools, &ToolChoice::OneOf(vec!["add \"quoted\"".into()]), 1024, None, &Quoting::default())
                .unwrap();
        let value: Value = serde_json::from_str(&shortlisted).unwrap();
        assert_eq!(value["json_schema"]["schema"]["oneOf"].as_array().unwrap().len(), 1);
        assert_eq!(value["json_schema"]["schema"]["oneOf"][0]["properties"]["tool"]["const"], "add \"quoted\"");
        assert_eq!(response_format(&tools, &ToolChoice::Auto, 1024, None, &Quoting::default()), None);
        assert_eq!(response_format(&tools, &ToolChoice::None, 1024, None, &Quoting::default()), None);
    }

    /// The deepest nesting of objects and arrays a schema's free-form values allow.
    fn depth(schema: &Value) -> usize {
        let inner = ["anyOf", "additionalProperties", "items"].iter().filter_map(|k| schema.get(*k));
        let below = inner
            .map(|v| match v {
                Value::Array(list) => list.iter().map(depth).max().unwrap_or(0),
                v => depth(v),
            })
            .max()
            .unwrap_or(0);
        let nests = matches!(schema.get("type").and_then(Value::as_str), Some("object" | "array"));
        below + usize::from(nests)
    }

    #[test]
    fn a_small_models_free_strings_are_short_even_where_the_tool_allows_more() {
        let mut calculate = tool("calculate");
        calculate.parameters = json!({"type": "object", "properties": {
            "expression": {"type": "string", "maxLength": 4096},
            "note": {"type": "string"},
            "short": {"type": "string", "maxLength": 20},
        }});
        let lengths = |grounded: Option<&[Value]>| {
            let text =
                response_format(&[calculate.clone()], &ToolChoice::Required, 1024, grounded, &Quoting::default());
            let value: Value = serde_json::from_str(&text.unwrap()).unwrap();
            let properties = &value["json_schema"]["schema"]["oneOf"][0]["properties"]["arguments"]["properties"];
            ["expression", "note", "short"].map(|name| properties[name]["maxLength"].as_u64())
        };
        assert_eq!(lengths(Some(&[])), [Some(256), Some(256), Some(20)], "a small model");
        assert_eq!(lengths(None), [Some(4096), Some(2000), Some(20)], "a capable model keeps the tool's bound");
    }

    #[test]
    fn strings_arrays_and_free_values_are_bounded_and_the_tool_keeps_its_schema() {
        let mut finish = tool("finish");
        finish.parameters =
            json!({"type": "object", "properties": {"answer": {"description": "anything"}}, "required": ["answer"]});
        let mut listing = tool("list");
        listing.parameters = json!({"type": "object", "properties": {
            "names": {"type": "array", "items": {"type": "string"}},
            "code": {"type": "string", "maxLength": 5},
            "kind": {"type": "string", "enum": ["a", "b"]},
            "extra": {"description": "anything"},
        }});
        let tools = [finish.clone(), listing.clone()];
        let text = response_format(&tools, &ToolChoice::Required, 100, None, &Quoting::default()).unwrap();
        let value: Value = serde_json::from_str(&text).unwrap();
        let branches = &value["json_schema"]["schema"]["oneOf"];
        let names = &branches[1]["properties"]["arguments"]["properties"]["names"];
        assert_eq!((names["maxItems"].as_u64(), names["items"]["maxLength"].as_u64()), (Some(32), Some(200)));
        let props = &branches[1]["properties"]["arguments"]["properties"];
        assert_eq!(props["code"]["maxLength"], 5, "a bound of its own is kept");
        assert!(props["kind"].get("maxLength").is_none(), "an enum needs none");
        // A free-form value holds no object, whose keys the grammar could not keep from repeating.
        assert_eq!(props["extra"]["anyOf"][0], json!({"type": "string", "maxLength": 200}), "{}", props["extra"]);
        assert_eq!(depth(&props["extra"]), FREE_DEPTH as usize, "{}", props["extra"]);
        assert!(!props["extra"].to_string().contains("\"object\""), "{}", props["extra"]);
        // The tools' own schemas are not changed.
        assert_eq!(tools[0].parameters, finish.parameters);
        assert!(tools[0].parameters["properties"]["answer"].get("anyOf").is_none());
    }

    #[test]
    fn finishs_answer_is_a_short_scalar_and_nothing_else() {
        let text =
            response_format(&[tool("finish")], &ToolChoice::Tool("finish".into()), 1024, None, &Quoting::default())
                .unwrap();
        let value: Value = serde_json::from_str(&text).unwrap();
        let arguments = &value["json_schema"]["schema"]["oneOf"][0]["properties"]["arguments"];
        assert_eq!(arguments["additionalProperties"], false);
        assert_eq!(arguments["required"], json!(["answer"]));
        let kinds: Vec<&str> = arguments["properties"]["answer"]["anyOf"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b["type"].as_str().unwrap())
            .collect();
        assert_eq!(kinds, ["number", "boolean", "string"]);
        assert_eq!(arguments["properties"]["answer"]["anyOf"][2]["maxLength"], MAX_ANSWER);
    }

    fn result(content: Value, is_error: bool) -> Message {
        Message::ToolResult { call_id: None, tool: None, content, is_error }
    }

    #[test]
    fn the_member_the_request_names_is_the_only_answer_of_an_object_result() {
        let weight = json!({"molecular_weight": 180.159, "formula": "C9H8O4"});
        let answered = |request: &str| {
            let content = weight.clone();
            let tool = Some("molecular_weight".to_owned());
            grounded_answers(&[
                Message::User { content: request.into() },
                Message::ToolResult { call_id: None, tool, content, is_error: false },
            ])
        };
        let weights = answered("molecular weight of aspirin CC(=O)Oc1ccccc1C(=O)O");
        assert_eq!(weights[..2], [json!(180.159), json!("180.159")]);
        assert!(!weights.contains(&json!("C9H8O4")), "{weights:?}");
        assert_eq!(answered("the formula of CC(=O)Oc1ccccc1C(=O)O")[0], json!("C9H8O4"));
        // Nothing named: the member named like the tool, as the result note suggests.
        assert_eq!(answered("tell me about aspirin")[0], json!(180.159));
        // Nor that: every member is an answer.
        let validity = json!({"valid": true, "formula": "C2H6O"});
        let tool = Some("validate_smiles".to_owned());
        let open = grounded_answers(&[
            Message::User { content: "tell me about CCO".into() },
            Message::ToolResult { call_id: None, tool, content: validity, is_error: false },
        ]);
        assert!(open.contains(&json!(true)) && open.contains(&json!("C2H6O")), "{open:?}");
    }

    #[test]
    fn a_small_models_finish_answers_one_of_the_values_its_tools_answered() {
        let long = "x".repeat(MAX_ANSWER as usize + 1);
        let conversation = [
            Message::User { content: "is CCO valid, and what is 6*7?".into() },
            result(json!({"valid": true, "formula": "C2H6O", "atom_count": 3, "error": null}), false),
            result(json!({"code": "tool_error", "message": "not this"}), true),
            result(json!(42), false),
            result(json!(42), false),
            result(json!(long), false),
        ];
        let values = grounded_answers(&conversation);
        let want = [json!(true), json!("true"), json!("C2H6O"), json!(3), json!("3"), json!(42), json!("42")];
        for v in &want {
            assert!(values.contains(v), "{v} in {values:?}");
        }
        assert_eq!(values.len(), 7, "once each; no null, no error's text, no long string: {values:?}");
        assert!(!values.contains(&json!(false)), "a tool said yes: no is not offered");
        let numbers = grounded_answers(&[result(json!(0), false)]);
        assert_eq!(numbers, [json!(0), json!("0"), json!(true), json!("true"), json!(false), json!("false")]);
        // An open question is not answered yes or no.
        let asked = Message::User { content: "How many heavy atoms does the SMILES CCO have?".into() };
        let count = json!({"valid": true, "atom_count": 3});
        let validate = Some("validate_smiles".to_owned());
        let answered = Message::ToolResult { call_id: None, tool: validate, content: count, is_error: false };
        let open = grounded_answers(&[asked, answered.clone()]);
        assert_eq!(open, [json!(3), json!("3")]);
        // So is a request that names the member it wants, though it asks no question.
        let count_them = Message::User { content: "Count the heavy atoms in CCO".into() };
        assert_eq!(grounded_answers(&[count_them, answered.clone()]), [json!(3), json!("3")]);
        // A yes-or-no question about that count is answered yes or no, not by `valid`.
        let more = Message::User { content: "Does CCO have more than 5 heavy atoms?".into() };
        assert_eq!(grounded_answers(&[more, answered]), [json!(true), json!("true"), json!(false), json!("false")]);
        // But a yes-or-no question about that member keeps its booleans.
        let heavier = Message::User { content: "Is the molecular weight of CCO over 40?".into() };
        let weight = json!({"formula": "C2H6O", "molecular_weight": 46.069});
        let weigher = Some("molecular_weight".to_owned());
        let weighed = Message::ToolResult { call_id: None, tool: weigher, content: weight, is_error: false };
        let booleans = [json!(true), json!("true"), json!(false), json!("false")];
        assert_eq!(grounded_answers(&[heavier, weighed]), booleans);
        let asked = Message::User { content: "what's 20% of 45?".into() };
        assert_eq!(grounded_answers(&[asked, result(json!(9), false)]), [json!(9), json!("9")]);
        // A yes-or-no question keeps the booleans alone.
        let asked = Message::User { content: "Is 391 divisible by 17?".into() };
        let yes_or_no = grounded_answers(&[asked, result(json!(0), false)]);
        assert_eq!(yes_or_no, [json!(true), json!("true"), json!(false), json!("false")]);
        assert!(grounded_answers(&conversation[..1]).is_empty(), "no tool answered: nothing to ground");

        let tools = [tool("finish"), tool("add")];
        let text = response_format(&tools, &ToolChoice::Required, 1024, Some(&values), &Quoting::default()).unwrap();
        let value: Value = serde_json::from_str(&text).unwrap();
        let branches = value["json_schema"]["schema"]["oneOf"].as_array().unwrap();
        assert_eq!(branches[0]["properties"]["arguments"]["properties"]["answer"], json!({"enum": values}));
        assert_eq!(branches[1]["properties"]["arguments"], tools[1].parameters, "other tools keep their schemas");
        // Before any tool answered, the free scalar answer stays.
        let text = response_format(&tools, &ToolChoice::Required, 1024, Some(&[]), &Quoting::default()).unwrap();
        assert!(text.contains(r#""anyOf""#), "{text}");
    }
}
