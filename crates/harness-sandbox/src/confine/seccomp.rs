//! The seccomp filter of a confined plugin child: an allowlist per effect class.
//!
//! Every child may make the system calls of [`BASE`]: what the plugin host itself needs (call
//! frames on stdin and stdout, stderr), Rust's std runtime, the allocator, threads, and the
//! dynamic loader opening the plugin library after the filter is in place; the shipped plugins
//! (`calc`, `chem`, `files`, `fault`) need nothing more, measured with `strace -f` on their
//! children. A class widens it by exactly what it declares: [`WRITES`] (creating, changing and
//! removing files, where Landlock allows), [`NETWORK`] (IP sockets), [`EXEC`] (running the
//! programs of `allow_exec`). Anything else fails with `EPERM`, except `clone3`, which fails
//! with `ENOSYS`: its flags sit in memory a filter cannot read, and `ENOSYS` is what makes
//! glibc fall back to `clone`, whose flags it can. A call of another architecture kills the
//! process (the check `seccompiler` puts first), and an x32 call (`nr | 0x4000_0000`) fails
//! with `EPERM` before any entry is looked at.

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter, SeccompRule,
    TargetArch, sock_filter,
};

/// When a listed system call is allowed.
#[derive(Debug, Clone, Copy)]
pub(super) enum When {
    /// Whatever its arguments.
    Always,
    /// Argument `.0` (its low 32 bits, as the kernel reads a command) is one of `.1`.
    ArgIn(u8, &'static [u64]),
    /// Argument `.0` has none of the bits of `.1` set.
    BitsClear(u8, u64),
    /// Argument `.0` is the child's own process id.
    OwnPid(u8),
    /// Argument `.0` is the child's own process id, or its negation: its own process group
    /// (the child leads a session, so the group is itself and what it forked).
    OwnPidOrGroup(u8),
    /// Each argument listed is 0: a null pointer, or pid 0 (the caller).
    Zero(&'static [u8]),
}

use When::{Always, ArgIn, BitsClear, OwnPid, OwnPidOrGroup, Zero};

/// A class's entries: system call number, and when it is allowed.
type Table = &'static [(i64, When)];

/// The namespace flags of `clone` (`CLONE_NEWTIME` is the exit signal's byte there).
const CLONE_NAMESPACES: u64 = (libc::CLONE_NEWNS
    | libc::CLONE_NEWCGROUP
    | libc::CLONE_NEWUTS
    | libc::CLONE_NEWIPC
    | libc::CLONE_NEWUSER
    | libc::CLONE_NEWPID
    | libc::CLONE_NEWNET) as u64;
/// The namespace flags of `unshare`.
const UNSHARE_NAMESPACES: u64 = CLONE_NAMESPACES | libc::CLONE_NEWTIME as u64;

/// `ioctl` requests that only read or set the state of the descriptor itself: non-blocking
/// mode, close-on-exec, bytes waiting, and whether it is a terminal (`isatty`) and its size.
/// Never `TIOCSTI` (typing into the terminal), `TIOCLINUX`, `TIOCSETD` and the like.
// The request type is c_ulong in glibc's ioctl and c_int in musl's: the casts are for musl.
#[allow(clippy::unnecessary_cast)]
pub(super) const IOCTLS: &[u64] = &[
    libc::FIONBIO as u64,
    libc::FIOCLEX as u64,
    libc::FIONCLEX as u64,
    libc::FIONREAD as u64,
    libc::TCGETS as u64,
    libc::TIOCGWINSZ as u64,
];

/// `fcntl` commands on the descriptor itself and advisory locks; not `F_SETOWN`/`F_SETSIG`
/// (which aim signals at another process) nor leases and notifications.
const FCNTLS: &[u64] = &[
    libc::F_DUPFD as u64,
    libc::F_DUPFD_CLOEXEC as u64,
    libc::F_GETFD as u64,
    libc::F_SETFD as u64,
    libc::F_GETFL as u64,
    libc::F_SETFL as u64,
    libc::F_GETLK as u64,
    libc::F_SETLK as u64,
    libc::F_SETLKW as u64,
    libc::F_OFD_GETLK as u64,
    libc::F_OFD_SETLK as u64,
    libc::F_OFD_SETLKW as u64,
    libc::F_GETPIPE_SZ as u64,
];

/// `prctl` operations: a thread's name (std names its threads), a mapping's name (glibc's
/// allocator), and reading the seccomp and no-new-privileges state.
const PRCTLS: &[u64] = &[
    libc::PR_SET_NAME as u64,
    libc::PR_GET_NAME as u64,
    libc::PR_SET_VMA as u64,
    libc::PR_GET_SECCOMP as u64,
    libc::PR_GET_NO_NEW_PRIVS as u64,
];

/// Every class: computing, the plugin host's frames, threads, and loading a library.
/// Opening a file is here: Landlock decides which, and for what.
pub(super) const BASE: Table = &[
    // Memory: the allocator, the dynamic loader (mmap/mprotect with PROT_EXEC), thread stacks.
    (libc::SYS_brk, Always),
    (libc::SYS_mmap, Always),
    (libc::SYS_munmap, Always),
    (libc::SYS_mremap, Always),
    (libc::SYS_mprotect, Always),
    (libc::SYS_madvise, Always),
    // Descriptors it holds: frames on stdin/stdout, stderr, the files Landlock let it open.
    (libc::SYS_read, Always),
    (libc::SYS_readv, Always),
    (libc::SYS_pread64, Always),
    (libc::SYS_preadv, Always),
    (libc::SYS_preadv2, Always),
    (libc::SYS_write, Always),
    (libc::SYS_writev, Always),
    (libc::SYS_pwrite64, Always),
    (libc::SYS_pwritev, Always),
    (libc::SYS_pwritev2, Always),
    (libc::SYS_lseek, Always),
    (libc::SYS_close, Always),
    (libc::SYS_close_range, Always),
    (libc::SYS_dup, Always),
    (libc::SYS_dup3, Always),
    (libc::SYS_fcntl, ArgIn(1, FCNTLS)),
    (libc::SYS_ioctl, ArgIn(1, IOCTLS)),
    (libc::SYS_pipe2, Always),
    (libc::SYS_eventfd2, Always),
    (libc::SYS_ppoll, Always),
    (libc::SYS_pselect6, Always),
    (libc::SYS_epoll_create1, Always),
    (libc::SYS_epoll_ctl, Always),
    (libc::SYS_epoll_pwait, Always),
    (libc::SYS_epoll_pwait2, Always),
    // Opening and looking at files: Landlock decides where (openat2 is cap-std's, in `files`).
    (libc::SYS_openat, Always),
    (libc::SYS_openat2, Always),
    (libc::SYS_newfstatat, Always),
    (libc::SYS_fstat, Always),
    (libc::SYS_statx, Always),
    (libc::SYS_statfs, Always),
    (libc::SYS_fstatfs, Always),
    (libc::SYS_getdents64, Always),
    (libc::SYS_getcwd, Always),
    (libc::SYS_readlinkat, Always),
    (libc::SYS_faccessat, Always),
    (libc::SYS_faccessat2, Always),
    // Threads (glibc's pthread_create, after clone3's ENOSYS) and forks, never into new
    // namespaces; waiting for them.
    (libc::SYS_clone, BitsClear(0, CLONE_NAMESPACES)),
    (libc::SYS_unshare, BitsClear(0, UNSHARE_NAMESPACES)),
    (libc::SYS_futex, Always),
    (libc::SYS_set_robust_list, Always),
    (libc::SYS_set_tid_address, Always),
    (libc::SYS_rseq, Always),
    (libc::SYS_sched_yield, Always),
    (libc::SYS_sched_getaffinity, Always),
    (libc::SYS_wait4, Always),
    (libc::SYS_waitid, Always),
    (libc::SYS_exit, Always),
    (libc::SYS_exit_group, Always),
    (libc::SYS_restart_syscall, Always),
    // Who it is (the `getsid` a session check reads).
    (libc::SYS_getpid, Always),
    (libc::SYS_gettid, Always),
    (libc::SYS_getppid, Always),
    (libc::SYS_getsid, Always),
    (libc::SYS_getuid, Always),
    (libc::SYS_geteuid, Always),
    (libc::SYS_getgid, Always),
    (libc::SYS_getegid, Always),
    (libc::SYS_getresuid, Always),
    (libc::SYS_getresgid, Always),
    (libc::SYS_getgroups, Always),
    // Signals: handlers and masks; sending only to itself (abort's tgkill, a panic's raise):
    // no tkill, rt_sigqueueinfo or pidfd_send_signal, which could reach another process.
    (libc::SYS_rt_sigaction, Always),
    (libc::SYS_rt_sigprocmask, Always),
    (libc::SYS_rt_sigreturn, Always),
    (libc::SYS_sigaltstack, Always),
    // Its own group too: the child ends what its tools forked when the harness is gone.
    (libc::SYS_kill, OwnPidOrGroup(0)),
    (libc::SYS_tgkill, OwnPid(0)),
    // Time, sleeping and randomness (HashMap's seeds).
    (libc::SYS_clock_gettime, Always),
    (libc::SYS_clock_getres, Always),
    (libc::SYS_gettimeofday, Always),
    (libc::SYS_nanosleep, Always),
    (libc::SYS_clock_nanosleep, Always),
    (libc::SYS_getrandom, Always),
    // The system: its name, its own limits (read only: pid 0, no new limit).
    (libc::SYS_uname, Always),
    (libc::SYS_prctl, ArgIn(0, PRCTLS)),
    (libc::SYS_prlimit64, Zero(&[0, 2])),
];

/// The x86_64 system calls that newer architectures dropped for their `*at` forms.
#[cfg(target_arch = "x86_64")]
const BASE_LEGACY: Table = &[
    (libc::SYS_open, Always),
    (libc::SYS_stat, Always),
    (libc::SYS_lstat, Always),
    (libc::SYS_access, Always),
    (libc::SYS_readlink, Always),
    (libc::SYS_dup2, Always),
    (libc::SYS_pipe, Always),
    (libc::SYS_poll, Always),
    (libc::SYS_select, Always),
    (libc::SYS_epoll_wait, Always),
    (libc::SYS_getrlimit, Always),
    (libc::SYS_time, Always),
];
#[cfg(not(target_arch = "x86_64"))]
const BASE_LEGACY: Table = &[];

/// `writes`: creating, changing and removing files where Landlock lets it write. Metadata
/// only through a descriptor it opened (`fchmod`, `futimens`: `utimensat` with no path),
/// since Landlock does not check `chmod`, `chown`, `utimes` or xattrs on a path: they would
/// reach every file the user owns. Path `truncate` is [`TRUNCATE_BY_PATH`].
pub(super) const WRITES: Table = &[
    (libc::SYS_ftruncate, Always),
    (libc::SYS_fallocate, Always),
    (libc::SYS_fsync, Always),
    (libc::SYS_fdatasync, Always),
    (libc::SYS_flock, Always),
    (libc::SYS_fchmod, Always),
    (libc::SYS_utimensat, Zero(&[1])),
    (libc::SYS_mkdirat, Always),
    (libc::SYS_unlinkat, Always),
    (libc::SYS_renameat, Always),
    (libc::SYS_renameat2, Always),
    (libc::SYS_linkat, Always),
    (libc::SYS_symlinkat, Always),
    // std::fs::copy.
    (libc::SYS_copy_file_range, Always),
    (libc::SYS_sendfile, Always),
];

/// The x86_64 path forms of [`WRITES`].
#[cfg(target_arch = "x86_64")]
const WRITES_LEGACY: Table = &[
    (libc::SYS_mkdir, Always),
    (libc::SYS_rmdir, Always),
    (libc::SYS_unlink, Always),
    (libc::SYS_rename, Always),
    (libc::SYS_link, Always),
    (libc::SYS_symlink, Always),
];
#[cfg(not(target_arch = "x86_64"))]
const WRITES_LEGACY: Table = &[];

/// `writes`, on a kernel whose Landlock checks truncation (ABI 3): `truncate` on a path.
/// Before that, only `ftruncate`, on a file Landlock let it open for writing.
pub(super) const TRUNCATE_BY_PATH: Table = &[(libc::SYS_truncate, Always)];

/// `network`: TCP and UDP over IPv4 and IPv6, as a client (Landlock limits the TCP ports).
/// No Unix sockets (a pathname socket such as Docker's is not a file Landlock checks before
/// ABI 9; an abstract one is not scoped before ABI 6), no raw or netlink sockets, and no
/// `bind`, `listen` or `accept`: it serves nothing.
pub(super) const NETWORK: Table = &[
    (libc::SYS_socket, ArgIn(0, &[libc::AF_INET as u64, libc::AF_INET6 as u64])),
    (libc::SYS_connect, Always),
    (libc::SYS_getsockname, Always),
    (libc::SYS_getpeername, Always),
    (libc::SYS_setsockopt, Always),
    (libc::SYS_getsockopt, Always),
    (libc::SYS_sendto, Always),
    (libc::SYS_recvfrom, Always),
    (libc::SYS_sendmsg, Always),
    (libc::SYS_recvmsg, Always),
    (libc::SYS_sendmmsg, Always),
    (libc::SYS_recvmmsg, Always),
    (libc::SYS_shutdown, Always),
];

/// `allow_exec`: running the programs Landlock lets it execute. The program starts under the
/// same filter: its dynamic loader sets up its thread pointer.
pub(super) const EXEC: Table = &[
    (libc::SYS_execve, Always),
    (libc::SYS_execveat, Always),
    #[cfg(target_arch = "x86_64")]
    (libc::SYS_arch_prctl, Always),
];

/// What one child may do beyond [`BASE`]: the classes it serves, and what Landlock checks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Profile {
    /// It writes files ([`WRITES`]).
    pub(crate) writes: bool,
    /// It opens IP sockets ([`NETWORK`]).
    pub(crate) network: bool,
    /// It runs programs ([`EXEC`]).
    pub(crate) exec: bool,
    /// Landlock checks truncation (ABI 3): path `truncate` is allowed to `writes`.
    pub(crate) landlock_truncates: bool,
}

impl Profile {
    /// The tables that make up this profile's allowlist.
    pub(super) fn tables(self) -> Vec<Table> {
        let mut tables = vec![BASE, BASE_LEGACY];
        if self.writes {
            tables.extend([WRITES, WRITES_LEGACY]);
            if self.landlock_truncates {
                tables.push(TRUNCATE_BY_PATH);
            }
        }
        if self.network {
            tables.push(NETWORK);
        }
        if self.exec {
            tables.push(EXEC);
        }
        tables
    }
}

fn condition(arg: u8, len: SeccompCmpArgLen, op: SeccompCmpOp, value: u64) -> Result<SeccompCondition, String> {
    SeccompCondition::new(arg, len, op, value).map_err(|e| format!("seccomp: {e}"))
}

fn rule(conditions: Vec<SeccompCondition>) -> Result<SeccompRule, String> {
    SeccompRule::new(conditions).map_err(|e| format!("seccomp: {e}"))
}

/// The rules of one entry: none for `Always` (the number alone matches), else any one of them.
fn rules_of(when: When, own_pid: u32) -> Result<Vec<SeccompRule>, String> {
    use SeccompCmpArgLen::{Dword, Qword};
    match when {
        Always => Ok(Vec::new()),
        ArgIn(arg, values) => values.iter().map(|v| rule(vec![condition(arg, Dword, SeccompCmpOp::Eq, *v)?])).collect(),
        BitsClear(arg, bits) => Ok(vec![rule(vec![condition(arg, Qword, SeccompCmpOp::MaskedEq(bits), 0)?])?]),
        OwnPid(arg) => Ok(vec![rule(vec![condition(arg, Dword, SeccompCmpOp::Eq, own_pid.into())?])?]),
        OwnPidOrGroup(arg) => {
            let group = own_pid.wrapping_neg();
            Ok(vec![
                rule(vec![condition(arg, Dword, SeccompCmpOp::Eq, own_pid.into())?])?,
                rule(vec![condition(arg, Dword, SeccompCmpOp::Eq, group.into())?])?,
            ])
        }
        Zero(args) => {
            let conditions =
                args.iter().map(|a| condition(*a, Qword, SeccompCmpOp::Eq, 0)).collect::<Result<_, _>>()?;
            Ok(vec![rule(conditions)?])
        }
    }
}

/// The allowlist of `profile` as `seccompiler` rules; `own_pid` is the child's.
fn rules(profile: Profile, own_pid: u32) -> Result<BTreeMap<i64, Vec<SeccompRule>>, String> {
    let mut rules = BTreeMap::new();
    for (nr, when) in profile.tables().into_iter().flatten() {
        if rules.insert(*nr, rules_of(*when, own_pid)?).is_some() {
            return Err(format!("seccomp: system call {nr} is listed twice"));
        }
    }
    Ok(rules)
}

fn stmt(code: u16, k: u32) -> sock_filter {
    sock_filter { code, jt: 0, jf: 0, k }
}

fn jump(code: u16, k: u32, jt: u8, jf: u8) -> sock_filter {
    sock_filter { code, jt, jf, k }
}

/// What follows the architecture check: `clone3` gets `ENOSYS`, an x32 call `EPERM`.
fn before_the_allowlist() -> Vec<sock_filter> {
    // BPF opcodes (linux/bpf_common.h): load a word of seccomp_data, jump if equal / at least,
    // return; the system call number is the first word.
    const LOAD_NR: u16 = 0x20;
    const JEQ: u16 = 0x05 | 0x10;
    const JGE: u16 = 0x05 | 0x30;
    const RET: u16 = 0x06;
    let errno = |e: i32| libc::SECCOMP_RET_ERRNO | u32::try_from(e).unwrap_or(1);
    let clone3 = u32::try_from(libc::SYS_clone3).unwrap_or(u32::MAX);
    let mut program = vec![stmt(LOAD_NR, 0), jump(JEQ, clone3, 0, 1), stmt(RET, errno(libc::ENOSYS))];
    if cfg!(target_arch = "x86_64") {
        const X32_SYSCALL_BIT: u32 = 0x4000_0000;
        program.extend([jump(JGE, X32_SYSCALL_BIT, 0, 1), stmt(RET, errno(libc::EPERM))]);
    }
    program
}

/// The whole filter of `profile` for the process `own_pid`: the architecture check, then
/// `clone3` and x32, then the allowlist, `EPERM` for anything not on it.
pub(super) fn program(profile: Profile, own_pid: u32, arch: TargetArch) -> Result<BpfProgram, String> {
    let eperm = u32::try_from(libc::EPERM).unwrap_or(1);
    let filter = SeccompFilter::new(rules(profile, own_pid)?, SeccompAction::Errno(eperm), SeccompAction::Allow, arch)
        .map_err(|e| format!("seccomp: {e}"))?;
    let mut program: BpfProgram = filter.try_into().map_err(|e| format!("seccomp: {e:?}"))?;
    // seccompiler starts with three instructions: load the architecture, compare, kill on a
    // mismatch. Ours go right after them; every jump in the rest is relative to its own place.
    const ARCH_CHECK: usize = 3;
    let checks_arch = program.len() > ARCH_CHECK
        && program[0] == stmt(0x20, 4)
        && program[2] == stmt(0x06, libc::SECCOMP_RET_KILL_PROCESS);
    if !checks_arch {
        return Err("seccomp: the filter does not start with its architecture check".to_owned());
    }
    program.splice(ARCH_CHECK..ARCH_CHECK, before_the_allowlist());
    Ok(program)
}

/// Installs the filter of `profile` on the calling process, for good (no_new_privs is set).
pub(super) fn install(profile: Profile, arch: TargetArch) -> Result<(), String> {
    let program = program(profile, std::process::id(), arch)?;
    seccompiler::apply_filter(&program).map_err(|e| format!("seccomp: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn arch() -> TargetArch {
        TargetArch::try_from(std::env::consts::ARCH).unwrap()
    }

    /// Runs `call` in a forked child under the filter of `profile`; its errno, 0 when it
    /// succeeded. The child does nothing between fork and exit but system calls.
    fn errno_under(profile: Profile, call: impl Fn() -> i64) -> i32 {
        // The filter is built before the fork, with the pid the child will have patched in.
        // SAFETY: fork in a test; the child installs the filter, makes one call and _exits.
        unsafe {
            let pid = libc::fork();
            assert!(pid >= 0, "fork: {}", std::io::Error::last_os_error());
            if pid == 0 {
                let program = program(profile, libc::getpid() as u32, arch());
                let code = match program {
                    Ok(p) if seccompiler::apply_filter(&p).is_ok() => {
                        if call() < 0 {
                            *libc::__errno_location()
                        } else {
                            0
                        }
                    }
                    _ => 255,
                };
                libc::_exit(code);
            }
            let mut status = 0;
            libc::waitpid(pid, &mut status, 0);
            assert!(libc::WIFEXITED(status), "the child was killed: status {status:#x}");
            libc::WEXITSTATUS(status)
        }
    }

    /// A file holding `bytes` in a directory of its own, and its path for libc.
    fn file() -> (tempfile::TempDir, std::path::PathBuf, std::ffi::CString) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, b"bytes").unwrap();
        let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
        (dir, path, c)
    }

    const PURE: Profile = Profile { writes: false, network: false, exec: false, landlock_truncates: true };
    const WRITER: Profile = Profile { writes: true, ..PURE };

    #[test]
    fn tiocsti_and_other_terminal_requests_are_refused_and_isatty_is_not() {
        let byte = b'x';
        // SAFETY (each closure): ioctls on fd 2 with valid pointers.
        let tiocsti = || unsafe { libc::ioctl(2, libc::TIOCSTI, &byte) }.into();
        let tioclinux = || unsafe { libc::ioctl(2, libc::TIOCLINUX, &byte) }.into();
        let tcgets = || {
            let mut termios = std::mem::MaybeUninit::<libc::termios>::uninit();
            unsafe { libc::ioctl(2, libc::TCGETS, termios.as_mut_ptr()) }.into()
        };
        for profile in [PURE, WRITER] {
            assert_eq!(errno_under(profile, tiocsti), libc::EPERM);
            assert_eq!(errno_under(profile, tioclinux), libc::EPERM);
            // isatty's TCGETS reaches the kernel: it answers 0 or ENOTTY, never EPERM.
            assert_ne!(errno_under(profile, tcgets), libc::EPERM);
        }
    }

    #[test]
    fn metadata_changes_are_refused_to_pure_and_reads() {
        let (_dir, path, c_path) = file();
        let p = c_path.as_ptr();
        // SAFETY (each closure): plain calls on a valid path.
        type Call = Box<dyn Fn() -> i64>;
        let calls: [(&str, Call); 7] = [
            ("chmod", Box::new(move || unsafe { libc::chmod(p, 0o600) }.into())),
            ("fchmodat", Box::new(move || unsafe { libc::fchmodat(libc::AT_FDCWD, p, 0o600, 0) }.into())),
            ("chown", Box::new(move || unsafe { libc::chown(p, libc::getuid(), libc::getgid()) }.into())),
            ("setxattr", Box::new(move || unsafe { libc::setxattr(p, c"user.x".as_ptr(), p.cast(), 1, 0) }.into())),
            ("utimensat", Box::new(move || unsafe { libc::utimensat(libc::AT_FDCWD, p, std::ptr::null(), 0) }.into())),
            ("truncate", Box::new(move || unsafe { libc::truncate(p, 0) }.into())),
            ("unlink", Box::new(move || unsafe { libc::unlink(p) }.into())),
        ];
        for (name, call) in &calls {
            assert_eq!(errno_under(PURE, call), libc::EPERM, "{name}");
        }
        // A writes child has neither the path forms of metadata changes.
        assert_eq!(errno_under(WRITER, &calls[0].1), libc::EPERM, "chmod by a writes child");
        assert_eq!(std::fs::read(&path).unwrap(), b"bytes");
    }

    #[test]
    fn writes_allows_ftruncate_and_path_truncate_only_where_landlock_checks_it() {
        let (_dir, path, c_path) = file();
        let p = c_path.as_ptr();
        // SAFETY: open, ftruncate and close on a valid path.
        let ftruncate = move || unsafe {
            let fd = libc::open(p, libc::O_WRONLY);
            let rc = libc::ftruncate(fd, 1);
            libc::close(fd);
            rc.into()
        };
        let truncate = move || unsafe { libc::truncate(p, 2) }.into();
        assert_eq!(errno_under(PURE, ftruncate), libc::EPERM);
        assert_eq!(errno_under(WRITER, ftruncate), 0);
        assert_eq!(errno_under(WRITER, truncate), 0);
        let before_abi_3 = Profile { landlock_truncates: false, ..WRITER };
        assert_eq!(errno_under(before_abi_3, truncate), libc::EPERM);
        // ftruncate to 1 byte, then truncate (allowed) to 2: the refused one changed nothing.
        assert_eq!(std::fs::read(&path).unwrap(), b"b\0");
    }

    #[test]
    fn namespaces_clone3_x32_and_signals_to_others_are_refused() {
        // SAFETY (each closure): system calls that create nothing when refused; a clone that
        // succeeds makes a child that exits at once.
        let unshare = || unsafe { libc::unshare(libc::CLONE_NEWUSER) }.into();
        let clone_newuser = || unsafe {
            let pid = libc::syscall(libc::SYS_clone, (libc::CLONE_NEWUSER | libc::SIGCHLD) as u64, 0, 0, 0, 0);
            if pid == 0 {
                libc::_exit(0);
            }
            pid
        };
        let clone3 = || unsafe { libc::syscall(libc::SYS_clone3, 0usize, 0usize) };
        let setns = || unsafe { libc::setns(0, 0) }.into();
        let kill_parent = || unsafe { libc::kill(libc::getppid(), 0) }.into();
        let kill_self = || unsafe { libc::kill(libc::getpid(), 0) }.into();
        let socket = || unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0) }.into();
        assert_eq!(errno_under(PURE, unshare), libc::EPERM);
        assert_eq!(errno_under(PURE, clone_newuser), libc::EPERM);
        assert_eq!(errno_under(PURE, clone3), libc::ENOSYS);
        assert_eq!(errno_under(PURE, setns), libc::EPERM);
        assert_eq!(errno_under(PURE, kill_parent), libc::EPERM);
        assert_eq!(errno_under(PURE, kill_self), 0);
        // Its own group (the one it leads as a plugin host): allowed; another's: refused.
        let kill_own_group = || unsafe { libc::kill(-libc::getpid(), 0) }.into();
        let kill_parents_group = || unsafe { libc::kill(-libc::getppid(), 0) }.into();
        assert_ne!(errno_under(PURE, kill_own_group), libc::EPERM);
        assert_eq!(errno_under(PURE, kill_parents_group), libc::EPERM);
        assert_eq!(errno_under(PURE, socket), libc::EPERM);
        let network = Profile { network: true, ..PURE };
        assert_eq!(errno_under(network, socket), libc::EPERM, "a network child has IP sockets, not Unix ones");
        #[cfg(target_arch = "x86_64")]
        {
            let x32_getpid = || unsafe { libc::syscall(0x4000_0000 | libc::SYS_getpid) };
            assert_eq!(errno_under(PURE, x32_getpid), libc::EPERM);
        }
    }

    /// glibc starts a thread with clone3 first: ENOSYS makes it fall back to clone, which the
    /// filter reads. A filter installed without TSYNC holds the calling thread alone, so a
    /// thread of its own confines itself and starts another, as a plugin's would.
    #[test]
    fn threads_start_under_the_filter_of_every_class() {
        for profile in [PURE, WRITER, Profile { network: true, exec: true, ..PURE }] {
            let confined = std::thread::spawn(move || {
                seccompiler::apply_filter(&program(profile, std::process::id(), arch()).unwrap()).unwrap();
                let named = std::thread::Builder::new().name("inner".into());
                let inner = named.spawn(|| std::thread::current().name().map(str::to_owned)).unwrap();
                // SAFETY: a raw clone3 with no arguments fails before it does anything.
                let clone3 = unsafe { libc::syscall(libc::SYS_clone3, 0usize, 0usize) };
                (inner.join().unwrap(), clone3, std::io::Error::last_os_error().raw_os_error())
            });
            let (name, clone3, errno) = confined.join().unwrap();
            assert_eq!(name.as_deref(), Some("inner"), "{profile:?}");
            assert_eq!((clone3, errno), (-1, Some(libc::ENOSYS)), "{profile:?}");
        }
    }

    #[test]
    fn the_filter_checks_the_architecture_first_and_kills_on_another() {
        let program = program(PURE, 1, arch()).unwrap();
        // Load seccomp_data.arch, compare with this architecture's, kill the process if not.
        assert_eq!(program[0], stmt(0x20, 4));
        assert_eq!(program[1].code, 0x15);
        assert_eq!(program[2], stmt(0x06, libc::SECCOMP_RET_KILL_PROCESS));
    }

    #[test]
    fn no_system_call_is_listed_twice_in_any_profile() {
        for bits in 0..16u8 {
            let profile = Profile {
                writes: bits & 1 != 0,
                network: bits & 2 != 0,
                exec: bits & 4 != 0,
                landlock_truncates: bits & 8 != 0,
            };
            rules(profile, 1).unwrap();
        }
    }
}
