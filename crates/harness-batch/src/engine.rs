//! The runs themselves: a queue of requests, at most `concurrency` through the loop at once,
//! each held to the approval policy, each result appended to the results file as its run ends.

use std::collections::VecDeque;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use harness_core::{
    ApprovalPolicy, Approvals, ErrorCode, HarnessError, Loop, Message, ModelProvider, RunAbout, RunOptions, RunOutcome,
    RunStatus, ToolRegistry, TraceSink, TraceWriter, Usage,
};
use harness_providers::{Breaker, Guarded, ScriptedProvider};
use harness_trace::{Resumable, Tee};
use serde_json::json;
use tokio::sync::mpsc;

use crate::approvals::{Answered, Answers};
use crate::error::{BatchError, Result};
use crate::input::Request;
use crate::names::trace_file_name;
use crate::pace::{Pace, Paced};
use crate::results::{Awaiting, Earlier, ResultLine, ResultsFile};
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

/// What every run of a batch shares: who answers, the tools, the limits, the approval policy,
/// where traces go.
pub struct Batch {
    router: Router,
    registry: ToolRegistry,
    options: RunOptions,
    policy: ApprovalPolicy,
    traces: Option<PathBuf>,
    pace: Option<Pace>,
    about: RunAbout,
    also: Option<SinkFactory>,
    fingerprint: String,
    shard: Option<String>,
    breaker: Option<Breaker>,
}

/// A run that ended.
struct Done {
    request: Request,
    outcome: RunOutcome,
    duration: Duration,
    trace: Option<PathBuf>,
    /// A trace of the pending directory that the run's new trace replaces, removed once its
    /// result line is written.
    obsolete: Option<PathBuf>,
    /// The run was cut short by an outage that outlasted `--max-outage`: it gets no line, and
    /// runs again when the batch is resumed.
    unrun: bool,
    /// The run's time budget ran out while it waited out an outage: it runs again, from its
    /// start, rather than be marked for the outage.
    again: bool,
}

/// One run to make: a request from its start, or a run that stopped for approval, resumed.
pub struct Job {
    request: Request,
    resume: Option<Resume>,
}

impl From<Request> for Job {
    fn from(request: Request) -> Self {
        Self { request, resume: None }
    }
}

impl Job {
    /// The request.
    pub fn request(&self) -> &Request {
        &self.request
    }

    /// Whether the job resumes a run that stopped for approval.
    pub fn resumes(&self) -> bool {
        self.resume.is_some()
    }
}

/// A stopped run, read back from its trace, and the operator's answer to its pending call.
struct Resume {
    from: Resumable,
    source: PathBuf,
    answered: Answered,
}

/// What a batch is to do with this shard's requests.
pub struct Plan {
    /// The runs to make, in file order: requests without a result, and awaiting runs that have
    /// an answer.
    pub todo: VecDeque<Job>,
    /// Requests that have a result and are not run again.
    pub skipped: usize,
    /// Of those, runs that still await approval (no answer for them).
    pub waiting: usize,
}

/// Plans the batch: requests with no result line run from their start; requests whose latest
/// line awaits approval resume from their trace when `answers` answers them, and stay waiting
/// otherwise; the rest are done. `results` names the results file in messages.
pub fn plan(requests: Vec<Request>, earlier: &Earlier, answers: &Answers, results: &Path) -> Result<Plan> {
    let mut plan = Plan { todo: VecDeque::new(), skipped: 0, waiting: 0 };
    for request in requests {
        if !earlier.done.contains(&request.key) {
            plan.todo.push_back(request.into());
            continue;
        }
        plan.skipped += 1;
        let Some(waiting) = earlier.awaiting.get(&request.key) else { continue };
        match answers.by_id.get(&request.key) {
            Some(answered) => {
                let resume = read_resume(&request.key, waiting, answered, results)?;
                plan.skipped -= 1;
                plan.todo.push_back(Job { request, resume: Some(resume) });
            }
            None => plan.waiting += 1,
        }
    }
    Ok(plan)
}

/// Reads back the trace of an awaiting run to resume it with `answered`.
fn read_resume(id: &str, waiting: &Awaiting, answered: &Answered, results: &Path) -> Result<Resume> {
    let unresumable = |trace: &Path, problem: String| BatchError::Unresumable {
        results: results.to_owned(),
        line: waiting.line,
        id: id.to_owned(),
        trace: trace.to_owned(),
        problem,
    };
    let Some(source) = &waiting.trace else {
        return Err(unresumable(Path::new("(none)"), "its result line names no trace".to_owned()));
    };
    let trace = harness_trace::read(source).map_err(|e| unresumable(source, e.to_string()))?;
    let from = harness_trace::resumption(&trace).map_err(|e| unresumable(source, e.to_string()))?;
    if from.pending_id != answered.call {
        return Err(unresumable(
            source,
            format!(
                "the trace waits on call {}, the result line on {}",
                harness_core::printable(&from.pending_id),
                harness_core::printable(&answered.call)
            ),
        ));
    }
    Ok(Resume { from, source: source.clone(), answered: answered.clone() })
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
            policy: ApprovalPolicy::default(),
            traces: None,
            pace: None,
            about: RunAbout::default(),
            also: None,
            fingerprint: String::new(),
            shard: None,
            breaker: None,
        }
    }

    /// Waits out outages of the shared provider's server through `breaker`: while it is open
    /// no run starts and the runs in flight wait; past its limit the batch stops, and the runs
    /// it cut short get no line.
    pub fn with_breaker(mut self, breaker: Breaker) -> Self {
        self.breaker = Some(breaker);
        self
    }

    /// The breaker, when the batch has one: what it saw.
    pub fn breaker(&self) -> Option<&Breaker> {
        self.breaker.as_ref()
    }

    /// Holds every call to `policy` (by default: ask before `writes` and `network`). No one is
    /// asked during a batch: a run that reaches a call the policy asks about stops before it,
    /// `awaiting_approval`, and resumes when a later batch is given an answer ([`plan`]).
    pub fn with_policy(mut self, policy: ApprovalPolicy) -> Self {
        self.policy = policy;
        self
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
    /// The trace of a run that stops for approval is kept (in `--traces`' directory, or else in
    /// [`ResultsFile::pending_dir`]), so that it can resume.
    pub async fn run(
        self: Arc<Self>,
        todo: VecDeque<Job>,
        concurrency: usize,
        out: &mut ResultsFile,
        observer: &mut dyn Observer,
    ) -> Result<Tally> {
        let mut tally = Tally::default();
        let queue = Arc::new(Mutex::new(todo));
        let (tx, mut rx) = mpsc::unbounded_channel();
        let pending_dir = Arc::new(out.pending_dir());
        for _ in 0..concurrency {
            let (batch, queue, tx, pending_dir) = (self.clone(), queue.clone(), tx.clone(), pending_dir.clone());
            tokio::spawn(async move {
                loop {
                    if let Some(breaker) = &batch.breaker
                        && !breaker.ready().await
                    {
                        break;
                    }
                    let next = queue.lock().unwrap_or_else(PoisonError::into_inner).pop_front();
                    let Some(mut job) = next else { break };
                    let mut done = batch.run_one(job, &pending_dir).await;
                    // A run the outage kept past its time budget keeps its place: it runs again.
                    while done.again {
                        job = Job::from(done.request);
                        done = batch.run_one(job, &pending_dir).await;
                    }
                    if tx.send(done).is_err() {
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

    /// Appends a run's result line and counts it; a run cut short by the outage is only counted.
    fn record(&self, done: &Done, out: &mut ResultsFile, tally: &mut Tally) -> Result<()> {
        if done.unrun {
            tally.unrun += 1;
            if let Some(trace) = &done.trace {
                // It ends in a failure the run never had; the rerun writes it anew.
                let _ = std::fs::remove_file(trace);
            }
            return Ok(());
        }
        let duration_ms = (done.duration.as_secs_f64() * 1e6).round() / 1e3;
        let o = &done.outcome;
        let pending = o.error.as_ref().and_then(|e| e.details.get("pending"));
        out.append(&ResultLine {
            id: &done.request.id,
            status: o.status,
            answer: o.answer.as_ref(),
            steps: o.steps,
            usage: o.usage,
            error: o.error.as_ref(),
            duration_ms,
            retries: o.retries,
            pending,
            trace: done.trace.as_deref(),
            batch: &self.fingerprint,
            line: done.request.line,
            shard: self.shard.as_deref(),
        })?;
        tally.add(o.status, o.error.as_ref().map(|e| e.code), duration_ms, o.usage, o.retries);
        if let Some(path) = &done.obsolete {
            // Its content is in the new trace; one left behind (a failed removal) misleads no one,
            // as no result line names it any more.
            let _ = std::fs::remove_file(path);
        }
        Ok(())
    }

    /// One request through the loop, from its start or resumed.
    async fn run_one(&self, job: Job, pending_dir: &Path) -> Done {
        let started = Instant::now();
        let Job { request, resume } = job;
        let fresh = resume.is_none();
        let name = trace_file_name(&request.key);
        let done = |request, outcome, trace| Done {
            request,
            outcome,
            duration: started.elapsed(),
            trace,
            obsolete: None,
            unrun: false,
            again: false,
        };
        // A fresh run with --traces streams its trace to its file; any other run's trace is held
        // in memory until the run ends, then kept where it is needed (or dropped).
        let streamed = match (&self.traces, &resume) {
            (Some(dir), None) => Some(dir.join(&name)),
            _ => None,
        };
        let mut kept = Vec::new();
        for line in resume.iter().flat_map(|r| &r.from.kept_lines) {
            kept.extend_from_slice(line.as_bytes());
            kept.push(b'\n');
        }
        let mut memory = TraceWriter::new(kept);
        let mut sink = Tee::new();
        if let Some(factory) = &self.also {
            sink.push_boxed(factory());
        }
        match &streamed {
            None => sink.push(&mut memory),
            Some(path) => match harness_core::no_follow::create_file(path) {
                Ok(file) => sink.push(TraceWriter::new(BufWriter::new(file))),
                Err(e) => return done(request, failed(trace_error(path, &e)), None),
            },
        }
        let used = resume.as_ref().map_or(0, |r| replies_in(&r.from));
        let own = match self.own_script(&request, used) {
            Ok(own) => own,
            Err(error) => return done(request, failed(error), streamed),
        };
        let provider: &dyn ModelProvider = match (&self.router, &own) {
            (Router::Shared(p), _) => p.as_ref(),
            (Router::Scripted(_), Some(script)) => script,
            (Router::Scripted(_), None) => {
                let error = HarnessError::new(ErrorCode::ProviderError, "no script for this run", json!({}));
                return done(request, failed(error), streamed);
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
        let guarded = self.breaker.as_ref().map(|breaker| Guarded::new(provider, breaker));
        let provider = guarded.as_ref().map_or(provider, |g| g as &dyn ModelProvider);
        let options = RunOptions { max_steps: request.max_steps.unwrap_or(self.options.max_steps), ..self.options };
        let mut approvals = Approvals::new(self.policy.clone(), None);
        let (outcome, source) = match resume {
            Some(Resume { from, source, answered }) => {
                approvals.decide(&answered.call, answered.answer);
                // The call the operator approved is the one its result line showed (the
                // digest the approvals file named), not whatever the trace now says it was.
                approvals.bind(&answered.call, answered.digest.as_deref().unwrap_or(&from.pending_digest));
                let mut agent = Loop::new(provider, &self.registry).options(options).approvals(approvals);
                (agent.resume_traced(from.resumption, &mut sink).await, Some(source))
            }
            None => {
                let mut agent = Loop::new(provider, &self.registry).options(options).approvals(approvals);
                (agent.run_traced(&request.request, &self.about, &mut sink).await, None)
            }
        };
        drop(sink);
        let mut done = done(request, outcome, streamed.clone());
        done.unrun = guarded.as_ref().is_some_and(Guarded::stopped);
        done.again = fresh
            && done.outcome.status == RunStatus::TimeBudgetExhausted
            && guarded.as_ref().is_some_and(Guarded::waited);
        if streamed.is_none() {
            self.keep_trace(&mut done, memory.into_inner(), source, &name, pending_dir);
        }
        done
    }

    /// Keeps a trace held in memory where it is needed: a resumed run's in the traces directory
    /// or in place of the one it resumed from; a fresh run's in `pending` when it awaits
    /// approval. A trace that cannot be kept fails the run: it could not resume without it.
    fn keep_trace(&self, done: &mut Done, bytes: Vec<u8>, source: Option<PathBuf>, name: &str, pending: &Path) {
        let awaiting = done.outcome.status == RunStatus::AwaitingApproval;
        let path = match (&source, &self.traces) {
            (Some(_), Some(dir)) => dir.join(name),
            (Some(source), None) => source.clone(),
            (None, _) if awaiting => pending.join(name),
            (None, _) => return,
        };
        if let Err(e) = write_whole(&path, &bytes) {
            done.outcome.status = RunStatus::Failed;
            done.outcome.error = Some(trace_error(&path, &e));
            return;
        }
        done.obsolete = source.filter(|s| *s != path && s.parent() == Some(pending));
        done.trace = Some(path);
    }

    /// The scripted provider for this run: its own script or the default, the first `used`
    /// replies skipped (a resumed run's trace holds them). None with a shared provider.
    fn own_script(
        &self,
        request: &Request,
        used: usize,
    ) -> std::result::Result<Option<ScriptedProvider>, HarnessError> {
        let Router::Scripted(default) = &self.router else { return Ok(None) };
        let script = match (&request.script, default) {
            (Some(text), _) => ScriptedProvider::from_jsonl(&format!("line {}", request.line), text),
            (None, Some(d)) => ScriptedProvider::from_jsonl(&d.name, &d.text),
            // Lines without a script were refused when the file was read.
            (None, None) => ScriptedProvider::from_jsonl("(none)", ""),
        };
        let script = script.map_err(|e| HarnessError::new(ErrorCode::ProviderError, e.to_string(), json!({})))?;
        script.skip(used);
        Ok(Some(script))
    }
}

/// Replies the model gave before the run stopped: the assistant messages of its conversation.
fn replies_in(from: &Resumable) -> usize {
    from.resumption.conversation.iter().filter(|m| matches!(m, Message::Assistant { .. })).count()
}

/// Writes a whole file by way of a temporary one beside it, so that a kill midway leaves the
/// old file (a resumed run's source) as it was.
fn write_whole(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    harness_core::no_follow::replace_file(path, ".partial", bytes)
}

fn trace_error(path: &Path, e: &std::io::Error) -> HarnessError {
    HarnessError::new(
        ErrorCode::TraceError,
        format!("cannot write the trace file {}: {e}", path.display()),
        json!({ "path": path.display().to_string() }),
    )
}

fn failed(error: HarnessError) -> RunOutcome {
    RunOutcome {
        status: RunStatus::Failed,
        answer: None,
        steps: 0,
        error: Some(error),
        usage: Usage::default(),
        retries: 0,
        context: Default::default(),
    }
}
