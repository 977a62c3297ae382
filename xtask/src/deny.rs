//! `cargo xtask deny`: the dependencies' licences, bans and sources against `deny.toml`.
//!
//! cargo-deny is installed into the cache directory (outside the clone) the first time, as
//! cargo-fuzz is, so that CI builds it once, not on every run. The advisories check reads the
//! RustSec database, which cargo-deny clones from GitHub: CI's machine cannot reach GitHub, so
//! CI runs the three other checks, and `cargo xtask deny advisories` runs that one where
//! GitHub is reachable.

use std::process::Command;

use crate::{Context, cached_install, run};

/// The cargo-deny release installed.
const CARGO_DENY: &str = "0.20.2";

/// The checks that need nothing but the lock file: CI's.
const OFFLINE: [&str; 3] = ["licenses", "bans", "sources"];

/// Runs `cargo deny check` with the checks named (CI's three when none is).
pub(crate) fn deny(context: &Context, rest: &[String]) -> Result<(), String> {
    let checks: Vec<&str> = if rest.is_empty() { OFFLINE.to_vec() } else { rest.iter().map(String::as_str).collect() };
    let cargo_deny = cached_install(context, "cargo-deny", CARGO_DENY)?;
    eprintln!("== cargo deny check {}", checks.join(" "));
    run(Command::new(cargo_deny)
        .current_dir(&context.root)
        // The lock file as committed, every member of the workspace a root of the graph,
        // deny.toml found at the root; a duplicate's warning without its whole inclusion tree.
        .args(["--locked", "--workspace", "check", "--hide-inclusion-graph"])
        .args(&checks))
    .map_err(|e| {
        format!("{e}\nthe lines above name each crate that breaks a rule of deny.toml and the rule (or why a check could not run)")
    })
}
