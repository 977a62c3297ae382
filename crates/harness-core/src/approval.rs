//! Approvals: the operator's say before a call with side effects runs.
//!
//! An [`ApprovalPolicy`] maps effect classes and individual tools to [`Decision`]s; the default
//! allows `pure` and `reads` and asks before `writes` and `network`. A call that needs asking
//! goes to the [`Approver`] (a terminal prompt); without one, the run stops cleanly before the
//! call with status `awaiting_approval`, and a later run resumes it with the operator's answer
//! given in advance ([`Approvals::decide`]).
//!
//! An answer given in advance is bound to the call as it was shown, not to its ID alone: IDs
//! come from the provider, or are `call_<step>` for calls read from text, and a trace edited
//! after the stop could put other arguments under the same ID. [`call_digest`] hashes the tool
//! and its canonical arguments; [`Approvals::bind`] holds a "yes" to that digest.

use std::collections::{HashMap, HashSet};

use serde::Serialize;
use serde_json::{Value, json};

use crate::error::{ErrorCode, HarnessError};

/// What a tool may do, as its source declares it (MCP tools: `network` unless configured):
/// the host's one effect type. A plugin declares `harness_abi::manifest::Effects`, the same
/// classes on the plugin's side of the ABI, which harness-loader converts to this at one
/// border (`effect_class` in its `register.rs`) when it registers the plugin's tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Effect {
    /// Computes from its arguments alone.
    Pure,
    /// Reads state outside the process.
    Reads,
    /// Changes state outside the process.
    Writes,
    /// Talks to the network.
    Network,
}

impl Effect {
    /// Every class, in order.
    pub const ALL: [Effect; 4] = [Effect::Pure, Effect::Reads, Effect::Writes, Effect::Network];

    /// The lowercase name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pure => "pure",
            Self::Reads => "reads",
            Self::Writes => "writes",
            Self::Network => "network",
        }
    }

    /// Parses the lowercase name.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|e| e.as_str() == name)
    }
}

/// What the policy says about a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// Run it.
    Allow,
    /// Ask the operator first.
    Ask,
    /// Never run it: `call_denied`.
    Deny,
}

impl Decision {
    /// Parses `allow`, `ask` or `deny`.
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "allow" => Some(Self::Allow),
            "ask" => Some(Self::Ask),
            "deny" => Some(Self::Deny),
            _ => None,
        }
    }

    /// The lowercase name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Allow => "allow",
            Self::Ask => "ask",
            Self::Deny => "deny",
        }
    }
}

/// Effect classes and tools (`plugin.tool`, `mcp_server.tool`) mapped to decisions; a tool's
/// own entry wins over its class.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalPolicy {
    classes: HashMap<Effect, Decision>,
    tools: HashMap<String, Decision>,
}

impl Default for ApprovalPolicy {
    /// Allows `pure` and `reads`; asks before `writes` and `network`.
    fn default() -> Self {
        let classes = HashMap::from([
            (Effect::Pure, Decision::Allow),
            (Effect::Reads, Decision::Allow),
            (Effect::Writes, Decision::Ask),
            (Effect::Network, Decision::Ask),
        ]);
        Self { classes, tools: HashMap::new() }
    }
}

impl ApprovalPolicy {
    /// Allows everything (library callers that govern calls themselves).
    pub fn allow_all() -> Self {
        Self { classes: Effect::ALL.into_iter().map(|e| (e, Decision::Allow)).collect(), tools: HashMap::new() }
    }

    /// Sets the decision for a whole class.
    pub fn set_class(&mut self, effect: Effect, decision: Decision) {
        self.classes.insert(effect, decision);
    }

    /// Sets the decision for one tool, named `plugin.tool` or `mcp_server.tool`.
    pub fn set_tool(&mut self, key: &str, decision: Decision) {
        self.tools.insert(key.to_owned(), decision);
    }

    /// The decision for a tool of `effect` known as `key`.
    pub fn decide(&self, key: &str, effect: Effect) -> Decision {
        self.tools.get(key).or_else(|| self.classes.get(&effect)).copied().unwrap_or(Decision::Ask)
    }

    /// Whether every call of `effect` is allowed whatever the tool: no tool has a decision of
    /// its own and the class is allowed. The loop asks this first, so that the usual step
    /// does not build the tool's policy key.
    pub fn allows_class_outright(&self, effect: Effect) -> bool {
        self.tools.is_empty() && self.classes.get(&effect) == Some(&Decision::Allow)
    }

    /// The decision for each class, in order.
    pub fn classes(&self) -> Vec<(Effect, Decision)> {
        Effect::ALL.into_iter().map(|e| (e, self.classes.get(&e).copied().unwrap_or(Decision::Ask))).collect()
    }
}

/// What an approval is bound to: SHA-256, lowercase hex, of the canonical JSON (compact, keys
/// sorted) of `{"arguments": ARGUMENTS, "tool": TOOL}`.
pub fn call_digest(tool: &str, arguments: &Value) -> String {
    let mut text = Vec::new();
    // Writing to a Vec cannot fail.
    let _ = crate::json_text::write_canonical(&mut text, &json!({ "tool": tool, "arguments": arguments }));
    crate::digest::sha256_hex(&text)
}

/// A call that waits for the operator.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PendingCall {
    /// The call's id, as the trace and `--json` show it: what `--approve ID` names.
    pub id: String,
    /// The tool's name as offered.
    pub tool: String,
    /// The tool as the policy names it: `plugin.tool` or `mcp_server.tool`.
    pub key: String,
    /// The arguments.
    pub arguments: Value,
    /// Its effect class.
    pub effect: Effect,
    /// The step it would run at.
    pub step: u32,
    /// [`call_digest`] of its tool and arguments: what an answer given in advance is bound to.
    pub digest: String,
}

/// The operator's answer to one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// Run this call.
    Yes,
    /// Run this call and every later call of the same tool in this run.
    Always,
    /// Do not run it; the reason, when given, is told to the model.
    No(Option<String>),
    /// No one can answer now: stop the run before the call.
    Later,
}

/// Asks the operator, for example on a terminal.
pub trait Approver: Send {
    /// The operator's answer to `call`.
    fn ask(&mut self, call: &PendingCall) -> Answer;
}

/// The policy, whoever answers `ask`, and the answers already given.
pub struct Approvals {
    policy: ApprovalPolicy,
    approver: Option<Box<dyn Approver>>,
    given: HashMap<String, Answer>,
    /// The digest of the call each "yes" given in advance was for, by call id.
    bound: HashMap<String, String>,
    always: HashSet<String>,
}

/// What happens to a call, once the policy and the operator have spoken.
pub(crate) enum Verdict {
    /// Run it.
    Run,
    /// Do not run it: the error fed back.
    Denied(HarnessError),
    /// Stop the run before it: the error that says which call waits.
    Wait(HarnessError),
}

impl Approvals {
    /// A policy, with `approver` answering its `ask`s (none: runs stop before such calls).
    pub fn new(policy: ApprovalPolicy, approver: Option<Box<dyn Approver>>) -> Self {
        Self { policy, approver, given: HashMap::new(), bound: HashMap::new(), always: HashSet::new() }
    }

    /// Every call runs.
    pub fn allow_all() -> Self {
        Self::new(ApprovalPolicy::allow_all(), None)
    }

    /// Gives the operator's answer to the call with id `id` in advance (`--approve`, `--deny`).
    pub fn decide(&mut self, id: &str, answer: Answer) {
        self.given.insert(id.to_owned(), answer);
    }

    /// Holds the answer given for `id` to the call whose [`call_digest`] is `digest`: a call
    /// under that id with another tool or other arguments is not run on it, but waits again
    /// (its error says that it changed since it was shown).
    pub fn bind(&mut self, id: &str, digest: &str) {
        self.bound.insert(id.to_owned(), digest.to_owned());
    }

    /// The policy.
    pub fn policy(&self) -> &ApprovalPolicy {
        &self.policy
    }

    /// Whether the operator already answered the call with this id (a resumed run's
    /// `--approve`/`--deny ID`, a batch's approvals file): the loop must not run it on the
    /// policy's word alone.
    pub(crate) fn answered(&self, id: &str) -> bool {
        !self.given.is_empty() && self.given.contains_key(id)
    }

    pub(crate) fn verdict(&mut self, call: &PendingCall) -> Verdict {
        // The operator's no to this very call wins over a policy that would run it (a run
        // resumed with --deny ID, or a batch's approvals file, under --allow writes).
        if let Some(Answer::No(_)) = self.given.get(&call.id)
            && let Some(Answer::No(reason)) = self.given.remove(&call.id)
        {
            return Verdict::Denied(denied(call, "the operator denied it", reason));
        }
        let answer = match self.policy.decide(&call.key, call.effect) {
            Decision::Allow => return Verdict::Run,
            Decision::Deny => return Verdict::Denied(denied(call, "the operator's policy denies it", None)),
            Decision::Ask if self.always.contains(&call.key) => return Verdict::Run,
            Decision::Ask if self.changed_since_shown(call) => {
                self.given.remove(&call.id);
                return Verdict::Wait(changed(call));
            }
            Decision::Ask => match self.given.remove(&call.id) {
                Some(answer) => answer,
                None => self.approver.as_mut().map_or(Answer::Later, |a| a.ask(call)),
            },
        };
        match answer {
            Answer::Yes => Verdict::Run,
            Answer::Always => {
                self.always.insert(call.key.clone());
                Verdict::Run
            }
            Answer::No(reason) => Verdict::Denied(denied(call, "the operator denied it", reason)),
            Answer::Later => Verdict::Wait(waiting(call)),
        }
    }
}

impl Approvals {
    /// Whether an answer was given for this call's id, bound to a call other than this one.
    fn changed_since_shown(&self, call: &PendingCall) -> bool {
        self.given.contains_key(&call.id) && self.bound.get(&call.id).is_some_and(|d| *d != call.digest)
    }
}

fn denied(call: &PendingCall, why: &str, reason: Option<String>) -> HarnessError {
    let told = reason.as_deref().map_or_else(String::new, |r| format!(": {r}"));
    HarnessError::new(
        ErrorCode::CallDenied,
        format!("the call to {:?} was not run: {why}{told}. Do something else, or finish", call.tool),
        json!({ "tool": call.tool, "effect": call.effect, "reason": reason }),
    )
}

fn waiting(call: &PendingCall) -> HarnessError {
    HarnessError::new(
        ErrorCode::AwaitingApproval,
        format!(
            // How to answer is the caller's to say (`harness run --resume`, a batch's approvals file).
            "the call {} to {:?} ({}) waits for the operator's approval; the run stopped before it",
            call.id,
            call.tool,
            call.effect.as_str(),
        ),
        json!({ "pending": call }),
    )
}

/// The operator approved `call.id`, but as another call: the trace was changed since.
fn changed(call: &PendingCall) -> HarnessError {
    HarnessError::new(
        ErrorCode::AwaitingApproval,
        format!(
            "the call {} to {:?} ({}) changed since it was shown to the operator (its tool or arguments differ from the call that was approved); it was not run and waits for approval again",
            call.id,
            call.tool,
            call.effect.as_str(),
        ),
        json!({ "pending": call, "changed_since_shown": true }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(key: &str, effect: Effect) -> PendingCall {
        let digest = call_digest("t", &json!({}));
        PendingCall {
            id: "c1".into(),
            tool: "t".into(),
            key: key.into(),
            arguments: json!({}),
            effect,
            step: 1,
            digest,
        }
    }

    #[test]
    fn the_default_asks_before_writes_and_network_and_tools_win_over_classes() {
        let mut policy = ApprovalPolicy::default();
        assert_eq!(policy.decide("files.read_file", Effect::Reads), Decision::Allow);
        assert_eq!(policy.decide("files.write_file", Effect::Writes), Decision::Ask);
        assert_eq!(policy.decide("peer.shout", Effect::Network), Decision::Ask);
        policy.set_tool("files.write_file", Decision::Allow);
        policy.set_class(Effect::Reads, Decision::Deny);
        assert_eq!(policy.decide("files.write_file", Effect::Writes), Decision::Allow);
        assert_eq!(policy.decide("files.read_file", Effect::Reads), Decision::Deny);
    }

    #[test]
    fn a_class_is_allowed_outright_only_when_no_tool_has_a_decision_of_its_own() {
        let mut policy = ApprovalPolicy::default();
        assert!(policy.allows_class_outright(Effect::Pure) && policy.allows_class_outright(Effect::Reads));
        assert!(!policy.allows_class_outright(Effect::Writes) && !policy.allows_class_outright(Effect::Network));
        policy.set_tool("files.read_file", Decision::Deny);
        assert!(!policy.allows_class_outright(Effect::Reads), "a tool's own decision must be looked up");
        assert_eq!(policy.decide("files.read_file", Effect::Reads), Decision::Deny);
    }

    #[test]
    fn answers_given_in_advance_and_always() {
        let mut a = Approvals::new(ApprovalPolicy::default(), None);
        assert!(matches!(a.verdict(&call("files.write_file", Effect::Writes)), Verdict::Wait(_)));
        a.decide("c1", Answer::No(Some("not today".into())));
        match a.verdict(&call("files.write_file", Effect::Writes)) {
            Verdict::Denied(e) => assert!(e.message.contains("not today") && e.code == ErrorCode::CallDenied),
            _ => panic!("denied"),
        }
        a.decide("c1", Answer::Always);
        assert!(matches!(a.verdict(&call("files.write_file", Effect::Writes)), Verdict::Run));
        assert!(matches!(a.verdict(&call("files.write_file", Effect::Writes)), Verdict::Run), "always");
    }

    #[test]
    fn a_no_to_a_call_wins_over_a_policy_that_allows_it() {
        let mut a = Approvals::allow_all();
        a.decide("c1", Answer::No(None));
        assert!(matches!(a.verdict(&call("files.write_file", Effect::Writes)), Verdict::Denied(_)));
        assert!(matches!(a.verdict(&call("files.write_file", Effect::Writes)), Verdict::Run), "used once");
    }

    #[test]
    fn the_digest_is_of_the_tool_and_canonical_arguments() {
        let a = call_digest("write_file", &json!({"path": "a", "content": {"y": 1, "x": [2, 3]}}));
        let b: Value = serde_json::from_str(r#"{"content": {"x": [2, 3], "y": 1}, "path": "a"}"#).unwrap();
        assert_eq!(a, call_digest("write_file", &b), "key order does not matter");
        assert_ne!(a, call_digest("write_file", &json!({"path": "b", "content": {"y": 1, "x": [2, 3]}})));
        assert_ne!(a, call_digest("read_file", &json!({"path": "a", "content": {"y": 1, "x": [2, 3]}})));
        // The canonical text, hashed: {"arguments":{},"tool":"t"}.
        assert_eq!(call_digest("t", &json!({})), crate::digest::sha256_hex(br#"{"arguments":{},"tool":"t"}"#));
    }

    #[test]
    fn a_yes_bound_to_another_call_does_not_run_it() {
        let shown = call("files.write_file", Effect::Writes);
        let mut edited = shown.clone();
        edited.arguments = json!({"path": "elsewhere"});
        edited.digest = call_digest(&edited.tool, &edited.arguments);
        let mut a = Approvals::new(ApprovalPolicy::default(), None);
        a.decide("c1", Answer::Yes);
        a.bind("c1", &shown.digest);
        match a.verdict(&edited) {
            Verdict::Wait(e) => assert_eq!(e.details["changed_since_shown"], true, "{}", e.message),
            _ => panic!("an edited call must not run"),
        }
        a.decide("c1", Answer::Yes);
        assert!(matches!(a.verdict(&shown), Verdict::Run), "the call as shown runs");
    }
}
