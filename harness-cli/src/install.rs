//! `harness plugins install`, `remove` and `upgrade`: the user's plugin directory and the
//! record of what was installed there (`installed.json`).
//!
//! A library is copied to a temporary file in that directory, checked there as discovery
//! would check it (ownership and mode, then its ABI version and manifest read by a confined
//! plugin host), and only then renamed to its place: the file checked is the file installed,
//! and a running harness that has the old file mapped keeps it.

mod registry;
mod unpack;

use std::collections::BTreeMap;
use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest as _, Sha256};

use crate::Result;
use crate::discovery::{PluginArgs, discovery_options, user_plugin_dir};
use crate::error::CliError;
use crate::settings::ToolSettings;

/// The record of installed plugins, in the user's plugin directory.
const RECORD: &str = "installed.json";

/// Where an installed plugin came from: what `upgrade` installs it from again.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub(crate) enum Source {
    /// A library file.
    File {
        /// The file, canonical.
        path: PathBuf,
    },
    /// A directory holding one library file, and its README and licence.
    Directory {
        /// The directory, canonical.
        path: PathBuf,
    },
    /// A `.tar.gz`, `.tgz` or `.zip` archive holding one library file, and its README and
    /// licence: unpacked into a private temporary directory, then installed as a directory.
    Archive {
        /// The archive file, canonical.
        path: PathBuf,
    },
    /// A cargo crate, built with `cargo build --release`.
    Crate {
        /// The crate's directory, canonical.
        path: PathBuf,
    },
    /// A crate in the registry (`--crate`): fetched with cargo, then built as a `Crate`.
    Registry {
        /// The crate's name.
        name: String,
        /// The registry's name in cargo's configuration; `None` for crates.io.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        registry: Option<String>,
        /// The version asked for; `None` for the newest, which `upgrade` fetches again.
        pinned: Option<String>,
        /// The version fetched.
        version: String,
    },
}

impl Source {
    /// The path it names; a registry crate names none.
    pub(crate) fn path(&self) -> Option<&Path> {
        match self {
            Self::File { path } | Self::Directory { path } | Self::Archive { path } | Self::Crate { path } => {
                Some(path)
            }
            Self::Registry { .. } => None,
        }
    }

    /// `crate /src/greet`, `file /tmp/libx.so`, `registry crate greet 0.1.0`: as `list` shows it.
    pub(crate) fn describe(&self) -> String {
        let kind = match self {
            Self::File { .. } => "file",
            Self::Directory { .. } => "directory",
            Self::Archive { .. } => "archive",
            Self::Crate { .. } => "crate",
            Self::Registry { name, registry, pinned, version } => {
                let newest = if pinned.is_none() { " (newest)" } else { "" };
                let from = registry.as_deref().map(|r| format!(" from registry {r}")).unwrap_or_default();
                return format!("crate {name} {version}{newest}{from}");
            }
        };
        format!("{kind} {}", self.path().map(Path::display).map(|p| p.to_string()).unwrap_or_default())
    }
}

/// What `plugins install` was given.
pub(crate) enum From {
    /// SOURCE: a library file, a directory or an archive.
    Source(PathBuf),
    /// `--path DIR`: a crate's directory.
    Path(PathBuf),
    /// `--crate NAME[@VERSION]`, and `--registry NAME`.
    Registry(String, Option<String>),
}

/// One installed plugin, as `installed.json` records it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Installed {
    /// Its manifest's name.
    pub(crate) name: String,
    /// Its manifest's version.
    pub(crate) version: String,
    /// The ABI version it was built against.
    pub(crate) abi_version: String,
    /// Where it came from.
    pub(crate) source: Source,
    /// The library's file name in the plugin directory.
    pub(crate) file: String,
    /// The documentation files copied with it, in `<dir>/<name>/`.
    #[serde(default)]
    pub(crate) docs: Vec<String>,
    /// The library's SHA-256, hex.
    pub(crate) sha256: String,
    /// When, RFC 3339.
    pub(crate) installed_at: String,
}

/// `installed.json`: every installed plugin by name.
#[derive(Debug, Default, Serialize, Deserialize)]
pub(crate) struct Record {
    /// By plugin name.
    pub(crate) plugins: BTreeMap<String, Installed>,
}

impl Record {
    /// The record in `dir`; empty when there is none yet.
    pub(crate) fn load(dir: &Path) -> Result<Self> {
        let path = dir.join(RECORD);
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Self::default()),
            Err(e) => return Err(CliError::Failure(format!("cannot read {}: {e}", path.display()))),
        };
        serde_json::from_str(&text).map_err(|e| {
            CliError::Failure(format!(
                "{} is not a record of installed plugins ({e}); fix it or move it away (the libraries beside it still load)",
                path.display()
            ))
        })
    }

    /// Writes the record to `dir` through a temporary file renamed over the old one.
    fn save(&self, dir: &Path) -> Result<()> {
        let path = dir.join(RECORD);
        let fail = |e: std::io::Error| CliError::Failure(format!("cannot write {}: {e}", path.display()));
        let mut text = serde_json::to_string_pretty(self).map_err(|e| CliError::Failure(e.to_string()))?;
        text.push('\n');
        let mut temp = tempfile::Builder::new().prefix(".installed-").suffix(".tmp").tempfile_in(dir).map_err(fail)?;
        temp.write_all(text.as_bytes()).map_err(fail)?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            temp.as_file().set_permissions(std::fs::Permissions::from_mode(0o644)).map_err(fail)?;
        }
        temp.persist(&path).map_err(|e| fail(e.error))?;
        Ok(())
    }

    /// The installed plugin `name`, or an error naming those installed.
    fn get(&self, name: &str, dir: &Path) -> Result<&Installed> {
        self.plugins.get(name).ok_or_else(|| {
            let names: Vec<&str> = self.plugins.keys().map(String::as_str).collect();
            let names = if names.is_empty() { "none".to_owned() } else { names.join(", ") };
            CliError::Usage(format!(
                "no plugin named {name:?} is installed in {}; installed: {names} (`harness plugins list` shows every plugin found)",
                dir.display()
            ))
        })
    }
}

/// The user's plugin directory, or why there is none.
pub(crate) fn data_dir() -> Result<PathBuf> {
    user_plugin_dir().ok_or_else(|| {
        CliError::Usage(
            "no user plugin directory: set XDG_DATA_HOME or HOME (LOCALAPPDATA on Windows) to an absolute path"
                .to_owned(),
        )
    })
}

/// A library checked in the plugin directory under a temporary name, ready to be renamed.
struct Staged {
    temp: tempfile::NamedTempFile,
    name: String,
    version: String,
    abi_version: String,
    sha256: String,
    /// The source's signature file's text, copied beside the installed library.
    signature: Option<String>,
    /// The trusted publisher that signed it.
    signed_by: Option<String>,
}

/// What one install takes: the library file, the docs that go with it, where they came from.
struct Plan {
    library: PathBuf,
    docs: Vec<PathBuf>,
    source: Source,
    /// Where an archive was unpacked: kept until the install ends, then removed.
    _unpacked: Option<tempfile::TempDir>,
}

/// `harness plugins install SOURCE | --path DIR | --crate NAME[@VERSION] [--force]`.
pub(crate) fn install(from: From, force: bool) -> Result<u8> {
    let dir = data_dir()?;
    let plan = match from {
        From::Path(krate) => plan_crate(&krate)?,
        From::Source(source) => plan_source(&source)?,
        From::Registry(spec, registry) => {
            let (name, pinned) = registry::parse_spec(&spec)?;
            registry.as_deref().map(registry::check_registry).transpose()?;
            registry_plan(Crate { name, registry, pinned })?
        }
    };
    prepare_dir(&dir)?;
    let _lock = lock(&dir)?;
    let staged = stage(&dir, &plan.library)?;
    let mut record = Record::load(&dir)?;
    match clash(&dir, &record, &staged, &plan)? {
        Some(why) if !force => return Err(CliError::Usage(why)),
        Some(why) => crate::log::notice!("harness: warning: installing anyway (--force): {why}"),
        None => {}
    }
    let old = record.plugins.get(&staged.name).map(|i| i.version.clone());
    let signed = staged.signed_by.as_ref().map(|p| format!(", signed by {p},")).unwrap_or_default();
    let installed = place(&dir, &mut record, staged, &plan)?;
    let replaced = old.map(|v| format!(" (replacing {v})")).unwrap_or_default();
    crate::plugins::emit(&format!(
        "installed {} {}{replaced}{signed} from {} as {}\n",
        installed.name,
        installed.version,
        installed.source.describe(),
        dir.join(&installed.file).display()
    ))
}

/// `harness plugins remove NAME`.
pub(crate) fn remove(name: &str) -> Result<u8> {
    let dir = data_dir()?;
    let _lock = lock_if_there(&dir)?;
    let mut record = Record::load(&dir)?;
    let installed = record.get(name, &dir)?.clone();
    let library = dir.join(&installed.file);
    match std::fs::remove_file(&library) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(CliError::Failure(format!("cannot remove {}: {e}", library.display()))),
    }
    place_signature(&dir, &library, None)?;
    remove_docs(&dir, name)?;
    record.plugins.remove(name);
    record.save(&dir)?;
    crate::plugins::emit(&format!("removed {name} {} ({})\n", installed.version, library.display()))
}

/// `harness plugins upgrade [NAME]`: each from its recorded source, a crate rebuilt.
pub(crate) fn upgrade(name: Option<&str>) -> Result<u8> {
    let dir = data_dir()?;
    let _lock = lock_if_there(&dir)?;
    let record = Record::load(&dir)?;
    let names: Vec<String> = match name {
        Some(name) => vec![record.get(name, &dir)?.name.clone()],
        None => record.plugins.keys().cloned().collect(),
    };
    if names.is_empty() {
        return crate::plugins::emit(&format!("no plugins installed in {}\n", dir.display()));
    }
    let mut out = String::new();
    for name in names {
        out.push_str(&upgrade_one(&dir, &name)?);
    }
    crate::plugins::emit(&out)
}

/// Installs `name` again from its recorded source; one line saying the old and new version.
fn upgrade_one(dir: &Path, name: &str) -> Result<String> {
    let old = Record::load(dir)?.get(name, dir)?.clone();
    if old.source.path().is_some_and(|from| !from.exists()) {
        return Err(CliError::Usage(format!(
            "plugin {name} was installed from {}, which is gone; install it again from where it is now with `harness plugins install SOURCE --force`, or `harness plugins remove {name}`",
            old.source.describe()
        )));
    }
    let plan = match &old.source {
        Source::Crate { path } => plan_crate(path)?,
        Source::File { path } | Source::Directory { path } | Source::Archive { path } => plan_source(path)?,
        Source::Registry { name, registry, pinned, .. } => {
            registry_plan(Crate { name: name.clone(), registry: registry.clone(), pinned: pinned.clone() })?
        }
    };
    prepare_dir(dir)?;
    let staged = stage(dir, &plan.library)?;
    if staged.name != name {
        return Err(CliError::Usage(format!(
            "{} now holds plugin {:?}, not {name:?}; install it with `harness plugins install`, and remove {name} with `harness plugins remove {name}`",
            old.source.describe(),
            staged.name
        )));
    }
    let mut record = Record::load(dir)?;
    let new = place(dir, &mut record, staged, &plan)?;
    let same = if new.sha256 == old.sha256 { " (the same file)" } else { "" };
    Ok(format!("upgraded {name} {} -> {}{same} from {}\n", old.version, new.version, new.source.describe()))
}

/// SOURCE as given: a library file, an archive, or a directory holding exactly one library
/// (and its docs).
fn plan_source(source: &Path) -> Result<Plan> {
    let path = dunce::canonicalize(source).map_err(|e| {
        CliError::Usage(format!(
            "cannot read {}: {e}; give a plugin library file, an archive or a directory holding one",
            source.display()
        ))
    })?;
    if let Some(kind) = unpack::Kind::of(&path) {
        let unpacked = unpack::unpack(&path, kind)?;
        let top = unpack::top(unpacked.path());
        let (library, docs) = one_library(&top, &path, "an archive to install holds exactly one")?;
        return Ok(Plan { library, docs, source: Source::Archive { path }, _unpacked: Some(unpacked) });
    }
    if !path.is_dir() {
        return Ok(Plan { library: path.clone(), docs: Vec::new(), source: Source::File { path }, _unpacked: None });
    }
    let (library, docs) = one_library(&path, &path, "give the one to install by its path")?;
    Ok(Plan { library, docs, source: Source::Directory { path }, _unpacked: None })
}

/// The one library file in `dir` and the docs beside it; `shown` is what the operator gave,
/// `fix` what to do when there are several.
fn one_library(dir: &Path, shown: &Path, fix: &str) -> Result<(PathBuf, Vec<PathBuf>)> {
    let (libraries, docs) = listing(dir)?;
    match libraries.as_slice() {
        [one] => Ok((one.clone(), docs)),
        [] => Err(CliError::Usage(format!(
            "{} holds no .{} library file; give a built plugin's directory or archive, or the file itself",
            shown.display(),
            harness_loader::library_extension()
        ))),
        many => Err(CliError::Usage(format!(
            "{} holds {} library files ({}); {fix}",
            shown.display(),
            many.len(),
            many.iter().filter_map(|f| f.file_name()).map(|f| f.to_string_lossy()).collect::<Vec<_>>().join(", ")
        ))),
    }
}

/// The library files of a directory, and its README and licence files, each sorted by name.
fn listing(dir: &Path) -> Result<(Vec<PathBuf>, Vec<PathBuf>)> {
    let entries = std::fs::read_dir(dir).map_err(|e| CliError::Usage(format!("cannot read {}: {e}", dir.display())))?;
    let mut libraries = Vec::new();
    let mut docs = Vec::new();
    for entry in entries.filter_map(std::result::Result::ok) {
        let file = entry.path();
        if !file.is_file() {
            continue;
        }
        let name = entry.file_name().to_string_lossy().to_ascii_uppercase();
        if file.extension().is_some_and(|x| x == harness_loader::library_extension()) {
            libraries.push(file);
        } else if ["README", "LICENSE", "LICENCE", "COPYING"].iter().any(|p| name.starts_with(p)) {
            docs.push(file);
        }
    }
    libraries.sort();
    docs.sort();
    Ok((libraries, docs))
}

/// `--path DIR`: the crate built with `cargo build --release`, its one cdylib to install.
fn plan_crate(dir: &Path) -> Result<Plan> {
    let path = dunce::canonicalize(dir)
        .map_err(|e| CliError::Usage(format!("--path {}: {e}; give the directory of a plugin crate", dir.display())))?;
    let manifest = path.join("Cargo.toml");
    if !manifest.is_file() {
        return Err(CliError::Usage(format!(
            "--path {}: no Cargo.toml there; give the directory of a plugin crate (`harness plugins new` makes one)",
            path.display()
        )));
    }
    let library = build_crate(&manifest)?;
    Ok(Plan { library, docs: Vec::new(), source: Source::Crate { path }, _unpacked: None })
}

/// `--crate NAME[@VERSION]`: the crate's source fetched with cargo and copied into the cache,
/// then built as `--path` builds.
fn registry_plan(krate: Crate) -> Result<Plan> {
    let cache = build_dir()?;
    let fetched = registry::fetch(&cargo_program(), &cache, &krate)?;
    let library = build_crate(&fetched.manifest)?;
    let Crate { name, registry, pinned } = krate;
    Ok(Plan {
        library,
        docs: fetched.docs,
        source: Source::Registry { name, registry, pinned, version: fetched.version },
        _unpacked: None,
    })
}

/// A crate to fetch from a registry.
struct Crate {
    /// Its name.
    name: String,
    /// The registry's name in cargo's configuration; `None` for crates.io.
    registry: Option<String>,
    /// The exact version; `None` for the newest.
    pinned: Option<String>,
}

/// The cargo to run: `CARGO` when set (as cargo sets it for the programs it runs), else `cargo`.
fn cargo_program() -> std::ffi::OsString {
    std::env::var_os("CARGO").filter(|v| !v.is_empty()).unwrap_or_else(|| "cargo".into())
}

/// Where a crate is built: `CARGO_TARGET_DIR` when set (as `cargo install` does), else
/// `$XDG_CACHE_HOME/harness/build` (`~/.cache/harness/build`), so that rebuilds are quick.
fn build_dir() -> Result<PathBuf> {
    if let Some(dir) = std::env::var_os("CARGO_TARGET_DIR").filter(|v| !v.is_empty()) {
        return Ok(PathBuf::from(dir));
    }
    let cache = if cfg!(windows) {
        std::env::var_os("LOCALAPPDATA").filter(|v| !v.is_empty()).map(PathBuf::from)
    } else {
        harness_trust::user_dir("XDG_CACHE_HOME", ".cache")
    };
    cache
        .map(|c| c.join("harness").join("build"))
        .ok_or_else(|| CliError::Usage("no cache directory to build in: set CARGO_TARGET_DIR or HOME".to_owned()))
}

/// Runs `cargo build --release` on `manifest` (its progress on stderr) and returns the one
/// cdylib that crate built, as cargo reports it.
fn build_crate(manifest: &Path) -> Result<PathBuf> {
    let target = build_dir()?;
    let cargo = cargo_program();
    crate::log::notice!(
        "harness: building {} with cargo build --release (in {})",
        manifest.display(),
        target.display()
    );
    let output = Command::new(&cargo)
        .args(["build", "--release", "--message-format=json-render-diagnostics", "--manifest-path"])
        .arg(manifest)
        .env("CARGO_TARGET_DIR", &target)
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| {
            CliError::Failure(format!(
                "cannot run {} to build {}: {e}; install Rust (https://rustup.rs) or set CARGO",
                Path::new(&cargo).display(),
                manifest.display()
            ))
        })?;
    if !output.status.success() {
        return Err(CliError::Failure(format!(
            "cargo build --release of {} failed (its errors are above); fix the crate and install again",
            manifest.display()
        )));
    }
    let built = cdylibs(&String::from_utf8_lossy(&output.stdout), manifest);
    match built.as_slice() {
        [one] => Ok(one.clone()),
        [] => Err(CliError::Usage(format!(
            "{} builds no cdylib library; a plugin crate has crate-type = [\"cdylib\"] under [lib]",
            manifest.display()
        ))),
        many => Err(CliError::Usage(format!(
            "{} builds {} cdylib libraries; install the one you mean by its file",
            manifest.display(),
            many.len()
        ))),
    }
}

/// The library files of the cdylib targets of the package at `manifest`, from cargo's JSON
/// messages.
fn cdylibs(messages: &str, manifest: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for message in messages.lines().filter_map(|l| serde_json::from_str::<Value>(l).ok()) {
        let ours =
            message["manifest_path"].as_str().is_some_and(|p| dunce::canonicalize(p).is_ok_and(|p| p == manifest));
        let cdylib = message["target"]["crate_types"].as_array().is_some_and(|t| t.iter().any(|k| k == "cdylib"));
        if message["reason"] != "compiler-artifact" || !ours || !cdylib {
            continue;
        }
        let files = message["filenames"].as_array().into_iter().flatten().filter_map(Value::as_str);
        out.extend(
            files
                .map(PathBuf::from)
                .filter(|f| f.extension().is_some_and(|x| x == harness_loader::library_extension())),
        );
    }
    out.sort();
    out.dedup();
    out
}

/// The lock file beside the record, held by each command that changes the directory.
const LOCK: &str = ".installed.lock";

/// Takes the plugin directory's lock, waiting for another install, removal or upgrade to end:
/// each reads the record, changes the directory and writes the record back, and two at once
/// would lose one's entry. Released when the file is dropped.
fn lock(dir: &Path) -> Result<std::fs::File> {
    let path = dir.join(LOCK);
    let fail = |e: std::io::Error| CliError::Failure(format!("cannot lock {}: {e}", path.display()));
    let file = std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(&path).map_err(fail)?;
    match file.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => {
            crate::log::notice!("harness: waiting for another install, removal or upgrade in {}", dir.display());
            file.lock().map_err(fail)?;
        }
        Err(std::fs::TryLockError::Error(e)) => return Err(fail(e)),
    }
    Ok(file)
}

/// [`lock`] where the directory exists: a command that only reads or removes makes none.
fn lock_if_there(dir: &Path) -> Result<Option<std::fs::File>> {
    dir.is_dir().then(|| lock(dir)).transpose()
}

/// Makes the plugin directory (mode 0755 where it is new).
fn prepare_dir(dir: &Path) -> Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o755);
    builder
        .create(dir)
        .map_err(|e| CliError::Failure(format!("cannot create the plugin directory {}: {e}", dir.display())))
}

/// Copies `library` into `dir` under a temporary name and checks the copy as discovery would
/// check it there: its and its directories' owner and mode, its ABI version, its manifest.
fn stage(dir: &Path, library: &Path) -> Result<Staged> {
    let fail =
        |e: std::io::Error| CliError::Failure(format!("cannot copy {} into {}: {e}", library.display(), dir.display()));
    let mut from =
        std::fs::File::open(library).map_err(|e| CliError::Usage(format!("cannot read {}: {e}", library.display())))?;
    // Named without the library extension, so that no harness starting meanwhile lists it.
    let mut temp = tempfile::Builder::new().prefix(".install-").suffix(".tmp").tempfile_in(dir).map_err(fail)?;
    let sha256 = copy_hashed(&mut from, temp.as_file_mut()).map_err(fail)?;
    let canonical = dunce::canonicalize(temp.path()).map_err(fail)?;
    harness_loader::check_plugin_file(&canonical).map_err(|why| {
        let why = why.trim_end_matches(", or pass --allow-insecure-plugins");
        CliError::Usage(format!(
            "the plugin directory {} would be refused by discovery: {why}; nothing was installed",
            dir.display()
        ))
    })?;
    // The reader names the copy it read; the operator knows the file they gave.
    let shown = library.display().to_string();
    let refused = |why: String| {
        let why = why.replace(&canonical.display().to_string(), &shown);
        CliError::Usage(format!("{shown} is refused: {why}; nothing was installed"))
    };
    // Checked before any of its code runs, over the copy that is installed.
    let signature_file = harness_loader::signature_path(library);
    let signature = harness_loader::read_signature(&signature_file).map_err(refused)?;
    let policy = crate::settings::default_signature_policy()?;
    let signed_by = harness_loader::check_signature(&canonical, (&signature_file, signature.as_deref()), &policy)
        .map_err(refused)?;
    let read =
        harness_loader::isolation::read_manifest(&crate::plugins::host_command()?, &canonical).map_err(refused)?;
    harness_loader::check_abi(&read.abi_version).map_err(|e| refused(e.to_string()))?;
    let manifest = harness_loader::parse_manifest(&read.manifest_json).map_err(|e| refused(e.to_string()))?;
    Ok(Staged {
        temp,
        name: manifest.name,
        version: manifest.version,
        abi_version: read.abi_version,
        sha256,
        signature,
        signed_by,
    })
}

/// Copies `from` into `to`, synced, mode 0755 (not writable by group or others, as discovery
/// requires); the SHA-256 of what was copied, hex.
fn copy_hashed(from: &mut std::fs::File, to: &mut std::fs::File) -> std::io::Result<String> {
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = from.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        to.write_all(&buf[..n])?;
    }
    to.sync_all()?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        to.set_permissions(std::fs::Permissions::from_mode(0o755))?;
    }
    Ok(format!("{:x}", hasher.finalize()))
}

/// Why a plugin may not be installed without --force: its name is installed already, or
/// found in another plugin directory; `None` when it may.
fn clash(dir: &Path, record: &Record, staged: &Staged, plan: &Plan) -> Result<Option<String>> {
    let name = &staged.name;
    if let Some(there) = record.plugins.get(name) {
        return Ok(Some(format!(
            "plugin {name} is installed already ({} from {}); run `harness plugins upgrade {name}` to install it again from there, or pass --force to replace it with {}",
            there.version,
            there.source.describe(),
            plan.library.display()
        )));
    }
    let file = dir.join(library_file(name));
    if file.exists() {
        return Ok(Some(format!(
            "{} exists already, but installed.json does not record it; pass --force to replace it",
            file.display()
        )));
    }
    if let Some(other) = found_elsewhere(dir, name)? {
        return Ok(Some(format!(
            "a plugin named {name} is found already in {}, which discovery reads first, so the installed one would never load; remove or rename that one, or pass --force to install this one anyway",
            other.display()
        )));
    }
    Ok(None)
}

/// Where discovery finds a plugin named `name` outside `dir`, with no flag given.
fn found_elsewhere(dir: &Path, name: &str) -> Result<Option<PathBuf>> {
    let settings = ToolSettings::load(&PluginArgs::none())?;
    let mut options = discovery_options(&settings)?;
    let ours = dunce::canonicalize(dir).unwrap_or_else(|_| dir.to_owned());
    options.dirs.retain(|d| dunce::canonicalize(d).map_or(true, |d| d != ours));
    // Only the names matter: nothing offered, so nothing is started or initialised.
    options.disable = vec![];
    options.enable = vec!["\u{0}".to_owned()];
    let found = harness_loader::discover(&options);
    Ok(found.plugins.iter().find(|p| p.manifest.name == *name).map(|p| p.path.clone()))
}

/// The library's file name in the plugin directory: `lib<name>.so`, `<name>.dll`.
pub(crate) fn library_file(name: &str) -> String {
    format!("{}{name}{}", std::env::consts::DLL_PREFIX, std::env::consts::DLL_SUFFIX)
}

/// Renames the staged library to its place, copies the docs, and records it.
fn place(dir: &Path, record: &mut Record, staged: Staged, plan: &Plan) -> Result<Installed> {
    let file = library_file(&staged.name);
    let target = dir.join(&file);
    place_signature(dir, &target, staged.signature.as_deref())?;
    staged
        .temp
        .persist(&target)
        .map_err(|e| CliError::Failure(format!("cannot write {}: {}", target.display(), e.error)))?;
    let docs = copy_docs(dir, &staged.name, &plan.docs)?;
    let installed = Installed {
        name: staged.name,
        version: staged.version,
        abi_version: staged.abi_version,
        source: plan.source.clone(),
        file,
        docs,
        sha256: staged.sha256,
        installed_at: harness_core::rfc3339(std::time::SystemTime::now()),
    };
    record.plugins.insert(installed.name.clone(), installed.clone());
    record.save(dir)?;
    Ok(installed)
}

/// Writes the signature beside where the library goes (aside, then renamed), or removes an
/// old one there: an earlier version's signature would refuse an unsigned new one.
fn place_signature(dir: &Path, library: &Path, signature: Option<&str>) -> Result<()> {
    let target = harness_loader::signature_path(library);
    let fail = |e: std::io::Error| CliError::Failure(format!("cannot write {}: {e}", target.display()));
    match signature {
        Some(text) => {
            let mut temp =
                tempfile::Builder::new().prefix(".install-").suffix(".tmp").tempfile_in(dir).map_err(fail)?;
            temp.write_all(text.as_bytes()).and_then(|()| temp.as_file().sync_all()).map_err(fail)?;
            temp.persist(&target).map_err(|e| fail(e.error))?;
            Ok(())
        }
        None => match std::fs::remove_file(&target) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(fail(e)),
            _ => Ok(()),
        },
    }
}

/// Copies the README and licence files into `<dir>/<name>/`, replacing what was there.
fn copy_docs(dir: &Path, name: &str, docs: &[PathBuf]) -> Result<Vec<String>> {
    remove_docs(dir, name)?;
    if docs.is_empty() {
        return Ok(Vec::new());
    }
    let into = dir.join(name);
    prepare_dir(&into)?;
    let mut copied = Vec::new();
    for doc in docs {
        let Some(file) = doc.file_name() else { continue };
        std::fs::copy(doc, into.join(file))
            .map_err(|e| CliError::Failure(format!("cannot copy {} into {}: {e}", doc.display(), into.display())))?;
        copied.push(file.to_string_lossy().into_owned());
    }
    Ok(copied)
}

/// Removes `<dir>/<name>/`, the plugin's docs, when it is there.
fn remove_docs(dir: &Path, name: &str) -> Result<()> {
    let docs = dir.join(name);
    match std::fs::remove_dir_all(&docs) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(CliError::Failure(format!("cannot remove {}: {e}", docs.display()))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_change_to_the_plugin_directory_at_a_time() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let held = lock(dir.path()).expect("the lock");
        let other = std::fs::File::open(dir.path().join(LOCK)).expect("the lock file");
        assert!(matches!(other.try_lock(), Err(std::fs::TryLockError::WouldBlock)), "held by the first");
        drop(held);
        assert!(other.try_lock().is_ok(), "free once the first ends");
    }
}
