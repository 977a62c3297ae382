//! `plugins install --crate NAME[@VERSION]`: a crate's source fetched from the registry by
//! cargo itself, so that cargo's configuration applies as it does to `cargo install` (source
//! replacement, vendored directories, mirrors, credentials), then built as `--path` builds.
//!
//! `cargo install` installs binaries only, so it cannot be asked for a cdylib. Instead a tiny
//! project in the cache depends on the crate; `cargo metadata` resolves and downloads it and
//! says where its source is, and that source is copied beside the project and built there
//! (never in cargo's own registry directory, which is cargo's to keep unchanged).

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

use crate::Result;
use crate::error::CliError;

/// A crate fetched and copied, ready to build.
pub(super) struct Fetched {
    /// The copy's `Cargo.toml`, canonical.
    pub(super) manifest: PathBuf,
    /// The version cargo resolved.
    pub(super) version: String,
    /// Its README and licence files.
    pub(super) docs: Vec<PathBuf>,
}

/// `NAME` or `NAME@VERSION`, checked as crates.io names and versions are.
pub(super) fn parse_spec(spec: &str) -> Result<(String, Option<String>)> {
    let (name, version) = match spec.split_once('@') {
        Some((name, version)) => (name, Some(version)),
        None => (spec, None),
    };
    let name_ok = name.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    let version_ok = version.is_none_or(|v| {
        v.chars().next().is_some_and(|c| c.is_ascii_digit())
            && v.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '+'))
    });
    if !name_ok || !version_ok {
        return Err(CliError::Usage(format!(
            "--crate {spec:?}: give a crate name, or NAME@VERSION with an exact version (--crate greet@1.2.0)"
        )));
    }
    Ok((name.to_owned(), version.map(str::to_owned)))
}

/// `--registry NAME`: a name as cargo's `[registries.NAME]` has it.
pub(super) fn check_registry(name: &str) -> Result<()> {
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
        return Err(CliError::Usage(format!(
            "--registry {name:?}: give the name of a registry in cargo's configuration ([registries.NAME])"
        )));
    }
    Ok(())
}

/// Fetches the crate (at its pinned version, else the newest) with `cargo metadata` in a
/// project under `work`, and copies its source to `work/crates/NAME-VERSION`.
pub(super) fn fetch(cargo: &OsStr, work: &Path, krate: &super::Crate) -> Result<Fetched> {
    let name = krate.name.as_str();
    let crates = work.join("crates");
    let project = crates.join(format!("fetch-{name}"));
    write_project(&project, krate)?;
    let shown = krate.pinned.as_ref().map_or_else(|| name.to_owned(), |v| format!("{name}@{v}"));
    eprintln!("harness: fetching crate {shown} with cargo metadata");
    let output = Command::new(cargo)
        .args(["metadata", "--format-version", "1", "--manifest-path"])
        .arg(project.join("Cargo.toml"))
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| {
            CliError::Failure(format!(
                "cannot run {} to fetch crate {shown}: {e}; install Rust (https://rustup.rs) or set CARGO",
                Path::new(cargo).display()
            ))
        })?;
    if !output.status.success() {
        return Err(CliError::Failure(format!(
            "cargo could not fetch crate {shown} (its errors are above); check the name and version (`cargo search {name}`) and cargo's registry configuration"
        )));
    }
    let metadata: Value = serde_json::from_slice(&output.stdout)
        .map_err(|e| CliError::Failure(format!("cargo metadata gave no JSON for crate {shown}: {e}")))?;
    let (version, source) = located(&metadata, name).ok_or_else(|| {
        CliError::Failure(format!("cargo metadata did not list crate {shown} among the project's dependencies"))
    })?;
    let copy = crates.join(format!("{name}-{version}"));
    copy_source(&source, &copy)?;
    let manifest = dunce::canonicalize(copy.join("Cargo.toml"))
        .map_err(|e| CliError::Failure(format!("cannot read {}: {e}", copy.join("Cargo.toml").display())))?;
    let (_, docs) = super::listing(&copy)?;
    Ok(Fetched { manifest, version, docs })
}

/// Writes the project that depends on the crate alone, without a lock file, so that an
/// unpinned crate resolves to the newest version each time.
fn write_project(project: &Path, krate: &super::Crate) -> Result<()> {
    let fail = |e: std::io::Error| CliError::Failure(format!("cannot write {}: {e}", project.display()));
    std::fs::create_dir_all(project.join("src")).map_err(fail)?;
    let name = &krate.name;
    let version = krate.pinned.as_ref().map_or_else(|| "*".to_owned(), |v| format!("={v}"));
    let requirement = match &krate.registry {
        Some(registry) => format!("{{ version = {version:?}, registry = {registry:?} }}"),
        None => format!("{version:?}"),
    };
    let manifest = format!(
        "# Written by `harness plugins install --crate`, to have cargo fetch the crate.\n[package]\nname = \"harness-fetch-plugin\"\nversion = \"0.0.0\"\nedition = \"2021\"\npublish = false\n\n[lib]\npath = \"src/lib.rs\"\n\n[dependencies]\n{name} = {requirement}\n\n[workspace]\n"
    );
    std::fs::write(project.join("Cargo.toml"), manifest).map_err(fail)?;
    std::fs::write(project.join("src/lib.rs"), "").map_err(fail)?;
    match std::fs::remove_file(project.join("Cargo.lock")) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(fail(e)),
        _ => Ok(()),
    }
}

/// The version and source directory of the project's direct dependency `name`.
fn located(metadata: &Value, name: &str) -> Option<(String, PathBuf)> {
    let root = metadata["resolve"]["root"].as_str()?;
    let nodes = metadata["resolve"]["nodes"].as_array()?;
    let node = nodes.iter().find(|n| n["id"] == root)?;
    let ids: Vec<&str> = node["dependencies"].as_array()?.iter().filter_map(Value::as_str).collect();
    let package = metadata["packages"]
        .as_array()?
        .iter()
        .find(|p| p["name"] == name && p["id"].as_str().is_some_and(|id| ids.contains(&id)))?;
    let manifest = Path::new(package["manifest_path"].as_str()?);
    Some((package["version"].as_str()?.to_owned(), manifest.parent()?.to_owned()))
}

/// Copies a crate's source to `to` (replacing an older copy), regular files and directories
/// only, and makes it a workspace of its own, so that no `Cargo.toml` above it claims it.
fn copy_source(from: &Path, to: &Path) -> Result<()> {
    match std::fs::remove_dir_all(to) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Err(CliError::Failure(format!("cannot remove the old copy {}: {e}", to.display())));
        }
        _ => {}
    }
    copy_tree(from, to)
        .map_err(|e| CliError::Failure(format!("cannot copy {} to {}: {e}", from.display(), to.display())))?;
    let manifest = to.join("Cargo.toml");
    let fail = |e: std::io::Error| CliError::Failure(format!("cannot write {}: {e}", manifest.display()));
    let mut text = std::fs::read_to_string(&manifest).map_err(fail)?;
    if !text.lines().any(|l| l.trim() == "[workspace]") {
        text.push_str("\n# Added by `harness plugins install --crate`: this copy is its own workspace.\n[workspace]\n");
        std::fs::write(&manifest, text).map_err(fail)?;
    }
    Ok(())
}

/// Copies the regular files and directories beneath `from` to `to`.
fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        let target = to.join(entry.file_name());
        if kind.is_dir() {
            copy_tree(&entry.path(), &target)?;
        } else if kind.is_file() {
            std::fs::copy(entry.path(), &target)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spec_is_a_name_and_an_exact_version_or_a_usage_error() {
        assert_eq!(parse_spec("greet").unwrap(), ("greet".to_owned(), None));
        assert_eq!(
            parse_spec("chem-tools@1.2.0-rc.1").unwrap(),
            ("chem-tools".to_owned(), Some("1.2.0-rc.1".to_owned()))
        );
        for bad in ["", "@1.0.0", "greet@", "greet@^1", "greet@=1", "gr eet", "greet\"x", "1greet", "greet@1\n"] {
            assert!(matches!(parse_spec(bad), Err(CliError::Usage(_))), "{bad:?}");
        }
        assert!(check_registry("my-registry_2").is_ok());
        assert!(matches!(check_registry("a\"b"), Err(CliError::Usage(_))));
    }
}
