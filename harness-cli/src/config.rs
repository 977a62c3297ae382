//! The TOML configuration file: `--config FILE`, or `./harness.toml` when the operator has
//! trusted it (`harness config trust`); see `harness_trust` for the trust store.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use harness_trust::{ConfigFile, TrustStatus, TrustStore, check_permissions};
use serde::Deserialize;

use crate::error::CliError;
use crate::settings::{self, Layers, Source};

/// The file's contents. Relative paths in it are relative to the directory of the file itself
/// (links resolved: see [`parse`]), never to the working directory.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Config {
    /// Default provider.
    pub(crate) provider: Option<String>,
    /// Default model id.
    pub(crate) model: Option<String>,
    /// Base URL of the model API (`--base-url`).
    pub(crate) base_url: Option<String>,
    /// Environment variable that holds the API key (`--api-key-env`).
    pub(crate) api_key_env: Option<String>,
    /// Never accepted: a key in a file is a key in a repository sooner or later.
    pub(crate) api_key: Option<toml::Value>,
    /// Tool choice override (`--tool-choice`): required, auto, none, or a tool's name.
    pub(crate) tool_choice: Option<String>,
    /// How the tool choice is forced (`--router-mode`): auto, native, constrained, prompt.
    pub(crate) router_mode: Option<String>,
    /// Whole-request timeout of a model request, in seconds (`--timeout`).
    pub(crate) timeout: Option<f64>,
    /// Connect timeout of a model request, in seconds (`--connect-timeout`).
    pub(crate) connect_timeout: Option<f64>,
    /// Retries of a model request (`--retries`).
    pub(crate) retries: Option<u32>,
    /// The most tokens a model reply may take (`--max-reply-tokens`); `max_tokens` is its old name.
    #[serde(alias = "max_tokens")]
    pub(crate) max_reply_tokens: Option<u32>,
    /// The model's context in tokens, for servers that do not say theirs (`--context-tokens`).
    pub(crate) context_tokens: Option<u64>,
    /// `[openrouter]`: the app attribution headers.
    #[serde(default)]
    pub(crate) openrouter: OpenRouterConfig,
    /// Default script for the scripted provider.
    pub(crate) script: Option<PathBuf>,
    /// Default step budget.
    pub(crate) max_steps: Option<u32>,
    /// Default repeat limit.
    pub(crate) max_repeats: Option<u32>,
    /// Cut replies in a row that end a run (`--max-truncated`).
    pub(crate) max_truncated: Option<u32>,
    /// Wall-clock limit of a run, in seconds.
    pub(crate) max_seconds: Option<f64>,
    /// How a reply's text is read (`--reply-format`): auto, or a model family's call format.
    pub(crate) reply_format: Option<String>,
    /// Where plugin tools run by default (`isolation = "process"`), or `[isolation]` with
    /// `mode` and `require`.
    pub(crate) isolation: Option<IsolationConfig>,
    /// Every tool's timeout, in seconds, unless its plugin section says otherwise.
    pub(crate) tool_timeout: Option<f64>,
    /// `[limits]`: sizes.
    #[serde(default)]
    pub(crate) limits: LimitsConfig,
    /// `[plugins]`: directories, selection, and per-plugin sections.
    #[serde(default)]
    pub(crate) plugins: PluginsConfig,
    /// `[mcp]`: MCP servers started as sources of tools.
    #[serde(default)]
    pub(crate) mcp: McpConfig,
    /// Refuse to start when the offered tools differ from harness.lock (`--locked`).
    pub(crate) locked: Option<bool>,
    /// `[policy]`: which calls run, which are asked about, which are denied.
    #[serde(default)]
    pub(crate) policy: PolicyConfig,
    /// `[trust]`: whose plugin signatures are trusted, and whether a signature is required.
    #[serde(default)]
    pub(crate) trust: TrustConfig,
}

/// The `[trust]` table: signed plugins (docs/operators.md, "Signed plugins").
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TrustConfig {
    /// `[[trust.publishers]]`: a name and a minisign public key each.
    #[serde(default)]
    pub(crate) publishers: Vec<PublisherConfig>,
    /// Refuse every plugin that no trusted publisher signed.
    pub(crate) require_signed: Option<bool>,
}

/// One `[[trust.publishers]]` entry.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PublisherConfig {
    /// The name shown as a plugin's signer.
    pub(crate) name: String,
    /// The minisign public key (the `RW...` line of its `.pub` file).
    pub(crate) key: String,
}

/// The `[mcp]` table.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct McpConfig {
    /// `[[mcp.servers]]`: name, then command, args, env (a child process) or url, headers (a
    /// remote server), and timeout.
    #[serde(default)]
    pub(crate) servers: Vec<harness_mcp::McpServerConfig>,
}

/// `isolation`: the default mode alone, or the `[isolation]` table.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub(crate) enum IsolationConfig {
    /// `isolation = "process"` or `"in-process"`.
    Mode(String),
    /// `[isolation]`: `mode`, and `require = "full"`.
    Table(IsolationTable),
}

/// The `[isolation]` table.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct IsolationTable {
    /// Where plugin tools run by default: `in-process` or `process`.
    pub(crate) mode: Option<String>,
    /// `full`: offer only plugins whose declared effects the kernel enforces in full;
    /// `best-effort` (the default): offer the others too, with a warning.
    pub(crate) require: Option<String>,
}

impl IsolationConfig {
    /// The default mode, when one is set.
    pub(crate) fn mode(&self) -> Option<&str> {
        match self {
            Self::Mode(mode) => Some(mode),
            Self::Table(t) => t.mode.as_deref(),
        }
    }

    /// The `require` key, when set.
    pub(crate) fn require(&self) -> Option<&str> {
        match self {
            Self::Mode(_) => None,
            Self::Table(t) => t.require.as_deref(),
        }
    }
}

/// The `[limits]` table: sizes in bytes.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct LimitsConfig {
    /// Largest router reply.
    pub(crate) reply_bytes: Option<usize>,
    /// Largest arguments of one call.
    pub(crate) arguments_bytes: Option<usize>,
    /// Largest tool result.
    pub(crate) result_bytes: Option<usize>,
    /// Largest conversation.
    pub(crate) conversation_bytes: Option<usize>,
}

/// The `[openrouter]` table: OpenRouter's optional app attribution headers.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct OpenRouterConfig {
    /// Sent as `HTTP-Referer`: the app's URL.
    pub(crate) http_referer: Option<String>,
    /// Sent as `X-Title`: the app's name.
    pub(crate) x_title: Option<String>,
}

/// The `[plugins]` table.
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct PluginsConfig {
    #[serde(default)]
    pub(crate) dirs: Vec<PathBuf>,
    #[serde(default)]
    pub(crate) enable: Vec<String>,
    #[serde(default)]
    pub(crate) disable: Vec<String>,
    #[serde(default)]
    pub(crate) deny_effects: Vec<String>,
    /// `[plugins.<name>]` sections, passed to each plugin's `init`.
    #[serde(flatten)]
    pub(crate) sections: BTreeMap<String, toml::Table>,
}

/// How the configuration file in use was chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Origin {
    /// Named with `--config`: the operator chose it.
    Explicit,
    /// `./harness.toml`, trusted with `harness config trust`.
    Trusted,
}

/// The `[policy]` table: one key per effect class, and `[policy.tools]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PolicyConfig {
    pub(crate) pure: Option<String>,
    pub(crate) reads: Option<String>,
    pub(crate) writes: Option<String>,
    pub(crate) network: Option<String>,
    /// `"plugin.tool"` or `"mcp_server.tool"` to allow, ask or deny.
    #[serde(default)]
    pub(crate) tools: BTreeMap<String, String>,
}

/// The configuration in use and where it came from, for messages.
#[derive(Default)]
pub(crate) struct LoadedConfig {
    /// Every layer but the flags, merged (see [`crate::settings`]).
    pub(crate) config: Config,
    /// The project file as named, when one is used.
    pub(crate) path: Option<PathBuf>,
    /// How the project file was chosen, when one is used.
    pub(crate) origin: Option<Origin>,
    /// The project file as read (canonical path, text, hash), when one is used.
    pub(crate) file: Option<ConfigFile>,
    /// The user's file as read, when there is one.
    pub(crate) user: Option<ConfigFile>,
    /// The layers merged, with each value's source.
    pub(crate) layers: Layers,
}

/// The file read when no `--config` is given, if trusted.
pub(crate) const IMPLICIT: &str = "harness.toml";

impl LoadedConfig {
    /// Loads the layers under the flags: the user's file, then `explicit` or `./harness.toml`
    /// when it exists and is trusted, then the `HARNESS_*` variables.
    ///
    /// A present but untrusted `./harness.toml` is ignored with one line on stderr naming the
    /// command that trusts it. A file someone else could change is refused either way.
    pub(crate) fn load(explicit: Option<&Path>) -> Result<Self, CliError> {
        let mut loaded = Self::default();
        if let Some((file, table)) = settings::user_file()? {
            loaded.layers.lay(table, &Source::User(file.canonical.clone()));
            loaded.user = Some(file);
        }
        let project = match explicit {
            Some(p) => Some((read(p)?, Origin::Explicit)),
            None => implicit()?.map(|file| (file, Origin::Trusted)),
        };
        if let Some((file, origin)) = project {
            check_permissions(&file.canonical).map_err(|e| CliError::Usage(e.to_string()))?;
            let table = settings::file_table(&file)?;
            if origin == Origin::Explicit {
                let config = Layers::of(table.clone()).config()?;
                trusted_where_a_child_writes(&file, &config.plugins.sections)?;
            }
            loaded.layers.lay(table, &Source::Project(file.canonical.clone()));
            (loaded.path, loaded.origin, loaded.file) = (Some(file.named.clone()), Some(origin), Some(file));
        }
        for (table, source) in settings::env_layer(|var| std::env::var(var).ok())? {
            loaded.layers.lay(table, &source);
        }
        for warning in settings::unknown_env_warnings(std::env::vars_os().filter_map(|(k, _)| k.into_string().ok())) {
            crate::log::notice!("harness: warning: {warning}");
        }
        loaded.config = loaded.layers.config()?;
        Ok(loaded)
    }

    /// The directory of the file in use, links resolved: what its relative paths are relative
    /// to, and where its MCP servers start. `None` without a file.
    pub(crate) fn base_dir(&self) -> Option<&Path> {
        self.file.as_ref().and_then(|f| f.canonical.parent())
    }

    /// Where the lock file (`harness lock`) lives: beside the configuration, else in the
    /// working directory.
    pub(crate) fn lock_path(&self) -> PathBuf {
        self.base_dir().map_or_else(|| PathBuf::from("harness.lock"), |d| d.join("harness.lock"))
    }
}

fn read(path: &Path) -> Result<ConfigFile, CliError> {
    ConfigFile::read(path).map_err(|e| CliError::Usage(e.to_string()))
}

/// `./harness.toml` when present and trusted; a line on stderr when present and not.
fn implicit() -> Result<Option<ConfigFile>, CliError> {
    let path = Path::new(IMPLICIT);
    if !path.is_file() {
        return Ok(None);
    }
    let file = read(path)?;
    let store = match TrustStore::locate() {
        Ok(store) => store,
        Err(e) => {
            crate::log::notice!("harness: ignoring ./{IMPLICIT}: {e}");
            return Ok(None);
        }
    };
    let why = match store.status(&file).map_err(|e| CliError::Usage(e.to_string()))? {
        TrustStatus::Trusted => return Ok(Some(file)),
        TrustStatus::Unknown => "it is not trusted",
        TrustStatus::Changed { .. } => "it changed since it was trusted",
    };
    crate::log::notice!(
        "harness: ignoring ./{IMPLICIT} ({}): {why}. Read it, then run `harness config trust` to use it, or name it with --config {IMPLICIT}",
        harness_core::printable(&file.canonical.display().to_string())
    );
    Ok(None)
}

/// A `--config` file that lies where one of its plugins' children may write (a section's
/// `allow_paths`, else its `root`) could have been rewritten by a tool since the operator
/// chose it: like `./harness.toml`, it is used only once trusted (`harness config trust`).
fn trusted_where_a_child_writes(file: &ConfigFile, sections: &BTreeMap<String, toml::Table>) -> Result<(), CliError> {
    let this = [harness_loader::guarded::Guarded::new(&file.canonical, "")];
    let areas = sections.iter().flat_map(|(plugin, section)| {
        let (key, paths) = match (section.get("allow_paths"), section.get("root")) {
            (Some(toml::Value::Array(list)), _) => ("allow_paths", list.iter().filter_map(|p| p.as_str()).collect()),
            (None, Some(toml::Value::String(root))) => ("root", vec![root.as_str()]),
            _ => ("", Vec::new()),
        };
        paths.into_iter().map(move |p| (plugin, key, p))
    });
    let mut reached = areas.filter(|(_, _, area)| harness_loader::guarded::in_reach(Path::new(area), &this).is_some());
    let Some((plugin, key, area)) = reached.next() else { return Ok(()) };
    let trusted = TrustStore::locate().ok().and_then(|store| store.status(file).ok());
    if matches!(trusted, Some(TrustStatus::Trusted)) {
        return Ok(());
    }
    let named = harness_core::printable(&file.named.display().to_string());
    Err(CliError::Usage(format!(
        "--config {named}: it lies inside {}, where [plugins.{plugin}] {key} lets a plugin's child write, so a tool could have rewritten it; a configuration there is used only once trusted, like ./{IMPLICIT}. Read it, then run `harness config trust {named}`; or give [plugins.{plugin}] {key} a directory that does not hold it",
        harness_core::printable(area)
    )))
}

/// Parses a configuration file alone; relative paths in it become relative to its directory
/// (see [`settings::file_table`]).
pub(crate) fn parse(file: &ConfigFile) -> Result<Config, CliError> {
    Layers::of(settings::file_table(file)?).config()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plugin_sections_and_lists() {
        let c: Config = toml::from_str(
            "max_steps = 4\n[plugins]\ndirs = [\"p\"]\nenable = [\"calc\"]\n[plugins.files]\nroot = \"/srv\"\n",
        )
        .unwrap();
        assert_eq!(c.max_steps, Some(4));
        assert_eq!(c.plugins.enable, vec!["calc"]);
        assert_eq!(c.plugins.sections["files"]["root"].as_str(), Some("/srv"));
    }

    #[test]
    fn model_api_settings() {
        let c: Config = toml::from_str(
            "provider = \"openrouter\"\nmodel = \"m\"\nbase_url = \"http://h/v1\"\napi_key_env = \"K\"\ntool_choice = \"auto\"\nrouter_mode = \"prompt\"\ntimeout = 30\nconnect_timeout = 2.5\nretries = 1\nmax_tokens = 512\n[openrouter]\nhttp_referer = \"https://x\"\nx_title = \"X\"\n",
        )
        .unwrap();
        assert_eq!((c.base_url.as_deref(), c.api_key_env.as_deref()), (Some("http://h/v1"), Some("K")));
        assert_eq!(
            (c.timeout, c.connect_timeout, c.retries, c.max_reply_tokens),
            (Some(30.0), Some(2.5), Some(1), Some(512))
        );
        assert_eq!(c.openrouter.x_title.as_deref(), Some("X"));
        assert!(toml::from_str::<Config>("[openrouter]\napi_key = \"k\"").is_err());
        let c: Config = toml::from_str("max_reply_tokens = 64\nrouter_mode = \"constrained\"").unwrap();
        assert_eq!((c.max_reply_tokens, c.router_mode.as_deref()), (Some(64), Some("constrained")));
    }

    #[test]
    fn an_api_key_in_the_file_is_refused_without_repeating_it() {
        let dir = std::env::temp_dir().join(format!("harness-config-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("harness.toml");
        std::fs::write(&path, "api_key = \"sk-in-a-file\"\n").unwrap();
        let e = LoadedConfig::load(Some(&path)).err().unwrap().to_string();
        let _ = std::fs::remove_dir_all(&dir);
        assert!(e.contains("read from the environment only") && !e.contains("sk-in-a-file"), "{e}");
    }

    #[cfg(unix)]
    #[test]
    fn relative_paths_are_the_real_files_not_the_links() {
        let dir = tempfile::tempdir().unwrap();
        let project = dir.path().join("projA");
        std::fs::create_dir_all(&project).unwrap();
        std::fs::create_dir_all(dir.path().join("cloned")).unwrap();
        let text = "script = \"s.jsonl\"\n[plugins]\ndirs = [\"plugins\", \"/abs\"]\n[plugins.files]\nroot = \"data\"\n[plugins.other]\nroot = \"/srv\"\n";
        std::fs::write(project.join("harness.toml"), text).unwrap();
        let link = dir.path().join("cloned/harness.toml");
        std::os::unix::fs::symlink("../projA/harness.toml", &link).unwrap();
        let config = parse(&ConfigFile::read(&link).unwrap()).unwrap();
        let real = project.canonicalize().unwrap();
        assert_eq!(config.plugins.dirs, [real.join("plugins"), PathBuf::from("/abs")]);
        assert_eq!(config.script, Some(real.join("s.jsonl")));
        let root = |p: &str| config.plugins.sections[p]["root"].as_str().map(PathBuf::from);
        assert_eq!((root("files"), root("other")), (Some(real.join("data")), Some(PathBuf::from("/srv"))));
    }

    #[test]
    fn mcp_servers() {
        let c: Config = toml::from_str(
            "[[mcp.servers]]\nname = \"py\"\ncommand = \"python3\"\nargs = [\"server.py\"]\nenv = { TOKEN = \"t\" }\n",
        )
        .unwrap();
        assert_eq!(c.mcp.servers[0].args, vec!["server.py"]);
        assert_eq!(c.mcp.servers[0].env["TOKEN"], "t");
        assert!(toml::from_str::<Config>("[[mcp.servers]]\nname = \"py\"\ncommand = \"x\"\ncwd = \"/\"\n").is_err());
        assert!(toml::from_str::<Config>("[mcp]\nserver = []\n").is_err());
    }

    #[test]
    fn unknown_keys_are_refused() {
        assert!(toml::from_str::<Config>("max_step = 4").is_err());
        assert!(toml::from_str::<Config>("[plugins]\nbogus = 1").is_err());
    }
}
