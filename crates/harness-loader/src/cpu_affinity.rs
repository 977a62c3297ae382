//! Where a helper thread runs first (the schema warm-up thread's CPU affinity).
//!
//! Linux puts a new thread on its creator's CPU and, often, runs it there at once: the
//! creator waits until the new thread blocks or the scheduler moves one of them. The schema
//! thread starts with about 1 ms of work (jsonschema's metaschema validator), so in about
//! half of all start-ups on a two-CPU machine the run's own thread stood still for that
//! millisecond before its first model request, with the other CPU idle (docs/benchmarks.md).
//! A helper thread that calls [`leave_cpu`] first moves to another CPU it may run on, and is
//! then allowed on every CPU again, so the scheduler stays free to move it later.

/// The CPU the calling thread runs on, when the system says (Linux); else `None`.
pub(crate) fn current_cpu() -> Option<usize> {
    imp::current_cpu()
}

/// Moves the calling thread off `creator_cpu` (the CPU of the thread that started it) when it
/// is on it and may run elsewhere, then allows it every CPU it was allowed before. Returns the
/// CPU it moved to, `None` when it stayed where it was. Best effort: a refused move leaves the
/// thread where and as it was (a refused restore, which only a cpuset changed in between could
/// cause, would leave it on the one CPU it moved to).
pub(crate) fn leave_cpu(creator_cpu: Option<usize>) -> Option<usize> {
    let creator = creator_cpu?;
    if current_cpu()? != creator {
        return None;
    }
    imp::move_off(creator)
}

#[cfg(target_os = "linux")]
mod imp {
    use std::mem::{size_of, zeroed};

    pub(super) fn current_cpu() -> Option<usize> {
        // SAFETY: no arguments; -1 on failure, which `try_from` refuses.
        usize::try_from(unsafe { libc::sched_getcpu() }).ok()
    }

    /// The CPUs this thread may run on.
    pub(super) fn allowed() -> Option<libc::cpu_set_t> {
        // SAFETY: a cpu_set_t is plain bits, and all zeros is the empty set.
        let mut set: libc::cpu_set_t = unsafe { zeroed() };
        // SAFETY: pid 0 is the calling thread; the size is that of `set`.
        let got = unsafe { libc::sched_getaffinity(0, size_of::<libc::cpu_set_t>(), &mut set) };
        (got == 0).then_some(set)
    }

    fn set_allowed(set: &libc::cpu_set_t) -> bool {
        // SAFETY: pid 0 is the calling thread; the size is that of `set`.
        unsafe { libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), set) == 0 }
    }

    pub(super) fn move_off(cpu: usize) -> Option<usize> {
        let allowed = allowed()?;
        let size = usize::try_from(libc::CPU_SETSIZE).ok()?;
        // The next CPU after `cpu` that this thread may use, wrapping around.
        // SAFETY (CPU_ISSET): every index is below CPU_SETSIZE, the set's size.
        let other = (1..size).map(|d| (cpu + d) % size).find(|&c| unsafe { libc::CPU_ISSET(c, &allowed) })?;
        // SAFETY: as above; all zeros is the empty set, and `other` is below CPU_SETSIZE.
        let mut only: libc::cpu_set_t = unsafe { zeroed() };
        // SAFETY: `other` is below CPU_SETSIZE.
        unsafe { libc::CPU_SET(other, &mut only) };
        // Restricting the thread to one CPU moves it there before the call returns; allowing
        // the others again does not move it back.
        if !set_allowed(&only) {
            return None;
        }
        set_allowed(&allowed);
        Some(other)
    }
}

#[cfg(not(target_os = "linux"))]
mod imp {
    pub(super) fn current_cpu() -> Option<usize> {
        None
    }

    pub(super) fn move_off(_cpu: usize) -> Option<usize> {
        None
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::{current_cpu, imp, leave_cpu};

    fn allowed_cpus() -> Vec<usize> {
        let set = imp::allowed().expect("Linux says which CPUs a thread may use");
        let size = usize::try_from(libc::CPU_SETSIZE).expect("CPU_SETSIZE is positive");
        // SAFETY: every index is below CPU_SETSIZE, the set's size.
        (0..size).filter(|&c| unsafe { libc::CPU_ISSET(c, &set) }).collect()
    }

    /// On a thread of its own, so that no other test's thread has its affinity changed.
    #[test]
    fn a_thread_moved_off_a_cpu_runs_on_another_and_keeps_every_cpu_it_had() {
        std::thread::spawn(|| {
            let before = allowed_cpus();
            let here = current_cpu().expect("Linux says which CPU a thread is on");
            let moved = imp::move_off(here);
            assert_eq!(allowed_cpus(), before, "the thread may run wherever it could before");
            if before.len() > 1 {
                let to = moved.expect("with two CPUs or more, the thread moves");
                assert_ne!(to, here);
                assert!(before.contains(&to), "{to} is not among {before:?}");
            } else {
                assert_eq!(moved, None, "with one CPU there is nowhere to go");
            }
        })
        .join()
        .expect("the test thread ends");
    }

    #[test]
    fn a_thread_not_on_its_creators_cpu_or_with_no_creator_cpu_stays() {
        std::thread::spawn(|| {
            assert_eq!(leave_cpu(Some(usize::MAX)), None);
            assert_eq!(leave_cpu(None), None);
        })
        .join()
        .expect("the test thread ends");
    }
}
