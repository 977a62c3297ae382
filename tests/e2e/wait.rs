//! Waiting for an event (lines in a file, a tool running, a process gone) up to a deadline,
//! never for a fixed time: a test that sleeps "long enough" is slow where the machine is fast
//! and flaky where it is loaded. Each wait looks every few milliseconds and, past its
//! deadline, fails naming what it waited for.

use std::path::Path;
use std::time::{Duration, Instant};

/// How often a wait looks: short beside any event the tests wait for, long enough to leave
/// the shared cores to the processes under test.
const LOOK_EVERY: Duration = Duration::from_millis(10);

/// Whether `done` held within `limit`, looked at every few milliseconds: for a caller that
/// tidies up before it fails.
pub(crate) fn eventually(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    loop {
        if done() {
            return true;
        }
        if start.elapsed() > limit {
            return false;
        }
        std::thread::sleep(LOOK_EVERY);
    }
}

/// Waits until `done` holds; past `limit`, fails naming `what` it waited for.
pub(crate) fn wait_for(what: &str, limit: Duration, done: impl FnMut() -> bool) {
    assert!(eventually(limit, done), "waited {limit:?} for {what}, in vain");
}

/// How many complete lines (ended by a newline) `path` holds now; 0 when it does not exist.
pub(crate) fn lines_in(path: &Path) -> usize {
    std::fs::read(path).map_or(0, |bytes| bytes.iter().filter(|&&b| b == b'\n').count())
}

/// Waits until `path` (a trace, a results file) holds at least `count` complete lines.
pub(crate) fn wait_for_lines(path: &Path, count: usize, limit: Duration) {
    let what = format!("{count} lines in {}", path.display());
    wait_for(&what, limit, || lines_in(path) >= count);
}

/// The plugin-host children of `parent`, by their process ids.
pub(crate) fn plugin_hosts_of(parent: u32) -> Vec<u32> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else { return found };
    for entry in entries.filter_map(Result::ok) {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        // The parent's id is the second field after the command name in parentheses.
        let ppid = stat.rsplit_once(") ").and_then(|(_, rest)| rest.split(' ').nth(1)?.parse::<u32>().ok());
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        if ppid == Some(parent) && String::from_utf8_lossy(&cmdline).contains("__plugin-host") {
            found.push(pid);
        }
    }
    found
}

/// Whether any thread of `pid` sleeps in `nanosleep`: a tool that sleeps (`fault_sleep`) is
/// running in it.
pub(crate) fn sleeping_in_a_tool(pid: u32) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return false };
    tasks
        .filter_map(Result::ok)
        .any(|t| std::fs::read_to_string(t.path().join("wchan")).is_ok_and(|w| w.contains("nanosleep")))
}

/// Whether a sleeping tool runs in the harness `pid` or in one of its plugin hosts.
pub(crate) fn running_a_sleeping_tool(pid: u32) -> bool {
    sleeping_in_a_tool(pid) || plugin_hosts_of(pid).into_iter().any(sleeping_in_a_tool)
}

/// Whether `pid` has exited (gone, or a zombie nobody reaped yet).
pub(crate) fn exited(pid: u32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    stat.rsplit_once(") ").is_none_or(|(_, rest)| rest.starts_with('Z'))
}
