//! The checks of `harness plugins check` on a plugin that misbehaves on purpose: they must
//! find exactly its misbehaviour, naming the tool and the input, and pass the rest.
//!
//! Calls run in this test's own process, which `fault_abort`, `fault_segfault` and
//! `fault_exit` would end: they are never called here (`harness plugins check`, whose calls
//! run in a child process, reports them as crashes; see tests/e2e/check.rs). Nor is
//! `fault_big`, whose results of up to 256 MiB take seconds each in a debug build.

use std::time::Duration;

use harness_plugin_check::{CheckName, CheckOptions, Status, build_library, check};

#[test]
fn the_checks_find_the_panic_the_hang_and_the_bad_result_and_nothing_else() {
    let library = build_library(env!("CARGO"), env!("CARGO_PKG_NAME")).expect("fault builds");
    let options = CheckOptions {
        cases: 8,
        tool_timeout: Duration::from_millis(500),
        never_call: ["fault_abort", "fault_segfault", "fault_exit", "fault_big"].map(String::from).to_vec(),
        ..CheckOptions::default()
    };
    let report = check(&library, &options).expect("the library file is readable");
    let table = report.table();
    assert_eq!(report.failed_checks(), [CheckName::AcceptsValid], "{table}");
    let accepts = report.check(CheckName::AcceptsValid).expect("accepts-valid ran");
    let failed: Vec<&str> =
        accepts.outcomes.iter().filter(|o| o.status == Status::Failed).filter_map(|o| o.tool.as_deref()).collect();
    assert_eq!(failed, ["fault_panic", "fault_sleep", "fault_misreport"], "{table}");
    let lines = report.failure_lines();
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("accepts-valid: tool \"fault_panic\" with {\"message\":")
                && l.contains("tool_panicked")),
        "{table}"
    );
    assert!(
        lines.iter().any(|l| l.starts_with("accepts-valid: tool \"fault_sleep\" with {\"ms\":")
            && l.contains("did not answer within 500 ms")),
        "{table}"
    );
    assert!(
        lines.iter().any(|l| l.starts_with("accepts-valid: tool \"fault_misreport\" with {\"value\":")
            && l.contains("invalid_result")),
        "{table}"
    );
    // The example that expects a panic holds: a caught panic is the tool error it declares.
    assert_eq!(report.check(CheckName::Examples).map(|c| c.status), Some(Status::Passed), "{table}");
}
