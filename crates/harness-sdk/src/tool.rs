//! A tool: typed handler, generated schema, declared effects and examples.

use harness_abi::manifest::{Effects, ToolError, ToolExample, ToolManifest};
use schemars::JsonSchema;
use serde::{Serialize, de::DeserializeOwned};
use serde_json::Value;

/// Straight from the arguments' JSON text to the typed arguments, and from the typed result to
/// JSON text: no intermediate `Value` tree, which was most of a small tool's cost.
type Handler<P> = Box<dyn Fn(&P, &str) -> Result<String, ToolError> + Send + Sync>;

/// One tool of plugin `P`: its manifest entry and the handler that runs it.
pub struct Tool<P> {
    pub(crate) manifest: ToolManifest,
    pub(crate) handler: Handler<P>,
}

/// Generates a schema without the `$schema` key, which model APIs do not expect.
fn schema_of<T: JsonSchema>() -> Value {
    let generator = schemars::generate::SchemaSettings::draft2020_12().with(|s| s.meta_schema = None).into_generator();
    generator.into_root_schema_for::<T>().to_value()
}

impl<P: 'static> Tool<P> {
    /// A tool named `name` whose arguments are `A` and whose result is `R`.
    ///
    /// The parameters schema is generated from `A`; arguments that the host validated but
    /// that still do not deserialize into `A` become an `invalid_arguments` tool error.
    pub fn new<A, R, F>(name: &str, description: &str, effects: Effects, handler: F) -> Self
    where
        A: DeserializeOwned + JsonSchema,
        R: Serialize,
        F: Fn(&P, A) -> Result<R, ToolError> + Send + Sync + 'static,
    {
        let handler: Handler<P> = Box::new(move |plugin, arguments| {
            let args: A = serde_json::from_str(arguments).map_err(|e| {
                let code = if e.is_data() { "invalid_arguments" } else { "invalid_json" };
                ToolError { code: code.to_owned(), message: e.to_string() }
            })?;
            let result = handler(plugin, args)?;
            serde_json::to_string(&result)
                .map_err(|e| ToolError::tool_error(format!("the tool's result is not JSON: {e}")))
        });
        Self {
            manifest: ToolManifest {
                name: name.to_owned(),
                description: description.to_owned(),
                parameters: schema_of::<A>(),
                output: None,
                effects,
                examples: Vec::new(),
            },
            handler,
        }
    }

    /// Declares the result's schema, generated from `R`; checks hold results against it.
    pub fn output<R: JsonSchema>(mut self) -> Self {
        self.manifest.output = Some(schema_of::<R>());
        self
    }

    /// Declares an example call and the result it must return.
    pub fn example(mut self, arguments: Value, result: Value) -> Self {
        self.manifest.examples.push(ToolExample { arguments, result: Some(result), error_code: None, request: None });
        self
    }

    /// Declares an example call with the request a person would make for it, e.g. "What is
    /// 10% of 50?" for `{"expression": "10/100*50"}`: checked as [`Tool::example`] is, and
    /// shown to a small model (a text router mode with a small context) as a worked exchange,
    /// which teaches it how a request becomes arguments better than any description does.
    pub fn worked_example(mut self, request: &str, arguments: Value, result: Value) -> Self {
        self.manifest.examples.push(ToolExample {
            arguments,
            result: Some(result),
            error_code: None,
            request: Some(request.to_owned()),
        });
        self
    }

    /// Declares an example call that must fail with the tool error `code`.
    pub fn example_error(mut self, arguments: Value, code: &str) -> Self {
        self.manifest.examples.push(ToolExample {
            arguments,
            result: None,
            error_code: Some(code.to_owned()),
            request: None,
        });
        self
    }

    /// This tool's manifest entry.
    pub fn manifest(&self) -> &ToolManifest {
        &self.manifest
    }

    /// Runs the tool in-process, as the host would through the library; for plugin unit tests.
    pub fn call(&self, plugin: &P, arguments: Value) -> Result<Value, ToolError> {
        let json = (self.handler)(plugin, &arguments.to_string())?;
        serde_json::from_str(&json).map_err(|e| ToolError::tool_error(format!("the tool's result is not JSON: {e}")))
    }

    /// Runs the tool on JSON text, as the library boundary does.
    pub(crate) fn call_json(&self, plugin: &P, arguments: &str) -> Result<String, ToolError> {
        (self.handler)(plugin, arguments)
    }
}
