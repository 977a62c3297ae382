//! Write a tool plugin for `harness`: a struct, typed arguments, one export macro.
//!
//! A plugin is a `cdylib` crate that depends on this crate alone. Its arguments types derive
//! `serde::Deserialize` and `schemars::JsonSchema`, so the JSON Schema the model sees is
//! generated from the same type the tool receives. The SDK catches every panic at the library
//! boundary and returns it as a `tool_panicked` error: nothing unwinds into the host.
//!
//! ```
//! use harness_sdk::{Effects, NoConfig, Plugin, Tool, ToolError};
//! use harness_sdk::schemars::{self, JsonSchema};
//! use harness_sdk::serde::{self, Deserialize};
//!
//! #[derive(Deserialize, JsonSchema)]
//! #[serde(crate = "harness_sdk::serde")]
//! #[schemars(crate = "harness_sdk::schemars")]
//! struct Shout {
//!     /// The text to shout.
//!     text: String,
//! }
//!
//! struct Loud;
//!
//! impl Plugin for Loud {
//!     const NAME: &'static str = "loud";
//!     const VERSION: &'static str = "0.1.0";
//!     const DESCRIPTION: &'static str = "Makes text loud.";
//!     type Config = NoConfig;
//!     fn init(_: NoConfig) -> Result<Self, String> { Ok(Loud) }
//!     fn tools() -> Vec<Tool<Self>> {
//!         vec![Tool::new("shout", "Upper-cases text.", Effects::Pure,
//!             |_: &Loud, a: Shout| Ok::<_, ToolError>(a.text.to_uppercase()))]
//!     }
//! }
//!
//! harness_sdk::export_plugin!(Loud);
//! # fn main() {}
//! ```
#![deny(missing_docs)]

mod runtime;
mod tool;

pub use harness_abi::manifest::{Effects, InitDeclined, Manifest, ToolError, ToolExample, ToolManifest};
pub use runtime::Runtime;
pub use tool::Tool;

/// Re-exported so that plugin crates need no dependency of their own on it.
pub use schemars;
/// Re-exported so that plugin crates need no dependency of their own on it.
pub use serde;
/// Re-exported so that plugin crates need no dependency of their own on it.
pub use serde_json;

/// A plugin: its identity, its configuration, and the tools it offers.
///
/// The host calls `init` once with the plugin's `[plugins.<name>]` configuration section
/// before any tool runs; tools then receive `&Self`, possibly from several threads at once.
pub trait Plugin: Sized + Send + Sync + 'static {
    /// Plugin name, `^[a-z][a-z0-9_-]{0,63}$`; operators enable and configure it by this name.
    const NAME: &'static str;
    /// Plugin version (semver); usually `env!("CARGO_PKG_VERSION")`.
    const VERSION: &'static str;
    /// One sentence on what the plugin is for.
    const DESCRIPTION: &'static str;
    /// A plugin for tests only: loaded only when an operator enables it by name.
    const TEST_ONLY: bool = false;
    /// The configuration section's type; [`NoConfig`] when the plugin takes none.
    type Config: serde::de::DeserializeOwned;
    /// Builds the plugin from its configuration; an `Err` refuses to load it with that message.
    /// A plugin that is fine but not configured (a setting it cannot guess is missing) declines
    /// instead, with [`InitDeclined::to_init_error`]: its tools are not offered, quietly.
    fn init(config: Self::Config) -> Result<Self, String>;
    /// The tools the plugin offers.
    fn tools() -> Vec<Tool<Self>>;
}

/// The configuration of a plugin that takes none: any key in its section is an error.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NoConfig {}

/// Items the export macro expands to; not part of the public API.
#[doc(hidden)]
pub mod __private {
    pub use harness_abi::abi_stable::library::{
        __call_root_module_loader, CheckTypeLayout, LibHeader, RootModuleResult,
    };
    pub use harness_abi::abi_stable::std_types::{RResult, RStr, RString};
    pub use harness_abi::{ABI_VERSION, PluginModule, PluginModuleRef};
}

/// Exports a [`Plugin`] type as the library's root module, so that `harness` can load it.
///
/// Use it once, at the root of a `cdylib` crate.
#[macro_export]
macro_rules! export_plugin {
    ($plugin:ty) => {
        #[doc(hidden)]
        type __HarnessExportedPlugin = $plugin;

        #[doc(hidden)]
        mod __harness_plugin_export {
            use $crate::__private::{RResult, RStr, RString};

            static RUNTIME: $crate::Runtime<super::__HarnessExportedPlugin> = $crate::Runtime::new();

            extern "C" fn abi_version() -> RString {
                RString::from($crate::__private::ABI_VERSION)
            }
            extern "C" fn manifest() -> RString {
                RUNTIME.manifest_json()
            }
            extern "C" fn init(config: RStr<'_>) -> RResult<(), RString> {
                RUNTIME.init_json(config)
            }
            extern "C" fn call(tool: RStr<'_>, arguments: RStr<'_>) -> RResult<RString, RString> {
                RUNTIME.call_json(tool, arguments)
            }

            fn root_module() -> $crate::__private::PluginModuleRef {
                $crate::Runtime::<super::__HarnessExportedPlugin>::module(abi_version, manifest, init, call)
            }

            extern "C" fn erased_root_module() -> $crate::__private::RootModuleResult {
                $crate::__private::__call_root_module_loader(root_module)
            }

            // The symbol name is abi_stable's; `harness_abi::ROOT_MODULE_SYMBOL` is checked
            // against it in that crate's tests.
            #[unsafe(export_name = "_1as_0lib_1header_0root_bmodule_bloader")]
            pub static LIB_HEADER: $crate::__private::LibHeader = unsafe {
                $crate::__private::LibHeader::from_constructor::<$crate::__private::PluginModuleRef>(
                    erased_root_module,
                    $crate::__private::CheckTypeLayout::Yes,
                )
            };
        }
    };
}
