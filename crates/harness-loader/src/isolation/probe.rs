//! Reading a plugin's manifest through a child, so that the harness never loads a plugin
//! that runs in process isolation: its constructors and `tools()` run in the child, confined
//! as strictly as possible, and a crash there is a skipped file, not a dead harness.

use std::path::Path;
use std::time::{Duration, Instant};

use harness_abi::manifest::Manifest;

use super::HostCommand;
use super::child::{LoadRequest, Loaded};
use super::confine::Confinement;
use super::conn::{Conn, ReadFail};

/// How long a child may take to load a library and answer with its manifest.
const PROBE_TIMEOUT: Duration = Duration::from_secs(30);
/// The largest manifest answer read.
const MANIFEST_LIMIT: usize = 64 << 20;

/// A plugin's ABI version and checked manifest, read in a child.
pub(crate) struct Probed {
    /// The ABI version it was built against.
    pub(crate) abi_version: String,
    /// Its manifest.
    pub(crate) manifest: Manifest,
}

/// Why a probe failed: one line, and the long report when there is one.
pub(crate) struct Refusal {
    /// One line.
    pub(crate) reason: String,
    /// abi_stable's full report, for layout mismatches.
    pub(crate) detail: Option<String>,
}

impl Refusal {
    fn line(reason: String) -> Self {
        Self { reason, detail: None }
    }
}

/// Loads `path` in a child started with `command`, confined to loading when `confine`.
pub(crate) fn probe(command: &HostCommand, path: &Path, confine: bool) -> Result<Probed, Refusal> {
    let mut conn = Conn::spawn(command, MANIFEST_LIMIT).map_err(|e| {
        Refusal::line(format!("cannot start the plugin host ({}) to read it: {e}", command.program.display()))
    })?;
    let request = LoadRequest {
        path: path.to_path_buf(),
        confinement: confine.then(|| Confinement::load_only(path)),
        max_result_bytes: 0,
    };
    let answer = conn.load(&request, Instant::now() + PROBE_TIMEOUT);
    let answer = match answer {
        Ok(answer) => answer,
        Err(fail) => {
            let how = conn.end();
            let why = match fail {
                ReadFail::Timeout => format!("it did not load within {} s ({how})", PROBE_TIMEOUT.as_secs()),
                ReadFail::Closed => format!("loading it crashed its plugin host ({how})"),
                ReadFail::Io(e) => format!("reading its plugin host failed ({e}; {how})"),
                ReadFail::Protocol(m) => format!("its plugin host broke the protocol ({m}; {how})"),
            };
            return Err(Refusal::line(format!(
                "{why}: its constructor or its manifest function failed; the harness goes on without it"
            )));
        }
    };
    drop(conn);
    match answer {
        Loaded::Plugin { abi_version, manifest } => Ok(Probed { abi_version, manifest }),
        Loaded::Refused { reason, detail } => Err(Refusal { reason, detail }),
    }
}
