//! A Python virtual environment with the official MCP SDK (tests/mcp/requirements.txt), for
//! the MCP interop tests; the tests find its interpreter in `HARNESS_MCP_PYTHON`.

use crate::Context;

use super::Vars;

/// Creates `target/mcp-venv` from the requirements file, again whenever that file changes.
pub(crate) fn ensure(context: &Context) -> Result<Vars, String> {
    let python = super::venv::ensure(context, "mcp", "bin/python")?;
    Ok(vec![("HARNESS_MCP_PYTHON".into(), python.display().to_string())])
}
