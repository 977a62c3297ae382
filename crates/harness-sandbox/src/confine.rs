//! Kernel confinement of a plugin-host child by its plugin's declared effects.
//!
//! The parent (the loader) decides what the child may touch ([`Confinement::for_effects`])
//! and whether the kernel can enforce it ([`kernel_support`]); the child applies it
//! ([`apply`]) before it loads the library, so that even the library's constructors run
//! confined. Landlock limits files and TCP ports and scopes signals and abstract sockets; a
//! seccomp allowlist per effect class (the `seccomp` module) refuses every system call the
//! class does not need.
//!
//! Each Landlock feature needs a minimum ABI ([`FEATURES`]); on an older kernel the parent
//! says which features a plugin's declared effects lose ([`Enforcement::Partial`]) and which
//! seccomp stands in for, and the child asks Landlock for exactly the ABI the parent saw, as a
//! hard requirement: nothing is dropped silently.

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
    /// The Landlock ABI the parent found: the child enforces exactly its features.
    pub landlock_abi: i32,
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
    /// `root`, else none).
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
        Self { read, landlock_abi: landlock_abi(), ..Self::default() }
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

/// A Landlock feature, the ABI it needs, the effects it matters to, and what seccomp does in
/// its place on an older kernel (`None`: nothing, the feature is lost).
pub struct Feature {
    /// Its name in `plugins list --json`.
    pub key: &'static str,
    /// What it enforces, in words.
    pub what: &'static str,
    /// The first Landlock ABI that has it.
    pub needs_abi: i32,
    /// Whether a plugin with these effects and grants needs it.
    pub matters: fn(EffectSet, &Grants) -> bool,
    /// What the seccomp filter does in its place, when it can.
    pub seccomp: Option<&'static str>,
}

/// Each Landlock feature the confinement uses beyond ABI 1. File refer (renaming or linking
/// across directories, ABI 2) is not here: before it, Landlock refuses such renames outright,
/// which is stricter, not weaker.
pub const FEATURES: &[Feature] = &[
    Feature {
        key: "truncate",
        what: "file truncation",
        needs_abi: 3,
        matters: |e, _| e.writes,
        seccomp: Some("truncate on a path is refused; ftruncate needs a file Landlock let it open for writing"),
    },
    Feature {
        key: "tcp_bind",
        what: "TCP bind limits",
        needs_abi: 4,
        matters: |e, _| e.network,
        seccomp: Some("bind, listen and accept are refused"),
    },
    Feature {
        key: "tcp_connect_ports",
        what: "TCP port limits (allow_ports)",
        needs_abi: 4,
        matters: |e, g| e.network && g.ports.is_some(),
        seccomp: None,
    },
    Feature {
        key: "ioctl_dev",
        what: "ioctl limits on devices",
        needs_abi: 5,
        matters: |_, _| true,
        seccomp: Some("ioctl is limited to FIONBIO, FIOCLEX, FIONCLEX, FIONREAD, TCGETS and TIOCGWINSZ"),
    },
    Feature {
        key: "signal_scoping",
        what: "signal scoping",
        needs_abi: 6,
        matters: |_, _| true,
        seccomp: Some(
            "kill and tgkill reach only the child itself; tkill, rt_sigqueueinfo and pidfd_send_signal are refused",
        ),
    },
    Feature {
        key: "abstract_unix_socket_scoping",
        what: "abstract Unix socket scoping",
        needs_abi: 6,
        matters: |e, _| e.network,
        seccomp: Some("only IPv4 and IPv6 sockets can be created"),
    },
];

/// A feature this kernel's Landlock lacks that a plugin's effects need.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Gap {
    /// [`Feature::key`].
    pub feature: &'static str,
    /// The Landlock ABI it needs.
    pub needs_abi: i32,
    /// What seccomp does in its place; absent: nothing, it is not enforced.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seccomp: Option<&'static str>,
    /// What is lacking, in one line: "TCP port limits (allow_ports) needs Landlock ABI 4; this
    /// kernel has 3".
    pub message: String,
}

/// The features `effects` and `grants` need that Landlock ABI `abi` lacks.
pub fn gaps(abi: i32, effects: EffectSet, grants: &Grants) -> Vec<Gap> {
    FEATURES
        .iter()
        .filter(|f| abi < f.needs_abi && (f.matters)(effects, grants))
        .map(|f| {
            let message = format!("{} needs Landlock ABI {}; this kernel has {abi}", f.what, f.needs_abi);
            Gap { feature: f.key, needs_abi: f.needs_abi, seccomp: f.seccomp, message }
        })
        .collect()
}

/// What the kernel enforces on a plugin's child.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Enforcement {
    /// Landlock and seccomp confine the child to every declared effect.
    Kernel {
        /// The kernel's Landlock ABI version.
        landlock_abi: i32,
        /// Landlock features this kernel lacks that seccomp stands in for.
        #[serde(skip_serializing_if = "Vec::is_empty")]
        covered: Vec<Gap>,
    },
    /// Landlock and seccomp confine the child, but this kernel's Landlock lacks features its
    /// declared effects need and seccomp cannot stand in for.
    Partial {
        /// The kernel's Landlock ABI version.
        landlock_abi: i32,
        /// What is not enforced.
        missing: Vec<Gap>,
        /// What seccomp stands in for.
        covered: Vec<Gap>,
    },
    /// Nothing is enforced, and why.
    None {
        /// Why, in a few words.
        reason: String,
    },
}

impl Enforcement {
    /// One word for `plugins list`: `landlock+seccomp`, `partial` or `none`.
    pub fn label(&self) -> &'static str {
        match self {
            Self::Kernel { .. } => "landlock+seccomp",
            Self::Partial { .. } => "partial",
            Self::None { .. } => "none",
        }
    }

    /// The kernel's Landlock ABI, when it confines anything.
    pub fn landlock_abi(&self) -> Option<i32> {
        match self {
            Self::Kernel { landlock_abi, .. } | Self::Partial { landlock_abi, .. } => Some(*landlock_abi),
            Self::None { .. } => None,
        }
    }

    /// What this kernel (`self`, from [`kernel_support`]) enforces on a child with `effects`
    /// and `grants`.
    pub fn of(&self, effects: EffectSet, grants: &Grants) -> Self {
        let Some(abi) = self.landlock_abi() else { return unenforced(self, effects) };
        let (covered, missing): (Vec<Gap>, Vec<Gap>) =
            gaps(abi, effects, grants).into_iter().partition(|g| g.seccomp.is_some());
        if missing.is_empty() {
            Self::Kernel { landlock_abi: abi, covered }
        } else {
            Self::Partial { landlock_abi: abi, missing, covered }
        }
    }

    /// What is not enforced, in one line; `None` when everything is.
    pub fn shortfall(&self) -> Option<String> {
        match self {
            Self::Kernel { .. } => None,
            Self::Partial { missing, .. } => {
                Some(missing.iter().map(|g| g.message.as_str()).collect::<Vec<_>>().join("; "))
            }
            Self::None { reason } => Some(reason.clone()),
        }
    }
}

/// What is not enforced on Windows, where only the child's Job Object limits it: every
/// declared effect, named.
#[cfg(windows)]
fn unenforced(_: &Enforcement, effects: EffectSet) -> Enforcement {
    Enforcement::None { reason: windows_shortfall(effects) }
}

#[cfg(not(windows))]
fn unenforced(support: &Enforcement, _: EffectSet) -> Enforcement {
    support.clone()
}

/// The reason Windows gives for a plugin declaring `effects`: `Windows: Job Object limits
/// only; declared reads+network not enforced (...)`.
#[cfg_attr(not(windows), allow(dead_code))]
fn windows_shortfall(effects: EffectSet) -> String {
    format!(
        "Windows: Job Object limits only (one process, a memory ceiling, no UI, killed with the harness); declared {} not enforced: the child may read and write what the user can and reach the network",
        effects.describe()
    )
}

/// The Landlock ABI of this kernel, probed once per process; 0 when it has none.
pub fn landlock_abi() -> i32 {
    static ABI: std::sync::OnceLock<i32> = std::sync::OnceLock::new();
    *ABI.get_or_init(probe_landlock_abi)
}

#[cfg(target_os = "linux")]
fn probe_landlock_abi() -> i32 {
    // SAFETY: landlock_create_ruleset with a null attribute, size 0 and the VERSION flag
    // only returns the ABI version (or an error); it creates nothing.
    let abi = unsafe {
        libc::syscall(libc::SYS_landlock_create_ruleset, std::ptr::null::<u8>(), 0usize, 1u32 /* VERSION */)
    };
    i32::try_from(abi.max(0)).unwrap_or(i32::MAX)
}

#[cfg(not(target_os = "linux"))]
fn probe_landlock_abi() -> i32 {
    0
}

/// Whether this kernel can confine a child: `Kernel` or `None` with the reason.
#[cfg(target_os = "linux")]
pub fn kernel_support() -> Enforcement {
    linux::kernel_support()
}

/// Windows: no kernel confinement of files, sockets or system calls (see [`windows_shortfall`]).
#[cfg(windows)]
pub fn kernel_support() -> Enforcement {
    Enforcement::None { reason: windows_shortfall(EffectSet::default()) }
}

/// Other systems: no kernel confinement.
#[cfg(not(any(target_os = "linux", windows)))]
pub fn kernel_support() -> Enforcement {
    Enforcement::None { reason: "kernel confinement needs Linux (Landlock and seccomp)".to_owned() }
}

/// Confines the calling process (single-threaded: the plugin host) for good.
#[cfg(target_os = "linux")]
pub fn apply(confinement: &Confinement) -> Result<(), String> {
    linux::landlock(confinement)?;
    linux::seccomp(confinement)
}

/// Other systems: refuse, so that a confinement the parent asked for is never silently dropped.
/// (The parent asks for none where [`kernel_support`] says `None`.)
#[cfg(not(target_os = "linux"))]
pub fn apply(_: &Confinement) -> Result<(), String> {
    Err("kernel confinement needs Linux".to_owned())
}

#[cfg(target_os = "linux")]
mod seccomp;

#[cfg(target_os = "linux")]
mod linux {
    use landlock::{
        ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, NetPort, PathBeneath, PathFd, Ruleset,
        RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope,
    };
    use seccompiler::TargetArch;

    use super::seccomp::Profile;
    use super::{Confinement, Enforcement};

    /// The newest Landlock ABI this code asks for: files, TCP ports, signal and socket scopes.
    const WANTED: ABI = ABI::V6;

    pub(super) fn kernel_support() -> Enforcement {
        let abi = super::landlock_abi();
        if abi < 1 {
            return Enforcement::None {
                reason: "this kernel offers no Landlock; it needs Linux 5.13 or later with Landlock enabled".to_owned(),
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
        Enforcement::Kernel { landlock_abi: abi, covered: Vec::new() }
    }

    fn target_arch() -> Result<TargetArch, String> {
        TargetArch::try_from(std::env::consts::ARCH).map_err(|e| e.to_string())
    }

    /// Files and TCP ports by Landlock, at exactly the ABI the parent saw (`c.landlock_abi`),
    /// as a hard requirement: a feature the parent reported enforced is never dropped here.
    /// A path that does not exist is left out, not an error.
    pub(super) fn landlock(c: &Confinement) -> Result<(), String> {
        let fail = |e: landlock::RulesetError| format!("Landlock (ABI {}): {e}", c.landlock_abi);
        if c.landlock_abi < 1 {
            return Err("Landlock: the parent found no Landlock ABI to confine to".to_owned());
        }
        let abi = ABI::from(c.landlock_abi).min(WANTED);
        let mut ruleset = Ruleset::default()
            .set_compatibility(CompatLevel::HardRequirement)
            .handle_access(AccessFs::from_all(abi))
            .map_err(fail)?;
        if abi >= ABI::V4 {
            let mut net: BitFlags<AccessNet> = AccessNet::BindTcp.into();
            if !c.sockets || c.connect_ports.is_some() {
                net |= AccessNet::ConnectTcp;
            }
            ruleset = ruleset.handle_access(net).map_err(fail)?;
        }
        if abi >= ABI::V6 {
            ruleset = ruleset.scope(Scope::AbstractUnixSocket | Scope::Signal).map_err(fail)?;
        }
        let mut ruleset = ruleset.create().map_err(fail)?;
        let read = AccessFs::ReadFile | AccessFs::ReadDir;
        let write = AccessFs::from_all(abi) & !AccessFs::Execute;
        let rules = (c.read.iter().map(|p| (p, read)))
            .chain(c.write.iter().map(|p| (p, write)))
            .chain(c.exec.iter().map(|p| (p, AccessFs::Execute | AccessFs::ReadFile)));
        let dev_null = std::path::PathBuf::from("/dev/null");
        for (path, access) in rules.chain([(&dev_null, AccessFs::ReadFile | AccessFs::WriteFile)]) {
            // A path that does not exist here grants nothing; it is not an error.
            let Ok(fd) = PathFd::new(path) else { continue };
            // Rights on a file are only those that apply to files.
            let access = if path.is_dir() { access } else { access & AccessFs::from_file(abi) };
            ruleset = ruleset.add_rule(PathBeneath::new(fd, access)).map_err(fail)?;
        }
        if abi >= ABI::V4 {
            for port in c.connect_ports.iter().flatten() {
                ruleset = ruleset.add_rule(NetPort::new(*port, AccessNet::ConnectTcp)).map_err(fail)?;
            }
        }
        let status = ruleset.restrict_self().map_err(fail)?;
        if status.ruleset != RulesetStatus::FullyEnforced {
            return Err(format!("Landlock ABI {} is not fully enforced by this kernel", c.landlock_abi));
        }
        Ok(())
    }

    /// Everything else, by the allowlist of the child's classes.
    pub(super) fn seccomp(c: &Confinement) -> Result<(), String> {
        let profile = Profile {
            writes: !c.write.is_empty(),
            network: c.sockets,
            exec: !c.exec.is_empty(),
            landlock_truncates: c.landlock_abi >= 3,
        };
        // Landlock's restrict_self has set no_new_privs, which an unprivileged filter needs.
        super::seccomp::install(profile, target_arch()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_windows_shortfall_names_every_declared_effect_as_not_enforced() {
        let effects = EffectSet { reads: true, writes: false, network: true };
        let reason = windows_shortfall(effects);
        assert!(reason.starts_with("Windows: Job Object limits only"), "{reason}");
        assert!(reason.contains("declared reads+network not enforced"), "{reason}");
        assert!(windows_shortfall(EffectSet::default()).contains("declared pure not enforced"));
    }
}
