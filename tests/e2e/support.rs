//! Building the plugins, running the binary, reading its output and trace.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use serde_json::Value;

/// The workspace plugins every test may use, and the fixtures built beside them.
const PLUGINS: &[&str] = &["calc", "chem", "files", "fault"];
const FIXTURES: &[&str] = &[
    "abi-future",
    "clash",
    "conformance",
    "check-bad-schema",
    "check-wrong-example",
    "check-panics",
    "check-hangs",
    "check-duplicate",
    "check-bad-result",
    "effects-liar",
    "load-abort",
    "load-marker",
    "net-client",
];

/// The settings the environment may give (docs/operators.md), removed from every test's command.
const SETTING_VARIABLES: &[&str] = &[
    "HARNESS_PROVIDER",
    "HARNESS_MODEL",
    "HARNESS_BASE_URL",
    "HARNESS_API_KEY_ENV",
    "HARNESS_TOOL_CHOICE",
    "HARNESS_ROUTER_MODE",
    "HARNESS_REPLY_FORMAT",
    "HARNESS_TIMEOUT",
    "HARNESS_CONNECT_TIMEOUT",
    "HARNESS_RETRIES",
    "HARNESS_MAX_REPLY_TOKENS",
    "HARNESS_CONTEXT_TOKENS",
    "HARNESS_MAX_STEPS",
    "HARNESS_MAX_REPEATS",
    "HARNESS_MAX_TRUNCATED",
    "HARNESS_MAX_SECONDS",
    "HARNESS_TOOL_TIMEOUT",
];

/// The directory that holds the `harness` binary and, once built, the workspace's plugins.
pub(crate) fn bin_dir() -> PathBuf {
    Path::new(env!("CARGO_BIN_EXE_harness")).parent().expect("binary has a directory").to_path_buf()
}

fn lib_file(name: &str) -> String {
    format!("{}{}{}", std::env::consts::DLL_PREFIX, name.replace('-', "_"), std::env::consts::DLL_SUFFIX)
}

/// Set in a test binary's environment by `cargo xtask test`, so that libtest prints each
/// test's time (xtask/src/timing.rs); every cargo a test runs must go without it, or cargo
/// would rebuild the tree (proc-macro2 and others probe for nightly features under it).
pub(crate) const BOOTSTRAP: &str = "RUSTC_BOOTSTRAP";

/// Builds the plugins and fixtures once for the whole test binary.
fn ensure_built() {
    static BUILT: OnceLock<()> = OnceLock::new();
    BUILT.get_or_init(|| {
        let mut cmd = Command::new(env!("CARGO"));
        cmd.arg("build").arg("--quiet").env_remove(BOOTSTRAP);
        for p in PLUGINS.iter().chain(FIXTURES) {
            cmd.args(["-p", p]);
        }
        let status = cmd.status().expect("cargo runs");
        assert!(status.success(), "building the plugins failed");
        let fixtures = fixture_dir();
        std::fs::create_dir_all(&fixtures).expect("fixture dir");
        for f in FIXTURES {
            let file = lib_file(f);
            let built = bin_dir().join("deps").join(&file);
            std::fs::copy(&built, fixtures.join(&file)).expect("copy fixture");
            let _ = std::fs::remove_file(bin_dir().join(&file));
        }
    });
}

fn fixture_dir() -> PathBuf {
    bin_dir().join("e2e-fixtures")
}

/// The library file of a workspace plugin.
pub(crate) fn plugin(name: &str) -> PathBuf {
    ensure_built();
    bin_dir().join(lib_file(name))
}

/// The library file of a fixture plugin.
pub(crate) fn fixture(name: &str) -> PathBuf {
    ensure_built();
    fixture_dir().join(lib_file(name))
}

/// A scratch directory, the working directory of the command.
pub(crate) struct Scratch {
    pub(crate) dir: tempfile::TempDir,
}

impl Scratch {
    pub(crate) fn new() -> Self {
        ensure_built();
        Self { dir: tempfile::tempdir().expect("tempdir") }
    }

    pub(crate) fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Writes a file in the scratch directory and returns its path.
    pub(crate) fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.path(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).expect("mkdir");
        }
        std::fs::write(&path, text).expect("write");
        path
    }

    /// Writes a script of router replies, one JSON value per line.
    pub(crate) fn script(&self, lines: &[Value]) -> PathBuf {
        let text: Vec<String> = lines.iter().map(Value::to_string).collect();
        self.write("script.jsonl", &(text.join("\n") + "\n"))
    }

    /// The `harness` command, run in this directory.
    pub(crate) fn harness(&self) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_harness"));
        // The trust store and the plugin cache are the scratch directory's own: no test reads
        // or changes the user's, and each test starts with an empty cache.
        cmd.current_dir(self.dir.path())
            .env_remove("HARNESS_PLUGIN_PATH")
            .env("XDG_CONFIG_HOME", self.path("xdg-config"))
            // The user's plugin directory (`plugins install`) too; and a crate it builds goes to
            // the scratch directory's cache unless a test names a target directory.
            .env("XDG_DATA_HOME", self.path("xdg-data"))
            .env("XDG_CACHE_HOME", self.path("xdg-cache"))
            .env_remove("CARGO_TARGET_DIR")
            // `plugins install` builds with cargo.
            .env_remove(BOOTSTRAP)
            // No diagnostics unless a test asks: they would change every snapshot of stderr.
            .env_remove("HARNESS_LOG")
            .env("HARNESS_PLUGIN_CACHE", self.path("plugin-cache"));
        // Nor does the tester's own environment layer (HARNESS_MODEL, ...) reach a test.
        for (name, _) in std::env::vars_os() {
            if name.to_str().is_some_and(|n| SETTING_VARIABLES.contains(&n)) {
                cmd.env_remove(name);
            }
        }
        cmd
    }

    /// Reads the steps of a JSON Lines trace: the lines with a `step` field, as readers do.
    pub(crate) fn trace(&self, name: &str) -> Vec<Value> {
        self.trace_lines(name).into_iter().filter(|l| l.get("step").is_some()).collect()
    }

    /// Reads every line of a JSON Lines trace: first line, steps, last line.
    pub(crate) fn trace_lines(&self, name: &str) -> Vec<Value> {
        let text = std::fs::read_to_string(self.path(name)).expect("trace file");
        text.lines().map(|l| serde_json::from_str(l).expect("trace line is JSON")).collect()
    }
}

/// Output with its parts decoded.
pub(crate) struct Ran {
    pub(crate) code: i32,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

impl Ran {
    pub(crate) fn json(&self) -> Value {
        serde_json::from_str(self.stdout.trim())
            .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {}\nstderr: {}", self.stdout, self.stderr))
    }
}

pub(crate) fn ran(cmd: &mut Command) -> Ran {
    let Output { status, stdout, stderr } = cmd.output().expect("harness runs");
    Ran {
        code: status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&stdout).into_owned(),
        stderr: String::from_utf8_lossy(&stderr).into_owned(),
    }
}

/// One HTTP/1.1 message read from `reader`: its start line and headers (each line as sent),
/// and the `Content-Length` bytes of body after them; the body's read may fail (a peer that
/// closed early), which the caller judges.
pub(crate) fn read_http_message(reader: &mut impl std::io::BufRead) -> (String, Vec<u8>, std::io::Result<()>) {
    let mut head = String::new();
    let mut length = 0;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
            break;
        }
        if let Some(value) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            length = value.trim().parse().unwrap_or(0);
        }
        head.push_str(&line);
    }
    let mut body = vec![0u8; length];
    let read = reader.read_exact(&mut body);
    (head, body, read)
}

/// A test prerequisite that is not there: the variable that names it, and the command that
/// provides it. A test returns it (`-> Result<(), Missing>`), so that a bare `cargo test` fails
/// with that one line, not a panic and its backtrace note.
pub(crate) struct Missing(String);

/// Shown whole by the test harness when a test returns it.
impl std::fmt::Debug for Missing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// The file the prerequisite variable `name` points at; `setup` names the `cargo xtask`
/// command that provides it alone.
pub(crate) fn prerequisite(name: &str, setup: &str) -> Result<PathBuf, Missing> {
    let fix = format!("run `cargo xtask test` (or `{setup}` and export what `cargo xtask env` prints)");
    let path = std::env::var_os(name).map(PathBuf::from).ok_or_else(|| Missing(format!("{name} is not set: {fix}")))?;
    if !path.is_file() {
        return Err(Missing(format!("{name}={} is no file: {fix}", path.display())));
    }
    Ok(path)
}

/// The error of a trace step, a trace's last line or a `--json` result, held to carry `code`;
/// returns its `details`, the structured fields tests and scripts read instead of the message.
#[track_caller]
pub(crate) fn error_details<'a>(v: &'a Value, code: &str) -> &'a Value {
    assert_eq!(v["error"]["code"], code, "{v}");
    &v["error"]["details"]
}

impl Ran {
    /// Holds that the command stopped as a usage error: exit 2 and an error (`harness:
    /// error: ...`, or clap's `error: ...` for the command line's shape) that names each of
    /// `named`: the file, flag, setting or value at fault, or the fix's flag; the things a
    /// reader acts on, not the sentence around them.
    #[track_caller]
    pub(crate) fn usage_error(&self, named: &[&str]) {
        assert_eq!(self.code, 2, "not a usage error: {}{}", self.stdout, self.stderr);
        let Some(at) = self.stderr.find("harness: error: ").or_else(|| self.stderr.find("error: ")) else {
            panic!("no error on stderr: {:?}", self.stderr);
        };
        let error = &self.stderr[at..];
        for name in named {
            assert!(error.contains(name), "{name:?} is not named in {error:?}");
        }
    }
}

/// Compares `text` whole with the snapshot `name` (`tests/e2e/snapshots/NAME.snap`), with the
/// scratch directory shown as `[scratch]`, the binary's directory as `[bin]` and each
/// `(regex, replacement)` of `filters` applied, so that the snapshot is the same on every
/// machine and at every version. For output people read: a change of wording is a readable diff.
#[track_caller]
pub(crate) fn snapshot(name: &str, s: &Scratch, text: &str, filters: &[(&str, &str)]) {
    let mut settings = insta::Settings::clone_current();
    settings.set_prepend_module_to_snapshot(false);
    settings.set_omit_expression(true);
    for (regex, replacement) in filters {
        settings.add_filter(regex, *replacement);
    }
    // The longest first: the scratch directory may sit beneath the binary's (never today).
    let mut paths = [(s.dir.path().to_path_buf(), "[scratch]"), (bin_dir(), "[bin]")];
    paths.sort_by_key(|(p, _)| std::cmp::Reverse(p.as_os_str().len()));
    let mut text = text.to_owned();
    for (path, shown) in &paths {
        // A symlinked temporary directory is shown resolved by some messages.
        for form in [path.clone(), path.canonicalize().unwrap_or_else(|_| path.clone())] {
            text = text.replace(form.to_str().expect("UTF-8 path"), shown);
        }
    }
    settings.bind(|| insta::assert_snapshot!(name, text));
}

/// A [`snapshot`] filter for `harness batch`'s closing report, whose timings differ from run
/// to run.
pub(crate) const BATCH_TIMINGS: (&str, &str) = (r"duration: p50 [^\n]*", "duration: [timings]");

/// A [`snapshot`] filter for a plugin's own version in `plugins list` and `inspect`.
pub(crate) const PLUGIN_VERSION: (&str, &str) = (r"(?m)^(\S+) \d+\.\d+\.\d+\S* \(ABI", "$1 [version] (ABI");
/// A [`snapshot`] filter for the confinement a process-isolated plugin gets: what this kernel's
/// Landlock can enforce.
pub(crate) const ENFORCEMENT: (&str, &str) =
    (r"(isolation: process[^\n]*), enforcement: [^\n]*", "$1, enforcement: [this kernel's]");
/// A [`snapshot`] filter for the lines that list what this kernel cannot enforce.
pub(crate) const ENFORCEMENT_GAPS: (&str, &str) = (r"\n *(not enforced|seccomp instead): [^\n]*", "");
