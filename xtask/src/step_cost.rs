//! `cargo xtask step-cost`: a step must cost the same late in a long run as early.
//!
//! Runs the real `harness` binary on scripted runs of 1,000 and of 8,000 calculator steps (no
//! model, no trace, the repeat guard off), three times each, interleaved, and compares the best
//! time per step of each length. A ratio within one process's run, both lengths on the same
//! machine at the same moment, the best of three: robust to a slow or busy machine, where an
//! absolute time is not. A cost per step that grows with the run's length (a rescan of the
//! whole conversation before each request once made a run quadratic) shows as a ratio far over
//! 1; the guard fails over [`MAX_RATIO`].
//!
//! It builds and runs the debug binary, which CI has already built for the tests; the figures
//! of docs/benchmarks.md come from the release build.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::{Context, run};

/// The run lengths compared, in steps.
const SHORT: usize = 1_000;
/// The long run: eight times the short one.
const LONG: usize = 8_000;
/// Over this, the per-step cost at [`LONG`] steps against [`SHORT`] fails the guard.
const MAX_RATIO: f64 = 2.0;
/// Runs of each length; the best counts.
const TRIES: usize = 3;

/// Builds the harness and its plugins (debug), then measures and compares.
pub(crate) fn step_cost(context: &Context) -> Result<(), String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    eprintln!("== cargo build (the harness and its plugins, debug)");
    run(Command::new(cargo).current_dir(&context.root).arg("build"))?;
    let harness = target_dir(&context.root).join("debug").join(format!("harness{}", std::env::consts::EXE_SUFFIX));
    let scratch = context.root.join("target/step-cost");
    std::fs::create_dir_all(&scratch).map_err(|e| format!("cannot create {}: {e}", scratch.display()))?;
    let none = write_script(&scratch, 0)?;
    let short = write_script(&scratch, SHORT)?;
    let long = write_script(&scratch, LONG)?;
    let (mut best_none, mut best_short, mut best_long) = (Duration::MAX, Duration::MAX, Duration::MAX);
    for _ in 0..TRIES {
        best_none = best_none.min(time_run(&harness, &none, 0)?);
        best_short = best_short.min(time_run(&harness, &short, SHORT)?);
        best_long = best_long.min(time_run(&harness, &long, LONG)?);
    }
    // The process's start and end (plugins found, the schemas compiled) cost the same whatever
    // the length: a run of `finish` alone measures them, and they are taken off.
    let per_step = |best: Duration, steps: usize| best.saturating_sub(best_none).as_secs_f64() / steps as f64;
    let (per_short, per_long) = (per_step(best_short, SHORT), per_step(best_long, LONG));
    let ratio = per_long / per_short;
    eprintln!(
        "   per step: {:.1} us at {SHORT} steps, {:.1} us at {LONG} steps: ratio {ratio:.2} (the guard fails over {MAX_RATIO})",
        per_short * 1e6,
        per_long * 1e6
    );
    if ratio > MAX_RATIO {
        return Err(format!(
            "a step at {LONG} steps costs {ratio:.2} times one at {SHORT} steps (over {MAX_RATIO}): something per step grows with the run's length; profile `{} run x --provider scripted --script {} --max-steps {} --max-repeats 0 -q`",
            harness.display(),
            long.display(),
            LONG + 1
        ));
    }
    Ok(())
}

/// Cargo's target directory: `CARGO_TARGET_DIR`, else the workspace's `target/`.
fn target_dir(root: &Path) -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), PathBuf::from)
}

/// A script of `steps` distinct calculator calls, then `finish`.
fn write_script(dir: &Path, steps: usize) -> Result<PathBuf, String> {
    let path = dir.join(format!("steps-{steps}.jsonl"));
    let mut text = String::with_capacity(steps * 64);
    for i in 0..steps {
        text.push_str(&format!("{{\"tool\":\"calculate\",\"arguments\":{{\"expression\":\"{i}+2*3\"}}}}\n"));
    }
    text.push_str("{\"tool\":\"finish\",\"arguments\":{\"answer\":7}}\n");
    let mut file = std::fs::File::create(&path).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    file.write_all(text.as_bytes()).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    Ok(path)
}

/// The wall time of one scripted run of `steps` steps; an error unless it finished.
fn time_run(harness: &Path, script: &Path, steps: usize) -> Result<Duration, String> {
    let mut command = Command::new(harness);
    command
        .args(["run", "x", "--provider", "scripted", "--script"])
        .arg(script)
        .args(["--max-steps", &(steps + 1).to_string(), "--max-repeats", "0", "-q"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let started = Instant::now();
    let output = command.output().map_err(|e| format!("cannot run {}: {e}", harness.display()))?;
    let took = started.elapsed();
    if !output.status.success() {
        return Err(format!(
            "the scripted run of {steps} steps did not finish ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    Ok(took)
}
