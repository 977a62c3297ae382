//! Remote MCP servers: the official Python SDK's Streamable HTTP server, behind a bearer token,
//! as a tool source of `harness run`.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use serde_json::{Value, json};

use super::{fixture, pulled_run, python, step};
use crate::support::{Scratch, ran, snapshot};

/// The token the server wants; it must never be seen in anything the harness writes.
const TOKEN: &str = "tok-4f1c-never-shown";
/// A header value written in the file itself: a secret too.
const LITERAL: &str = "literal-9d2e-never-shown";

/// A Python server of tests/mcp served over HTTP; killed when dropped.
struct HttpServer {
    child: Child,
    url: String,
}

impl HttpServer {
    fn start(module: &str) -> Self {
        Self::start_with(module, &[])
    }

    /// The server with more environment: `MCP_FAIL_FIRST`, `MCP_FAIL_CALLS`, `MCP_LOG`.
    fn start_with(module: &str, env: &[(&str, &str)]) -> Self {
        let mut child = Command::new(python())
            .arg(fixture("http_server.py"))
            .arg(module)
            .env("MCP_TEST_TOKEN", TOKEN)
            .envs(env.iter().copied())
            .stdout(Stdio::piped())
            .spawn()
            .expect("the Python HTTP server starts");
        let mut line = String::new();
        let stdout = child.stdout.take().expect("piped stdout");
        BufReader::new(stdout).read_line(&mut line).expect("the server prints its port");
        let port = line.trim().strip_prefix("PORT ").unwrap_or_else(|| panic!("not a port line: {line:?}"));
        Self { child, url: format!("http://127.0.0.1:{port}/mcp") }
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `harness.toml` with the server as `remote`, its token read from `$REMOTE_TOKEN`.
fn remote_config(s: &Scratch, url: &str) {
    s.write(
        "harness.toml",
        &format!(
            "[[mcp.servers]]\nname = \"remote\"\nurl = {url:?}\ntimeout = 60\n\
             headers = {{ Authorization = \"Bearer ${{REMOTE_TOKEN}}\", X-Literal = {LITERAL:?} }}\n"
        ),
    );
}

fn run(s: &Scratch, token: Option<&str>, steps: &[Value]) -> crate::support::Ran {
    let script = s.script(steps);
    let mut harness = s.harness();
    harness.env_remove("REMOTE_TOKEN");
    if let Some(token) = token {
        harness.env("REMOTE_TOKEN", token);
    }
    let args = ["run", "x", "--config", "harness.toml", "--allow", "network", "--json", "--trace", "t.jsonl"];
    ran(harness.args(args).arg("--script").arg(&script))
}

/// The newest protocol version that both the harness's SDK and the Python SDK of
/// tests/mcp/requirements.txt speak.
fn rmcp_latest() -> Value {
    json!("2026-07-28")
}

fn assert_no_secret(what: &str, text: &str) {
    for secret in [TOKEN, LITERAL] {
        assert!(!text.contains(secret), "{what} shows a secret: {text}");
    }
}

#[test]
fn a_remote_server_behind_a_bearer_token_is_a_tool_source() {
    let server = HttpServer::start("tool_server");
    let s = Scratch::new();
    remote_config(&s, &server.url);
    let steps = [
        step("greet", json!({"name": "Ada"})),
        step("add", json!({"a": 2, "b": "three"})),
        step("add", json!({"a": 2, "b": 3})),
        step("fail", json!({"message": "on purpose"})),
        step("finish", json!({"answer": "done"})),
    ];
    let r = run(&s, Some(TOKEN), &steps);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.json()["answer"], "done");
    let t = s.trace("t.jsonl");
    assert_eq!((&t[0]["result"], &t[0]["mcp_server"]), (&json!("Hello, Ada!"), &json!("remote")), "{}", t[0]);
    assert_eq!((&t[1]["status"], &t[1]["error"]["code"]), (&json!("rejected"), &json!("invalid_arguments")));
    assert_eq!(t[2]["result"], json!({"result": 5}));
    assert_eq!((&t[3]["status"], &t[3]["error"]["code"]), (&json!("error"), &json!("tool_error")));
    assert_no_secret("stderr", &r.stderr);
    assert_no_secret("the trace", &std::fs::read_to_string(s.path("t.jsonl")).unwrap());

    let listed =
        ran(s.harness().env("REMOTE_TOKEN", TOKEN).args(["plugins", "list", "--config", "harness.toml", "--json"]));
    let remote = &listed.json()["mcp_servers"][0];
    assert_eq!((&remote["url"], &remote["headers"]), (&json!(server.url), &json!(["Authorization", "X-Literal"])));
    assert_eq!(remote["server_info"]["name"], "py-tools", "{remote}");
    assert_no_secret("plugins list", &listed.stdout);
    // The version the handshake settled on: the newest both SDKs speak, in the listing and in
    // the trace's first line alike.
    let first = &s.trace_lines("t.jsonl")[0];
    assert_eq!(first["mcp_servers"], json!([{"name": "remote", "protocol_version": remote["protocol_version"]}]));
    assert_eq!(remote["protocol_version"], rmcp_latest(), "{remote}");
}

#[test]
fn config_show_and_trust_name_headers_never_their_values() {
    let s = Scratch::new();
    remote_config(&s, "https://mcp.example.com/mcp");
    let shown = ran(s.harness().args(["config", "show", "--config", "harness.toml"]));
    assert_eq!(shown.code, 0, "{}", shown.stderr);
    snapshot("config-show-remote-mcp-server", &s, &shown.stdout, &[]);
    assert_no_secret("config show", &shown.stdout);
    let trust = ran(s.harness().args(["config", "trust", "harness.toml"]));
    assert_eq!(trust.code, 0, "{}", trust.stderr);
    let out = trust.stdout + &trust.stderr;
    snapshot("config-trust-remote-mcp-server", &s, &out, &[(r"sha256 [0-9a-f]{64}", "sha256 [hash]")]);
    assert_no_secret("config trust", &out);
}

#[test]
fn a_server_that_asks_for_oauth_or_a_missing_token_is_refused_and_the_run_goes_on() {
    let server = HttpServer::start("tool_server");
    let s = Scratch::new();
    remote_config(&s, &server.url);
    let finish = [step("finish", json!({"answer": "alone"}))];
    let r = run(&s, Some("a-wrong-token"), &finish);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let port = [(r"127\.0\.0\.1:\d+", "127.0.0.1:[port]")];
    snapshot("mcp-remote-asks-for-oauth", &s, &r.stderr, &port);
    assert!(!r.stderr.contains("a-wrong-token"), "{}", r.stderr);

    let r = run(&s, None, &finish);
    assert_eq!(r.code, 0, "{}", r.stderr);
    snapshot("mcp-remote-token-not-set", &s, &r.stderr, &port);
}

#[test]
fn plain_http_to_another_machine_is_a_configuration_error() {
    let s = Scratch::new();
    remote_config(&s, "http://192.0.2.7/mcp");
    let r = run(&s, Some(TOKEN), &[step("finish", json!({"answer": 1}))]);
    r.usage_error(&["[[mcp.servers]] entry 1", "http://192.0.2.7/mcp"]);
    snapshot("mcp-remote-plain-http-refused", &s, &r.stderr, &[]);
    assert_no_secret("the error", &r.stderr);
}

#[test]
fn a_remote_tool_changed_mid_run_is_refused() {
    let server = HttpServer::start("rug_pull_server");
    let s = Scratch::new();
    s.write(
        "harness.toml",
        &format!(
            "[[mcp.servers]]\nname = \"rug\"\nurl = {:?}\nheaders = {{ Authorization = \"Bearer {TOKEN}\" }}\n",
            server.url
        ),
    );
    let (r, t) = pulled_run(&s, &[]);
    assert_eq!(t[0]["result"], "sunny in Paris", "{}", r.stderr);
    assert_eq!((&t[1]["error"]["code"], &t[1]["mcp_server"]), (&json!("tool_changed"), &json!("rug")), "{}", t[1]);
    assert_eq!(t[2]["result"], "still here");
    assert_eq!(t[3]["error"]["code"], "unknown_tool");
    assert!(r.stderr.contains("MCP server \"rug\" changed tool \"weather\" (its description)"), "{}", r.stderr);
}

#[test]
fn a_failing_remote_server_is_retried_but_never_where_a_tool_could_run_twice() {
    let s = Scratch::new();
    let log = s.path("calls.log");
    let log = log.to_str().unwrap();
    // The handshake's first two POSTs get 503; the first call 503 (refused before it ran, so
    // asked again, and let through), the next 500 (it might have run: not asked again).
    let env = [("MCP_FAIL_FIRST", "2"), ("MCP_FAIL_CALLS", "503,,500"), ("MCP_LOG", log)];
    let server = HttpServer::start_with("tool_server", &env);
    remote_config(&s, &server.url);
    let steps = [
        step("greet", json!({"name": "Ada"})),
        step("add", json!({"a": 2, "b": 3})),
        step("greet", json!({"name": "Bo"})),
        step("finish", json!({"answer": "done"})),
    ];
    let r = run(&s, Some(TOKEN), &steps);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let t = s.trace("t.jsonl");
    assert_eq!(t[0]["result"], "Hello, Ada!", "{}", r.stderr);
    assert_eq!((&t[1]["status"], &t[1]["error"]["code"]), (&json!("error"), &json!("tool_crashed")), "{}", t[1]);
    assert!(t[1]["error"]["message"].as_str().unwrap().contains("HTTP 500"), "{}", t[1]);
    assert_eq!(t[2]["result"], "Hello, Bo!", "{}", t[2]);
    let retries = r.stderr.matches("MCP server \"remote\": retry ").count();
    assert_eq!(retries, 3, "two for the handshake, one for the refused call: {}", r.stderr);
    // The server was handed each call once: the refused ones never, the retried one once.
    let handed = std::fs::read_to_string(log).unwrap();
    assert_eq!(handed, "greet {\"name\": \"Ada\"}\ngreet {\"name\": \"Bo\"}\n");
}

#[test]
fn a_remote_server_that_drops_the_connection_mid_call_costs_calls_not_the_run() {
    let server = HttpServer::start("tool_server");
    let s = Scratch::new();
    remote_config(&s, &server.url);
    let steps = [
        step("greet", json!({"name": "Ada"})),
        step("die", json!({"code": 3})),
        step("greet", json!({"name": "Bo"})),
        step("finish", json!({"answer": "done"})),
    ];
    let r = run(&s, Some(TOKEN), &steps);
    assert_eq!((r.code, &r.json()["answer"]), (0, &json!("done")), "{}", r.stderr);
    let t = s.trace("t.jsonl");
    assert_eq!(t[0]["result"], "Hello, Ada!");
    // The call in flight may have run; the next one never reached a server that is gone.
    for (i, said) in [(1, "whether the tool ran is unknown"), (2, "3 retries included; the tool did not run")] {
        assert_eq!((&t[i]["status"], &t[i]["error"]["code"]), (&json!("error"), &json!("tool_crashed")), "{}", t[i]);
        let message = t[i]["error"]["message"].as_str().unwrap();
        assert!(message.contains(said), "{message}");
    }
}
