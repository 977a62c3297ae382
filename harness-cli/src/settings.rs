//! The layers of the settings, resolved in one place: the defaults, then the user's file
//! (`$XDG_CONFIG_HOME/harness/config.toml`), then the project's file (a trusted
//! `./harness.toml` or `--config FILE`), then the `HARNESS_*` variables, then the flags; each
//! later layer replaces the earlier ones key by key, and every value keeps where it came from.
//!
//! The environment beats the files and the flags beat the environment, as in cargo and uv: a
//! variable is what one shell or one CI job says, a file what every run in a place says.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use harness_trust::{ConfigFile, check_permissions};

use crate::Result;
use crate::config::{Config, LoadedConfig};
use crate::error::CliError;
use crate::provider::{LoopArgs, ProviderArgs};

mod commands;
mod policy;
mod run;
mod tooling;

pub(crate) use commands::{
    BatchJob, BatchSettings, CallSettings, CheckSettings, EvalRuns, EvalSettings, ReplaySettings, RunSettings, Scored,
    ServeSettings, ShowSettings,
};
pub(crate) use policy::approval_policy;
pub(crate) use run::{ProviderKind, Settings, batch_provider, reply_format, reply_format_flag, resumed_provider};
pub(crate) use tooling::{ProjectFile, ToolSettings, default_signature_policy};

/// Where a setting's value came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Source {
    /// Nobody set it.
    Default,
    /// The user's configuration file.
    User(PathBuf),
    /// The project's configuration file.
    Project(PathBuf),
    /// A `HARNESS_*` variable.
    Env(&'static str),
    /// A flag of the command line.
    Flag(&'static str),
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Default => f.write_str("default"),
            Self::User(p) => write!(f, "user file {}", p.display()),
            Self::Project(p) => write!(f, "project file {}", p.display()),
            Self::Env(var) => write!(f, "env {var}"),
            Self::Flag(flag) => write!(f, "flag {flag}"),
        }
    }
}

/// The layers merged: one table of every key set, and where each leaf came from.
#[derive(Debug, Clone, Default)]
pub(crate) struct Layers {
    /// Every key any layer set, later layers' values in place of earlier ones'.
    pub(crate) table: toml::Table,
    /// The source of each leaf, by dotted key (arrays are leaves).
    pub(crate) sources: BTreeMap<String, Source>,
}

impl Layers {
    /// One layer alone, of no particular source.
    pub(crate) fn of(table: toml::Table) -> Self {
        Self { table, sources: BTreeMap::new() }
    }

    /// Lays `layer` over what is there, key by key: tables merge, anything else is replaced.
    pub(crate) fn lay(&mut self, layer: toml::Table, source: &Source) {
        lay_table(&mut self.table, layer, "", source, &mut self.sources);
    }

    /// The merged table as the typed configuration.
    pub(crate) fn config(&self) -> Result<Config> {
        toml::Value::Table(self.table.clone())
            .try_into()
            .map_err(|e: toml::de::Error| CliError::Usage(format!("invalid settings: {}", e.message())))
    }
}

fn lay_table(
    into: &mut toml::Table,
    layer: toml::Table,
    prefix: &str,
    source: &Source,
    sources: &mut BTreeMap<String, Source>,
) {
    for (key, value) in layer {
        let dotted = if prefix.is_empty() { key.clone() } else { format!("{prefix}.{key}") };
        match (into.get_mut(&key), value) {
            (Some(toml::Value::Table(there)), toml::Value::Table(here)) => {
                lay_table(there, here, &dotted, source, sources);
            }
            (_, value) => {
                // What the key held before, at any depth, is gone with it.
                sources.retain(|k, _| k != &dotted && !k.starts_with(&format!("{dotted}.")));
                record(&dotted, &value, source, sources);
                into.insert(key, value);
            }
        }
    }
}

fn record(dotted: &str, value: &toml::Value, source: &Source, sources: &mut BTreeMap<String, Source>) {
    match value {
        toml::Value::Table(table) => {
            for (k, v) in table {
                record(&format!("{dotted}.{k}"), v, source, sources);
            }
        }
        _ => {
            sources.insert(dotted.to_owned(), source.clone());
        }
    }
}

/// The user's configuration file: `$XDG_CONFIG_HOME/harness/config.toml`, else
/// `~/.config/harness/config.toml`; on Windows `%APPDATA%\harness\config.toml` unless
/// `XDG_CONFIG_HOME` is set. `None` when no base directory is known.
pub(crate) fn user_file_path() -> Option<PathBuf> {
    let base = if cfg!(windows) {
        let var = |name| std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from);
        var("XDG_CONFIG_HOME").filter(|p| p.is_absolute()).or_else(|| var("APPDATA"))
    } else {
        harness_trust::user_dir("XDG_CONFIG_HOME", ".config")
    };
    base.map(|b| b.join("harness").join("config.toml"))
}

/// The user's file when there is one: the user's own, so no trust is asked, but a file someone
/// else could change is refused as any other configuration file is.
pub(crate) fn user_file() -> Result<Option<(ConfigFile, toml::Table)>> {
    let Some(path) = user_file_path().filter(|p| p.exists()) else { return Ok(None) };
    let file = ConfigFile::read(&path).map_err(|e| CliError::Usage(e.to_string()))?;
    check_permissions(&file.canonical).map_err(|e| CliError::Usage(e.to_string()))?;
    let table = file_table(&file)?;
    Ok(Some((file, table)))
}

/// A configuration file checked whole (every key known, every value of its type, every word
/// one there is) and returned as a table, its relative paths made relative to its directory.
///
/// That is the directory of the file itself, links resolved: a `./harness.toml` that is a link
/// to a trusted file is that file, with that file's plugins, script and MCP servers, never ones
/// from the directory the link sits in.
pub(crate) fn file_table(file: &ConfigFile) -> Result<toml::Table> {
    let path = &file.named;
    let config: Config = toml::from_str(&file.text).map_err(|e| CliError::Usage(file_error(file, &e)))?;
    if config.api_key.is_some() {
        return Err(CliError::Usage(format!(
            "config file {} sets api_key: API keys are read from the environment only. Remove it, export the key, and name its variable with api_key_env (for example api_key_env = \"OPENROUTER_API_KEY\")",
            path.display()
        )));
    }
    let mut table: toml::Table = toml::from_str(&file.text).map_err(|e| CliError::Usage(file_error(file, &e)))?;
    check_words(&table, &path.display().to_string()).map_err(CliError::Usage)?;
    let base = file.canonical.parent().map(Path::to_path_buf).unwrap_or_default();
    resolve_paths(&mut table, &base);
    Ok(table)
}

/// The message of a file that does not parse: for a mistyped key, the nearest valid one.
fn file_error(file: &ConfigFile, e: &toml::de::Error) -> String {
    let path = file.named.display();
    let line = e.span().and_then(|s| file.text.get(..s.start)).map(|before| before.matches('\n').count() + 1);
    let at = line.map(|l| format!(" (line {l})")).unwrap_or_default();
    let message = e.message();
    if let Some(rest) = message.strip_prefix("unknown field `")
        && let Some((field, expected)) = rest.split_once('`')
    {
        // `api_key` is a field only to be refused: never suggested.
        let valid: Vec<&str> = expected.split('`').skip(1).step_by(2).filter(|k| *k != "api_key").collect();
        return match nearest(field, &valid) {
            Some(near) => format!("unknown field {field} in {path}{at}: did you mean {near}?"),
            None => format!("unknown field {field} in {path}{at}; the keys there are: {}", valid.join(", ")),
        };
    }
    // Any other mistake is shown as toml shows it: the line, a caret under the value, and why.
    format!("invalid config file {path}: {}", e.to_string().trim_end())
}

/// Makes the file's relative paths (script, plugin directories, a plugin's root, an MCP
/// server's command given as a path) relative to `base`.
fn resolve_paths(table: &mut toml::Table, base: &Path) {
    let resolve = |v: &mut toml::Value| {
        if let toml::Value::String(p) = v
            && Path::new(p.as_str()).is_relative()
        {
            *p = base.join(&*p).to_string_lossy().into_owned();
        }
    };
    table.get_mut("script").map(resolve);
    if let Some(toml::Value::Table(plugins)) = table.get_mut("plugins") {
        for (key, value) in plugins.iter_mut() {
            match value {
                toml::Value::Array(dirs) if key == "dirs" => dirs.iter_mut().for_each(resolve),
                toml::Value::Table(section) => {
                    section.get_mut("root").map(resolve);
                }
                _ => {}
            }
        }
    }
    let servers = table.get_mut("mcp").and_then(|m| m.get_mut("servers")).and_then(toml::Value::as_array_mut);
    for server in servers.into_iter().flatten().filter_map(toml::Value::as_table_mut) {
        if let Some(command) = server.get_mut("command").filter(|c| c.as_str().is_some_and(|c| c.contains('/'))) {
            resolve(command);
        }
    }
}

/// What kind of value a `HARNESS_*` variable holds.
#[derive(Debug, Clone, Copy)]
enum Kind {
    /// Any text.
    Text,
    /// One word of a list (the key names the list: see [`words`]).
    Word,
    /// A whole number that fits 32 bits.
    Count,
    /// A whole number that fits 64 bits.
    Tokens,
    /// A positive number of seconds.
    Seconds,
}

/// The settings the environment may give: the scalar run settings, one variable per key of the
/// file, named `HARNESS_` and the key in capitals.
const ENV: &[(&str, &str, Kind)] = &[
    ("HARNESS_PROVIDER", "provider", Kind::Word),
    ("HARNESS_MODEL", "model", Kind::Text),
    ("HARNESS_BASE_URL", "base_url", Kind::Text),
    ("HARNESS_API_KEY_ENV", "api_key_env", Kind::Text),
    ("HARNESS_TOOL_CHOICE", "tool_choice", Kind::Text),
    ("HARNESS_ROUTER_MODE", "router_mode", Kind::Word),
    ("HARNESS_REPLY_FORMAT", "reply_format", Kind::Word),
    ("HARNESS_TIMEOUT", "timeout", Kind::Seconds),
    ("HARNESS_CONNECT_TIMEOUT", "connect_timeout", Kind::Seconds),
    ("HARNESS_RETRIES", "retries", Kind::Count),
    ("HARNESS_MAX_REPLY_TOKENS", "max_reply_tokens", Kind::Count),
    ("HARNESS_CONTEXT_TOKENS", "context_tokens", Kind::Tokens),
    ("HARNESS_MAX_STEPS", "max_steps", Kind::Count),
    ("HARNESS_MAX_REPEATS", "max_repeats", Kind::Count),
    ("HARNESS_MAX_TRUNCATED", "max_truncated", Kind::Count),
    ("HARNESS_MAX_SECONDS", "max_seconds", Kind::Seconds),
    ("HARNESS_TOOL_TIMEOUT", "tool_timeout", Kind::Seconds),
];

/// The `HARNESS_*` variables the harness, its tests and its tools read for other things: never
/// taken for a mistyped setting.
const OTHER_VARIABLES: &[&str] = &[
    "HARNESS_PLUGIN_PATH",
    "HARNESS_PLUGIN_CACHE",
    "HARNESS_CACHE_DIR",
    "HARNESS_BIN",
    "HARNESS_SLURM",
    "HARNESS_PHOENIX",
    "HARNESS_NUMBERED_NAME",
    "HARNESS_E2E_KEEP",
];

/// Prefixes of the variables of tests and benchmarks (`HARNESS_TEST_SECRET`, `HARNESS_MCP_PYTHON`).
const OTHER_PREFIXES: &[&str] = &["HARNESS_TEST_", "HARNESS_MCP_", "HARNESS_LLAMA_", "HARNESS_BENCH_"];

/// The keys whose values are one word of a list: the key, what a word is, and the words.
fn words() -> Vec<(&'static str, &'static str, Vec<&'static str>)> {
    let providers = ["offline", "scripted"].into_iter().chain(harness_providers::Preset::ALL.map(|p| p.name()));
    let decisions = || vec!["allow", "ask", "deny"];
    let modes = || vec!["in-process", "process"];
    vec![
        ("provider", "provider", providers.collect()),
        ("router_mode", "router mode", vec!["auto", "native", "constrained", "prompt"]),
        ("reply_format", "reply format", harness_core::ReplyFormat::ALL.iter().map(|f| f.as_str()).collect()),
        ("isolation", "isolation mode", modes()),
        ("isolation.mode", "isolation mode", modes()),
        ("isolation.require", "enforcement level", vec!["full", "best-effort"]),
        ("policy.pure", "decision", decisions()),
        ("policy.reads", "decision", decisions()),
        ("policy.writes", "decision", decisions()),
        ("policy.network", "decision", decisions()),
    ]
}

/// What a word of `key` is and the words there are; a `[policy.tools]` value is a decision.
fn words_of(key: &str) -> (&'static str, Vec<&'static str>) {
    if key.starts_with("policy.tools.") {
        return ("decision", vec!["allow", "ask", "deny"]);
    }
    words().into_iter().find(|(k, _, _)| *k == key).map_or(("value", Vec::new()), |(_, what, valid)| (what, valid))
}

/// Every key of [`words`] that `table` (of the file `path`) sets to a string is one of its
/// words; `policy.tools`' values are decisions.
fn check_words(table: &toml::Table, path: &str) -> std::result::Result<(), String> {
    let at = |dotted: &str| {
        let mut parts = dotted.split('.');
        let first = table.get(parts.next()?);
        parts.try_fold(first?, |v, part| v.get(part))
    };
    let tools = at("policy.tools").and_then(toml::Value::as_table).into_iter().flatten();
    let tools = tools.map(|(tool, v)| (format!("policy.tools.{tool:?}"), v, "decision", vec!["allow", "ask", "deny"]));
    let keyed = words().into_iter().filter_map(|(key, what, valid)| Some((key.to_owned(), at(key)?, what, valid)));
    for (key, value, what, valid) in keyed.chain(tools) {
        if let Some(word) = value.as_str() {
            check_word(what, word, &valid).map_err(|why| format!("{key} = {word:?} in {path}: {why}"))?;
        }
    }
    Ok(())
}

/// `value` when it is one of `valid`, else why not: the nearest word, and all of them.
fn check_word(what: &str, value: &str, valid: &[&str]) -> std::result::Result<(), String> {
    if valid.contains(&value) {
        return Ok(());
    }
    let all = valid.join(", ");
    Err(match nearest(value, valid) {
        Some(near) => format!("no such {what}; did you mean {near}? Use one of: {all}"),
        None => format!("no such {what}; use one of: {all}"),
    })
}

/// `text`, the value of `key` that `source` gave, as `parse` types it: the one place a word
/// of the settings becomes its type. Else an error naming the key as its layer spells it (the
/// flag, the variable, or the key and its file), the nearest valid word, and all of them.
pub(crate) fn word<T>(
    key: &str,
    text: &str,
    source: Option<&Source>,
    parse: impl FnOnce(&str) -> Option<T>,
) -> Result<T> {
    if let Some(value) = parse(text) {
        return Ok(value);
    }
    let (what, valid) = words_of(key);
    // A word of the list that `parse` refuses is a list out of step with the type: still named.
    let why = check_word(what, text, &valid).err().unwrap_or_else(|| format!("no such {what}"));
    Err(CliError::Usage(match source {
        Some(Source::Flag(flag)) => format!("{flag} {text:?}: {why}"),
        Some(Source::Env(var)) => format!("{var}={text:?}: {why}; fix or unset the variable"),
        Some(Source::User(path) | Source::Project(path)) => format!("{key} = {text:?} in {}: {why}", path.display()),
        Some(Source::Default) | None => format!("{key} = {text:?}: {why}"),
    }))
}

/// The `HARNESS_*` settings `env` gives, checked, as a layer with each value's variable.
pub(crate) fn env_layer(env: impl Fn(&str) -> Option<String>) -> Result<Vec<(toml::Table, Source)>> {
    let mut layer = Vec::new();
    for &(var, key, kind) in ENV {
        let Some(text) = env(var).filter(|v| !v.trim().is_empty()) else { continue };
        let value = env_value(key, kind, text.trim())
            .map_err(|why| CliError::Usage(format!("{var}={text:?}: {why}; fix or unset the variable")))?;
        layer.push((toml::Table::from_iter([(key.to_owned(), value)]), Source::Env(var)));
    }
    Ok(layer)
}

fn env_value(key: &str, kind: Kind, text: &str) -> std::result::Result<toml::Value, String> {
    let whole = |max: u64| {
        text.parse::<u64>()
            .ok()
            .filter(|n| *n <= max)
            .and_then(|n| i64::try_from(n).ok())
            .map(toml::Value::Integer)
            .ok_or_else(|| format!("give a whole number from 0 to {max}"))
    };
    match kind {
        Kind::Text => Ok(toml::Value::String(text.to_owned())),
        Kind::Word => {
            let (what, valid) = words_of(key);
            check_word(what, text, &valid).map(|()| toml::Value::String(text.to_owned()))
        }
        Kind::Count => whole(u64::from(u32::MAX)),
        Kind::Tokens => whole(i64::MAX as u64),
        Kind::Seconds => text
            .parse::<f64>()
            .ok()
            .filter(|s| s.is_finite() && *s > 0.0)
            .map(toml::Value::Float)
            .ok_or_else(|| "give a positive number of seconds".to_owned()),
    }
}

/// The settings the flags of `run` give, as the last layer, each value with its flag; `--script`
/// without `--provider` names the scripted provider, as it does for a run.
pub(crate) fn flag_layer(p: &ProviderArgs, l: &LoopArgs) -> Vec<(toml::Table, Source)> {
    let text = |v: &Option<String>| v.clone().map(toml::Value::String);
    let count = |v: Option<u32>| v.map(|n| toml::Value::Integer(n.into()));
    let secs = |v: Option<f64>| v.map(toml::Value::Float);
    let scripted = p.script.as_ref().filter(|_| p.provider.is_none()).map(|_| toml::Value::String("scripted".into()));
    let given = [
        ("provider", "--provider", text(&p.provider)),
        ("provider", "--script", scripted),
        ("model", "--model", text(&p.model)),
        ("base_url", "--base-url", text(&p.base_url)),
        ("api_key_env", "--api-key-env", text(&p.api_key_env)),
        ("tool_choice", "--tool-choice", text(&p.tool_choice)),
        ("router_mode", "--router-mode", text(&p.router_mode)),
        ("reply_format", "--reply-format", text(&l.reply_format)),
        ("timeout", "--timeout", secs(p.timeout)),
        ("connect_timeout", "--connect-timeout", secs(p.connect_timeout)),
        ("retries", "--retries", count(p.retries)),
        ("max_reply_tokens", "--max-reply-tokens", count(p.max_reply_tokens)),
        (
            "context_tokens",
            "--context-tokens",
            p.context_tokens.and_then(|n| i64::try_from(n).ok()).map(toml::Value::Integer),
        ),
        ("script", "--script", p.script.as_ref().map(|s| toml::Value::String(s.display().to_string()))),
        ("max_steps", "--max-steps", count(l.max_steps)),
        ("max_repeats", "--max-repeats", count(l.max_repeats)),
        ("max_truncated", "--max-truncated", count(l.max_truncated)),
        ("max_seconds", "--max-seconds", secs(l.max_seconds)),
    ];
    given
        .into_iter()
        .filter_map(|(key, flag, value)| Some((toml::Table::from_iter([(key.to_owned(), value?)]), Source::Flag(flag))))
        .collect()
}

/// The tool timeout, resolved once for plugins and MCP servers alike: `--tool-timeout`, else
/// the layers' `tool_timeout`; `None` when neither sets one. A value outside (0, 86400]
/// seconds is a usage error naming the flag, or the key and the layer that gave it.
pub(crate) fn tool_timeout(flag: Option<f64>, config: &LoadedConfig) -> Result<Option<std::time::Duration>> {
    match flag.or(config.config.tool_timeout) {
        None => Ok(None),
        Some(secs) if secs.is_finite() && secs > 0.0 && secs <= 86_400.0 => {
            Ok(Some(std::time::Duration::from_secs_f64(secs)))
        }
        Some(secs) => {
            let named = match config.layers.sources.get("tool_timeout").filter(|_| flag.is_none()) {
                Some(source) => format!("tool_timeout ({source})"),
                None => "--tool-timeout".to_owned(),
            };
            Err(CliError::Usage(format!("{named} {secs}: give a number of seconds between 0 and 86400")))
        }
    }
}

/// Seconds of a setting named `named` (its flag, or its key and source), as a duration.
pub(crate) fn seconds(named: &str, value: f64) -> Result<std::time::Duration> {
    std::time::Duration::try_from_secs_f64(value)
        .ok()
        .filter(|d| !d.is_zero() && value <= 1e6)
        .ok_or_else(|| CliError::Usage(format!("{named} {value}: give a positive number of seconds")))
}

/// What a setting nobody gives is: the libraries' own defaults, for `config show`.
pub(crate) fn defaults() -> Vec<(&'static str, toml::Value)> {
    let run = harness_core::RunOptions::default();
    let http = harness_providers::HttpSettings::default();
    let text = |s: &str| toml::Value::String(s.to_owned());
    let count = |n: u32| toml::Value::Integer(n.into());
    vec![
        ("provider", text("offline")),
        ("router_mode", text("auto")),
        ("tool_choice", text("required")),
        ("reply_format", text(run.reply_format.as_str())),
        ("timeout", toml::Value::Float(http.timeout.as_secs_f64())),
        ("connect_timeout", toml::Value::Float(http.connect_timeout.as_secs_f64())),
        ("retries", count(http.retries)),
        ("max_reply_tokens", count(harness_providers::DEFAULT_MAX_REPLY_TOKENS)),
        ("max_steps", count(run.max_steps)),
        ("max_repeats", count(run.max_repeats)),
        ("max_truncated", count(run.max_truncated)),
        ("isolation", text("by effects: process unless pure")),
        ("policy.pure", text("allow")),
        ("policy.reads", text("allow")),
        ("policy.writes", text("ask")),
        ("policy.network", text("ask")),
    ]
}

/// A warning for each variable among `names` that looks like a mistyped setting
/// (`HARNESS_PROVDER`): the nearest one there is.
pub(crate) fn unknown_env_warnings(names: impl IntoIterator<Item = String>) -> Vec<String> {
    let known: Vec<&str> = ENV.iter().map(|(var, _, _)| *var).collect();
    names
        .into_iter()
        .filter(|n| n.starts_with("HARNESS_") && !known.contains(&n.as_str()))
        .filter(|n| !OTHER_VARIABLES.contains(&n.as_str()) && !OTHER_PREFIXES.iter().any(|p| n.starts_with(p)))
        .filter_map(|n| {
            nearest(&n, &known).map(|near| format!("{n} is no setting of the harness; did you mean {near}?"))
        })
        .collect()
}

/// The word of `valid` nearest `word`, when it is near enough to be a slip of the keyboard:
/// at most two edits, and at most a third of the word.
pub(crate) fn nearest<'a>(word: &str, valid: &[&'a str]) -> Option<&'a str> {
    let limit = 2.min(word.chars().count().div_ceil(3)).max(1);
    valid.iter().map(|v| (edits(word, v), *v)).filter(|(d, _)| *d <= limit).min_by_key(|(d, _)| *d).map(|(_, v)| v)
}

/// Levenshtein distance, by characters.
fn edits(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (above + 1).min(row[j] + 1).min(diagonal + usize::from(ca != *cb));
            diagonal = above;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slip_finds_its_word_and_a_stranger_finds_none() {
        assert_eq!(nearest("max_step", &["max_steps", "max_repeats"]), Some("max_steps"));
        assert_eq!(nearest("opnai", &["openai", "ollama"]), Some("openai"));
        assert_eq!(nearest("gpt", &["openai", "ollama"]), None);
    }

    #[test]
    fn later_layers_replace_earlier_ones_key_by_key() {
        let mut layers = Layers::default();
        let user = PathBuf::from("/u");
        layers.lay(
            toml::from_str("model = \"a\"\nmax_steps = 3\n[limits]\nreply_bytes = 1\n").unwrap(),
            &Source::User(user.clone()),
        );
        layers
            .lay(toml::from_str("model = \"b\"\n[limits]\nresult_bytes = 2\n").unwrap(), &Source::Project("/p".into()));
        assert_eq!(layers.table["model"].as_str(), Some("b"));
        assert_eq!(layers.sources["max_steps"], Source::User(user.clone()));
        assert_eq!(layers.sources["limits.reply_bytes"], Source::User(user));
        assert_eq!(layers.sources["limits.result_bytes"], Source::Project("/p".into()));
        let config = layers.config().unwrap();
        assert_eq!((config.limits.reply_bytes, config.limits.result_bytes), (Some(1), Some(2)));
    }

    #[test]
    fn a_bad_word_in_a_file_names_its_key_and_the_nearest_word() {
        let table = toml::from_str("[isolation]\nmode = \"proces\"\n").unwrap();
        let e = check_words(&table, "h.toml").unwrap_err();
        assert!(
            e.starts_with("isolation.mode = \"proces\" in h.toml: no such isolation mode; did you mean process?"),
            "{e}"
        );
        let table = toml::from_str("[policy.tools]\n\"files.write_file\" = \"alow\"\n").unwrap();
        let e = check_words(&table, "h.toml").unwrap_err();
        assert!(
            e.contains("policy.tools.\"files.write_file\" = \"alow\" in h.toml") && e.contains("did you mean allow?"),
            "{e}"
        );
        assert!(
            check_words(
                &toml::from_str("isolation = \"in-process\"\n[policy]\nwrites = \"deny\"\n").unwrap(),
                "h.toml"
            )
            .is_ok()
        );
    }

    #[test]
    fn the_environment_is_checked_and_names_its_variable() {
        let env = |pairs: &'static [(&str, &str)]| {
            move |k: &str| pairs.iter().find(|(n, _)| *n == k).map(|(_, v)| (*v).to_owned())
        };
        let layer = env_layer(env(&[("HARNESS_MAX_STEPS", "4"), ("HARNESS_TIMEOUT", "2.5")])).unwrap();
        assert_eq!(layer.len(), 2);
        let e = env_layer(env(&[("HARNESS_ROUTER_MODE", "prompts")])).unwrap_err().to_string();
        assert!(e.contains("HARNESS_ROUTER_MODE=\"prompts\"") && e.contains("did you mean prompt?"), "{e}");
        let e = env_layer(env(&[("HARNESS_MAX_STEPS", "-1")])).unwrap_err().to_string();
        assert!(e.contains("HARNESS_MAX_STEPS") && e.contains("whole number"), "{e}");
    }

    #[test]
    fn only_a_near_miss_of_a_setting_is_warned_about() {
        let names =
            ["HARNESS_PROVDER", "HARNESS_PLUGIN_PATH", "HARNESS_TEST_SECRET", "HARNESS_PHOENIX", "HARNESS_MODEL"];
        let warned = unknown_env_warnings(names.map(String::from));
        assert_eq!(warned.len(), 1, "{warned:?}");
        assert!(warned[0].contains("did you mean HARNESS_PROVIDER?"), "{warned:?}");
    }
}
