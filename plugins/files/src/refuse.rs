//! The names refused inside the root: secrets a prompt-injected model should never read out.

use std::path::Path;

use harness_sdk::ToolError;

/// Refused by default: environment files, keys and certificates, and version-control and SSH
/// directories.
pub const DEFAULT_REFUSED: &[&str] = &[".env*", "*.pem", "*.key", "id_*", ".git/", ".ssh/"];

/// Patterns matched against every component of a path (`*`: any run of characters).
#[derive(Debug, Clone)]
pub struct RefuseList {
    patterns: Vec<String>,
}

impl Default for RefuseList {
    fn default() -> Self {
        Self { patterns: DEFAULT_REFUSED.iter().map(|p| (*p).to_owned()).collect() }
    }
}

impl RefuseList {
    /// A list from configured patterns; a pattern holding a `/` other than a trailing one is refused.
    pub fn new(patterns: &[String]) -> Result<Self, String> {
        let mut out = Vec::new();
        for p in patterns {
            let name = p.strip_suffix('/').unwrap_or(p);
            if name.is_empty() || name.contains('/') {
                return Err(format!(
                    "pattern {p:?} is not a file or directory name; give names such as \".env*\" or \".git/\""
                ));
            }
            out.push(name.to_owned());
        }
        Ok(Self { patterns: out })
    }

    /// Refuses `relative` (a path under the root) when any of its components matches.
    pub fn check(&self, asked: &str, relative: &Path) -> Result<(), ToolError> {
        for component in relative.components() {
            let name = component.as_os_str().to_string_lossy();
            let pattern = self.patterns.iter().find(|p| glob(p.trim_end_matches('/'), &name));
            if let Some(pattern) = pattern {
                return Err(ToolError::tool_error(format!(
                    "{asked:?} is refused: {name:?} matches {pattern:?}, a name the files plugin does not touch (the operator can change [plugins.files] refuse)"
                )));
            }
        }
        Ok(())
    }
}

/// Whether `name` matches `pattern`, where `*` matches any run of characters.
///
/// Hand-written on purpose, for a measured reason: `globset` (ripgrep's matcher, on
/// regex-automata) made the release `libfiles.so` 2.56 MB instead of 1.09 MB, and a signed
/// plugin's library is hashed whole at each check (BLAKE2b: 1.87 ms instead of 0.79 ms), all
/// to match half a dozen patterns against one name at a time (2026-12-06).
fn glob(pattern: &str, name: &str) -> bool {
    let Some((first, rest)) = pattern.split_once('*') else {
        return pattern == name;
    };
    let Some(mut tail) = name.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = rest.split('*').collect();
    let (last, middle) = parts.split_last().unwrap_or((&"", &[]));
    for part in middle {
        match tail.find(part) {
            Some(at) => tail = &tail[at + part.len()..],
            None => return false,
        }
    }
    tail.ends_with(last)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs() {
        assert!(glob(".env*", ".env") && glob(".env*", ".env.local") && !glob(".env*", "x.env"));
        assert!(glob("*.pem", "cert.pem") && !glob("*.pem", "cert.pem.txt"));
        assert!(glob("id_*", "id_ed25519") && glob("a*b*c", "aXbYc") && !glob("a*b*c", "acb"));
        assert!(glob(".git", ".git") && !glob(".git", ".github"));
        // A part is never matched twice by overlapping ends.
        assert!(!glob("a*a", "a") && glob("*ab*ab", "abab") && !glob("*ab*ab", "xab") && glob("*", ""));
    }

    #[test]
    fn every_component_is_checked() {
        let list = RefuseList::default();
        assert!(list.check("a", Path::new("notes/a.txt")).is_ok());
        let e = list.check("x", Path::new("repo/.git/config")).unwrap_err().message;
        assert!(e.contains("\".git\" matches \".git/\""), "{e}");
        assert!(list.check("x", Path::new("home/.ssh")).is_err());
        assert!(RefuseList::new(&["a/b".into()]).is_err());
        assert!(RefuseList::new(&[]).unwrap().check("x", Path::new(".env")).is_ok());
    }
}
