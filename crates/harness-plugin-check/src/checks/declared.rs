//! `manifest` and `schemas`: what the plugin declares, checked without calling it.

use std::collections::HashMap;
use std::time::Instant;

use harness_abi::manifest::{is_valid_plugin_name, is_valid_tool_name};
use harness_core::{FINISH, compile_schema};
use serde_json::Value;

use super::Subject;
use crate::report::{CheckName, CheckReport, Failure, Outcome, Status, count};

/// `manifest`: names and versions valid, every tool described, no duplicate tool names.
///
/// `refusal` is the loader's reason when it refuses the manifest: when none of this check's
/// rules nor the schema rules explain it, it is reported here, so that nothing the harness
/// refuses passes.
pub(super) fn manifest(subject: &Subject<'_>, refusal: Option<&str>) -> CheckReport {
    let started = Instant::now();
    let m = subject.manifest;
    let mut plugin = Outcome::new(None, Status::Passed, "");
    if !is_valid_plugin_name(&m.name) {
        plugin.fail(Failure::plain(format!("plugin name {:?} must match ^[a-z][a-z0-9_-]{{0,63}}$", m.name)));
    }
    if semver::Version::parse(&m.version).is_err() {
        plugin.fail(Failure::plain(format!("version {:?} is not semver (e.g. 1.2.3)", m.version)));
    }
    if m.tools.is_empty() {
        plugin.fail(Failure::plain("the plugin offers no tools"));
    }
    let mut first_at: HashMap<&str, usize> = HashMap::new();
    let mut tools = Vec::new();
    for (i, t) in m.tools.iter().enumerate() {
        let t0 = Instant::now();
        let mut o = Outcome::new(Some(&t.name), Status::Passed, format!("effects {}", t.effects.as_str()));
        if !is_valid_tool_name(&t.name) {
            o.fail(Failure::plain("tool names must match ^[a-zA-Z0-9_-]{1,64}$"));
        }
        if t.name == FINISH {
            o.fail(Failure::plain("the name \"finish\" is reserved for the harness's own terminal tool"));
        }
        match first_at.get(t.name.as_str()) {
            Some(first) => o.fail(Failure::plain(format!(
                "the tool is declared twice (tools {} and {} of the manifest); the harness refuses the plugin",
                first + 1,
                i + 1
            ))),
            None => {
                first_at.insert(&t.name, i);
            }
        }
        if t.description.trim().is_empty() {
            o.fail(Failure::plain("the tool has no description; the model chooses tools by it"));
        }
        o.duration = t0.elapsed();
        tools.push(o);
    }
    let explained = tools.iter().chain([&plugin]).any(|o| o.status == Status::Failed)
        || m.tools.iter().any(|t| !schema_problems(&t.parameters, t.output.as_ref()).is_empty());
    if let (Some(refusal), false) = (refusal, explained) {
        plugin.fail(Failure::plain(format!("the harness refuses it: {refusal}")));
    }
    let test_only = if m.test_only { ", test only" } else { "" };
    plugin.detail = format!("{} {}{test_only}: {}", m.name, m.version, count(m.tools.len(), "tool"));
    let mut outcomes = vec![plugin];
    outcomes.extend(tools);
    CheckReport::new(CheckName::Manifest, outcomes, started.elapsed())
}

/// What is wrong with a tool's schemas, each with the schema it is about.
fn schema_problems(parameters: &Value, output: Option<&Value>) -> Vec<Failure> {
    let mut problems = Vec::new();
    if parameters.get("type").and_then(Value::as_str) != Some("object") {
        problems.push(Failure::with_input(
            parameters,
            "the parameters schema must have \"type\": \"object\" (arguments are one object)",
        ));
    }
    if let Err(e) = compile_schema(parameters) {
        problems.push(Failure::with_input(parameters, format!("the parameters schema does not compile: {e}")));
    }
    if let Some(output) = output
        && let Err(e) = compile_schema(output)
    {
        problems.push(Failure::with_input(output, format!("the output schema does not compile: {e}")));
    }
    problems
}

/// `schemas`: every parameters and output schema is valid JSON Schema and compiles.
pub(super) fn schemas(subject: &Subject<'_>) -> CheckReport {
    let started = Instant::now();
    let outcomes = subject
        .manifest
        .tools
        .iter()
        .map(|t| {
            let t0 = Instant::now();
            let what =
                if t.output.is_some() { "parameters and output schemas compile" } else { "parameters schema compiles" };
            let mut o = Outcome::new(Some(&t.name), Status::Passed, what);
            for problem in schema_problems(&t.parameters, t.output.as_ref()) {
                o.fail(problem);
            }
            if o.status == Status::Failed {
                o.detail = count(o.failure_count(), "schema problem");
            }
            o.duration = t0.elapsed();
            o
        })
        .collect();
    CheckReport::new(CheckName::Schemas, outcomes, started.elapsed())
}
