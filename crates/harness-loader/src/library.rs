//! One plugin library file: opened, checked (layout, ABI version, manifest) and called.

use std::path::{Path, PathBuf};

use crate::library_file::LibraryFile;

use harness_abi::abi_stable::library::{AbiHeaderRef, LibraryError};
use harness_abi::abi_stable::std_types::{RResult, RStr};
use harness_abi::manifest::{InitDeclined, Manifest, ToolError, is_valid_plugin_name, is_valid_tool_name};
use harness_abi::{ABI_VERSION, PluginModuleRef, ROOT_MODULE_SYMBOL, check_compatible};
use harness_core::CompiledSchema;
use serde_json::Value;

/// Why a file could not be loaded as a plugin. `Display` is one line for operators.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The OS loader refused the file: not a library, truncated, wrong architecture.
    #[error("not a loadable shared library: {0}")]
    Open(String),
    /// A shared library, but it exports no harness root module.
    #[error(
        "a shared library but not a harness plugin (it exports no harness root module); plugins are built with harness_sdk::export_plugin!"
    )]
    NotAPlugin,
    /// Its layout or abi_stable version does not match this host's; `detail` has the full report.
    #[error(
        "its binary interface does not match this harness ({kind}); rebuild it against a harness-sdk compatible with ABI {ABI_VERSION}"
    )]
    Layout {
        /// The kind of mismatch, in a few words.
        kind: String,
        /// abi_stable's full report (it can run to tens of kilobytes).
        detail: String,
    },
    /// Our own semver ABI rule refused it.
    #[error("{0}")]
    AbiVersion(harness_abi::AbiVersionError),
    /// The manifest is not valid JSON of the right shape, or breaks a naming or schema rule.
    #[error("invalid manifest: {0}")]
    Manifest(String),
    /// `init` refused the configuration.
    #[error("init failed: {0}")]
    Init(String),
    /// `init` declined for want of configuration: the plugin is fine, its tools not offered.
    #[error("not offered: needs {}", .0.needs)]
    Declined(InitDeclined),
}

impl LoadError {
    /// The long form, when there is one (abi_stable's layout report).
    pub fn detail(&self) -> Option<&str> {
        match self {
            Self::Layout { detail, .. } => Some(detail),
            _ => None,
        }
    }
}

/// A plugin library that passed every check; its file stays mapped for the life of the process.
pub struct PluginLibrary {
    path: PathBuf,
    /// The one open of the file that was checked and loaded (and is hashed for a pin).
    file: LibraryFile,
    module: PluginModuleRef,
    abi_version: String,
    manifest: Manifest,
}

/// One tool's schemas, compiled once at load and handed to the registry as they are.
#[derive(Debug, Clone)]
pub struct ToolSchemas {
    /// Its parameters schema.
    pub parameters: CompiledSchema,
    /// Its output schema, when it declares one.
    pub output: Option<CompiledSchema>,
}

/// Whether a manifest check compiles the tools' schemas.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Schemas {
    /// Compile each one, refusing the manifest when one does not compile.
    Compile,
    /// Leave them to whoever compiles them later ([`compile_schemas`]).
    Later,
    /// Neither compile them nor hold the manifest to its rules: only parse it (a plugin host
    /// for `plugins check`, which reports each rule in a check of its own).
    Unchecked,
}

impl std::fmt::Debug for PluginLibrary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PluginLibrary")
            .field("path", &self.path)
            .field("abi_version", &self.abi_version)
            .field("name", &self.manifest.name)
            .finish_non_exhaustive()
    }
}

#[cfg(unix)]
fn open(path: &Path) -> Result<libloading::Library, libloading::Error> {
    use libloading::os::unix::{Library, RTLD_LOCAL, RTLD_NOW};
    // Bind now so that a missing symbol fails here, not in the middle of a run; local so that
    // one plugin's symbols never satisfy another's.
    // SAFETY: loading runs the library's constructors; the caller only loads from directories
    // the operator chose (see docs/operators.md).
    unsafe { Library::open(Some(path), RTLD_NOW | RTLD_LOCAL) }.map(Into::into)
}

#[cfg(not(unix))]
fn open(path: &Path) -> Result<libloading::Library, libloading::Error> {
    // SAFETY: as above; Windows has no lazy binding to turn off.
    unsafe { libloading::Library::new(path) }
}

fn mismatch_kind(e: &LibraryError) -> String {
    match e {
        LibraryError::IncompatibleVersionNumber { expected_version, actual_version, .. } => {
            format!("host harness-abi {expected_version}, plugin harness-abi {actual_version}")
        }
        LibraryError::AbiInstability(_) => "the exported module's layout differs".to_owned(),
        LibraryError::InvalidAbiHeader(_) => "built with an incompatible abi_stable".to_owned(),
        LibraryError::InvalidCAbi { .. } => "built with an incompatible C ABI".to_owned(),
        LibraryError::ParseVersionError(_) => "unreadable interface version".to_owned(),
        LibraryError::RootModule { err, .. } => format!("its root module failed to build: {err}"),
        LibraryError::Many(list) => list.iter().map(mismatch_kind).collect::<Vec<_>>().join("; "),
        LibraryError::OpenError { .. } | LibraryError::GetSymbolError { .. } => "cannot be read".to_owned(),
    }
}

impl PluginLibrary {
    /// Opens `path`, checks layout, ABI version and manifest. Never panics on a bad file.
    ///
    /// The path should be canonical (it must contain a `/`, or the OS searches its library path).
    pub fn load(path: &Path) -> Result<Self, LoadError> {
        Self::open_checked(path, Schemas::Compile)
    }

    /// Loads as [`load`](Self::load) does, every rule of the manifest checked but its schemas
    /// not compiled: the caller compiles them once with [`compile_schemas`] (discovery, for the
    /// plugins it admits), or its harness does (a plugin host). A process that compiles no
    /// schema never builds jsonschema's metaschema validator, most of a start-up's work.
    pub fn load_schemas_unchecked(path: &Path) -> Result<Self, LoadError> {
        Self::open_checked(path, Schemas::Later)
    }

    /// Loads as [`load_schemas_unchecked`](Self::load_schemas_unchecked) does, but holds the
    /// manifest to no rule, only parsed: for a plugin host under `plugins check`, whose calls
    /// must run even for a manifest the harness would refuse (the check reports the rule).
    pub(crate) fn load_rules_unchecked(path: &Path) -> Result<Self, LoadError> {
        Self::open_checked(path, Schemas::Unchecked)
    }

    /// Loads the file opened already (its signature checked through that open) as
    /// [`load_schemas_unchecked`](Self::load_schemas_unchecked) does.
    pub(crate) fn load_opened(file: LibraryFile) -> Result<Self, LoadError> {
        Self::load_file(file, Schemas::Later)
    }

    /// The manifest as the plugin gives it, unparsed (calls the plugin's manifest function).
    pub(crate) fn raw_manifest(&self) -> String {
        (self.module.manifest())().into_string()
    }

    fn open_checked(path: &Path, schemas: Schemas) -> Result<Self, LoadError> {
        Self::load_file(LibraryFile::open(path).map_err(LoadError::Open)?, schemas)
    }

    /// Checks and loads the file opened, through that open (never its path again).
    fn load_file(file: LibraryFile, schemas: Schemas) -> Result<Self, LoadError> {
        crate::preflight::check(file.file()).map_err(LoadError::Open)?;
        let library = open(&file.loader_path()).map_err(|e| LoadError::Open(file.name_in(describe_open_error(&e))))?;
        file.loaded();
        file.check_loaded_same().map_err(LoadError::Open)?;
        // SAFETY: the symbol, when present, is the `LibHeader` static that abi_stable's export
        // writes; `AbiHeaderRef` is the reference type abi_stable itself reads it as, and its
        // `upgrade` checks the header before anything else is trusted.
        let header: AbiHeaderRef = match unsafe { library.get::<AbiHeaderRef>(ROOT_MODULE_SYMBOL) } {
            Ok(sym) => *sym,
            Err(_) => return Err(LoadError::NotAPlugin),
        };
        let layout = |e: LibraryError| LoadError::Layout { kind: mismatch_kind(&e), detail: e.to_string() };
        let module = header.upgrade().and_then(|h| h.init_root_module::<PluginModuleRef>()).map_err(layout)?;
        // The module's functions live in the library: it must stay mapped for ever. abi_stable
        // does the same; unloading Rust libraries is not sound anyway (thread-locals, statics).
        std::mem::forget(library);

        let abi_version = (module.abi_version())().into_string();
        check_abi(&abi_version)?;
        let manifest_json = (module.manifest())().into_string();
        let manifest = check_manifest(&manifest_json, schemas)?;
        Ok(Self { path: file.path().to_owned(), file, module, abi_version, manifest })
    }

    /// Calls `init` with the plugin's configuration section.
    pub fn init(&self, config: &Value) -> Result<(), LoadError> {
        let json = config.to_string();
        match (self.module.init())(RStr::from_str(&json)) {
            RResult::ROk(()) => Ok(()),
            RResult::RErr(message) => Err(match InitDeclined::from_init_error(&message) {
                Some(declined) => LoadError::Declined(declined),
                None => LoadError::Init(message.into_string()),
            }),
        }
    }

    /// Calls one tool with JSON arguments text; the result JSON text or the tool's error.
    pub fn call(&self, tool: &str, arguments_json: &str) -> Result<String, ToolError> {
        match (self.module.call())(RStr::from_str(tool), RStr::from_str(arguments_json)) {
            RResult::ROk(json) => Ok(json.into_string()),
            RResult::RErr(json) => Err(serde_json::from_str::<ToolError>(&json).unwrap_or_else(|_| {
                ToolError::tool_error(format!("the plugin returned an unreadable error: {}", json.as_str()))
            })),
        }
    }

    /// The file it was loaded from (canonical).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The SHA-256 of the very file loaded (read from the open it was loaded through).
    pub(crate) fn sha256(&self) -> Option<String> {
        self.file.sha256().ok()
    }

    /// The ABI version it was built against.
    pub fn abi_version(&self) -> &str {
        &self.abi_version
    }

    /// Its manifest, checked.
    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }
}

/// libloading's own message is only "dlopen failed"; the OS's reason is in its source.
fn describe_open_error(e: &libloading::Error) -> String {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        text = format!("{text}: {s}");
        source = s.source();
    }
    text.lines().next().unwrap_or("").trim().to_owned()
}

/// Checks a plugin's ABI version against this harness's by our semver rule.
pub fn check_abi(abi_version: &str) -> Result<(), LoadError> {
    check_compatible(ABI_VERSION, abi_version).map_err(LoadError::AbiVersion)
}

/// Parses and checks a manifest: names, versions, descriptions, schemas that compile.
pub fn parse_manifest(json: &str) -> Result<Manifest, LoadError> {
    check_manifest(json, Schemas::Compile)
}

/// Parses and checks a manifest as [`parse_manifest`] does, except that its schemas are not
/// compiled: [`compile_schemas`] does that, once, for the plugins that are kept.
pub fn parse_manifest_schemas_unchecked(json: &str) -> Result<Manifest, LoadError> {
    check_manifest(json, Schemas::Later)
}

/// Compiles each tool's schemas, in manifest order; a schema that does not compile refuses
/// the plugin, naming the tool.
pub fn compile_schemas(m: &Manifest) -> Result<Vec<ToolSchemas>, LoadError> {
    let bad = LoadError::Manifest;
    let compile = |schema: &Value, tool: &str, which: &str| {
        CompiledSchema::compile(schema)
            .map_err(|e| bad(format!("plugin {}, tool {tool:?}: {which} schema does not compile: {e}", m.name)))
    };
    m.tools
        .iter()
        .map(|t| {
            let parameters = compile(&t.parameters, &t.name, "parameters")?;
            let output = t.output.as_ref().map(|o| compile(o, &t.name, "output")).transpose()?;
            Ok(ToolSchemas { parameters, output })
        })
        .collect()
}

/// Each tool's schemas as [`CompiledSchema::deferred`]: for a manifest whose schemas are known
/// to compile with this build (the plugin cache says so), compiled off the start-up path (on
/// the warm-up thread, `schema_warmup`).
pub(crate) fn deferred_schemas(m: &Manifest) -> Vec<ToolSchemas> {
    m.tools
        .iter()
        .map(|t| ToolSchemas {
            parameters: crate::schema_warmup::deferred(&t.parameters),
            output: t.output.as_ref().map(crate::schema_warmup::deferred),
        })
        .collect()
}

fn check_manifest(json: &str, schemas: Schemas) -> Result<Manifest, LoadError> {
    let bad = LoadError::Manifest;
    if let Ok(Value::Object(o)) = serde_json::from_str::<Value>(json)
        && let Some(Value::String(e)) = o.get("error")
    {
        return Err(bad(format!("the plugin could not build its manifest: {e}")));
    }
    let m: Manifest = serde_json::from_str(json).map_err(|e| bad(e.to_string()))?;
    if schemas == Schemas::Unchecked {
        return Ok(m);
    }
    check_rules(&m)?;
    if schemas == Schemas::Compile {
        compile_schemas(&m)?;
    }
    Ok(m)
}

/// The manifest rules (names, versions, descriptions, parameters of type object), without
/// compiling the schemas.
pub(crate) fn check_rules(m: &Manifest) -> Result<(), LoadError> {
    let bad = LoadError::Manifest;
    if !is_valid_plugin_name(&m.name) {
        return Err(bad(format!("plugin name {:?} must match ^[a-z][a-z0-9_-]{{0,63}}$", m.name)));
    }
    if semver::Version::parse(&m.version).is_err() {
        return Err(bad(format!("plugin {} has version {:?}, which is not semver (e.g. 1.2.3)", m.name, m.version)));
    }
    if m.tools.is_empty() {
        return Err(bad(format!("plugin {} offers no tools", m.name)));
    }
    let mut seen = std::collections::HashSet::new();
    for t in &m.tools {
        let at = format!("plugin {}, tool {:?}", m.name, t.name);
        if !is_valid_tool_name(&t.name) {
            return Err(bad(format!("{at}: tool names must match ^[a-zA-Z0-9_-]{{1,64}}$")));
        }
        if t.name == harness_core::FINISH {
            return Err(bad(format!("{at}: the name \"finish\" is reserved for the harness's own terminal tool")));
        }
        if !seen.insert(t.name.as_str()) {
            return Err(bad(format!("{at}: the tool is declared twice")));
        }
        if t.description.trim().is_empty() {
            return Err(bad(format!("{at}: the tool has no description; the model chooses tools by it")));
        }
        if t.parameters.get("type").and_then(Value::as_str) != Some("object") {
            return Err(bad(format!("{at}: parameters must be a JSON Schema with \"type\": \"object\"")));
        }
    }
    Ok(())
}

/// Loads a library here whose manifest was read and checked through a plugin host: its
/// schemas are not compiled again, and a manifest that differs from the one read there (the
/// library changed, or answers differently in each process) refuses it.
pub(crate) fn load_as_probed(
    file: LibraryFile,
    probed: &Manifest,
    from_cache: bool,
) -> Result<PluginLibrary, LoadError> {
    let library = PluginLibrary::load_file(file, Schemas::Later)?;
    if library.manifest() != probed {
        let why = if from_cache {
            "it declared another manifest here than the plugin cache holds for it (was the cache entry edited?); delete the plugin cache (docs/operators.md) and restart the harness"
        } else {
            "it declared one manifest in its plugin host and another here (was the file replaced during start-up?); restart the harness"
        };
        return Err(LoadError::Manifest(why.to_owned()));
    }
    Ok(library)
}

/// Loads a library here whose manifest the plugin cache gave, refusing it when it declares
/// another (see [`load_as_probed`]).
pub(crate) fn load_as_cached(file: LibraryFile, cached: &Manifest) -> Result<PluginLibrary, LoadError> {
    load_as_probed(file, cached, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(tools: &str) -> String {
        format!(r#"{{"name":"p","version":"1.0.0","description":"d","tools":[{tools}]}}"#)
    }
    const T: &str = r#"{"name":"t","description":"d","parameters":{"type":"object"},"effects":"pure"}"#;

    #[test]
    fn a_good_manifest_passes() {
        assert_eq!(parse_manifest(&manifest(T)).unwrap().tools.len(), 1);
    }

    #[test]
    fn each_tool_s_schemas_are_compiled_in_manifest_order() {
        let second = r#"{"name":"u","description":"d","parameters":{"type":"object","required":["x"]},"output":{"type":"integer"},"effects":"pure"}"#;
        let m = parse_manifest(&manifest(&format!("{T},{second}"))).unwrap();
        let schemas = compile_schemas(&m).unwrap();
        assert_eq!(schemas.len(), m.tools.len());
        for (tool, compiled) in m.tools.iter().zip(&schemas) {
            assert_eq!(compiled.parameters.source(), &tool.parameters);
            assert_eq!(compiled.output.as_ref().map(CompiledSchema::source), tool.output.as_ref());
        }
        assert!(!schemas[1].parameters.is_valid(&serde_json::json!({})));
    }

    #[test]
    fn schemas_can_be_left_to_a_later_compile_and_every_other_rule_still_holds() {
        let bad_schema = manifest(&T.replace("{\"type\":\"object\"}", "{\"type\":\"object\",\"minProperties\":\"x\"}"));
        let m = parse_manifest_schemas_unchecked(&bad_schema).unwrap();
        let e = compile_schemas(&m).unwrap_err().to_string();
        assert!(e.contains("plugin p, tool \"t\": parameters schema does not compile"), "{e}");
        assert!(parse_manifest(&bad_schema).is_err());
        let bad_name = manifest(T).replace("\"p\"", "\"P\"");
        assert!(parse_manifest_schemas_unchecked(&bad_name).unwrap_err().to_string().contains("plugin name"));
    }

    #[test]
    fn manifest_rules() {
        let cases = [
            (manifest(T).replace("\"p\"", "\"P\""), "plugin name"),
            (manifest(T).replace("1.0.0", "one"), "not semver"),
            (manifest(""), "offers no tools"),
            (manifest(&format!("{T},{T}")), "declared twice"),
            (manifest(&T.replace("\"t\"", "\"finish\"")), "reserved"),
            (manifest(&T.replace("\"t\"", "\"a.b\"")), "tool names must match"),
            (manifest(&T.replace("\"description\":\"d\"", "\"description\":\" \"")), "no description"),
            (manifest(&T.replace("{\"type\":\"object\"}", "{\"type\":\"string\"}")), "\"type\": \"object\""),
            (
                manifest(&T.replace("{\"type\":\"object\"}", "{\"type\":\"object\",\"minProperties\":\"x\"}")),
                "does not compile",
            ),
            ("{\"error\":\"boom\"}".to_owned(), "could not build its manifest: boom"),
            ("not json".to_owned(), "invalid manifest"),
        ];
        for (json, want) in cases {
            let e = parse_manifest(&json).unwrap_err().to_string();
            assert!(e.contains(want), "{json}: {e}");
        }
    }
}
