//! The schema warm-up thread: it builds jsonschema's metaschema validator, which the first
//! compile in a process needs (about 70 % of a start-up's instructions), then compiles
//! deferred schemas in the order they came, so that neither is on the way to a run's first
//! model request. Process tuning, kept out of the core: the core compiles a deferred schema
//! at its first use when no one compiled it ahead.

use std::sync::OnceLock;
use std::sync::mpsc::{Sender, channel};

use harness_core::{CompiledSchema, ToolRegistry, compile_schema};
use serde_json::Value;

use crate::cpu_affinity;

static QUEUE: OnceLock<Option<Sender<CompiledSchema>>> = OnceLock::new();

/// Starts the thread, once; `None` when it cannot start (then each schema compiles at its
/// first use, as without the thread).
fn start() -> Option<&'static Sender<CompiledSchema>> {
    QUEUE
        .get_or_init(|| {
            let (tx, rx) = channel::<CompiledSchema>();
            let creator_cpu = cpu_affinity::current_cpu();
            let spawned = std::thread::Builder::new().name("schema-warmup".into()).spawn(move || {
                // Off the starting thread's CPU first, or that thread may wait for the
                // metaschema build below (crate::cpu_affinity).
                let _ = cpu_affinity::leave_cpu(creator_cpu);
                let _ = compile_schema(&serde_json::json!({ "type": "object" }));
                for schema in rx {
                    schema.compile_ahead();
                }
            });
            spawned.ok().map(|_| tx)
        })
        .as_ref()
}

/// Hands `schema` to the thread; if there is none, its first use compiles it.
fn queue(schema: CompiledSchema) {
    if let Some(tx) = start() {
        let _ = tx.send(schema);
    }
}

/// Starts the warm-up thread, which first builds jsonschema's metaschema validator, so that
/// this overlaps whatever the caller does before its first compile. Cheap to call more than
/// once.
pub fn prepare_schema_compiler() {
    let _ = start();
}

/// A schema known to compile with this build ([`CompiledSchema::deferred`]), compiled on the
/// warm-up thread: no start-up waits for it, only the first check of a value, if it comes
/// before the compile is done.
pub(crate) fn deferred(schema: &Value) -> CompiledSchema {
    let deferred = CompiledSchema::deferred(schema);
    queue(deferred.clone());
    deferred
}

/// Hands every schema of `registry` not compiled yet (the built-in `finish`'s) to the thread.
pub(crate) fn compile_ahead(registry: &ToolRegistry) {
    for schema in registry.uncompiled_schemas() {
        queue(schema);
    }
}
