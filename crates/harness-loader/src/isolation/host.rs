//! The host side: one child per plugin, started on first use, replaced after a crash. Calls
//! from several runs (batch, MCP serve) queue for the one child; each waits at most until its
//! own deadline, and a call whose deadline passes in the queue never runs.

use std::path::PathBuf;
use std::sync::{Condvar, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use harness_abi::manifest::InitDeclined;
use harness_core::{ToolFailure, ToolHandler};
use harness_frames::{Request, Response};
use harness_sandbox::confine::Confinement;
use serde_json::Value;

use super::child::{InitRequest, LoadRequest, Loaded};
use super::conn::{Conn, ReadFail};
use super::{HostCommand, frame_limit};
use crate::handler::parse_result;
use crate::library::LoadError;
use crate::settings::Timeouts;

/// How long a child may take to load and initialise its library.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// The child, and whether a call has it.
#[derive(Default)]
struct Slot {
    busy: bool,
    conn: Option<Conn>,
}

/// Runs a plugin's tools in a child process; implements the core's `ToolHandler`.
pub struct ProcessHandler {
    plugin: String,
    load: LoadRequest,
    config: Value,
    command: HostCommand,
    /// Variables of the harness's environment its child gets beyond the allowlist.
    env: Vec<String>,
    /// Whether its child may start programs (`allow_exec`): on Windows, lifts the Job
    /// Object's one-process limit.
    may_exec: bool,
    timeouts: Timeouts,
    slot: Mutex<Slot>,
    free: Condvar,
    /// Why its `init` declined, when it did: the plugin is not configured, not broken.
    declined: OnceLock<InitDeclined>,
}

/// Gives the child back to the queue, even when the call panicked.
struct Turn<'a> {
    handler: &'a ProcessHandler,
    conn: Option<Conn>,
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        let mut slot = self.handler.lock();
        slot.busy = false;
        slot.conn = self.conn.take();
        drop(slot);
        self.handler.free.notify_one();
    }
}

fn failure(code: &str, message: String) -> ToolFailure {
    ToolFailure { code: code.to_owned(), message }
}

impl ProcessHandler {
    /// A handler for the plugin `plugin` in library `path`, configured with `config`; its
    /// child is not confined unless [`Self::confined`] says how.
    pub fn new(
        plugin: &str,
        path: PathBuf,
        config: Value,
        command: HostCommand,
        max_result_bytes: usize,
        timeouts: Timeouts,
    ) -> Self {
        Self {
            plugin: plugin.to_owned(),
            load: LoadRequest { path, confinement: None, max_result_bytes, raw: false, limits: Default::default() },
            config,
            command,
            env: Vec::new(),
            may_exec: false,
            timeouts,
            slot: Mutex::new(Slot::default()),
            free: Condvar::new(),
            declined: OnceLock::new(),
        }
    }

    /// The same handler, its child confined by `confinement` before it loads the library.
    pub fn confined(mut self, confinement: Confinement) -> Self {
        self.load.confinement = Some(confinement);
        self
    }

    /// The same handler, its child held to `limits` (set before it loads the library).
    pub fn limited(mut self, limits: harness_sandbox::Limits) -> Self {
        self.load.limits = limits;
        self
    }

    /// The same handler, its child given the variables `names` (those set) besides the
    /// allowlist: `[plugins.NAME] env`.
    pub fn passing_env(mut self, names: Vec<String>) -> Self {
        self.env = names;
        self
    }

    /// The same handler, its child allowed to start programs (`[plugins.NAME] allow_exec`
    /// names some): on Windows its Job Object then holds more than one process.
    pub fn allowing_exec(mut self, may_exec: bool) -> Self {
        self.may_exec = may_exec;
        self
    }

    /// The same handler, its child hosting the library whatever rule its manifest breaks:
    /// for `plugins check`, which reports the rule in its own check and still calls the tools.
    pub fn rules_unchecked(mut self) -> Self {
        self.load.raw = true;
        self
    }

    fn lock(&self) -> MutexGuard<'_, Slot> {
        self.slot.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Waits for the child to be free, until `deadline`; `None` when the deadline passed first.
    fn take_turn(&self, deadline: Option<Instant>) -> Option<Turn<'_>> {
        let mut slot = self.lock();
        while slot.busy {
            slot = match deadline {
                None => self.free.wait(slot).unwrap_or_else(PoisonError::into_inner),
                Some(d) => {
                    let left = d.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return None;
                    }
                    self.free.wait_timeout(slot, left).unwrap_or_else(PoisonError::into_inner).0
                }
            };
        }
        // Woken as the slot came free at or after the deadline: the call never runs (no child
        // is started for it only to be killed), and the wake-up goes on to the next waiter.
        if deadline.is_some_and(|d| Instant::now() >= d) {
            drop(slot);
            self.free.notify_one();
            return None;
        }
        slot.busy = true;
        let conn = slot.conn.take();
        Some(Turn { handler: self, conn })
    }

    /// Starts a child, confines it, loads and initialises the library, by `deadline`.
    fn start(&self, deadline: Instant) -> Result<Conn, ToolFailure> {
        let crashed = |m: String| failure("tool_crashed", m);
        let label = format!("plugin {}", self.plugin);
        let limit = frame_limit(self.load.max_result_bytes);
        let mut conn = Conn::spawn(&self.command, limit, label, &self.env, self.may_exec).map_err(|e| {
            crashed(format!(
                "cannot start the plugin host for {} ({}): {e}",
                self.plugin,
                self.command.program.display()
            ))
        })?;
        let loaded = match conn.load(&self.load, deadline) {
            Ok(loaded) => loaded,
            Err(ReadFail::Timeout) => {
                let how = conn.end();
                return Err(failure(
                    "tool_timeout",
                    format!("the plugin host for {} did not load it in time ({how})", self.plugin),
                ));
            }
            Err(_) => {
                let how = conn.end();
                return Err(crashed(format!("the plugin host for {} died while loading it: {how}", self.plugin)));
            }
        };
        if let Loaded::Refused { reason, .. } = loaded {
            return Err(failure("tool_error", format!("the plugin host could not load {}: {reason}", self.plugin)));
        }
        let init = serde_json::to_vec(&InitRequest { config: self.config.clone() }).unwrap_or_default();
        let outcome = match conn.send(&Request::Init { json: &init }) {
            Err(_) => Err(None),
            Ok(()) => match conn.read_response(Some(deadline)) {
                Ok(Response::Ok(_)) => Ok(()),
                Ok(Response::Fatal(m)) => Err(Some(format!("the plugin host could not start {}: {m}", self.plugin))),
                Ok(Response::Declined(json)) => Err(Some(self.decline(json))),
                Ok(Response::ToolError(_)) => Err(Some("the plugin host answered init with a tool error".to_owned())),
                Err(_) => Err(None),
            },
        };
        match outcome {
            Ok(()) => Ok(conn),
            Err(Some(m)) => Err(failure("tool_error", m)),
            Err(None) => {
                let how = conn.end();
                Err(crashed(format!("the plugin host for {} died at start: {how}", self.plugin)))
            }
        }
    }

    /// Keeps the reason of a child whose `init` declined; the failure's message.
    fn decline(&self, json: &[u8]) -> String {
        let Ok(declined) = serde_json::from_slice::<InitDeclined>(json) else {
            return format!("the plugin host could not start {}: an unreadable decline", self.plugin);
        };
        let message =
            format!("the plugin host could not start {}: {}", self.plugin, LoadError::Declined(declined.clone()));
        // A child started again declines for the same reason: the first one is kept.
        let _ = self.declined.set(declined);
        message
    }

    /// Why its `init` declined, when a start found that it does: the plugin needs configuring.
    pub fn declined(&self) -> Option<&InitDeclined> {
        self.declined.get()
    }

    /// Starts the child now rather than at the first call, so that a library that cannot
    /// load or initialise is known before a run begins; it may take `within` (30 s if `None`).
    pub fn prestart(&self, within: Option<Duration>) -> Result<(), ToolFailure> {
        let Some(mut turn) = self.take_turn(None) else {
            return Err(failure("tool_crashed", "the plugin host is gone".to_owned()));
        };
        if turn.conn.is_none() {
            turn.conn = Some(self.start(Instant::now() + within.unwrap_or(START_TIMEOUT))?);
        }
        Ok(())
    }

    /// The earlier of the caller's deadline and the tool's own timeout from now.
    fn deadline_of(&self, tool: &str, deadline: Option<Instant>) -> Option<Instant> {
        let own = self.timeouts.of(tool).map(|t| Instant::now() + t);
        match (deadline, own) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Calls a tool in the child; at `timeout` the child is killed and the call is `tool_timeout`.
    pub fn call_with_timeout(
        &self,
        tool: &str,
        arguments: &Value,
        timeout: Option<Duration>,
    ) -> Result<Value, ToolFailure> {
        self.call_until(tool, arguments, timeout.map(|t| Instant::now() + t))
    }

    /// Calls a tool in the child, ended at `deadline`: queued past it, the call never runs;
    /// running past it, the child is killed. Either way the call is `tool_timeout`.
    fn call_until(&self, tool: &str, arguments: &Value, deadline: Option<Instant>) -> Result<Value, ToolFailure> {
        let asked = Instant::now();
        let Some(mut turn) = self.take_turn(deadline) else {
            return Err(failure(
                "tool_timeout",
                format!(
                    "{tool:?} waited {} ms for its plugin process, busy with other calls, and was cancelled at its deadline; it never ran",
                    asked.elapsed().as_millis()
                ),
            ));
        };
        let conn = match turn.conn.as_mut() {
            Some(conn) => conn,
            None => {
                let by = deadline.unwrap_or_else(|| Instant::now() + START_TIMEOUT);
                turn.conn.insert(self.start(by).map_err(|f| never_started(tool, asked, deadline.is_some(), f))?)
            }
        };
        let arguments = arguments.to_string();
        let outcome = match conn.send(&Request::Call { tool, arguments: arguments.as_bytes() }) {
            Err(_) => Err(ReadFail::Closed),
            Ok(()) => match conn.read_response(deadline) {
                Ok(Response::Ok(json)) => Ok(parse_result(&self.plugin, json, self.load.max_result_bytes)),
                Ok(Response::ToolError(json)) => Ok(Err(tool_error(json))),
                Ok(Response::Fatal(m)) => Err(ReadFail::Protocol(m.to_owned())),
                Ok(Response::Declined(_)) => Err(ReadFail::Protocol("a decline in answer to a call".to_owned())),
                Err(fail) => Err(fail),
            },
        };
        let fail = match outcome {
            Ok(result) => return result,
            Err(fail) => fail,
        };
        let how = turn.conn.take().map_or_else(|| "it is gone".to_owned(), Conn::end);
        Err(match fail {
            ReadFail::Timeout => failure(
                "tool_timeout",
                format!(
                    "{tool:?} did not answer within {} ms; its process was killed and the next call starts a fresh one",
                    asked.elapsed().as_millis()
                ),
            ),
            ReadFail::Closed => failure(
                "tool_crashed",
                format!("{tool:?} crashed its plugin process ({how}); the next call starts a fresh one"),
            ),
            ReadFail::Io(e) => failure(
                "tool_crashed",
                format!(
                    "reading from the plugin process of {tool:?} failed ({e}; {how}); the next call starts a fresh one"
                ),
            ),
            ReadFail::Protocol(m) => failure(
                "tool_crashed",
                format!(
                    "the plugin process of {tool:?} broke the protocol ({m}; {how}); the next call starts a fresh one"
                ),
            ),
        })
    }
}

/// A call whose turn came with no child and whose child did not start: it never ran. Said in
/// the call's own terms, because the start's message names only the plugin, and a start cut
/// short by the call's deadline (its turn came moments before it) is not a slow library. A
/// call with no deadline of its own waited only for the start's own limit.
fn never_started(tool: &str, asked: Instant, had_deadline: bool, start: ToolFailure) -> ToolFailure {
    let why = if had_deadline && start.code == "tool_timeout" {
        format!(
            "was cancelled at its deadline, {} ms after it was asked, while its plugin process was still starting",
            asked.elapsed().as_millis()
        )
    } else {
        "could not start its plugin process".to_owned()
    };
    failure(&start.code, format!("{tool:?} {why}; it never ran ({})", start.message))
}

fn tool_error(json: &[u8]) -> ToolFailure {
    serde_json::from_slice::<harness_abi::manifest::ToolError>(json)
        .map(|e| ToolFailure { code: e.code, message: e.message })
        .unwrap_or_else(|_| failure("tool_error", "the plugin host sent an unreadable error".to_owned()))
}

impl ToolHandler for ProcessHandler {
    fn call(&self, tool: &str, arguments: &Value) -> Result<Value, ToolFailure> {
        self.call_until(tool, arguments, self.deadline_of(tool, None))
    }

    fn call_by(&self, tool: &str, arguments: &Value, deadline: Option<Instant>) -> Result<Value, ToolFailure> {
        self.call_until(tool, arguments, self.deadline_of(tool, deadline))
    }

    fn enforces_timeout(&self) -> bool {
        true
    }

    // It waits on its child's pipe (poll(2), or a channel on Windows), never on the async runtime.
    fn may_run_inline(&self) -> bool {
        true
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use serde_json::json;

    fn handler(program: &str, args: &[&str]) -> ProcessHandler {
        let command = HostCommand { program: program.into(), args: args.iter().map(Into::into).collect() };
        ProcessHandler::new("slow", PathBuf::from("libslow.so"), Value::Null, command, 1 << 20, Timeouts::default())
    }

    #[test]
    fn a_call_whose_process_is_still_starting_at_its_deadline_never_ran_and_says_so() {
        // `sleep` reads no request and answers none: a child that never finishes starting.
        let slow = handler("sleep", &["30"]);
        let fail = slow.call_with_timeout("note", &json!({}), Some(Duration::from_millis(200))).unwrap_err();
        assert_eq!(fail.code, "tool_timeout");
        assert!(fail.message.starts_with("\"note\" was cancelled at its deadline"), "{}", fail.message);
        assert!(
            fail.message.contains("it never ran (the plugin host for slow did not load it in time"),
            "{}",
            fail.message
        );
    }

    #[test]
    fn a_call_whose_process_cannot_start_never_ran_and_says_so() {
        let missing = handler("/nonexistent/harness-host", &[]);
        let fail = missing.call("note", &json!({})).unwrap_err();
        assert_eq!(fail.code, "tool_crashed");
        assert!(
            fail.message.starts_with("\"note\" could not start its plugin process; it never ran"),
            "{}",
            fail.message
        );
        assert!(fail.message.contains("/nonexistent/harness-host"), "{}", fail.message);
    }
}
