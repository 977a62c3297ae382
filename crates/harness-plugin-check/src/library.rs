//! Building a plugin's library file from its own tests.
//!
//! `cargo test` builds a `cdylib` only into `target/debug/deps/`, under a hashed name, and
//! artifact dependencies are still unstable; so a plugin's integration test runs
//! `cargo build -p NAME` itself and takes the library's path from cargo's own JSON messages,
//! wherever the target directory is. When the library is up to date this takes about half a
//! second.

use std::path::PathBuf;
use std::process::{Command, Stdio};

use serde_json::Value;

/// Why the library could not be built.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// Cargo could not be started.
    #[error("cannot run {cargo}: {source}")]
    Spawn {
        /// The cargo program.
        cargo: String,
        /// What the OS said.
        source: std::io::Error,
    },
    /// Cargo ran and failed; its diagnostics are on stderr.
    #[error("cargo build -p {package} failed ({status}); its errors are printed above")]
    Failed {
        /// The package.
        package: String,
        /// Cargo's exit status.
        status: std::process::ExitStatus,
    },
    /// The build succeeded but produced no dynamic library for the package.
    #[error(
        "cargo build -p {package} produced no dynamic library: is `crate-type = [\"cdylib\", ...]` in its [lib] section?"
    )]
    NoLibrary {
        /// The package.
        package: String,
    },
}

/// Builds package `package` with `cargo` (pass `env!("CARGO")`) and returns its library file.
///
/// Runs in the current directory, which under `cargo test` is the package's own: so this
/// works in a workspace and in a crate of its own alike.
pub fn build_library(cargo: &str, package: &str) -> Result<PathBuf, BuildError> {
    let output = Command::new(cargo)
        .args(["build", "--lib", "--message-format=json-render-diagnostics", "-p", package])
        // `cargo xtask test` sets it for the test binaries alone (so libtest prints each test's
        // time); under it cargo would rebuild the tree, as proc-macro2 probes nightly features.
        .env_remove("RUSTC_BOOTSTRAP")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|source| BuildError::Spawn { cargo: cargo.to_owned(), source })?;
    if !output.status.success() {
        return Err(BuildError::Failed { package: package.to_owned(), status: output.status });
    }
    let crate_name = package.replace('-', "_");
    let text = String::from_utf8_lossy(&output.stdout);
    text.lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|m| m["reason"] == "compiler-artifact" && m["target"]["name"] == crate_name.as_str())
        .filter(|m| m["target"]["kind"].as_array().is_some_and(|k| k.iter().any(|k| k == "cdylib")))
        .flat_map(|m| m["filenames"].as_array().cloned().unwrap_or_default())
        .filter_map(|f| f.as_str().map(PathBuf::from))
        .find(|f| f.to_string_lossy().ends_with(std::env::consts::DLL_SUFFIX))
        .ok_or_else(|| BuildError::NoLibrary { package: package.to_owned() })
}
