//! Arguments a tool takes word for word from the request: the SMILES of "Is CCN a valid
//! SMILES?", where every worked example of the tool (`ToolExample::request`) quotes its
//! argument from its own request. For a small model, such an argument may be only one of the
//! request's words that the argument's own schema takes ([`quotable_words`]): shown
//! `molecular_weight` of `O=C=O` in a worked exchange, SmolLM2-135M asked for the weight of
//! `O=C=O` whatever SMILES its request held, and for that of `2` given "round 2/3 to 2
//! decimal places". A tool that quotes an argument no word of the request fits cannot answer
//! that request: the shortlist leaves it out and the grammar does not offer it.
//!
//! One definition for the loop's shortlist and the providers' grammar.

use serde_json::Value;

use crate::registry::{ToolDefinition, compile_schema};

/// The most words of a request an argument may choose from: a long request is no list.
const MAX_SPANS: usize = 64;

/// The request's words as an argument may quote them: each word, with the punctuation that
/// ends a sentence or a clause taken off, and without the brackets or quotes around it
/// (`(CCO)`, `'CCO'`, the `O)` of "(SMILES O)"), once each, in order; at most 64. The word
/// `I` standing alone is the pronoun, not a quote: given "I put $1000 in a savings account at
/// 5% interest compounded yearly...", SmolLM2-135M asked for the molecular weight of `I`
/// (iodine has the shape of a SMILES). Quoted (`'I'`) or in brackets (`[I-]`), it is kept.
pub fn request_spans(request: &str) -> Vec<String> {
    let mut spans: Vec<String> = Vec::new();
    for word in request.split_whitespace() {
        let mut word = word.trim_end_matches([',', ';', '?', '!', ':']).trim_end_matches('.');
        if word == "I" {
            continue;
        }
        for (open, close) in [('(', ')'), ('\'', '\''), ('"', '"'), ('`', '`')] {
            if let Some(inner) = word.strip_prefix(open).and_then(|w| w.strip_suffix(close)) {
                word = inner;
            }
        }
        word = unbracketed(word);
        if !word.is_empty() && !spans.iter().any(|s| s == word) && spans.len() < MAX_SPANS {
            spans.push(word.to_owned());
        }
    }
    spans
}

/// `word` without a bracket that opens or closes around more than the word: "(SMILES O)" is
/// two words, `(SMILES` and `O)`, and Gemma 3 270M asked for the weight of `O)`. A SMILES's
/// own brackets balance (`CC(=O)O`), so they stay.
fn unbracketed(mut word: &str) -> &str {
    let count = |w: &str, c: char| w.chars().filter(|&x| x == c).count();
    while word.ends_with(')') && count(word, ')') > count(word, '(') {
        word = &word[..word.len() - 1];
    }
    while word.starts_with('(') && count(word, '(') > count(word, ')') {
        word = &word[1..];
    }
    word
}

/// The names of the arguments that `tool` takes from the request: those every worked example
/// (an example with a request) quotes from its request. None when the tool has no worked
/// example. An argument the examples compute (`7*8` for "7 times 8") is not one.
pub fn quoted_arguments(tool: &ToolDefinition) -> Vec<&str> {
    let worked: Vec<(&str, &Value)> =
        tool.examples.iter().filter_map(|e| Some((e.request.as_deref()?, &e.arguments))).collect();
    let Some(properties) = tool.parameters.get("properties").and_then(Value::as_object) else {
        return Vec::new();
    };
    if worked.is_empty() {
        return Vec::new();
    }
    properties
        .keys()
        .filter(|name| {
            worked.iter().all(|(request, arguments)| {
                arguments
                    .get(name.as_str())
                    .and_then(Value::as_str)
                    .is_some_and(|v| !v.is_empty() && request.contains(v))
            })
        })
        .map(String::as_str)
        .collect()
}

/// The words of `spans` that `argument` of `tool` may be: valid under the argument's own
/// schema where it compiles alone (chem's SMILES `pattern` refuses `benzene` and `12`), and
/// not one that `failed` says this tool has already failed with.
pub fn quotable_words<'s>(
    tool: &ToolDefinition,
    argument: &str,
    spans: &'s [String],
    failed: impl Fn(&str) -> bool,
) -> Vec<&'s str> {
    let schema = tool.parameters.get("properties").and_then(|p| p.get(argument));
    let fits = schema.and_then(|s| compile_schema(s).ok());
    spans
        .iter()
        .map(String::as_str)
        .filter(|word| fits.as_ref().is_none_or(|v| v.is_valid(&Value::from(*word))))
        .filter(|word| !failed(word))
        .collect()
}

/// Whether `tool` can take its quoted arguments from a request of these `spans`: each has a
/// word that fits. A tool that quotes nothing can.
pub fn can_quote(tool: &ToolDefinition, spans: &[String]) -> bool {
    quoted_arguments(tool).into_iter().all(|argument| !quotable_words(tool, argument, spans, |_| false).is_empty())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::registry::{ToolExample, ToolSource};

    /// `molecular_weight` with a SMILES shape and worked examples that quote it.
    fn weight(examples: &[(Option<&str>, &str)]) -> ToolDefinition {
        ToolDefinition {
            name: "molecular_weight".into(),
            description: "d".into(),
            parameters: json!({"type": "object", "properties": {"smiles": {"type": "string", "pattern": "^[CNOc1=()]+$"}}}),
            examples: examples
                .iter()
                .map(|(request, smiles)| ToolExample {
                    arguments: json!({ "smiles": smiles }),
                    result: Some(json!(1)),
                    request: request.map(str::to_owned),
                })
                .collect(),
            source: ToolSource::Builtin,
        }
    }

    #[test]
    fn an_argument_every_worked_example_quotes_is_quoted() {
        assert_eq!(quoted_arguments(&weight(&[(Some("Is CCN a valid SMILES?"), "CCN"), (None, "O")])), ["smiles"]);
        assert!(quoted_arguments(&weight(&[(Some("Is ethanol a valid SMILES?"), "CCO")])).is_empty());
        assert!(quoted_arguments(&weight(&[])).is_empty());
    }

    #[test]
    fn a_quotable_word_fits_the_arguments_schema_and_did_not_fail() {
        let tool = weight(&[(Some("Is CCN a valid SMILES?"), "CCN")]);
        let spans = request_spans("weigh CCO or CCN (SMILES O), then 12");
        assert_eq!(quotable_words(&tool, "smiles", &spans, |_| false), ["CCO", "CCN", "O"]);
        assert_eq!(quotable_words(&tool, "smiles", &spans, |w| w == "CCO"), ["CCN", "O"]);
        assert!(can_quote(&tool, &spans));
        assert!(!can_quote(&tool, &request_spans("round 2/3 to 2 decimal places")));
        // A tool that quotes nothing can answer anything.
        assert!(can_quote(&weight(&[]), &request_spans("round 2/3")));
    }

    #[test]
    fn the_pronoun_i_is_no_word_to_quote_but_a_quoted_i_is() {
        assert_eq!(request_spans("I put $1000 in, I think."), ["put", "$1000", "in", "think"]);
        assert_eq!(request_spans("weigh 'I' and [I-]"), ["weigh", "I", "and", "[I-]"]);
    }

    #[test]
    fn a_bracket_that_opens_or_closes_around_more_than_the_word_is_not_part_of_it() {
        assert_eq!(request_spans("(SMILES O), or (CCO) or CC(=O)O)."), ["SMILES", "O", "or", "CCO", "CC(=O)O"]);
        assert_eq!(request_spans("C1CC(C)"), ["C1CC(C)"]);
        assert_eq!(
            request_spans("How heavy is aspirin (CC(=O)Oc1ccccc1C(=O)O), in g/mol?"),
            ["How", "heavy", "is", "aspirin", "CC(=O)Oc1ccccc1C(=O)O", "in", "g/mol"]
        );
    }
}
