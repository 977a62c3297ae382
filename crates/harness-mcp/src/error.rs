//! What can go wrong around MCP, as opposed to inside one call (those are `ToolFailure`s).

/// A failure of the MCP side as a whole: a bad server entry, the runtime, the stdio server.
#[derive(Debug, thiserror::Error)]
pub enum McpError {
    /// A `[[mcp.servers]]` entry breaks a rule.
    #[error("[[mcp.servers]] entry {index} ({name:?}): {reason}")]
    InvalidServer {
        /// Its position in the list, from 1.
        index: usize,
        /// Its name as written.
        name: String,
        /// The rule it breaks, and the fix.
        reason: String,
    },
    /// The async runtime that drives the MCP connections could not start.
    #[error("cannot start the async runtime for MCP: {0}")]
    Runtime(#[source] std::io::Error),
    /// Standard output could not be set aside for the protocol.
    #[error("cannot set up standard output for the MCP protocol: {0}")]
    Stdout(#[source] std::io::Error),
    /// The HTTP listener failed.
    #[error("the MCP HTTP server failed: {0}")]
    Listen(#[source] std::io::Error),
    /// The MCP client never completed the handshake, or the transport failed.
    #[error("the MCP session failed: {0}")]
    Session(String),
    /// A call's trace line could not be written, so the server stopped rather than go on unrecorded.
    #[error("the trace could not be written ({0}); the server stopped rather than serve calls unrecorded")]
    Trace(String),
}
