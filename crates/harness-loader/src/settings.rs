//! Harness-side settings of one plugin, read from its `[plugins.<name>]` section.
//!
//! Some keys of a plugin's section belong to the harness, not to the plugin, and are taken
//! out before the section reaches `init`: `isolation`, `timeout` (seconds, every tool),
//! `timeouts` (a table of seconds per tool), and what a confined child may touch:
//! `allow_paths` (directories a `reads`/`writes` plugin works under), `allow_ports` (TCP ports
//! a `network` plugin may connect to) and `allow_exec` (programs it may run); and `env`, the
//! variables of the harness's environment its child gets besides the allowlist; `limits`, the
//! resource limits of its children.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;

use crate::isolation::Isolation;

/// The keys of a plugin's section that the harness reads itself.
pub const RESERVED_KEYS: [&str; 8] =
    ["isolation", "timeout", "timeouts", "allow_paths", "allow_ports", "allow_exec", "env", "limits"];

/// How long each tool of a plugin may take.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Timeouts {
    /// Every tool's limit, unless it has its own.
    pub default: Option<Duration>,
    /// Limits of single tools.
    pub per_tool: HashMap<String, Duration>,
}

impl Timeouts {
    /// The limit of `tool`.
    pub fn of(&self, tool: &str) -> Option<Duration> {
        self.per_tool.get(tool).copied().or(self.default)
    }
}

/// The harness's settings for one plugin.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PluginSettings {
    /// Where its tools run; `None` takes the default.
    pub isolation: Option<Isolation>,
    /// Its timeouts; `default` unset takes the global default.
    pub timeouts: Timeouts,
    /// `allow_paths`: directories it works under, when confined; `None`: its own `root`, else
    /// none (never the working directory).
    pub allow_paths: Option<Vec<PathBuf>>,
    /// `allow_ports`: TCP ports a `network` plugin may connect to; `None`: any.
    pub allow_ports: Option<Vec<u16>>,
    /// `allow_exec`: programs it may run; none unless listed.
    pub allow_exec: Vec<PathBuf>,
    /// `env`: names of variables of the harness's environment its child gets besides the
    /// allowlist ([`crate::isolation::CHILD_ENV_ALLOWLIST`]); none unless listed.
    pub env: Vec<String>,
    /// `limits`: the operator's resource limits of its children, each over its class's default.
    pub limits: harness_sandbox::Limits,
}

fn path_list(v: &Value, at: &str) -> Result<Vec<PathBuf>, String> {
    let bad = || format!("{at} must be a list of absolute paths, like [\"/srv/data\"], not {v}");
    let list = v.as_array().ok_or_else(bad)?;
    list.iter().map(|p| p.as_str().map(PathBuf::from).filter(|p| p.is_absolute()).ok_or_else(bad)).collect()
}

fn port_list(v: &Value, at: &str) -> Result<Vec<u16>, String> {
    let bad = || format!("{at} must be a list of TCP port numbers, like [443], not {v}");
    let list = v.as_array().ok_or_else(bad)?;
    list.iter().map(|p| p.as_u64().and_then(|p| u16::try_from(p).ok()).ok_or_else(bad)).collect()
}

fn name_list(v: &Value, at: &str) -> Result<Vec<String>, String> {
    let bad = || {
        format!("{at} must be a list of environment variable names (letters, digits, _), like [\"MY_TOKEN\"], not {v}")
    };
    let is_name = |n: &str| {
        n.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
            && n.bytes().next().is_some_and(|b| !b.is_ascii_digit())
    };
    let list = v.as_array().ok_or_else(bad)?;
    list.iter().map(|n| n.as_str().filter(|n| is_name(n)).map(str::to_owned).ok_or_else(bad)).collect()
}

fn seconds(v: &Value, at: &str) -> Result<Duration, String> {
    v.as_f64()
        .filter(|s| s.is_finite() && *s > 0.0 && *s <= 86_400.0)
        .map(Duration::from_secs_f64)
        .ok_or_else(|| format!("{at} must be a number of seconds between 0 and 86400, not {v}"))
}

impl PluginSettings {
    /// Splits a plugin's section into the harness's settings and what the plugin's `init` gets.
    pub fn from_section(plugin: &str, section: &Value) -> Result<(Self, Value), String> {
        let mut config = section.clone();
        let mut settings = Self::default();
        let Some(table) = config.as_object_mut() else {
            return Err(format!("[plugins.{plugin}] must be a table"));
        };
        if let Some(v) = table.remove("isolation") {
            let name = v.as_str().unwrap_or("");
            settings.isolation = Some(Isolation::parse(name).ok_or_else(|| {
                format!("[plugins.{plugin}] isolation must be \"in-process\" or \"process\", not {v}")
            })?);
        }
        if let Some(v) = table.remove("timeout") {
            settings.timeouts.default = Some(seconds(&v, &format!("[plugins.{plugin}] timeout"))?);
        }
        if let Some(v) = table.remove("timeouts") {
            let Value::Object(per_tool) = v else {
                return Err(format!("[plugins.{plugin}.timeouts] must be a table of tool = seconds"));
            };
            for (tool, secs) in per_tool {
                let limit = seconds(&secs, &format!("[plugins.{plugin}.timeouts] {tool}"))?;
                settings.timeouts.per_tool.insert(tool, limit);
            }
        }
        if let Some(v) = table.remove("allow_paths") {
            settings.allow_paths = Some(path_list(&v, &format!("[plugins.{plugin}] allow_paths"))?);
        }
        if let Some(v) = table.remove("allow_ports") {
            settings.allow_ports = Some(port_list(&v, &format!("[plugins.{plugin}] allow_ports"))?);
        }
        if let Some(v) = table.remove("allow_exec") {
            settings.allow_exec = path_list(&v, &format!("[plugins.{plugin}] allow_exec"))?;
        }
        if let Some(v) = table.remove("env") {
            settings.env = name_list(&v, &format!("[plugins.{plugin}] env"))?;
        }
        if let Some(v) = table.remove("limits") {
            settings.limits = harness_sandbox::Limits::from_table(&v, &format!("[plugins.{plugin}] limits"))?;
        }
        Ok((settings, config))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reserved_keys_are_taken_out() {
        let section = json!({"root": "/srv", "isolation": "process", "timeout": 2, "timeouts": {"read_file": 0.5},
            "env": ["MY_TOKEN", "_X1"]});
        let (settings, config) = PluginSettings::from_section("files", &section).unwrap();
        assert_eq!(config, json!({"root": "/srv"}));
        assert_eq!(settings.env, ["MY_TOKEN", "_X1"]);
        assert_eq!(settings.isolation, Some(Isolation::Process));
        assert_eq!(settings.timeouts.of("read_file"), Some(Duration::from_millis(500)));
        assert_eq!(settings.timeouts.of("list_dir"), Some(Duration::from_secs(2)));
    }

    #[test]
    fn bad_values_name_the_key() {
        for (section, needle) in [
            (json!({"isolation": "sandbox"}), "isolation"),
            (json!({"timeout": -1}), "timeout"),
            (json!({"timeouts": 3}), "timeouts"),
            (json!({"timeouts": {"t": "soon"}}), "timeouts] t"),
            (json!({"allow_paths": ["relative"]}), "allow_paths must be a list of absolute paths"),
            (json!({"allow_ports": [70000]}), "allow_ports must be a list of TCP port numbers"),
            (json!({"allow_exec": "/bin/sh"}), "allow_exec"),
            (json!({"env": "MY_TOKEN"}), "[plugins.p] env must be a list of environment variable names"),
            (json!({"env": ["A=B"]}), "[plugins.p] env must be"),
            (json!({"env": ["1X"]}), "[plugins.p] env must be"),
            (json!({"env": [""]}), "[plugins.p] env must be"),
        ] {
            let e = PluginSettings::from_section("p", &section).unwrap_err();
            assert!(e.contains(needle), "{e}");
        }
    }
}
