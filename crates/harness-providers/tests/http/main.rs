//! The HTTP providers against real HTTP servers on 127.0.0.1, started inside each test and
//! answering the way each API documents: the bodies and headers the harness sends, whole runs
//! through the loop, and every kind of trouble a server can make.

// Test code: a failed unwrap is a failed test, with its location.
#![allow(clippy::unwrap_used)]

mod anthropic;
mod context;
mod ladder;
mod openai;
mod presets;
mod server;
mod trouble;

use std::collections::HashMap;
use std::io;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use harness_core::{
    Message, RouterRequest, ToolChoice, ToolDefinition, ToolFailure, ToolHandler, ToolRegistry, ToolSource, TraceEntry,
    TraceSink,
};
use harness_providers::{HttpProvider, HttpProviderConfig, HttpSettings, Notice, Notify, Preset};
use serde_json::{Value, json};

/// The key every test uses; no request body, error, notice or reply may hold it.
pub const KEY: &str = "sk-test-5ecret-d0-not-print";

/// `add {a, b}`: the one tool of these tests.
struct Add;

impl ToolHandler for Add {
    fn call(&self, _tool: &str, arguments: &Value) -> Result<Value, ToolFailure> {
        let n = |k: &str| arguments[k].as_i64().unwrap_or(0);
        Ok(json!(n("a") + n("b")))
    }
}

/// A registry with `add` and the built-in `finish`.
pub fn registry() -> ToolRegistry {
    let mut registry = ToolRegistry::new();
    let add = ToolDefinition {
        name: "add".into(),
        description: "Add two integers.".into(),
        parameters: json!({
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
            "additionalProperties": false
        }),
        examples: vec![],
        source: ToolSource::Plugin { name: "test".into(), version: "0.1.0".into() },
    };
    registry.register(harness_core::ToolSpec::new(add, Arc::new(Add))).unwrap();
    registry
}

/// Notices, as the provider reported them.
#[derive(Clone, Default)]
pub struct Notices(Arc<Mutex<Vec<Notice>>>);

impl Notices {
    pub fn all(&self) -> Vec<Notice> {
        self.0.lock().unwrap().clone()
    }

    pub fn text(&self) -> String {
        self.all().iter().map(ToString::to_string).collect::<Vec<_>>().join("\n")
    }
}

/// Settings for tests: tiny waits, so that retries cost nothing, and timeouts that only a
/// hung request reaches.
pub fn settings(notices: &Notices) -> HttpSettings {
    let sink = notices.0.clone();
    HttpSettings {
        timeout: Duration::from_secs(10),
        connect_timeout: Duration::from_secs(5),
        retries: 3,
        backoff: Duration::from_millis(1),
        max_wait: Duration::from_secs(5),
        notify: Notify::new(move |n| sink.lock().unwrap().push(n.clone())),
        budget: None,
    }
}

/// A configuration of `preset` pointing at `base_url`, model `test-model`.
pub fn config(preset: Preset, base_url: &str, notices: &Notices) -> HttpProviderConfig {
    let mut config = HttpProviderConfig::new(preset);
    config.base_url = Some(base_url.to_owned());
    config.model = Some("test-model".to_owned());
    config.http = settings(notices);
    config
}

/// An environment holding only these variables.
pub fn env(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> + use<> {
    let vars: HashMap<String, String> = vars.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
    move |k| vars.get(k).cloned()
}

/// Builds a provider with `KEY` in the preset's key variable.
pub fn provider(config: HttpProviderConfig) -> HttpProvider {
    let var = config.api_key_env.clone().or(config.preset.key_env().map(str::to_owned)).unwrap_or_default();
    HttpProvider::with_env(config, env(&[(var.as_str(), KEY)])).unwrap()
}

/// One request with the user's text and the registry's tools, tool choice `Required`.
pub async fn ask_once(
    provider: &HttpProvider,
    conversation: &[Message],
) -> Result<harness_core::ModelReply, harness_core::ProviderError> {
    use harness_core::ModelProvider;
    let registry = registry();
    provider
        .complete(RouterRequest { conversation, tools: registry.definitions(), tool_choice: &ToolChoice::Required })
        .await
}

/// The router mode and usage of every step, as the trace got them.
#[derive(Default)]
pub struct Steps(pub Vec<(Option<String>, Option<harness_core::Usage>, Option<String>)>);

impl TraceSink for Steps {
    fn record(&mut self, entry: &TraceEntry<'_>) -> io::Result<()> {
        let error = entry.error.map(|e| e.code.as_str().to_owned());
        self.0.push((entry.router_mode.map(str::to_owned), entry.usage, error));
        Ok(())
    }
}

/// Asserts that the key appears nowhere in `text`.
pub fn no_key(what: &str, text: &str) {
    assert!(!text.contains(KEY), "the API key leaked into {what}: {text}");
}
