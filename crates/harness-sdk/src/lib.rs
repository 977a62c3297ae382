//! Write a tool plugin for `harness`: plain functions marked `#[tool]`, one `plugin!` line.
//!
//! A plugin is a `cdylib` crate that depends on this crate alone. The short form makes a tool
//! of a plain function: its parameters become the arguments type (unknown keys refused), whose
//! JSON Schema the model sees; its doc comment becomes the description (a `# Arguments`
//! section of `` * `name` - ... `` bullets documents the parameters); its return type (or the
//! `T` of `Result<T, E>`, with `E: Into<ToolError>`) gives the output schema. `#[schema]`
//! derives what a type of your own needs to be an argument or a result. The SDK catches every
//! panic at the library boundary and returns it as a `tool_panicked` error: nothing unwinds
//! into the host.
//!
//! ```
//! /// Upper-cases text.
//! #[harness_sdk::tool(effects = "pure", example(args = {"text": "hi"}, result = "HI"))]
//! fn shout(text: String) -> String {
//!     text.to_uppercase()
//! }
//!
//! harness_sdk::plugin!(name = "loud", description = "Makes text loud.", tools = [shout]);
//! # fn main() {}
//! ```
//!
//! The long form, for plugins with configuration or state: implement [`Plugin`], list
//! [`Tool`]s built from typed closures that receive `&Self`, and export it with
//! [`export_plugin!`]. Its types derive through `#[schema]` (or derive `Deserialize` and
//! `JsonSchema` themselves, with `#[serde(crate = "harness_sdk::serde")]` and
//! `#[schemars(crate = "harness_sdk::schemars")]`, since the derives look for crates of those names):
//!
//! ```
//! use harness_sdk::{Effects, NoConfig, Plugin, Tool, ToolError};
//!
//! #[harness_sdk::schema]
//! #[serde(deny_unknown_fields)]
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
pub use harness_sdk_macros::{schema, tool};
pub use runtime::Runtime;
pub use tool::Tool;

// The attributes' generated code names `::harness_sdk`; this lets the SDK's own tests use them.
extern crate self as harness_sdk;

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

/// Declares a plugin of `#[tool]` functions and exports it: `plugin!(tools = [greet]);`.
///
/// The plugin takes no configuration and holds no state (write the [`Plugin`] trait for
/// those). Its name and description default to the crate's `name` and `description` in
/// Cargo.toml (`name = "..."` and `description = "..."`, in that order before `tools`, say
/// otherwise); its version is always the crate's. Each tool is the path of a function marked
/// `#[harness_sdk::tool]`. Use it once, at the root of a `cdylib` crate.
#[macro_export]
macro_rules! plugin {
    ($(name = $name:expr,)? $(description = $description:expr,)? tools = [$($($tool:ident)::+),* $(,)?] $(,)?) => {
        /// The plugin that `harness_sdk::plugin!` declared.
        #[doc(hidden)]
        pub struct __HarnessPlugin;

        impl $crate::Plugin for __HarnessPlugin {
            const NAME: &'static str = $crate::__or!($($name)?; env!("CARGO_PKG_NAME"));
            const VERSION: &'static str = env!("CARGO_PKG_VERSION");
            const DESCRIPTION: &'static str = $crate::__or!($($description)?; env!("CARGO_PKG_DESCRIPTION"));
            type Config = $crate::NoConfig;
            fn init(_: $crate::NoConfig) -> ::core::result::Result<Self, ::std::string::String> {
                ::core::result::Result::Ok(__HarnessPlugin)
            }
            fn tools() -> ::std::vec::Vec<$crate::Tool<Self>> {
                ::std::vec![$($($tool)::+::tool()),*]
            }
        }

        // `plugins list` and the manifest would show nothing of what the plugin is for.
        const _: () = ::core::assert!(
            !<__HarnessPlugin as $crate::Plugin>::DESCRIPTION.is_empty(),
            "the plugin has no description: set `description` in Cargo.toml's [package], or pass description = \"...\" to plugin!"
        );

        $crate::export_plugin!(__HarnessPlugin);
    };
}

/// The first of an optional value and a default; for [`plugin!`].
#[doc(hidden)]
#[macro_export]
macro_rules! __or {
    (; $default:expr) => {
        $default
    };
    ($value:expr; $default:expr) => {
        $value
    };
}

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
