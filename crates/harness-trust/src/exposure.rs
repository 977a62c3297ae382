//! Whether someone other than the operator could have changed a file ([`exposure`], the one
//! definition of the rule, which plugin files are held to as well), and the refusal of a
//! configuration file that breaks it ([`check_permissions`]).
//!
//! The rule is OpenSSH's for key files: the file and every
//! directory above it are owned by the current user or root and not writable by group or
//! others, except a directory with the sticky bit (like `/tmp`), where others cannot rename or
//! remove what is not theirs. On Windows the same rule reads the owner and the access list
//! (the `windows` module): see docs/operators.md.

use std::path::Path;

#[cfg(windows)]
mod windows;

use crate::ConfigError;

/// How a path breaks the owner and mode rule: the one definition of the rule, which plugin
/// files (harness-loader) are held to as well as configuration files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Exposure {
    /// Owned by the user of this id, neither the current user nor root.
    ForeignOwner(u32),
    /// Writable by others, and not a directory with the sticky bit.
    Writable {
        /// Who could write it, as messages name them: `everyone` or `its group`.
        writers: &'static str,
    },
    /// Windows: its owner or its access list lets someone else change it; the reason with its fix.
    AccessList(String),
}

/// Whether `p`, whose metadata (followed through links) is `meta`, could be changed by
/// someone other than the operator: on Unix, owned by neither the current user nor root, or
/// writable by group or others (unless a directory with the sticky bit); on Windows, its
/// owner and access list. Only `p` itself: callers walk the directories above it.
#[cfg(unix)]
pub fn exposure(_p: &Path, meta: &std::fs::Metadata) -> Option<Exposure> {
    use std::os::unix::fs::MetadataExt;
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    let mode = meta.mode();
    let sticky_dir = meta.is_dir() && mode & 0o1000 != 0;
    if meta.uid() != me && meta.uid() != 0 {
        return Some(Exposure::ForeignOwner(meta.uid()));
    }
    if mode & 0o022 != 0 && !sticky_dir {
        let writers = if mode & 0o002 != 0 { "everyone" } else { "its group" };
        return Some(Exposure::Writable { writers });
    }
    None
}

/// Windows: the owner and access list (the `windows` module).
#[cfg(windows)]
pub fn exposure(p: &Path, meta: &std::fs::Metadata) -> Option<Exposure> {
    windows::judge(p, meta.is_dir()).err().map(Exposure::AccessList)
}

/// Other platforms: no check (their permission models differ); documented in docs/security.md.
#[cfg(not(any(unix, windows)))]
pub fn exposure(_: &Path, _: &std::fs::Metadata) -> Option<Exposure> {
    None
}

/// Checks `canonical` (a canonical path) and every directory above it.
pub fn check_permissions(canonical: &Path) -> Result<(), ConfigError> {
    let refuse = |reason: String| ConfigError::Insecure { file: canonical.to_owned(), reason };
    let mut at = Some(canonical);
    while let Some(p) = at {
        let meta = std::fs::metadata(p).map_err(|e| refuse(format!("cannot check {}: {e}", p.display())))?;
        match exposure(p, &meta) {
            None => {}
            Some(Exposure::ForeignOwner(uid)) => {
                return Err(refuse(format!(
                    "{} is owned by user {uid}, neither you nor root; chown it to yourself",
                    p.display()
                )));
            }
            Some(Exposure::Writable { writers }) => {
                return Err(refuse(format!(
                    "{} is writable by {writers}, who could change what the harness runs; run chmod go-w {}",
                    p.display(),
                    p.display()
                )));
            }
            Some(Exposure::AccessList(reason)) => return Err(refuse(reason)),
        }
        at = p.parent();
    }
    Ok(())
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_file_or_directory_writable_by_others_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let sub = dir.path().join("repo");
        std::fs::create_dir(&sub).expect("mkdir");
        let file = sub.join("harness.toml");
        std::fs::write(&file, "").expect("write");
        let file = file.canonicalize().expect("canonical");
        assert!(check_permissions(&file).is_ok());
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o666)).expect("chmod");
        let e = check_permissions(&file).expect_err("world-writable file").to_string();
        assert!(e.contains("writable by everyone") && e.contains("chmod go-w"), "{e}");
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        std::fs::set_permissions(&sub, std::fs::Permissions::from_mode(0o775)).expect("chmod");
        let e = check_permissions(&file).expect_err("group-writable directory").to_string();
        assert!(e.contains("repo is writable by its group"), "{e}");
    }
}
