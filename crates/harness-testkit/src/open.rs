//! Opening the file: the harness loader's verdict first, then the module read through the ABI.
//!
//! The loader refuses a manifest that breaks a rule (a schema that does not compile, a tool
//! declared twice) as a whole. A check run must still say which rule, in the check that owns
//! it, and still run the other checks; so once the loader has vouched for the file's headers,
//! layout and ABI version, the module is opened again through abi_stable (the same mapping:
//! the OS hands back the library already loaded) and its raw manifest is read from there.

use std::path::Path;

use harness_abi::PluginModuleRef;
use harness_abi::abi_stable::library::lib_header_from_path;
use harness_loader::{LoadError, PluginLibrary};

/// A library file whose binary interface the harness accepts.
pub(crate) struct Opened {
    /// Its root module.
    pub(crate) module: PluginModuleRef,
    /// The ABI version it reports.
    pub(crate) abi_version: String,
    /// Its manifest as the library gives it, unchecked.
    pub(crate) manifest_json: String,
    /// Why the harness's loader refuses the file, when it refuses only its manifest.
    pub(crate) refusal: Option<String>,
}

/// Opens `path` (canonical); the error is the loader's one-line reason.
pub(crate) fn open(path: &Path) -> Result<Opened, String> {
    let refusal = match PluginLibrary::load(path) {
        Ok(_) => None,
        Err(e @ LoadError::Manifest(_)) => Some(e.to_string()),
        Err(e) => return Err(e.to_string()),
    };
    let header = lib_header_from_path(path).map_err(|e| first_line(&e.to_string()))?;
    let module = header.init_root_module::<PluginModuleRef>().map_err(|e| first_line(&e.to_string()))?;
    let abi_version = (module.abi_version())().into_string();
    let manifest_json = (module.manifest())().into_string();
    Ok(Opened { module, abi_version, manifest_json, refusal })
}

fn first_line(text: &str) -> String {
    format!("the library passed the loader but cannot be opened again: {}", text.lines().next().unwrap_or(""))
}
