//! Discovery: which files in which directories, which plugins and tools are enabled.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use harness_abi::manifest::{Effects, ToolManifest};
use harness_core::{ToolDefinition, ToolExample, ToolRegistry, ToolSource};
use serde::Serialize;
use serde_json::Value;

use crate::handler::PluginHandler;
use crate::isolation::{HostCommand, Isolation};
use crate::library::{LoadError, PluginLibrary};
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
    /// Where tools run unless a plugin's settings say otherwise.
    pub isolation: Isolation,
    /// Every tool's timeout unless its plugin's settings say otherwise.
    pub tool_timeout: Option<Duration>,
    /// Largest tool result, in bytes: over it, `result_too_large`.
    pub max_result_bytes: usize,
    /// How to start a plugin-host child, for `process` isolation.
    pub host_command: Option<HostCommand>,
    /// Load files that fail the ownership and permission check, with a warning.
    pub allow_insecure: bool,
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
            isolation: Isolation::InProcess,
            tool_timeout: None,
            max_result_bytes: 4 << 20,
            host_command: None,
            allow_insecure: false,
        }
    }
}

impl DiscoveryOptions {
    /// Where `plugin`'s tools run.
    pub fn isolation_of(&self, plugin: &str) -> Isolation {
        self.settings.get(plugin).and_then(|s| s.isolation).unwrap_or(self.isolation)
    }

    /// `plugin`'s timeouts, the global default filled in.
    pub fn timeouts_of(&self, plugin: &str) -> Timeouts {
        let mut t = self.settings.get(plugin).map(|s| s.timeouts.clone()).unwrap_or_default();
        t.default = t.default.or(self.tool_timeout);
        t
    }
}

/// A file that was not loaded, and why.
#[derive(Debug, Clone, Serialize)]
pub struct Skipped {
    /// The file.
    pub path: PathBuf,
    /// Why, in one line.
    pub reason: String,
    /// The full report, when the one line had to shorten it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
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
}

/// A plugin that loaded, with the state of each of its tools.
#[derive(Debug)]
pub struct LoadedPlugin {
    /// The library.
    pub library: Arc<PluginLibrary>,
    /// Whether `init` ran (it does not for plugins with no tool offered).
    pub initialised: bool,
    /// Each tool's state, in manifest order.
    pub tools: Vec<(ToolManifest, ToolState)>,
    /// Where its tools run.
    pub isolation: Isolation,
}

/// Everything discovery found.
#[derive(Debug, Default)]
pub struct Discovery {
    /// The options it ran with, for registering the tools.
    pub options: DiscoveryOptions,
    /// Plugins that loaded, in directory order.
    pub plugins: Vec<LoadedPlugin>,
    /// Files that were refused.
    pub skipped: Vec<Skipped>,
    /// Things an operator should know: duplicates, unknown names in enable/disable, missing dirs.
    pub warnings: Vec<String>,
}

/// The platform's library file extension, without the dot.
pub fn library_extension() -> &'static str {
    std::env::consts::DLL_EXTENSION
}

/// The identity of a file, so that one file reached by two paths loads once.
fn file_id(path: &Path) -> Option<(u64, u64)> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        None
    }
}

/// Lists the candidate library files of one directory, sorted by name for a stable order.
fn candidates(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == library_extension()) && p.is_file())
        .collect();
    files.sort();
    Ok(files)
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
    fn tool_state(&self, plugin: &str, test_only: bool, tool: &ToolManifest) -> ToolState {
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

/// Searches the directories, loads every plugin file once, and decides what is offered.
///
/// Nothing here fails as a whole: each bad file is one `Skipped` entry and the rest load.
pub fn discover(options: &DiscoveryOptions) -> Discovery {
    let mut found = Discovery { options: options.clone(), ..Discovery::default() };
    let mut seen_files: HashSet<(u64, u64)> = HashSet::new();
    let mut seen_paths: HashSet<PathBuf> = HashSet::new();
    let mut names: HashMap<String, PathBuf> = HashMap::new();
    let mut tool_owner: HashMap<String, String> = HashMap::new();

    for dir in &options.dirs {
        let files = match candidates(dir) {
            Ok(files) => files,
            Err(e) => {
                found.warnings.push(format!("plugin directory {} cannot be read: {e}", dir.display()));
                continue;
            }
        };
        for file in files {
            let Ok(path) = file.canonicalize() else {
                found.skipped.push(Skipped {
                    path: file,
                    reason: "cannot be resolved (a broken link?)".to_owned(),
                    detail: None,
                });
                continue;
            };
            if !seen_paths.insert(path.clone()) || file_id(&path).is_some_and(|id| !seen_files.insert(id)) {
                continue;
            }
            if let Err(why) = crate::permissions::check(&path) {
                if !options.allow_insecure {
                    found.skipped.push(Skipped { path, reason: format!("insecure: {why}"), detail: None });
                    continue;
                }
                found.warnings.push(format!("loading {} although it is insecure: {why}", path.display()));
            }
            let library = match PluginLibrary::load(&path) {
                Ok(library) => library,
                Err(e) => {
                    found.skipped.push(skip(path, &e));
                    continue;
                }
            };
            let name = library.manifest().name.clone();
            if let Some(first) = names.get(&name) {
                let reason = format!(
                    "plugin {name:?} is already loaded from {}; the first in directory order wins",
                    first.display()
                );
                found.skipped.push(Skipped { path, reason, detail: None });
                continue;
            }
            names.insert(name.clone(), path.clone());
            let test_only = library.manifest().test_only;
            let mut tools = Vec::new();
            for tool in &library.manifest().tools {
                let mut state = options.tool_state(&name, test_only, tool);
                if state == ToolState::Offered {
                    if let Some(owner) = tool_owner.get(&tool.name) {
                        found.warnings.push(format!(
                            "tool {:?} of plugin {name:?} ({}) is not offered: plugin {owner:?} already offers a tool of that name; disable one of them with --disable {name}.{} or --disable {owner}.{}",
                            tool.name,
                            path.display(),
                            tool.name,
                            tool.name
                        ));
                        state = ToolState::NameTaken { by: owner.clone() };
                    } else {
                        tool_owner.insert(tool.name.clone(), name.clone());
                    }
                }
                tools.push((tool.clone(), state));
            }
            let mut initialised = false;
            let isolation = options.isolation_of(&name);
            // In process isolation, init runs in the child, on first use: none of the
            // plugin's code but its manifest runs in the harness.
            if isolation == Isolation::InProcess && tools.iter().any(|(_, s)| *s == ToolState::Offered) {
                let config = options.configs.get(&name).cloned().unwrap_or_else(|| Value::Object(Default::default()));
                if let Err(e) = library.init(&config) {
                    for (t, _) in &tools {
                        tool_owner.remove(&t.name);
                    }
                    names.remove(&name);
                    found.skipped.push(skip(path, &e));
                    continue;
                }
                initialised = true;
            }
            found.plugins.push(LoadedPlugin { library: Arc::new(library), initialised, tools, isolation });
        }
    }
    for rule in options.enable.iter().chain(&options.disable) {
        let plugin = rule.split_once('.').map_or(rule.as_str(), |(p, _)| p);
        let known = found.plugins.iter().any(|p| {
            p.library.manifest().name == plugin
                && rule.split_once('.').is_none_or(|(_, t)| p.library.manifest().tools.iter().any(|x| x.name == t))
        });
        if !known {
            found.warnings.push(format!("enable/disable names {rule:?}, but no loaded plugin or tool has that name"));
        }
    }
    found
}

impl Discovery {
    #[cfg(unix)]
    fn process_handler(
        &self,
        plugin: &LoadedPlugin,
        timeouts: &Timeouts,
    ) -> Result<Arc<dyn harness_core::ToolHandler>, String> {
        let command = self
            .options
            .host_command
            .clone()
            .ok_or("process isolation needs a plugin-host command, and none was configured")?;
        let name = &plugin.library.manifest().name;
        let config = self.options.configs.get(name).cloned().unwrap_or_else(|| Value::Object(Default::default()));
        Ok(Arc::new(crate::isolation::ProcessHandler::new(
            name,
            plugin.library.path().to_path_buf(),
            config,
            command,
            self.options.max_result_bytes,
            timeouts.clone(),
        )))
    }

    #[cfg(not(unix))]
    fn process_handler(&self, _: &LoadedPlugin, _: &Timeouts) -> Result<Arc<dyn harness_core::ToolHandler>, String> {
        Err("process isolation is only available on Unix".to_owned())
    }
}

fn skip(path: PathBuf, e: &LoadError) -> Skipped {
    Skipped { path, reason: e.to_string(), detail: e.detail().map(str::to_owned) }
}

impl Discovery {
    /// Registers every offered tool in `registry`; returns what could not be registered.
    pub fn register_tools(&self, registry: &mut ToolRegistry) -> Vec<String> {
        let mut problems = Vec::new();
        for plugin in &self.plugins {
            let manifest = plugin.library.manifest();
            let options = &self.options;
            let timeouts = options.timeouts_of(&manifest.name);
            let handler: Arc<dyn harness_core::ToolHandler> = match plugin.isolation {
                Isolation::InProcess => Arc::new(PluginHandler::new(plugin.library.clone(), options.max_result_bytes)),
                Isolation::Process => match self.process_handler(plugin, &timeouts) {
                    Ok(h) => h,
                    Err(e) => {
                        problems.push(format!("plugin {}: {e}", manifest.name));
                        continue;
                    }
                },
            };
            for (tool, state) in &plugin.tools {
                if *state != ToolState::Offered {
                    continue;
                }
                let definition = ToolDefinition {
                    name: tool.name.clone(),
                    description: tool.description.clone(),
                    parameters: tool.parameters.clone(),
                    examples: tool
                        .examples
                        .iter()
                        .map(|e| ToolExample { arguments: e.arguments.clone(), result: e.result.clone() })
                        .collect(),
                    source: ToolSource::Plugin { name: manifest.name.clone(), version: manifest.version.clone() },
                };
                if let Err(e) = registry.register(definition, handler.clone()) {
                    problems.push(format!("plugin {}: {e}", manifest.name));
                    continue;
                }
                // Compiled at load already (an output schema that does not compile refuses the plugin).
                if let Some(output) = &tool.output
                    && let Err(e) = registry.set_output_schema(&tool.name, output)
                {
                    problems.push(format!("plugin {}: {e}", manifest.name));
                }
                if let Some(limit) = timeouts.of(&tool.name) {
                    registry.set_timeout(&tool.name, limit);
                }
                registry.set_effect(&tool.name, effect_class(tool.effects));
            }
        }
        problems
    }
}

/// The core's effect class of a declared effect, for the approval policy.
fn effect_class(effects: Effects) -> harness_core::Effect {
    match effects {
        Effects::Pure => harness_core::Effect::Pure,
        Effects::Reads => harness_core::Effect::Reads,
        Effects::Writes => harness_core::Effect::Writes,
        Effects::Network => harness_core::Effect::Network,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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

    #[test]
    fn a_missing_directory_is_a_warning_not_a_failure() {
        let d = discover(&DiscoveryOptions { dirs: vec!["/no/such/dir".into()], ..Default::default() });
        assert!(d.plugins.is_empty());
        assert!(d.warnings[0].contains("/no/such/dir"), "{:?}", d.warnings);
    }
}
