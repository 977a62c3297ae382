//! Opening the file: the harness loader's verdict first, then the module read through the ABI;
//! or, when calls run in children, its manifest read in a confined child.
//!
//! The loader refuses a manifest that breaks a rule (a schema that does not compile, a tool
//! declared twice) as a whole. A check run must still say which rule, in the check that owns
//! it, and still run the other checks; so once the loader has vouched for the file's headers,
//! layout and ABI version, the module is opened again through abi_stable (the same mapping:
//! the OS hands back the library already loaded) and its raw manifest is read from there.

use std::path::Path;

use harness_abi::PluginModuleRef;
use harness_abi::abi_stable::library::lib_header_from_path;
use harness_loader::isolation::HostCommand;
use harness_loader::{LoadError, PluginLibrary};

/// A library file whose binary interface the harness accepts.
pub(crate) struct Opened {
    /// Its root module, when it was opened in this process ([`open`]); never when its manifest
    /// was read in a child ([`open_in_child`]).
    pub(crate) module: Option<PluginModuleRef>,
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
    Ok(Opened { module: Some(module), abi_version, manifest_json, refusal })
}

/// Reads `path`'s manifest in a plugin-host child confined to loading it, so that none of its
/// code runs here; the loader's verdict is then given here on what the child answered.
pub(crate) fn open_in_child(command: &HostCommand, path: &Path) -> Result<Opened, String> {
    let read = harness_loader::isolation::read_manifest(command, path)?;
    harness_loader::check_abi(&read.abi_version).map_err(|e| e.to_string())?;
    let refusal = match harness_loader::parse_manifest(&read.manifest_json) {
        Ok(_) => None,
        Err(e) => Some(e.to_string()),
    };
    Ok(Opened { module: None, abi_version: read.abi_version, manifest_json: read.manifest_json, refusal })
}

fn first_line(text: &str) -> String {
    format!("the library passed the loader but cannot be opened again: {}", text.lines().next().unwrap_or(""))
}
