//! What the operator chose for discovery, and the rules that decide from it whether each
//! tool of a plugin is offered (`enable`, `disable`, denied effect classes, test-only plugins).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use harness_abi::manifest::{Effects, ToolManifest};
use harness_sandbox::confine::Grants;
use serde::Serialize;
use serde_json::Value;

use crate::guarded::{Guarded, in_reach};
use crate::isolation::{HostCommand, Isolation};
use crate::settings::{PluginSettings, Timeouts};

/// What the operator chose: directories in order, and which plugins and tools to offer.
#[derive(Debug, Clone)]
pub struct DiscoveryOptions {
    /// Directories to search, in priority order; the first plugin of a name wins.
    pub dirs: Vec<PathBuf>,
    /// When not empty, only these plugins (`name`) or tools (`name.tool`) are offered.
    pub enable: Vec<String>,
    /// Plugins (`name`) or tools (`name.tool`) never offered.
    pub disable: Vec<String>,
    /// Effect classes whose tools are never offered.
    pub deny_effects: Vec<Effects>,
    /// Each plugin's configuration section, passed to its `init` (`{}` when absent).
    pub configs: BTreeMap<String, Value>,
    /// Each plugin's harness-side settings (isolation, timeouts).
    pub settings: BTreeMap<String, PluginSettings>,
    /// `--isolation`: where every plugin's tools run, the operator's choice for this run,
    /// before any configuration (see the `placement` module for the whole rule).
    pub isolation: Option<Isolation>,
    /// The configuration's `isolation`, for plugins its sections do not place: `process`
    /// for all of them; `in-process` only for those installed beside the harness.
    pub config_isolation: Option<Isolation>,
    /// The directory of the harness executable (canonical): a pure plugin installed there
    /// runs in-process by default; any other file runs in a confined child unless vouched for.
    pub harness_dir: Option<PathBuf>,
    /// Library SHA-256 pins by plugin name (from `harness.lock`): a plugin whose section says
    /// `isolation = "in-process"` runs in-process only when its file has the pinned hash.
    pub pins: BTreeMap<String, String>,
    /// Every tool's timeout unless its plugin's settings say otherwise.
    pub tool_timeout: Option<Duration>,
    /// Largest tool result, in bytes: over it, `result_too_large`.
    pub max_result_bytes: usize,
    /// How to start a plugin-host child, for `process` isolation.
    pub host_command: Option<HostCommand>,
    /// Load files that fail the ownership and permission check, with a warning.
    pub allow_insecure: bool,
    /// Where the plugin cache keeps what each unchanged file declared, so that a start-up
    /// starts no plugin host for it (see the `cache` module); `None`: every file is read
    /// through a plugin host at every start-up.
    pub cache_dir: Option<PathBuf>,
    /// Open and initialise each in-process plugin admitted from the plugin cache at the
    /// first call of one of its tools, not in `discover` (see the `late` module): the first
    /// model request does not wait for them. One that cannot be opened then fails its calls
    /// with the reason (`plugin_unavailable`) instead of being skipped before the run. The
    /// child of a process-isolated plugin admitted from the cache likewise starts at its
    /// first call, not here.
    pub open_lazily: bool,
    /// Offer only plugins whose declared effects the kernel enforces in full (`[isolation]
    /// require = "full"`, `--require-enforcement`): any other is skipped with what it lacks.
    pub require_full_enforcement: bool,
    /// The harness's own files (configuration, lock, plugin directories, trust store, cache):
    /// a process-isolated plugin whose write area reaches one is skipped, naming it.
    pub guarded: Vec<Guarded>,
    /// Which publishers' signatures are trusted, and whether a signature is required (see the
    /// `signature` module).
    pub signatures: crate::signature::SignaturePolicy,
}

impl Default for DiscoveryOptions {
    fn default() -> Self {
        Self {
            dirs: Vec::new(),
            enable: Vec::new(),
            disable: Vec::new(),
            deny_effects: Vec::new(),
            configs: BTreeMap::new(),
            settings: BTreeMap::new(),
            isolation: None,
            config_isolation: None,
            harness_dir: None,
            pins: BTreeMap::new(),
            tool_timeout: None,
            max_result_bytes: 4 << 20,
            host_command: None,
            allow_insecure: false,
            cache_dir: None,
            open_lazily: false,
            require_full_enforcement: false,
            guarded: Vec::new(),
            signatures: crate::signature::SignaturePolicy::default(),
        }
    }
}

impl DiscoveryOptions {
    /// What the operator lets `plugin` touch when confined; `config` is its section.
    ///
    /// Its files are `allow_paths`, else its own `root` (the files plugin's), else none: never
    /// the working directory, where the harness's configuration, lock and plugins usually lie
    /// beside `.env` and `.git/config`.
    pub fn grants_of(&self, plugin: &str, config: &Value) -> Grants {
        let settings = self.settings.get(plugin);
        let paths = settings.and_then(|s| s.allow_paths.clone()).unwrap_or_else(|| {
            // Relative to here when no configuration file made it absolute.
            let root = config.get("root").and_then(Value::as_str).map(PathBuf::from);
            let here = || std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/nonexistent"));
            root.map(|r| if r.is_absolute() { r } else { here().join(r) }).into_iter().collect()
        });
        Grants {
            paths,
            ports: settings.and_then(|s| s.allow_ports.clone()),
            exec: settings.map(|s| s.allow_exec.clone()).unwrap_or_default(),
        }
    }

    /// Why a child of `plugin` may not write where `grants` say: its write area holds one of
    /// the harness's own files, or lies inside one; `None` when it reaches none.
    pub fn write_area_refusal(&self, plugin: &str, grants: &Grants) -> Option<String> {
        let key =
            if self.settings.get(plugin).is_some_and(|s| s.allow_paths.is_some()) { "allow_paths" } else { "root" };
        grants.paths.iter().find_map(|area| {
            let g = in_reach(area, &self.guarded)?;
            Some(format!(
                "plugin {plugin:?} declares writes, and its write area {} ([plugins.{plugin}] {key}) reaches {} {}: a tool of it could rewrite what the harness trusts and runs. Give [plugins.{plugin}] {key} a directory that holds none of the harness's files, or move them out of it",
                area.display(),
                g.what,
                g.path.display()
            ))
        })
    }

    /// `plugin`'s timeouts, the global default filled in.
    pub fn timeouts_of(&self, plugin: &str) -> Timeouts {
        let mut t = self.settings.get(plugin).map(|s| s.timeouts.clone()).unwrap_or_default();
        t.default = t.default.or(self.tool_timeout);
        t
    }
}

/// Why a tool of a loaded plugin is not offered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum ToolState {
    /// Offered to the router.
    Offered,
    /// Left out by `enable`/`disable` or because its plugin is test-only.
    Disabled {
        /// Which rule left it out.
        why: String,
    },
    /// Its effect class is denied.
    DeniedEffect,
    /// Another plugin offers a tool of the same name.
    NameTaken {
        /// The plugin that has it.
        by: String,
    },
    /// Its plugin declined to start for want of configuration (`init`'s decline).
    NeedsConfiguration {
        /// What the configuration needs, as an operator writes it: `[plugins.files] root`.
        needs: String,
    },
}

/// Matches `enable`/`disable` entries: `plugin` or `plugin.tool`.
fn rule_matches(rule: &str, plugin: &str, tool: &str) -> bool {
    match rule.split_once('.') {
        Some((p, t)) => p == plugin && t == tool,
        None => rule == plugin,
    }
}

fn rule_names_plugin(rule: &str, plugin: &str) -> bool {
    rule.split_once('.').map_or(rule, |(p, _)| p) == plugin
}

impl DiscoveryOptions {
    /// Whether `tool` of `plugin` is offered, by the operator's rules alone.
    pub(crate) fn tool_state(&self, plugin: &str, test_only: bool, tool: &ToolManifest) -> ToolState {
        if let Some(rule) = self.disable.iter().find(|r| rule_matches(r, plugin, &tool.name)) {
            return ToolState::Disabled { why: format!("disabled by {rule:?}") };
        }
        if !self.enable.is_empty() && !self.enable.iter().any(|r| rule_matches(r, plugin, &tool.name)) {
            return ToolState::Disabled { why: "not in enable".to_owned() };
        }
        if test_only && !self.enable.iter().any(|r| rule_names_plugin(r, plugin)) {
            return ToolState::Disabled { why: "test-only plugin; enable it by name".to_owned() };
        }
        if self.deny_effects.contains(&tool.effects) {
            return ToolState::DeniedEffect;
        }
        ToolState::Offered
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn tool(name: &str, effects: Effects) -> ToolManifest {
        ToolManifest {
            name: name.into(),
            description: "d".into(),
            parameters: json!({"type": "object"}),
            output: None,
            effects,
            examples: vec![],
        }
    }

    #[test]
    fn enable_disable_and_effects() {
        let mut o = DiscoveryOptions::default();
        let read = tool("read_file", Effects::Reads);
        assert_eq!(o.tool_state("files", false, &read), ToolState::Offered);
        assert!(matches!(o.tool_state("fault", true, &read), ToolState::Disabled { .. }));
        o.deny_effects = vec![Effects::Reads];
        assert_eq!(o.tool_state("files", false, &read), ToolState::DeniedEffect);
        o.deny_effects.clear();
        o.disable = vec!["files.read_file".into()];
        assert!(matches!(o.tool_state("files", false, &read), ToolState::Disabled { .. }));
        assert_eq!(o.tool_state("files", false, &tool("list_dir", Effects::Reads)), ToolState::Offered);
        o.disable.clear();
        o.enable = vec!["fault".into(), "calc.calculate".into()];
        assert_eq!(o.tool_state("fault", true, &read), ToolState::Offered);
        assert_eq!(o.tool_state("calc", false, &tool("calculate", Effects::Pure)), ToolState::Offered);
        assert!(matches!(o.tool_state("files", false, &read), ToolState::Disabled { .. }));
    }
}
