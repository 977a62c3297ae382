//! Calling the checked plugin: in this process on a thread with a deadline, or in a child.

use std::collections::{BTreeMap, HashMap};
use std::sync::mpsc;
use std::time::Duration;

use harness_abi::PluginModuleRef;
use harness_abi::abi_stable::std_types::{RResult, RStr};
use harness_abi::manifest::ToolError;
use harness_abi::manifest::{Effects, InitDeclined};
use harness_loader::LoadError;
use harness_loader::isolation::ProcessHandler;
use serde_json::Value;

/// How one call ended.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum CallOutcome {
    /// A result, parsed.
    Result(Value),
    /// A tool error: an ordinary outcome of a call.
    ToolError { code: String, message: String },
    /// The tool panicked; the SDK caught it.
    Panicked(String),
    /// The process running the tool died, or the call's thread vanished.
    Crashed(String),
    /// No answer within the limit.
    TimedOut(Duration),
    /// The result is not JSON.
    NotJson(String),
}

impl CallOutcome {
    /// The error code a harness run would report, `None` for a result.
    pub(crate) fn code(&self) -> Option<&str> {
        match self {
            Self::Result(_) => None,
            Self::ToolError { code, .. } => Some(code),
            Self::Panicked(_) => Some("tool_panicked"),
            Self::Crashed(_) => Some("tool_crashed"),
            Self::TimedOut(_) => Some("tool_timeout"),
            Self::NotJson(_) => Some("tool_error"),
        }
    }

    /// One line for messages.
    pub(crate) fn describe(&self) -> String {
        match self {
            Self::Result(v) => format!("returned {}", crate::generate::describe_value(v, 200)),
            Self::ToolError { code, message } => format!("failed with {code}: {message}"),
            Self::Panicked(m) => format!("panicked (tool_panicked): {m}"),
            Self::Crashed(m) => format!("crashed (tool_crashed): {m}"),
            Self::TimedOut(t) => format!("did not answer within {} ms (tool_timeout)", t.as_millis()),
            Self::NotJson(e) => format!("returned a result that is not JSON: {e}"),
        }
    }
}

/// Where calls go.
pub(crate) enum Caller {
    /// This process.
    InProcess { module: PluginModuleRef, max_result_bytes: usize },
    /// Plugin-host children, one per effect class, as a run places them.
    Process(Box<ProcessCalls>),
}

/// The children of a plugin whose calls run in process isolation: one per effect class of its
/// tools, each confined to its class, as a run confines them.
pub(crate) struct ProcessCalls {
    /// Each class's child.
    pub(crate) by_class: BTreeMap<Effects, ProcessHandler>,
    /// Each tool's class (the first declaration of a name).
    pub(crate) class_of: HashMap<String, Effects>,
}

impl ProcessCalls {
    fn handler(&self, tool: &str) -> Option<&ProcessHandler> {
        self.by_class.get(self.class_of.get(tool)?)
    }
}

/// Why a thread gave no answer.
enum Waited {
    TimedOut,
    Lost,
}

/// Runs `work` on a thread of its own and waits at most `timeout`; past it the thread is
/// abandoned (it cannot be stopped) and keeps running until it ends or the process does.
fn on_thread<T: Send + 'static>(timeout: Duration, work: impl FnOnce() -> T + Send + 'static) -> Result<T, Waited> {
    let (tx, rx) = mpsc::channel();
    let spawned = std::thread::Builder::new().name("harness-check-call".to_owned()).spawn(move || {
        let _ = tx.send(work());
    });
    if spawned.is_err() {
        return Err(Waited::Lost);
    }
    rx.recv_timeout(timeout).map_err(|e| match e {
        mpsc::RecvTimeoutError::Timeout => Waited::TimedOut,
        mpsc::RecvTimeoutError::Disconnected => Waited::Lost,
    })
}

fn tool_error(json: &str) -> CallOutcome {
    match serde_json::from_str::<ToolError>(json) {
        Ok(e) if e.code == "tool_panicked" => CallOutcome::Panicked(e.message),
        Ok(e) => CallOutcome::ToolError { code: e.code, message: e.message },
        Err(_) => CallOutcome::ToolError {
            code: "tool_error".to_owned(),
            message: format!(
                "the plugin returned an unreadable error: {}",
                crate::generate::describe_value(&Value::String(json.to_owned()), 200)
            ),
        },
    }
}

fn result_too_large(bytes: usize, limit: usize) -> CallOutcome {
    CallOutcome::ToolError {
        code: "result_too_large".to_owned(),
        message: format!("the result is {bytes} bytes, over the limit of {limit}"),
    }
}

impl Caller {
    /// Runs the plugin's `init`; the error is its reason.
    pub(crate) fn init(&self, config: &Value, timeout: Duration) -> Result<(), String> {
        match self {
            Self::InProcess { module, .. } => {
                let module = *module;
                let json = config.to_string();
                let outcome = on_thread(timeout, move || match (module.init())(RStr::from_str(&json)) {
                    RResult::ROk(()) => Ok(()),
                    RResult::RErr(e) => Err(e.into_string()),
                });
                match outcome {
                    Ok(Ok(())) => Ok(()),
                    Ok(Err(e)) => Err(match InitDeclined::from_init_error(&e) {
                        Some(declined) => LoadError::Declined(declined).to_string(),
                        None => format!("init failed: {e}"),
                    }),
                    Err(Waited::TimedOut) => Err(format!("init did not return within {} s", timeout.as_secs())),
                    Err(Waited::Lost) => Err("init's thread ended without an answer".to_owned()),
                }
            }
            Self::Process(calls) => {
                // Each child loads the library and runs `init` when it starts, without any call.
                calls.by_class.values().try_for_each(|handler| handler.prestart(Some(timeout))).map_err(|f| {
                    // "the plugin host could not start NAME: init failed: ...": the same
                    // reason as in this process, without the wrapping.
                    f.message
                        .strip_prefix("the plugin host could not start ")
                        .and_then(|rest| rest.split_once(": "))
                        .map_or_else(|| f.message.clone(), |(_, reason)| reason.to_owned())
                })
            }
        }
    }

    /// Calls one tool with arguments that passed validation.
    pub(crate) fn call(&self, tool: &str, arguments: &Value, timeout: Duration) -> CallOutcome {
        match self {
            Self::InProcess { module, max_result_bytes } => {
                let (module, limit) = (*module, *max_result_bytes);
                let (tool, arguments) = (tool.to_owned(), arguments.to_string());
                let outcome = on_thread(timeout, move || {
                    match (module.call())(RStr::from_str(&tool), RStr::from_str(&arguments)) {
                        RResult::ROk(json) if json.len() > limit => Err(Ok(json.len())),
                        RResult::ROk(json) => Ok(json.into_string()),
                        RResult::RErr(json) => Err(Err(json.into_string())),
                    }
                });
                match outcome {
                    Ok(Ok(json)) => match serde_json::from_str(&json) {
                        Ok(v) => CallOutcome::Result(v),
                        Err(e) => CallOutcome::NotJson(e.to_string()),
                    },
                    Ok(Err(Ok(bytes))) => result_too_large(bytes, limit),
                    Ok(Err(Err(json))) => tool_error(&json),
                    Err(Waited::TimedOut) => CallOutcome::TimedOut(timeout),
                    Err(Waited::Lost) => CallOutcome::Crashed("the call's thread ended without an answer".to_owned()),
                }
            }
            Self::Process(calls) => match calls.handler(tool).map_or_else(
                || {
                    Err(harness_core::ToolFailure {
                        code: "tool_crashed".to_owned(),
                        message: format!("no plugin process hosts {tool:?}"),
                    })
                },
                |handler| handler.call_with_timeout(tool, arguments, Some(timeout)),
            ) {
                Ok(v) => CallOutcome::Result(v),
                Err(f) => match f.code.as_str() {
                    "tool_panicked" => CallOutcome::Panicked(f.message),
                    "tool_crashed" => CallOutcome::Crashed(f.message),
                    "tool_timeout" => CallOutcome::TimedOut(timeout),
                    // The loader reports a result that is not JSON as a tool error; this is its
                    // wording (harness-loader's handler.rs).
                    "tool_error" if f.message.contains("returned a result that is not JSON") => {
                        CallOutcome::NotJson(f.message)
                    }
                    _ => CallOutcome::ToolError { code: f.code, message: f.message },
                },
            },
        }
    }
}
