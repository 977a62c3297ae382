//! The end-to-end checks of the Windows leg: `harness.exe` and its `.dll` plugins under Wine,
//! asserting on `--json` output, traces and exit codes, never on prose. Each failure says what
//! failed and the commands that reproduce it (every command a check runs is written to
//! `commands.txt` in its directory); every check runs, then the leg fails if any did.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{Leg, TARGET, cross_cargo};

/// The file, in a check's directory, of the commands it ran, one a line, as shell lines.
const COMMANDS: &str = "commands.txt";

/// The most one command under Wine may take before it counts as hung.
const PATIENCE: Duration = Duration::from_secs(180);

/// What a command did.
struct Ran {
    code: Option<i32>,
    stdout: String,
    stderr: String,
    took: Duration,
}

impl Ran {
    /// The last line of stdout as JSON (`--json` prints one object last).
    fn json(&self) -> Result<Value, String> {
        let line = self.stdout.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("");
        serde_json::from_str(line).map_err(|e| format!("stdout's last line is not JSON ({e}): {line:?}"))
    }

    /// Fails unless the command exited with `code`.
    fn expect_code(&self, code: i32) -> Result<(), String> {
        if self.code == Some(code) {
            return Ok(());
        }
        let tail: Vec<&str> = self.stderr.lines().rev().take(8).collect();
        Err(format!("exit code {:?}, expected {code}; stderr ends: {}", self.code, tail.join(" | ")))
    }
}

/// One check: its name, and what it does given the leg and its own scratch directory.
type Check = (&'static str, fn(&Leg, &Path) -> Result<(), String>);

const CHECKS: &[Check] = &[
    ("README's first command prints 42, again with calc.dll opened from the plugin cache", readme),
    ("plugins list: placement and what is not enforced", plugins_list),
    ("plugins check calc.dll", check_calc),
    ("run with --isolation process", run_process),
    ("an access violation, an abort, an exit in a child: tool_crashed, named; the run goes on", crash),
    ("a hang is killed at its deadline, the next call gets a fresh child", hang),
    ("[isolation] require = \"full\" refuses what is not enforced", require_full),
    ("a plugin directory Everyone may write is refused, with the icacls fix", open_directory),
    ("config trust without HOME: the store under USERPROFILE, ./harness.toml then read", trust_store),
    ("a scaffolded plugin builds as a .dll and passes plugins check", scaffold),
];

/// Runs every check, each in a fresh directory under the leg's scratch; the failures, named.
pub(super) fn run_all(leg: &mut Leg) -> Result<(), String> {
    let _ = std::fs::remove_dir_all(&leg.scratch);
    let mut failed = Vec::new();
    for (i, (name, check)) in CHECKS.iter().enumerate() {
        let dir = leg.scratch.join(format!("{i}"));
        let t = Instant::now();
        let outcome = std::fs::create_dir_all(&dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))
            .and_then(|()| check(leg, &dir));
        let ms = t.elapsed().as_millis();
        match outcome {
            Ok(()) => eprintln!("   ok   {name} ({ms} ms)"),
            Err(why) => {
                eprintln!("   FAIL {name} ({ms} ms): {why}");
                let commands = std::fs::read_to_string(dir.join(COMMANDS)).unwrap_or_default();
                for line in commands.lines() {
                    eprintln!("        reproduce: {line}");
                }
                failed.push(*name);
            }
        }
        leg.timings.push((format!("check: {name}"), t.elapsed().as_secs_f64()));
    }
    if failed.is_empty() {
        Ok(())
    } else {
        Err(format!("{} of {} Windows checks failed: {}", failed.len(), CHECKS.len(), failed.join("; ")))
    }
}

/// Runs `cmd` to its end (killed after [`PATIENCE`]), its output in `dir`, and adds it to the
/// check's [`COMMANDS`].
fn exec(mut cmd: Command, dir: &Path) -> Result<Ran, String> {
    let shown = reproduce(&cmd, cmd.get_current_dir().unwrap_or(dir));
    record(dir, &shown)?;
    let (out, err) = (dir.join("stdout.txt"), dir.join("stderr.txt"));
    let file = |p: &Path| std::fs::File::create(p).map_err(|e| format!("cannot create {}: {e}", p.display()));
    cmd.stdin(Stdio::null()).stdout(file(&out)?).stderr(file(&err)?);
    let started = Instant::now();
    let mut child = cmd.spawn().map_err(|e| format!("cannot start {shown}: {e}"))?;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if started.elapsed() > PATIENCE => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("no exit within {} s: {shown}", PATIENCE.as_secs()));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err(format!("cannot wait for {shown}: {e}")),
        }
    };
    let read = |p: &Path| std::fs::read_to_string(p).unwrap_or_default();
    Ok(Ran { code: status.code(), stdout: read(&out), stderr: read(&err), took: started.elapsed() })
}

/// Adds `line` to the check's [`COMMANDS`] in `dir`.
fn record(dir: &Path, line: &str) -> Result<(), String> {
    use std::io::Write as _;
    let path = dir.join(COMMANDS);
    let file = std::fs::OpenOptions::new().create(true).append(true).open(&path);
    file.and_then(|mut f| writeln!(f, "{line}")).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// The command as a shell line, with the environment it was given and where it ran.
fn reproduce(cmd: &Command, dir: &Path) -> String {
    let env: Vec<String> =
        cmd.get_envs().filter_map(|(k, v)| Some(format!("{}={}", k.to_string_lossy(), v?.to_string_lossy()))).collect();
    let args: Vec<String> = cmd.get_args().map(|a| format!("'{}'", a.to_string_lossy())).collect();
    format!("cd {} && {} {} {}", dir.display(), env.join(" "), cmd.get_program().to_string_lossy(), args.join(" "))
}

/// Runs `harness.exe ARGS` under Wine in `dir`, expecting `code`; its run, or why it failed.
fn harness(leg: &Leg, dir: &Path, args: &[&str], code: i32) -> Result<Ran, String> {
    let mut cmd = leg.harness(dir);
    cmd.args(args);
    let ran = exec(cmd, dir)?;
    ran.expect_code(code).map_err(|e| format!("harness.exe {}: {e}", args.join(" ")))?;
    Ok(ran)
}

/// Fails with `what` and the way to reproduce it unless `ok`.
fn ensure(ok: bool, what: impl FnOnce() -> String) -> Result<(), String> {
    if ok { Ok(()) } else { Err(what()) }
}

fn answer_is_42(ran: &Ran) -> Result<(), String> {
    let v = ran.json()?;
    ensure(v["answer"] == json!(42) || v["answer"] == json!("42"), || format!("answer {}, expected 42", v["answer"]))
}

/// Twice: the first run (with the leg's plugin cache emptied) reads every manifest through a
/// plugin host and fills the cache; the second is answered by the cache and opens calc.dll
/// in-process at its first call.
fn readme(leg: &Leg, dir: &Path) -> Result<(), String> {
    let _ = std::fs::remove_dir_all(leg.plugin_cache());
    answer_is_42(&harness(leg, dir, &["run", "calculate 6*7", "--json"], 0)?)?;
    let entries = std::fs::read_dir(leg.plugin_cache()).map(|d| d.count()).unwrap_or(0);
    ensure(entries > 0, || format!("the first run left no plugin cache entry in {}", leg.plugin_cache().display()))?;
    answer_is_42(&harness(leg, dir, &["run", "calculate 6*7", "--json"], 0)?)
}

fn run_process(leg: &Leg, dir: &Path) -> Result<(), String> {
    answer_is_42(&harness(leg, dir, &["run", "calculate 6*7", "--json", "--isolation", "process"], 0)?)
}

/// The plugin named `name` in `plugins list --json`.
fn listed<'a>(list: &'a Value, name: &str) -> Result<&'a Value, String> {
    let plugins = list["plugins"].as_array().ok_or("plugins list --json has no plugins array")?;
    plugins.iter().find(|p| p["name"] == name).ok_or_else(|| format!("plugin {name:?} is not listed: {list}"))
}

fn plugins_list(leg: &Leg, dir: &Path) -> Result<(), String> {
    let list = harness(leg, dir, &["plugins", "list", "--json"], 0)?.json()?;
    let calc = listed(&list, "calc")?;
    ensure(calc["isolation"] == "in-process" && calc["placement"]["kind"] == "installed_beside_harness", || {
        format!(
            "calc: isolation {} placement {}, expected in-process beside the harness",
            calc["isolation"], calc["placement"]
        )
    })?;
    // The README check before this one filled the plugin cache: the identity of a file on
    // Windows holds from one run to the next.
    ensure(calc["from_cache"] == true, || format!("calc was not answered by the plugin cache: {calc}"))?;
    let files = listed(&list, "files")?;
    let reason = files["enforcement"]["reason"].as_str().unwrap_or("");
    ensure(files["isolation"] == "process" && files["enforcement"]["kind"] == "none", || {
        format!(
            "files: isolation {} enforcement {}, expected process and none",
            files["isolation"], files["enforcement"]
        )
    })?;
    ensure(reason.contains("Job Object") && reason.contains("reads+writes not enforced"), || {
        format!("files: the enforcement reason does not name what is not enforced: {reason:?}")
    })?;
    // Without SYSTEMROOT a Windows process cannot open a socket: the allowlist must carry it.
    let allowlist = &files["env"]["allowlist"];
    ensure(allowlist.as_array().is_some_and(|a| a.iter().any(|v| v == "SYSTEMROOT")), || {
        format!("files: the children's environment allowlist lacks SYSTEMROOT: {allowlist}")
    })
}

/// `plugins check FILE --json`, passed.
fn check_passes(leg: &Leg, dir: &Path, file: &Path) -> Result<(), String> {
    let file = file.to_string_lossy();
    let report = harness(leg, dir, &["plugins", "check", &file, "--json"], 0)?.json()?;
    ensure(report["passed"] == true, || format!("plugins check {file}: passed is {}", report["passed"]))
}

fn check_calc(leg: &Leg, dir: &Path) -> Result<(), String> {
    check_passes(leg, dir, &leg.release.join("calc.dll"))
}

/// Writes a script of tool calls (one JSON object a line) into `dir`.
fn script(dir: &Path, calls: &[Value]) -> Result<PathBuf, String> {
    let path = dir.join("script.jsonl");
    let text: String = calls.iter().map(|c| format!("{c}\n")).collect();
    std::fs::write(&path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    Ok(path)
}

fn call(tool: &str, arguments: Value) -> Value {
    json!({ "tool": tool, "arguments": arguments })
}

/// The step lines of the trace `t.jsonl` in `dir`.
fn steps(dir: &Path) -> Result<Vec<Value>, String> {
    let path = dir.join("t.jsonl");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("no trace at {}: {e}", path.display()))?;
    Ok(text.lines().filter_map(|l| serde_json::from_str::<Value>(l).ok()).filter(|v| v.get("step").is_some()).collect())
}

/// Runs a script of calls to the `fault` plugin in process isolation; its steps.
fn fault_run(leg: &Leg, dir: &Path, calls: &[Value], extra: &[&str]) -> Result<(Ran, Vec<Value>), String> {
    script(dir, calls)?;
    let mut args = vec!["run", "x", "--json", "--enable", "fault", "--isolation", "process", "--trace", "t.jsonl"];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--script", "script.jsonl"]);
    let ran = harness(leg, dir, &args, 0)?;
    let answer = ran.json()?["answer"].clone();
    ensure(answer == "reached finish", || format!("answer {answer}, expected the run to finish"))?;
    Ok((ran, steps(dir)?))
}

fn finish() -> Value {
    call("finish", json!({"answer": "reached finish"}))
}

fn crash(leg: &Leg, dir: &Path) -> Result<(), String> {
    let calls = [
        call("fault_segfault", json!({})),
        call("fault_abort", json!({})),
        call("fault_exit", json!({"code": 7})),
        call("fault_panic", json!({"message": "kaboom"})),
        call("fault_echo", json!({"value": "still here"})),
        finish(),
    ];
    let (_, t) = fault_run(leg, dir, &calls, &[])?;
    let codes: Vec<&str> = t.iter().map(|s| s["error"]["code"].as_str().unwrap_or("-")).collect();
    let expected = ["tool_crashed", "tool_crashed", "tool_crashed", "tool_panicked", "-", "-"];
    ensure(codes == expected, || format!("error codes {codes:?}, expected {expected:?}"))?;
    // How each child ended, named: the exception code Windows gives it, or its exit status.
    for (step, named) in [(0, "0xC0000005"), (1, "0xC0000409"), (2, "exited with status 7")] {
        let message = t[step]["error"]["message"].as_str().unwrap_or("");
        ensure(message.contains(named), || format!("step {}'s crash does not name {named}: {message:?}", step + 1))?;
    }
    ensure(t[4]["result"] == "still here", || "the call after the crashes did not run".to_owned())?;
    // The trace's first line says what this platform does not enforce of the plugin.
    let start = first_line(dir)?;
    let unenforced = &start["unenforced"][0];
    ensure(unenforced["plugin"] == "fault" && unenforced["effects"] == "pure", || {
        format!("the trace's first line does not list fault as unenforced: {}", start["unenforced"])
    })
}

/// The first line of the trace `t.jsonl` in `dir`.
fn first_line(dir: &Path) -> Result<Value, String> {
    let path = dir.join("t.jsonl");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("no trace at {}: {e}", path.display()))?;
    serde_json::from_str(text.lines().next().unwrap_or("")).map_err(|e| format!("its first line is not JSON: {e}"))
}

fn hang(leg: &Leg, dir: &Path) -> Result<(), String> {
    let calls = [call("fault_sleep", json!({"ms": 60_000})), call("fault_echo", json!({"value": 1})), finish()];
    let (ran, t) = fault_run(leg, dir, &calls, &["--tool-timeout", "2"])?;
    let first = &t.first().ok_or("the trace has no steps")?["error"]["code"];
    ensure(first == "tool_timeout", || format!("first step's error code {first}, expected tool_timeout"))?;
    ensure(t.get(1).is_some_and(|s| s["result"] == 1), || "the call after the hang did not run".to_owned())?;
    // The 60 s sleep was cut at 2 s; Wine's start-up of the harness and two children adds a few.
    ensure(ran.took < Duration::from_secs(30), || format!("the run took {:?}: the hang was not cut", ran.took))
}

fn require_full(leg: &Leg, dir: &Path) -> Result<(), String> {
    let config = dir.join("harness.toml");
    std::fs::write(&config, "[isolation]\nrequire = \"full\"\n")
        .map_err(|e| format!("cannot write the config: {e}"))?;
    let list = harness(leg, dir, &["plugins", "list", "--json", "--config", "harness.toml"], 0)?.json()?;
    let skipped = list["skipped"].as_array().cloned().unwrap_or_default();
    let files = skipped.iter().find(|s| s["reason"].as_str().is_some_and(|r| r.contains("plugin \"files\"")));
    let reason = files.and_then(|s| s["reason"].as_str()).unwrap_or("");
    ensure(reason.contains("full enforcement is required") && reason.contains("not enforced"), || {
        format!("files is not refused for want of enforcement; skipped: {}", json!(skipped))
    })?;
    ensure(listed(&list, "files").is_err(), || "files is still listed as loaded".to_owned())
}

/// Wine makes a file's access list from its Unix mode: a directory of mode 777 is one that
/// Everyone may write, and a plugin in it is refused; the same file in a 755 one loads.
fn open_directory(leg: &Leg, dir: &Path) -> Result<(), String> {
    for (name, mode) in [("open", 0o777), ("closed", 0o755)] {
        let sub = dir.join(name);
        std::fs::create_dir_all(&sub).map_err(|e| format!("cannot create {}: {e}", sub.display()))?;
        std::fs::copy(leg.release.join("calc.dll"), sub.join("calc.dll"))
            .map_err(|e| format!("cannot copy calc.dll: {e}"))?;
        set_mode(&sub, mode)?;
    }
    let listed_in = |name: &str| {
        let args = ["plugins", "list", "--json", "--no-default-plugins", "--plugins-dir", name];
        harness(leg, dir, &args, 0).and_then(|ran| ran.json())
    };
    let open = listed_in("open")?;
    let reason = open["skipped"][0]["reason"].as_str().unwrap_or("");
    ensure(reason.contains("writable by Everyone") && reason.contains("icacls"), || {
        format!("calc.dll in a directory of mode 777 is not refused as writable by Everyone: {open}")
    })?;
    let closed = listed_in("closed")?;
    listed(&closed, "calc").map(|_| ())
}

#[cfg(unix)]
fn set_mode(path: &Path, mode: u32) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .map_err(|e| format!("cannot chmod {}: {e}", path.display()))
}

/// The leg runs Wine on Linux; elsewhere there is no Unix mode to set.
#[cfg(not(unix))]
fn set_mode(path: &Path, _: u32) -> Result<(), String> {
    Err(format!("cannot set a Unix mode on {}: the Windows leg runs on Linux", path.display()))
}

/// Windows sets `USERPROFILE`, not `HOME`: with `HOME` removed, `config trust` keeps its store
/// under the profile, and a run's `config show` then reads `./harness.toml` as trusted.
fn trust_store(leg: &Leg, dir: &Path) -> Result<(), String> {
    std::fs::write(dir.join("harness.toml"), "max_steps = 3\n").map_err(|e| format!("cannot write the config: {e}"))?;
    let without_home = |args: &[&str]| {
        let mut cmd = leg.harness(dir);
        cmd.env_remove("HOME").env_remove("XDG_CONFIG_HOME").args(args);
        let ran = exec(cmd, dir)?;
        ran.expect_code(0).map_err(|e| format!("harness.exe {}: {e}", args.join(" ")))?;
        Ok::<_, String>(ran)
    };
    // An earlier run's store would pass what follows without this run's trust.
    let users = leg.prefix.join("drive_c/users");
    for user in std::fs::read_dir(&users).map_err(|e| format!("cannot list {}: {e}", users.display()))?.flatten() {
        let _ = std::fs::remove_dir_all(user.path().join(".config/harness"));
    }
    without_home(&["config", "trust", "harness.toml"])?;
    let shown = without_home(&["config", "show", "--json"])?.json()?;
    ensure(shown["file"]["chosen"] == "trusted", || {
        format!("./harness.toml is not read as trusted: {}", shown["file"])
    })?;
    let stores = std::fs::read_dir(&users).map_err(|e| format!("cannot list {}: {e}", users.display()))?;
    let found = stores.flatten().any(|u| u.path().join(".config/harness/trusted.json").is_file());
    ensure(found, || format!("no .config/harness/trusted.json under a profile in {}", users.display()))
}

fn scaffold(leg: &Leg, dir: &Path) -> Result<(), String> {
    // The SDK is not published yet: the scaffold depends on this checkout's, named as Wine
    // shows it (drive Z: is the root of the Linux file system).
    let sdk = format!("Z:{}", leg.root.join("crates/harness-sdk").display()).replace('/', "\\");
    harness(leg, dir, &["plugins", "new", "demo", "--sdk-path", &sdk], 0)?;
    let crate_dir = dir.join("demo");
    linux_paths(&crate_dir.join("Cargo.toml"))?;
    // Its own target directory, kept between runs: the SDK's dependencies build once.
    let target_dir = leg.work.join("scaffold-target");
    let mut build = cross_cargo(&crate_dir);
    build.args(["build", "--release", "--target", TARGET, "--target-dir"]).arg(&target_dir);
    exec(build, dir)?.expect_code(0).map_err(|e| format!("the scaffold does not build: {e}"))?;
    check_passes(leg, dir, &target_dir.join(TARGET).join("release/demo.dll"))
}

/// Rewrites the Windows paths `harness.exe` wrote into a scaffold's `Cargo.toml` (Wine shows
/// Linux's `/` as drive `Z:`) as the Linux paths they are, for the Linux cargo that cross-builds
/// it. On Windows, cargo reads them as written.
fn linux_paths(manifest: &Path) -> Result<(), String> {
    let text = std::fs::read_to_string(manifest).map_err(|e| format!("no scaffold at {}: {e}", manifest.display()))?;
    let fixed: String = text
        .lines()
        .map(|l| match l.split_once("path = \"Z:") {
            Some((head, rest)) => format!("{head}path = \"{}", rest.replace("\\\\", "/")),
            None => l.to_owned(),
        })
        .map(|l| l + "\n")
        .collect();
    std::fs::write(manifest, fixed).map_err(|e| format!("cannot write {}: {e}", manifest.display()))
}
