//! The checks on generated arguments: `accepts-valid`, `rejects-invalid`, `deterministic`.

use harness_abi::manifest::Effects;

use super::{Subject, same_json};
use crate::call::CallOutcome;
use crate::generate::{DrawError, describe_value, violations};
use crate::report::{Failure, Outcome, Status, count};

/// Why no case could be drawn for a tool: a failure when the schema is unsatisfiable, a
/// skip when the generator is at fault.
fn no_cases(subject: &mut Subject<'_>, index: usize) -> Option<Outcome> {
    let manifest = subject.manifest;
    let tool = &manifest.tools[index];
    let cases = subject.cases(index);
    if !cases.valid.is_empty() {
        return None;
    }
    let name = Some(tool.name.as_str());
    Some(match (&cases.problem, &cases.last_refused) {
        (Some(DrawError::Unsatisfiable(why)), _) => {
            let mut o = Outcome::new(name, Status::Passed, "no arguments can be generated");
            o.fail(Failure::with_input(
                &tool.parameters,
                format!("no arguments satisfy the parameters schema, so no call can ever pass validation: {why}"),
            ));
            o
        }
        (Some(e @ DrawError::Unsupported(_)), _) => Outcome::new(name, Status::Skipped, e.to_string()),
        (None, Some((last, why))) => Outcome::new(
            name,
            Status::Skipped,
            format!(
                "the argument generator drew nothing the schema accepts ({} draws); the last, {}, was refused: {why}",
                cases.redrawn,
                describe_value(last, 160)
            ),
        ),
        (None, None) => Outcome::new(name, Status::Skipped, "no cases were asked for (--cases 0)"),
    })
}

/// `accepts-valid` for tool `index`.
pub(super) fn accepts_valid(subject: &mut Subject<'_>, index: usize) -> Outcome {
    let manifest = subject.manifest;
    let tool = &manifest.tools[index];
    let name = tool.name.as_str();
    if let Some(why) = subject.unvalidated(index) {
        return Outcome::new(Some(name), Status::Skipped, why);
    }
    if let Some(o) = no_cases(subject, index) {
        return o;
    }
    let (valid, redrawn, repeated) = {
        let cases = subject.cases(index);
        (cases.valid.clone(), cases.redrawn, cases.repeated)
    };
    let mut redraws = String::new();
    if redrawn > 0 {
        redraws.push_str(&format!("; {redrawn} draws refused by validation and drawn again"));
    }
    if valid.len() < subject.options.cases && repeated > 0 {
        redraws.push_str(&format!("; only {} drawn, the schema allows no more", count(valid.len(), "distinct case")));
    }
    if let Some(why) = subject.uncallable(index) {
        return Outcome::new(
            Some(name),
            Status::Skipped,
            format!("{} accepted by validation{redraws}; {why}", count(valid.len(), "case")),
        );
    }
    let mut o = Outcome::new(Some(name), Status::Passed, "");
    let (mut results, mut errors, mut failed) = (0, 0, 0);
    let mut called = Vec::new();
    let mut stopped = String::new();
    for args in &valid {
        let got = subject.call(name, args);
        match &got {
            CallOutcome::Result(v) => {
                results += 1;
                if let Some(problem) = subject.output_problem(name, v) {
                    o.fail(Failure::with_input(args, format!("{problem} (the result: {})", describe_value(v, 200))));
                }
            }
            CallOutcome::ToolError { code, message } if code == "invalid_arguments" => {
                errors += 1;
                o.fail(Failure::with_input(
                    args,
                    format!("the schema accepts these arguments but the tool refused them as invalid_arguments ({message}): the schema is looser than the tool's own type"),
                ));
            }
            CallOutcome::ToolError { code, message } if code == "unknown_tool" => {
                errors += 1;
                o.fail(Failure::with_input(args, format!("the plugin does not know the tool it declares: {message}")));
            }
            CallOutcome::ToolError { .. } => errors += 1,
            misbehaved => {
                failed += 1;
                o.fail(Failure::with_input(args, misbehaved.describe()));
            }
        }
        let hung = matches!(got, CallOutcome::TimedOut(_));
        called.push((args.clone(), got));
        if hung {
            stopped =
                format!("; stopped after the first hang, {} not called", count(valid.len() - called.len(), "case"));
            break;
        }
    }
    let calls = called.len();
    subject.called.insert(index, called);
    o.detail = format!(
        "{}: {}, {}{}{redraws}{stopped}",
        count(calls, "case"),
        count(results, "result"),
        count(errors, "tool error"),
        if failed > 0 { format!(", {failed} failed") } else { String::new() }
    );
    o
}

/// `rejects-invalid` for tool `index`.
pub(super) fn rejects_invalid(subject: &mut Subject<'_>, index: usize) -> Outcome {
    let manifest = subject.manifest;
    let tool = &manifest.tools[index];
    let name = tool.name.as_str();
    if let Some(why) = subject.unvalidated(index) {
        return Outcome::new(Some(name), Status::Skipped, why);
    }
    let Some(base) = subject.cases(index).valid.first().cloned() else {
        return Outcome::new(
            Some(name),
            Status::Skipped,
            "no valid arguments to derive invalid ones from (see accepts-valid)",
        );
    };
    let broken = violations(&tool.parameters, &base);
    let mut o =
        Outcome::new(Some(name), Status::Passed, format!("{} refused", count(broken.len(), "invalid argument object")));
    for v in &broken {
        if subject.validate(name, &v.arguments).is_ok() {
            o.fail(Failure::with_input(&v.arguments, format!("validation accepted it, although {}", v.breaks)));
        }
    }
    o
}

/// `deterministic` for tool `index`: its `accepts-valid` cases called once more.
pub(super) fn deterministic(subject: &mut Subject<'_>, index: usize) -> Outcome {
    let manifest = subject.manifest;
    let tool = &manifest.tools[index];
    let name = tool.name.as_str();
    if tool.effects != Effects::Pure {
        return Outcome::new(
            Some(name),
            Status::Skipped,
            format!("effects {}: only pure tools must give the same result twice", tool.effects.as_str()),
        );
    }
    if let Some(why) = subject.uncallable(index) {
        return Outcome::new(Some(name), Status::Skipped, why);
    }
    let first: Vec<(serde_json::Value, CallOutcome)> = subject
        .called
        .get(&index)
        .map(|c| {
            c.iter()
                .filter(|(_, got)| !matches!(got, CallOutcome::TimedOut(_) | CallOutcome::Crashed(_)))
                .cloned()
                .collect()
        })
        .unwrap_or_default();
    if first.is_empty() {
        return Outcome::new(Some(name), Status::Skipped, "no case returned in accepts-valid, so none to repeat");
    }
    let mut o = Outcome::new(
        Some(name),
        Status::Passed,
        format!("{} called twice, the same outcome each time", count(first.len(), "case")),
    );
    for (args, before) in &first {
        let again = subject.call(name, args);
        let same = match (before, &again) {
            (CallOutcome::Result(a), CallOutcome::Result(b)) => same_json(a, b),
            (a, b) => a.code().is_some() && a == b,
        };
        if !same {
            o.fail(Failure::with_input(args, format!("first it {}, then it {}", before.describe(), again.describe())));
        }
        if matches!(again, CallOutcome::TimedOut(_)) {
            break;
        }
    }
    o
}
