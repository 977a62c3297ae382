//! Opening an in-process plugin admitted from the plugin cache at the first call of one of
//! its tools, not at start-up (`DiscoveryOptions::open_lazily`).
//!
//! With the cache filled, the first model request needs only what each file declared, and
//! the cache has that. Opening a library and running its `init` cost about 0.35 ms a plugin
//! here, most of a ten-plugin start-up, and a run calls the tools of few of its plugins.
//!
//! Why not open them on a thread beside the run: measured, opens on another thread slowed
//! the first request by more than they cost, even at the lowest priority (`SCHED_IDLE`) and
//! started only once the request was on its way. `dlopen` maps and protects memory and
//! holds the dynamic loader's lock, and the run's thread, faulting in the code that writes
//! its first request, waits on both.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use harness_abi::manifest::Manifest;
use serde_json::Value;

use crate::cache::Identity;
use crate::library::PluginLibrary;
use crate::library_file::LibraryFile;

/// An in-process plugin's library, opened and initialised at its first call.
#[derive(Debug)]
pub struct LateLibrary {
    path: PathBuf,
    /// The file opened at start-up, loaded through that open at the first call.
    file: Mutex<Option<LibraryFile>>,
    /// The file's state the plugin cache answered for, at start-up.
    identity: Identity,
    manifest: Manifest,
    config: Value,
    opened: OnceLock<Result<Arc<PluginLibrary>, String>>,
}

impl LateLibrary {
    /// A library to open at its first call: `identity` is the state of the file the plugin
    /// cache answered for, `manifest` the cached manifest it must declare, `config` its
    /// configuration section.
    pub(crate) fn new(file: LibraryFile, identity: Identity, manifest: Manifest, config: Value) -> Self {
        let path = file.path().to_owned();
        Self { path, file: Mutex::new(Some(file)), identity, manifest, config, opened: OnceLock::new() }
    }

    /// The library file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The library, opened and initialised by the first caller (the others wait for it); or
    /// why it could not be. Tried once: a failure is the answer for the rest of the run.
    pub fn get(&self) -> Result<&Arc<PluginLibrary>, &str> {
        self.opened
            .get_or_init(|| {
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.open()))
                    .unwrap_or_else(|_| Err("opening it panicked".to_owned()))
            })
            .as_ref()
            .map_err(String::as_str)
    }

    /// Why the library could not be opened, if a call tried it and it failed.
    pub fn failure(&self) -> Option<&str> {
        self.opened.get().and_then(|r| r.as_ref().err()).map(String::as_str)
    }

    /// Opens, checks against the cached manifest, and initialises: only the file the run
    /// started with, not one written over it or renamed onto its path since.
    fn open(&self) -> Result<Arc<PluginLibrary>, String> {
        let file = self.file.lock().ok().and_then(|mut f| f.take()).ok_or("it was opened already")?;
        if file.identity() != Some(self.identity) {
            return Err(
                "the file changed since the run started (it is not the file the plugin cache answered for); restart the harness to load it"
                    .to_owned(),
            );
        }
        let library = crate::library::load_as_cached(file, &self.manifest).map_err(|e| e.to_string())?;
        library.init(&self.config).map_err(|e| e.to_string())?;
        Ok(Arc::new(library))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_changed_since_start_up_is_not_opened() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("libplugin.so");
        std::fs::write(&path, b"the file the cache answered for").unwrap();
        let identity = Identity::of(&path).unwrap();
        let manifest = Manifest {
            name: "p".into(),
            version: "0.1.0".into(),
            description: "d".into(),
            test_only: false,
            tools: Vec::new(),
        };
        let file = LibraryFile::open(&path).unwrap();
        std::fs::write(&path, b"another library, written over it").unwrap();
        let late = LateLibrary::new(file, identity, manifest, Value::Null);
        let why = late.get().unwrap_err();
        assert!(why.contains("changed since the run started"), "{why}");
        assert_eq!(late.failure(), Some(why));
    }
}
