//! Approvals through the binary: a write waits for the operator, the run stops cleanly
//! (exit 4), and resumes from its trace exactly where it stopped.

use serde_json::{Value, json};

use crate::support::{BATCH_TIMINGS, Scratch, error_details, ran, snapshot};

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
    r.usage_error(&["call_9", "t.jsonl", "call_2", "write_file"]);
    let rest = s.write("rest.jsonl", &format!("{}\n", call("finish", json!({"answer": "gave up"}))));
    let r = ran(s
        .harness()
        .args(["run", "--resume", "t.jsonl", "--deny", "call_2", "--reason", "not in this repository"])
        .args(["--config", "h.toml", "--json", "--script"])
        .arg(&rest));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let t = s.trace("t.jsonl");
    assert_eq!(t[1]["status"], "rejected");
    assert_eq!(error_details(&t[1], "call_denied")["reason"], "not in this repository");
    assert!(!s.path("root/out.txt").exists());

    // Without --json, stderr says how to answer, or why the run cannot resume.
    let write = s.script(&[call("write_file", json!({"path": "u.txt", "content": "u"}))]);
    let r = ran(s.harness().args(["run", "x", "--config", "h.toml", "--trace", "u.jsonl", "--script"]).arg(&write));
    assert_eq!(r.code, 4, "{}", r.stderr);
    snapshot("approval-how-to-answer", &s, &r.stderr, &[(r"@[0-9a-f]{16}", "@[digest]")]);
    let r = ran(s.harness().args(["run", "x", "--config", "h.toml", "--script"]).arg(&write));
    assert_eq!(r.code, 4, "{}", r.stderr);
    snapshot("approval-cannot-resume-without-a-trace", &s, &r.stderr, &[]);
}

#[test]
fn a_resumed_run_asks_the_provider_its_trace_ran_never_another_silently() {
    let s = scratch_with_root();
    stop_before_the_write(&s);
    // No provider flag: the offline router would have answered; the trace ran scripted.
    let r = ran(s.harness().args(["run", "--resume", "t.jsonl", "--approve", "call_2", "--config", "h.toml"]));
    r.usage_error(&["--resume", "scripted", "--script FILE"]);
    assert!(!s.path("root/out.txt").exists(), "refused before anything ran");
    // Another provider named on purpose is used, and said.
    let r = ran(s.harness().args([
        "run",
        "--resume",
        "t.jsonl",
        "--approve",
        "call_2",
        "--config",
        "h.toml",
        "--provider",
        "offline",
    ]));
    assert!(
        r.stderr.contains("resuming with provider offline (--provider), where the trace ran scripted"),
        "{}",
        r.stderr
    );
}

#[test]
fn a_denied_call_stays_denied_under_a_policy_that_would_allow_it() {
    let s = scratch_with_root();
    stop_before_the_write(&s);
    let rest = s.write("rest.jsonl", &format!("{}\n", call("finish", json!({"answer": "gave up"}))));
    let r = ran(s
        .harness()
        .args(["run", "--resume", "t.jsonl", "--deny", "call_2", "--allow", "writes"])
        .args(["--config", "h.toml", "--json", "--script"])
        .arg(&rest));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(s.trace("t.jsonl")[1]["error"]["code"], "call_denied");
    assert!(!s.path("root/out.txt").exists(), "the operator said no to this call");
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
    r.usage_error(&["bad.toml", "policy.writes", "maybe"]);
}

/// Requests w1, w2, w3 each write a file (files.write_file, effect writes) then finish; p only
/// calculates.
fn writing_batch(s: &Scratch) -> std::path::PathBuf {
    let write = |id: &str, file: &str| {
        let script = [call("write_file", json!({"path": file, "content": id})), call("finish", json!({"answer": id}))];
        json!({"id": id, "request": format!("write {file}"), "script": script}).to_string()
    };
    let pure = json!({"id": "p", "request": "6*7", "script": [call("calculate", json!({"expression": "6*7"})), call("finish", json!({"answer": 42}))]});
    let lines = [write("w1", "a.txt"), write("w2", "b.txt"), pure.to_string(), write("w3", "c.txt")];
    s.write("requests.jsonl", &(lines.join("\n") + "\n"))
}

/// The latest result line of each id in a results file.
fn latest(s: &Scratch, name: &str) -> std::collections::HashMap<String, Value> {
    let text = std::fs::read_to_string(s.path(name)).unwrap();
    text.lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .map(|v| (v["id"].as_str().unwrap().to_owned(), v))
        .collect()
}

fn batch(s: &Scratch, input: &std::path::Path, out: &str) -> std::process::Command {
    let mut cmd = s.harness();
    cmd.arg("batch").arg(input).args(["--out", out, "--config", "h.toml", "--provider", "scripted", "-q"]);
    cmd
}

#[test]
fn a_batch_stops_writes_for_approval_and_resumes_them_from_an_approvals_file() {
    let s = scratch_with_root();
    let input = writing_batch(&s);
    let r = ran(&mut batch(&s, &input, "out.jsonl"));
    assert_eq!(r.code, 4, "{}", r.stderr);
    snapshot("batch-summary-3-runs-await-approval", &s, &r.stdout, &[BATCH_TIMINGS]);
    for file in ["a.txt", "b.txt", "c.txt"] {
        assert!(!s.path("root").join(file).exists(), "{file} written before approval");
    }
    let first = latest(&s, "out.jsonl");
    assert_eq!(first["p"]["status"], "finished");
    let w1 = &first["w1"];
    assert_eq!(w1["status"], "awaiting_approval", "{w1}");
    assert_eq!(
        (&w1["pending"]["id"], &w1["pending"]["key"], &w1["pending"]["effect"]),
        (&json!("call_1"), &json!("files.write_file"), &json!("writes"))
    );
    assert_eq!(w1["pending"]["arguments"], json!({"path": "a.txt", "content": "w1"}));
    // Without --traces, the trace an awaiting run resumes from is kept beside the results.
    assert_eq!(w1["trace"], "out.jsonl.pending/w1.jsonl");
    assert_eq!(s.trace("out.jsonl.pending/w1.jsonl")[0]["status"], "awaiting_approval");

    // Bad answers stop the batch before anything runs, each named by file and line.
    s.write(
        "bad.jsonl",
        "{\"id\": \"nope\", \"call\": \"call_1\", \"approve\": true}\n{\"id\": \"w1\", \"call\": \"call_7\", \"approve\": true}\n{\"id\": \"w2\"\n",
    );
    let r = ran(batch(&s, &input, "out.jsonl").args(["--approvals", "bad.jsonl"]));
    r.usage_error(&["bad.jsonl:1", "bad.jsonl:2", "bad.jsonl:3"]);
    // The runs of a batch finish in any order, and so their lines in the results file.
    snapshot("approval-bad-answers-in-a-batch", &s, &r.stderr, &[(r"result line \d+", "result line [n]")]);
    assert_eq!(std::fs::read_to_string(s.path("out.jsonl")).unwrap().lines().count(), 4, "nothing ran");

    // w1 approved (with the digest its result line shows), w2 denied, w3 unanswered.
    let approve = |id: &str| {
        let digest = &first[id]["pending"]["digest"].as_str().unwrap()[..16];
        json!({"id": id, "call": "call_1", "digest": digest, "approve": true}).to_string() + "\n"
    };
    s.write(
        "approvals.jsonl",
        &(approve("w1")
            + "{\"id\": \"w2\", \"call\": \"call_1\", \"approve\": false, \"reason\": \"not in this repository\"}\n"),
    );
    let r = ran(batch(&s, &input, "out.jsonl").args(["--approvals", "approvals.jsonl"]));
    assert_eq!(r.code, 4, "{}", r.stderr);
    snapshot("batch-summary-2-resumed-1-awaits-approval", &s, &r.stdout, &[BATCH_TIMINGS]);
    assert_eq!(std::fs::read_to_string(s.path("root/a.txt")).unwrap(), "w1");
    assert!(!s.path("root/b.txt").exists() && !s.path("root/c.txt").exists());
    let now = latest(&s, "out.jsonl");
    assert_eq!((&now["w1"]["status"], &now["w1"]["answer"]), (&json!("finished"), &json!("w1")));
    assert_eq!((&now["w2"]["status"], &now["w2"]["answer"]), (&json!("finished"), &json!("w2")));
    assert_eq!(now["w3"]["status"], "awaiting_approval", "an unanswered run keeps waiting");
    assert_eq!(std::fs::read_to_string(s.path("out.jsonl")).unwrap().lines().count(), 6, "w3 and p not run again");
    // The resumed runs continue where they stopped: the model is not asked again for the write.
    let w1 = s.trace(now["w1"]["trace"].as_str().unwrap());
    let steps: Vec<(Value, Value)> = w1.iter().map(|l| (l["tool"].clone(), l["status"].clone())).collect();
    assert_eq!(steps, [(json!("write_file"), json!("ok")), (json!("finish"), json!("finished"))]);
    let w2 = s.trace(now["w2"]["trace"].as_str().unwrap());
    assert_eq!(error_details(&w2[0], "call_denied")["reason"], "not in this repository");

    // The same command again changes nothing: the answered runs no longer wait.
    let r = ran(batch(&s, &input, "out.jsonl").args(["--approvals", "approvals.jsonl"]));
    assert_eq!(r.code, 4, "{}", r.stderr);
    assert_eq!(std::fs::read_to_string(s.path("out.jsonl")).unwrap().lines().count(), 6);

    // Resumed with --traces, the run's whole trace moves there from the pending directory.
    s.write("w3.jsonl", &approve("w3"));
    let r = ran(batch(&s, &input, "out.jsonl").args(["--approvals", "w3.jsonl", "--traces", "tr"]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(std::fs::read_to_string(s.path("root/c.txt")).unwrap(), "w3");
    assert_eq!(latest(&s, "out.jsonl")["w3"]["trace"], "tr/w3.jsonl");
    assert_eq!(s.trace_lines("tr/w3.jsonl")[0]["request"], "write c.txt", "the first line is kept");
    assert!(!s.path("out.jsonl.pending/w3.jsonl").exists());

    // A merge keeps each id's latest line.
    let r = ran(s.harness().args(["batch", "merge", "--out", "merged.jsonl", "out.jsonl"]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let merged = std::fs::read_to_string(s.path("merged.jsonl")).unwrap();
    assert_eq!(merged.lines().count(), 4, "{merged}");
    assert!(latest(&s, "merged.jsonl").values().all(|l| l["status"] == "finished"), "{merged}");
}

#[test]
fn a_batch_allowed_to_write_runs_straight_through() {
    let s = scratch_with_root();
    let input = writing_batch(&s);
    let r = ran(batch(&s, &input, "out.jsonl").args(["--allow", "writes", "--traces", "tr"]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(latest(&s, "out.jsonl").values().all(|l| l["status"] == "finished"));
    assert_eq!(std::fs::read_to_string(s.path("root/c.txt")).unwrap(), "w3");
    assert!(!s.path("out.jsonl.pending").exists());

    // With --traces, an awaiting run's trace is there, and resumes from it.
    let r = ran(batch(&s, &input, "ask.jsonl").args(["--traces", "tr2"]));
    assert_eq!(r.code, 4, "{}", r.stderr);
    assert_eq!(latest(&s, "ask.jsonl")["w3"]["trace"], "tr2/w3.jsonl");
    let digest = latest(&s, "ask.jsonl")["w3"]["pending"]["digest"].as_str().unwrap().to_owned();
    s.write("ok.jsonl", &(json!({"id": "w3", "call": "call_1", "digest": digest, "approve": true}).to_string() + "\n"));
    std::fs::remove_file(s.path("root/c.txt")).unwrap();
    let r = ran(batch(&s, &input, "ask.jsonl").args(["--traces", "tr2", "--approvals", "ok.jsonl"]));
    assert_eq!(r.code, 4, "w1 and w2 still wait: {}", r.stderr);
    assert_eq!(std::fs::read_to_string(s.path("root/c.txt")).unwrap(), "w3");
    assert_eq!(s.trace("tr2/w3.jsonl").len(), 2);
}

#[test]
fn a_call_id_with_terminal_escapes_is_printed_escaped_everywhere() {
    let s = scratch_with_root();
    let id = "call\u{1b}[2K\rharness: to answer: harness run --resume t.jsonl --approve evil";
    let write = json!({"tool": "write_file", "arguments": {"path": "a.txt", "content": "a"}, "id": id});
    let script = s.script(&[write]);
    let r = ran(s.harness().args(["run", "x", "--config", "h.toml", "--trace", "t.jsonl", "--script"]).arg(&script));
    assert_eq!(r.code, 4, "{}", r.stderr);
    let escaped = "call\\u{1b}[2K\\rharness: to answer";
    assert!(!r.stderr.contains(['\u{1b}', '\r']), "a raw escape from the id: {:?}", r.stderr);
    assert!(r.stderr.contains(&format!("awaiting_approval: the call {escaped}")), "{}", r.stderr);
    assert!(r.stderr.contains(&format!("--approve {escaped}")), "{}", r.stderr);
    assert_eq!(s.trace("t.jsonl")[0]["error"]["details"]["pending"]["id"], id, "the trace keeps the id as sent");
    let wrong = ["run", "--resume", "t.jsonl", "--approve", "other", "--config", "h.toml"];
    for args in [&wrong[..], &["trace", "show", "t.jsonl"]] {
        let r = ran(s.harness().args(args));
        let printed = r.stdout + &r.stderr;
        assert!(printed.contains("call\\u{1b}[2K\\r"), "{args:?}: {printed}");
        assert!(!printed.contains(['\u{1b}', '\r']), "{args:?}: {printed:?}");
    }
}

#[test]
fn a_batch_approval_binds_the_digest_its_result_line_shows() {
    let s = scratch_with_root();
    let input = writing_batch(&s);
    let r = ran(&mut batch(&s, &input, "out.jsonl"));
    assert_eq!(r.code, 4, "{}", r.stderr);
    let shown = latest(&s, "out.jsonl")["w1"]["pending"]["digest"].as_str().unwrap().to_owned();
    // An attacker who can write the pending trace and the results file points the pending
    // write elsewhere, with a digest that matches the edited call everywhere.
    let forged = harness_core::call_digest("write_file", &json!({"path": "evil.txt", "content": "w1"}));
    for file in ["out.jsonl.pending/w1.jsonl", "out.jsonl"] {
        let text = std::fs::read_to_string(s.path(file)).unwrap();
        let edited = text.replace("\"a.txt\"", "\"evil.txt\"").replace(&shown, &forged);
        std::fs::write(s.path(file), edited).unwrap();
    }
    let lines = (std::fs::read_to_string(s.path("out.jsonl")).unwrap().lines().count(), 4);

    // An approval that names no digest approves nothing.
    s.write("bare.jsonl", "{\"id\": \"w1\", \"call\": \"call_1\", \"approve\": true}\n");
    let r = ran(batch(&s, &input, "out.jsonl").args(["--approvals", "bare.jsonl"]));
    r.usage_error(&["bare.jsonl:1", "request \"w1\"", "\"digest\"", "nothing ran"]);
    // One that names the digest shown before the edit is refused: the call changed.
    let approval = json!({"id": "w1", "call": "call_1", "digest": &shown[..16], "approve": true});
    s.write("shown.jsonl", &(approval.to_string() + "\n"));
    let r = ran(batch(&s, &input, "out.jsonl").args(["--approvals", "shown.jsonl"]));
    r.usage_error(&["shown.jsonl:1", "request \"w1\"", "changed since it was shown", "nothing ran"]);
    assert!(!s.path("root/evil.txt").exists(), "the edited call ran");
    assert_eq!(lines, (std::fs::read_to_string(s.path("out.jsonl")).unwrap().lines().count(), 4), "nothing ran");

    // The results file put back as shown, the trace still edited: the approval holds for the
    // call shown, so the edited one is not run and the run waits again.
    let text = std::fs::read_to_string(s.path("out.jsonl")).unwrap();
    std::fs::write(s.path("out.jsonl"), text.replace("\"evil.txt\"", "\"a.txt\"").replace(&forged, &shown)).unwrap();
    let r = ran(batch(&s, &input, "out.jsonl").args(["--approvals", "shown.jsonl"]));
    assert_eq!(r.code, 4, "{}", r.stderr);
    let w1 = &latest(&s, "out.jsonl")["w1"];
    assert_eq!(
        (&w1["status"], &w1["error"]["details"]["changed_since_shown"]),
        (&json!("awaiting_approval"), &json!(true)),
        "{w1}"
    );
    assert!(!s.path("root/evil.txt").exists(), "the edited call ran");
}

/// The trace `t.jsonl` with the pending write's path changed to `evil.txt`, as an attacker
/// who can write the file would; `digest` also replaced when given.
fn edit_pending_write(s: &Scratch, digest: Option<(&str, &str)>) {
    let text = std::fs::read_to_string(s.path("t.jsonl")).unwrap().replace("\"out.txt\"", "\"evil.txt\"");
    let text = digest.map_or(text.clone(), |(from, to)| text.replace(from, to));
    std::fs::write(s.path("t.jsonl"), text).unwrap();
}

#[test]
fn an_approval_holds_for_the_call_shown_not_for_an_edited_trace() {
    let s = scratch_with_root();
    let out = stop_before_the_write(&s);
    let shown = out["pending"]["digest"].as_str().unwrap().to_owned();
    assert_eq!(shown.len(), 64, "sha256 hex: {out}");
    let original = std::fs::read_to_string(s.path("t.jsonl")).unwrap();
    let rest = s.write("rest.jsonl", &format!("{}\n", call("finish", json!({"answer": "written"}))));
    let resume = |approve: &str| {
        let args = ["run", "--resume", "t.jsonl", "--approve", approve, "--config", "h.toml", "--json", "--script"];
        ran(s.harness().args(args).arg(&rest))
    };

    // The arguments edited, the digest left: the call is not run, and waits again.
    edit_pending_write(&s, None);
    let r = resume("call_2");
    assert_eq!(r.code, 4, "{}", r.stderr);
    let details = error_details(&r.json(), "awaiting_approval").clone();
    assert_eq!((&details["changed_since_shown"], &details["pending"]["id"]), (&json!(true), &json!("call_2")));
    assert!(!s.path("root/evil.txt").exists() && !s.path("root/out.txt").exists(), "the edited call ran");

    // The digest forged too: an approval that names the digest shown refuses before anything.
    std::fs::write(s.path("t.jsonl"), &original).unwrap();
    let forged = harness_core::call_digest("write_file", &json!({"path": "evil.txt", "content": "42"}));
    edit_pending_write(&s, Some((&shown, &forged)));
    let r = resume(&format!("call_2@{}", &shown[..16]));
    r.usage_error(&["call_2"]);
    snapshot("approval-call-changed-since-shown", &s, &r.stderr, &[(r"[0-9a-f]{16,64}", "[digest]")]);
    assert!(!s.path("root/evil.txt").exists(), "the forged call ran");

    // The call as shown, approved with its digest, runs.
    std::fs::write(s.path("t.jsonl"), &original).unwrap();
    let r = resume(&format!("call_2@{}", &shown[..16]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(std::fs::read_to_string(s.path("root/out.txt")).unwrap(), "42");
}

/// A link planted at a pending run's temporary file (`<out>.pending/<id>.jsonl.partial`) is
/// replaced by the harness's own file, never written through.
#[cfg(unix)]
#[test]
fn a_link_planted_at_a_pending_file_is_never_written_through() {
    let s = scratch_with_root();
    let input = writing_batch(&s);
    let precious = s.write("precious.txt", "precious\n");
    std::fs::create_dir_all(s.path("out.jsonl.pending")).unwrap();
    std::os::unix::fs::symlink(&precious, s.path("out.jsonl.pending/w1.jsonl.partial")).unwrap();
    let r = ran(&mut batch(&s, &input, "out.jsonl"));
    assert_eq!(r.code, 4, "{}{}", r.stdout, r.stderr);
    assert_eq!(std::fs::read_to_string(&precious).unwrap(), "precious\n");
    assert_eq!(s.trace("out.jsonl.pending/w1.jsonl")[0]["status"], "awaiting_approval");
}
