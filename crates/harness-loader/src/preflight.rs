//! Checks a library file's headers before the OS loader sees it.
//!
//! glibc's `dlopen` maps every loadable segment the program headers describe, even past the
//! end of a truncated file, and then touches them: the process dies of SIGBUS inside the
//! loader, where no Rust code can catch it. Reading the ELF program headers first (a few
//! hundred bytes, read lazily) turns that into an ordinary refusal.

use std::fs::File;

use object::elf::{FileHeader32, FileHeader64, PT_LOAD};
use object::read::ReadCache;
use object::read::elf::{FileHeader, ProgramHeader};
use object::{Endianness, FileKind};

/// Why a file failed the header check, in one line.
/// `file` is the library already opened (the one the loader is given next).
pub(crate) fn check(file: &File) -> Result<(), String> {
    let len = file.metadata().map_err(|e| format!("cannot be read: {e}"))?.len();
    let data = ReadCache::new(file);
    match FileKind::parse(&data) {
        Ok(FileKind::Elf64) => check_elf::<FileHeader64<Endianness>>(&data, len),
        Ok(FileKind::Elf32) => check_elf::<FileHeader32<Endianness>>(&data, len),
        // Other formats go straight to the OS loader, which reports them itself.
        Ok(_) | Err(_) => Ok(()),
    }
}

fn check_elf<H: FileHeader<Endian = Endianness>>(data: &ReadCache<&File>, len: u64) -> Result<(), String> {
    let header = H::parse(data).map_err(|e| format!("corrupt ELF header: {e}"))?;
    let endian = header.endian().map_err(|e| format!("corrupt ELF header: {e}"))?;
    let segments = header.program_headers(endian, data).map_err(|e| format!("corrupt or truncated ELF file: {e}"))?;
    for segment in segments {
        if segment.p_type(endian) != PT_LOAD {
            continue;
        }
        let (offset, size) = segment.file_range(endian);
        if offset.checked_add(size).is_none_or(|end| end > len) {
            return Err(format!(
                "truncated or corrupt ELF file: a segment ends at byte {} but the file has {len} bytes",
                offset.saturating_add(size)
            ));
        }
    }
    Ok(())
}
