//! The official MCP conformance suite (`@modelcontextprotocol/conformance`) against the real
//! binary, in both roles: `harness mcp serve --http` serving the suite's tool fixtures
//! (tests/fixtures/conformance) behind a proxy that adds the token, and `harness run` as the
//! client of each client scenario's server (tests/mcp/conformance_client.py). Every scenario
//! must pass but those tests/mcp/conformance-expected-failures.yml lists, which docs/mcp.md
//! says do not apply; a scenario counts only when it ran at least one check.
//!
//! `cargo xtask env conformance` installs the suite and a Node 22 into the cache directory and
//! prints `HARNESS_MCP_CONFORMANCE` and `HARNESS_MCP_NODE22`, which this test reads.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::Value;

use super::fixture;
use super::http_serve::serve_with;
use crate::support::{Scratch, ran};

/// The server scenarios that apply, and the client scenarios that apply.
const SERVER: &[&str] = &[
    "server-initialize",
    "ping",
    "tools-list",
    "tools-call-simple-text",
    "tools-call-error",
    "json-schema-2020-12",
    "server-sse-multiple-streams",
    "dns-rebinding-protection",
];
const CLIENT: &[&str] = &[
    "initialize",
    "tools_call",
    "sse-retry",
    "auth/client-credentials-basic",
    "auth/client-credentials-jwt",
    "auth/resource-mismatch",
];

/// Node 22 and the suite's entry script.
fn suite() -> (PathBuf, PathBuf) {
    let var = |name: &str| {
        std::env::var_os(name).map(PathBuf::from).unwrap_or_else(|| {
            panic!(
                "this test needs the MCP conformance suite and Node 22: run `eval \"$(cargo xtask env conformance)\"` \
                 (it installs both into ~/.cache/harness) and test again; {name} is not set"
            )
        })
    };
    (var("HARNESS_MCP_NODE22"), var("HARNESS_MCP_CONFORMANCE"))
}

/// A child killed when dropped.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The scenarios of `dir` (the suite's `--output-dir`) that ran at least one check, none
/// failed; those named `auth/...` are in the directory `auth`.
fn passed(dir: &Path) -> Vec<String> {
    let mut names = Vec::new();
    for entry in std::fs::read_dir(dir).expect("the suite wrote its results").flatten() {
        if entry.file_name() == "auth" {
            names.extend(passed(&entry.path()).into_iter().map(|n| format!("auth/{n}")));
        }
        let Ok(text) = std::fs::read_to_string(entry.path().join("checks.json")) else { continue };
        let checks: Vec<Value> = serde_json::from_str(&text).expect("checks.json is JSON");
        let failed = checks.iter().any(|c| c["status"] == "FAILURE");
        if !failed && checks.iter().any(|c| c["status"] == "SUCCESS") {
            names.push(entry.file_name().to_string_lossy().into_owned());
        }
    }
    names
}

/// Whether `scenario` is among the result directories (`server-ping-2026-...`, `sse-retry-...`,
/// `auth/resource-mismatch-...`).
fn has(results: &[String], prefix: &str, scenario: &str) -> bool {
    let name = format!("{prefix}{scenario}-");
    results.iter().any(|r| r.starts_with(&name) && r[name.len()..].starts_with(|c: char| c.is_ascii_digit()))
}

#[test]
fn the_conformance_suites_server_scenarios_pass_but_those_that_do_not_apply() {
    let (node, script) = suite();
    let s = Scratch::new();
    let plugins = s.path("plugins");
    std::fs::create_dir(&plugins).unwrap();
    let library = crate::support::fixture("conformance");
    std::fs::copy(&library, plugins.join(library.file_name().unwrap())).unwrap();
    let served = serve_with(&s, &["--plugins-dir", "plugins", "--enable", "conformance"]);
    let upstream = served.1.rsplit(':').next().unwrap().to_owned();
    let mut proxy = Command::new(&node)
        .env("MCP_TOKEN", "e2e-token")
        .arg(fixture("conformance_proxy.mjs"))
        .arg(&upstream)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(proxy.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let _proxy = Killed(proxy);
    let port = line.trim().strip_prefix("PORT ").unwrap_or_else(|| panic!("no port: {line:?}")).to_owned();
    let url = format!("http://localhost:{port}/mcp");
    // The active suite, and the one pending scenario that applies (its checks all pass).
    for only in [&[][..], &["--scenario", "json-schema-2020-12"]] {
        let r = ran(Command::new(&node)
            .arg(&script)
            .args(["server", "--url", &url])
            .args(only)
            .arg("--expected-failures")
            .arg(fixture("conformance-expected-failures.yml"))
            .arg("-o")
            .arg(s.path("results")));
        assert_eq!(r.code, 0, "the suite failed:\n{}\n{}", r.stdout, r.stderr);
    }
    let results = passed(&s.path("results"));
    for scenario in SERVER {
        assert!(has(&results, "server-", scenario), "{scenario} did not pass with a check: {results:?}");
    }
}

#[test]
fn the_conformance_suites_client_scenarios_pass() {
    let (node, script) = suite();
    let s = Scratch::new();
    let client = format!("python3 {}", fixture("conformance_client.py").display());
    for scenario in CLIENT {
        // The client runs with the scratch directory's trust store and cache, as `harness` does.
        let r = ran(Command::new(&node)
            .current_dir(s.dir.path())
            .env("HARNESS_BIN", env!("CARGO_BIN_EXE_harness"))
            .env_remove("HARNESS_PLUGIN_PATH")
            .env("XDG_CONFIG_HOME", s.path("xdg-config"))
            .env("XDG_CACHE_HOME", s.path("xdg-cache"))
            .env("HARNESS_PLUGIN_CACHE", s.path("plugin-cache"))
            .arg(&script)
            .args(["client", "--command", &client, "--scenario", scenario, "--expected-failures"])
            .arg(fixture("conformance-expected-failures.yml"))
            .arg("-o")
            .arg(s.path("results")));
        assert_eq!(r.code, 0, "{scenario} failed:\n{}\n{}", r.stdout, r.stderr);
    }
    let results = passed(&s.path("results"));
    for scenario in CLIENT {
        assert!(has(&results, "", scenario), "{scenario} did not pass with a check: {results:?}");
    }
}
