//! What trusting a configuration file lets the harness do, one line each, for `harness config
//! trust`: every command it starts, every directory it loads code from, every place it sends a
//! key, and every setting that widens what tools may do beyond the defaults.
//!
//! Every part that comes from the file is escaped ([`printable`]): a file is trusted for what
//! the operator reads, so it must not be able to rewrite what the operator reads.

use std::path::Path;

use harness_core::printable;

use crate::config::{Config, PolicyConfig};

/// The lines, in the order: commands, code, network, isolation, policy, plugin grants.
pub(crate) fn powers(config: &Config, base: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for server in &config.mcp.servers {
        mcp_server(server, base, &mut out);
    }
    for dir in &config.plugins.dirs {
        out.push(format!("loads plugins from {}", shown(dir)));
    }
    for publisher in &config.trust.publishers {
        out.push(format!(
            "trusts plugins signed by publisher {} (key {})",
            word(&publisher.name),
            word(&publisher.key)
        ));
    }
    if config.trust.require_signed == Some(false) {
        out.push("loads unsigned plugins ([trust] require_signed = false)".to_owned());
    }
    if let Some(script) = &config.script {
        out.push(format!("reads router replies from {}", shown(script)));
    }
    if let Some(url) = &config.base_url {
        let key = config.api_key_env.as_deref().map_or_else(String::new, |k| format!(" with the key in ${}", word(k)));
        out.push(format!("sends requests to {}{key}", word(url)));
    }
    if config.isolation.as_ref().and_then(|i| i.mode()) == Some("in-process") {
        out.push("runs every plugin in-process (isolation = \"in-process\"): unconfined, in the harness".to_owned());
    }
    policy(&config.policy, &mut out);
    for (plugin, section) in &config.plugins.sections {
        plugin_grants(&word(plugin), section, &mut out);
    }
    let ports: Vec<&str> = config
        .plugins
        .sections
        .iter()
        .filter(|(_, s)| s.contains_key("allow_ports"))
        .map(|(n, _)| n.as_str())
        .collect();
    out.push(format!(
        "network tools may connect to any TCP port, except those of plugins with allow_ports ({})",
        if ports.is_empty() { "none".to_owned() } else { names(ports) }
    ));
    out
}

/// What one `[[mcp.servers]]` entry does: start a command, or connect to a URL with headers
/// (their names and the variables they read, never their values).
fn mcp_server(server: &harness_mcp::McpServerConfig, base: &Path, out: &mut Vec<String>) {
    let Some(url) = &server.url else {
        let words: Vec<String> = std::iter::once(&server.command).chain(&server.args).map(|w| word(w)).collect();
        out.push(format!("starts MCP server {}: {} (in {})", word(&server.name), words.join(" "), shown(base)));
        if !server.env.is_empty() {
            out.push(format!("  with environment {}", names(server.env.keys())));
        }
        return;
    };
    out.push(format!("connects to remote MCP server {}: {}", word(&server.name), word(url)));
    for (header, value) in &server.headers {
        let read: Vec<String> = harness_mcp::header_variables(value).iter().map(|v| format!("${}", word(v))).collect();
        let from = if read.is_empty() { String::new() } else { format!(" from {}", read.join(", ")) };
        out.push(format!("  sending header {}{from}", word(header)));
    }
    if let Some(oauth) = &server.oauth {
        let proof = match (&oauth.client_secret_env, &oauth.private_key_env) {
            (Some(secret), _) => format!("its secret from ${}", word(secret)),
            (None, Some(key)) => format!("a JWT signed with the key in ${}", word(key)),
            (None, None) => "nothing".to_owned(),
        };
        out.push(format!(
            "  getting OAuth tokens as client {} with {proof}, from the authorization server the server's metadata names",
            word(&oauth.client_id)
        ));
    }
}

/// `[policy]` entries that run calls without asking.
fn policy(p: &PolicyConfig, out: &mut Vec<String>) {
    for (class, value) in [("pure", &p.pure), ("reads", &p.reads), ("writes", &p.writes), ("network", &p.network)] {
        if value.as_deref() == Some("allow") {
            out.push(format!("runs {class} calls without asking ([policy] {class} = \"allow\")"));
        }
    }
    for (tool, _) in p.tools.iter().filter(|(_, v)| v.as_str() == "allow") {
        out.push(format!("runs tool {} without asking ([policy.tools])", word(tool)));
    }
}

/// What one `[plugins.NAME]` section grants beyond the defaults.
fn plugin_grants(plugin: &str, section: &toml::Table, out: &mut Vec<String>) {
    if section.get("isolation").and_then(toml::Value::as_str) == Some("in-process") {
        out.push(format!("runs plugin {plugin} in-process (isolation = \"in-process\"): unconfined, in the harness"));
    }
    if let Some(root) = section.get("root").and_then(toml::Value::as_str) {
        out.push(format!("lets plugin {plugin} work under {}{}", word(root), wide(root)));
    }
    for (key, verb) in [("allow_paths", "work under"), ("allow_exec", "run")] {
        for item in strings(section.get(key)) {
            out.push(format!("lets plugin {plugin} {verb} {} ({key}){}", word(item), wide(item)));
        }
    }
    match section.get("refuse").and_then(toml::Value::as_array) {
        Some(list) if list.is_empty() => out.push(format!("lets plugin {plugin} open secret files (refuse = [])")),
        Some(_) => out.push(format!("replaces plugin {plugin}'s list of refused secret files (refuse)")),
        None => {}
    }
    // Read generically: any plugin section may pass variables on, whatever else it holds.
    if let Some(env) = section.get("env") {
        let listed = strings(Some(env));
        let what = if listed.is_empty() { word(&env.to_string()) } else { names(listed) };
        out.push(format!("passes environment variables {what} on to plugin {plugin}"));
    }
}

/// The strings of a TOML array (nothing when it is not one).
fn strings(value: Option<&toml::Value>) -> Vec<&str> {
    value
        .and_then(toml::Value::as_array)
        .map(|a| a.iter().filter_map(toml::Value::as_str).collect())
        .unwrap_or_default()
}

/// Names, escaped, separated by commas.
fn names<'a>(items: impl IntoIterator<Item = &'a (impl AsRef<str> + 'a + ?Sized)>) -> String {
    items.into_iter().map(|n| word(n.as_ref())).collect::<Vec<_>>().join(", ")
}

/// A warning for a path that opens everything: the root or a home directory.
fn wide(path: &str) -> &'static str {
    let home = std::env::var_os("HOME").filter(|h| !h.is_empty());
    let trimmed = path.trim_end_matches('/');
    if trimmed.is_empty() {
        " (the whole file system)"
    } else if path.starts_with('~') || path.contains("/~") || home.is_some_and(|h| Path::new(trimmed) == Path::new(&h))
    {
        " (a whole home directory)"
    } else {
        ""
    }
}

/// A path, escaped.
fn shown(path: &Path) -> String {
    word(&path.display().to_string())
}

/// One word of a command line or a value, escaped: quoted when it holds anything but plain
/// characters, so that spaces and escapes are seen for what they are.
pub(crate) fn word(text: &str) -> String {
    let plain = !text.is_empty() && text.chars().all(|c| c.is_alphanumeric() || "-_./=:,@+%~$".contains(c));
    if plain { printable(text) } else { printable(&format!("{text:?}")) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_quoted_and_escaped() {
        assert_eq!(word("/bin/sh"), "/bin/sh");
        assert_eq!(word("touch a b"), "\"touch a b\"");
        assert_eq!(word("x\u{1b}[2K\r"), "\"x\\u{1b}[2K\\r\"");
        assert_eq!(word("a\u{202e}b"), "\"a\\u{202e}b\"");
        assert_eq!(word(""), "\"\"");
    }

    #[test]
    fn roots_that_open_everything_are_flagged() {
        assert_eq!(wide("/"), " (the whole file system)");
        assert_eq!(wide("~/"), " (a whole home directory)");
        assert_eq!(wide("/srv/data"), "");
    }
}
