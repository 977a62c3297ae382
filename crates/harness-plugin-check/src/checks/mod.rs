//! The check run: open the file, then each named check in turn, each on every tool.
//!
//! A check that cannot run says why (skipped) and the others still run: a manifest that the
//! loader refuses is read raw, a tool whose schema does not compile is left out of the call
//! checks only, an `init` that fails leaves the checks that need no call.

mod declared;
mod examples;
mod generated;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use harness_abi::manifest::{Manifest, ToolManifest};
use harness_core::{ToolDefinition, ToolFailure, ToolHandler, ToolRegistry, ToolSource, ToolSpec};
use harness_loader::{PluginSettings, Timeouts};
use serde_json::Value;

use crate::call::{CallOutcome, Caller};
use crate::generate::{DrawError, Generator, Rng};
use crate::open::{Opened, open};
use crate::options::{CheckOptions, Executor, INIT_TIMEOUT};
use crate::report::{CheckName, CheckReport, Failure, Outcome, PluginInfo, Report, Status};

/// Why a file could not be checked at all (a failed check is a [`Report`], not an error).
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    /// The file does not exist, cannot be opened, or is not a regular file.
    #[error("cannot read plugin file {}: {reason}", path.display())]
    Unreadable {
        /// The path as given.
        path: PathBuf,
        /// What the OS said.
        reason: String,
    },
}

/// The most draws for one case before the generator gives up on it.
const DRAWS_PER_CASE: usize = 32;

/// A handler for the validation-only registries: the checks call tools through [`Caller`].
struct ValidationOnly;

impl ToolHandler for ValidationOnly {
    fn call(&self, tool: &str, _: &Value) -> Result<Value, ToolFailure> {
        Err(ToolFailure { code: "tool_error".to_owned(), message: format!("{tool} is only validated here") })
    }
}

/// The cases drawn for one tool, and what got in the way.
#[derive(Debug, Default)]
pub(crate) struct Cases {
    /// Valid argument objects, in case order.
    pub(crate) valid: Vec<Value>,
    /// Draws the validator refused and that were drawn again.
    pub(crate) redrawn: usize,
    /// Draws equal to an earlier case, left out.
    pub(crate) repeated: usize,
    /// Why some or all cases could not be drawn.
    pub(crate) problem: Option<DrawError>,
    /// The last draw the validator refused, and why.
    pub(crate) last_refused: Option<(Value, String)>,
}

/// Everything the checks share about the plugin under check.
pub(crate) struct Subject<'a> {
    pub(crate) manifest: &'a Manifest,
    pub(crate) options: &'a CheckOptions,
    /// Parameters schemas, compiled by the harness's own registry (the first of each name).
    params: ToolRegistry,
    /// Why each tool (by manifest index) cannot be validated, when it cannot.
    unvalidated: Vec<Option<String>>,
    /// Where calls go, or why there are none.
    caller: Result<Caller, String>,
    timeouts: Timeouts,
    /// Drawn cases per tool index.
    cases: HashMap<usize, Cases>,
    /// Outcomes of `accepts-valid`'s calls per tool index, for `deterministic`.
    pub(crate) called: HashMap<usize, Vec<(Value, CallOutcome)>>,
}

fn definition(manifest: &Manifest, name: &str, description: &str, parameters: &Value) -> ToolDefinition {
    ToolDefinition {
        name: name.to_owned(),
        description: description.to_owned(),
        parameters: parameters.clone(),
        examples: Vec::new(),
        source: ToolSource::Plugin { name: manifest.name.clone(), version: manifest.version.clone() },
    }
}

impl<'a> Subject<'a> {
    fn new(
        manifest: &'a Manifest,
        options: &'a CheckOptions,
        caller: Result<Caller, String>,
        timeouts: Timeouts,
    ) -> Self {
        let mut params = ToolRegistry::new();
        let mut unvalidated = Vec::new();
        for t in &manifest.tools {
            // The output schema is held against results as the loop holds it (`invalid_result`).
            let spec = |output: Option<&Value>| ToolSpec {
                output: output.cloned(),
                ..ToolSpec::new(definition(manifest, &t.name, &t.description, &t.parameters), Arc::new(ValidationOnly))
            };
            let registered = match params.register(spec(t.output.as_ref())) {
                // An output schema that does not compile is the schemas check's finding; the
                // parameters are still held against arguments.
                Err(harness_core::RegistryError::InvalidOutputSchema { .. }) => params.register(spec(None)),
                other => other,
            };
            let why = match registered {
                Ok(()) => None,
                Err(harness_core::RegistryError::Duplicate { existing, .. }) if existing.contains("harness") => {
                    Some("its name is the harness's own `finish` (see manifest)".to_owned())
                }
                Err(harness_core::RegistryError::Duplicate { .. }) => {
                    Some("an earlier tool has the same name (see manifest)".to_owned())
                }
                Err(_) => Some("its parameters schema does not compile (see schemas)".to_owned()),
            };
            unvalidated.push(why);
        }
        Self { manifest, options, params, unvalidated, caller, timeouts, cases: HashMap::new(), called: HashMap::new() }
    }

    /// Why tool `index` cannot be validated, if it cannot.
    pub(crate) fn unvalidated(&self, index: usize) -> Option<&str> {
        self.unvalidated.get(index).and_then(|w| w.as_deref())
    }

    /// Why tool `index` cannot be called, if it cannot.
    pub(crate) fn uncallable(&self, index: usize) -> Option<String> {
        if let Some(why) = self.unvalidated(index) {
            return Some(why.to_owned());
        }
        let tool = &self.manifest.tools[index];
        if self.options.never_call.contains(&tool.name) {
            return Some("not called: it is listed in never_call".to_owned());
        }
        self.caller.as_ref().err().map(|why| format!("not called: {why}"))
    }

    /// Validates arguments as the harness does before a call; the error lists every violation.
    pub(crate) fn validate(&self, tool: &str, arguments: &Value) -> Result<(), String> {
        match self.params.get(tool) {
            Some(t) => t.validate(arguments).map_err(|e| e.message),
            None => Err(format!("tool {tool:?} has no compiled schema")),
        }
    }

    /// Why a result breaks the tool's output schema, when it declares one and is broken: the
    /// loop's own check, which would make the step `invalid_result`.
    pub(crate) fn output_problem(&self, tool: &str, result: &Value) -> Option<String> {
        let e = self.params.get(tool)?.check_result(result).err()?;
        let violations: Vec<String> = e.details["violations"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|v| {
                let at = v["pointer"].as_str().filter(|p| !p.is_empty()).unwrap_or("(root)");
                format!("{at}: {}", v["message"].as_str().unwrap_or(""))
            })
            .collect();
        Some(format!(
            "the result does not match the output schema (a run would make it invalid_result): {}",
            violations.join("; ")
        ))
    }

    /// Calls a tool; only for tools that [`Self::uncallable`] allows.
    pub(crate) fn call(&self, tool: &str, arguments: &Value) -> CallOutcome {
        match &self.caller {
            Ok(caller) => caller.call(tool, arguments, self.tool_timeout(tool)),
            Err(why) => CallOutcome::Crashed(why.clone()),
        }
    }

    /// The cases of tool `index`, drawn on first use.
    pub(crate) fn cases(&mut self, index: usize) -> &Cases {
        if !self.cases.contains_key(&index) {
            let drawn = self.draw(&self.manifest.tools[index]);
            self.cases.insert(index, drawn);
        }
        &self.cases[&index]
    }

    fn draw(&self, tool: &ToolManifest) -> Cases {
        let mut cases = Cases::default();
        let words = tool.examples.iter().flat_map(|e| crate::generate::strings_in(&e.arguments));
        let mut generator = Generator::new(&tool.parameters).with_dictionary(words);
        for case in 0..self.options.cases as u64 {
            let mut rng = Rng::for_case(self.options.seed, &tool.name, case);
            for _ in 0..DRAWS_PER_CASE {
                match generator.draw(&mut rng) {
                    Err(e) => cases.problem = Some(e),
                    // A case already drawn says nothing new (a tool without arguments has one).
                    Ok(v) if cases.valid.contains(&v) => cases.repeated += 1,
                    Ok(v) => match self.validate(&tool.name, &v) {
                        Ok(()) => {
                            cases.valid.push(v);
                            break;
                        }
                        Err(why) => {
                            cases.redrawn += 1;
                            cases.last_refused = Some((v, why));
                        }
                    },
                }
            }
            // A schema that gave nothing in four cases gives nothing: stop spending draws.
            if case >= 3 && cases.valid.is_empty() {
                break;
            }
        }
        cases
    }

    fn tool_timeout(&self, tool: &str) -> Duration {
        self.timeouts.of(tool).unwrap_or(self.options.tool_timeout)
    }
}

/// Runs `per_tool` on every tool, timing each, into one check report.
pub(crate) fn per_tool(
    check: CheckName,
    subject: &mut Subject<'_>,
    mut per_tool: impl FnMut(&mut Subject<'_>, usize) -> Outcome,
) -> CheckReport {
    let started = Instant::now();
    let mut outcomes = Vec::new();
    for index in 0..subject.manifest.tools.len() {
        let t0 = Instant::now();
        let mut outcome = per_tool(subject, index);
        outcome.duration = t0.elapsed();
        outcomes.push(outcome);
    }
    CheckReport::new(check, outcomes, started.elapsed())
}

/// A check that could not run at all, for the plugin as a whole.
fn not_run(check: CheckName, why: &str) -> CheckReport {
    CheckReport::new(check, vec![Outcome::new(None, Status::Skipped, why)], Duration::ZERO)
}

/// Equality of JSON values where `1` and `1.0` are the same number.
pub(crate) fn same_json(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x == y || x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same_json(a, b)),
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same_json(v, w)))
        }
        _ => a == b,
    }
}

/// Checks one plugin library file. `Err` only when the file cannot be read at all.
pub fn check(path: &Path, options: &CheckOptions) -> Result<Report, CheckError> {
    let started = Instant::now();
    let unreadable = |reason: String| CheckError::Unreadable { path: path.to_owned(), reason };
    let file = dunce::canonicalize(path).map_err(|e| unreadable(e.to_string()))?;
    let meta = std::fs::File::open(&file).and_then(|f| f.metadata()).map_err(|e| unreadable(e.to_string()))?;
    if !meta.is_file() {
        return Err(unreadable("it is not a regular file".to_owned()));
    }
    let mut report = Report {
        file: file.clone(),
        plugin: None,
        seed: options.seed,
        cases: options.cases,
        executor: "in-process".to_owned(),
        notes: Vec::new(),
        checks: Vec::new(),
        duration: Duration::ZERO,
    };
    let t0 = Instant::now();
    let opened = match &options.executor {
        Executor::InProcess => open(&file),
        Executor::Process(command) => crate::open::open_in_child(command, &file),
    };
    let opened = match opened {
        Ok(opened) => opened,
        Err(why) => {
            let mut loads = Outcome::new(None, Status::Passed, "");
            loads.fail(Failure::plain(why));
            loads.duration = t0.elapsed();
            report.checks.push(CheckReport::new(CheckName::Loads, vec![loads], t0.elapsed()));
            for c in &CheckName::ALL[1..] {
                report.checks.push(not_run(*c, "the file did not load (see loads)"));
            }
            report.duration = started.elapsed();
            return Ok(report);
        }
    };
    run_checks(&mut report, &file, opened, options, t0);
    report.duration = started.elapsed();
    Ok(report)
}

fn run_checks(report: &mut Report, file: &Path, opened: Opened, options: &CheckOptions, t0: Instant) {
    let parsed: Result<Manifest, String> = serde_json::from_str::<Manifest>(&opened.manifest_json).map_err(|e| {
        match serde_json::from_str::<Value>(&opened.manifest_json).ok().and_then(|v| v.get("error").cloned()) {
            Some(Value::String(why)) => format!("the plugin could not build its manifest: {why}"),
            _ => format!("the manifest is not a harness manifest: {e}"),
        }
    });
    let name = match &parsed {
        Ok(m) => m.name.clone(),
        Err(_) => serde_json::from_str::<Value>(&opened.manifest_json)
            .ok()
            .and_then(|v| v["name"].as_str().map(str::to_owned))
            .unwrap_or_default(),
    };
    if let Ok(m) = &parsed {
        report.plugin = Some(PluginInfo {
            name: m.name.clone(),
            version: m.version.clone(),
            abi_version: opened.abi_version.clone(),
            test_only: m.test_only,
        });
    }
    let section = options.sections.get(&name).cloned().unwrap_or_else(|| Value::Object(Default::default()));

    // loads: the loader's verdict on the file, then init with the plugin's section.
    let mut loads = Outcome::new(None, Status::Passed, "");
    let caller = match PluginSettings::from_section(&name, &section) {
        Err(why) => {
            loads.fail(Failure::plain(format!("its configuration section cannot be used: {why}")));
            Err("its configuration section cannot be used (see loads)".to_owned())
        }
        Ok((settings, config)) => 'init: {
            let caller = match make_caller(report, file, &opened, &name, &config, options, &settings) {
                Ok(caller) => caller,
                Err(why) => {
                    loads.fail(Failure::plain(why));
                    break 'init Err("the plugin could not be called (see loads)".to_owned());
                }
            };
            // Keys only: a section may hold a token, and reports end up in CI logs.
            let keys: Vec<&str> =
                config.as_object().map(|o| o.keys().map(String::as_str).collect()).unwrap_or_default();
            let given = if keys.is_empty() {
                "no configuration".to_owned()
            } else {
                format!("its [plugins.{name}] section (keys {})", keys.join(", "))
            };
            match caller.init(&config, INIT_TIMEOUT) {
                Ok(()) => {
                    loads.detail =
                        format!("ABI {} and layout compatible; init succeeded with {given}", opened.abi_version);
                    Ok((caller, settings.timeouts))
                }
                Err(why) => {
                    loads.fail(Failure::plain(format!("{why} (given {given})")));
                    Err("init failed (see loads)".to_owned())
                }
            }
        }
    };
    if let Some(refusal) = &opened.refusal {
        loads
            .detail
            .push_str(&format!("; the harness refuses the file all the same ({refusal}): see manifest and schemas"));
    }
    loads.duration = t0.elapsed();
    report.checks.push(CheckReport::new(CheckName::Loads, vec![loads], t0.elapsed()));

    let manifest = match parsed {
        Ok(m) => m,
        Err(why) => {
            let mut o = Outcome::new(None, Status::Passed, "");
            o.fail(Failure::plain(why));
            report.checks.push(CheckReport::new(CheckName::Manifest, vec![o], Duration::ZERO));
            for c in &CheckName::ALL[2..] {
                report.checks.push(not_run(*c, "the manifest could not be read (see manifest)"));
            }
            return;
        }
    };
    let (caller, timeouts) = match caller {
        Ok((caller, timeouts)) => (Ok(caller), timeouts),
        Err(why) => (Err(why), Timeouts::default()),
    };
    let mut subject = Subject::new(&manifest, options, caller, timeouts);
    report.checks.push(declared::manifest(&subject, opened.refusal.as_deref()));
    report.checks.push(declared::schemas(&subject));
    report.checks.push(per_tool(CheckName::Examples, &mut subject, examples::examples));
    report.checks.push(per_tool(CheckName::AcceptsValid, &mut subject, generated::accepts_valid));
    report.checks.push(per_tool(CheckName::RejectsInvalid, &mut subject, generated::rejects_invalid));
    report.checks.push(per_tool(CheckName::Deterministic, &mut subject, generated::deterministic));
}

/// Picks where calls run: in this process, or in children placed as a run places this
/// plugin's (one per effect class, each confined to its class when the kernel can), which
/// the report notes. A manifest the harness refuses still runs only in those children.
fn make_caller(
    report: &mut Report,
    file: &Path,
    opened: &Opened,
    name: &str,
    config: &Value,
    options: &CheckOptions,
    settings: &PluginSettings,
) -> Result<Caller, String> {
    match (&options.executor, opened.module) {
        (Executor::InProcess, Some(module)) => {
            Ok(Caller::InProcess { module, max_result_bytes: options.max_result_bytes })
        }
        (Executor::Process(command), _) => {
            let (calls, note) = process_calls(file, opened, name, config, options, settings, command);
            report.executor = "process".to_owned();
            report.notes.push(note);
            Ok(Caller::Process(Box::new(calls)))
        }
        // A module is opened here exactly when calls run here (see `check`).
        (Executor::InProcess, None) => {
            Err("its manifest was read in a child, but its calls were to run here".to_owned())
        }
    }
}

/// One child per effect class of the plugin's tools, each confined as a run confines that
/// class of this plugin (its section's `allow_paths`, `allow_ports`, `allow_exec`), and what
/// the report says of them.
fn process_calls(
    file: &Path,
    opened: &Opened,
    name: &str,
    config: &Value,
    options: &CheckOptions,
    settings: &PluginSettings,
    command: &harness_loader::isolation::HostCommand,
) -> (crate::call::ProcessCalls, String) {
    use harness_sandbox::confine::{Confinement, EffectSet, Enforcement, kernel_support};
    let tools = serde_json::from_str::<Manifest>(&opened.manifest_json).map(|m| m.tools).unwrap_or_default();
    let mut class_of = HashMap::new();
    for t in &tools {
        class_of.entry(t.name.clone()).or_insert(t.effects);
    }
    let placement = harness_loader::DiscoveryOptions {
        settings: [(name.to_owned(), settings.clone())].into(),
        ..Default::default()
    };
    let grants = placement.grants_of(name, config);
    let kernel = kernel_support();
    let mut timeouts = settings.timeouts.clone();
    timeouts.default = timeouts.default.or(Some(options.tool_timeout));
    let classes: std::collections::BTreeSet<_> = class_of.values().copied().collect();
    let mut by_class = std::collections::BTreeMap::new();
    for class in classes {
        let mut handler = harness_loader::isolation::ProcessHandler::new(
            name,
            file.to_owned(),
            config.clone(),
            command.clone(),
            options.max_result_bytes,
            timeouts.clone(),
        )
        .rules_unchecked()
        .passing_env(settings.env.clone())
        .allowing_exec(!settings.allow_exec.is_empty());
        if kernel.landlock_abi().is_some() {
            handler = handler.confined(Confinement::for_effects(file, EffectSet::of([class]), &grants));
        }
        by_class.insert(class, handler);
    }
    let classes: Vec<&str> = by_class.keys().map(|c| c.as_str()).collect();
    let confined = match &kernel {
        Enforcement::Kernel { .. } | Enforcement::Partial { .. } => {
            format!("each confined to its class by {} as a run confines it", kernel.label())
        }
        Enforcement::None { reason } => format!("not confined by the kernel: {reason}"),
    };
    let note = format!("calls ran in a child process per effect class ({}), {confined}", classes.join(", "));
    (crate::call::ProcessCalls { by_class, class_of }, note)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn numbers_compare_by_value() {
        assert!(same_json(&json!({"a": [1, 2.0]}), &json!({"a": [1.0, 2]})));
        assert!(!same_json(&json!({"a": 1}), &json!({"a": 1, "b": 2})));
        assert!(!same_json(&json!("1"), &json!(1)));
    }

    #[test]
    fn a_missing_file_is_an_error_not_a_report() {
        let e = check(Path::new("/no/such/libx.so"), &CheckOptions::default()).unwrap_err();
        assert!(e.to_string().contains("/no/such/libx.so"), "{e}");
        let e = check(Path::new("/tmp"), &CheckOptions::default()).unwrap_err();
        assert!(e.to_string().contains("not a regular file") || e.to_string().contains("directory"), "{e}");
    }

    #[test]
    fn a_file_that_is_not_a_library_fails_loads_and_skips_the_rest() {
        let dir = std::env::temp_dir().join(format!("harness-plugin-check-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("libnot.so");
        std::fs::write(&path, "not a library").unwrap();
        let report = check(&path, &CheckOptions::default()).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(report.failed_checks(), [CheckName::Loads]);
        assert!(report.failure_lines()[0].contains("not a loadable shared library"), "{:?}", report.failure_lines());
        assert!(report.checks[1..].iter().all(|c| c.status == Status::Skipped));
        assert!(!report.passed());
    }
}
