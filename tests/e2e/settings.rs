//! The layers of the settings, each over the one before: defaults, the user's file
//! (`$XDG_CONFIG_HOME/harness/config.toml`), the project's file, `HARNESS_*` variables, flags.
//! Runs show which layer won; `config show` names where each value came from.

use std::path::PathBuf;

use serde_json::{Value, json};

use crate::support::{Scratch, ran};
use crate::trust::recording_listener;

/// Writes the user's configuration file where the scratch directory's XDG_CONFIG_HOME puts it.
fn user_file(s: &Scratch, text: &str) -> PathBuf {
    s.write("xdg-config/harness/config.toml", text)
}

/// A script whose one reply finishes with `answer`, written at `name`.
fn finishing(s: &Scratch, name: &str, answer: &str) -> PathBuf {
    s.write(name, &format!("{}\n", json!({"tool": "finish", "arguments": {"answer": answer}})))
}

/// The answer of `harness run x --json` with `extra` arguments and `env`.
fn answer(s: &Scratch, env: &[(&str, &str)], extra: &[&str]) -> Value {
    let r = ran(s.harness().envs(env.iter().copied()).args(["run", "x", "--json"]).args(extra));
    assert_eq!(r.code, 0, "{}", r.stderr);
    r.json()["answer"].clone()
}

/// A value of `config show --json` and its source.
fn shown(shown: &Value, key: &str) -> (Value, String) {
    let all = shown["settings"].as_array().unwrap();
    let found = all.iter().find(|v| v["key"] == key).unwrap_or_else(|| panic!("no {key} in {shown}"));
    (found["value"].clone(), found["source"].as_str().unwrap_or_default().to_owned())
}

#[test]
fn the_user_file_is_read_with_its_paths_relative_to_it() {
    let s = Scratch::new();
    finishing(&s, "xdg-config/harness/user.jsonl", "from the user file");
    user_file(&s, "provider = \"scripted\"\nscript = \"user.jsonl\"\n");
    assert_eq!(answer(&s, &[], &[]), "from the user file");
}

#[test]
fn the_project_file_overrides_the_user_file_key_by_key() {
    let s = Scratch::new();
    finishing(&s, "xdg-config/harness/user.jsonl", "from the user file");
    finishing(&s, "project.jsonl", "from the project file");
    user_file(&s, "provider = \"scripted\"\nscript = \"user.jsonl\"\n");
    s.write("harness.toml", "script = \"project.jsonl\"\n");
    // The provider is the user's; the script the project's.
    assert_eq!(answer(&s, &[], &["--config", "harness.toml"]), "from the project file");
}

#[test]
fn the_environment_overrides_the_project_file_and_a_flag_the_environment() {
    let s = Scratch::new();
    finishing(&s, "project.jsonl", "from the project file");
    s.write("harness.toml", "provider = \"scripted\"\nscript = \"project.jsonl\"\n");
    let r =
        ran(s.harness().env("HARNESS_PROVIDER", "offline").args(["run", "x", "--json", "--config", "harness.toml"]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stderr.contains("using the offline router"), "{}", r.stderr);
    assert_ne!(r.json()["answer"], "from the project file");
    let flagged =
        answer(&s, &[("HARNESS_PROVIDER", "offline")], &["--config", "harness.toml", "--provider", "scripted"]);
    assert_eq!(flagged, "from the project file");
}

#[test]
fn config_show_names_the_source_of_every_value() {
    let s = Scratch::new();
    let user = user_file(&s, "timeout = 30\nmodel = \"u\"\nmax_steps = 4\nretries = 5\n");
    let project = s.write("harness.toml", "model = \"p\"\nretries = 1\nmax_steps = 5\n");
    let env = [("HARNESS_RETRIES", "2"), ("HARNESS_MAX_STEPS", "6")];
    let args = ["config", "show", "--config", "harness.toml", "--max-steps", "7", "--json"];
    let r = ran(s.harness().envs(env).args(args));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let json = r.json();
    let (user, project) = (user.canonicalize().unwrap(), project.canonicalize().unwrap());
    assert_eq!(json["user_file"]["path"], json!(user));
    assert_eq!(shown(&json, "timeout"), (json!(30), format!("user file {}", user.display())));
    assert_eq!(shown(&json, "model"), (json!("p"), format!("project file {}", project.display())));
    assert_eq!(shown(&json, "retries"), (json!(2), "env HARNESS_RETRIES".to_owned()));
    assert_eq!(shown(&json, "max_steps"), (json!(7), "flag --max-steps".to_owned()));
    assert_eq!(shown(&json, "max_repeats"), (json!(3), "default".to_owned()));
    // The text says the same, a line per value.
    let r = ran(s.harness().envs(env).args(&args[..args.len() - 1]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let line = |key: &str| r.stdout.lines().find(|l| l.starts_with(&format!("{key} = "))).unwrap_or_default();
    assert!(line("timeout").ends_with(&format!("# user file {}", user.display())), "{}", r.stdout);
    assert!(line("retries").ends_with("# env HARNESS_RETRIES"), "{}", r.stdout);
    assert!(line("max_steps").ends_with("# flag --max-steps"), "{}", r.stdout);
    assert!(line("max_repeats").ends_with("# default"), "{}", r.stdout);
}

#[test]
fn a_bad_variable_names_itself_its_value_and_the_nearest_word() {
    let s = Scratch::new();
    let r = ran(s.harness().env("HARNESS_PROVIDER", "opnai").args(["run", "x"]));
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains("HARNESS_PROVIDER=\"opnai\"") && r.stderr.contains("did you mean openai?"),
        "{}",
        r.stderr
    );
    let r = ran(s.harness().env("HARNESS_MAX_STEPS", "many").args(["config", "show"]));
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("HARNESS_MAX_STEPS=\"many\": give a whole number"), "{}", r.stderr);
}

#[test]
fn a_mistyped_variable_is_warned_about_and_others_are_not() {
    let s = Scratch::new();
    let r = ran(s.harness().env("HARNESS_PROVDER", "openai").env("HARNESS_TEST_OTHER", "1").args(["config", "show"]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stderr.contains("HARNESS_PROVDER is no setting of the harness; did you mean HARNESS_PROVIDER?"),
        "{}",
        r.stderr
    );
    assert_eq!(r.stderr.lines().count(), 1, "{}", r.stderr);
}

#[test]
fn a_mistyped_key_names_the_nearest_one_in_either_file() {
    let s = Scratch::new();
    let user = user_file(&s, "model = \"m\"\nmax_step = 3\n");
    let r = ran(s.harness().args(["run", "x"]));
    assert_eq!(r.code, 2, "{}", r.stderr);
    let expected = format!("unknown field max_step in {} (line 2): did you mean max_steps?", user.display());
    assert!(r.stderr.contains(&expected), "{}", r.stderr);
    std::fs::remove_file(&user).unwrap();
    s.write("harness.toml", "[limits]\nreply_byte = 10\n");
    let r = ran(s.harness().args(["config", "show", "--config", "harness.toml"]));
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains("unknown field reply_byte in harness.toml (line 2): did you mean reply_bytes?"),
        "{}",
        r.stderr
    );
}

#[test]
fn a_bad_word_in_a_file_names_its_key_its_file_and_the_nearest_word() {
    let s = Scratch::new();
    let user = user_file(&s, "[policy]\nwrites = \"alow\"\n");
    let r = ran(s.harness().args(["run", "x"]));
    assert_eq!(r.code, 2, "{}", r.stderr);
    let expected = format!("policy.writes = \"alow\" in {}: no such decision; did you mean allow?", user.display());
    assert!(r.stderr.contains(&expected), "{}", r.stderr);
}

#[test]
fn a_bad_word_of_each_layer_names_its_key_its_source_and_the_nearest_word() {
    let s = Scratch::new();
    let stderr = |env: &[(&str, &str)], args: &[&str]| {
        let r = ran(s.harness().envs(env.iter().copied()).args(args));
        assert_eq!(r.code, 2, "{}", r.stderr);
        r.stderr
    };
    let user = user_file(&s, "provider = \"opnai\"\n");
    let e = stderr(&[], &["run", "x"]);
    let expected = format!("provider = \"opnai\" in {}: no such provider; did you mean openai?", user.display());
    assert!(e.contains(&expected), "{e}");
    std::fs::remove_file(&user).unwrap();
    s.write("harness.toml", "[isolation]\nmode = \"proces\"\n");
    let e = stderr(&[], &["config", "show", "--config", "harness.toml"]);
    let expected = "isolation.mode = \"proces\" in harness.toml: no such isolation mode; did you mean process?";
    assert!(e.contains(expected), "{e}");
    let e = stderr(&[("HARNESS_REPLY_FORMAT", "hermez")], &["run", "x"]);
    assert!(e.contains("HARNESS_REPLY_FORMAT=\"hermez\": no such reply format; did you mean hermes?"), "{e}");
    for (flag, value, near) in [
        ("--provider", "opnai", "openai"),
        ("--reply-format", "hermez", "hermes"),
        ("--isolation", "proces", "process"),
    ] {
        let e = stderr(&[], &["run", "x", flag, value]);
        assert!(e.contains(&format!("{flag} \"{value}\": no such ")), "{e}");
        assert!(e.contains(&format!("did you mean {near}?")), "{e}");
    }
    // A word nowhere near any is named with all the words there are.
    let e = stderr(&[], &["config", "show", "--provider", "gemini"]);
    assert!(e.contains("--provider \"gemini\": no such provider; use one of: offline, scripted"), "{e}");
}

#[test]
fn a_user_file_others_can_write_is_refused_with_the_fix() {
    use std::os::unix::fs::PermissionsExt;
    let s = Scratch::new();
    let user = user_file(&s, "max_steps = 3\n");
    std::fs::set_permissions(&user, std::fs::Permissions::from_mode(0o666)).unwrap();
    let r = ran(s.harness().args(["run", "x"]));
    assert_eq!(r.code, 2, "{}", r.stderr);
    let canonical = user.canonicalize().unwrap();
    assert!(r.stderr.contains(&format!("run chmod go-w {}", canonical.display())), "{}", r.stderr);
}

#[test]
fn a_base_url_of_any_layer_beats_openai_base_url() {
    let s = Scratch::new();
    let (port, seen) = recording_listener();
    // OPENAI_BASE_URL names a port nobody listens on: a request there would not be recorded.
    let elsewhere = "http://127.0.0.1:9/v1";
    user_file(
        &s,
        &format!("provider = \"openai\"\nmodel = \"m\"\nretries = 0\nbase_url = \"http://127.0.0.1:{port}/user/v1\"\n"),
    );
    let r = ran(s.harness().env("OPENAI_BASE_URL", elsewhere).args(["run", "x", "--max-steps", "1"]));
    assert_eq!(r.code, 1, "the listener answers 500: {}", r.stderr);
    let url = format!("http://127.0.0.1:{port}/harness/v1");
    let r = ran(s.harness().env("OPENAI_BASE_URL", elsewhere).env("HARNESS_BASE_URL", &url).args([
        "run",
        "x",
        "--max-steps",
        "1",
    ]));
    assert_eq!(r.code, 1, "the listener answers 500: {}", r.stderr);
    let lines: Vec<String> = seen.lock().unwrap().iter().map(|h| h.lines().next().unwrap_or("").to_owned()).collect();
    assert_eq!(lines, ["POST /user/v1/chat/completions HTTP/1.1", "POST /harness/v1/chat/completions HTTP/1.1"]);
}
