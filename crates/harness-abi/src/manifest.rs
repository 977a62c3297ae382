//! The JSON a plugin describes itself with, and the error object a tool call may return.
//!
//! These are plain serde types: the manifest crosses the boundary as JSON text, so fields can
//! be added in a minor ABI version without touching the exported module layout.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What a plugin library says about itself and its tools.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// Plugin name, `^[a-z][a-z0-9_-]{0,63}$`.
    pub name: String,
    /// Plugin version (semver).
    pub version: String,
    /// One sentence on what the plugin is for.
    pub description: String,
    /// Loaded only when an operator enables the plugin by name.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub test_only: bool,
    /// The tools the plugin offers.
    pub tools: Vec<ToolManifest>,
}

/// One tool as a plugin declares it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolManifest {
    /// Tool name, `^[a-zA-Z0-9_-]{1,64}$`, as model APIs require.
    pub name: String,
    /// What the tool does, for the model and for operators.
    pub description: String,
    /// JSON Schema of the arguments object.
    pub parameters: Value,
    /// JSON Schema of the result, when the plugin declares one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<Value>,
    /// What running the tool may touch.
    pub effects: Effects,
    /// Example calls with their expected outcome.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub examples: Vec<ToolExample>,
}

/// The class of side effects a tool may have, as a plugin declares it; operators can deny
/// whole classes. The host's own type is `harness_core::Effect` (this crate depends on nothing
/// of ours, the core on nothing of the plugin's side): the loader converts one to the other in
/// one place, `effect_class` in harness-loader's `register.rs`, whose test holds the names equal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Effects {
    /// Computes from its arguments alone; the same arguments give the same result.
    Pure,
    /// Reads state outside the process (files, clocks).
    Reads,
    /// Changes state outside the process.
    Writes,
    /// Talks to the network.
    Network,
}

impl Effects {
    /// The lowercase name used in manifests and configuration.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pure => "pure",
            Self::Reads => "reads",
            Self::Writes => "writes",
            Self::Network => "network",
        }
    }

    /// Parses the lowercase name used in manifests and configuration.
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "pure" => Some(Self::Pure),
            "reads" => Some(Self::Reads),
            "writes" => Some(Self::Writes),
            "network" => Some(Self::Network),
            _ => None,
        }
    }
}

/// A declared example: arguments and either the expected result or the expected error code.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolExample {
    /// The arguments object.
    pub arguments: Value,
    /// The result the call must return.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    /// The tool error code the call must return instead of a result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_code: Option<String>,
    /// A request a person might make that this call answers: a small model is shown the
    /// request, the call and its result as a worked exchange. Left out of the manifest when
    /// absent, so that a plugin that declares none still loads in an older harness.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<String>,
}

/// The error a tool call returns instead of a result, as JSON across the boundary.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolError {
    /// Stable machine-readable code: `tool_error`, `tool_panicked`, `unknown_tool`, ...
    pub code: String,
    /// What went wrong, for a person and for the model.
    pub message: String,
}

impl ToolError {
    /// The ordinary failure of a tool: its input was fine by the schema but the work failed.
    // Named after the code it sets, `tool_error`, which is what authors look for.
    #[allow(clippy::self_named_constructors)]
    pub fn tool_error(message: impl Into<String>) -> Self {
        Self { code: "tool_error".to_owned(), message: message.into() }
    }
}

/// Why a plugin's `init` declined to start: what its configuration lacks. Not an error of the
/// plugin: it is fine, only not configured, and the host says so quietly (`plugins list`:
/// `not offered: needs [plugins.files] root`) instead of reporting a failure.
///
/// It crosses the boundary as `init`'s error text, a JSON envelope `{"declined": {...}}`
/// ([`InitDeclined::to_init_error`]), so the exported module keeps its layout; a host that
/// predates it shows that text as the failure message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InitDeclined {
    /// What the configuration needs, as an operator writes it: `[plugins.files] root`.
    pub needs: String,
    /// What is not offered without it, and how to give it, for a person.
    pub message: String,
}

/// The envelope that tells a decline from a plain error message.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Declined {
    declined: InitDeclined,
}

impl InitDeclined {
    /// A decline for want of `needs`, explained by `message`.
    pub fn new(needs: impl Into<String>, message: impl Into<String>) -> Self {
        Self { needs: needs.into(), message: message.into() }
    }

    /// The error text `init` returns to decline.
    pub fn to_init_error(&self) -> String {
        serde_json::to_string(&Declined { declined: self.clone() }).unwrap_or_else(|_| self.message.clone())
    }

    /// The decline in an error text `init` returned; `None` for a plain message.
    pub fn from_init_error(error: &str) -> Option<Self> {
        serde_json::from_str::<Declined>(error).ok().map(|d| d.declined)
    }
}

/// Checks a plugin name against `^[a-z][a-z0-9_-]{0,63}$`.
pub fn is_valid_plugin_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 64
        && bytes[0].is_ascii_lowercase()
        && bytes.iter().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'_' || *b == b'-')
}

/// Checks a tool name against `^[a-zA-Z0-9_-]{1,64}$`.
pub fn is_valid_tool_name(name: &str) -> bool {
    (1..=64).contains(&name.len()) && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_decline_survives_init_s_error_text_and_a_plain_message_is_not_one() {
        let declined = InitDeclined::new("[plugins.files] root", "set root");
        assert_eq!(InitDeclined::from_init_error(&declined.to_init_error()), Some(declined));
        assert_eq!(InitDeclined::from_init_error("files: root cannot be used"), None);
        assert_eq!(InitDeclined::from_init_error(r#"{"needs": "x", "message": "y"}"#), None);
    }

    #[test]
    fn plugin_names() {
        assert!(is_valid_plugin_name("chem"));
        assert!(is_valid_plugin_name("a-b_9"));
        assert!(!is_valid_plugin_name(""));
        assert!(!is_valid_plugin_name("Chem"));
        assert!(!is_valid_plugin_name("9lives"));
        assert!(!is_valid_plugin_name(&"a".repeat(65)));
        assert!(is_valid_plugin_name(&"a".repeat(64)));
    }

    #[test]
    fn tool_names() {
        assert!(is_valid_tool_name("validate_smiles"));
        assert!(is_valid_tool_name("A-9"));
        assert!(!is_valid_tool_name(""));
        assert!(!is_valid_tool_name("a.b"));
        assert!(!is_valid_tool_name(&"a".repeat(65)));
    }

    #[test]
    fn manifest_round_trips_and_refuses_unknown_fields() {
        let json = r#"{"name":"x","version":"0.1.0","description":"d","tools":[
            {"name":"t","description":"d","parameters":{"type":"object"},"effects":"reads"}]}"#;
        let m: Manifest = serde_json::from_str(json).unwrap();
        assert_eq!(m.tools[0].effects, Effects::Reads);
        assert!(!m.test_only);
        let bad = json.replace("\"effects\"", "\"effect\"");
        assert!(serde_json::from_str::<Manifest>(&bad).is_err());
    }
}
