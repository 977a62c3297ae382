//! A model server that misbehaves, through the binary: `harness batch` and `harness run`
//! against an OpenAI-compatible stand-in on 127.0.0.1 that fails on purpose (a 500, a
//! connection closed without an answer, a stall past `--timeout`, a 200 whose body is cut
//! short), that is down for a while and comes back, or that is not there at all.

use std::collections::{HashMap, HashSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{Scratch, ran};

/// A way the server fails a request on purpose.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Fault {
    /// `500 Internal Server Error`.
    Status500,
    /// The request is read, then the connection closed without a byte of answer.
    Close,
    /// No answer until long after the client's `--timeout`.
    Stall,
    /// `200 OK`, then half the body and the connection closed.
    CutBody,
}

const FAULTS: [Fault; 4] = [Fault::Status500, Fault::Close, Fault::Stall, Fault::CutBody];

/// How the server behaves.
#[derive(Debug, Clone, Default)]
struct Behaviour {
    /// Percent of attempts failed on purpose, each with one of [`FAULTS`].
    fault_percent: u64,
    /// The most attempts of one request failed on purpose.
    max_faults: u64,
    /// After this many connections, the server is down (nothing listens) for the given time.
    outage: Option<(usize, Duration)>,
}

/// What the server saw.
#[derive(Debug, Default)]
struct Log {
    /// Requests that arrived, whatever became of them.
    requests: usize,
    /// Faults injected, by kind.
    faults: HashMap<Fault, usize>,
    /// Attempts per conversation (a request's body), to decide its faults.
    attempts: HashMap<String, u64>,
    /// Conversations answered with a whole 200.
    answered: HashSet<String>,
    /// Requests for a conversation that had been answered already: must stay 0.
    asked_again: usize,
}

/// An OpenAI-compatible stand-in. A request whose last message is the user's `double N` is
/// answered with a `calculate` call of `N*2`; one whose last message is a tool result with
/// that calculation's value, with `finish` and that value. Every answer closes its connection,
/// so that each request is one connection (and an outage refuses the next one).
struct ChaosApi {
    base_url: String,
    log: Arc<Mutex<Log>>,
    /// A status the server answers every request with instead (0: none): 400, the request's
    /// fault; 429, a rate limit.
    refusing: Arc<AtomicU16>,
}

impl ChaosApi {
    fn serve(behaviour: Behaviour) -> Self {
        Self::serve_on(TcpListener::bind("127.0.0.1:0").unwrap(), behaviour)
    }

    fn serve_on(listener: TcpListener, behaviour: Behaviour) -> Self {
        let addr = listener.local_addr().unwrap();
        let log = Arc::new(Mutex::new(Log::default()));
        let refusing = Arc::new(AtomicU16::new(0));
        let (shared, refuse) = (log.clone(), refusing.clone());
        std::thread::spawn(move || accept(listener, addr, &behaviour, &shared, &refuse));
        Self { base_url: format!("http://{addr}/v1"), log, refusing }
    }

    fn log(&self) -> std::sync::MutexGuard<'_, Log> {
        self.log.lock().unwrap()
    }
}

fn accept(mut listener: TcpListener, addr: SocketAddr, b: &Behaviour, log: &Arc<Mutex<Log>>, refuse: &Arc<AtomicU16>) {
    let mut accepted = 0;
    loop {
        let Ok((stream, _)) = listener.accept() else { return };
        accepted += 1;
        let (log, refuse, b2) = (log.clone(), refuse.clone(), b.clone());
        std::thread::spawn(move || answer(stream, &b2, &log, &refuse));
        if let Some((after, down)) = b.outage
            && accepted == after
        {
            // Down: nothing listens, so connections are refused; then up again on the same port.
            // The outage's length is the behaviour under test: a fixed time.
            drop(listener);
            std::thread::sleep(down);
            // The port was just ours; another process taking it meanwhile fails the test by
            // name rather than hanging it.
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            listener = loop {
                match TcpListener::bind(addr) {
                    Ok(l) => break l,
                    Err(e) if std::time::Instant::now() > deadline => panic!("cannot listen on {addr} again: {e}"),
                    Err(_) => std::thread::sleep(Duration::from_millis(50)),
                }
            };
        }
    }
}

/// Reads one request and answers it, or fails it on purpose.
fn answer(stream: TcpStream, b: &Behaviour, log: &Mutex<Log>, refusing: &AtomicU16) {
    stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut reader = BufReader::new(stream);
    let Some(body) = read_request(&mut reader) else { return };
    let key = body["messages"].to_string();
    let fault = {
        let mut log = log.lock().unwrap();
        log.requests += 1;
        if log.answered.contains(&key) {
            log.asked_again += 1;
        }
        let attempt = log.attempts.entry(key.clone()).or_default();
        *attempt += 1;
        let roll = fnv(&format!("{key}#{attempt}"));
        let fault =
            (*attempt <= b.max_faults && roll % 100 < b.fault_percent).then(|| FAULTS[(roll / 100 % 4) as usize]);
        if let Some(f) = fault {
            *log.faults.entry(f).or_default() += 1;
        }
        fault
    };
    let mut stream = reader.into_inner();
    let reply = match refusing.load(Ordering::SeqCst) {
        0 => (200, reply_to(&body)),
        status => (status, json!({"error": {"message": "refused on purpose", "type": "invalid_request_error"}})),
    };
    let text = reply.1.to_string();
    match fault {
        Some(Fault::Status500) => {
            let _ = write_response(&mut stream, 500, r#"{"error": {"message": "failing on purpose"}}"#);
        }
        Some(Fault::Close) => {}
        // A server that stalls past the client's timeout: the slowness is the fault under test.
        Some(Fault::Stall) => std::thread::sleep(Duration::from_secs(4)),
        Some(Fault::CutBody) => {
            // No Content-Length: the body ends where the connection does.
            let head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n";
            let _ = stream.write_all(format!("{head}{}", &text[..text.len() / 2]).as_bytes());
        }
        None => {
            if write_response(&mut stream, reply.0, &text).is_ok() && reply.0 == 200 {
                log.lock().unwrap().answered.insert(key);
            }
        }
    }
}

fn read_request(reader: &mut BufReader<TcpStream>) -> Option<Value> {
    let mut length = 0;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).ok()? == 0 {
            return None;
        }
        if line == "\r\n" {
            break;
        }
        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            length = v.trim().parse().ok()?;
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    serde_json::from_slice(&body).ok()
}

fn write_response(stream: &mut TcpStream, status: u16, body: &str) -> std::io::Result<()> {
    let response = format!(
        "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(response.as_bytes())?;
    stream.flush()
}

/// The model's part: `double N` asks for `N*2`; a tool result is the answer.
fn reply_to(body: &Value) -> Value {
    let last = body["messages"].as_array().and_then(|m| m.last()).cloned().unwrap_or(Value::Null);
    let (name, arguments) = match last["role"].as_str() {
        Some("tool") => {
            let value: Value = serde_json::from_str(last["content"].as_str().unwrap_or("null")).unwrap_or(Value::Null);
            ("finish", json!({ "answer": value }))
        }
        _ => {
            let n = last["content"].as_str().and_then(|c| c.strip_prefix("double ")).unwrap_or("0");
            ("calculate", json!({ "expression": format!("{n}*2") }))
        }
    };
    json!({
        "id": "chatcmpl-chaos", "object": "chat.completion", "created": 1, "model": "m",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": null,
            "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": name, "arguments": arguments.to_string()}}]}}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13}
    })
}

/// FNV-1a: the same faults on every run of the test.
fn fnv(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3))
}

/// An address on 127.0.0.1 that nothing listens on: free a moment ago.
fn closed_port() -> SocketAddr {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap()
}

/// `n` requests, `double 0` to `double n-1`, ids `r0` ...
fn doubling_requests(s: &Scratch, n: u64) -> PathBuf {
    let lines: Vec<String> =
        (0..n).map(|i| json!({"id": format!("r{i}"), "request": format!("double {i}")}).to_string()).collect();
    s.write("requests.jsonl", &(lines.join("\n") + "\n"))
}

/// `harness batch REQUESTS --out out.jsonl` against `base_url`.
fn batch(s: &Scratch, input: &PathBuf, base_url: &str) -> std::process::Command {
    let mut cmd = s.harness();
    cmd.arg("batch")
        .arg(input)
        .args(["--out", "out.jsonl", "--provider", "openai", "--model", "m", "--base-url", base_url])
        .args(["--api-key-env", "E2E_CHAOS_KEY", "--progress-every", "1"])
        .env("E2E_CHAOS_KEY", "sk-e2e");
    cmd
}

fn results(s: &Scratch) -> Vec<Value> {
    let text = std::fs::read_to_string(s.path("out.jsonl")).unwrap_or_default();
    text.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// Every request of `0..n` has exactly one line, finished with its right answer.
fn all_finished_once(out: &[Value], n: u64) {
    let mut seen = HashSet::new();
    for line in out {
        let id = line["id"].as_str().unwrap();
        assert!(seen.insert(id.to_owned()), "two lines for {id}");
        let i: u64 = id[1..].parse().unwrap();
        assert_eq!((line["status"].as_str(), line["answer"].as_u64()), (Some("finished"), Some(2 * i)), "{line}");
    }
    assert_eq!(seen.len() as u64, n);
}

fn retries_in(out: &[Value]) -> u64 {
    out.iter().map(|l| l["retries"].as_u64().unwrap()).sum()
}

#[test]
fn a_server_failing_in_each_of_four_ways_loses_no_run_and_no_answer_is_asked_twice() {
    let s = Scratch::new();
    // At most two faults a request, so that three retries always get an answer.
    let api = ChaosApi::serve(Behaviour { fault_percent: 35, max_faults: 2, outage: None });
    let input = doubling_requests(&s, 40);
    let r = ran(batch(&s, &input, &api.base_url).args(["--concurrency", "8", "--retries", "3", "--timeout", "1"]));
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let out = results(&s);
    all_finished_once(&out, 40);
    let log = api.log();
    assert_eq!(log.asked_again, 0, "a request was asked again after it had its answer");
    for fault in FAULTS {
        assert!(log.faults.get(&fault).is_some_and(|&n| n > 0), "no {fault:?} injected: {:?}", log.faults);
    }
    let injected: usize = log.faults.values().sum();
    // Every fault was retried, and nothing else was: two requests a run, plus the retries.
    assert_eq!(retries_in(&out), injected as u64, "{:?}", log.faults);
    assert_eq!(log.requests as u64, 2 * 40 + injected as u64);
}

#[test]
fn a_server_down_for_a_while_is_waited_out_and_no_run_fails() {
    let s = Scratch::new();
    // Down after 10 connections, long enough that requests outlast their retries.
    let api = ChaosApi::serve(Behaviour { outage: Some((10, Duration::from_secs(4))), ..Behaviour::default() });
    let input = doubling_requests(&s, 24);
    let r = ran(batch(&s, &input, &api.base_url).args(["--concurrency", "4", "--retries", "1"]));
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let out = results(&s);
    all_finished_once(&out, 24);
    assert_eq!(api.log().asked_again, 0);
    assert!(retries_in(&out) > 0, "the outage cost no retry: it did not happen");
    assert!(r.stdout.contains("outages: 1 "), "{}", r.stdout);
}

#[test]
fn a_batch_against_a_closed_port_stops_at_max_outage_unrun_and_resumes_when_a_server_is_up() {
    let s = Scratch::new();
    let addr = closed_port();
    let base_url = format!("http://{addr}/v1");
    let input = doubling_requests(&s, 12);
    let command = |s: &Scratch| {
        let mut cmd = batch(s, &input, &base_url);
        cmd.args(["--concurrency", "3", "--retries", "1", "--max-outage", "2"]);
        cmd
    };
    let r = ran(&mut command(&s));
    assert_eq!(r.code, 6, "{}\n{}", r.stdout, r.stderr);
    assert!(results(&s).is_empty(), "no request was run, so none has a line: {:?}", results(&s));
    assert!(
        r.stdout.contains("stopped: the model server did not answer") && r.stdout.contains("12 requests not run"),
        "{}",
        r.stdout
    );

    let api = ChaosApi::serve_on(TcpListener::bind(addr).unwrap(), Behaviour::default());
    let r = ran(&mut command(&s));
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    all_finished_once(&results(&s), 12);
    let log = api.log();
    assert_eq!((log.asked_again, log.requests), (0, 24));
}

#[test]
fn runs_failed_by_the_provider_exit_5_and_retry_failed_runs_them_again() {
    let s = Scratch::new();
    let api = ChaosApi::serve(Behaviour::default());
    let input = doubling_requests(&s, 6);
    api.refusing.store(400, Ordering::SeqCst);
    let r = ran(&mut batch(&s, &input, &api.base_url));
    assert_eq!(r.code, 5, "{}\n{}", r.stdout, r.stderr);
    let out = results(&s);
    assert_eq!(out.len(), 6);
    for line in &out {
        assert_eq!((line["status"].as_str(), line["error"]["code"].as_str()), (Some("failed"), Some("provider_error")));
        assert_eq!(line["retries"], 0, "a 400 is the request's fault: not retried");
    }
    assert_eq!(api.log().requests, 6);
    // The same command: nothing runs, the failures stand.
    assert_eq!(ran(&mut batch(&s, &input, &api.base_url)).code, 5);
    assert_eq!(ran(batch(&s, &input, &api.base_url).arg("--allow-failures")).code, 0);
    assert_eq!(api.log().requests, 6);

    api.refusing.store(0, Ordering::SeqCst);
    let r = ran(batch(&s, &input, &api.base_url).arg("--retry-failed"));
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let out = results(&s);
    assert_eq!(out.len(), 12, "the new lines are appended");
    all_finished_once(&out[6..], 6);
    assert_eq!(ran(batch(&s, &input, &api.base_url).arg("--retry-failed")).code, 0);
    assert_eq!(results(&s).len(), 12, "nothing failed is left to run again");
}

#[test]
fn a_single_run_waits_out_a_short_outage_when_asked_to() {
    let s = Scratch::new();
    let addr = closed_port();
    // Nothing listens for the first three seconds; one retry is over well before that. The
    // outage's length is the behaviour under test: a fixed time.
    let up = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(3));
        ChaosApi::serve_on(TcpListener::bind(addr).unwrap(), Behaviour::default())
    });
    let r = ran(s
        .harness()
        .args(["run", "double 21", "--json", "--provider", "openai", "--model", "m", "--retries", "1"])
        .args(["--max-outage", "20"])
        .args(["--base-url", &format!("http://{addr}/v1"), "--api-key-env", "E2E_CHAOS_KEY"])
        .env("E2E_CHAOS_KEY", "sk-e2e"));
    let api = up.join().unwrap();
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let out = r.json();
    assert_eq!((out["status"].as_str(), out["answer"].as_u64()), (Some("finished"), Some(42)));
    assert!(out["retries"].as_u64().is_some_and(|n| n > 1), "{out}");
    assert_eq!(api.log().asked_again, 0);
}

#[test]
fn a_single_run_against_a_dead_server_fails_after_its_retries_and_says_how_many() {
    let s = Scratch::new();
    let addr = closed_port();
    let r = ran(s
        .harness()
        .args(["run", "double 21", "--json", "--provider", "openai", "--model", "m", "--retries", "2"])
        .args(["--base-url", &format!("http://{addr}/v1"), "--api-key-env", "E2E_CHAOS_KEY"])
        .env("E2E_CHAOS_KEY", "sk-e2e"));
    assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
    let out = r.json();
    assert_eq!(out["status"], "failed", "{out}");
    // The message and the count agree: the request's own retries, no outage wait after them.
    assert_eq!(out["retries"], 2, "{out}");
    assert!(out["error"]["message"].as_str().is_some_and(|m| m.contains("(after 2 retries)")), "{out}");
    assert!(!r.stderr.contains("looks down"), "no outage wait: {}", r.stderr);
}

#[test]
fn past_the_retry_budget_failures_are_not_retried_and_the_summary_says_so() {
    let s = Scratch::new();
    let api = ChaosApi::serve(Behaviour::default());
    api.refusing.store(429, Ordering::SeqCst);
    let input = doubling_requests(&s, 20);
    let r = ran(batch(&s, &input, &api.base_url).args(["--retries", "3", "--retry-budget", "0", "--concurrency", "2"]));
    assert_eq!(r.code, 5, "{}\n{}", r.stdout, r.stderr);
    let out = results(&s);
    assert_eq!(out.len(), 20);
    // A budget of no share still allows its floor of 10 retries, over the whole batch.
    assert_eq!(retries_in(&out), 10);
    assert_eq!(api.log().requests, 20 + 10);
    let spent = out
        .iter()
        .filter(|l| l["error"]["message"].as_str().is_some_and(|m| m.contains("the retry budget is spent")))
        .count();
    assert!(spent >= 20 - 10 / 3, "{spent} lines say the budget stopped their retries");
    assert!(r.stdout.contains("the retry budget was spent (10 retries"), "{}", r.stdout);
}

#[test]
fn a_run_whose_time_budget_the_outage_spends_runs_again_rather_than_end_out_of_budget() {
    let s = Scratch::new();
    // Down for longer than a run may take: the runs waiting then reach their --max-seconds.
    let api = ChaosApi::serve(Behaviour { outage: Some((4, Duration::from_secs(4))), ..Behaviour::default() });
    let input = doubling_requests(&s, 8);
    let r = ran(batch(&s, &input, &api.base_url).args(["--concurrency", "2", "--retries", "1", "--max-seconds", "2"]));
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let out = results(&s);
    all_finished_once(&out, 8);
    // Every line is a finished run: none out of budget, though runs waited past their limit.
    // A run that runs again starts over, so its first steps were asked twice.
    assert!(out.iter().all(|l| l["steps"] == 2), "{out:?}");
    assert!(r.stdout.contains("outages: 1 "), "{}", r.stdout);
}
