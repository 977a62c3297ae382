//! Refuses a configuration file that someone other than the operator could have changed.
//!
//! The rule plugin files already follow (and OpenSSH's for key files): the file and every
//! directory above it are owned by the current user or root and not writable by group or
//! others, except a directory with the sticky bit (like `/tmp`), where others cannot rename or
//! remove what is not theirs. On Windows the same rule reads the owner and the access list
//! (the `windows` module): see docs/operators.md.

use std::path::Path;

#[cfg(windows)]
mod windows;

use crate::ConfigError;

/// Checks `canonical` (a canonical path) and every directory above it.
#[cfg(unix)]
pub fn check_permissions(canonical: &Path) -> Result<(), ConfigError> {
    use std::os::unix::fs::MetadataExt;
    let refuse = |reason: String| ConfigError::Insecure { file: canonical.to_owned(), reason };
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    let mut at = Some(canonical);
    while let Some(p) = at {
        let meta = std::fs::metadata(p).map_err(|e| refuse(format!("cannot check {}: {e}", p.display())))?;
        let mode = meta.mode();
        let sticky_dir = meta.is_dir() && mode & 0o1000 != 0;
        if meta.uid() != me && meta.uid() != 0 {
            return Err(refuse(format!(
                "{} is owned by user {}, neither you nor root; chown it to yourself",
                p.display(),
                meta.uid()
            )));
        }
        if mode & 0o022 != 0 && !sticky_dir {
            return Err(refuse(format!(
                "{} is writable by {}, who could change what the harness runs; run chmod go-w {}",
                p.display(),
                if mode & 0o002 != 0 { "everyone" } else { "its group" },
                p.display()
            )));
        }
        at = p.parent();
    }
    Ok(())
}

/// Windows: the file and every directory above it owned by you, Administrators, SYSTEM or
/// TrustedInstaller, and writable by none of Everyone, Users and Authenticated Users.
#[cfg(windows)]
pub fn check_permissions(canonical: &Path) -> Result<(), ConfigError> {
    let mut at = Some(canonical);
    while let Some(p) = at {
        let is_dir = p.is_dir();
        windows::judge(p, is_dir).map_err(|reason| ConfigError::Insecure { file: canonical.to_owned(), reason })?;
        at = p.parent();
    }
    Ok(())
}

/// Why `p` alone (a directory when `is_dir`) could be changed by someone other than the
/// operator on Windows, if it could: its owner or its access list, with the fix.
#[cfg(windows)]
pub fn judge_windows_acl(p: &Path, is_dir: bool) -> Result<(), String> {
    windows::judge(p, is_dir)
}

/// Other platforms: no check (their permission models differ); documented in docs/security.md.
#[cfg(not(any(unix, windows)))]
pub fn check_permissions(_: &Path) -> Result<(), ConfigError> {
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
