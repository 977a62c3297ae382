//! The test suite's prerequisites. Each module provides one and returns the environment
//! variables that point the tests at it. To add one: a module with `ensure`, and a line in
//! [`ALL`].

mod chromium;
mod conformance;
mod llama;
mod mcp;
mod phoenix;
mod slurm;
mod venv;

use crate::Context;

/// Environment variables for the tests: name and value.
pub(crate) type Vars = Vec<(String, String)>;

/// One prerequisite: its name, what needs it, and how to provide it.
pub(crate) struct Prereq {
    /// The name `cargo xtask setup NAME` takes.
    pub(crate) name: &'static str,
    /// What it is and which tests use it.
    pub(crate) about: &'static str,
    /// Installs or builds it when missing; returns the variables the tests read.
    pub(crate) ensure: fn(&Context) -> Result<Vars, String>,
}

/// Every prerequisite, in the order they are provided (cheap ones first).
const ALL: &[Prereq] = &[
    Prereq {
        name: "chromium",
        about: "headless Chromium (Debian's package), for the HTML trace report test",
        ensure: chromium::ensure,
    },
    Prereq {
        name: "mcp",
        about: "a Python venv with the official MCP SDK, for the MCP interop tests",
        ensure: mcp::ensure,
    },
    Prereq {
        name: "conformance",
        about: "the official MCP conformance suite (npm) and a Node 22 to run it, for the MCP conformance test",
        ensure: conformance::ensure,
    },
    Prereq {
        name: "phoenix",
        about: "Arize Phoenix in a Python venv (PyPI arize-phoenix), for the OpenTelemetry export tests",
        ensure: phoenix::ensure,
    },
    Prereq {
        name: "slurm",
        about: "Slurm (slurm-wlm) and munge from Debian, for the job array test of batch --shard auto",
        ensure: slurm::ensure,
    },
    Prereq {
        name: "llama",
        about: "a llama.cpp llama-server built from source and the SmolLM2-135M-Instruct model, for the real-server tests",
        ensure: llama::ensure,
    },
];

/// Provides the named prerequisites (all when `names` is empty) and gathers their variables.
pub(crate) fn ensure(context: &Context, names: &[String]) -> Result<Vars, String> {
    for name in names {
        if !ALL.iter().any(|p| p.name == name) {
            let known: Vec<&str> = ALL.iter().map(|p| p.name).collect();
            return Err(format!("no prerequisite named {name:?}; known: {}", known.join(", ")));
        }
    }
    let mut vars = Vars::new();
    for prereq in ALL.iter().filter(|p| names.is_empty() || names.iter().any(|n| n == p.name)) {
        eprintln!("== prerequisite {}: {}", prereq.name, prereq.about);
        let got = (prereq.ensure)(context).map_err(|e| format!("prerequisite {}: {e}", prereq.name))?;
        for (key, value) in &got {
            eprintln!("   {key}={value}");
        }
        vars.extend(got);
    }
    Ok(vars)
}

/// Prints each prerequisite and its purpose.
pub(crate) fn list() {
    for prereq in ALL {
        println!("{:10} {}", prereq.name, prereq.about);
    }
}
