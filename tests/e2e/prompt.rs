//! The approval prompt on a real terminal: the harness runs with its stdin and stderr on a
//! pseudo-terminal (as an operator's shell gives it), the test reads the prompt from the
//! terminal's other end and types the answer.

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::Scratch;

const PROMPT: &str = "allow it? [y]es / [n]o / [a]lways for this run: ";

/// A pseudo-terminal: the end the test reads and types on, and the end the harness gets.
fn pty() -> (File, OwnedFd) {
    let (mut main, mut side) = (-1, -1);
    // SAFETY: openpty writes two new descriptors into the integers it is given; the name,
    // termios and window size are optional (null).
    let rc = unsafe { libc::openpty(&mut main, &mut side, std::ptr::null_mut(), std::ptr::null(), std::ptr::null()) };
    assert_eq!(rc, 0, "openpty: {}", std::io::Error::last_os_error());
    for fd in [main, side] {
        // Close-on-exec, as every descriptor Rust opens is: no other test's child inherits the
        // terminal and keeps it open after the harness has ended.
        // SAFETY: fcntl on a descriptor this function just opened.
        unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
    }
    // SAFETY: both descriptors are new and owned by nobody else.
    unsafe { (File::from_raw_fd(main), OwnedFd::from_raw_fd(side)) }
}

/// `harness run` on a terminal, with `ahead` typed before the harness starts and `answers`
/// typed one per prompt; the terminal's text and the run's `--json` output.
fn on_a_terminal(s: &Scratch, script: &[Value], ahead: &str, answers: &[&str]) -> (String, Value) {
    let script = s.script(script);
    let (mut terminal, side) = pty();
    // Queued on the terminal before the harness exists: surely before any prompt is shown.
    terminal.write_all(ahead.as_bytes()).expect("type ahead");
    let child: Child = s
        .harness()
        .args(["run", "write", "--config", "h.toml", "--json", "--trace", "t.jsonl", "--script"])
        .arg(&script)
        .stdin(Stdio::from(side.try_clone().expect("dup")))
        .stderr(Stdio::from(side))
        .stdout(Stdio::piped())
        .spawn()
        .expect("harness starts");
    // Reads the terminal until the harness closes it (EIO once no process holds the other end).
    let mut reader = terminal.try_clone().expect("dup");
    let (tx, rx) = mpsc::channel();
    let seen = std::thread::spawn(move || {
        let mut text = String::new();
        let mut buf = [0u8; 4096];
        while let Ok(n @ 1..) = reader.read(&mut buf) {
            text.push_str(&String::from_utf8_lossy(&buf[..n]));
            let _ = tx.send(text.clone());
        }
        text
    });
    for (i, answer) in answers.iter().enumerate() {
        let shown = loop {
            let text = rx.recv_timeout(Duration::from_secs(30)).expect("the prompt appears on the terminal");
            if text.matches(PROMPT).count() > i {
                break text;
            }
        };
        assert!(shown.contains("files.write_file (writes) wants to run with"), "{shown}");
        terminal.write_all(format!("{answer}\n").as_bytes()).expect("type the answer");
    }
    let output = child.wait_with_output().expect("harness ends");
    drop(terminal);
    let text = seen.join().expect("reader");
    let out = serde_json::from_slice(&output.stdout).unwrap_or_else(|e| panic!("--json ({e}); terminal: {text}"));
    (text, out)
}

fn scratch() -> Scratch {
    let s = Scratch::new();
    std::fs::create_dir_all(s.path("root")).unwrap();
    s.write("h.toml", "[plugins.files]\nroot = \"root\"\n");
    s
}

fn write(file: &str) -> Value {
    json!({"tool": "write_file", "arguments": {"path": file, "content": file}})
}

fn finish() -> Value {
    json!({"tool": "finish", "arguments": {"answer": "done"}})
}

#[test]
fn on_a_terminal_always_allows_the_rest_of_the_run_after_one_prompt() {
    let s = scratch();
    let (text, out) = on_a_terminal(&s, &[write("a.txt"), write("b.txt"), finish()], "", &["a"]);
    assert_eq!(out["status"], "finished", "{text}");
    assert_eq!(text.matches(PROMPT).count(), 1, "asked once: {text}");
    assert!(text.contains(r#"{"content":"a.txt","path":"a.txt"}"#), "the arguments are shown: {text}");
    for file in ["a.txt", "b.txt"] {
        assert_eq!(std::fs::read_to_string(s.path("root").join(file)).unwrap(), file);
    }
}

#[test]
fn on_a_terminal_yes_runs_one_call_and_no_denies_the_next() {
    let s = scratch();
    let (text, out) = on_a_terminal(&s, &[write("a.txt"), write("b.txt"), finish()], "", &["y", "n"]);
    assert_eq!(out["status"], "finished", "{text}");
    assert_eq!(text.matches(PROMPT).count(), 2, "{text}");
    assert!(s.path("root/a.txt").exists());
    assert!(!s.path("root/b.txt").exists(), "a denied write never runs");
    let t = s.trace("t.jsonl");
    assert_eq!((&t[1]["status"], &t[1]["error"]["code"]), (&json!("rejected"), &json!("call_denied")));
}

#[test]
fn on_a_terminal_input_typed_before_the_prompt_does_not_answer_it() {
    let s = scratch();
    let (text, out) = on_a_terminal(&s, &[write("early.txt"), finish()], "y\n", &["n"]);
    assert_eq!(out["status"], "finished", "{text}");
    assert!(!s.path("root/early.txt").exists(), "the \"y\" typed before the prompt approved the write: {text}");
    assert_eq!(s.trace("t.jsonl")[0]["error"]["code"], "call_denied", "the answer typed after the prompt counts");
}
