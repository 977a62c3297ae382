//! The checks `harness plugins check` runs on one plugin library file, as a library, so that
//! a plugin's own `cargo test` runs the very same checks on its freshly built library.
//!
//! Seven named checks, each passed, failed or skipped per tool, with reasons that name the
//! tool and the input: `loads`, `manifest`, `schemas`, `examples`, `accepts-valid` (argument
//! objects generated from each schema with a fixed seed are accepted by validation, and every
//! call ends in a result or a tool error, never a panic, a crash or a hang), `rejects-invalid`
//! (objects that break each schema are refused before the tool runs) and `deterministic`
//! (pure tools answer the same arguments the same way). One failing check never stops the
//! others. See [`CheckName`].
//!
//! Where calls run is the caller's choice ([`Executor`]): in this process, each call on a
//! thread with a deadline (a plugin's tests), or in a `harness __plugin-host` child that a
//! crash or a hang cannot take down (the `harness` command).
//!
//! The smallest use, in a plugin's `tests/plugin_check.rs`:
//!
//! ```no_run
//! use harness_plugin_check::{CheckOptions, build_library, check};
//!
//! let library = build_library(env!("CARGO"), "calc").expect("the plugin builds");
//! let report = check(&library, &CheckOptions::default()).expect("the file is readable");
//! assert!(report.passed(), "{}", report.table());
//! ```
//!
//! The crate also writes new plugin crates ([`scaffold`]), which use it that way.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod call;
mod checks;
pub mod generate;
mod junit;
mod library;
mod open;
mod options;
mod report;
pub mod scaffold;

pub use checks::{CheckError, check};
pub use library::{BuildError, build_library};
pub use options::{CheckOptions, DEFAULT_CASES, DEFAULT_SEED, DEFAULT_TOOL_TIMEOUT, Executor, INIT_TIMEOUT};
pub use report::{CheckName, CheckReport, Failure, LISTED_FAILURES, Outcome, PluginInfo, Report, Status};
