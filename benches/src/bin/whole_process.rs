//! Whole-process numbers: the `harness` binary against the Python reference loop.
//!
//! ```text
//! cargo run --release -p harness-bench --bin whole-process -- [options]
//!   --python PATH        the venv's python with jsonschema [$HARNESS_BENCH_PYTHON, else /tmp/bench-venv/bin/python]
//!   --no-python          the harness alone
//!   --steps LIST         scripted steps per run [100,1000,10000]
//!   --plugins LIST       distinct plugins for the start-up runs [1,10,50]
//!   --repeats N          runs of each fast case [5]
//!   --slow-repeats N     runs of the Python per-call case [3]
//!   --startup-only       only the start-up runs (no scripted step runs)
//!   --signed             exec to first router call also with the most plugins signed
//! ```
//!
//! For each step count it writes one script (N-1 `calculate` calls, then `finish`) and runs,
//! on that same file, `harness run --script` and `benches/reference/loop.py` in both modes,
//! (at the largest count, also a script of fenced text replies and one whose arguments are
//! JSON strings, as OpenAI-compatible servers send them),
//! interleaved run by run so that noise from other work on the machine falls on all of
//! them. Each run is one fresh process: wall time from spawn to exit, and the peak resident
//! memory (`ru_maxrss`) and CPU time the kernel reports for that child through `wait4(2)`.
//! Then start-up: a one-step run (`finish`) with 0, 1, 10 and 50 distinct plugins (the
//! `numbered` fixture built once per name, `harness_bench::numbered_plugins`), exec to exit;
//! and exec to first router call: the same files, the harness against a fake model server on
//! a loopback port that times the arrival of its first request (`harness_bench::first_call`).
//!
//! The step runs load only a copy of the calc library (`--no-default-plugins --plugins-dir`),
//! so that the run does not depend on whatever else sits in `target/release`. That copy is not
//! beside the harness, so it runs in a confined child unless asked: the harness rows pass
//! `--isolation in-process`, and the `--isolation process` row is what it costs by default.
//! Python set-up: see benches/reference/requirements.txt. Not run by CI.

use std::fmt::Write as _;
#[cfg(unix)]
use std::fs::File;
#[cfg(unix)]
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
#[cfg(unix)]
use std::process::ExitStatus;
use std::process::{Command, Stdio};
#[cfg(unix)]
use std::time::Instant;

use harness_bench::{Shape, first_call, library_file_name, median, numbered_plugins, release_dir, script};
use serde_json::Value;

/// One finished child process.
struct Measured {
    wall_ms: f64,
    cpu_ms: f64,
    max_rss_kb: u64,
}

/// Elsewhere there is no `wait4`: the benchmark says so rather than measure something else.
#[cfg(not(unix))]
fn measure(_: &mut Command, _: &Path) -> Result<(Measured, String), String> {
    Err("whole-process measures each run with wait4(2) (CPU time, peak memory): run it on Unix".to_owned())
}

/// Runs `cmd` to its end with stdout and stderr in files; returns the measurement and stdout.
#[cfg(unix)]
fn measure(cmd: &mut Command, scratch: &Path) -> Result<(Measured, String), String> {
    let out_path = scratch.join("stdout.txt");
    let err_path = scratch.join("stderr.txt");
    let out = File::create(&out_path).map_err(|e| e.to_string())?;
    let err = File::create(&err_path).map_err(|e| e.to_string())?;
    cmd.stdin(Stdio::null()).stdout(out).stderr(err);
    let started = Instant::now();
    let child = cmd.spawn().map_err(|e| format!("cannot start {cmd:?}: {e}"))?;
    let pid = libc::pid_t::try_from(child.id()).map_err(|e| e.to_string())?;
    let mut status: libc::c_int = 0;
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    loop {
        // SAFETY: `pid` is our own child, not yet reaped (std's `Child` never waited for it);
        // `status` and `usage` point at writable memory of the right types.
        let reaped = unsafe { libc::wait4(pid, &mut status, 0, usage.as_mut_ptr()) };
        if reaped == pid {
            break;
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(format!("wait4 failed: {e}"));
        }
    }
    let wall_ms = started.elapsed().as_secs_f64() * 1e3;
    // SAFETY: wait4 returned the pid, so it filled `usage` (and it was zeroed before).
    let usage = unsafe { usage.assume_init() };
    let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    let cpu_ms = (seconds(usage.ru_utime) + seconds(usage.ru_stime)) * 1e3;
    let max_rss_kb = u64::try_from(usage.ru_maxrss).unwrap_or(0);
    let exit = ExitStatus::from_raw(status);
    let stdout = std::fs::read_to_string(&out_path).unwrap_or_default();
    if !matches!(exit.code(), Some(0)) {
        let stderr = std::fs::read_to_string(&err_path).unwrap_or_default();
        return Err(format!("{cmd:?} ended with {exit}:\n{stdout}\n{stderr}"));
    }
    Ok((Measured { wall_ms, cpu_ms, max_rss_kb }, stdout))
}

/// Checks the one JSON object a run prints: finished, after the expected number of steps.
fn check_outcome(stdout: &str, steps: usize, who: &str) -> Result<Value, String> {
    let line = stdout.lines().last().unwrap_or("");
    let outcome: Value = serde_json::from_str(line).map_err(|e| format!("{who} printed {stdout:?}: {e}"))?;
    if outcome["status"] != "finished" || outcome["steps"].as_u64() != Some(steps as u64) {
        return Err(format!("{who}: expected finished after {steps} steps, got {outcome}"));
    }
    Ok(outcome)
}

/// Step lines of a trace: lines with a `step` field (the harness's trace also has a first and a
/// last line, about the run; the Python reference writes steps only).
fn count_lines(path: &Path) -> usize {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines().filter(|l| serde_json::from_str::<Value>(l).is_ok_and(|v| v.get("step").is_some())).count()
}

/// The runs of one case.
#[derive(Default)]
struct Series {
    runs: Vec<Measured>,
    /// The Python loop's own time per step (excluding interpreter start and imports), in µs.
    loop_us_per_step: Vec<f64>,
}

impl Series {
    fn wall(&self) -> Vec<f64> {
        self.runs.iter().map(|m| m.wall_ms).collect()
    }
    fn median_ms(&self) -> f64 {
        median(&self.wall())
    }
    fn min_ms(&self) -> f64 {
        self.wall().into_iter().fold(f64::INFINITY, f64::min)
    }
    fn max_ms(&self) -> f64 {
        self.wall().into_iter().fold(0.0, f64::max)
    }
    fn cpu_ms(&self) -> f64 {
        median(&self.runs.iter().map(|m| m.cpu_ms).collect::<Vec<_>>())
    }
    fn peak_mb(&self) -> f64 {
        self.runs.iter().map(|m| m.max_rss_kb).max().unwrap_or(0) as f64 / 1024.0
    }
    fn row(&self, name: &str, steps: usize) -> String {
        let per_step = if steps > 0 { self.median_ms() * 1e3 / steps as f64 } else { f64::NAN };
        let inner = if self.loop_us_per_step.is_empty() {
            "-".to_owned()
        } else {
            format!("{:.1}", median(&self.loop_us_per_step))
        };
        format!(
            "| {name} | {steps} | {} | {:.2} | {:.2} – {:.2} | {:.2} | {:.1} | {:.2} | {inner} |",
            self.runs.len(),
            self.median_ms(),
            self.min_ms(),
            self.max_ms(),
            self.cpu_ms(),
            self.peak_mb(),
            per_step
        )
    }
}

struct Options {
    harness: PathBuf,
    /// The plugin cache every harness run uses (`HARNESS_PLUGIN_CACHE`): the benchmark's own,
    /// so that it neither reads nor fills the user's.
    cache: PathBuf,
    python: Option<PathBuf>,
    steps: Vec<usize>,
    plugins: Vec<usize>,
    repeats: usize,
    slow_repeats: usize,
    startup_only: bool,
    /// Also time exec to first router call with the most plugins signed by a trusted key.
    signed: bool,
}

fn list(value: &str) -> Result<Vec<usize>, String> {
    value.split(',').map(|v| v.trim().replace('_', "").parse().map_err(|e| format!("{v:?}: {e}"))).collect()
}

fn options() -> Result<Options, String> {
    let mut o = Options {
        harness: release_dir().join("harness"),
        cache: PathBuf::new(),
        python: Some(
            std::env::var_os("HARNESS_BENCH_PYTHON")
                .map_or_else(|| PathBuf::from("/tmp/bench-venv/bin/python"), Into::into),
        ),
        steps: vec![100, 1000, 10_000],
        plugins: vec![1, 10, 50],
        repeats: 5,
        slow_repeats: 3,
        startup_only: false,
        signed: false,
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{arg} needs a value"));
        match arg.as_str() {
            "--harness" => o.harness = value()?.into(),
            "--python" => o.python = Some(value()?.into()),
            "--no-python" => o.python = None,
            "--steps" => o.steps = list(&value()?)?,
            "--plugins" => o.plugins = list(&value()?)?,
            "--repeats" => o.repeats = value()?.parse().map_err(|e| format!("--repeats: {e}"))?,
            "--slow-repeats" => o.slow_repeats = value()?.parse().map_err(|e| format!("--slow-repeats: {e}"))?,
            "--startup-only" => o.startup_only = true,
            "--signed" => o.signed = true,
            "-h" | "--help" => {
                println!("see the comment at the top of benches/src/bin/whole_process.rs, or docs/benchmarks.md");
                std::process::exit(0);
            }
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(o)
}

/// The venv's python, when it exists and imports jsonschema; otherwise why not.
fn python_ready(python: &Path) -> Result<(), String> {
    let ok = Command::new(python)
        .args(["-c", "import jsonschema"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{} cannot import jsonschema; set up the reference with:\n  python3 -m venv /tmp/bench-venv && /tmp/bench-venv/bin/pip install -r benches/reference/requirements.txt",
            python.display()
        ))
    }
}

fn harness_run(
    o: &Options,
    script: &Path,
    steps: usize,
    plugins: &Path,
    trace: &Path,
    isolation: Option<&str>,
) -> Command {
    let mut cmd = Command::new(&o.harness);
    cmd.env("HARNESS_PLUGIN_CACHE", &o.cache);
    cmd.args(["run", "bench", "--script"]).arg(script);
    cmd.args(["--max-steps", &steps.to_string(), "--max-repeats", "0", "--json", "-q", "--no-default-plugins"]);
    cmd.arg("--plugins-dir").arg(plugins).arg("--trace").arg(trace);
    if let Some(mode) = isolation {
        cmd.args(["--isolation", mode]);
    }
    cmd
}

/// What runs the script.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// `harness run --isolation in-process`: the plugin in the harness's process, as the
    /// operator may choose (a copy outside the harness's directory runs in a child otherwise).
    Harness,
    /// `harness run --isolation process`: what the copy of calc costs by default.
    HarnessProcess,
    /// The Python reference, validators compiled once.
    PythonCompiled,
    /// The Python reference, `jsonschema.validate` per call.
    PythonPerCall,
}

impl Kind {
    fn name(self, shape: Shape) -> &'static str {
        match (self, shape) {
            (Kind::Harness, Shape::Structured) => "harness (Rust)",
            (Kind::Harness, Shape::Fenced) => "harness (Rust), fenced text replies",
            (Kind::Harness, Shape::TextArguments) => "harness (Rust), arguments as JSON text",
            (Kind::HarnessProcess, _) => "harness (Rust), --isolation process",
            (Kind::PythonCompiled, Shape::Structured) => "Python, compiled validators",
            (Kind::PythonCompiled, Shape::Fenced) => "Python, compiled validators, fenced text replies",
            (Kind::PythonCompiled, Shape::TextArguments) => "Python, compiled validators, arguments as JSON text",
            (Kind::PythonPerCall, _) => "Python, jsonschema.validate per call",
        }
    }
}

fn python_run(python: &Path, script: &Path, steps: usize, trace: &Path, mode: &str) -> Command {
    let reference = Path::new(env!("CARGO_MANIFEST_DIR")).join("reference").join("loop.py");
    let mut cmd = Command::new(python);
    cmd.arg(reference).arg("--script").arg(script).args(["--max-steps", &steps.to_string()]);
    cmd.arg("--trace").arg(trace).args(["--mode", mode]);
    cmd
}

/// One case: the command to run, and what to check and keep from each run.
struct Case<'a> {
    name: &'static str,
    command: Box<dyn Fn() -> Command + 'a>,
    repeats: usize,
    series: Series,
}

/// Runs the cases interleaved (one run of each in turn) and checks every run.
fn run_cases(cases: &mut [Case<'_>], steps: usize, trace: &Path, scratch: &Path) -> Result<(), String> {
    let rounds = cases.iter().map(|c| c.repeats).max().unwrap_or(0);
    for round in 0..rounds {
        for case in cases.iter_mut().filter(|c| round < c.repeats) {
            let (measured, stdout) = measure(&mut (case.command)(), scratch)?;
            let outcome = check_outcome(&stdout, steps, case.name)?;
            let lines = count_lines(trace);
            if lines != steps {
                return Err(format!("{}: the trace has {lines} lines, expected {steps}", case.name));
            }
            if let Some(us) = outcome["loop_us_per_step"].as_f64() {
                case.series.loop_us_per_step.push(us);
            }
            eprintln!("  {} {steps} steps, run {}: {:.1} ms", case.name, round + 1, measured.wall_ms);
            case.series.runs.push(measured);
        }
    }
    Ok(())
}

const HEADER: &str = "| case | steps | runs | wall ms (median) | wall ms (min – max) | CPU ms (median) | peak RSS MB | µs/step (wall/steps) | µs/step (Python loop alone) |\n|---|---|---|---|---|---|---|---|---|";

fn main() {
    if let Err(e) = real_main() {
        eprintln!("whole-process: {e}");
        std::process::exit(1);
    }
}

fn real_main() -> Result<(), String> {
    let mut o = options()?;
    let calc = harness_bench::build_release().calc;
    if let Some(python) = &o.python
        && let Err(e) = python_ready(python)
    {
        eprintln!("whole-process: the Python reference is skipped: {e}");
        o.python = None;
    }
    let scratch = tempfile::tempdir().map_err(|e| e.to_string())?;
    let dir = scratch.path();
    o.cache = dir.join("plugin-cache");
    let one_plugin = dir.join("plugins-1");
    std::fs::create_dir_all(&one_plugin).map_err(|e| e.to_string())?;
    std::fs::copy(&calc, one_plugin.join(library_file_name("calc"))).map_err(|e| e.to_string())?;
    let trace = dir.join("trace.jsonl");

    let mut report = String::new();
    let _ = writeln!(report, "\n### Whole process: {} run --script\n\n{HEADER}", o.harness.display());
    let mut ratios = Vec::new();
    // Median wall time of each kind of run, per step count (structured scripts only).
    let mut walls: Vec<(usize, Vec<(Kind, f64)>)> = Vec::new();
    let mut variants: Vec<(usize, Shape)> = o.steps.iter().map(|&s| (s, Shape::Structured)).collect();
    if let Some(&largest) = o.steps.iter().max() {
        // The other shapes a reply comes in: calls in model text, and structured calls whose
        // arguments are a JSON string (OpenAI-compatible servers), not an object (Anthropic).
        variants.push((largest, Shape::Fenced));
        variants.push((largest, Shape::TextArguments));
    }
    if o.startup_only {
        variants.clear();
    }
    for (steps, shape) in variants {
        let script_path = dir.join(format!("script-{steps}-{shape:?}.jsonl"));
        std::fs::write(&script_path, script(steps, shape)).map_err(|e| e.to_string())?;
        // The slow and isolated cases run on the structured scripts only.
        let structured = shape == Shape::Structured;
        let mut kinds = vec![Kind::Harness];
        if structured {
            kinds.push(Kind::HarnessProcess);
        }
        if o.python.is_some() {
            kinds.push(Kind::PythonCompiled);
            if structured {
                kinds.push(Kind::PythonPerCall);
            }
        }
        let (o, script_path, one_plugin, trace) = (&o, &script_path, &one_plugin, &trace);
        let mut cases: Vec<Case<'_>> = kinds
            .iter()
            .map(|&kind| Case {
                name: kind.name(shape),
                command: Box::new(move || match (kind, &o.python) {
                    // The copy of calc is not beside the harness: in-process only when asked.
                    (Kind::Harness, _) => harness_run(o, script_path, steps, one_plugin, trace, Some("in-process")),
                    (Kind::HarnessProcess, _) => harness_run(o, script_path, steps, one_plugin, trace, Some("process")),
                    (Kind::PythonCompiled, Some(py)) => python_run(py, script_path, steps, trace, "compiled"),
                    (_, py) => {
                        python_run(py.as_deref().unwrap_or(Path::new("python3")), script_path, steps, trace, "per-call")
                    }
                }),
                repeats: if kind == Kind::PythonPerCall { o.slow_repeats } else { o.repeats },
                series: Series::default(),
            })
            .collect();
        eprintln!("whole-process: {steps} steps ({shape:?})");
        run_cases(&mut cases, steps, trace, dir)?;
        for case in &cases {
            let _ = writeln!(report, "{}", case.series.row(case.name, steps));
        }
        let medians: Vec<(Kind, f64)> = kinds.iter().zip(&cases).map(|(&k, c)| (k, c.series.median_ms())).collect();
        let harness = medians[0].1;
        for &(kind, ms) in &medians[1..] {
            ratios.push(format!("| {steps} | {} | {:.1}x |", kind.name(shape), ms / harness));
        }
        if structured {
            walls.push((steps, medians));
        }
    }
    if !ratios.is_empty() {
        let _ = writeln!(
            report,
            "\n### Ratios: wall time of each case / the harness's in-process wall time (medians, same script)\n"
        );
        let _ = writeln!(report, "| steps | case | ratio |\n|---|---|---|");
        for r in &ratios {
            let _ = writeln!(report, "{r}");
        }
    }
    if walls.len() >= 2 {
        let _ = writeln!(report, "\n### Growth with steps: marginal cost of one more step between step counts (µs)\n");
        let kinds: Vec<Kind> = walls[0].1.iter().map(|&(k, _)| k).collect();
        let names: Vec<&str> = kinds.iter().map(|k| k.name(Shape::Structured)).collect();
        let _ = writeln!(report, "| from | to | {} |\n|---|---|{}", names.join(" | "), "---|".repeat(names.len()));
        for pair in walls.windows(2) {
            let ((a, wa), (b, wb)) = (&pair[0], &pair[1]);
            let per: Vec<String> =
                wa.iter().zip(wb).map(|(x, y)| format!("{:.1}", (y.1 - x.1) * 1e3 / (b - a) as f64)).collect();
            let _ = writeln!(report, "| {a} | {b} | {} |", per.join(" | "));
        }
    }

    // Start-up: one step (`finish`) with N distinct plugins; the whole process, exec to exit.
    let finish_script = dir.join("finish.jsonl");
    std::fs::write(&finish_script, script(1, Shape::Structured)).map_err(|e| e.to_string())?;
    let _ = writeln!(
        report,
        "\n### Start-up: exec to exit of a one-step run (`finish`), N distinct plugins (the `numbered` fixture)\n\n{HEADER}"
    );
    let mut counts = vec![0];
    counts.extend(o.plugins.iter().filter(|&&n| n != 0));
    let mut startup = Vec::new();
    for &n in &counts {
        let plugins = dir.join(format!("startup-{n}"));
        std::fs::create_dir_all(&plugins).map_err(|e| e.to_string())?;
        numbered_plugins(&plugins, n)?;
        let mut cases = vec![Case {
            name: "harness (Rust)",
            command: Box::new(|| harness_run(&o, &finish_script, 1, &plugins, &trace, None)),
            repeats: o.repeats * 4,
            series: Series::default(),
        }];
        eprintln!("whole-process: start-up with {n} plugins");
        run_cases(&mut cases, 1, &trace, dir)?;
        let s = &cases[0].series;
        startup.push((n, s.median_ms()));
        let _ = writeln!(report, "{}", s.row(&format!("harness, {n} plugins"), 1));
    }
    if let Some(python) = &o.python {
        let mut cases = vec![Case {
            name: "Python, compiled validators",
            command: Box::new(|| python_run(python, &finish_script, 1, &trace, "compiled")),
            repeats: o.repeats * 2,
            series: Series::default(),
        }];
        eprintln!("whole-process: Python start-up");
        run_cases(&mut cases, 1, &trace, dir)?;
        let _ = writeln!(report, "{}", cases[0].series.row("Python reference (interpreter + jsonschema import)", 1));
    }
    if let Some(&(_, base)) = startup.first() {
        let _ = writeln!(report, "\n| plugins | median ms | over 0 plugins, ms | per plugin, ms |\n|---|---|---|---|");
        for &(n, ms) in &startup {
            let per = if n > 0 { format!("{:.3}", (ms - base) / n as f64) } else { "-".to_owned() };
            let _ = writeln!(report, "| {n} | {ms:.2} | {:.2} | {per} |", ms - base);
        }
    }
    first_calls(&o, &counts, dir, &mut report)?;
    println!("{report}");
    Ok(())
}

/// Exec to first router call with each count of plugins (the directories the start-up
/// runs filled), `o.repeats * 4` runs each, interleaved: with the plugin cache filled by the
/// runs before (as every start-up after the first finds it), and with the cache off (every
/// file read through a plugin host, as the first start-up after a change).
/// `startup-N-signed`: the plugins of `startup-N`, each signed with a key made for the run,
/// and a user configuration (under the returned `XDG_CONFIG_HOME`) that trusts that key, so
/// that every plugin is verified as a signed one.
fn signed_copies(o: &Options, dir: &Path, n: usize) -> Result<PathBuf, String> {
    let run = |args: &[&std::ffi::OsStr]| -> Result<String, String> {
        let out = Command::new(&o.harness).args(args).output().map_err(|e| e.to_string())?;
        match out.status.success() {
            true => Ok(String::from_utf8_lossy(&out.stdout).into_owned()),
            false => Err(format!("harness {args:?}: {}", String::from_utf8_lossy(&out.stderr))),
        }
    };
    let key = dir.join("bench-signing.key");
    if !key.exists() {
        run(&["plugins".as_ref(), "keygen".as_ref(), "--out".as_ref(), key.as_os_str()])?;
    }
    let public = std::fs::read_to_string(key.with_extension("key.pub")).map_err(|e| e.to_string())?;
    let public = public.lines().find(|l| l.starts_with("RW")).ok_or("no public key in the .pub file")?;
    let config = dir.join("xdg");
    std::fs::create_dir_all(config.join("harness")).map_err(|e| e.to_string())?;
    let trust = format!("[[trust.publishers]]\nname = \"bench\"\nkey = \"{public}\"\n");
    std::fs::write(config.join("harness/config.toml"), trust).map_err(|e| e.to_string())?;
    let signed = dir.join(format!("startup-{n}-signed"));
    std::fs::create_dir_all(&signed).map_err(|e| e.to_string())?;
    for entry in std::fs::read_dir(dir.join(format!("startup-{n}"))).map_err(|e| e.to_string())? {
        let from = entry.map_err(|e| e.to_string())?.path();
        let to = signed.join(from.file_name().unwrap_or_default());
        std::fs::copy(&from, &to).map_err(|e| e.to_string())?;
        run(&["plugins".as_ref(), "sign".as_ref(), to.as_os_str(), "--key".as_ref(), key.as_os_str()])?;
    }
    Ok(config)
}

fn first_calls(o: &Options, counts: &[usize], dir: &Path, report: &mut String) -> Result<(), String> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    let port = listener.local_addr().map_err(|e| e.to_string())?.port();
    let mut cases: Vec<(usize, bool, bool)> =
        counts.iter().flat_map(|&n| [(n, true, false), (n, false, false)]).collect();
    let mut config = None;
    if let Some(&n) = counts.iter().max().filter(|_| o.signed) {
        config = Some(signed_copies(o, dir, n)?);
        cases.extend([(n, true, true), (n, false, true)]);
    }
    let mut firsts: Vec<Vec<f64>> = vec![Vec::new(); cases.len()];
    let mut exits: Vec<Vec<f64>> = vec![Vec::new(); cases.len()];
    eprintln!("whole-process: exec to first router call");
    for _ in 0..o.repeats * 4 {
        for (i, &(n, cached, signed)) in cases.iter().enumerate() {
            let plugins = dir.join(if signed { format!("startup-{n}-signed") } else { format!("startup-{n}") });
            let mut cmd = first_call::harness_command(&o.harness, port, &plugins);
            // Every run reads the same user configuration: the signed runs' trust is no
            // difference between the series.
            if let Some(config) = &config {
                cmd.env("XDG_CONFIG_HOME", config);
            }
            cmd.env("HARNESS_PLUGIN_CACHE", if cached { o.cache.as_os_str() } else { "off".as_ref() });
            let run = first_call::measure(&mut cmd, &listener)?;
            firsts[i].push(run.first_ms);
            exits[i].push(run.exit_ms);
        }
    }
    let _ = writeln!(
        report,
        "\n### Exec to first router call: spawn to the first request's last byte at a loopback model server\n"
    );
    let _ = writeln!(
        report,
        "| plugins | plugin cache | runs | first call ms (median) | min – max | exit ms (median) |\n|---|---|---|---|---|---|"
    );
    for (i, &(n, cached, signed)) in cases.iter().enumerate() {
        let f = &firsts[i];
        let (min, max) = f.iter().fold((f64::INFINITY, 0.0f64), |(a, b), &x| (a.min(x), b.max(x)));
        let cache = if cached { "filled" } else { "off" };
        let n = if signed { format!("{n} signed") } else { n.to_string() };
        let _ = writeln!(
            report,
            "| {n} | {cache} | {} | {:.2} | {min:.2} – {max:.2} | {:.2} |",
            f.len(),
            median(f),
            median(&exits[i])
        );
    }
    Ok(())
}
