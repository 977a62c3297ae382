//! `harness replay`: a recorded run replays clean; a changed tool result is reported at exactly
//! its step, with what changed about the tool; broken and newer traces are read as far as they
//! can be, the problem named by line.

use serde_json::{Value, json};

use crate::support::{Scratch, fixture, ran, snapshot};

fn call(tool: &str, arguments: Value) -> Value {
    json!({ "tool": tool, "arguments": arguments })
}

/// Records a run of every kind of step: text with no call, a tool error, an unknown tool, a
/// calculation, a file read, and finish.
fn record(s: &Scratch) {
    // The root is a directory of its own: a write area that held files.toml is refused.
    s.write("files/data.txt", "first version");
    s.write("files.toml", "[plugins.files]\nroot = \"files\"\n");
    let script = s.script(&[
        json!({ "content": "no call here" }),
        call("calculate", json!({ "expression": "1/0" })),
        call("no_such_tool", json!({})),
        json!({ "id": "a", "tool": "calculate", "arguments": { "expression": "6*7" } }),
        json!({ "id": "b", "tool": "read_file", "arguments": { "path": "data.txt" } }),
        call("finish", json!({ "answer": 42 })),
    ]);
    let r = ran(s
        .harness()
        .args(["run", "what is 6*7", "-q", "--config", "files.toml", "--trace", "t.jsonl", "--script"])
        .arg(&script));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let steps = s.trace("t.jsonl");
    assert_eq!(steps.len(), 6, "six steps recorded");
    assert_eq!(steps[4]["result"]["content"], "first version", "the file was read: {}", steps[4]);
}

#[test]
fn a_recorded_run_replays_clean() {
    let s = Scratch::new();
    record(&s);
    let r = ran(s.harness().args(["replay", "t.jsonl", "--config", "files.toml"]));
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert_eq!(r.stdout, "replay of t.jsonl: 6 steps replayed as recorded, ended finished; no drift\n");
    let r = ran(s.harness().args(["replay", "t.jsonl", "--config", "files.toml", "--json"]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let report = r.json();
    assert_eq!(report["clean"], true);
    assert_eq!((report["recorded_steps"].as_u64(), report["replayed_steps"].as_u64()), (Some(6), Some(6)));
    assert_eq!(report["drift"], json!([]));
}

#[test]
fn a_changed_result_is_reported_at_exactly_that_step() {
    let s = Scratch::new();
    record(&s);
    // The file the recorded run read has changed: step 5, which read it, drifts.
    s.write("files/data.txt", "second version");
    let r = ran(s.harness().args(["replay", "t.jsonl", "--config", "files.toml", "--json"]));
    assert_eq!(r.code, 1, "{}", r.stderr);
    let report = r.json();
    let drift = report["drift"].as_array().unwrap();
    assert_eq!(drift.len(), 1, "{report}");
    assert_eq!((drift[0]["step"].as_u64(), drift[0]["tool"].as_str()), (Some(5), Some("read_file")));
    assert_eq!(drift[0]["what"], "result");
    assert_eq!(drift[0]["recorded"]["content"], "first version");
    assert_eq!(drift[0]["replayed"]["content"], "second version");
    assert!(drift[0].get("tool_changed").is_none(), "the tool itself did not change: {report}");
    assert_eq!(report["tools_changed"], json!([]));
    let r = ran(s.harness().args(["replay", "t.jsonl", "--config", "files.toml"]));
    assert_eq!(r.code, 1);
    snapshot("replay-drift-report", &s, &r.stdout, &[]);
}

#[test]
fn a_tool_from_another_plugin_is_named_with_its_version_and_definition() {
    let s = Scratch::new();
    record(&s);
    // Today `calculate` comes from another plugin (the clash fixture), which always answers 0.
    std::fs::create_dir_all(s.path("q")).unwrap();
    let clash = fixture("clash");
    std::fs::copy(&clash, s.path("q").join(clash.file_name().unwrap())).unwrap();
    let r = ran(s.harness().args([
        "replay",
        "t.jsonl",
        "--config",
        "files.toml",
        "--json",
        "--disable",
        "calc",
        "--plugins-dir",
        "q",
    ]));
    assert_eq!(r.code, 1, "{}", r.stderr);
    let report = r.json();
    let drift = report["drift"].as_array().unwrap();
    let steps: Vec<u64> = drift.iter().filter_map(|d| d["step"].as_u64()).collect();
    assert_eq!(steps, [2, 4], "the two calls of calculate, and nothing else: {report}");
    assert_eq!(drift[0]["what"], "status", "1/0 failed when recorded, answers 0 now");
    assert_eq!(drift[0]["recorded"]["error"], "tool_error");
    assert_eq!((drift[1]["what"].as_str(), drift[1]["tool"].as_str()), (Some("result"), Some("calculate")));
    assert_eq!((drift[1]["recorded"].as_i64(), drift[1]["replayed"].as_i64()), (Some(42), Some(0)));
    let changed: Vec<&str> = drift[1]["tool_changed"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
    assert!(changed.iter().any(|c| c.contains("plugin calc 0.1.0") && c.contains("plugin clash 0.1.0")), "{changed:?}");
    assert!(changed.iter().any(|c| c.contains("definition")), "{changed:?}");
}

#[test]
fn broken_lines_and_newer_formats_are_read_as_far_as_they_can_be() {
    let s = Scratch::new();
    record(&s);
    let text = std::fs::read_to_string(s.path("t.jsonl")).unwrap();
    let lines: Vec<&str> = text.lines().collect();

    // From a newer harness: a later format, and fields this one does not know on every line.
    let newer: String = lines
        .iter()
        .map(|l| {
            let mut v: Value = serde_json::from_str(l).unwrap();
            v["from_the_future"] = json!({ "x": 1 });
            if v["kind"] == "start" {
                v["format"] = json!(99);
            }
            format!("{v}\n")
        })
        .collect();
    s.write("newer.jsonl", &newer);
    let r = ran(s.harness().args(["replay", "newer.jsonl", "--config", "files.toml"]));
    assert_eq!(r.code, 0, "unknown fields are ignored: {}\n{}", r.stdout, r.stderr);
    snapshot("replay-a-newer-format", &s, &r.stderr, &[(r"by harness \S+;", "by harness [version];")]);

    // A line broken in the middle (step 3's): named by number, and what follows from it is drift.
    let mut broken: Vec<String> = lines.iter().map(|l| (*l).to_owned()).collect();
    broken[3] = broken[3][..20].to_owned();
    s.write("broken.jsonl", &(broken.join("\n") + "\n"));
    let r = ran(s.harness().args(["replay", "broken.jsonl", "--config", "files.toml", "--json"]));
    assert_eq!(r.code, 1, "{}", r.stderr);
    snapshot("replay-a-broken-line", &s, &r.stderr, &[]);
    let report = r.json();
    assert_eq!(report["unread_lines"][0]["line"], 4, "{report}");
    // Its reply is gone: the replay runs the next recorded reply at step 3, which the trace has
    // no readable record of, and every later step is one off.
    let drift = report["drift"].as_array().unwrap();
    assert_eq!((drift[0]["step"].as_u64(), drift[0]["what"].as_str()), (Some(3), Some("unrecorded")), "{report}");
    assert_eq!(drift.last().unwrap()["what"], "missing", "{report}");

    // No first line (an older harness's trace): cannot be replayed, and says why.
    s.write("old.jsonl", &(lines[1..].join("\n") + "\n"));
    let r = ran(s.harness().args(["replay", "old.jsonl"]));
    r.usage_error(&["old.jsonl"]);
    snapshot("replay-no-first-line", &s, &r.stderr, &[]);
}

#[test]
fn a_run_that_ran_out_of_time_replays_to_the_same_ending() {
    let s = Scratch::new();
    let script = s.script(&[call("fault_sleep", json!({ "ms": 3000 })), call("fault_echo", json!({ "value": 1 }))]);
    let r = ran(s
        .harness()
        .args(["run", "x", "-q", "--enable", "fault", "--max-seconds", "0.3", "--trace", "t.jsonl", "--script"])
        .arg(&script));
    assert_eq!(r.code, 3, "{}", r.stderr);
    let r = ran(s.harness().args(["replay", "t.jsonl", "--enable", "fault", "--json"]));
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert_eq!(r.json()["replayed_end"], "time_budget_exhausted");
}

/// A run that writes `out.txt` under `root/` with the files plugin, recorded in `name`;
/// `allow` says whether the write ran or the run stopped before it for approval.
fn record_a_write(s: &Scratch, name: &str, allow: bool) {
    std::fs::create_dir_all(s.path("root")).unwrap();
    s.write("w.toml", "[plugins.files]\nroot = \"root\"\n");
    let script = s.script(&[
        json!({ "id": "w", "tool": "write_file", "arguments": { "path": "out.txt", "content": "from the trace" } }),
        call("finish", json!({ "answer": "written" })),
    ]);
    let mut cmd = s.harness();
    cmd.args(["run", "write it", "-q", "--config", "w.toml", "--trace", name, "--script"]).arg(&script);
    if allow {
        cmd.args(["--allow", "writes"]);
    }
    let r = ran(&mut cmd);
    assert_eq!(r.code, if allow { 0 } else { 4 }, "{}", r.stderr);
}

#[test]
fn a_replay_runs_no_call_the_policy_would_ask_about() {
    let s = Scratch::new();
    // The recorded run stopped before the write, awaiting approval: replayed, it stops there too.
    record_a_write(&s, "stopped.jsonl", false);
    let r = ran(s.harness().args(["replay", "stopped.jsonl", "--config", "w.toml"]));
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("ended awaiting_approval; no drift"), "{}", r.stdout);
    assert!(!s.path("root/out.txt").exists(), "the replay wrote what the record never did");

    // A trace whose write was approved (as one from a pull request may say) writes nothing
    // when replayed: the call stops awaiting approval, a drift that says how to allow it.
    record_a_write(&s, "approved.jsonl", true);
    std::fs::remove_file(s.path("root/out.txt")).unwrap();
    let r = ran(s.harness().args(["replay", "approved.jsonl", "--config", "w.toml"]));
    assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("step 1 write_file: status"), "{}", r.stdout);
    assert!(r.stdout.contains("--allow TOOL or --allow CLASS"), "{}", r.stdout);
    assert!(!s.path("root/out.txt").exists(), "the replay wrote without approval");

    // The operator allows it for the replay: it runs and replays clean.
    let r = ran(s.harness().args(["replay", "approved.jsonl", "--config", "w.toml", "--allow", "files.write_file"]));
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert_eq!(std::fs::read_to_string(s.path("root/out.txt")).unwrap(), "from the trace");

    // The configuration's [policy] holds too: denied there, the call is not run.
    std::fs::remove_file(s.path("root/out.txt")).unwrap();
    s.write("deny.toml", "[plugins.files]\nroot = \"root\"\n[policy]\nwrites = \"deny\"\n");
    let r = ran(s.harness().args(["replay", "approved.jsonl", "--config", "deny.toml", "--json"]));
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert_eq!(r.json()["drift"][0]["replayed"]["error"], "call_denied", "{}", r.stdout);
    assert!(!s.path("root/out.txt").exists());
}

#[test]
fn a_replay_starts_no_mcp_server_that_no_replayed_call_needs() {
    let s = Scratch::new();
    record(&s);
    // A server that leaves a mark when started; the trace calls none of its tools.
    let config = "[plugins.files]\nroot = \"files\"\n[[mcp.servers]]\nname = \"marker\"\ncommand = \"/bin/sh\"\nargs = [\"-c\", \"touch started\"]\n";
    s.write("mcp.toml", config);
    let r = ran(s.harness().args(["replay", "t.jsonl", "--config", "mcp.toml"]));
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert!(!s.path("started").exists(), "an MCP server no replayed call needs was started");
}
