//! The Windows side of process isolation: each child in a Job Object, its stdout kept for
//! frames, and a crash ended with its exception code rather than a crash dialog.
//!
//! Windows has no Landlock or seccomp: a Job Object limits what the child's process tree may
//! be (one process unless the plugin may run programs, a memory ceiling, no UI access, killed
//! with the harness), never which files or hosts it reaches (see docs/operators.md).

use std::fs::File;
use std::io;
use std::os::windows::io::{AsHandle, AsRawHandle, OwnedHandle};
use std::os::windows::process::CommandExt;
use std::process::{Child, Command};

use windows_sys::Win32::Foundation::{CloseHandle, HANDLE};
use windows_sys::Win32::System::Console::{GetStdHandle, STD_ERROR_HANDLE, STD_OUTPUT_HANDLE, SetStdHandle};
use windows_sys::Win32::System::Diagnostics::Debug::{
    EXCEPTION_POINTERS, SEM_FAILCRITICALERRORS, SEM_NOGPFAULTERRORBOX, SEM_NOOPENFILEERRORBOX, SetErrorMode,
    SetUnhandledExceptionFilter,
};
use windows_sys::Win32::System::JobObjects::{
    AssignProcessToJobObject, CreateJobObjectW, JOB_OBJECT_LIMIT_ACTIVE_PROCESS,
    JOB_OBJECT_LIMIT_DIE_ON_UNHANDLED_EXCEPTION, JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE, JOB_OBJECT_LIMIT_PROCESS_MEMORY,
    JOB_OBJECT_UILIMIT_DESKTOP, JOB_OBJECT_UILIMIT_DISPLAYSETTINGS, JOB_OBJECT_UILIMIT_EXITWINDOWS,
    JOB_OBJECT_UILIMIT_GLOBALATOMS, JOB_OBJECT_UILIMIT_HANDLES, JOB_OBJECT_UILIMIT_READCLIPBOARD,
    JOB_OBJECT_UILIMIT_SYSTEMPARAMETERS, JOB_OBJECT_UILIMIT_WRITECLIPBOARD, JOBOBJECT_BASIC_UI_RESTRICTIONS,
    JOBOBJECT_EXTENDED_LIMIT_INFORMATION, JobObjectBasicUIRestrictions, JobObjectExtendedLimitInformation,
    SetInformationJobObject,
};
use windows_sys::Win32::System::Threading::{
    CREATE_NEW_PROCESS_GROUP, CREATE_NO_WINDOW, GetCurrentProcess, TerminateProcess,
};

/// The most memory one plugin-host process may commit. The project has no per-plugin memory
/// setting yet; this ceiling keeps a runaway tool from taking the machine.
pub const CHILD_MEMORY_LIMIT: usize = 4 << 30;

/// A Job Object holding one child; closing it (on drop) kills every process in it.
pub(crate) struct Job(HANDLE);

// SAFETY: a job handle may be used and closed from any thread.
unsafe impl Send for Job {}

impl Drop for Job {
    fn drop(&mut self) {
        // SAFETY: the handle is this value's own, closed once.
        unsafe { CloseHandle(self.0) };
    }
}

impl Job {
    /// Puts `child` in a new job: killed when the job closes, at most [`CHILD_MEMORY_LIMIT`]
    /// committed, one process unless `may_exec`, no access to the desktop, clipboard or
    /// other processes' windows. The child has read no frame yet, so no plugin code runs
    /// before it is in the job.
    pub(crate) fn hold(child: &Child, may_exec: bool) -> io::Result<Self> {
        // SAFETY: no security attributes and no name: an anonymous job only this process holds.
        let handle = unsafe { CreateJobObjectW(std::ptr::null(), std::ptr::null()) };
        if handle.is_null() {
            return Err(io::Error::last_os_error());
        }
        let job = Self(handle);
        job.limit(may_exec)?;
        // SAFETY: both handles are open and owned by this process.
        if unsafe { AssignProcessToJobObject(job.0, child.as_raw_handle()) } == 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(job)
    }

    fn limit(&self, may_exec: bool) -> io::Result<()> {
        // SAFETY: an all-zero JOBOBJECT_EXTENDED_LIMIT_INFORMATION is a valid "no limits".
        let mut limits: JOBOBJECT_EXTENDED_LIMIT_INFORMATION = unsafe { std::mem::zeroed() };
        let mut flags = JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE
            | JOB_OBJECT_LIMIT_PROCESS_MEMORY
            | JOB_OBJECT_LIMIT_DIE_ON_UNHANDLED_EXCEPTION;
        if !may_exec {
            flags |= JOB_OBJECT_LIMIT_ACTIVE_PROCESS;
            limits.BasicLimitInformation.ActiveProcessLimit = 1;
        }
        limits.BasicLimitInformation.LimitFlags = flags;
        limits.ProcessMemoryLimit = CHILD_MEMORY_LIMIT;
        self.set(JobObjectExtendedLimitInformation, &limits)?;
        let ui = JOBOBJECT_BASIC_UI_RESTRICTIONS {
            UIRestrictionsClass: JOB_OBJECT_UILIMIT_DESKTOP
                | JOB_OBJECT_UILIMIT_DISPLAYSETTINGS
                | JOB_OBJECT_UILIMIT_EXITWINDOWS
                | JOB_OBJECT_UILIMIT_GLOBALATOMS
                | JOB_OBJECT_UILIMIT_HANDLES
                | JOB_OBJECT_UILIMIT_READCLIPBOARD
                | JOB_OBJECT_UILIMIT_SYSTEMPARAMETERS
                | JOB_OBJECT_UILIMIT_WRITECLIPBOARD,
        };
        self.set(JobObjectBasicUIRestrictions, &ui)
    }

    fn set<T>(&self, class: i32, info: &T) -> io::Result<()> {
        let size = u32::try_from(std::mem::size_of::<T>()).unwrap_or(u32::MAX);
        // SAFETY: `info` points to a `T` of `size` bytes, the structure `class` names.
        let ok = unsafe { SetInformationJobObject(self.0, class, std::ptr::from_ref(info).cast(), size) };
        if ok == 0 { Err(io::Error::last_os_error()) } else { Ok(()) }
    }
}

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
