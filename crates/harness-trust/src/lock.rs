//! The tool lock file (`harness.lock`): for each offered tool, where it comes from and the
//! SHA-256 of its definition, so that a tool changed under the operator (a plugin file
//! replaced, an MCP server that rewrites its descriptions) is noticed.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::ConfigError;

/// One tool as locked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LockEntry {
    /// `plugin NAME VERSION` or `mcp NAME: COMMAND ARGS`.
    pub source: String,
    /// SHA-256 of the plugin's library file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub library_sha256: Option<String>,
    /// SHA-256 of the canonical definition: name, description, schemas, effects.
    pub definition_sha256: String,
}

/// Every offered tool, by name.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolLock {
    /// The tools.
    pub tools: BTreeMap<String, LockEntry>,
}

impl ToolLock {
    /// Reads a lock file; `None` when there is none.
    pub fn read(path: &Path) -> Result<Option<Self>, ConfigError> {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => return Err(ConfigError::Read { path: path.to_owned(), source }),
        };
        serde_json::from_str(&text).map(Some).map_err(|e| ConfigError::Store {
            path: path.to_owned(),
            message: format!("is not a harness lock file ({e}); write it again with `harness lock`"),
        })
    }

    /// Writes the lock file whole.
    pub fn write(&self, path: &Path) -> Result<(), ConfigError> {
        let text = serde_json::to_string_pretty(self).unwrap_or_default() + "\n";
        std::fs::write(path, text).map_err(|source| ConfigError::Read { path: path.to_owned(), source })
    }

    /// Every difference between this lock and `now`, field by field, one line each.
    pub fn diff(&self, now: &ToolLock) -> Vec<String> {
        let mut lines = Vec::new();
        for (name, locked) in &self.tools {
            let Some(current) = now.tools.get(name) else {
                lines.push(format!("tool {name}: locked ({}), not offered now", locked.source));
                continue;
            };
            let fields = [
                ("source", Some(&locked.source), Some(&current.source)),
                ("library_sha256", locked.library_sha256.as_ref(), current.library_sha256.as_ref()),
                ("definition_sha256", Some(&locked.definition_sha256), Some(&current.definition_sha256)),
            ];
            for (field, was, is) in fields {
                if was != is {
                    let show = |v: Option<&String>| v.map_or_else(|| "(none)".to_owned(), Clone::clone);
                    lines.push(format!("tool {name}: {field} was {}, is now {}", show(was), show(is)));
                }
            }
        }
        for (name, current) in &now.tools {
            if !self.tools.contains_key(name) {
                lines.push(format!("tool {name}: offered now ({}), not in the lock", current.source));
            }
        }
        lines
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(def: &str) -> LockEntry {
        LockEntry {
            source: "plugin calc 0.1.0".into(),
            library_sha256: Some("aa".into()),
            definition_sha256: def.into(),
        }
    }

    #[test]
    fn every_difference_is_a_line() {
        let locked = ToolLock { tools: BTreeMap::from([("a".into(), entry("1")), ("b".into(), entry("2"))]) };
        let now = ToolLock { tools: BTreeMap::from([("a".into(), entry("9")), ("c".into(), entry("3"))]) };
        let d = locked.diff(&now);
        assert_eq!(d.len(), 3, "{d:?}");
        assert!(d[0].contains("tool a: definition_sha256 was 1, is now 9"), "{d:?}");
        assert!(d[1].contains("tool b: locked") && d[2].contains("tool c: offered now"), "{d:?}");
        assert!(locked.diff(&locked).is_empty());
    }
}
