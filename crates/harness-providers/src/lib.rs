//! Model providers for the `harness` loop.
//!
//! - [`ScriptedProvider`] replays router replies from a JSON Lines file: exact, repeatable runs
//!   for tests and demos.
//! - [`OfflineRouter`] is a small deterministic router, not a model: it lets the harness run
//!   with no key and no server by matching the request to a tool's name and description.
//!
//! ```
//! use harness_providers::ScriptedProvider;
//! let script = ScriptedProvider::from_jsonl("demo", r#"{"tool": "finish", "arguments": {"answer": 1}}"#).unwrap();
//! assert_eq!(script.len(), 1);
//! ```
#![deny(missing_docs)]

mod offline;
mod scripted;

pub use offline::OfflineRouter;
pub use scripted::{ScriptError, ScriptedProvider};
