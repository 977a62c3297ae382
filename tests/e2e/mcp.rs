//! MCP interop through the binary, against peers not written here: the official Python MCP
//! SDK's client drives `harness mcp serve`, and a server written with that SDK is a tool source
//! of `harness run`.
//!
//! The SDK lives in a virtual environment: `HARNESS_MCP_PYTHON` when set, else
//! `target/mcp-venv`, made on first use from tests/mcp/requirements.txt (as `.ci/run` does).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::{
    ENFORCEMENT, ENFORCEMENT_GAPS, PLUGIN_VERSION, Scratch, bin_dir, error_details, plugin, ran, snapshot,
};

/// A file of tests/mcp.
fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/mcp").join(name)
}

const HOW_TO: &str = "make it by hand with `python3 -m venv target/mcp-venv && \
    target/mcp-venv/bin/python -m pip install -r tests/mcp/requirements.txt && \
    cp tests/mcp/requirements.txt target/mcp-venv/`, or set HARNESS_MCP_PYTHON to a python that has them";

/// Runs one setup command, saying which and why when it fails.
fn setup(cmd: &mut Command) -> Result<(), String> {
    let out = cmd.output().map_err(|e| format!("cannot run {cmd:?}: {e}"))?;
    if out.status.success() {
        return Ok(());
    }
    Err(format!("{cmd:?} failed ({}): {}", out.status, String::from_utf8_lossy(&out.stderr).trim()))
}

/// Makes the virtual environment beside `venv` and moves it there, so that test processes
/// racing to make it (nextest) never see half of one.
fn make_venv(venv: &Path, requirements: &Path) -> Result<(), String> {
    let building = venv.with_extension(format!("building-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&building);
    setup(Command::new("python3").args(["-m", "venv"]).arg(&building))?;
    setup(
        Command::new(building.join("bin/python"))
            .args(["-m", "pip", "install", "-q", "--disable-pip-version-check", "-r"])
            .arg(requirements),
    )?;
    std::fs::copy(requirements, building.join("requirements.txt")).map_err(|e| e.to_string())?;
    let _ = std::fs::remove_dir_all(venv);
    if std::fs::rename(&building, venv).is_err() {
        // Another process got there first; theirs is as good.
        let _ = std::fs::remove_dir_all(&building);
    }
    Ok(())
}

/// The Python that has the official MCP SDK.
fn python() -> PathBuf {
    static PYTHON: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let found = PYTHON.get_or_init(|| {
        if let Some(python) = std::env::var_os("HARNESS_MCP_PYTHON") {
            return Ok(PathBuf::from(python));
        }
        let requirements = fixture("requirements.txt");
        let wanted = std::fs::read(&requirements).map_err(|e| format!("{}: {e}", requirements.display()))?;
        let venv = bin_dir().parent().expect("the target directory").join("mcp-venv");
        let ready = |venv: &Path| {
            venv.join("bin/python").is_file()
                && std::fs::read(venv.join("requirements.txt")).ok() == Some(wanted.clone())
        };
        if !ready(&venv) {
            make_venv(&venv, &requirements)?;
        }
        if ready(&venv) { Ok(venv.join("bin/python")) } else { Err(format!("{} is incomplete", venv.display())) }
    });
    match found {
        Ok(python) => python.clone(),
        Err(e) => panic!(
            "the MCP tests need Python 3 with the official MCP SDK (the `mcp` package from PyPI) in a virtual environment; making one failed: {e}\n{HOW_TO}"
        ),
    }
}

/// What the Python SDK's client saw of `harness ARGS`, made to serve MCP.
fn drive(s: &Scratch, mode: &str, calls: &Value, harness_args: &[&str]) -> Value {
    drive_told(s, mode, calls, harness_args).0
}

/// The same, and what the server said on stderr.
fn drive_told(s: &Scratch, mode: &str, calls: &Value, harness_args: &[&str]) -> (Value, String) {
    let r = ran(Command::new(python())
        .current_dir(s.dir.path())
        .arg(fixture("client.py"))
        .args(["--mode", mode])
        .arg(calls.to_string())
        .arg("--")
        .arg(env!("CARGO_BIN_EXE_harness"))
        .args(harness_args));
    assert_eq!(r.code, 0, "the Python client failed:\n{}", r.stderr);
    (r.json(), r.stderr)
}

fn call(name: &str, arguments: Value) -> Value {
    json!({ "name": name, "arguments": arguments })
}

/// The error object a failed call carried as its content.
fn error_object(call: &Value) -> Value {
    assert_eq!(call["is_error"], true, "{call}");
    let from_text: Value = serde_json::from_str(call["text"].as_str().unwrap()).unwrap();
    assert_eq!(from_text, call["structured"], "the text and the structured content differ");
    from_text
}

#[test]
fn the_python_sdk_client_lists_and_calls_plugin_tools_in_both_lifecycles() {
    for mode in ["auto", "legacy"] {
        let s = Scratch::new();
        let calls = json!([
            call("calculate", json!({"expression": "6*7"})),
            call("calculate", json!({"expr": 6, "extra": true})),
            call("no_such_tool", json!({})),
        ]);
        let seen = drive(&s, mode, &calls, &["mcp", "serve", "--enable", "calc", "--trace", "t.jsonl"]);
        assert_eq!(seen["server_info"]["name"], "harness", "{mode}: {seen}");
        if mode == "legacy" {
            assert!(seen["protocol_version"].as_str().unwrap().starts_with("202"), "{seen}");
        }
        let tools = seen["tools"].as_array().unwrap();
        let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["calculate"], "{mode}");
        assert_eq!(tools[0]["inputSchema"]["required"], json!(["expression"]));
        assert!(tools[0]["description"].as_str().unwrap().contains("arithmetic"));

        let [ok, invalid, unknown] = seen["calls"].as_array().unwrap().as_slice() else { panic!("{seen}") };
        assert_eq!((&ok["is_error"], &ok["text"]), (&json!(false), &json!("42")), "{mode}: {ok}");
        let error = error_object(invalid);
        assert_eq!(error["code"], "invalid_arguments", "{mode}: {error}");
        assert!(error["details"]["violations"].as_array().unwrap().len() >= 2, "{error}");
        assert_eq!(unknown["protocol_error"]["code"], -32602, "{mode}: {unknown}");
        assert_eq!(unknown["protocol_error"]["data"]["code"], "unknown_tool");

        let trace = s.trace("t.jsonl");
        let statuses: Vec<&str> = trace.iter().map(|l| l["status"].as_str().unwrap()).collect();
        assert_eq!(statuses, ["ok", "rejected", "rejected"], "{mode}");
        assert_eq!(
            (&trace[0]["step"], &trace[0]["plugin"], &trace[0]["result"]),
            (&json!(1), &json!("calc"), &json!(42))
        );
        assert_eq!(trace[1]["error"]["code"], "invalid_arguments");
    }
}

#[test]
fn mcp_serve_holds_every_call_to_the_policy_and_cannot_ask() {
    let s = Scratch::new();
    std::fs::create_dir(s.path("root")).unwrap();
    let write = json!([call("write_file", json!({"path": "a.txt", "content": "x"}))]);
    let serve = |config: &str, more: &[&str]| {
        let mut args = vec!["mcp", "serve", "--enable", "files", "--trace", "t.jsonl", "--config", config];
        args.extend(more);
        drive_told(&s, "auto", &write, &args)
    };
    // The configuration denies writes: the MCP client is told call_denied, nothing is written.
    s.write("deny.toml", "[plugins.files]\nroot = \"root\"\n[policy]\nwrites = \"deny\"\n");
    let (seen, _) = serve("deny.toml", &[]);
    let error = error_object(&seen["calls"][0]);
    assert_eq!(error["code"], "call_denied", "{error}");
    assert!(error["message"].as_str().unwrap().contains("policy denies it"), "{error}");
    assert!(!s.path("root/a.txt").exists(), "a denied write ran over MCP");
    assert_eq!(s.trace("t.jsonl")[0]["error"]["code"], "call_denied");

    // By default writes ask, and no one can answer over MCP: refused, with the fix; the start
    // line says what runs without approval.
    s.write("ask.toml", "[plugins.files]\nroot = \"root\"\n");
    let (seen, told) = serve("ask.toml", &[]);
    let error = error_object(&seen["calls"][0]);
    assert_eq!(error["code"], "call_denied", "{error}");
    assert!(error["message"].as_str().unwrap().contains("--allow files.write_file"), "{error}");
    assert!(!s.path("root/a.txt").exists(), "an unapproved write ran over MCP");
    assert!(
        told.contains("served without approval: files.read_file, files.list_dir; refused, call_denied by the policy: files.write_file"),
        "{told}"
    );

    // The operator allows it by name: it runs, and the start line says so.
    let (seen, told) = serve("ask.toml", &["--allow", "files.write_file"]);
    assert_eq!(seen["calls"][0]["is_error"], false, "{seen}");
    assert_eq!(std::fs::read_to_string(s.path("root/a.txt")).unwrap(), "x");
    assert!(told.contains("served without approval: files.read_file, files.list_dir, files.write_file; refused, call_denied by the policy: none"), "{told}");
}

#[test]
fn fault_tools_are_errors_and_the_server_survives_a_crash_in_process_isolation() {
    let s = Scratch::new();
    let calls = json!([
        call("fault_panic", json!({"message": "kaboom"})),
        call("fault_abort", json!({})),
        call("fault_echo", json!({"value": "still here"})),
        call("calculate", json!({"expression": "2+2"})),
    ]);
    let args = ["mcp", "serve", "--enable", "fault", "--enable", "calc", "--isolation", "process"];
    let seen = drive(&s, "auto", &calls, &args);
    let calls = seen["calls"].as_array().unwrap();
    assert_eq!(error_object(&calls[0])["code"], "tool_panicked", "{}", calls[0]);
    let crashed = error_object(&calls[1]);
    assert_eq!(crashed["code"], "tool_crashed", "{crashed}");
    assert!(crashed["message"].as_str().unwrap().contains("SIGABRT"), "{crashed}");
    assert_eq!(calls[2]["text"], "\"still here\"", "{}", calls[2]);
    assert_eq!(calls[3]["text"], "4", "{}", calls[3]);
}

#[test]
fn a_panic_in_process_is_an_error_and_the_server_goes_on() {
    let s = Scratch::new();
    let calls = json!([call("fault_panic", json!({"message": "kaboom"})), call("fault_echo", json!({"value": 7}))]);
    let seen = drive(&s, "auto", &calls, &["mcp", "serve", "--enable", "fault"]);
    let calls = seen["calls"].as_array().unwrap();
    assert_eq!(error_object(&calls[0])["code"], "tool_panicked", "{}", calls[0]);
    assert_eq!(calls[1]["text"], "7");
}

/// A config with the Python tool server as `py`, and more entries after it.
fn config(s: &Scratch, more: &str) -> PathBuf {
    let text = format!(
        "[[mcp.servers]]\nname = \"py\"\ncommand = {:?}\nargs = [{:?}]\nenv = {{ GREETING = \"hello from the config\" }}\n{more}",
        python().display().to_string(),
        fixture("tool_server.py").display().to_string(),
    );
    s.write("harness.toml", &text)
}

fn step(tool: &str, arguments: Value) -> Value {
    json!({ "tool": tool, "arguments": arguments })
}

#[test]
fn a_python_mcp_server_is_a_tool_source_for_a_scripted_run() {
    let s = Scratch::new();
    config(&s, "");
    let script = s.script(&[
        step("greet", json!({"name": "Ada"})),
        step("add", json!({"a": 2, "b": "three"})),
        step("add", json!({"a": 2, "b": 3})),
        step("py__calculate", json!({"expression": "1+1"})),
        step("calculate", json!({"expression": "6*7"})),
        step("env", json!({"name": "GREETING"})),
        step("env", json!({"name": "HARNESS_TEST_SECRET"})),
        step("fail", json!({"message": "on purpose"})),
        step("finish", json!({"answer": "done"})),
    ]);
    let r = ran(s
        .harness()
        .env("HARNESS_TEST_SECRET", "not for servers")
        .args([
            "run",
            "x",
            "--config",
            "harness.toml",
            "--allow",
            "network",
            "--json",
            "--max-steps",
            "12",
            "--trace",
            "t.jsonl",
            "--script",
        ])
        .arg(&script));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.json()["answer"], "done");
    let t = s.trace("t.jsonl");
    assert_eq!(t[0]["result"], "Hello, Ada!");
    assert_eq!(t[0]["mcp_server"], "py", "the trace names the MCP server: {}", t[0]);
    assert_eq!(t[4]["plugin"], "calc");
    assert!(t[4].get("mcp_server").is_none());
    // Validated by the harness against the server's schema: it never reached the server.
    assert_eq!((&t[1]["status"], &t[1]["error"]["code"]), (&json!("rejected"), &json!("invalid_arguments")));
    assert_eq!(t[1]["error"]["details"]["violations"][0]["pointer"], "/b");
    assert_eq!(t[2]["result"], json!({"result": 5}));
    // The calc plugin keeps `calculate`; the server's is offered under a qualified name.
    assert_eq!(t[3]["result"], "python was asked for 1+1");
    assert_eq!((&t[4]["result"], &t[4]["plugin"]), (&json!(42), &json!("calc")));
    assert_eq!(t[5]["result"], "hello from the config");
    assert_eq!(t[6]["result"], "(unset)", "a server sees only its own env and a few basics");
    assert_eq!((&t[7]["status"], &t[7]["error"]["code"]), (&json!("error"), &json!("tool_error")));
    let warnings: Vec<&str> = r.stderr.lines().filter(|l| l.starts_with("harness: warning: ")).collect();
    snapshot("mcp-tool-name-models-refuse", &s, &warnings.join("\n"), &[]);
}

#[test]
fn a_server_that_exits_at_once_is_reported_and_the_run_goes_on() {
    let s = Scratch::new();
    let broken = format!(
        "[[mcp.servers]]\nname = \"broken\"\ncommand = {:?}\nargs = [{:?}]\n",
        python().display().to_string(),
        fixture("exit_at_once.py").display().to_string()
    );
    config(&s, &broken);
    let script = s.script(&[
        step("greet", json!({"name": "Bob"})),
        step("calculate", json!({"expression": "1+2"})),
        step("finish", json!({"answer": "ok"})),
    ]);
    let r = ran(s
        .harness()
        .args([
            "run",
            "x",
            "--config",
            "harness.toml",
            "--allow",
            "network",
            "--json",
            "--trace",
            "t.jsonl",
            "--script",
        ])
        .arg(&script));
    assert_eq!(r.code, 0, "{}", r.stderr);
    // What the operator reads: how the server ended, and the end of its own stderr.
    let warnings: Vec<&str> = r.stderr.lines().filter(|l| l.starts_with("harness: warning: ")).collect();
    snapshot("mcp-server-that-exits-at-once", &s, &warnings.join("\n"), &[]);
    let t = s.trace("t.jsonl");
    assert_eq!((&t[0]["result"], &t[1]["result"]), (&json!("Hello, Bob!"), &json!(3)));
}

/// How long the Python server's `sleep` hangs: far past the 1 s tool timeout of the run.
const HANG: Duration = Duration::from_secs(30);

#[test]
fn a_server_that_hangs_or_dies_mid_run_costs_calls_not_the_run() {
    let s = Scratch::new();
    config(&s, "");
    let script = s.script(&[
        step("sleep", json!({"seconds": HANG.as_secs()})),
        step("greet", json!({"name": "after the timeout"})),
        step("die", json!({"code": 5})),
        step("greet", json!({"name": "after the death"})),
        step("calculate", json!({"expression": "2*3"})),
        step("finish", json!({"answer": "survived"})),
    ]);
    let started = Instant::now();
    let r = ran(s
        .harness()
        .args([
            "run",
            "x",
            "--config",
            "harness.toml",
            "--allow",
            "network",
            "--json",
            "--tool-timeout",
            "1",
            "--trace",
            "t.jsonl",
            "--script",
        ])
        .arg(&script));
    assert_eq!(r.code, 0, "{}", r.stderr);
    // Not a speed limit: the run ended while the server still slept on the abandoned call.
    assert!(started.elapsed() < HANG, "the run waited for the hung call: {:?}", started.elapsed());
    let t = s.trace("t.jsonl");
    assert_eq!(error_details(&t[0], "tool_timeout")["tool"], "sleep", "{}", t[0]);
    assert_eq!(t[1]["result"], "Hello, after the timeout!");
    assert_eq!(t[2]["error"]["code"], "tool_crashed", "{}", t[2]);
    let gone = t[3]["error"]["message"].as_str().unwrap();
    assert!(gone.contains("MCP server \"py\" exited with status 5"), "{gone}");
    assert_eq!(t[4]["result"], 6);
    assert_eq!(r.json()["answer"], "survived");
}

#[test]
fn plugins_list_shows_mcp_servers_as_their_own_source() {
    let s = Scratch::new();
    config(&s, "[[mcp.servers]]\nname = \"nothing\"\ncommand = \"/no/such/server\"\n");
    std::fs::create_dir_all(s.path("p")).unwrap();
    std::fs::copy(plugin("calc"), s.path("p").join(plugin("calc").file_name().unwrap())).unwrap();
    let only_calc = ["--no-default-plugins", "--plugins-dir", "p"];
    let r = ran(s.harness().args(["plugins", "list", "--config", "harness.toml"]).args(only_calc));
    assert_eq!(r.code, 0, "{}", r.stderr);
    // The table a person reads, the servers' part under the plugins'; where the Python and
    // the test servers are is this machine's.
    let text = r
        .stdout
        .replace(&python().display().to_string(), "[python]")
        .replace(&fixture("").display().to_string(), "[tests/mcp]/");
    let protocol = (r"protocol \d{4}-\d{2}-\d{2}", "protocol [version]");
    snapshot("plugins-list-with-mcp-servers", &s, &text, &[PLUGIN_VERSION, ENFORCEMENT, ENFORCEMENT_GAPS, protocol]);

    let listed =
        ran(s.harness().args(["plugins", "list", "--config", "harness.toml", "--json"]).args(only_calc)).json();
    let servers = listed["mcp_servers"].as_array().unwrap();
    assert_eq!(servers[0]["server_info"]["version"], "1.0.0");
    let greet = servers[0]["tools"].as_array().unwrap().iter().find(|t| t["name"] == "greet").unwrap();
    assert_eq!(greet["state"], json!({"kind": "offered", "name": "greet"}));
    let calculate = servers[0]["tools"].as_array().unwrap().iter().find(|t| t["name"] == "calculate").unwrap();
    assert_eq!(calculate["state"]["name"], "py__calculate", "calc has the name: {calculate}");
    assert!(servers[1]["failure"].as_str().unwrap().contains("/no/such/server"));
    assert!(listed["plugins"].is_array(), "the plugins are still there: {listed}");
}

#[test]
fn harness_mcp_serve_is_a_tool_source_of_another_harness() {
    let s = Scratch::new();
    let harness = env!("CARGO_BIN_EXE_harness");
    s.write(
        "harness.toml",
        &format!("[[mcp.servers]]\nname = \"inner\"\ncommand = {harness:?}\nargs = [\"mcp\", \"serve\", \"--enable\", \"chem\"]\n"),
    );
    let script = s.script(&[
        step("validate_smiles", json!({"smiles": "c1ccccc1"})),
        step("molecular_weight", json!({"smiles": 42})),
        step("finish", json!({"answer": "checked"})),
    ]);
    let r = ran(s
        .harness()
        .args([
            "run",
            "x",
            "--config",
            "harness.toml",
            "--allow",
            "network",
            "--json",
            "--enable",
            "calc",
            "--trace",
            "t.jsonl",
            "--script",
        ])
        .arg(&script));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let t = s.trace("t.jsonl");
    assert_eq!(t[0]["result"]["formula"], "C6H6", "{}", t[0]);
    assert_eq!(t[1]["error"]["code"], "invalid_arguments");
}

#[test]
fn a_bad_server_entry_is_a_configuration_error() {
    let s = Scratch::new();
    s.write("harness.toml", "[[mcp.servers]]\nname = \"my.server\"\ncommand = \"x\"\n");
    let script = s.script(&[step("finish", json!({"answer": 1}))]);
    let r =
        ran(s.harness().args(["run", "x", "--config", "harness.toml", "--allow", "network", "--script"]).arg(&script));
    r.usage_error(&["harness.toml", "[[mcp.servers]] entry 1", "my.server"]);
    snapshot("mcp-server-entry-with-a-bad-name", &s, &r.stderr, &[]);
    s.write("harness.toml", "[[mcp.servers]]\nname = \"a\"\ncommand = \"x\"\nworkdir = \"/\"\n");
    let r = ran(s.harness().args(["plugins", "list", "--config", "harness.toml"]));
    r.usage_error(&["harness.toml", "workdir"]);
}

/// Runs the rug-pull server's script: `weather` twice (it changes after the first call), the
/// unchanged `echo`, the `steal` tool it added mid-run, then `finish`.
fn pulled_run(s: &Scratch, extra: &[&str]) -> (crate::support::Ran, Vec<Value>) {
    let script = s.script(&[
        step("weather", json!({"city": "Paris"})),
        step("weather", json!({"city": "Rome"})),
        step("echo", json!({"text": "still here"})),
        step("steal", json!({"secret": "x"})),
        step("finish", json!({"answer": "done"})),
    ]);
    let base = ["run", "x", "--config", "harness.toml", "--allow", "network", "--json", "--trace", "t.jsonl"];
    let r = ran(s.harness().args(base).args(extra).arg("--script").arg(&script));
    assert_eq!(r.code, 0, "the run goes on: {}", r.stderr);
    let trace = s.trace("t.jsonl");
    (r, trace)
}

#[test]
fn a_tool_changed_mid_run_is_refused_with_the_diff_under_locked_and_without() {
    let s = Scratch::new();
    // The files plugin gets a root, so that it is offered alike by `lock` and by the run (whose
    // plugins from the plugin cache start at their first call, and so are offered before
    // their `init` runs). The root is a directory of its own: one that held harness.toml and
    // harness.lock would be refused.
    std::fs::create_dir_all(s.path("data")).unwrap();
    s.write(
        "harness.toml",
        &format!(
            "[plugins.files]\nroot = \"data\"\n\n[[mcp.servers]]\nname = \"rug\"\ncommand = {:?}\nargs = [{:?}]\n",
            python().display().to_string(),
            fixture("rug_pull_server.py").display().to_string(),
        ),
    );
    let r = ran(s.harness().args(["lock", "--config", "harness.toml"]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let lock: Value = serde_json::from_str(&std::fs::read_to_string(s.path("harness.lock")).unwrap()).unwrap();
    let locked = lock["tools"]["weather"]["definition_sha256"].as_str().unwrap().to_owned();

    for extra in [&["--locked"][..], &[]] {
        let (r, t) = pulled_run(&s, extra);
        assert_eq!((&t[0]["status"], &t[0]["result"]), (&json!("ok"), &json!("sunny in Paris")), "{extra:?}");
        let refused = &t[1];
        assert_eq!((&refused["status"], &refused["error"]["code"]), (&json!("error"), &json!("tool_changed")));
        assert_eq!(refused["mcp_server"], "rug", "{refused}");
        let message = refused["error"]["message"].as_str().unwrap();
        assert!(message.contains(&format!("definition_sha256 was {locked}, is now ")), "{message}");
        // What the model is told: the server, the tool, what changed (hashes), that the call
        // was not made, and the fix.
        snapshot("mcp-tool-changed-fed-back", &s, message, &[(r"[0-9a-f]{16,}", "[hash]")]);
        assert!(!message.contains("id_rsa"), "the injected text never reaches the model: {message}");
        assert!(!message.contains("parameters sha256"), "only the description changed: {message}");
        assert_eq!(t[2]["result"], "still here", "an unchanged tool of the same server is still called");
        assert_eq!(t[3]["error"]["code"], "unknown_tool", "a tool added mid-run is not offered: {}", t[3]);
        assert_eq!(r.json()["answer"], "done");
        let warnings: Vec<&str> =
            r.stderr.lines().filter(|l| l.starts_with("harness: warning: MCP server \"rug\" changed")).collect();
        assert_eq!(warnings.len(), 1, "one warning line: {}", r.stderr);
        assert!(
            warnings[0].contains("MCP server \"rug\" changed tool \"weather\" (its description)"),
            "{}",
            warnings[0]
        );
        assert!(r.stderr.contains("MCP server \"rug\" added tool \"steal\""), "{}", r.stderr);
    }
}

mod bounds;
mod client;
mod conformance;
mod http_serve;
mod oauth;
mod remote;

/// A command that fails after its MCP servers started (here `--locked` without a lock file,
/// found once the tools are wired) still closes them as the protocol asks: their stdin closed,
/// their own exit awaited. The server says how it ended in a file: only a server that saw its
/// input end writes it, and it notes whether the harness was still there waiting for it.
#[test]
fn a_command_that_fails_after_its_servers_started_closes_them_gracefully() {
    let s = Scratch::new();
    let closed = s.path("closed.txt");
    s.write(
        "harness.toml",
        &format!(
            "[[mcp.servers]]\nname = \"py\"\ncommand = {:?}\nargs = [{:?}]\nenv = {{ CLOSED_FILE = {:?} }}\n",
            python().display().to_string(),
            fixture("tool_server.py").display().to_string(),
            closed.display().to_string(),
        ),
    );
    let script = s.script(&[step("finish", json!({"answer": 1}))]);
    let r = ran(s
        .harness()
        .args(["run", "x", "--config", "harness.toml", "--allow", "network", "--locked", "--script"])
        .arg(&script));
    r.usage_error(&["--locked", "harness lock"]);
    let how = std::fs::read_to_string(&closed).unwrap_or_else(|_| "never closed gracefully".into());
    assert_eq!(how, "closed while the client waited");
}
