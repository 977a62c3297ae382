//! `files`: read files and list directories, confined to one root directory.
//!
//! The root is `[plugins.files] root` in the harness configuration (default: the working
//! directory when the plugin is initialised). Paths are relative to the root. A path with a
//! `..` component, an absolute path outside the root, and a symbolic link that leads out of
//! it are all refused: the path is resolved (links followed) and must stay under the root.

use std::fs;
use std::io::Read;
use std::path::{Component, Path, PathBuf};

use harness_sdk::schemars::JsonSchema;
use harness_sdk::serde::{Deserialize, Serialize};
use harness_sdk::{Effects, Plugin, Tool, ToolError};

/// The largest `max_bytes` a call may ask for.
pub const MAX_READ: u64 = 16 * 1024 * 1024;
/// What `read_file` reads when `max_bytes` is not given.
pub const DEFAULT_READ: u64 = 1024 * 1024;

/// `[plugins.files]` configuration.
#[derive(Debug, Default, Deserialize)]
#[serde(crate = "harness_sdk::serde", deny_unknown_fields)]
pub struct FilesConfig {
    /// The directory every path is confined to.
    pub root: Option<PathBuf>,
}

/// Arguments of `read_file`.
#[derive(Deserialize, JsonSchema)]
#[serde(crate = "harness_sdk::serde", deny_unknown_fields)]
#[schemars(crate = "harness_sdk::schemars")]
pub struct ReadFileArgs {
    /// Path of the file, relative to the root.
    #[schemars(length(min = 1))]
    pub path: String,
    /// Read at most this many bytes (default 1 MiB, at most 16 MiB).
    #[schemars(range(min = 0, max = 16_777_216))]
    pub max_bytes: Option<u64>,
}

/// Arguments of `list_dir`.
#[derive(Deserialize, JsonSchema)]
#[serde(crate = "harness_sdk::serde", deny_unknown_fields)]
#[schemars(crate = "harness_sdk::schemars")]
pub struct ListDirArgs {
    /// Path of the directory, relative to the root (`.` for the root itself).
    #[schemars(length(min = 1))]
    pub path: String,
}

/// Result of `read_file`.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(crate = "harness_sdk::serde")]
#[schemars(crate = "harness_sdk::schemars")]
pub struct FileContent {
    /// The path as asked.
    pub path: String,
    /// The text read.
    pub content: String,
    /// Bytes read.
    pub bytes: u64,
    /// Whether the file is longer than what was read.
    pub truncated: bool,
}

/// One entry of a directory listing.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(crate = "harness_sdk::serde")]
#[schemars(crate = "harness_sdk::schemars")]
pub struct DirEntry {
    /// File name.
    pub name: String,
    /// `file`, `dir`, `symlink` or `other`.
    pub kind: String,
    /// Size in bytes, for files.
    pub bytes: Option<u64>,
}

/// Result of `list_dir`.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(crate = "harness_sdk::serde")]
#[schemars(crate = "harness_sdk::schemars")]
pub struct Listing {
    /// The path as asked.
    pub path: String,
    /// The entries, sorted by name.
    pub entries: Vec<DirEntry>,
}

/// The `files` plugin: the canonical root every path must stay under.
pub struct Files {
    root: PathBuf,
}

impl Files {
    /// Confines the plugin to `root`, which must be an existing directory.
    pub fn new(root: &Path) -> Result<Self, String> {
        let root = root.canonicalize().map_err(|e| format!("files: root {} cannot be used: {e}", root.display()))?;
        if !root.is_dir() {
            return Err(format!("files: root {} is not a directory", root.display()));
        }
        Ok(Self { root })
    }

    /// Resolves `path` under the root, refusing anything that would leave it.
    pub fn resolve(&self, path: &str) -> Result<PathBuf, ToolError> {
        let asked = Path::new(path);
        if asked.components().any(|c| matches!(c, Component::ParentDir)) {
            return Err(ToolError::tool_error(format!("{path:?} is refused: paths may not contain \"..\"")));
        }
        let joined = if asked.is_absolute() { asked.to_path_buf() } else { self.root.join(asked) };
        let resolved =
            joined.canonicalize().map_err(|e| ToolError::tool_error(format!("{path:?} cannot be opened: {e}")))?;
        if !resolved.starts_with(&self.root) {
            return Err(ToolError::tool_error(format!(
                "{path:?} is refused: it resolves outside the root directory {}",
                self.root.display()
            )));
        }
        Ok(resolved)
    }

    /// Reads at most `max_bytes` of a text file.
    pub fn read_file(&self, args: ReadFileArgs) -> Result<FileContent, ToolError> {
        let path = self.resolve(&args.path)?;
        if !path.is_file() {
            return Err(ToolError::tool_error(format!("{:?} is not a file", args.path)));
        }
        let max = args.max_bytes.unwrap_or(DEFAULT_READ).min(MAX_READ);
        let file =
            fs::File::open(&path).map_err(|e| ToolError::tool_error(format!("{:?} cannot be read: {e}", args.path)))?;
        let mut buf = Vec::new();
        file.take(max + 1)
            .read_to_end(&mut buf)
            .map_err(|e| ToolError::tool_error(format!("{:?} cannot be read: {e}", args.path)))?;
        let truncated = buf.len() as u64 > max;
        buf.truncate(usize::try_from(max).unwrap_or(usize::MAX));
        let content = match String::from_utf8(buf) {
            Ok(s) => s,
            // A cut in the middle of a character is ours, not the file's: drop the partial one.
            Err(e) if truncated && e.utf8_error().error_len().is_none() => {
                let valid = e.utf8_error().valid_up_to();
                let mut bytes = e.into_bytes();
                bytes.truncate(valid);
                String::from_utf8(bytes).map_err(|_| ToolError::tool_error("not UTF-8 text"))?
            }
            Err(e) => {
                return Err(ToolError::tool_error(format!(
                    "{:?} is not UTF-8 text (invalid byte at offset {})",
                    args.path,
                    e.utf8_error().valid_up_to()
                )));
            }
        };
        Ok(FileContent { path: args.path, bytes: content.len() as u64, content, truncated })
    }

    /// Lists a directory, sorted by name.
    pub fn list_dir(&self, args: ListDirArgs) -> Result<Listing, ToolError> {
        let path = self.resolve(&args.path)?;
        let read =
            fs::read_dir(&path).map_err(|e| ToolError::tool_error(format!("{:?} cannot be listed: {e}", args.path)))?;
        let mut entries = Vec::new();
        for entry in read {
            let entry = entry.map_err(|e| ToolError::tool_error(format!("{:?} cannot be listed: {e}", args.path)))?;
            let meta = entry.metadata().ok();
            let file_type = entry.file_type().ok();
            let kind = match file_type {
                Some(t) if t.is_symlink() => "symlink",
                Some(t) if t.is_dir() => "dir",
                Some(t) if t.is_file() => "file",
                _ => "other",
            };
            let bytes = meta.filter(|m| m.is_file()).map(|m| m.len());
            entries.push(DirEntry {
                name: entry.file_name().to_string_lossy().into_owned(),
                kind: kind.to_owned(),
                bytes,
            });
        }
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(Listing { path: args.path, entries })
    }
}

impl Plugin for Files {
    const NAME: &'static str = "files";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const DESCRIPTION: &'static str = "Read files and list directories under one root directory.";
    type Config = FilesConfig;

    fn init(config: FilesConfig) -> Result<Self, String> {
        let root = match config.root {
            Some(root) => root,
            None => std::env::current_dir()
                .map_err(|e| format!("files: no root configured and no working directory: {e}"))?,
        };
        Files::new(&root)
    }

    fn tools() -> Vec<Tool<Self>> {
        vec![
            Tool::new(
                "read_file",
                "Read a text file under the root directory (at most max_bytes, default 1 MiB).",
                Effects::Reads,
                |f: &Files, a: ReadFileArgs| f.read_file(a),
            )
            .output::<FileContent>(),
            Tool::new(
                "list_dir",
                "List the entries of a directory under the root directory.",
                Effects::Reads,
                |f: &Files, a: ListDirArgs| f.list_dir(a),
            )
            .output::<Listing>(),
        ]
    }
}

harness_sdk::export_plugin!(Files);

#[cfg(test)]
mod tests {
    use super::*;

    fn setup() -> (tempfile::TempDir, Files) {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir(dir.path().join("sub")).unwrap();
        fs::write(dir.path().join("sub/a.txt"), "héllo").unwrap();
        fs::write(dir.path().join("bin"), [0xff, 0xfe, 0x00]).unwrap();
        let files = Files::new(dir.path()).unwrap();
        (dir, files)
    }

    fn read(f: &Files, path: &str, max: Option<u64>) -> Result<FileContent, ToolError> {
        f.read_file(ReadFileArgs { path: path.into(), max_bytes: max })
    }

    #[test]
    fn reads_and_truncates_on_character_boundaries() {
        let (_d, f) = setup();
        let c = read(&f, "sub/a.txt", None).unwrap();
        assert_eq!((c.content.as_str(), c.truncated), ("héllo", false));
        let c = read(&f, "sub/a.txt", Some(2)).unwrap();
        assert_eq!((c.content.as_str(), c.truncated, c.bytes), ("h", true, 1));
        assert!(read(&f, "bin", None).unwrap_err().message.contains("not UTF-8"));
        assert!(read(&f, "sub", None).unwrap_err().message.contains("not a file"));
        assert!(read(&f, "missing", None).unwrap_err().message.contains("cannot be opened"));
    }

    #[test]
    fn lists_sorted() {
        let (_d, f) = setup();
        let l = f.list_dir(ListDirArgs { path: ".".into() }).unwrap();
        let names: Vec<_> = l.entries.iter().map(|e| (e.name.as_str(), e.kind.as_str())).collect();
        assert_eq!(names, vec![("bin", "file"), ("sub", "dir")]);
    }

    #[test]
    fn escapes_are_refused() {
        let (d, f) = setup();
        assert!(read(&f, "../etc/passwd", None).unwrap_err().message.contains("\"..\""));
        assert!(read(&f, "sub/../sub/a.txt", None).unwrap_err().message.contains("\"..\""));
        assert!(read(&f, "/etc/passwd", None).unwrap_err().message.contains("outside the root"));
        let inside = d.path().join("sub/a.txt").canonicalize().unwrap();
        assert!(read(&f, inside.to_str().unwrap(), None).is_ok(), "an absolute path inside the root is fine");
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink("/etc", d.path().join("out")).unwrap();
            assert!(read(&f, "out/hostname", None).unwrap_err().message.contains("outside the root"));
            assert!(f.list_dir(ListDirArgs { path: "out".into() }).unwrap_err().message.contains("outside the root"));
            std::os::unix::fs::symlink(d.path().join("sub/a.txt"), d.path().join("link")).unwrap();
            assert_eq!(read(&f, "link", None).unwrap().content, "héllo");
        }
    }
}
