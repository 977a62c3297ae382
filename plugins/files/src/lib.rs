//! `files`: read, list and write files, confined to one root directory.
//!
//! The root is `[plugins.files] root` in the harness configuration, and there is no default:
//! without one, `init` fails and the tools are not offered (`plugins list` says why). Paths are
//! relative to the root (an absolute path inside it is accepted). Every open goes through a
//! handle on the root directory and resolves beneath it in one step (`cap-std`: `openat2` with
//! `RESOLVE_BENEATH` on Linux, a component-by-component walk elsewhere), so a symbolic link
//! swapped in while a call runs cannot lead out of the root: there is no check-then-open.
//! Links that stay inside are followed; an absolute link is refused even when it points back
//! inside, since resolving it starts outside the root.
//!
//! Inside the root, the usual secret files are refused by default (`.env*`, `*.pem`, `*.key`,
//! `id_*`, `.git/`, `.ssh/`; `[plugins.files] refuse` replaces the list): the name asked for
//! and the path actually opened (links resolved) are both checked.
//!
//! Only regular files and directories are read or written: a FIFO, a socket or a device
//! inside the root is refused, checked on the opened descriptor (opened non-blocking, so that
//! a FIFO with no writer cannot hold a call until its deadline). A file with more than one
//! hard link is refused too: another of its names may be outside the root, where neither the
//! root nor the refused names reach, and a write through it would change that file.

use std::io::{Read, Write};
use std::path::{Component, Path, PathBuf};

use cap_std::ambient_authority;
use cap_std::fs::{Dir, File, Metadata, OpenOptions};
use harness_sdk::schemars::JsonSchema;
use harness_sdk::serde::{Deserialize, Serialize};
use harness_sdk::{Effects, InitDeclined, Plugin, Tool, ToolError};

mod refuse;

pub use refuse::{DEFAULT_REFUSED, RefuseList};

/// The largest `max_bytes` a call may ask for.
pub const MAX_READ: u64 = 16 * 1024 * 1024;
/// What `read_file` reads when `max_bytes` is not given.
pub const DEFAULT_READ: u64 = 1024 * 1024;
/// The largest content `write_file` writes.
pub const MAX_WRITE: usize = 16 * 1024 * 1024;

/// `[plugins.files]` configuration.
#[derive(Debug, Default, Deserialize)]
#[serde(crate = "harness_sdk::serde", deny_unknown_fields)]
pub struct FilesConfig {
    /// The directory every path is confined to. Required: there is no implicit root.
    pub root: Option<PathBuf>,
    /// Name patterns refused inside the root (`*` matches any run of characters; a trailing
    /// `/` is allowed for directories). Replaces [`DEFAULT_REFUSED`]; `[]` refuses nothing.
    pub refuse: Option<Vec<String>>,
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

/// Arguments of `write_file`.
#[derive(Deserialize, JsonSchema)]
#[serde(crate = "harness_sdk::serde", deny_unknown_fields)]
#[schemars(crate = "harness_sdk::schemars")]
pub struct WriteFileArgs {
    /// Path of the file, relative to the root; its directory must exist.
    #[schemars(length(min = 1))]
    pub path: String,
    /// The text to write; the file is created or replaced.
    #[schemars(length(max = 16_777_216))]
    pub content: String,
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

/// Result of `write_file`.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(crate = "harness_sdk::serde")]
#[schemars(crate = "harness_sdk::schemars")]
pub struct Written {
    /// The path as asked.
    pub path: String,
    /// Bytes written.
    pub bytes: u64,
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

/// The `files` plugin: a handle on the root directory, through which every path is opened.
pub struct Files {
    /// The root's canonical path, for messages and for absolute paths inside it.
    root: PathBuf,
    dir: Dir,
    refused: RefuseList,
}

impl Files {
    /// Confines the plugin to `root`, which must be an existing directory, refusing `refuse`.
    pub fn new(root: &Path, refuse: RefuseList) -> Result<Self, String> {
        let root = root.canonicalize().map_err(|e| format!("files: root {} cannot be used: {e}", root.display()))?;
        if !root.is_dir() {
            return Err(format!("files: root {} is not a directory", root.display()));
        }
        let dir = Dir::open_ambient_dir(&root, ambient_authority())
            .map_err(|e| format!("files: root {} cannot be opened: {e}", root.display()))?;
        Ok(Self { root, dir, refused: refuse })
    }

    /// The path relative to the root, refusing `..`, absolute paths outside it and secret names.
    pub fn relative(&self, path: &str) -> Result<PathBuf, ToolError> {
        let asked = Path::new(path);
        if asked.components().any(|c| matches!(c, Component::ParentDir)) {
            return Err(ToolError::tool_error(format!("{path:?} is refused: paths may not contain \"..\"")));
        }
        let relative = if asked.is_absolute() {
            asked.strip_prefix(&self.root).map_err(|_| self.outside(path))?.to_path_buf()
        } else {
            asked.to_path_buf()
        };
        let relative = if relative.as_os_str().is_empty() { PathBuf::from(".") } else { relative };
        self.refused.check(path, &relative)?;
        Ok(relative)
    }

    fn outside(&self, path: &str) -> ToolError {
        ToolError::tool_error(format!(
            "{path:?} is refused: it resolves outside the root directory {}",
            self.root.display()
        ))
    }

    /// A failed open, as a tool error: an escape says so, anything else says what the system said.
    fn open_error(&self, path: &str, what: &str, e: &std::io::Error) -> ToolError {
        if e.to_string().contains("outside of the filesystem") {
            return self.outside(path);
        }

        ToolError::tool_error(format!("{path:?} cannot be {what}: {e}"))
    }

    /// Checks the path that was actually opened (links resolved) against the refused names.
    fn check_opened(&self, path: &str, file: &File) -> Result<(), ToolError> {
        if let Some(real) = opened_path(file) {
            let inside = real.strip_prefix(&self.root).map_err(|_| self.outside(path))?;
            self.refused.check(path, inside)?;
        }
        Ok(())
    }

    /// Opens the regular file `path` beneath the root with `options`, and checks what was
    /// opened: its name, its type and its links, all on the descriptor. Opened non-blocking,
    /// so that opening a FIFO or a device returns at once, to be refused.
    fn open(&self, path: &str, options: &OpenOptions, what: &str) -> Result<File, ToolError> {
        let relative = self.relative(path)?;
        // Elsewhere there is no flag to add.
        #[cfg_attr(not(unix), allow(unused_mut))]
        let mut options = options.clone();
        #[cfg(unix)]
        cap_std::fs::OpenOptionsExt::custom_flags(&mut options, libc::O_NONBLOCK);
        let refused = |kind: &str| ToolError::tool_error(format!("{path:?} is refused: it is {kind}; {ONLY_FILES}"));
        let file = self.dir.open_with(&relative, &options).map_err(|e| {
            if cfg!(unix) && e.raw_os_error() == Some(ENXIO) {
                // What opening a socket, or a FIFO nobody reads for writing, says: named from
                // a look at the path, for the message only (it is refused either way).
                let meta = self.dir.metadata(&relative).ok();
                return refused(meta.as_ref().and_then(special_kind).unwrap_or("not a regular file"));
            }
            self.open_error(path, what, &e)
        })?;
        self.check_opened(path, &file)?;
        let meta = file.metadata().map_err(|e| self.open_error(path, what, &e))?;
        if meta.is_dir() {
            return Err(ToolError::tool_error(format!("{path:?} is not a file: it is a directory")));
        }
        if let Some(kind) = special_kind(&meta) {
            return Err(refused(kind));
        }
        check_links(path, &meta)?;
        Ok(file)
    }

    /// Reads at most `max_bytes` of a text file.
    pub fn read_file(&self, args: ReadFileArgs) -> Result<FileContent, ToolError> {
        let file = self.open(&args.path, OpenOptions::new().read(true), "opened")?;
        let max = args.max_bytes.unwrap_or(DEFAULT_READ).min(MAX_READ);
        let mut buf = Vec::new();
        file.take(max + 1)
            .read_to_end(&mut buf)
            .map_err(|e| ToolError::tool_error(format!("{:?} cannot be read: {e}", args.path)))?;
        let truncated = buf.len() as u64 > max;
        buf.truncate(usize::try_from(max).unwrap_or(usize::MAX));
        let content = utf8(&args.path, buf, truncated)?;
        Ok(FileContent { path: args.path, bytes: content.len() as u64, content, truncated })
    }

    /// Creates or replaces a file with `content`.
    pub fn write_file(&self, args: WriteFileArgs) -> Result<Written, ToolError> {
        if args.content.len() > MAX_WRITE {
            return Err(ToolError::tool_error(format!("content is over {MAX_WRITE} bytes")));
        }
        // Opened without truncating: what was opened is checked before anything is changed.
        let mut file = self.open(&args.path, OpenOptions::new().write(true).create(true), "written")?;
        let failed = |e: std::io::Error| ToolError::tool_error(format!("{:?} cannot be written: {e}", args.path));
        file.set_len(0).map_err(failed)?;
        file.write_all(args.content.as_bytes()).map_err(failed)?;
        file.sync_all().map_err(failed)?;
        Ok(Written { path: args.path, bytes: args.content.len() as u64 })
    }

    /// Lists a directory, sorted by name.
    pub fn list_dir(&self, args: ListDirArgs) -> Result<Listing, ToolError> {
        let relative = self.relative(&args.path)?;
        let dir = self.dir.open_dir(&relative).map_err(|e| self.open_error(&args.path, "listed", &e))?;
        let failed = |e: std::io::Error| ToolError::tool_error(format!("{:?} cannot be listed: {e}", args.path));
        self.check_opened(&args.path, &dir.open(".").map_err(failed)?)?;
        let mut entries = Vec::new();
        for entry in dir.entries().map_err(failed)? {
            let entry = entry.map_err(failed)?;
            let kind = match entry.file_type() {
                Ok(t) if t.is_symlink() => "symlink",
                Ok(t) if t.is_dir() => "dir",
                Ok(t) if t.is_file() => "file",
                _ => "other",
            };
            let bytes = entry.metadata().ok().filter(|m| m.is_file()).map(|m| m.len());
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

/// "No such device or address": what `open` says of a socket, or of a FIFO opened for writing
/// non-blocking that nobody reads.
#[cfg(unix)]
const ENXIO: i32 = libc::ENXIO;
#[cfg(not(unix))]
const ENXIO: i32 = 6;

/// What the tools say of a path that is neither a regular file nor a directory.
const ONLY_FILES: &str = "only regular files are read or written";

/// What `meta` describes when it is neither a regular file nor a directory: `a FIFO`, ...
fn special_kind(meta: &Metadata) -> Option<&'static str> {
    let t = meta.file_type();
    if t.is_file() || t.is_dir() {
        return None;
    }
    #[cfg(unix)]
    {
        use cap_std::fs::FileTypeExt;
        let kinds = [
            (t.is_fifo(), "a FIFO (named pipe)"),
            (t.is_socket(), "a socket"),
            (t.is_char_device(), "a character device"),
            (t.is_block_device(), "a block device"),
        ];
        if let Some((_, kind)) = kinds.into_iter().find(|(is, _)| *is) {
            return Some(kind);
        }
    }
    Some("not a regular file")
}

/// Refuses a file with more than one hard link: its other names may be outside the root.
fn check_links(path: &str, meta: &Metadata) -> Result<(), ToolError> {
    #[cfg(unix)]
    {
        use cap_std::fs::MetadataExt;
        let links = meta.nlink();
        if links > 1 {
            return Err(ToolError::tool_error(format!(
                "{path:?} is refused: it has {links} hard links, and another of its names may be outside the root \
                 directory, where a read or a write through this one would reach; only files with one link are read \
                 or written"
            )));
        }
    }
    #[cfg(not(unix))]
    let _ = (path, meta);
    Ok(())
}

/// The text of `buf`; a character cut by `max_bytes` is dropped, other invalid bytes refused.
fn utf8(path: &str, buf: Vec<u8>, truncated: bool) -> Result<String, ToolError> {
    match String::from_utf8(buf) {
        Ok(s) => Ok(s),
        // A cut in the middle of a character is ours, not the file's: drop the partial one.
        Err(e) if truncated && e.utf8_error().error_len().is_none() => {
            let valid = e.utf8_error().valid_up_to();
            let mut bytes = e.into_bytes();
            bytes.truncate(valid);
            String::from_utf8(bytes).map_err(|_| ToolError::tool_error("not UTF-8 text"))
        }
        Err(e) => Err(ToolError::tool_error(format!(
            "{path:?} is not UTF-8 text (invalid byte at offset {})",
            e.utf8_error().valid_up_to()
        ))),
    }
}

/// The path the kernel opened, from the descriptor itself (Linux); `None` elsewhere.
fn opened_path(file: &File) -> Option<PathBuf> {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd())).ok()
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = file;
        None
    }
}

impl Plugin for Files {
    const NAME: &'static str = "files";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const DESCRIPTION: &'static str = "Read, list and write files under one root directory.";
    type Config = FilesConfig;

    fn init(config: FilesConfig) -> Result<Self, String> {
        // No root is no mistake: the plugin has nothing to guess one from, so it declines.
        let root = config.root.ok_or_else(|| {
            InitDeclined::new(
                "[plugins.files] root",
                "files: no root directory configured, so read_file, list_dir and write_file are not offered; set root = \"DIR\" in [plugins.files] of the configuration",
            )
            .to_init_error()
        })?;
        let refuse = match config.refuse {
            Some(patterns) => RefuseList::new(&patterns).map_err(|e| format!("files: refuse: {e}"))?,
            None => RefuseList::default(),
        };
        Files::new(&root, refuse)
    }

    fn tools() -> Vec<Tool<Self>> {
        vec![
            Tool::new(
                "read_file",
                "Read a text file under the root directory (at most max_bytes, default 1 MiB). Secret files (.env*, keys, .git, .ssh), files with more than one hard link, and FIFOs, sockets and devices are refused.",
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
            Tool::new(
                "write_file",
                "Create or replace a text file under the root directory; its directory must exist. Files with more than one hard link, and FIFOs, sockets and devices are refused.",
                Effects::Writes,
                |f: &Files, a: WriteFileArgs| f.write_file(a),
            )
            .output::<Written>(),
        ]
    }
}

harness_sdk::export_plugin!(Files);

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn setup() -> (tempfile::TempDir, Files) {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir(dir.path().join("sub")).unwrap();
        fs::write(dir.path().join("sub/a.txt"), "héllo").unwrap();
        fs::write(dir.path().join("bin"), [0xff, 0xfe, 0x00]).unwrap();
        let files = Files::new(dir.path(), RefuseList::default()).unwrap();
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
            std::os::unix::fs::symlink("sub/a.txt", d.path().join("link")).unwrap();
            assert_eq!(read(&f, "link", None).unwrap().content, "héllo");
            // Resolution never leaves the root, not even to come back: an absolute link is refused.
            std::os::unix::fs::symlink(d.path().join("sub/a.txt"), d.path().join("abs")).unwrap();
            assert!(read(&f, "abs", None).unwrap_err().message.contains("outside the root"));
            let write = f.write_file(WriteFileArgs { path: "out/x".into(), content: "x".into() });
            assert!(write.unwrap_err().message.contains("outside the root"));
        }
    }

    #[cfg(unix)]
    fn mkfifo(path: &Path) {
        let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "{}", std::io::Error::last_os_error());
    }

    #[cfg(unix)]
    #[test]
    fn fifos_and_sockets_are_refused_at_once_naming_their_type() {
        let (d, f) = setup();
        mkfifo(&d.path().join("fifo"));
        // No writer: a blocking open would wait here for one, forever.
        let e = read(&f, "fifo", None).unwrap_err();
        assert_eq!(e.code, "tool_error");
        assert!(e.message.contains("\"fifo\" is refused: it is a FIFO (named pipe)"), "{}", e.message);
        // No reader: a non-blocking open for writing fails, and is refused as well.
        let e = f.write_file(WriteFileArgs { path: "fifo".into(), content: "x".into() }).unwrap_err();
        assert!(e.message.contains("\"fifo\" is refused: it is a FIFO"), "{}", e.message);
        let _socket = std::os::unix::net::UnixListener::bind(d.path().join("sock")).unwrap();
        let e = read(&f, "sock", None).unwrap_err();
        assert!(e.message.contains("\"sock\" is refused: it is a socket"), "{}", e.message);
    }

    #[test]
    fn a_file_with_another_link_is_neither_read_nor_written() {
        let (d, f) = setup();
        let outside = tempfile::tempdir().unwrap();
        let target = outside.path().join("victim.txt");
        fs::write(&target, "outside").unwrap();
        fs::hard_link(&target, d.path().join("sub/link.txt")).unwrap();
        let e = f.write_file(WriteFileArgs { path: "sub/link.txt".into(), content: "pwned".into() }).unwrap_err();
        assert_eq!(e.code, "tool_error");
        assert!(e.message.contains("\"sub/link.txt\" is refused: it has 2 hard links"), "{}", e.message);
        assert_eq!(fs::read_to_string(&target).unwrap(), "outside", "written through the link");
        let e = read(&f, "sub/link.txt", None).unwrap_err();
        assert!(e.message.contains("has 2 hard links"), "{}", e.message);
    }

    #[test]
    fn secrets_are_refused_by_name_and_through_links() {
        let (d, f) = setup();
        for secret in [".env", ".env.local", "server.pem", "tls.key", "id_ed25519", ".git/config", ".ssh/config"] {
            let path = d.path().join(secret);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(&path, "SECRET").unwrap();
            let e = read(&f, secret, None).unwrap_err().message;
            assert!(e.contains("is refused") && e.contains("[plugins.files] refuse"), "{secret}: {e}");
        }
        assert!(f.list_dir(ListDirArgs { path: ".git".into() }).is_err());
        let w = f.write_file(WriteFileArgs { path: ".env".into(), content: "X=1".into() });
        assert!(w.is_err() && fs::read_to_string(d.path().join(".env")).unwrap() == "SECRET");
        #[cfg(target_os = "linux")]
        {
            std::os::unix::fs::symlink(".env", d.path().join("notes.txt")).unwrap();
            let e = read(&f, "notes.txt", None).unwrap_err().message;
            assert!(e.contains("\".env\" matches"), "the opened file is checked, not only the name: {e}");
            let w = f.write_file(WriteFileArgs { path: "notes.txt".into(), content: "X=1".into() });
            assert!(w.is_err() && fs::read_to_string(d.path().join(".env")).unwrap() == "SECRET");
        }
        let open = Files::new(d.path(), RefuseList::new(&[]).unwrap()).unwrap();
        assert_eq!(read(&open, ".env", None).unwrap().content, "SECRET", "an empty list refuses nothing");
    }

    #[test]
    fn writes_create_and_replace_files() {
        let (d, f) = setup();
        let w = f.write_file(WriteFileArgs { path: "sub/new.txt".into(), content: "one two".into() }).unwrap();
        assert_eq!(w.bytes, 7);
        f.write_file(WriteFileArgs { path: "sub/new.txt".into(), content: "3".into() }).unwrap();
        assert_eq!(fs::read_to_string(d.path().join("sub/new.txt")).unwrap(), "3");
        let e = f.write_file(WriteFileArgs { path: "nodir/x.txt".into(), content: "x".into() }).unwrap_err();
        assert!(e.message.contains("cannot be written"), "{}", e.message);
    }

    #[test]
    fn no_root_no_tools() {
        let e = Files::init(FilesConfig::default()).err().unwrap();
        let declined = InitDeclined::from_init_error(&e).unwrap();
        assert_eq!(declined.needs, "[plugins.files] root");
    }

    /// A thread swaps `d` between a real directory inside the root and a link to one outside
    /// it, as fast as it can, while reads go through `d`: no read may return the outside file.
    /// (A check of the resolved path followed by an open by path loses this race.)
    #[cfg(unix)]
    #[test]
    fn a_link_swapped_during_reads_never_leads_out() {
        use std::sync::Arc;
        use std::sync::atomic::{AtomicBool, Ordering};
        let outside = tempfile::tempdir().unwrap();
        fs::write(outside.path().join("f.txt"), "OUTSIDE").unwrap();
        let (d, f) = setup();
        let (dir, real, tmp) = (d.path().join("d"), d.path().join("d.real"), d.path().join("d.tmp"));
        fs::create_dir(&dir).unwrap();
        fs::write(dir.join("f.txt"), "inside").unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let swapper = {
            let (stop, out) = (Arc::clone(&stop), outside.path().to_path_buf());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    fs::rename(&dir, &real).unwrap();
                    std::os::unix::fs::symlink(&out, &tmp).unwrap();
                    fs::rename(&tmp, &dir).unwrap();
                    fs::remove_file(&dir).unwrap();
                    fs::rename(&real, &dir).unwrap();
                }
            })
        };
        let (mut inside, mut refused) = (0, 0);
        // Three seconds: a check-then-open loses within them on this machine (tried).
        let started = std::time::Instant::now();
        while started.elapsed() < std::time::Duration::from_secs(3) {
            match read(&f, "d/f.txt", None) {
                Ok(c) => {
                    assert_eq!(c.content, "inside", "a read escaped the root");
                    inside += 1;
                }
                Err(_) => refused += 1,
            }
        }
        stop.store(true, Ordering::Relaxed);
        swapper.join().unwrap();
        assert!(inside > 0 && refused > 0, "the swap raced the reads: {inside} inside, {refused} refused");
    }
}
