//! Resource limits of a plugin-host child, by the effect class it runs (docs/operators.md,
//! "Resource limits of plugin children"): set by the child on itself, soft and hard alike,
//! before it loads the library, so that no plugin code can raise them again.
//!
//! - `address_space` (`RLIMIT_AS`): 4 GiB for every class by default; an allocation past it
//!   fails (a Rust tool aborts: the call is `tool_crashed`, the next starts a fresh child).
//! - `cpu_seconds` (`RLIMIT_CPU`): one hour by default. It counts the child's whole life, and
//!   a child is kept warm across calls: a call's own bound is its timeout.
//! - `file_size` (`RLIMIT_FSIZE`): 4 GiB for `writes`, 0 for the other classes (they write no
//!   file; on a kernel without Landlock this is what holds them to it).
//! - `processes` (`RLIMIT_NPROC`): none by default. The kernel counts every process and
//!   thread of the user, not of the child, and exempts root: no default is meaningful for
//!   every operator. The bound on what a tool forks is its process group, killed with the
//!   child (see `harness-loader`'s `isolation/conn.rs`); an operator who wants a fork bomb
//!   stopped sooner sets it.

use harness_abi::manifest::Effects;
use serde::{Deserialize, Serialize};

/// Limits of one child; `None`: left as the harness's own.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    /// `RLIMIT_AS`, in bytes.
    pub address_space: Option<u64>,
    /// `RLIMIT_CPU`, in seconds.
    pub cpu_seconds: Option<u64>,
    /// `RLIMIT_FSIZE`, in bytes.
    pub file_size: Option<u64>,
    /// `RLIMIT_NPROC`: processes (and threads) of the user.
    pub processes: Option<u64>,
}

const GIB: u64 = 1 << 30;

impl Limits {
    /// The defaults of a child running tools of `effects`.
    pub fn for_effects(effects: Effects) -> Self {
        let file_size = if effects == Effects::Writes { 4 * GIB } else { 0 };
        Self { address_space: Some(4 * GIB), cpu_seconds: Some(3600), file_size: Some(file_size), processes: None }
    }

    /// These limits, each one the operator set (`[plugins.NAME] limits`) taking its place.
    pub fn overridden_by(self, operator: &Limits) -> Self {
        Self {
            address_space: operator.address_space.or(self.address_space),
            cpu_seconds: operator.cpu_seconds.or(self.cpu_seconds),
            file_size: operator.file_size.or(self.file_size),
            processes: operator.processes.or(self.processes),
        }
    }

    /// Reads `[plugins.NAME] limits = { address_space = "2G", cpu_seconds = 60,
    /// file_size = "1G", processes = 64 }`; sizes are bytes or a number with K, M or G.
    pub fn from_table(v: &serde_json::Value, at: &str) -> Result<Self, String> {
        let table = v.as_object().ok_or_else(|| {
            format!("{at} must be a table, like {{ address_space = \"2G\", cpu_seconds = 60 }}, not {v}")
        })?;
        let mut limits = Self::default();
        for (key, value) in table {
            let slot = match key.as_str() {
                "address_space" => &mut limits.address_space,
                "cpu_seconds" => &mut limits.cpu_seconds,
                "file_size" => &mut limits.file_size,
                "processes" => &mut limits.processes,
                other => {
                    return Err(format!(
                        "{at} has no key {other:?}: the keys are address_space, cpu_seconds, file_size, processes"
                    ));
                }
            };
            let sized = matches!(key.as_str(), "address_space" | "file_size");
            *slot = Some(amount(value, sized).ok_or_else(|| {
                let like = if sized { "a size such as \"2G\", \"512M\" or bytes" } else { "a whole number" };
                format!("{at}.{key} must be {like}, not {value}")
            })?);
        }
        Ok(limits)
    }

    /// Sets each limit on this process, soft and hard alike.
    #[cfg(unix)]
    pub fn apply(&self) -> std::io::Result<()> {
        let each = [
            (libc::RLIMIT_AS, self.address_space),
            (libc::RLIMIT_CPU, self.cpu_seconds),
            (libc::RLIMIT_FSIZE, self.file_size),
            (libc::RLIMIT_NPROC, self.processes),
        ];
        for (resource, value) in each {
            let Some(value) = value else { continue };
            let limit = libc::rlimit { rlim_cur: value as libc::rlim_t, rlim_max: value as libc::rlim_t };
            // SAFETY: a valid resource and a pointer to a local rlimit.
            if unsafe { libc::setrlimit(resource, &limit) } != 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
        Ok(())
    }

    /// Windows: the child's Job Object holds its memory and process count instead.
    #[cfg(not(unix))]
    pub fn apply(&self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A whole number, or (`sized`) a string of one with a K, M or G suffix (powers of 1024).
fn amount(v: &serde_json::Value, sized: bool) -> Option<u64> {
    if let Some(n) = v.as_u64() {
        return Some(n);
    }
    let text = v.as_str().filter(|_| sized)?.trim();
    let (digits, unit) = match text.char_indices().last()? {
        (i, c) if c.is_ascii_alphabetic() => (&text[..i], c.to_ascii_uppercase()),
        _ => (text, 'B'),
    };
    let shift = match unit {
        'B' => 0,
        'K' => 10,
        'M' => 20,
        'G' => 30,
        _ => return None,
    };
    digits.trim().parse::<u64>().ok()?.checked_mul(1 << shift)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_operators_table_is_read_and_overrides_the_class_defaults() {
        let table = json!({"address_space": "2G", "cpu_seconds": 60, "file_size": "512M", "processes": 64});
        let operator = Limits::from_table(&table, "[plugins.p] limits").unwrap();
        let limits = Limits::for_effects(Effects::Pure).overridden_by(&operator);
        assert_eq!(
            limits,
            Limits {
                address_space: Some(2 << 30),
                cpu_seconds: Some(60),
                file_size: Some(512 << 20),
                processes: Some(64)
            }
        );
        assert_eq!(Limits::for_effects(Effects::Reads).file_size, Some(0));
        assert_eq!(Limits::for_effects(Effects::Writes).file_size, Some(4 << 30));
        let some = Limits::from_table(&json!({"address_space": 1000}), "l").unwrap();
        assert_eq!(Limits::for_effects(Effects::Pure).overridden_by(&some).cpu_seconds, Some(3600));
    }

    #[test]
    fn bad_limits_name_the_key_and_the_form() {
        for (table, needle) in [
            (json!({"memory": "2G"}), "has no key \"memory\""),
            (json!({"address_space": "2T"}), "limits.address_space must be a size"),
            (json!({"cpu_seconds": "60"}), "limits.cpu_seconds must be a whole number"),
            (json!({"processes": -1}), "limits.processes must be a whole number"),
            (json!("2G"), "must be a table"),
        ] {
            let e = Limits::from_table(&table, "[plugins.p] limits").unwrap_err();
            assert!(e.contains(needle), "{e}");
        }
    }
}
