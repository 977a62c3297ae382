//! Unpacking a plugin archive (`.tar.gz`, `.tgz`, `.zip`) into a fresh private temporary
//! directory, refusing whatever could write outside it or surprise the install: absolute
//! paths, `..` components, symbolic and hard links, device files and FIFOs, and more than
//! [`LIMIT`] bytes in all. Nothing but regular files and directories is ever created there, so
//! no later entry can follow a link out of it.

use std::io::Read;
use std::path::{Component, Path, PathBuf};

use crate::Result;
use crate::error::CliError;

/// The most an archive may unpack to, in all: a plugin and its docs are far smaller, and a
/// bomb is refused before it fills the disk.
const LIMIT: u64 = 256 << 20;

/// The most entries an archive may hold.
const MAX_ENTRIES: usize = 10_000;

/// An archive format, as its file name says.
#[derive(Debug, Clone, Copy)]
pub(super) enum Kind {
    /// `.tar.gz` or `.tgz`: a gzip-compressed tar.
    TarGz,
    /// `.zip`.
    Zip,
}

impl Kind {
    /// The kind `path`'s name says, or `None` for any other file.
    pub(super) fn of(path: &Path) -> Option<Self> {
        let name = path.file_name()?.to_string_lossy().to_ascii_lowercase();
        if name.ends_with(".tar.gz") || name.ends_with(".tgz") {
            Some(Self::TarGz)
        } else if name.ends_with(".zip") {
            Some(Self::Zip)
        } else {
            None
        }
    }
}

/// Unpacks `archive` into a new private (0700) temporary directory, removed when dropped.
pub(super) fn unpack(archive: &Path, kind: Kind) -> Result<tempfile::TempDir> {
    let dir = tempfile::Builder::new().prefix("harness-install-").tempdir().map_err(|e| {
        CliError::Failure(format!("cannot make a temporary directory to unpack {}: {e}", archive.display()))
    })?;
    let mut out = Unpacker { archive, root: dir.path(), written: 0, entries: 0 };
    match kind {
        Kind::TarGz => out.tar_gz()?,
        Kind::Zip => out.zip()?,
    }
    Ok(dir)
}

/// Where the plugin is in an unpacked archive: its root, or the one directory that root
/// holds alone (as in `greet-0.1.0/libgreet.so`).
pub(super) fn top(root: &Path) -> PathBuf {
    let entries: Vec<_> =
        std::fs::read_dir(root).map(|d| d.filter_map(std::result::Result::ok).collect()).unwrap_or_default();
    match entries.as_slice() {
        [one] if one.path().is_dir() => one.path(),
        _ => root.to_owned(),
    }
}

/// What an entry is, as far as unpacking cares.
enum Entry {
    /// A regular file: written.
    File,
    /// A directory: made.
    Dir,
    /// Skipped: carries no file (a pax global header).
    Skip,
    /// Refused, with what it is.
    Refused(&'static str),
}

/// One archive being unpacked into `root`, with what it has written so far.
struct Unpacker<'a> {
    archive: &'a Path,
    root: &'a Path,
    written: u64,
    entries: usize,
}

impl Unpacker<'_> {
    /// Refuses the entry `name` because it `why`.
    fn refuse(&self, name: &str, why: &str) -> CliError {
        CliError::Usage(format!(
            "{}: entry {name:?} {why}; an archive to install holds only regular files and directories beneath it, at most {} MiB in all; nothing was installed",
            self.archive.display(),
            LIMIT >> 20
        ))
    }

    /// The archive cannot be read (at `at`): not the format its name says, or cut short.
    fn unreadable(&self, at: &str, e: impl std::fmt::Display) -> CliError {
        CliError::Usage(format!(
            "cannot read the archive {}{at}: {e}; is it a whole .tar.gz or .zip file?",
            self.archive.display()
        ))
    }

    /// The entry's path beneath the root: no absolute path, no `..`.
    fn relative(&self, name: &str) -> Result<PathBuf> {
        let mut rel = PathBuf::new();
        for part in Path::new(name).components() {
            match part {
                Component::Normal(p) => rel.push(p),
                Component::CurDir => {}
                Component::ParentDir => return Err(self.refuse(name, "has a `..` component")),
                Component::RootDir | Component::Prefix(_) => return Err(self.refuse(name, "is an absolute path")),
            }
        }
        Ok(rel)
    }

    /// Counts one more entry, refusing past [`MAX_ENTRIES`].
    fn count(&mut self, name: &str) -> Result<()> {
        self.entries += 1;
        if self.entries > MAX_ENTRIES {
            return Err(self.refuse(name, &format!("is past the {MAX_ENTRIES} entries an archive may hold")));
        }
        Ok(())
    }

    /// Makes the file or directory `name` from `data`, within the bound on the total size.
    fn put(&mut self, name: &str, entry: Entry, data: &mut dyn Read) -> Result<()> {
        self.count(name)?;
        let rel = match entry {
            Entry::Skip => return Ok(()),
            Entry::Refused(what) => return Err(self.refuse(name, &format!("is a {what}"))),
            Entry::File | Entry::Dir => self.relative(name)?,
        };
        let to = self.root.join(&rel);
        let fail = |e: std::io::Error| CliError::Failure(format!("cannot unpack {name:?} into {}: {e}", to.display()));
        if matches!(entry, Entry::Dir) || rel.as_os_str().is_empty() {
            return std::fs::create_dir_all(&to).map_err(fail);
        }
        if let Some(parent) = to.parent() {
            std::fs::create_dir_all(parent).map_err(fail)?;
        }
        let mut file = match std::fs::OpenOptions::new().write(true).create_new(true).open(&to) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                return Err(self.refuse(name, "names a file the archive holds already"));
            }
            Err(e) => return Err(fail(e)),
        };
        let left = LIMIT - self.written;
        // One byte past the bound says the entry goes over it, whatever its header claims.
        let n = std::io::copy(&mut data.take(left + 1), &mut file)
            .map_err(|e| self.unreadable(&format!(" at {name:?}"), e))?;
        if n > left {
            return Err(self.refuse(name, "takes what the archive unpacks to over the bound"));
        }
        self.written += n;
        Ok(())
    }

    /// Unpacks a `.tar.gz`.
    fn tar_gz(&mut self) -> Result<()> {
        let file = std::fs::File::open(self.archive)
            .map_err(|e| CliError::Usage(format!("cannot read {}: {e}", self.archive.display())))?;
        let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(file));
        for entry in archive.entries().map_err(|e| self.unreadable("", e))? {
            let mut entry = entry.map_err(|e| self.unreadable("", e))?;
            let name = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
            let kind = match entry.header().entry_type() {
                tar::EntryType::Regular | tar::EntryType::Continuous => Entry::File,
                tar::EntryType::Directory => Entry::Dir,
                tar::EntryType::XGlobalHeader => Entry::Skip,
                tar::EntryType::Symlink => Entry::Refused("symbolic link"),
                tar::EntryType::Link => Entry::Refused("hard link"),
                tar::EntryType::Char | tar::EntryType::Block => Entry::Refused("device file"),
                tar::EntryType::Fifo => Entry::Refused("FIFO"),
                _ => Entry::Refused("special entry (not a regular file or directory)"),
            };
            self.put(&name, kind, &mut entry)?;
        }
        Ok(())
    }

    /// Unpacks a `.zip`.
    fn zip(&mut self) -> Result<()> {
        let file = std::fs::File::open(self.archive)
            .map_err(|e| CliError::Usage(format!("cannot read {}: {e}", self.archive.display())))?;
        let mut archive = zip::ZipArchive::new(file).map_err(|e| self.unreadable("", e))?;
        for i in 0..archive.len() {
            let mut entry = archive.by_index(i).map_err(|e| self.unreadable(&format!(" at entry {}", i + 1), e))?;
            let name = entry.name().to_owned();
            let kind = zip_kind(entry.unix_mode(), entry.is_dir());
            self.put(&name, kind, &mut entry)?;
        }
        Ok(())
    }
}

/// What a zip entry is, from its Unix mode when it has one (a zip made on Unix records links
/// and devices there), else from its name.
fn zip_kind(mode: Option<u32>, is_dir: bool) -> Entry {
    const TYPE: u32 = 0o170_000;
    match mode.map(|m| m & TYPE) {
        Some(0o120_000) => Entry::Refused("symbolic link"),
        Some(0o020_000 | 0o060_000) => Entry::Refused("device file"),
        Some(0o010_000) => Entry::Refused("FIFO"),
        Some(0o140_000) => Entry::Refused("socket"),
        _ if is_dir => Entry::Dir,
        _ => Entry::File,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kind_is_read_from_the_name_whatever_its_case() {
        assert!(matches!(Kind::of(Path::new("/d/p-1.0.TAR.GZ")), Some(Kind::TarGz)));
        assert!(matches!(Kind::of(Path::new("p.tgz")), Some(Kind::TarGz)));
        assert!(matches!(Kind::of(Path::new("p.zip")), Some(Kind::Zip)));
        assert!(Kind::of(Path::new("libp.so")).is_none() && Kind::of(Path::new("p.tar")).is_none());
    }

    #[test]
    fn a_zip_entry_is_refused_by_its_unix_file_type() {
        assert!(matches!(zip_kind(Some(0o120_777), false), Entry::Refused("symbolic link")));
        assert!(matches!(zip_kind(Some(0o020_644), false), Entry::Refused("device file")));
        assert!(matches!(zip_kind(Some(0o060_644), false), Entry::Refused("device file")));
        assert!(matches!(zip_kind(Some(0o010_644), false), Entry::Refused("FIFO")));
        assert!(matches!(zip_kind(Some(0o100_755), false), Entry::File));
        assert!(matches!(zip_kind(None, false), Entry::File));
        assert!(matches!(zip_kind(Some(0o040_755), true), Entry::Dir));
    }
}
