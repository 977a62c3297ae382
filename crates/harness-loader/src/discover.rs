//! Discovery: which files in which directories, which plugins and tools are enabled.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use harness_abi::manifest::{Effects, InitDeclined, Manifest, ToolManifest};
use harness_sandbox::confine::{Confinement, EffectSet, Enforcement};
use serde::Serialize;
use serde_json::Value;

use crate::cache::{Cache, Cached, Declared, Identity, InitOutcome, Verified, config_digest};
use crate::isolation::Isolation;
use crate::late::LateLibrary;
use crate::library::{LoadError, PluginLibrary, ToolSchemas, load_as_probed};
use crate::library_file::LibraryFile;
use crate::options::{DiscoveryOptions, ToolState};
use crate::placement::Placement;

/// A file that was not loaded, and why.
#[derive(Debug, Clone, Serialize)]
pub struct Skipped {
    /// The file.
    pub path: PathBuf,
    /// Why, in one line.
    pub reason: String,
    /// The full report, when the one line had to shorten it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// A plugin that loaded, with the state of each of its tools.
#[derive(Debug)]
pub struct LoadedPlugin {
    /// The library file (canonical).
    pub path: PathBuf,
    /// The ABI version it was built against.
    pub abi_version: String,
    /// Its manifest, checked.
    pub manifest: Manifest,
    /// The library, when loaded into the harness (in-process plugins with tools offered);
    /// a plugin in process isolation is never loaded here.
    pub library: Option<Arc<PluginLibrary>>,
    /// Whether `init` ran (it does not for plugins with no tool offered).
    pub initialised: bool,
    /// Each tool's state, in manifest order.
    pub tools: Vec<(ToolManifest, ToolState)>,
    /// Each tool's schemas, compiled once when the plugin was admitted, in manifest order:
    /// the registry takes them as they are.
    pub schemas: Vec<ToolSchemas>,
    /// Where its tools run.
    pub isolation: Isolation,
    /// Why they run there.
    pub placement: Placement,
    /// What the kernel enforces on it.
    pub enforcement: Enforcement,
    /// What its children may touch, by effect class (`pure`, `reads`, ...), when the kernel
    /// enforces it: each class of its offered tools runs in a child of its own, so that each
    /// tool is held to its own declaration.
    pub confinement: BTreeMap<String, Confinement>,
    /// Whether its manifest came from the plugin cache rather than a plugin host.
    pub from_cache: bool,
    /// The library opened at its first call (`DiscoveryOptions::open_lazily`), in place of
    /// `library`; `initialised` stays false.
    pub late: Option<Arc<LateLibrary>>,
    /// The plugin cache knows how its `init` goes with its configuration as it is now, so its
    /// start may wait for its first call: what it offers is known without starting it.
    pub init_known: bool,
    /// The trusted publisher whose signature it carries (`None`: unsigned).
    pub signed_by: Option<String>,
}

impl LoadedPlugin {
    /// Marks the tools it would offer as needing configuration: its `init` declined.
    pub(crate) fn decline(&mut self, declined: &InitDeclined) {
        for (_, state) in &mut self.tools {
            if *state == ToolState::Offered {
                *state = ToolState::NeedsConfiguration { needs: declined.needs.clone() };
            }
        }
    }
}

/// A library file opened (in a child, or here) and its manifest read.
struct Opened {
    path: PathBuf,
    abi_version: String,
    manifest: Manifest,
    library: Option<PluginLibrary>,
    origin: Origin,
    /// How its `init` last went, as the plugin cache remembers it.
    init: Option<InitOutcome>,
    /// The one open of the file, made when it was listed (`None` once a library holds it).
    file: Option<LibraryFile>,
    /// The trusted publisher that signed it.
    signed_by: Option<String>,
    /// Its signature as verified at this start-up, for the plugin cache to record.
    verified: Option<Verified>,
}

/// A library file listed, opened once and its signature checked.
struct Listed {
    path: PathBuf,
    identity: Option<Identity>,
    file: LibraryFile,
    /// What the plugin cache holds for the file as it is now.
    hit: Option<Cached>,
    signed_by: Option<String>,
    verified: Option<Verified>,
}

/// Where an opened file's manifest was read.
#[derive(Debug, Clone, Copy)]
enum Origin {
    /// Here, by loading the library (no plugin host).
    Here,
    /// By a plugin host, the file having this identity before it was read (`None`: no cache).
    Probed(Option<Identity>),
    /// From the plugin cache, for the file with this identity.
    Cached { identity: Identity, schemas_checked: bool },
}

/// Everything discovery found.
#[derive(Debug, Default)]
pub struct Discovery {
    /// The options it ran with, for registering the tools.
    pub options: DiscoveryOptions,
    /// Plugins that loaded, in directory order.
    pub plugins: Vec<LoadedPlugin>,
    /// Files that were refused.
    pub skipped: Vec<Skipped>,
    /// Things an operator should know: duplicates, unknown names in enable/disable, missing dirs.
    pub warnings: Vec<String>,
    /// The children started for process-isolated plugins, kept warm for the run.
    // The one import circle left here: `register.rs` is the other half of `Discovery`'s impl
    // (filling the registry, starting the hosts), and defines this type; one type in two files.
    pub(crate) hosts: crate::register::Hosts,
    /// The plugin cache, when one is used.
    cache: Option<Cache>,
}

/// The platform's library file extension, without the dot.
pub fn library_extension() -> &'static str {
    std::env::consts::DLL_EXTENSION
}

/// Lists the candidate library files of one directory, sorted by name for a stable order:
/// each entry's path, and whether it is a link (else a plain file, known from the listing).
fn candidates(dir: &Path) -> std::io::Result<Vec<(PathBuf, bool)>> {
    let mut files: Vec<(PathBuf, bool)> = std::fs::read_dir(dir)?
        .filter_map(Result::ok)
        .filter(|e| Path::new(&e.file_name()).extension().is_some_and(|x| x == library_extension()))
        .filter_map(|e| {
            let kind = e.file_type().ok()?;
            let path = e.path();
            (kind.is_file() || (kind.is_symlink() && path.is_file())).then_some((path, kind.is_symlink()))
        })
        .collect();
    files.sort();
    Ok(files)
}

/// The canonical path of `file`, listed in `dir`, whose canonical path is `canonical_dir`
/// when it has one: a plain file's is that directory's joined with its name (no call to the
/// system per file, since the directory is resolved once); a link's is resolved.
fn resolve(file: &Path, is_link: bool, canonical_dir: Option<&Path>) -> std::io::Result<PathBuf> {
    match (is_link, canonical_dir, file.file_name()) {
        (false, Some(dir), Some(name)) => Ok(dir.join(name)),
        _ => dunce::canonicalize(file),
    }
}

/// The library files of every directory, in order, each with its identity and opened once:
/// each file once (one file reached by two paths loads once), insecure ones and those whose
/// signature the policy refuses skipped.
fn files(options: &DiscoveryOptions, found: &mut Discovery) -> Vec<Listed> {
    let mut seen_files: HashSet<(u64, u64)> = HashSet::new();
    let mut seen_paths: HashSet<PathBuf> = HashSet::new();
    let mut safe_dirs: HashSet<PathBuf> = HashSet::new();
    let mut out = Vec::new();
    for dir in &options.dirs {
        let listed = match candidates(dir) {
            Ok(files) => files,
            Err(e) => {
                found.warnings.push(format!("plugin directory {} cannot be read: {e}", dir.display()));
                continue;
            }
        };
        let canonical_dir = dunce::canonicalize(dir).ok();
        for (file, is_link) in listed {
            let Ok(path) = resolve(&file, is_link, canonical_dir.as_deref()) else {
                found.skipped.push(Skipped {
                    path: file,
                    reason: "cannot be resolved (a broken link?)".to_owned(),
                    detail: None,
                });
                continue;
            };
            // One read of the file's metadata serves its identity and its permission check.
            let meta = match std::fs::metadata(&path) {
                Ok(meta) => meta,
                Err(e) => {
                    found.skipped.push(Skipped { path, reason: format!("cannot be read: {e}"), detail: None });
                    continue;
                }
            };
            let identity = Identity::from_metadata(&path, &meta);
            if !seen_paths.insert(path.clone()) || identity.is_some_and(|id| !seen_files.insert(id.file())) {
                continue;
            }
            if let Err(why) = crate::trusted_path::check(&path, &meta, &mut safe_dirs) {
                if !options.allow_insecure {
                    found.skipped.push(Skipped { path, reason: format!("insecure: {why}"), detail: None });
                    continue;
                }
                found.warnings.push(format!("loading {} although it is insecure: {why}", path.display()));
            }
            let hit = found.cache.as_ref().zip(identity).and_then(|(cache, id)| cache.get(&path, id));
            let known = hit.as_ref().and_then(|h| h.signature.as_ref());
            match open_signed(&path, identity, &options.signatures, known) {
                Ok((file, checked)) => {
                    let crate::signature::Checked { signed_by, verified } = checked;
                    out.push(Listed { path, identity, file, hit, signed_by, verified });
                }
                Err(reason) => found.skipped.push(Skipped { path, reason, detail: None }),
            }
        }
    }
    out
}

/// Opens a listed file, the one open through which it is checked, hashed and loaded, and
/// checks its signature over that open's bytes, before any plugin code of it runs anywhere
/// (unless the plugin cache vouches for this signature over this very state of the file).
fn open_signed(
    path: &Path,
    listed: Option<Identity>,
    policy: &crate::signature::SignaturePolicy,
    known: Option<&Verified>,
) -> Result<(LibraryFile, crate::signature::Checked), String> {
    let file = LibraryFile::open(path)?;
    if listed.is_some() && file.identity() != listed {
        return Err(CHANGED.to_owned());
    }
    let checked = crate::signature::check(&file, policy, known)?;
    Ok((file, checked))
}

/// Why a file is refused that is no longer the file listed.
const CHANGED: &str =
    "the file changed during start-up (it is not the file that was listed and read); restart the harness";

/// Opens each file: in a child of its own when a plugin host can be started (all at once, for
/// the files the plugin cache does not answer for), so that no plugin code runs in the
/// harness before its isolation is decided; here otherwise.
fn open_all(
    options: &DiscoveryOptions,
    listed: Vec<Listed>,
    confine: bool,
    cache: Option<&Cache>,
) -> Vec<Result<Opened, Skipped>> {
    if let Some(command) = &options.host_command {
        return read_through_hosts(command, listed, confine, cache);
    }
    listed
        .into_iter()
        .map(|Listed { path, file, signed_by, .. }| match PluginLibrary::load_opened(file) {
            Ok(library) => Ok(Opened {
                abi_version: library.abi_version().to_owned(),
                manifest: library.manifest().clone(),
                library: Some(library),
                path,
                origin: Origin::Here,
                init: None,
                file: None,
                signed_by,
                verified: None,
            }),
            Err(e) => Err(skip(path, &e)),
        })
        .collect()
}

/// Each file's manifest from the plugin cache when it answers for the file, else read by a
/// plugin host (one child for all the others), in the files' order.
fn read_through_hosts(
    command: &crate::isolation::HostCommand,
    listed: Vec<Listed>,
    confine: bool,
    cache: Option<&Cache>,
) -> Vec<Result<Opened, Skipped>> {
    let mut opened = Vec::with_capacity(listed.len());
    let mut unread = Vec::new();
    for file in listed {
        match cached(cache, file) {
            Ok(hit) => opened.push(Some(Ok(hit))),
            Err(miss) => {
                opened.push(None);
                unread.push(*miss);
            }
        }
    }
    let files: Vec<PathBuf> = unread.iter().map(|l| l.path.clone()).collect();
    let answers = crate::isolation::probe(command, &files, confine);
    let mut probed = unread.into_iter().zip(answers).map(|(listed, p)| checked(listed, p));
    opened.into_iter().filter_map(|o| o.or_else(|| probed.next())).collect()
}

/// The file as the plugin cache knows it; else the file and its identity, under which what a
/// plugin host reads is cached.
///
/// Its signature was checked when the file was listed (the entry's verdict serves there only
/// for the same signature file and a key still trusted); a verdict reached by reading the
/// file is recorded here, so that the next start-up need not read it.
fn cached(cache: Option<&Cache>, mut listed: Listed) -> Result<Opened, Box<Listed>> {
    let (Some(cache), Some(identity), Some(hit)) = (cache, listed.identity, listed.hit.take()) else {
        return Err(Box::new(listed));
    };
    if let Some(verified) = listed.verified {
        cache.put_signature(&listed.path, verified);
    }
    Ok(Opened {
        path: listed.path,
        abi_version: hit.abi_version,
        manifest: hit.manifest,
        library: None,
        origin: Origin::Cached { identity, schemas_checked: hit.schemas_checked },
        init: hit.init,
        file: Some(listed.file),
        signed_by: listed.signed_by,
        verified: None,
    })
}

/// A manifest read through a child, checked again here (its schemas once the plugin is
/// admitted): the child ran plugin code.
fn checked(
    listed: Listed,
    probed: Result<crate::isolation::probe::Probed, crate::isolation::probe::Refusal>,
) -> Result<Opened, Skipped> {
    let Listed { path, identity, file, signed_by, verified, .. } = listed;
    match probed {
        Ok(probed) => {
            let json = serde_json::to_string(&probed.manifest).unwrap_or_default();
            let manifest =
                crate::library::parse_manifest_schemas_unchecked(&json).map_err(|e| skip(path.clone(), &e))?;
            crate::library::check_abi(&probed.abi_version).map_err(|e| skip(path.clone(), &e))?;
            Ok(Opened {
                path,
                abi_version: probed.abi_version,
                manifest,
                library: None,
                origin: Origin::Probed(identity),
                init: None,
                file: Some(file),
                signed_by,
                verified,
            })
        }
        Err(refusal) => Err(Skipped { path, reason: refusal.reason, detail: refusal.detail }),
    }
}

/// Names and tools decided so far, so that the first plugin of a name or tool wins.
#[derive(Default)]
struct Taken {
    names: HashMap<String, PathBuf>,
    tools: HashMap<String, String>,
}

/// Searches the directories, loads every plugin file once, and decides what is offered.
///
/// Nothing here fails as a whole: each bad file is one `Skipped` entry and the rest load.
pub fn discover(options: &DiscoveryOptions) -> Discovery {
    // Checking the first manifest needs jsonschema's metaschema validator: it is built while
    // the files are listed and probed, not after.
    crate::schema_warmup::prepare_schema_compiler();
    let mut found = Discovery { options: options.clone(), ..Discovery::default() };
    found.cache = options.cache_dir.as_deref().filter(|_| options.host_command.is_some()).and_then(|dir| {
        Cache::open(dir)
            .map_err(|why| found.warnings.push(format!("the plugin cache in {} is not used: {why}", dir.display())))
            .ok()
    });
    let paths = files(options, &mut found);
    let kernel = harness_sandbox::confine::kernel_support();
    let confine = kernel.landlock_abi().is_some();
    let mut taken = Taken::default();
    for opened in open_all(options, paths, confine, found.cache.as_ref()) {
        match opened {
            Ok(opened) => found.admit(opened, &kernel, &mut taken),
            Err(skipped) => found.skipped.push(skipped),
        }
    }
    found.start_hosts();
    for rule in options.enable.iter().chain(&options.disable) {
        let plugin = rule.split_once('.').map_or(rule.as_str(), |(p, _)| p);
        let known = found.plugins.iter().any(|p| {
            p.manifest.name == plugin
                && rule.split_once('.').is_none_or(|(_, t)| p.manifest.tools.iter().any(|x| x.name == t))
        });
        if !known {
            found.warnings.push(format!("enable/disable names {rule:?}, but no loaded plugin or tool has that name"));
        }
    }
    found.log();
    found
}

impl Discovery {
    /// Says on the diagnostics log (`-v`) what each file became: loaded, with its isolation
    /// and whether the cache answered, or skipped and why.
    fn log(&self) {
        for p in &self.plugins {
            tracing::info!(
                target: "harness_loader",
                "plugin {}: loaded {} {} (isolation {}, from cache: {})",
                p.path.display(),
                p.manifest.name,
                p.manifest.version,
                p.isolation.as_str(),
                p.from_cache
            );
        }
        for s in &self.skipped {
            tracing::info!(target: "harness_loader", "plugin {}: skipped: {}", s.path.display(), s.reason);
        }
    }

    /// The process-isolated plugins with tools offered whose declared effects this platform
    /// does not enforce in full, and what it does not: for the first line of a run's trace.
    pub fn unenforced(&self) -> Vec<harness_core::Unenforced> {
        self.plugins
            .iter()
            .filter(|p| p.isolation == Isolation::Process)
            .filter_map(|p| {
                let offered: Vec<Effects> =
                    p.tools.iter().filter(|(_, s)| *s == ToolState::Offered).map(|(t, _)| t.effects).collect();
                let reason = p.enforcement.shortfall().filter(|_| !offered.is_empty())?;
                let effects = EffectSet::of(offered).describe();
                Some(harness_core::Unenforced { plugin: p.manifest.name.clone(), effects, reason })
            })
            .collect()
    }

    /// Decides what an opened plugin offers, where it runs, and what confines it.
    fn admit(&mut self, opened: Opened, kernel: &Enforcement, taken: &mut Taken) {
        let Opened { path, abi_version, manifest, library, origin, init, file, signed_by, verified } = opened;
        let declared =
            |schemas| (Declared { abi_version: &abi_version, manifest: &manifest, schemas }, verified.clone());
        let name = manifest.name.clone();
        if let Some(first) = taken.names.get(&name) {
            let reason = format!(
                "plugin {name:?} is already loaded from {}; the first in directory order wins",
                first.display()
            );
            self.remember(&path, origin, declared(false));
            self.skipped.push(Skipped { path, reason, detail: None });
            return;
        }
        let schemas = match self.schemas(&path, origin, declared(true)) {
            Ok(schemas) => schemas,
            Err(e) => {
                self.skipped.push(skip(path, &e));
                return;
            }
        };
        // The one open through which the file was listed, its signature checked, and is
        // hashed for its pin and loaded here.
        let mut file = file;
        if library.is_none()
            && let Err(reason) = still_listed(&path, origin)
        {
            self.skipped.push(Skipped { path, reason, detail: None });
            return;
        }
        let tools = self.tool_states(&name, &path, &manifest, taken);
        let offered: Vec<Effects> =
            tools.iter().filter(|(_, s)| *s == ToolState::Offered).map(|(t, _)| t.effects).collect();
        let effects = EffectSet::of(offered.iter().copied());
        let sha256 = || match (&library, &file) {
            (Some(library), _) => library.sha256(),
            (None, Some(file)) => file.sha256().ok(),
            (None, None) => None,
        };
        let placement = self.options.placement_of_signed(&name, &path, effects, signed_by.as_deref(), sha256);
        let isolation = placement.isolation();
        let config = self.options.configs.get(&name).cloned().unwrap_or_else(|| Value::Object(Default::default()));
        let known = init.filter(|o| o.config == config_digest(&config));
        let mut plugin = LoadedPlugin {
            path,
            abi_version,
            manifest,
            library: None,
            initialised: false,
            tools,
            schemas,
            isolation,
            placement,
            enforcement: Enforcement::None { reason: "it runs in the harness's own process".to_owned() },
            confinement: BTreeMap::new(),
            from_cache: matches!(origin, Origin::Cached { .. }),
            late: None,
            init_known: known.is_some(),
            signed_by,
        };
        if isolation == Isolation::Process {
            let grants = self.options.grants_of(&name, &config);
            if effects.writes
                && let Some(reason) = self.options.write_area_refusal(&name, &grants)
            {
                release_tools(taken, &name, &plugin.tools);
                self.skipped.push(Skipped { path: plugin.path, reason, detail: None });
                return;
            }
            plugin.enforcement = kernel.of(effects, &grants);
            if plugin.enforcement.landlock_abi().is_some() {
                for effect in &offered {
                    let confinement = Confinement::for_effects(&plugin.path, EffectSet::of([*effect]), &grants);
                    plugin.confinement.insert(effect.as_str().to_owned(), confinement);
                }
            }
        }
        if !offered.is_empty()
            && let Some(shortfall) = plugin.enforcement.shortfall()
            && !self.short_of_enforcement(&name, &plugin, effects, &shortfall)
        {
            release_tools(taken, &name, &plugin.tools);
            return;
        }
        // The cache knows this configuration makes it decline: no tool offered, nothing started.
        if let Some(declined) = known.as_ref().and_then(|o| o.declined.as_ref())
            && self.options.open_lazily
        {
            release_tools(taken, &name, &plugin.tools);
            plugin.decline(declined);
        } else if isolation == Isolation::Process {
            plugin.library = library.map(Arc::new);
        } else if let (Origin::Cached { identity, .. }, true, false, true) =
            (origin, self.options.open_lazily, offered.is_empty(), plugin.init_known)
            && let Some(file) = file.take()
        {
            let late = LateLibrary::new(file, identity, plugin.manifest.clone(), config);
            plugin.late = Some(Arc::new(late));
        } else if !offered.is_empty() {
            // In-process: loaded here (again, after its probe, through the open hashed above)
            // and initialised now.
            let loaded = match (library, file) {
                (Some(library), _) => Ok(library),
                (None, Some(file)) => load_as_probed(file, &plugin.manifest, plugin.from_cache),
                (None, None) => Err(LoadError::Open("it was not opened".to_owned())),
            };
            let outcome = loaded.and_then(|library| library.init(&config).map(|()| library));
            match outcome {
                Ok(library) => {
                    plugin.library = Some(Arc::new(library));
                    plugin.initialised = true;
                    self.remember_init(&plugin.path, &config, None);
                }
                Err(LoadError::Declined(declined)) => {
                    release_tools(taken, &name, &plugin.tools);
                    self.remember_init(&plugin.path, &config, Some(declined.clone()));
                    plugin.decline(&declined);
                }
                Err(e) => {
                    release_tools(taken, &name, &plugin.tools);
                    self.skipped.push(skip(plugin.path, &e));
                    return;
                }
            }
        }
        taken.names.insert(name, plugin.path.clone());
        self.plugins.push(plugin);
    }

    /// Reports a plugin whose declared effects the kernel does not enforce in full: a warning,
    /// and `true` (it is offered); or, when full enforcement is required, skipped with what it
    /// lacks, and `false`.
    fn short_of_enforcement(&mut self, name: &str, plugin: &LoadedPlugin, effects: EffectSet, shortfall: &str) -> bool {
        let effects = effects.describe();
        let required = self.options.require_full_enforcement;
        let what = match (&plugin.enforcement, plugin.isolation) {
            (_, Isolation::InProcess) if !required => return true,
            (_, Isolation::InProcess) => format!(
                "plugin {name:?} runs in the harness's own process, where the kernel enforces nothing; run it with --isolation process"
            ),
            (Enforcement::Partial { .. }, _) => {
                format!("plugin {name:?} is partially enforced: of its declared effects ({effects}), {shortfall}")
            }
            (_, _) => format!(
                "plugin {name:?} runs in process isolation without kernel confinement: {shortfall}; its declared effects ({effects}) are not enforced"
            ),
        };
        if required {
            let reason = format!(
                "{what}; full enforcement is required ([isolation] require = \"full\" or --require-enforcement), so it is not offered"
            );
            self.skipped.push(Skipped { path: plugin.path.clone(), reason, detail: None });
            return false;
        }
        self.warnings.push(what);
        true
    }

    /// A kept plugin's schemas: compiled here, once, and the registry takes them as they are;
    /// or, for a file whose schemas the plugin cache says compiled, compiled on the schema
    /// thread, off the way to the first model request.
    fn schemas(
        &self,
        path: &Path,
        origin: Origin,
        declared: (Declared<'_>, Option<Verified>),
    ) -> Result<Vec<ToolSchemas>, LoadError> {
        if let Origin::Cached { schemas_checked: true, .. } = origin {
            return Ok(crate::library::deferred_schemas(declared.0.manifest));
        }
        let schemas = crate::library::compile_schemas(declared.0.manifest)?;
        self.remember(path, origin, declared);
        Ok(schemas)
    }

    /// Writes what a plugin host (or, for the schemas, this process) found out about a file to
    /// the plugin cache, when there is one and it does not know it already.
    fn remember(&self, path: &Path, origin: Origin, (declared, verified): (Declared<'_>, Option<Verified>)) {
        let identity = match origin {
            Origin::Probed(Some(identity)) => identity,
            Origin::Cached { identity, schemas_checked: false } if declared.schemas => identity,
            _ => return,
        };
        if let Some(cache) = &self.cache {
            cache.put(path, identity, declared, verified);
        }
    }

    /// Writes how a plugin's `init` went with `config` to the plugin cache, so that a start-up
    /// that opens it only at its first call offers what it would offer (never a tool whose
    /// plugin declines), without starting it.
    pub(crate) fn remember_init(&self, path: &Path, config: &Value, declined: Option<InitDeclined>) {
        if let Some(cache) = &self.cache {
            cache.put_init(path, InitOutcome { config: config_digest(config), declined });
        }
    }

    /// Each tool's state; a tool whose name another plugin offers already is not offered.
    fn tool_states(
        &mut self,
        name: &str,
        path: &Path,
        manifest: &Manifest,
        taken: &mut Taken,
    ) -> Vec<(ToolManifest, ToolState)> {
        let mut tools = Vec::new();
        for tool in &manifest.tools {
            let mut state = self.options.tool_state(name, manifest.test_only, tool);
            if state == ToolState::Offered {
                if let Some(owner) = taken.tools.get(&tool.name) {
                    self.warnings.push(format!(
                        "tool {:?} of plugin {name:?} ({}) is not offered: plugin {owner:?} already offers a tool of that name; disable one of them with --disable {name}.{} or --disable {owner}.{}",
                        tool.name,
                        path.display(),
                        tool.name,
                        tool.name
                    ));
                    state = ToolState::NameTaken { by: owner.clone() };
                } else {
                    taken.tools.insert(tool.name.clone(), name.to_owned());
                }
            }
            tools.push((tool.clone(), state));
        }
        tools
    }
}

/// Refuses a file whose path no longer holds the file listed (and read by a plugin host, or
/// answered for by the plugin cache): the open kept since the listing holds the file listed,
/// but a plugin host reads the path, so a file renamed over it meanwhile was read instead.
fn still_listed(path: &Path, origin: Origin) -> Result<(), String> {
    let listed = match origin {
        Origin::Probed(identity) => identity,
        Origin::Cached { identity, .. } => Some(identity),
        Origin::Here => None,
    };
    if listed.is_some() && Identity::of(path) != listed {
        return Err(CHANGED.to_owned());
    }
    Ok(())
}

/// Gives up the tool names `plugin` took, for a plugin that is not kept.
fn release_tools(taken: &mut Taken, plugin: &str, tools: &[(ToolManifest, ToolState)]) {
    for (t, _) in tools {
        if taken.tools.get(&t.name).is_some_and(|owner| owner == plugin) {
            taken.tools.remove(&t.name);
        }
    }
}

pub(crate) fn skip(path: PathBuf, e: &LoadError) -> Skipped {
    Skipped { path, reason: e.to_string(), detail: e.detail().map(str::to_owned) }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Plain files, a link to a file elsewhere, and a directory reached through a link: each
    /// candidate resolves to what the system's own resolution gives, and a broken link is none.
    #[cfg(unix)]
    #[test]
    fn candidates_resolve_as_the_system_resolves_them() {
        let home = tempfile::tempdir().unwrap();
        let (real, other) = (home.path().join("real"), home.path().join("other"));
        std::fs::create_dir_all(&real).unwrap();
        std::fs::create_dir_all(&other).unwrap();
        let ext = library_extension();
        std::fs::write(real.join(format!("liba.{ext}")), b"x").unwrap();
        std::fs::write(other.join(format!("libz.{ext}")), b"x").unwrap();
        std::os::unix::fs::symlink(other.join(format!("libz.{ext}")), real.join(format!("libb.{ext}"))).unwrap();
        std::os::unix::fs::symlink(other.join("gone"), real.join(format!("libc.{ext}"))).unwrap();
        let via = home.path().join("via");
        std::os::unix::fs::symlink(&real, &via).unwrap();
        let listed = candidates(&via).unwrap();
        let names: Vec<_> = listed.iter().map(|(p, link)| (p.file_name().unwrap().to_owned(), *link)).collect();
        assert_eq!(names, [(format!("liba.{ext}").into(), false), (format!("libb.{ext}").into(), true)]);
        let canonical_dir = via.canonicalize().unwrap();
        for (file, link) in &listed {
            assert_eq!(resolve(file, *link, Some(&canonical_dir)).unwrap(), file.canonicalize().unwrap());
        }
    }

    #[test]
    fn a_missing_directory_is_a_warning_not_a_failure() {
        let d = discover(&DiscoveryOptions { dirs: vec!["/no/such/dir".into()], ..Default::default() });
        assert!(d.plugins.is_empty());
        assert!(d.warnings[0].contains("/no/such/dir"), "{:?}", d.warnings);
    }
}
