//! The plugin cache through the binary: an unchanged file is not read through a plugin host
//! again, a changed one is, and an edited entry cannot move a plugin into the harness.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use sha2::Digest as _;

use crate::support::{Scratch, plugin, ran, snapshot};

fn copy_into(s: &Scratch, dir: &str, from: &Path) -> PathBuf {
    let to = s.path(dir).join(from.file_name().unwrap());
    std::fs::create_dir_all(s.path(dir)).unwrap();
    std::fs::copy(from, &to).unwrap();
    to
}

fn list(s: &Scratch, extra: &[&str]) -> Value {
    let dir = s.path("p").to_string_lossy().into_owned();
    let r =
        ran(s.harness().args(["plugins", "list", "--json", "--no-default-plugins", "--plugins-dir", &dir]).args(extra));
    assert_eq!(r.code, 0, "{}", r.stderr);
    r.json()
}

/// `harness plugins list --json` with `HARNESS_PLUGIN_CACHE=off`.
fn list_without_cache(s: &Scratch, extra: &[&str]) -> crate::support::Ran {
    let dir = s.path("p").to_string_lossy().into_owned();
    let mut cmd = s.harness();
    cmd.env("HARNESS_PLUGIN_CACHE", "off").args([
        "plugins",
        "list",
        "--json",
        "--no-default-plugins",
        "--plugins-dir",
        &dir,
    ]);
    ran(cmd.args(extra))
}

/// The files plugin in `p`, configured by `h.toml` with its root `root`, listed once so that
/// the cache holds it; then every cache entry edited to declare its tools pure. Returns the
/// first listing.
fn files_cached_then_declared_pure(s: &Scratch) -> Value {
    copy_into(s, "p", &plugin("files"));
    std::fs::create_dir_all(s.path("root")).unwrap();
    s.write("h.toml", "[plugins.files]\nroot = \"root\"\n");
    let first = list(s, &["--config", "h.toml"]);
    for entry in entries(s) {
        let text = std::fs::read_to_string(&entry).unwrap();
        let edited = text
            .replace(r#""effects":"reads""#, r#""effects":"pure""#)
            .replace(r#""effects":"writes""#, r#""effects":"pure""#);
        assert_ne!(text, edited);
        std::fs::write(&entry, edited).unwrap();
    }
    first
}

fn entries(s: &Scratch) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> =
        std::fs::read_dir(s.path("plugin-cache")).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    files
}

#[test]
fn an_unchanged_file_is_read_from_the_cache_and_a_changed_one_through_its_plugin_host_again() {
    let s = Scratch::new();
    let file = copy_into(&s, "p", &plugin("calc"));
    let first = list(&s, &[]);
    assert_eq!(first["plugins"][0]["from_cache"], false, "{first}");
    assert_eq!(entries(&s).len(), 1);
    let second = list(&s, &[]);
    assert_eq!(second["plugins"][0]["from_cache"], true, "{second}");
    assert_eq!(second["plugins"][0]["tools"], first["plugins"][0]["tools"]);

    // The same bytes written again: new times, so the file is read again.
    std::fs::copy(plugin("calc"), &file).unwrap();
    assert_eq!(list(&s, &[])["plugins"][0]["from_cache"], false);
    assert_eq!(list(&s, &[])["plugins"][0]["from_cache"], true);

    // HARNESS_PLUGIN_CACHE=off reads every file through its plugin host.
    let r = list_without_cache(&s, &[]);
    assert_eq!(r.json()["plugins"][0]["from_cache"], false, "{}", r.stderr);
}

#[test]
fn a_run_from_the_cache_checks_arguments_against_the_schemas_it_compiles_off_the_start_up_path() {
    let s = Scratch::new();
    copy_into(&s, "p", &plugin("calc"));
    list(&s, &[]);
    let script = s.script(&[
        json!({"tool": "calculate", "arguments": {"expression": 42}}),
        json!({"tool": "calculate", "arguments": {"expression": "6*7"}}),
        json!({"tool": "finish", "arguments": {"answer": "42"}}),
    ]);
    let dir = s.path("p").to_string_lossy().into_owned();
    let r = ran(s
        .harness()
        .args(["run", "x", "--json", "--no-default-plugins", "--plugins-dir", &dir, "--trace", "t.jsonl", "--script"])
        .arg(&script));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let steps = s.trace("t.jsonl");
    assert_eq!(steps[0]["error"]["code"], "invalid_arguments", "{}", steps[0]);
    assert_eq!(steps[1]["result"], 42, "{}", steps[1]);
    assert_eq!(list(&s, &[])["plugins"][0]["from_cache"], true);
}

#[test]
fn an_entry_edited_to_declare_its_tools_pure_cannot_move_a_plugin_into_the_harness() {
    let s = Scratch::new();
    let first = files_cached_then_declared_pure(&s);
    assert_eq!(first["plugins"][0]["isolation"], "process", "{first}");
    // Not vouched for, it stays in a child whatever it declares; the edit only narrows it.
    let after = list(&s, &["--config", "h.toml"]);
    let p = &after["plugins"][0];
    assert_eq!((&p["isolation"], &p["placement"]["kind"]), (&json!("process"), &json!("not_vouched")), "{after}");
    assert_eq!(p["enforcement"]["confinement"].as_object().unwrap().keys().collect::<Vec<_>>(), ["pure"], "{p}");
    // Vouched for by its section, it is loaded here, and must declare what the entry holds.
    s.write("in.toml", "[plugins.files]\nroot = \"root\"\nisolation = \"in-process\"\n");
    let after = list(&s, &["--config", "in.toml"]);
    assert_eq!(after["plugins"], json!([]), "{after}");
    let reason = after["skipped"][0]["reason"].as_str().unwrap();
    snapshot("plugin-cache-entry-edited-refused", &s, reason, &[(r"[0-9a-f]{16,}", "[hash]")]);
}

#[test]
fn a_cache_directory_others_can_write_is_not_used_and_a_warning_says_why() {
    use std::os::unix::fs::PermissionsExt;
    let s = Scratch::new();
    copy_into(&s, "p", &plugin("calc"));
    std::fs::create_dir_all(s.path("plugin-cache")).unwrap();
    std::fs::set_permissions(s.path("plugin-cache"), std::fs::Permissions::from_mode(0o777)).unwrap();
    list(&s, &[]);
    let again = list(&s, &[]);
    assert_eq!(again["plugins"][0]["from_cache"], false, "{again}");
    snapshot("plugin-cache-writable-by-others", &s, again["warnings"][0].as_str().unwrap(), &[]);
    assert!(entries(&s).is_empty());
}

/// `harness run` with plugins from `p`, `extra` arguments, and a script of `calls`.
fn run(s: &Scratch, extra: &[&str], calls: &[Value]) -> crate::support::Ran {
    let script = s.script(calls);
    let dir = s.path("p").to_string_lossy().into_owned();
    ran(s
        .harness()
        .args(["run", "x", "--json", "--no-default-plugins", "--plugins-dir", &dir, "--trace", "t.jsonl"])
        .args(extra)
        .arg("--script")
        .arg(&script))
}

#[test]
fn a_plugin_from_the_cache_is_initialised_at_its_first_call_and_a_failed_init_fails_its_calls() {
    let s = Scratch::new();
    copy_into(&s, "p", &plugin("calc"));
    // The section vouches for calc: a copy outside the harness's directory runs in-process only
    // so. A first run initialises it, and the cache learns that its (empty) section starts it.
    s.write("h.toml", "[plugins.calc]\nisolation = \"in-process\"\n");
    let good = [
        json!({"tool": "calculate", "arguments": {"expression": "6*7"}}),
        json!({"tool": "finish", "arguments": {"answer": 42}}),
    ];
    assert_eq!(run(&s, &["--config", "h.toml"], &good).code, 0);
    // calc takes no configuration: a key in its section makes its `init` fail. A section the
    // cache knows nothing of is tried before the run, as without the cache: calc is skipped.
    s.write("h.toml", "[plugins.calc]\nprecision = 3\nisolation = \"in-process\"\n");
    let calls = [
        json!({"tool": "calculate", "arguments": {"expression": "6*7"}}),
        json!({"tool": "calculate", "arguments": {"expression": "1+1"}}),
        json!({"tool": "finish", "arguments": {"answer": "none"}}),
    ];
    let r = run(&s, &["--config", "h.toml"], &calls);
    assert_eq!(s.trace("t.jsonl")[0]["error"]["code"], "unknown_tool", "{}", r.stderr);
    // Where the cache says the section starts it (an entry edited here: a library whose init
    // fails only now), the run offers `calculate` without opening calc; its first call opens
    // it, and each call fails plugin_unavailable.
    let empty = format!("{:x}", sha2::Sha256::digest(b"{}"));
    let section = format!("{:x}", sha2::Sha256::digest(br#"{"precision":3}"#));
    for entry in entries(&s) {
        let text = std::fs::read_to_string(&entry).unwrap();
        std::fs::write(&entry, text.replace(&empty, &section)).unwrap();
    }
    let r = run(&s, &["--config", "h.toml"], &calls);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let steps = s.trace("t.jsonl");
    for step in &steps[..2] {
        assert_eq!(step["error"]["code"], "plugin_unavailable", "{step}");
        let message = step["error"]["message"].as_str().unwrap();
        assert!(message.contains("libcalc") && message.contains("precision"), "{message}");
    }
    assert!(r.stderr.contains("skipped") && r.stderr.contains("found at its first call"), "{}", r.stderr);

    // Without the cache, the same configuration skips calc before the run, as it always did.
    let r = list_without_cache(&s, &["--config", "h.toml"]);
    assert_eq!(r.json()["plugins"], json!([]), "{}", r.stdout);
}

#[test]
fn a_run_confines_as_pure_a_plugin_whose_edited_entry_declares_it_pure() {
    let s = Scratch::new();
    s.write("root/a.txt", "secret");
    files_cached_then_declared_pure(&s);
    let calls = [
        json!({"tool": "read_file", "arguments": {"path": "a.txt"}}),
        json!({"tool": "finish", "arguments": {"answer": "none"}}),
    ];
    let r = run(&s, &["--config", "h.toml"], &calls);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let step = &s.trace("t.jsonl")[0];
    assert_eq!(step["error"]["code"], "tool_error", "{step}");
    let message = step["error"]["message"].as_str().unwrap();
    assert!(message.contains("Permission denied"), "{message}");
    assert!(!step.to_string().contains("secret"), "{step}");
}

#[test]
fn a_run_refuses_at_the_first_call_a_vouched_plugin_whose_edited_entry_declares_it_pure() {
    let s = Scratch::new();
    s.write("root/a.txt", "secret");
    files_cached_then_declared_pure(&s);
    s.write("in.toml", "[plugins.files]\nroot = \"root\"\nisolation = \"in-process\"\n");
    let calls = [
        json!({"tool": "read_file", "arguments": {"path": "a.txt"}}),
        json!({"tool": "finish", "arguments": {"answer": "none"}}),
    ];
    let r = run(&s, &["--config", "in.toml"], &calls);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let step = &s.trace("t.jsonl")[0];
    assert_eq!(step["error"]["code"], "plugin_unavailable", "{step}");
    snapshot(
        "plugin-cache-entry-edited-refused-at-first-call",
        &s,
        step["error"]["message"].as_str().unwrap(),
        &[(r"[0-9a-f]{16,}", "[hash]")],
    );
    assert!(!step.to_string().contains("secret"), "{step}");
}

/// The tools a run offers, from its trace's first line.
fn offered_by_run(s: &Scratch, config: &[&str], trace: &str) -> Vec<String> {
    let dir = s.path("p").to_string_lossy().into_owned();
    let r = ran(s
        .harness()
        .args(["run", "calculate 6*7", "-q", "--no-default-plugins", "--plugins-dir", &dir, "--trace", trace])
        .args(config));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let start = &s.trace_lines(trace)[0];
    start["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap().to_owned()).collect()
}

#[test]
fn a_plugin_that_declines_its_configuration_is_offered_by_no_run_cached_or_not() {
    let s = Scratch::new();
    copy_into(&s, "p", &plugin("files"));
    copy_into(&s, "p", &plugin("calc"));
    // No [plugins.files] root: the plugin declines, and plugins list says so.
    let listed = list(&s, &[]);
    let files = listed["plugins"].as_array().unwrap().iter().find(|p| p["name"] == "files").unwrap();
    assert!(files["tools"].to_string().contains(r#""needs":"[plugins.files] root""#), "{files}");
    // A cold run, then warm runs from the cache (opened at the first call): never offered.
    for n in 0..3 {
        let tools = offered_by_run(&s, &[], &format!("t{n}.jsonl"));
        assert_eq!(tools, ["finish", "calculate"], "run {n}");
    }
    // Configured, the same file's tools are offered, at once and from the cache.
    std::fs::create_dir_all(s.path("root")).unwrap();
    s.write("h.toml", "[plugins.files]\nroot = \"root\"\n");
    for n in 0..2 {
        let tools = offered_by_run(&s, &["--config", "h.toml"], &format!("c{n}.jsonl"));
        assert!(tools.contains(&"read_file".to_owned()), "run {n}: {tools:?}");
    }
    // And without the root again: declined from the cache, not offered.
    assert_eq!(offered_by_run(&s, &[], "u.jsonl"), ["finish", "calculate"]);
}
