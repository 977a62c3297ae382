//! `harness plugins list`, `inspect`, `check` and `new` (and `install`, `remove`, `upgrade`:
//! see the `install` module).

use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};
use harness_abi::manifest::Manifest;
use harness_loader::isolation::HostCommand;
use harness_loader::isolation::{CHILD_ENV_ALLOWLIST, Isolation};
use harness_loader::{Discovery, LoadedPlugin, ToolState};
use harness_mcp::McpSources;
use harness_plugin_check::scaffold::{self, Dependency, Scaffold, ScaffoldError};
use harness_plugin_check::{CheckOptions, Executor};
use harness_sandbox::confine::Enforcement;
use serde_json::{Value, json};

use crate::Result;
use crate::discovery::{PluginArgs, load_plugins};
use crate::error::CliError;
use crate::settings::{CheckSettings, ToolSettings};
use crate::tools::{Tools, Wants};

/// `harness plugins ...`
#[derive(Debug, Subcommand)]
pub(crate) enum PluginsCommand {
    /// Every plugin found: path, version, ABI, tools and their state, and each skipped file with the reason.
    List {
        /// One JSON object instead of a table.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        plugins: PluginArgs,
    },
    /// One plugin in full, tool schemas included: by NAME among those found, or a library FILE.
    Inspect {
        /// A plugin name, or the path of a library file.
        target: String,
        /// JSON instead of text.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        plugins: PluginArgs,
    },
    /// Check one plugin library file as a plugin's CI would: exit 0 when all pass, 1 when one fails.
    ///
    /// The checks: loads, manifest, schemas, examples, accepts-valid (generated arguments
    /// are accepted, and no call panics, crashes or hangs), rejects-invalid and
    /// deterministic. Exit 2 when the file cannot be read at all.
    Check(Box<CheckArgs>),
    /// Create a plugin crate of its own that builds and passes `plugins check` as it is.
    ///
    /// A cdylib on harness-sdk with one example tool (a `#[tool]` function with a declared
    /// example), a test that runs the checks of `plugins check` on the built library, a
    /// README, and a GitHub Actions workflow that builds the .so and the .dll and runs
    /// `plugins check --junit`.
    New {
        /// The plugin's name, which is also its crate's: ^[a-z][a-z0-9_-]{0,63}$.
        name: String,
        /// The crate's directory (default ./NAME); it must not exist or be empty.
        #[arg(long, value_name = "DIR")]
        path: Option<PathBuf>,
        /// Depend on the harness-sdk crate in this directory (a harness checkout's crates/harness-sdk) instead of a registry version.
        #[arg(long, value_name = "PATH", conflicts_with = "sdk_version")]
        sdk_path: Option<PathBuf>,
        /// The version requirement on harness-sdk from a registry (default: this release's MAJOR.MINOR).
        #[arg(long, value_name = "VER")]
        sdk_version: Option<String>,
    },
    /// Install a plugin into the user's plugin directory, checked as discovery checks it.
    ///
    /// SOURCE is a library file, a directory holding one, or a .tar.gz, .tgz or .zip archive
    /// holding one (their README and licence files are copied with it); `--path DIR` builds the
    /// crate in DIR with `cargo build --release`; `--crate NAME[@VERSION]` fetches that crate
    /// from the registry with cargo (the newest version unless one is given) and builds it.
    /// A plugin whose name is installed already, or found in another plugin directory, is
    /// refused unless --force.
    Install {
        /// A plugin library file, or a directory or .tar.gz/.tgz/.zip archive holding exactly one.
        #[arg(required_unless_present_any = ["path", "krate"], conflicts_with_all = ["path", "krate"])]
        source: Option<PathBuf>,
        /// A plugin crate's directory: built with cargo (target directory: CARGO_TARGET_DIR,
        /// else $XDG_CACHE_HOME/harness/build) and its cdylib installed.
        #[arg(long, value_name = "DIR", conflicts_with = "krate")]
        path: Option<PathBuf>,
        /// A plugin crate in the registry, NAME or NAME@VERSION: its source fetched with cargo
        /// (cargo's configuration and source replacement apply), then built as --path builds.
        #[arg(long = "crate", value_name = "NAME[@VERSION]")]
        krate: Option<String>,
        /// The registry of --crate, by its name in cargo's configuration ([registries.NAME]);
        /// default crates.io.
        #[arg(long, value_name = "NAME", requires = "krate")]
        registry: Option<String>,
        /// Replace a plugin of the same name, installed or found elsewhere.
        #[arg(long)]
        force: bool,
    },
    /// Remove an installed plugin: its library, its docs and its record.
    Remove {
        /// The installed plugin's name.
        name: String,
    },
    /// Install plugins again from where they were installed from (a crate is rebuilt).
    Upgrade {
        /// The installed plugin's name; every installed plugin when left out.
        name: Option<String>,
    },
    /// Make a minisign key pair for signing plugins: FILE (secret, 0600) and FILE.pub.
    ///
    /// The secret key has no password, so that signing never waits for a prompt; FILE.pub's
    /// RW... line is what operators put in [[trust.publishers]] key = "...".
    Keygen {
        /// The secret key file to write; the public key goes to FILE.pub.
        #[arg(long, value_name = "FILE")]
        out: PathBuf,
        /// Replace a key pair there.
        #[arg(long)]
        force: bool,
    },
    /// Sign a plugin library: writes LIBRARY.minisig beside it, in minisign's format.
    Sign {
        /// The plugin library file.
        library: PathBuf,
        /// The secret key file (from `harness plugins keygen`, or a password-less minisign key).
        #[arg(long, value_name = "FILE")]
        key: PathBuf,
    },
}

/// `harness plugins check FILE ...`
#[derive(Debug, Args)]
pub(crate) struct CheckArgs {
    /// The plugin library file; it alone is loaded.
    pub(crate) file: PathBuf,
    /// One JSON object with every check instead of a table.
    #[arg(long)]
    pub(crate) json: bool,
    /// Also write the results as JUnit XML to FILE (one testcase per check and tool).
    #[arg(long, value_name = "FILE")]
    pub(crate) junit: Option<PathBuf>,
    /// Argument objects generated per tool.
    #[arg(long, value_name = "N", default_value_t = harness_plugin_check::DEFAULT_CASES)]
    pub(crate) cases: usize,
    /// The generator's seed: the same seed gives the same cases.
    #[arg(long, value_name = "S", default_value_t = harness_plugin_check::DEFAULT_SEED)]
    pub(crate) seed: u64,
    /// Configuration file (TOML) whose [plugins.<name>] section configures the plugin; ./harness.toml is read when
    /// present and trusted (`harness config trust`).
    #[arg(long, value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,
    /// Every call's time limit in seconds, unless the plugin's section sets its own.
    #[arg(long, value_name = "SECS", default_value_t = harness_plugin_check::DEFAULT_TOOL_TIMEOUT.as_secs_f64())]
    pub(crate) tool_timeout: f64,
    /// Where the manifest is read and calls run: process (children confined as a run confines
    /// the plugin, one per effect class; a crash or a hang fails one call) or in-process.
    #[arg(long, value_name = "MODE", default_value = "process")]
    pub(crate) isolation: String,
    /// Check the file even when it or its directories are writable by others (warns).
    #[arg(long)]
    pub(crate) allow_insecure_plugins: bool,
}

/// Appends a line to the output gathered for one write (see [`emit`]).
macro_rules! say {
    ($out:expr, $($arg:tt)*) => {{
        use std::fmt::Write as _;
        // Writing to a String cannot fail.
        let _ = writeln!($out, $($arg)*);
    }};
}

/// Writes the gathered output; a closed pipe (`| head`) ends quietly instead of failing.
pub(crate) fn emit(out: &str) -> Result<u8> {
    use std::io::Write as _;
    match std::io::stdout().lock().write_all(out.as_bytes()) {
        Ok(()) => Ok(0),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(0),
        Err(e) => Err(CliError::Failure(format!("cannot write to stdout: {e}"))),
    }
}

fn state_json(state: &ToolState) -> Value {
    serde_json::to_value(state).unwrap_or(Value::Null)
}

fn state_text(state: &ToolState) -> String {
    match state {
        ToolState::Offered => "offered".to_owned(),
        ToolState::Disabled { why } => format!("not offered: {why}"),
        ToolState::DeniedEffect => "not offered: effect class denied".to_owned(),
        ToolState::NameTaken { by } => format!("not offered: plugin {by} has a tool of that name"),
        ToolState::NeedsConfiguration { needs } => format!("not offered: needs {needs}"),
    }
}

fn plugin_json(p: &LoadedPlugin, full: bool) -> Value {
    let m = &p.manifest;
    let tools: Vec<Value> = p
        .tools
        .iter()
        .map(|(t, s)| {
            let mut v = json!({ "name": t.name, "effects": t.effects.as_str(), "state": state_json(s) });
            if full {
                v = json!({ "name": t.name, "description": t.description, "effects": t.effects.as_str(),
                    "state": state_json(s), "parameters": t.parameters, "output": t.output, "examples": t.examples });
            }
            v
        })
        .collect();
    json!({
        "name": m.name, "version": m.version, "description": m.description, "abi_version": p.abi_version,
        "path": p.path, "signed_by": p.signed_by, "test_only": m.test_only, "initialised": p.initialised, "from_cache": p.from_cache, "tools": tools,
        "isolation": p.isolation.as_str(), "enforcement": enforcement_json(p),
        "placement": { "kind": p.placement.kind(), "reason": p.placement.reason(&m.name) },
    })
}

/// What the kernel enforces on a plugin: `landlock+seccomp` or `partial` with what the child
/// may touch and the Landlock features this kernel lacks, or `none` with the reason.
fn enforcement_json(p: &LoadedPlugin) -> Value {
    match &p.enforcement {
        Enforcement::Kernel { landlock_abi, covered } => json!({
            "kind": p.enforcement.label(), "landlock_abi": landlock_abi, "confinement": p.confinement,
            "covered": covered,
        }),
        Enforcement::Partial { landlock_abi, missing, covered } => json!({
            "kind": p.enforcement.label(), "landlock_abi": landlock_abi, "confinement": p.confinement,
            "missing": missing, "covered": covered,
        }),
        Enforcement::None { reason } => json!({ "kind": "none", "reason": reason }),
    }
}

fn enforcement_text(p: &LoadedPlugin) -> String {
    match &p.enforcement {
        Enforcement::Kernel { .. } | Enforcement::Partial { .. } => format!(
            "enforcement: {} (a child per effect class: {})",
            p.enforcement.label(),
            p.confinement.keys().cloned().collect::<Vec<_>>().join(", ")
        ),
        Enforcement::None { reason } => format!("enforcement: none ({reason})"),
    }
}

/// The variables a plugin's children get besides the allowlist (`[plugins.NAME] env`), names
/// only: `None` for an in-process plugin, which shares the harness's whole environment.
fn env_names<'a>(p: &LoadedPlugin, found: &'a Discovery) -> Option<&'a [String]> {
    let names = found.options.settings.get(&p.manifest.name).map_or(&[][..], |s| s.env.as_slice());
    (p.isolation == Isolation::Process).then_some(names)
}

fn env_json(p: &LoadedPlugin, found: &Discovery) -> Value {
    match env_names(p, found) {
        Some(names) => json!({ "allowlist": CHILD_ENV_ALLOWLIST, "configured": names }),
        None => json!({ "all": true }),
    }
}

fn env_text(p: &LoadedPlugin, found: &Discovery) -> String {
    match env_names(p, found) {
        Some([]) => format!("environment: {} (the allowlist)", CHILD_ENV_ALLOWLIST.join(", ")),
        Some(names) => {
            format!("environment: {}, and the allowlist ({})", names.join(", "), CHILD_ENV_ALLOWLIST.join(", "))
        }
        None => "environment: all of the harness's (in-process)".to_owned(),
    }
}

/// Where a plugin runs and why: `process (declares writes)`.
fn placement_text(p: &LoadedPlugin) -> String {
    format!("{} ({})", p.isolation.as_str(), p.placement.reason(&p.manifest.name))
}

/// One line per Landlock feature this kernel lacks for the plugin: not enforced, or what
/// seccomp does in its place.
fn gap_lines(out: &mut String, p: &LoadedPlugin, indent: &str) {
    let (missing, covered) = match &p.enforcement {
        Enforcement::Kernel { covered, .. } => (&[][..], covered.as_slice()),
        Enforcement::Partial { missing, covered, .. } => (missing.as_slice(), covered.as_slice()),
        Enforcement::None { .. } => return,
    };
    for g in missing {
        say!(out, "{indent}not enforced: {}", g.message);
    }
    for g in covered {
        say!(out, "{indent}seccomp instead: {} ({})", g.message, g.seccomp.unwrap_or_default());
    }
}

/// The record of the user's plugin directory (`plugins install`), with the directory,
/// canonical: empty when nothing was installed, and a warning when it cannot be read.
fn installed_record(warnings: &mut Vec<String>) -> Option<(PathBuf, crate::install::Record)> {
    let dir = dunce::canonicalize(crate::discovery::user_plugin_dir()?).ok()?;
    match crate::install::Record::load(&dir) {
        Ok(record) => Some((dir, record)),
        Err(e) => {
            warnings.push(e.to_string());
            None
        }
    }
}

/// What `plugins install` recorded for `p`, when it is the file it installed.
fn installed_as<'a>(
    p: &LoadedPlugin,
    record: Option<&'a (PathBuf, crate::install::Record)>,
) -> Option<&'a crate::install::Installed> {
    let (dir, record) = record?;
    let installed = record.plugins.get(&p.manifest.name)?;
    (p.path == dir.join(&installed.file)).then_some(installed)
}

fn list(out: &mut String, found: &Discovery, as_json: bool) {
    let mut warnings = found.warnings.clone();
    let record = installed_record(&mut warnings);
    if as_json {
        let plugins = found.plugins.iter().map(|p| {
            let mut v = plugin_json(p, false);
            v["env"] = env_json(p, found);
            if let Some(i) = installed_as(p, record.as_ref()) {
                v["installed"] = json!({ "version": i.version, "source": i.source, "sha256": i.sha256,
                    "installed_at": i.installed_at, "docs": i.docs });
            }
            v
        });
        let obj = json!({
            "plugins": plugins.collect::<Vec<_>>(),
            "skipped": found.skipped,
            "warnings": warnings,
        });
        say!(out, "{obj}");
        return;
    }
    if found.plugins.is_empty() {
        say!(out, "no plugins found");
    }
    for p in &found.plugins {
        let m = &p.manifest;
        let test_only = if m.test_only { " (test only)" } else { "" };
        say!(out, "{} {} (ABI {}){test_only}  {}", m.name, m.version, p.abi_version, p.path.display());
        if let Some(i) = installed_as(p, record.as_ref()) {
            say!(out, "    installed: {} from {}, {}", i.version, i.source.describe(), i.installed_at);
        }
        if let Some(publisher) = &p.signed_by {
            say!(out, "    signed by: {publisher}");
        }
        say!(out, "    isolation: {}, {}", placement_text(p), enforcement_text(p));
        say!(out, "    {}", env_text(p, found));
        gap_lines(out, p, "    ");
        for (t, s) in &p.tools {
            say!(out, "    {:<20} {:<8} {}", t.name, t.effects.as_str(), state_text(s));
        }
    }
    for s in &found.skipped {
        say!(out, "skipped {}: {}", s.path.display(), s.reason);
    }
    for w in &warnings {
        say!(out, "warning: {w}");
    }
}

/// A plugin as `inspect` shows it, read from a loaded library or from discovery.
struct Shown<'a> {
    manifest: &'a Manifest,
    abi_version: &'a str,
    path: &'a Path,
}

fn print_library(out: &mut String, library: &Shown<'_>, tools: Option<&LoadedPlugin>, as_json: bool) {
    let m = library.manifest;
    if as_json {
        let mut v = json!({ "name": m.name, "version": m.version, "description": m.description,
            "abi_version": library.abi_version, "path": library.path, "test_only": m.test_only, "tools": m.tools });
        if let Some(p) = tools {
            v = plugin_json(p, true);
        }
        say!(out, "{v}");
        return;
    }
    say!(out, "{} {}: {}", m.name, m.version, m.description);
    say!(out, "  path: {}", library.path.display());
    say!(out, "  ABI:  {}{}", library.abi_version, if m.test_only { "  (test only)" } else { "" });
    if let Some(p) = tools {
        say!(out, "  isolation: {}, {}", placement_text(p), enforcement_text(p));
        gap_lines(out, p, "  ");
    }
    for t in &m.tools {
        let state = tools
            .and_then(|p| p.tools.iter().find(|(x, _)| x.name == t.name))
            .map(|(_, s)| format!("  [{}]", state_text(s)))
            .unwrap_or_default();
        say!(out, "\n  {} ({}){state}\n    {}", t.name, t.effects.as_str(), t.description);
        say!(
            out,
            "    parameters: {}",
            serde_json::to_string_pretty(&t.parameters).unwrap_or_default().replace('\n', "\n    ")
        );
        if let Some(o) = &t.output {
            say!(out, "    output: {}", serde_json::to_string_pretty(o).unwrap_or_default().replace('\n', "\n    "));
        }
        for e in &t.examples {
            let expect = match (&e.result, &e.error_code) {
                (Some(r), _) => r.to_string(),
                (None, Some(c)) => format!("error {c}"),
                _ => "?".to_owned(),
            };
            say!(out, "    example: {} -> {expect}", e.arguments);
        }
    }
}

/// Runs `harness plugins ...` and returns the exit code.
pub(crate) fn plugins(command: PluginsCommand) -> Result<u8> {
    match command {
        PluginsCommand::List { json, plugins } => {
            // The MCP servers are started as a run starts them, their tools named after the plugins'.
            let tools = Tools::wire(&ToolSettings::load(&plugins)?, Wants { mcp: true, ..Wants::default() })?;
            let mut out = String::new();
            list(&mut out, &tools.found, json);
            if let Some(sources) = tools.mcp() {
                list_mcp_servers(&mut out, sources, json);
            }
            emit(&out)
        }
        PluginsCommand::Check(args) => CheckSettings::resolve(*args).and_then(check),
        PluginsCommand::New { name, path, sdk_path, sdk_version } => new_plugin(&name, path, sdk_path, sdk_version),
        PluginsCommand::Inspect { target, json, plugins } => {
            // A path is a library file, read through a confined child; a bare name is looked
            // up only among the plugins discovered, never as a file here.
            if target.contains(std::path::MAIN_SEPARATOR) || target.contains('/') {
                return inspect_file(Path::new(&target), json, plugins.allow_insecure_plugins);
            }
            ToolSettings::load(&plugins).and_then(|settings| inspect(&target, json, &settings))
        }
        PluginsCommand::Install { source, path, krate, registry, force } => {
            let from = match (source, path, krate) {
                (_, _, Some(spec)) => crate::install::From::Registry(spec, registry),
                (_, Some(dir), None) => crate::install::From::Path(dir),
                (Some(source), None, None) => crate::install::From::Source(source),
                (None, None, None) => {
                    return Err(CliError::Usage(
                        "give a library file, a directory, an archive, --path DIR or --crate NAME".to_owned(),
                    ));
                }
            };
            crate::install::install(from, force)
        }
        PluginsCommand::Remove { name } => crate::install::remove(&name),
        PluginsCommand::Upgrade { name } => crate::install::upgrade(name.as_deref()),
        PluginsCommand::Keygen { out, force } => crate::signing::keygen(&out, force),
        PluginsCommand::Sign { library, key } => crate::signing::sign(&library, &key),
    }
}

/// `plugins inspect NAME`: the plugin of that name among those discovered.
fn inspect(target: &str, as_json: bool, settings: &ToolSettings) -> Result<u8> {
    let found = load_plugins(settings, false)?;
    let Some(p) = found.plugins.iter().find(|p| p.manifest.name == target) else {
        return Err(no_plugin_named(target, &found));
    };
    let mut out = String::new();
    let shown = Shown { manifest: &p.manifest, abi_version: &p.abi_version, path: &p.path };
    print_library(&mut out, &shown, Some(p), as_json);
    emit(&out)
}

/// No discovered plugin has the name `target`: which were found, which were skipped, and,
/// when a file of that name is here, how to name it as a file.
fn no_plugin_named(target: &str, found: &Discovery) -> CliError {
    let names: Vec<&str> = found.plugins.iter().map(|p| p.manifest.name.as_str()).collect();
    let skipped: Vec<String> = found.skipped.iter().map(|s| format!("{}: {}", s.path.display(), s.reason)).collect();
    let skipped = if skipped.is_empty() { String::new() } else { format!("; skipped files: {}", skipped.join("; ")) };
    let file = if Path::new(target).exists() {
        format!("; a bare name is a plugin's name, never a file: to inspect the file {target} here, write ./{target}")
    } else {
        String::new()
    };
    CliError::Failure(format!(
        "no plugin named {target:?} was found; found: {}{skipped}{file}",
        if names.is_empty() { "none".to_owned() } else { names.join(", ") }
    ))
}

/// `plugins inspect FILE`: the file passes discovery's ownership and permission check, its
/// manifest is read in a confined child, and the loader's rules are applied here.
fn inspect_file(path: &Path, as_json: bool, allow_insecure: bool) -> Result<u8> {
    let canonical = plugin_file(path, allow_insecure)?;
    let read = harness_loader::isolation::read_manifest(&host_command()?, &canonical)
        .map_err(|why| CliError::Failure(format!("{}: {why}", canonical.display())))?;
    let refused = |e: harness_loader::LoadError| CliError::Failure(format!("{}: {e}", canonical.display()));
    harness_loader::check_abi(&read.abi_version).map_err(refused)?;
    let manifest = harness_loader::parse_manifest(&read.manifest_json).map_err(refused)?;
    let mut out = String::new();
    let shown = Shown { manifest: &manifest, abi_version: &read.abi_version, path: &canonical };
    print_library(&mut out, &shown, None, as_json);
    emit(&out)
}

/// A library file named on the command line, canonical, once it passes the ownership and
/// permission check discovery holds every file to (with `allow_insecure`, a warning).
fn plugin_file(path: &Path, allow_insecure: bool) -> Result<PathBuf> {
    let canonical = dunce::canonicalize(path)
        .map_err(|e| CliError::Usage(format!("cannot read plugin file {}: {e}", path.display())))?;
    if let Err(why) = harness_loader::check_plugin_file(&canonical) {
        if !allow_insecure {
            return Err(CliError::Usage(format!("{}: insecure: {why}", canonical.display())));
        }
        crate::log::notice!("harness: warning: reading {} although it is insecure: {why}", canonical.display());
    }
    Ok(canonical)
}

/// The command that starts a plugin-host child: this very executable in its hidden mode.
pub(crate) fn host_command() -> Result<HostCommand> {
    let program = std::env::current_exe()
        .map_err(|e| CliError::Failure(format!("cannot find the harness executable to start a plugin host: {e}")))?;
    Ok(HostCommand { program, args: vec![crate::PLUGIN_HOST_MODE.into()] })
}

/// The configured MCP servers, as a source of their own after the plugins: each is started and
/// its tools named as in a run. In JSON, an `mcp_servers` key of the one object.
fn list_mcp_servers(out: &mut String, sources: &McpSources, as_json: bool) {
    if as_json {
        let servers = crate::mcp::servers_json(sources);
        match serde_json::from_str::<Value>(out.trim()) {
            Ok(mut listed) if listed.is_object() => {
                listed["mcp_servers"] = servers;
                out.clear();
                say!(out, "{listed}");
            }
            _ => say!(out, "{}", json!({ "mcp_servers": servers })),
        }
    } else {
        crate::mcp::servers_text(out, sources);
    }
}

/// Runs the checks on one file and prints its report; the exit code is the verdict.
/// `harness plugins check` with its resolved settings.
fn check(args: CheckSettings) -> Result<u8> {
    let file = plugin_file(&args.file, args.allow_insecure)?;
    let executor = match args.isolation {
        Isolation::InProcess => Executor::InProcess,
        Isolation::Process => process_executor()?,
    };
    let options = CheckOptions {
        cases: args.cases,
        seed: args.seed,
        tool_timeout: args.tool_timeout,
        sections: args.sections,
        executor,
        never_call: Vec::new(),
        max_result_bytes: args.result_bytes.unwrap_or(CheckOptions::default().max_result_bytes),
    };
    let report = harness_plugin_check::check(&file, &options).map_err(|e| CliError::Usage(e.to_string()))?;
    if let Some(junit) = &args.junit {
        harness_core::no_follow::create_file(junit)
            .and_then(|mut f| std::io::Write::write_all(&mut f, report.junit().as_bytes()))
            .map_err(|e| CliError::Failure(format!("cannot write the JUnit report {}: {e}", junit.display())))?;
    }
    let mut out = String::new();
    if args.json {
        say!(out, "{}", report.to_json());
    } else {
        out.push_str(&report.table());
    }
    emit(&out)?;
    Ok(if report.passed() { 0 } else { 1 })
}

/// The manifest read and calls made in plugin-host children: never in this process, even
/// when the executable cannot be found (then the check cannot run, and says why).
fn process_executor() -> Result<Executor> {
    host_command().map(Executor::Process)
}

/// Writes a new plugin crate and says what to do next.
fn new_plugin(name: &str, path: Option<PathBuf>, sdk_path: Option<PathBuf>, sdk_version: Option<String>) -> Result<u8> {
    scaffold::check_name(name).map_err(|e| CliError::Usage(e.to_string()))?;
    let (sdk, plugin_check) = match (sdk_path, sdk_version) {
        (Some(dir), _) => {
            let dir =
                dunce::canonicalize(&dir).map_err(|e| CliError::Usage(format!("--sdk-path {}: {e}", dir.display())))?;
            if !dir.join("Cargo.toml").is_file() {
                return Err(CliError::Usage(format!(
                    "--sdk-path {}: no Cargo.toml there; give the crates/harness-sdk directory of a harness checkout",
                    dir.display()
                )));
            }
            // harness-plugin-check beside the SDK, so that a checkout's tests check with the same code.
            let plugin_check = dunce::canonicalize(dir.join("../harness-plugin-check"))
                .map_or_else(|_| Dependency::Version(scaffold::default_requirement()), Dependency::Path);
            (Dependency::Path(dir), plugin_check)
        }
        (None, version) => {
            let version = version.unwrap_or_else(scaffold::default_requirement);
            (Dependency::Version(version.clone()), Dependency::Version(version))
        }
    };
    let dir = path.unwrap_or_else(|| PathBuf::from(name));
    let spec = Scaffold { name: name.to_owned(), dir: dir.clone(), sdk: sdk.clone(), plugin_check };
    let written = scaffold::scaffold(&spec).map_err(|e| match e {
        ScaffoldError::Io { .. } => CliError::Failure(e.to_string()),
        _ => CliError::Usage(e.to_string()),
    })?;
    let shown = dunce::canonicalize(&dir).unwrap_or(dir);
    let mut out = String::new();
    say!(out, "created plugin crate {name} in {}:", shown.display());
    for file in &written {
        say!(out, "    {}", file.display());
    }
    match &sdk {
        Dependency::Path(p) => say!(out, "harness-sdk from {}", p.display()),
        Dependency::Version(v) => {
            say!(out, "harness-sdk {v} from crates.io");
            // Said until the SDK is published, so that nobody waits on a resolution that fails.
            say!(out, "(not published yet: until it is, scaffold with --sdk-path CHECKOUT/crates/harness-sdk)");
        }
    }
    let library = format!("{}{}{}", std::env::consts::DLL_PREFIX, name.replace('-', "_"), std::env::consts::DLL_SUFFIX);
    say!(out, "next:");
    say!(out, "    cd {}", shown.display());
    say!(out, "    cargo build");
    say!(out, "    harness plugins check target/debug/{library}");
    say!(out, "    cargo test");
    emit(&out)
}
