//! `harness run` against a real llama.cpp `llama-server` serving a real small model,
//! SmolLM2-135M-Instruct, whose chat template knows no tools: the router-mode ladder and the
//! prompt cache, measured on the server itself.
//!
//! The server and the model come from `cargo xtask setup llama` (built once, cached outside the
//! clone); `cargo xtask test` sets `HARNESS_LLAMA_SERVER` and `HARNESS_LLAMA_MODEL`. Each test
//! starts its own server on a free loopback port and stops it when done.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::{Missing, Scratch, prerequisite, ran};

/// A `llama-server` child process, killed when dropped.
pub(crate) struct LlamaServer {
    child: Child,
    /// `http://127.0.0.1:PORT/v1`.
    pub(crate) base_url: String,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl LlamaServer {
    /// Starts the server with one slot of `context` tokens and waits until it serves; without
    /// the server or the model, the command that provides them.
    pub(crate) fn start(context: u32) -> Result<Self, Missing> {
        Self::with_slots(context, 1)
    }

    /// Starts the server with `context` tokens shared by `slots` slots (each gets its share).
    pub(crate) fn with_slots(context: u32, slots: u32) -> Result<Self, Missing> {
        let server = prerequisite("HARNESS_LLAMA_SERVER", "cargo xtask setup llama")?;
        let model = prerequisite("HARNESS_LLAMA_MODEL", "cargo xtask setup llama")?;
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("llama-server.log");
        let child = Command::new(server)
            .arg("-m")
            .arg(model)
            .args([
                "--host",
                "127.0.0.1",
                "--port",
                &port.to_string(),
                "-c",
                &context.to_string(),
                "-np",
                &slots.to_string(),
            ])
            // One thread: on a busy machine more of them spin against each other (30 times slower
            // here). Greedy sampling with a fixed seed: the same replies every run.
            .args(["-t", "1", "-tb", "1", "--temp", "0", "--seed", "1"])
            // No repacking of the weights into AMX tiles: a sandbox that hides AMX state makes
            // the repacked matrix code crash on CPUs that report AMX.
            .arg("--no-repack")
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&log).unwrap())
            .stderr(std::fs::File::create(dir.path().join("llama-server.err")).unwrap())
            .spawn()
            .unwrap();
        let mut server = Self { child, base_url: format!("http://127.0.0.1:{port}/v1"), log, _dir: dir };
        server.wait_healthy(port);
        Ok(server)
    }

    fn wait_healthy(&mut self, port: u16) {
        let deadline = Instant::now() + Duration::from_secs(180);
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("llama-server exited with {status} before serving:\n{}", self.logs());
            }
            if health(port) {
                return;
            }
            std::thread::sleep(Duration::from_millis(250));
        }
        panic!("llama-server did not answer /health within 180 s:\n{}", self.logs());
    }

    fn logs(&self) -> String {
        let err = self.log.with_extension("err");
        let mut text = std::fs::read_to_string(&self.log).unwrap_or_default();
        text.push_str(&std::fs::read_to_string(err).unwrap_or_default());
        let start = text.len().saturating_sub(4000);
        let start = text.char_indices().map(|(i, _)| i).find(|&i| i >= start).unwrap_or(text.len());
        text[start..].to_owned()
    }
}

impl Drop for LlamaServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether `GET /health` answers 200.
fn health(port: u16) -> bool {
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) else { return false };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    let request = format!("GET /health HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n");
    if stream.write_all(request.as_bytes()).is_err() {
        return false;
    }
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    answer.starts_with("HTTP/1.1 200")
}

/// `harness run REQUEST` against the server with the calculator alone, a trace in `t.jsonl`.
fn harness(s: &Scratch, server: &LlamaServer, request: &str) -> Command {
    let mut cmd = s.harness();
    cmd.args(["run", request, "--provider", "llamacpp", "--base-url", &server.base_url, "--enable", "calc"]).args([
        "--timeout",
        "300",
        "--json",
        "--trace",
        "t.jsonl",
    ]);
    cmd
}

/// Error codes that say a reply was not read as a call.
const UNREAD: &[&str] = &["no_json", "invalid_json", "reply_truncated", "unknown_tool", "reply_too_large"];

#[test]
fn a_model_whose_template_knows_no_tools_is_forced_through_constrained_mode() -> Result<(), Missing> {
    let server = LlamaServer::start(4096)?;
    let s = Scratch::new();
    // A 135M model under greedy decoding: asked "what is 6*7" it fills finish's untyped
    // `answer` with copies of the tool's schema until the token limit; this request it answers
    // in complete calls. The grammar fixes the shape; the model still decides the length.
    let r = ran(harness(&s, &server, "calculate 2+2").args(["--max-steps", "3", "--max-reply-tokens", "256"]));
    // The run ends: finished, or its budget spent; never a provider error.
    assert!(matches!(r.code, 0 | 3), "exit {}: {}\n{}", r.code, r.stderr, server.logs());
    // The server's /props says the template knows no tools: no request is spent finding out.
    assert!(
        r.stderr.contains("does not know tools") && r.stderr.contains("switching to constrained mode"),
        "{}",
        r.stderr
    );
    let start = &s.trace_lines("t.jsonl")[0];
    assert_eq!(
        (start["context"]["tokens"].as_u64(), start["context"]["source"].as_str()),
        (Some(4096), Some("server"))
    );

    let trace = s.trace("t.jsonl");
    assert!(!trace.is_empty());
    for step in &trace {
        // Every reply was read as a call: the step has a tool, and no error says otherwise.
        let code = step["error"]["code"].as_str();
        assert!(step["tool"].is_string() && !code.is_some_and(|c| UNREAD.contains(&c)), "not read as a call: {step}");
        assert_eq!(step["router_mode"], "constrained", "{step}");
    }
    let out = r.json();
    assert!(out["usage"]["input_tokens"].as_u64().unwrap() > 0, "{out}");
    Ok(())
}

#[test]
fn each_request_reuses_all_that_the_previous_one_sent() -> Result<(), Missing> {
    let server = LlamaServer::start(4096)?;
    let s = Scratch::new();
    // The calculator forced at every step but the last: several model calls, none of them finish.
    let r = ran(harness(&s, &server, "what is 6*7, then 6*8, then 6*9").args([
        "--router-mode",
        "constrained",
        "--tool-choice",
        "calculate",
        "--max-steps",
        "4",
        "--max-repeats",
        "0",
        "--max-reply-tokens",
        "96",
    ]));
    assert!(matches!(r.code, 0 | 3), "exit {}: {}\n{}", r.code, r.stderr, server.logs());

    let asked: Vec<(u64, u64, bool)> = s
        .trace("t.jsonl")
        .iter()
        .filter_map(|step| {
            let usage = step.get("usage").filter(|u| u.is_object())?;
            let n = |k: &str| usage[k].as_u64().unwrap();
            Some((n("input_tokens"), n("cached_input_tokens"), step["offered"] == "finish"))
        })
        .collect();
    assert!(asked.len() >= 3, "{asked:?}");
    assert_eq!(asked[0].1, 0, "a fresh server has nothing cached: {asked:?}");
    // The last step forces finish; its request keeps every tool in the system prompt and narrows
    // only the schema, so it too reuses all that the step before sent.
    assert!(asked.last().is_some_and(|a| a.2), "the last step forces finish: {asked:?}");
    for pair in asked.windows(2) {
        let ((before, _, _), (_, cached, _)) = (pair[0], pair[1]);
        assert!(cached >= before, "a request reused {cached} tokens of the previous one's {before}: {asked:?}");
    }
    // `--json` reports the same tokens, step by step.
    let by_step: Vec<(u64, u64)> = r.json()["usage_by_step"]
        .as_array()
        .expect("usage_by_step in --json")
        .iter()
        .map(|u| (u["input_tokens"].as_u64().unwrap(), u["cached_input_tokens"].as_u64().unwrap()))
        .collect();
    assert_eq!(by_step, asked.iter().map(|a| (a.0, a.1)).collect::<Vec<_>>(), "--json and the trace differ");
    let total: Value = r.json()["usage"].clone();
    assert!(total["cached_input_tokens"].as_u64().unwrap() >= asked[1].1, "{total}");
    Ok(())
}

/// Says whether the server refused a request for its size.
fn refused_for_size(server: &LlamaServer) -> bool {
    server.logs().contains("exceeds the available context size")
}

#[test]
fn a_twelve_step_run_with_long_results_fits_a_small_context_and_keeps_the_prefix_cache() -> Result<(), Missing> {
    // Two slots of 512 tokens each: the system prompt, the reply's room and one long result
    // leave little for earlier steps.
    let server = LlamaServer::with_slots(1024, 2)?;
    let s = Scratch::new();
    s.write("h.toml", "[plugins.files]\nroot = \"root\"\n");
    let line = "The quick brown fox jumps over the lazy dog; the harness keeps what fits. ";
    s.write("root/notes.txt", &line.repeat(6));
    let r = ran(s
        .harness()
        .args(["run", "read notes.txt", "--provider", "llamacpp", "--base-url", &server.base_url])
        .args([
            "--config",
            "h.toml",
            "--enable",
            "files",
            "--tool-choice",
            "read_file",
            "--max-steps",
            "12",
            "--max-repeats",
            "0",
            "--max-reply-tokens",
            "96",
            "--timeout",
            "300",
            "--json",
            "--trace",
            "t.jsonl",
        ]));
    assert!(matches!(r.code, 0 | 3), "exit {}: {}\n{}", r.code, r.stderr, server.logs());
    assert!(!refused_for_size(&server), "{}", server.logs());

    let lines = s.trace_lines("t.jsonl");
    assert_eq!(lines[0]["context"]["tokens"], 512, "a slot's share: {}", lines[0]);
    let steps: Vec<&Value> = lines.iter().filter(|l| l.get("step").is_some()).collect();
    assert_eq!(steps.len(), 12, "every step asked the model and none failed");
    for step in &steps {
        let usage = &step["usage"];
        let used = usage["input_tokens"].as_u64().unwrap() + usage["output_tokens"].as_u64().unwrap();
        assert!(used <= 512, "a request and its reply over the slot's 512 tokens: {step}");
    }
    let compactions: Vec<&Value> = lines.iter().filter(|l| l["kind"] == "compaction").collect();
    assert!(!compactions.is_empty(), "twelve long results cannot fit 512 tokens whole");
    // After each compaction the server still takes most of the prompt from its cache: the
    // system prompt, the request and the summary's earlier lines are the prompt it had.
    for compaction in &compactions {
        let after = steps.iter().find(|s| s["step"] == compaction["before_step"]).expect("the step after it");
        let (input, cached) =
            (after["usage"]["input_tokens"].as_u64().unwrap(), after["usage"]["cached_input_tokens"].as_u64().unwrap());
        assert!(cached * 2 > input, "only {cached} of {input} prompt tokens from the cache after {compaction}");
    }
    let end = lines.last().unwrap();
    assert_eq!(end["context"]["compactions"].as_u64(), Some(compactions.len() as u64), "{end}");
    assert!(end["context"]["largest_prompt_tokens"].as_u64().unwrap() <= 512 - 96, "{end}");
    Ok(())
}

#[test]
fn the_smiles_request_that_once_ran_out_of_context_ends_with_a_reason() -> Result<(), Missing> {
    // The defaults a new user has, on a server started with -c 4096.
    let server = LlamaServer::start(4096)?;
    let s = Scratch::new();
    let r = ran(s
        .harness()
        .args(["run", "is c1ccccc1 a valid SMILES?", "--provider", "llamacpp", "--base-url", &server.base_url])
        .args(["--timeout", "300", "--json", "--trace", "t.jsonl"]));
    let out = r.json();
    let status = out["status"].as_str().unwrap_or_default();
    assert!(
        ["finished", "step_budget_exhausted", "reply_truncated", "context_exhausted"].contains(&status),
        "exit {}: {out}\n{}",
        r.code,
        r.stderr
    );
    assert!(!refused_for_size(&server), "{}", server.logs());
    assert!(!s.trace("t.jsonl").iter().any(|step| step["error"]["code"] == "provider_error"));
    Ok(())
}

/// The first request body `-vv` logged (`request body: {...}`).
fn first_request_body(stderr: &str) -> Value {
    let line = stderr.lines().find_map(|l| l.split_once("request body: ").map(|(_, body)| body));
    serde_json::from_str(line.unwrap_or_else(|| panic!("no request body logged:\n{stderr}"))).unwrap()
}

#[test]
fn a_small_model_is_shown_worked_exchanges_and_quotes_its_requests_smiles() -> Result<(), Missing> {
    let server = LlamaServer::start(4096)?;
    let s = Scratch::new();
    let request = "What is the molecular weight of propanol, CCCO?";
    let r = ran(harness(&s, &server, request).args(["--enable", "chem", "--max-steps", "2", "-vv"]));
    assert!(matches!(r.code, 0 | 3), "exit {}: {}\n{}", r.code, r.stderr, server.logs());
    let body = first_request_body(&r.stderr);
    let messages = body["messages"].as_array().unwrap();
    // The system prompt, then the plugins' worked exchanges (calc's first), then the request.
    let texts: Vec<&str> = messages.iter().map(|m| m["content"].as_str().unwrap_or_default()).collect();
    assert_eq!(texts[1], "What is 7 times 8?", "{texts:#?}");
    assert_eq!(texts[2], r#"{"tool": "calculate", "arguments": {"expression":"7*8"}}"#);
    // Chem's exchange most like the request comes last, right before it.
    assert_eq!(texts[texts.len() - 5], "What is the molecular weight of propane, CCC?", "{texts:#?}");
    assert_eq!(texts.last(), Some(&request));
    // molecular_weight's SMILES, which its worked examples quote from their requests, is one of
    // this request's words in the grammar (the request shortlists molecular_weight), and only
    // one that has the shape chem declares for a SMILES: not "What", "of" or "propanol".
    let branches = body["response_format"]["json_schema"]["schema"]["oneOf"].as_array().unwrap();
    let weight = branches.iter().find(|b| b["properties"]["tool"]["const"] == "molecular_weight");
    let smiles = weight.and_then(|b| b["properties"]["arguments"]["properties"]["smiles"]["enum"].as_array());
    let smiles = smiles.unwrap_or_else(|| panic!("no enum of words for molecular_weight's smiles: {branches:#?}"));
    assert_eq!(smiles, &[Value::from("CCCO")], "{branches:#?}");
    Ok(())
}
