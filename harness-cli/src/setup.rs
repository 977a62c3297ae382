//! Shared wiring: plugin directories and selection from flags, environment and config.

use std::collections::BTreeMap;
use std::path::PathBuf;

use clap::Args;
use harness_abi::manifest::Effects;

use harness_loader::guarded::Guarded;
use harness_loader::isolation::{HostCommand, Isolation};
use harness_loader::{Discovery, DiscoveryOptions, PluginSettings, Publisher, SignaturePolicy, discover};

use crate::Result;
use crate::config::LoadedConfig;
use crate::error::CliError;

/// Where plugins come from and which of them are offered.
#[derive(Debug, Clone, Args)]
pub(crate) struct PluginArgs {
    /// A directory to load plugins from; repeat it for more. Searched first, in order.
    #[arg(long = "plugins-dir", value_name = "DIR")]
    pub(crate) plugins_dirs: Vec<PathBuf>,
    /// Configuration file (TOML); `./harness.toml` is read only once trusted (`harness config trust`).
    #[arg(long, value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,
    /// Offer only these plugins (NAME) or tools (NAME.TOOL); repeatable. Test-only plugins load only when named here.
    #[arg(long, value_name = "NAME")]
    pub(crate) enable: Vec<String>,
    /// Never offer these plugins (NAME) or tools (NAME.TOOL); repeatable.
    #[arg(long, value_name = "NAME")]
    pub(crate) disable: Vec<String>,
    /// Never offer tools of these effect classes: pure, reads, writes, network; repeatable.
    #[arg(long = "deny-effects", value_name = "CLASS", value_delimiter = ',')]
    pub(crate) deny_effects: Vec<String>,
    /// Do not search the directory that holds the harness executable, nor the user's plugin
    /// directory (where `harness plugins install` puts plugins).
    #[arg(long)]
    pub(crate) no_default_plugins: bool,
    /// Where every plugin's tools run, for this run: in-process (fastest, unconfined) or process
    /// (a crash or hang costs one call; confined by the kernel to the plugin's declared effects).
    /// Default: in-process only for pure plugins installed beside the harness and plugins a
    /// configuration names with [plugins.NAME] isolation = "in-process"; process for the rest.
    #[arg(long, value_name = "MODE")]
    pub(crate) isolation: Option<String>,
    /// Every tool's timeout in seconds, unless its plugin section sets its own.
    #[arg(long, value_name = "SECS")]
    pub(crate) tool_timeout: Option<f64>,
    /// Load plugin files even when they or their directories are writable by others (warns).
    #[arg(long)]
    pub(crate) allow_insecure_plugins: bool,
    /// Offer only plugins whose declared effects the kernel enforces in full (Landlock and
    /// seccomp, every feature they need); skip the others with what they lack. The same as
    /// `[isolation] require = "full"`.
    #[arg(long)]
    pub(crate) require_enforcement: bool,
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

/// The plugin search directories in priority order.
pub(crate) fn plugin_dirs(args: &PluginArgs, config: &LoadedConfig) -> Result<Vec<PathBuf>> {
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

/// The user's plugin directory, where `harness plugins install` puts plugins: on Windows
/// `%LOCALAPPDATA%\harness\plugins`, else `$XDG_DATA_HOME/harness/plugins`, else
/// `~/.local/share/harness/plugins`.
pub(crate) fn user_plugin_dir() -> Option<PathBuf> {
    let base = if cfg!(windows) {
        std::env::var_os("LOCALAPPDATA").filter(|v| !v.is_empty()).map(PathBuf::from).filter(|p| p.is_absolute())
    } else {
        harness_config::user_dir("XDG_DATA_HOME", ".local/share")
    };
    Some(base?.join("harness").join("plugins"))
}

impl PluginArgs {
    /// No flag given: the directories and selection a plain `harness` command would use.
    pub(crate) fn none() -> Self {
        Self {
            plugins_dirs: Vec::new(),
            config: None,
            enable: Vec::new(),
            disable: Vec::new(),
            deny_effects: Vec::new(),
            no_default_plugins: false,
            isolation: None,
            tool_timeout: None,
            allow_insecure_plugins: false,
            require_enforcement: false,
        }
    }
}

/// Builds the discovery options: flags first, then the config.
pub(crate) fn discovery_options(args: &PluginArgs, config: &LoadedConfig) -> Result<DiscoveryOptions> {
    let plugins = &config.config.plugins;
    let config_name = config.path.as_ref().map_or_else(|| "config".to_owned(), |p| p.display().to_string());
    let mut deny = effects(&args.deny_effects, "--deny-effects")?;
    deny.extend(effects(&plugins.deny_effects, &format!("{config_name}: plugins.deny_effects"))?);
    let mut configs = BTreeMap::new();
    let mut settings = BTreeMap::new();
    for (name, table) in &plugins.sections {
        let value = serde_json::to_value(table).map_err(|e| {
            CliError::Usage(format!("{config_name}: [plugins.{name}] cannot be passed to the plugin: {e}"))
        })?;
        let (plugin_settings, value) =
            PluginSettings::from_section(name, &value).map_err(|e| CliError::Usage(format!("{config_name}: {e}")))?;
        configs.insert(name.clone(), value);
        settings.insert(name.clone(), plugin_settings);
    }
    let isolation = isolation_mode(args.isolation.as_deref(), "--isolation")?;
    let config_isolation =
        isolation_mode(config.config.isolation.as_ref().and_then(|i| i.mode()), &format!("{config_name}: isolation"))?;
    let pins = if settings.values().any(|s: &PluginSettings| s.isolation == Some(Isolation::InProcess)) {
        library_pins(config)?
    } else {
        BTreeMap::new()
    };
    let tool_timeout = crate::settings::tool_timeout(args.tool_timeout, &config.config)?;
    let require_full_enforcement = match config.config.isolation.as_ref().and_then(|i| i.require()) {
        _ if args.require_enforcement => true,
        None | Some("best-effort") => false,
        Some("full") => true,
        Some(other) => {
            return Err(CliError::Usage(format!(
                "{config_name}: [isolation] require = {other:?} is not a level; use \"full\" or \"best-effort\""
            )));
        }
    };
    let defaults = DiscoveryOptions::default();
    let dirs = plugin_dirs(args, config)?;
    let guarded = guarded(config, &dirs);
    Ok(DiscoveryOptions {
        dirs,
        enable: args.enable.iter().chain(&plugins.enable).cloned().collect(),
        disable: args.disable.iter().chain(&plugins.disable).cloned().collect(),
        deny_effects: deny,
        configs,
        settings,
        isolation,
        config_isolation,
        harness_dir: harness_dir(),
        pins,
        tool_timeout,
        max_result_bytes: config.config.limits.result_bytes.unwrap_or(defaults.max_result_bytes),
        host_command: std::env::current_exe()
            .ok()
            .map(|program| HostCommand { program, args: vec![crate::PLUGIN_HOST_MODE.into()] }),
        allow_insecure: args.allow_insecure_plugins,
        cache_dir: plugin_cache_dir(),
        open_lazily: false,
        require_full_enforcement,
        guarded,
        signatures: signature_policy(config)?,
    })
}

/// The `[trust]` table as the loader's signature policy; a key that is not a minisign public
/// key is an error naming the file and the publisher.
pub(crate) fn signature_policy(config: &LoadedConfig) -> Result<SignaturePolicy> {
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

/// The harness's own files, which no child may write: what decides what the next run trusts
/// (the configuration in use, `harness.lock`, the trust store), loads (the plugin
/// directories, the user's plugin directory, the cache) and is (the harness executable's directory).
pub(crate) fn guarded(config: &LoadedConfig, dirs: &[PathBuf]) -> Vec<Guarded> {
    let mut guarded = Vec::new();
    if let Some(file) = &config.file {
        guarded.push(Guarded::new(&file.canonical, "the configuration in use"));
    }
    guarded.push(Guarded::new(config.lock_path(), "the lock file"));
    guarded.extend(dirs.iter().map(|d| Guarded::new(d, "the plugin directory")));
    if let Some(store) = harness_config::TrustStore::locate().ok().and_then(|s| s.path().parent().map(PathBuf::from)) {
        guarded.push(Guarded::new(store, "the trust store"));
    }
    // Guarded before it exists too: a child that could create it could plant a library there.
    if let Some(dir) = user_plugin_dir() {
        guarded.push(Guarded::new(dir, "the user's plugin directory"));
    }
    if let Some(cache) = plugin_cache_dir() {
        guarded.push(Guarded::new(cache, "the plugin cache"));
    }
    if let Some(dir) = harness_dir() {
        guarded.push(Guarded::new(dir, "the harness executable's directory"));
    }
    guarded
}

/// Parses an isolation mode given at `at`.
fn isolation_mode(name: Option<&str>, at: &str) -> Result<Option<Isolation>> {
    name.map(|name| {
        Isolation::parse(name)
            .ok_or_else(|| CliError::Usage(format!("{at} {name:?} is not a mode; use in-process or process")))
    })
    .transpose()
}

/// The directory of the harness executable, canonical: where plugins installed with the
/// harness live, the only directory whose pure plugins run in-process unless configured.
fn harness_dir() -> Option<PathBuf> {
    dunce::canonicalize(std::env::current_exe().ok()?.parent()?).ok()
}

/// The library hashes `harness.lock` pins, by plugin name: a plugin a configuration runs
/// in-process runs so only as the file that was locked.
fn library_pins(config: &LoadedConfig) -> Result<BTreeMap<String, String>> {
    let path = config.lock_path();
    let lock = harness_config::ToolLock::read(&path).map_err(|e| CliError::Usage(e.to_string()))?;
    let entries = lock.map(|l| l.tools.into_values()).into_iter().flatten();
    Ok(entries
        .filter_map(|e| {
            let plugin = e.source.strip_prefix("plugin ")?.split(' ').next()?.to_owned();
            Some((plugin, e.library_sha256?))
        })
        .collect())
}

/// Where the plugin cache lives (docs/operators.md): `HARNESS_PLUGIN_CACHE` (a directory, or
/// `off`), else `$XDG_CACHE_HOME/harness/plugins`, else `~/.cache/harness/plugins`.
fn plugin_cache_dir() -> Option<PathBuf> {
    match std::env::var_os("HARNESS_PLUGIN_CACHE").filter(|v| !v.is_empty()) {
        Some(dir) if dir == "off" => None,
        Some(dir) => Some(PathBuf::from(dir)),
        None => Some(harness_config::user_dir("XDG_CACHE_HOME", ".cache")?.join("harness").join("plugins")),
    }
}

/// Discovers plugins and reports every skipped file and warning on stderr.
pub(crate) fn load_plugins(args: &PluginArgs, config: &LoadedConfig, report: bool) -> Result<Discovery> {
    load_plugins_with(args, config, report, false)
}

/// As [`load_plugins`]; with `open_lazily`, in-process plugins the plugin cache answers for
/// are opened at the first call of one of their tools (`harness run`: see
/// [`report_late_failures`] for what could not be opened).
pub(crate) fn load_plugins_with(
    args: &PluginArgs,
    config: &LoadedConfig,
    report: bool,
    open_lazily: bool,
) -> Result<Discovery> {
    let options = DiscoveryOptions { open_lazily, ..discovery_options(args, config)? };
    let found = discover(&options);
    if report {
        for w in &found.warnings {
            crate::log::notice!("harness: warning: {w}");
        }
        for s in &found.skipped {
            crate::log::notice!("harness: skipped {}: {}", s.path.display(), s.reason);
        }
    }
    Ok(found)
}

/// Reports on stderr each plugin opened at its first call that could not be opened: skipped
/// as it would have been at start-up, but known only now (its calls failed with
/// `plugin_unavailable`).
pub(crate) fn report_late_failures(found: &Discovery) {
    for (late, why) in found.plugins.iter().filter_map(|p| p.late.as_ref()).filter_map(|l| Some((l, l.failure()?))) {
        crate::log::notice!(
            "harness: skipped {}: {why} (found at its first call: its tools were offered from the plugin cache, and their calls failed with plugin_unavailable)",
            late.path().display()
        );
    }
}
