//! The user's trust store: which configuration files (canonical path and SHA-256) the
//! operator has chosen to trust, in `$XDG_CONFIG_HOME/harness/trusted.json` (or
//! `~/.config/harness/trusted.json`).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::{ConfigError, ConfigFile};

/// Whether a configuration file may be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TrustStatus {
    /// Trusted with exactly these contents.
    Trusted,
    /// Never trusted.
    Unknown,
    /// Trusted once, but its contents changed since.
    Changed {
        /// The hash that was trusted.
        trusted_sha256: String,
    },
}

/// The store's contents: canonical path to the SHA-256 that was trusted.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Entries {
    files: BTreeMap<PathBuf, String>,
}

/// The trust store file.
#[derive(Debug, Clone)]
pub struct TrustStore {
    path: PathBuf,
}

impl TrustStore {
    /// The store under `$XDG_CONFIG_HOME/harness/`, else `$HOME/.config/harness/`.
    pub fn locate() -> Result<Self, ConfigError> {
        let base = crate::user_dir("XDG_CONFIG_HOME", ".config").ok_or(ConfigError::NoStoreDir)?;
        Ok(Self::at(base.join("harness").join("trusted.json")))
    }

    /// A store in a given file (tests, and operators who name one).
    pub fn at(path: PathBuf) -> Self {
        Self { path }
    }

    /// The store file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn error(&self, message: impl Into<String>) -> ConfigError {
        ConfigError::Store { path: self.path.clone(), message: message.into() }
    }

    fn load(&self) -> Result<Entries, ConfigError> {
        match std::fs::read_to_string(&self.path) {
            Ok(text) => serde_json::from_str(&text).map_err(|e| {
                self.error(format!("is not a trust store ({e}); move it away and trust your files again"))
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Entries::default()),
            Err(e) => Err(self.error(format!("cannot be read: {e}"))),
        }
    }

    /// Whether `file`, as read, is trusted.
    pub fn status(&self, file: &ConfigFile) -> Result<TrustStatus, ConfigError> {
        Ok(match self.load()?.files.get(&file.canonical) {
            Some(sha) if *sha == file.sha256 => TrustStatus::Trusted,
            Some(sha) => TrustStatus::Changed { trusted_sha256: sha.clone() },
            None => TrustStatus::Unknown,
        })
    }

    /// Records `file`'s canonical path and hash, replacing what was trusted before at that path.
    pub fn trust(&self, file: &ConfigFile) -> Result<(), ConfigError> {
        let mut entries = self.load()?;
        entries.files.insert(file.canonical.clone(), file.sha256.clone());
        self.save(&entries)
    }

    /// Forgets `canonical`; whether it was there.
    pub fn forget(&self, canonical: &Path) -> Result<bool, ConfigError> {
        let mut entries = self.load()?;
        let was = entries.files.remove(canonical).is_some();
        self.save(&entries)?;
        Ok(was)
    }

    /// Writes the store whole, through a temporary file renamed over it, readable by the user only.
    fn save(&self, entries: &Entries) -> Result<(), ConfigError> {
        let dir = self.path.parent().ok_or_else(|| self.error("has no directory"))?;
        create_private_dir(dir).map_err(|e| self.error(format!("cannot create {}: {e}", dir.display())))?;
        let text = serde_json::to_string_pretty(entries).map_err(|e| self.error(e.to_string()))?;
        let tmp = self.path.with_extension(format!("json.{}.tmp", std::process::id()));
        let written = private_file(&tmp).and_then(|mut f| f.write_all(text.as_bytes()).and_then(|()| f.sync_all()));
        written.and_then(|()| std::fs::rename(&tmp, &self.path)).map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            self.error(format!("cannot be written: {e}"))
        })
    }
}

#[cfg(unix)]
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)
}

#[cfg(not(unix))]
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)
}

#[cfg(unix)]
fn private_file(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(path)
}

#[cfg(not(unix))]
fn private_file(path: &Path) -> std::io::Result<std::fs::File> {
    std::fs::OpenOptions::new().write(true).create_new(true).open(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trusted_until_changed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = TrustStore::at(dir.path().join("store/harness/trusted.json"));
        let path = dir.path().join("harness.toml");
        std::fs::write(&path, "max_steps = 3\n").expect("write");
        let file = ConfigFile::read(&path).expect("read");
        assert_eq!(store.status(&file).expect("status"), TrustStatus::Unknown);
        store.trust(&file).expect("trust");
        assert_eq!(store.status(&file).expect("status"), TrustStatus::Trusted);
        std::fs::write(&path, "max_steps = 4\n").expect("write");
        let changed = ConfigFile::read(&path).expect("read");
        assert_eq!(
            store.status(&changed).expect("status"),
            TrustStatus::Changed { trusted_sha256: file.sha256.clone() }
        );
        assert!(store.forget(&file.canonical).expect("forget"));
        assert_eq!(store.status(&file).expect("status"), TrustStatus::Unknown);
    }

    #[test]
    fn a_corrupt_store_is_an_error_that_names_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = TrustStore::at(dir.path().join("trusted.json"));
        std::fs::write(store.path(), "not json").expect("write");
        let path = dir.path().join("h.toml");
        std::fs::write(&path, "").expect("write");
        let e = store.status(&ConfigFile::read(&path).expect("read")).expect_err("corrupt").to_string();
        assert!(e.contains("trusted.json") && e.contains("is not a trust store"), "{e}");
    }
}
