//! A server's `tools/list`, page by page within caps: a server that answers with page after
//! page (each with a `nextCursor`), or with more tools or bytes than any real server has, has
//! its tools refused with the cap named, and never grows the harness.

use rmcp::model::{PaginatedRequestParams, Tool};
use rmcp::{Peer, RoleClient, ServiceError};

/// Pages of one listing.
pub(crate) const MAX_PAGES: usize = 64;
/// Tools of one listing.
pub(crate) const MAX_TOOLS: usize = 1024;
/// Bytes of one listing's tools, as JSON.
pub(crate) const MAX_BYTES: usize = 8 << 20;

/// Why a listing failed.
#[derive(Debug)]
pub(crate) enum ListError {
    /// A request failed.
    Service(ServiceError),
    /// The listing went over a cap: what was over it, in words.
    Cap(String),
}

impl std::fmt::Display for ListError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Service(e) => e.fmt(f),
            Self::Cap(why) => f.write_str(why),
        }
    }
}

/// Every page of `server`'s tools, within the caps.
pub(crate) async fn list_tools(peer: &Peer<RoleClient>, server: &str) -> Result<Vec<Tool>, ListError> {
    let mut tools = Vec::new();
    let mut bytes = 0usize;
    let mut cursor = None;
    for _ in 0..MAX_PAGES {
        let page = peer
            .list_tools(Some(PaginatedRequestParams::default().with_cursor(cursor)))
            .await
            .map_err(ListError::Service)?;
        for tool in &page.tools {
            bytes = bytes.saturating_add(serde_json::to_vec(tool).map_or(0, |v| v.len()));
        }
        tools.extend(page.tools);
        if tools.len() > MAX_TOOLS {
            return Err(over(server, format!("more than {MAX_TOOLS} tools")));
        }
        if bytes > MAX_BYTES {
            return Err(over(server, format!("more than {MAX_BYTES} bytes of tool definitions")));
        }
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => return Ok(tools),
        }
    }
    Err(over(server, format!("more than {MAX_PAGES} pages")))
}

/// The refusal of a listing over a cap.
fn over(server: &str, what: String) -> ListError {
    ListError::Cap(format!(
        "MCP server {server:?} listed {what} in one tools/list, over the harness's cap; none of its tools are offered"
    ))
}
