//! The rule of docs/architecture.md, checked: settings are resolved once, in settings.rs, from
//! the clap structs and the raw configuration; nothing after that reads either. This test
//! reads the CLI's own sources and lists every function outside settings.rs and main.rs whose
//! parameters name a clap argument struct or the raw configuration (`Config`, `LoadedConfig`).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The functions that take a clap struct or the raw configuration, as `file::function`, each
/// with why. The list only shrinks: a new function that takes one fails the test, and so does
/// an entry here that no longer does (take it off).
const KNOWN_EXCEPTIONS: &[&str] = &[
    // `harness config trust` shows what one file grants before the operator trusts it: the
    // file as written, not the settings resolved from every layer, is what is being judged.
    "config_cmd/powers.rs::powers",
];

/// The functions that take a subcommand enum (clap's `Subcommand`), as `file::function`: each
/// only routes its subcommands, handing their flags to settings/ (or, for a command with no
/// setting of any layer, as plain values). A new one fails the test, and so does a stale one.
const DISPATCHERS: &[&str] = &[
    "config_cmd.rs::config",
    "mcp.rs::mcp",
    "plugins.rs::plugins",
    "reply.rs::reply",
    "tools_cmd.rs::tools",
    "trace_cmd.rs::trace",
];

/// The files allowed to take them: where clap parses, and where the layers are resolved
/// (settings.rs and its modules under settings/).
const RESOLVERS: [&str; 2] = ["main.rs", "settings.rs"];

/// The raw configuration's types, beside the clap structs found by their derive.
const RAW_CONFIG: [&str; 2] = ["Config", "LoadedConfig"];

/// Every `.rs` file under `dir`, as a path relative to `root` with `/` separators.
fn sources(root: &Path, dir: &Path, out: &mut Vec<(String, String)>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            sources(root, &path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let name = path.strip_prefix(root).unwrap_or(&path).to_string_lossy().replace('\\', "/");
            out.push((name, std::fs::read_to_string(&path).unwrap_or_default()));
        }
    }
}

/// The identifiers of `text`.
fn words(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !(c.is_alphanumeric() || c == '_')).filter(|w| !w.is_empty())
}

/// The structs and enums deriving one of `derives` (clap's `Args`, `Parser`, `Subcommand`):
/// the word after the derive.
fn clap_types(text: &str, derives: &[&str]) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for (at, _) in text.match_indices("#[derive(") {
        let derive = &text[at..];
        let Some(close) = derive.find(")]") else { continue };
        if !words(&derive[..close]).any(|w| derives.contains(&w)) {
            continue;
        }
        let mut after = words(&derive[close..]).skip_while(|w| *w != "struct" && *w != "enum");
        if let Some(name) = after.nth(1) {
            found.insert(name.to_owned());
        }
    }
    found
}

/// The functions of `text` (name, parameter list), the parameters up to their closing parenthesis.
fn functions(text: &str) -> Vec<(&str, &str)> {
    let mut found = Vec::new();
    for (at, _) in text.match_indices("fn ") {
        if at > 0 && text[..at].ends_with(|c: char| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let rest = &text[at + 3..];
        let name_end = rest.find(|c: char| !(c.is_alphanumeric() || c == '_')).unwrap_or(rest.len());
        let Some(open) = rest.find('(') else { continue };
        let mut depth = 0;
        let close = rest[open..].char_indices().find_map(|(i, c)| {
            depth += match c {
                '(' => 1,
                ')' => -1,
                _ => 0,
            };
            (depth == 0).then_some(open + i)
        });
        if let Some(close) = close.filter(|_| name_end > 0) {
            found.push((&rest[..name_end], &rest[open + 1..close]));
        }
    }
    found
}

#[test]
fn only_settings_and_main_take_the_clap_structs_or_the_raw_configuration() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&root, &root, &mut files);
    assert!(files.len() > 20, "the CLI's sources were not found under {}", root.display());
    let mut taken: BTreeSet<String> = RAW_CONFIG.iter().map(|s| (*s).to_owned()).collect();
    let resolver = |n: &str| RESOLVERS.contains(&n) || n.starts_with("settings/");
    let mut subcommands = BTreeSet::new();
    for (name, text) in &files {
        taken.extend(clap_types(text, &["Args", "Parser"]));
        // main.rs's own (`Command`) are private to it, and share a name with `clap::Command`.
        if !resolver(name) {
            subcommands.extend(clap_types(text, &["Subcommand"]));
        }
    }
    assert!(taken.contains("RunArgs") && taken.contains("PluginArgs"), "the clap structs were not found: {taken:?}");
    let mut offenders = BTreeSet::new();
    let mut dispatchers = BTreeSet::new();
    for (name, text) in files.iter().filter(|(n, _)| !resolver(n)) {
        // A file's tests build what they test from whatever they like.
        let text = text.split("#[cfg(test)]").next().unwrap_or_default();
        for (function, params) in functions(text) {
            if words(params).any(|w| taken.contains(w)) {
                offenders.insert(format!("{name}::{function}"));
            }
            if words(params).any(|w| subcommands.contains(w)) {
                dispatchers.insert(format!("{name}::{function}"));
            }
        }
    }
    let known: BTreeSet<String> = KNOWN_EXCEPTIONS.iter().map(|s| (*s).to_owned()).collect();
    let new: Vec<_> = offenders.difference(&known).collect();
    assert!(
        new.is_empty(),
        "these functions take a clap struct or the raw configuration: take the resolved settings (settings.rs) instead: {new:?}"
    );
    let stale: Vec<_> = known.difference(&offenders).collect();
    assert!(stale.is_empty(), "these no longer take them: take them off KNOWN_EXCEPTIONS in layering.rs: {stale:?}");
    let routing: BTreeSet<String> = DISPATCHERS.iter().map(|s| (*s).to_owned()).collect();
    let new: Vec<_> = dispatchers.difference(&routing).collect();
    assert!(
        new.is_empty(),
        "these functions take a subcommand enum: route in main.rs, or list them in DISPATCHERS if they only route: {new:?}"
    );
    let stale: Vec<_> = routing.difference(&dispatchers).collect();
    assert!(stale.is_empty(), "these no longer take a subcommand enum: take them off DISPATCHERS: {stale:?}");
}
