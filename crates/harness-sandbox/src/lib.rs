//! What a plugin's child process may do, and the kernel's enforcement of it.
//!
//! The capability layer of `process` isolation, kept apart from the code that runs the child
//! (`harness-loader`'s `isolation`) so that a reviewer can audit it alone, as one small crate
//! that depends on no host crate of ours: what a plugin's declared effects and the operator's
//! grants let its child touch ([`confine::Confinement`]) and whether this kernel can hold it
//! to that ([`confine::kernel_support`]); Landlock and the seccomp allowlist that the child
//! applies to itself ([`confine::apply`]); its resource limits ([`Limits`]); and, on Windows,
//! the Job Object it runs in (`Job`), which limits its process tree but not what it reaches.
//!
//! The loader decides and starts; the child calls [`confine::apply`] and [`Limits::apply`]
//! on itself before it loads the plugin library, so that no plugin code runs unconfined.
#![deny(missing_docs)]

pub mod confine;
mod limits;
#[cfg(windows)]
mod windows;

pub use limits::Limits;
#[cfg(windows)]
pub use windows::{CHILD_MEMORY_LIMIT, Job};
