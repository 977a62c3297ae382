//! `harness plugins new`: a plugin crate of its own that builds and passes the checks as it is.
//!
//! The crate is a `cdylib` (and `rlib`, for unit tests) with its own `[workspace]` table, one
//! example tool in the SDK's short form (a `#[tool]` function with a declared example, and
//! `plugin!`), a unit test, `tests/plugin_check.rs`, which builds the library and runs
//! [`crate::check`] on it, a README on building, checking and shipping it, and a GitHub Actions
//! workflow that builds the `.so` and the `.dll` and runs `harness plugins check --junit`.

use std::path::{Path, PathBuf};

use harness_abi::manifest::is_valid_plugin_name;

const CARGO_TOML: &str = include_str!("../templates/plugin/Cargo.toml.in");
const LIB_RS: &str = include_str!("../templates/plugin/lib.rs.in");
const PLUGIN_CHECK_RS: &str = include_str!("../templates/plugin/plugin_check.rs.in");
const GITIGNORE: &str = include_str!("../templates/plugin/gitignore.in");
const RUSTFMT_TOML: &str = include_str!("../templates/plugin/rustfmt.toml.in");
const README_MD: &str = include_str!("../templates/plugin/README.md.in");
const CI_YML: &str = include_str!("../templates/plugin/ci.yml.in");

/// The version requirement on `harness-sdk` and `harness-plugin-check` when no path is given:
/// this release's `MAJOR.MINOR`, which cargo reads as `^MAJOR.MINOR` (for 0.x, the same minor).
pub fn default_requirement() -> String {
    let version = env!("CARGO_PKG_VERSION");
    let mut parts = version.split('.');
    match (parts.next(), parts.next()) {
        (Some(major), Some(minor)) => format!("{major}.{minor}"),
        _ => version.to_owned(),
    }
}

/// Where a dependency of the new crate comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Dependency {
    /// A directory holding the crate (an absolute path is written).
    Path(PathBuf),
    /// A version requirement, for a registry.
    Version(String),
}

/// What to scaffold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scaffold {
    /// The plugin's name, which is also the crate's.
    pub name: String,
    /// The crate's directory; it must not exist or be empty.
    pub dir: PathBuf,
    /// Where `harness-sdk` comes from.
    pub sdk: Dependency,
    /// Where `harness-plugin-check` (a dev-dependency) comes from.
    pub plugin_check: Dependency,
}

/// Why the crate could not be written.
#[derive(Debug, thiserror::Error)]
pub enum ScaffoldError {
    /// The name breaks the plugin-name rule or cannot name a Rust crate.
    #[error("{name:?} cannot name a plugin: {why}")]
    InvalidName {
        /// The name.
        name: String,
        /// Which rule it breaks.
        why: String,
    },
    /// The directory exists and holds files.
    #[error("{} already exists and is not empty; choose another --path", dir.display())]
    NotEmpty {
        /// The directory.
        dir: PathBuf,
    },
    /// A file or directory could not be written.
    #[error("cannot write {}: {source}", path.display())]
    Io {
        /// What was being written.
        path: PathBuf,
        /// What the OS said.
        source: std::io::Error,
    },
}

/// Words a crate may not be named after: Rust's keywords and the standard crates.
const RESERVED: &[&str] = &[
    "abstract",
    "as",
    "async",
    "await",
    "become",
    "box",
    "break",
    "const",
    "continue",
    "crate",
    "do",
    "dyn",
    "else",
    "enum",
    "extern",
    "false",
    "final",
    "fn",
    "for",
    "gen",
    "if",
    "impl",
    "in",
    "let",
    "loop",
    "macro",
    "match",
    "mod",
    "move",
    "mut",
    "override",
    "priv",
    "pub",
    "ref",
    "return",
    "self",
    "static",
    "struct",
    "super",
    "trait",
    "true",
    "try",
    "type",
    "typeof",
    "unsafe",
    "unsized",
    "use",
    "virtual",
    "where",
    "while",
    "yield",
    "alloc",
    "core",
    "proc_macro",
    "std",
    "test",
    "harness_sdk",
    "harness_plugin_check",
];

/// Checks that `name` can name both a plugin and its crate.
pub fn check_name(name: &str) -> Result<(), ScaffoldError> {
    let invalid = |why: &str| Err(ScaffoldError::InvalidName { name: name.to_owned(), why: why.to_owned() });
    if !is_valid_plugin_name(name) {
        return invalid(
            "plugin names must match ^[a-z][a-z0-9_-]{0,63}$ (a lowercase letter, then letters, digits, _ or -)",
        );
    }
    if RESERVED.contains(&name.replace('-', "_").as_str()) {
        return invalid("it is a Rust keyword or the name of a crate the plugin needs, which a crate cannot be named");
    }
    Ok(())
}

/// A TOML basic string.
fn toml_string(text: &str) -> String {
    let mut out = String::from("\"");
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn dependency_line(crate_name: &str, dependency: &Dependency) -> String {
    match dependency {
        Dependency::Path(p) => format!("{crate_name} = {{ path = {} }}", toml_string(&p.display().to_string())),
        Dependency::Version(v) => format!("{crate_name} = {}", toml_string(v)),
    }
}

fn write(path: &Path, text: &str) -> Result<(), ScaffoldError> {
    let io = |source| ScaffoldError::Io { path: path.to_owned(), source };
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(io)?;
    }
    std::fs::write(path, text).map_err(|source| ScaffoldError::Io { path: path.to_owned(), source })
}

/// Writes the crate; returns the files written, relative to its directory.
pub fn scaffold(spec: &Scaffold) -> Result<Vec<PathBuf>, ScaffoldError> {
    check_name(&spec.name)?;
    if let Ok(mut entries) = std::fs::read_dir(&spec.dir)
        && entries.next().is_some()
    {
        return Err(ScaffoldError::NotEmpty { dir: spec.dir.clone() });
    }
    let fill = |template: &str| {
        template
            .replace("{{name}}", &spec.name)
            .replace("{{lib}}", &spec.name.replace('-', "_"))
            // One place for the minimum Rust version: the workspace's, which built this.
            .replace("{{rust_version}}", env!("CARGO_PKG_RUST_VERSION"))
            .replace("{{harness_git}}", env!("CARGO_PKG_REPOSITORY"))
            .replace("{{sdk}}", &dependency_line("harness-sdk", &spec.sdk))
            .replace("{{plugin_check}}", &dependency_line("harness-plugin-check", &spec.plugin_check))
    };
    let files = [
        ("Cargo.toml", fill(CARGO_TOML)),
        ("src/lib.rs", fill(LIB_RS)),
        ("tests/plugin_check.rs", fill(PLUGIN_CHECK_RS)),
        ("README.md", fill(README_MD)),
        (".github/workflows/ci.yml", fill(CI_YML)),
        (".gitignore", GITIGNORE.to_owned()),
        // The harness's own style, in which the templates are written: `cargo fmt` leaves them be.
        ("rustfmt.toml", RUSTFMT_TOML.to_owned()),
    ];
    let mut written = Vec::new();
    for (relative, text) in files {
        write(&spec.dir.join(relative), &text)?;
        written.push(PathBuf::from(relative));
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_requirement_is_this_minor() {
        let requirement = default_requirement();
        assert!(env!("CARGO_PKG_VERSION").starts_with(&format!("{requirement}.")), "{requirement}");
    }

    #[test]
    fn names() {
        assert!(check_name("greet").is_ok());
        assert!(check_name("word-count_2").is_ok());
        for bad in ["Greet", "9lives", "", "a.b", "fn", "self", "std", "harness-sdk"] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn writes_a_crate_with_the_dependencies_given() {
        let dir = std::env::temp_dir().join(format!("harness-scaffold-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let spec = Scaffold {
            name: "word-count".into(),
            dir: dir.join("wc"),
            sdk: Dependency::Path("/src/harness \"x\"/crates/harness-sdk".into()),
            plugin_check: Dependency::Version("0.1.0".into()),
        };
        let files = scaffold(&spec).unwrap();
        assert_eq!(files.len(), 7);
        let toml = std::fs::read_to_string(dir.join("wc/Cargo.toml")).unwrap();
        assert!(toml.contains("name = \"word-count\""), "{toml}");
        assert!(toml.contains(r#"harness-sdk = { path = "/src/harness \"x\"/crates/harness-sdk" }"#), "{toml}");
        assert!(toml.contains("harness-plugin-check = \"0.1.0\""), "{toml}");
        let lib = std::fs::read_to_string(dir.join("wc/src/lib.rs")).unwrap();
        assert!(
            lib.contains("#[harness_sdk::tool(") && lib.contains("harness_sdk::plugin!(tools = [greet]);"),
            "{lib}"
        );
        assert!(toml.contains(&format!("rust-version = \"{}\"", env!("CARGO_PKG_RUST_VERSION"))), "{toml}");
        let ci = std::fs::read_to_string(dir.join("wc/.github/workflows/ci.yml")).unwrap();
        assert!(ci.contains("target/release/libword_count.so --junit") && ci.contains("word_count.dll"), "{ci}");
        let readme = std::fs::read_to_string(dir.join("wc/README.md")).unwrap();
        for text in [&lib, &toml, &ci, &readme] {
            assert!(!text.contains("{{"), "{text}");
        }
        assert!(matches!(scaffold(&spec), Err(ScaffoldError::NotEmpty { .. })));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
