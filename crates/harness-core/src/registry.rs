//! The tool registry: definitions offered to the router, schemas compiled once, handlers.

use std::collections::HashMap;
use std::sync::Arc;

use serde::Serialize;
use serde_json::{Value, json};

use crate::error::{ErrorCode, HarnessError};

/// The name of the built-in terminal tool.
pub const FINISH: &str = "finish";

/// Where a tool comes from, for the trace and for operators.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ToolSource {
    /// Built into the harness (`finish`).
    Builtin,
    /// Offered by a plugin library.
    Plugin {
        /// The plugin's name.
        name: String,
        /// The plugin's version.
        version: String,
    },
    /// Offered by an MCP server that the harness started as a tool source.
    Mcp {
        /// The server's name in the configuration.
        server: String,
    },
}

/// A declared example call, shown to operators and held against the tool by plugin checks.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolExample {
    /// The arguments object.
    pub arguments: Value,
    /// The expected result, when declared.
    pub result: Option<Value>,
    /// A request a person might make that this call answers, when declared.
    pub request: Option<String>,
}

/// A tool as the router sees it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolDefinition {
    /// The tool's name.
    pub name: String,
    /// What it does.
    pub description: String,
    /// JSON Schema of its arguments object.
    pub parameters: Value,
    /// Declared example calls.
    pub examples: Vec<ToolExample>,
    /// Where it comes from.
    pub source: ToolSource,
}

impl harness_reply::OfferedTool for ToolDefinition {
    fn name(&self) -> &str {
        &self.name
    }

    fn parameters(&self) -> &Value {
        &self.parameters
    }
}

/// A failure reported by a tool handler.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolFailure {
    /// `tool_error` or `tool_panicked` (other codes from a plugin are kept in details).
    pub code: String,
    /// What went wrong.
    pub message: String,
}

/// Runs one tool. Called from a blocking thread, possibly several at once.
pub trait ToolHandler: Send + Sync {
    /// Runs the tool with arguments that already passed schema validation.
    fn call(&self, tool: &str, arguments: &Value) -> Result<Value, ToolFailure>;

    /// Runs the tool, to be ended at `deadline` (the tool's timeout, cut to what is left of
    /// the run). Handlers that end calls themselves ([`Self::enforces_timeout`]) override it;
    /// the default runs [`Self::call`], and the loop abandons the call at the deadline.
    fn call_by(
        &self,
        tool: &str,
        arguments: &Value,
        deadline: Option<std::time::Instant>,
    ) -> Result<Value, ToolFailure> {
        let _ = deadline;
        self.call(tool, arguments)
    }

    /// Whether the handler ends a call itself at the tool's timeout (a child process it can
    /// kill). When not, the loop abandons the call at the timeout and does not wait for it.
    fn enforces_timeout(&self) -> bool {
        false
    }

    /// Whether a call may run on the loop's own thread when the run allows it
    /// ([`crate::ProcessTuning::inline_calls`]): true for short calls that never wait on the async
    /// runtime themselves. False by default.
    fn may_run_inline(&self) -> bool {
        false
    }
}

/// Why a tool could not be registered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegistryError {
    /// Another tool already has this name.
    #[error("tool {name:?} is already registered by {existing}")]
    Duplicate {
        /// The tool name.
        name: String,
        /// Who registered it first.
        existing: String,
    },
    /// The parameters schema is not a valid JSON Schema object, or does not compile.
    #[error("the parameters schema of tool {name:?} does not compile: {reason}")]
    InvalidSchema {
        /// The tool name.
        name: String,
        /// What the compiler said.
        reason: String,
    },
    /// The declared output schema is not a valid JSON Schema object, or does not compile.
    #[error("the output schema of tool {name:?} does not compile: {reason}")]
    InvalidOutputSchema {
        /// The tool name.
        name: String,
        /// What the compiler said.
        reason: String,
    },
}

/// A tool to register and everything the registry holds of it, given in one piece so that
/// [`ToolRegistry::register`] registers all of it or nothing: a schema that does not compile
/// never leaves half a tool behind.
pub struct ToolSpec {
    /// What the router is offered.
    pub definition: ToolDefinition,
    /// What runs a call.
    pub handler: Arc<dyn ToolHandler>,
    /// The definition's parameters schema, compiled already (at load): not compiled again,
    /// unless it was compiled from another document than the definition's.
    pub parameters: Option<CompiledSchema>,
    /// The declared output schema: every result is checked against it, and a result that
    /// breaks it is `invalid_result`, never fed back as a result.
    pub output: Option<Value>,
    /// `output` compiled already (at load), on the same terms as `parameters`.
    pub output_compiled: Option<CompiledSchema>,
    /// The declared effect class, which the approval policy governs (`network` when `None`).
    pub effect: Option<crate::approval::Effect>,
    /// How long each call may take, when limited.
    pub timeout: Option<std::time::Duration>,
}

impl ToolSpec {
    /// A tool with its definition and handler alone: schemas compiled at registration, no
    /// output schema, no declared effect, no time limit.
    pub fn new(definition: ToolDefinition, handler: Arc<dyn ToolHandler>) -> Self {
        Self { definition, handler, parameters: None, output: None, output_compiled: None, effect: None, timeout: None }
    }
}

struct Compiled {
    validator: Arc<Deferred>,
    /// The declared output schema, compiled; every result is checked against it.
    output: Option<Arc<Deferred>>,
    effect: Option<crate::approval::Effect>,
    handler: Option<Arc<dyn ToolHandler>>,
    timeout: Option<std::time::Duration>,
}

/// Every tool the router may be offered, with its compiled schema and its handler.
pub struct ToolRegistry {
    definitions: Vec<ToolDefinition>,
    compiled: Vec<Compiled>,
    /// By name; hashed with foldhash, since every step looks its tool up (SipHash was about
    /// 300 instructions a step of a scripted run, by callgrind).
    index: HashMap<String, usize, foldhash::fast::RandomState>,
}

/// A registered tool, looked up by name.
#[derive(Clone, Copy)]
pub struct RegisteredTool<'a> {
    /// Its definition.
    pub definition: &'a ToolDefinition,
    validator: &'a Deferred,
    output: Option<&'a Deferred>,
    /// Its declared effect class, when its source declares one.
    pub effect: Option<crate::approval::Effect>,
    handler: Option<&'a Arc<dyn ToolHandler>>,
    /// How long a call may take, when limited.
    pub timeout: Option<std::time::Duration>,
}

/// The retriever every schema compiles with: it refuses every reference outside the schema
/// document, whatever jsonschema's features, so that a tool's schema never makes the harness
/// reach the network or the file system.
struct RefuseExternal;

/// The start of every refusal, which tests look for.
pub const EXTERNAL_REF_REFUSED: &str = "external $ref refused";

impl jsonschema::Retrieve for RefuseExternal {
    fn retrieve(&self, uri: &jsonschema::Uri<String>) -> Result<Value, Box<dyn std::error::Error + Send + Sync>> {
        Err(format!(
            "{EXTERNAL_REF_REFUSED}: {uri}: a tool's schema must be self-contained; put shared parts under \"$defs\" and refer to them as \"#/$defs/NAME\""
        )
        .into())
    }
}

/// Compiles a schema with every external reference refused (see [`RefuseExternal`]).
pub fn compile_schema(schema: &Value) -> Result<jsonschema::Validator, String> {
    if !schema.is_object() {
        return Err(format!("a schema must be a JSON object, not {schema}"));
    }
    jsonschema::options().with_retriever(RefuseExternal).build(schema).map_err(|e| e.to_string())
}

/// A schema's validator: compiled already, or compiled at its first use (or ahead of it, by
/// whoever warms it: harness-loader's schema warm-up thread).
struct Deferred {
    source: Value,
    cell: std::sync::OnceLock<Result<Arc<jsonschema::Validator>, String>>,
}

impl Deferred {
    /// The validator; compiles it here when no one has (yet). A caller that comes while
    /// another thread compiles it waits for that compile, never runs a second.
    fn get(&self) -> Result<&jsonschema::Validator, &str> {
        match self.cell.get_or_init(|| compile_schema(&self.source).map(Arc::new)) {
            Ok(v) => Ok(v),
            Err(e) => Err(e),
        }
    }
}

/// A schema compiled once, kept with the document it was compiled from: whoever checks a
/// schema at load hands this to the registry, which then never compiles it again.
#[derive(Clone)]
pub struct CompiledSchema {
    validator: Arc<Deferred>,
}

impl CompiledSchema {
    /// Compiles `schema` now, as [`compile_schema`] does.
    pub fn compile(schema: &Value) -> Result<Self, String> {
        let validator = compile_schema(schema)?;
        let cell = std::sync::OnceLock::from(Ok(Arc::new(validator)));
        Ok(Self { validator: Arc::new(Deferred { source: schema.clone(), cell }) })
    }

    /// A schema already known to compile with this build (the built-in `finish`'s, or a
    /// plugin's that compiled when its unchanged file was admitted before), compiled at its
    /// first use, or before by [`compile_ahead`](Self::compile_ahead) on another thread: no
    /// start-up waits for it. Should it not compile after all, every check of a value against
    /// it fails, saying so.
    pub fn deferred(schema: &Value) -> Self {
        Self { validator: Arc::new(Deferred { source: schema.clone(), cell: std::sync::OnceLock::new() }) }
    }

    /// Compiles a deferred schema now, unless it is compiled already (or being compiled: then
    /// this waits for that compile). For a warm-up thread, so that its first use does not.
    pub fn compile_ahead(&self) {
        let _ = self.validator.get();
    }

    /// Whether the schema is compiled (or known not to compile): false for a deferred one
    /// not used, nor compiled ahead, yet.
    pub fn is_compiled(&self) -> bool {
        self.validator.cell.get().is_some()
    }

    /// The schema document it was compiled from.
    pub fn source(&self) -> &Value {
        &self.validator.source
    }

    /// Whether `value` satisfies the schema (false when the schema does not compile).
    pub fn is_valid(&self, value: &Value) -> bool {
        self.validator.get().is_ok_and(|v| v.is_valid(value))
    }

    /// Itself when compiled from `schema`, else `schema` compiled now: a mismatch costs a
    /// compile, never a validator of the wrong schema.
    fn validator_for(self, schema: &Value) -> Result<Arc<Deferred>, String> {
        if self.validator.source == *schema {
            return Ok(self.validator);
        }
        CompiledSchema::compile(schema).map(|c| c.validator)
    }
}

impl std::fmt::Debug for CompiledSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompiledSchema").field("source", &self.validator.source).finish_non_exhaustive()
    }
}

/// `compiled` when it was compiled from `schema`, else `schema` compiled now.
fn compiled_or_now(compiled: Option<CompiledSchema>, schema: &Value) -> Result<Arc<Deferred>, String> {
    match compiled {
        Some(compiled) => compiled.validator_for(schema),
        None => CompiledSchema::compile(schema).map(|c| c.validator),
    }
}

impl Default for ToolRegistry {
    fn default() -> Self {
        Self::new()
    }
}

impl ToolRegistry {
    /// A registry holding only the built-in `finish` tool.
    pub fn new() -> Self {
        let mut registry = Self { definitions: Vec::new(), compiled: Vec::new(), index: HashMap::default() };
        let finish = ToolDefinition {
            name: FINISH.to_owned(),
            description: "End the run with the final answer to the request. Call it once you have the answer, or with your best partial answer when told to finish.".to_owned(),
            parameters: json!({
                "type": "object",
                "properties": { "answer": { "description": "The final answer: text or any JSON value." } },
                "required": ["answer"]
            }),
            examples: Vec::new(),
            source: ToolSource::Builtin,
        };
        // The built-in schema is a constant that compiles (a test holds it to that): it is
        // compiled ahead on a warm-up thread (harness-loader's), not on the way to the first
        // model request.
        let validator = CompiledSchema::deferred(&finish.parameters).validator;
        registry.insert(finish, Compiled { validator, output: None, effect: None, handler: None, timeout: None });
        registry
    }

    /// Registers a tool with its schemas, effect and time limit in one call: every schema is
    /// compiled (or taken as compiled at load) before anything is inserted, so a tool whose
    /// name is taken, or whose parameters or output schema fails, is not registered at all.
    pub fn register(&mut self, tool: ToolSpec) -> Result<(), RegistryError> {
        let ToolSpec { definition, handler, parameters, output, output_compiled, effect, timeout } = tool;
        self.refuse_duplicate(&definition.name)?;
        let name = &definition.name;
        let validator = compiled_or_now(parameters, &definition.parameters)
            .map_err(|reason| RegistryError::InvalidSchema { name: name.clone(), reason })?;
        let output = match &output {
            Some(schema) => Some(
                compiled_or_now(output_compiled, schema)
                    .map_err(|reason| RegistryError::InvalidOutputSchema { name: name.clone(), reason })?,
            ),
            None => None,
        };
        self.insert(definition, Compiled { validator, output, effect, handler: Some(handler), timeout });
        Ok(())
    }

    /// `Duplicate` when a tool of this name is registered already, naming who registered it.
    fn refuse_duplicate(&self, name: &str) -> Result<(), RegistryError> {
        let Some(&i) = self.index.get(name) else { return Ok(()) };
        let existing = match &self.definitions[i].source {
            ToolSource::Builtin => "the harness itself".to_owned(),
            ToolSource::Plugin { name, .. } => format!("plugin {name:?}"),
            ToolSource::Mcp { server } => format!("MCP server {server:?}"),
        };
        Err(RegistryError::Duplicate { name: name.to_owned(), existing })
    }

    /// Adds a tool that passed every check.
    fn insert(&mut self, definition: ToolDefinition, compiled: Compiled) {
        self.index.insert(definition.name.clone(), self.definitions.len());
        self.definitions.push(definition);
        self.compiled.push(compiled);
    }

    /// Every schema of the registry not compiled yet (the built-in `finish`'s, a cached
    /// plugin's), for a warm-up thread to compile ahead of its first use.
    pub fn uncompiled_schemas(&self) -> Vec<CompiledSchema> {
        let all = self.compiled.iter().flat_map(|c| std::iter::once(&c.validator).chain(c.output.as_ref()));
        all.map(|v| CompiledSchema { validator: Arc::clone(v) }).filter(|s| !s.is_compiled()).collect()
    }

    /// Every tool, `finish` first.
    pub fn definitions(&self) -> &[ToolDefinition] {
        &self.definitions
    }

    /// Only `finish`, for the steps where it is the one tool offered.
    pub fn finish_only(&self) -> &[ToolDefinition] {
        &self.definitions[..1]
    }

    /// Looks a tool up by name.
    pub fn get(&self, name: &str) -> Option<RegisteredTool<'_>> {
        let &i = self.index.get(name)?;
        Some(RegisteredTool {
            definition: &self.definitions[i],
            validator: &self.compiled[i].validator,
            output: self.compiled[i].output.as_deref(),
            effect: self.compiled[i].effect,
            handler: self.compiled[i].handler.as_ref(),
            timeout: self.compiled[i].timeout,
        })
    }
}

/// The longest validation message kept; a huge argument would otherwise be echoed whole.
const MAX_VIOLATION_MESSAGE: usize = 300;

/// Every violation of `schema` by `value`: its JSON pointer and a message cut to a bounded length.
fn violations(schema: &jsonschema::Validator, source: &Value, value: &Value) -> Vec<Value> {
    schema
        .iter_errors(value)
        .map(|e| {
            let mut message = violation_message(&e, source);
            if message.len() > MAX_VIOLATION_MESSAGE {
                let cut = (0..=MAX_VIOLATION_MESSAGE).rev().find(|&i| message.is_char_boundary(i)).unwrap_or(0);
                message.truncate(cut);
                message.push_str("...");
            }
            json!({ "pointer": e.instance_path().to_string(), "message": message })
        })
        .collect()
}

/// A violation as a person or a model can act on it. A value that does not match a field's
/// `pattern` is said with the field's description, where it has one: the expression itself
/// (chem's SMILES shape is over a hundred characters of classes and groups) tells less than
/// "A SMILES string, e.g. `c1ccccc1`; not a name".
fn violation_message(error: &jsonschema::ValidationError<'_>, source: &Value) -> String {
    if let jsonschema::error::ValidationErrorKind::Pattern { .. } = error.kind() {
        let path = error.schema_path().to_string();
        let field = path.strip_suffix("/pattern").and_then(|p| source.pointer(p));
        if let Some(description) = field.and_then(|f| f.get("description")).and_then(Value::as_str) {
            return format!("{} does not have the form this field takes: {description}", error.instance());
        }
    }
    error.to_string()
}

/// The violations as one line: `pointer: message; ...`, the root shown as `(root)`.
fn summary(violations: &[Value]) -> String {
    let parts: Vec<String> = violations
        .iter()
        .map(|v| {
            let pointer = v["pointer"].as_str().unwrap_or("");
            let at = if pointer.is_empty() { "(root)" } else { pointer };
            format!("{at}: {}", v["message"].as_str().unwrap_or(""))
        })
        .collect();
    parts.join("; ")
}

impl RegisteredTool<'_> {
    /// The tool as the approval policy names it: `plugin.tool`, `mcp_server.tool`, or its name.
    pub fn policy_key(&self) -> String {
        let name = &self.definition.name;
        match &self.definition.source {
            ToolSource::Plugin { name: plugin, .. } => format!("{plugin}.{name}"),
            ToolSource::Mcp { server } => format!("{server}.{name}"),
            ToolSource::Builtin => name.clone(),
        }
    }

    /// The effect class the policy applies: the declared one; an MCP tool's, or an
    /// undeclared one, is `network`, the class that asks the most.
    pub fn policy_effect(&self) -> crate::approval::Effect {
        self.effect.unwrap_or(crate::approval::Effect::Network)
    }

    /// Checks arguments against the compiled schema, reporting every violation.
    pub fn validate(&self, arguments: &Value) -> Result<(), HarnessError> {
        let validator = self.validator.get().map_err(|reason| self.uncompiled("parameters", reason))?;
        // The usual call is valid: a yes-or-no check costs a fraction of collecting errors.
        if validator.is_valid(arguments) {
            return Ok(());
        }
        let violations = violations(validator, &self.validator.source, arguments);
        if violations.is_empty() {
            return Ok(());
        }
        let name = &self.definition.name;
        Err(HarnessError::new(
            ErrorCode::InvalidArguments,
            format!("the arguments do not match the schema of {name:?}: {}", summary(&violations)),
            json!({ "tool": name, "violations": violations }),
        ))
    }

    /// Checks a result against the tool's declared output schema, when it declares one.
    pub fn check_result(&self, result: &Value) -> Result<(), HarnessError> {
        let Some(deferred) = self.output else {
            return Ok(());
        };
        let output = deferred.get().map_err(|reason| self.uncompiled("output", reason))?;
        if output.is_valid(result) {
            return Ok(());
        }
        let violations = violations(output, &deferred.source, result);
        if violations.is_empty() {
            return Ok(());
        }
        let name = &self.definition.name;
        Err(HarnessError::new(
            ErrorCode::InvalidResult,
            format!(
                "the tool {name:?} returned a result that does not match its declared output schema, so it is not given as a result: {}",
                summary(&violations)
            ),
            json!({ "tool": name, "violations": violations }),
        ))
    }

    /// The error of a check against a deferred schema that did not compile after all (see
    /// [`CompiledSchema::deferred`]): the file it came from changed in a way its identity did
    /// not show, or the cache entry that vouched for it was edited.
    fn uncompiled(&self, which: &str, reason: &str) -> HarnessError {
        let name = &self.definition.name;
        HarnessError::new(
            ErrorCode::ToolError,
            format!(
                "the {which} schema of tool {name:?} does not compile ({reason}), so nothing can be checked against it; its plugin was admitted from the plugin cache: delete the plugin cache (docs/operators.md) and restart the harness"
            ),
            json!({ "tool": name, "schema": which }),
        )
    }

    /// Whether the tool declares an output schema.
    pub fn has_output_schema(&self) -> bool {
        self.output.is_some()
    }

    /// The handler, `None` for the built-in `finish`.
    pub fn handler(&self) -> Option<&Arc<dyn ToolHandler>> {
        self.handler
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Echo;
    impl ToolHandler for Echo {
        fn call(&self, _: &str, arguments: &Value) -> Result<Value, ToolFailure> {
            Ok(arguments.clone())
        }
    }

    fn def(name: &str, parameters: Value) -> ToolDefinition {
        ToolDefinition {
            name: name.into(),
            description: "d".into(),
            parameters,
            examples: vec![],
            source: ToolSource::Plugin { name: "p".into(), version: "1.0.0".into() },
        }
    }

    #[test]
    fn the_finish_schema_compiles_and_is_checked_when_deferred() {
        let registry = ToolRegistry::new();
        let finish = registry.get(FINISH).unwrap();
        assert!(CompiledSchema::compile(&finish.definition.parameters).is_ok());
        assert!(finish.validate(&json!({"answer": 42})).is_ok());
        let e = finish.validate(&json!({})).unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidArguments, "{e:?}");
    }

    #[test]
    fn a_deferred_schema_checks_as_a_compiled_one_and_one_that_does_not_compile_fails_every_check() {
        let mut registry = ToolRegistry::new();
        let deferred = CompiledSchema::deferred(&five_properties());
        registry.register(compiled(def("t", five_properties()), deferred, None)).unwrap();
        let t = registry.get("t").unwrap();
        assert!(t.validate(&json!({"a": "x", "b": 1})).is_ok());
        assert_eq!(t.validate(&json!({"a": "x"})).unwrap_err().code, ErrorCode::InvalidArguments);

        let broken = json!({"type": 5});
        let deferred = CompiledSchema::deferred(&broken);
        registry.register(compiled(def("u", broken), deferred.clone(), None)).unwrap();
        let e = registry.get("u").unwrap().validate(&json!({})).unwrap_err();
        assert_eq!(e.code, ErrorCode::ToolError);
        assert!(e.message.contains("parameters schema of tool \"u\" does not compile"), "{}", e.message);
        assert!(!deferred.is_valid(&json!({})));
        let parameters = CompiledSchema::deferred(&five_properties());
        registry.register(compiled(def("w", five_properties()), parameters, Some(deferred))).unwrap();
        let e = registry.get("w").unwrap().check_result(&json!(1)).unwrap_err();
        assert!(e.message.contains("output schema of tool \"w\" does not compile"), "{}", e.message);
    }

    /// A tool whose schemas were compiled at load.
    fn compiled(definition: ToolDefinition, parameters: CompiledSchema, output: Option<CompiledSchema>) -> ToolSpec {
        ToolSpec {
            parameters: Some(parameters),
            output: output.as_ref().map(|o| o.source().clone()),
            output_compiled: output,
            ..ToolSpec::new(definition, Arc::new(Echo))
        }
    }

    /// A tool with an output schema, compiled at registration.
    fn with_output(definition: ToolDefinition, output: Value) -> ToolSpec {
        ToolSpec { output: Some(output), ..ToolSpec::new(definition, Arc::new(Echo)) }
    }

    fn five_properties() -> Value {
        json!({
            "type": "object",
            "properties": {
                "a": {"type": "string"}, "b": {"type": "integer", "minimum": 0},
                "c": {"type": "boolean"}, "d": {"enum": ["x", "y"]}, "e": {"type": "array", "items": {"type": "number"}}
            },
            "required": ["a", "b"],
            "additionalProperties": false
        })
    }

    #[test]
    fn every_violation_is_reported_with_its_pointer() {
        let mut r = ToolRegistry::new();
        r.register(ToolSpec::new(def("t", five_properties()), Arc::new(Echo))).unwrap();
        let tool = r.get("t").unwrap();
        assert!(tool.validate(&json!({"a": "x", "b": 1, "e": [1.5]})).is_ok());
        let e = tool.validate(&json!({"b": -1, "c": "no", "d": "z", "e": [1, "two"], "extra": 1})).unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidArguments);
        let pointers: Vec<&str> =
            e.details["violations"].as_array().unwrap().iter().map(|v| v["pointer"].as_str().unwrap()).collect();
        for want in ["", "/b", "/c", "/d", "/e/1"] {
            assert!(pointers.contains(&want), "{want} missing from {pointers:?}");
        }
        // missing "a" and the extra property are both reported at the root
        assert!(pointers.iter().filter(|p| p.is_empty()).count() >= 2, "{pointers:?}");
    }

    #[test]
    fn a_value_off_a_fields_pattern_is_said_with_the_fields_description() {
        let mut r = ToolRegistry::new();
        let smiles = json!({"type": "object", "properties": {
            "smiles": {"type": "string", "pattern": "^[CNO]+$", "description": "A SMILES string, e.g. CCO; not a name."},
            "bare": {"type": "string", "pattern": "^[0-9]+$"}
        }});
        r.register(ToolSpec::new(def("t", smiles), Arc::new(Echo))).unwrap();
        let e = r.get("t").unwrap().validate(&json!({"smiles": "benzene", "bare": "x"})).unwrap_err();
        assert!(
            e.message.contains(
                r#"/smiles: "benzene" does not have the form this field takes: A SMILES string, e.g. CCO; not a name."#
            ),
            "{}",
            e.message
        );
        // No description: the expression it missed, as the validator says it.
        assert!(e.message.contains(r#"/bare: "x" does not match "^[0-9]+$""#), "{}", e.message);
    }

    #[test]
    fn duplicates_and_bad_schemas_are_refused() {
        let mut r = ToolRegistry::new();
        let e = r.register(ToolSpec::new(def("finish", json!({"type": "object"})), Arc::new(Echo))).unwrap_err();
        assert!(e.to_string().contains("the harness itself"));
        r.register(ToolSpec::new(def("t", json!({"type": "object"})), Arc::new(Echo))).unwrap();
        assert!(matches!(
            r.register(ToolSpec::new(def("t", json!({})), Arc::new(Echo))),
            Err(RegistryError::Duplicate { .. })
        ));
        let e = r.register(ToolSpec::new(def("u", json!({"type": "no-such-type"})), Arc::new(Echo))).unwrap_err();
        assert!(matches!(e, RegistryError::InvalidSchema { .. }), "{e}");
        assert!(r.register(ToolSpec::new(def("v", json!(true)), Arc::new(Echo))).is_err());
    }

    #[test]
    fn a_schema_compiled_at_load_is_registered_without_compiling_it_again() {
        let mut r = ToolRegistry::new();
        let parameters = CompiledSchema::compile(&five_properties()).unwrap();
        let output = CompiledSchema::compile(&json!({"type": "integer"})).unwrap();
        r.register(compiled(def("t", five_properties()), parameters.clone(), Some(output.clone()))).unwrap();
        let i = r.index["t"];
        assert!(Arc::ptr_eq(&r.compiled[i].validator, &parameters.validator), "the parameters were compiled again");
        assert!(r.compiled[i].output.as_ref().is_some_and(|o| Arc::ptr_eq(o, &output.validator)));
        let tool = r.get("t").unwrap();
        assert!(tool.validate(&json!({"a": "x", "b": 1})).is_ok() && tool.validate(&json!({"a": 1})).is_err());
        assert!(tool.check_result(&json!(1)).is_ok() && tool.check_result(&json!("1")).is_err());
    }

    #[test]
    fn a_schema_compiled_from_another_document_is_not_trusted() {
        let mut r = ToolRegistry::new();
        let other = CompiledSchema::compile(&json!({"type": "object"})).unwrap();
        r.register(compiled(def("t", five_properties()), other.clone(), None)).unwrap();
        assert!(!Arc::ptr_eq(&r.compiled[r.index["t"]].validator, &other.validator));
        assert!(r.get("t").unwrap().validate(&json!({})).is_err(), "validated against the definition's schema");
        let e = r.register(compiled(def("u", json!({"type": 7})), other, None)).unwrap_err();
        assert!(matches!(e, RegistryError::InvalidSchema { .. }), "{e}");
    }

    #[test]
    fn every_external_reference_is_refused_by_the_harness_retriever() {
        // A real schema file that any retriever able to read files would load and accept: the
        // refusal must come from the harness's retriever, whose words the errors carry.
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("shared.json");
        std::fs::write(&file, r#"{"type": "integer"}"#).unwrap();
        let file_uri = format!("file://{}", file.display());
        let mut r = ToolRegistry::new();
        for (i, uri) in [file_uri.as_str(), "https://example.com/s.json", "http://127.0.0.1:9/s.json", "urn:x:y"]
            .into_iter()
            .enumerate()
        {
            let schema = json!({"type": "object", "properties": {"x": {"$ref": uri}}});
            let e = r.register(ToolSpec::new(def(&format!("t{i}"), schema), Arc::new(Echo))).unwrap_err().to_string();
            assert!(e.contains(EXTERNAL_REF_REFUSED) && e.contains("$defs"), "{uri}: {e}");
        }
        // References inside the document still resolve.
        let local =
            json!({"type": "object", "properties": {"x": {"$ref": "#/$defs/n"}}, "$defs": {"n": {"type": "integer"}}});
        r.register(ToolSpec::new(def("local", local), Arc::new(Echo))).unwrap();
        assert!(r.get("local").unwrap().validate(&json!({"x": "no"})).is_err());
    }

    #[test]
    fn results_are_checked_against_a_declared_output_schema() {
        let mut r = ToolRegistry::new();
        r.register(ToolSpec::new(def("t", json!({"type": "object"})), Arc::new(Echo))).unwrap();
        assert!(r.get("t").unwrap().check_result(&json!("anything")).is_ok(), "no schema, no check");
        let output = json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]});
        r.register(with_output(def("u", json!({"type": "object"})), output)).unwrap();
        let tool = r.get("u").unwrap();
        assert!(tool.check_result(&json!({"n": 1})).is_ok());
        let e = tool.check_result(&json!({"n": "one"})).unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidResult);
        assert_eq!(e.details["violations"][0]["pointer"], "/n");
    }

    #[test]
    fn a_tool_whose_output_schema_fails_is_not_registered_at_all() {
        let mut r = ToolRegistry::new();
        let e = r.register(with_output(def("t", json!({"type": "object"})), json!({"type": 7}))).unwrap_err();
        assert!(matches!(e, RegistryError::InvalidOutputSchema { .. }), "{e}");
        assert!(r.get("t").is_none(), "half a tool was left registered");
        assert_eq!(r.definitions().len(), 1, "only finish is offered");
        r.register(ToolSpec::new(def("t", json!({"type": "object"})), Arc::new(Echo))).unwrap();
    }

    #[test]
    fn effect_and_timeout_come_with_the_registration() {
        let mut r = ToolRegistry::new();
        let limit = std::time::Duration::from_millis(5);
        let tool = ToolSpec {
            effect: Some(crate::approval::Effect::Reads),
            timeout: Some(limit),
            ..ToolSpec::new(def("t", json!({"type": "object"})), Arc::new(Echo))
        };
        r.register(tool).unwrap();
        let t = r.get("t").unwrap();
        assert_eq!((t.effect, t.timeout), (Some(crate::approval::Effect::Reads), Some(limit)));
    }

    #[test]
    fn deferred_schemas_are_listed_until_compiled_ahead() {
        let mut r = ToolRegistry::new();
        r.register(ToolSpec::new(def("t", json!({"type": "object"})), Arc::new(Echo))).unwrap();
        let pending = r.uncompiled_schemas();
        assert_eq!(pending.len(), 1, "only finish's schema waits: t's compiled at registration");
        assert_eq!(pending[0].source(), &r.get(FINISH).unwrap().definition.parameters);
        pending[0].compile_ahead();
        assert!(r.uncompiled_schemas().is_empty());
    }

    #[test]
    fn finish_requires_an_answer() {
        let r = ToolRegistry::new();
        let finish = r.get(FINISH).unwrap();
        assert!(finish.validate(&json!({"answer": null})).is_ok());
        assert!(finish.validate(&json!({})).is_err());
        assert!(finish.handler().is_none());
        assert_eq!(r.finish_only().len(), 1);
    }
}
