//! What a check run is given: how many cases, which seed, where calls run, the configuration.

use std::collections::BTreeMap;
use std::time::Duration;

use harness_loader::isolation::HostCommand;
use serde_json::Value;

/// The seed used when none is given: the same cases on every run and every machine.
pub const DEFAULT_SEED: u64 = 1;
/// Argument objects generated per tool when no number is given.
pub const DEFAULT_CASES: usize = 64;
/// How long one call may take when neither the options nor the plugin's section say.
pub const DEFAULT_TOOL_TIMEOUT: Duration = Duration::from_secs(10);
/// How long `init` may take before `loads` fails.
pub const INIT_TIMEOUT: Duration = Duration::from_secs(30);

/// Where the checked plugin's code runs.
#[derive(Debug, Clone, Default)]
pub enum Executor {
    /// In this process, each call on a thread of its own that is abandoned at its deadline.
    ///
    /// What a plugin's own `cargo test` uses: there is no `harness` binary to host a child. A
    /// hang becomes a failed check (the abandoned thread runs on until the process ends); a
    /// crash (an abort, a segfault, `process::exit`) ends the test process, which fails the
    /// test all the same but without a report. Tools that end the process on purpose belong
    /// in [`CheckOptions::never_call`].
    #[default]
    InProcess,
    /// In a plugin-host child process started with this command (`harness __plugin-host`):
    /// a crash fails one call and the next call starts a fresh child; a hang kills the child.
    Process(HostCommand),
}

/// Everything a check run may be told.
#[derive(Debug, Clone)]
pub struct CheckOptions {
    /// Argument objects generated per tool for `accepts-valid` and `deterministic`.
    pub cases: usize,
    /// The seed of the generator; the same seed gives the same cases.
    pub seed: u64,
    /// Every call's time limit, unless the plugin's section sets `timeout` or `timeouts`.
    pub tool_timeout: Duration,
    /// Configuration sections by plugin name, as `[plugins.<name>]` of `harness.toml` gives
    /// them: the checked plugin's own section goes to its `init` (`{}` when there is none),
    /// less the harness's keys, of which `timeout` and `timeouts` set its tools' limits.
    pub sections: BTreeMap<String, Value>,
    /// Where calls run.
    pub executor: Executor,
    /// Tools never called (their call checks are skipped, saying so): for tools that end the
    /// process on purpose, which only [`Executor::Process`] survives.
    pub never_call: Vec<String>,
    /// The largest result a call may return, in bytes; a larger one counts as the harness
    /// counts it, a `result_too_large` tool error.
    pub max_result_bytes: usize,
}

impl Default for CheckOptions {
    fn default() -> Self {
        Self {
            cases: DEFAULT_CASES,
            seed: DEFAULT_SEED,
            tool_timeout: DEFAULT_TOOL_TIMEOUT,
            sections: BTreeMap::new(),
            executor: Executor::InProcess,
            never_call: Vec::new(),
            max_result_bytes: harness_loader::DiscoveryOptions::default().max_result_bytes,
        }
    }
}

impl CheckOptions {
    /// Sets the configuration section of plugin `name` (builder style).
    pub fn with_section(mut self, name: &str, section: Value) -> Self {
        self.sections.insert(name.to_owned(), section);
        self
    }
}
