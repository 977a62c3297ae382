//! Shared inputs and helpers of the harness benchmarks.
//!
//! The stage benchmarks (`cargo bench -p harness-bench`) and the whole-process runner
//! (`cargo run --release -p harness-bench --bin whole-process`) use the same inputs from here,
//! so that every number in `docs/benchmarks.md` is measured on the same replies, schemas and
//! scripts as the Python reference in `benches/reference/`.

pub mod first_call;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

/// A router reply as a structured call, the way an API with native tool calling gives it.
pub const STRUCTURED_LINE: &str = r#"{"tool":"calculate","arguments":{"expression":"(6 + 3) * 7 - 2"}}"#;

/// The same call with its arguments as a JSON string (OpenAI's `function.arguments` shape).
pub const STRING_ARGUMENTS: &str = r#"{"expression":"(6 + 3) * 7 - 2"}"#;

const PROSE: &str = "The user asked for a value that depends on a short arithmetic expression. \
Before answering I should make sure the numbers are right, so I will not compute it in my head: \
the calculator tool is the reliable way to do it, and the harness will check my call against the \
tool's schema before it runs. I will write the call as JSON in a fenced block, as instructed, and \
then wait for the result before I say anything else to the user about it. ";

/// About `bytes` of plain prose (no braces), cut at a character boundary.
pub fn prose(bytes: usize) -> String {
    let mut text = String::with_capacity(bytes + PROSE.len());
    while text.len() < bytes {
        text.push_str(PROSE);
    }
    let cut = (0..=bytes).rev().find(|&i| text.is_char_boundary(i)).unwrap_or(0);
    text.truncate(cut);
    text
}

/// A fenced call inside 2 KB of prose: 1 KB before the fence, 1 KB after.
pub fn fenced_reply_2kb() -> String {
    let before = prose(1024);
    let after = prose(1024);
    format!("{before}\n\n```json\n{STRUCTURED_LINE}\n```\n\n{after}")
}

/// A schema of seven properties (strings, integers, numbers, a boolean, an enum, an array and
/// a nested object), two required, no others allowed: a typical tool's parameters.
pub fn seven_property_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "query": { "type": "string", "minLength": 1, "maxLength": 512 },
            "limit": { "type": "integer", "minimum": 1, "maximum": 100 },
            "threshold": { "type": "number", "minimum": 0, "maximum": 1 },
            "exact": { "type": "boolean" },
            "order": { "enum": ["relevance", "date", "name"] },
            "tags": { "type": "array", "items": { "type": "string", "maxLength": 32 }, "maxItems": 16 },
            "range": {
                "type": "object",
                "properties": { "from": { "type": "string" }, "to": { "type": "string" } },
                "additionalProperties": false
            }
        },
        "required": ["query", "limit"],
        "additionalProperties": false
    })
}

/// Arguments that pass [`seven_property_schema`], every property given.
pub fn seven_property_arguments() -> Value {
    json!({
        "query": "benzene derivatives with a boiling point above 400 K",
        "limit": 25,
        "threshold": 0.75,
        "exact": false,
        "order": "relevance",
        "tags": ["chemistry", "aromatic", "solvent"],
        "range": { "from": "2020-01-01", "to": "2024-12-31" }
    })
}

/// Arguments that break [`seven_property_schema`] in four places.
pub fn seven_property_bad_arguments() -> Value {
    json!({ "limit": 0, "threshold": 2, "order": "size", "extra": true })
}

/// `fault_echo` arguments whose JSON text is `bytes` long (give or take a few): a list of
/// small records, the shape of a real tool's payload, not one long string.
pub fn echo_arguments(bytes: usize) -> Value {
    let mut items = Vec::new();
    let mut value = json!({ "value": { "items": [] } });
    while serde_json::to_string(&value).map_or(0, |s| s.len()) < bytes {
        let i = items.len();
        items
            .push(json!({ "id": i, "name": format!("item-{i:04}"), "score": 0.5 + i as f64 / 64.0, "ok": i % 3 != 0 }));
        value = json!({ "value": { "items": items } });
    }
    value
}

/// The expression of step `i` of a generated script: integers only, so that the Rust
/// calculator (`evalexpr`) and the Python one give the same results.
pub fn expression(i: usize) -> String {
    format!("({i} + 3) * 7 - {}", i % 13)
}

/// How the calls of a generated script are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// Structured calls: `{"tool": ..., "arguments": {...}}`.
    Structured,
    /// Model text: a call in a fenced block after a sentence of prose.
    Fenced,
    /// Structured calls whose arguments are a JSON string, `{"tool": ..., "arguments": "{...}"}`:
    /// what OpenAI-compatible servers (OpenAI, vLLM, llama.cpp's native tool calls) send.
    TextArguments,
}

/// A script of `steps` router replies: `steps - 1` calls of `calculate`, then `finish`.
/// Run it with `--max-steps steps --max-repeats 0`.
pub fn script(steps: usize, shape: Shape) -> String {
    let mut text = String::with_capacity(steps * 80);
    for i in 0..steps.saturating_sub(1) {
        let arguments = json!({ "expression": expression(i) });
        let line = match shape {
            Shape::Structured => json!({ "tool": "calculate", "arguments": arguments }),
            Shape::Fenced => {
                let call = json!({ "tool": "calculate", "arguments": arguments });
                json!({ "content": format!("I will compute it.\n```json\n{call}\n```\n") })
            }
            Shape::TextArguments => json!({ "tool": "calculate", "arguments": arguments.to_string() }),
        };
        let _ = writeln!(text, "{line}");
    }
    let finish = json!({ "tool": "finish", "arguments": { "answer": "done" } });
    let line = match shape {
        Shape::Structured => finish,
        Shape::Fenced => json!({ "content": format!("Done.\n```json\n{finish}\n```\n") }),
        Shape::TextArguments => json!({ "tool": "finish", "arguments": finish["arguments"].to_string() }),
    };
    let _ = writeln!(text, "{line}");
    text
}

/// The directory of the optimized build that holds this executable: `target/release` for
/// both `target/release/whole-process` and `target/release/deps/stages-<hash>`.
pub fn release_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the benchmark knows its own path");
    let mut dir = exe.parent().expect("an executable sits in a directory").to_path_buf();
    if dir.file_name().is_some_and(|n| n == "deps") {
        dir.pop();
    }
    dir
}

/// The file name of a plugin library: `libcalc.so` on Linux.
pub fn library_file_name(crate_name: &str) -> String {
    format!("{}{}{}", std::env::consts::DLL_PREFIX, crate_name.replace('-', "_"), std::env::consts::DLL_SUFFIX)
}

/// Runs `cargo build --release` for the named packages (a no-op when they are fresh, about
/// 0.5 s), with the cargo that built this benchmark. Returns whether it succeeded.
pub fn cargo_build_release(packages: &[&str]) -> bool {
    let mut cmd = Command::new(env!("CARGO"));
    cmd.args(["build", "--release", "--quiet"]);
    for package in packages {
        cmd.args(["-p", package]);
    }
    cmd.status().is_ok_and(|s| s.success())
}

/// The release build the benchmarks use, and where its files are.
#[derive(Debug, Clone)]
pub struct Built {
    /// The `harness` executable (also the plugin host of `process` isolation).
    pub harness: PathBuf,
    /// The calc plugin's library file.
    pub calc: PathBuf,
    /// The fault plugin's library file.
    pub fault: PathBuf,
}

/// The packages built, always together: cargo unifies dependency features over the packages
/// of one build, so building them apart could leave plugin files built with other features.
/// `benches/run.sh` builds the same set.
pub const RELEASE_PACKAGES: [&str; 3] = ["harness-cli", "calc", "fault"];

/// Runs `cargo build --release` of [`RELEASE_PACKAGES`] and returns the files it leaves in
/// `target/release`.
///
/// When the build fails (a workspace member being edited, say) but every file is already
/// there, the files are used as they are, with a warning.
pub fn build_release() -> Built {
    let ok = cargo_build_release(&RELEASE_PACKAGES);
    let dir = release_dir();
    let built = Built {
        harness: dir.join(format!("harness{}", std::env::consts::EXE_SUFFIX)),
        calc: dir.join(library_file_name("calc")),
        fault: dir.join(library_file_name("fault")),
    };
    let missing: Vec<&PathBuf> =
        [&built.harness, &built.calc, &built.fault].into_iter().filter(|f| !f.is_file()).collect();
    assert!(missing.is_empty(), "cargo build --release of {RELEASE_PACKAGES:?} failed; missing: {missing:?}");
    if !ok {
        eprintln!("harness-bench: warning: cargo build --release failed; using the files already built");
    }
    built
}

/// Copies `library` into `dir` under `count` distinct file names (`libcopy_000.so`, ...).
///
/// Every copy is a new file (a new inode), but all declare one plugin name: discovery reads
/// each one's manifest and loads only the first. For N plugins that are really opened, use
/// [`numbered_plugins`].
pub fn copy_library(library: &Path, dir: &Path, count: usize) -> Vec<PathBuf> {
    std::fs::create_dir_all(dir).expect("create the plugin directory");
    (0..count)
        .map(|i| {
            let path = dir.join(library_file_name(&format!("copy_{i:03}")));
            std::fs::copy(library, &path).expect("copy the plugin library");
            path
        })
        .collect()
}

/// Builds the `numbered` fixture `count` times, as plugins `numbered-0` to `numbered-{count-1}`
/// (each with one tool), and copies each build into `dir`: N distinct plugins, each of which
/// discovery admits, opens and initialises. About 1.2 s a build after the first.
///
/// The builds go to `target/numbered`, never beside the `harness` executable, where a run
/// with the default plugin directories would offer their tools.
pub fn numbered_plugins(dir: &Path, count: usize) -> Result<Vec<PathBuf>, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let release = release_dir();
    let target = release.parent().unwrap_or(&release).join("numbered");
    let built = target.join("release").join(library_file_name("numbered"));
    (0..count)
        .map(|i| {
            let name = format!("numbered-{i}");
            let status = Command::new(env!("CARGO"))
                .args(["build", "--release", "--quiet", "-p", "numbered", "--target-dir"])
                .arg(&target)
                .env("HARNESS_NUMBERED_NAME", &name)
                .status()
                .map_err(|e| format!("cannot run cargo: {e}"))?;
            if !status.success() {
                return Err(format!("HARNESS_NUMBERED_NAME={name} cargo build --release -p numbered failed"));
            }
            let path = dir.join(library_file_name(&format!("numbered_{i:03}")));
            std::fs::copy(&built, &path).map_err(|e| format!("{} to {}: {e}", built.display(), path.display()))?;
            Ok(path)
        })
        .collect()
}

/// Median of a list of measurements (the mean of the two middle ones for an even count).
pub fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    match sorted.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => sorted[n / 2],
        n => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inputs_have_the_sizes_the_benchmarks_claim() {
        let fenced = fenced_reply_2kb();
        assert!((2048..2048 + 200).contains(&fenced.len()), "{}", fenced.len());
        let echo = serde_json::to_string(&echo_arguments(1024)).unwrap();
        assert!((1024..1024 + 80).contains(&echo.len()), "{}", echo.len());
        assert_eq!(seven_property_schema()["properties"].as_object().unwrap().len(), 7);
    }

    #[test]
    fn scripts_end_with_finish() {
        for shape in [Shape::Structured, Shape::Fenced, Shape::TextArguments] {
            let s = script(3, shape);
            assert_eq!(s.lines().count(), 3);
            assert!(s.lines().last().unwrap().contains("finish"));
        }
        let first: Value = serde_json::from_str(script(2, Shape::TextArguments).lines().next().unwrap()).unwrap();
        let arguments: Value = serde_json::from_str(first["arguments"].as_str().unwrap()).unwrap();
        assert_eq!(arguments, json!({ "expression": expression(0) }));
        assert_eq!(expression(14), "(14 + 3) * 7 - 1");
    }

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(median(&[]).is_nan());
    }
}
