//! A plugin library file opened once: what is hashed, checked and loaded is this one open file,
//! never the path again (docs/security.md, "one open, one identity").
//!
//! Hashing a path and then `dlopen`ing the same path opens the file twice: a process that
//! renames another library over it in between gets the other one loaded, pinned or not. Here
//! the file is opened once, without following a link; its identity (device, inode, size,
//! times) and its SHA-256 are read from that descriptor, and the loader is given that
//! descriptor too:
//! - Linux: `dlopen("/proc/self/fd/N")`, which opens the very file the descriptor holds;
//! - Windows: the handle is held open without write or delete sharing while `LoadLibrary`
//!   opens the path, so no one can write, replace or remove the file in between;
//! - other Unix systems, or Linux without `/proc`: the path is loaded, and the file's
//!   identity compared after the load with the descriptor's; a change refuses the library
//!   (a swap and a swap back inside one `dlopen` is not caught there).

use std::fs::File;
use std::path::{Path, PathBuf};

use crate::cache::Identity;

/// One library file, opened once; the descriptor stays open as long as this value lives, and
/// for the rest of the process once the loader was given it.
#[derive(Debug)]
pub(crate) struct LibraryFile {
    path: PathBuf,
    file: std::mem::ManuallyDrop<File>,
    /// Whether the loader opened it by its descriptor's name: that descriptor is then never
    /// closed, since the loader knows a loaded library by its name (`/proc/self/fd/5`), and a
    /// later file given the same number would be answered with the earlier library.
    named_to_loader: std::sync::atomic::AtomicBool,
}

impl Drop for LibraryFile {
    fn drop(&mut self) {
        if !self.named_to_loader.load(std::sync::atomic::Ordering::Relaxed) {
            // SAFETY: dropped once, here, and never used again.
            unsafe { std::mem::ManuallyDrop::drop(&mut self.file) }
        }
    }
}

impl LibraryFile {
    /// Opens `path` for reading, refusing a symbolic link (the path discovery hands over is
    /// canonical, so a link there was planted after it was resolved).
    pub(crate) fn open(path: &Path) -> Result<Self, String> {
        let file = open_options().open(path).map_err(|e| match e.raw_os_error() {
            Some(code) if is_link_refusal(code) => {
                "is a symbolic link: give the file's own (canonical) path".to_owned()
            }
            _ => format!("cannot be opened: {e}"),
        })?;
        Ok(Self { path: path.to_owned(), file: std::mem::ManuallyDrop::new(file), named_to_loader: false.into() })
    }

    /// The path it was opened by.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The open file, for reading its headers.
    pub(crate) fn file(&self) -> &File {
        &self.file
    }

    /// The open file's identity now (read from the descriptor, not the path).
    pub(crate) fn identity(&self) -> Option<Identity> {
        Identity::of_file(&self.path, &self.file)
    }

    /// The SHA-256 of the open file's bytes, as `harness.lock` writes it.
    pub(crate) fn sha256(&self) -> std::io::Result<String> {
        use sha2::Digest as _;
        let mut hasher = sha2::Sha256::new();
        self.for_each_chunk(|chunk| hasher.update(chunk))?;
        Ok(hasher.finalize().iter().map(|b| format!("{b:02x}")).collect())
    }

    /// Hands the open file's bytes, from the start, to `f` in chunks (read from the descriptor
    /// at offsets, so that no reader moves another's position).
    pub(crate) fn for_each_chunk(&self, mut f: impl FnMut(&[u8])) -> std::io::Result<()> {
        let mut buffer = vec![0u8; 64 * 1024];
        let mut offset = 0u64;
        loop {
            let n = read_at(&self.file, &mut buffer, offset)?;
            if n == 0 {
                return Ok(());
            }
            f(&buffer[..n]);
            offset += n as u64;
        }
    }

    /// The name to give the OS loader so that it loads this open file.
    pub(crate) fn loader_path(&self) -> PathBuf {
        #[cfg(target_os = "linux")]
        if proc_fd_works() {
            use std::os::fd::AsRawFd;
            return PathBuf::from(format!("/proc/self/fd/{}", self.file.as_raw_fd()));
        }
        self.path.clone()
    }

    /// Says that the loader was given [`loader_path`](Self::loader_path) and loaded it: the
    /// descriptor is kept open for the life of the process (as the library stays mapped).
    pub(crate) fn loaded(&self) {
        self.named_to_loader.store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// After a load by [`loader_path`](Self::loader_path): `Err` when the loader may have
    /// opened another file than this one (only where the path itself was loaded).
    pub(crate) fn check_loaded_same(&self) -> Result<(), String> {
        if cfg!(windows) || self.loader_path() != self.path {
            return Ok(());
        }
        let now = std::fs::metadata(&self.path).ok().and_then(|m| Identity::from_metadata(&self.path, &m));
        if now.is_some() && now == self.identity() {
            Ok(())
        } else {
            Err("the file was replaced while it was being loaded; restart the harness".to_owned())
        }
    }

    /// Replaces the descriptor's name in a loader message with the file's path.
    pub(crate) fn name_in(&self, message: String) -> String {
        let loader = self.loader_path();
        if loader == self.path {
            return message;
        }
        message.replace(&*loader.to_string_lossy(), &self.path.to_string_lossy())
    }
}

#[cfg(unix)]
fn open_options() -> std::fs::OpenOptions {
    use std::os::unix::fs::OpenOptionsExt;
    let mut o = std::fs::OpenOptions::new();
    o.read(true).custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC);
    o
}

#[cfg(windows)]
fn open_options() -> std::fs::OpenOptions {
    use std::os::windows::fs::OpenOptionsExt;
    use windows_sys::Win32::Storage::FileSystem::FILE_SHARE_READ;
    let mut o = std::fs::OpenOptions::new();
    // Read sharing only: while this handle is open nobody can write, rename over or delete it.
    o.read(true).share_mode(FILE_SHARE_READ);
    o
}

#[cfg(not(any(unix, windows)))]
fn open_options() -> std::fs::OpenOptions {
    let mut o = std::fs::OpenOptions::new();
    o.read(true);
    o
}

/// The error of an open refused because the path's last component is a link (`O_NOFOLLOW`).
#[cfg(unix)]
const LINK_REFUSED: Option<i32> = Some(libc::ELOOP);
#[cfg(not(unix))]
const LINK_REFUSED: Option<i32> = None;

/// Whether an open failed because the path's last component is a link.
fn is_link_refusal(code: i32) -> bool {
    LINK_REFUSED == Some(code)
}

#[cfg(unix)]
fn read_at(file: &File, buffer: &mut [u8], offset: u64) -> std::io::Result<usize> {
    std::os::unix::fs::FileExt::read_at(file, buffer, offset)
}

#[cfg(windows)]
fn read_at(file: &File, buffer: &mut [u8], offset: u64) -> std::io::Result<usize> {
    std::os::windows::fs::FileExt::seek_read(file, buffer, offset)
}

#[cfg(not(any(unix, windows)))]
fn read_at(file: &File, buffer: &mut [u8], offset: u64) -> std::io::Result<usize> {
    use std::io::{Read as _, Seek as _};
    let mut f = file;
    f.seek(std::io::SeekFrom::Start(offset))?;
    f.read(buffer)
}

/// Whether `/proc/self/fd` is there to name an open file by (it is not in every container).
#[cfg(target_os = "linux")]
fn proc_fd_works() -> bool {
    static WORKS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *WORKS.get_or_init(|| Path::new("/proc/self/fd").is_dir())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hash_and_identity_are_the_open_file_s_even_when_another_is_renamed_over_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("liba.so");
        std::fs::write(&path, b"first").unwrap();
        let file = LibraryFile::open(&path).unwrap();
        let (hash, identity) = (file.sha256().unwrap(), file.identity());
        let other = dir.path().join("libb.so");
        std::fs::write(&other, b"second, longer").unwrap();
        std::fs::rename(&other, &path).unwrap();
        assert_eq!(file.sha256().unwrap(), hash);
        // The same file (its change time moves as it loses its name, so compare the file).
        assert_eq!(file.identity().map(|i| i.file()), identity.map(|i| i.file()));
        assert_eq!(hash, harness_core_sha(b"first"));
    }

    fn harness_core_sha(bytes: &[u8]) -> String {
        use sha2::Digest as _;
        sha2::Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
    }

    #[cfg(unix)]
    #[test]
    fn a_link_is_refused_with_its_reason() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("real.so"), b"x").unwrap();
        std::os::unix::fs::symlink(dir.path().join("real.so"), dir.path().join("link.so")).unwrap();
        let why = LibraryFile::open(&dir.path().join("link.so")).unwrap_err();
        assert!(why.contains("symbolic link"), "{why}");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_loader_is_given_the_descriptor_and_messages_name_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("liba.so");
        std::fs::write(&path, b"x").unwrap();
        let file = LibraryFile::open(&path).unwrap();
        let loader = file.loader_path();
        assert!(loader.starts_with("/proc/self/fd"), "{}", loader.display());
        let message = file.name_in(format!("{}: file too short", loader.display()));
        assert_eq!(message, format!("{}: file too short", path.display()));
    }

    /// The loader knows a library by the name it was given: a descriptor it was given is never
    /// closed, so that its number is never another file's name.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_descriptor_given_to_the_loader_stays_open_and_its_number_is_never_reused() {
        use std::os::fd::AsRawFd;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("liba.so");
        std::fs::write(&path, b"x").unwrap();
        let file = LibraryFile::open(&path).unwrap();
        let fd = file.file().as_raw_fd();
        file.loaded();
        drop(file);
        let next = LibraryFile::open(&path).unwrap();
        assert_ne!(next.file().as_raw_fd(), fd);
        assert!(Path::new(&format!("/proc/self/fd/{fd}")).exists());
    }
}
