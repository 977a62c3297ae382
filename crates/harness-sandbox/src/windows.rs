//! The Windows side of a child's capabilities: a Job Object holding its process tree.
//!
//! Windows has no Landlock or seccomp: a Job Object limits what the child's process tree may
//! be (one process unless the plugin may run programs, a memory ceiling, no UI access, killed
//! with the harness), never which files or hosts it reaches (see docs/operators.md). How the
//! child is started and how it keeps its stdout and ends on a fault is the loader's
//! (`harness-loader`'s `isolation/windows.rs`).

use std::io;
use std::os::windows::io::AsRawHandle;
use std::process::Child;

use windows_sys::Win32::Foundation::{CloseHandle, HANDLE};
use windows_sys::Win32::System::JobObjects::{
    AssignProcessToJobObject, CreateJobObjectW, JOB_OBJECT_LIMIT_ACTIVE_PROCESS,
    JOB_OBJECT_LIMIT_DIE_ON_UNHANDLED_EXCEPTION, JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE, JOB_OBJECT_LIMIT_PROCESS_MEMORY,
    JOB_OBJECT_UILIMIT_DESKTOP, JOB_OBJECT_UILIMIT_DISPLAYSETTINGS, JOB_OBJECT_UILIMIT_EXITWINDOWS,
    JOB_OBJECT_UILIMIT_GLOBALATOMS, JOB_OBJECT_UILIMIT_HANDLES, JOB_OBJECT_UILIMIT_READCLIPBOARD,
    JOB_OBJECT_UILIMIT_SYSTEMPARAMETERS, JOB_OBJECT_UILIMIT_WRITECLIPBOARD, JOBOBJECT_BASIC_UI_RESTRICTIONS,
    JOBOBJECT_EXTENDED_LIMIT_INFORMATION, JobObjectBasicUIRestrictions, JobObjectExtendedLimitInformation,
    SetInformationJobObject,
};

/// The most memory one plugin-host process may commit. The project has no per-plugin memory
/// setting yet; this ceiling keeps a runaway tool from taking the machine.
pub const CHILD_MEMORY_LIMIT: usize = 4 << 30;

/// A Job Object holding one child; closing it (on drop) kills every process in it.
pub struct Job(HANDLE);

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
    pub fn hold(child: &Child, may_exec: bool) -> io::Result<Self> {
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
