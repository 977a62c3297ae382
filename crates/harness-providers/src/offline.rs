//! The offline router: a small deterministic router, not a model.
//!
//! It exists so that `harness run` works with no key and no server. It reads the request,
//! picks the tool whose name and description share the most words with it, fills the one
//! required argument with the request from its first word that named nothing to its last (less
//! the words of the tool's name), and finishes with the tool's result. Anything it cannot match
//! ends in `finish` with an answer that says so.

use async_trait::async_trait;
use harness_core::{
    FINISH, Message, ModelProvider, ModelReply, ProposedCall, ProviderError, RouterRequest, ToolChoice, ToolDefinition,
};
use serde_json::{Value, json};

/// Words that say nothing about which tool is meant.
const STOPWORDS: &[&str] = &[
    "a", "an", "the", "of", "to", "in", "on", "for", "and", "or", "is", "are", "be", "me", "my", "please", "what",
    "whats", "this", "that", "it", "its", "with", "by", "from", "as", "at", "can", "you", "i", "give", "tell", "show",
    "how", "much", "many", "do", "does", "value", "result", "some",
];

/// A deterministic stand-in for a model; see the module docs for exactly what it does.
#[derive(Debug, Default, Clone, Copy)]
pub struct OfflineRouter;

fn normalise(word: &str) -> String {
    word.chars().filter(|c| c.is_alphanumeric()).flat_map(char::to_lowercase).collect()
}

fn is_stopword(norm: &str) -> bool {
    norm.is_empty() || STOPWORDS.contains(&norm)
}

/// Two words match when equal, or when both are long and share a five-letter stem
/// ("calculate" and "calculation").
fn same_word(a: &str, b: &str) -> bool {
    a == b || (a.len() >= 5 && b.len() >= 5 && a.get(..5) == b.get(..5))
}

fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric()).map(normalise).filter(|w| !is_stopword(w)).collect()
}

/// What a word of the request matched in a tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Named {
    Nothing,
    Name,
    Description,
}

/// How well a tool matches the request's words, and what each word matched.
fn score(tool: &ToolDefinition, request: &[String]) -> (u32, Vec<Named>) {
    let name = words(&tool.name.replace(['_', '-'], " "));
    let description = words(&tool.description);
    let mut total = 0;
    let used = request
        .iter()
        .map(|w| {
            if name.iter().any(|n| same_word(n, w)) {
                total += 3;
                Named::Name
            } else if w.len() >= 4 && w.chars().all(char::is_alphabetic) && description.iter().any(|d| same_word(d, w))
            {
                // Only plain words name a tool by its description: "c1ccccc1" in a
                // description is an example value, and in a request it is the argument.
                total += 1;
                Named::Description
            } else {
                Named::Nothing
            }
        })
        .collect();
    (total, used)
}

fn finish(answer: Value) -> ModelReply {
    ModelReply {
        calls: vec![ProposedCall { id: None, name: FINISH.to_owned(), arguments: json!({ "answer": answer }).into() }],
        ..Default::default()
    }
}

/// Fills the arguments object from the words that did not name the tool.
fn fill(tool: &ToolDefinition, leftover: &str) -> Result<Value, String> {
    let required: Vec<&str> =
        tool.parameters["required"].as_array().map_or_else(Vec::new, |r| r.iter().filter_map(Value::as_str).collect());
    match required.as_slice() {
        [] => Ok(json!({})),
        [one] => {
            if leftover.is_empty() {
                return Err(format!(
                    "the tool {} needs its {one:?} argument, and the request leaves nothing to fill it with",
                    tool.name
                ));
            }
            let kind = tool.parameters["properties"][*one]["type"].as_str().unwrap_or("string");
            let value = match kind {
                "integer" => {
                    leftover.parse::<i64>().map(Value::from).map_err(|_| format!("{leftover:?} is not an integer"))?
                }
                "number" => serde_json::Number::from_f64(
                    leftover.parse::<f64>().map_err(|_| format!("{leftover:?} is not a number"))?,
                )
                .map(Value::Number)
                .ok_or_else(|| format!("{leftover:?} is not a finite number"))?,
                _ => Value::String(leftover.to_owned()),
            };
            Ok(json!({ *one: value }))
        }
        many => Err(format!(
            "the tool {} needs {} arguments ({}), more than the offline router can fill from a sentence",
            tool.name,
            many.len(),
            many.join(", ")
        )),
    }
}

/// A filler word: a stop word, not punctuation (a `(` or `*` belongs to the argument).
fn is_filler(norm: &str) -> bool {
    !norm.is_empty() && STOPWORDS.contains(&norm)
}

/// The request's words that fill the argument: from the first that is no filler and named
/// nothing to the last that is no filler and not the tool's name, less the tool's name. Words
/// of the description stay inside: "calculate 2 to the power of 10" and "calculate 6 hours in
/// minutes" are whole expressions, and dropping `power` or `minutes` (as every matched word
/// once was) gave "2 10", an error, and "15% 80", a wrong 15.
fn argument_words<'r>(raw: &[&'r str], norms: &[String], named: &[Named]) -> Vec<&'r str> {
    let Some(first) = (0..raw.len()).find(|&i| named[i] == Named::Nothing && !is_filler(&norms[i])) else {
        return Vec::new();
    };
    let last = (first..raw.len()).rev().find(|&i| named[i] != Named::Name && !is_filler(&norms[i])).unwrap_or(first);
    (first..=last).filter(|&i| named[i] != Named::Name).map(|i| raw[i]).collect()
}

impl OfflineRouter {
    /// Decides the next reply from the conversation alone; the same conversation gives the same reply.
    pub fn decide(&self, request: RouterRequest<'_>) -> ModelReply {
        let asked = request.conversation.iter().find_map(|m| match m {
            Message::User { content } => Some(content.as_str()),
            _ => None,
        });
        let last_result = request.conversation.iter().rev().find_map(|m| match m {
            Message::ToolResult { tool, content, is_error, .. } => {
                Some((tool.as_deref().unwrap_or("?"), content, *is_error))
            }
            _ => None,
        });
        if let Some((tool, content, is_error)) = last_result {
            if is_error {
                let message = content["message"].as_str().unwrap_or("unknown error");
                return finish(json!(format!("the offline router called {tool}, which failed: {message}")));
            }
            return finish(content.clone());
        }
        let Some(asked) = asked.filter(|a| !a.trim().is_empty()) else {
            return finish(json!("the request is empty: there is nothing to do"));
        };
        // `finish` forced: named, or the only tool offered (how the loop forces it).
        let finish_forced = matches!(request.tool_choice, ToolChoice::Tool(t) if t == FINISH)
            || request.tools.iter().all(|t| t.name == FINISH);
        if finish_forced {
            return finish(json!("the offline router could not complete the request within the step budget"));
        }

        let raw: Vec<&str> = asked.split_whitespace().collect();
        let request_words: Vec<String> = raw.iter().map(|w| normalise(w)).collect();
        let best = request.tools.iter().filter(|t| t.name != FINISH).map(|t| (t, score(t, &request_words))).fold(
            None::<(&ToolDefinition, (u32, Vec<Named>))>,
            |best, cand| match &best {
                Some((_, (s, _))) if *s >= cand.1.0 => best,
                _ => Some(cand),
            },
        );
        let Some((tool, (_, used))) = best.filter(|(_, (points, _))| *points >= 3) else {
            let names: Vec<&str> = request.tools.iter().map(|t| t.name.as_str()).filter(|n| *n != FINISH).collect();
            return finish(json!(format!(
                "the offline router found no tool for this request (it matches words of a tool's name or description, it is not a model). Tools: {}. Configure a model provider to ask in free form (see docs/operators.md)",
                if names.is_empty() { "none loaded".to_owned() } else { names.join(", ") }
            )));
        };
        match fill(tool, &argument_words(&raw, &request_words, &used).join(" ")) {
            Ok(arguments) => ModelReply {
                calls: vec![ProposedCall { id: None, name: tool.name.clone(), arguments: arguments.into() }],
                ..Default::default()
            },
            Err(why) => {
                finish(json!(format!("the offline router chose the tool {} but cannot call it: {why}", tool.name)))
            }
        }
    }
}

#[async_trait]
impl ModelProvider for OfflineRouter {
    fn name(&self) -> &str {
        "offline"
    }

    async fn complete(&self, request: RouterRequest<'_>) -> Result<ModelReply, ProviderError> {
        Ok(self.decide(request))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use harness_core::ToolSource;

    fn tool(name: &str, description: &str, arg: &str, kind: &str) -> ToolDefinition {
        ToolDefinition {
            name: name.into(),
            description: description.into(),
            parameters: json!({"type": "object", "properties": {arg: {"type": kind}}, "required": [arg]}),
            examples: vec![],
            source: ToolSource::Builtin,
        }
    }

    fn tools() -> Vec<ToolDefinition> {
        vec![
            tool("calculate", "Calculate the value of an arithmetic expression.", "expression", "string"),
            tool("validate_smiles", "Check a SMILES string (benzene c1ccccc1 is C6H6).", "smiles", "string"),
            tool("list_dir", "List the entries of a directory.", "path", "string"),
        ]
    }

    fn ask(request: &str) -> ModelReply {
        let conversation = [Message::User { content: request.into() }];
        let tools = tools();
        OfflineRouter.decide(RouterRequest {
            conversation: &conversation,
            tools: &tools,
            tool_choice: &ToolChoice::Required,
        })
    }

    #[test]
    fn picks_the_tool_and_fills_the_argument() {
        let r = ask("calculate 6*7");
        assert_eq!(
            (r.calls[0].name.as_str(), r.calls[0].arguments.as_value()),
            ("calculate", Some(&json!({"expression": "6*7"})))
        );
        let r = ask("validate the SMILES c1ccccc1");
        assert_eq!(
            (r.calls[0].name.as_str(), r.calls[0].arguments.as_value()),
            ("validate_smiles", Some(&json!({"smiles": "c1ccccc1"})))
        );
        let r = ask("calculate 2 to the power of 10 please");
        assert_eq!(r.calls[0].arguments.as_value(), Some(&json!({"expression": "2 to the power of 10"})));
        let r = ask("calculate 15% of 80");
        assert_eq!(r.calls[0].arguments.as_value(), Some(&json!({"expression": "15% of 80"})));
        let r = ask("is c1ccccc1 a valid SMILES");
        assert_eq!(r.calls[0].arguments.as_value(), Some(&json!({"smiles": "c1ccccc1"})));
        let r = ask("please list the directory src");
        assert_eq!(
            (r.calls[0].name.as_str(), r.calls[0].arguments.as_value()),
            ("list_dir", Some(&json!({"path": "src"})))
        );
    }

    #[test]
    fn no_match_finishes_saying_so() {
        let r = ask("write me a poem");
        assert_eq!(r.calls[0].name, FINISH);
        assert!(r.calls[0].arguments.to_value()["answer"].as_str().unwrap().contains("found no tool"));
    }

    #[test]
    fn finishes_with_the_result_or_the_failure() {
        let tools = tools();
        let mut conversation = vec![
            Message::User { content: "calculate 6*7".into() },
            Message::ToolResult { call_id: None, tool: Some("calculate".into()), content: json!(42), is_error: false },
        ];
        let req = |c: &[Message]| {
            OfflineRouter.decide(RouterRequest { conversation: c, tools: &tools, tool_choice: &ToolChoice::Required })
        };
        assert_eq!(req(&conversation).calls[0].arguments, json!({"answer": 42}));
        conversation[1] = Message::ToolResult {
            call_id: None,
            tool: Some("calculate".into()),
            content: json!({"code": "tool_error", "message": "division by zero"}),
            is_error: true,
        };
        let answer = req(&conversation).calls[0].arguments.to_value()["answer"].as_str().unwrap().to_owned();
        assert!(answer.contains("division by zero"), "{answer}");
    }

    #[test]
    fn the_tool_is_named_but_nothing_fills_it() {
        let r = ask("calculate");
        assert_eq!(r.calls[0].name, FINISH);
        assert!(r.calls[0].arguments.to_value()["answer"].as_str().unwrap().contains("expression"));
    }
}
