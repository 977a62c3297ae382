//! Each test's time, and the slowest twenty: `cargo xtask test` runs the test binaries with
//! libtest's `--report-time` and reads the times off its output as it passes through.
//!
//! `--report-time` is unstable; libtest lets it through when `RUSTC_BOOTSTRAP` is set in the
//! test binary's environment. It is set there alone, through a cargo runner (`env
//! RUSTC_BOOTSTRAP=1 <binary>`), never for cargo or rustc: in their environment it would turn
//! on the nightly probes of proc-macro2, anyhow and thiserror and rebuild the tree. For the
//! same reason the tests that run cargo themselves remove it from that cargo's environment.
//!
//! Why not cargo-nextest: it runs each test in a process of its own, and the end-to-end tests
//! share work per process (the plugins built and copied once, the Landlock shim compiled once),
//! which would then run once a test, racing each other over the same files.
//!
//! Doc tests run in rustdoc's own process, which has no runner: they run apart, untimed.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, ExitStatus};
use std::time::Duration;

/// How many of the slowest tests are printed at the end.
const SLOWEST: usize = 20;

/// One test's time: the binary that holds it, its name and how long it took.
#[derive(Debug, PartialEq)]
pub(crate) struct Timed {
    /// The test binary's crate name (`harness_core`, `e2e`).
    pub(crate) binary: String,
    /// The test's path inside it.
    pub(crate) name: String,
    /// Its time, as libtest measured it.
    pub(crate) time: Duration,
}

/// The arguments past `--` that make libtest print each test's time.
pub(crate) const REPORT_TIME: [&str; 3] = ["-Z", "unstable-options", "--report-time"];

/// The runner variable that lets `--report-time` through in the test binaries alone, for the
/// host `rustc -vV` names. `None` (so no times) when the user has a runner of their own.
pub(crate) fn runner() -> Result<Option<(String, &'static str)>, String> {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let out = Command::new(&rustc).arg("-vV").output().map_err(|e| format!("cannot run {rustc} -vV: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let Some(host) = text.lines().find_map(|l| l.strip_prefix("host: ")) else {
        return Err(format!("{rustc} -vV names no host:\n{text}"));
    };
    let key = format!("CARGO_TARGET_{}_RUNNER", host.trim().to_uppercase().replace(['-', '.'], "_"));
    if std::env::var_os(&key).is_some() {
        eprintln!("== {key} is set: tests run under it, untimed");
        return Ok(None);
    }
    Ok(Some((key, "env RUSTC_BOOTSTRAP=1")))
}

/// Runs `command` with its output and errors passed through in order, and returns how it
/// ended with the time of every test it printed.
pub(crate) fn run_timed(mut command: Command) -> Result<(ExitStatus, Vec<Timed>), String> {
    let (reader, writer) = std::io::pipe().map_err(|e| format!("cannot make a pipe: {e}"))?;
    let copy = writer.try_clone().map_err(|e| format!("cannot copy a pipe: {e}"))?;
    let mut child = command.stdout(copy).stderr(writer).spawn().map_err(|e| format!("cannot run cargo test: {e}"))?;
    // The command holds the pipe's write ends: the read below ends only once every writer has
    // gone, so this process's own go first.
    drop(command);
    let mut times = Vec::new();
    let mut binary = String::new();
    let mut out = std::io::stderr().lock();
    for line in BufReader::new(reader).lines() {
        let line = line.map_err(|e| format!("cannot read cargo test's output: {e}"))?;
        let _ = writeln!(out, "{line}");
        if let Some(name) = running_binary(&line) {
            binary = name;
        } else if let Some((name, time)) = test_time(&line) {
            times.push(Timed { binary: binary.clone(), name, time });
        }
    }
    let status = child.wait().map_err(|e| format!("cannot wait for cargo test: {e}"))?;
    Ok((status, times))
}

/// The crate name of the binary cargo starts on a line like
/// `Running unittests src/lib.rs (target/debug/deps/harness_core-1a2b3c)`.
fn running_binary(line: &str) -> Option<String> {
    let rest = line.trim_start().strip_prefix("Running ")?;
    let path = rest.rsplit_once('(')?.1.strip_suffix(')')?;
    let file = path.rsplit(['/', '\\']).next()?;
    let name = file.rsplit_once('-').map_or(file, |(name, _)| name);
    Some(name.to_owned())
}

/// The name and time of a libtest result line: `test a::b ... ok <1.234s>`.
fn test_time(line: &str) -> Option<(String, Duration)> {
    let (name, result) = line.strip_prefix("test ")?.split_once(" ... ")?;
    let seconds = result.trim_end().strip_suffix("s>")?.rsplit_once('<')?.1;
    let time = Duration::try_from_secs_f64(seconds.parse().ok()?).ok()?;
    Some((name.to_owned(), time))
}

/// The slowest tests, slowest first, as lines to print.
pub(crate) fn slowest(mut times: Vec<Timed>) -> Vec<String> {
    let total: Duration = times.iter().map(|t| t.time).sum();
    let count = times.len();
    times.sort_by_key(|t| std::cmp::Reverse(t.time));
    let mut lines = vec![format!(
        "== the slowest {} of {count} tests (their times add up to {:.1} s; several run at once):",
        SLOWEST.min(count),
        total.as_secs_f64()
    )];
    lines.extend(
        times.iter().take(SLOWEST).map(|t| format!("{:>9.3} s  {} {}", t.time.as_secs_f64(), t.binary, t.name)),
    );
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_result_line_gives_the_test_and_its_time() {
        assert_eq!(
            test_time("test mcp::serve ... ok <1.502s>"),
            Some(("mcp::serve".into(), Duration::from_millis(1502)))
        );
        assert_eq!(test_time("test a::b ... FAILED <0.010s>").map(|t| t.1), Some(Duration::from_millis(10)));
        // Without a time (a test ignored, or a run without --report-time): nothing.
        assert_eq!(test_time("test a::b ... ignored"), None);
        assert_eq!(test_time("test result: ok. 3 passed; 0 failed"), None);
    }

    #[test]
    fn the_binary_is_read_off_cargos_running_line() {
        let line = "     Running unittests src/lib.rs (target/debug/deps/harness_core-1a2b3c4d)";
        assert_eq!(running_binary(line).as_deref(), Some("harness_core"));
        let line = "     Running ../tests/e2e/main.rs (target/debug/deps/e2e-99aa)";
        assert_eq!(running_binary(line).as_deref(), Some("e2e"));
        assert_eq!(running_binary("test a ... ok <0.001s>"), None);
    }

    #[test]
    fn the_slowest_come_first_and_at_most_twenty() {
        let times = (0..30u64)
            .map(|i| Timed { binary: "e2e".into(), name: format!("t{i}"), time: Duration::from_millis(i) })
            .collect();
        let lines = slowest(times);
        assert_eq!(lines.len(), 1 + SLOWEST);
        assert!(lines[0].starts_with("== the slowest 20 of 30 tests"), "{}", lines[0]);
        assert!(lines[1].ends_with("e2e t29") && lines[20].ends_with("e2e t10"), "{lines:?}");
    }
}
