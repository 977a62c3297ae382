//! A configuration file read once: its canonical path, its text and the hash of that text.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::ConfigError;

/// A configuration file as read: what is trusted, checked and parsed is the same bytes.
#[derive(Debug, Clone)]
pub struct ConfigFile {
    /// The path as the operator named it.
    pub named: PathBuf,
    /// Its canonical path (links resolved), the key in the trust store.
    pub canonical: PathBuf,
    /// The contents.
    pub text: String,
    /// SHA-256 of the contents, lowercase hex.
    pub sha256: String,
}

impl ConfigFile {
    /// Reads `path` once; the hash is of exactly the text returned.
    pub fn read(path: &Path) -> Result<Self, ConfigError> {
        let read_error = |source| ConfigError::Read { path: path.to_owned(), source };
        let canonical = dunce::canonicalize(path).map_err(read_error)?;
        let bytes = std::fs::read(&canonical).map_err(read_error)?;
        let sha256 = sha256_hex(&bytes);
        let text = String::from_utf8(bytes).map_err(|_| ConfigError::NotText(path.to_owned()))?;
        Ok(Self { named: path.to_owned(), canonical, text, sha256 })
    }
}

/// SHA-256 of `bytes` as lowercase hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}
