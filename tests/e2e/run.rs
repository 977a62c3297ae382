//! `harness run` through the binary: outputs, exit codes and every trace line.

use serde_json::{Value, json};

use crate::support::{Scratch, error_details, plugin, ran, snapshot};

fn call(tool: &str, arguments: Value) -> Value {
    json!({ "tool": tool, "arguments": arguments })
}

#[test]
fn scripted_calculate_then_finish_prints_json_and_traces_every_step() {
    let s = Scratch::new();
    let script = s.script(&[call("calculate", json!({"expression": "6*7"})), call("finish", json!({"answer": 42}))]);
    let r = ran(s.harness().args(["run", "what is 6*7", "--json", "--trace", "t.jsonl", "--script"]).arg(&script));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let out = r.json();
    assert_eq!(out["status"], "finished");
    assert_eq!(out["answer"], 42);
    assert_eq!(out["steps"], 2);
    assert!(out.get("error").is_none());

    let trace = s.trace("t.jsonl");
    assert_eq!(trace.len(), 2);
    let first = &trace[0];
    assert_eq!(first["step"], 1);
    assert_eq!(first["tool"], "calculate");
    assert_eq!(first["arguments"], json!({"expression": "6*7"}));
    assert_eq!(first["status"], "ok");
    assert_eq!(first["result"], 42);
    assert_eq!(first["plugin"], "calc");
    assert_eq!(first["plugin_version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(first["offered"], "all");
    assert!(first["duration_us"].is_u64() && first["model_us"].is_u64());
    assert!(first.get("error").is_none());
    let last = &trace[1];
    assert_eq!(
        (last["step"].clone(), last["tool"].clone(), last["status"].clone()),
        (json!(2), json!("finish"), json!("finished"))
    );
    assert_eq!(last["result"], 42);
    assert!(last.get("plugin").is_none());
}

#[test]
fn calculate_answers_what_a_user_expects_through_the_real_plugin() {
    let s = Scratch::new();
    let expressions = ["17/100*2340", "10/4", "2**10", "sqrt(2)", "9999999999*9999999999", "sqrt(-1)"];
    let mut lines: Vec<Value> = expressions.iter().map(|e| call("calculate", json!({ "expression": e }))).collect();
    lines.push(call("finish", json!({"answer": 397.8})));
    let script = s.script(&lines);
    let r = ran(s.harness().args(["run", "x", "--json", "--trace", "t.jsonl", "--script"]).arg(&script));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let t = s.trace("t.jsonl");
    let results: Vec<Value> = t[..5].iter().map(|l| l["result"].clone()).collect();
    // Past 64 bits an exact integer is a string of digits, which no JSON reader rounds.
    assert_eq!(
        results,
        [json!(397.8), json!(2.5), json!(1024), json!(std::f64::consts::SQRT_2), json!("99999999980000000001")]
    );
    assert_eq!(t[5]["status"], "error");
    assert_eq!(error_details(&t[5], "tool_error")["tool"], "calculate");
    // What the model is told: what was wrong, where, and in which expression.
    snapshot("calc-domain-error-fed-back", &s, &t[5]["error"]["message"].to_string(), &[]);
}

#[test]
fn plain_output_prints_a_string_answer_as_text_and_others_as_json() {
    let s = Scratch::new();
    let script = s.script(&[call("finish", json!({"answer": "forty-two"}))]);
    let r = ran(s.harness().args(["run", "x", "--script"]).arg(&script));
    assert_eq!((r.code, r.stdout.as_str()), (0, "forty-two\n"));
    let script = s.script(&[call("finish", json!({"answer": {"n": 42}}))]);
    let r = ran(s.harness().args(["run", "x", "-q", "--script"]).arg(&script));
    assert_eq!((r.code, r.stdout.as_str(), r.stderr.as_str()), (0, "{\"n\":42}\n", ""));
}

/// The README's first command, run twice (the second time the plugin cache answers): `42` on
/// stdout, and on stderr the offline router's note and the two steps, nothing else; the files
/// plugin, which declines without a root, says nothing.
#[test]
fn the_readme_s_first_command_prints_42_and_its_steps_and_nothing_that_reads_as_an_error() {
    let s = Scratch::new();
    for _ in 0..2 {
        let r = ran(s.harness().args(["run", "calculate 6*7"]));
        assert_eq!((r.code, r.stdout.as_str()), (0, "42\n"), "{}", r.stderr);
        snapshot("readme-first-command-stderr", &s, &r.stderr, &[]);
    }
}

#[test]
fn offline_router_answers_the_main_command() {
    let s = Scratch::new();
    let r = ran(s.harness().args(["run", "calculate 6*7"]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.stdout, "42\n");
    // A request no tool matches is answered at once, by finish, without a tool call.
    let r = ran(s.harness().args(["run", "compose a sonnet", "--json", "--trace", "t.jsonl"]));
    assert_eq!(r.code, 0);
    let out = r.json();
    assert_eq!((&out["status"], &out["steps"]), (&json!("finished"), &json!(1)));
    assert!(out["answer"].is_string(), "{out}");
    let tools: Vec<Value> = s.trace("t.jsonl").iter().map(|l| l["tool"].clone()).collect();
    assert_eq!(tools, [json!("finish")]);
}

#[test]
fn every_rejection_is_a_traced_step_fed_back_and_the_run_goes_on() {
    let s = Scratch::new();
    let script = s.script(&[
        json!({"content": "I would rather chat."}),
        json!({"content": "```json\n{\"tool\": \"calculate\", \"arguments\": {\"expression\": "}),
        call("no_such_tool", json!({})),
        call("calculate", json!({"expression": 7, "extra": true})),
        call("calculate", json!("{\"expression\": \"1/0\"}")),
        json!({"content": "Sure: {\"tool\": \"calculate\", \"arguments\": {\"expression\": \"2+2\"}} done"}),
        call("finish", json!({"answer": 4})),
    ]);
    let r = ran(s
        .harness()
        .args(["run", "x", "--json", "--max-steps", "10", "--trace", "t.jsonl", "--script"])
        .arg(&script));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.json()["steps"], 7);
    let t = s.trace("t.jsonl");
    let codes: Vec<Value> = t.iter().map(|l| l["error"]["code"].clone()).collect();
    assert_eq!(
        codes,
        vec![
            json!("no_json"),
            json!("invalid_json"),
            json!("unknown_tool"),
            json!("invalid_arguments"),
            json!("tool_error"),
            Value::Null,
            Value::Null
        ]
    );
    let statuses: Vec<&str> = t.iter().map(|l| l["status"].as_str().unwrap()).collect();
    assert_eq!(statuses, ["rejected", "rejected", "rejected", "rejected", "error", "ok", "finished"]);
    assert_eq!(t[0]["reply_text"], "I would rather chat.");
    assert!(t[0]["tool"].is_null());
    assert!(t[2]["error"]["details"]["offered"].as_array().unwrap().contains(&json!("calculate")));
    let pointers: Vec<&str> = t[3]["error"]["details"]["violations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["pointer"].as_str().unwrap())
        .collect();
    assert!(pointers.contains(&"/expression") && pointers.contains(&""), "{pointers:?}");
    assert_eq!(error_details(&t[4], "tool_error")["tool"], "calculate");
    assert_eq!(t[4]["plugin"], "calc");
    assert_eq!(t[5]["result"], 4);
    assert_eq!(t[5]["arguments"], json!({"expression": "2+2"}));
}

/// What the model is told when it names a tool that is not offered: the name it used and the
/// tools it may call, as the error's message and its details.
#[test]
fn an_unknown_tool_is_told_which_tools_are_offered() {
    let s = Scratch::new();
    let script = s.script(&[call("calculator", json!({"expression": "1+1"})), call("finish", json!({"answer": 2}))]);
    let r = ran(s.harness().args(["run", "x", "--enable", "calc", "--trace", "t.jsonl", "--script"]).arg(&script));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let t = s.trace("t.jsonl");
    assert_eq!(t[0]["status"], "rejected");
    let details = error_details(&t[0], "unknown_tool");
    assert_eq!((&details["tool"], &details["offered"]), (&json!("calculator"), &json!(["finish", "calculate"])));
    let error = serde_json::to_string_pretty(&t[0]["error"]).unwrap();
    snapshot("unknown-tool-fed-back", &s, &error, &[]);
}

#[test]
fn step_budget_exhausted_exits_3_and_the_last_step_offers_only_finish() {
    let s = Scratch::new();
    let c = call("calculate", json!({"expression": "1+1"}));
    let script = s.script(&[c.clone(), c.clone()]);
    let r = ran(s
        .harness()
        .args(["run", "x", "--json", "--max-steps", "2", "--trace", "t.jsonl", "--script"])
        .arg(&script));
    assert_eq!(r.code, 3, "{}", r.stderr);
    let out = r.json();
    assert_eq!(out["status"], "step_budget_exhausted");
    assert_eq!(out["error"]["code"], "step_budget_exhausted");
    assert!(out["answer"].is_null());
    let t = s.trace("t.jsonl");
    assert_eq!(t[0]["offered"], "all");
    assert_eq!(t[1]["offered"], "finish");
    assert_eq!(t[1]["error"]["code"], "tool_not_offered");
}

#[test]
fn repeated_calls_are_stopped_and_finish_is_forced() {
    let s = Scratch::new();
    let c = call("calculate", json!({"expression": "1+1"}));
    let script = s.script(&[c.clone(), c.clone(), c.clone(), call("finish", json!({"answer": 2}))]);
    let r = ran(s.harness().args(["run", "x", "--json", "--trace", "t.jsonl", "--script"]).arg(&script));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let t = s.trace("t.jsonl");
    // The second call is answered with the first one's result, and only finish is offered next.
    assert_eq!(t[1]["error"]["code"], "repeated_call");
    assert_eq!((&t[1]["status"], &t[1]["result"]), (&json!("rejected"), &json!(2)));
    assert_eq!(t[2]["offered"], "finish");
    assert_eq!(t[2]["error"]["code"], "tool_not_offered");
    assert_eq!(r.json()["answer"], 2);
    // --max-repeats 0 turns the check off.
    let script = s.script(&[c.clone(), c.clone(), c.clone(), call("finish", json!({"answer": 2}))]);
    let r = ran(s.harness().args(["run", "x", "--max-repeats", "0", "--trace", "t2.jsonl", "--script"]).arg(&script));
    assert_eq!(r.code, 0);
    assert!(s.trace("t2.jsonl").iter().take(3).all(|l| l["status"] == "ok"));
}

/// A tool that takes its time: run twice, the second step would take as long as the first.
#[test]
fn a_repeated_call_is_answered_with_its_known_result_and_not_run_again() {
    let s = Scratch::new();
    let sleep = call("fault_sleep", json!({"ms": 400}));
    let script = s.script(&[sleep.clone(), sleep.clone(), call("finish", json!({"answer": 400}))]);
    let r = ran(s
        .harness()
        .args(["run", "x", "--json", "--enable", "fault", "--trace", "t.jsonl", "--script"])
        .arg(&script));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let t = s.trace("t.jsonl");
    assert!(t[0]["duration_us"].as_u64().unwrap() >= 400_000, "{}", t[0]);
    assert!(t[1]["duration_us"].as_u64().unwrap() < 400_000, "the tool ran again: {}", t[1]);
    assert_eq!(t[1]["result"], json!({"slept_ms": 400}));
    assert_eq!(t[1]["error"]["details"], json!({"tool": "fault_sleep", "known": true}));
    assert_eq!(t[2]["offered"], "finish");
    assert_eq!(r.json()["status"], "finished");
}

#[test]
fn finish_before_any_tool_answered_is_refused_when_the_operator_says_so() {
    let s = Scratch::new();
    let script = s.script(&[
        call("finish", json!({"answer": "guess"})),
        call("calculate", json!({"expression": "6*7"})),
        call("finish", json!({"answer": 42})),
    ]);
    let r = ran(s
        .harness()
        .args(["run", "x", "--json", "--early-finish", "refuse", "--trace", "t.jsonl", "--script"])
        .arg(&script));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let t = s.trace("t.jsonl");
    assert_eq!((&t[0]["offered"], &t[0]["status"]), (&json!("tools"), &json!("rejected")));
    assert_eq!(t[0]["error"]["code"], "tool_not_offered");
    assert_eq!(t[2]["offered"], "all");
    assert_eq!(r.json()["answer"], 42);
    // The scripted provider's model is no small one: finish may come first by default.
    let script = s.script(&[call("finish", json!({"answer": "now"}))]);
    let r = ran(s.harness().args(["run", "x", "--json", "--script"]).arg(&script));
    assert_eq!(r.json()["answer"], "now");
}

#[test]
fn an_answer_copied_from_a_harness_error_does_not_end_the_run_finished() {
    let s = Scratch::new();
    let copied = call("finish", json!({"answer": {"code": "unknown_tool"}}));
    let script = s.script(&[call("calculator", json!({"expression": "6*7"})), copied.clone(), copied]);
    let r = ran(s
        .harness()
        .args(["run", "what is 6*7", "--json", "--max-steps", "3", "--trace", "t.jsonl", "--script"])
        .arg(&script));
    let t = s.trace("t.jsonl");
    assert_eq!(t[0]["error"]["code"], "unknown_tool");
    assert_eq!(t[1]["error"]["code"], "copied_answer");
    assert_eq!(t[2]["error"]["code"], "copied_answer");
    assert_eq!(t[1]["status"], "rejected");
    let out = r.json();
    assert_eq!(out["status"], "step_budget_exhausted", "{out}");
    assert!(out["answer"].is_null());
    // Copied from the request: "6*7" is no result, for a small model (--early-finish refuse
    // keeps its guards; the scripted provider's model is no small one).
    let script = s.script(&[
        call("calculate", json!({"expression": "6*7"})),
        call("finish", json!({"answer": "6*7"})),
        call("finish", json!({"answer": 42})),
    ]);
    let small = ["run", "what is 6*7", "--json", "--early-finish", "refuse", "--trace", "t2.jsonl", "--script"];
    let r = ran(s.harness().args(small).arg(&script));
    assert_eq!(s.trace("t2.jsonl")[1]["error"]["code"], "copied_answer");
    assert_eq!(r.json()["answer"], 42);
    // A capable model may answer from the request.
    let script = s.script(&[call("finish", json!({"answer": "6*7"}))]);
    let r = ran(s.harness().args(["run", "what is 6*7", "--json", "--script"]).arg(&script));
    assert_eq!(r.json()["answer"], "6*7");
}

#[test]
fn running_out_of_script_is_a_provider_error_exit_1() {
    let s = Scratch::new();
    let script = s.script(&[call("calculate", json!({"expression": "1"}))]);
    let r = ran(s.harness().args(["run", "x", "--json", "--trace", "t.jsonl", "--script"]).arg(&script));
    assert_eq!(r.code, 1, "{}", r.stderr);
    let out = r.json();
    assert_eq!(out["status"], "failed");
    // The message (which script ran out, and the fix) is in the trace-show-a-failed-run snapshot.
    assert_eq!(error_details(&out, "provider_error")["provider"], "scripted");
    let t = s.trace("t.jsonl");
    assert_eq!(t.len(), 2);
    assert_eq!((t[1]["status"].as_str(), t[1]["error"]["code"].as_str()), (Some("error"), Some("provider_error")));
}

#[test]
fn the_same_bad_input_gives_the_same_error_bytes() {
    let s = Scratch::new();
    let script =
        s.script(&[call("calculate", json!({"expression": 1, "x": [1]})), call("finish", json!({"answer": 0}))]);
    let error_of = |trace: &str| {
        let r = ran(s.harness().args(["run", "x", "-q", "--trace", trace, "--script"]).arg(&script));
        assert_eq!(r.code, 0);
        serde_json::to_string(&s.trace(trace)[0]["error"]).unwrap()
    };
    assert_eq!(error_of("a.jsonl"), error_of("b.jsonl"));
}

#[test]
fn usage_and_configuration_errors_exit_2_naming_the_problem() {
    let s = Scratch::new();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["run", "x", "--script", "missing.jsonl"], "missing.jsonl"),
        (vec!["run", "x", "--config", "nope.toml"], "nope.toml"),
        (vec!["run", "x", "--provider", "telepathy"], "telepathy"),
        (vec!["run", "x", "--provider", "scripted"], "--script"),
        (vec!["run", "x", "--max-steps", "0"], "--max-steps"),
        (vec!["run", "x", "--max-repeats", "1"], "--max-repeats 1"),
        (vec!["run", "x", "--plugins-dir", "no-such-dir"], "no-such-dir"),
        (vec!["run", "x", "--deny-effects", "teleport"], "teleport"),
        (vec!["run", "x", "--no-such-flag"], "--no-such-flag"),
    ];
    for (args, named) in cases {
        ran(s.harness().args(&args)).usage_error(&[named]);
    }
    // A bad field of the config file: the file, the line and column, and what was expected.
    s.write("bad.toml", "max_steps = \"many\"\n");
    let r = ran(s.harness().args(["run", "x", "--config", "bad.toml"]));
    r.usage_error(&["bad.toml", "max_steps"]);
    snapshot("config-field-of-the-wrong-type", &s, &r.stderr, &[]);
    s.write("typo.toml", "max_step = 5\n");
    let r = ran(s.harness().args(["run", "x", "--config", "typo.toml"]));
    r.usage_error(&["typo.toml", "max_step"]);
    snapshot("config-field-unknown", &s, &r.stderr, &[]);
    s.write("s.jsonl", "{\"tool\": \"finish\"}\nnot json\n");
    ran(s.harness().args(["run", "x", "--script", "s.jsonl"])).usage_error(&["s.jsonl", "line 2"]);
}

/// The help of the main commands, compared whole: a flag added, renamed or reworded shows in
/// the diff. `run --help` ends with the exit codes, which scripts depend on.
#[test]
fn help_of_the_main_commands_documents_their_flags_and_exit_codes() {
    let s = Scratch::new();
    for command in [
        &[][..],
        &["run"],
        &["batch"],
        &["plugins"],
        &["plugins", "list"],
        &["config"],
        &["config", "show"],
        &["tools", "call"],
    ] {
        let r = ran(s.harness().args(command).arg("--help"));
        assert_eq!(r.code, 0, "{command:?}: {}", r.stderr);
        let name = ["help"].iter().chain(command).copied().collect::<Vec<_>>().join("-");
        snapshot(&name, &s, &r.stdout, &[]);
    }
}

#[test]
fn fault_plugin_panics_become_tool_panicked_and_the_run_goes_on() {
    let s = Scratch::new();
    let script = s.script(&[
        call("fault_panic", json!({"message": "kaboom"})),
        call("fault_echo", json!({"value": {"still": "alive"}})),
        call("finish", json!({"answer": "ok"})),
    ]);
    let r = ran(s.harness().args(["run", "x", "--enable", "fault", "--trace", "t.jsonl", "--script"]).arg(&script));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let t = s.trace("t.jsonl");
    assert_eq!(t[0]["error"]["code"], "tool_panicked");
    assert_eq!(t[0]["status"], "error");
    assert_eq!(error_details(&t[0], "tool_panicked")["tool"], "fault_panic");
    assert!(t[0]["error"]["message"].as_str().unwrap().contains("kaboom"), "the panic's own message is kept");
    assert_eq!(t[1]["result"], json!({"still": "alive"}));
    assert_eq!(t[1]["plugin"], "fault");
}

#[test]
fn test_only_plugins_stay_away_unless_enabled_by_name() {
    let s = Scratch::new();
    let script = s.script(&[call("fault_echo", json!({"value": 1})), call("finish", json!({"answer": 0}))]);
    let r = ran(s.harness().args(["run", "x", "--trace", "t.jsonl", "--script"]).arg(&script));
    assert_eq!(r.code, 0);
    assert_eq!(s.trace("t.jsonl")[0]["error"]["code"], "unknown_tool");
}

/// Steps held to be `tool_error`s, shown one a line as the tool and the message the model
/// was told, for a snapshot.
fn tool_errors(steps: &[&Value]) -> String {
    let lines: Vec<String> = steps
        .iter()
        .map(|step| format!("{}: {}", error_details(step, "tool_error")["tool"], step["error"]["message"]))
        .collect();
    lines.join("\n")
}

#[test]
fn files_plugin_reads_under_its_configured_root_and_refuses_escapes() {
    let s = Scratch::new();
    s.write("root/notes/a.txt", "hello from a");
    s.write("root/.env", "API_KEY=secret");
    s.write("harness.toml", "[plugins.files]\nroot = \"root\"\n");
    let script = s.script(&[
        call("read_file", json!({"path": "notes/a.txt"})),
        call("read_file", json!({"path": "../harness.toml"})),
        call("list_dir", json!({"path": "notes"})),
        call("read_file", json!({"path": ".env"})),
        call("finish", json!({"answer": "done"})),
    ]);
    // The root in harness.toml is relative to the working directory of the plugin's init.
    let r =
        ran(s.harness().args(["run", "x", "--config", "harness.toml", "--trace", "t.jsonl", "--script"]).arg(&script));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let t = s.trace("t.jsonl");
    assert_eq!(t[0]["result"]["content"], "hello from a");
    assert_eq!(t[0]["plugin"], "files");
    assert_eq!(t[2]["result"]["entries"][0]["name"], "a.txt");
    // Each refusal is a tool_error whose message tells the model what it may not do.
    snapshot("files-refuses-escapes-and-secrets", &s, &tool_errors(&[&t[1], &t[3]]), &[]);
    assert!(!t[3].to_string().contains("secret"), "{}", t[3]);
    assert!(!std::fs::read_to_string(s.path("t.jsonl")).unwrap().contains("API_KEY"));
}

#[test]
fn the_files_plugin_refuses_a_fifo_at_once_and_a_write_through_a_hard_link() {
    let s = Scratch::new();
    s.write("root/keep.txt", "");
    let fifo = std::ffi::CString::new(s.path("root/pipe").into_os_string().into_encoded_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0, "{}", std::io::Error::last_os_error());
    let outside = s.write("outside.txt", "the operator's bytes");
    std::fs::hard_link(&outside, s.path("root/link.txt")).unwrap();
    s.write("harness.toml", "[policy]\nwrites = \"allow\"\n[plugins.files]\nroot = \"root\"\n");
    let script = s.script(&[
        call("read_file", json!({"path": "pipe"})),
        call("write_file", json!({"path": "link.txt", "content": "overwritten"})),
        call("finish", json!({"answer": "done"})),
    ]);
    // The timeout only keeps a regression from hanging the suite: a FIFO nobody writes
    // would hold a blocking read until then, and the call would be `tool_timeout`.
    let r = ran(s
        .harness()
        .args(["run", "x", "--config", "harness.toml", "--tool-timeout", "20", "--trace", "t.jsonl", "--script"])
        .arg(&script));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let t = s.trace("t.jsonl");
    snapshot("files-refuses-a-fifo-and-a-hard-link", &s, &tool_errors(&[&t[0], &t[1]]), &[]);
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "the operator's bytes");
}

#[test]
fn without_a_root_the_files_tools_are_not_offered() {
    let s = Scratch::new();
    s.write("notes.txt", "hello");
    let script = s.script(&[call("read_file", json!({"path": "notes.txt"})), call("finish", json!({"answer": 1}))]);
    // files and calc alone, so that the tools offered do not change with the plugins built.
    let only = ["--enable", "files", "--enable", "calc"];
    let r = ran(s.harness().args(["run", "x", "--trace", "t.jsonl"]).args(only).arg("--script").arg(&script));
    assert_eq!(r.code, 0, "{}", r.stderr);
    // A plugin that only needs configuring is not reported: the steps alone.
    snapshot("a-run-without-a-files-root", &s, &r.stderr, &[]);
    assert_eq!(s.trace("t.jsonl")[0]["error"]["code"], "unknown_tool");
}

#[test]
fn calc_library_is_where_the_binary_looks() {
    assert!(plugin("calc").is_file());
}

#[test]
fn offline_router_validates_smiles_with_the_chem_plugin() {
    let s = Scratch::new();
    let r = ran(s.harness().args(["run", "validate the SMILES c1ccccc1", "--json", "-q"]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let answer = &r.json()["answer"];
    assert_eq!(answer["valid"], true, "{answer}");
    assert_eq!(answer["formula"], "C6H6");
    assert_eq!(answer["atom_count"], 6);
}

#[test]
fn chem_tools_run_through_the_scripted_provider() {
    let s = Scratch::new();
    let script = s.script(&[
        call("validate_smiles", json!({"smiles": "C1CC"})),
        call("molecular_weight", json!({"smiles": "CC(=O)Oc1ccccc1C(=O)O"})),
        call("molecular_weight", json!({"smiles": "C(C"})),
        call("finish", json!({"answer": "aspirin"})),
    ]);
    let r = ran(s.harness().args(["run", "x", "--trace", "t.jsonl", "--script"]).arg(&script));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let t = s.trace("t.jsonl");
    assert_eq!(t[0]["status"], "ok", "an invalid SMILES is a result, not an error");
    assert_eq!(t[0]["result"]["valid"], false);
    assert!(t[0]["result"]["error"].as_str().unwrap().contains("position"), "{}", t[0]);
    assert_eq!(t[0]["plugin"], "chem");
    assert_eq!(t[1]["result"]["formula"], "C9H8O4");
    assert!((t[1]["result"]["molecular_weight"].as_f64().unwrap() - 180.159).abs() < 0.01);
    assert_eq!(t[2]["error"]["code"], "tool_error");
}

#[test]
fn a_result_that_breaks_the_output_schema_is_invalid_result_and_never_fed_back_as_a_result() {
    for mode in ["in-process", "process"] {
        let s = Scratch::new();
        let script = s.script(&[
            call("fault_misreport", json!({"value": {"count": 3}})),
            call("fault_misreport", json!({"value": {"count": "three"}})),
            call("finish", json!({"answer": "done"})),
        ]);
        let r = ran(s
            .harness()
            .args(["run", "x", "--enable", "fault", "--isolation", mode, "--json", "--trace", "t.jsonl", "--script"])
            .arg(&script));
        assert_eq!(r.code, 0, "{mode}: {}", r.stderr);
        let t = s.trace("t.jsonl");
        assert_eq!(t[0]["result"], json!({"count": 3}), "{mode}");
        assert_eq!((&t[1]["status"], &t[1]["error"]["code"]), (&json!("error"), &json!("invalid_result")), "{mode}");
        assert_eq!(t[1]["error"]["details"]["violations"][0]["pointer"], "/count", "{}", t[1]);
        assert!(t[1].get("result").is_none(), "the result is not kept as one: {}", t[1]);
    }
}
