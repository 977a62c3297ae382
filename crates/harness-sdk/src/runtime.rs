//! The plugin side of the boundary: state, JSON in and out, and panics caught.

use std::any::Any;
use std::cell::RefCell;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Once, OnceLock};

use harness_abi::abi_stable::prefix_type::PrefixTypeTrait;
use harness_abi::abi_stable::std_types::{RResult, RStr, RString};
use harness_abi::manifest::{Manifest, ToolError};
use harness_abi::{PluginModule, PluginModuleRef};

use crate::{Plugin, Tool};

thread_local! {
    /// Where the last panic on this thread happened, recorded by the plugin's panic hook.
    static LAST_PANIC_AT: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Holds one plugin's state inside its library; the export macro makes one static of it.
pub struct Runtime<P: Plugin> {
    plugin: OnceLock<P>,
    tools: OnceLock<Vec<Tool<P>>>,
}

impl<P: Plugin> Default for Runtime<P> {
    fn default() -> Self {
        Self::new()
    }
}

fn panic_message(payload: &(dyn Any + Send)) -> String {
    let what = payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".to_owned());
    match LAST_PANIC_AT.with(|at| at.borrow_mut().take()) {
        Some(at) => format!("tool panicked at {at}: {what}"),
        None => format!("tool panicked: {what}"),
    }
}

/// Replaces the default hook, which would print to the host's stderr, with one that records
/// where the panic happened; the library has its own std, so the host's hook is untouched.
fn install_panic_hook() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        std::panic::set_hook(Box::new(|info| {
            if let Some(loc) = info.location() {
                let at = format!("{}:{}:{}", loc.file(), loc.line(), loc.column());
                LAST_PANIC_AT.with(|slot| *slot.borrow_mut() = Some(at));
            }
        }));
    });
}

fn error_json(error: &ToolError) -> RString {
    // Serializing two strings cannot fail; fall back to a fixed text all the same.
    serde_json::to_string(error)
        .unwrap_or_else(|_| r#"{"code":"tool_error","message":"unserializable error"}"#.to_owned())
        .into()
}

impl<P: Plugin> Runtime<P> {
    /// An empty runtime, for a `static`.
    pub const fn new() -> Self {
        Self { plugin: OnceLock::new(), tools: OnceLock::new() }
    }

    /// Builds the exported module from the macro's four functions.
    pub fn module(
        abi_version: extern "C" fn() -> RString,
        manifest: extern "C" fn() -> RString,
        init: extern "C" fn(RStr<'_>) -> RResult<(), RString>,
        call: extern "C" fn(RStr<'_>, RStr<'_>) -> RResult<RString, RString>,
    ) -> PluginModuleRef {
        PluginModule { abi_version, manifest, init, call }.leak_into_prefix()
    }

    fn tools(&self) -> &[Tool<P>] {
        self.tools.get_or_init(P::tools)
    }

    /// The plugin's manifest, built from its constants and tools.
    pub fn manifest(&self) -> Manifest {
        Manifest {
            name: P::NAME.to_owned(),
            version: P::VERSION.to_owned(),
            description: P::DESCRIPTION.to_owned(),
            test_only: P::TEST_ONLY,
            tools: self.tools().iter().map(|t| t.manifest.clone()).collect(),
        }
    }

    /// The manifest as JSON; an `{"error": ...}` object if building it panicked.
    pub fn manifest_json(&self) -> RString {
        install_panic_hook();
        let built = catch_unwind(AssertUnwindSafe(|| serde_json::to_string(&self.manifest())));
        match built {
            Ok(Ok(json)) => json.into(),
            Ok(Err(e)) => serde_json::json!({ "error": format!("manifest is not JSON: {e}") }).to_string().into(),
            Err(p) => serde_json::json!({ "error": panic_message(p.as_ref()) }).to_string().into(),
        }
    }

    /// Initialises the plugin from its configuration JSON.
    pub fn init_json(&self, config: RStr<'_>) -> RResult<(), RString> {
        install_panic_hook();
        let outcome = catch_unwind(AssertUnwindSafe(|| -> Result<(), String> {
            let config: P::Config = serde_json::from_str(config.as_str())
                .map_err(|e| format!("invalid configuration for plugin {}: {e}", P::NAME))?;
            let plugin = P::init(config)?;
            // A second init keeps the first state: the host initialises each library once.
            let _ = self.plugin.set(plugin);
            Ok(())
        }));
        match outcome {
            Ok(Ok(())) => RResult::ROk(()),
            Ok(Err(message)) => RResult::RErr(message.into()),
            Err(p) => RResult::RErr(format!("init panicked: {}", panic_message(p.as_ref())).into()),
        }
    }

    /// Runs one tool call from JSON arguments to a JSON result or a JSON tool error.
    pub fn call_json(&self, tool: RStr<'_>, arguments: RStr<'_>) -> RResult<RString, RString> {
        let outcome = catch_unwind(AssertUnwindSafe(|| self.call(tool.as_str(), arguments.as_str())));
        let result = match outcome {
            Ok(result) => result,
            Err(p) => Err(ToolError { code: "tool_panicked".to_owned(), message: panic_message(p.as_ref()) }),
        };
        match result {
            Ok(json) => RResult::ROk(json.into()),
            Err(e) => RResult::RErr(error_json(&e)),
        }
    }

    fn call(&self, tool: &str, arguments: &str) -> Result<String, ToolError> {
        let plugin = self
            .plugin
            .get()
            .ok_or_else(|| ToolError::tool_error(format!("plugin {} was called before init", P::NAME)))?;
        let entry = self.tools().iter().find(|t| t.manifest.name == tool).ok_or_else(|| ToolError {
            code: "unknown_tool".to_owned(),
            message: format!("plugin {} has no tool named {tool:?}", P::NAME),
        })?;
        entry.call_json(plugin, arguments)
    }
}
