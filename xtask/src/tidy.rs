//! The architecture as a test: `docs/architecture.md` read against the workspace, so that the
//! document cannot drift from the code. It fails when the crate graph `cargo metadata` gives
//! and the document's diagram disagree, when a crate has no row in the document's table, when
//! an error code of `harness-core` is missing from its list, or when a layer gains a
//! dependency it must not have (an HTTP client or a library loader in the core or the SDK, a
//! loader in the providers, the core or the loader in the sandbox).
//!
//! It also reads the sources: every crate forbids `unsafe` code unless [`UNSAFE_ALLOWED`] names
//! it with the reason, every Rust file opens with a `//!` comment saying what it holds, and the
//! minimum Rust version the documents name is the workspace's `rust-version`. The documents
//! are held to the code in [`docs`] too: every test they cite by name exists, and
//! docs/benchmarks.md stays under 400 lines.
//!
//! Run by `cargo xtask tidy`, and as a unit test of this crate by `cargo xtask test`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

use serde_json::Value;

mod docs;

/// The heading whose first fenced block is the diagram, one line per crate: `A ──► B, C`.
const DIAGRAM_HEADING: &str = "## The crates and which way the arrows point";
/// The heading of the list of error codes.
const CODES_HEADING: &str = "## Error objects";
/// What the diagram says of a crate that depends on none of ours.
const NOTHING_OF_OURS: &str = "(nothing of ours)";
/// The diagram's name for every plugin of `plugins/`.
const PLUGINS: &str = "plugins/*";

const HTTP_CLIENTS: &[&str] = &["reqwest", "hyper", "ureq", "isahc", "curl", "attohttpc"];
const LOADERS: &[&str] = &["libloading", "harness-loader"];

/// The crates that may hold `unsafe` code, each with why; every other crate's root file says
/// `#![forbid(unsafe_code)]`. Keep it short: a crate leaves the list when its last `unsafe` goes.
const UNSAFE_ALLOWED: &[(&str, &str)] = &[
    ("crates/harness-trust", "geteuid and the Windows security API, for the owner of a trusted file"),
    ("crates/harness-loader", "dlopen, the plugin-host child's set-up, the warm-up thread's CPU"),
    (
        "crates/harness-sandbox",
        "Landlock's ABI probe, seccomp's prctl, setrlimit and Job Objects, for a child's capabilities",
    ),
    ("crates/harness-mcp", "dup/dup2 of stdout, so that only the protocol is written to it"),
    ("crates/harness-sdk", "export_plugin!'s static library header, read by the loader"),
    ("harness-cli", "tcflush of the terminal before an approval prompt"),
    ("plugins/fault", "a test-only plugin that crashes on purpose (a null read)"),
    ("plugins/files", "mkfifo in a unit test, for a file that would block a reader"),
];

/// Where the workspace's crates sit: each directory below these holding a Cargo.toml is one.
const CRATE_HOMES: &[&str] = &["crates", "plugins", "tests/fixtures"];
/// Crates outside [`CRATE_HOMES`].
const LONE_CRATES: &[&str] = &["harness-cli", "xtask", "benches"];
/// The documents held to the code: the minimum Rust version they name, the tests they cite.
const DOCUMENTS: &[&str] = &["README.md", "CONTRIBUTING.md", "docs"];

/// A dependency a layer must not have: `crate_name` must not depend on any of `forbidden`,
/// directly, or through anything (`transitive`).
struct Rule {
    crate_name: &'static str,
    forbidden: &'static [&'static str],
    transitive: bool,
    why: &'static str,
}

const RULES: &[Rule] = &[
    Rule { crate_name: "harness-core", forbidden: HTTP_CLIENTS, transitive: true, why: "the loop never speaks HTTP" },
    Rule { crate_name: "harness-core", forbidden: LOADERS, transitive: true, why: "the loop never loads libraries" },
    Rule { crate_name: "harness-sdk", forbidden: HTTP_CLIENTS, transitive: true, why: "every plugin carries the SDK" },
    // abi_stable, the ABI itself, brings libloading underneath: only a direct one is the SDK's.
    Rule { crate_name: "harness-sdk", forbidden: LOADERS, transitive: false, why: "plugins never load plugins" },
    Rule { crate_name: "harness-providers", forbidden: LOADERS, transitive: true, why: "a provider only talks" },
    Rule {
        crate_name: "harness-reply",
        forbidden: &["harness-core"],
        transitive: true,
        why: "the reader sits below the loop: arrows point inward",
    },
    Rule {
        crate_name: "harness-sandbox",
        forbidden: &["harness-core", "harness-frames", "harness-loader", "harness-trust"],
        transitive: true,
        why: "the capability layer is audited alone, knowing only the ABI's effect classes",
    },
];

/// The workspace's crates and who depends on whom, as `cargo metadata` gives them.
#[derive(Debug, Default)]
pub(crate) struct Graph {
    /// Each crate of `crates/` and `harness-cli`: the crates of ours it depends on (normal
    /// dependencies: tests and builds are not the architecture).
    pub(crate) crates: BTreeMap<String, BTreeSet<String>>,
    /// Each plugin of `plugins/`: the crates of ours it depends on.
    pub(crate) plugins: BTreeMap<String, BTreeSet<String>>,
    /// Every package's normal dependencies, ours and others', by name.
    pub(crate) deps: BTreeMap<String, BTreeSet<String>>,
    /// The directories, relative to the root, of the members a plain `cargo build` builds.
    pub(crate) default_members: BTreeSet<String>,
}

/// Checks the workspace at `root`; every disagreement found, each on a line of its own.
pub(crate) fn check(root: &Path) -> Result<(), String> {
    let graph = Graph::of_workspace(root)?;
    let doc = read(&root.join("docs/architecture.md"))?;
    let error_rs = read(&root.join("crates/harness-core/src/error.rs"))?;
    let mut problems = problems(&graph, &doc, &error_codes(&error_rs));
    let crates = workspace_crates(root)?;
    let product: Vec<String> = crates.iter().filter(|c| is_product(c)).cloned().collect();
    problems.extend(unsafe_problems(root, &product, UNSAFE_ALLOWED)?);
    problems.extend(file_doc_problems(root, &crates)?);
    problems.extend(rust_version_problems(root)?);
    problems.extend(exit_code_problems(root)?);
    problems.extend(prerequisite_problems(root, crate::NEEDS_PREREQUISITE)?);
    problems.extend(test_only_problems(root, &graph.default_members));
    problems.extend(docs::cited_test_problems(root)?);
    problems.extend(docs::benchmarks_problems(&read(&root.join(docs::BENCHMARKS))?));
    if problems.is_empty() {
        return Ok(());
    }
    Err(format!("the docs and the workspace disagree:\n  {}", problems.join("\n  ")))
}

/// Every disagreement between the graph, the document and the error codes.
pub(crate) fn problems(graph: &Graph, doc: &str, codes: &[String]) -> Vec<String> {
    let mut problems = diagram_problems(graph, doc);
    problems.extend(table_problems(graph, doc));
    problems.extend(code_problems(doc, codes));
    problems.extend(rule_problems(graph));
    problems
}

/// The workspace's crate directories, relative to `root`, sorted.
fn workspace_crates(root: &Path) -> Result<Vec<String>, String> {
    let mut crates: Vec<String> = LONE_CRATES.iter().map(|c| (*c).to_owned()).collect();
    for home in CRATE_HOMES {
        let dir = root.join(home);
        let entries = std::fs::read_dir(&dir).map_err(|e| format!("cannot list {}: {e}", dir.display()))?;
        for entry in entries.flatten() {
            if entry.path().join("Cargo.toml").is_file() {
                crates.push(format!("{home}/{}", entry.file_name().to_string_lossy()));
            }
        }
    }
    crates.sort();
    Ok(crates)
}

/// Whether a crate is part of what ships or builds the product, not test material (the fixture
/// plugins lie and crash on purpose, the benchmarks measure the kernel's costs): only those are
/// held to [`UNSAFE_ALLOWED`].
fn is_product(krate: &str) -> bool {
    !krate.starts_with("tests/") && krate != "benches"
}

/// A test-only plugin (`TEST_ONLY: bool = true`) must not be a default member: a plain `cargo
/// build --release` would put it beside the harness, where every user's `plugins list` shows it.
/// Nor a proc-macro crate, whose library there is read as a plugin candidate and skipped aloud
/// at every run.
fn test_only_problems(root: &Path, default_members: &BTreeSet<String>) -> Vec<String> {
    let proc_macro = |krate: &str| {
        let manifest = std::fs::read_to_string(root.join(krate).join("Cargo.toml")).unwrap_or_default();
        manifest.lines().any(|l| l.replace(' ', "") == "proc-macro=true")
    };
    let macros = default_members.iter().filter(|krate| proc_macro(krate)).map(|krate| {
        format!(
            "{krate} is a proc-macro crate but a default member, so `cargo build --release` puts its library beside \
             the harness, which skips it aloud at every run; leave it out of default-members in Cargo.toml"
        )
    });
    let test_only = |krate: &str| {
        let source = crate_root(root, krate).and_then(|f| std::fs::read_to_string(f).ok()).unwrap_or_default();
        source.contains("const TEST_ONLY: bool = true")
    };
    default_members
        .iter()
        .filter(|krate| test_only(krate))
        .map(|krate| {
            format!(
                "{krate} is a test-only plugin but a default member, so `cargo build --release` puts it in the \
                 release directory; leave it out of default-members in Cargo.toml (its tests build it with -p)"
            )
        })
        .chain(macros)
        .collect()
}

/// The crate's root file: `src/lib.rs`, else `src/main.rs`.
fn crate_root(root: &Path, krate: &str) -> Option<std::path::PathBuf> {
    ["src/lib.rs", "src/main.rs"].iter().map(|f| root.join(krate).join(f)).find(|p| p.is_file())
}

/// Each crate forbids `unsafe` code or is in `allowed`; an allowed crate that forbids it is a
/// stale entry.
fn unsafe_problems(root: &Path, crates: &[String], allowed: &[(&str, &str)]) -> Result<Vec<String>, String> {
    let mut problems = Vec::new();
    for krate in crates {
        let Some(file) = crate_root(root, krate) else { continue };
        let forbids = read(&file)?.lines().any(|l| l.trim() == "#![forbid(unsafe_code)]");
        let listed = allowed.iter().any(|(name, _)| name == krate);
        if !forbids && !listed {
            problems.push(format!(
                "{krate} does not forbid unsafe code: add #![forbid(unsafe_code)] to {}, or name it in xtask/src/tidy.rs's UNSAFE_ALLOWED with why",
                file.strip_prefix(root).unwrap_or(&file).display()
            ));
        }
        if forbids && listed {
            problems.push(format!("{krate} forbids unsafe code: take it out of UNSAFE_ALLOWED in xtask/src/tidy.rs"));
        }
    }
    Ok(problems)
}

/// Every Rust file of every crate opens with `//!`: what the file holds. A file taken in with
/// `include!` cannot (an inner comment inside an item): its opening comment says so instead.
fn file_doc_problems(root: &Path, crates: &[String]) -> Result<Vec<String>, String> {
    let mut files = Vec::new();
    for krate in crates {
        rust_files(&root.join(krate), &mut files)?;
    }
    let mut problems = Vec::new();
    for file in files {
        let text = read(&file)?;
        let included = text.lines().take(3).any(|l| l.starts_with("//") && l.contains("include!"));
        if !text.starts_with("//!") && !included {
            let shown = file.strip_prefix(root).unwrap_or(&file).display().to_string();
            problems.push(format!("{shown} does not open with a `//!` comment saying what it holds"));
        }
    }
    problems.sort();
    Ok(problems)
}

/// The `.rs` files below `dir`, leaving out build output and snapshots.
fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) -> Result<(), String> {
    let entries = std::fs::read_dir(dir).map_err(|e| format!("cannot list {}: {e}", dir.display()))?;
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        if path.is_dir() {
            if name != "target" && name != "snapshots" {
                rust_files(&path, out)?;
            }
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    Ok(())
}

/// The documents name the workspace's `rust-version` wherever they name a minimum Rust version
/// ("Rust 1.NN or newer", "rust-version = ...").
fn rust_version_problems(root: &Path) -> Result<Vec<String>, String> {
    let manifest = read(&root.join("Cargo.toml"))?;
    let Some(version) =
        manifest.lines().find_map(|l| l.trim().strip_prefix("rust-version = \"")?.strip_suffix('"').map(str::to_owned))
    else {
        return Ok(vec!["the workspace's Cargo.toml has no `rust-version = \"...\"`".to_owned()]);
    };
    let mut problems = Vec::new();
    for doc in documents(root)? {
        for named in minimum_versions(&read(&doc)?) {
            if named != version {
                let shown = doc.strip_prefix(root).unwrap_or(&doc).display().to_string();
                problems.push(format!(
                    "{shown} names Rust {named} as the minimum; the workspace's rust-version is {version}"
                ));
            }
        }
    }
    Ok(problems)
}

/// The files of [`DOCUMENTS`]: each file named, and the `.md` files of each directory, sorted.
fn documents(root: &Path) -> Result<Vec<std::path::PathBuf>, String> {
    let mut docs = Vec::new();
    for place in DOCUMENTS {
        let path = root.join(place);
        if path.is_dir() {
            let entries = std::fs::read_dir(&path).map_err(|e| format!("cannot list {}: {e}", path.display()))?;
            docs.extend(entries.flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|e| e == "md")));
        } else {
            docs.push(path);
        }
    }
    docs.sort();
    Ok(docs)
}

/// The versions a text names as a minimum: `Rust X.Y or newer` and `rust-version = "X.Y"`.
fn minimum_versions(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    for (at, _) in text.match_indices("Rust ") {
        let rest = &text[at + 5..];
        let version: String = rest.chars().take_while(|c| c.is_ascii_digit() || *c == '.').collect();
        if version.contains('.') && rest[version.len()..].starts_with(" or newer") {
            found.push(version.trim_end_matches('.').to_owned());
        }
    }
    for (at, _) in text.match_indices("rust-version = \"") {
        let rest = &text[at + 16..];
        if let Some(end) = rest.find('"') {
            found.push(rest[..end].to_owned());
        }
    }
    found
}

/// The exit codes of `harness run` that README.md's summary and docs/operators.md's table list
/// are those `harness-cli/src/exit.rs` defines, both ways.
fn exit_code_problems(root: &Path) -> Result<Vec<String>, String> {
    let defined = run_exit_codes(&read(&root.join("harness-cli/src/exit.rs"))?);
    let readme = read(&root.join("README.md"))?;
    let operators = read(&root.join("docs/operators.md"))?;
    let listed = [
        ("README.md", readme_exit_codes(&readme)),
        ("docs/operators.md", table_exit_codes(&operators, "## Exit codes of `harness run`")),
    ];
    let mut problems = Vec::new();
    for (doc, codes) in listed {
        let Some(codes) = codes else {
            problems.push(format!("{doc} has no list of `harness run`'s exit codes"));
            continue;
        };
        for code in defined.difference(&codes) {
            problems.push(format!("{doc} does not list exit code {code} of `harness run` (harness-cli/src/exit.rs)"));
        }
        for code in codes.difference(&defined) {
            problems.push(format!(
                "{doc} lists exit code {code} of `harness run`, which harness-cli/src/exit.rs does not define"
            ));
        }
    }
    Ok(problems)
}

/// The codes of `RunExit::describe`'s arms: `Self::NAME => (CODE, "...")`, however rustfmt
/// breaks them.
fn run_exit_codes(exit_rs: &str) -> BTreeSet<u32> {
    let arms = exit_rs.match_indices("=> (").map(|(at, _)| exit_rs[at + 4..].trim_start());
    arms.filter_map(|rest| rest.split_once(',')?.0.trim().parse().ok()).collect()
}

/// The codes README.md's `**Exit codes** of `harness run`:` paragraph names: each number after
/// the colon or a comma.
fn readme_exit_codes(readme: &str) -> Option<BTreeSet<u32>> {
    let marker = "**Exit codes** of `harness run`:";
    let after = &readme[readme.find(marker)? + marker.len()..];
    let paragraph = after.split("\n\n").next().unwrap_or(after);
    let sentence = paragraph.split(". ").next().unwrap_or(paragraph);
    Some(sentence.split(',').filter_map(|part| part.split_whitespace().next()?.parse().ok()).collect())
}

/// The codes in the first column of the table under `heading`.
fn table_exit_codes(doc: &str, heading: &str) -> Option<BTreeSet<u32>> {
    let after = &doc[doc.find(heading)? + heading.len()..];
    let section = after.split("\n## ").next().unwrap_or(after);
    Some(
        section
            .lines()
            .filter_map(|l| l.strip_prefix("| ")?.split_once(" |").map(|(code, _)| code.trim()))
            .filter_map(|code| code.parse().ok())
            .collect(),
    )
}

/// What in a test's body says it needs a prerequisite of `prereq/`: the helper that reads its
/// variable, or the one that finds the program.
const PREREQUISITE_MARKERS: &[&str] = &["prerequisite(", "chromium()", "Cluster::start(", "suite()"];

/// The end-to-end tests that need a prerequisite are those `cargo xtask test --quick` leaves
/// out (`NEEDS_PREREQUISITE`), and each filter there still matches a test.
fn prerequisite_problems(root: &Path, filters: &[(&str, &str)]) -> Result<Vec<String>, String> {
    let e2e = root.join("tests/e2e");
    let mut files = Vec::new();
    rust_files(&e2e, &mut files)?;
    files.sort();
    let mut problems = Vec::new();
    let mut matched = BTreeSet::new();
    for file in files {
        let relative = file.strip_prefix(&e2e).unwrap_or(&file).with_extension("");
        let module: Vec<String> = relative.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
        let module = module.join("::");
        for (name, body) in tests_in(&read(&file)?) {
            let path = format!("{module}::{name}");
            let filter = filters.iter().find(|(f, _)| path.starts_with(f));
            if let Some((f, _)) = filter {
                matched.insert(*f);
            }
            if filter.is_none() && PREREQUISITE_MARKERS.iter().any(|m| body.contains(m)) {
                problems.push(format!(
                    "{path} needs a prerequisite but `cargo xtask test --quick` would run it: add it to NEEDS_PREREQUISITE in xtask/src/main.rs"
                ));
            }
        }
    }
    for (filter, _) in filters.iter().filter(|(f, _)| !matched.contains(f)) {
        problems
            .push(format!("NEEDS_PREREQUISITE in xtask/src/main.rs names {filter}, which matches no end-to-end test"));
    }
    Ok(problems)
}

/// Each `#[test]` function of a file: its name and its text, to the closing brace at the
/// start of a line (rustfmt's).
fn tests_in(text: &str) -> Vec<(String, &str)> {
    let mut tests = Vec::new();
    for (at, _) in text.match_indices("#[test]") {
        let rest = &text[at..];
        let Some(fn_at) = rest.find("fn ") else { continue };
        let name: String = rest[fn_at + 3..].chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
        let end = rest.find("\n}").map_or(rest.len(), |e| e + 2);
        tests.push((name, &rest[..end]));
    }
    tests
}

fn read(path: &Path) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))
}

impl Graph {
    /// Runs `cargo metadata` in `root` and reads the graph from it.
    fn of_workspace(root: &Path) -> Result<Self, String> {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let output = Command::new(cargo)
            .current_dir(root)
            .args(["metadata", "--format-version", "1"])
            .output()
            .map_err(|e| format!("cannot run cargo metadata: {e}"))?;
        if !output.status.success() {
            return Err(format!("cargo metadata failed: {}", String::from_utf8_lossy(&output.stderr).trim()));
        }
        let metadata: Value =
            serde_json::from_slice(&output.stdout).map_err(|e| format!("cargo metadata's output is not JSON: {e}"))?;
        Ok(Self::from_metadata(&metadata, root))
    }

    /// The graph in `cargo metadata`'s JSON, for the workspace at `root`: read from the
    /// resolved graph, since a package's declared dependencies include optional ones never built.
    fn from_metadata(metadata: &Value, root: &Path) -> Self {
        let packages = metadata["packages"].as_array().map(Vec::as_slice).unwrap_or_default();
        let by_id: BTreeMap<&str, &Value> = packages.iter().filter_map(|p| Some((p["id"].as_str()?, p))).collect();
        let name_of = |id: &Value| by_id.get(id.as_str()?)?["name"].as_str();
        let members: BTreeSet<&str> =
            metadata["workspace_members"].as_array().into_iter().flatten().filter_map(name_of).collect();
        let mut graph = Self::default();
        for id in metadata["workspace_default_members"].as_array().into_iter().flatten() {
            let manifest = id.as_str().and_then(|id| by_id.get(id)).and_then(|p| p["manifest_path"].as_str());
            let dir = manifest.map(Path::new).and_then(|m| m.parent()?.strip_prefix(root).ok());
            graph.default_members.extend(dir.map(|d| d.to_string_lossy().replace('\\', "/")));
        }
        for node in metadata["resolve"]["nodes"].as_array().into_iter().flatten() {
            let Some(name) = name_of(&node["id"]) else { continue };
            let normal = node["deps"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|d| d["dep_kinds"].as_array().into_iter().flatten().any(|k| k["kind"].is_null()));
            let deps: BTreeSet<String> = normal.filter_map(|d| name_of(&d["pkg"]).map(str::to_owned)).collect();
            graph.deps.entry(name.to_owned()).or_default().extend(deps.iter().cloned());
            if !members.contains(name) {
                continue;
            }
            let ours: BTreeSet<String> = deps.into_iter().filter(|d| members.contains(d.as_str())).collect();
            let manifest = by_id.get(node["id"].as_str().unwrap_or_default()).and_then(|p| p["manifest_path"].as_str());
            let place = manifest.map(Path::new).and_then(|m| m.strip_prefix(root).ok()).unwrap_or(Path::new(""));
            if place.starts_with("crates") || place.starts_with("harness-cli") {
                graph.crates.insert(name.to_owned(), ours);
            } else if place.starts_with("plugins") {
                graph.plugins.insert(name.to_owned(), ours);
            }
        }
        graph
    }

    /// Everything `name` depends on, through anything.
    fn closure(&self, name: &str) -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut todo = vec![name.to_owned()];
        while let Some(next) = todo.pop() {
            for dep in self.deps.get(&next).into_iter().flatten() {
                if seen.insert(dep.clone()) {
                    todo.push(dep.clone());
                }
            }
        }
        seen
    }
}

/// The text of the first fenced block after `heading`, when there is one.
fn fenced_after<'d>(doc: &'d str, heading: &str) -> Option<&'d str> {
    let after = &doc[doc.find(heading)? + heading.len()..];
    let open = after.find("```")?;
    let body = &after[open + 3..];
    let body = &body[body.find('\n')? + 1..];
    Some(&body[..body.find("```")?])
}

/// The diagram's arrows: each crate (or `plugins/*`) and the crates it points to.
fn diagram(doc: &str) -> Option<BTreeMap<String, BTreeSet<String>>> {
    let block = fenced_after(doc, DIAGRAM_HEADING)?;
    let mut arrows = BTreeMap::new();
    for line in block.lines() {
        let Some((from, to)) = line.split_once("──►") else { continue };
        let to = to.trim();
        let targets = if to == NOTHING_OF_OURS {
            BTreeSet::new()
        } else {
            to.split(',').map(|t| t.trim().to_owned()).filter(|t| !t.is_empty()).collect()
        };
        arrows.insert(from.trim().to_owned(), targets);
    }
    Some(arrows)
}

fn diagram_problems(graph: &Graph, doc: &str) -> Vec<String> {
    let Some(mut arrows) = diagram(doc) else {
        return vec![format!("no diagram: a fenced block of `A ──► B, C` lines under {DIAGRAM_HEADING:?}")];
    };
    let mut problems = Vec::new();
    for (name, deps) in &graph.crates {
        match arrows.remove(name) {
            None => problems.push(format!("{name} is not in the diagram; add `{name} ──► {}`", listed(deps))),
            Some(drawn) if drawn != *deps => {
                problems.push(format!("the diagram has {name} ──► {}, cargo has {}", listed(&drawn), listed(deps)));
            }
            Some(_) => {}
        }
    }
    let drawn_plugins = arrows.remove(PLUGINS).unwrap_or_default();
    for (name, deps) in graph.plugins.iter().filter(|(_, deps)| **deps != drawn_plugins) {
        problems.push(format!("plugin {name} depends on {}, the diagram on {}", listed(deps), listed(&drawn_plugins)));
    }
    problems.extend(arrows.keys().map(|name| format!("the diagram has {name}, which is no crate of the workspace")));
    problems
}

fn listed(deps: &BTreeSet<String>) -> String {
    if deps.is_empty() {
        return NOTHING_OF_OURS.to_owned();
    }
    deps.iter().map(String::as_str).collect::<Vec<_>>().join(", ")
}

/// Every crate has a row of its own in the table of what each crate is for.
fn table_problems(graph: &Graph, doc: &str) -> Vec<String> {
    let rows = graph.crates.keys().filter(|name| !doc.contains(&format!("| `{name}` |")));
    rows.map(|name| format!("{name} has no row in the table of crates (| `{name}` | its one job |)")).collect()
}

/// The codes `ErrorCode::as_str` gives, in the order it gives them.
pub(crate) fn error_codes(error_rs: &str) -> Vec<String> {
    let arms = error_rs.lines().filter_map(|l| l.trim().strip_prefix("Self::")?.split_once("=> \"").map(|(_, r)| r));
    arms.filter_map(|rest| rest.split_once('"').map(|(code, _)| code.to_owned())).collect()
}

fn code_problems(doc: &str, codes: &[String]) -> Vec<String> {
    let Some(start) = doc.find(CODES_HEADING) else {
        return vec![format!("no {CODES_HEADING:?} section listing the error codes")];
    };
    let section = &doc[start..];
    let section =
        section[CODES_HEADING.len()..].find("\n## ").map_or(section, |end| &section[..end + CODES_HEADING.len()]);
    let missing = codes.iter().filter(|code| !section.contains(&format!("`{code}`")));
    missing.map(|code| format!("error code {code} is not listed under {CODES_HEADING:?}")).collect()
}

fn rule_problems(graph: &Graph) -> Vec<String> {
    let mut problems = Vec::new();
    for rule in RULES {
        let deps = if rule.transitive {
            graph.closure(rule.crate_name)
        } else {
            graph.deps.get(rule.crate_name).cloned().unwrap_or_default()
        };
        for bad in rule.forbidden.iter().filter(|f| deps.contains(**f)) {
            let how = if rule.transitive { "through its dependencies" } else { "directly" };
            problems.push(format!("{} depends on {bad} {how}, which it must not: {}", rule.crate_name, rule.why));
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root() -> &'static Path {
        Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("xtask sits in the workspace")
    }

    #[test]
    fn the_architecture_doc_agrees_with_the_workspace() {
        if let Err(problems) = check(root()) {
            panic!("{problems}");
        }
    }

    /// The fault plugin, were it a default member again, is named; the workspace's real
    /// default members include the SDK and no test-only plugin.
    #[test]
    fn a_test_only_plugin_among_the_default_members_fails_the_check() {
        let members: BTreeSet<String> = ["plugins/calc".to_owned(), "plugins/fault".to_owned()].into();
        let problems = test_only_problems(root(), &members);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].starts_with("plugins/fault is a test-only plugin"), "{problems:?}");
        let graph = Graph::of_workspace(root()).unwrap();
        assert!(graph.default_members.contains("crates/harness-sdk"), "{:?}", graph.default_members);
        assert!(test_only_problems(root(), &graph.default_members).is_empty());
        // Nor a proc-macro crate.
        let members: BTreeSet<String> = ["crates/harness-sdk-macros".to_owned()].into();
        let problems = test_only_problems(root(), &members);
        assert!(problems.len() == 1 && problems[0].contains("proc-macro crate"), "{problems:?}");
    }

    /// The same check on the real graph and codes, against a diagram with one arrow wrong,
    /// one crate left out, and a code dropped from the list.
    #[test]
    fn a_wrong_diagram_fails_the_check() {
        let graph = Graph::of_workspace(root()).unwrap();
        let doc = read(&root().join("docs/architecture.md")).unwrap();
        let codes = error_codes(&read(&root().join("crates/harness-core/src/error.rs")).unwrap());
        assert_eq!(problems(&graph, &doc, &codes), Vec::<String>::new());

        let wrong = doc
            .replace("harness-abi       ──► (nothing of ours)", "harness-abi       ──► harness-core")
            .replace("\nharness-frames    ──► (nothing of ours)", "")
            .replace("`awaiting_approval`", "awaiting approval");
        let found = problems(&graph, &wrong, &codes);
        assert_eq!(
            found,
            [
                "the diagram has harness-abi ──► harness-core, cargo has (nothing of ours)",
                "harness-frames is not in the diagram; add `harness-frames ──► (nothing of ours)`",
                "error code awaiting_approval is not listed under \"## Error objects\"",
            ]
        );
    }

    #[test]
    fn a_layer_that_gains_a_forbidden_dependency_fails_the_check() {
        let mut graph = Graph::default();
        graph.deps.insert("harness-core".into(), ["jsonschema".to_owned()].into());
        graph.deps.insert("jsonschema".into(), ["reqwest".to_owned()].into());
        graph.deps.insert("harness-sdk".into(), ["harness-abi".to_owned()].into());
        graph.deps.insert("harness-abi".into(), ["libloading".to_owned()].into());
        assert_eq!(
            rule_problems(&graph),
            ["harness-core depends on reqwest through its dependencies, which it must not: the loop never speaks HTTP"]
        );
    }

    #[test]
    fn the_sandbox_that_gains_a_host_crate_fails_the_check() {
        let mut graph = Graph::default();
        graph.deps.insert("harness-sandbox".into(), ["harness-abi".to_owned(), "libc".to_owned()].into());
        assert_eq!(rule_problems(&graph), Vec::<String>::new());
        graph.deps.insert("harness-sandbox".into(), ["harness-trust".to_owned()].into());
        assert_eq!(
            rule_problems(&graph),
            ["harness-sandbox depends on harness-trust through its dependencies, which it must not: the capability \
              layer is audited alone, knowing only the ABI's effect classes"]
        );
    }

    #[test]
    fn a_crate_that_neither_forbids_unsafe_nor_is_allowed_fails_the_check() {
        let crates: Vec<String> = workspace_crates(root()).unwrap().into_iter().filter(|c| is_product(c)).collect();
        assert_eq!(unsafe_problems(root(), &crates, UNSAFE_ALLOWED).unwrap(), Vec::<String>::new());
        let fewer: Vec<(&str, &str)> =
            UNSAFE_ALLOWED.iter().copied().filter(|(name, _)| *name != "crates/harness-loader").collect();
        let found = unsafe_problems(root(), &crates, &fewer).unwrap();
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].starts_with("crates/harness-loader does not forbid unsafe code"), "{found:?}");
        let mut more = UNSAFE_ALLOWED.to_vec();
        more.push(("plugins/calc", "no reason"));
        let found = unsafe_problems(root(), &crates, &more).unwrap();
        assert_eq!(found, ["plugins/calc forbids unsafe code: take it out of UNSAFE_ALLOWED in xtask/src/tidy.rs"]);
    }

    #[test]
    fn a_stale_minimum_rust_version_is_found() {
        assert_eq!(
            minimum_versions("- Rust 1.85 or newer (edition 2024)\nrust-version = \"1.88\"\nRust 2024"),
            ["1.85", "1.88"]
        );
        assert_eq!(rust_version_problems(root()).unwrap(), Vec::<String>::new());
    }

    /// A scratch workspace root of the given files, removed when dropped.
    struct Planted(std::path::PathBuf);

    impl Planted {
        fn new(name: &str, files: &[(&str, &str)]) -> Self {
            let dir = std::env::temp_dir().join(format!("xtask-tidy-{name}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            for (path, text) in files {
                let path = dir.join(path);
                std::fs::create_dir_all(path.parent().unwrap()).unwrap();
                std::fs::write(path, text).unwrap();
            }
            Self(dir)
        }
    }

    impl Drop for Planted {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn a_stale_rust_version_planted_in_a_doc_fails_the_check() {
        let planted = Planted::new(
            "rust-version",
            &[
                ("Cargo.toml", "[workspace.package]\nrust-version = \"1.89\"\n"),
                ("README.md", "Needs Rust 1.89 or newer.\n"),
                ("CONTRIBUTING.md", "Build with Rust 1.85 or newer.\n"),
                ("docs/operators.md", "rust-version = \"1.88\"\n"),
            ],
        );
        assert_eq!(
            rust_version_problems(&planted.0).unwrap(),
            [
                "CONTRIBUTING.md names Rust 1.85 as the minimum; the workspace's rust-version is 1.89",
                "docs/operators.md names Rust 1.88 as the minimum; the workspace's rust-version is 1.89",
            ]
        );
    }

    #[test]
    fn an_unsafe_block_in_a_crate_outside_the_allow_list_fails_the_check() {
        let planted = Planted::new(
            "unsafe",
            &[
                ("plugins/tidy/src/lib.rs", "//! Tidy.\n#![forbid(unsafe_code)]\npub fn f() {}\n"),
                ("plugins/raw/src/lib.rs", "//! Raw.\npub fn f() -> u8 { unsafe { *std::ptr::null() } }\n"),
            ],
        );
        let crates = ["plugins/tidy".to_owned(), "plugins/raw".to_owned()];
        let found = unsafe_problems(&planted.0, &crates, &[]).unwrap();
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].starts_with("plugins/raw does not forbid unsafe code"), "{found:?}");
        // Named in the allow-list with why, it passes.
        assert_eq!(unsafe_problems(&planted.0, &crates, &[("plugins/raw", "a test")]).unwrap(), Vec::<String>::new());
    }

    #[test]
    fn exit_codes_are_read_from_the_enum_the_readme_and_the_table() {
        let exit_rs = "match self {\n    Self::Finished => (0, \"done\"),\n    Self::Failed => (1, \"x, y\"),\n}";
        assert_eq!(run_exit_codes(exit_rs), [0, 1].into());
        let readme = "**Exit codes** of `harness run`: 0 finished, 1 failed (provider, trace), 2 usage or\nconfiguration error. `run --help` lists 7 of them.\n\nmore";
        assert_eq!(readme_exit_codes(readme), Some([0, 1, 2].into()));
        let table = "## Exit codes of `harness run`\n\n| code | meaning |\n|---|---|\n| 0 | ok |\n| 5 | cut |\n\n## Next\n| 9 | no |";
        assert_eq!(table_exit_codes(table, "## Exit codes of `harness run`"), Some([0, 5].into()));
        assert_eq!(exit_code_problems(root()).unwrap(), Vec::<String>::new());
    }

    #[test]
    fn the_quick_tier_leaves_out_exactly_the_tests_that_need_a_prerequisite() {
        assert_eq!(prerequisite_problems(root(), crate::NEEDS_PREREQUISITE).unwrap(), Vec::<String>::new());
        let fewer: Vec<(&str, &str)> =
            crate::NEEDS_PREREQUISITE.iter().copied().filter(|(f, _)| *f != "slurm::").collect();
        let found = prerequisite_problems(root(), &fewer).unwrap();
        assert!(found.iter().any(|p| p.starts_with("slurm::a_slurm_job_array")), "{found:?}");
        let mut more = crate::NEEDS_PREREQUISITE.to_vec();
        more.push(("nothing::here", "x"));
        let found = prerequisite_problems(root(), &more).unwrap();
        assert!(found.iter().any(|p| p.contains("names nothing::here")), "{found:?}");
    }

    #[test]
    fn error_codes_are_read_from_as_str() {
        let text = "match self {\n    Self::NoJson => \"no_json\",\n    Self::ToolError => \"tool_error\",\n}";
        assert_eq!(error_codes(text), ["no_json", "tool_error"]);
    }
}
