//! The Windows side of running a plugin-host child: started without a console in a process
//! group of its own, its stdout kept for frames, and a crash ended with its exception code
//! rather than a crash dialog.
//!
//! What the child may do (the Job Object its process tree is held in) is `harness-sandbox`'s.

use std::fs::File;
use std::io;
use std::os::windows::io::{AsHandle, OwnedHandle};
use std::os::windows::process::CommandExt;
use std::process::Command;

use windows_sys::Win32::System::Console::{GetStdHandle, STD_ERROR_HANDLE, STD_OUTPUT_HANDLE, SetStdHandle};
use windows_sys::Win32::System::Diagnostics::Debug::{
    EXCEPTION_POINTERS, SEM_FAILCRITICALERRORS, SEM_NOGPFAULTERRORBOX, SEM_NOOPENFILEERRORBOX, SetErrorMode,
    SetUnhandledExceptionFilter,
};
use windows_sys::Win32::System::Threading::{
    CREATE_NEW_PROCESS_GROUP, CREATE_NO_WINDOW, GetCurrentProcess, TerminateProcess,
};

/// Starts the child in a process group of its own (the operator's Ctrl+C does not reach it)
/// and without a console (it cannot write to or read from the operator's).
pub(crate) fn detach(cmd: &mut Command) {
    cmd.creation_flags(CREATE_NEW_PROCESS_GROUP | CREATE_NO_WINDOW);
}

/// In the child: takes stdout for frames and makes the standard output handle the stderr
/// one, so that whatever a plugin prints can never corrupt a frame. Rust's std (the plugin's
/// own too) looks the handle up on every write.
pub(crate) fn take_stdout() -> io::Result<File> {
    let frames: OwnedHandle = io::stdout().as_handle().try_clone_to_owned()?;
    // SAFETY: GetStdHandle and SetStdHandle on this process's own standard handles.
    unsafe {
        let err = GetStdHandle(STD_ERROR_HANDLE);
        if SetStdHandle(STD_OUTPUT_HANDLE, err) == 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(File::from(frames))
}

/// In the child: a fault no one handles ends the process at once with its exception code as
/// its exit status (which the harness reads and names), instead of a crash dialog or a
/// debugger that would hold the child until its deadline.
pub(crate) fn exit_on_fault() {
    // SAFETY: process-wide settings with no pointers but a function that lives as long.
    unsafe {
        SetErrorMode(SEM_FAILCRITICALERRORS | SEM_NOGPFAULTERRORBOX | SEM_NOOPENFILEERRORBOX);
        SetUnhandledExceptionFilter(Some(end_with_exception));
    }
}

unsafe extern "system" fn end_with_exception(info: *const EXCEPTION_POINTERS) -> i32 {
    // SAFETY: the system passes a valid record, or null, which is checked.
    let code = unsafe { info.as_ref().and_then(|i| i.ExceptionRecord.as_ref()).map_or(1, |r| r.ExceptionCode) };
    // SAFETY: ends this process; nothing is written, nothing else runs.
    unsafe { TerminateProcess(GetCurrentProcess(), code as u32) };
    // EXCEPTION_CONTINUE_SEARCH, never reached.
    0
}
