//! The Windows meaning of "someone other than the operator could change it": the owner is not
//! the current user, the Administrators group, SYSTEM or TrustedInstaller; or the DACL lets
//! Everyone, Users or Authenticated Users write it (a file's data, a directory's list of files)
//! or change its permissions or owner. Read with `GetNamedSecurityInfoW`, each allowing entry
//! in turn; entries that only pass on to children are skipped (the children carry them).

use std::os::windows::ffi::OsStrExt;
use std::path::Path;

use windows_sys::Win32::Foundation::{CloseHandle, GENERIC_ALL, GENERIC_WRITE, HANDLE, LocalFree};
use windows_sys::Win32::Security::Authorization::{ConvertSidToStringSidW, GetNamedSecurityInfoW, SE_FILE_OBJECT};
use windows_sys::Win32::Security::{
    ACCESS_ALLOWED_ACE, ACE_HEADER, ACL, DACL_SECURITY_INFORMATION, EqualSid, GetAce, GetTokenInformation,
    INHERIT_ONLY_ACE, IsWellKnownSid, OWNER_SECURITY_INFORMATION, PSECURITY_DESCRIPTOR, PSID, TOKEN_QUERY, TOKEN_USER,
    TokenUser, WELL_KNOWN_SID_TYPE, WinAuthenticatedUserSid, WinBuiltinAdministratorsSid, WinBuiltinUsersSid,
    WinLocalSystemSid, WinWorldSid,
};
use windows_sys::Win32::Storage::FileSystem::{
    DELETE, FILE_ADD_FILE, FILE_APPEND_DATA, FILE_DELETE_CHILD, FILE_WRITE_DATA, WRITE_DAC, WRITE_OWNER,
};
use windows_sys::Win32::System::Threading::{GetCurrentProcess, OpenProcessToken};

/// `ACCESS_ALLOWED_ACE_TYPE`.
const ACCESS_ALLOWED: u8 = 0;
/// TrustedInstaller, which owns the system's own directories.
const TRUSTED_INSTALLER: &str = "S-1-5-80-956008885-3418522649-1831038044-1853292631-2271478464";
/// The groups that must not write: everyone, every local user, every signed-in user.
const BROAD_GROUPS: [(WELL_KNOWN_SID_TYPE, &str, &str); 3] = [
    (WinWorldSid, "Everyone", "*S-1-1-0"),
    (WinBuiltinUsersSid, "Users", "*S-1-5-32-545"),
    (WinAuthenticatedUserSid, "Authenticated Users", "*S-1-5-11"),
];

/// Rights that change a file, or what a directory holds (a file added, one deleted), or who
/// may. Adding a subdirectory is not among them: `C:\` lets every signed-in user do that,
/// and it changes nothing that is there (as the sticky bit of `/tmp` on Unix).
fn writes(mask: u32, is_dir: bool) -> bool {
    let data = if is_dir { FILE_ADD_FILE | FILE_DELETE_CHILD } else { FILE_WRITE_DATA | FILE_APPEND_DATA };
    mask & (data | DELETE | WRITE_DAC | WRITE_OWNER | GENERIC_WRITE | GENERIC_ALL) != 0
}

/// Frees what the system allocated with `LocalAlloc` when dropped.
struct Local(*mut core::ffi::c_void);

impl Drop for Local {
    fn drop(&mut self) {
        if !self.0.is_null() {
            // SAFETY: the pointer came from the system, allocated for the caller to free once.
            unsafe { LocalFree(self.0) };
        }
    }
}

/// Why `p` (its metadata says whether it `is_dir`) could be changed by someone other than the
/// operator, if it could: one line with the fix.
pub(crate) fn judge(p: &Path, is_dir: bool) -> Result<(), String> {
    let wide: Vec<u16> = p.as_os_str().encode_wide().chain(Some(0)).collect();
    let (mut owner, mut dacl, mut sd): (PSID, *mut ACL, PSECURITY_DESCRIPTOR) =
        (std::ptr::null_mut(), std::ptr::null_mut(), std::ptr::null_mut());
    // SAFETY: a NUL-terminated path; the out-pointers are locals; `sd` owns what they point to.
    let rc = unsafe {
        GetNamedSecurityInfoW(
            wide.as_ptr(),
            SE_FILE_OBJECT,
            OWNER_SECURITY_INFORMATION | DACL_SECURITY_INFORMATION,
            &mut owner,
            std::ptr::null_mut(),
            &mut dacl,
            std::ptr::null_mut(),
            &mut sd,
        )
    };
    let _sd = Local(sd);
    if rc != 0 {
        let e = std::io::Error::from_raw_os_error(rc as i32);
        return Err(format!("cannot read the owner and permissions of {}: {e}", p.display()));
    }
    judge_owner(p, owner)?;
    judge_dacl(p, dacl, is_dir)
}

fn judge_owner(p: &Path, owner: PSID) -> Result<(), String> {
    if owner.is_null() {
        return Err(format!("{} has no owner; take it: takeown /f \"{}\"", p.display(), p.display()));
    }
    // SAFETY: `owner` points into a live security descriptor.
    let admin_or_system = unsafe {
        IsWellKnownSid(owner, WinBuiltinAdministratorsSid) != 0 || IsWellKnownSid(owner, WinLocalSystemSid) != 0
    };
    if admin_or_system || is_current_user(owner) {
        return Ok(());
    }
    let sid = sid_string(owner);
    if sid == TRUSTED_INSTALLER {
        return Ok(());
    }
    Err(format!(
        "{} is owned by {sid}, neither you nor Administrators nor SYSTEM; take it: takeown /f \"{}\"",
        p.display(),
        p.display()
    ))
}

fn judge_dacl(p: &Path, dacl: *mut ACL, is_dir: bool) -> Result<(), String> {
    if dacl.is_null() {
        return Err(format!(
            "{} has no access list, so everyone may change it; give it one: icacls \"{}\" /reset",
            p.display(),
            p.display()
        ));
    }
    // SAFETY: a live ACL from the security descriptor.
    let count = unsafe { (*dacl).AceCount };
    for i in 0..u32::from(count) {
        let mut ace: *mut core::ffi::c_void = std::ptr::null_mut();
        // SAFETY: `i` is below the ACL's count; `ace` receives a pointer into the ACL.
        if unsafe { GetAce(dacl, i, &mut ace) } == 0 || ace.is_null() {
            continue;
        }
        // SAFETY: every ACE starts with its header.
        let header = unsafe { *(ace as *const ACE_HEADER) };
        if header.AceType != ACCESS_ALLOWED || u32::from(header.AceFlags) & INHERIT_ONLY_ACE != 0 {
            continue;
        }
        let allowed = ace as *const ACCESS_ALLOWED_ACE;
        // SAFETY: an ACCESS_ALLOWED ACE: its mask, then its SID from `SidStart` on.
        let (mask, sid) = unsafe { ((*allowed).Mask, std::ptr::addr_of!((*allowed).SidStart) as PSID) };
        if !writes(mask, is_dir) {
            continue;
        }
        for (kind, name, sid_arg) in BROAD_GROUPS {
            // SAFETY: `sid` points into the live ACE.
            if unsafe { IsWellKnownSid(sid, kind) } != 0 {
                return Err(format!(
                    "{} is writable by {name}, who could change what the harness runs; run icacls \"{}\" /inheritance:d /remove:g {sid_arg}",
                    p.display(),
                    p.display()
                ));
            }
        }
    }
    Ok(())
}

/// Whether `sid` is the user this process runs as.
fn is_current_user(sid: PSID) -> bool {
    let mut token: HANDLE = std::ptr::null_mut();
    // SAFETY: this process's own token, opened to read; closed below.
    if unsafe { OpenProcessToken(GetCurrentProcess(), TOKEN_QUERY, &mut token) } == 0 {
        return false;
    }
    // TOKEN_USER and the SID after it; 256 bytes hold any SID (68 bytes at most) and more.
    let mut buffer = [0u64; 32];
    let mut len = 0u32;
    let size = std::mem::size_of_val(&buffer) as u32;
    // SAFETY: the buffer is writable for `size` bytes and aligned for TOKEN_USER.
    let ok = unsafe { GetTokenInformation(token, TokenUser, buffer.as_mut_ptr().cast(), size, &mut len) } != 0;
    // SAFETY: the token handle is ours, closed once.
    unsafe { CloseHandle(token) };
    // SAFETY: on success the buffer starts with a TOKEN_USER whose SID lies in the buffer.
    ok && unsafe { EqualSid((*(buffer.as_ptr() as *const TOKEN_USER)).User.Sid, sid) != 0 }
}

/// A SID as people read it: `S-1-5-21-...`.
fn sid_string(sid: PSID) -> String {
    let mut text: *mut u16 = std::ptr::null_mut();
    // SAFETY: a valid SID; the system allocates the string, freed by `Local`.
    if unsafe { ConvertSidToStringSidW(sid, &mut text) } == 0 || text.is_null() {
        return "an unknown account".to_owned();
    }
    let _text = Local(text.cast());
    // SAFETY: a NUL-terminated string the system wrote.
    let len = (0..).take_while(|&i| unsafe { *text.add(i) } != 0).count();
    // SAFETY: `len` characters before the NUL.
    String::from_utf16_lossy(unsafe { std::slice::from_raw_parts(text, len) })
}
