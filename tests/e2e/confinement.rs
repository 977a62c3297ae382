//! Kernel confinement of process isolation, through the binary: tools that break their
//! declared effects are refused by the kernel (Landlock and seccomp), and the run goes on.

use std::io::ErrorKind;
use std::net::TcpListener;
use std::path::PathBuf;

use serde_json::{Value, json};

use crate::support::{Scratch, fixture, ran};

fn call(tool: &str, arguments: Value) -> Value {
    json!({ "tool": tool, "arguments": arguments })
}

/// A plugin directory in the scratch directory holding only the `effects-liar` fixture.
fn liar_dir(s: &Scratch) -> PathBuf {
    let dir = s.path("plugins");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(fixture("effects-liar"), dir.join("libeffects_liar.so")).unwrap();
    dir
}

/// Runs the four lies in `mode`; the trace, and whether the listener saw a connection.
fn lie(mode: &str) -> (Vec<Value>, bool, Scratch) {
    let s = Scratch::new();
    let dir = liar_dir(&s);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let written = s.path("written-by-reads.txt");
    let script = s.script(&[
        call("liar_read", json!({"path": "/etc/passwd"})),
        call("liar_connect", json!({"port": port})),
        call("liar_spawn", json!({})),
        call("liar_write", json!({"path": written})),
        call("finish", json!({"answer": "the run went on"})),
    ]);
    let r = ran(s
        .harness()
        .args(["run", "x", "--json", "--no-default-plugins", "--plugins-dir"])
        .arg(&dir)
        .args(["--enable", "effects-liar", "--isolation", mode, "--trace", "t.jsonl", "--script"])
        .arg(&script));
    assert_eq!(r.code, 0, "{mode}: {}", r.stderr);
    assert_eq!(r.json()["answer"], "the run went on");
    let connected = match listener.accept() {
        Ok(_) => true,
        Err(e) if e.kind() == ErrorKind::WouldBlock => false,
        Err(e) => panic!("accept: {e}"),
    };
    (s.trace("t.jsonl"), connected, s)
}

#[test]
fn a_lying_plugin_is_refused_by_the_kernel_in_process_isolation_and_the_run_goes_on() {
    let (t, connected, s) = lie("process");
    let refusals = [
        ("liar_read", "Permission denied"),
        ("liar_connect", "Operation not permitted"),
        ("liar_spawn", "Operation not permitted"),
        ("liar_write", "Permission denied"),
    ];
    for (line, (tool, errno)) in t.iter().zip(refusals) {
        assert_eq!(line["tool"], tool);
        assert_eq!(line["error"]["code"], "tool_error", "{line}");
        let message = line["error"]["message"].as_str().unwrap();
        assert!(message.contains(errno), "{tool}: {message}");
    }
    assert!(!connected, "the listener saw a connection from a pure tool");
    assert!(!s.path("written-by-reads.txt").exists(), "a reads tool wrote a file");
    assert_eq!(t[4]["status"], "finished");
}

#[test]
fn the_same_lies_succeed_in_process_which_is_what_the_kernel_stops() {
    let (t, connected, s) = lie("in-process");
    for line in &t[..4] {
        assert!(line.get("error").is_none(), "{line}");
    }
    assert!(connected);
    assert!(s.path("written-by-reads.txt").exists());
}

#[test]
fn plugins_list_shows_each_plugins_isolation_and_enforcement() {
    let s = Scratch::new();
    let dir = liar_dir(&s);
    let list = |extra: &[&str]| {
        let r = ran(s
            .harness()
            .args(["plugins", "list", "--no-default-plugins", "--enable", "effects-liar", "--plugins-dir"])
            .arg(&dir)
            .args(extra));
        assert_eq!(r.code, 0, "{}", r.stderr);
        r
    };
    // It declares reads and writes: process isolation by default, confined by the kernel. (The
    // table's wording of both is in the plugins-list snapshot, discovery.rs.)
    let json = list(&["--json"]).json();
    let p = &json["plugins"][0];
    assert_eq!((&p["isolation"], &p["placement"]["kind"]), (&json!("process"), &json!("declares_effects")), "{p}");
    assert_eq!(p["enforcement"]["kind"], "landlock+seccomp", "{p}");
    // A child per effect class: each tool is held to its own declaration.
    let by_class = &p["enforcement"]["confinement"];
    assert_eq!(by_class.as_object().unwrap().keys().collect::<Vec<_>>(), ["pure", "reads", "writes"], "{p}");
    for class in ["pure", "reads", "writes"] {
        assert_eq!(by_class[class]["sockets"], false, "{p}");
    }
    assert_eq!(by_class["reads"]["write"], json!([]), "{p}");
    // Nothing by default: never the working directory, where the harness's own files lie.
    assert_eq!(by_class["writes"]["write"], json!([]), "{p}");
    assert!(!by_class["reads"]["read"].as_array().unwrap().contains(&json!(s.dir.path().canonicalize().unwrap())));
    // The operator's choice wins; in the harness's process nothing is enforced, and it says so.
    let json = list(&["--isolation", "in-process", "--json"]).json();
    let p = &json["plugins"][0];
    assert_eq!((&p["isolation"], &p["placement"]["kind"]), (&json!("in-process"), &json!("command_line")), "{p}");
    assert_eq!(p["enforcement"]["kind"], "none", "{p}");
}

#[test]
fn a_writes_tool_writes_under_its_allowed_paths_and_nowhere_else() {
    let s = Scratch::new();
    let dir = liar_dir(&s);
    let inside = s.path("data");
    std::fs::create_dir_all(&inside).unwrap();
    let config = format!(
        "[policy]\nwrites = \"allow\"\n[plugins.effects-liar]\nallow_paths = [{:?}]\n",
        inside.display().to_string()
    );
    s.write("harness.toml", &config);
    let script = s.script(&[
        call("liar_note", json!({"path": inside.join("in.txt"), "tag": "in", "ms": 0})),
        call("liar_note", json!({"path": s.path("out.txt"), "tag": "out", "ms": 0})),
        call("finish", json!({"answer": "done"})),
    ]);
    let r = ran(s
        .harness()
        .args(["run", "x", "--config", "harness.toml", "--no-default-plugins", "--plugins-dir"])
        .arg(&dir)
        .args(["--enable", "effects-liar", "--trace", "t.jsonl", "--script"])
        .arg(&script));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let t = s.trace("t.jsonl");
    assert_eq!(t[0]["result"], "in", "{}", t[0]);
    assert!(t[1]["error"]["message"].as_str().unwrap().contains("Permission denied"), "{}", t[1]);
    assert_eq!(std::fs::read_to_string(inside.join("in.txt")).unwrap(), "in\n");
    assert!(!s.path("out.txt").exists());
}
