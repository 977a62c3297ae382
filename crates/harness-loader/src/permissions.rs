//! Refuses plugin files that someone other than the operator could have changed.
//!
//! As OpenSSH does with key files: the file and every directory on its path must be owned by
//! the current user or root, and not writable by group or others. A directory with the sticky
//! bit (like `/tmp`) is allowed to be world-writable: others cannot rename or remove what is
//! not theirs in it.

use std::path::Path;

/// Why `path` (canonical) is not safe to load, if it is not; the fix names the flag that
/// loads it anyway.
pub(crate) fn check(path: &Path) -> Result<(), String> {
    check_or(path, ", or pass --allow-insecure-plugins")
}

/// Why `path` (canonical) is not safe to trust, if it is not; `escape` ends each fix (how to
/// go on without fixing it, when there is a way).
#[cfg(unix)]
pub(crate) fn check_or(path: &Path, escape: &str) -> Result<(), String> {
    use std::os::unix::fs::MetadataExt;
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    let mut at = Some(path);
    while let Some(p) = at {
        let meta = std::fs::metadata(p).map_err(|e| format!("cannot check {}: {e}", p.display()))?;
        let mode = meta.mode();
        let sticky_dir = meta.is_dir() && mode & 0o1000 != 0;
        if meta.uid() != me && meta.uid() != 0 {
            return Err(format!(
                "{} is owned by user {}, neither you nor root; chown it{escape}",
                p.display(),
                meta.uid()
            ));
        }
        if mode & 0o022 != 0 && !sticky_dir {
            return Err(format!(
                "{} is writable by {}; run chmod go-w {}{escape}",
                p.display(),
                if mode & 0o002 != 0 { "everyone" } else { "its group" },
                p.display()
            ));
        }
        at = p.parent();
    }
    Ok(())
}

/// Other platforms: no check (their permission models differ); documented in docs/security.md.
#[cfg(not(unix))]
pub(crate) fn check_or(_: &Path, _: &str) -> Result<(), String> {
    Ok(())
}
