//! Exec to first router call, seen from the model server's side: the start-up a server waits on.
//!
//! The benchmark plays an OpenAI-compatible server on a loopback port and starts
//! `harness run --provider llamacpp --base-url http://127.0.0.1:PORT/v1`: the time from the
//! spawn to the moment the first request has fully arrived is the harness's start-up as a
//! model server sees it, with nothing left out (exec, configuration, plugin discovery, the
//! registry, the HTTP client, the request's JSON). The server then answers with a call of
//! `finish`, and the run must end with exit status 0, so a broken run is never counted.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The most a run may take to send its first request before the benchmark gives up on it.
const PATIENCE: Duration = Duration::from_secs(30);

/// One run: when its first request arrived, and when it exited.
#[derive(Debug, Clone, Copy)]
pub struct FirstCall {
    /// Spawn to the last byte of the first request, in ms.
    pub first_ms: f64,
    /// Spawn to exit, in ms.
    pub exit_ms: f64,
}

/// The reply the fake server gives to every request: one call of `finish`.
fn finish_reply() -> String {
    let arguments = serde_json::json!({ "answer": "done" }).to_string();
    serde_json::json!({
        "id": "bench",
        "object": "chat.completion",
        "model": "bench",
        "choices": [{
            "index": 0,
            "finish_reason": "tool_calls",
            "message": {
                "role": "assistant",
                "content": null,
                "tool_calls": [{ "id": "call_1", "type": "function",
                                  "function": { "name": "finish", "arguments": arguments } }]
            }
        }],
        "usage": { "prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2 }
    })
    .to_string()
}

/// `harness run` against the fake server on `port`, plugins from `plugins` only.
pub fn harness_command(harness: &Path, port: u16, plugins: &Path) -> Command {
    let mut cmd = Command::new(harness);
    cmd.args(["run", "bench", "--provider", "llamacpp", "--model", "bench", "--router-mode", "native"]);
    cmd.arg("--base-url").arg(format!("http://127.0.0.1:{port}/v1"));
    // `--early-finish allow`: the server's context is unknown (no /props), so the preset's small
    // default marks a small model, whose `finish` before any tool answered would be refused.
    cmd.args(["--max-steps", "1", "--retries", "0", "--early-finish", "allow", "-q", "--no-default-plugins"]);
    cmd.arg("--plugins-dir").arg(plugins);
    cmd
}

/// Waits until `listener` has a connection, or the child has exited, or [`PATIENCE`] is spent.
fn accept(listener: &TcpListener, child: &mut Child) -> Result<TcpStream, String> {
    let deadline = Instant::now() + PATIENCE;
    loop {
        if let Some(accepted) = incoming(listener) {
            return accepted.map_err(|e| format!("accept: {e}"));
        }
        if let Ok(Some(status)) = child.try_wait() {
            return Err(format!("the harness exited ({status}) without calling the server"));
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            return Err(format!("no request within {} s", PATIENCE.as_secs()));
        }
    }
}

/// A connection to `listener`, waiting up to 1 ms for one; `None` when none came.
#[cfg(unix)]
fn incoming(listener: &TcpListener) -> Option<std::io::Result<TcpStream>> {
    use std::os::fd::AsRawFd;
    let mut fd = libc::pollfd { fd: listener.as_raw_fd(), events: libc::POLLIN, revents: 0 };
    // SAFETY: one valid pollfd for the duration of the call.
    let ready = unsafe { libc::poll(&mut fd, 1, 1) };
    (ready > 0).then(|| listener.accept().map(|(s, _)| s))
}

/// Elsewhere (Windows): a non-blocking accept, then 1 ms of sleep; the connection found up to
/// 1 ms late, which the numbers of docs/benchmarks.md (taken on Linux) do not include.
#[cfg(not(unix))]
fn incoming(listener: &TcpListener) -> Option<std::io::Result<TcpStream>> {
    if let Err(e) = listener.set_nonblocking(true) {
        return Some(Err(e));
    }
    match listener.accept() {
        Ok((stream, _)) => Some(stream.set_nonblocking(false).map(|()| stream)),
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
            std::thread::sleep(Duration::from_millis(1));
            None
        }
        Err(e) => Some(Err(e)),
    }
}

/// Reads one HTTP request (head and a `Content-Length` body, none without one) from `stream`;
/// returns its request line (`POST /v1/chat/completions HTTP/1.1`).
fn read_request(stream: &mut TcpStream) -> Result<String, String> {
    let mut data = Vec::with_capacity(16 << 10);
    let mut buf = [0u8; 16 << 10];
    let (head_end, length, line) = loop {
        let n = stream.read(&mut buf).map_err(|e| format!("read: {e}"))?;
        if n == 0 {
            return Err("the harness closed the connection mid-request".to_owned());
        }
        data.extend_from_slice(&buf[..n]);
        if let Some(at) = data.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&data[..at]).into_owned();
            let length = head
                .lines()
                .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().to_owned()))
                .map_or(Ok(0), |v| v.parse::<usize>().map_err(|e| format!("Content-Length {v:?}: {e}")))?;
            break (at + 4, length, head.lines().next().unwrap_or_default().to_owned());
        }
    };
    while data.len() < head_end + length {
        let n = stream.read(&mut buf).map_err(|e| format!("read: {e}"))?;
        if n == 0 {
            return Err("the harness closed the connection mid-body".to_owned());
        }
        data.extend_from_slice(&buf[..n]);
    }
    Ok(line)
}

/// Writes a response with `body` and closes the connection.
fn respond(mut stream: TcpStream, status: &str, body: &str) -> Result<(), String> {
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).and_then(|()| stream.write_all(body.as_bytes())).map_err(|e| e.to_string())
}

/// Runs `cmd` (which must call the server on `listener`) and times its first router call.
pub fn measure(cmd: &mut Command, listener: &TcpListener) -> Result<FirstCall, String> {
    listener.set_nonblocking(true).map_err(|e| e.to_string())?;
    cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped());
    let started = Instant::now();
    let mut child = cmd.spawn().map_err(|e| format!("cannot start {cmd:?}: {e}"))?;
    // What the harness asks before its first router call (llama.cpp's /props for the context,
    // /tokenize to count the prompt) is answered 404, as by a server without those endpoints,
    // and counted in: it is start-up too.
    let first_ms = loop {
        let mut stream = accept(listener, &mut child)?;
        stream.set_nonblocking(false).map_err(|e| e.to_string())?;
        let line = read_request(&mut stream)?;
        if line.contains("/chat/completions") {
            let first_ms = started.elapsed().as_secs_f64() * 1e3;
            respond(stream, "200 OK", &finish_reply())?;
            break first_ms;
        }
        respond(stream, "404 Not Found", "{}")?;
    };
    let output = child.wait_with_output().map_err(|e| e.to_string())?;
    let exit_ms = started.elapsed().as_secs_f64() * 1e3;
    if !output.status.success() {
        return Err(format!("{cmd:?} ended with {}:\n{}", output.status, String::from_utf8_lossy(&output.stderr)));
    }
    Ok(FirstCall { first_ms, exit_ms })
}
