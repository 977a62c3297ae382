//! Many agent runs from a JSON Lines file of requests: the batch engine behind `harness batch`,
//! for any program that wants to run a batch (a service, a test) without the binary.
//!
//! A batch reads its requests ([`input::read`]), cut into this worker's [`Shard`]; opens its
//! results file ([`ResultsFile::open`]), which says which requests already have a result, so a
//! rerun resumes; and runs the rest through the loop, at most `concurrency` at once, appending
//! one result line per run as it ends.
//!
//! ```no_run
//! # async fn example(registry: harness_core::ToolRegistry) -> Result<(), harness_batch::BatchError> {
//! use std::sync::Arc;
//! use harness_batch::{Batch, ResultsFile, Router, Scripts, Shard, Silent, input, pending};
//!
//! let input = input::read("requests.jsonl".as_ref(), Shard::ALL, Scripts::Required)?;
//! let (mut out, earlier) = ResultsFile::open("results.jsonl".as_ref())?;
//! let todo = pending(input.requests, &earlier);
//! let batch = Arc::new(Batch::new(Router::Scripted(None), registry, Default::default()));
//! let tally = batch.run(todo, 4, &mut out, &mut Silent).await?;
//! println!("{} finished", tally.finished);
//! # Ok(()) }
//! ```

mod engine;
mod error;
pub mod input;
mod merge;
pub mod names;
mod pace;
mod results;
mod shard;
mod tally;

pub use engine::{Batch, DefaultScript, Observer, Router, Silent, SinkFactory, create_traces_dir, pending};
pub use error::{BatchError, Result};
pub use input::{BadLine, Input, Request, Scripts};
pub use merge::{MergeError, Merged, merge};
pub use results::{Earlier, ResultLine, ResultsFile};
pub use shard::{Shard, ShardSpec};
pub use tally::Tally;
