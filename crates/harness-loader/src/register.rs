//! Filling the core's registry with every offered tool, each with the handler of its plugin's
//! isolation: in process isolation, one child per effect class of the plugin's tools, each
//! confined to its class.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use harness_abi::manifest::Effects;

use harness_core::{ToolDefinition, ToolExample, ToolHandler, ToolRegistry, ToolSource};
use serde_json::Value;

use crate::discover::{Discovery, LoadedPlugin, ToolState};
use crate::handler::PluginHandler;
use crate::isolation::Isolation;
use crate::settings::Timeouts;

impl Discovery {
    /// The handler of `plugin`'s tools of one effect class, in a child confined to that class.
    #[cfg(unix)]
    fn process_handler(
        &self,
        plugin: &LoadedPlugin,
        effects: Effects,
        timeouts: &Timeouts,
    ) -> Result<Arc<dyn ToolHandler>, String> {
        let command = self
            .options
            .host_command
            .clone()
            .ok_or("process isolation needs a plugin-host command, and none was configured")?;
        let name = &plugin.manifest.name;
        let config = self.options.configs.get(name).cloned().unwrap_or_else(|| Value::Object(Default::default()));
        let mut handler = crate::isolation::ProcessHandler::new(
            name,
            plugin.path.clone(),
            config,
            command,
            self.options.max_result_bytes,
            timeouts.clone(),
        );
        if let Some(confinement) = plugin.confinement.get(effects.as_str()) {
            handler = handler.confined(confinement.clone());
        }
        Ok(Arc::new(handler))
    }

    #[cfg(not(unix))]
    fn process_handler(&self, _: &LoadedPlugin, _: Effects, _: &Timeouts) -> Result<Arc<dyn ToolHandler>, String> {
        Err("process isolation is only available on Unix".to_owned())
    }

    /// One handler per effect class in process isolation (a child each), one in-process.
    fn handlers(
        &self,
        plugin: &LoadedPlugin,
        timeouts: &Timeouts,
    ) -> Result<BTreeMap<Effects, Arc<dyn ToolHandler>>, String> {
        let classes: BTreeSet<Effects> =
            plugin.tools.iter().filter(|(_, s)| *s == ToolState::Offered).map(|(t, _)| t.effects).collect();
        let shared: Arc<dyn ToolHandler> = match (plugin.isolation, &plugin.library) {
            (Isolation::InProcess, Some(library)) => {
                Arc::new(PluginHandler::new(library.clone(), self.options.max_result_bytes))
            }
            (Isolation::InProcess, None) => return Err("it was not loaded".to_owned()),
            (Isolation::Process, _) => {
                return classes.into_iter().map(|e| Ok((e, self.process_handler(plugin, e, timeouts)?))).collect();
            }
        };
        Ok(classes.into_iter().map(|e| (e, shared.clone())).collect())
    }

    /// Registers every offered tool in `registry`; returns what could not be registered.
    pub fn register_tools(&self, registry: &mut ToolRegistry) -> Vec<String> {
        let mut problems = Vec::new();
        for plugin in &self.plugins {
            let manifest = &plugin.manifest;
            if !plugin.tools.iter().any(|(_, s)| *s == ToolState::Offered) {
                continue;
            }
            let timeouts = self.options.timeouts_of(&manifest.name);
            let handlers = match self.handlers(plugin, &timeouts) {
                Ok(h) => h,
                Err(e) => {
                    problems.push(format!("plugin {}: {e}", manifest.name));
                    continue;
                }
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
                let Some(handler) = handlers.get(&tool.effects) else { continue };
                if let Err(e) = registry.register(definition, handler.clone()) {
                    problems.push(format!("plugin {}: {e}", manifest.name));
                    continue;
                }
                if let Some(limit) = timeouts.of(&tool.name) {
                    registry.set_timeout(&tool.name, limit);
                }
            }
        }
        problems
    }
}
