//! `harness plugins list` and `harness plugins inspect`.

use std::path::Path;

use clap::Subcommand;
use harness_loader::{Discovery, LoadedPlugin, PluginLibrary, ToolState};
use serde_json::{Value, json};

use crate::Result;
use crate::config::LoadedConfig;
use crate::error::CliError;
use crate::setup::{PluginArgs, load_plugins};

/// `harness plugins ...`
#[derive(Debug, Subcommand)]
pub(crate) enum PluginsCommand {
    /// Every plugin found: path, version, ABI, tools and their state, and each skipped file with the reason.
    List {
        /// One JSON object instead of a table.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        plugins: PluginArgs,
    },
    /// One plugin in full, tool schemas included: by NAME among those found, or a library FILE.
    Inspect {
        /// A plugin name, or the path of a library file.
        target: String,
        /// JSON instead of text.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        plugins: PluginArgs,
    },
}

/// Appends a line to the output gathered for one write (see [`emit`]).
macro_rules! say {
    ($out:expr, $($arg:tt)*) => {{
        use std::fmt::Write as _;
        // Writing to a String cannot fail.
        let _ = writeln!($out, $($arg)*);
    }};
}

/// Writes the gathered output; a closed pipe (`| head`) ends quietly instead of failing.
fn emit(out: &str) -> Result<u8> {
    use std::io::Write as _;
    match std::io::stdout().lock().write_all(out.as_bytes()) {
        Ok(()) => Ok(0),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(0),
        Err(e) => Err(CliError::Failure(format!("cannot write to stdout: {e}"))),
    }
}

fn state_json(state: &ToolState) -> Value {
    serde_json::to_value(state).unwrap_or(Value::Null)
}

fn state_text(state: &ToolState) -> String {
    match state {
        ToolState::Offered => "offered".to_owned(),
        ToolState::Disabled { why } => format!("not offered: {why}"),
        ToolState::DeniedEffect => "not offered: effect class denied".to_owned(),
        ToolState::NameTaken { by } => format!("not offered: plugin {by} has a tool of that name"),
    }
}

fn plugin_json(p: &LoadedPlugin, full: bool) -> Value {
    let m = p.library.manifest();
    let tools: Vec<Value> = p
        .tools
        .iter()
        .map(|(t, s)| {
            let mut v = json!({ "name": t.name, "effects": t.effects.as_str(), "state": state_json(s) });
            if full {
                v = json!({ "name": t.name, "description": t.description, "effects": t.effects.as_str(),
                    "state": state_json(s), "parameters": t.parameters, "output": t.output, "examples": t.examples });
            }
            v
        })
        .collect();
    json!({
        "name": m.name, "version": m.version, "description": m.description, "abi_version": p.library.abi_version(),
        "path": p.library.path(), "test_only": m.test_only, "initialised": p.initialised, "tools": tools,
    })
}

fn list(out: &mut String, found: &Discovery, as_json: bool) {
    if as_json {
        let obj = json!({
            "plugins": found.plugins.iter().map(|p| plugin_json(p, false)).collect::<Vec<_>>(),
            "skipped": found.skipped,
            "warnings": found.warnings,
        });
        say!(out, "{obj}");
        return;
    }
    if found.plugins.is_empty() {
        say!(out, "no plugins found");
    }
    for p in &found.plugins {
        let m = p.library.manifest();
        let test_only = if m.test_only { " (test only)" } else { "" };
        say!(
            out,
            "{} {} (ABI {}){test_only}  {}",
            m.name,
            m.version,
            p.library.abi_version(),
            p.library.path().display()
        );
        for (t, s) in &p.tools {
            say!(out, "    {:<20} {:<8} {}", t.name, t.effects.as_str(), state_text(s));
        }
    }
    for s in &found.skipped {
        say!(out, "skipped {}: {}", s.path.display(), s.reason);
    }
    for w in &found.warnings {
        say!(out, "warning: {w}");
    }
}

fn print_library(out: &mut String, library: &PluginLibrary, tools: Option<&LoadedPlugin>, as_json: bool) {
    let m = library.manifest();
    if as_json {
        let mut v = json!({ "name": m.name, "version": m.version, "description": m.description,
            "abi_version": library.abi_version(), "path": library.path(), "test_only": m.test_only, "tools": m.tools });
        if let Some(p) = tools {
            v = plugin_json(p, true);
        }
        say!(out, "{v}");
        return;
    }
    say!(out, "{} {}: {}", m.name, m.version, m.description);
    say!(out, "  path: {}", library.path().display());
    say!(out, "  ABI:  {}{}", library.abi_version(), if m.test_only { "  (test only)" } else { "" });
    for t in &m.tools {
        let state = tools
            .and_then(|p| p.tools.iter().find(|(x, _)| x.name == t.name))
            .map(|(_, s)| format!("  [{}]", state_text(s)))
            .unwrap_or_default();
        say!(out, "\n  {} ({}){state}\n    {}", t.name, t.effects.as_str(), t.description);
        say!(
            out,
            "    parameters: {}",
            serde_json::to_string_pretty(&t.parameters).unwrap_or_default().replace('\n', "\n    ")
        );
        if let Some(o) = &t.output {
            say!(out, "    output: {}", serde_json::to_string_pretty(o).unwrap_or_default().replace('\n', "\n    "));
        }
        for e in &t.examples {
            let expect = match (&e.result, &e.error_code) {
                (Some(r), _) => r.to_string(),
                (None, Some(c)) => format!("error {c}"),
                _ => "?".to_owned(),
            };
            say!(out, "    example: {} -> {expect}", e.arguments);
        }
    }
}

/// Runs `harness plugins ...` and returns the exit code.
pub(crate) fn plugins(command: PluginsCommand) -> Result<u8> {
    match command {
        PluginsCommand::List { json, plugins } => {
            let config = LoadedConfig::load(plugins.config.as_deref())?;
            let found = load_plugins(&plugins, &config, false)?;
            let mut out = String::new();
            list(&mut out, &found, json);
            emit(&out)
        }
        PluginsCommand::Inspect { target, json, plugins } => {
            let path = Path::new(&target);
            if target.contains(std::path::MAIN_SEPARATOR) || target.contains('/') || path.is_file() {
                let canonical = path
                    .canonicalize()
                    .map_err(|e| CliError::Usage(format!("cannot read plugin file {target}: {e}")))?;
                let library = PluginLibrary::load(&canonical)
                    .map_err(|e| CliError::Failure(format!("{}: {e}", canonical.display())))?;
                let mut out = String::new();
                print_library(&mut out, &library, None, json);
                return emit(&out);
            }
            let config = LoadedConfig::load(plugins.config.as_deref())?;
            let found = load_plugins(&plugins, &config, false)?;
            let Some(p) = found.plugins.iter().find(|p| p.library.manifest().name == target) else {
                let names: Vec<&str> = found.plugins.iter().map(|p| p.library.manifest().name.as_str()).collect();
                let skipped: Vec<String> =
                    found.skipped.iter().map(|s| format!("{}: {}", s.path.display(), s.reason)).collect();
                let skipped =
                    if skipped.is_empty() { String::new() } else { format!("; skipped files: {}", skipped.join("; ")) };
                return Err(CliError::Failure(format!(
                    "no plugin named {target:?} was found; found: {}{skipped}",
                    if names.is_empty() { "none".to_owned() } else { names.join(", ") }
                )));
            };
            let mut out = String::new();
            print_library(&mut out, &p.library, Some(p), json);
            emit(&out)
        }
    }
}
