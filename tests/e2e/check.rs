//! `harness plugins check` and `harness plugins new` through the binary: the workspace's
//! plugins pass, each broken fixture fails exactly the check meant to catch it, crashes and
//! hangs cost one call each, the JUnit file is one that JUnit readers accept, and a scaffolded
//! plugin builds outside the workspace, passes, and runs.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

use crate::support::{Scratch, bin_dir, fixture, plugin, ran, snapshot};

/// The checks, in order.
const CHECKS: [&str; 7] =
    ["loads", "manifest", "schemas", "examples", "accepts-valid", "rejects-invalid", "deterministic"];

fn check_json(s: &Scratch, file: &Path, extra: &[&str]) -> (i32, Value) {
    let r = ran(s.harness().args(["plugins", "check", "--json"]).arg(file).args(extra));
    assert!(r.code == 0 || r.code == 1, "exit {}: {}", r.code, r.stderr);
    (r.code, r.json())
}

fn status<'a>(report: &'a Value, check: &str) -> &'a str {
    report["checks"].as_array().unwrap().iter().find(|c| c["name"] == check).unwrap()["status"].as_str().unwrap()
}

fn failed_checks(report: &Value) -> Vec<&str> {
    CHECKS.into_iter().filter(|c| status(report, c) == "failed").collect()
}

/// Every failure of `check` on `tool`, as `input -> reason` lines.
fn failures(report: &Value, check: &str, tool: &str) -> Vec<String> {
    let c = report["checks"].as_array().unwrap().iter().find(|c| c["name"] == check).unwrap();
    c["outcomes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|o| o["tool"] == tool)
        .flat_map(|o| o["failures"].as_array().cloned().unwrap_or_default())
        .map(|f| format!("{} -> {}", f["input"], f["reason"].as_str().unwrap()))
        .collect()
}

#[test]
fn the_workspace_plugins_pass_with_calls_in_a_child_process() {
    let s = Scratch::new();
    s.write("root/notes.txt", "some text");
    s.write("harness.toml", &format!("[plugins.files]\nroot = {:?}\n", s.path("root").display().to_string()));
    for name in ["calc", "chem", "files"] {
        let (code, report) = check_json(&s, &plugin(name), &["--config", "harness.toml"]);
        assert_eq!(code, 0, "{name}: {report:#}");
        assert_eq!(report["passed"], true);
        assert_eq!(report["executor"], "process", "{name}");
        assert_eq!(report["seed"], 1);
        assert_eq!(report["cases"], 64);
        let names: Vec<&str> =
            report["checks"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
        assert_eq!(names, CHECKS, "{name}");
    }
    let r = ran(s.harness().args(["plugins", "check"]).arg(plugin("calc")));
    assert_eq!(r.code, 0, "{}", r.stderr);
    // The report a plugin author reads, whole; the cases are seeded, so their counts are too.
    let filters = [
        (r"calc \d+\.\d+\.\d+", "calc [version]"),
        (r"confined to its class by \S+", "confined to its class by [this kernel's]"),
        (r"\(\d+(\.\d+)? s\)", "([time])"),
    ];
    snapshot("plugins-check-calc", &s, &r.stdout, &filters);
}

#[test]
fn each_broken_fixture_fails_exactly_its_check_naming_the_tool_and_the_input() {
    let s = Scratch::new();
    let cases = [
        ("check-bad-schema", "schemas", "find_code"),
        ("check-wrong-example", "examples", "add"),
        ("check-panics", "accepts-valid", "share"),
        ("check-hangs", "accepts-valid", "halvings"),
        ("check-duplicate", "manifest", "lookup"),
        ("check-bad-result", "accepts-valid", "count"),
    ];
    for (name, check, tool) in cases {
        let (code, report) = check_json(&s, &fixture(name), &["--tool-timeout", "1"]);
        assert_eq!(code, 1, "{name}: {report:#}");
        assert_eq!(failed_checks(&report), [check], "{name}: {report:#}");
        let lines = failures(&report, check, tool);
        assert!(!lines.is_empty(), "{name}: no failure for {tool}: {report:#}");
        if name == "check-hangs" {
            // Which calls pass the 1 s limit is the machine's too: the one that hangs, by code.
            assert!(
                lines.iter().any(|l| l.starts_with(r#"{"n":0} -> "#) && l.ends_with("(tool_timeout)")),
                "{lines:#?}"
            );
        } else {
            // What the author reads: each failing input (seeded, so the same every run) and why.
            snapshot(&format!("plugins-check-{name}-failures"), &s, &lines.join("\n"), &[]);
        }
        // The other checks ran: each passed on at least one tool.
        for other in CHECKS.into_iter().filter(|c| *c != check) {
            assert_eq!(status(&report, other), "passed", "{name}: {other} did not run: {report:#}");
        }
    }
}

#[test]
fn the_loader_refusal_is_reported_by_the_check_that_owns_it_and_calls_still_run() {
    let s = Scratch::new();
    let (_, report) = check_json(&s, &fixture("check-duplicate"), &[]);
    // A file the harness refuses is still called only in its confined children, never here.
    assert_eq!(report["executor"], "process");
    assert!(report["notes"][0].as_str().unwrap().contains("a child process per effect class"), "{report:#}");
    let loads = &report["checks"][0]["outcomes"][0]["detail"];
    assert!(loads.as_str().unwrap().contains("declared twice"), "{loads}");
    // `inspect`, the loader's own view, refuses the same file.
    let r = ran(s.harness().args(["plugins", "inspect"]).arg(fixture("check-duplicate")));
    assert_eq!(r.code, 1);
}

#[test]
fn crashes_and_hangs_cost_one_call_each_and_the_junit_file_reads_back() {
    let s = Scratch::new();
    let junit = s.path("fault.xml");
    let (code, report) =
        check_json(&s, &plugin("fault"), &["--cases", "4", "--tool-timeout", "1", "--junit", junit.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert_eq!(failed_checks(&report), ["accepts-valid"], "{report:#}");
    for (tool, needle) in [
        ("fault_panic", "tool_panicked"),
        ("fault_abort", "SIGABRT"),
        ("fault_segfault", "SIGSEGV"),
        ("fault_exit", "exited with status"),
        ("fault_sleep", "did not answer within 1000 ms"),
        ("fault_misreport", "invalid_result"),
    ] {
        let lines = failures(&report, "accepts-valid", tool);
        assert!(lines.iter().any(|l| l.contains(needle)), "{tool}: {lines:#?}");
    }
    assert!(failures(&report, "accepts-valid", "fault_echo").is_empty());

    let xml = std::fs::read_to_string(&junit).unwrap();
    // A strict XML parser: any malformed byte (a raw NUL from a panic message) fails here.
    let doc = roxmltree::Document::parse(&xml).unwrap_or_else(|e| panic!("not well-formed XML: {e}\n{xml}"));
    assert_eq!(doc.root_element().tag_name().name(), "testsuites");
    // And a JUnit reader, as CI test reporters read it.
    let suites = junit_parser::from_reader(std::io::BufReader::new(xml.as_bytes())).unwrap();
    let names: Vec<&str> = suites.suites.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, CHECKS);
    // One testcase per check and tool: loads once, manifest for the plugin and each of its 8
    // tools, the five others for each tool.
    let cases: usize = suites.suites.iter().map(|t| t.cases.len()).sum();
    assert_eq!(cases, 1 + 9 + 5 * 8);
    assert_eq!(suites.tests, cases as u64);
    let accepts = &suites.suites[4];
    let failed: Vec<&str> =
        accepts.cases.iter().filter(|c| c.status.is_failure()).map(|c| c.original_name.as_str()).collect();
    for tool in ["fault_panic", "fault_abort", "fault_segfault", "fault_exit", "fault_sleep"] {
        assert!(failed.contains(&tool), "{tool} not failed in {failed:?}");
    }
    assert_eq!(accepts.failures, failed.len() as u64);
    // The reader names a case `classname::name`; `original_name` is the name as written.
    let panic = accepts.cases.iter().find(|c| c.original_name == "fault_panic").unwrap();
    assert_eq!(panic.name, "fault.accepts-valid::fault_panic");
    assert_eq!(panic.classname.as_deref(), Some("fault.accepts-valid"));
    match &panic.status {
        junit_parser::TestStatus::Failure(f) => {
            assert!(f.message.contains("tool \"fault_panic\" with {\"message\":"), "{}", f.message);
            assert_eq!(f.failure_type, "accepts-valid");
        }
        other => panic!("{other:?}"),
    }
    let skipped = suites.suites[3].cases.iter().find(|c| c.original_name == "fault_abort").unwrap();
    assert!(skipped.status.is_skipped());
}

#[test]
fn the_same_seed_gives_the_same_cases_and_another_seed_others() {
    fn without_times(v: &mut Value) {
        match v {
            Value::Object(o) => {
                o.remove("duration_ms");
                o.values_mut().for_each(without_times);
            }
            Value::Array(a) => a.iter_mut().for_each(without_times),
            _ => {}
        }
    }
    let s = Scratch::new();
    let run = |seed: &str| {
        let (_, mut report) = check_json(&s, &fixture("check-panics"), &["--seed", seed, "--cases", "32"]);
        without_times(&mut report);
        report
    };
    let (a, b, c) = (run("7"), run("7"), run("8"));
    assert_eq!(a, b);
    assert_eq!(a["seed"], 7);
    assert_ne!(failures(&a, "accepts-valid", "share"), failures(&c, "accepts-valid", "share"));
}

#[test]
fn unreadable_files_exit_2_and_files_that_are_not_plugins_fail_loads() {
    let s = Scratch::new();
    ran(s.harness().args(["plugins", "check", "no-such-lib.so"])).usage_error(&["no-such-lib.so"]);
    let text = s.write("libtext.so", "not a library");
    let (code, report) = check_json(&s, &text, &[]);
    assert_eq!(code, 1);
    assert_eq!(failed_checks(&report), ["loads"]);
    assert_eq!(report["plugin"], Value::Null);
    let reason = &report["checks"][0]["outcomes"][0]["failures"][0]["reason"];
    assert!(reason.as_str().unwrap().starts_with("not a loadable shared library"), "{reason}");
    let r = ran(s.harness().args(["plugins", "check", "--isolation", "sandbox"]).arg(plugin("calc")));
    r.usage_error(&["sandbox"]);
}

#[test]
fn a_failing_init_fails_loads_and_the_checks_that_need_no_call_still_run() {
    let s = Scratch::new();
    let config = s.write("h.toml", "[plugins.files]\nroot = \"/no/such/root\"\ntimeout = 2\n");
    let (code, report) = check_json(&s, &plugin("files"), &["--config", config.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert_eq!(failed_checks(&report), ["loads"]);
    let reason = report["checks"][0]["outcomes"][0]["failures"][0]["reason"].as_str().unwrap();
    assert!(reason.starts_with("init failed: files: root /no/such/root cannot be used"), "{reason}");
    assert!(reason.ends_with("(given its [plugins.files] section (keys root))"), "{reason}");
    for (check, want) in [("manifest", "passed"), ("schemas", "passed"), ("accepts-valid", "skipped")] {
        assert_eq!(status(&report, check), want, "{check}: {report:#}");
    }
}

#[test]
fn new_refuses_bad_names_and_busy_directories() {
    let s = Scratch::new();
    for bad in ["Greet", "9lives", "fn", "a.b"] {
        ran(s.harness().args(["plugins", "new", bad])).usage_error(&[&format!("{bad:?}")]);
    }
    s.write("busy/file", "x");
    let r = ran(s.harness().args(["plugins", "new", "greet", "--path", "busy"]));
    r.usage_error(&["busy"]);
    snapshot("plugins-new-into-a-busy-directory", &s, &r.stderr, &[]);
}

/// The workspace's root and its lock file, which the scaffold borrows so that its build takes
/// the same dependency versions and needs nothing new from the registry.
pub(crate) fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// `cargo build` (or `test`) of a crate outside the workspace, gently: the other end-to-end
/// tests measure times and share the machine's two cores.
fn cargo(command: &str, manifest: &Path, target: &Path) {
    let cargo = env!("CARGO");
    let mut nice = Command::new("nice");
    nice.args(["-n", "10", cargo]);
    let mut cmd =
        if Command::new("nice").arg("true").status().is_ok_and(|s| s.success()) { nice } else { Command::new(cargo) };
    let status = cmd
        .args([command, "--quiet", "--manifest-path"])
        .arg(manifest)
        .env("CARGO_TARGET_DIR", target)
        .env_remove(crate::support::BOOTSTRAP)
        .status()
        .expect("cargo runs");
    assert!(status.success(), "cargo {command} failed on the scaffolded plugin");
}

/// Scaffolds `greet` into the scratch directory, with the workspace's lock file.
pub(crate) fn scaffold_greet(s: &Scratch) -> PathBuf {
    let sdk = workspace_root().join("crates/harness-sdk");
    let r = ran(s.harness().args(["plugins", "new", "greet", "--path", "greet", "--sdk-path"]).arg(&sdk));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("harness plugins check target/debug/libgreet.so"), "{}", r.stdout);
    let toml = std::fs::read_to_string(s.path("greet/Cargo.toml")).unwrap();
    assert!(toml.contains("[workspace]") && toml.contains("harness-plugin-check"), "{toml}");
    let lib = std::fs::read_to_string(s.path("greet/src/lib.rs")).unwrap();
    assert!(lib.contains("#[harness_sdk::tool(") && lib.contains("harness_sdk::plugin!(tools = [greet]);"), "{lib}");
    std::fs::copy(workspace_root().join("Cargo.lock"), s.path("greet/Cargo.lock")).unwrap();
    s.path("greet/Cargo.toml")
}

/// One target directory for every run, beside the workspace's own, so that abi_stable and the
/// SDK are built once and not again on each run.
fn scaffold_target() -> PathBuf {
    bin_dir().parent().unwrap().join("scaffold-e2e")
}

#[test]
fn a_scaffolded_plugin_builds_on_its_own_passes_the_checks_and_runs() {
    let s = Scratch::new();
    let manifest = scaffold_greet(&s);
    let target = scaffold_target();
    cargo("build", &manifest, &target);
    let out = target.join("debug");
    let library = out.join(format!("{}greet{}", std::env::consts::DLL_PREFIX, std::env::consts::DLL_SUFFIX));

    let (code, report) = check_json(&s, &library, &[]);
    assert_eq!(code, 0, "{report:#}");
    assert_eq!(report["plugin"]["name"], "greet");
    // The check its CI workflow runs, with a JUnit report.
    let junit = s.path("check.xml");
    let r = ran(s.harness().args(["plugins", "check"]).arg(&library).arg("--junit").arg(&junit));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(xml.contains("<testcase") && !xml.contains("<failure"), "{xml}");

    let script = s.script(&[
        json!({"tool": "greet", "arguments": {"name": "Ada"}}),
        json!({"tool": "finish", "arguments": {"answer": "greeted"}}),
    ]);
    let r = ran(s
        .harness()
        .args(["run", "greet Ada", "--provider", "scripted", "--no-default-plugins", "--json", "--trace", "t.jsonl"])
        .arg("--plugins-dir")
        .arg(&out)
        .arg("--script")
        .arg(&script));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.json()["answer"], "greeted");
    let trace = s.trace("t.jsonl");
    assert_eq!(trace[0]["result"], json!({"greeting": "Hello, Ada!"}));
    assert_eq!(trace[0]["plugin"], "greet");
}

/// Every `run:` line of every job's steps in a GitHub Actions workflow, which must parse as YAML
/// with `jobs` holding `steps`.
fn workflow_commands(path: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(path).unwrap();
    let docs = yaml_rust2::YamlLoader::load_from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let jobs = docs[0]["jobs"].as_hash().unwrap_or_else(|| panic!("{} has no jobs", path.display()));
    assert!(docs[0]["on"]["push"].is_null() && docs[0]["on"]["pull_request"].is_null(), "{text}");
    let mut commands = Vec::new();
    for (name, job) in jobs {
        assert!(job["runs-on"].as_str().is_some(), "job {name:?} has no runs-on");
        let steps = job["steps"].as_vec().unwrap_or_else(|| panic!("job {name:?} has no steps"));
        commands.extend(steps.iter().filter_map(|step| step["run"].as_str().map(str::to_owned)));
    }
    commands
}

/// `plugins new` writes, beside the crate, the workflow of its CI (the .so, the .dll, the
/// checks as JUnit) and a README; and depends on a registry version of the SDK unless given
/// a path.
#[test]
fn a_scaffold_brings_its_ci_workflow_and_readme_and_depends_on_a_version() {
    let s = Scratch::new();
    let r = ran(s.harness().args(["plugins", "new", "word-count", "--path", "wc"]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("--sdk-path"), "{}", r.stdout);
    let toml = std::fs::read_to_string(s.path("wc/Cargo.toml")).unwrap();
    let minor = env!("CARGO_PKG_VERSION").rsplit_once('.').unwrap().0;
    assert!(toml.contains(&format!("harness-sdk = \"{minor}\"")), "{toml}");
    let commands = workflow_commands(&s.path("wc/.github/workflows/ci.yml"));
    let ran_one = |all: &[&str]| commands.iter().any(|c| all.iter().all(|part| c.contains(part)));
    assert!(ran_one(&["cargo build --release"]), "{commands:?}");
    assert!(ran_one(&["cargo build", "--target x86_64-pc-windows-gnu"]), "{commands:?}");
    assert!(ran_one(&["cargo test"]), "{commands:?}");
    assert!(ran_one(&["harness plugins check target/release/libword_count.so", "--junit"]), "{commands:?}");
    let readme = std::fs::read_to_string(s.path("wc/README.md")).unwrap();
    for part in ["cargo build --release", "harness plugins check", "word_count.dll", "Signing"] {
        assert!(readme.contains(part), "{part}: {readme}");
    }
}

/// The scaffold's own `cargo test`: its unit test, and `tests/plugin_check.rs`, which runs the
/// checks on its library. It builds harness-plugin-check's dependencies too, in the scaffold's
/// own target directory: with that directory cold, this file's tests took 50 s on two cores.
#[test]
fn a_scaffolded_plugins_own_tests_pass() {
    let s = Scratch::new();
    let manifest = scaffold_greet(&s);
    cargo("test", &manifest, &scaffold_target());
}
