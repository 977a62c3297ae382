//! The attacks a lying plugin makes from a confined child, through the binary: each system call
//! the `effects-liar` tools make is refused by the seccomp allowlist of their declared class
//! (`pure`, `reads`), and what it aimed at is unchanged afterwards. Then partial Landlock: an
//! older ABI, reported by an `LD_PRELOAD` shim, is named in `plugins list`, warned about in a
//! run, refused under `--require-enforcement`, and covered by seccomp where it can be.

use std::ffi::CString;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use serde_json::{Value, json};

use crate::support::{PLUGIN_VERSION, Scratch, bin_dir, fixture, ran, snapshot};

fn call(tool: &str, arguments: Value) -> Value {
    json!({ "tool": tool, "arguments": arguments })
}

/// A plugin directory in the scratch directory holding the fixtures `names`.
fn fixture_dir(s: &Scratch, names: &[&str]) -> PathBuf {
    let dir = s.path("plugins");
    std::fs::create_dir_all(&dir).unwrap();
    for name in names {
        let file = fixture(name);
        std::fs::copy(&file, dir.join(file.file_name().unwrap())).unwrap();
    }
    dir
}

/// The file attacked: its bytes, mode, modification time and the xattr the attack sets.
fn target(s: &Scratch) -> PathBuf {
    let file = s.write("target.txt", "the bytes it keeps");
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    file
}

/// Whether `file` has the xattr `setxattr` would set.
fn has_liar_xattr(file: &Path) -> bool {
    let path = CString::new(file.to_str().unwrap()).unwrap();
    // SAFETY: getxattr with a null buffer and size 0 only returns the value's size.
    let size = unsafe { libc::getxattr(path.as_ptr(), c"user.harness_liar".as_ptr(), std::ptr::null_mut(), 0) };
    size >= 0
}

/// Runs every op of `ops` through `liar_sys` and `liar_sys_reads` in process isolation; the
/// trace's steps, in order (each op by the pure tool, then by the reads tool).
fn attack(s: &Scratch, ops: &[&str], path: &Path, env: &[(&str, String)]) -> Vec<Value> {
    let dir = fixture_dir(s, &["effects-liar"]);
    let mut lines: Vec<Value> = ["liar_sys", "liar_sys_reads"]
        .iter()
        .flat_map(|tool| ops.iter().map(move |op| call(tool, json!({"op": op, "path": path, "text": "id\n"}))))
        .collect();
    lines.push(call("finish", json!({"answer": "the run went on"})));
    let script = s.script(&lines);
    let r = ran(s
        .harness()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .args(["run", "x", "--json", "--no-default-plugins", "--plugins-dir"])
        .arg(&dir)
        .args(["--enable", "effects-liar", "--isolation", "process", "--max-steps", "40", "--trace", "t.jsonl"])
        .arg("--script")
        .arg(&script));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let t = s.trace("t.jsonl");
    assert_eq!(t.len(), 2 * ops.len() + 1, "{t:?}");
    t
}

/// Asserts that each step of `t` but the last failed with `tool_error` and EPERM's words.
fn all_refused(t: &[Value], ops: &[&str]) {
    let tools = ["liar_sys", "liar_sys_reads"];
    for (line, (tool, op)) in t.iter().zip(tools.iter().flat_map(|t| ops.iter().map(move |op| (t, op)))) {
        assert_eq!(line["tool"], *tool, "{line}");
        assert_eq!(line["error"]["code"], "tool_error", "{tool} {op}: {line}");
        let message = line["error"]["message"].as_str().unwrap();
        assert!(message.contains("Operation not permitted"), "{tool} {op}: {message}");
    }
}

#[test]
fn pure_and_reads_tools_cannot_change_a_files_mode_owner_xattrs_times_or_size() {
    let s = Scratch::new();
    let file = target(&s);
    let before = std::fs::metadata(&file).unwrap();
    let ops = ["chmod", "chown", "setxattr", "utimensat", "truncate"];
    let t = attack(&s, &ops, &file, &[]);
    all_refused(&t, &ops);
    let after = std::fs::metadata(&file).unwrap();
    assert_eq!(after.mode() & 0o7777, 0o600, "chmod changed the mode");
    assert_eq!((after.uid(), after.gid()), (before.uid(), before.gid()));
    assert!(!has_liar_xattr(&file), "setxattr set an attribute");
    assert_eq!(after.mtime(), before.mtime(), "utimensat changed the modification time");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "the bytes it keeps", "truncate cut the file");
}

#[test]
fn pure_and_reads_tools_cannot_make_namespaces_x32_calls_type_into_a_terminal_or_signal_the_harness() {
    let s = Scratch::new();
    let file = target(&s);
    let ops = ["unshare_user", "clone_newuser", "x32_chmod", "tiocsti", "signal_parent"];
    let t = attack(&s, &ops, &file, &[]);
    // tiocsti: the child's descriptors are pipes, so without the filter the kernel would say
    // ENOTTY; EPERM is the filter's, and would be on a terminal too.
    all_refused(&t, &ops);
    assert_eq!(std::fs::metadata(&file).unwrap().mode() & 0o7777, 0o600, "the x32 chmod ran");
}

/// The `LD_PRELOAD` shim that makes the Landlock ABI probe answer `HARNESS_TEST_LANDLOCK_ABI`,
/// built once with `cc`.
fn abi_shim() -> PathBuf {
    static SHIM: OnceLock<PathBuf> = OnceLock::new();
    SHIM.get_or_init(|| {
        let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/shims/landlock-abi.c");
        let out = bin_dir().join("e2e-fixtures").join("landlock-abi-shim.so");
        std::fs::create_dir_all(out.parent().unwrap()).unwrap();
        let status = Command::new("cc")
            .args(["-shared", "-fPIC", "-O2", "-o"])
            .arg(&out)
            .arg(&source)
            .arg("-ldl")
            .status()
            .unwrap_or_else(|e| panic!("cannot run cc ({e}): install a C compiler with `apt-get install -y gcc`"));
        assert!(status.success(), "cc could not build {}", source.display());
        out
    })
    .clone()
}

/// The environment that makes the harness (and its children) see Landlock ABI `abi`.
fn with_abi(abi: &str) -> Vec<(&'static str, String)> {
    vec![("LD_PRELOAD", abi_shim().to_str().unwrap().to_owned()), ("HARNESS_TEST_LANDLOCK_ABI", abi.to_owned())]
}

/// `plugins list` of `net-client` (network, limited to one port) and `effects-liar`, in
/// process isolation, on a kernel that reports Landlock ABI `abi`.
fn list_at_abi(s: &Scratch, abi: &str, extra: &[&str]) -> crate::support::Ran {
    let dir = fixture_dir(s, &["net-client", "effects-liar"]);
    s.write("harness.toml", "[plugins.net-client]\nallow_ports = [9]\n");
    ran(s
        .harness()
        .envs(with_abi(abi))
        .args(["plugins", "list", "--config", "harness.toml", "--no-default-plugins", "--plugins-dir"])
        .arg(&dir)
        .args(["--enable", "net-client", "--enable", "effects-liar", "--isolation", "process"])
        .args(extra))
}

#[test]
fn on_landlock_abi_3_plugins_list_says_partial_and_names_what_is_not_enforced() {
    let s = Scratch::new();
    let r = list_at_abi(&s, "3", &[]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    // The table whole: net-client partial, naming what is not enforced and what seccomp does
    // instead; effects-liar declares no network, so seccomp covers all it lacks and it is
    // fully enforced. The kernel's ABI is the one the test sets, so the text is the same on
    // every machine.
    snapshot("plugins-list-at-landlock-abi-3", &s, &r.stdout, &[PLUGIN_VERSION]);
    let json = list_at_abi(&s, "3", &["--json"]).json();
    let net = json["plugins"].as_array().unwrap().iter().find(|p| p["name"] == "net-client").unwrap();
    let enforcement = &net["enforcement"];
    assert_eq!(enforcement["kind"], "partial", "{net}");
    assert_eq!(enforcement["landlock_abi"], 3, "{net}");
    let keys = |field: &str| -> Vec<String> {
        enforcement[field].as_array().unwrap().iter().map(|g| g["feature"].as_str().unwrap().to_owned()).collect()
    };
    assert_eq!(keys("missing"), ["tcp_connect_ports"], "{net}");
    assert_eq!(keys("covered"), ["tcp_bind", "ioctl_dev", "signal_scoping", "abstract_unix_socket_scoping"]);
    assert_eq!(enforcement["missing"][0]["needs_abi"], 4);
    // On this kernel's own ABI nothing is missing.
    let native = ran(s
        .harness()
        .args(["plugins", "list", "--json", "--config", "harness.toml", "--no-default-plugins", "--plugins-dir"])
        .arg(s.path("plugins"))
        .args(["--enable", "net-client", "--isolation", "process"]))
    .json();
    assert_eq!(native["plugins"][0]["enforcement"]["kind"], "landlock+seccomp", "{native}");
}

#[test]
fn on_landlock_abi_3_a_run_warns_once_and_require_enforcement_refuses_the_plugin() {
    let s = Scratch::new();
    let dir = fixture_dir(&s, &["net-client"]);
    s.write("harness.toml", "[plugins.net-client]\nallow_ports = [9]\n");
    let script = s.script(&[call("finish", json!({"answer": "done"}))]);
    let run = |config: &str, extra: &[&str]| {
        ran(s
            .harness()
            .envs(with_abi("3"))
            .args(["run", "x", "--json", "--config", config, "--no-default-plugins", "--plugins-dir"])
            .arg(&dir)
            .args(["--enable", "net-client", "--isolation", "process", "--script"])
            .arg(&script)
            .args(extra))
    };
    let r = run("harness.toml", &[]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let warning = "warning: plugin \"net-client\" is partially enforced: of its declared effects (network), TCP port limits (allow_ports) needs Landlock ABI 4; this kernel has 3";
    assert_eq!(r.stderr.matches(warning).count(), 1, "{}", r.stderr);
    assert_eq!(r.stderr.matches("partially enforced").count(), 1, "{}", r.stderr);
    // Required in full, by the flag or by the configuration: skipped, naming what it lacks.
    s.write("strict.toml", "[isolation]\nrequire = \"full\"\n[plugins.net-client]\nallow_ports = [9]\n");
    for (config, extra) in [("harness.toml", &["--require-enforcement"][..]), ("strict.toml", &[][..])] {
        let r = run(config, extra);
        assert_eq!(r.code, 0, "{}", r.stderr);
        let skipped: Vec<&str> = r.stderr.lines().filter(|l| !l.starts_with("harness: step ")).collect();
        snapshot("a-partially-enforced-plugin-skipped-when-full-is-required", &s, &skipped.join("\n"), &[]);
    }
    let listed = list_at_abi(&s, "3", &["--json", "--require-enforcement"]).json();
    let names: Vec<&str> = listed["plugins"].as_array().unwrap().iter().map(|p| p["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["effects-liar"], "{listed}");
    assert!(listed["skipped"][0]["reason"].as_str().unwrap().contains("net-client"), "{listed}");
}

#[test]
fn on_landlock_abi_2_truncate_is_still_refused_by_seccomp_and_the_file_keeps_its_bytes() {
    let s = Scratch::new();
    let file = target(&s);
    let t = attack(&s, &["truncate"], &file, &with_abi("2"));
    all_refused(&t, &["truncate"]);
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "the bytes it keeps");
}

/// Runs the liar's `calls` then finish, with `extra` arguments, from the scratch directory.
fn liar_run(s: &Scratch, extra: &[&str], calls: &[Value]) -> crate::support::Ran {
    let dir = fixture_dir(s, &["effects-liar"]);
    let mut lines = calls.to_vec();
    lines.push(call("finish", json!({"answer": "the run went on"})));
    let script = s.script(&lines);
    ran(s
        .harness()
        .args(["run", "x", "--json", "--no-default-plugins", "--plugins-dir"])
        .arg(&dir)
        .args(["--enable", "effects-liar", "--trace", "t.jsonl"])
        .args(extra)
        .arg("--script")
        .arg(&script))
}

#[test]
fn a_writes_tool_cannot_rewrite_the_configuration_or_the_lock_in_the_working_directory() {
    let s = Scratch::new();
    // The documented layout: harness.toml in the working directory, named with --config.
    let config = s.write("harness.toml", "[policy]\nwrites = \"allow\"\n");
    let shell = "[[mcp.servers]]\nname = \"sh\"\ncommand = \"/bin/sh\"\nargs = [\"-c\", \"touch pwned\"]";
    let r = liar_run(
        &s,
        &["--config", "harness.toml"],
        &[
            call("liar_note", json!({"path": config, "tag": shell, "ms": 0})),
            call("liar_note", json!({"path": s.path("harness.lock"), "tag": "{}", "ms": 0})),
        ],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    for step in &s.trace("t.jsonl")[..2] {
        let message = step["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("Permission denied"), "a writes child reached the working directory: {step}");
    }
    assert_eq!(std::fs::read_to_string(&config).unwrap(), "[policy]\nwrites = \"allow\"\n");
    assert!(!s.path("harness.lock").exists(), "a child created harness.lock");
    let r = liar_run(&s, &["--config", "harness.toml"], &[]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(!s.path("pwned").exists(), "the next run started the shell a child wrote into the configuration");
}

#[test]
fn a_reads_tool_gets_no_secret_of_the_working_directory() {
    let s = Scratch::new();
    let env = s.write(".env", "API_KEY=sk-secret-in-env");
    let git = s.write(".git/config", "[remote \"origin\"]\nurl = https://ghp_token@example.com/x\n");
    let cat = |path: &Path| call("liar_sys_reads", json!({"op": "cat", "path": path}));
    let r = liar_run(&s, &[], &[cat(&env), cat(&git)]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    for step in &s.trace("t.jsonl")[..2] {
        assert_eq!(step["error"]["code"], "tool_error", "a reads child read a secret: {step}");
        assert!(step["error"]["message"].as_str().unwrap().contains("Permission denied"), "{step}");
    }
    let trace = std::fs::read_to_string(s.path("t.jsonl")).unwrap();
    assert!(!trace.contains("sk-secret") && !trace.contains("ghp_token"), "{trace}");
}

#[test]
fn a_write_area_that_holds_the_harnesss_own_files_is_refused_naming_them() {
    let s = Scratch::new();
    let dir = fixture_dir(&s, &["effects-liar"]);
    let list = |config: &str| {
        let r = ran(s
            .harness()
            .args(["plugins", "list", "--json", "--no-default-plugins", "--enable", "effects-liar", "--config"])
            .arg(config)
            .arg("--plugins-dir")
            .arg(&dir));
        assert_eq!(r.code, 0, "{}", r.stderr);
        r.json()
    };
    // A write area inside a plugin directory: a child could drop a library there.
    let section = |area: &Path| format!("[plugins.effects-liar]\nallow_paths = [{:?}]\n", area.display().to_string());
    s.write("conf/h.toml", &section(&dir.join("sub")));
    let listed = list("conf/h.toml");
    assert_eq!(listed["plugins"], json!([]), "{listed}");
    let reason = listed["skipped"][0]["reason"].as_str().unwrap();
    for part in ["the plugin directory", &dir.display().to_string(), "[plugins.effects-liar] allow_paths"] {
        assert!(reason.contains(part), "{part:?} not in {reason}");
    }

    // A --config inside its own plugin's write area is used only once trusted, like an
    // implicit one: a tool could have rewritten it.
    let here = s.dir.path().canonicalize().unwrap();
    s.write("harness.toml", &section(&here));
    let r = ran(s.harness().args(["plugins", "list", "--config", "harness.toml"]));
    r.usage_error(&[
        "--config harness.toml",
        "where [plugins.effects-liar] allow_paths lets a plugin's child write",
        "harness config trust harness.toml",
    ]);
    // Trusted, it is read; the plugin whose area holds it is still refused, naming it.
    let r = ran(s.harness().args(["config", "trust", "harness.toml"]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let listed = list("harness.toml");
    let reason = listed["skipped"][0]["reason"].as_str().unwrap();
    assert!(reason.contains("the configuration in use") && reason.contains("harness.toml"), "{reason}");
}
