//! The root module a plugin library exports.

use abi_stable::{
    StableAbi, declare_root_module_statics,
    library::RootModule,
    package_version_strings,
    sabi_types::VersionStrings,
    std_types::{RResult, RStr, RString},
};

/// The symbol under which a plugin library exports its root module header.
///
/// It is abi_stable's own name for it; the SDK spells it out literally because its export
/// macro must work in crates that do not depend on abi_stable themselves.
pub const ROOT_MODULE_SYMBOL: &str = "_1as_0lib_1header_0root_bmodule_bloader";

/// The functions every plugin library exports, frozen at ABI 1.0.
///
/// Arguments, results, errors and the manifest are JSON text so that this struct never needs
/// to grow; see `docs/abi.md` before changing anything here.
#[repr(C)]
#[derive(StableAbi)]
#[sabi(kind(Prefix(prefix_ref = PluginModuleRef)))]
#[sabi(missing_field(panic))]
pub struct PluginModule {
    /// The harness ABI version (semver) the plugin was built against.
    pub abi_version: extern "C" fn() -> RString,
    /// The plugin's manifest as JSON (see [`crate::manifest::Manifest`]).
    pub manifest: extern "C" fn() -> RString,
    /// Configures the plugin with its configuration section, a JSON object (`{}` when none).
    pub init: extern "C" fn(config_json: RStr<'_>) -> RResult<(), RString>,
    /// Calls one tool with JSON arguments: the result as JSON, or a
    /// [`crate::manifest::ToolError`] as JSON.
    #[sabi(last_prefix_field)]
    pub call: extern "C" fn(tool: RStr<'_>, arguments_json: RStr<'_>) -> RResult<RString, RString>,
}

impl RootModule for PluginModuleRef {
    declare_root_module_statics! {PluginModuleRef}
    const BASE_NAME: &'static str = "harness_plugin";
    const NAME: &'static str = "harness_plugin";
    const VERSION_STRINGS: VersionStrings = package_version_strings!();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_module_symbol_is_abi_stables_own() {
        assert_eq!(ROOT_MODULE_SYMBOL, abi_stable::library::ROOT_MODULE_LOADER_NAME);
    }
}
