//! The outcome of a check run: each named check, per tool, passed, failed or skipped, with
//! reasons; rendered as a table, one JSON object, or JUnit XML.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Serialize, Serializer};
use serde_json::Value;

use crate::generate::describe_value;

/// The named checks, in the order they run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CheckName {
    /// The file is a plugin of a compatible ABI and layout, and `init` succeeds.
    Loads,
    /// Names and versions are valid, every tool is described, no tool name appears twice.
    Manifest,
    /// Every parameters and output schema is valid JSON Schema and compiles.
    Schemas,
    /// Every declared example returns its expected result or error.
    Examples,
    /// Generated valid arguments are accepted and each call ends in a result or a tool error.
    AcceptsValid,
    /// Generated invalid arguments are refused by validation before the tool runs.
    RejectsInvalid,
    /// Pure tools give the same result for the same arguments.
    Deterministic,
}

impl CheckName {
    /// Every check, in the order they run.
    pub const ALL: [Self; 7] = [
        Self::Loads,
        Self::Manifest,
        Self::Schemas,
        Self::Examples,
        Self::AcceptsValid,
        Self::RejectsInvalid,
        Self::Deterministic,
    ];

    /// The check's name as the command line and reports spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Loads => "loads",
            Self::Manifest => "manifest",
            Self::Schemas => "schemas",
            Self::Examples => "examples",
            Self::AcceptsValid => "accepts-valid",
            Self::RejectsInvalid => "rejects-invalid",
            Self::Deterministic => "deterministic",
        }
    }
}

impl std::fmt::Display for CheckName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How a check, or one tool's part of it, came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// It held.
    Passed,
    /// It did not; the failures say why.
    Failed,
    /// It could not run or does not apply; the detail says why.
    Skipped,
}

impl Status {
    fn word(self) -> &'static str {
        match self {
            Self::Passed => "pass",
            Self::Failed => "FAIL",
            Self::Skipped => "skip",
        }
    }
}

/// One reason a check failed: the input that showed it, when there was one.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Failure {
    /// The arguments (or the schema, for `schemas`) that showed the failure.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub input: Option<Value>,
    /// What went wrong.
    pub reason: String,
}

impl Failure {
    /// A failure shown by `input`.
    pub fn with_input(input: &Value, reason: impl Into<String>) -> Self {
        Self { input: Some(input.clone()), reason: reason.into() }
    }

    /// A failure of the plugin or tool as a whole.
    pub fn plain(reason: impl Into<String>) -> Self {
        Self { input: None, reason: reason.into() }
    }

    /// One line naming the tool and the input, with long inputs shortened.
    pub fn describe(&self, tool: Option<&str>) -> String {
        match (tool, &self.input) {
            (Some(tool), Some(input)) => format!("tool {tool:?} with {}: {}", describe_value(input, 240), self.reason),
            (Some(tool), None) => format!("tool {tool:?}: {}", self.reason),
            (None, Some(input)) => format!("{}: {}", describe_value(input, 240), self.reason),
            (None, None) => self.reason.clone(),
        }
    }
}

fn millis<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64((d.as_secs_f64() * 1e6).round() / 1e3)
}

/// One check on one tool, or on the plugin as a whole (`tool` is `None`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Outcome {
    /// The tool, or `None` for the plugin.
    pub tool: Option<String>,
    /// Passed, failed or skipped.
    pub status: Status,
    /// What was checked, or why it was skipped.
    pub detail: String,
    /// Why it failed (the first few reasons; see `more_failures`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub failures: Vec<Failure>,
    /// Failures past those listed.
    #[serde(skip_serializing_if = "is_zero")]
    pub more_failures: usize,
    /// How long it took.
    #[serde(rename = "duration_ms", serialize_with = "millis")]
    pub duration: Duration,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// `1 case`, `2 cases`: a count and its noun, for details.
pub(crate) fn count(n: usize, noun: &str) -> String {
    if n == 1 { format!("1 {noun}") } else { format!("{n} {noun}s") }
}

/// Text for a terminal: control characters (a NUL in a panic message) shown escaped.
fn printable(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() && c != '\n' { c.escape_default().to_string() } else { c.to_string() })
        .collect()
}

/// The most failures listed per outcome; the rest are counted.
pub const LISTED_FAILURES: usize = 10;

impl Outcome {
    /// An outcome with no failures yet.
    pub fn new(tool: Option<&str>, status: Status, detail: impl Into<String>) -> Self {
        Self {
            tool: tool.map(str::to_owned),
            status,
            detail: detail.into(),
            failures: Vec::new(),
            more_failures: 0,
            duration: Duration::ZERO,
        }
    }

    /// Records a failure, which makes the outcome failed.
    pub fn fail(&mut self, failure: Failure) {
        self.status = Status::Failed;
        if self.failures.len() < LISTED_FAILURES {
            self.failures.push(failure);
        } else {
            self.more_failures += 1;
        }
    }

    /// Every failure counted, listed or not.
    pub fn failure_count(&self) -> usize {
        self.failures.len() + self.more_failures
    }
}

/// One named check over the plugin and each of its tools.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CheckReport {
    /// Which check.
    #[serde(rename = "name")]
    pub check: CheckName,
    /// Failed when any outcome failed; skipped when every one was skipped; passed otherwise.
    pub status: Status,
    /// Per tool (or for the plugin), in manifest order.
    pub outcomes: Vec<Outcome>,
    /// How long the whole check took.
    #[serde(rename = "duration_ms", serialize_with = "millis")]
    pub duration: Duration,
}

impl CheckReport {
    /// A report from its outcomes, its status worked out.
    pub fn new(check: CheckName, outcomes: Vec<Outcome>, duration: Duration) -> Self {
        let status = if outcomes.iter().any(|o| o.status == Status::Failed) {
            Status::Failed
        } else if outcomes.iter().all(|o| o.status == Status::Skipped) {
            Status::Skipped
        } else {
            Status::Passed
        };
        Self { check, status, outcomes, duration }
    }
}

/// The plugin as its library describes itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PluginInfo {
    /// Its name.
    pub name: String,
    /// Its version.
    pub version: String,
    /// The harness ABI version it was built for.
    pub abi_version: String,
    /// Whether it is a test-only plugin.
    pub test_only: bool,
}

/// Everything a check run found.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    /// The library file checked (canonical).
    pub file: PathBuf,
    /// The plugin, when its manifest could be read.
    pub plugin: Option<PluginInfo>,
    /// The generator's seed.
    pub seed: u64,
    /// Cases per tool.
    pub cases: usize,
    /// Where calls ran: `in-process` or `process`.
    pub executor: String,
    /// Things worth knowing that are not failures.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// The checks, in order.
    pub checks: Vec<CheckReport>,
    /// How long the whole run took.
    #[serde(rename = "duration_ms", serialize_with = "millis")]
    pub duration: Duration,
}

impl Report {
    /// True when no check failed.
    pub fn passed(&self) -> bool {
        self.checks.iter().all(|c| c.status != Status::Failed)
    }

    /// One check's report.
    pub fn check(&self, name: CheckName) -> Option<&CheckReport> {
        self.checks.iter().find(|c| c.check == name)
    }

    /// The names of the checks that failed.
    pub fn failed_checks(&self) -> Vec<CheckName> {
        self.checks.iter().filter(|c| c.status == Status::Failed).map(|c| c.check).collect()
    }

    /// Every failure, one line each: check, tool and input named.
    pub fn failure_lines(&self) -> Vec<String> {
        let mut lines = Vec::new();
        for c in &self.checks {
            for o in &c.outcomes {
                for f in &o.failures {
                    lines.push(format!("{}: {}", c.check, f.describe(o.tool.as_deref())));
                }
                if o.more_failures > 0 {
                    lines.push(format!("{}: ... and {} more failures", c.check, o.more_failures));
                }
            }
        }
        lines
    }

    /// The plugin's name, or the file's name when the manifest could not be read.
    pub fn subject(&self) -> String {
        match &self.plugin {
            Some(p) => p.name.clone(),
            None => self.file.file_name().map_or_else(|| "plugin".to_owned(), |n| n.to_string_lossy().into_owned()),
        }
    }

    /// The report as one JSON object, `passed` included.
    pub fn to_json(&self) -> Value {
        let mut v = serde_json::to_value(self).unwrap_or(Value::Null);
        if let Value::Object(o) = &mut v {
            o.insert("passed".to_owned(), Value::Bool(self.passed()));
        }
        v
    }

    /// A table for people: one row per check and tool, failures indented under their row.
    pub fn table(&self) -> String {
        let mut out = String::new();
        let who = match &self.plugin {
            Some(p) => format!("{} {} (ABI {})", p.name, p.version, p.abi_version),
            None => "a file that is not a readable plugin".to_owned(),
        };
        let _ = writeln!(out, "checking {who}: {}", self.file.display());
        let calls = if self.executor == "process" { "calls in a child process" } else { "calls in this process" };
        let _ = writeln!(out, "seed {}, {} cases per tool, {calls}", self.seed, self.cases);
        for note in &self.notes {
            let _ = writeln!(out, "note: {note}");
        }
        let _ = writeln!(out, "\n{:<16} {:<24} {:<6} DETAIL", "CHECK", "TOOL", "RESULT");
        for c in &self.checks {
            for o in &c.outcomes {
                let tool = o.tool.as_deref().unwrap_or("-");
                let detail = printable(&o.detail);
                let _ =
                    writeln!(out, "{:<16} {:<24} {:<6} {detail}", c.check.as_str(), printable(tool), o.status.word());
                for f in &o.failures {
                    let _ = writeln!(out, "    {}", printable(&f.describe(o.tool.as_deref())).replace('\n', "\n    "));
                }
                if o.more_failures > 0 {
                    let _ = writeln!(out, "    ... and {} more", o.more_failures);
                }
            }
        }
        let count = |s: Status| self.checks.iter().filter(|c| c.status == s).count();
        let _ = writeln!(
            out,
            "\n{} checks: {} passed, {} failed, {} skipped ({:.2} s)",
            self.checks.len(),
            count(Status::Passed),
            count(Status::Failed),
            count(Status::Skipped),
            self.duration.as_secs_f64()
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn report(outcomes: Vec<Outcome>) -> Report {
        Report {
            file: "/x/libp.so".into(),
            plugin: Some(PluginInfo {
                name: "p".into(),
                version: "1.0.0".into(),
                abi_version: "1.0.0".into(),
                test_only: false,
            }),
            seed: 1,
            cases: 4,
            executor: "in-process".into(),
            notes: vec![],
            checks: vec![CheckReport::new(CheckName::AcceptsValid, outcomes, Duration::from_millis(3))],
            duration: Duration::from_millis(5),
        }
    }

    #[test]
    fn a_failure_names_the_tool_and_the_input() {
        let mut o = Outcome::new(Some("divide"), Status::Passed, "4 cases");
        o.fail(Failure::with_input(&json!({"n": 0}), "tool_panicked: attempt to divide by zero"));
        let r = report(vec![o, Outcome::new(Some("other"), Status::Passed, "4 cases")]);
        assert!(!r.passed());
        assert_eq!(r.failed_checks(), [CheckName::AcceptsValid]);
        assert_eq!(
            r.failure_lines(),
            [r#"accepts-valid: tool "divide" with {"n":0}: tool_panicked: attempt to divide by zero"#]
        );
        let table = r.table();
        assert!(table.contains("accepts-valid    divide                   FAIL"), "{table}");
        let j = r.to_json();
        assert_eq!(j["passed"], false);
        assert_eq!(j["checks"][0]["name"], "accepts-valid");
        assert_eq!(j["checks"][0]["outcomes"][0]["failures"][0]["input"], json!({"n": 0}));
        assert_eq!(j["checks"][0]["duration_ms"], 3.0);
    }

    #[test]
    fn failures_past_the_list_are_counted() {
        let mut o = Outcome::new(None, Status::Passed, "");
        for i in 0..LISTED_FAILURES + 3 {
            o.fail(Failure::plain(format!("f{i}")));
        }
        assert_eq!((o.failures.len(), o.more_failures, o.failure_count()), (LISTED_FAILURES, 3, LISTED_FAILURES + 3));
    }

    #[test]
    fn status_of_a_check() {
        let skipped =
            CheckReport::new(CheckName::Examples, vec![Outcome::new(None, Status::Skipped, "")], Duration::ZERO);
        assert_eq!(skipped.status, Status::Skipped);
        let mixed = CheckReport::new(
            CheckName::Examples,
            vec![Outcome::new(None, Status::Skipped, ""), Outcome::new(None, Status::Passed, "")],
            Duration::ZERO,
        );
        assert_eq!(mixed.status, Status::Passed);
    }
}
