//! The stable binary interface between the `harness` host and its tool plugins.
//!
//! This crate holds types and the versioning rule, nothing else. A plugin library exports one
//! [`PluginModule`] (through the SDK's `export_plugin!` macro); the host reads it with
//! abi_stable's layout check and then with [`check_compatible`], our own semver rule.
//! Everything that may grow (the manifest, tool arguments and results, errors) crosses the
//! boundary as JSON text, so the exported surface itself can stay frozen.
//!
//! ```
//! use harness_abi::{check_compatible, ABI_VERSION};
//! assert!(check_compatible(ABI_VERSION, ABI_VERSION).is_ok());
//! assert!(check_compatible(ABI_VERSION, "2.0.0").is_err());
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]
// `StableAbi` derives expand to impls that this lint flags on current rustc.
#![allow(non_local_definitions)]

pub mod manifest;
mod module;
mod version;

pub use module::{PluginModule, PluginModuleRef, ROOT_MODULE_SYMBOL};
pub use version::{ABI_VERSION, AbiVersionError, check_compatible};

/// Re-exported so that the SDK and the loader use exactly the abi_stable this ABI was built on.
pub use abi_stable;
