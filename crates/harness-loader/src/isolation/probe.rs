//! Reading a plugin's manifest through a child, so that the harness never loads a plugin
//! that runs in process isolation: its constructors and `tools()` run in the child, confined
//! as strictly as possible, and a crash there is a skipped file, not a dead harness.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use harness_abi::manifest::Manifest;
use harness_sandbox::confine::{Confinement, Enforcement, kernel_support};

use super::HostCommand;
use super::child::{LoadRequest, Loaded};
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

/// Loads each of `paths` in turn in one child started with `command` (one process start for
/// all, not one each), confined to loading them when `confine`. A library that kills the
/// child is refused with how it died, and a fresh child takes the files after it.
pub(crate) fn probe(command: &HostCommand, paths: &[PathBuf], confine: bool) -> Vec<Result<Probed, Refusal>> {
    let mut out = Vec::with_capacity(paths.len());
    let mut conn: Option<Conn> = None;
    for (i, path) in paths.iter().enumerate() {
        // A fresh child confines itself once, to every file it may still be asked to load.
        let confinement =
            (conn.is_none() && confine).then(|| Confinement::loading(paths[i..].iter().map(PathBuf::as_path)));
        let label = format!("plugin file {}", path.file_name().unwrap_or(path.as_os_str()).to_string_lossy());
        if let Some(c) = conn.as_mut() {
            c.relabel(label);
        } else {
            // No plugin's own variables: what it is, and so what it may be given, is not known yet.
            match Conn::spawn(command, MANIFEST_LIMIT, label, &[], false) {
                Ok(c) => conn = Some(c),
                Err(e) => {
                    out.push(Err(Refusal::line(format!(
                        "cannot start the plugin host ({}) to read it: {e}",
                        command.program.display()
                    ))));
                    continue;
                }
            }
        }
        let Some(c) = conn.as_mut() else { continue };
        let request = LoadRequest {
            path: path.clone(),
            confinement,
            max_result_bytes: 0,
            raw: false,
            limits: Default::default(),
        };
        match c.load(&request, Instant::now() + PROBE_TIMEOUT) {
            Ok(Loaded::Plugin { abi_version, manifest }) => out.push(Ok(Probed { abi_version, manifest })),
            Ok(Loaded::Refused { reason, detail }) => out.push(Err(Refusal { reason, detail })),
            Ok(Loaded::Raw { .. }) => {
                out.push(Err(Refusal::line("its plugin host answered a raw manifest unasked".to_owned())))
            }
            Err(fail) => {
                let how = conn.take().map_or_else(|| "it is gone".to_owned(), Conn::end);
                out.push(Err(Refusal::line(died(fail, &how))));
            }
        }
    }
    // Its answers are all in: the start-up need not wait for it to exit.
    if let Some(c) = conn {
        c.dismiss();
    }
    out
}

fn died(fail: ReadFail, how: &str) -> String {
    let why = match fail {
        ReadFail::Timeout => format!("it did not load within {} s ({how})", PROBE_TIMEOUT.as_secs()),
        ReadFail::Closed => format!("loading it crashed its plugin host ({how})"),
        ReadFail::Io(e) => format!("reading its plugin host failed ({e}; {how})"),
        ReadFail::Protocol(m) => format!("its plugin host broke the protocol ({m}; {how})"),
    };
    format!("{why}: its constructor or its manifest function failed; the harness goes on without it")
}

/// A library file's ABI version and manifest as its plugin gives them, unchecked.
#[derive(Debug, Clone)]
pub struct FileManifest {
    /// The ABI version it reports.
    pub abi_version: String,
    /// Its manifest's JSON text, as the plugin gives it; held to no rule yet.
    pub manifest_json: String,
}

/// Reads the manifest of `path` (canonical) in a child started with `command` and confined to
/// loading that one file when the kernel can confine it: for `plugins inspect` and `plugins
/// check` on a file, so that reading a manifest never runs a plugin's code in the harness.
pub fn read_manifest(command: &HostCommand, path: &Path) -> Result<FileManifest, String> {
    let confine = matches!(kernel_support(), Enforcement::Kernel { .. });
    let label = format!("plugin file {}", path.file_name().unwrap_or(path.as_os_str()).to_string_lossy());
    let mut conn = Conn::spawn(command, MANIFEST_LIMIT, label, &[], false)
        .map_err(|e| format!("cannot start the plugin host ({}) to read it: {e}", command.program.display()))?;
    let confinement = confine.then(|| Confinement::loading([path]));
    let request =
        LoadRequest { path: path.to_owned(), confinement, max_result_bytes: 0, raw: true, limits: Default::default() };
    let answer = match conn.load(&request, Instant::now() + PROBE_TIMEOUT) {
        Ok(Loaded::Raw { abi_version, manifest_json }) => Ok(FileManifest { abi_version, manifest_json }),
        Ok(Loaded::Refused { reason, .. }) => Err(reason),
        Ok(Loaded::Plugin { .. }) => Err("its plugin host answered a checked manifest, not the raw one".to_owned()),
        Err(fail) => {
            let how = conn.end();
            return Err(died(fail, &how));
        }
    };
    conn.dismiss();
    answer
}
