//! Which configuration files the harness may read.
//!
//! A configuration file can start commands (MCP servers), load native libraries (plugin
//! directories) and send an environment variable to a URL (`base_url` with `api_key_env`):
//! reading one is running code. So a file is read only when the operator chose it: named with
//! `--config`, or recorded in the user's [`TrustStore`] by `harness config trust`, with its
//! canonical path and the SHA-256 of its contents (direnv's `allow`, mise's `trust`). A file
//! changed since it was trusted is untrusted again. And a file that someone else could have
//! changed is refused either way ([`check_permissions`]).
//!
//! The smallest use:
//!
//! ```no_run
//! use harness_trust::{ConfigFile, TrustStatus, TrustStore};
//! let store = TrustStore::locate().expect("a home directory");
//! let file = ConfigFile::read("harness.toml".as_ref()).expect("readable");
//! match store.status(&file).expect("readable store") {
//!     TrustStatus::Trusted => println!("{}", file.text),
//!     other => eprintln!("ignored: {other:?}"),
//! }
//! ```

#![deny(missing_docs)]

mod exposure;
mod file;
mod lock;
mod trust;

pub use exposure::{Exposure, check_permissions, exposure};
pub use file::{ConfigFile, sha256_hex};
pub use lock::{LockEntry, ToolLock};
pub use trust::{TrustStatus, TrustStore};

/// A per-user base directory as the XDG convention finds it: `$<xdg_var>` when set and
/// absolute, else `$HOME/<under_home>` (on Windows, which sets no `HOME`, else
/// `%USERPROFILE%\<under_home>`); `None` when none is set.
///
/// Not `dirs` or `etcetera`, for where the trust store lives: both put a platform's own
/// folders where docs/operators.md promises the Unix layout (`dirs`: `~/Library/Application
/// Support` on macOS and Known Folders on Windows; `etcetera`: `%USERPROFILE%` even when
/// `HOME` is set on Windows), so a swap would move `trusted.json` and silently forget every
/// trust decision, and each caller's own Windows choice would still be written around it.
pub fn user_dir(xdg_var: &str, under_home: &str) -> Option<std::path::PathBuf> {
    let nonempty = |name| std::env::var_os(name).filter(|v| !v.is_empty()).map(std::path::PathBuf::from);
    let home = nonempty("HOME").or_else(|| if cfg!(windows) { nonempty("USERPROFILE") } else { None });
    nonempty(xdg_var).filter(|p| p.is_absolute()).or_else(|| home.map(|h| h.join(under_home)))
}

/// What can go wrong when reading, checking or trusting a configuration file.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file cannot be read or resolved.
    #[error("cannot read config file {path}: {source}")]
    Read {
        /// The file as named.
        path: std::path::PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not UTF-8 text.
    #[error("config file {0} is not UTF-8 text")]
    NotText(std::path::PathBuf),
    /// Someone other than the operator could change the file or a directory above it.
    #[error("config file {file} is refused: {reason}")]
    Insecure {
        /// The file.
        file: std::path::PathBuf,
        /// What is wrong and the fix.
        reason: String,
    },
    /// Neither `$XDG_CONFIG_HOME` nor `$HOME` is set.
    #[error(
        "no trust store: neither XDG_CONFIG_HOME nor HOME is set; set one, or name the configuration with --config FILE"
    )]
    NoStoreDir,
    /// The trust store cannot be read or written.
    #[error("trust store {path}: {message}")]
    Store {
        /// The store file.
        path: std::path::PathBuf,
        /// What went wrong.
        message: String,
    },
}
