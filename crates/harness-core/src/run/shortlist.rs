//! A small model's shortlist: the tools a request names in words, offered alone until a tool
//! has answered. Under constrained decoding a tiny model still picks the tool, and it picks
//! badly: SmolLM2-135M called `calculate` on "check whether c1ccccc1 is a valid SMILES" and
//! on nine other chemistry requests of the project's eval. The words of a request and of the
//! tools' own names and descriptions say which tools it is about, and that much needs no model.
//!
//! Deterministic and cheap: the request's words against each tool's name, description and
//! argument names, each matching word weighted by how few tools share it (a word every tool
//! has says nothing). Names and argument names alone were tried and measured worse on the
//! eval (3 right of 48 against 7): "2 to the power of 10" and "heavy atoms" are words of
//! the descriptions only. The cost is a description's word singling out the wrong tool
//! ("the average of 12, 15 and 21" would shortlist `molecular_weight`, "Average molecular
//! weight", but a tool that must quote an argument from the request, with no word of it that
//! fits, is never shortlisted: [`crate::quoting`]). The tools within half of the best score
//! are the shortlist; a request that names no tool's words (most arithmetic: "what is 1234 +
//! 5678?") has none, and every tool is offered as before. The loop offers it only under a small model's guards (the
//! ones that withhold `finish`), and only until a tool has answered.

use std::collections::HashSet;

use crate::quoting;
use crate::registry::{FINISH, ToolDefinition};

/// Words too common to say which tool a request is about, whatever the tools' texts hold: the
/// question words, and English's pronouns, prepositions, conjunctions and auxiliaries. One of
/// them in a single tool's description singles that tool out: "How much is there after 3
/// years?" shortlisted `validate_smiles` alone, whose description says "text after the SMILES".
const STOP_WORDS: &[&str] = &[
    "about", "above", "after", "again", "all", "also", "and", "any", "are", "been", "before", "being", "below",
    "between", "both", "but", "can", "could", "did", "does", "during", "each", "either", "even", "every", "for",
    "from", "get", "give", "had", "has", "have", "her", "his", "how", "into", "its", "just", "many", "more", "most",
    "much", "not", "off", "one", "only", "other", "our", "out", "over", "please", "same", "she", "should", "some",
    "such", "than", "that", "the", "their", "them", "then", "there", "these", "they", "this", "those", "through",
    "too", "under", "until", "upon", "very", "was", "were", "what", "when", "where", "whether", "which", "while",
    "who", "why", "will", "with", "within", "without", "would", "you", "your",
];

/// The shortest common start of two different words that makes them one word (`valid` and
/// `validate`, `weigh` and `weight`): shorter starts join unrelated words (`atom`, `atomic`).
const SHARED_START: usize = 5;

/// The names of the tools `request` is about, in the registry's order, `finish` never among
/// them; `None` when no tool is singled out (none matches, or all do).
pub(super) fn shortlist(request: &str, tools: &[ToolDefinition]) -> Option<Vec<String>> {
    // A tool that quotes an argument from the request, with no word of it that fits, cannot
    // answer it, whatever its words: "the average of 12, 15 and 21" has no SMILES, and
    // shortlisted `molecular_weight` alone ("Average molecular weight") until it was left out.
    let spans = quoting::request_spans(request);
    let all = tools.iter().filter(|t| t.name != FINISH).count();
    let tools: Vec<&ToolDefinition> =
        tools.iter().filter(|t| t.name != FINISH && quoting::can_quote(t, &spans)).collect();
    if all < 2 || tools.is_empty() {
        return None;
    }
    let vocabularies: Vec<HashSet<String>> = tools.iter().map(|t| vocabulary(t)).collect();
    let mut scores = vec![0.0_f64; tools.len()];
    let asked: HashSet<String> = words(request).into_iter().collect();
    for word in &asked {
        let holders: Vec<usize> = (0..tools.len()).filter(|&i| knows(&vocabularies[i], word)).collect();
        if holders.is_empty() || holders.len() == tools.len() {
            continue;
        }
        // Inverse document frequency: a word of one tool in three weighs ln 3, of two ln 1.5.
        let weight = (tools.len() as f64 / holders.len() as f64).ln();
        for i in holders {
            scores[i] += weight;
        }
    }
    let best = scores.iter().copied().fold(0.0, f64::max);
    if best <= 0.0 {
        // No word singles a tool out: every tool is offered, as without a shortlist (a tool
        // that cannot quote its argument is left out of the grammar by the provider).
        return None;
    }
    let chosen: Vec<String> =
        tools.iter().zip(&scores).filter(|(_, s)| **s * 2.0 >= best).map(|(t, _)| t.name.clone()).collect();
    (chosen.len() < all).then_some(chosen)
}

/// A tool's words: its name's parts, its description's words and its arguments' names and
/// descriptions.
fn vocabulary(tool: &ToolDefinition) -> HashSet<String> {
    let mut text = format!("{} {}", tool.name.replace(['_', '-', '.'], " "), tool.description);
    if let Some(properties) = tool.parameters.get("properties").and_then(|p| p.as_object()) {
        for (name, schema) in properties {
            text.push(' ');
            text.push_str(&name.replace('_', " "));
            if let Some(d) = schema.get("description").and_then(|d| d.as_str()) {
                text.push(' ');
                text.push_str(d);
            }
        }
    }
    words(&text).into_iter().collect()
}

/// Whether `vocabulary` has `word`, or a word that starts as it does for [`SHARED_START`]
/// letters and one of the two is the start of the other.
fn knows(vocabulary: &HashSet<String>, word: &str) -> bool {
    vocabulary.contains(word)
        || (word.len() >= SHARED_START
            && vocabulary
                .iter()
                .any(|w| w.len() >= SHARED_START && (w.starts_with(word) || word.starts_with(w.as_str()))))
}

/// The words of `text` that can say what it is about: lower-cased runs of letters and digits
/// of three characters or more that hold a letter, stop words left out.
fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.chars().count() >= 3 && w.chars().any(char::is_alphabetic))
        .map(str::to_lowercase)
        .filter(|w| !STOP_WORDS.contains(&w.as_str()))
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::registry::ToolSource;

    fn tool(name: &str, description: &str, argument: &str) -> ToolDefinition {
        ToolDefinition {
            name: name.into(),
            description: description.into(),
            parameters: json!({"type": "object", "properties": {argument: {"type": "string"}}}),
            examples: vec![],
            source: ToolSource::Builtin,
        }
    }

    fn tools() -> Vec<ToolDefinition> {
        vec![
            tool("finish", "End the run with the answer.", "answer"),
            tool(
                "calculate",
                "Evaluate arithmetic: + - * /, sqrt, round(x, digits); a string of digits.",
                "expression",
            ),
            tool(
                "validate_smiles",
                "Check a SMILES string. Returns {valid, atom_count, formula}; counts atoms of the molecular graph.",
                "smiles",
            ),
            tool(
                "molecular_weight",
                "Average molecular weight (g/mol, rounded to 3 decimals) and formula of a SMILES string.",
                "smiles",
            ),
        ]
    }

    fn of(request: &str) -> Option<Vec<String>> {
        shortlist(request, &tools())
    }

    #[test]
    fn a_request_that_names_one_tools_words_gets_that_tool_alone() {
        assert_eq!(of("check whether c1ccccc1 is a valid SMILES"), Some(vec!["validate_smiles".to_owned()]));
        assert_eq!(of("calculate 6*7"), Some(vec!["calculate".to_owned()]));
        assert_eq!(of("the sqrt of 2"), Some(vec!["calculate".to_owned()]));
        assert_eq!(of("What is the molecular weight of aspirin, CC(=O)O?"), Some(vec!["molecular_weight".to_owned()]));
        assert_eq!(of("How many grams does a mole of water weigh?"), Some(vec!["molecular_weight".to_owned()]));
    }

    #[test]
    fn words_that_two_tools_share_shortlist_both() {
        assert_eq!(
            of("What's the molecular formula of caffeine, Cn1cnc2c1c(=O)n(C)c(=O)n2C?"),
            Some(vec!["validate_smiles".to_owned(), "molecular_weight".to_owned()])
        );
    }

    #[test]
    fn a_request_in_no_tools_words_or_in_every_tools_has_no_shortlist() {
        assert_eq!(of("What is 1234 + 5678?"), None);
        assert_eq!(of("how much is 12 times 17"), None);
        // `string` is in every tool's text: it says nothing.
        assert_eq!(of("a string please"), None);
    }

    #[test]
    fn a_preposition_in_one_tools_description_singles_no_tool_out() {
        let mut tools = tools();
        tools[2].description.push_str(" Do not add text after the SMILES.");
        assert_eq!(shortlist("How much is there after 3 years?", &tools), None);
    }

    #[test]
    fn finish_is_never_shortlisted_and_one_tool_needs_no_shortlist() {
        assert_eq!(of("finish the run with the answer"), None);
        let one = vec![tools()[0].clone(), tools()[1].clone()];
        assert_eq!(shortlist("round this", &one), None);
    }

    #[test]
    fn a_tool_that_cannot_quote_its_argument_from_the_request_is_never_shortlisted() {
        let mut tools = tools();
        // molecular_weight as chem declares it: a SMILES of a shape, quoted by its worked examples.
        tools[3].parameters["properties"]["smiles"]["pattern"] = json!("^[A-Za-z0-9=()]*[CNOc][A-Za-z0-9=()]*$");
        tools[3].examples = vec![crate::registry::ToolExample {
            arguments: json!({"smiles": "CCC"}),
            result: Some(json!(44.097)),
            request: Some("What is the molecular weight of propane, CCC?".into()),
        }];
        // "Average molecular weight" is in its description, but no word here is a SMILES: no
        // tool is singled out, and every tool is offered.
        assert_eq!(shortlist("What's the average of 12, 15 and 21?", &tools), None);
        assert_eq!(shortlist("check whether 12 is a valid SMILES", &tools), Some(vec!["validate_smiles".to_owned()]));
        assert_eq!(shortlist("the molecular weight of CCO", &tools), Some(vec!["molecular_weight".to_owned()]));
    }

    #[test]
    fn short_common_starts_do_not_join_words() {
        let v: HashSet<String> = ["atomic".to_owned()].into();
        assert!(!knows(&v, "atom"));
        assert!(knows(&["validate".to_owned()].into(), "valid"));
        assert!(!knows(&["invalid".to_owned()].into(), "valid"));
    }
}
