//! The short form, `#[tool]` functions and `plugin!`, seen as the host sees it: the manifest it
//! generates (description, schema, parameter docs, output, examples) and calls through it.

use harness_sdk::serde_json::{Value, json};
use harness_sdk::{Plugin, ToolError};

/// What `greet` returns.
#[harness_sdk::schema]
pub struct Greeting {
    /// The greeting.
    pub greeting: String,
}

/// Greets a person by name.
///
/// # Arguments
/// * `name` - whom to greet.
/// * `times` - how many exclamation marks.
#[harness_sdk::tool(effects = "pure", example(args = {"name": "Ada", "times": 1}, result = {"greeting": "Hello, Ada!"}))]
fn greet(#[schemars(length(min = 1))] name: String, times: Option<u8>) -> Greeting {
    Greeting { greeting: format!("Hello, {name}{}", "!".repeat(usize::from(times.unwrap_or(1)))) }
}

/// The kinds of word.
#[harness_sdk::schema]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// Upper case.
    Upper,
    /// Lower case.
    Lower,
}

/// Changes a word's case; refuses an empty one.
#[harness_sdk::tool(effects = "reads", name = "case",
    example(args = {"word": "", "kind": "upper"}, error = "empty_word"))]
fn change_case(word: String, kind: Kind) -> Result<String, ToolError> {
    if word.is_empty() {
        return Err(ToolError { code: "empty_word".into(), message: "the word is empty".into() });
    }
    Ok(match kind {
        Kind::Upper => word.to_uppercase(),
        Kind::Lower => word.to_lowercase(),
    })
}

harness_sdk::plugin!(description = "Greets people.", tools = [greet, change_case]);

#[test]
fn the_manifest_comes_from_the_signatures_and_doc_comments() {
    let runtime = harness_sdk::Runtime::<__HarnessPlugin>::new();
    let manifest = runtime.manifest();
    assert_eq!((manifest.name.as_str(), manifest.version.as_str()), ("harness-sdk", env!("CARGO_PKG_VERSION")));
    assert_eq!(manifest.description, "Greets people.");
    let greet = &manifest.tools[0];
    assert_eq!(greet.name, "greet");
    assert_eq!(greet.description, "Greets a person by name.");
    assert_eq!(greet.effects, harness_sdk::Effects::Pure);
    let params = &greet.parameters;
    assert_eq!(params["additionalProperties"], json!(false), "{params}");
    assert_eq!(params["required"], json!(["name"]), "{params}");
    assert_eq!(params["properties"]["name"]["description"], "whom to greet.", "{params}");
    assert_eq!(params["properties"]["name"]["minLength"], 1, "{params}");
    assert_eq!(params["properties"]["times"]["description"], "how many exclamation marks.", "{params}");
    let output = greet.output.as_ref().expect("an output schema");
    assert_eq!(output["properties"]["greeting"]["description"], "The greeting.", "{output}");
    assert_eq!(greet.examples[0].result, Some(json!({"greeting": "Hello, Ada!"})));

    let case = &manifest.tools[1];
    assert_eq!((case.name.as_str(), case.effects), ("case", harness_sdk::Effects::Reads));
    assert_eq!(case.output.as_ref().map(|o| o["type"].clone()), Some(json!("string")));
    assert_eq!(case.examples[0].error_code.as_deref(), Some("empty_word"));
}

#[test]
fn tools_run_through_the_generated_arguments() {
    let tools = __HarnessPlugin::tools();
    let call = |i: usize, args: Value| tools[i].call(&__HarnessPlugin, args);
    assert_eq!(call(0, json!({"name": "Ada", "times": 3})), Ok(json!({"greeting": "Hello, Ada!!!"})));
    assert_eq!(call(1, json!({"word": "Ab", "kind": "lower"})), Ok(json!("ab")));
    assert_eq!(call(1, json!({"word": "", "kind": "lower"})).map_err(|e| e.code), Err("empty_word".to_owned()));
    let unknown = call(0, json!({"name": "Ada", "extra": 1})).map_err(|e| e.code);
    assert_eq!(unknown, Err("invalid_arguments".to_owned()));
    // The function stays a plain function, for the plugin's own unit tests.
    assert_eq!(greet("Bo".into(), None).greeting, "Hello, Bo!");
}

/// What docs/plugin-authoring.md tells authors to write: the generated tool alone, with `()`
/// for the plugin, since a `#[tool]` function uses none.
#[test]
fn a_generated_tool_runs_without_a_plugin() {
    let err = greet::tool::<()>().call(&(), json!({"nom": "Ada"})).map_err(|e| e.code);
    assert_eq!(err, Err("invalid_arguments".to_owned()));
    let tool = change_case::tool::<()>();
    for example in &tool.manifest().examples {
        let got = tool.call(&(), example.arguments.clone());
        assert_eq!(got.map_err(|e| e.code), Err(example.error_code.clone().unwrap_or_default()));
    }
}
