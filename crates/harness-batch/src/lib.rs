//! Many agent runs from a JSON Lines file of requests: the batch engine behind `harness batch`,
//! for any program that wants to run a batch (a service, a test) without the binary.
//!
//! A batch reads its requests ([`input::read`]), cut into this worker's [`Shard`]; opens its
//! results file ([`ResultsFile::open`]), which says which requests already have a result, so a
//! rerun resumes; reads the operator's answers to the calls its runs stopped before
//! ([`read_answers`]); plans what to run ([`plan`]); and runs it through the loop, at most
//! `concurrency` at once, each call held to the approval policy, appending one result line per
//! run as it ends.
//!
//! ```no_run
//! # async fn example(registry: harness_core::ToolRegistry) -> Result<(), harness_batch::BatchError> {
//! use std::sync::Arc;
//! use harness_batch::{Answers, Batch, ResultsFile, Router, Scripts, Shard, Silent, input, plan};
//!
//! let input = input::read("requests.jsonl".as_ref(), Shard::ALL, Scripts::Required)?;
//! let (mut out, earlier) = ResultsFile::open("results.jsonl".as_ref())?;
//! let plan = plan(input.requests, &earlier, &Answers::default(), "results.jsonl".as_ref())?;
//! let batch = Arc::new(Batch::new(Router::Scripted(None), registry, Default::default()));
//! let tally = batch.run(plan.todo, 4, &mut out, &mut Silent).await?;
//! println!("{} finished", tally.finished);
//! # Ok(()) }
//! ```

#![forbid(unsafe_code)]

mod approvals;
mod engine;
mod error;
pub mod input;
mod merge;
pub mod names;
mod pace;
mod results;
mod shard;
mod tally;

pub use approvals::{Answered, Answers, read_answers};
pub use engine::{Batch, DefaultScript, Job, Observer, Plan, Router, Silent, SinkFactory, create_traces_dir, plan};
pub use error::{BatchError, Result};
pub use input::{BadLine, Input, Request, Scripts};
pub use merge::{MergeError, Merged, merge};
pub use results::{Awaiting, Earlier, ResultLine, ResultsFile};
pub use shard::{Shard, ShardSpec};
pub use tally::Tally;
