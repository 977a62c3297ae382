//! Stage benchmarks of the harness: `cargo bench -p harness-bench --bench stages`.
//!
//! Each group measures one stage through the crates' public API, on the inputs of
//! `harness_bench` (the same the Python reference uses). The plugin libraries are built with
//! `cargo build --release -p calc -p fault` on first use and loaded from `target/release`.
//! `docs/benchmarks.md` has the results and what each row includes.

use std::future::Future;
use std::hint::black_box;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::pin::pin;
use std::sync::{Arc, LazyLock};
use std::task::{Context, Poll, Waker};
use std::time::Instant;

use divan::Bencher;
use divan::counter::ItemsCount;
use harness_bench as fixtures;
use harness_core::{
    ModelProvider, ReadOptions, ReplyFormat, RouterRequest, RunOptions, StepStatus, ToolChoice, ToolDefinition,
    ToolFailure, ToolHandler, ToolRegistry, ToolSource, ToolSpec, TraceEntry, TraceSink, TraceWriter, read_reply,
};
use harness_loader::isolation::{HostCommand, ProcessHandler};
use harness_loader::{DiscoveryOptions, PluginHandler, PluginLibrary, Timeouts, discover};
use harness_providers::ScriptedProvider;
use harness_sandbox::confine::{Confinement, EffectSet, Grants};
use serde_json::{Value, json};

fn main() {
    divan::main();
}

/// The hidden first argument that makes `harness` a plugin host (harness-cli's `PLUGIN_HOST_MODE`).
const PLUGIN_HOST_MODE: &str = "__plugin-host";

/// The plugin libraries, built once and loaded once for the whole run, and the `harness`
/// executable (the plugin host of `process` isolation).
struct Plugins {
    calc_file: PathBuf,
    fault_file: PathBuf,
    harness: PathBuf,
    calc: Arc<PluginLibrary>,
    fault: Arc<PluginLibrary>,
}

static PLUGINS: LazyLock<Plugins> = LazyLock::new(|| {
    let built = fixtures::build_release();
    let load = |path: &PathBuf| {
        let path = path.canonicalize().expect("the plugin file exists");
        let library = PluginLibrary::load(&path).expect("the plugin loads");
        library.init(&json!({})).expect("the plugin initialises");
        Arc::new(library)
    };
    Plugins {
        calc: load(&built.calc),
        fault: load(&built.fault),
        calc_file: built.calc,
        fault_file: built.fault,
        harness: built.harness,
    }
});

/// Polls a future that never waits (the scripted provider's) to its end, without a runtime.
fn ready<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    match future.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(output) => output,
        Poll::Pending => panic!("the scripted provider never waits"),
    }
}

/// A tool that does nothing: the harness's own work is all that is left.
struct Noop;

impl ToolHandler for Noop {
    fn call(&self, _: &str, _: &Value) -> Result<Value, ToolFailure> {
        Ok(json!(42))
    }
}

fn plugin_definition(library: &PluginLibrary, tool: &str) -> ToolDefinition {
    let manifest = library.manifest();
    let t = manifest.tools.iter().find(|t| t.name == tool).expect("the plugin offers the tool");
    ToolDefinition {
        name: t.name.clone(),
        description: t.description.clone(),
        parameters: t.parameters.clone(),
        examples: Vec::new(),
        source: ToolSource::Plugin { name: manifest.name.clone(), version: manifest.version.clone() },
    }
}

/// The loader's default limit on a plugin's result, as discovery passes it to `PluginHandler`.
fn max_result_bytes() -> usize {
    DiscoveryOptions::default().max_result_bytes
}

/// `calculate` from the real calc library, with its manifest's schema, behind `PluginHandler`.
fn calc_registry() -> ToolRegistry {
    let calc = PLUGINS.calc.clone();
    let mut registry = ToolRegistry::new();
    let definition = plugin_definition(&calc, "calculate");
    registry
        .register(ToolSpec::new(definition, Arc::new(PluginHandler::new(calc, max_result_bytes()))))
        .expect("calculate registers");
    registry
}

/// `calculate` with the calc plugin's schema, answered in-process by [`Noop`]: no plugin, no
/// arithmetic; parse, check, dispatch and trace are what is measured.
fn noop_registry() -> ToolRegistry {
    let mut registry = ToolRegistry::new();
    let definition = plugin_definition(&PLUGINS.calc, "calculate");
    registry.register(ToolSpec::new(definition, Arc::new(Noop))).expect("calculate registers");
    registry
}

/// The floor: what the stages are compared with.
mod floor {
    use super::*;

    #[inline(never)]
    fn add_one(x: u64) -> u64 {
        x.wrapping_add(1)
    }

    /// A plain call through a function pointer the optimizer cannot see through.
    #[divan::bench]
    fn function_pointer_call(bencher: Bencher) {
        let f: fn(u64) -> u64 = black_box(add_one);
        bencher.bench(|| f(black_box(41)));
    }

    /// `serde_json` alone on the structured reply: text to `Value`.
    #[divan::bench]
    fn serde_json_structured_reply(bencher: Bencher) {
        bencher.bench(|| serde_json::from_str::<Value>(black_box(fixtures::STRUCTURED_LINE)).expect("parses"));
    }

    /// `serde_json` alone on the 1 KB `fault_echo` arguments: `Value` to text and back, the
    /// least any JSON call across a boundary pays once each way.
    #[divan::bench]
    fn serde_json_1kb_round_trip(bencher: Bencher) {
        let arguments = fixtures::echo_arguments(1024);
        bencher.bench(|| {
            let text = serde_json::to_string(black_box(&arguments)).expect("serializes");
            serde_json::from_str::<Value>(&text).expect("parses")
        });
    }

    /// A tokio `spawn_blocking` round trip on a current-thread runtime (as the CLI builds it):
    /// what the loop pays to run each tool call off the async thread, with nothing to run.
    #[divan::bench]
    fn tokio_spawn_blocking_round_trip(bencher: Bencher) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
        bencher.bench_local(|| {
            runtime.block_on(async { tokio::task::spawn_blocking(|| black_box(42)).await.expect("joins") })
        });
    }

    /// The same round trip on a runtime with the time driver only (no I/O driver): the
    /// runtime thread then parks on a futex instead of `epoll_wait` woken by an `eventfd`.
    #[divan::bench]
    fn tokio_spawn_blocking_round_trip_time_driver_only(bencher: Bencher) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build().expect("a runtime");
        bencher.bench_local(|| {
            runtime.block_on(async { tokio::task::spawn_blocking(|| black_box(42)).await.expect("joins") })
        });
    }

    /// `block_on` of a future that is ready at once: the runtime's own cost per step.
    #[divan::bench]
    fn tokio_block_on_ready(bencher: Bencher) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
        bencher.bench_local(|| runtime.block_on(async { black_box(42) }));
    }

    /// `serde_json` alone on the fenced reply: `str::find` the fence, then text to `Value`.
    #[divan::bench]
    fn serde_json_fenced_2kb(bencher: Bencher) {
        let text = fixtures::fenced_reply_2kb();
        bencher.bench(|| {
            let text = black_box(text.as_str());
            let start = text.find("```json\n").expect("a fence") + "```json\n".len();
            let end = start + text[start..].find("\n```").expect("a closing fence");
            serde_json::from_str::<Value>(&text[start..end]).expect("parses")
        });
    }
}

/// Reading a router reply's text into its calls (`harness_core::read_reply`). A structured
/// call's arguments are decoded inside the loop's step, measured by `step`.
mod parse {
    use super::*;

    /// A call in a ```json fence in the middle of 2 KB of prose (the JSON reader).
    #[divan::bench]
    fn fenced_call_in_2kb_prose(bencher: Bencher) {
        let text = fixtures::fenced_reply_2kb();
        let options = ReadOptions { format: ReplyFormat::Auto, truncated: false, tools: &[], forced: None };
        bencher.bench(|| {
            let read = read_reply(black_box(&text), &options);
            assert_eq!(read.calls.len(), 1, "the fixture holds one call");
            read
        });
    }
}

/// Arguments against a schema compiled once (`RegisteredTool::validate`).
mod validate {
    use super::*;

    fn registry() -> ToolRegistry {
        let mut registry = ToolRegistry::new();
        let definition = ToolDefinition {
            name: "search".into(),
            description: "d".into(),
            parameters: fixtures::seven_property_schema(),
            examples: Vec::new(),
            source: ToolSource::Builtin,
        };
        registry.register(ToolSpec::new(definition, Arc::new(Noop))).expect("the schema compiles");
        registry
    }

    /// Seven properties, all given and valid: the common case.
    #[divan::bench]
    fn seven_properties_valid(bencher: Bencher) {
        let registry = registry();
        let tool = registry.get("search").expect("registered");
        let arguments = fixtures::seven_property_arguments();
        bencher.bench(|| tool.validate(black_box(&arguments)).expect("valid"));
    }

    /// Four violations: every one collected with its pointer, and the error object built.
    #[divan::bench]
    fn seven_properties_four_violations(bencher: Bencher) {
        let registry = registry();
        let tool = registry.get("search").expect("registered");
        let arguments = fixtures::seven_property_bad_arguments();
        bencher.bench(|| tool.validate(black_box(&arguments)).expect_err("invalid"));
    }

    /// The floor: the compiled `jsonschema` validator's own yes/no answer, nothing collected.
    #[divan::bench]
    fn jsonschema_is_valid_floor(bencher: Bencher) {
        let validator = harness_core::compile_schema(&fixtures::seven_property_schema()).expect("compiles");
        let arguments = fixtures::seven_property_arguments();
        bencher.bench(|| validator.is_valid(black_box(&arguments)));
    }

    /// What registration pays once per tool: compiling the schema.
    #[divan::bench]
    fn compile_schema_once(bencher: Bencher) {
        let schema = fixtures::seven_property_schema();
        bencher.bench(|| harness_core::compile_schema(black_box(&schema)).expect("compiles"));
    }
}

/// One call across the ABI into a loaded plugin, in-process.
mod abi {
    use super::*;

    /// `fault_echo` with 1 KB of arguments, JSON text in and out (`PluginLibrary::call`):
    /// the plugin parses, deserializes, serializes; the host gets the text back.
    #[divan::bench]
    fn fault_echo_1kb_text(bencher: Bencher) {
        let fault = &PLUGINS.fault;
        let arguments = serde_json::to_string(&fixtures::echo_arguments(1024)).expect("serializes");
        bencher.bench(|| fault.call("fault_echo", black_box(&arguments)).expect("echoes"));
    }

    /// The same through `PluginHandler`, as the loop calls it: `Value` to text, across, and
    /// the result text back to `Value`.
    #[divan::bench]
    fn fault_echo_1kb_handler(bencher: Bencher) {
        let handler = PluginHandler::new(PLUGINS.fault.clone(), max_result_bytes());
        let arguments = fixtures::echo_arguments(1024);
        bencher.bench(|| handler.call("fault_echo", black_box(&arguments)).expect("echoes"));
    }

    /// `calculate` through `PluginHandler`: the tool of the whole-step benchmarks.
    #[divan::bench]
    fn calculate_handler(bencher: Bencher) {
        let handler = PluginHandler::new(PLUGINS.calc.clone(), max_result_bytes());
        let arguments = json!({"expression": "(6 + 3) * 7 - 2"});
        bencher.bench(|| handler.call("calculate", black_box(&arguments)).expect("computes"));
    }

    /// A handler for `plugin` in `process` isolation: the `harness` executable in its
    /// plugin-host mode, as the CLI starts it, started by a first call outside the timing.
    fn process_handler(plugin: &str, file: &Path, tool: &str, arguments: &Value) -> ProcessHandler {
        let command = HostCommand { program: PLUGINS.harness.clone(), args: vec![PLUGIN_HOST_MODE.into()] };
        let path = file.canonicalize().expect("the plugin file exists");
        let handler = ProcessHandler::new(plugin, path, json!({}), command, max_result_bytes(), Timeouts::default());
        handler.call(tool, arguments).expect("the plugin host starts and answers");
        handler
    }

    /// `fault_echo` with 1 KB of arguments in `process` isolation: the child is warm; one
    /// frame to it over a pipe and one back, JSON parsed on both sides.
    #[divan::bench]
    fn fault_echo_1kb_process(bencher: Bencher) {
        let arguments = fixtures::echo_arguments(1024);
        let handler = process_handler("fault", &PLUGINS.fault_file, "fault_echo", &arguments);
        bencher.bench_local(|| handler.call("fault_echo", black_box(&arguments)).expect("echoes"));
    }

    /// `calculate` in `process` isolation.
    #[divan::bench]
    fn calculate_process(bencher: Bencher) {
        let arguments = json!({"expression": "(6 + 3) * 7 - 2"});
        let handler = process_handler("calc", &PLUGINS.calc_file, "calculate", &arguments);
        bencher.bench_local(|| handler.call("calculate", black_box(&arguments)).expect("computes"));
    }

    /// A handler as [`process_handler`] makes, its child confined by the kernel (Landlock and
    /// seccomp) as a `pure` plugin's is by default.
    fn confined_handler(plugin: &str, file: &Path) -> ProcessHandler {
        let command = HostCommand { program: PLUGINS.harness.clone(), args: vec![PLUGIN_HOST_MODE.into()] };
        let path = file.canonicalize().expect("the plugin file exists");
        let confinement = Confinement::for_effects(&path, EffectSet::default(), &Grants::default());
        ProcessHandler::new(plugin, path, json!({}), command, max_result_bytes(), Timeouts::default())
            .confined(confinement)
    }

    /// `calculate` in `process` isolation, the child confined by the kernel: what a call
    /// costs under the secure default.
    #[divan::bench]
    fn calculate_process_confined(bencher: Bencher) {
        let arguments = json!({"expression": "(6 + 3) * 7 - 2"});
        let handler = confined_handler("calc", &PLUGINS.calc_file);
        handler.call("calculate", &arguments).expect("the confined plugin host starts and answers");
        bencher.bench_local(|| handler.call("calculate", black_box(&arguments)).expect("computes"));
    }

    /// `fault_echo`, 1 KB, confined child.
    #[divan::bench]
    fn fault_echo_1kb_process_confined(bencher: Bencher) {
        let arguments = fixtures::echo_arguments(1024);
        let handler = confined_handler("fault", &PLUGINS.fault_file);
        handler.call("fault_echo", &arguments).expect("the confined plugin host starts and answers");
        bencher.bench_local(|| handler.call("fault_echo", black_box(&arguments)).expect("echoes"));
    }

    /// Starting a child cold: spawn, confine (Landlock and seccomp), load, init, first call.
    #[divan::bench(sample_count = 20)]
    fn start_child_confined(bencher: Bencher) {
        let arguments = json!({"expression": "1"});
        bencher.bench_local(|| {
            let handler = confined_handler("calc", &PLUGINS.calc_file);
            handler.call("calculate", black_box(&arguments)).expect("computes")
        });
    }

    /// Starting a child cold, not confined: the same, for comparison.
    #[divan::bench(sample_count = 20)]
    fn start_child_unconfined(bencher: Bencher) {
        let arguments = json!({"expression": "1"});
        bencher.bench_local(|| {
            let handler = process_handler("calc", &PLUGINS.calc_file, "calculate", &arguments);
            black_box(handler)
        });
    }
}

/// One whole step: reply from the scripted provider, parse, validate, execute, trace line.
mod step {
    use super::*;

    fn one_step(provider: &ScriptedProvider, registry: &ToolRegistry, trace: &mut dyn TraceSink) {
        let started = Instant::now();
        let choice = ToolChoice::Required;
        let request = RouterRequest { conversation: &[], tools: registry.definitions(), tool_choice: &choice };
        let reply = ready(provider.complete(request)).expect("a reply");
        let model_us = started.elapsed().as_micros() as u64;
        let call = reply.calls.first().expect("a structured call");
        let arguments = call.arguments.to_value();
        let tool = registry.get(&call.name).expect("a known tool");
        tool.validate(&arguments).expect("valid arguments");
        let result = tool.handler().expect("a handler").call(&call.name, &arguments).expect("runs");
        let entry = TraceEntry {
            tool: Some(&call.name),
            arguments: Some(&*arguments),
            result: Some(&result),
            plugin: Some("calc"),
            plugin_version: Some("0.1.0"),
            model_us,
            ..TraceEntry::new(1, StepStatus::Ok, "all", started.elapsed().as_micros() as u64)
        };
        trace.record(&entry).expect("the trace line is written");
    }

    fn provider() -> ScriptedProvider {
        ScriptedProvider::from_jsonl("bench", fixtures::STRUCTURED_LINE).expect("a valid script")
    }

    /// The stages composed by hand, `calculate` in the calc plugin, the trace line serialized
    /// into a `Vec<u8>` (cleared, capacity kept). No async runtime, no blocking thread.
    #[divan::bench]
    fn composed_calc_vec(bencher: Bencher) {
        let registry = calc_registry();
        let mut buffer = Vec::with_capacity(4096);
        bencher.with_inputs(provider).bench_local_refs(|provider| {
            buffer.clear();
            one_step(provider, &registry, &mut TraceWriter::new(&mut buffer));
        });
    }

    /// As above, the trace line written to a file through `BufWriter` and flushed, as the CLI
    /// does: one `write(2)` per step.
    #[divan::bench]
    fn composed_calc_file(bencher: Bencher) {
        let registry = calc_registry();
        let file = tempfile::tempfile().expect("a temporary file");
        let mut trace = TraceWriter::new(BufWriter::new(file));
        bencher.with_inputs(provider).bench_local_refs(|provider| one_step(provider, &registry, &mut trace));
        trace.into_inner().flush().expect("flushes");
    }

    /// As above, with the in-process no-op tool and the `Vec<u8>` trace: harness work only.
    #[divan::bench]
    fn composed_noop_vec(bencher: Bencher) {
        let registry = noop_registry();
        let mut buffer = Vec::with_capacity(4096);
        bencher.with_inputs(provider).bench_local_refs(|provider| {
            buffer.clear();
            one_step(provider, &registry, &mut TraceWriter::new(&mut buffer));
        });
    }

    fn run_loop(bencher: Bencher, registry: &ToolRegistry, steps: usize) {
        let script = fixtures::script(steps, fixtures::Shape::Structured);
        let runtime =
            tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime, as the CLI builds");
        let options = RunOptions { max_steps: steps as u32, max_repeats: 0, ..RunOptions::default() };
        let mut buffer = Vec::with_capacity(steps * 256);
        bencher
            .counter(ItemsCount::new(steps))
            .with_inputs(|| ScriptedProvider::from_jsonl("bench", &script).expect("a valid script"))
            .bench_local_refs(|provider| {
                buffer.clear();
                let mut trace = TraceWriter::new(&mut buffer);
                let outcome = runtime
                    .block_on(harness_core::Loop::new(provider, registry).options(options).run("bench", &mut trace));
                assert_eq!(outcome.steps as usize, steps);
            });
    }

    /// `harness_core::Loop::run` itself on a script of N steps (N-1 `calculate`, then `finish`),
    /// on a current-thread tokio runtime as the CLI builds it, trace into a `Vec<u8>`. Divide
    /// by N for a step; this includes the loop's `spawn_blocking` per tool call.
    #[divan::bench(args = [10, 100, 1000])]
    fn run_loop_calc(bencher: Bencher, steps: usize) {
        run_loop(bencher, &calc_registry(), steps);
    }

    /// As above with the no-op tool: the loop's own cost per step.
    #[divan::bench(args = [10, 100, 1000])]
    fn run_loop_noop(bencher: Bencher, steps: usize) {
        run_loop(bencher, &noop_registry(), steps);
    }
}

/// Discovery and loading of plugin files, then registration, as the CLI starts.
mod discovery {
    use super::*;

    /// `discover` + `register_tools` on a fresh directory of N copies of the calc library
    /// (new files, so the OS loader maps each one; files already mapped would be found in
    /// its cache). Every copy is opened, checked and its manifest parsed; the copies share
    /// the plugin name `calc`, so the first is `init`ed and registered and the others are
    /// skipped as duplicates. Making the copies is setup, not measured.
    #[divan::bench(args = [1, 10, 50], sample_count = 12, sample_size = 1)]
    fn load_copies(bencher: Bencher, copies: usize) {
        let calc = PLUGINS.calc_file.clone();
        bencher
            .counter(ItemsCount::new(copies))
            .with_inputs(|| {
                let dir = tempfile::tempdir().expect("a temporary directory");
                fixtures::copy_library(&calc, dir.path(), copies);
                dir
            })
            .bench_local_values(|dir| {
                let found = discover(&DiscoveryOptions { dirs: vec![dir.path().to_path_buf()], ..Default::default() });
                assert_eq!(found.plugins.len() + found.skipped.len(), copies);
                let mut registry = ToolRegistry::new();
                assert!(found.register_tools(&mut registry).is_empty());
                (found, registry, dir)
            });
    }

    /// `PluginLibrary::load` of a fresh copy: ELF check, dlopen (map, relocate), layout
    /// check, ABI version, manifest parsed and its schemas compiled.
    #[divan::bench(sample_count = 30, sample_size = 1)]
    fn load_one_fresh_file(bencher: Bencher) {
        let calc = PLUGINS.calc_file.clone();
        bencher
            .with_inputs(|| {
                let dir = tempfile::tempdir().expect("a temporary directory");
                let file = fixtures::copy_library(&calc, dir.path(), 1).remove(0);
                (dir, file)
            })
            .bench_local_values(|(dir, file)| (PluginLibrary::load(&file).expect("loads"), dir));
    }

    /// `PluginLibrary::load` of a file this process has already mapped: dlopen only bumps a
    /// count, so this is the checks alone (the difference to the fresh file is the mapping).
    #[divan::bench]
    fn load_one_already_mapped(bencher: Bencher) {
        let file = PLUGINS.calc.path().to_path_buf();
        bencher.bench(|| PluginLibrary::load(black_box(&file)).expect("loads"));
    }
}
