//! The harness's own files, which decide what it trusts and runs (its configuration,
//! `harness.lock`, plugin directories, the trust store, the plugin cache, its executable's
//! directory), kept out of every confined child's write area: a tool that could write one of
//! them could make the next run start a program of its choice, or load a library unconfined.
//!
//! A write area is refused when it holds one of them or lies inside one. Paths are compared
//! absolute, links resolved as far as they exist (`harness.lock` may not exist yet; a child
//! able to create it could still pin a library of its choice).

use std::path::{Component, Path, PathBuf};

/// A file or directory of the harness's that no child may write beneath.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Guarded {
    /// Where it is (as the operator would name it; resolved when compared).
    pub path: PathBuf,
    /// What it is, in words: `the configuration in use`, `harness.lock`, `a plugin directory`.
    pub what: String,
}

impl Guarded {
    /// `path`, known as `what`.
    pub fn new(path: impl Into<PathBuf>, what: impl Into<String>) -> Self {
        Self { path: path.into(), what: what.into() }
    }
}

/// `path` made absolute (relative to the working directory) with links resolved in the part
/// of it that exists; the rest is appended as written, `..` and `.` taken out.
pub fn resolved(path: &Path) -> PathBuf {
    let absolute = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/")).join(path)
    };
    let mut rest = Vec::new();
    let mut existing = absolute.as_path();
    loop {
        if let Ok(real) = dunce::canonicalize(existing) {
            let mut out = real;
            for part in rest.iter().rev() {
                match part {
                    Component::ParentDir => {
                        out.pop();
                    }
                    Component::CurDir => {}
                    other => out.push(other),
                }
            }
            return out;
        }
        match (existing.parent(), existing.components().next_back()) {
            (Some(parent), Some(last)) => {
                rest.push(last);
                existing = parent;
            }
            _ => return absolute,
        }
    }
}

/// The first of `guarded` that the write area `area` reaches: one it holds, or one it lies
/// inside (a directory of plugins, the cache).
pub fn in_reach<'a>(area: &Path, guarded: &'a [Guarded]) -> Option<&'a Guarded> {
    let area = resolved(area);
    guarded.iter().find(|g| {
        let path = resolved(&g.path);
        path.starts_with(&area) || area.starts_with(&path)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_area_that_holds_or_lies_inside_a_guarded_path_reaches_it() {
        let dir = tempfile::tempdir().unwrap();
        let root = dunce::canonicalize(dir.path()).unwrap();
        std::fs::create_dir_all(root.join("project/plugins")).unwrap();
        std::fs::write(root.join("project/harness.toml"), "").unwrap();
        let guarded = [
            Guarded::new(root.join("project/harness.toml"), "the configuration in use"),
            Guarded::new(root.join("project/harness.lock"), "harness.lock"),
            Guarded::new(root.join("project/plugins"), "a plugin directory"),
        ];
        let reach = |area: &Path| in_reach(area, &guarded).map(|g| g.what.as_str());
        assert_eq!(reach(&root.join("project")), Some("the configuration in use"));
        assert_eq!(reach(&root), Some("the configuration in use"), "an ancestor holds it too");
        assert_eq!(reach(&root.join("project/plugins/sub")), Some("a plugin directory"));
        assert_eq!(reach(&root.join("project/harness.lock")), Some("harness.lock"), "a file not there yet");
        assert_eq!(reach(&root.join("project/data")), None);
        assert_eq!(reach(&root.join("project/plugins/../data")), None, "`..` is resolved");
        assert_eq!(reach(&root.join("other")), None);
    }

    #[cfg(unix)]
    #[test]
    fn a_link_to_a_guarded_directory_is_that_directory() {
        let dir = tempfile::tempdir().unwrap();
        let root = dunce::canonicalize(dir.path()).unwrap();
        std::fs::create_dir_all(root.join("plugins")).unwrap();
        std::os::unix::fs::symlink(root.join("plugins"), root.join("link")).unwrap();
        let guarded = [Guarded::new(root.join("plugins"), "a plugin directory")];
        assert!(in_reach(&root.join("link"), &guarded).is_some());
        assert!(in_reach(&root.join("link/new"), &guarded).is_some());
    }
}
