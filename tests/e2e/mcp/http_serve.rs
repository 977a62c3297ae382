//! `harness mcp serve --http` through the real binary: the refusals before any plugin runs,
//! the official Python and TypeScript SDKs' HTTP clients, stateless replicas, probes, and a
//! SIGTERM that drains.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use serde_json::{Value, json};

use super::{call, fixture, python};
use crate::support::{Scratch, bin_dir, ran};
use crate::wait::{running_a_sleeping_tool, wait_for};

/// The server on a free loopback port, with its address; killed when dropped.
pub(super) struct Served(pub(super) Child, pub(super) String);

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Served {
    /// Sends SIGTERM, as a container runtime does.
    fn signal(&self) {
        let pid = i32::try_from(self.0.id()).expect("a pid");
        // SAFETY: a signal to the child this test started and has not yet reaped.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    }

    /// Sends SIGTERM and waits for the exit code.
    pub(super) fn terminate(mut self) -> Option<i32> {
        self.signal();
        self.0.wait().expect("the server is reaped").code()
    }
}

/// The server with `more` arguments (`--stateless`, `--enable calc`, `--trace t.jsonl`, ...).
pub(super) fn serve_with(s: &Scratch, more: &[&str]) -> Served {
    serve_cmd(s.harness(), more)
}

/// `harness` (a command made by `Scratch::harness`, adjusted) serving with `more` arguments.
pub(super) fn serve_cmd(mut harness: Command, more: &[&str]) -> Served {
    let mut child = harness
        .env("SERVE_TOKEN", "e2e-token")
        .args(["mcp", "serve", "--http", "127.0.0.1:0", "--token-env", "SERVE_TOKEN"])
        .args(more)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut reader = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    while reader.read_line(&mut line).unwrap() > 0 && !line.contains(" at http://") {
        line.clear();
    }
    let addr = line.split(" at http://").nth(1).and_then(|r| r.split("/mcp").next()).expect(&line).to_owned();
    Served(child, addr)
}

/// The whole answer to one request (`Connection: close`).
fn exchange(addr: &str, request: &str) -> String {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.write_all(request.as_bytes()).unwrap();
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    answer
}

/// The status code of one request.
fn status(addr: &str, request: &str) -> u16 {
    let answer = exchange(addr, request);
    answer.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or_else(|| panic!("{answer}"))
}

fn post(addr: &str, headers: &str, body: &str) -> u16 {
    status(addr, &post_request(headers, body))
}

/// A POST to `/mcp` with the token, and its answer: status and body.
fn authorized_post(addr: &str, body: &str) -> (u16, String) {
    let answer = exchange(addr, &post_request("Authorization: Bearer e2e-token\r\n", body));
    let code = answer.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or_else(|| panic!("{answer}"));
    (code, answer.split("\r\n\r\n").nth(1).unwrap_or_default().to_owned())
}

pub(super) fn post_request(headers: &str, body: &str) -> String {
    format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n{headers}Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
}

const HEALTHZ: &str = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";

/// A `tools/call` as a JSON-RPC request, sent alone: no session, no `initialize` before it.
fn tools_call(id: u32, tool: &str, arguments: &Value) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": tool, "arguments": arguments}})
        .to_string()
}

pub(super) const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"e2e","version":"1"}}}"#;

#[test]
fn serve_http_refuses_without_the_token_or_from_a_foreign_origin() {
    let s = Scratch::new();
    let served = serve_with(&s, &["--enable", "fault", "--trace", "t.jsonl"]);
    let addr = &served.1;
    assert_eq!(status(addr, HEALTHZ), 200);
    assert_eq!(post(addr, "", INITIALIZE), 401);
    assert_eq!(post(addr, "Authorization: Bearer wrong\r\n", INITIALIZE), 401);
    assert_eq!(post(addr, "Authorization: Bearer e2e-token\r\nOrigin: http://evil.example\r\n", INITIALIZE), 403);
    // Over the documented 4 MiB body limit, and not JSON-RPC: refused before any tool runs.
    let echo = |pad: usize| tools_call(1, "fault_echo", &json!({"value": "x".repeat(pad)}));
    let stateless = serve_with(&s, &["--enable", "fault", "--stateless", "--trace", "s.jsonl"]);
    assert_eq!(authorized_post(&stateless.1, &echo(5 << 20)).0, 413);
    assert_eq!(authorized_post(&stateless.1, r#"{"jsonrpc":"2.0","id":1,"method":"#).0, 400);
    assert_eq!(authorized_post(&stateless.1, r#"{"jsonrpc":"1.0","id":1}"#).0, 400);
    assert_eq!(post(&stateless.1, "", &echo(1)), 401);
    assert_eq!(post(addr, "Authorization: Bearer e2e-token\r\n", INITIALIZE), 200);
    assert_eq!((stateless.terminate(), served.terminate()), (Some(0), Some(0)));
    for trace in ["t.jsonl", "s.jsonl"] {
        assert_eq!(std::fs::read_to_string(s.path(trace)).unwrap(), "", "a refused request reached a tool");
    }
}

/// What the official Python SDK's Streamable HTTP client saw of the server at `addr`.
fn drive_http(addr: &str, mode: &str, calls: &Value) -> Value {
    let r = ran(Command::new(python())
        .env("MCP_TOKEN", "e2e-token")
        .arg(fixture("client.py"))
        .args(["--mode", mode, "--url", &format!("http://{addr}/mcp")])
        .arg(calls.to_string()));
    assert_eq!(r.code, 0, "the Python client failed:\n{}", r.stderr);
    r.json()
}

#[test]
fn the_python_sdk_http_client_calls_plugin_tools_each_traced_with_its_session_and_protocol() {
    let s = Scratch::new();
    let served = serve_with(&s, &["--enable", "calc", "--trace", "t.jsonl"]);
    let calls = json!([call("calculate", json!({"expression": "6*7"})), call("calculate", json!({"expr": 6}))]);
    let modern = drive_http(&served.1, "auto", &calls);
    let legacy = drive_http(&served.1, "legacy", &calls);
    assert_eq!(served.terminate(), Some(0));
    for seen in [&modern, &legacy] {
        assert_eq!(seen["server_info"]["name"], "harness", "{seen}");
        let [ok, invalid] = seen["calls"].as_array().unwrap().as_slice() else { panic!("{seen}") };
        assert_eq!((&ok["is_error"], &ok["text"]), (&json!(false), &json!("42")), "{ok}");
        assert_eq!(invalid["structured"]["code"], "invalid_arguments", "{invalid}");
    }
    let t = s.trace("t.jsonl");
    let statuses: Vec<&str> = t.iter().map(|l| l["status"].as_str().unwrap()).collect();
    assert_eq!(statuses, ["ok", "rejected", "ok", "rejected"]);
    // The newest protocol keeps no session; the handshake-era one the client fell back to does.
    assert_eq!((&t[0]["mcp_protocol"], &t[0]["mcp_session"]), (&modern["protocol_version"], &Value::Null), "{}", t[0]);
    assert_eq!(t[2]["mcp_protocol"], legacy["protocol_version"], "{}", t[2]);
    let session = t[2]["mcp_session"].as_str().unwrap_or_else(|| panic!("no session: {}", t[2]));
    assert_eq!(t[3]["mcp_session"], session);
    assert_ne!(modern["protocol_version"], legacy["protocol_version"]);
}

#[test]
fn a_stateless_replica_answers_a_call_it_never_saw_initialized() {
    let s = Scratch::new();
    let call = tools_call(7, "calculate", &json!({"expression": "6*7"}));
    let stateless = serve_with(&s, &["--enable", "calc", "--stateless"]);
    let (code, body) = authorized_post(&stateless.1, &call);
    assert_eq!(code, 200, "{body}");
    let answer: Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"));
    assert_eq!((&answer["id"], &answer["result"]["content"][0]["text"]), (&json!(7), &json!("42")), "{answer}");
    // A server that keeps sessions refuses the same request: it never saw this client.
    let kept = serve_with(&s, &["--enable", "calc"]);
    assert_eq!(authorized_post(&kept.1, &call).0, 400);
}

#[test]
fn sigterm_lets_a_call_in_flight_finish_then_exits() {
    let s = Scratch::new();
    let served = serve_with(&s, &["--enable", "fault", "--stateless", "--trace", "t.jsonl"]);
    let addr = served.1.clone();
    assert_eq!(status(&addr, HEALTHZ), 200);
    let in_flight = std::thread::spawn({
        let addr = addr.clone();
        move || authorized_post(&addr, &tools_call(1, "fault_sleep", &json!({"ms": 4000})))
    });
    // The call is running before the signal (its tool sleeps in the server or its plugin
    // host); the trace's step is the proof that it ran to its end.
    let pid = served.0.id();
    wait_for("fault_sleep running in the server", Duration::from_secs(30), || running_a_sleeping_tool(pid));
    served.signal();
    let (code, body) = in_flight.join().unwrap();
    assert_eq!(code, 200, "{body}");
    let answer: Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"));
    assert_eq!(answer["result"]["isError"], false, "{answer}");
    assert_eq!(served.terminate(), Some(0));
    let t = s.trace("t.jsonl");
    assert_eq!((t.len(), &t[0]["tool"], &t[0]["status"]), (1, &json!("fault_sleep"), &json!("ok")));
}

/// The `node_modules` that holds the official MCP TypeScript SDK: `HARNESS_MCP_NODE_MODULES`
/// when set, else `target/mcp-node`, installed on first use from tests/mcp/package.json.
fn node_modules() -> PathBuf {
    static FOUND: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let found = FOUND.get_or_init(|| {
        if let Some(dir) = std::env::var_os("HARNESS_MCP_NODE_MODULES") {
            return Ok(PathBuf::from(dir));
        }
        let wanted = std::fs::read(fixture("package.json")).map_err(|e| e.to_string())?;
        let dir = bin_dir().parent().expect("the target directory").join("mcp-node");
        if std::fs::read(dir.join("package.json")).ok() != Some(wanted.clone()) {
            std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
            std::fs::write(dir.join("package.json"), &wanted).map_err(|e| e.to_string())?;
            let r = ran(Command::new("npm").args(["install", "--no-audit", "--no-fund", "--prefix"]).arg(&dir));
            if r.code != 0 {
                let _ = std::fs::remove_file(dir.join("package.json"));
                return Err(format!("npm install failed: {}", r.stderr));
            }
        }
        Ok(dir.join("node_modules"))
    });
    match found {
        Ok(dir) => dir.clone(),
        Err(e) => panic!(
            "this test needs Node.js and the official MCP TypeScript SDK; installing it failed: {e}\n\
             install it by hand with `mkdir -p target/mcp-node && cp tests/mcp/package.json target/mcp-node/ && \
             npm install --prefix target/mcp-node`, or set HARNESS_MCP_NODE_MODULES to a node_modules that has it"
        ),
    }
}

#[test]
fn the_typescript_sdk_client_calls_plugin_tools_over_http() {
    let s = Scratch::new();
    let served = serve_with(&s, &["--enable", "calc", "--trace", "t.jsonl"]);
    let calls = json!([
        call("calculate", json!({"expression": "6*7"})),
        call("calculate", json!({"expr": 6})),
        call("no_such_tool", json!({})),
    ]);
    let r = ran(Command::new("node")
        .env("MCP_TOKEN", "e2e-token")
        .env("MCP_NODE_MODULES", node_modules())
        .arg(fixture("ts_client.mjs"))
        .arg(format!("http://{}/mcp", served.1))
        .arg(calls.to_string()));
    assert_eq!(r.code, 0, "the TypeScript client failed:\n{}", r.stderr);
    let seen = r.json();
    assert_eq!(served.terminate(), Some(0));
    assert_eq!(seen["server_info"]["name"], "harness", "{seen}");
    assert_eq!(seen["tools"][0]["inputSchema"]["required"], json!(["expression"]));
    let [ok, invalid, unknown] = seen["calls"].as_array().unwrap().as_slice() else { panic!("{seen}") };
    assert_eq!((&ok["is_error"], &ok["text"]), (&json!(false), &json!("42")), "{ok}");
    assert_eq!(invalid["structured"]["code"], "invalid_arguments", "{invalid}");
    assert_eq!(unknown["protocol_error"]["code"], -32602, "{unknown}");
    let t = s.trace("t.jsonl");
    let statuses: Vec<&str> = t.iter().map(|l| l["status"].as_str().unwrap()).collect();
    assert_eq!(statuses, ["ok", "rejected", "rejected"]);
    assert_eq!(t[0]["mcp_protocol"], seen["protocol_version"], "{}", t[0]);
    assert!(t[0]["mcp_session"].is_string(), "{}", t[0]);
}
