//! `harness trace show` and `harness trace html` on traces of real runs, and the HTML report
//! rendered in headless Chromium.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::{Scratch, ran};

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
    let r = ran(s.harness().args(["run", "x", "-q", "--trace", "t.jsonl", "--script"]).arg(&script));
    assert_eq!(r.code, 0, "{}", r.stderr);
    s.path("t.jsonl")
}

#[test]
fn show_prints_a_table_of_every_kind_of_step() {
    let s = Scratch::new();
    let trace = traced_run(&s);
    let r = ran(s.harness().args(["trace", "show"]).arg(&trace));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert!(
        lines[0].starts_with("STEP  TOOL") && lines[0].contains("STATUS") && lines[0].contains("ERROR"),
        "{}",
        r.stdout
    );
    let row = |n: usize| lines[n].split_whitespace().collect::<Vec<_>>();
    assert_eq!(row(1)[..3], ["1", "-", "rejected"]);
    assert!(lines[1].contains("no_json") && lines[1].contains("text \"<script>"), "{}", lines[1]);
    assert_eq!(row(2)[..3], ["2", "calculate", "error"]);
    assert!(lines[2].contains("tool_error"), "{}", lines[2]);
    assert_eq!(row(3)[..3], ["3", "no_such_tool", "rejected"]);
    assert!(lines[3].contains("unknown_tool"), "{}", lines[3]);
    assert_eq!(row(4)[..3], ["4", "calculate", "ok"]);
    assert!(lines[4].contains("{\"expression\":\"6*7\"} → 42"), "{}", lines[4]);
    assert_eq!(row(5)[..3], ["5", "finish", "finished"]);
    assert!(lines.iter().all(|l| l.chars().count() < 200), "one line a step");
    assert!(r.stdout.contains("5 steps: 1 ok, 2 rejected, 1 error, 1 finished"), "{}", r.stdout);
    assert!(r.stdout.contains("\nfinished: \"42 <script>"), "{}", r.stdout);
}

#[test]
fn show_json_passes_good_lines_through_and_numbers_the_bad_ones() {
    let s = Scratch::new();
    let trace = traced_run(&s);
    let good = std::fs::read_to_string(&trace).unwrap();
    let mut text = good.clone();
    text.push_str("{\"step\": 6, \"status\": \"maybe\", \"duration_us\": 1}\nnot json\n{\"step\": 7, \"tool\": \"fin");
    s.write("t.jsonl", &text);
    let r = ran(s.harness().args(["trace", "show", "--json"]).arg(&trace));
    assert_eq!(r.code, 1, "bad lines make exit 1: {}", r.stderr);
    assert_eq!(r.stdout, good, "good lines pass through unchanged");
    for (line, what) in [(6, "not a trace step: unknown variant `maybe`"), (7, "not JSON"), (8, "not JSON")] {
        let want = format!("harness: trace: {}:{line}: {what}", trace.display());
        assert!(r.stderr.contains(&want), "missing {want:?} in\n{}", r.stderr);
    }
    let r = ran(s.harness().args(["trace", "show"]).arg(&trace));
    assert_eq!(r.code, 1);
    assert!(r.stdout.contains("5 steps"), "the table still shows the good lines: {}", r.stdout);
    let r = ran(s.harness().args(["trace", "show", "missing.jsonl"]));
    assert_eq!(r.code, 2, "{}", r.stderr);
}

#[test]
fn a_failed_run_and_batch_traces_read_back() {
    let s = Scratch::new();
    let script = s.script(&[call("calculate", json!({"expression": "1+1"}))]);
    let r = ran(s.harness().args(["run", "x", "-q", "--trace", "failed.jsonl", "--script"]).arg(&script));
    assert_eq!(r.code, 1);
    let r = ran(s.harness().args(["trace", "show", "failed.jsonl"]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("provider_error") && r.stdout.contains("\nfailed: provider_error"), "{}", r.stdout);

    let input = s.write("requests.jsonl", "{\"id\": \"a/1\", \"request\": \"calculate 2*3\"}\n");
    let r = ran(s.harness().arg("batch").arg(&input).args(["--out", "out.jsonl", "--traces", "tr", "-q"]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let r = ran(s.harness().args(["trace", "show", "tr/a%2F1.jsonl"]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("{\"expression\":\"2*3\"} → 6"), "{}", r.stdout);
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
