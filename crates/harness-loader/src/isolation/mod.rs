//! `process` isolation: a plugin runs inside a child process, so that a crash, an abort or
//! a hang in a tool costs one call and never the run.
//!
//! The child is the `harness` executable itself in a hidden mode (the CLI passes the command
//! line in [`HostCommand`]); it loads one library and answers frames of `harness-frames` on
//! its stdin and stdout. It starts on the first call and is kept warm; after a crash or a
//! timeout the next call starts a fresh one.
//!
//! On Unix the child starts in a session of its own and confines itself with Landlock and
//! seccomp; on Windows it starts in a Job Object, which limits its process tree but not what
//! it reads, writes or reaches. What a child may do, and the kernel's enforcement of it, is
//! `harness-sandbox`'s; this module starts the child and talks to it.

mod child;
mod conn;
mod host;
pub(crate) mod probe;
#[cfg(windows)]
mod pump;
mod relay;
#[cfg(windows)]
mod windows;

use std::ffi::OsString;
use std::path::PathBuf;

pub use child::serve_plugin_host;
pub use host::ProcessHandler;
pub(crate) use probe::probe;
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
#[cfg(not(windows))]
pub const CHILD_ENV_ALLOWLIST: &[&str] =
    &["PATH", "HOME", "LANG", "LANGUAGE", "TZ", "TMPDIR", "RUST_BACKTRACE", "RUST_LIB_BACKTRACE", "LC_*"];

/// Windows: the same kinds of variable under their Windows names, and those the system itself
/// needs in every process (without `SYSTEMROOT`, sockets cannot be opened). Names are matched
/// without regard to case, as Windows does.
#[cfg(windows)]
pub const CHILD_ENV_ALLOWLIST: &[&str] = &[
    "PATH",
    "PATHEXT",
    "SYSTEMROOT",
    "WINDIR",
    "SYSTEMDRIVE",
    "USERPROFILE",
    "TEMP",
    "TMP",
    "LANG",
    "TZ",
    "RUST_BACKTRACE",
    "RUST_LIB_BACKTRACE",
];

/// Whether a child gets the variable `name`: on the allowlist, or in `extra`.
pub fn child_gets(name: &str, extra: &[String]) -> bool {
    let listed = CHILD_ENV_ALLOWLIST.iter().any(|a| match a.strip_suffix('*') {
        Some(prefix) => name.starts_with(prefix),
        None => same_name(a, name),
    });
    listed || extra.iter().any(|e| same_name(e, name))
}

/// Whether two variable names are one: exactly, or on Windows in any case.
fn same_name(a: &str, b: &str) -> bool {
    if cfg!(windows) { a.eq_ignore_ascii_case(b) } else { a == b }
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

/// Names how a Windows process ended from its exit code: an NTSTATUS exception code
/// (`0xC0000005`, access violation) when it died of one, else the plain status.
#[cfg_attr(not(windows), allow(dead_code))]
pub(crate) fn exit_code_name(code: i32) -> String {
    // Exception codes are NTSTATUS values of severity "error" (the top two bits set).
    let status = code as u32;
    if status & 0xC000_0000 != 0xC000_0000 && status != 0x8000_0003 {
        return format!("it exited with status {code}");
    }
    let name = match status {
        0xC000_0005 => "access violation",
        0xC000_001D => "illegal instruction",
        0xC000_0094 => "integer division by zero",
        0xC000_00FD => "stack overflow",
        0xC000_0409 => "fast fail: the process aborted itself",
        0xC000_0374 => "heap corruption",
        0xC000_0017 => "out of memory",
        0x8000_0003 => "breakpoint",
        _ => "exception",
    };
    format!("it died of exception 0x{status:08X} ({name})")
}

#[cfg(test)]
mod tests {
    use super::exit_code_name;

    #[test]
    fn a_windows_exit_code_names_its_exception_or_its_status() {
        assert_eq!(exit_code_name(0xC000_0005_u32 as i32), "it died of exception 0xC0000005 (access violation)");
        assert_eq!(
            exit_code_name(0xC000_0409_u32 as i32),
            "it died of exception 0xC0000409 (fast fail: the process aborted itself)"
        );
        assert_eq!(exit_code_name(0xC123_4567_u32 as i32), "it died of exception 0xC1234567 (exception)");
        assert_eq!(exit_code_name(3), "it exited with status 3");
    }
}
