//! `harness batch` through the binary: many runs at once, resuming after a kill, shards,
//! bad input lines, trace files, pacing, and one shared HTTP client.

use std::collections::{BTreeSet, HashMap};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::{BATCH_TIMINGS, Scratch, ran, snapshot};
use crate::wait::wait_for_lines;

fn call(tool: &str, arguments: Value) -> Value {
    json!({ "tool": tool, "arguments": arguments })
}

/// Writes a requests file, one JSON value (or raw text) a line.
fn requests(s: &Scratch, lines: &[String]) -> PathBuf {
    s.write("requests.jsonl", &(lines.join("\n") + "\n"))
}

fn lines_of(values: &[Value]) -> Vec<String> {
    values.iter().map(Value::to_string).collect()
}

/// The result lines of a results file, each parsed.
fn results(s: &Scratch, name: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(s.path(name)).unwrap_or_default();
    text.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{name}: {e}: {l}"))).collect()
}

fn ids(results: &[Value]) -> Vec<String> {
    results.iter().map(|r| r["id"].as_str().map_or_else(|| r["id"].to_string(), str::to_owned)).collect()
}

#[test]
fn two_hundred_scripted_requests_at_concurrency_8_give_200_lines_each_from_its_own_script() {
    let s = Scratch::new();
    let lines: Vec<Value> = (0..200)
        .map(|i| {
            json!({
                "id": format!("r{i}"),
                "request": format!("add {i} to itself"),
                "script": [call("calculate", json!({"expression": format!("{i}+{i}")})), call("finish", json!({"answer": i}))],
            })
        })
        .collect();
    let input = requests(&s, &lines_of(&lines));
    let started = Instant::now();
    let r = ran(s.harness().arg("batch").arg(&input).args([
        "--out",
        "out.jsonl",
        "--concurrency",
        "8",
        "--traces",
        "traces",
        "--provider",
        "scripted",
    ]));
    let took = started.elapsed();
    assert_eq!(r.code, 0, "{}", r.stderr);
    let out = results(&s, "out.jsonl");
    assert_eq!(out.len(), 200);
    let unique: BTreeSet<String> = ids(&out).into_iter().collect();
    assert_eq!(unique.len(), 200);
    for line in &out {
        let i: u64 = line["id"].as_str().unwrap()[1..].parse().unwrap();
        assert_eq!(line["status"], "finished", "{line}");
        assert_eq!(line["answer"], i, "run {i} replayed another request's script: {line}");
        assert_eq!(line["steps"], 2);
        assert_eq!(line["error"], Value::Null);
        assert_eq!(line["usage"], json!({"input_tokens": 0, "output_tokens": 0, "cached_input_tokens": 0}));
        assert!(line["duration_ms"].as_f64().is_some_and(|d| d > 0.0), "{line}");
        let trace = s.trace(line["trace"].as_str().unwrap());
        assert_eq!(trace[0]["result"], 2 * i, "the calculate of run {i}");
    }
    snapshot("batch-summary-200-finished", &s, &r.stdout, &[BATCH_TIMINGS]);
    eprintln!("200 scripted runs at concurrency 8: {took:?} through the binary");
}

#[test]
fn a_batch_killed_midway_resumes_and_every_id_is_done_exactly_once() {
    let s = Scratch::new();
    let script = s.script(&[call("fault_sleep", json!({"ms": 25})), call("finish", json!({"answer": "done"}))]);
    let lines: Vec<Value> = (0..200).map(|i| json!({"id": i, "request": "sleep a little"})).collect();
    let input = requests(&s, &lines_of(&lines));
    let batch = || {
        let mut cmd = s.harness();
        cmd.arg("batch").arg(&input).args(["--out", "out.jsonl", "--concurrency", "4", "--enable", "fault"]);
        cmd.args(["--traces", "traces", "--progress-every", "0.2", "--script"]).arg(&script);
        cmd
    };
    let mut child = batch().stdout(std::process::Stdio::null()).stderr(std::process::Stdio::null()).spawn().unwrap();
    wait_for_lines(&s.path("out.jsonl"), 40, Duration::from_secs(30));
    child.kill().unwrap(); // SIGKILL: no chance to tidy up
    child.wait().unwrap();
    let before = std::fs::read_to_string(s.path("out.jsonl")).unwrap();
    let complete = before.lines().filter(|l| serde_json::from_str::<Value>(l).is_ok()).count();
    assert!((40..200).contains(&complete), "killed after {complete} results: not midway");

    let r = ran(&mut batch());
    assert_eq!(r.code, 0, "{}", r.stderr);
    let out = results(&s, "out.jsonl");
    assert_eq!(out.len(), 200, "one line per request");
    let mut seen: HashMap<String, usize> = HashMap::new();
    for id in ids(&out) {
        *seen.entry(id).or_default() += 1;
    }
    assert_eq!(seen.len(), 200);
    assert!(seen.values().all(|&n| n == 1), "some id ran twice");
    assert!(out.iter().all(|l| l["status"] == "finished" && l["answer"] == "done"));
    assert!(out[..complete].iter().zip(before.lines()).all(|(a, b)| a == &serde_json::from_str::<Value>(b).unwrap()));
    assert!(
        r.stdout.contains(&format!("{} ran, {complete} already done", 200 - complete)),
        "{}\n{}",
        r.stdout,
        r.stderr
    );
    assert!(r.stderr.contains(" done") && r.stderr.contains("runs/s"), "plain progress lines: {}", r.stderr);
    assert_eq!(std::fs::read_dir(s.path("traces")).unwrap().count(), 200);

    // A third time there is nothing left to do.
    let r = ran(&mut batch());
    assert_eq!(r.code, 0, "{}", r.stderr);
    snapshot("batch-summary-nothing-left-to-do", &s, &r.stdout, &[BATCH_TIMINGS]);
    assert_eq!(results(&s, "out.jsonl").len(), 200);
}

#[test]
fn a_torn_last_line_is_cut_and_its_request_runs_again() {
    let s = Scratch::new();
    let script = s.script(&[call("finish", json!({"answer": "new"}))]);
    let lines: Vec<Value> = (0..5).map(|i| json!({"id": format!("r{i}"), "request": "x"})).collect();
    let input = requests(&s, &lines_of(&lines));
    let earlier: String =
        (0..3).map(|i| format!("{{\"id\":\"r{i}\",\"status\":\"finished\",\"answer\":\"old\"}}\n")).collect();
    s.write("out.jsonl", &format!("{earlier}{{\"id\":\"r3\",\"status\":\"fini"));
    let r = ran(s.harness().arg("batch").arg(&input).args(["--out", "out.jsonl", "--script"]).arg(&script));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stderr.contains("cut off a torn last line"), "{}", r.stderr);
    let out = results(&s, "out.jsonl");
    assert_eq!(out.len(), 5);
    assert_eq!(ids(&out[..3]), vec!["r0", "r1", "r2"]);
    let answers: Vec<&str> = out.iter().map(|l| l["answer"].as_str().unwrap()).collect();
    assert_eq!(answers, vec!["old", "old", "old", "new", "new"]);
    let rest: BTreeSet<String> = ids(&out[3..]).into_iter().collect();
    assert_eq!(rest, BTreeSet::from(["r3".to_owned(), "r4".to_owned()]));
}

#[test]
fn two_shards_cover_the_file_exactly_and_split_it_by_line_number() {
    let s = Scratch::new();
    let script = s.script(&[call("finish", json!({"answer": 1}))]);
    let mut lines: Vec<String> = (1..=21).map(|n| json!({"id": format!("l{n}"), "request": "x"}).to_string()).collect();
    lines[6] = "{not json".to_owned(); // line 7, shard 0's
    lines[9] = String::new(); // line 10, blank
    let input = requests(&s, &lines);
    let mut shards = Vec::new();
    for i in 0..2 {
        let out = format!("out{i}.jsonl");
        let r = ran(s
            .harness()
            .arg("batch")
            .arg(&input)
            .args(["--out", &out, "--shard", &format!("{i}/2"), "--script"])
            .arg(&script));
        assert_eq!(r.code, 0, "{}", r.stderr);
        shards.push((ids(&results(&s, &out)).into_iter().collect::<BTreeSet<_>>(), r));
    }
    let want: BTreeSet<String> = (1..=21).filter(|n| ![7, 10].contains(n)).map(|n| format!("l{n}")).collect();
    let (zero, one) = (&shards[0].0, &shards[1].0);
    assert!(zero.is_disjoint(one), "a request ran in both shards");
    assert_eq!(zero.union(one).cloned().collect::<BTreeSet<_>>(), want);
    assert!(zero.iter().all(|id| id[1..].parse::<usize>().unwrap() % 2 == 1), "shard 0 takes lines 1, 3, 5, ...");
    assert!(shards[0].1.stderr.contains("requests.jsonl:7: not JSON"), "{}", shards[0].1.stderr);
    assert!(!shards[1].1.stderr.contains("requests.jsonl:7"), "only the shard that owns a bad line reports it");
    assert!(shards[1].1.stdout.contains("(shard 1/2)"), "{}", shards[1].1.stdout);
}

#[test]
fn malformed_lines_are_reported_with_their_numbers_and_skipped() {
    let s = Scratch::new();
    let script = s.script(&[call("finish", json!({"answer": "ok"}))]);
    let input = requests(
        &s,
        &[
            r#"{"id": "a", "request": "x"}"#.to_owned(),
            "this is not json".to_owned(),
            r#"{"request": "no id"}"#.to_owned(),
            r#"{"id": "a", "request": "again"}"#.to_owned(),
            r#"{"id": "b", "request": 5}"#.to_owned(),
            r#"{"id": "c", "request": "x", "max_steps": 0}"#.to_owned(),
            "[1, 2]".to_owned(),
            r#"{"id": {"k": 1}, "request": "x"}"#.to_owned(),
            r#"{"id": "d", "request": "x", "tags": ["extra keys are fine"]}"#.to_owned(),
        ],
    );
    let r = ran(s.harness().arg("batch").arg(&input).args(["--out", "out.jsonl", "--script"]).arg(&script));
    assert_eq!(r.code, 0, "bad lines never stop the batch: {}", r.stderr);
    // Each bad line named by file and line, with what is wrong with it.
    let named: Vec<&str> = r.stderr.lines().filter(|l| l.contains("requests.jsonl:")).collect();
    snapshot("batch-bad-lines", &s, &named.join("\n"), &[]);
    assert_eq!(
        ids(&results(&s, "out.jsonl")).into_iter().collect::<BTreeSet<_>>(),
        BTreeSet::from(["a".into(), "d".into()])
    );
    snapshot("batch-summary-bad-lines-skipped", &s, &r.stdout, &[BATCH_TIMINGS]);
}

#[test]
fn a_line_may_set_its_own_step_budget() {
    let s = Scratch::new();
    let script = s.script(&[call("calculate", json!({"expression": "1+1"})), call("finish", json!({"answer": 2}))]);
    let input = requests(
        &s,
        &lines_of(&[json!({"id": "short", "request": "x", "max_steps": 1}), json!({"id": "long", "request": "x"})]),
    );
    let r = ran(s
        .harness()
        .arg("batch")
        .arg(&input)
        .args(["--out", "out.jsonl", "--max-steps", "4", "--script"])
        .arg(&script));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let out: HashMap<String, Value> =
        results(&s, "out.jsonl").into_iter().map(|l| (l["id"].as_str().unwrap().to_owned(), l)).collect();
    assert_eq!(out["short"]["status"], "step_budget_exhausted");
    assert_eq!(out["short"]["error"]["code"], "step_budget_exhausted");
    assert_eq!((out["long"]["status"].clone(), out["long"]["steps"].clone()), (json!("finished"), json!(2)));
    snapshot("batch-summary-a-step-budget-exhausted", &s, &r.stdout, &[BATCH_TIMINGS]);
}

#[test]
fn trace_files_are_named_safely_and_never_shared() {
    let s = Scratch::new();
    let script = s.script(&[call("finish", json!({"answer": 1}))]);
    let ids = [json!("a/b"), json!("a_b"), json!("a%2Fb"), json!("../escape"), json!(42), json!("ü")];
    let lines: Vec<Value> = ids.iter().map(|id| json!({"id": id, "request": "x"})).collect();
    let input = requests(&s, &lines_of(&lines));
    let r = ran(s
        .harness()
        .arg("batch")
        .arg(&input)
        .args(["--out", "out.jsonl", "--traces", "traces", "--script"])
        .arg(&script));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let mut names: Vec<String> =
        std::fs::read_dir(s.path("traces")).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    names.sort();
    assert_eq!(
        names,
        vec!["%C3%BC.jsonl", "..%2Fescape.jsonl", "42.jsonl", "a%252Fb.jsonl", "a%2Fb.jsonl", "a_b.jsonl"]
    );
    assert!(!s.path("escape.jsonl").exists());
    for line in results(&s, "out.jsonl") {
        let trace = PathBuf::from(line["trace"].as_str().unwrap());
        assert!(trace.starts_with("traces"), "{line}");
        assert_eq!(s.trace(trace.to_str().unwrap())[0]["tool"], "finish");
    }
}

#[test]
fn rpm_spaces_model_requests_over_the_whole_batch() {
    let s = Scratch::new();
    let script = s.script(&[call("finish", json!({"answer": 1}))]);
    let lines: Vec<Value> = (0..3).map(|i| json!({"id": i, "request": "x"})).collect();
    let input = requests(&s, &lines_of(&lines));
    // 120 a minute: one every 0.5 s, so the third of three runs started together waits 1 s.
    let r =
        ran(s.harness().arg("batch").arg(&input).args(["--out", "out.jsonl", "--rpm", "120", "--script"]).arg(&script));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let mut took: Vec<f64> = results(&s, "out.jsonl").iter().map(|l| l["duration_ms"].as_f64().unwrap()).collect();
    took.sort_by(f64::total_cmp);
    // A floor the pacing guarantees on any machine: the third request's slot is a second after
    // the first's. How fast the first one runs is the machine's, not the pacing's: not asserted.
    assert!(took[2] >= 950.0, "{took:?}");
}

#[test]
fn the_offline_router_serves_a_batch() {
    let s = Scratch::new();
    let input = requests(
        &s,
        &lines_of(&[json!({"id": 1, "request": "calculate 6*7"}), json!({"id": 2, "request": "compose a sonnet"})]),
    );
    let r = ran(s.harness().arg("batch").arg(&input).args(["--out", "out.jsonl", "-q"]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.stderr, "", "quiet");
    let out: HashMap<String, Value> = results(&s, "out.jsonl").into_iter().map(|l| (l["id"].to_string(), l)).collect();
    assert_eq!(out["1"]["answer"], 42);
    assert_eq!(out["2"]["steps"], 1, "a request no tool matches is answered by finish at once");
}

#[test]
fn usage_mistakes_exit_2_before_anything_runs() {
    let s = Scratch::new();
    let input = requests(&s, &lines_of(&[json!({"id": 1, "request": "x"})]));
    for (args, named) in [
        (vec!["--shard", "2/2"], &["--shard", "2/2"][..]),
        (vec!["--shard", "one/two"], &["--shard", "one/two"]),
        (vec!["--concurrency", "0"], &["--concurrency"]),
        (vec!["--rpm", "0"], &["--rpm"]),
        (vec!["--progress-every", "0"], &["--progress-every"]),
        (vec!["--max-steps", "0"], &["--max-steps"]),
    ] {
        ran(s.harness().arg("batch").arg(&input).args(["--out", "out.jsonl"]).args(&args)).usage_error(named);
    }
    ran(s.harness().args(["batch", "missing.jsonl", "--out", "out.jsonl"])).usage_error(&["missing.jsonl"]);
    assert!(!s.path("out.jsonl").exists() || results(&s, "out.jsonl").is_empty());
}

#[test]
fn scripted_without_a_script_needs_one_in_every_line() {
    let s = Scratch::new();
    let input = requests(
        &s,
        &lines_of(&[
            json!({"id": 1, "request": "x", "script": [call("finish", json!({"answer": "own"}))]}),
            json!({"id": 2, "request": "x"}),
        ]),
    );
    let r = ran(s.harness().arg("batch").arg(&input).args(["--out", "out.jsonl", "--provider", "scripted"]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stderr.contains(":2: no \"script\""), "{}", r.stderr);
    let out = results(&s, "out.jsonl");
    assert_eq!((out.len(), out[0]["answer"].clone()), (1, json!("own")));
}

#[test]
fn a_line_with_a_script_is_never_ignored_silently() {
    let s = Scratch::new();
    let input = requests(
        &s,
        &lines_of(&[
            json!({"id": 1, "request": "calculate 6*7"}),
            json!({"id": 2, "request": "x", "script": [call("finish", json!({"answer": "own"}))]}),
        ]),
    );
    // No provider named: the scripts say which one the file is for.
    let r = ran(s.harness().arg("batch").arg(&input).args(["--out", "a.jsonl"]));
    assert!(r.stderr.contains("requests.jsonl:2 has a \"script\": the scripted provider replays it"), "{}", r.stderr);
    let out = results(&s, "a.jsonl");
    assert_eq!((out.len(), out[0]["answer"].clone()), (1, json!("own")), "{out:?}");
    // A provider named that would ignore them: refused, with the line, before anything runs.
    let r = ran(s.harness().arg("batch").arg(&input).args(["--out", "b.jsonl", "--provider", "offline"]));
    r.usage_error(&["requests.jsonl:2", "\"script\"", "offline", "--provider scripted"]);
    assert!(!s.path("b.jsonl").exists() || results(&s, "b.jsonl").is_empty());
}

/// An OpenAI-compatible stand-in on 127.0.0.1 that keeps connections open and answers every
/// request with a finish call; it counts connections and requests.
struct KeepAliveApi {
    base_url: String,
    connections: Arc<AtomicUsize>,
    requests: Arc<AtomicUsize>,
}

impl KeepAliveApi {
    fn serve() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let base_url = format!("http://{}/v1", listener.local_addr().unwrap());
        let (connections, requests) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let (conns, reqs) = (connections.clone(), requests.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { return };
                conns.fetch_add(1, Ordering::SeqCst);
                let reqs = reqs.clone();
                std::thread::spawn(move || {
                    stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
                    let mut reader = BufReader::new(stream);
                    loop {
                        let mut length = 0;
                        let mut got_any = false;
                        loop {
                            let mut line = String::new();
                            if reader.read_line(&mut line).unwrap_or(0) == 0 {
                                return;
                            }
                            if line == "\r\n" && got_any {
                                break;
                            }
                            got_any = true;
                            if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                                length = v.trim().parse().unwrap_or(0);
                            }
                        }
                        let mut body = vec![0; length];
                        if reader.read_exact(&mut body).is_err() {
                            return;
                        }
                        reqs.fetch_add(1, Ordering::SeqCst);
                        let reply = json!({
                            "id": "c", "object": "chat.completion", "created": 1, "model": "m",
                            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": null,
                                "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "finish", "arguments": "{\"answer\": 42}"}}]}}],
                            "usage": {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13}
                        })
                        .to_string();
                        let response = format!(
                            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: keep-alive\r\n\r\n{reply}",
                            reply.len()
                        );
                        if reader.get_mut().write_all(response.as_bytes()).is_err() {
                            return;
                        }
                    }
                });
            }
        });
        Self { base_url, connections, requests }
    }
}

#[test]
fn runs_share_one_http_client_and_its_connections() {
    let s = Scratch::new();
    let api = KeepAliveApi::serve();
    let lines: Vec<Value> = (0..24).map(|i| json!({"id": i, "request": "what is 6*7"})).collect();
    let input = requests(&s, &lines_of(&lines));
    let r = ran(s
        .harness()
        .arg("batch")
        .arg(&input)
        .args(["--out", "out.jsonl", "--concurrency", "3", "--provider", "openai", "--model", "m"])
        .args(["--base-url", &api.base_url, "--api-key-env", "E2E_BATCH_KEY"])
        .env("E2E_BATCH_KEY", "sk-e2e"));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let out = results(&s, "out.jsonl");
    assert_eq!(out.len(), 24);
    assert!(out.iter().all(|l| l["answer"] == 42
        && l["usage"] == json!({"input_tokens": 10, "output_tokens": 3, "cached_input_tokens": 0})));
    assert_eq!(api.requests.load(Ordering::SeqCst), 24);
    let connections = api.connections.load(Ordering::SeqCst);
    // A client per run would open 24. A shared one opens about one per worker: a connection
    // goes back to the pool a moment after its response, so a worker may open one more.
    assert!(connections <= 6, "24 requests over {connections} connections: the client is not shared");
    snapshot("batch-summary-tokens-of-24-requests", &s, &r.stdout, &[BATCH_TIMINGS]);
}

/// A [`snapshot`] filter for the batch id: a hash of the requests file.
const BATCH_ID: (&str, &str) = (r"batch [0-9a-f]{16}", "batch [hash]");

/// Twenty requests, each scripted: a calculation then finish; `q7` has one step, so runs out.
fn twenty_requests(s: &Scratch) -> PathBuf {
    let lines: Vec<Value> = (0..20)
        .map(|i| {
            let script =
                [call("calculate", json!({"expression": format!("{i}*3")})), call("finish", json!({"answer": i * 3}))];
            let steps = if i == 7 { 1 } else { 2 };
            json!({ "id": format!("q{i}"), "request": format!("triple {i}"), "max_steps": steps, "script": script })
        })
        .collect();
    requests(s, &lines_of(&lines))
}

/// A results file's lines as a single process would write them, less what differs from run to
/// run (durations): by id, in file order.
pub(crate) fn comparable(text: &str) -> Vec<Value> {
    let mut lines: Vec<Value> = text
        .lines()
        .map(|l| {
            let mut v: Value = serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"));
            v.as_object_mut().unwrap().remove("duration_ms");
            v
        })
        .collect();
    lines.sort_by_key(|v| v["line"].as_u64());
    lines
}

#[test]
fn shard_auto_under_slurm_and_kubernetes_variables_merges_to_the_single_process_result() {
    let s = Scratch::new();
    let input = twenty_requests(&s);
    let single =
        ran(s.harness().arg("batch").arg(&input).args(["--out", "single.jsonl", "-q", "--provider", "scripted"]));
    assert_eq!(single.code, 0, "{}", single.stderr);
    for i in 0..3 {
        let r = ran(s
            .harness()
            .arg("batch")
            .arg(&input)
            .args(["--out", &format!("slurm-{i}.jsonl"), "--shard", "auto", "-q", "--provider", "scripted"])
            .env("SLURM_ARRAY_TASK_ID", (i + 10).to_string())
            .env("SLURM_ARRAY_TASK_MIN", "10")
            .env("SLURM_ARRAY_TASK_COUNT", "3"));
        assert_eq!(r.code, 0, "{}", r.stderr);
        assert!(r.stdout.contains(&format!("(shard {i}/3)")), "{}", r.stdout);
        let k = ran(s
            .harness()
            .arg("batch")
            .arg(&input)
            .args([
                "--out",
                &format!("k8s-{i}.jsonl"),
                "--shard",
                "auto",
                "--shards",
                "3",
                "-q",
                "--provider",
                "scripted",
            ])
            .env("JOB_COMPLETION_INDEX", i.to_string()));
        assert_eq!(k.code, 0, "{}", k.stderr);
    }
    let want = comparable(&std::fs::read_to_string(s.path("single.jsonl")).unwrap());
    assert_eq!(want.len(), 20);
    assert_eq!(want[7]["status"], "step_budget_exhausted");
    assert_eq!(want[8]["answer"], 24);
    for kind in ["slurm", "k8s"] {
        let merged = format!("{kind}.jsonl");
        let r = ran(s.harness().args(["batch", "merge", "--out", &merged, "--requests"]).arg(&input).args([
            &format!("{kind}-2.jsonl"),
            &format!("{kind}-0.jsonl"),
            &format!("{kind}-1.jsonl"),
        ]));
        assert_eq!(r.code, 0, "{}", r.stderr);
        snapshot(&format!("batch-merge-of-3-shards-{kind}"), &s, &r.stdout, &[BATCH_ID]);
        let text = std::fs::read_to_string(s.path(&merged)).unwrap();
        assert_eq!(comparable(&text), want, "{kind}: the merged records differ from the single process's");
    }
}

#[test]
fn shard_specs_and_merges_that_cannot_work_are_refused_by_name_and_nothing_is_overwritten() {
    let s = Scratch::new();
    let input = twenty_requests(&s);
    let batch = |out: &str, extra: &[&str], env: &[(&str, &str)]| {
        let mut cmd = s.harness();
        cmd.arg("batch").arg(&input).args(["--out", out, "-q", "--provider", "scripted"]).args(extra);
        for (k, v) in env {
            cmd.env(k, v);
        }
        ran(&mut cmd)
    };
    // Each refusal names what is wrong and the fix; together they are one snapshot to read.
    let mut refusals = String::new();
    let r = batch("x.jsonl", &["--shard", "2of4"], &[]);
    r.usage_error(&["2of4"]);
    refusals += &r.stderr;
    let r = batch("x.jsonl", &["--shard", "auto"], &[("JOB_COMPLETION_INDEX", "4")]);
    r.usage_error(&["--shards N"]);
    refusals += &r.stderr;
    let r = batch("x.jsonl", &["--shard", "auto", "--shards", "4"], &[("JOB_COMPLETION_INDEX", "4")]);
    r.usage_error(&["JOB_COMPLETION_INDEX=4", "--shards 4"]);
    refusals += &r.stderr;
    let r = batch("x.jsonl", &["--shard", "auto"], &[("SLURM_ARRAY_TASK_ID", "3"), ("SLURM_ARRAY_TASK_COUNT", "2")]);
    r.usage_error(&["SLURM_ARRAY_TASK_ID=3"]);
    refusals += &r.stderr;
    assert!(!s.path("x.jsonl").exists(), "a refused shard spec wrote its results file");

    for (i, n) in [(0, 2), (1, 2)] {
        assert_eq!(batch(&format!("a{i}.jsonl"), &["--shard", &format!("{i}/{n}")], &[]).code, 0);
    }
    // Another requests file: one line more.
    let other = s.write(
        "other.jsonl",
        &(std::fs::read_to_string(&input).unwrap() + "{\"id\":\"extra\",\"request\":\"x\",\"script\":[]}\n"),
    );
    let r = ran(s.harness().arg("batch").arg(&other).args([
        "--out",
        "b1.jsonl",
        "--shard",
        "1/2",
        "-q",
        "--provider",
        "scripted",
    ]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let merge = |inputs: &[&str], out: &str| ran(s.harness().args(["batch", "merge", "--out", out]).args(inputs));
    let r = merge(&["a0.jsonl", "b1.jsonl"], "m.jsonl");
    r.usage_error(&["b1.jsonl:1", "a0.jsonl:1"]);
    refusals += &r.stderr;
    let r = merge(&["a0.jsonl", "a1.jsonl", "a1.jsonl"], "m.jsonl");
    r.usage_error(&["a1.jsonl:1"]);
    refusals += &r.stderr;
    let r = merge(&["a0.jsonl"], "m.jsonl");
    r.usage_error(&["shard 1/2"]);
    refusals += &r.stderr;
    assert!(!s.path("m.jsonl").exists(), "a refused merge wrote its output");
    s.write("m.jsonl", "keep me\n");
    let r = merge(&["a0.jsonl", "a1.jsonl"], "m.jsonl");
    r.usage_error(&["m.jsonl"]);
    refusals += &r.stderr;
    // Which id a shard file holds first depends on which run ended first.
    let first_id = (r#"id "q\d+" already"#, r#"id "q[N]" already"#);
    snapshot("batch-shard-and-merge-refusals", &s, &refusals, &[BATCH_ID, first_id]);
    assert_eq!(std::fs::read_to_string(s.path("m.jsonl")).unwrap(), "keep me\n");
}

/// Links planted where a batch writes a run's trace or its results, or where `run --trace`
/// writes, are refused with their path named; the file they point to is never written.
#[cfg(unix)]
#[test]
fn links_planted_at_trace_and_result_paths_are_refused_and_never_written_through() {
    let s = Scratch::new();
    let script = s.script(&[call("finish", json!({"answer": 1}))]);
    let input = requests(&s, &lines_of(&[json!({"id": "a", "request": "x"}), json!({"id": "b", "request": "x"})]));
    let precious = s.write("precious.txt", "precious\n");
    std::fs::create_dir_all(s.path("traces")).unwrap();
    std::os::unix::fs::symlink(&precious, s.path("traces/a.jsonl")).unwrap();
    let batch = |out: &str| {
        ran(s.harness().arg("batch").arg(&input).args(["--out", out, "--traces", "traces", "--script"]).arg(&script))
    };
    let r = batch("out.jsonl");
    let out: HashMap<String, Value> =
        results(&s, "out.jsonl").into_iter().map(|v| (v["id"].as_str().unwrap().to_owned(), v)).collect();
    assert_eq!(out["b"]["status"], "finished", "{}", r.stderr);
    let why = out["a"]["error"]["message"].as_str().unwrap_or_default();
    assert!(why.contains("traces/a.jsonl is a symbolic link"), "{}", out["a"]);
    assert_eq!(std::fs::read_to_string(&precious).unwrap(), "precious\n");

    std::os::unix::fs::symlink(&precious, s.path("linked.jsonl")).unwrap();
    let r = batch("linked.jsonl");
    assert_ne!(r.code, 0);
    assert!(r.stderr.contains("linked.jsonl is a symbolic link"), "{}", r.stderr);
    assert_eq!(std::fs::read_to_string(&precious).unwrap(), "precious\n");

    std::os::unix::fs::symlink(&precious, s.path("t.jsonl")).unwrap();
    let r = ran(s.harness().args(["run", "x", "--trace", "t.jsonl", "--script"]).arg(&script));
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("t.jsonl is a symbolic link"), "{}", r.stderr);
    assert_eq!(std::fs::read_to_string(&precious).unwrap(), "precious\n");
}
