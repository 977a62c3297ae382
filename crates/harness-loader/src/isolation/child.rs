//! The child side: confine itself, load one library, answer call frames until stdin closes.

#[cfg(unix)]
use std::fs::File;
use std::io::{self, BufWriter, Read, Write};
use std::path::PathBuf;

use harness_abi::manifest::InitDeclined;
use harness_frames::{LENGTH_BYTES, Request, Response, decode_request_body, encode_response, frame_length};
use harness_sandbox::confine::Confinement;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::FRAME_LIMIT;
use crate::library::{LoadError, PluginLibrary};

/// The body of a load frame.
#[derive(Serialize, Deserialize)]
pub(crate) struct LoadRequest {
    /// The library file (canonical).
    pub(crate) path: PathBuf,
    /// What the child confines itself to before loading; `None`: nothing.
    pub(crate) confinement: Option<Confinement>,
    /// Largest result the child sends; a larger one is refused here, before it is sent.
    pub(crate) max_result_bytes: usize,
    /// Hold the manifest to no rule and answer it as the plugin gives it ([`Loaded::Raw`]):
    /// `plugins check` reports each rule in its own check and still calls the tools.
    #[serde(default)]
    pub(crate) raw: bool,
    /// The resource limits the child sets on itself before loading.
    #[serde(default)]
    pub(crate) limits: harness_sandbox::Limits,
}

/// The answer to a load frame: the manifest, or why the library was refused.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Loaded {
    /// It loaded.
    Plugin {
        /// The ABI version it was built against.
        abi_version: String,
        /// Its manifest, checked.
        manifest: harness_abi::manifest::Manifest,
    },
    /// It loaded, its manifest held to no rule (a `raw` load request).
    Raw {
        /// The ABI version it was built against.
        abi_version: String,
        /// Its manifest as the plugin gives it.
        manifest_json: String,
    },
    /// It did not.
    Refused {
        /// One line.
        reason: String,
        /// The long report, when there is one.
        detail: Option<String>,
    },
}

/// The body of an init frame.
#[derive(Serialize, Deserialize)]
pub(crate) struct InitRequest {
    /// The plugin's configuration section.
    pub(crate) config: Value,
}

/// Takes stdout for frames and points fd 1 at stderr, so that whatever a plugin prints can
/// never corrupt a frame.
#[cfg(unix)]
fn take_stdout() -> io::Result<File> {
    use std::os::fd::FromRawFd;
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

#[cfg(windows)]
use super::windows::take_stdout;

/// Runs the plugin-host mode on this process's stdin and stdout; returns the exit code.
pub fn serve_plugin_host() -> i32 {
    #[cfg(windows)]
    super::windows::exit_on_fault();
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

/// The loaded library and the result limit it answers under.
struct Hosted {
    library: PluginLibrary,
    max_result_bytes: usize,
}

fn serve(mut input: impl Read, mut out: impl Write) -> io::Result<()> {
    let mut hosted: Option<Hosted> = None;
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
            Request::Load { json } => {
                let (answer, loaded) = load(json);
                hosted = loaded;
                let answer = serde_json::to_vec(&answer).unwrap_or_else(|_| b"null".to_vec());
                encode_response(&mut out, &Response::Ok(&answer))?;
            }
            Request::Init { json } => match init(hosted.as_ref(), json) {
                Ok(()) => encode_response(&mut out, &Response::Ok(b"null"))?,
                Err(InitRefused::Declined(declined)) => {
                    let json = serde_json::to_vec(&declined).unwrap_or_else(|_| b"{}".to_vec());
                    encode_response(&mut out, &Response::Declined(&json))?
                }
                Err(InitRefused::Failed(message)) => encode_response(&mut out, &Response::Fatal(&message))?,
            },
            Request::Call { tool, arguments } => match hosted.as_ref() {
                None => encode_response(&mut out, &Response::Fatal("a call came before the library loaded"))?,
                Some(h) => answer_call(h, tool, arguments, &mut out)?,
            },
        }
        out.flush()?;
    }
}

/// Confines the process, then loads the library: its constructors run confined.
fn load(json: &[u8]) -> (Loaded, Option<Hosted>) {
    let refused = |reason: String| Loaded::Refused { reason, detail: None };
    let request: LoadRequest = match serde_json::from_slice(json) {
        Ok(r) => r,
        Err(e) => return (refused(format!("bad load frame: {e}")), None),
    };
    if let Err(e) = request.limits.apply() {
        return (refused(format!("the plugin host cannot set its resource limits: {e}")), None);
    }
    if let Some(confinement) = &request.confinement
        && let Err(e) = harness_sandbox::confine::apply(confinement)
    {
        return (refused(format!("the plugin host cannot confine itself: {e}")), None);
    }
    // Started confined, as every thread the plugin starts is.
    watch_harness();
    // The harness checks and compiles the manifest it is sent; compiling the schemas here
    // too would only build jsonschema's metaschema validator in every child.
    let opened = if request.raw {
        PluginLibrary::load_rules_unchecked(&request.path)
    } else {
        PluginLibrary::load_schemas_unchecked(&request.path)
    };
    match opened {
        Ok(library) => {
            let abi_version = library.abi_version().to_owned();
            let answer = if request.raw {
                Loaded::Raw { abi_version, manifest_json: library.raw_manifest() }
            } else {
                Loaded::Plugin { abi_version, manifest: library.manifest().clone() }
            };
            (answer, Some(Hosted { library, max_result_bytes: request.max_result_bytes }))
        }
        Err(e @ LoadError::Layout { .. }) => {
            (Loaded::Refused { reason: e.to_string(), detail: e.detail().map(str::to_owned) }, None)
        }
        Err(e) => (refused(e.to_string()), None),
    }
}

/// Ends this process once the harness is gone, even while a tool hangs: in a session of its
/// own, the child gets no signal from the operator's terminal when the harness is
/// interrupted, and an idle child sees the end of its input anyway, but a tool that never
/// returns would run on. The harness gone, the child is given another parent; looked at
/// once a second, which costs a call nothing (a thread waiting on the frame pipe would be
/// woken by every frame). Started once per process. On Windows the child's Job Object does
/// this: closed with the harness, it kills the child.
#[cfg(unix)]
fn watch_harness() {
    static STARTED: std::sync::Once = std::sync::Once::new();
    STARTED.call_once(|| {
        // SAFETY: getppid has no preconditions.
        let harness = unsafe { libc::getppid() };
        let watch = move || loop {
            std::thread::sleep(std::time::Duration::from_secs(1));
            // SAFETY: getppid has no preconditions; the kill ends this process's whole group
            // at once (what its tools forked, then itself), as the harness's kill would; _exit
            // in case the signal could not be sent.
            unsafe {
                if libc::getppid() != harness {
                    libc::kill(-libc::getpid(), libc::SIGKILL);
                    libc::_exit(0);
                }
            }
        };
        // Without the thread the child only lives on in a hang, as before.
        let _ = std::thread::Builder::new().name("harness-watch".into()).spawn(watch);
    });
}

#[cfg(not(unix))]
fn watch_harness() {}

/// Why a library did not start: it declined for want of configuration, or it failed.
enum InitRefused {
    Declined(InitDeclined),
    Failed(String),
}

fn init(hosted: Option<&Hosted>, json: &[u8]) -> Result<(), InitRefused> {
    let failed = |m: String| InitRefused::Failed(m);
    let hosted = hosted.ok_or_else(|| failed("init came before the library loaded".to_owned()))?;
    let request: InitRequest = serde_json::from_slice(json).map_err(|e| failed(format!("bad init frame: {e}")))?;
    hosted.library.init(&request.config).map_err(|e| match e {
        LoadError::Declined(declined) => InitRefused::Declined(declined),
        e => failed(e.to_string()),
    })
}

/// Calls the tool and sends its answer; a result over the limit is refused here, unsent.
fn answer_call(hosted: &Hosted, tool: &str, arguments: &[u8], out: &mut impl Write) -> io::Result<()> {
    let arguments = String::from_utf8_lossy(arguments);
    let failure = match hosted.library.call(tool, &arguments) {
        Ok(json) if json.len() <= hosted.max_result_bytes => {
            return encode_response(out, &Response::Ok(json.as_bytes()));
        }
        Ok(json) => {
            let f = crate::handler::too_large(json.len(), hosted.max_result_bytes);
            harness_abi::manifest::ToolError { code: f.code, message: f.message }
        }
        Err(error) => error,
    };
    let json = serde_json::to_vec(&failure).unwrap_or_else(|_| b"{}".to_vec());
    encode_response(out, &Response::ToolError(&json))
}
