//! `cargo xtask windows`: the Windows leg of CI. Cross-builds the release workspace for
//! `x86_64-pc-windows-gnu` with Debian's mingw-w64, and runs an end-to-end subset through the
//! real `harness.exe` and real `.dll` plugins under Wine (the checks are in `windows/checks.rs`).
//!
//! What it installs when missing: the rustup target, `gcc-mingw-w64-x86-64` and `wine` (as
//! root, with apt-get; otherwise it stops with the command to run). The leg works in
//! `target/windows` (in the cache's `windows-leg` when a directory above the clone is writable
//! by everyone, as `/tmp` is). The Wine prefix is fresh under its `wine` the first time and
//! kept after; Wine 8 lacks
//! `bcryptprimitives.dll`, which Rust's std needs at start (every Rust program exits with
//! status 53 without it), so a stand-in built from `xtask/wine/bcryptprimitives.c` is put in
//! the prefix's `system32`: for these tests only, never shipped.

mod checks;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use crate::{Context, apt_install, on_path, run};

/// The Rust target.
pub(crate) const TARGET: &str = "x86_64-pc-windows-gnu";
/// The mingw-w64 C compiler, also the target's linker.
const MINGW_GCC: &str = "x86_64-w64-mingw32-gcc";

/// Where the leg works, and the clock of each stage.
pub(crate) struct Leg {
    /// The workspace root.
    pub(crate) root: PathBuf,
    /// `target/x86_64-pc-windows-gnu/release`, where the cross-build puts its files.
    built: PathBuf,
    /// `harness.exe` and the plugins' `.dll` files, copied from the build into the leg's
    /// directory: what the checks run.
    pub(crate) release: PathBuf,
    /// The leg's directory: the prefix, the scratch, the scaffold's target directory.
    pub(crate) work: PathBuf,
    /// The Wine prefix.
    pub(crate) prefix: PathBuf,
    /// Scratch directories of the checks (emptied at the start).
    pub(crate) scratch: PathBuf,
    timings: Vec<(String, f64)>,
}

/// Runs the leg: tools, build, prefix, checks; the timings printed whatever the outcome.
pub(crate) fn windows(context: &Context) -> Result<(), String> {
    let started = Instant::now();
    let work = leg_directory(context);
    let mut leg = Leg {
        root: context.root.clone(),
        built: context.root.join("target").join(TARGET).join("release"),
        release: work.join("bin"),
        prefix: work.join("wine"),
        scratch: work.join("e2e"),
        work,
        timings: Vec::new(),
    };
    let outcome = leg.stages();
    leg.timings.push(("the whole leg".to_owned(), started.elapsed().as_secs_f64()));
    eprintln!("== windows leg timings");
    for (stage, seconds) in &leg.timings {
        eprintln!("   {seconds:>7.1} s  {stage}");
    }
    outcome
}

impl Leg {
    fn stages(&mut self) -> Result<(), String> {
        self.timed("tools (target, mingw-w64, wine)", ensure_tools)?;
        self.timed("cross build (release workspace, benches)", |leg| build(&leg.root))?;
        self.timed("harness.exe and the plugins copied to the leg's bin", |leg| {
            copy_binaries(&leg.built, &leg.release)
        })?;
        self.timed("Wine prefix and the bcryptprimitives stand-in", |leg| prepare_prefix(&leg.root, &leg.prefix))?;
        self.timed("end-to-end checks under Wine", checks::run_all)
    }

    /// Runs one stage and keeps its time.
    pub(crate) fn timed(&mut self, stage: &str, f: impl FnOnce(&mut Self) -> Result<(), String>) -> Result<(), String> {
        eprintln!("== windows: {stage}");
        let t = Instant::now();
        let outcome = f(self);
        self.timings.push((stage.to_owned(), t.elapsed().as_secs_f64()));
        outcome
    }

    /// The plugin cache of the leg's runs.
    pub(crate) fn plugin_cache(&self) -> PathBuf {
        self.prefix.with_file_name("plugin-cache")
    }

    /// `wine harness.exe ARGS` in `dir`, with the leg's prefix and a plugin cache of its own
    /// (not the user's: Wine passes `HOME` on), as a command to run or show.
    pub(crate) fn harness(&self, dir: &Path) -> Command {
        let mut cmd = wine(&self.prefix);
        cmd.env("HARNESS_PLUGIN_CACHE", self.plugin_cache());
        cmd.arg(self.release.join("harness.exe")).current_dir(dir);
        cmd
    }
}

/// The leg's directory: `target/windows` in the clone, unless a directory above the clone may
/// be written by everyone (a clone under `/tmp`): Wine shows such a directory to Windows
/// programs as writable by Everyone (it has no sticky bit), and the harness rightly refuses
/// to trust plugins and configuration below it. The leg then works in the cache, outside the
/// clone.
fn leg_directory(context: &Context) -> PathBuf {
    let in_clone = context.root.join("target/windows");
    match world_writable_ancestor(&context.root) {
        Some(open) => {
            let work = context.cache.join("windows-leg");
            eprintln!(
                "== windows: {} may be written by everyone, which Wine shows as Everyone's write on Windows: the leg works in {}",
                open.display(),
                work.display()
            );
            work
        }
        None => in_clone,
    }
}

/// The first directory from `dir` up that everyone may write, sticky or not.
#[cfg(unix)]
fn world_writable_ancestor(dir: &Path) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    dir.ancestors()
        .find(|d| std::fs::metadata(d).is_ok_and(|m| m.permissions().mode() & 0o002 != 0))
        .map(Path::to_path_buf)
}

/// On Windows itself no directory above the clone is shown through Wine.
#[cfg(not(unix))]
fn world_writable_ancestor(_: &Path) -> Option<PathBuf> {
    None
}

/// Copies `harness.exe` and every `.dll` beside it from the build to `bin`, afresh, so that the
/// plugins found beside the harness are exactly the build's.
fn copy_binaries(built: &Path, bin: &Path) -> Result<(), String> {
    let _ = std::fs::remove_dir_all(bin);
    std::fs::create_dir_all(bin).map_err(|e| format!("cannot create {}: {e}", bin.display()))?;
    let entries = std::fs::read_dir(built).map_err(|e| format!("cannot list {}: {e}", built.display()))?;
    for path in entries.flatten().map(|e| e.path()) {
        let wanted =
            path.extension().is_some_and(|x| x == "dll") || path.file_name().is_some_and(|n| n == "harness.exe");
        if wanted && path.is_file() {
            let to = bin.join(path.file_name().unwrap_or_default());
            std::fs::copy(&path, &to)
                .map_err(|e| format!("cannot copy {} to {}: {e}", path.display(), to.display()))?;
        }
    }
    Ok(())
}

/// `wine` with the prefix `prefix`, quiet.
pub(crate) fn wine(prefix: &Path) -> Command {
    let mut cmd = Command::new("wine");
    cmd.env("WINEPREFIX", prefix).env("WINEDEBUG", "-all");
    cmd
}

/// The rustup target, mingw-w64 and Wine, each installed when missing.
fn ensure_tools(_: &mut Leg) -> Result<(), String> {
    let installed = Command::new("rustup")
        .args(["target", "list", "--installed"])
        .output()
        .map_err(|e| format!("cannot run rustup to look for the {TARGET} target ({e}); install rustup, then run: rustup target add {TARGET}"))?;
    if !String::from_utf8_lossy(&installed.stdout).lines().any(|l| l.trim() == TARGET) {
        run(Command::new("rustup").args(["target", "add", TARGET]))
            .map_err(|e| format!("{e}; run: rustup target add {TARGET}"))?;
    }
    if !on_path(MINGW_GCC) {
        apt_install(&["gcc-mingw-w64-x86-64"], "cross-building for Windows")?;
    }
    if !on_path("wine") || !on_path("wineboot") {
        apt_install(&["wine", "wine64"], "running the Windows build")?;
    }
    Ok(())
}

/// `cargo` for the Windows target with mingw's linker and no incremental cache; the Linux
/// artifacts stay where they are (`--target` builds under `target/x86_64-pc-windows-gnu`).
pub(crate) fn cross_cargo(dir: &Path) -> Command {
    let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cmd.current_dir(dir).env("CARGO_TARGET_X86_64_PC_WINDOWS_GNU_LINKER", MINGW_GCC).env("CARGO_INCREMENTAL", "0");
    cmd
}

/// The release build of the default members (the harness and its plugins), the test-only
/// `fault` plugin the checks call (not a default member), then the benches, which must build
/// too. Test fixtures are not built: beside `harness.exe` they would load.
fn build(root: &Path) -> Result<(), String> {
    run(cross_cargo(root).args(["build", "--release", "--target", TARGET]))?;
    run(cross_cargo(root).args(["build", "--release", "--target", TARGET, "-p", "fault"]))?;
    run(cross_cargo(root).args([
        "build",
        "--release",
        "--target",
        TARGET,
        "-p",
        "harness-bench",
        "--bins",
        "--benches",
    ]))
}

/// A Wine prefix made once (`wineboot -i`), with the stand-in `bcryptprimitives.dll`
/// rebuilt into its `system32` when its source is newer.
fn prepare_prefix(root: &Path, prefix: &Path) -> Result<(), String> {
    let system32 = prefix.join("drive_c/windows/system32");
    if !system32.is_dir() {
        std::fs::create_dir_all(prefix).map_err(|e| format!("cannot create {}: {e}", prefix.display()))?;
        run(wine(prefix).arg("wineboot").arg("-i"))
            .map_err(|e| format!("{e}; try: WINEPREFIX={} WINEDEBUG=-all wineboot -i", prefix.display()))?;
        // wineboot returns before the prefix's server has written everything.
        run(Command::new("wineserver").arg("-w").env("WINEPREFIX", prefix))?;
    }
    let source = root.join("xtask/wine/bcryptprimitives.c");
    let dll = system32.join("bcryptprimitives.dll");
    if is_newer(&source, &dll) {
        run(Command::new(MINGW_GCC).args(["-shared", "-O2", "-o"]).arg(&dll).arg(&source).arg("-ladvapi32"))?;
    }
    Ok(())
}

/// Whether `source` was changed after `built` was written (or `built` is missing).
fn is_newer(source: &Path, built: &Path) -> bool {
    let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    match (modified(source), modified(built)) {
        (Some(s), Some(b)) => s > b,
        _ => true,
    }
}
