//! Files the harness writes (traces, batch results and pending files, reports), never through
//! a symbolic link planted where they go: a link there is refused with its path named, or
//! replaced by a whole new file, but what it points to is never written.
//!
//! On Unix the last component is opened with `O_NOFOLLOW` (a link to a device or a pipe, such
//! as `/dev/stdout`, is still written: it writes no file), and a whole file is written to a
//! fresh temporary name (`O_EXCL`, which no link satisfies) and renamed over its path (a
//! rename replaces a link, never follows it). On Windows, where no such flag exists, a link
//! found at the path before it is opened is refused (a link planted between that look and the
//! open is not caught there).

use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::path::Path;

/// Creates `path`, or truncates the file there, for writing: never through a link.
pub fn create_file(path: &Path) -> std::io::Result<File> {
    let mut o = OpenOptions::new();
    o.write(true).create(true).truncate(true);
    open(path, o)
}

/// Opens `path` for reading and appending, creating it: never through a link.
pub fn append_file(path: &Path) -> std::io::Result<File> {
    let mut o = OpenOptions::new();
    o.read(true).append(true).create(true);
    open(path, o)
}

/// Writes `bytes` as the whole of `path` by way of `path` + `suffix`, created anew (a link
/// or a leftover there is removed first, never followed) and renamed over `path`: a kill
/// midway leaves the old file as it was.
pub fn replace_file(path: &Path, suffix: &str, bytes: &[u8]) -> std::io::Result<()> {
    let mut temp = path.as_os_str().to_owned();
    temp.push(suffix);
    let temp = Path::new(&temp);
    match std::fs::remove_file(temp) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    let mut o = OpenOptions::new();
    o.write(true).create_new(true);
    let written = open(temp, o).and_then(|mut f| f.write_all(bytes));
    written.and_then(|()| std::fs::rename(temp, path)).inspect_err(|_| {
        let _ = std::fs::remove_file(temp);
    })
}

#[cfg(unix)]
fn open(path: &Path, mut o: OpenOptions) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    o.custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC);
    match o.open(path) {
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => open_device_link(path),
        opened => opened,
    }
}

/// A link to a device or a pipe (`--trace /dev/stdout`) is followed: opened with neither
/// create nor truncate, and given up unwritten when it turns out to be a regular file.
#[cfg(unix)]
fn open_device_link(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = OpenOptions::new().append(true).custom_flags(libc::O_CLOEXEC).open(path).map_err(|_| refused(path))?;
    if file.metadata()?.is_file() { Err(refused(path)) } else { Ok(file) }
}

#[cfg(not(unix))]
fn open(path: &Path, o: OpenOptions) -> std::io::Result<File> {
    if std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink()) {
        return Err(refused(path));
    }
    o.open(path)
}

fn refused(path: &Path) -> std::io::Error {
    std::io::Error::other(format!(
        "{} is a symbolic link: the harness writes no file through a link; remove it, or name another file",
        path.display()
    ))
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    fn planted() -> (tempfile::TempDir, std::path::PathBuf, std::path::PathBuf) {
        let dir = tempfile::tempdir().expect("test setup");
        let target = dir.path().join("precious");
        std::fs::write(&target, "precious\n").expect("test setup");
        let link = dir.path().join("out.jsonl");
        std::os::unix::fs::symlink(&target, &link).expect("test setup");
        (dir, target, link)
    }

    #[test]
    fn a_planted_link_is_refused_by_name_and_its_target_kept() {
        let (_dir, target, link) = planted();
        for e in [create_file(&link).expect_err("refused"), append_file(&link).expect_err("refused")] {
            assert!(e.to_string().contains("out.jsonl is a symbolic link"), "{e}");
        }
        assert_eq!(std::fs::read_to_string(&target).expect("test setup"), "precious\n");
        // A link to a device is no file to overwrite: `--trace /dev/stdout` still works.
        let null = target.with_file_name("null");
        std::os::unix::fs::symlink("/dev/null", &null).expect("test setup");
        create_file(&null).expect("test setup").write_all(b"x").expect("test setup");
    }

    #[test]
    fn a_whole_file_replaces_a_link_at_its_temporary_name_and_never_follows_it() {
        let (dir, target, link) = planted();
        let out = dir.path().join("out");
        replace_file(&out, ".jsonl", b"new\n").expect("written");
        assert_eq!(std::fs::read_to_string(&out).expect("test setup"), "new\n");
        assert_eq!(std::fs::read_to_string(&target).expect("test setup"), "precious\n");
        assert!(!link.exists());
        // A link at the final name is replaced by the file, not written through.
        std::os::unix::fs::symlink(&target, &link).expect("test setup");
        replace_file(&link, ".partial", b"newer\n").expect("test setup");
        assert_eq!(std::fs::read_to_string(&link).expect("test setup"), "newer\n");
        assert!(!std::fs::symlink_metadata(&link).expect("test setup").file_type().is_symlink());
        assert_eq!(std::fs::read_to_string(&target).expect("test setup"), "precious\n");
    }
}
