//! Filling the core's registry with every offered tool, each with the handler of its plugin's
//! isolation: in process isolation, one child per effect class of the plugin's tools, each
//! confined to its class.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use harness_abi::manifest::Effects;

use harness_core::{ToolDefinition, ToolExample, ToolHandler, ToolRegistry, ToolSource, ToolSpec};
use serde_json::Value;

use crate::discover::{Discovery, LoadedPlugin};
use crate::handler::PluginHandler;
use crate::isolation::Isolation;
use crate::options::ToolState;
use crate::settings::Timeouts;

impl Discovery {
    /// The handler of `plugin`'s tools of one effect class, in a child confined to that class.
    fn process_handler(
        &self,
        plugin: &LoadedPlugin,
        effects: Effects,
        timeouts: &Timeouts,
    ) -> Result<Arc<crate::isolation::ProcessHandler>, String> {
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
        let mut limits = harness_sandbox::Limits::for_effects(effects);
        if let Some(settings) = self.options.settings.get(name) {
            handler = handler.passing_env(settings.env.clone()).allowing_exec(!settings.allow_exec.is_empty());
            limits = limits.overridden_by(&settings.limits);
        }
        handler = handler.limited(limits);
        Ok(Arc::new(handler))
    }

    /// Starts the children of every process-isolated plugin with tools offered, all at once,
    /// so that a plugin that cannot load or initialise there is skipped before a run, with
    /// its reason, as an in-process one is. Not, with `open_lazily`, those admitted from the
    /// plugin cache: as an in-process plugin's library, their children start at their first
    /// call, so that a start-up whose files are all known starts no child at all.
    pub(crate) fn start_hosts(&mut self) {
        if self.options.host_command.is_none() {
            return;
        }
        let mut wanted = Vec::new();
        for plugin in &self.plugins {
            let lazy = plugin.from_cache && plugin.init_known && self.options.open_lazily;
            if plugin.isolation != Isolation::Process || lazy {
                continue;
            }
            let timeouts = self.options.timeouts_of(&plugin.manifest.name);
            let classes = offered_classes(plugin);
            let handlers: Result<Vec<_>, String> =
                classes.into_iter().map(|e| Ok((e, self.process_handler(plugin, e, &timeouts)?))).collect();
            if let Ok(handlers) = handlers {
                wanted.push((plugin.manifest.name.clone(), handlers));
            }
        }
        // Each start's failure, and the reason when the plugin declined for want of configuration.
        type Failed = Option<(String, Option<harness_abi::manifest::InitDeclined>)>;
        let outcomes: Vec<Failed> = std::thread::scope(|scope| {
            let started: Vec<_> = wanted
                .iter()
                .map(|(_, handlers)| {
                    scope.spawn(|| {
                        handlers
                            .iter()
                            .find_map(|(_, h)| h.prestart(None).err().map(|f| (f.message, h.declined().cloned())))
                    })
                })
                .collect();
            let broken = || Some(("its start failed".to_owned(), None));
            started.into_iter().map(|t| t.join().unwrap_or_else(|_| broken())).collect()
        });
        for ((name, handlers), failed) in wanted.into_iter().zip(outcomes) {
            let Some(at) = self.plugins.iter().position(|p| p.manifest.name == name) else { continue };
            let config = self.options.configs.get(&name).cloned().unwrap_or_else(|| Value::Object(Default::default()));
            match &failed {
                Some((_, Some(declined))) => {
                    self.remember_init(&self.plugins[at].path, &config, Some(declined.clone()))
                }
                None => self.remember_init(&self.plugins[at].path, &config, None),
                Some((_, None)) => {}
            }
            match failed {
                Some((_, Some(declined))) => self.plugins[at].decline(&declined),
                Some((reason, None)) => {
                    let plugin = self.plugins.remove(at);
                    self.skipped.push(crate::discover::Skipped { path: plugin.path, reason, detail: None });
                }
                None => {
                    self.plugins[at].initialised = true;
                    let handlers = handlers.into_iter().map(|(e, h)| (e, h as Arc<dyn ToolHandler>)).collect();
                    self.hosts.0.insert(name, handlers);
                }
            }
        }
    }

    /// One handler per effect class in process isolation (a child each), one in-process.
    fn handlers(
        &self,
        plugin: &LoadedPlugin,
        timeouts: &Timeouts,
    ) -> Result<BTreeMap<Effects, Arc<dyn ToolHandler>>, String> {
        let classes = offered_classes(plugin);
        let shared: Arc<dyn ToolHandler> = match (plugin.isolation, &plugin.library) {
            (Isolation::InProcess, Some(library)) => {
                Arc::new(PluginHandler::new(library.clone(), self.options.max_result_bytes))
            }
            (Isolation::InProcess, None) => match &plugin.late {
                Some(late) => Arc::new(PluginHandler::late(late.clone(), self.options.max_result_bytes)),
                None => return Err("it was not loaded".to_owned()),
            },
            (Isolation::Process, _) => {
                if let Some(started) = self.hosts.0.get(&plugin.manifest.name) {
                    return Ok(started.clone());
                }
                return classes
                    .into_iter()
                    .map(|e| Ok((e, self.process_handler(plugin, e, timeouts)? as Arc<dyn ToolHandler>)))
                    .collect();
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
            for (i, (tool, state)) in plugin.tools.iter().enumerate() {
                if *state != ToolState::Offered {
                    continue;
                }
                let schemas = plugin.schemas.get(i);
                let definition = ToolDefinition {
                    name: tool.name.clone(),
                    description: tool.description.clone(),
                    parameters: tool.parameters.clone(),
                    examples: tool
                        .examples
                        .iter()
                        .map(|e| ToolExample {
                            arguments: e.arguments.clone(),
                            result: e.result.clone(),
                            request: e.request.clone(),
                        })
                        .collect(),
                    source: ToolSource::Plugin { name: manifest.name.clone(), version: manifest.version.clone() },
                };
                let Some(handler) = handlers.get(&tool.effects) else { continue };
                // Compiled when the manifest was checked: registered as they are, not compiled again.
                let spec = ToolSpec {
                    parameters: schemas.map(|s| s.parameters.clone()),
                    output: tool.output.clone(),
                    output_compiled: schemas.and_then(|s| s.output.clone()),
                    effect: Some(effect_class(tool.effects)),
                    timeout: timeouts.of(&tool.name),
                    ..ToolSpec::new(definition, handler.clone())
                };
                if let Err(e) = registry.register(spec) {
                    problems.push(format!("plugin {}: {e}", manifest.name));
                }
            }
        }
        // The built-in `finish`'s schema too, before the first model request.
        crate::schema_warmup::compile_ahead(registry);
        problems
    }
}

/// The core's effect class of a declared effect, for the approval policy: the one border
/// between the ABI's `Effects` (the plugin's side) and the core's `Effect` (the host's).
fn effect_class(effects: Effects) -> harness_core::Effect {
    match effects {
        Effects::Pure => harness_core::Effect::Pure,
        Effects::Reads => harness_core::Effect::Reads,
        Effects::Writes => harness_core::Effect::Writes,
        Effects::Network => harness_core::Effect::Network,
    }
}

fn offered_classes(plugin: &LoadedPlugin) -> BTreeSet<Effects> {
    plugin.tools.iter().filter(|(_, s)| *s == ToolState::Offered).map(|(t, _)| t.effects).collect()
}

/// The started children of process-isolated plugins, by plugin and effect class.
#[derive(Default)]
pub(crate) struct Hosts(pub(crate) HashMap<String, BTreeMap<Effects, Arc<dyn ToolHandler>>>);

impl std::fmt::Debug for Hosts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.0.keys()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_declared_effect_becomes_the_core_class_of_the_same_name() {
        let declared = [Effects::Pure, Effects::Reads, Effects::Writes, Effects::Network];
        let classes: Vec<harness_core::Effect> = declared.iter().map(|&e| effect_class(e)).collect();
        assert_eq!(classes, harness_core::Effect::ALL, "the core's classes in the ABI's order");
        for e in declared {
            assert_eq!(effect_class(e).as_str(), e.as_str());
        }
    }
}
