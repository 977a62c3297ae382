//! A server's child process: started with a small environment, its stderr kept (and forwarded
//! when asked), its exit watched so that a dead server is named as such.

use std::collections::VecDeque;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::io::AsyncReadExt;
use tokio::process::{ChildStderr, ChildStdin, ChildStdout, Command};
use tokio::sync::{oneshot, watch};

use crate::config::{INHERITED_ENV, McpServerConfig};

/// Lines of a server's stderr kept for reports.
const TAIL_LINES: usize = 8;
/// Longest stderr line kept or forwarded; the rest of a longer line is dropped.
const MAX_LINE: usize = 1000;

/// The child's pipes for the protocol.
pub(crate) struct Pipes {
    pub(crate) stdout: ChildStdout,
    pub(crate) stdin: ChildStdin,
}

/// What is known of a running (or no longer running) child.
pub(crate) struct ChildWatch {
    exit: watch::Receiver<Option<String>>,
    stderr_done: watch::Receiver<bool>,
    tail: Arc<Mutex<VecDeque<String>>>,
    kill: Mutex<Option<oneshot::Sender<()>>>,
}

/// Starts `config`'s command, in `working_dir` when given. Must run inside the runtime that
/// will drive it.
pub(crate) fn spawn(
    config: &McpServerConfig,
    forward_stderr: bool,
    working_dir: Option<&std::path::Path>,
) -> std::io::Result<(Pipes, ChildWatch)> {
    let mut command = Command::new(&config.command);
    command.args(&config.args).env_clear();
    if let Some(dir) = working_dir {
        command.current_dir(dir);
    }
    for key in INHERITED_ENV {
        if let Some(value) = std::env::var_os(key) {
            command.env(key, value);
        }
    }
    command
        .envs(&config.env)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Whatever else happens, a dropped child is a killed child.
        .kill_on_drop(true);
    let mut child = command.spawn()?;
    let (Some(stdin), Some(stdout), Some(stderr)) = (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        return Err(std::io::Error::other("the child's pipes were not set up"));
    };

    let tail = Arc::new(Mutex::new(VecDeque::new()));
    let (done_tx, stderr_done) = watch::channel(false);
    let prefix = forward_stderr.then(|| format!("harness: mcp {}: ", config.name));
    tokio::spawn(read_stderr(stderr, tail.clone(), prefix, done_tx));

    let (exit_tx, exit) = watch::channel(None);
    let (kill_tx, kill_rx) = oneshot::channel();
    tokio::spawn(async move {
        let status = tokio::select! {
            status = child.wait() => status,
            // Asked to stop, or every holder of the watch is gone.
            _ = kill_rx => {
                let _ = child.start_kill();
                child.wait().await
            }
        };
        let described = match status {
            Ok(status) => describe_exit(status),
            Err(e) => format!("could not be waited for: {e}"),
        };
        let _ = exit_tx.send(Some(described));
    });
    Ok((Pipes { stdout, stdin }, ChildWatch { exit, stderr_done, tail, kill: Mutex::new(Some(kill_tx)) }))
}

/// `exited with status 3`, `was killed by signal 9`.
fn describe_exit(status: ExitStatus) -> String {
    if let Some(code) = status.code() {
        return format!("exited with status {code}");
    }
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(signal) = status.signal() {
            return format!("was killed by signal {signal}");
        }
    }
    format!("ended ({status})")
}

/// Keeps the last lines of the child's stderr, forwarding each with `prefix` when given.
async fn read_stderr(
    mut stderr: ChildStderr,
    tail: Arc<Mutex<VecDeque<String>>>,
    prefix: Option<String>,
    done: watch::Sender<bool>,
) {
    let mut chunk = vec![0u8; 4096];
    let mut line = Vec::new();
    let keep = |line: &mut Vec<u8>| {
        let text = String::from_utf8_lossy(line).trim_end().to_owned();
        line.clear();
        if text.is_empty() {
            return;
        }
        if let Some(prefix) = &prefix {
            // The server's own bytes: escape sequences in them are shown, not obeyed.
            eprintln!("{prefix}{}", harness_core::printable(&text));
        }
        let mut tail = tail.lock().unwrap_or_else(PoisonError::into_inner);
        if tail.len() == TAIL_LINES {
            tail.pop_front();
        }
        tail.push_back(text);
    };
    loop {
        let n = match stderr.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        for &byte in &chunk[..n] {
            if byte == b'\n' {
                keep(&mut line);
            } else if line.len() < MAX_LINE {
                line.push(byte);
            }
        }
    }
    keep(&mut line);
    let _ = done.send(true);
}

impl ChildWatch {
    /// How the child ended, once it has.
    pub(crate) fn exit(&self) -> Option<String> {
        self.exit.borrow().clone()
    }

    /// Waits up to `limit` for the child to end; how it ended, if it did.
    pub(crate) async fn wait_exit(&self, limit: Duration) -> Option<String> {
        let mut exit = self.exit.clone();
        let _ = tokio::time::timeout(limit, exit.wait_for(Option::is_some)).await;
        self.exit()
    }

    /// The last lines the child wrote to stderr, waiting up to `limit` for it to close stderr.
    pub(crate) async fn stderr_tail(&self, limit: Duration) -> Vec<String> {
        let mut done = self.stderr_done.clone();
        let _ = tokio::time::timeout(limit, done.wait_for(|d| *d)).await;
        self.tail.lock().unwrap_or_else(PoisonError::into_inner).iter().cloned().collect()
    }

    /// Kills the child (if it still runs).
    pub(crate) fn kill(&self) {
        if let Some(kill) = self.kill.lock().unwrap_or_else(PoisonError::into_inner).take() {
            let _ = kill.send(());
        }
    }
}
