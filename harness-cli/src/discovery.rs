//! The plugin flags, and plugin discovery from the resolved plugin settings
//! ([`ToolSettings`]): the loader's options, the harness's guarded files, the lock's pins.

use std::collections::BTreeMap;
use std::path::PathBuf;

use clap::Args;
use harness_loader::guarded::Guarded;
use harness_loader::isolation::{HostCommand, Isolation};
use harness_loader::{Discovery, DiscoveryOptions, PluginSettings, discover};

use crate::Result;
use crate::error::CliError;
use crate::settings::{ProjectFile, ToolSettings};

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

/// The user's plugin directory, where `harness plugins install` puts plugins: on Windows
/// `%LOCALAPPDATA%\harness\plugins`, else `$XDG_DATA_HOME/harness/plugins`, else
/// `~/.local/share/harness/plugins`.
pub(crate) fn user_plugin_dir() -> Option<PathBuf> {
    let base = if cfg!(windows) {
        std::env::var_os("LOCALAPPDATA").filter(|v| !v.is_empty()).map(PathBuf::from).filter(|p| p.is_absolute())
    } else {
        harness_trust::user_dir("XDG_DATA_HOME", ".local/share")
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

/// The discovery options of the resolved plugin settings.
pub(crate) fn discovery_options(settings: &ToolSettings) -> Result<DiscoveryOptions> {
    let pins = if settings.sections.values().any(|s: &PluginSettings| s.isolation == Some(Isolation::InProcess)) {
        library_pins(&settings.project)?
    } else {
        BTreeMap::new()
    };
    let defaults = DiscoveryOptions::default();
    Ok(DiscoveryOptions {
        dirs: settings.dirs.clone(),
        enable: settings.enable.clone(),
        disable: settings.disable.clone(),
        deny_effects: settings.deny_effects.clone(),
        configs: settings.configs.clone(),
        settings: settings.sections.clone(),
        isolation: settings.isolation,
        config_isolation: settings.config_isolation,
        harness_dir: harness_dir(),
        pins,
        tool_timeout: settings.tool_timeout,
        max_result_bytes: settings.result_bytes.unwrap_or(defaults.max_result_bytes),
        host_command: std::env::current_exe()
            .ok()
            .map(|program| HostCommand { program, args: vec![crate::PLUGIN_HOST_MODE.into()] }),
        allow_insecure: settings.allow_insecure,
        cache_dir: plugin_cache_dir(),
        open_lazily: false,
        require_full_enforcement: settings.require_full_enforcement,
        guarded: guarded(&settings.project, &settings.dirs),
        signatures: settings.signatures.clone(),
    })
}

/// The harness's own files, which no child may write: what decides what the next run trusts
/// (the configuration in use, `harness.lock`, the trust store), loads (the plugin
/// directories, the user's plugin directory, the cache) and is (the harness executable's directory).
fn guarded(project: &ProjectFile, dirs: &[PathBuf]) -> Vec<Guarded> {
    let mut guarded = Vec::new();
    if let Some(file) = &project.canonical {
        guarded.push(Guarded::new(file, "the configuration in use"));
    }
    guarded.push(Guarded::new(&project.lock_path, "the lock file"));
    guarded.extend(dirs.iter().map(|d| Guarded::new(d, "the plugin directory")));
    if let Some(store) = harness_trust::TrustStore::locate().ok().and_then(|s| s.path().parent().map(PathBuf::from)) {
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

/// The directory of the harness executable, canonical: where plugins installed with the
/// harness live, the only directory whose pure plugins run in-process unless configured.
fn harness_dir() -> Option<PathBuf> {
    dunce::canonicalize(std::env::current_exe().ok()?.parent()?).ok()
}

/// The library hashes `harness.lock` pins, by plugin name: a plugin a configuration runs
/// in-process runs so only as the file that was locked.
fn library_pins(project: &ProjectFile) -> Result<BTreeMap<String, String>> {
    let lock = harness_trust::ToolLock::read(&project.lock_path).map_err(|e| CliError::Usage(e.to_string()))?;
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
        None => Some(harness_trust::user_dir("XDG_CACHE_HOME", ".cache")?.join("harness").join("plugins")),
    }
}

/// Discovers plugins and reports every skipped file and warning on stderr.
pub(crate) fn load_plugins(settings: &ToolSettings, report: bool) -> Result<Discovery> {
    load_plugins_with(settings, report, false)
}

/// As [`load_plugins`]; with `open_lazily`, in-process plugins the plugin cache answers for
/// are opened at the first call of one of their tools (`harness run`: see
/// [`report_late_failures`] for what could not be opened).
pub(crate) fn load_plugins_with(settings: &ToolSettings, report: bool, open_lazily: bool) -> Result<Discovery> {
    let options = DiscoveryOptions { open_lazily, ..discovery_options(settings)? };
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
