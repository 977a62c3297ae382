//! Approvals through the binary: a write waits for the operator, the run stops cleanly
//! (exit 4), and resumes from its trace exactly where it stopped.

use serde_json::{Value, json};

use crate::support::{Scratch, ran};

fn call(tool: &str, arguments: Value) -> Value {
    json!({ "tool": tool, "arguments": arguments })
}

fn scratch_with_root() -> Scratch {
    let s = Scratch::new();
    std::fs::create_dir_all(s.path("root")).unwrap();
    s.write("h.toml", "[plugins.files]\nroot = \"root\"\n");
    s
}

fn stop_before_the_write(s: &Scratch) -> Value {
    let script = s.script(&[
        call("calculate", json!({"expression": "6*7"})),
        call("write_file", json!({"path": "out.txt", "content": "42"})),
        call("finish", json!({"answer": "never reached"})),
    ]);
    let r = ran(s
        .harness()
        .args(["run", "write 6*7", "--config", "h.toml", "--json", "--trace", "t.jsonl", "--script"])
        .arg(&script));
    assert_eq!(r.code, 4, "{}", r.stderr);
    assert!(!s.path("root/out.txt").exists(), "nothing written before approval");
    r.json()
}

#[test]
fn a_write_waits_for_approval_then_resumes_and_writes() {
    let s = scratch_with_root();
    let out = stop_before_the_write(&s);
    assert_eq!(out["status"], "awaiting_approval");
    assert_eq!(out["pending"]["id"], "call_2");
    assert_eq!((&out["pending"]["key"], &out["pending"]["effect"]), (&json!("files.write_file"), &json!("writes")));
    let t = s.trace_lines("t.jsonl");
    let last_step = &t[t.len() - 2];
    assert_eq!(
        (&last_step["status"], &last_step["error"]["details"]["pending"]["id"]),
        (&json!("awaiting_approval"), &json!("call_2"))
    );
    assert_eq!(
        (&t.last().unwrap()["kind"], &t.last().unwrap()["status"]),
        (&json!("end"), &json!("awaiting_approval"))
    );

    // The replies still to come: the model is not asked for the write again.
    let rest = s.write("rest.jsonl", &format!("{}\n", call("finish", json!({"answer": "written"}))));
    let r = ran(s
        .harness()
        .args(["run", "--resume", "t.jsonl", "--approve", "call_2", "--config", "h.toml", "--json", "--script"])
        .arg(&rest));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.json()["answer"], "written");
    assert_eq!(std::fs::read_to_string(s.path("root/out.txt")).unwrap(), "42");
    let t = s.trace("t.jsonl");
    let steps: Vec<(Value, Value)> = t.iter().map(|l| (l["step"].clone(), l["status"].clone())).collect();
    assert_eq!(steps, [(json!(1), json!("ok")), (json!(2), json!("ok")), (json!(3), json!("finished"))]);
    assert_eq!(t[1]["result"]["bytes"], 2);
    assert_eq!(s.trace_lines("t.jsonl")[0]["request"], "write 6*7", "the first line is kept");
}

#[test]
fn a_denied_call_is_fed_back_as_call_denied_with_the_reason() {
    let s = scratch_with_root();
    stop_before_the_write(&s);
    let r = ran(s.harness().args(["run", "--resume", "t.jsonl", "--approve", "call_9", "--config", "h.toml"]));
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("the pending call of t.jsonl is call_2 (write_file)"), "{}", r.stderr);
    let rest = s.write("rest.jsonl", &format!("{}\n", call("finish", json!({"answer": "gave up"}))));
    let r = ran(s
        .harness()
        .args(["run", "--resume", "t.jsonl", "--deny", "call_2", "--reason", "not in this repository"])
        .args(["--config", "h.toml", "--json", "--script"])
        .arg(&rest));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let t = s.trace("t.jsonl");
    assert_eq!((&t[1]["status"], &t[1]["error"]["code"]), (&json!("rejected"), &json!("call_denied")));
    assert!(t[1]["error"]["message"].as_str().unwrap().contains("not in this repository"));
    assert!(!s.path("root/out.txt").exists());
}

#[test]
fn policy_from_flags_and_config_allows_or_denies_without_asking() {
    let s = scratch_with_root();
    let script =
        s.script(&[call("write_file", json!({"path": "a.txt", "content": "a"})), call("finish", json!({"answer": 1}))]);
    let r = ran(s
        .harness()
        .args(["run", "x", "--config", "h.toml", "--allow", "files.write_file", "--script"])
        .arg(&script));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(s.path("root/a.txt").exists());
    s.write("d.toml", "[plugins.files]\nroot = \"root\"\n[policy]\nwrites = \"deny\"\n");
    std::fs::remove_file(s.path("root/a.txt")).unwrap();
    let r = ran(s.harness().args(["run", "x", "--config", "d.toml", "--trace", "d.jsonl", "--script"]).arg(&script));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(s.trace("d.jsonl")[0]["error"]["code"], "call_denied");
    assert!(!s.path("root/a.txt").exists());
    s.write("bad.toml", "[policy]\nwrites = \"maybe\"\n");
    let r = ran(s.harness().args(["run", "x", "--config", "bad.toml", "--script"]).arg(&script));
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("policy.writes = \"maybe\""), "{}", r.stderr);
}
