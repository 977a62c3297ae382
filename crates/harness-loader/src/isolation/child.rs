//! The child side: load one library, answer call frames until stdin closes.

use std::fs::File;
use std::io::{self, BufWriter, Read, Write};
use std::os::fd::FromRawFd;
use std::path::PathBuf;

use harness_frames::{LENGTH_BYTES, Request, Response, decode_request_body, encode_response, frame_length};
use serde::Deserialize;
use serde_json::Value;

use super::FRAME_LIMIT;
use crate::library::PluginLibrary;

/// The body of an init frame.
#[derive(Deserialize)]
pub(crate) struct InitRequest {
    pub(crate) path: PathBuf,
    pub(crate) config: Value,
}

/// Takes stdout for frames and points fd 1 at stderr, so that whatever a plugin prints can
/// never corrupt a frame.
fn take_stdout() -> io::Result<File> {
    // SAFETY: dup and dup2 on the process's own standard descriptors; the duplicate is owned
    // by the returned File alone.
    unsafe {
        let frames = libc::dup(1);
        if frames < 0 {
            return Err(io::Error::last_os_error());
        }
        if libc::dup2(2, 1) < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(File::from_raw_fd(frames))
    }
}

/// Runs the plugin-host mode on this process's stdin and stdout; returns the exit code.
pub fn serve_plugin_host() -> i32 {
    let out = match take_stdout() {
        Ok(out) => out,
        Err(e) => {
            eprintln!("harness plugin host: cannot set up its output: {e}");
            return 2;
        }
    };
    match serve(io::stdin().lock(), BufWriter::new(out)) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("harness plugin host: {e}");
            1
        }
    }
}

fn serve(mut input: impl Read, mut out: impl Write) -> io::Result<()> {
    let mut library: Option<PluginLibrary> = None;
    let mut body = Vec::new();
    loop {
        let mut prefix = [0u8; LENGTH_BYTES];
        match input.read_exact(&mut prefix) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(()),
            Err(e) => return Err(e),
        }
        let len = frame_length(prefix, FRAME_LIMIT).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        body.resize(len, 0);
        input.read_exact(&mut body)?;
        let request = decode_request_body(&body).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        match request {
            Request::Init { json } => match init(json) {
                Ok(loaded) => {
                    library = Some(loaded);
                    encode_response(&mut out, &Response::Ok(b"null"))?;
                }
                Err(message) => encode_response(&mut out, &Response::Fatal(&message))?,
            },
            Request::Call { tool, arguments } => {
                let Some(lib) = library.as_ref() else {
                    encode_response(&mut out, &Response::Fatal("a call came before init"))?;
                    out.flush()?;
                    continue;
                };
                let arguments = String::from_utf8_lossy(arguments);
                match lib.call(tool, &arguments) {
                    Ok(json) => encode_response(&mut out, &Response::Ok(json.as_bytes()))?,
                    Err(error) => {
                        let json = serde_json::to_vec(&error).unwrap_or_else(|_| b"{}".to_vec());
                        encode_response(&mut out, &Response::ToolError(&json))?;
                    }
                }
            }
        }
        out.flush()?;
    }
}

fn init(json: &[u8]) -> Result<PluginLibrary, String> {
    let request: InitRequest = serde_json::from_slice(json).map_err(|e| format!("bad init frame: {e}"))?;
    let library = PluginLibrary::load(&request.path).map_err(|e| e.to_string())?;
    library.init(&request.config).map_err(|e| e.to_string())?;
    Ok(library)
}
