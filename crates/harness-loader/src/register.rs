//! Filling the core's registry with every offered tool, each with the handler of its plugin's
//! isolation.

use std::sync::Arc;

use harness_core::{ToolDefinition, ToolExample, ToolHandler, ToolRegistry, ToolSource};
use serde_json::Value;

use crate::discover::{Discovery, LoadedPlugin, ToolState};
use crate::handler::PluginHandler;
use crate::isolation::Isolation;
use crate::settings::Timeouts;

impl Discovery {
    #[cfg(unix)]
    fn process_handler(&self, plugin: &LoadedPlugin, timeouts: &Timeouts) -> Result<Arc<dyn ToolHandler>, String> {
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
        if let Some(confinement) = &plugin.confinement {
            handler = handler.confined(confinement.clone());
        }
        Ok(Arc::new(handler))
    }

    #[cfg(not(unix))]
    fn process_handler(&self, _: &LoadedPlugin, _: &Timeouts) -> Result<Arc<dyn ToolHandler>, String> {
        Err("process isolation is only available on Unix".to_owned())
    }

    fn handler(&self, plugin: &LoadedPlugin, timeouts: &Timeouts) -> Result<Arc<dyn ToolHandler>, String> {
        match (plugin.isolation, &plugin.library) {
            (Isolation::InProcess, Some(library)) => {
                Ok(Arc::new(PluginHandler::new(library.clone(), self.options.max_result_bytes)))
            }
            (Isolation::InProcess, None) => Err("it was not loaded".to_owned()),
            (Isolation::Process, _) => self.process_handler(plugin, timeouts),
        }
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
            let handler = match self.handler(plugin, &timeouts) {
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
