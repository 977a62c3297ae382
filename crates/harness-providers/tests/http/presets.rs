//! Each preset: its default base URL, its key variable, the headers and body it adds.

use harness_core::Message;
use harness_providers::{ConfigError, HttpProvider, HttpProviderConfig, Preset};
use serde_json::json;

use crate::server::{MockApi, anthropic_tool_uses, openai_calls};
use crate::{KEY, Notices, ask_once, config, env};

fn user() -> Vec<Message> {
    vec![Message::User { content: "hi".into() }]
}

fn finish() -> crate::server::Canned {
    openai_calls(&[("c1", "finish", r#"{"answer": 1}"#)])
}

/// The preset with a model and nothing else set.
fn bare(preset: Preset) -> HttpProviderConfig {
    let mut config = HttpProviderConfig::new(preset);
    config.model = Some("m".into());
    config
}

#[test]
fn every_preset_has_its_default_base_url_and_key_variable() {
    let cases = [
        (Preset::OpenAi, "https://api.openai.com/v1/chat/completions", Some("OPENAI_API_KEY")),
        (Preset::OpenRouter, "https://openrouter.ai/api/v1/chat/completions", Some("OPENROUTER_API_KEY")),
        (Preset::Ollama, "http://localhost:11434/v1/chat/completions", None),
        (Preset::LlamaCpp, "http://localhost:8080/v1/chat/completions", None),
        (Preset::Vllm, "http://localhost:8000/v1/chat/completions", Some("VLLM_API_KEY")),
        (Preset::Anthropic, "https://api.anthropic.com/v1/messages", Some("ANTHROPIC_API_KEY")),
    ];
    for (preset, endpoint, key_env) in cases {
        let vars: Vec<(&str, &str)> = key_env.iter().map(|k| (*k, KEY)).collect();
        let provider = HttpProvider::with_env(bare(preset), env(&vars)).unwrap();
        assert_eq!((provider.endpoint(), provider.key_env()), (endpoint, key_env), "{preset}");
        assert_eq!(preset.name().parse::<Preset>().unwrap(), preset);
        no_key_in_debug(&provider);
    }
}

fn no_key_in_debug(provider: &HttpProvider) {
    crate::no_key("the provider's debug output", &format!("{provider:?}"));
}

#[test]
fn hosted_presets_need_their_key_and_local_ones_do_not() {
    for preset in [Preset::OpenAi, Preset::OpenRouter, Preset::Anthropic] {
        let e = HttpProvider::with_env(bare(preset), env(&[])).unwrap_err();
        let var = preset.key_env().unwrap();
        assert_eq!(e, ConfigError::MissingKey { provider: preset, var: var.to_owned() });
        assert!(e.to_string().contains(&format!("{var} is not set")), "{e}");
    }
    for preset in [Preset::Ollama, Preset::LlamaCpp, Preset::Vllm] {
        assert!(HttpProvider::with_env(bare(preset), env(&[])).is_ok(), "{preset}");
    }
    // A hosted API's format at another address (LM Studio, a proxy) needs no key.
    let mut lm_studio = bare(Preset::OpenAi);
    lm_studio.base_url = Some("http://localhost:1234/v1".into());
    assert!(HttpProvider::with_env(lm_studio, env(&[])).is_ok());
    // A variable named on purpose must be set.
    let mut named = bare(Preset::Ollama);
    named.api_key_env = Some("MY_KEY".into());
    let e = HttpProvider::with_env(named, env(&[])).unwrap_err();
    assert!(e.to_string().contains("MY_KEY is not set"), "{e}");
}

#[test]
fn settings_that_cannot_work_are_refused_before_any_request() {
    let mut no_model = bare(Preset::Ollama);
    no_model.model = None;
    let e = HttpProvider::with_env(no_model, env(&[])).unwrap_err();
    assert!(e.to_string().contains("needs a model: pass --model NAME (for example qwen2.5:7b"), "{e}");
    let mut llamacpp = bare(Preset::LlamaCpp);
    llamacpp.model = None;
    assert_eq!(HttpProvider::with_env(llamacpp, env(&[])).unwrap().model(), "default");

    for url in ["localhost:11434", "ftp://host/v1", "not a url"] {
        let mut c = bare(Preset::Ollama);
        c.base_url = Some(url.into());
        let e = HttpProvider::with_env(c, env(&[])).unwrap_err();
        assert!(matches!(e, ConfigError::InvalidBaseUrl { .. }), "{url}: {e}");
    }
    let e = HttpProvider::with_env(bare(Preset::OpenAi), env(&[("OPENAI_API_KEY", "sk-a\nb")])).unwrap_err();
    assert_eq!(e, ConfigError::InvalidKey { var: "OPENAI_API_KEY".into() });
    let mut pasted = bare(Preset::OpenRouter);
    pasted.api_key_env = Some("sk-or-v1-abc123".into());
    let e = HttpProvider::with_env(pasted, env(&[])).unwrap_err();
    assert!(e == ConfigError::InvalidKeyEnv && !e.to_string().contains("sk-or"), "{e}");
    assert!("bogus".parse::<Preset>().unwrap_err().to_string().contains("openrouter, ollama"));
}

#[test]
fn openai_takes_its_base_url_from_the_environment_below_the_flag() {
    let vars = [("OPENAI_API_KEY", KEY), ("OPENAI_BASE_URL", "http://127.0.0.1:9/v1/")];
    let p = HttpProvider::with_env(bare(Preset::OpenAi), env(&vars)).unwrap();
    assert_eq!(p.endpoint(), "http://127.0.0.1:9/v1/chat/completions");
    let mut flagged = bare(Preset::OpenAi);
    flagged.base_url = Some("http://127.0.0.1:10/v1".into());
    let p = HttpProvider::with_env(flagged, env(&vars)).unwrap();
    assert_eq!(p.base_url(), "http://127.0.0.1:10/v1");
}

#[tokio::test]
async fn openrouter_sends_its_key_its_app_headers_and_require_parameters() {
    let api = MockApi::start(vec![finish()]).await;
    let mut c = config(Preset::OpenRouter, &format!("{}/api/v1", api.origin), &Notices::default());
    c.app_url = Some("https://example.org/my-app".into());
    c.app_title = Some("My App".into());
    let p = HttpProvider::with_env(c, env(&[("OPENROUTER_API_KEY", KEY)])).unwrap();
    ask_once(&p, &user()).await.unwrap();
    let seen = &api.seen()[0];
    assert_eq!(seen.path, "/api/v1/chat/completions");
    assert_eq!(seen.headers["authorization"], format!("Bearer {KEY}"));
    assert_eq!(seen.headers["http-referer"], "https://example.org/my-app");
    assert_eq!(seen.headers["x-title"], "My App");
    assert_eq!(seen.body["provider"], json!({"require_parameters": true}));
}

#[tokio::test]
async fn local_presets_send_no_key_unless_one_is_named() {
    for preset in [Preset::Ollama, Preset::LlamaCpp, Preset::Vllm] {
        let api = MockApi::start(vec![finish(), finish()]).await;
        let c = config(preset, &format!("{}/v1", api.origin), &Notices::default());
        // Even with OPENAI_API_KEY about, a local preset does not send it.
        let p = HttpProvider::with_env(c.clone(), env(&[("OPENAI_API_KEY", KEY)])).unwrap();
        ask_once(&p, &user()).await.unwrap();
        let mut named = c;
        named.api_key_env = Some("LOCAL_KEY".into());
        let p = HttpProvider::with_env(named, env(&[("LOCAL_KEY", "local-secret")])).unwrap();
        ask_once(&p, &user()).await.unwrap();
        let seen = api.seen();
        assert!(!seen[0].headers.contains_key("authorization"), "{preset}");
        assert_eq!(seen[1].headers["authorization"], "Bearer local-secret", "{preset}");
        assert!(seen[0].body.get("provider").is_none(), "{preset}");
        assert_eq!(seen[0].body["model"], "test-model");
    }
}

#[tokio::test]
async fn vllm_sends_its_key_variable_when_set() {
    let api = MockApi::start(vec![finish()]).await;
    let c = config(Preset::Vllm, &format!("{}/v1", api.origin), &Notices::default());
    let p = HttpProvider::with_env(c, env(&[("VLLM_API_KEY", KEY)])).unwrap();
    ask_once(&p, &user()).await.unwrap();
    assert_eq!(api.seen()[0].headers["authorization"], format!("Bearer {KEY}"));
}

#[tokio::test]
async fn anthropic_takes_a_base_url_with_or_without_v1() {
    for suffix in ["", "/v1"] {
        let api = MockApi::start(vec![anthropic_tool_uses(&[("t", "finish", json!({"answer": 1}))])]).await;
        let c = config(Preset::Anthropic, &format!("{}{suffix}", api.origin), &Notices::default());
        let p = HttpProvider::with_env(c, env(&[("ANTHROPIC_API_KEY", KEY)])).unwrap();
        ask_once(&p, &user()).await.unwrap();
        assert_eq!(api.seen()[0].path, "/v1/messages");
    }
}
