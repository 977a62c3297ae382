//! `harness config`: trust a configuration file, forget one, and show the effective settings.

mod powers;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use clap::Subcommand;
use harness_trust::{ConfigFile, TrustStore, check_permissions};
use serde_json::{Value, json};

use harness_core::printable;

use crate::Result;
use crate::config::{IMPLICIT, Origin, parse};
use crate::error::CliError;
use crate::provider::{LoopArgs, ProviderArgs};
use crate::settings::{self, ShowSettings, Source};

/// `harness config` subcommands.
#[derive(Debug, Subcommand)]
pub(crate) enum ConfigCommand {
    /// Trust a configuration file (default ./harness.toml) so that it is read without --config.
    /// Its canonical path and SHA-256 are recorded; a changed file must be trusted again.
    Trust {
        /// The file to trust.
        #[arg(default_value = IMPLICIT)]
        file: PathBuf,
    },
    /// Forget a trusted configuration file (default ./harness.toml).
    Untrust {
        /// The file to forget.
        #[arg(default_value = IMPLICIT)]
        file: PathBuf,
    },
    /// Print the effective settings and where each came from: default, user file, project file, HARNESS_* or flag.
    Show {
        /// Configuration file (TOML); `./harness.toml` is read only when trusted.
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
        /// One JSON object instead of text.
        #[arg(long)]
        json: bool,
        #[command(flatten, next_help_heading = "Settings of run, to show what they resolve to")]
        provider: Box<ProviderArgs>,
        #[command(flatten, next_help_heading = "Settings of run, to show what they resolve to")]
        limits: Box<LoopArgs>,
    },
}

/// Runs `harness config` and returns the exit code.
pub(crate) fn config(command: ConfigCommand) -> Result<u8> {
    match command {
        ConfigCommand::Trust { file } => trust(&file),
        ConfigCommand::Untrust { file } => untrust(&file),
        ConfigCommand::Show { config, json, provider, limits } => {
            ShowSettings::resolve(config.as_deref(), &provider, &limits, json).and_then(|s| show(&s))
        }
    }
}

fn store() -> Result<TrustStore> {
    TrustStore::locate().map_err(|e| CliError::Usage(e.to_string()))
}

fn trust(path: &Path) -> Result<u8> {
    let file = ConfigFile::read(path).map_err(|e| CliError::Usage(e.to_string()))?;
    check_permissions(&file.canonical).map_err(|e| CliError::Usage(e.to_string()))?;
    let config = parse(&file)?;
    let store = store()?;
    store.trust(&file).map_err(|e| CliError::Failure(e.to_string()))?;
    println!("trusted {} (sha256 {})", printable(&file.canonical.display().to_string()), file.sha256);
    if path.symlink_metadata().is_ok_and(|m| m.file_type().is_symlink()) {
        let named = printable(&path.display().to_string());
        println!("  {named} is a link to it: its paths are the target's, nothing is read beside the link");
    }
    // Say what trusting it allows, so that the operator sees what they chose.
    let base = file.canonical.parent().unwrap_or(Path::new("/"));
    for line in powers::powers(&config, base) {
        println!("  {line}");
    }
    println!("  store: {}", printable(&store.path().display().to_string()));
    Ok(0)
}

fn untrust(path: &Path) -> Result<u8> {
    let canonical =
        dunce::canonicalize(path).map_err(|e| CliError::Usage(format!("cannot resolve {}: {e}", path.display())))?;
    if store()?.forget(&canonical).map_err(|e| CliError::Failure(e.to_string()))? {
        println!("no longer trusted: {}", printable(&canonical.display().to_string()));
    } else {
        println!("was not trusted: {}", printable(&canonical.display().to_string()));
    }
    Ok(0)
}

/// One setting: its dotted key, its value, and where it came from.
struct Setting {
    key: String,
    value: Value,
    source: String,
}

/// `harness config show` with the settings resolved as a run resolves them: what is shown is
/// what would run.
fn show(shown: &ShowSettings) -> Result<u8> {
    let as_json = shown.json;
    let mut table = shown.settings.table.clone();
    hide_server_secrets(&mut table);
    let mut settings = Vec::new();
    flatten("", &toml::Value::Table(table), &shown.settings.sources, &mut settings);
    for (key, value) in settings::defaults() {
        if !settings.iter().any(|s| s.key == key || s.key.starts_with(&format!("{key}."))) {
            let value = serde_json::to_value(value).unwrap_or(Value::Null);
            settings.push(Setting { key: key.to_owned(), value, source: Source::Default.to_string() });
        }
    }
    if let Some(path) = std::env::var_os("HARNESS_PLUGIN_PATH") {
        let value = json!(path.to_string_lossy());
        settings.push(Setting { key: "plugins.dirs".into(), value, source: "env HARNESS_PLUGIN_PATH".into() });
    }
    let file = match (&shown.file, shown.origin) {
        (Some(f), Some(Origin::Explicit)) => json!({"path": f.canonical, "sha256": f.sha256, "chosen": "--config"}),
        (Some(f), _) => json!({"path": f.canonical, "sha256": f.sha256, "chosen": "trusted"}),
        (None, _) => Value::Null,
    };
    let user = shown.user.as_ref().map(|f| json!({"path": f.canonical}));
    let store = TrustStore::locate().ok().map(|s| s.path().to_path_buf());
    if as_json {
        let list: Vec<Value> =
            settings.iter().map(|s| json!({"key": s.key, "value": s.value, "source": s.source})).collect();
        println!("{}", json!({"file": file, "user_file": user, "trust_store": store, "settings": list}));
        return Ok(0);
    }
    match &shown.file {
        Some(f) => println!("# project file: {} ({})", f.canonical.display(), file["chosen"].as_str().unwrap_or("")),
        None => println!("# project file: none"),
    }
    match (&shown.user, settings::user_file_path()) {
        (Some(f), _) => println!("# user file: {}", f.canonical.display()),
        (None, Some(path)) => println!("# user file: none ({} is absent)", path.display()),
        (None, None) => println!("# user file: none"),
    }
    if let Some(store) = store {
        println!("# trust store: {}", store.display());
    }
    let width = settings.iter().map(|s| s.key.len() + s.value.to_string().len()).max().unwrap_or(0) + 3;
    for s in &settings {
        // A quoted TOML key may hold any character: shown escaped, as every value from the file.
        let line = printable(&format!("{} = {}", s.key, s.value));
        println!("{line:width$} # {}", printable(&s.source));
    }
    Ok(0)
}

/// Replaces the values of every MCP server's `headers` and `env` (where tokens go) with what
/// they read from the environment, if anything: the names are shown, never the values.
fn hide_server_secrets(table: &mut toml::Table) {
    let servers = table.get_mut("mcp").and_then(|m| m.get_mut("servers")).and_then(toml::Value::as_array_mut);
    for server in servers.into_iter().flatten().filter_map(toml::Value::as_table_mut) {
        for key in ["headers", "env"] {
            for value in server
                .get_mut(key)
                .and_then(toml::Value::as_table_mut)
                .into_iter()
                .flat_map(|t| t.iter_mut().map(|(_, v)| v))
            {
                let read = value.as_str().map(harness_mcp::header_variables).unwrap_or_default();
                let shown = read.iter().map(|v| format!("${{{v}}}")).collect::<Vec<_>>().join(" ");
                *value = toml::Value::String(if shown.is_empty() {
                    "(hidden)".to_owned()
                } else {
                    format!("(hidden; reads {shown})")
                });
            }
        }
    }
}

/// Every leaf of `value` as a dotted key (arrays are leaves), with its source.
fn flatten(prefix: &str, value: &toml::Value, sources: &BTreeMap<String, Source>, out: &mut Vec<Setting>) {
    match value {
        toml::Value::Table(table) => {
            for (k, v) in table {
                let key = if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") };
                flatten(&key, v, sources, out);
            }
        }
        leaf => {
            let value = serde_json::to_value(leaf).unwrap_or(Value::Null);
            let source = sources.get(prefix).unwrap_or(&Source::Default).to_string();
            out.push(Setting { key: prefix.to_owned(), value, source });
        }
    }
}
