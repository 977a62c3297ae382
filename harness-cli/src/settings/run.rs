//! The settings of a run, resolved once: the provider flags and the limits laid over the
//! other layers, then typed (the provider, its router mode, the loop's `RunOptions`). The
//! provider is built from this (crate::provider), never from the flags again.

use std::collections::BTreeMap;
use std::time::Duration;

use harness_core::{EarlyFinish, ReplyFormat, RunOptions};
use harness_providers::RouterMode;
use harness_trace::{Resumable, printable};

use super::Source;
use crate::Result;
use crate::config::{Config, LoadedConfig};
use crate::error::CliError;
use crate::provider::{LoopArgs, ProviderArgs, ProviderKind};

/// What the commands that run the loop read of their flags and the configuration, resolved
/// once: the flags laid over the other layers (see [`crate::settings`]), then typed.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    /// Which provider answers.
    pub(crate) provider: ProviderKind,
    /// How the tool choice is forced, when some layer says.
    pub(crate) router_mode: Option<RouterMode>,
    /// The loop's limits.
    pub(crate) options: RunOptions,
    /// Every layer merged, the flags included: what the provider is built from.
    pub(crate) values: Config,
    /// Where each of `values` came from, by dotted key.
    pub(crate) sources: BTreeMap<String, Source>,
    /// Every key some layer set, as merged (what `config show` lists).
    pub(crate) table: toml::Table,
}

impl Settings {
    /// Lays the provider flags and the limits over the configuration's layers, and types them.
    pub(crate) fn resolve(provider: &ProviderArgs, limits: &LoopArgs, config: &LoadedConfig) -> Result<Self> {
        let mut layers = config.layers.clone();
        for (table, source) in super::flag_layer(provider, limits) {
            layers.lay(table, &source);
        }
        let mut values = layers.config()?;
        // The flag's path as given: it need not be UTF-8, as its layer's copy must.
        if let Some(script) = &provider.script {
            values.script = Some(script.clone());
        }
        let router_mode = match values.router_mode.as_ref() {
            Some(mode) => Some(mode.parse::<RouterMode>().map_err(|e| CliError::Usage(e.to_string()))?),
            None => None,
        };
        let options = run_options(limits, &values)?;
        Ok(Self {
            provider: ProviderKind::named(values.provider.as_deref())?,
            router_mode,
            options,
            values,
            sources: layers.sources,
            table: layers.table,
        })
    }

    /// Whether `key` was given by a flag.
    pub(crate) fn by_flag(&self, key: &str) -> bool {
        matches!(self.sources.get(key), Some(Source::Flag(_)))
    }

    /// How an error names the setting `key`: its flag when a flag gave it, else the key and
    /// where it came from.
    pub(crate) fn named(&self, key: &str) -> String {
        match self.sources.get(key) {
            Some(Source::Flag(flag)) => (*flag).to_owned(),
            Some(source) => format!("{key} ({source})"),
            None => key.to_owned(),
        }
    }
}

/// The loop's limits from the merged settings, then the defaults.
fn run_options(args: &LoopArgs, values: &Config) -> Result<RunOptions> {
    let defaults = RunOptions::default();
    let limits = &values.limits;
    let options = RunOptions {
        max_steps: values.max_steps.unwrap_or(defaults.max_steps),
        max_repeats: values.max_repeats.unwrap_or(defaults.max_repeats),
        max_truncated: values.max_truncated.unwrap_or(defaults.max_truncated),
        max_reply_bytes: limits.reply_bytes.unwrap_or(defaults.max_reply_bytes),
        max_arguments_bytes: limits.arguments_bytes.unwrap_or(defaults.max_arguments_bytes),
        max_conversation_bytes: limits.conversation_bytes.unwrap_or(defaults.max_conversation_bytes),
        max_duration: match values.max_seconds {
            None => None,
            Some(s) if s.is_finite() && s > 0.0 && s <= 1e9 => Some(Duration::from_secs_f64(s)),
            Some(s) => return Err(CliError::Usage(format!("--max-seconds {s}: give a positive number of seconds"))),
        },
        // Batch runs share a runtime: calls go to blocking threads. `RunSettings` turns it on
        // for `harness run`, and exits_after too (a batch runs on after each run).
        inline_calls: false,
        exits_after: false,
        reply_format: match values.reply_format.as_deref() {
            Some(name) => name.parse::<ReplyFormat>().map_err(|e| CliError::Usage(format!("--reply-format: {e}")))?,
            None => defaults.reply_format,
        },
        early_finish: match args.early_finish.as_deref() {
            Some("allow") => EarlyFinish::Allowed,
            Some("refuse") => EarlyFinish::Refused,
            _ => EarlyFinish::Provider,
        },
    };
    if options.max_steps == 0 {
        return Err(CliError::Usage("--max-steps must be at least 1".to_owned()));
    }
    if options.max_repeats == 1 {
        return Err(CliError::Usage(
            "--max-repeats 1 would reject every call as a repeat; use 0 to turn the check off, or 2 or more".to_owned(),
        ));
    }
    Ok(options)
}

/// The reply format the layers give (`reply_format`), when one does.
pub(crate) fn reply_format(config: &LoadedConfig) -> Result<Option<ReplyFormat>> {
    config
        .config
        .reply_format
        .as_ref()
        .map(|name| name.parse::<ReplyFormat>().map_err(|e| CliError::Usage(format!("reply_format: {e}"))))
        .transpose()
}

/// The provider a resumed run asks: the one its trace names, with its model, unless the flags
/// name another (then they win, and the run says so). A scripted run cannot go on without its
/// script, which the trace does not hold: refused with the fix, never replaced by another router.
pub(crate) fn resumed_provider(flags: &ProviderArgs, resumed: &Resumable, quiet: bool) -> Result<ProviderArgs> {
    let mut chosen = flags.clone();
    let named = flags.provider.clone().or_else(|| flags.script.as_ref().map(|_| "scripted".to_owned()));
    match named {
        Some(name) if name != resumed.provider => {
            if !quiet {
                eprintln!(
                    "harness: resuming with provider {} (--provider), where the trace ran {}",
                    printable(&name),
                    printable(&resumed.provider)
                );
            }
        }
        Some(_) => {}
        None if resumed.provider == "scripted" => {
            return Err(CliError::Usage(
                "--resume: the trace ran with the scripted provider; give --script FILE with the replies to go on with (or name another --provider)".to_owned(),
            ));
        }
        None => {
            chosen.provider = Some(resumed.provider.clone());
            if chosen.model.is_none() {
                chosen.model.clone_from(&resumed.model);
            }
            if !quiet {
                let model = chosen.model.as_deref().map(|m| format!(", model {}", printable(m))).unwrap_or_default();
                eprintln!(
                    "harness: resuming with provider {}{model}, as the trace ran (--provider and --model change them)",
                    printable(&resumed.provider)
                );
            }
        }
    }
    Ok(chosen)
}

/// The provider flags of a batch: as given, except that a requests file with scripts, run with
/// no provider named (by a flag or the configuration), is run by the scripted provider, and
/// says so; scripts are never ignored silently.
pub(crate) fn batch_provider(
    flags: &ProviderArgs,
    config: &LoadedConfig,
    requests: &std::path::Path,
) -> Result<ProviderArgs> {
    let mut chosen = flags.clone();
    let named = chosen.provider.is_some() || chosen.script.is_some() || config.config.provider.is_some();
    if !named && let Some(line) = harness_batch::input::first_script_line(requests)? {
        if !crate::log::quiet() {
            eprintln!(
                "harness: batch: {}:{line} has a \"script\": the scripted provider replays it (no --provider was named)",
                requests.display()
            );
        }
        chosen.provider = Some("scripted".to_owned());
    }
    Ok(chosen)
}
