//! The runs themselves: a queue of requests, at most `concurrency` through the loop at once,
//! each result appended to the results file as its run ends.

use std::collections::VecDeque;
use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use harness_core::{
    ErrorCode, HarnessError, ModelProvider, RunAbout, RunOptions, RunOutcome, RunStatus, ToolRegistry, TraceSink,
    TraceWriter, Usage, run_traced,
};
use harness_providers::ScriptedProvider;
use harness_trace::Tee;
use serde_json::json;
use tokio::sync::mpsc;

use crate::error::{BatchError, Result};
use crate::input::Request;
use crate::names::trace_file_name;
use crate::pace::{Pace, Paced};
use crate::results::{Earlier, ResultLine, ResultsFile};
use crate::shard::Shard;
use crate::tally::Tally;

/// A `--script` file every run without a script of its own replays: its name and its text.
#[derive(Debug, Clone)]
pub struct DefaultScript {
    /// The file's name, for messages.
    pub name: String,
    /// Its JSON Lines text, checked when it was read.
    pub text: String,
}

impl DefaultScript {
    /// Reads and checks a script file once; every run then replays it from its start.
    pub fn read(path: &Path) -> Result<Self> {
        let name = path.display().to_string();
        let text =
            std::fs::read_to_string(path).map_err(|source| BatchError::ReadScript { path: path.to_owned(), source })?;
        ScriptedProvider::from_jsonl(&name, &text).map_err(|e| BatchError::BadScript(e.to_string()))?;
        Ok(Self { name, text })
    }
}

/// Who answers each run.
pub enum Router {
    /// One provider (and its HTTP client) for every run.
    Shared(Box<dyn ModelProvider>),
    /// The scripted provider: each run replays its own line's script, or this one, from its start.
    Scripted(Option<DefaultScript>),
}

/// What a batch reports while it runs (a progress bar, log lines, or nothing).
pub trait Observer {
    /// A run ended and was counted.
    fn ran(&mut self, tally: &Tally);
    /// A second went by.
    fn tick(&mut self, tally: &Tally);
}

/// An observer that shows nothing.
#[derive(Debug, Default)]
pub struct Silent;

impl Observer for Silent {
    fn ran(&mut self, _: &Tally) {}
    fn tick(&mut self, _: &Tally) {}
}

/// Makes one more receiver of each run's trace records (an OpenTelemetry exporter's sink).
pub type SinkFactory = Box<dyn Fn() -> Box<dyn TraceSink> + Send + Sync>;

/// What every run of a batch shares: who answers, the tools, the limits, where traces go.
pub struct Batch {
    router: Router,
    registry: ToolRegistry,
    options: RunOptions,
    traces: Option<PathBuf>,
    pace: Option<Pace>,
    about: RunAbout,
    also: Option<SinkFactory>,
    fingerprint: String,
    shard: Option<String>,
}

/// A run that ended.
struct Done {
    request: Request,
    outcome: RunOutcome,
    duration: Duration,
    trace: Option<PathBuf>,
}

/// The requests of `requests` that have no result line yet, in order.
pub fn pending(requests: Vec<Request>, earlier: &Earlier) -> VecDeque<Request> {
    requests.into_iter().filter(|r| !earlier.done.contains(&r.key)).collect()
}

/// Creates the directory each run's trace goes to.
pub fn create_traces_dir(dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(|source| BatchError::TracesDir { path: dir.to_owned(), source })
}

impl Batch {
    /// A batch whose runs are answered by `router`, with `registry`'s tools and `options`' limits.
    pub fn new(router: Router, registry: ToolRegistry, options: RunOptions) -> Self {
        Self {
            router,
            registry,
            options,
            traces: None,
            pace: None,
            about: RunAbout::default(),
            also: None,
            fingerprint: String::new(),
            shard: None,
        }
    }

    /// What each trace's first line says about the program, the model and the configuration.
    pub fn with_about(mut self, about: RunAbout) -> Self {
        self.about = about;
        self
    }

    /// Hands each run's records to a sink made by `factory` too, beside its trace file.
    pub fn with_sink(mut self, factory: SinkFactory) -> Self {
        self.also = Some(factory);
        self
    }

    /// Marks each result line with the requests file it came from (its [`Input::fingerprint`](crate::Input::fingerprint))
    /// and the shard this batch runs.
    pub fn with_source(mut self, fingerprint: String, shard: Shard) -> Self {
        self.fingerprint = fingerprint;
        self.shard = (shard.count > 1).then(|| shard.to_string());
        self
    }

    /// Writes each run's trace to `dir`/ID.jsonl (see [`trace_file_name`]); the directory must exist.
    pub fn with_traces(mut self, dir: PathBuf) -> Self {
        self.traces = Some(dir);
        self
    }

    /// At most `rpm` model requests a minute over the whole batch, spaced evenly.
    pub fn with_rpm(mut self, rpm: u32) -> Self {
        self.pace = Some(Pace::per_minute(rpm));
        self
    }

    /// Runs the queue with `concurrency` workers, appending each result to `out` as it arrives.
    pub async fn run(
        self: Arc<Self>,
        todo: VecDeque<Request>,
        concurrency: usize,
        out: &mut ResultsFile,
        observer: &mut dyn Observer,
    ) -> Result<Tally> {
        let mut tally = Tally::default();
        let queue = Arc::new(Mutex::new(todo));
        let (tx, mut rx) = mpsc::unbounded_channel();
        for _ in 0..concurrency {
            let (batch, queue, tx) = (self.clone(), queue.clone(), tx.clone());
            tokio::spawn(async move {
                loop {
                    let next = queue.lock().unwrap_or_else(PoisonError::into_inner).pop_front();
                    let Some(request) = next else { break };
                    if tx.send(batch.run_one(request).await).is_err() {
                        break;
                    }
                }
            });
        }
        drop(tx);
        let mut ticks = tokio::time::interval(Duration::from_secs(1));
        loop {
            tokio::select! {
                done = rx.recv() => {
                    let Some(done) = done else { return Ok(tally) };
                    self.record(&done, out, &mut tally)?;
                    observer.ran(&tally);
                }
                _ = ticks.tick() => observer.tick(&tally),
            }
        }
    }

    /// Appends a run's result line and counts it.
    fn record(&self, done: &Done, out: &mut ResultsFile, tally: &mut Tally) -> Result<()> {
        let duration_ms = (done.duration.as_secs_f64() * 1e6).round() / 1e3;
        let o = &done.outcome;
        out.append(&ResultLine {
            id: &done.request.id,
            status: o.status,
            answer: o.answer.as_ref(),
            steps: o.steps,
            usage: o.usage,
            error: o.error.as_ref(),
            duration_ms,
            retries: o.retries,
            trace: done.trace.as_deref(),
            batch: &self.fingerprint,
            line: done.request.line,
            shard: self.shard.as_deref(),
        })?;
        tally.add(o.status, duration_ms, o.usage, o.retries);
        Ok(())
    }

    /// One request through the loop.
    async fn run_one(&self, request: Request) -> Done {
        let started = Instant::now();
        let options = RunOptions { max_steps: request.max_steps.unwrap_or(self.options.max_steps), ..self.options };
        let trace_path = self.traces.as_ref().map(|dir| dir.join(trace_file_name(&request.key)));
        let mut sink = Tee::new();
        if let Some(factory) = &self.also {
            sink.push_boxed(factory());
        }
        match &trace_path {
            None => {}
            Some(path) => match File::create(path) {
                Ok(file) => sink.push(TraceWriter::new(BufWriter::new(file))),
                Err(e) => {
                    let error = HarnessError::new(
                        ErrorCode::TraceError,
                        format!("cannot create the trace file {}: {e}", path.display()),
                        json!({ "path": path.display().to_string() }),
                    );
                    return Done { request, outcome: failed(error), duration: started.elapsed(), trace: None };
                }
            },
        }
        let own_script;
        let provider: &dyn ModelProvider = match &self.router {
            Router::Shared(p) => p.as_ref(),
            Router::Scripted(default) => {
                let script = match (&request.script, default) {
                    (Some(text), _) => ScriptedProvider::from_jsonl(&format!("line {}", request.line), text),
                    (None, Some(d)) => ScriptedProvider::from_jsonl(&d.name, &d.text),
                    // Lines without a script were refused when the file was read.
                    (None, None) => ScriptedProvider::from_jsonl("(none)", ""),
                };
                match script {
                    Ok(s) => {
                        own_script = s;
                        &own_script
                    }
                    Err(e) => {
                        let error = HarnessError::new(ErrorCode::ProviderError, e.to_string(), json!({}));
                        return Done {
                            request,
                            outcome: failed(error),
                            duration: started.elapsed(),
                            trace: trace_path,
                        };
                    }
                }
            }
        };
        let paced;
        let provider = match &self.pace {
            Some(pace) => {
                paced = Paced { inner: provider, pace };
                &paced as &dyn ModelProvider
            }
            None => provider,
        };
        let outcome = run_traced(provider, &self.registry, &request.request, &options, &self.about, &mut sink).await;
        Done { request, outcome, duration: started.elapsed(), trace: trace_path }
    }
}

fn failed(error: HarnessError) -> RunOutcome {
    RunOutcome {
        status: RunStatus::Failed,
        answer: None,
        steps: 0,
        error: Some(error),
        usage: Usage::default(),
        retries: 0,
    }
}
