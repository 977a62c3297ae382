//! One `[[mcp.servers]]` entry, and the tool-name rule of model APIs.

use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::McpError;
use crate::remote;

/// An MCP server used as a source of tools: a child process (`command`) or a remote server
/// reached over Streamable HTTP (`url`).
#[derive(Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct McpServerConfig {
    /// Its name: shown to operators, and the prefix of its tools' names when they collide.
    pub name: String,
    /// The program to run (looked up in `PATH` when it has no `/`); empty for a remote server.
    #[serde(default)]
    pub command: String,
    /// Its arguments.
    #[serde(default)]
    pub args: Vec<String>,
    /// Environment variables set for it, over the few it inherits (see [`INHERITED_ENV`]).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// The endpoint of a remote server (`https://…/mcp`; `http://` to loopback only), instead
    /// of a `command`.
    #[serde(default)]
    pub url: Option<String>,
    /// HTTP headers sent to a remote server with every request; `${NAME}` in a value is the
    /// harness's environment variable NAME, read at start (secrets stay out of the file).
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Seconds this server has to start, and to answer each call, over the defaults.
    #[serde(default)]
    pub timeout: Option<f64>,
    /// A pre-registered OAuth client of a remote server, which gets its token with the
    /// client credentials grant when the server asks for authorization.
    #[serde(default)]
    pub oauth: Option<OAuthClientConfig>,
}

/// A pre-registered OAuth client (`[mcp.servers.oauth]`): its id, and the environment
/// variable that holds its secret or its private key (never the value itself: the file is
/// shown and shared).
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct OAuthClientConfig {
    /// The client id the authorization server registered.
    pub client_id: String,
    /// The harness's environment variable that holds the client secret.
    #[serde(default)]
    pub client_secret_env: Option<String>,
    /// Instead of a secret: the variable that holds the client's private key (a PKCS#8 PEM of a
    /// P-256 key), for `private_key_jwt` with ES256.
    #[serde(default)]
    pub private_key_env: Option<String>,
    /// `client_secret_basic` or `client_secret_post` (with a secret), `private_key_jwt` (with a
    /// key); unset: with a secret, the first of the two the authorization server lists.
    #[serde(default)]
    pub token_endpoint_auth_method: Option<String>,
}

/// The token endpoint authentication methods a client with a secret can use.
const AUTH_METHODS: &[&str] = &["client_secret_basic", "client_secret_post"];

/// Written without the values of `env` and `headers`: those are where secrets go, and a
/// configuration is printed in errors and logs.
impl std::fmt::Debug for McpServerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServerConfig")
            .field("name", &self.name)
            .field("command", &self.command)
            .field("args", &self.args)
            .field("env", &self.env.keys().collect::<Vec<_>>())
            .field("url", &self.url)
            .field("headers", &self.headers.keys().collect::<Vec<_>>())
            .field("timeout", &self.timeout)
            .field("oauth", &self.oauth)
            .finish()
    }
}

/// The only variables a server inherits from the harness's environment, as the official
/// Python SDK does: API keys and the like never reach a server unless its `env` names them.
pub const INHERITED_ENV: &[&str] = &["HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "LANG", "TMPDIR"];

/// Whether `name` is a tool name every model API accepts: `^[a-zA-Z0-9_-]{1,64}$`.
pub fn is_model_tool_name(name: &str) -> bool {
    (1..=64).contains(&name.len()) && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// The name a server's tool is offered under when its own name is taken.
///
/// Not `<server>.<tool>`: model APIs refuse `.` in tool names, so the two parts are joined
/// with `__`, which they accept.
pub fn qualified_name(server: &str, tool: &str) -> String {
    format!("{server}__{tool}")
}

impl McpServerConfig {
    /// The command line, for messages (empty for a remote server).
    pub fn command_line(&self) -> String {
        std::iter::once(self.command.as_str()).chain(self.args.iter().map(String::as_str)).collect::<Vec<_>>().join(" ")
    }

    /// Where the server is, for messages and listings: its URL, or its command line.
    pub fn endpoint(&self) -> String {
        self.url.clone().unwrap_or_else(|| self.command_line())
    }

    /// Its own `timeout`, when it has a valid one.
    pub fn own_timeout(&self) -> Option<Duration> {
        self.timeout.and_then(|s| Duration::try_from_secs_f64(s).ok()).filter(|d| !d.is_zero())
    }
}

/// Checks every entry: names valid for model APIs and unique, a command or a URL (not both),
/// and for a URL, its scheme, host and headers.
pub fn validate_servers(servers: &[McpServerConfig]) -> Result<(), McpError> {
    let mut seen = HashSet::new();
    for (i, server) in servers.iter().enumerate() {
        let invalid = |reason: String| McpError::InvalidServer { index: i + 1, name: server.name.clone(), reason };
        if !is_model_tool_name(&server.name) || server.name.len() > 32 {
            return Err(invalid(
                "a server name is 1 to 32 letters, digits, '_' or '-' (it prefixes tool names, which model APIs limit to ^[a-zA-Z0-9_-]{1,64}$)"
                    .to_owned(),
            ));
        }
        if !seen.insert(server.name.as_str()) {
            return Err(invalid("another server has this name; give each a name of its own".to_owned()));
        }
        if server.timeout.is_some() && server.own_timeout().is_none() {
            return Err(invalid("timeout is a number of seconds above 0".to_owned()));
        }
        check_kind(server).map_err(invalid)?;
    }
    Ok(())
}

/// A local entry has a command and no HTTP settings; a remote one a valid URL and headers, and
/// nothing of a process.
fn check_kind(server: &McpServerConfig) -> Result<(), String> {
    let Some(url) = &server.url else {
        if !server.headers.is_empty() || server.oauth.is_some() {
            return Err("headers and oauth are for a remote server (url); a local server gets env".to_owned());
        }
        if server.command.trim().is_empty() {
            return Err(
                "command is empty; name the program that runs the server, or give the url of a remote one".to_owned()
            );
        }
        return Ok(());
    };
    if !server.command.is_empty() || !server.args.is_empty() || !server.env.is_empty() {
        return Err("url and command/args/env exclude each other: a remote server is reached at its url, a local one is started with its command".to_owned());
    }
    remote::check_url(url)?;
    for (name, value) in &server.headers {
        remote::check_header(name, value)?;
    }
    if server.oauth.is_some() && server.headers.keys().any(|h| h.eq_ignore_ascii_case("authorization")) {
        return Err(
            "oauth and an Authorization header exclude each other: the OAuth client sends its own token; keep one"
                .to_owned(),
        );
    }
    server.oauth.as_ref().map_or(Ok(()), check_oauth)
}

/// A client id, one valid variable name for the secret or the key, and a method it can use.
fn check_oauth(oauth: &OAuthClientConfig) -> Result<(), String> {
    if oauth.client_id.trim().is_empty() {
        return Err("oauth.client_id is empty; give the client id the authorization server registered".to_owned());
    }
    let (field, name, methods) = match (&oauth.client_secret_env, &oauth.private_key_env) {
        (Some(name), None) => ("client_secret_env", name, AUTH_METHODS),
        (None, Some(name)) => ("private_key_env", name, &["private_key_jwt"][..]),
        _ => {
            return Err("oauth needs one of client_secret_env (the variable holding the client secret) and private_key_env (the variable holding its private key)".to_owned());
        }
    };
    if name.is_empty() || remote::references(&format!("${{{name}}}")).is_err() {
        return Err(format!(
            "oauth.{field} is {name:?}, not an environment variable name (letters, digits, _); name the variable that holds the value, never the value"
        ));
    }
    match oauth.token_endpoint_auth_method.as_deref() {
        Some(m) if !methods.contains(&m) => Err(format!(
            "oauth.token_endpoint_auth_method is {m:?}; with {field} the harness's client authenticates with {}",
            methods.join(" or ")
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(name: &str, command: &str) -> McpServerConfig {
        McpServerConfig { name: name.into(), command: command.into(), ..Default::default() }
    }

    #[test]
    fn tool_names_follow_the_model_api_rule() {
        assert!(is_model_tool_name("calculate"));
        assert!(is_model_tool_name("py-tools__greet"));
        assert!(!is_model_tool_name(""));
        assert!(!is_model_tool_name("files.read_file"));
        assert!(!is_model_tool_name(&"x".repeat(65)));
        assert_eq!(qualified_name("py", "calculate"), "py__calculate");
        assert!(is_model_tool_name(&qualified_name("py", "calculate")));
    }

    #[test]
    fn server_entries_are_checked() {
        assert!(validate_servers(&[server("py", "python3"), server("node-tools", "node")]).is_ok());
        let e = validate_servers(&[server("py", "python3"), server("py", "python3")]).unwrap_err().to_string();
        assert!(e.contains("entry 2") && e.contains("another server"), "{e}");
        let e = validate_servers(&[server("my.server", "x")]).unwrap_err().to_string();
        assert!(e.contains("entry 1") && e.contains("\"my.server\""), "{e}");
        assert!(validate_servers(&[server("ok", " ")]).is_err());
        assert!(validate_servers(&[server(&"s".repeat(33), "x")]).is_err());
    }

    #[test]
    fn oauth_clients_name_a_variable_and_a_method_the_client_has() {
        let remote = |oauth: OAuthClientConfig| McpServerConfig {
            name: "r".into(),
            url: Some("https://m.example/mcp".into()),
            oauth: Some(oauth),
            ..Default::default()
        };
        let good = OAuthClientConfig {
            client_id: "id".into(),
            client_secret_env: Some("MCP_SECRET".into()),
            ..Default::default()
        };
        assert!(validate_servers(&[remote(good.clone())]).is_ok());
        let e = validate_servers(&[remote(OAuthClientConfig {
            client_secret_env: Some("hunter 2".into()),
            ..good.clone()
        })]);
        assert!(e.unwrap_err().to_string().contains("not an environment variable name"));
        let jwt = OAuthClientConfig { token_endpoint_auth_method: Some("tls_client_auth".into()), ..good.clone() };
        assert!(
            validate_servers(&[remote(jwt)])
                .unwrap_err()
                .to_string()
                .contains("client_secret_basic or client_secret_post")
        );
        let both = OAuthClientConfig { private_key_env: Some("KEY".into()), ..good.clone() };
        assert!(validate_servers(&[remote(both)]).unwrap_err().to_string().contains("one of client_secret_env"));
        let key = OAuthClientConfig { client_secret_env: None, private_key_env: Some("KEY".into()), ..good.clone() };
        assert!(validate_servers(&[remote(key.clone())]).is_ok());
        let post = OAuthClientConfig { token_endpoint_auth_method: Some("client_secret_post".into()), ..key };
        assert!(validate_servers(&[remote(post)]).unwrap_err().to_string().contains("private_key_jwt"));
        let mut both = remote(good.clone());
        both.headers.insert("authorization".into(), "Bearer ${T}".into());
        assert!(validate_servers(&[both]).unwrap_err().to_string().contains("exclude each other"));
        let local = McpServerConfig { oauth: Some(good), ..server("l", "x") };
        assert!(validate_servers(&[local]).unwrap_err().to_string().contains("oauth are for a remote server"));
    }

    #[test]
    fn unknown_keys_are_refused() {
        let parsed: Result<McpServerConfig, _> =
            serde_json::from_value(serde_json::json!({"name": "a", "command": "b", "cwd": "/"}));
        assert!(parsed.is_err());
        let parsed: McpServerConfig = serde_json::from_value(serde_json::json!({"name": "a", "command": "b"})).unwrap();
        assert_eq!(parsed.command_line(), "b");
    }
}
