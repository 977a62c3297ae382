//! The project's chores, as `cargo xtask ...` (the alias is in `.cargo/config.toml`).
//!
//! `cargo xtask test` is the README's test command: it installs or builds every prerequisite
//! the test suite uses (each in `prereq/`), then runs `cargo test --workspace --no-fail-fast`
//! with the environment variables that point the tests at them. A prerequisite that cannot be
//! provided stops the command with the exact command that provides it: never a silent skip.
//!
//! ```text
//! cargo xtask test [-- ARGS...]     prerequisites, then cargo test --workspace --no-fail-fast ARGS
//!                                   (without ARGS: each test timed, the slowest twenty printed)
//! cargo xtask test --quick          no prerequisites: every test but those that need one (the list is printed)
//! cargo xtask setup [NAME...]       prerequisites only (all, or the named ones)
//! cargo xtask env [NAME...]         prerequisites, then print their variables as `export` lines
//! cargo xtask list                  the prerequisites and what each is for
//! cargo xtask fuzz [TARGET[=SECS]...] the fuzz/ targets for a fixed time each, on stable
//! cargo xtask tidy                  the docs against the workspace (also a unit test)
//! cargo xtask deny [CHECK...]       cargo deny check: licenses bans sources (advisories needs GitHub)
//! cargo xtask step-cost             a step at 8,000 steps costs at most twice one at 1,000
//! cargo xtask windows               cross-build for Windows, then end-to-end checks under Wine
//! ```
#![forbid(unsafe_code)]

mod deny;
mod fuzz;
mod prereq;
mod step_cost;
mod tidy;
mod timing;
mod windows;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

/// What a chore needs to know about where it runs.
pub(crate) struct Context {
    /// The workspace root (the clone).
    pub(crate) root: PathBuf,
    /// Slow builds shared across clones: `$HARNESS_CACHE_DIR`, else `$XDG_CACHE_HOME/harness`,
    /// else `~/.cache/harness`. CI runs in a fresh clone each time; this outlives it.
    pub(crate) cache: PathBuf,
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let context = match Context::new() {
        Ok(c) => c,
        Err(e) => return fail(&e),
    };
    let (command, rest) = match args.split_first() {
        Some((c, rest)) => (c.as_str(), rest),
        None => return usage(),
    };
    let result = match command {
        "test" => test(&context, rest),
        "setup" => prereq::ensure(&context, rest).map(|_| ()),
        "env" => print_env(&context, rest),
        "fuzz" => fuzz::fuzz(&context, rest),
        "deny" => deny::deny(&context, rest),
        "list" => {
            prereq::list();
            Ok(())
        }
        "tidy" => tidy::check(&context.root),
        "step-cost" => step_cost::step_cost(&context),
        "windows" => windows::windows(&context),
        _ => return usage(),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(&e),
    }
}

fn usage() -> ExitCode {
    eprintln!(
        "usage: cargo xtask test [-- CARGO_TEST_ARGS...] | setup [NAME...] | env [NAME...] | list | fuzz [TARGET[=SECS]...] | deny [CHECK...] | tidy | step-cost | windows"
    );
    ExitCode::from(2)
}

fn fail(message: &str) -> ExitCode {
    eprintln!("xtask: {message}");
    ExitCode::FAILURE
}

impl Context {
    fn new() -> Result<Self, String> {
        // This crate sits in xtask/ of the workspace it serves.
        let root = match Path::new(env!("CARGO_MANIFEST_DIR")).parent() {
            Some(root) => root.to_path_buf(),
            None => std::env::current_dir().map_err(|e| format!("cannot read the current directory: {e}"))?,
        };
        let cache = if let Some(dir) = std::env::var_os("HARNESS_CACHE_DIR") {
            PathBuf::from(dir)
        } else if let Some(dir) = std::env::var_os("XDG_CACHE_HOME") {
            PathBuf::from(dir).join("harness")
        } else if let Some(home) = std::env::var_os("HOME") {
            PathBuf::from(home).join(".cache/harness")
        } else {
            return Err("no cache directory: set HARNESS_CACHE_DIR (or HOME) to a writable directory".into());
        };
        Ok(Self { root, cache })
    }
}

/// The tests that need a prerequisite of `prereq/` (a server, a browser, a scheduler, a model),
/// as `cargo test` filters, each with what it needs: `cargo xtask test --quick` leaves them
/// out, and says which. The tidy check holds this list to the tests that read a prerequisite.
pub(crate) const NEEDS_PREREQUISITE: &[(&str, &str)] = &[
    ("llama::", "llama-server and SmolLM2 (llama)"),
    ("eval::smollm2_on_a_real_llama_server", "llama-server and SmolLM2 (llama)"),
    ("otel::phoenix", "Arize Phoenix (phoenix)"),
    ("slurm::", "Slurm and munge (slurm)"),
    ("trace::the_html_report_renders_in_headless_chromium", "Chromium (chromium)"),
    ("mcp::conformance::", "the MCP conformance suite and Node 22 (conformance)"),
];

fn test(context: &Context, rest: &[String]) -> Result<(), String> {
    let (quick, rest) = match rest.split_first() {
        Some((flag, rest)) if flag == "--quick" => (true, rest),
        _ => (false, rest),
    };
    let vars = if quick { prereq::Vars::new() } else { prereq::ensure(context, &[])? };
    let extra = match rest.split_first() {
        Some((dashes, args)) if dashes == "--" => args,
        _ => rest,
    };
    // Arguments of the user's own (a package, a filter) run as given, untimed.
    let runner = if extra.is_empty() { timing::runner()? } else { None };
    let filters = filters(extra, quick, runner.is_some());
    let cargo_test = |targets: &[&str], args: &[&str]| {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let shown = [targets, &filters.iter().map(String::as_str).collect::<Vec<_>>(), args].concat();
        eprintln!("== cargo test --workspace --no-fail-fast {}", shown.join(" "));
        let mut command = Command::new(cargo);
        command
            .current_dir(&context.root)
            .args(["test", "--workspace", "--no-fail-fast"])
            .args(shown)
            .envs(vars.clone())
            .envs(snapshot_env())
            .env_remove("INSTA_FORCE_PASS");
        command
    };
    let Some((key, runner)) = runner else {
        return succeeded("cargo test", cargo_test(&[], &[]).status());
    };
    let mut timed = cargo_test(&["--tests"], &timing::REPORT_TIME);
    timed.env(key, runner);
    let (status, times) = timing::run_timed(timed)?;
    // Doc tests run inside rustdoc, which takes no runner: apart, untimed.
    let docs = cargo_test(&["--doc"], &[]).status();
    for line in timing::slowest(times) {
        eprintln!("{line}");
    }
    succeeded("cargo test", Ok(status)).and(succeeded("cargo test --doc", docs))
}

/// The test binaries' arguments, past cargo's own `--`: the user's, the skips of the quick
/// tier (which it prints), and room for the timing flags when the run is timed.
fn filters(extra: &[String], quick: bool, timed: bool) -> Vec<String> {
    let mut filters: Vec<String> = extra.to_vec();
    if (quick || timed) && !filters.iter().any(|a| a == "--") {
        filters.push("--".to_owned());
    }
    if quick {
        eprintln!("== quick: the tests that need a prerequisite are left out (`cargo xtask test` runs them):");
        for (filter, needs) in NEEDS_PREREQUISITE {
            eprintln!("   {filter:55} needs {needs}");
            filters.extend(["--skip".to_owned(), (*filter).to_owned()]);
        }
    }
    filters
}

/// Whether a command that ran succeeded; the error names it and how it ended.
fn succeeded(what: &str, status: std::io::Result<std::process::ExitStatus>) -> Result<(), String> {
    match status {
        Ok(status) if status.success() => Ok(()),
        Ok(status) => Err(format!("{what} failed ({status})")),
        Err(e) => Err(format!("cannot run {what}: {e}")),
    }
}

/// The snapshot tests (insta) compare and never write: a missing or changed snapshot fails the
/// run with its diff, never becomes the new expectation unseen. A developer who asks for
/// updates (`INSTA_UPDATE=always`, then review the diff) still gets them.
fn snapshot_env() -> Vec<(&'static str, String)> {
    vec![("INSTA_UPDATE", std::env::var("INSTA_UPDATE").unwrap_or_else(|_| "no".into()))]
}

fn print_env(context: &Context, names: &[String]) -> Result<(), String> {
    for (key, value) in prereq::ensure(context, names)? {
        println!("export {key}='{}'", value.replace('\'', "'\\''"));
    }
    Ok(())
}

/// Runs a command to completion; the error names it and how it ended.
pub(crate) fn run(command: &mut Command) -> Result<(), String> {
    let shown = format!("{command:?}");
    let status = command.status().map_err(|e| format!("cannot start {shown}: {e}"))?;
    if status.success() { Ok(()) } else { Err(format!("{shown} failed ({status})")) }
}

/// The cargo subcommand `name` at `version`, from the cache directory (outside the clone, so
/// that a fresh clone does not build it again), installed there from crates.io the first time.
pub(crate) fn cached_install(context: &Context, name: &str, version: &str) -> Result<PathBuf, String> {
    let root = context.cache.join(format!("{name}-{version}"));
    let binary = root.join("bin").join(name);
    if binary.is_file() {
        return Ok(binary);
    }
    eprintln!("== installing {name} {version} into {} (once, a few minutes)", root.display());
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    run(Command::new(cargo).args(["install", name, "--locked", "--version", version, "--root"]).arg(&root)).map_err(
        |e| {
            format!(
                "{e}; install it by hand with: cargo install {name} --locked --version {version} --root {}",
                root.display()
            )
        },
    )?;
    if binary.is_file() { Ok(binary) } else { Err(format!("{} is missing after the install", binary.display())) }
}

/// Whether a program is on PATH.
pub(crate) fn on_path(program: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(program).is_file()))
}

/// Whether this process runs as root (so that it may install Debian packages).
pub(crate) fn is_root() -> bool {
    Command::new("id").arg("-u").output().is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// Installs Debian packages when root; otherwise the error is the command to run.
pub(crate) fn apt_install(packages: &[&str], why: &str) -> Result<(), String> {
    let command = format!("apt-get update && apt-get install -y {}", packages.join(" "));
    if !is_root() || !on_path("apt-get") {
        return Err(format!("{why} needs Debian packages that are missing; run as root: {command}"));
    }
    eprintln!("== installing {} ({why})", packages.join(" "));
    run(Command::new("apt-get").args(["update", "-qq"]))?;
    run(Command::new("apt-get").args(["install", "-y", "-qq"]).args(packages).env("DEBIAN_FRONTEND", "noninteractive"))
        .map_err(|e| format!("{e}; run as root: {command}"))
}
