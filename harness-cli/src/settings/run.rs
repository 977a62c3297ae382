//! The settings of a run, resolved once: the provider flags and the limits laid over the
//! other layers, then typed (the provider, its model and how it is reached, its router mode and
//! tool choice, the loop's `RunOptions`). Each word is parsed here and nowhere else; the
//! provider is built from this (crate::provider), never from the flags or the strings again.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use harness_core::{EarlyFinish, ReplyFormat, RunOptions, ToolChoice};
use harness_providers::{Preset, RouterMode, parse_tool_choice};
use harness_trace::{Resumable, printable};

use super::{Source, seconds, word};
use crate::Result;
use crate::config::{Config, LoadedConfig};
use crate::error::CliError;
use crate::provider::{LoopArgs, ProviderArgs};

/// Which provider answers, resolved once from `--provider`, `--script` and the layers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ProviderKind {
    /// The offline router: a deterministic matcher, no model (the default).
    Offline,
    /// Replies read from a script file.
    Scripted,
    /// A model behind an HTTP API.
    Api(Preset),
}

impl ProviderKind {
    /// The provider `name` names, if any.
    fn parse(name: &str) -> Option<Self> {
        match name {
            "offline" => Some(Self::Offline),
            "scripted" => Some(Self::Scripted),
            other => other.parse::<Preset>().ok().map(Self::Api),
        }
    }

    /// Whether a model answers (so that model, router mode and tool choice mean something).
    pub(crate) fn runs_a_model(self) -> bool {
        matches!(self, Self::Api(_))
    }
}

impl std::fmt::Display for ProviderKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Offline => f.write_str("offline"),
            Self::Scripted => f.write_str("scripted"),
            Self::Api(preset) => preset.fmt(f),
        }
    }
}

/// What the commands that run the loop read of their flags and the configuration, resolved
/// once: the flags laid over the other layers (see [`crate::settings`]), then typed.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    /// Which provider answers.
    pub(crate) provider: ProviderKind,
    /// The model id, when some layer names one.
    pub(crate) model: Option<String>,
    /// The model API's base URL, over the preset's.
    pub(crate) base_url: Option<String>,
    /// The variable that holds the API key.
    pub(crate) api_key_env: Option<String>,
    /// The tool choice sent when the loop asks for any tool, when some layer says.
    pub(crate) tool_choice: Option<ToolChoice>,
    /// How the tool choice is forced, when some layer says.
    pub(crate) router_mode: Option<RouterMode>,
    /// The most tokens a reply may take, when some layer says.
    pub(crate) max_reply_tokens: Option<u32>,
    /// The model's context in tokens (at least 1 for a provider that reads it).
    pub(crate) context_tokens: Option<u64>,
    /// The whole-request timeout of a model API's requests, when some layer says.
    pub(crate) timeout: Option<Duration>,
    /// The connect timeout of a model API's requests, when some layer says.
    pub(crate) connect_timeout: Option<Duration>,
    /// Retries of a model request, when some layer says.
    pub(crate) retries: Option<u32>,
    /// OpenRouter's `HTTP-Referer`: the app's URL.
    pub(crate) app_url: Option<String>,
    /// OpenRouter's `X-Title`: the app's name.
    pub(crate) app_title: Option<String>,
    /// The scripted provider's script file.
    pub(crate) script: Option<PathBuf>,
    /// The loop's limits.
    pub(crate) options: RunOptions,
    /// Where each value came from, by dotted key.
    pub(crate) sources: BTreeMap<String, Source>,
    /// Every key some layer set, as merged (what `config show` lists).
    pub(crate) table: toml::Table,
}

impl Settings {
    /// Lays the provider flags and the limits over the configuration's layers, and types them:
    /// a bad value is a usage error naming its key, the layer that gave it and the nearest word.
    pub(crate) fn resolve(provider: &ProviderArgs, limits: &LoopArgs, config: &LoadedConfig) -> Result<Self> {
        let mut layers = config.layers.clone();
        for (table, source) in super::flag_layer(provider, limits) {
            layers.lay(table, &source);
        }
        let values = layers.config()?;
        let sources = layers.sources;
        let kind = typed(values.provider.as_deref(), "provider", &sources, ProviderKind::parse)?;
        let router_mode = typed(values.router_mode.as_deref(), "router_mode", &sources, |m| m.parse().ok())?;
        let reply_format = typed(values.reply_format.as_deref(), "reply_format", &sources, |f| f.parse().ok())?;
        let mut settings = Self {
            provider: kind.unwrap_or(ProviderKind::Offline),
            model: values.model.clone(),
            base_url: values.base_url.clone(),
            api_key_env: values.api_key_env.clone(),
            tool_choice: values.tool_choice.as_deref().map(parse_tool_choice),
            router_mode,
            max_reply_tokens: values.max_reply_tokens,
            context_tokens: values.context_tokens,
            timeout: None,
            connect_timeout: None,
            retries: values.retries,
            app_url: values.openrouter.http_referer.clone(),
            app_title: values.openrouter.x_title.clone(),
            // The flag's path as given: it need not be UTF-8, as its layer's copy must.
            script: provider.script.clone().or_else(|| values.script.clone()),
            options: run_options(limits, &values, reply_format, &sources)?,
            sources,
            table: layers.table,
        };
        settings.check_numbers(&values)?;
        Ok(settings)
    }

    /// The numbers a provider reads, checked for the provider that reads them (the others'
    /// are noted as ignored when it is built, never refused): the timeouts of a model API,
    /// and the context of a model or a script.
    fn check_numbers(&mut self, values: &Config) -> Result<()> {
        if self.provider.runs_a_model() {
            self.timeout = values.timeout.map(|t| seconds(&self.named("timeout"), t)).transpose()?;
            self.connect_timeout =
                values.connect_timeout.map(|t| seconds(&self.named("connect_timeout"), t)).transpose()?;
        }
        if self.provider != ProviderKind::Offline && self.context_tokens == Some(0) {
            return Err(CliError::Usage(format!(
                "{} 0 leaves no room for any request; give the model's context size in tokens",
                self.named("context_tokens")
            )));
        }
        Ok(())
    }

    /// Whether `key` was given by a flag.
    pub(crate) fn by_flag(&self, key: &str) -> bool {
        matches!(self.sources.get(key), Some(Source::Flag(_)))
    }

    /// How an error names the setting `key`: its flag when a flag gave it, else the key and
    /// where it came from.
    pub(crate) fn named(&self, key: &str) -> String {
        named(&self.sources, key)
    }
}

/// How an error names the setting `key` of `sources`: see [`Settings::named`].
fn named(sources: &BTreeMap<String, Source>, key: &str) -> String {
    match sources.get(key) {
        Some(Source::Flag(flag)) => (*flag).to_owned(),
        Some(source) => format!("{key} ({source})"),
        None => key.to_owned(),
    }
}

/// The word some layer gave `key`, as `parse` types it, when one did.
fn typed<T>(
    text: Option<&str>,
    key: &str,
    sources: &BTreeMap<String, Source>,
    parse: impl FnOnce(&str) -> Option<T>,
) -> Result<Option<T>> {
    text.map(|text| word(key, text, sources.get(key), parse)).transpose()
}

/// The loop's limits from the merged settings, then the defaults.
/// A number out of range is named with the layer that gave it.
fn run_options(
    args: &LoopArgs,
    values: &Config,
    reply_format: Option<ReplyFormat>,
    sources: &BTreeMap<String, Source>,
) -> Result<RunOptions> {
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
            Some(s) => {
                let key = named(sources, "max_seconds");
                return Err(CliError::Usage(format!("{key} {s}: give a positive number of seconds")));
            }
        },
        reply_format: reply_format.unwrap_or(defaults.reply_format),
        early_finish: match args.early_finish.as_deref() {
            Some("allow") => EarlyFinish::Allowed,
            Some("refuse") => EarlyFinish::Refused,
            _ => EarlyFinish::Provider,
        },
    };
    if options.max_steps == 0 {
        return Err(CliError::Usage(format!("{} must be at least 1", named(sources, "max_steps"))));
    }
    if options.max_repeats == 1 {
        return Err(CliError::Usage(format!(
            "{} 1 would reject every call as a repeat; use 0 to turn the check off, or 2 or more",
            named(sources, "max_repeats")
        )));
    }
    Ok(options)
}

/// The reply format the layers give (`reply_format`), when one does.
pub(crate) fn reply_format(config: &LoadedConfig) -> Result<Option<ReplyFormat>> {
    let source = config.layers.sources.get("reply_format");
    config.config.reply_format.as_deref().map(|name| word("reply_format", name, source, |n| n.parse().ok())).transpose()
}

/// `reply read --reply-format`: a format named on the command line alone.
pub(crate) fn reply_format_flag(name: &str) -> Result<ReplyFormat> {
    word("reply_format", name, Some(&Source::Flag("--reply-format")), |n| n.parse().ok())
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
