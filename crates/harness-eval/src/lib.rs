//! Evals: is the agent's answer right? A tasks file ([`tasks::read`]) holds requests with what a
//! right answer is ([`Expect`]); each run's outcome (read back from a batch's results file, or
//! from answers produced elsewhere: [`outcome`]) is scored by strict, documented rules
//! ([`score`]), and the [`Report`] counts right/total per task, per tool and per number of steps,
//! as a table or JSON. Running the requests is the batch engine's job (`harness-batch`); this
//! crate only reads, scores and reports, so answers from another framework are scored by the
//! same rules.
#![forbid(unsafe_code)]

mod error;
pub mod expect;
pub mod numbers;
pub mod outcome;
mod report;
pub mod tasks;

pub use error::{BadLine, EvalError};
pub use expect::{Expect, Verdict, score};
pub use outcome::Outcome;
pub use report::{Group, Report, TaskReport};
pub use tasks::Task;
