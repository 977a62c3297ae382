//! Where a plugin runs is the operator's choice, through the binary: only a pure plugin
//! installed beside the harness, or one a configuration names, runs in the harness's process;
//! every other file runs in a confined child whatever it declares; reading a manifest
//! (`plugins inspect`, `plugins check`) never runs a plugin's code in the harness.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{Value, json};
use sha2::Digest as _;

use crate::support::{Ran, Scratch, fixture, plugin, ran, snapshot};

fn call(tool: &str, arguments: Value) -> Value {
    json!({ "tool": tool, "arguments": arguments })
}

/// Copies `from` into the scratch directory's `dir`; returns the directory.
fn copy_into(s: &Scratch, dir: &str, from: &Path) -> PathBuf {
    let to = s.path(dir);
    std::fs::create_dir_all(&to).unwrap();
    std::fs::copy(from, to.join(from.file_name().unwrap())).unwrap();
    to
}

/// `plugins list --json` of `dir` alone, with `extra` arguments.
fn list(s: &Scratch, dir: &Path, extra: &[&str]) -> Value {
    let r = ran(s
        .harness()
        .args(["plugins", "list", "--json", "--no-default-plugins", "--plugins-dir"])
        .arg(dir)
        .args(extra));
    assert_eq!(r.code, 0, "{}", r.stderr);
    r.json()
}

/// Runs `liar_read` of `/etc/passwd`, the only tool of `effects-liar` offered (it declares
/// `pure`), from a copy outside the harness's directory; `extra` goes to `harness run`.
fn read_passwd_declaring_pure(s: &Scratch, extra: &[&str]) -> Value {
    let dir = copy_into(s, "plugins", &fixture("effects-liar"));
    let script = s.script(&[call("liar_read", json!({"path": "/etc/passwd"})), call("finish", json!({"answer": 1}))]);
    let r = ran(s
        .harness()
        .args(["run", "x", "--json", "--no-default-plugins", "--enable", "effects-liar.liar_read", "--plugins-dir"])
        .arg(&dir)
        .args(extra)
        .args(["--trace", "t.jsonl", "--script"])
        .arg(&script));
    assert_eq!(r.code, 0, "{}", r.stderr);
    s.trace("t.jsonl").remove(0)
}

#[test]
fn a_plugin_that_declares_every_tool_pure_is_confined_unless_the_operator_vouches_for_it() {
    let s = Scratch::new();
    let step = read_passwd_declaring_pure(&s, &[]);
    assert_eq!(step["error"]["code"], "tool_error", "{step}");
    assert!(step["error"]["message"].as_str().unwrap().contains("Permission denied"), "{step}");
    // A configuration the operator named vouches for it by name: it runs in the harness.
    s.write("h.toml", "[plugins.effects-liar]\nisolation = \"in-process\"\n");
    let step = read_passwd_declaring_pure(&s, &["--config", "h.toml"]);
    // It answers with the number of bytes it read.
    assert_eq!(step["status"], "ok", "{step}");
    assert!(step["result"].as_u64().is_some_and(|n| n > 0), "{step}");
}

#[test]
fn plugins_list_says_where_each_plugin_runs_and_why() {
    let s = Scratch::new();
    let dir = copy_into(&s, "plugins", &fixture("effects-liar"));
    let args = ["plugins", "list", "--enable", "calc", "--enable", "effects-liar.liar_read", "--plugins-dir"];
    // The table's wording of each placement is in the plugins-list snapshot (discovery.rs).
    let r = ran(s.harness().args(args).arg(&dir).arg("--json"));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let plugins = r.json()["plugins"].as_array().unwrap().clone();
    let kind = |name: &str| {
        let p = plugins.iter().find(|p| p["name"] == name).unwrap();
        (p["isolation"].as_str().unwrap().to_owned(), p["placement"]["kind"].as_str().unwrap().to_owned())
    };
    assert_eq!(kind("calc"), ("in-process".to_owned(), "installed_beside_harness".to_owned()));
    assert_eq!(kind("effects-liar"), ("process".to_owned(), "not_vouched".to_owned()));
    // Declared effects still place a plugin beside the harness in a child, and say so.
    std::fs::create_dir_all(s.path("data")).unwrap();
    let r = ran(s
        .harness()
        .args(["plugins", "list", "--json", "--enable", "files", "--config"])
        .arg(s.write("f.toml", "[plugins.files]\nroot = \"data\"\n")));
    let plugins = r.json()["plugins"].as_array().unwrap().clone();
    let files = plugins.iter().find(|p| p["name"] == "files").unwrap();
    assert_eq!((&files["isolation"], &files["placement"]["kind"]), (&json!("process"), &json!("declares_effects")));
    assert_eq!(files["placement"]["reason"], "declares reads+writes");
}

#[test]
fn a_configuration_vouches_for_a_plugin_only_as_the_file_harness_lock_pins() {
    let s = Scratch::new();
    let dir = copy_into(&s, "plugins", &fixture("effects-liar"));
    s.write("h.toml", "[plugins.effects-liar]\nisolation = \"in-process\"\n");
    let extra = ["--config", "h.toml", "--enable", "effects-liar.liar_read"];
    let placed = |s: &Scratch| list(s, &dir, &extra)["plugins"][0]["placement"].clone();
    assert_eq!(placed(&s)["kind"], "configured_in_process");
    // A lock that pins another file: the section no longer brings it into the harness.
    let lock = json!({"tools": {"liar_read": {"source": "plugin effects-liar 0.1.0",
        "library_sha256": "0".repeat(64), "definition_sha256": "x"}}});
    s.write("harness.lock", &lock.to_string());
    let p = placed(&s);
    assert_eq!(p["kind"], "pin_mismatch", "{p}");
    assert!(p["reason"].as_str().unwrap().contains("harness lock"), "{p}");
    // Locked again as it is: the file is the pinned one.
    let r = ran(s.harness().args(["lock", "--no-default-plugins", "--plugins-dir"]).arg(&dir).args(extra));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(placed(&s)["kind"], "configured_in_process");
}

#[test]
fn a_process_plugin_from_the_plugin_cache_starts_no_child_before_its_first_call() {
    let s = Scratch::new();
    let dir = copy_into(&s, "plugins", &plugin("calc"));
    // (A copy outside the harness's directory runs in a child anyway; said here, so that the
    // test holds whatever the default.) Listed once: the cache learns that calc's (empty)
    // section starts it.
    s.write("h.toml", "[plugins.calc]\nisolation = \"process\"\n");
    list(&s, &dir, &["--config", "h.toml"]);
    // calc takes no configuration: a key in its section makes its `init` fail, in its child.
    s.write("h.toml", "[plugins.calc]\nprecision = 3\nisolation = \"process\"\n");
    let listed = list(&s, &dir, &["--config", "h.toml"]);
    assert!(listed["skipped"][0]["reason"].as_str().unwrap().contains("precision"), "{listed}");
    // The cache's entry edited to say this section starts it too (a library whose init fails
    // only now): a run then trusts the cache and starts no child before the first call.
    let empty = format!("{:x}", sha2::Sha256::digest(b"{}"));
    let section = format!("{:x}", sha2::Sha256::digest(br#"{"precision":3}"#));
    for entry in std::fs::read_dir(s.path("plugin-cache")).unwrap() {
        let entry = entry.unwrap().path();
        let text = std::fs::read_to_string(&entry).unwrap();
        std::fs::write(&entry, text.replace(&empty, &section)).unwrap();
    }
    let run = |calls: &[Value]| {
        let script = s.script(calls);
        ran(s
            .harness()
            .args(["run", "x", "--no-default-plugins", "--config", "h.toml", "--trace", "t.jsonl", "--plugins-dir"])
            .arg(&dir)
            .arg("--script")
            .arg(&script))
    };
    // From the cache, no child starts before the run: its failing `init` is not seen.
    let r = run(&[call("finish", json!({"answer": 1}))]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(!r.stderr.contains("skipped"), "a child started before the first call: {}", r.stderr);
    // Its first call starts it, and fails with the reason.
    let r = run(&[call("calculate", json!({"expression": "6*7"})), call("finish", json!({"answer": 1}))]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let step = &s.trace("t.jsonl")[0];
    assert_eq!(step["status"], "error", "{step}");
    assert!(step["error"]["message"].as_str().unwrap().contains("precision"), "{step}");
}

/// Where `load-marker`'s constructor leaves a mark: a file named by the loading process's id.
const MARKS: &str = "/tmp/harness-load-marker";

/// Runs `cmd`, and says whether the library's constructor ran in the process it started.
fn ran_marking(cmd: &mut Command) -> (Ran, bool) {
    let child = cmd.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped()).spawn().unwrap();
    let pid = child.id();
    let mark = Path::new(MARKS).join(pid.to_string());
    let Output { status, stdout, stderr } = child.wait_with_output().unwrap();
    let marked = mark.exists();
    let _ = std::fs::remove_file(&mark);
    let r = Ran {
        code: status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&stdout).into_owned(),
        stderr: String::from_utf8_lossy(&stderr).into_owned(),
    };
    (r, marked)
}

#[test]
fn inspect_and_check_read_a_file_in_a_confined_child_never_in_the_harness() {
    let s = Scratch::new();
    let file = copy_into(&s, "p", &fixture("load-marker")).join("libload_marker.so");
    let (r, in_harness) = ran_marking(s.harness().args(["plugins", "inspect", "--json"]).arg(&file));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.json()["tools"][0]["name"], "marker_echo");
    assert!(!in_harness, "inspect ran the library's constructor in the harness");
    let (r, in_harness) = ran_marking(s.harness().args(["plugins", "check", "--json", "--cases", "2"]).arg(&file));
    assert_eq!(r.code, 0, "{}", r.stdout);
    let report = r.json();
    assert_eq!(report["executor"], "process", "{report}");
    let note = report["notes"][0].as_str().unwrap();
    assert!(note.contains("a child process per effect class (pure)"), "{note}");
    assert!(!in_harness, "check ran the library's constructor in the harness");
    // The fixture's mark shows: checked in-process, the constructor runs in the harness.
    let (r, in_harness) =
        ran_marking(s.harness().args(["plugins", "check", "--cases", "2", "--isolation", "in-process"]).arg(&file));
    assert_eq!(r.code, 0, "{}", r.stdout);
    assert!(in_harness, "the fixture left no mark in-process");
}

#[test]
fn inspect_takes_a_bare_name_only_as_a_discovered_plugin_never_as_a_file_here() {
    let s = Scratch::new();
    std::fs::copy(fixture("load-marker"), s.path("calc")).unwrap();
    let (r, in_harness) = ran_marking(s.harness().args(["plugins", "inspect", "calc", "--no-default-plugins"]));
    assert_eq!(r.code, 1, "{}", r.stdout);
    assert!(r.stderr.contains("write ./calc"), "{}", r.stderr);
    assert!(!in_harness, "inspect loaded ./calc in the harness");
    // With the default directories, the name is the installed plugin's.
    let r = ran(s.harness().args(["plugins", "inspect", "calc", "--json"]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.json()["path"], json!(plugin("calc")));
}

#[test]
fn inspect_and_check_hold_a_file_to_the_ownership_and_permission_check_of_discovery() {
    use std::os::unix::fs::PermissionsExt;
    let s = Scratch::new();
    let dir = copy_into(&s, "open", &fixture("load-marker"));
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let file = dir.join("libload_marker.so");
    let commands: [(&[&str], &[&str]); 2] =
        [(&["plugins", "inspect"], &[]), (&["plugins", "check"], &["--cases", "1"])];
    for (command, extra) in commands {
        let (r, in_harness) = ran_marking(s.harness().args(command).arg(&file));
        r.usage_error(&["libload_marker.so", "chmod go-w", "--allow-insecure-plugins"]);
        let name = command.join("-");
        snapshot(&format!("{name}-refuses-an-insecure-file"), &s, &r.stderr, &[]);
        assert!(!in_harness);
        let (r, _) = ran_marking(s.harness().args(command).arg(&file).arg("--allow-insecure-plugins").args(extra));
        assert_eq!(r.code, 0, "{command:?}: {}", r.stderr);
        let warnings: Vec<&str> = r.stderr.lines().filter(|l| l.starts_with("harness: warning: ")).collect();
        snapshot(&format!("{name}-warns-of-an-insecure-file"), &s, &warnings.join("\n"), &[]);
    }
}
