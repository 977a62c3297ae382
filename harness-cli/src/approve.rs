//! The approval policy from `[policy]` and `--allow/--ask/--deny`, and the terminal prompt.

use std::io::{BufRead, IsTerminal, Write};

use clap::Args;
use harness_core::{Answer, ApprovalPolicy, Approvals, Approver, Decision, Effect, PendingCall, printable};
use harness_trace::cut;

use crate::Result;
use crate::config::LoadedConfig;
use crate::error::CliError;

/// Which calls run without asking, for this run.
#[derive(Debug, Args)]
pub(crate) struct PolicyArgs {
    /// Run calls of this effect class (pure, reads, writes, network) or tool (plugin.tool,
    /// mcp_server.tool) without asking; repeatable.
    #[arg(long, value_name = "CLASS|TOOL")]
    pub(crate) allow: Vec<String>,
    /// Ask before calls of this class or tool; repeatable.
    #[arg(long, value_name = "CLASS|TOOL")]
    pub(crate) ask: Vec<String>,
    /// Never run calls of this class or tool (call_denied); repeatable. `run --resume` also
    /// takes the pending call's ID, to deny that call.
    #[arg(long, value_name = "CLASS|TOOL|ID")]
    pub(crate) deny: Vec<String>,
}

fn decision(value: &str, source: &str) -> Result<Decision> {
    Decision::parse(value)
        .ok_or_else(|| CliError::Usage(format!("{source} = {value:?}: use \"allow\", \"ask\" or \"deny\"")))
}

fn apply(policy: &mut ApprovalPolicy, target: &str, decision: Decision) {
    match Effect::parse(target) {
        Some(effect) => policy.set_class(effect, decision),
        None => policy.set_tool(target, decision),
    }
}

/// The policy: defaults, then the config's `[policy]`, then the flags (`skip` values excepted).
pub(crate) fn policy(args: &PolicyArgs, config: &LoadedConfig, skip: Option<&str>) -> Result<ApprovalPolicy> {
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
            policy.set_class(effect, decision(v, &format!("{name}: policy.{}", effect.as_str()))?);
        }
    }
    for (tool, value) in &file.tools {
        if !tool.contains('.') {
            return Err(CliError::Usage(format!(
                "{name}: [policy.tools] {tool:?}: name a tool as \"plugin.tool\" or \"mcp_server.tool\""
            )));
        }
        policy.set_tool(tool, decision(value, &format!("{name}: policy.tools.{tool:?}"))?);
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

/// Asks on the terminal: the call, its arguments and effect; yes, no, or always for this run.
struct TerminalApprover;

impl Approver for TerminalApprover {
    fn ask(&mut self, call: &PendingCall) -> Answer {
        let arguments = printable(&cut(&call.arguments.to_string(), 400));
        // What was typed before the question was shown (or pushed into the terminal by a tool
        // that wrote to it) must not answer it.
        discard_typed_ahead();
        let mut err = std::io::stderr();
        let _ = write!(
            err,
            "harness: step {}: {} ({}) wants to run with {arguments}\n  allow it? [y]es / [n]o / [a]lways for this run: ",
            call.step,
            printable(&call.key),
            call.effect.as_str()
        );
        let _ = err.flush();
        let mut line = String::new();
        if std::io::stdin().lock().read_line(&mut line).unwrap_or(0) == 0 {
            return Answer::Later;
        }
        match line.trim().to_ascii_lowercase().as_str() {
            "y" | "yes" => Answer::Yes,
            "a" | "always" => Answer::Always,
            _ => Answer::No(None),
        }
    }
}

/// Discards input waiting on stdin when it is a terminal (`tcflush(0, TCIFLUSH)`); whether
/// anything was flushed is not knowable, whether the flush worked is returned.
#[cfg(unix)]
fn discard_typed_ahead() -> bool {
    // SAFETY: tcflush takes a descriptor and a constant and touches no memory of ours; on a
    // descriptor that is not a terminal it fails with ENOTTY, which is harmless here.
    unsafe { libc::tcflush(libc::STDIN_FILENO, libc::TCIFLUSH) == 0 }
}

/// Other platforms: nothing to discard with.
#[cfg(not(unix))]
fn discard_typed_ahead() -> bool {
    false
}

/// The approvals of a run: the policy, and a terminal prompt when both ends are terminals.
pub(crate) fn approvals(policy: ApprovalPolicy) -> Approvals {
    let terminal = std::io::stdin().is_terminal() && std::io::stderr().is_terminal();
    let approver: Option<Box<dyn Approver>> = if terminal { Some(Box::new(TerminalApprover)) } else { None };
    Approvals::new(policy, approver)
}
