//! A one-node Slurm cluster's programs (Debian's `slurm-wlm` and `munge`), for the test that
//! runs `harness batch --shard auto` as a Slurm job array (tests/e2e/slurm.rs). The test
//! writes its own configuration in a temporary directory and starts and stops the daemons
//! itself; here only the programs are installed.

use crate::{Context, apt_install, on_path};

use super::Vars;

/// The programs the test starts or calls.
const PROGRAMS: &[&str] = &["slurmctld", "slurmd", "sbatch", "squeue", "scancel", "munged", "mungekey"];

/// Installs `slurm-wlm` and `munge` when any of their programs is missing.
pub(crate) fn ensure(_: &Context) -> Result<Vars, String> {
    if PROGRAMS.iter().any(|p| !on_path(p) && !std::path::Path::new("/usr/sbin").join(p).is_file()) {
        apt_install(&["slurm-wlm", "munge"], "the Slurm job array test")?;
    }
    let missing: Vec<&str> = PROGRAMS
        .iter()
        .copied()
        .filter(|p| !on_path(p) && !std::path::Path::new("/usr/sbin").join(p).is_file())
        .collect();
    if !missing.is_empty() {
        return Err(format!("after installing slurm-wlm and munge, still missing: {}", missing.join(", ")));
    }
    Ok(vec![("HARNESS_SLURM".to_owned(), "1".to_owned())])
}
