//! `fault`: tools that misbehave on purpose, for tests of error handling and for benchmarks.
//!
//! The plugin is test-only: the harness loads it only when an operator enables it by name.
//! `fault_abort` ends the whole process when run in-process; that is its point.

use std::time::Duration;

use harness_sdk::schemars::JsonSchema;
use harness_sdk::serde::Deserialize;
use harness_sdk::serde_json::{Value, json};
use harness_sdk::{Effects, NoConfig, Plugin, Tool, ToolError};

/// Arguments of `fault_echo`.
#[derive(Deserialize, JsonSchema)]
#[serde(crate = "harness_sdk::serde", deny_unknown_fields)]
#[schemars(crate = "harness_sdk::schemars")]
pub struct EchoArgs {
    /// Any JSON value; it is returned unchanged.
    pub value: Value,
}

/// Arguments of `fault_panic`.
#[derive(Deserialize, JsonSchema)]
#[serde(crate = "harness_sdk::serde", deny_unknown_fields)]
#[schemars(crate = "harness_sdk::schemars")]
pub struct PanicArgs {
    /// The panic message.
    pub message: String,
}

/// Arguments of `fault_abort`: none.
#[derive(Deserialize, JsonSchema)]
#[serde(crate = "harness_sdk::serde", deny_unknown_fields)]
#[schemars(crate = "harness_sdk::schemars")]
pub struct NoArgs {}

/// Arguments of `fault_sleep`.
#[derive(Deserialize, JsonSchema)]
#[serde(crate = "harness_sdk::serde", deny_unknown_fields)]
#[schemars(crate = "harness_sdk::schemars")]
pub struct SleepArgs {
    /// How long to sleep, in milliseconds (at most ten minutes).
    #[schemars(range(max = 600_000))]
    pub ms: u64,
}

/// Arguments of `fault_big`.
#[derive(Deserialize, JsonSchema)]
#[serde(crate = "harness_sdk::serde", deny_unknown_fields)]
#[schemars(crate = "harness_sdk::schemars")]
pub struct BigArgs {
    /// Size of the string returned, in bytes (at most 256 MiB).
    #[schemars(range(max = 268_435_456))]
    pub bytes: u64,
}

/// Arguments of `fault_exit`.
#[derive(Deserialize, JsonSchema)]
#[serde(crate = "harness_sdk::serde", deny_unknown_fields)]
#[schemars(crate = "harness_sdk::schemars")]
pub struct ExitArgs {
    /// The exit status.
    pub code: i32,
}

/// What `fault_misreport` declares it returns (and returns only when asked to).
#[derive(harness_sdk::serde::Serialize, JsonSchema)]
#[serde(crate = "harness_sdk::serde")]
#[schemars(crate = "harness_sdk::schemars")]
pub struct Count {
    /// A count.
    pub count: u64,
}

/// The `fault` plugin; it holds no state.
pub struct Fault;

impl Plugin for Fault {
    const NAME: &'static str = "fault";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const DESCRIPTION: &'static str = "Tools that misbehave on purpose, for tests and benchmarks.";
    const TEST_ONLY: bool = true;
    type Config = NoConfig;

    fn init(_: NoConfig) -> Result<Self, String> {
        Ok(Fault)
    }

    fn tools() -> Vec<Tool<Self>> {
        vec![
            Tool::new("fault_echo", "Return the value unchanged.", Effects::Pure, |_: &Fault, a: EchoArgs| {
                Ok::<_, ToolError>(a.value)
            })
            .example(json!({"value": {"a": [1, 2]}}), json!({"a": [1, 2]})),
            Tool::new(
                "fault_panic",
                "Panic with the message.",
                Effects::Pure,
                |_: &Fault, a: PanicArgs| -> Result<Value, ToolError> { panic!("{}", a.message) },
            )
            .example_error(json!({"message": "boom"}), "tool_panicked"),
            Tool::new(
                "fault_abort",
                "Abort the process (kills an in-process host).",
                Effects::Pure,
                |_: &Fault, _: NoArgs| -> Result<Value, ToolError> { std::process::abort() },
            ),
            Tool::new(
                "fault_segfault",
                "Dereference a null pointer (kills an in-process host with SIGSEGV).",
                Effects::Pure,
                |_: &Fault, _: NoArgs| -> Result<Value, ToolError> {
                    // SAFETY: none: this tool exists to crash with SIGSEGV, as a buggy native
                    // tool would. A volatile read keeps the compiler from removing it; the
                    // black_box hides the null from rustc 1.88's deny-by-default
                    // invalid_null_arguments lint, which would fail the build at the workspace's
                    // rust-version.
                    let null = std::hint::black_box(std::ptr::null::<u8>());
                    let byte = unsafe { std::ptr::read_volatile(null) };
                    Ok(json!(byte))
                },
            ),
            Tool::new(
                "fault_exit",
                "Exit the process with the status.",
                Effects::Pure,
                |_: &Fault, a: ExitArgs| -> Result<Value, ToolError> { std::process::exit(a.code) },
            ),
            Tool::new(
                "fault_sleep",
                "Sleep, then return how long it slept.",
                Effects::Pure,
                |_: &Fault, a: SleepArgs| {
                    std::thread::sleep(Duration::from_millis(a.ms));
                    Ok::<_, ToolError>(json!({ "slept_ms": a.ms }))
                },
            )
            .example(json!({"ms": 0}), json!({"slept_ms": 0})),
            Tool::new(
                "fault_misreport",
                "Declare a result of {\"count\": integer}, and return the value given, whatever it is.",
                Effects::Pure,
                |_: &Fault, a: EchoArgs| Ok::<_, ToolError>(a.value),
            )
            .output::<Count>()
            .example(json!({"value": {"count": 1}}), json!({"count": 1})),
            Tool::new("fault_big", "Return a string of the given size.", Effects::Pure, |_: &Fault, a: BigArgs| {
                let n = usize::try_from(a.bytes).map_err(|_| ToolError::tool_error("too big for this machine"))?;
                Ok::<_, ToolError>("x".repeat(n))
            })
            .example(json!({"bytes": 3}), json!("xxx")),
        ]
    }
}

harness_sdk::export_plugin!(Fault);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn echo_and_big() {
        let tools = Fault::tools();
        let echo = tools.iter().find(|t| t.manifest().name == "fault_echo").unwrap();
        assert_eq!(echo.call(&Fault, json!({"value": [1, "x"]})).unwrap(), json!([1, "x"]));
        let big = tools.iter().find(|t| t.manifest().name == "fault_big").unwrap();
        assert_eq!(big.call(&Fault, json!({"bytes": 5})).unwrap().as_str().unwrap().len(), 5);
    }

    #[test]
    fn panic_is_caught_at_the_boundary() {
        let runtime: harness_sdk::Runtime<Fault> = harness_sdk::Runtime::new();
        assert!(runtime.init_json("{}".into()).is_ok());
        let out = runtime.call_json("fault_panic".into(), r#"{"message":"boom"}"#.into());
        let err = out.unwrap_err();
        let err: harness_sdk::ToolError = harness_sdk::serde_json::from_str(err.as_str()).unwrap();
        assert_eq!(err.code, "tool_panicked");
        assert!(err.message.contains("boom"), "{}", err.message);
    }
}
