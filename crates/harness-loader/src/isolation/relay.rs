//! A plugin-host child's stderr, relayed to the harness's own stderr line by line: each line
//! prefixed with the plugin's name, its control characters escaped, and cut when too long.
//!
//! The child gets a pipe, never the harness's stderr: a terminal inherited there would let a
//! tool push input into it (`TIOCSTI`) or repaint the operator's screen with escape
//! sequences. The pipe is read by the thread that talks to the child, while it waits for an
//! answer (see `conn.rs`), so that whatever the child wrote before its answer is relayed
//! before the answer is handled, and nothing is lost when it crashes. Between calls nobody
//! reads: a child that fills the pipe then waits for its next call, and the harness never
//! holds more than one line of it. On Windows, whose anonymous pipes cannot be polled, a
//! thread of its own reads the pipe and relays each line as it comes.

use std::io::{self, Read, Write};
#[cfg(unix)]
use std::os::fd::{AsRawFd, RawFd};
use std::process::ChildStderr;

/// The longest line relayed; the rest of a longer one is dropped, with a note.
pub(crate) const LINE_LIMIT: usize = 4096;
/// The most read in one go before the caller goes back to the child's answer, so that a child
/// flooding its stderr cannot keep the caller from its answer or its deadline.
#[cfg(unix)]
const READ_BUDGET: usize = 64 << 10;

/// The read end of a child's stderr and the line it is in the middle of.
#[cfg(unix)]
pub(crate) struct StderrRelay {
    pipe: ChildStderr,
    lines: Lines,
    /// The child's end is closed: nothing more will come.
    closed: bool,
}

#[cfg(unix)]
impl StderrRelay {
    /// Relays `pipe`, made non-blocking, under `label`.
    pub(crate) fn new(pipe: ChildStderr, label: String) -> io::Result<Self> {
        let fd = pipe.as_raw_fd();
        // SAFETY: fcntl on a descriptor this process owns; no pointers.
        let ok = unsafe {
            let flags = libc::fcntl(fd, libc::F_GETFL);
            flags >= 0 && libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) >= 0
        };
        if !ok {
            return Err(io::Error::last_os_error());
        }
        Ok(Self { pipe, lines: Lines::new(label), closed: false })
    }

    /// The descriptor to poll, `None` once the child's end is closed.
    pub(crate) fn fd(&self) -> Option<RawFd> {
        (!self.closed).then(|| self.pipe.as_raw_fd())
    }

    /// Who the next lines are from; the line in progress is relayed under the old name.
    pub(crate) fn relabel(&mut self, label: String) {
        self.flush();
        self.lines.label = label;
    }

    /// Relays what the pipe holds now, complete lines only, up to a budget; never blocks.
    /// Whether it stopped at the budget, with more perhaps waiting.
    pub(crate) fn drain(&mut self) -> bool {
        let mut chunk = [0u8; 8192];
        let mut out = String::new();
        let mut read = 0;
        while !self.closed && read < READ_BUDGET {
            match self.pipe.read(&mut chunk) {
                Ok(0) => self.closed = true,
                Ok(n) => {
                    read += n;
                    self.lines.take(&chunk[..n], &mut out);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // WouldBlock: all there is for now. Any other error: the pipe is unusable.
                Err(e) => {
                    self.closed = e.kind() != io::ErrorKind::WouldBlock;
                    break;
                }
            }
        }
        write_out(&out);
        read >= READ_BUDGET
    }

    /// Relays what is left once the child has ended, its last line included: a crash's
    /// message comes last. Up to 1 MiB (a child may have grown its pipe), never blocking.
    pub(crate) fn finish(&mut self) {
        let mut rounds = 0;
        while rounds < 16 && self.drain() {
            rounds += 1;
        }
        self.flush();
    }

    /// Relays the line in progress, if any: at the end of a call or of the child.
    pub(crate) fn flush(&mut self) {
        let mut out = String::new();
        self.lines.flush(&mut out);
        write_out(&out);
    }
}

/// How long the end of a child waits for the last of its stderr: a process it started and
/// that still holds the pipe must not hold the harness.
#[cfg(windows)]
const FINISH_WAIT: std::time::Duration = std::time::Duration::from_millis(250);

/// A child's stderr, relayed line by line by a thread that reads it.
#[cfg(windows)]
pub(crate) struct StderrRelay {
    lines: std::sync::Arc<std::sync::Mutex<Lines>>,
    /// Sent to (or dropped) when the thread has relayed the last byte.
    done: std::sync::mpsc::Receiver<()>,
}

#[cfg(windows)]
impl StderrRelay {
    /// Relays `pipe` under `label` from a thread of its own.
    pub(crate) fn new(mut pipe: ChildStderr, label: String) -> io::Result<Self> {
        let lines = std::sync::Arc::new(std::sync::Mutex::new(Lines::new(label)));
        let (tx, done) = std::sync::mpsc::channel();
        let shared = std::sync::Arc::clone(&lines);
        let relay = move || {
            let mut chunk = [0u8; 8192];
            loop {
                match pipe.read(&mut chunk) {
                    Ok(0) => break,
                    Ok(n) => {
                        let mut out = String::new();
                        lock(&shared).take(&chunk[..n], &mut out);
                        write_out(&out);
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(_) => break,
                }
            }
            let _ = tx.send(());
        };
        std::thread::Builder::new().name("plugin-host-stderr".into()).spawn(relay)?;
        Ok(Self { lines, done })
    }

    /// Who the next lines are from; the line in progress is relayed under the old name.
    pub(crate) fn relabel(&mut self, label: String) {
        let mut lines = lock(&self.lines);
        let mut out = String::new();
        lines.flush(&mut out);
        lines.label = label;
        write_out(&out);
    }

    /// Relays what is left once the child has ended, its last line included, waiting a
    /// moment for the thread to read the end of the pipe.
    pub(crate) fn finish(&mut self) {
        let _ = self.done.recv_timeout(FINISH_WAIT);
        self.flush();
    }

    /// Relays the line in progress, if any: at the end of a call or of the child.
    pub(crate) fn flush(&mut self) {
        let mut out = String::new();
        lock(&self.lines).flush(&mut out);
        write_out(&out);
    }
}

#[cfg(windows)]
fn lock(lines: &std::sync::Mutex<Lines>) -> std::sync::MutexGuard<'_, Lines> {
    lines.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn write_out(text: &str) {
    if !text.is_empty() {
        // The harness's stderr gone is no reason to fail a call.
        let _ = io::stderr().lock().write_all(text.as_bytes());
    }
}

/// Bytes cut into lines of at most [`LINE_LIMIT`], each made safe to show.
struct Lines {
    /// Who the lines are from: the plugin's name.
    label: String,
    line: Vec<u8>,
    /// The current line passed [`LINE_LIMIT`] and was cut: the rest of it is dropped.
    cut: bool,
}

impl Lines {
    fn new(label: String) -> Self {
        Self { label, line: Vec::new(), cut: false }
    }

    /// Takes `bytes` in; each line they complete or cut is appended to `out`.
    fn take(&mut self, mut bytes: &[u8], out: &mut String) {
        while !bytes.is_empty() {
            let end = bytes.iter().position(|&b| b == b'\n');
            let (part, rest) = match end {
                Some(i) => (&bytes[..i], &bytes[i + 1..]),
                None => (bytes, &[][..]),
            };
            if !self.cut {
                let room = LINE_LIMIT - self.line.len();
                self.line.extend_from_slice(&part[..part.len().min(room)]);
                if part.len() > room {
                    self.emit(&format!(" [line cut: longer than {LINE_LIMIT} bytes]"), out);
                    self.cut = true;
                } else if end.is_some() {
                    self.emit("", out);
                }
            }
            if end.is_some() {
                self.cut = false;
            }
            bytes = rest;
        }
    }

    /// Appends the line in progress, if any, to `out`.
    fn flush(&mut self, out: &mut String) {
        if !self.line.is_empty() {
            self.emit("", out);
        }
        self.cut = false;
    }

    fn emit(&mut self, note: &str, out: &mut String) {
        // The label may hold a file name, which is anyone's text too.
        out.push_str(&format!("[{}] {}{note}\n", escaped(self.label.as_bytes()), escaped(&self.line)));
        self.line.clear();
    }
}

/// `bytes` as text a terminal shows as it is: invalid UTF-8 replaced, and every character
/// [`harness_core::moves_or_reorders`] names but the tab written as `\u{1b}`.
pub(crate) fn escaped(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        // The tab is kept: a plugin's aligned output reads as it was written.
        if c != '\t' && harness_core::moves_or_reorders(c) {
            out.push_str(&format!("\\u{{{:x}}}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(chunks: &[&[u8]]) -> String {
        let mut lines = Lines::new("plugin p".to_owned());
        let mut out = String::new();
        for chunk in chunks {
            lines.take(chunk, &mut out);
        }
        lines.flush(&mut out);
        out
    }

    #[test]
    fn lines_are_prefixed_joined_across_reads_and_the_last_one_kept() {
        assert_eq!(lines(&[b"one\ntw", b"o\n", b"three"]), "[plugin p] one\n[plugin p] two\n[plugin p] three\n");
        assert_eq!(lines(&[b"\n"]), "[plugin p] \n");
    }

    #[test]
    fn a_long_line_is_cut_with_a_note_and_its_rest_dropped() {
        let long = vec![b'x'; LINE_LIMIT * 3];
        let out = lines(&[&long, &long, b"tail\nnext\n"]);
        let got: Vec<&str> = out.lines().collect();
        assert_eq!(got.len(), 2, "{out}");
        assert!(got[0].ends_with("x [line cut: longer than 4096 bytes]"), "{}", got[0]);
        assert_eq!(got[0].matches('x').count(), LINE_LIMIT);
        assert_eq!(got[1], "[plugin p] next");
    }

    #[test]
    fn control_characters_are_shown_not_obeyed_and_tabs_kept() {
        assert_eq!(escaped(b"\x1b[2K\rfake\tok"), "\\u{1b}[2K\\u{d}fake\tok");
        assert_eq!(escaped("\u{202e}evil\u{7f}".as_bytes()), "\\u{202e}evil\\u{7f}");
        assert_eq!(escaped(b"caf\xc3\xa9 \xff"), "café \u{fffd}");
    }
}
