//! The network surfaces bounded (issue 38, findings 5, 6, 7, 12), through the real binary:
//! raw loopback sockets hold `harness mcp serve --http` as a client without the token would,
//! and a hand-written hostile MCP server (tests/mcp/hostile_server.py) answers a run with an
//! endless `tools/list` and huge errors.

use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::TcpStream;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::fixture;
use super::http_serve::{INITIALIZE, post_request, serve_cmd, serve_with};
use crate::support::{Scratch, ran, read_http_message};

/// Waits (at most `limit`) for the server to close `stream`; how long it took, or `None`.
fn closed_within(mut stream: TcpStream, limit: Duration) -> Option<Duration> {
    let started = Instant::now();
    stream.set_read_timeout(Some(limit)).unwrap();
    let mut sink = [0u8; 4096];
    loop {
        match stream.read(&mut sink) {
            Ok(0) => return Some(started.elapsed()),
            Ok(_) => {}
            Err(e) if e.kind() == ErrorKind::ConnectionReset => return Some(started.elapsed()),
            Err(_) => return None,
        }
    }
}

/// The status line and headers, and the body, of one answer read from `stream`.
fn answer(stream: &mut TcpStream) -> (String, String) {
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    // A body cut short is shown as far as it came; the caller's assertions judge it.
    let (head, body, _) = read_http_message(&mut BufReader::new(stream));
    (head, String::from_utf8_lossy(&body).into_owned())
}

/// One request on a new connection kept open (`keep-alive`), and its answer.
fn kept_open(addr: &str, request: &str) -> (TcpStream, String, String) {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.write_all(request.replace("Connection: close", "Connection: keep-alive").as_bytes()).unwrap();
    let (head, body) = answer(&mut stream);
    (stream, head, body)
}

#[test]
fn serve_http_closes_a_half_sent_request_and_an_idle_connection() {
    let s = Scratch::new();
    let served = serve_with(&s, &["--enable", "fault", "--request-timeout", "1"]);
    let mut half = TcpStream::connect(&served.1).unwrap();
    half.write_all(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bear").unwrap();
    let idle = TcpStream::connect(&served.1).unwrap();
    // The token holder's connection, idle after its answer, is held to the same bound.
    let (after_answer, head, _) =
        kept_open(&served.1, &post_request("Authorization: Bearer e2e-token\r\n", INITIALIZE));
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    // A whole head with the token, and half of its body: 408, and the connection closed.
    let mut half_body = TcpStream::connect(&served.1).unwrap();
    let request = post_request("Authorization: Bearer e2e-token\r\n", INITIALIZE);
    half_body.write_all(&request.as_bytes()[..request.len() - 20]).unwrap();
    let started = Instant::now();
    let (head, body) = answer(&mut half_body);
    assert!(head.starts_with("HTTP/1.1 408"), "{head} {body}");
    assert!(body.contains("did not arrive within 1 s"), "{body}");
    assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());
    for (what, stream) in
        [("a half-sent request", half), ("an idle connection", idle), ("an idle keep-alive", after_answer)]
    {
        let took = closed_within(stream, Duration::from_secs(8));
        assert!(took.is_some_and(|t| t < Duration::from_secs(5)), "{what} was still open: {took:?}");
    }
    assert_eq!(served.terminate(), Some(0));
}

#[test]
fn idle_connections_without_the_token_never_lock_out_its_holder() {
    let s = Scratch::new();
    let mut harness = s.harness();
    // SAFETY: setrlimit on the child alone, between fork and exec; it allocates nothing.
    unsafe {
        harness.pre_exec(|| {
            let limit = libc::rlimit { rlim_cur: 128, rlim_max: 128 };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) == 0 {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        });
    }
    let served = serve_cmd(harness, &["--enable", "fault"]);
    // More connections than the server has descriptors, none of which ever sends a byte.
    let idle: Vec<TcpStream> = (0..200).map(|_| TcpStream::connect(&served.1).unwrap()).collect();
    let started = Instant::now();
    let mut stream = TcpStream::connect(&served.1).unwrap();
    stream.write_all(post_request("Authorization: Bearer e2e-token\r\n", INITIALIZE).as_bytes()).unwrap();
    let (head, body) = answer(&mut stream);
    assert!(head.starts_with("HTTP/1.1 200"), "the token holder was locked out: {head:?} {body}");
    assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());
    // The oldest idle connections gave their places: closed at once, not left to time out.
    let first = idle.into_iter().next().unwrap();
    assert!(closed_within(first, Duration::from_secs(1)).is_some(), "the oldest idle connection is still open");
    assert_eq!(served.terminate(), Some(0));
}

#[test]
fn over_its_caps_the_server_answers_503_with_a_json_rpc_error_and_retry_after() {
    let s = Scratch::new();
    let served = serve_with(&s, &["--enable", "fault", "--max-connections", "2", "--max-sessions", "1"]);
    let initialize = post_request("Authorization: Bearer e2e-token\r\n", INITIALIZE);
    // The first session fills the cap; the second `initialize` is refused.
    let (first, head, _) = kept_open(&served.1, &initialize);
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let (second, head, body) = kept_open(&served.1, &initialize);
    assert!(head.starts_with("HTTP/1.1 503"), "{head}");
    assert!(head.to_ascii_lowercase().contains("retry-after: 5"), "{head}");
    let error: Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"));
    assert_eq!(error["error"]["code"], -32000, "{error}");
    assert!(error["error"]["message"].as_str().unwrap().contains("limit of 1 MCP sessions"), "{error}");
    // Both connections showed the token and stay: a third is refused, told why and when to retry.
    let mut third = TcpStream::connect(&served.1).unwrap();
    third.write_all(initialize.as_bytes()).unwrap();
    let (head, body) = answer(&mut third);
    assert!(head.starts_with("HTTP/1.1 503") && head.to_ascii_lowercase().contains("retry-after: 5"), "{head}");
    assert!(body.contains("limit of 2 connections"), "{body}");
    drop((first, second));
    assert_eq!(served.terminate(), Some(0));
}

#[test]
fn errors_over_http_never_show_the_servers_paths() {
    let s = Scratch::new();
    s.write("harness.toml", "[plugins.files]\nroot = \"data\"\n");
    std::fs::create_dir(s.path("data")).unwrap();
    let served = serve_with(&s, &["--config", "harness.toml", "--stateless"]);
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "read_file", "arguments": {"path": "/etc/hostname"}}});
    let (_, head, body) = kept_open(&served.1, &post_request("Authorization: Bearer e2e-token\r\n", &call.to_string()));
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(body.contains("outside the root directory <path>"), "{body}");
    let root = s.path("data").canonicalize().unwrap();
    for secret in [root.display().to_string(), s.dir.path().display().to_string(), "/etc/hostname".to_owned()] {
        assert!(!body.contains(&secret), "the answer shows {secret}: {body}");
    }
    assert_eq!(served.terminate(), Some(0));
}

/// The hostile server in `mode`, on a free loopback port; killed when dropped.
pub(super) struct Hostile {
    child: Child,
    pub(super) url: String,
}

impl Hostile {
    pub(super) fn start(mode: &str) -> Self {
        let mut child = Command::new("python3")
            .arg(fixture("hostile_server.py"))
            .arg(mode)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("python3 runs the hostile server");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("piped stdout")).read_line(&mut line).expect("its port");
        let port = line.trim().strip_prefix("PORT ").unwrap_or_else(|| panic!("not a port line: {line:?}"));
        Self { child, url: format!("http://127.0.0.1:{port}/mcp") }
    }

    /// The methods it was sent, in order (it is stopped first).
    pub(super) fn methods(self) -> Vec<String> {
        self.methods_and(&mut String::new())
    }

    /// The methods it was sent, and its whole log in `log`.
    pub(super) fn methods_and(mut self, log: &mut String) -> Vec<String> {
        let _ = self.child.kill();
        let _ = self.child.stderr.take().expect("piped stderr").read_to_string(log);
        log.lines().filter_map(|l| l.strip_prefix("METHOD ")).map(str::to_owned).collect()
    }
}

impl Drop for Hostile {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A scripted run with the hostile server as `hostile`.
pub(super) fn hostile_run(s: &Scratch, url: &str, steps: &[Value]) -> crate::support::Ran {
    s.write("harness.toml", &format!("[[mcp.servers]]\nname = \"hostile\"\nurl = {url:?}\ntimeout = 60\n"));
    let script = s.script(steps);
    let args = ["run", "x", "--config", "harness.toml", "--allow", "network", "--json", "--trace", "t.jsonl"];
    ran(s.harness().args(args).arg("--script").arg(&script))
}

#[test]
fn an_endless_tools_list_is_refused_at_a_cap_naming_the_server() {
    let server = Hostile::start("endless");
    let s = Scratch::new();
    let started = Instant::now();
    let r = hostile_run(&s, &server.url, &[json!({"tool": "finish", "arguments": {"answer": "done"}})]);
    assert!(started.elapsed() < Duration::from_secs(30), "{:?}", started.elapsed());
    assert_eq!(r.code, 0, "{}", r.stderr);
    let warning =
        r.stderr.lines().find(|l| l.contains("MCP server \"hostile\"")).unwrap_or_else(|| panic!("{}", r.stderr));
    assert!(warning.contains("over the harness's cap; none of its tools are offered"), "{warning}");
    assert!(warning.contains("bytes of tool definitions"), "{warning}");
    let pages = server.methods().iter().filter(|m| *m == "tools/list").count();
    assert!(pages <= 8, "{pages} pages were asked for");
}

#[test]
fn an_mcp_tools_error_text_is_held_to_the_result_limit() {
    let server = Hostile::start("loud");
    let s = Scratch::new();
    let steps = [
        json!({"tool": "shout", "arguments": {}}),
        json!({"tool": "shout_rpc", "arguments": {}}),
        json!({"tool": "finish", "arguments": {"answer": "done"}}),
    ];
    let r = hostile_run(&s, &server.url, &steps);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let limit = 4 << 20;
    let t = s.trace("t.jsonl");
    for (step, letter) in [(&t[0], "A"), (&t[1], "B")] {
        assert_eq!(step["error"]["code"], "tool_error", "{}", step["tool"]);
        let message = step["error"]["message"].as_str().unwrap();
        assert!(message.len() < limit + 200, "{} bytes of error text", message.len());
        assert!(message.contains(&letter.repeat(100)), "the text's start is kept");
        assert!(message.ends_with(&format!("more bytes of error text dropped: over the result limit of {limit}]")));
    }
    let written = std::fs::metadata(s.path("t.jsonl")).unwrap().len();
    assert!(written < 3 * limit as u64, "the trace holds {written} bytes");
    assert!(r.stdout.len() + r.stderr.len() < 3 * limit, "{} bytes printed", r.stdout.len() + r.stderr.len());
}
