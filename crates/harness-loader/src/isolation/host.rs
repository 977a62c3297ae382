//! The host side: one child per plugin, started on first use, replaced after a crash.

use std::io::{self, BufWriter, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, ChildStdout, Command, ExitStatus, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use harness_core::{ToolFailure, ToolHandler};
use harness_frames::{LENGTH_BYTES, Request, Response, decode_response_body, encode_request, frame_length};
use serde_json::{Value, json};

use super::{FRAME_LIMIT, HostCommand, signal_name};
use crate::handler::parse_result;
use crate::settings::Timeouts;

/// How long a child may take to load and initialise its library.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// A running child and its pipes.
struct Conn {
    child: Child,
    stdin: BufWriter<ChildStdin>,
    stdout: ChildStdout,
    body: Vec<u8>,
}

impl Drop for Conn {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Why a response did not come.
enum ReadFail {
    Timeout,
    Closed,
    Io(io::Error),
    Protocol(String),
}

impl Conn {
    /// Reads exactly `buf.len()` bytes, giving up at `deadline`.
    fn read_exact_by(stdout: &mut ChildStdout, buf: &mut [u8], deadline: Option<Instant>) -> Result<(), ReadFail> {
        let mut filled = 0;
        while filled < buf.len() {
            if let Some(deadline) = deadline {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Err(ReadFail::Timeout);
                }
                let ms = i32::try_from(left.as_millis().max(1)).unwrap_or(i32::MAX);
                let mut fd = libc::pollfd { fd: stdout.as_raw_fd(), events: libc::POLLIN, revents: 0 };
                // SAFETY: one valid pollfd for a descriptor this process owns.
                let ready = unsafe { libc::poll(&mut fd, 1, ms) };
                if ready < 0 {
                    let e = io::Error::last_os_error();
                    if e.kind() == io::ErrorKind::Interrupted {
                        continue;
                    }
                    return Err(ReadFail::Io(e));
                }
                if ready == 0 {
                    return Err(ReadFail::Timeout);
                }
            }
            match stdout.read(&mut buf[filled..]) {
                Ok(0) => return Err(ReadFail::Closed),
                Ok(n) => filled += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(ReadFail::Io(e)),
            }
        }
        Ok(())
    }

    /// Reads one response frame into `self.body` and decodes it.
    fn read_response(&mut self, deadline: Option<Instant>) -> Result<Response<'_>, ReadFail> {
        let mut prefix = [0u8; LENGTH_BYTES];
        Self::read_exact_by(&mut self.stdout, &mut prefix, deadline)?;
        let len = frame_length(prefix, FRAME_LIMIT).map_err(|e| ReadFail::Protocol(e.to_string()))?;
        self.body.resize(len, 0);
        Self::read_exact_by(&mut self.stdout, &mut self.body, deadline)?;
        decode_response_body(&self.body).map_err(|e| ReadFail::Protocol(e.to_string()))
    }

    fn send(&mut self, request: &Request<'_>) -> io::Result<()> {
        encode_request(&mut self.stdin, request)?;
        self.stdin.flush()
    }

    /// Ends the child and says how it ended.
    fn end(mut self) -> String {
        let status = match self.child.try_wait() {
            Ok(Some(status)) => Some(status),
            _ => {
                let _ = self.child.kill();
                self.child.wait().ok()
            }
        };
        status.map_or_else(|| "its status is unknown".to_owned(), describe)
    }
}

fn describe(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("it exited with status {code}"),
        (None, Some(signal)) => format!("it was killed by {}", signal_name(signal)),
        _ => "it ended".to_owned(),
    }
}

/// Runs a plugin's tools in a child process; implements the core's `ToolHandler`.
pub struct ProcessHandler {
    plugin: String,
    path: PathBuf,
    config: Value,
    command: HostCommand,
    max_result_bytes: usize,
    timeouts: Timeouts,
    conn: Mutex<Option<Conn>>,
}

impl ProcessHandler {
    /// A handler for the plugin `plugin` in library `path`, configured with `config`.
    pub fn new(
        plugin: &str,
        path: PathBuf,
        config: Value,
        command: HostCommand,
        max_result_bytes: usize,
        timeouts: Timeouts,
    ) -> Self {
        Self { plugin: plugin.to_owned(), path, config, command, max_result_bytes, timeouts, conn: Mutex::new(None) }
    }

    fn failure(code: &str, message: String) -> ToolFailure {
        ToolFailure { code: code.to_owned(), message }
    }

    fn start(&self) -> Result<Conn, ToolFailure> {
        let mut child = Command::new(&self.command.program)
            .args(&self.command.args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| {
                Self::failure(
                    "tool_crashed",
                    format!(
                        "cannot start the plugin host for {} ({}): {e}",
                        self.plugin,
                        self.command.program.display()
                    ),
                )
            })?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            let _ = child.kill();
            return Err(Self::failure("tool_crashed", "the plugin host has no pipes".to_owned()));
        };
        let mut conn = Conn { child, stdin: BufWriter::new(stdin), stdout, body: Vec::new() };
        let init = json!({ "path": self.path, "config": self.config }).to_string();
        if let Err(e) = conn.send(&Request::Init { json: init.as_bytes() }) {
            return Err(Self::failure(
                "tool_crashed",
                format!("the plugin host for {} died at start: {e}", self.plugin),
            ));
        }
        let outcome = match conn.read_response(Some(Instant::now() + START_TIMEOUT)) {
            Ok(Response::Ok(_)) => Ok(()),
            Ok(Response::Fatal(m)) => Err(format!("the plugin host could not start {}: {m}", self.plugin)),
            Ok(Response::ToolError(_)) => Err("the plugin host answered init with a tool error".to_owned()),
            Err(_) => Err(String::new()),
        };
        match outcome {
            Ok(()) => Ok(conn),
            Err(m) if m.is_empty() => {
                let how = conn.end();
                Err(Self::failure("tool_crashed", format!("the plugin host for {} died at start: {how}", self.plugin)))
            }
            Err(m) => Err(Self::failure("tool_error", m)),
        }
    }
}

impl ToolHandler for ProcessHandler {
    fn call(&self, tool: &str, arguments: &Value) -> Result<Value, ToolFailure> {
        self.call_with_timeout(tool, arguments, self.timeouts.of(tool))
    }

    fn enforces_timeout(&self) -> bool {
        true
    }

    // It waits on its child's pipe with poll(2), never on the async runtime.
    fn may_run_inline(&self) -> bool {
        true
    }
}

impl ProcessHandler {
    /// Calls a tool in the child; at `timeout` the child is killed and the call is `tool_timeout`.
    pub fn call_with_timeout(
        &self,
        tool: &str,
        arguments: &Value,
        timeout: Option<Duration>,
    ) -> Result<Value, ToolFailure> {
        let mut slot = self.conn.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if slot.is_none() {
            *slot = Some(self.start()?);
        }
        let Some(conn) = slot.as_mut() else {
            return Err(Self::failure("tool_crashed", "the plugin host is gone".to_owned()));
        };
        let deadline = timeout.map(|t| Instant::now() + t);
        let arguments = arguments.to_string();
        let sent = conn.send(&Request::Call { tool, arguments: arguments.as_bytes() });
        let outcome = match sent {
            Err(_) => Err(ReadFail::Closed),
            Ok(()) => match conn.read_response(deadline) {
                Ok(Response::Ok(json)) => Ok(parse_result(&self.plugin, json, self.max_result_bytes)),
                Ok(Response::ToolError(json)) => {
                    Ok(Err(serde_json::from_slice::<harness_abi::manifest::ToolError>(json)
                        .map(|e| ToolFailure { code: e.code, message: e.message })
                        .unwrap_or_else(|_| {
                            Self::failure("tool_error", "the plugin host sent an unreadable error".to_owned())
                        })))
                }
                Ok(Response::Fatal(m)) => Err(ReadFail::Protocol(m.to_owned())),
                Err(fail) => Err(fail),
            },
        };
        match outcome {
            Ok(result) => result,
            Err(fail) => {
                let Some(conn) = slot.take() else {
                    return Err(Self::failure("tool_crashed", "the plugin host is gone".to_owned()));
                };
                let how = conn.end();
                Err(match fail {
                    ReadFail::Timeout => Self::failure(
                        "tool_timeout",
                        format!(
                            "{tool:?} did not answer within {} ms; its process was killed and the next call starts a fresh one",
                            timeout.map_or(0, |t| t.as_millis())
                        ),
                    ),
                    ReadFail::Closed => Self::failure(
                        "tool_crashed",
                        format!("{tool:?} crashed its plugin process ({how}); the next call starts a fresh one"),
                    ),
                    ReadFail::Io(e) => Self::failure(
                        "tool_crashed",
                        format!(
                            "reading from the plugin process of {tool:?} failed ({e}; {how}); the next call starts a fresh one"
                        ),
                    ),
                    ReadFail::Protocol(m) => Self::failure(
                        "tool_crashed",
                        format!(
                            "the plugin process of {tool:?} broke the protocol ({m}; {how}); the next call starts a fresh one"
                        ),
                    ),
                })
            }
        }
    }
}
