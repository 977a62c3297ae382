//! A run's trace: its format ([`format`]), reading it back ([`read()`]), the sinks that
//! receive it ([`Tee`]), replay ([`replay()`]: the recorded replies as the router, every step
//! compared), and the text helpers that print it safely ([`printable`]).
//!
//! The loop (`harness_core::Loop::run_traced`) writes a first line (what was asked, with what), one
//! line per step (the model's whole reply, the call, its outcome) and a last line (how it
//! ended). Every receiver of those records is a [`harness_core::TraceSink`]: the JSON Lines
//! file and the OpenTelemetry exporter alike. docs/traces.md specifies the format.
//!
//! ```
//! let trace = harness_trace::parse(br#"{"step":1,"tool":"finish","arguments":{"answer":42},"status":"finished","result":42,"duration_us":5}"#);
//! assert_eq!(trace.lines.len(), 1);
//! assert!(matches!(trace.summary().ending, harness_trace::Ending::Finished(_)));
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod format;
mod otlp;
mod read;
mod replay;
mod resume;
mod sink;
mod text;

pub use format::{EndRecord, ErrorObject, ReplyRecord, RunStatus, StartRecord, Step, StepStatus, Tokens};
pub use otlp::{CAPTURE_CONTENT, Otlp, OtlpError, OtlpSettings, OtlpSink, OtlpSinks};
pub use read::{Ending, Line, Numbered, ReadError, Summary, Trace, parse, read};
pub use replay::{Drift, ReplayError, ReplayReport, ReplayRouter, ToolChange, UnreadLine, replay, replay_options};
pub use resume::{Resumable, ResumeError, resumption};
pub use sink::Tee;
pub use text::{brief, cut, printable};
