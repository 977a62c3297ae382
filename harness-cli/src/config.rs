//! The TOML configuration file: `--config FILE`, or `./harness.toml` when present.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::error::CliError;

/// The file's contents. Paths in it are relative to the file's directory.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Config {
    /// Default provider.
    pub(crate) provider: Option<String>,
    /// Default model id.
    pub(crate) model: Option<String>,
    /// Default script for the scripted provider.
    pub(crate) script: Option<PathBuf>,
    /// Default step budget.
    pub(crate) max_steps: Option<u32>,
    /// Default repeat limit.
    pub(crate) max_repeats: Option<u32>,
    /// `[plugins]`: directories, selection, and per-plugin sections.
    #[serde(default)]
    pub(crate) plugins: PluginsConfig,
}

/// The `[plugins]` table.
#[derive(Debug, Default, Deserialize)]
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

/// Where the configuration came from, for messages.
pub(crate) struct LoadedConfig {
    pub(crate) config: Config,
    pub(crate) path: Option<PathBuf>,
}

impl LoadedConfig {
    /// Loads `explicit`, or `./harness.toml` when it exists, or nothing.
    pub(crate) fn load(explicit: Option<&Path>) -> Result<Self, CliError> {
        let path = match explicit {
            Some(p) => p.to_owned(),
            None => {
                let default = PathBuf::from("harness.toml");
                if !default.is_file() {
                    return Ok(Self { config: Config::default(), path: None });
                }
                default
            }
        };
        let text = std::fs::read_to_string(&path)
            .map_err(|e| CliError::Usage(format!("cannot read config file {}: {e}", path.display())))?;
        let mut config: Config = toml::from_str(&text).map_err(|e| {
            CliError::Usage(format!("invalid config file {}: {}", path.display(), e.to_string().trim_end()))
        })?;
        let base = path.parent().map(Path::to_path_buf).unwrap_or_default();
        let resolve = |p: &mut PathBuf| {
            if p.is_relative() {
                *p = base.join(&*p);
            }
        };
        config.plugins.dirs.iter_mut().for_each(resolve);
        if let Some(script) = config.script.as_mut() {
            resolve(script);
        }
        Ok(Self { config, path: Some(path) })
    }
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
    fn unknown_keys_are_refused() {
        assert!(toml::from_str::<Config>("max_step = 4").is_err());
        assert!(toml::from_str::<Config>("[plugins]\nbogus = 1").is_err());
    }
}
