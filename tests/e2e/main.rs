//! End-to-end tests: the real `harness` binary, real plugin library files, real loader.
//!
//! The workspace's plugins are built once per test run (`cargo build -p ...`, which is quick
//! when they are up to date) and found where the binary looks by default: its own directory.
//! Fixture plugins are moved to a directory of their own so that they never load by default.

// Test code: a failed unwrap is a failed test, with its location.
#![allow(clippy::unwrap_used)]
// The suite drives the binary with Unix tools (ptys, signals, modes, FIFOs); on Windows the
// end-to-end checks are `cargo xtask windows`, through `harness.exe` under Wine.
#![cfg(unix)]

mod approval;
mod attacks;
mod batch;
mod cache;
mod check;
mod cli;
mod confinement;
mod context;
mod discovery;
mod eval;
mod install;
mod isolation;
mod llama;
mod lock;
mod mcp;
mod otel;
mod outage;
mod placement;
mod prompt;
mod providers;
mod replay;
mod reply;
mod run;
mod settings;
mod signing;
mod slurm;
mod support;
mod terminal;
mod trace;
mod trust;
mod verbose;
mod wait;
