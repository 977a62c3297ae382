//! OpenTelemetry export seen in a real Arize Phoenix: `harness run`, `harness batch` and
//! `harness mcp serve` send GenAI spans over OTLP/HTTP, read back from Phoenix's REST API
//! (the parent-child shape, the attribute names and values, no content unless asked); and a
//! collector that is down costs one warning, never the run.
//!
//! Phoenix comes from `cargo xtask setup phoenix` (a venv with PyPI `arize-phoenix`), which
//! exports its `phoenix` command in `HARNESS_PHOENIX`.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::providers::{Api, KEY, call};
use crate::support::{Missing, Scratch, prerequisite, ran};

/// A `phoenix serve` on free ports in a temporary working directory; stopped when dropped.
struct Phoenix {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

impl Phoenix {
    /// Starts Phoenix and waits until it answers; without it, the command that provides it.
    fn start() -> Result<Self, Missing> {
        let program = prerequisite("HARNESS_PHOENIX", "cargo xtask setup phoenix")?;
        let dir = tempfile::tempdir().unwrap();
        let (port, grpc) = (free_port(), free_port());
        let log = std::fs::File::create(dir.path().join("phoenix.log")).unwrap();
        let child = Command::new(&program)
            .arg("serve")
            .current_dir(dir.path())
            .env("PHOENIX_WORKING_DIR", dir.path())
            .env("PHOENIX_HOST", "127.0.0.1")
            .env("PHOENIX_PORT", port.to_string())
            .env("PHOENIX_GRPC_PORT", grpc.to_string())
            .env("PHOENIX_TELEMETRY_ENABLED", "false")
            .env("DO_NOT_TRACK", "1")
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .stdin(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}; run `cargo xtask setup phoenix`", program.display()));
        let mut phoenix = Self { child, port, _dir: dir };
        let deadline = Instant::now() + Duration::from_secs(240);
        while phoenix.get("/healthz").is_none() {
            if let Some(status) = phoenix.child.try_wait().unwrap() {
                let log = std::fs::read_to_string(phoenix._dir.path().join("phoenix.log")).unwrap_or_default();
                panic!("phoenix serve exited ({status}):\n{log}");
            }
            assert!(Instant::now() < deadline, "Phoenix did not answer /healthz within 240 s");
            std::thread::sleep(Duration::from_millis(250));
        }
        Ok(phoenix)
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The body of a GET that answered 200, over plain HTTP/1.0 (no client library needed).
    fn get(&self, path: &str) -> Option<String> {
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).ok()?;
        stream.set_read_timeout(Some(Duration::from_secs(20))).ok()?;
        write!(stream, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\nAccept: application/json\r\n\r\n").ok()?;
        let mut response = String::new();
        stream.read_to_string(&mut response).ok()?;
        let (head, body) = response.split_once("\r\n\r\n")?;
        head.starts_with("HTTP/1.1 200").then(|| body.to_owned())
    }

    /// The spans of a project, once at least `count` have arrived (export is asynchronous).
    fn spans(&self, project: &str, count: usize) -> Vec<Value> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let spans = self
                .get(&format!("/v1/projects/{project}/spans?limit=1000"))
                .and_then(|b| serde_json::from_str::<Value>(&b).ok())
                .and_then(|v| v["data"].as_array().cloned())
                .unwrap_or_default();
            if spans.len() >= count {
                return spans;
            }
            assert!(Instant::now() < deadline, "Phoenix has {} spans of project {project}, not {count}", spans.len());
            std::thread::sleep(Duration::from_millis(250));
        }
    }
}

impl Drop for Phoenix {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The harness, exporting to Phoenix through the standard variables, into its own project.
fn exporting(s: &Scratch, phoenix: &Phoenix, project: &str) -> Command {
    let mut cmd = s.harness();
    cmd.env("OTEL_EXPORTER_OTLP_ENDPOINT", phoenix.url())
        .env("OTEL_RESOURCE_ATTRIBUTES", format!("openinference.project.name={project}"))
        .env("OTEL_SERVICE_NAME", "harness-e2e")
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .env_remove("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT");
    cmd
}

fn named<'a>(spans: &'a [Value], name: &str) -> Vec<&'a Value> {
    spans.iter().filter(|s| s["name"] == name).collect()
}

fn attr<'a>(span: &'a Value, key: &str) -> &'a Value {
    &span["attributes"][key]
}

const REQUEST: &str = "what is six times seven, secretly";

/// A run against a model API stand-in: a call, an unknown tool, then finish.
fn model_run(s: &Scratch, phoenix: &Phoenix, project: &str) -> Command {
    let api = Api::serve(vec![
        call("call_1", "calculate", json!({"expression": "6*7"})),
        call("call_2", "no_such_tool", json!({})),
        call("call_3", "finish", json!({"answer": 42})),
    ]);
    let mut cmd = exporting(s, phoenix, project);
    cmd.args(["run", REQUEST, "-q", "--provider", "openai", "--model", "test-model", "--base-url", &api.base_url])
        .env("OPENAI_API_KEY", KEY);
    std::mem::forget(api); // its thread serves the three replies and ends
    cmd
}

#[test]
fn phoenix_shows_the_genai_spans_of_run_batch_and_mcp_serve() -> Result<(), Missing> {
    let phoenix = Phoenix::start()?;
    let s = Scratch::new();

    // harness run, no content: the shape, the attributes, and nothing of the conversation.
    let r = ran(&mut model_run(&s, &phoenix, "plain"));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(!r.stderr.contains("warning"), "{}", r.stderr);
    let spans = phoenix.spans("plain", 6);
    assert_eq!(spans.len(), 6, "1 invoke_agent, 3 chat, 2 execute_tool: {spans:#?}");
    let root = named(&spans, "invoke_agent harness");
    assert_eq!(root.len(), 1);
    let root = root[0];
    assert!(root["parent_id"].is_null());
    assert_eq!(root["span_kind"], "AGENT");
    let trace_id = &root["context"]["trace_id"];
    let root_id = &root["context"]["span_id"];
    assert_eq!(attr(root, "gen_ai.operation.name"), "invoke_agent");
    assert_eq!(attr(root, "gen_ai.provider.name"), "openai");
    assert_eq!(attr(root, "gen_ai.request.model"), "test-model");
    assert_eq!(attr(root, "harness.run.status"), "finished");
    assert_eq!(
        (attr(root, "gen_ai.usage.input_tokens"), attr(root, "gen_ai.usage.output_tokens")),
        (&json!(30), &json!(9))
    );
    for span in &spans {
        assert_eq!(&span["context"]["trace_id"], trace_id, "one trace: {span}");
        if span != root {
            assert_eq!(&span["parent_id"], root_id, "a child of the run's span: {span}");
        }
    }
    let chats = named(&spans, "chat test-model");
    assert_eq!(chats.len(), 3);
    for chat in &chats {
        assert_eq!(chat["span_kind"], "LLM");
        assert_eq!(attr(chat, "gen_ai.operation.name"), "chat");
        assert_eq!(attr(chat, "gen_ai.provider.name"), "openai");
        assert_eq!(attr(chat, "gen_ai.request.model"), "test-model");
        assert_eq!(
            (attr(chat, "gen_ai.usage.input_tokens"), attr(chat, "gen_ai.usage.output_tokens")),
            (&json!(10), &json!(3))
        );
        assert_eq!(attr(chat, "gen_ai.response.finish_reasons"), &json!(["tool_calls"]));
    }
    let calc = named(&spans, "execute_tool calculate");
    assert_eq!(calc.len(), 1);
    let calc = calc[0];
    assert_eq!(calc["span_kind"], "TOOL");
    assert_eq!(attr(calc, "gen_ai.operation.name"), "execute_tool");
    assert_eq!(attr(calc, "gen_ai.tool.name"), "calculate");
    assert_eq!(attr(calc, "gen_ai.tool.call.id"), "call_1");
    assert_eq!(
        (attr(calc, "harness.plugin.name"), attr(calc, "harness.plugin.version")),
        (&json!("calc"), &json!("0.1.0"))
    );
    assert!(attr(calc, "error.type").is_null());
    let unknown = named(&spans, "execute_tool no_such_tool");
    assert_eq!(unknown.len(), 1);
    assert_eq!(attr(unknown[0], "error.type"), "unknown_tool");
    assert_eq!(unknown[0]["status_code"], "ERROR");
    let everything = serde_json::to_string(&spans).unwrap();
    for secret in [REQUEST, "6*7", KEY] {
        assert!(!everything.contains(secret), "{secret:?} reached Phoenix without being asked for:\n{everything}");
    }

    // With content asked for: the request, the arguments and the result; never the key.
    let r = ran(model_run(&s, &phoenix, "content").env("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true"));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let spans = phoenix.spans("content", 6);
    let root = named(&spans, "invoke_agent harness")[0];
    assert!(attr(root, "gen_ai.input.messages").as_str().unwrap().contains(REQUEST), "{root}");
    let calc = named(&spans, "execute_tool calculate")[0];
    assert_eq!(attr(calc, "gen_ai.tool.call.arguments"), "{\"expression\":\"6*7\"}");
    assert_eq!(attr(calc, "gen_ai.tool.call.result"), "42");
    assert!(!serde_json::to_string(&spans).unwrap().contains(KEY), "the API key reached Phoenix");

    // harness batch: one trace (an invoke_agent root) per request.
    let input = s.write(
        "requests.jsonl",
        "{\"id\": \"a\", \"request\": \"calculate 2*3\"}\n{\"id\": \"b\", \"request\": \"calculate 4*5\"}\n",
    );
    let r = ran(exporting(&s, &phoenix, "batch").arg("batch").arg(&input).args(["--out", "out.jsonl", "-q"]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let spans = phoenix.spans("batch", 2);
    let roots = named(&spans, "invoke_agent harness");
    assert_eq!(roots.len(), 2, "{spans:#?}");
    assert_ne!(roots[0]["context"]["trace_id"], roots[1]["context"]["trace_id"]);
    for root in roots {
        assert_eq!(attr(root, "gen_ai.provider.name"), "offline");
        let children = spans.iter().filter(|s| s["parent_id"] == root["context"]["span_id"]).count();
        assert!(children >= 2, "a chat and an execute_tool under each run: {spans:#?}");
    }
    let tools = named(&spans, "execute_tool calculate");
    assert_eq!(tools.len(), 2);

    // harness mcp serve: an execute_tool span per call.
    mcp_calls(&s, &phoenix);
    let spans = phoenix.spans("mcp", 1);
    let tool = named(&spans, "execute_tool calculate");
    assert_eq!(tool.len(), 1, "{spans:#?}");
    assert_eq!(attr(tool[0], "gen_ai.operation.name"), "execute_tool");
    assert_eq!(attr(tool[0], "harness.plugin.name"), "calc");
    Ok(())
}

/// Reads the server's stdout into `seen` until it holds `wanted`, for 30 s at most.
fn read_until(stdout: &mut impl Read, seen: &mut String, wanted: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut buf = [0u8; 4096];
    while !seen.contains(wanted) {
        assert!(Instant::now() < deadline, "no {wanted} from the server: {seen}");
        let n = stdout.read(&mut buf).unwrap();
        assert!(n > 0, "the server closed stdout before {wanted}: {seen}");
        seen.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
}

/// One `tools/call` through `harness mcp serve`, spoken by hand over stdio.
fn mcp_calls(s: &Scratch, phoenix: &Phoenix) {
    let mut child = exporting(s, phoenix, "mcp")
        .args(["mcp", "serve"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let messages = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "e2e", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "calculate", "arguments": {"expression": "2+2"}}}),
    ];
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut seen = String::new();
    // As an MCP client does: the answer to `initialize` first, then the rest.
    writeln!(stdin, "{}", messages[0]).unwrap();
    read_until(&mut stdout, &mut seen, "\"id\":1");
    for m in &messages[1..] {
        writeln!(stdin, "{m}").unwrap();
    }
    read_until(&mut stdout, &mut seen, "\"id\":2");
    assert!(seen.contains("4"), "{seen}");
    drop(stdin);
    let status = child.wait().unwrap();
    assert!(status.success(), "{status}");
}

#[test]
fn a_collector_that_is_down_costs_one_warning_and_never_the_run() {
    let s = Scratch::new();
    let port = free_port(); // nothing listens there now
    let script = s.script(&[
        json!({"tool": "calculate", "arguments": {"expression": "6*7"}}),
        json!({"tool": "calculate", "arguments": {"expression": "7*8"}}),
        json!({"tool": "finish", "arguments": {"answer": 42}}),
    ]);
    let r = ran(s
        .harness()
        .args(["run", "x", "--json", "--otlp", &format!("http://127.0.0.1:{port}"), "--script"])
        .arg(&script));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.json()["answer"], 42);
    let warnings: Vec<&str> = r.stderr.lines().filter(|l| l.contains("warning")).collect();
    assert_eq!(warnings.len(), 1, "{}", r.stderr);
    assert!(warnings[0].contains(&format!("cannot export spans to http://127.0.0.1:{port}/v1/traces")), "{}", r.stderr);
    // How long the exit waits for a collector that is down is measured, not held here:
    // docs/benchmarks.md ("Giving up on a hung call, a run's deadline, a collector that is down").

    let r = ran(s.harness().args(["run", "x", "-q", "--otlp", "localhost:4318", "--script"]).arg(&script));
    r.usage_error(&["--otlp", "localhost:4318"]);
}
