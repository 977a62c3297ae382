//! The plugin cache: what each library file declared (its ABI version and manifest) when a
//! plugin host last read it, so that a start-up starts no plugin host for files that have not
//! changed since (the probe child was most of a start-up with ten plugin files).
//!
//! Why an entry can stand in for reading the file again:
//! - it is used only for the file it was written for, recognised as git's index recognises a
//!   file: device, inode, size, and modification and change times to the nanosecond (the
//!   change time cannot be set back by anyone but the kernel), and by the same `harness`
//!   executable (its own size and times), so that a new build reads every file again;
//! - it was written only after the manifest passed every rule, and it records whether the
//!   schemas compiled (only then are they compiled off the start-up path when the plugin is
//!   admitted from the cache); its manifest is held to the rules again when read;
//! - the directory holding the entries passes the check plugin files pass (the operator's or
//!   root's, writable by no one else), else the cache is not used and a warning says why.
//!
//! What it does not change: a plugin whose tools run in the harness is still opened and
//! `init`ed here at start-up, and the manifest it declares here must equal the cached one, or
//! it is refused; a plugin in process isolation is still loaded by its own confined child,
//! confined to the effects the entry records. Failures are never cached: a file that was
//! refused is read again at every start-up, so its reason is always current.

use std::path::{Path, PathBuf};

use harness_abi::manifest::{InitDeclined, Manifest};
use serde::{Deserialize, Serialize};

/// The layout of an entry; entries of another layout are read again from their files.
const FORMAT: u32 = 2;

/// How long an entry nobody rewrote is kept (an entry that is used is not rewritten, so this
/// is counted from when the file was last read through a plugin host).
const STALE_AFTER: std::time::Duration = std::time::Duration::from_secs(30 * 24 * 3600);

/// What identifies one state of a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Identity {
    dev: u64,
    ino: u64,
    size: u64,
    mtime_ns: i128,
    ctime_ns: i128,
}

impl Identity {
    /// The identity of `path` now; `None` when it cannot be read (no cache then).
    pub(crate) fn of(path: &Path) -> Option<Self> {
        std::fs::metadata(path).ok().and_then(|m| Self::from_metadata(path, &m))
    }

    /// The identity of the open file `file`, opened from `path`: from the descriptor.
    #[cfg(unix)]
    pub(crate) fn of_file(path: &Path, file: &std::fs::File) -> Option<Self> {
        file.metadata().ok().and_then(|m| Self::from_metadata(path, &m))
    }

    /// Windows: from the open handle.
    #[cfg(windows)]
    pub(crate) fn of_file(_: &Path, file: &std::fs::File) -> Option<Self> {
        Self::of_handle(file)
    }

    /// Other platforms: no identity.
    #[cfg(not(any(unix, windows)))]
    pub(crate) fn of_file(_: &Path, _: &std::fs::File) -> Option<Self> {
        None
    }

    /// The identity of the file `path`, whose metadata `m` was read already.
    #[cfg(unix)]
    pub(crate) fn from_metadata(_: &Path, m: &std::fs::Metadata) -> Option<Self> {
        use std::os::unix::fs::MetadataExt;
        let ns = |s: i64, n: i64| i128::from(s) * 1_000_000_000 + i128::from(n);
        Some(Self {
            dev: m.dev(),
            ino: m.ino(),
            size: m.size(),
            mtime_ns: ns(m.mtime(), m.mtime_nsec()),
            ctime_ns: ns(m.ctime(), m.ctime_nsec()),
        })
    }

    /// Windows: the volume's serial number and the file's index (its inode), size, last write
    /// and creation times, read from the file opened (std's metadata does not carry the index).
    #[cfg(windows)]
    pub(crate) fn from_metadata(path: &Path, _: &std::fs::Metadata) -> Option<Self> {
        Self::of_handle(&std::fs::File::open(path).ok()?)
    }

    /// Windows: the identity of an open file, from its handle.
    #[cfg(windows)]
    fn of_handle(file: &std::fs::File) -> Option<Self> {
        use std::os::windows::io::AsRawHandle;
        use windows_sys::Win32::Foundation::FILETIME;
        use windows_sys::Win32::Storage::FileSystem::{BY_HANDLE_FILE_INFORMATION, GetFileInformationByHandle};
        // SAFETY: an all-zero BY_HANDLE_FILE_INFORMATION is a valid value to be overwritten.
        let mut info: BY_HANDLE_FILE_INFORMATION = unsafe { std::mem::zeroed() };
        // SAFETY: an open handle of ours and a writable structure of the right type.
        if unsafe { GetFileInformationByHandle(file.as_raw_handle(), &mut info) } == 0 {
            return None;
        }
        let join = |high: u32, low: u32| (u64::from(high) << 32) | u64::from(low);
        // FILETIME counts 100 ns intervals.
        let ns = |t: FILETIME| i128::from(join(t.dwHighDateTime, t.dwLowDateTime)) * 100;
        Some(Self {
            dev: u64::from(info.dwVolumeSerialNumber),
            ino: join(info.nFileIndexHigh, info.nFileIndexLow),
            size: join(info.nFileSizeHigh, info.nFileSizeLow),
            mtime_ns: ns(info.ftLastWriteTime),
            ctime_ns: ns(info.ftCreationTime),
        })
    }

    /// Other platforms: no identity, so no plugin cache.
    #[cfg(not(any(unix, windows)))]
    pub(crate) fn from_metadata(_: &Path, _: &std::fs::Metadata) -> Option<Self> {
        None
    }

    /// The file itself (device and inode), whatever its state: one file reached by two paths.
    pub(crate) fn file(&self) -> (u64, u64) {
        (self.dev, self.ino)
    }
}

/// One cached file.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    format: u32,
    /// The `harness` executable that wrote it.
    harness: Identity,
    /// The library file (canonical) and its identity when it was read.
    path: PathBuf,
    identity: Identity,
    abi_version: String,
    /// The manifest, held to the manifest rules again when read.
    manifest: Manifest,
    /// Whether every schema of the manifest compiled when it was written.
    schemas_checked: bool,
    /// How its `init` last went, and with which configuration: what a start-up that opens the
    /// plugin only at its first call offers without starting it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    init: Option<InitOutcome>,
    /// Its signature, found good when it had this identity: a start-up that finds the same
    /// signature file and still trusts the same key does not read the library to verify it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    signature: Option<Verified>,
}

/// A signature found good over a file: which signature file, by which key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Verified {
    /// The SHA-256 of the signature file's text: another signature file is checked again.
    pub(crate) signature: String,
    /// The publisher's key that verified it (its base64 line): a key no longer trusted
    /// does not vouch for it.
    pub(crate) key: String,
}

/// How a plugin's `init` went with one configuration section.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct InitOutcome {
    /// The digest of the section `init` was given ([`config_digest`]).
    pub(crate) config: String,
    /// Its decline for want of configuration; `None` when it started.
    pub(crate) declined: Option<InitDeclined>,
}

/// The digest of a plugin's configuration section, as `init` sees it: an init outcome holds
/// for this section only.
pub(crate) fn config_digest(config: &serde_json::Value) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(config.to_string().as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// What a file declared, as [`Cache::put`] records it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Declared<'a> {
    /// The ABI version it was built against.
    pub(crate) abi_version: &'a str,
    /// Its manifest, checked.
    pub(crate) manifest: &'a Manifest,
    /// Whether every schema compiled.
    pub(crate) schemas: bool,
}

/// A file's cached declaration.
#[derive(Debug)]
pub(crate) struct Cached {
    /// The ABI version it was built against.
    pub(crate) abi_version: String,
    /// Its manifest, checked by the manifest rules again.
    pub(crate) manifest: Manifest,
    /// Whether its schemas compiled when the entry was written.
    pub(crate) schemas_checked: bool,
    /// How its `init` last went, when known.
    pub(crate) init: Option<InitOutcome>,
    /// Its signature as last found good, when it was.
    pub(crate) signature: Option<Verified>,
}

/// The cache directory, checked and ready.
#[derive(Debug)]
pub(crate) struct Cache {
    dir: PathBuf,
    harness: Identity,
    /// Stale entries are looked for once a start-up, at its first write, not at every write.
    pruned: std::sync::Once,
}

impl Cache {
    /// Opens (creating it, mode 0700) the cache in `dir`; `Err` says why it is not used.
    pub(crate) fn open(dir: &Path) -> Result<Self, String> {
        let exe = std::env::current_exe().map_err(|e| format!("the harness cannot find its own executable: {e}"))?;
        let harness = Identity::of(&exe).ok_or_else(|| format!("cannot read {}", exe.display()))?;
        create_private_dir(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let dir = dunce::canonicalize(dir).map_err(|e| format!("cannot resolve {}: {e}", dir.display()))?;
        crate::trusted_path::check_or(&dir, "", &mut Default::default())?;
        Ok(Self { dir, harness, pruned: std::sync::Once::new() })
    }

    /// The entry file of `path` for this executable: a hash of both (the entry names them
    /// too), so that two builds of the harness keep an entry each rather than replacing each
    /// other's at every start.
    fn entry_path(&self, path: &Path) -> PathBuf {
        // FNV-1a: stable across builds and platforms, unlike std's hasher.
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        let h = &self.harness;
        let executable = [h.dev, h.ino, h.size].map(u64::to_le_bytes);
        let times = [h.mtime_ns, h.ctime_ns].map(i128::to_le_bytes);
        let bytes =
            path.as_os_str().as_encoded_bytes().iter().chain(executable.iter().flatten()).chain(times.iter().flatten());
        for byte in bytes {
            hash = (hash ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3);
        }
        self.dir.join(format!("{hash:016x}.json"))
    }

    /// Removes entries no start-up has written for [`STALE_AFTER`]: those of executables
    /// rebuilt or removed since, and of files no longer there. Run at a start-up's first write,
    /// which happens only when a file was read through a plugin host.
    fn prune(&self) {
        let Ok(listing) = std::fs::read_dir(&self.dir) else { return };
        let now = std::time::SystemTime::now();
        for entry in listing.filter_map(Result::ok) {
            let path = entry.path();
            let old = entry
                .metadata()
                .and_then(|m| m.modified())
                .is_ok_and(|t| now.duration_since(t).is_ok_and(|age| age > STALE_AFTER));
            if old && path.extension().is_some_and(|e| e == "json") {
                let _ = std::fs::remove_file(path);
            }
        }
    }

    /// The cached declaration of `path`, when an entry exists for exactly this state of the
    /// file, written by this executable, and its manifest still passes the rules.
    pub(crate) fn get(&self, path: &Path, identity: Identity) -> Option<Cached> {
        let text = std::fs::read_to_string(self.entry_path(path)).ok()?;
        let entry: Entry = serde_json::from_str(&text).ok()?;
        if entry.format != FORMAT || entry.harness != self.harness || entry.path != path || entry.identity != identity {
            return None;
        }
        crate::library::check_abi(&entry.abi_version).ok()?;
        crate::library::check_rules(&entry.manifest).ok()?;
        Some(Cached {
            abi_version: entry.abi_version,
            manifest: entry.manifest,
            schemas_checked: entry.schemas_checked,
            init: entry.init,
            signature: entry.signature,
        })
    }

    /// Records how `init` went for the file at `path` as it is now, when it has an entry
    /// (written when its manifest was read); a file changed since is left to be read again.
    pub(crate) fn put_init(&self, path: &Path, outcome: InitOutcome) {
        self.update(path, |entry| {
            let changed = entry.init.as_ref() != Some(&outcome);
            entry.init = Some(outcome);
            changed
        });
    }

    /// Records that the signature of `path` as it is now was found good, when it has an entry.
    pub(crate) fn put_signature(&self, path: &Path, verified: Verified) {
        self.update(path, |entry| {
            let changed = entry.signature.as_ref() != Some(&verified);
            entry.signature = Some(verified);
            changed
        });
    }

    /// Rewrites the entry of `path` as `change` leaves it, when the entry is for the file as
    /// it is now and `change` says it changed it.
    fn update(&self, path: &Path, change: impl FnOnce(&mut Entry) -> bool) {
        let target = self.entry_path(path);
        let Ok(text) = std::fs::read_to_string(&target) else { return };
        let Ok(mut entry) = serde_json::from_str::<Entry>(&text) else { return };
        let current = Identity::of(path);
        if entry.format != FORMAT
            || entry.harness != self.harness
            || entry.path != path
            || current != Some(entry.identity)
        {
            return;
        }
        if change(&mut entry) {
            self.write(&target, &entry);
        }
    }

    /// Records what `path` declared when it had `identity` (and its signature found good),
    /// unless it has changed since (then the next start-up reads it again). A failure to
    /// write only costs that.
    pub(crate) fn put(&self, path: &Path, identity: Identity, declared: Declared<'_>, signature: Option<Verified>) {
        let Declared { abi_version, manifest, schemas } = declared;
        if Identity::of(path) != Some(identity) {
            return;
        }
        let manifest = manifest.clone();
        let entry = Entry {
            format: FORMAT,
            harness: self.harness,
            path: path.to_owned(),
            identity,
            abi_version: abi_version.to_owned(),
            manifest,
            schemas_checked: schemas,
            init: None,
            signature,
        };
        self.write(&self.entry_path(path), &entry);
    }

    /// Writes an entry file whole.
    fn write(&self, target: &Path, entry: &Entry) {
        let Ok(text) = serde_json::to_vec(entry) else { return };
        // Written aside and renamed, so that a reader never sees half an entry, and never
        // through a link planted at either name (the directory is private anyway).
        let _ = harness_core::no_follow::replace_file(target, &format!(".tmp{}", std::process::id()), &text);
        self.pruned.call_once(|| self.prune());
    }
}

#[cfg(unix)]
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    if dir.is_dir() {
        return Ok(());
    }
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)
}

#[cfg(not(unix))]
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    fn manifest() -> Manifest {
        crate::library::parse_manifest(
            r#"{"name":"p","version":"1.0.0","description":"d","tools":[{"name":"t","description":"d","parameters":{"type":"object"},"effects":"pure"}]}"#,
        )
        .expect("a valid manifest")
    }

    fn declared(m: &Manifest) -> Declared<'_> {
        Declared { abi_version: harness_abi::ABI_VERSION, manifest: m, schemas: true }
    }

    #[test]
    fn an_entry_serves_only_the_state_of_the_file_it_was_written_for() {
        let home = tempfile::tempdir().unwrap();
        let cache = Cache::open(&home.path().join("cache")).unwrap();
        let file = home.path().join("libp.so");
        std::fs::write(&file, b"one").unwrap();
        let file = file.canonicalize().unwrap();
        let identity = Identity::of(&file).unwrap();
        assert!(cache.get(&file, identity).is_none());
        cache.put(&file, identity, declared(&manifest()), None);
        let hit = cache.get(&file, identity).unwrap();
        assert_eq!((hit.manifest, hit.schemas_checked), (manifest(), true));
        // Rewritten in place (same inode): its size and times change.
        std::fs::write(&file, b"two!").unwrap();
        assert!(cache.get(&file, Identity::of(&file).unwrap()).is_none());
        // An entry edited by hand into a manifest that breaks the rules is not used.
        let identity = Identity::of(&file).unwrap();
        cache.put(&file, identity, declared(&manifest()), None);
        let entry = cache.entry_path(&file);
        let text = std::fs::read_to_string(&entry).unwrap().replace(r#""name":"t""#, r#""name":"finish""#);
        std::fs::write(&entry, text).unwrap();
        assert!(cache.get(&file, identity).is_none());
    }

    #[test]
    fn a_cache_directory_others_can_write_is_not_used() {
        use std::os::unix::fs::PermissionsExt;
        let home = tempfile::tempdir().unwrap();
        let dir = home.path().join("cache");
        std::fs::create_dir(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = Cache::open(&dir).unwrap_err();
        assert!(e.contains("is writable by everyone") && e.contains("chmod go-w"), "{e}");
    }
}
