//! The reply corpus: every `tests/data/replies/<family>/NAME.txt` (a raw reply, as a model
//! wrote it) is read by `read_reply`, and what it gives (calls, reasoning, content, format,
//! error code and details) must equal `NAME.json`'s. `NAME.json` also credits the case's
//! `source` and may set `read_as` (a format name; `auto` when absent) and `truncated`.
//!
//! When a change to the reader is intended, `UPDATE_EXPECT=1 cargo test -p harness-core --test
//! corpus` writes what the reader now gives into each `NAME.json` (keeping `source`,
//! `read_as` and `truncated`); review the diff before committing it. A new case is a `.txt`
//! and a `.json` holding its `source`, filled the same way.

use std::fs;
use std::path::{Path, PathBuf};

use harness_core::{ReadOptions, ReplyFormat, ToolDefinition, ToolSource, read_reply};
use serde_json::{Map, Value, json};

/// The keys of a case file that say what the case is, never rewritten.
const KEPT_KEYS: [&str; 3] = ["source", "read_as", "truncated"];

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/replies")
}

include!("common/tools.rs");

/// What the reader gives for a case, as the case file holds it.
fn reading(text: &str, case: &Map<String, Value>, tools: &[ToolDefinition]) -> Result<Map<String, Value>, String> {
    let format = match case.get("read_as").and_then(Value::as_str) {
        Some(name) => name.parse::<ReplyFormat>()?,
        None => ReplyFormat::Auto,
    };
    let truncated = case.get("truncated").and_then(Value::as_bool).unwrap_or(false);
    let read = read_reply(text, &ReadOptions { format, truncated, tools, forced: None });
    let error = read.error.map(|e| json!({ "code": e.code, "details": e.details }));
    let got = json!({
        "format": read.format,
        "calls": read.calls,
        "content": read.content,
        "reasoning": read.reasoning,
        "error": error,
    });
    match got {
        Value::Object(map) => Ok(map),
        _ => Err("a reading is an object".to_owned()),
    }
}

/// Every `.txt` of the corpus, sorted, so that failures read in a stable order.
fn cases() -> Vec<PathBuf> {
    let mut out = Vec::new();
    let families = fs::read_dir(corpus_dir()).expect("tests/data/replies exists (the reply corpus)");
    for family in families.flatten().filter(|e| e.path().is_dir()) {
        let files = fs::read_dir(family.path()).expect("a family folder is readable");
        out.extend(files.flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|x| x == "txt")));
    }
    out.sort();
    out
}

/// Checks one case, or rewrites its expectation; returns what is wrong with it.
fn check(txt: &Path, tools: &[ToolDefinition], update: bool) -> Option<String> {
    let name = txt.strip_prefix(corpus_dir()).unwrap_or(txt).display().to_string();
    let text = fs::read_to_string(txt).expect("a case's reply is UTF-8 text");
    let json_path = txt.with_extension("json");
    let case: Map<String, Value> = match fs::read_to_string(&json_path) {
        Ok(raw) => serde_json::from_str(&raw).unwrap_or_else(|e| panic!("{}: not JSON: {e}", json_path.display())),
        Err(_) if update => Map::new(),
        Err(_) => {
            return Some(format!(
                "{name}: no .json beside it; write one with its \"source\", then run with UPDATE_EXPECT=1"
            ));
        }
    };
    if !case.get("source").is_some_and(Value::is_string) {
        return Some(format!("{name}: the .json has no \"source\" string crediting where the case comes from"));
    }
    let got = match reading(&text, &case, tools) {
        Ok(got) => got,
        Err(e) => return Some(format!("{name}: {e}")),
    };
    let expected: Map<String, Value> =
        case.iter().filter(|(k, _)| !KEPT_KEYS.contains(&k.as_str())).map(|(k, v)| (k.clone(), v.clone())).collect();
    if got == expected {
        return None;
    }
    if update {
        let mut kept: Map<String, Value> = case.into_iter().filter(|(k, _)| KEPT_KEYS.contains(&k.as_str())).collect();
        kept.extend(got);
        let pretty = serde_json::to_string_pretty(&Value::Object(kept)).expect("JSON serialises");
        fs::write(&json_path, pretty + "\n").expect("the .json is writable");
        return None;
    }
    let pretty = |m: Map<String, Value>| serde_json::to_string_pretty(&Value::Object(m)).unwrap_or_default();
    Some(format!("{name}: the reader gives\n{}\nbut the case expects\n{}", pretty(got), pretty(expected)))
}

#[test]
fn every_reply_in_the_corpus_reads_as_its_case_expects() {
    let update = std::env::var_os("UPDATE_EXPECT").is_some_and(|v| v == "1");
    let tools = tools();
    let cases = cases();
    assert!(cases.len() >= 40, "the corpus holds {} cases; tests/data/replies lost some", cases.len());
    let failures: Vec<String> = cases.iter().filter_map(|txt| check(txt, &tools, update)).collect();
    assert!(
        failures.is_empty(),
        "{} of {} corpus cases differ (UPDATE_EXPECT=1 rewrites them when the change is intended):\n\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n\n")
    );
}

#[test]
fn every_format_has_a_folder_of_cases() {
    let dir = corpus_dir();
    for format in ReplyFormat::ALL.into_iter().filter(|f| *f != ReplyFormat::Auto) {
        let folder = dir.join(format.as_str());
        let count = fs::read_dir(&folder).map(|d| d.flatten().count()).unwrap_or(0);
        assert!(count > 0, "{format} has no cases: add tests/data/replies/{format}/NAME.txt and NAME.json");
    }
}
