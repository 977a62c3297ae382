//! The settings of plugins and tools, resolved once from the plugin flags and the layers:
//! where plugins come from, which are offered, how they run, whose signatures count, and the
//! MCP servers. Discovery and the MCP sources are built from this, never from the flags again.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use harness_abi::manifest::Effects;
use harness_core::RunOptions;
use harness_loader::isolation::Isolation;
use harness_loader::{PluginSettings, Publisher, SignaturePolicy};
use harness_mcp::McpServerConfig;

use super::{Source, word};
use crate::Result;
use crate::config::{IsolationConfig, LoadedConfig};
use crate::discovery::{PluginArgs, user_plugin_dir};
use crate::error::CliError;

/// The project file in use, as the working objects need it: a name for messages, and what lies
/// beside it.
#[derive(Debug, Clone)]
pub(crate) struct ProjectFile {
    /// The file as named, for messages; `config` when no file is in use.
    pub(crate) name: String,
    /// The file as named, when one is in use.
    pub(crate) named: Option<PathBuf>,
    /// The file with its links resolved, when one is in use.
    pub(crate) canonical: Option<PathBuf>,
    /// Its directory, links resolved: where its MCP servers start.
    pub(crate) base_dir: Option<PathBuf>,
    /// Where `harness.lock` lives: beside the file, else in the working directory.
    pub(crate) lock_path: PathBuf,
}

impl ProjectFile {
    /// The project file of the loaded layers.
    pub(crate) fn of(config: &LoadedConfig) -> Self {
        Self {
            name: config.path.as_ref().map_or_else(|| "config".to_owned(), |p| p.display().to_string()),
            named: config.path.clone(),
            canonical: config.file.as_ref().map(|f| f.canonical.clone()),
            base_dir: config.base_dir().map(Path::to_path_buf),
            lock_path: config.lock_path(),
        }
    }
}

/// Plugins and tools, flags laid over the layers once: each choice typed, each list merged.
#[derive(Debug, Clone)]
pub(crate) struct ToolSettings {
    /// The project file these came from.
    pub(crate) project: ProjectFile,
    /// The plugin search directories in priority order.
    pub(crate) dirs: Vec<PathBuf>,
    /// Plugins or tools to offer alone: the flags', then the file's.
    pub(crate) enable: Vec<String>,
    /// Plugins or tools never offered: the flags', then the file's.
    pub(crate) disable: Vec<String>,
    /// Effect classes never offered: the flags', then the file's.
    pub(crate) deny_effects: Vec<Effects>,
    /// Each `[plugins.NAME]` section as passed to the plugin's `init`.
    pub(crate) configs: BTreeMap<String, serde_json::Value>,
    /// What the harness reads of each section (isolation, timeout, paths).
    pub(crate) sections: BTreeMap<String, PluginSettings>,
    /// `--isolation`: every plugin's mode for this command.
    pub(crate) isolation: Option<Isolation>,
    /// The file's default `isolation` mode.
    pub(crate) config_isolation: Option<Isolation>,
    /// Every tool's timeout, plugins' and MCP servers' alike.
    pub(crate) tool_timeout: Option<Duration>,
    /// Offer only plugins whose effects the kernel enforces in full.
    pub(crate) require_full_enforcement: bool,
    /// Load plugin files others could write (with a warning).
    pub(crate) allow_insecure: bool,
    /// `[limits] result_bytes`, when set.
    pub(crate) result_bytes: Option<usize>,
    /// The largest arguments of one call (`[limits] arguments_bytes`, else the loop's default),
    /// for the commands that call tools without the loop.
    pub(crate) max_arguments_bytes: usize,
    /// Whose signatures are trusted, and whether one is required.
    pub(crate) signatures: SignaturePolicy,
    /// The configured MCP servers, a command given as a relative path made the file's.
    pub(crate) mcp_servers: Vec<McpServerConfig>,
}

impl ToolSettings {
    /// Loads the layers the plugin flags name (`--config`), and resolves the plugin settings.
    pub(crate) fn load(args: &PluginArgs) -> Result<Self> {
        Self::resolve(args, &LoadedConfig::load(args.config.as_deref())?)
    }

    /// Lays the plugin flags over the layers and types them; a bad value is a usage error
    /// naming its flag or its file and key.
    pub(crate) fn resolve(args: &PluginArgs, config: &LoadedConfig) -> Result<Self> {
        let project = ProjectFile::of(config);
        let (file, name) = (&config.config, &project.name);
        let plugins = &file.plugins;
        let mut deny_effects = effects(&args.deny_effects, "--deny-effects")?;
        deny_effects.extend(effects(&plugins.deny_effects, &format!("{name}: plugins.deny_effects"))?);
        let mut configs = BTreeMap::new();
        let mut sections = BTreeMap::new();
        for (plugin, table) in &plugins.sections {
            let value = serde_json::to_value(table).map_err(|e| {
                CliError::Usage(format!("{name}: [plugins.{plugin}] cannot be passed to the plugin: {e}"))
            })?;
            let (settings, value) =
                PluginSettings::from_section(plugin, &value).map_err(|e| CliError::Usage(format!("{name}: {e}")))?;
            configs.insert(plugin.clone(), value);
            sections.insert(plugin.clone(), settings);
        }
        let isolation = args.isolation.as_deref().map(isolation_flag).transpose()?;
        let config_isolation = isolation_of(config)?;
        let tool_timeout = super::tool_timeout(args.tool_timeout, config)?;
        let require = file.isolation.as_ref().and_then(|i| i.require());
        let sources = &config.layers.sources;
        let required =
            require.map(|r| word("isolation.require", r, sources.get("isolation.require"), full)).transpose()?;
        let require_full_enforcement = args.require_enforcement || required.unwrap_or(false);
        let dirs = plugin_dirs(args, config)?;
        Ok(Self {
            dirs,
            enable: args.enable.iter().chain(&plugins.enable).cloned().collect(),
            disable: args.disable.iter().chain(&plugins.disable).cloned().collect(),
            deny_effects,
            configs,
            sections,
            isolation,
            config_isolation,
            tool_timeout,
            require_full_enforcement,
            allow_insecure: args.allow_insecure_plugins,
            result_bytes: file.limits.result_bytes,
            max_arguments_bytes: file.limits.arguments_bytes.unwrap_or(RunOptions::default().max_arguments_bytes),
            signatures: signature_policy(config)?,
            // Their relative commands were made the file's when the file was read.
            mcp_servers: file.mcp.servers.clone(),
            project,
        })
    }
}

fn effects(names: &[String], source: &str) -> Result<Vec<Effects>> {
    names
        .iter()
        .map(|n| {
            Effects::parse(n).ok_or_else(|| {
                CliError::Usage(format!("{source}: unknown effect class {n:?}; use pure, reads, writes or network"))
            })
        })
        .collect()
}

/// `--isolation`, as every command that loads plugins takes it.
pub(crate) fn isolation_flag(mode: &str) -> Result<Isolation> {
    word("isolation", mode, Some(&Source::Flag("--isolation")), Isolation::parse)
}

/// The layers' default isolation mode (`isolation`, or `[isolation] mode`), when one is set.
fn isolation_of(config: &LoadedConfig) -> Result<Option<Isolation>> {
    let key = match &config.config.isolation {
        None => return Ok(None),
        Some(IsolationConfig::Mode(_)) => "isolation",
        Some(IsolationConfig::Table(_)) => "isolation.mode",
    };
    let mode = config.config.isolation.as_ref().and_then(IsolationConfig::mode);
    mode.map(|mode| word(key, mode, config.layers.sources.get(key), Isolation::parse)).transpose()
}

/// `[isolation] require`: whether only plugins the kernel confines in full are offered.
fn full(level: &str) -> Option<bool> {
    match level {
        "full" => Some(true),
        "best-effort" => Some(false),
        _ => None,
    }
}

/// The plugin search directories in priority order: `--plugins-dir`, `HARNESS_PLUGIN_PATH`,
/// the file's `[plugins] dirs`, then (unless `--no-default-plugins`) the harness executable's
/// directory and the user's plugin directory.
fn plugin_dirs(args: &PluginArgs, config: &LoadedConfig) -> Result<Vec<PathBuf>> {
    let mut dirs = Vec::new();
    for dir in &args.plugins_dirs {
        if !dir.is_dir() {
            return Err(CliError::Usage(format!("--plugins-dir {}: no such directory", dir.display())));
        }
        dirs.push(dir.clone());
    }
    if let Some(path) = std::env::var_os("HARNESS_PLUGIN_PATH") {
        dirs.extend(std::env::split_paths(&path).filter(|p| !p.as_os_str().is_empty()));
    }
    dirs.extend(config.config.plugins.dirs.iter().cloned());
    if !args.no_default_plugins {
        dirs.extend(std::env::current_exe().ok().and_then(|exe| exe.parent().map(PathBuf::from)));
        // Only once it exists (`plugins install` makes it): a user who installed nothing gets
        // no warning about a directory they never made.
        dirs.extend(user_plugin_dir().filter(|d| d.is_dir()));
    }
    Ok(dirs)
}

/// The signature policy of the layers with no flag given (`harness plugins install`).
pub(crate) fn default_signature_policy() -> Result<SignaturePolicy> {
    signature_policy(&LoadedConfig::load(None)?)
}

/// The `[trust]` table as the loader's signature policy; a key that is not a minisign public
/// key is an error naming the file and the publisher.
fn signature_policy(config: &LoadedConfig) -> Result<SignaturePolicy> {
    let trust = &config.config.trust;
    let at = config.path.as_ref().map_or_else(|| "config".to_owned(), |p| p.display().to_string());
    let publishers = trust
        .publishers
        .iter()
        .map(|p| {
            Publisher::new(&p.name, &p.key).map_err(|e| CliError::Usage(format!("{at}: [[trust.publishers]] {e}")))
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(SignaturePolicy { publishers, require_signed: trust.require_signed.unwrap_or(false) })
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    /// The plugin flags, as every command takes them.
    #[derive(Parser)]
    struct Flags {
        #[command(flatten)]
        plugins: PluginArgs,
    }

    fn resolve(argv: &[&str], file: &str) -> Result<ToolSettings> {
        let flags = Flags::try_parse_from(argv).expect("valid flags");
        let mut config = LoadedConfig::default();
        config.layers.lay(toml::from_str(file).expect("a valid file"), &Source::Project("/p/h.toml".into()));
        config.config = config.layers.config()?;
        ToolSettings::resolve(&flags.plugins, &config)
    }

    #[test]
    fn the_flags_are_laid_over_the_file_once_for_plugins_and_mcp_servers_alike() {
        let file =
            "tool_timeout = 5\nisolation = \"process\"\n[plugins]\nenable = [\"a\"]\ndeny_effects = [\"network\"]\n";
        let argv = ["h", "--no-default-plugins", "--tool-timeout", "2", "--enable", "b", "--deny-effects", "writes"];
        let s = resolve(&argv, file).unwrap();
        assert_eq!(s.tool_timeout, Some(Duration::from_secs(2)));
        assert_eq!(s.enable, ["b", "a"]);
        assert_eq!(s.deny_effects, [Effects::Writes, Effects::Network]);
        assert_eq!((s.isolation, s.config_isolation), (None, Some(Isolation::Process)));
        let s = resolve(&["h", "--no-default-plugins"], file).unwrap();
        assert_eq!(s.tool_timeout, Some(Duration::from_secs(5)));
    }

    #[test]
    fn a_bad_value_names_its_flag_or_its_key() {
        let e = resolve(&["h", "--no-default-plugins", "--isolation", "proces"], "").err().map(|e| e.to_string());
        let expected = "--isolation \"proces\": no such isolation mode; did you mean process?";
        assert!(e.as_deref().is_some_and(|e| e.starts_with(expected)), "{e:?}");
        let e = resolve(&["h", "--no-default-plugins"], "isolation = \"in-proces\"\n").err().map(|e| e.to_string());
        let expected = "isolation = \"in-proces\" in /p/h.toml: no such isolation mode; did you mean in-process?";
        assert!(e.as_deref().is_some_and(|e| e.starts_with(expected)), "{e:?}");
        let file = "[isolation]\nrequire = \"ful\"\n";
        let e = resolve(&["h", "--no-default-plugins"], file).err().map(|e| e.to_string());
        let expected = "isolation.require = \"ful\" in /p/h.toml: no such enforcement level; did you mean full?";
        assert!(e.as_deref().is_some_and(|e| e.starts_with(expected)), "{e:?}");
        let e = resolve(&["h", "--no-default-plugins"], "tool_timeout = 0\n").err().map(|e| e.to_string());
        let expected = "tool_timeout (project file /p/h.toml) 0: give a number of seconds";
        assert!(e.as_deref().is_some_and(|e| e.starts_with(expected)), "{e:?}");
        let e = resolve(&["h", "--no-default-plugins", "--tool-timeout", "0"], "").err().map(|e| e.to_string());
        assert!(e.as_deref().is_some_and(|e| e.starts_with("--tool-timeout 0: give")), "{e:?}");
        let file = "[isolation]\nrequire = \"best-effort\"\n";
        assert!(!resolve(&["h", "--no-default-plugins"], file).unwrap().require_full_enforcement);
        let flagged = resolve(&["h", "--no-default-plugins", "--require-enforcement"], file).unwrap();
        assert!(flagged.require_full_enforcement);
    }
}
