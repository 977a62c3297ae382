//! One running plugin-host child and its pipes: start it, send frames, read answers by a
//! deadline, end it and say how it ended.

#[cfg(unix)]
use std::io::Read;
use std::io::{self, BufWriter, Write};
#[cfg(unix)]
use std::os::fd::AsRawFd;
#[cfg(unix)]
use std::os::unix::process::{CommandExt, ExitStatusExt};
#[cfg(unix)]
use std::process::ChildStdout;
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::time::Instant;

use harness_frames::{LENGTH_BYTES, Request, Response, decode_response_body, encode_request, frame_length};

use super::child::{LoadRequest, Loaded};
use super::relay::StderrRelay;
#[cfg(windows)]
use super::windows::detach;
use super::{HostCommand, child_gets};

/// The least read from a child's stdout at once: a small answer whole, in one read.
const READ_AHEAD: usize = 16 << 10;

/// A running child and its pipes.
pub(crate) struct Conn {
    child: Child,
    stdin: BufWriter<ChildStdin>,
    #[cfg(unix)]
    stdout: ChildStdout,
    /// The child's stdout, read by a thread (Windows pipes cannot be polled).
    #[cfg(windows)]
    stdout: super::pump::Pump,
    stderr: StderrRelay,
    /// What was read from stdout: answers, the last one handled ending at `taken`, bytes up
    /// to `filled` read.
    inbox: Vec<u8>,
    taken: usize,
    filled: usize,
    /// The largest answer read from it; over it the child is broken, not believed.
    frame_limit: usize,
    /// The Job Object the child runs in; closed after the child is ended (see `Drop`).
    #[cfg(windows)]
    _job: harness_sandbox::Job,
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.kill_group();
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.stderr.finish();
    }
}

/// What the harness holds of a child it just started: its pipes, and on Windows its job.
struct Ends {
    stdin: ChildStdin,
    #[cfg(unix)]
    stdout: ChildStdout,
    #[cfg(windows)]
    stdout: super::pump::Pump,
    stderr: StderrRelay,
    #[cfg(windows)]
    job: harness_sandbox::Job,
}

impl Ends {
    /// Puts `child` in its Job Object (Windows; before it has read a frame, so before any
    /// plugin code runs) and takes its pipes; the caller ends the child on an error.
    fn take(child: &mut Child, label: String, may_exec: bool) -> io::Result<Self> {
        #[cfg(windows)]
        let job = harness_sandbox::Job::hold(child, may_exec)
            .map_err(|e| io::Error::new(e.kind(), format!("cannot put it in a Job Object: {e}")))?;
        // Unix: exec is governed by the confinement the child applies (seccomp, Landlock).
        #[cfg(unix)]
        let _ = may_exec;
        let (Some(stdin), Some(stdout), Some(stderr)) = (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(io::Error::other("the plugin host has no pipes"));
        };
        let stderr = StderrRelay::new(stderr, label)?;
        #[cfg(windows)]
        let stdout = super::pump::Pump::new(stdout)?;
        Ok(Self {
            stdin,
            stdout,
            stderr,
            #[cfg(windows)]
            job,
        })
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
    /// Starts a child with `command` in a session of its own (on Windows: in a Job Object,
    /// which lets it start other processes only when `may_exec`), its stderr relayed under
    /// `label`, its environment the allowlist and `env`; answers over `frame_limit` bytes are
    /// refused unread.
    pub(crate) fn spawn(
        command: &HostCommand,
        frame_limit: usize,
        label: String,
        env: &[String],
        may_exec: bool,
    ) -> io::Result<Self> {
        let mut cmd = Command::new(&command.program);
        cmd.args(&command.args).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
        cmd.env_clear().envs(std::env::vars_os().filter(|(k, _)| k.to_str().is_some_and(|k| child_gets(k, env))));
        detach(&mut cmd);
        let mut child = cmd.spawn()?;
        let ends = match Ends::take(&mut child, label, may_exec) {
            Ok(ends) => ends,
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(e);
            }
        };
        Ok(Self {
            child,
            stdin: BufWriter::new(ends.stdin),
            stdout: ends.stdout,
            stderr: ends.stderr,
            inbox: Vec::new(),
            taken: 0,
            filled: 0,
            frame_limit,
            #[cfg(windows)]
            _job: ends.job,
        })
    }

    /// Says who the lines the child writes to its stderr from now on are from.
    pub(crate) fn relabel(&mut self, label: String) {
        self.stderr.relabel(label);
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
            Response::Declined(_) => Err(ReadFail::Protocol("a decline in answer to load".to_owned())),
        }
    }

    /// Waits until the child's stdout can be read, giving up at `deadline`, relaying its
    /// stderr meanwhile: what it wrote there before its answer is relayed before the answer
    /// is read.
    #[cfg(unix)]
    fn wait_readable(&mut self, deadline: Option<Instant>) -> Result<(), ReadFail> {
        loop {
            let ms = match deadline {
                None => -1,
                Some(deadline) => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return Err(ReadFail::Timeout);
                    }
                    i32::try_from(left.as_millis().max(1)).unwrap_or(i32::MAX)
                }
            };
            // A closed stderr is polled as -1, which poll(2) skips.
            let mut fds = [
                libc::pollfd { fd: self.stdout.as_raw_fd(), events: libc::POLLIN, revents: 0 },
                libc::pollfd { fd: self.stderr.fd().unwrap_or(-1), events: libc::POLLIN, revents: 0 },
            ];
            // SAFETY: two valid pollfds for descriptors this process owns (or -1, ignored).
            let ready = unsafe { libc::poll(fds.as_mut_ptr(), 2, ms) };
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
            if fds[1].revents != 0 {
                // Past the budget the rest waits for the next poll, which sees it at once.
                let _ = self.stderr.drain();
            }
            if fds[0].revents != 0 {
                return Ok(());
            }
        }
    }

    /// Reads until `need` bytes of the child's answers are in, giving up at `deadline`. Each
    /// read takes what the pipe holds, up to the room the inbox has: usually a whole answer
    /// in one read.
    fn fill(&mut self, need: usize, deadline: Option<Instant>) -> Result<(), ReadFail> {
        while self.filled < need {
            if self.inbox.len() < need.max(READ_AHEAD) {
                self.inbox.resize(need.max(READ_AHEAD), 0);
            }
            match self.read_some(deadline)? {
                0 => return Err(ReadFail::Closed),
                n => self.filled += n,
            }
        }
        Ok(())
    }

    /// Reads what the child's stdout holds into the inbox once it holds something, by
    /// `deadline`; 0 when the child closed it.
    #[cfg(unix)]
    fn read_some(&mut self, deadline: Option<Instant>) -> Result<usize, ReadFail> {
        loop {
            self.wait_readable(deadline)?;
            match self.stdout.read(&mut self.inbox[self.filled..]) {
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(ReadFail::Io(e)),
            }
        }
    }

    #[cfg(windows)]
    fn read_some(&mut self, deadline: Option<Instant>) -> Result<usize, ReadFail> {
        self.stdout.read_by(&mut self.inbox[self.filled..], deadline)
    }

    /// Reads one answer frame into the inbox and decodes it; one over the limit is refused
    /// on its length prefix, before its body is read.
    pub(crate) fn read_response(&mut self, deadline: Option<Instant>) -> Result<Response<'_>, ReadFail> {
        // What the last answer left (a child answers once a request, so normally nothing).
        self.inbox.copy_within(self.taken..self.filled, 0);
        self.filled -= self.taken;
        self.taken = 0;
        self.fill(LENGTH_BYTES, deadline)?;
        let mut prefix = [0u8; LENGTH_BYTES];
        prefix.copy_from_slice(&self.inbox[..LENGTH_BYTES]);
        let len = frame_length(prefix, self.frame_limit).map_err(|e| ReadFail::Protocol(e.to_string()))?;
        self.fill(LENGTH_BYTES + len, deadline)?;
        self.taken = LENGTH_BYTES + len;
        // A call's last words without a newline are still the call's.
        self.stderr.flush();
        let response = decode_response_body(&self.inbox[LENGTH_BYTES..self.taken])
            .map_err(|e| ReadFail::Protocol(e.to_string()))?;
        let kind = match response {
            Response::Ok(_) => "ok",
            Response::ToolError(_) => "tool_error",
            Response::Fatal(_) => "fatal",
            Response::Declined(_) => "declined",
        };
        tracing::debug!(target: "harness_loader", "plugin-host frame in: {kind}, {len} bytes");
        Ok(response)
    }

    /// Sends one frame.
    pub(crate) fn send(&mut self, request: &Request<'_>) -> io::Result<()> {
        let (kind, len) = match request {
            Request::Load { json } => ("load", json.len()),
            Request::Init { json } => ("init", json.len()),
            Request::Call { tool, arguments } => ("call", tool.len() + arguments.len()),
        };
        tracing::debug!(target: "harness_loader", "plugin-host frame out: {kind}, {len} bytes");
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

    /// Kills every process of the child's group: what its tools forked dies with it. The
    /// child leads a session, so its group is its pid; killed before the child is reaped,
    /// while no other process can have that number.
    #[cfg(unix)]
    fn kill_group(&self) {
        if let Ok(pid) = libc::pid_t::try_from(self.child.id()) {
            // SAFETY: a signal to a process group of our own child's making.
            unsafe { libc::kill(-pid, libc::SIGKILL) };
        }
    }

    /// Windows: closing the Job Object kills every process in it.
    #[cfg(not(unix))]
    fn kill_group(&self) {}

    /// Ends the child and says how it ended.
    pub(crate) fn end(mut self) -> String {
        // Whatever the call forked goes with it, before the child is reaped.
        self.kill_group();
        let status = match self.child.try_wait() {
            Ok(Some(status)) => Some(status),
            _ => {
                let _ = self.child.kill();
                self.child.wait().ok()
            }
        };
        // What a crashing child wrote last (a panic message, an abort's reason) is relayed
        // before the harness reports the crash.
        self.stderr.finish();
        status.map_or_else(|| "its status is unknown".to_owned(), describe)
    }
}

/// Starts the child in a session of its own (see [`own_session`]).
#[cfg(unix)]
fn detach(cmd: &mut Command) {
    // SAFETY: what runs between fork and exec makes system calls only (async-signal-safe)
    // and touches no memory of the parent's.
    unsafe {
        cmd.pre_exec(own_session);
    }
}

/// In the child, before exec: a session of its own, which has no controlling terminal (the
/// child cannot open `/dev/tty`, and no signal from the operator's terminal reaches it), and
/// every descriptor past stderr closed at exec, so that none the harness inherited without
/// close-on-exec (a terminal a shell left open, say) reaches a plugin. Marked, not closed:
/// the standard library's own pipe that reports a failed exec must live until the exec.
#[cfg(unix)]
fn own_session() -> io::Result<()> {
    // SAFETY: plain system calls; the one pointer is to a local of this frame.
    unsafe {
        if libc::setsid() < 0 {
            return Err(io::Error::last_os_error());
        }
        if libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, libc::CLOSE_RANGE_CLOEXEC) < 0 {
            // A kernel before 5.11: each descriptor in turn, up to the process's limit.
            let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
            let last =
                if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 { limit.rlim_cur.min(1 << 16) } else { 1024 };
            for fd in 3..last as libc::c_int {
                libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
            }
        }
    }
    Ok(())
}

#[cfg(unix)]
fn describe(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("it exited with status {code}"),
        (None, Some(signal)) => format!("it was killed by {}", super::signal_name(signal)),
        _ => "it ended".to_owned(),
    }
}

/// A Windows process's exit code is the exception that ended it, if one did.
#[cfg(windows)]
fn describe(status: ExitStatus) -> String {
    status.code().map_or_else(|| "it ended".to_owned(), super::exit_code_name)
}
