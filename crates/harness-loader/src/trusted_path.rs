//! Refuses plugin files that someone other than the operator could have changed.
//!
//! As OpenSSH does with key files: the file and every directory on its path must be owned by
//! the current user or root, and not writable by group or others. A directory with the sticky
//! bit (like `/tmp`) is allowed to be world-writable: others cannot rename or remove what is
//! not theirs in it. On Windows: the owner and the access list. The rule itself is
//! harness-trust's (`exposure`), the one configuration files are held to; this file walks
//! the path and words the fix for a plugin file.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

/// Why `path` (canonical) is not safe to load, if it is not; the fix names the flag that
/// loads it anyway. Directories in `passed` passed already (with all above them), and are
/// not checked again: the files of one directory share every directory above them.
pub(crate) fn check(path: &Path, meta: &std::fs::Metadata, passed: &mut HashSet<PathBuf>) -> Result<(), String> {
    const ESCAPE: &str = ", or pass --allow-insecure-plugins";
    judge(path, meta, ESCAPE)?;
    match path.parent() {
        Some(dir) => check_or(dir, ESCAPE, passed),
        None => Ok(()),
    }
}

/// Why the plugin file `path` (canonical) is not safe to load, if it is not: the check
/// discovery holds every file to, for a file named on its own (`plugins inspect FILE`,
/// `plugins check FILE`).
pub fn check_plugin_file(path: &Path) -> Result<(), String> {
    let meta = std::fs::metadata(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    check(path, &meta, &mut HashSet::new())
}

/// Why `path` (canonical) is not safe to trust, if it is not; `escape` ends each fix (how to
/// go on without fixing it, when there is a way).
pub(crate) fn check_or(path: &Path, escape: &str, passed: &mut HashSet<PathBuf>) -> Result<(), String> {
    let mut at = Some(path);
    let mut checked = Vec::new();
    while let Some(p) = at {
        if passed.contains(p) {
            break;
        }
        check_one(p, escape)?;
        checked.push(p.to_owned());
        at = p.parent();
    }
    passed.extend(checked);
    Ok(())
}

/// Why `p` alone is not safe, if it is not.
fn check_one(p: &Path, escape: &str) -> Result<(), String> {
    let meta = std::fs::metadata(p).map_err(|e| format!("cannot check {}: {e}", p.display()))?;
    judge(p, &meta, escape)
}

/// Why `p`, whose metadata (followed through links) is `meta`, is not safe, if it is not:
/// harness-trust's rule ([`harness_trust::exposure`]), in the words of a plugin file.
fn judge(p: &Path, meta: &std::fs::Metadata, escape: &str) -> Result<(), String> {
    use harness_trust::Exposure;
    match harness_trust::exposure(p, meta) {
        None => Ok(()),
        Some(Exposure::ForeignOwner(uid)) => {
            Err(format!("{} is owned by user {uid}, neither you nor root; chown it{escape}", p.display()))
        }
        Some(Exposure::Writable { writers }) => {
            Err(format!("{} is writable by {writers}; run chmod go-w {}{escape}", p.display(), p.display()))
        }
        Some(Exposure::AccessList(why)) => Err(format!("{why}{escape}")),
    }
}

#[cfg(all(test, unix))]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn every_file_of_a_directory_others_can_write_is_refused_not_only_the_first() {
        let home = tempfile::tempdir().unwrap();
        let dir = home.path().canonicalize().unwrap().join("open");
        std::fs::create_dir(&dir).unwrap();
        let (a, b) = (dir.join("liba.so"), dir.join("libb.so"));
        for file in [&a, &b] {
            std::fs::write(file, b"x").unwrap();
            std::fs::set_permissions(file, std::fs::Permissions::from_mode(0o644)).unwrap();
        }
        let mut passed = HashSet::new();
        assert!(check(&a, &std::fs::metadata(&a).unwrap(), &mut passed).is_ok());
        assert!(passed.contains(&dir), "{passed:?}");
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o775)).unwrap();
        let mut passed = HashSet::new();
        for file in [&a, &b] {
            let e = check(file, &std::fs::metadata(file).unwrap(), &mut passed).unwrap_err();
            assert!(e.contains("is writable by its group"), "{e}");
        }
        assert!(!passed.contains(&dir));
    }
}
