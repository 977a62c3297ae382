//! `process` isolation: a plugin runs inside a child process, so that a crash, an abort or
//! a hang in a tool costs one call and never the run.
//!
//! The child is the `harness` executable itself in a hidden mode (the CLI passes the command
//! line in [`HostCommand`]); it loads one library and answers frames of `harness-frames` on
//! its stdin and stdout. It starts on the first call and is kept warm; after a crash or a
//! timeout the next call starts a fresh one.

#[cfg(unix)]
mod child;
pub mod confine;
#[cfg(unix)]
mod conn;
#[cfg(unix)]
mod host;
#[cfg(unix)]
pub(crate) mod probe;
#[cfg(unix)]
mod relay;

use std::ffi::OsString;
use std::path::PathBuf;

#[cfg(unix)]
pub use child::serve_plugin_host;
#[cfg(unix)]
pub use host::ProcessHandler;
#[cfg(unix)]
pub(crate) use probe::probe;
#[cfg(unix)]
pub use probe::{FileManifest, read_manifest};

/// Where a plugin's tools run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Isolation {
    /// In the harness process: fastest; a crash in a tool ends the process.
    #[default]
    InProcess,
    /// In a child process: a crash or hang costs one call.
    Process,
}

impl Isolation {
    /// Parses `in-process` or `process`.
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "in-process" => Some(Self::InProcess),
            "process" => Some(Self::Process),
            _ => None,
        }
    }

    /// The name used in configuration.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::InProcess => "in-process",
            Self::Process => "process",
        }
    }
}

/// The command that starts a plugin-host child: the harness executable and its hidden mode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostCommand {
    /// The program.
    pub program: PathBuf,
    /// Its arguments.
    pub args: Vec<OsString>,
}

/// The variables of the harness's environment that every plugin-host child gets (when set),
/// besides those its `[plugins.NAME] env` names; `LC_*` stands for every variable whose name
/// starts with `LC_`. None holds a
/// secret: the search path, the locale and time zone, the home directory (which the child can
/// read from the password database anyway), the temporary directory, and whether a panic
/// prints a backtrace. Everything else, API keys first, stays in the harness.
pub const CHILD_ENV_ALLOWLIST: [&str; 9] =
    ["PATH", "HOME", "LANG", "LANGUAGE", "TZ", "TMPDIR", "RUST_BACKTRACE", "RUST_LIB_BACKTRACE", "LC_*"];

/// Whether a child gets the variable `name`: on the allowlist, or in `extra`.
pub fn child_gets(name: &str, extra: &[String]) -> bool {
    let listed = CHILD_ENV_ALLOWLIST.iter().any(|a| match a.strip_suffix('*') {
        Some(prefix) => name.starts_with(prefix),
        None => *a == name,
    });
    listed || extra.iter().any(|e| e == name)
}

/// The largest frame the child accepts; the harness accepts far less (see [`frame_limit`]).
pub const FRAME_LIMIT: usize = 1 << 30;

/// The largest answer the harness reads from a child whose results are limited to
/// `max_result_bytes`: the child refuses a larger result itself, so a larger frame means a
/// broken child, and it is refused on its length prefix, never read.
pub fn frame_limit(max_result_bytes: usize) -> usize {
    max_result_bytes.max(8 << 20).saturating_add(64 << 10)
}

/// Names a signal for people: `SIGSEGV (11)`.
#[cfg(unix)]
pub(crate) fn signal_name(signal: i32) -> String {
    let name = match signal {
        libc::SIGABRT => "SIGABRT",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGILL => "SIGILL",
        libc::SIGKILL => "SIGKILL",
        libc::SIGTERM => "SIGTERM",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGTRAP => "SIGTRAP",
        _ => "signal",
    };
    format!("{name} ({signal})")
}
