//! `harness mcp serve --http`: the refusals, through the real binary, before any plugin runs.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Stdio};

use crate::support::Scratch;

/// The server on a free loopback port, with its address; killed when dropped.
struct Served(Child, String);

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn serve(s: &Scratch) -> Served {
    let mut child = s
        .harness()
        .env("SERVE_TOKEN", "e2e-token")
        .args(["mcp", "serve", "--http", "127.0.0.1:0", "--token-env", "SERVE_TOKEN"])
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

/// The status code of one request (`Connection: close`).
fn status(addr: &str, request: &str) -> u16 {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.write_all(request.as_bytes()).unwrap();
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    answer.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or_else(|| panic!("{answer}"))
}

fn post(addr: &str, headers: &str, body: &str) -> u16 {
    status(
        addr,
        &format!(
            "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n{headers}Content-Length: {}\r\n\r\n{body}",
            body.len()
        ),
    )
}

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"e2e","version":"1"}}}"#;

#[test]
fn serve_http_refuses_without_the_token_or_from_a_foreign_origin() {
    let s = Scratch::new();
    let served = serve(&s);
    let addr = &served.1;
    assert_eq!(status(addr, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"), 200);
    assert_eq!(post(addr, "", INITIALIZE), 401);
    assert_eq!(post(addr, "Authorization: Bearer wrong\r\n", INITIALIZE), 401);
    assert_eq!(post(addr, "Authorization: Bearer e2e-token\r\nOrigin: http://evil.example\r\n", INITIALIZE), 403);
    assert_eq!(post(addr, "Authorization: Bearer e2e-token\r\n", INITIALIZE), 200);
}
