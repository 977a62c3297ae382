//! The command line itself: shell completions and man pages generated from the parser, the
//! request read from stdin, `harness tools call`.

use std::io::Write;
use std::process::{Command, Stdio};

use serde_json::json;

use crate::support::{Scratch, ran};

/// Whether `program` can be run here (a test that needs it checks less without it).
fn present(program: &str) -> bool {
    Command::new(program).arg("--version").output().is_ok_and(|o| o.status.success())
}

#[test]
fn completions_name_the_subcommands_and_runs_flags_in_every_shell() {
    let s = Scratch::new();
    let r = ran(s.harness().args(["completions", "bash"]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("complete -F _harness"), "not a bash completion script: {}", r.stdout);
    for word in ["run", "plugins", "batch", "completions", "man", "--max-steps", "--trace", "--provider"] {
        assert!(r.stdout.contains(word), "{word} is not completed");
    }
    if present("bash") {
        let syntax = ran(Command::new("bash").arg("-n").arg(s.write("harness.bash", &r.stdout)));
        assert_eq!(syntax.code, 0, "bash -n: {}", syntax.stderr);
    }
    for shell in ["zsh", "fish", "powershell", "elvish"] {
        let r = ran(s.harness().args(["completions", shell]));
        assert_eq!(r.code, 0, "{shell}: {}", r.stderr);
        // fish names a long flag without its dashes (`-l max-steps`).
        assert!(r.stdout.contains("max-steps"), "{shell}: {}", r.stdout);
    }
    ran(s.harness().args(["completions", "tcsh"])).usage_error(&["tcsh", "bash"]);
}

/// Checks `page` as roff: with groff at hand, that it formats without a warning; else its header.
fn valid_roff(s: &Scratch, name: &str, page: &str) {
    assert!(page.contains(".TH ") && page.contains(".SH NAME") && page.contains(".SH SYNOPSIS"), "{page}");
    if present("groff") {
        // -k reads the page as UTF-8, as man does; -ww warns of everything; -z formats to nothing.
        let r = ran(Command::new("groff").args(["-k", "-man", "-ww", "-z"]).arg(s.write(name, page)));
        assert_eq!((r.code, r.stderr.as_str()), (0, ""), "{name} is not clean roff");
    }
}

#[test]
fn the_man_page_is_roff_with_name_and_synopsis_and_out_writes_one_per_command() {
    let s = Scratch::new();
    let r = ran(s.harness().arg("man"));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.starts_with(".ie") || r.stdout.starts_with(".TH"), "{}", r.stdout);
    assert!(r.stdout.contains(".TH harness 1"), "{}", r.stdout);
    valid_roff(&s, "harness.1", &r.stdout);
    let r = ran(s.harness().args(["man", "--out", "man/man1"]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let run = std::fs::read_to_string(s.path("man/man1/harness-run.1")).unwrap();
    assert!(run.contains("\\-\\-max\\-steps") && run.contains(".SH SYNOPSIS"), "{run}");
    valid_roff(&s, "run.1", &run);
    for page in ["harness.1", "harness-plugins-list.1", "harness-config-show.1"] {
        assert!(s.path("man/man1").join(page).is_file(), "{page} not written");
    }
}

#[test]
fn a_reader_that_stops_early_is_no_error() {
    let s = Scratch::new();
    let mut child = s.harness().arg("man").stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.stderr.is_empty(), "{}", String::from_utf8_lossy(&out.stderr));
}

/// Runs `harness` with `args` and `input` on its stdin.
fn with_stdin(s: &Scratch, args: &[&str], input: &[u8]) -> crate::support::Ran {
    let mut child =
        s.harness().args(args).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(input).unwrap();
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    crate::support::Ran {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

#[test]
fn run_dash_reads_the_request_from_stdin() {
    let s = Scratch::new();
    let r = with_stdin(&s, &["run", "-", "--trace", "t.jsonl", "-q"], b"calculate 6*7\n");
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.stdout.trim(), "42");
    // One trailing newline is dropped, nothing else: the request is what was piped in.
    assert_eq!(s.trace_lines("t.jsonl")[0]["request"], "calculate 6*7");
    let r = with_stdin(&s, &["run", "-", "--trace", "t2.jsonl", "-q"], b"calculate 6*7\n\n");
    assert_eq!((r.code, &s.trace_lines("t2.jsonl")[0]["request"]), (0, &serde_json::json!("calculate 6*7\n")));
    for empty in [&b""[..], b"\n", b"  \r\n"] {
        with_stdin(&s, &["run", "-"], empty).usage_error(&["stdin", "empty"]);
    }
    with_stdin(&s, &["run", "-"], b"\xff\xfe").usage_error(&["stdin", "UTF-8"]);
}

#[test]
fn tools_call_runs_one_tool_and_prints_its_result_as_json() {
    let s = Scratch::new();
    let r = ran(s.harness().args(["tools", "call", "calculate", r#"{"expression": "6*7"}"#]));
    assert_eq!((r.code, r.stdout.as_str()), (0, "42\n"), "{}", r.stderr);
    let file = s.write("args.json", r#"{"expression": "2**10"}"#);
    let r = ran(s.harness().args(["tools", "call", "calculate", "--args"]).arg(&file));
    assert_eq!((r.code, r.stdout.trim()), (0, "1024"), "{}", r.stderr);
    let r = with_stdin(&s, &["tools", "call", "calculate", "-", "--trace", "t.jsonl"], b"{\"expression\": \"1+2\"}\n");
    assert_eq!((r.code, r.stdout.trim()), (0, "3"), "{}", r.stderr);
    let steps = s.trace("t.jsonl");
    assert_eq!(steps.len(), 1, "{steps:?}");
    assert_eq!(
        (&steps[0]["tool"], &steps[0]["status"], &steps[0]["result"]),
        (&json!("calculate"), &json!("ok"), &json!(3))
    );
    assert_eq!((&steps[0]["plugin"], &steps[0]["arguments"]), (&json!("calc"), &json!({"expression": "1+2"})));
    // The tool's own failure: exit 1, the error on stderr, nothing on stdout.
    let r = ran(s.harness().args(["tools", "call", "calculate", r#"{"expression": "1/0"}"#]));
    assert_eq!((r.code, r.stdout.as_str()), (1, ""), "{}", r.stderr);
    assert!(r.stderr.contains("tool_error") && r.stderr.contains("division by zero"), "{}", r.stderr);
}

#[test]
fn tools_call_names_the_bad_field_and_the_offered_tools() {
    let s = Scratch::new();
    for bad in [r#"{"expression": 6}"#, "{}"] {
        let r = ran(s.harness().args(["tools", "call", "calculate", bad]));
        r.usage_error(&["invalid_arguments", "expression"]);
        assert!(r.stdout.is_empty(), "{}", r.stdout);
    }
    ran(s.harness().args(["tools", "call", "calculate", "6*7"])).usage_error(&["not JSON", "the JSON argument"]);
    ran(s.harness().args(["tools", "call", "calculate", "--args", "missing.json"]))
        .usage_error(&["--args", "missing.json"]);
    let r = ran(s.harness().args(["tools", "call", "calculat", "{}"]));
    r.usage_error(&["calculat", "offered", "calculate", "validate_smiles", "plugins list"]);
    // `finish` ends a run; it is no tool to call.
    ran(s.harness().args(["tools", "call", "finish", "{}"])).usage_error(&["finish", "calculate"]);
}

#[test]
fn tools_call_is_held_to_the_operators_policy_and_asks_no_one() {
    let s = Scratch::new();
    let call = ["tools", "call", "calculate", r#"{"expression": "6*7"}"#];
    let r = ran(s.harness().args(call).args(["--deny", "pure", "--trace", "t.jsonl"]));
    assert_eq!((r.code, r.stdout.as_str()), (4, ""), "{}", r.stderr);
    assert!(r.stderr.contains("call_denied") && r.stderr.contains("denies calc.calculate (pure)"), "{}", r.stderr);
    let steps = s.trace("t.jsonl");
    assert_eq!((&steps[0]["status"], &steps[0]["error"]["code"]), (&json!("rejected"), &json!("call_denied")));
    s.write("deny.toml", "[policy]\npure = \"deny\"\n");
    let r = ran(s.harness().args(call).args(["--config", "deny.toml"]));
    assert_eq!(r.code, 4, "{}", r.stderr);
    // A call the policy asks about is refused, with the flag that runs it; that flag runs it.
    let r = ran(s.harness().args(call).args(["--ask", "pure"]));
    assert_eq!(r.code, 4, "{}", r.stderr);
    assert!(r.stderr.contains("--allow calc.calculate"), "{}", r.stderr);
    let r = ran(s.harness().args(call).args(["--ask", "pure", "--allow", "calc.calculate"]));
    assert_eq!((r.code, r.stdout.as_str()), (0, "42\n"), "{}", r.stderr);
}

#[test]
fn tools_call_holds_the_tool_to_its_timeout() {
    let s = Scratch::new();
    let args = ["tools", "call", "fault_sleep", r#"{"ms": 20000}"#, "--enable", "fault", "--isolation", "process"];
    let started = std::time::Instant::now();
    let r = ran(s.harness().args(args).args(["--tool-timeout", "0.5"]));
    assert_eq!((r.code, r.stdout.as_str()), (1, ""), "{}", r.stderr);
    assert!(r.stderr.contains("tool_timeout"), "{}", r.stderr);
    assert!(started.elapsed() < std::time::Duration::from_secs(10), "waited {:?}", started.elapsed());
}

/// The stderr of `cmd` written to a pseudo-terminal, where `--color auto` colours; with
/// `TERM=xterm`, so that the tester's own terminal type plays no part.
fn stderr_on_a_terminal(mut cmd: Command) -> String {
    use std::io::Read as _;
    use std::os::fd::{FromRawFd as _, OwnedFd};
    let (mut master, mut slave) = (-1, -1);
    let null = std::ptr::null_mut();
    // SAFETY: two out-pointers to locals; no name, termios or window size asked for.
    let rc = unsafe { libc::openpty(&mut master, &mut slave, null, null.cast(), null.cast()) };
    assert_eq!(rc, 0, "openpty: {}", std::io::Error::last_os_error());
    // SAFETY: both descriptors were just opened and are owned here alone; close-on-exec keeps
    // them from other tests' children, which would hold the terminal open.
    let (master, slave) = unsafe {
        assert_eq!(libc::fcntl(master, libc::F_SETFD, libc::FD_CLOEXEC), 0);
        assert_eq!(libc::fcntl(slave, libc::F_SETFD, libc::FD_CLOEXEC), 0);
        (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave))
    };
    let mut child = cmd.env("TERM", "xterm").stdout(Stdio::null()).stderr(Stdio::from(slave)).spawn().unwrap();
    // The command holds the terminal's other end until dropped: reading ends when both are gone.
    drop(cmd);
    child.wait().unwrap();
    let mut out = Vec::new();
    // Linux answers EIO once the other end is closed, after everything written was read.
    let _ = std::fs::File::from(master).read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

#[test]
fn color_follows_the_flag_then_no_color_then_the_terminal() {
    let s = Scratch::new();
    const ESC: char = '\u{1b}';
    // A mistake clap reports, and one the harness reports (`harness: error:`).
    for args in [&["run", "--bogus"][..], &["run", "x", "--config", "missing.toml"]] {
        let on_terminal = |extra: &[&str], no_color: bool| {
            let mut cmd = s.harness();
            cmd.args(args).args(extra).env_remove("NO_COLOR").env_remove("CLICOLOR_FORCE").env_remove("CLICOLOR");
            if no_color {
                cmd.env("NO_COLOR", "1");
            }
            stderr_on_a_terminal(cmd)
        };
        let auto = on_terminal(&[], false);
        assert!(auto.contains(ESC) && auto.contains("error"), "{args:?}: not coloured on a terminal: {auto:?}");
        let plain = on_terminal(&[], true);
        assert!(!plain.contains(ESC) && plain.contains("error"), "{args:?}: NO_COLOR is not honoured: {plain:?}");
        let never = on_terminal(&["--color", "never"], false);
        assert!(!never.contains(ESC) && never.contains("error"), "{args:?}: --color never: {never:?}");
        let always = on_terminal(&["--color=always"], true);
        assert!(always.contains(ESC), "{args:?}: --color=always beats NO_COLOR: {always:?}");
        // Not a terminal: plain unless asked.
        assert!(!ran(s.harness().args(args)).stderr.contains(ESC), "{args:?}");
        assert!(ran(s.harness().arg("--color").arg("always").args(args)).stderr.contains(ESC), "{args:?}");
    }
    ran(s.harness().args(["--color", "purple", "run", "x"])).usage_error(&["purple", "--color"]);
}

/// The files plugin, configured as a run configures it: confined to its root, and its writes
/// asked about by the default policy, so refused until `--allow` names them.
#[test]
fn tools_call_configures_and_confines_the_plugin_as_a_run_does() {
    let s = Scratch::new();
    s.write("data/a.txt", "hello\n");
    s.write("outside.txt", "secret\n");
    s.write("h.toml", "[plugins.files]\nroot = \"data\"\n");
    let call = |tool: &str, arguments: &str, extra: &[&str]| {
        ran(s.harness().args(["tools", "call", tool, arguments, "--config", "h.toml"]).args(extra))
    };
    let r = call("read_file", r#"{"path": "a.txt"}"#, &[]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.json()["content"], "hello\n");
    let r = call("read_file", r#"{"path": "../outside.txt"}"#, &[]);
    assert_eq!((r.code, r.stdout.as_str()), (1, ""), "{}", r.stderr);
    assert!(r.stderr.contains("tool_error") && !r.stderr.contains("secret"), "{}", r.stderr);
    let write = r#"{"path": "b.txt", "content": "x"}"#;
    let r = call("write_file", write, &[]);
    assert_eq!(r.code, 4, "{}", r.stderr);
    assert!(r.stderr.contains("--allow files.write_file") && r.stderr.contains("--allow writes"), "{}", r.stderr);
    assert!(!s.path("data/b.txt").exists(), "a refused call wrote");
    let r = call("write_file", write, &["--allow", "writes"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(std::fs::read_to_string(s.path("data/b.txt")).unwrap(), "x");
}
