//! A child's stdout read by a thread of its own, for Windows: its anonymous pipes cannot be
//! polled or given a timeout, so the thread reads and the caller waits on a channel with its
//! deadline. The thread ends when the child's end of the pipe closes (the child ended).

use std::io::{self, Read};
use std::process::ChildStdout;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::Instant;

use super::conn::ReadFail;

/// The most one read of the pipe takes: a small answer whole.
const CHUNK: usize = 16 << 10;

/// What the reading thread sent and the caller has not taken yet.
pub(crate) struct Pump {
    chunks: Receiver<io::Result<Vec<u8>>>,
    pending: Vec<u8>,
    at: usize,
}

impl Pump {
    /// Starts the thread that reads `pipe`.
    pub(crate) fn new(mut pipe: ChildStdout) -> io::Result<Self> {
        let (tx, chunks) = mpsc::channel();
        let read = move || {
            loop {
                let mut chunk = vec![0u8; CHUNK];
                let sent = match pipe.read(&mut chunk) {
                    Ok(0) => break,
                    Ok(n) => {
                        chunk.truncate(n);
                        tx.send(Ok(chunk))
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => {
                        let _ = tx.send(Err(e));
                        break;
                    }
                };
                // The caller is gone: nobody wants what comes next.
                if sent.is_err() {
                    break;
                }
            }
        };
        std::thread::Builder::new().name("plugin-host-stdout".into()).spawn(read)?;
        Ok(Self { chunks, pending: Vec::new(), at: 0 })
    }

    /// Copies what has come into `buf`, waiting for something until `deadline`; 0 when the
    /// child closed its end.
    pub(crate) fn read_by(&mut self, buf: &mut [u8], deadline: Option<Instant>) -> Result<usize, ReadFail> {
        if self.at == self.pending.len() {
            let got = match deadline {
                None => self.chunks.recv().map_err(|_| RecvTimeoutError::Disconnected),
                Some(d) => {
                    let left = d.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return Err(ReadFail::Timeout);
                    }
                    self.chunks.recv_timeout(left)
                }
            };
            match got {
                Ok(Ok(chunk)) => {
                    self.pending = chunk;
                    self.at = 0;
                }
                Ok(Err(e)) => return Err(ReadFail::Io(e)),
                Err(RecvTimeoutError::Timeout) => return Err(ReadFail::Timeout),
                Err(RecvTimeoutError::Disconnected) => return Ok(0),
            }
        }
        let n = buf.len().min(self.pending.len() - self.at);
        buf[..n].copy_from_slice(&self.pending[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}
