//! Finds, checks and loads `harness` tool plugins, and fills the core's tool registry.
//!
//! Each library file is opened on its own (never abi_stable's one-module-per-type cache),
//! bound eagerly and locally, checked by abi_stable's layout check, by our semver ABI rule and
//! by manifest rules, then `init`ed with its configuration section. A bad file is skipped with
//! one line saying why; the others load.
//!
//! ```no_run
//! use harness_loader::{discover, DiscoveryOptions};
//! let found = discover(&DiscoveryOptions { dirs: vec!["plugins".into()], ..Default::default() });
//! let mut registry = harness_core::ToolRegistry::new();
//! for problem in found.register_tools(&mut registry) {
//!     eprintln!("warning: {problem}");
//! }
//! for skipped in &found.skipped {
//!     eprintln!("skipped {}: {}", skipped.path.display(), skipped.reason);
//! }
//! ```
#![deny(missing_docs)]

mod cache;
mod cpu_affinity;
mod discover;
pub mod guarded;
mod handler;
pub mod isolation;
mod late;
mod library;
mod library_file;
mod options;
mod placement;
mod preflight;
mod register;
mod schema_warmup;
mod settings;
mod signature;
mod trusted_path;

pub use discover::{Discovery, LoadedPlugin, Skipped, discover, library_extension};
pub use handler::PluginHandler;
pub use late::LateLibrary;
pub use library::{
    LoadError, PluginLibrary, ToolSchemas, check_abi, compile_schemas, parse_manifest, parse_manifest_schemas_unchecked,
};
pub use options::{DiscoveryOptions, ToolState};
pub use placement::Placement;
pub use schema_warmup::prepare_schema_compiler;
pub use settings::{PluginSettings, RESERVED_KEYS, Timeouts};
pub use signature::{Publisher, SignaturePolicy, check_signature, read_signature, signature_path};
pub use trusted_path::check_plugin_file;
