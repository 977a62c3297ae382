//! `harness trace show` and `harness trace html` on traces of real runs, and the HTML report
//! rendered in headless Chromium.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::{Scratch, ran, snapshot};
use crate::wait::wait_for_lines;

fn call(tool: &str, arguments: Value) -> Value {
    json!({ "tool": tool, "arguments": arguments })
}

/// Markers that would show up in the rendered page only if trace text ran as markup or script.
const INJECTED_SCRIPT: &str = "<script>document.title='PW'+'NED';document.body.setAttribute('data-pwned','1')</script>";
const INJECTED_IMG: &str = "<img src=x onerror=\"document.body.setAttribute('data-pwned','2')\">";
const INJECTED_MARKUP: &str = "</pre></details><b>bold?</b>";

/// A real run whose trace has every kind of step: rejected (no JSON, unknown tool), error (a
/// tool that failed), ok and finished; model text, arguments and the answer carry markup.
fn traced_run(s: &Scratch) -> PathBuf {
    let script = s.script(&[
        json!({ "content": format!("{INJECTED_SCRIPT} no call here") }),
        call("calculate", json!({ "expression": INJECTED_IMG })),
        call("no_such_tool", json!({})),
        call("calculate", json!({"expression": "6*7"})),
        call("finish", json!({ "answer": format!("42 {INJECTED_SCRIPT}{INJECTED_MARKUP}") })),
    ]);
    let r =
        ran(s.harness().args(["run", "x", "-q", "--enable", "calc", "--trace", "t.jsonl", "--script"]).arg(&script));
    assert_eq!(r.code, 0, "{}", r.stderr);
    s.path("t.jsonl")
}

/// Compares `trace show`'s output whole with the snapshot `name`, less what differs from run
/// to run: the times of the steps and of the run, when it started, the harness's version, the
/// time a deadline left to a call.
fn show_snapshot(name: &str, s: &Scratch, shown: &str) {
    let filters = [
        // Right-aligned: the padding goes with the figure, so the columns stay the same width.
        (r" +\d+(\.\d+)? (µs|ms|s)  ", " [time]  "),
        (r"· \d+(\.\d+)? (µs|ms|s) \(model \d+(\.\d+)? (µs|ms|s)\)", "· [time] (model [time])"),
        (r"harness \S+ · started \S+", "harness [version] · started [time]"),
        // How many tools the plugins beside the harness offer: a `cargo build --workspace`
        // puts test fixtures there too (the `numbered` plugin), which `cargo test` does not.
        (r"· \d+ tools ·", "· [n] tools ·"),
        // What a deadline left for the call that hit it.
        (r"within \d+ ms", "within [time]"),
    ];
    snapshot(name, s, shown, &filters);
}

#[test]
fn show_prints_a_table_of_every_kind_of_step() {
    let s = Scratch::new();
    let trace = traced_run(&s);
    let r = ran(s.harness().args(["trace", "show"]).arg(&trace));
    assert_eq!(r.code, 0, "{}", r.stderr);
    show_snapshot("trace-show-every-kind-of-step", &s, &r.stdout);
    assert!(r.stdout.lines().all(|l| l.chars().count() < 200), "one line a step");
}

#[test]
fn show_json_passes_good_lines_through_and_numbers_the_bad_ones() {
    let s = Scratch::new();
    let trace = traced_run(&s);
    let good = std::fs::read_to_string(&trace).unwrap();
    // Broken lines among the steps, before the last line: each is named, the rest reads.
    let (steps, last) = good.trim_end().rsplit_once('\n').unwrap();
    let text = format!(
        "{steps}\n{{\"step\": 6, \"status\": \"maybe\", \"duration_us\": 1}}\nnot json\n{{\"step\": 7, \"tool\": \"fin\n{last}\n"
    );
    s.write("t.jsonl", &text);
    let r = ran(s.harness().args(["trace", "show", "--json"]).arg(&trace));
    assert_eq!(r.code, 1, "bad lines make exit 1: {}", r.stderr);
    assert_eq!(r.stdout, good, "good lines pass through unchanged");
    // Each bad line named by file and line number, with what is wrong with it.
    snapshot("trace-bad-lines", &s, &r.stderr, &[]);
    let r = ran(s.harness().args(["trace", "show"]).arg(&trace));
    assert_eq!(r.code, 1);
    show_snapshot("trace-show-every-kind-of-step", &s, &r.stdout);
    ran(s.harness().args(["trace", "show", "missing.jsonl"])).usage_error(&["missing.jsonl"]);
}

#[test]
fn a_failed_run_and_batch_traces_read_back() {
    let s = Scratch::new();
    let script = s.script(&[call("calculate", json!({"expression": "1+1"}))]);
    let r = ran(s.harness().args(["run", "x", "-q", "--trace", "failed.jsonl", "--script"]).arg(&script));
    assert_eq!(r.code, 1);
    let r = ran(s.harness().args(["trace", "show", "failed.jsonl"]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    show_snapshot("trace-show-a-failed-run", &s, &r.stdout);

    let input = s.write("requests.jsonl", "{\"id\": \"a/1\", \"request\": \"calculate 2*3\"}\n");
    let r = ran(s.harness().arg("batch").arg(&input).args(["--out", "out.jsonl", "--traces", "tr", "-q"]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let r = ran(s.harness().args(["trace", "show", "tr/a%2F1.jsonl"]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    show_snapshot("trace-show-a-batch-run", &s, &r.stdout);
    let r = ran(s.harness().args(["trace", "html", "tr/a%2F1.jsonl", "-o", "a.html"]));
    assert_eq!(r.code, 0, "{}", r.stderr);
}

#[test]
fn the_html_report_is_self_contained_and_shows_trace_text_as_text() {
    let s = Scratch::new();
    let trace = traced_run(&s);
    let r = ran(s.harness().args(["trace", "html"]).arg(&trace).args(["-o", "report.html"]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let html = std::fs::read_to_string(s.path("report.html")).unwrap();
    for needle in [" src=\"", " href=\"", "url(", "@import", "<link", "<iframe", "<object", "<embed", "<img", "<b>"] {
        assert!(!html.contains(needle), "the report holds {needle:?}");
    }
    assert_eq!(html.matches("<script").count(), 1, "the page's own script only");
    assert!(html.contains("default-src 'none'"), "a policy that blocks every request");
    assert!(html.contains("&lt;script&gt;document.title="));
}

fn chromium() -> PathBuf {
    let found = ["/usr/bin/chromium", "/usr/bin/chromium-browser"].into_iter().map(PathBuf::from).find(|p| p.exists());
    found.unwrap_or_else(|| {
        panic!(
            "this test renders the HTML report in headless Chromium, which is not installed: run \
             `apt-get install -y chromium` (Debian's package; .ci/run installs it when missing)"
        )
    })
}

/// Runs headless Chromium on a local file with a fresh profile and returns its stdout.
fn headless(page: &Path, args: &[&str]) -> String {
    let profile = tempfile::tempdir().unwrap();
    let mut child = Command::new(chromium())
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run"])
        .args(["--disable-background-networking", "--disable-component-update", "--disable-sync"])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(args)
        .arg(format!("file://{}", page.display()))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stdout.read_to_string(&mut text);
        text
    });
    let deadline = Instant::now() + Duration::from_secs(120);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("headless Chromium did not finish within 120 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    reader.join().unwrap()
}

#[test]
fn the_html_report_renders_in_headless_chromium_and_runs_no_script_from_the_trace() {
    let s = Scratch::new();
    let trace = traced_run(&s);
    let r = ran(s.harness().args(["trace", "html"]).arg(&trace).args(["-o", "report.html"]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let page = s.path("report.html");

    let dom = headless(&page, &["--dump-dom"]);
    assert!(dom.contains("<body data-ready=\"1\">"), "the page's own script ran (its CSP hash is right):\n{dom}");
    assert!(dom.contains("showing 5 of 5 steps"), "the script counted the steps:\n{dom}");
    assert!(dom.contains("<nav id=\"controls\">"), "the script showed the filters");
    assert_eq!(dom.matches("<li class=\"step ").count(), 5, "one row a step");
    for status in ["rejected", "error", "ok", "finished"] {
        assert!(dom.contains(&format!("class=\"step st-{status}\"")), "a {status} step");
    }
    assert!(!dom.contains("PWNED") && !dom.contains("data-pwned=\""), "a script from the trace ran:\n{dom}");
    assert!(!dom.contains("<img") && !dom.contains("<b>bold?</b>"), "markup from the trace was parsed");
    assert!(dom.contains("&lt;script&gt;document.title='PW'+'NED'"), "the script is shown as text");
    assert!(dom.contains("&lt;/pre&gt;&lt;/details&gt;&lt;b&gt;bold?&lt;/b&gt;"));
    assert!(dom.contains("tool_error") && dom.contains("unknown_tool") && dom.contains("no_json"));

    let shot = s.path("report.png");
    headless(&page, &["--window-size=1280,1400", &format!("--screenshot={}", shot.display())]);
    let png = std::fs::read(&shot).expect("Chromium wrote the screenshot");
    assert!(png.starts_with(b"\x89PNG") && png.len() > 20_000, "a rendered page, {} bytes", png.len());
    if let Ok(dir) = std::env::var("HARNESS_E2E_KEEP") {
        let _ = std::fs::copy(&shot, Path::new(&dir).join("trace-report.png"));
        let _ = std::fs::copy(&page, Path::new(&dir).join("trace-report.html"));
    }
}

/// The three JSON Schemas of docs/traces.md, by line kind, compiled.
fn documented_schemas() -> Vec<(String, jsonschema::Validator)> {
    let doc = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/traces.md")).unwrap();
    let mut schemas = Vec::new();
    for part in doc.split("<!-- schema: ").skip(1) {
        let (kind, rest) = part.split_once(" -->").unwrap();
        let body = rest.split_once("```json\n").unwrap().1.split_once("\n```").unwrap().0;
        let schema: Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("schema {kind} is not JSON: {e}"));
        let validator = jsonschema::validator_for(&schema).unwrap_or_else(|e| panic!("schema {kind}: {e}"));
        schemas.push((kind.to_owned(), validator));
    }
    assert_eq!(schemas.iter().map(|s| s.0.as_str()).collect::<Vec<_>>(), ["start", "step", "compaction", "end"]);
    schemas
}

/// Checks every line of a real trace against the documented schema of its kind.
pub(crate) fn assert_matches_documented_schemas(lines: &[Value]) {
    let schemas = documented_schemas();
    for (i, line) in lines.iter().enumerate() {
        let kind = if line.get("step").is_some() { "step" } else { line["kind"].as_str().unwrap() };
        let (_, validator) = schemas.iter().find(|(k, _)| k == kind).unwrap();
        let errors: Vec<String> =
            validator.iter_errors(line).map(|e| format!("{} at {}", e, e.instance_path())).collect();
        assert!(errors.is_empty(), "line {} ({kind}) breaks docs/traces.md: {errors:?}\n{line}", i + 1);
    }
}

#[test]
fn a_trace_says_what_was_asked_with_what_and_how_it_ended_as_documented() {
    let s = Scratch::new();
    s.write("limits.toml", "max_steps = 6\n");
    let trace = traced_run(&s);
    let lines = s.trace_lines(trace.file_name().unwrap().to_str().unwrap());
    assert_eq!(lines.len(), 7, "a first line, five steps, a last line");
    let first = &lines[0];
    assert_eq!((first["kind"].as_str(), first["request"].as_str()), (Some("start"), Some("x")));
    assert_eq!(first["harness_version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(first["provider"], "scripted");
    assert_eq!(first["limits"]["max_steps"], 8);
    assert!(first.get("config_source").is_none(), "no configuration was read: {first}");
    let tools = first["tools"].as_array().unwrap();
    assert_eq!(tools[0]["name"], "finish");
    let calculate = tools.iter().find(|t| t["name"] == "calculate").expect("calculate offered");
    assert_eq!((calculate["source"].as_str(), calculate["plugin"].as_str()), (Some("plugin"), Some("calc")));
    let step = &lines[4];
    assert_eq!(step["reply"]["calls"][0]["name"], "calculate", "the model's whole reply is kept: {step}");
    assert!(step["reply"]["calls"][0].get("id").is_some(), "the id as the model gave it (none, from a script)");
    let last = &lines[6];
    assert_eq!(
        (last["kind"].as_str(), last["status"].as_str(), last["steps"].as_u64()),
        (Some("end"), Some("finished"), Some(5))
    );
    assert!(last["answer"].as_str().unwrap().starts_with("42 "));
    assert_matches_documented_schemas(&lines);

    // With a configuration file: its path and hash are recorded.
    let script = s.script(&[call("finish", json!({ "answer": 1 }))]);
    let r = ran(s
        .harness()
        .args(["run", "x", "-q", "--trace", "c.jsonl", "--config", "limits.toml", "--script"])
        .arg(&script));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let lines = s.trace_lines("c.jsonl");
    assert_eq!(lines[0]["limits"]["max_steps"], 6);
    assert!(lines[0]["config_source"].as_str().unwrap().ends_with("limits.toml"));
    let hash = harness_core::sha256_hex(b"max_steps = 6\n");
    assert_eq!(lines[0]["config_hash"], hash.as_str());
    assert_matches_documented_schemas(&lines);
}

#[test]
fn step_and_time_budgets_are_told_apart_by_the_last_line() {
    let s = Scratch::new();
    let echo = |v: u64| call("fault_echo", json!({ "value": v }));
    let script = s.script(&[echo(1), echo(2), echo(3)]);
    let r = ran(s
        .harness()
        .args(["run", "x", "-q", "--enable", "fault", "--max-steps", "2", "--trace", "steps.jsonl", "--script"])
        .arg(&script));
    assert_eq!(r.code, 3, "{}", r.stderr);
    let lines = s.trace_lines("steps.jsonl");
    let last = lines.last().unwrap();
    assert_eq!(
        (last["status"].as_str(), last["error"]["code"].as_str()),
        (Some("step_budget_exhausted"), Some("step_budget_exhausted"))
    );
    assert_matches_documented_schemas(&lines);
    let r = ran(s.harness().args(["trace", "show", "steps.jsonl"]));
    show_snapshot("trace-show-step-budget-exhausted", &s, &r.stdout);

    let script = s.script(&[call("fault_sleep", json!({ "ms": 3000 })), echo(1), echo(2)]);
    let r = ran(s
        .harness()
        .args(["run", "x", "-q", "--enable", "fault", "--max-seconds", "0.3", "--trace", "time.jsonl", "--script"])
        .arg(&script));
    assert_eq!(r.code, 3, "{}", r.stderr);
    let lines = s.trace_lines("time.jsonl");
    let last = lines.last().unwrap();
    assert_eq!(last["status"], "time_budget_exhausted", "{last}");
    assert_eq!(lines[0]["limits"]["max_duration_ms"], 300);
    assert_matches_documented_schemas(&lines);
    let r = ran(s.harness().args(["trace", "show", "time.jsonl"]));
    show_snapshot("trace-show-time-budget-exhausted", &s, &r.stdout);
}

#[test]
fn a_killed_run_ended_without_a_record() {
    let s = Scratch::new();
    let script = s.script(&[call("fault_echo", json!({ "value": 1 })), call("fault_sleep", json!({ "ms": 60_000 }))]);
    let mut child = s
        .harness()
        .args(["run", "x", "-q", "--enable", "fault", "--trace", "k.jsonl", "--script"])
        .arg(&script)
        .spawn()
        .unwrap();
    // Killed while step 2 sleeps: the first line and step 1 are on disk, the last line never is.
    wait_for_lines(&s.path("k.jsonl"), 2, Duration::from_secs(60));
    child.kill().unwrap();
    child.wait().unwrap();
    let lines = s.trace_lines("k.jsonl");
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert_matches_documented_schemas(&lines);
    let r = ran(s.harness().args(["trace", "show", "k.jsonl"]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    show_snapshot("trace-show-a-killed-run", &s, &r.stdout);
    let r = ran(s.harness().args(["trace", "html", "k.jsonl", "-o", "k.html"]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(std::fs::read_to_string(s.path("k.html")).unwrap().contains("ended without a record (killed?)"));
}

#[test]
fn traces_of_older_harnesses_still_read() {
    let s = Scratch::new();
    // Format 1: steps only, no first or last line, no reply.
    let old = concat!(
        "{\"step\":1,\"tool\":\"calculate\",\"arguments\":{\"expression\":\"6*7\"},\"status\":\"ok\",\"result\":42,\"plugin\":\"calc\",\"plugin_version\":\"0.1.0\",\"offered\":\"all\",\"duration_us\":190,\"model_us\":3}\n",
        "{\"step\":2,\"tool\":\"finish\",\"arguments\":{\"answer\":42},\"status\":\"finished\",\"result\":42,\"offered\":\"all\",\"duration_us\":20,\"model_us\":2}\n",
    );
    s.write("old.jsonl", old);
    let r = ran(s.harness().args(["trace", "show", "old.jsonl"]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    show_snapshot("trace-show-format-1", &s, &r.stdout);
    let r = ran(s.harness().args(["trace", "html", "old.jsonl", "-o", "old.html"]));
    assert_eq!(r.code, 0, "{}", r.stderr);
}
