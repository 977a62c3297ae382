//! Model Context Protocol interop for the harness, in both directions, on the official Rust
//! SDK (`rmcp`), without giving up the router-first guarantees.
//!
//! - [`ToolServer`] serves a [`harness_core::ToolRegistry`] to any MCP client over stdio
//!   (`harness mcp serve`): `tools/list` from the registry, `tools/call` validated and run by
//!   [`harness_core::call_tool`] exactly as a step would be, each call one trace line.
//! - [`McpSources`] starts the MCP servers of `[[mcp.servers]]` as child processes, or reaches
//!   remote ones over Streamable HTTP, lists their tools and registers them beside plugin
//!   tools: their schemas are compiled and their calls validated like any other tool's. A server that fails to start is reported, not fatal.
//!   The tools are pinned as offered: one its server changes or removes mid-run
//!   (`notifications/tools/list_changed`) is refused, `tool_changed`, for the rest of the run.
//!
//! The smallest use, as a tool source:
//!
//! ```no_run
//! use harness_mcp::{McpServerConfig, McpSources, SourceOptions};
//! let servers = vec![McpServerConfig {
//!     name: "weather".into(),
//!     command: "python3".into(),
//!     args: vec!["weather_server.py".into()],
//!     ..Default::default()
//! }];
//! let mut registry = harness_core::ToolRegistry::new();
//! let mut sources = McpSources::start(&servers, SourceOptions::default()).expect("valid entries");
//! for problem in sources.register_tools(&mut registry) {
//!     eprintln!("warning: {problem}");
//! }
//! for server in sources.servers() {
//!     if let Some(why) = server.failure() {
//!         eprintln!("MCP server {} did not start: {why}", server.config().name);
//!     }
//! }
//! // ... run the loop with `registry`, then:
//! sources.shutdown();
//! ```
//!
//! And as a server: `ToolServer::new(registry, ServeOptions::default()).serve_stdio().await`.
#![deny(missing_docs)]

mod child;
mod config;
mod connection;
mod discover;
mod error;
mod gate;
mod handler;
mod http;
mod listing;
mod oauth;
mod remote;
mod retry;
mod serve;
mod source;
mod tool;
mod watch;
mod withheld;

pub use config::{
    INHERITED_ENV, McpServerConfig, OAuthClientConfig, is_model_tool_name, qualified_name, validate_servers,
};
pub use error::McpError;
pub use http::HttpOptions;
pub use remote::header_variables;
pub use serve::{ServeOptions, ToolServer};
pub use source::{McpServer, McpSources, SourceOptions};
pub use tool::{McpTool, McpToolState};
