//! One running plugin-host child and its pipes: start it, send frames, read answers by a
//! deadline, end it and say how it ended.

use std::io::{self, BufWriter, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, ChildStdin, ChildStdout, Command, ExitStatus, Stdio};
use std::time::Instant;

use harness_frames::{LENGTH_BYTES, Request, Response, decode_response_body, encode_request, frame_length};

use super::child::{LoadRequest, Loaded};
use super::{HostCommand, signal_name};

/// A running child and its pipes.
pub(crate) struct Conn {
    child: Child,
    stdin: BufWriter<ChildStdin>,
    stdout: ChildStdout,
    body: Vec<u8>,
    /// The largest answer read from it; over it the child is broken, not believed.
    frame_limit: usize,
}

impl Drop for Conn {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Why an answer did not come.
pub(crate) enum ReadFail {
    /// The deadline passed.
    Timeout,
    /// The child closed its end (it died).
    Closed,
    /// Reading failed.
    Io(io::Error),
    /// The child sent something that is not a frame, or one over the limit.
    Protocol(String),
}

impl Conn {
    /// Starts a child with `command`; answers over `frame_limit` bytes are refused unread.
    pub(crate) fn spawn(command: &HostCommand, frame_limit: usize) -> io::Result<Self> {
        let mut child = Command::new(&command.program)
            .args(&command.args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(io::Error::other("the plugin host has no pipes"));
        };
        Ok(Self { child, stdin: BufWriter::new(stdin), stdout, body: Vec::new(), frame_limit })
    }

    /// Asks the child to confine itself and load its library; its answer, or why none came.
    pub(crate) fn load(&mut self, request: &LoadRequest, deadline: Instant) -> Result<Loaded, ReadFail> {
        let json = serde_json::to_vec(request).map_err(|e| ReadFail::Protocol(e.to_string()))?;
        self.send(&Request::Load { json: &json }).map_err(|_| ReadFail::Closed)?;
        match self.read_response(Some(deadline))? {
            Response::Ok(json) => serde_json::from_slice(json)
                .map_err(|e| ReadFail::Protocol(format!("an unreadable answer to load: {e}"))),
            Response::Fatal(m) => Err(ReadFail::Protocol(m.to_owned())),
            Response::ToolError(_) => Err(ReadFail::Protocol("a tool error in answer to load".to_owned())),
        }
    }

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

    /// Reads one answer frame into `self.body` and decodes it; one over the limit is refused
    /// on its length prefix, before its body is read.
    pub(crate) fn read_response(&mut self, deadline: Option<Instant>) -> Result<Response<'_>, ReadFail> {
        let mut prefix = [0u8; LENGTH_BYTES];
        Self::read_exact_by(&mut self.stdout, &mut prefix, deadline)?;
        let len = frame_length(prefix, self.frame_limit).map_err(|e| ReadFail::Protocol(e.to_string()))?;
        self.body.resize(len, 0);
        Self::read_exact_by(&mut self.stdout, &mut self.body, deadline)?;
        decode_response_body(&self.body).map_err(|e| ReadFail::Protocol(e.to_string()))
    }

    /// Sends one frame.
    pub(crate) fn send(&mut self, request: &Request<'_>) -> io::Result<()> {
        encode_request(&mut self.stdin, request)?;
        self.stdin.flush()
    }

    /// Ends the child without waiting for it: killed and reaped on a thread of its own, so
    /// that the caller does not wait while the kernel tears down a process with libraries
    /// mapped (2 to 3 ms with ten of them, measured). A thread that cannot start means the
    /// wait happens here, as on any drop.
    pub(crate) fn dismiss(self) {
        let _ = std::thread::Builder::new().name("plugin-host-reap".into()).spawn(move || drop(self));
    }

    /// Ends the child and says how it ended.
    pub(crate) fn end(mut self) -> String {
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
