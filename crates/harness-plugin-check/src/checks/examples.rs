//! `examples`: every declared example returns its expected result or its expected error.

use super::{Subject, same_json};
use crate::call::CallOutcome;
use crate::generate::describe_value;
use crate::report::{Failure, Outcome, Status, count};

/// The example check of tool `index`.
pub(super) fn examples(subject: &mut Subject<'_>, index: usize) -> Outcome {
    let tool = &subject.manifest.tools[index];
    let name = tool.name.as_str();
    if tool.examples.is_empty() {
        return Outcome::new(Some(name), Status::Skipped, "declares no examples");
    }
    if let Some(why) = subject.uncallable(index) {
        return Outcome::new(Some(name), Status::Skipped, why);
    }
    let mut o = Outcome::new(Some(name), Status::Passed, "");
    for (i, example) in tool.examples.iter().enumerate() {
        let args = &example.arguments;
        let n = i + 1;
        if example.result.is_none() && example.error_code.is_none() {
            o.fail(Failure::with_input(args, format!("example {n} declares neither a result nor an error code")));
            continue;
        }
        if let Err(why) = subject.validate(name, args) {
            // The harness refuses such a call with invalid_arguments, which may be what it expects.
            if example.error_code.as_deref() != Some("invalid_arguments") {
                o.fail(Failure::with_input(
                    args,
                    format!("example {n}'s arguments break the tool's own schema: {why}"),
                ));
            }
            continue;
        }
        let got = subject.call(name, args);
        match (&example.result, &example.error_code, &got) {
            (Some(want), _, CallOutcome::Result(v)) if same_json(v, want) => {
                if let Some(problem) = subject.output_problem(name, v) {
                    o.fail(Failure::with_input(args, format!("example {n}: {problem}")));
                }
            }
            (Some(want), _, _) => o.fail(Failure::with_input(
                args,
                format!("example {n} {}, expected the result {}", got.describe(), describe_value(want, 200)),
            )),
            (None, Some(code), _) if got.code() == Some(code.as_str()) => {}
            (None, Some(code), _) => {
                o.fail(Failure::with_input(args, format!("example {n} {}, expected the error {code}", got.describe())));
            }
            (None, None, _) => {}
        }
        if matches!(got, CallOutcome::TimedOut(_)) {
            break;
        }
    }
    let all = count(tool.examples.len(), "example");
    o.detail = match o.failure_count() {
        0 => format!("{all} held"),
        failed => format!("{failed} of {all} failed"),
    };
    o
}
