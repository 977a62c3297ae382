//! Kernel confinement of a plugin-host child by its plugin's declared effects.
//!
//! The parent decides what the child may touch ([`Confinement::for_effects`]) and whether the
//! kernel can enforce it ([`kernel_support`]); the child applies it ([`apply`]) before it
//! loads the library, so that even the library's constructors run confined. Landlock limits
//! files and TCP ports and scopes signals and abstract sockets; a seccomp filter refuses what
//! Landlock does not cover: creating sockets (unless the plugin declares `network`), `ptrace`
//! and its kin, executing programs (unless configured), namespaces, mounts and kernel modules.

use std::path::{Path, PathBuf};

use harness_abi::manifest::Effects;
use serde::{Deserialize, Serialize};

/// What a confined child may do beyond computing. Built by the parent, applied by the child.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Confinement {
    /// Files and directories it may read beneath: the plugin file, the system's library
    /// directories, and the roots of a `reads` plugin.
    pub read: Vec<PathBuf>,
    /// Directories it may read and write beneath: the roots of a `writes` plugin.
    pub write: Vec<PathBuf>,
    /// Whether it may create sockets: only a `network` plugin may.
    pub sockets: bool,
    /// The TCP ports a `network` plugin may connect to; `None`: any.
    pub connect_ports: Option<Vec<u16>>,
    /// Programs it may execute; empty: none.
    pub exec: Vec<PathBuf>,
}

/// Where a dynamically linked library finds what it links to.
const LIBRARY_DIRS: &[&str] =
    &["/lib", "/lib64", "/usr/lib", "/usr/lib64", "/usr/local/lib", "/etc/ld.so.cache", "/etc/ld.so.conf"];
/// What name resolution and TLS read, for `network` plugins.
const NETWORK_FILES: &[&str] = &[
    "/etc/resolv.conf",
    "/etc/hosts",
    "/etc/nsswitch.conf",
    "/etc/gai.conf",
    "/etc/ssl",
    "/etc/ca-certificates",
    "/usr/share/ca-certificates",
];

/// Which of the four effect classes a plugin's offered tools declare.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EffectSet {
    /// Some tool reads.
    pub reads: bool,
    /// Some tool writes.
    pub writes: bool,
    /// Some tool talks to the network.
    pub network: bool,
}

impl EffectSet {
    /// The union of `effects`.
    pub fn of(effects: impl IntoIterator<Item = Effects>) -> Self {
        let mut set = Self::default();
        for e in effects {
            match e {
                Effects::Pure => {}
                Effects::Reads => set.reads = true,
                Effects::Writes => set.writes = true,
                Effects::Network => set.network = true,
            }
        }
        set
    }

    /// Whether every tool is `pure`.
    pub fn is_pure(self) -> bool {
        self == Self::default()
    }

    /// The classes as words, `pure` when none: `reads+network`.
    pub fn describe(self) -> String {
        let words: Vec<&str> = [(self.reads, "reads"), (self.writes, "writes"), (self.network, "network")]
            .iter()
            .filter(|(on, _)| *on)
            .map(|(_, w)| *w)
            .collect();
        if words.is_empty() { "pure".to_owned() } else { words.join("+") }
    }
}

/// The operator's grants for one plugin, from its `[plugins.<name>]` section.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Grants {
    /// The directories a `reads`/`writes` plugin works under (`allow_paths`, else its own
    /// `root`, else the working directory).
    pub paths: Vec<PathBuf>,
    /// The TCP ports a `network` plugin may connect to (`allow_ports`); `None`: any.
    pub ports: Option<Vec<u16>>,
    /// Programs it may run (`allow_exec`).
    pub exec: Vec<PathBuf>,
}

impl Confinement {
    /// The strictest confinement: read the plugin file and the system's libraries, nothing
    /// else. Used to read a manifest, before the plugin's effects are known.
    pub fn load_only(library: &Path) -> Self {
        Self::loading([library])
    }

    /// The same for several plugin files, read in one child one after the other.
    pub fn loading<'a>(libraries: impl IntoIterator<Item = &'a Path>) -> Self {
        let mut read: Vec<PathBuf> = libraries.into_iter().map(Path::to_path_buf).collect();
        read.extend(LIBRARY_DIRS.iter().map(PathBuf::from));
        Self { read, ..Self::default() }
    }

    /// What a plugin with `effects` and the operator's `grants` may do.
    pub fn for_effects(library: &Path, effects: EffectSet, grants: &Grants) -> Self {
        let mut c = Self::load_only(library);
        if effects.writes {
            c.write.extend(grants.paths.iter().cloned());
        } else if effects.reads {
            c.read.extend(grants.paths.iter().cloned());
        }
        if effects.network {
            c.sockets = true;
            c.connect_ports = grants.ports.clone();
            c.read.extend(NETWORK_FILES.iter().map(PathBuf::from));
        }
        c.exec = grants.exec.clone();
        c
    }
}

/// What the kernel enforces on a plugin's child.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Enforcement {
    /// Landlock and seccomp confine the child.
    Kernel {
        /// The kernel's Landlock ABI version.
        landlock_abi: i32,
    },
    /// Nothing is enforced, and why.
    None {
        /// Why, in a few words.
        reason: String,
    },
}

impl Enforcement {
    /// One word for `plugins list`: `landlock+seccomp` or `none`.
    pub fn label(&self) -> &'static str {
        match self {
            Self::Kernel { .. } => "landlock+seccomp",
            Self::None { .. } => "none",
        }
    }
}

/// Whether this kernel can confine a child: `Kernel` or `None` with the reason.
#[cfg(target_os = "linux")]
pub fn kernel_support() -> Enforcement {
    linux::kernel_support()
}

/// Other systems: no kernel confinement.
#[cfg(not(target_os = "linux"))]
pub fn kernel_support() -> Enforcement {
    Enforcement::None { reason: "kernel confinement needs Linux (Landlock and seccomp)".to_owned() }
}

/// Confines the calling process (single-threaded: the plugin host) for good.
#[cfg(target_os = "linux")]
pub(crate) fn apply(confinement: &Confinement) -> Result<(), String> {
    linux::landlock(confinement)?;
    linux::seccomp(confinement)
}

/// Other systems: refuse, so that a confinement the parent asked for is never silently dropped.
#[cfg(not(target_os = "linux"))]
pub(crate) fn apply(_: &Confinement) -> Result<(), String> {
    Err("kernel confinement needs Linux".to_owned())
}

#[cfg(target_os = "linux")]
mod linux {
    use std::collections::BTreeMap;

    use landlock::{
        ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, NetPort, PathBeneath, PathFd, Ruleset,
        RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope,
    };
    use seccompiler::{SeccompAction, SeccompFilter, SeccompRule, TargetArch};

    use super::{Confinement, Enforcement};

    /// The Landlock ABI this code asks for: files, TCP ports, signal and socket scopes.
    const WANTED: ABI = ABI::V6;

    pub(super) fn kernel_support() -> Enforcement {
        // SAFETY: landlock_create_ruleset with a null attribute, size 0 and the VERSION flag
        // only returns the ABI version (or an error); it creates nothing.
        let abi = unsafe {
            libc::syscall(libc::SYS_landlock_create_ruleset, std::ptr::null::<u8>(), 0usize, 1u32 /* VERSION */)
        };
        if abi < 1 {
            let e = std::io::Error::last_os_error();
            return Enforcement::None {
                reason: format!(
                    "this kernel offers no Landlock ({e}); it needs Linux 5.13 or later with Landlock enabled"
                ),
            };
        }
        // SAFETY: PR_GET_SECCOMP takes no pointers; EINVAL means the kernel has no seccomp.
        if unsafe { libc::prctl(libc::PR_GET_SECCOMP) } < 0 {
            let e = std::io::Error::last_os_error();
            return Enforcement::None { reason: format!("this kernel offers no seccomp ({e})") };
        }
        if target_arch().is_err() {
            return Enforcement::None { reason: format!("no seccomp filter is built for {}", std::env::consts::ARCH) };
        }
        Enforcement::Kernel { landlock_abi: i32::try_from(abi).unwrap_or(i32::MAX) }
    }

    fn target_arch() -> Result<TargetArch, String> {
        TargetArch::try_from(std::env::consts::ARCH).map_err(|e| e.to_string())
    }

    /// Files and TCP ports by Landlock; a path that does not exist is left out, not an error.
    pub(super) fn landlock(c: &Confinement) -> Result<(), String> {
        let fail = |e: landlock::RulesetError| format!("Landlock: {e}");
        let read = AccessFs::ReadFile | AccessFs::ReadDir;
        let mut net: BitFlags<AccessNet> = AccessNet::BindTcp.into();
        if !c.sockets || c.connect_ports.is_some() {
            net |= AccessNet::ConnectTcp;
        }
        let mut ruleset = Ruleset::default()
            .set_compatibility(CompatLevel::BestEffort)
            .handle_access(AccessFs::from_all(WANTED))
            .map_err(fail)?
            .handle_access(net)
            .map_err(fail)?
            .scope(Scope::AbstractUnixSocket | Scope::Signal)
            .map_err(fail)?
            .create()
            .map_err(fail)?;
        let write = AccessFs::from_all(WANTED) & !AccessFs::Execute;
        let rules = (c.read.iter().map(|p| (p, read)))
            .chain(c.write.iter().map(|p| (p, write)))
            .chain(c.exec.iter().map(|p| (p, AccessFs::Execute | AccessFs::ReadFile)));
        let dev_null = std::path::PathBuf::from("/dev/null");
        for (path, access) in rules.chain([(&dev_null, AccessFs::ReadFile | AccessFs::WriteFile)]) {
            // A path that does not exist here grants nothing; it is not an error.
            let Ok(fd) = PathFd::new(path) else { continue };
            // Rights on a file are only those that apply to files.
            let access = if path.is_dir() { access } else { access & AccessFs::from_file(WANTED) };
            ruleset = ruleset.add_rule(PathBeneath::new(fd, access)).map_err(fail)?;
        }
        for port in c.connect_ports.iter().flatten() {
            ruleset = ruleset.add_rule(NetPort::new(*port, AccessNet::ConnectTcp)).map_err(fail)?;
        }
        let status = ruleset.restrict_self().map_err(fail)?;
        if status.ruleset == RulesetStatus::NotEnforced {
            return Err("Landlock is not enforced by this kernel".to_owned());
        }
        Ok(())
    }

    /// What Landlock does not cover, refused with EPERM.
    pub(super) fn seccomp(c: &Confinement) -> Result<(), String> {
        let mut denied: Vec<i64> = vec![
            libc::SYS_ptrace,
            libc::SYS_process_vm_readv,
            libc::SYS_process_vm_writev,
            libc::SYS_pidfd_getfd,
            libc::SYS_kcmp,
            libc::SYS_mount,
            libc::SYS_umount2,
            libc::SYS_pivot_root,
            libc::SYS_chroot,
            libc::SYS_unshare,
            libc::SYS_setns,
            libc::SYS_bpf,
            libc::SYS_perf_event_open,
            libc::SYS_keyctl,
            libc::SYS_add_key,
            libc::SYS_request_key,
            libc::SYS_userfaultfd,
            libc::SYS_io_uring_setup,
            libc::SYS_init_module,
            libc::SYS_finit_module,
            libc::SYS_delete_module,
            libc::SYS_kexec_load,
        ];
        if !c.sockets {
            denied.push(libc::SYS_socket);
        }
        if c.exec.is_empty() {
            denied.extend([libc::SYS_execve, libc::SYS_execveat]);
        }
        let rules: BTreeMap<i64, Vec<SeccompRule>> = denied.into_iter().map(|n| (n, Vec::new())).collect();
        let eperm = u32::try_from(libc::EPERM).unwrap_or(1);
        let filter = SeccompFilter::new(rules, SeccompAction::Allow, SeccompAction::Errno(eperm), target_arch()?)
            .map_err(|e| format!("seccomp: {e}"))?;
        let program: seccompiler::BpfProgram = filter.try_into().map_err(|e| format!("seccomp: {e:?}"))?;
        // Landlock's restrict_self has set no_new_privs, which an unprivileged filter needs.
        seccompiler::apply_filter(&program).map_err(|e| format!("seccomp: {e}"))
    }
}
