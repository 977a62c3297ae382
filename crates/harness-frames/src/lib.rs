//! The framed protocol between `harness` and a plugin-host child process.
//!
//! In `process` isolation a plugin runs inside a child (`harness` in a hidden mode) that
//! speaks this protocol on its stdin and stdout. This crate holds the frames and their codec,
//! nothing else: no processes, no plugins.
//!
//! A frame is a little-endian `u32` length, then that many bytes: one kind byte and the
//! payload. JSON travels as raw bytes, never escaped inside another JSON document, so a call
//! costs one copy each way.
//!
//! ```
//! use harness_frames::{Request, decode_request, encode_request};
//! let mut wire = Vec::new();
//! encode_request(&mut wire, &Request::Call { tool: "calculate", arguments: br#"{"expression":"1+1"}"# }).unwrap();
//! let (request, used) = decode_request(&wire, 1 << 20).unwrap().unwrap();
//! assert_eq!(used, wire.len());
//! assert!(matches!(request, Request::Call { tool: "calculate", .. }));
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

use std::io::{self, Write};

/// Frame kinds of a request.
const REQ_INIT: u8 = 1;
const REQ_CALL: u8 = 2;
const REQ_LOAD: u8 = 3;
/// Frame kinds of a response.
const RESP_OK: u8 = 1;
const RESP_TOOL_ERROR: u8 = 2;
const RESP_FATAL: u8 = 3;
const RESP_DECLINED: u8 = 4;

/// The size of the length prefix.
pub const LENGTH_BYTES: usize = 4;

/// What the harness asks of the child.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request<'a> {
    /// Confine the process, then load the library: `{"path", "confinement", "max_result_bytes"}`
    /// as JSON. Answered with its manifest, or why it was refused.
    Load {
        /// The JSON document.
        json: &'a [u8],
    },
    /// Call the loaded library's `init` with its configuration: `{"config": {...}}` as JSON.
    Init {
        /// The JSON document.
        json: &'a [u8],
    },
    /// Call a tool with JSON arguments.
    Call {
        /// The tool name.
        tool: &'a str,
        /// The arguments, JSON text.
        arguments: &'a [u8],
    },
}

/// What the child answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Response<'a> {
    /// The result as JSON text (`null` for a successful init).
    Ok(&'a [u8]),
    /// The tool's error, `{"code", "message"}` as JSON text.
    ToolError(&'a [u8]),
    /// The child cannot go on (the library failed to load or init); a message.
    Fatal(&'a str),
    /// The library's `init` declined for want of configuration: the reason as JSON
    /// (`harness_abi::manifest::InitDeclined`). The child cannot go on, but nothing is wrong.
    Declined(&'a [u8]),
}

/// Why bytes are not a frame.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// The length prefix is over the limit.
    #[error("frame of {len} bytes is over the limit of {limit}")]
    TooLarge {
        /// The announced length.
        len: usize,
        /// The limit.
        limit: usize,
    },
    /// A frame with no kind byte.
    #[error("empty frame")]
    Empty,
    /// An unknown kind byte.
    #[error("unknown frame kind {0}")]
    UnknownKind(u8),
    /// A payload that does not have the shape its kind requires.
    #[error("malformed frame: {0}")]
    Malformed(&'static str),
}

fn write_frame(out: &mut impl Write, kind: u8, parts: &[&[u8]]) -> io::Result<()> {
    let len: usize = 1 + parts.iter().map(|p| p.len()).sum::<usize>();
    let len = u32::try_from(len).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "frame over 4 GiB"))?;
    out.write_all(&len.to_le_bytes())?;
    out.write_all(&[kind])?;
    for p in parts {
        out.write_all(p)?;
    }
    Ok(())
}

/// Writes a request frame.
pub fn encode_request(out: &mut impl Write, request: &Request<'_>) -> io::Result<()> {
    match request {
        Request::Load { json } => write_frame(out, REQ_LOAD, &[json]),
        Request::Init { json } => write_frame(out, REQ_INIT, &[json]),
        Request::Call { tool, arguments } => {
            let tool_len = u32::try_from(tool.len())
                .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "tool name over 4 GiB"))?;
            write_frame(out, REQ_CALL, &[&tool_len.to_le_bytes(), tool.as_bytes(), arguments])
        }
    }
}

/// Writes a response frame.
pub fn encode_response(out: &mut impl Write, response: &Response<'_>) -> io::Result<()> {
    match response {
        Response::Ok(json) => write_frame(out, RESP_OK, &[json]),
        Response::ToolError(json) => write_frame(out, RESP_TOOL_ERROR, &[json]),
        Response::Fatal(message) => write_frame(out, RESP_FATAL, &[message.as_bytes()]),
        Response::Declined(json) => write_frame(out, RESP_DECLINED, &[json]),
    }
}

/// Reads the length prefix: how many bytes follow it.
pub fn frame_length(prefix: [u8; LENGTH_BYTES], limit: usize) -> Result<usize, FrameError> {
    let len = u32::from_le_bytes(prefix) as usize;
    if len > limit {
        return Err(FrameError::TooLarge { len, limit });
    }
    if len == 0 {
        return Err(FrameError::Empty);
    }
    Ok(len)
}

/// Where the first frame in `buf` ends; `Ok(None)` when `buf` does not yet hold a whole frame.
fn frame_end(buf: &[u8], limit: usize) -> Result<Option<usize>, FrameError> {
    let Some(prefix) = buf.get(..LENGTH_BYTES) else {
        return Ok(None);
    };
    let mut p = [0u8; LENGTH_BYTES];
    p.copy_from_slice(prefix);
    let len = frame_length(p, limit)?;
    Ok((buf.len() >= LENGTH_BYTES + len).then_some(LENGTH_BYTES + len))
}

/// Decodes a request body (kind byte and payload, without the length prefix).
pub fn decode_request_body(body: &[u8]) -> Result<Request<'_>, FrameError> {
    let (&kind, payload) = body.split_first().ok_or(FrameError::Empty)?;
    match kind {
        REQ_LOAD => Ok(Request::Load { json: payload }),
        REQ_INIT => Ok(Request::Init { json: payload }),
        REQ_CALL => {
            let (len, rest) =
                payload.split_first_chunk::<4>().ok_or(FrameError::Malformed("call without a tool length"))?;
            let len = u32::from_le_bytes(*len) as usize;
            if len > rest.len() {
                return Err(FrameError::Malformed("tool name longer than the frame"));
            }
            let (tool, arguments) = rest.split_at(len);
            let tool = std::str::from_utf8(tool).map_err(|_| FrameError::Malformed("tool name is not UTF-8"))?;
            Ok(Request::Call { tool, arguments })
        }
        other => Err(FrameError::UnknownKind(other)),
    }
}

/// Decodes a response body (kind byte and payload, without the length prefix).
pub fn decode_response_body(body: &[u8]) -> Result<Response<'_>, FrameError> {
    let (&kind, payload) = body.split_first().ok_or(FrameError::Empty)?;
    match kind {
        RESP_OK => Ok(Response::Ok(payload)),
        RESP_TOOL_ERROR => Ok(Response::ToolError(payload)),
        RESP_FATAL => Ok(Response::Fatal(
            std::str::from_utf8(payload).map_err(|_| FrameError::Malformed("message is not UTF-8"))?,
        )),
        RESP_DECLINED => Ok(Response::Declined(payload)),
        other => Err(FrameError::UnknownKind(other)),
    }
}

/// Decodes the first request in `buf`, with the bytes it used; `Ok(None)` when incomplete.
pub fn decode_request(buf: &[u8], limit: usize) -> Result<Option<(Request<'_>, usize)>, FrameError> {
    match frame_end(buf, limit)? {
        None => Ok(None),
        Some(used) => Ok(Some((decode_request_body(&buf[LENGTH_BYTES..used])?, used))),
    }
}

/// Decodes the first response in `buf`, with the bytes it used; `Ok(None)` when incomplete.
pub fn decode_response(buf: &[u8], limit: usize) -> Result<Option<(Response<'_>, usize)>, FrameError> {
    match frame_end(buf, limit)? {
        None => Ok(None),
        Some(used) => Ok(Some((decode_response_body(&buf[LENGTH_BYTES..used])?, used))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_round_trip() {
        for r in [
            Request::Load { json: b"{\"path\":\"/x\"}" },
            Request::Init { json: b"{}" },
            Request::Call { tool: "t", arguments: b"{}" },
        ] {
            let mut wire = Vec::new();
            encode_request(&mut wire, &r).unwrap();
            assert_eq!(decode_request(&wire, 1024).unwrap(), Some((r, wire.len())));
            assert_eq!(decode_request(&wire[..wire.len() - 1], 1024).unwrap(), None);
        }
    }

    #[test]
    fn responses_round_trip() {
        for r in
            [Response::Ok(b"42"), Response::ToolError(b"{}"), Response::Fatal("init failed"), Response::Declined(b"{}")]
        {
            let mut wire = Vec::new();
            encode_response(&mut wire, &r).unwrap();
            assert_eq!(decode_response(&wire, 1024).unwrap(), Some((r, wire.len())));
        }
    }

    #[test]
    fn bad_frames_are_errors_not_panics() {
        assert_eq!(decode_request(&[0, 0, 0, 0], 10), Err(FrameError::Empty));
        assert!(matches!(decode_request(&[0xff, 0xff, 0xff, 0x7f], 10), Err(FrameError::TooLarge { .. })));
        assert_eq!(decode_request(&[1, 0, 0, 0, 9], 10), Err(FrameError::UnknownKind(9)));
        assert!(matches!(decode_request(&[3, 0, 0, 0, 2, 1, 0], 10), Err(FrameError::Malformed(_))));
        assert!(matches!(decode_request(&[6, 0, 0, 0, 2, 9, 0, 0, 0, b'x'], 10), Err(FrameError::Malformed(_))));
        assert!(matches!(decode_response(&[3, 0, 0, 0, 3, 0xff, 0xfe], 10), Err(FrameError::Malformed(_))));
    }
}
