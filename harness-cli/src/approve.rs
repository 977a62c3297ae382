//! The policy flags (`--allow/--ask/--deny`, laid over `[policy]` in crate::settings), and the
//! terminal prompt.

use std::io::{BufRead, IsTerminal, Write};

use clap::Args;
use harness_core::{Answer, ApprovalPolicy, Approvals, Approver, PendingCall, printable};
use harness_trace::cut;

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
