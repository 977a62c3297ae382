//! The approval policy, resolved once: the defaults, then the layers' `[policy]`, then the
//! flags (`--allow`, `--ask`, `--deny`).

use harness_core::{ApprovalPolicy, Decision, Effect};

use super::word;
use crate::Result;
use crate::approve::PolicyArgs;
use crate::config::LoadedConfig;
use crate::error::CliError;

/// The decision `value` of `key`, named with the layer that gave it when it is none.
fn decision(config: &LoadedConfig, key: &str, value: &str) -> Result<Decision> {
    word(key, value, config.layers.sources.get(key), Decision::parse)
}

fn apply(policy: &mut ApprovalPolicy, target: &str, decision: Decision) {
    match Effect::parse(target) {
        Some(effect) => policy.set_class(effect, decision),
        None => policy.set_tool(target, decision),
    }
}

/// The policy: defaults, then the config's `[policy]`, then the flags (`skip` values excepted).
pub(crate) fn approval_policy(args: &PolicyArgs, config: &LoadedConfig, skip: Option<&str>) -> Result<ApprovalPolicy> {
    let mut policy = ApprovalPolicy::default();
    let file = &config.config.policy;
    let name = config.path.as_ref().map_or_else(|| "config".to_owned(), |p| p.display().to_string());
    for (effect, value) in [
        (Effect::Pure, &file.pure),
        (Effect::Reads, &file.reads),
        (Effect::Writes, &file.writes),
        (Effect::Network, &file.network),
    ] {
        if let Some(v) = value {
            policy.set_class(effect, decision(config, &format!("policy.{}", effect.as_str()), v)?);
        }
    }
    for (tool, value) in &file.tools {
        if !tool.contains('.') {
            return Err(CliError::Usage(format!(
                "{name}: [policy.tools] {tool:?}: name a tool as \"plugin.tool\" or \"mcp_server.tool\""
            )));
        }
        policy.set_tool(tool, decision(config, &format!("policy.tools.{tool}"), value)?);
    }
    for (list, d) in [(&args.allow, Decision::Allow), (&args.ask, Decision::Ask), (&args.deny, Decision::Deny)] {
        for target in list.iter().filter(|t| Some(t.as_str()) != skip) {
            if Effect::parse(target).is_none() && !target.contains('.') {
                return Err(CliError::Usage(format!(
                    "--{} {target:?}: give an effect class (pure, reads, writes, network) or a tool as plugin.tool",
                    d.as_str()
                )));
            }
            apply(&mut policy, target, d);
        }
    }
    Ok(policy)
}
