//! Our own ABI version, checked beside abi_stable's layout check.

use std::fmt;

/// The ABI version this crate defines; see `docs/abi.md` for what bumps which part.
pub const ABI_VERSION: &str = "1.0.0";

/// Why a plugin's ABI version cannot be loaded by this host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AbiVersionError {
    /// The plugin reported something that is not a semver version.
    Unparsable {
        /// What the plugin reported.
        plugin: String,
    },
    /// The major versions differ: the two sides do not speak the same interface.
    MajorMismatch {
        /// The host's ABI version.
        host: String,
        /// The plugin's ABI version.
        plugin: String,
    },
    /// The plugin needs a newer minor version than the host offers.
    PluginNewer {
        /// The host's ABI version.
        host: String,
        /// The plugin's ABI version.
        plugin: String,
    },
}

impl fmt::Display for AbiVersionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Unparsable { plugin } => write!(
                f,
                "plugin reports ABI version {plugin:?}, which is not a semver version; rebuild it with a released harness-sdk"
            ),
            Self::MajorMismatch { host, plugin } => write!(
                f,
                "plugin ABI {plugin} is incompatible with host ABI {host} (major versions differ); rebuild the plugin against a harness-sdk for ABI {host}, or use a harness whose ABI major is the plugin's"
            ),
            Self::PluginNewer { host, plugin } => write!(
                f,
                "plugin ABI {plugin} is newer than host ABI {host}; upgrade the harness, or rebuild the plugin against a harness-sdk for ABI {host}"
            ),
        }
    }
}

impl std::error::Error for AbiVersionError {}

fn parse(v: &str) -> Option<(u64, u64)> {
    semver::Version::parse(v.trim()).ok().map(|v| (v.major, v.minor))
}

/// Decides whether a host of ABI `host` may load a plugin built for ABI `plugin`.
///
/// The rule: same major, and the plugin's minor not newer than the host's. Patch never matters.
pub fn check_compatible(host: &str, plugin: &str) -> Result<(), AbiVersionError> {
    let Some((pmaj, pmin)) = parse(plugin) else {
        return Err(AbiVersionError::Unparsable { plugin: plugin.to_owned() });
    };
    let (hmaj, hmin) = parse(host).ok_or_else(|| AbiVersionError::Unparsable { plugin: host.to_owned() })?;
    if pmaj != hmaj {
        return Err(AbiVersionError::MajorMismatch { host: host.to_owned(), plugin: plugin.to_owned() });
    }
    if pmin > hmin {
        return Err(AbiVersionError::PluginNewer { host: host.to_owned(), plugin: plugin.to_owned() });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_major_older_or_equal_minor_loads() {
        assert!(check_compatible("1.3.0", "1.3.9").is_ok());
        assert!(check_compatible("1.3.0", "1.0.0").is_ok());
    }

    #[test]
    fn newer_minor_is_refused_naming_both() {
        let err = check_compatible("1.2.0", "1.3.0").unwrap_err();
        assert!(matches!(err, AbiVersionError::PluginNewer { .. }));
        let msg = err.to_string();
        assert!(msg.contains("1.2.0") && msg.contains("1.3.0"), "{msg}");
    }

    #[test]
    fn other_major_is_refused_naming_both() {
        let msg = check_compatible("1.0.0", "2.0.0").unwrap_err().to_string();
        assert!(msg.contains("plugin ABI 2.0.0") && msg.contains("host ABI 1.0.0"), "{msg}");
        assert!(check_compatible("2.0.0", "1.0.0").is_err());
    }

    #[test]
    fn garbage_is_refused() {
        assert!(matches!(check_compatible("1.0.0", "one"), Err(AbiVersionError::Unparsable { .. })));
        assert!(check_compatible("1.0.0", "1.0").is_err());
    }
}
