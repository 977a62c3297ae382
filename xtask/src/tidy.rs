//! The architecture as a test: `docs/architecture.md` read against the workspace, so that the
//! document cannot drift from the code. It fails when the crate graph `cargo metadata` gives
//! and the document's diagram disagree, when a crate has no row in the document's table, when
//! an error code of `harness-core` is missing from its list, or when a layer gains a
//! dependency it must not have (an HTTP client or a library loader in the core or the SDK, a
//! loader in the providers).
//!
//! Run by `cargo xtask tidy`, and as a unit test of this crate by `cargo xtask test`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

use serde_json::Value;

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
}

/// Checks the workspace at `root`; every disagreement found, each on a line of its own.
pub(crate) fn check(root: &Path) -> Result<(), String> {
    let graph = Graph::of_workspace(root)?;
    let doc = read(&root.join("docs/architecture.md"))?;
    let error_rs = read(&root.join("crates/harness-core/src/error.rs"))?;
    let problems = problems(&graph, &doc, &error_codes(&error_rs));
    if problems.is_empty() {
        return Ok(());
    }
    Err(format!("docs/architecture.md and the workspace disagree:\n  {}", problems.join("\n  ")))
}

/// Every disagreement between the graph, the document and the error codes.
pub(crate) fn problems(graph: &Graph, doc: &str, codes: &[String]) -> Vec<String> {
    let mut problems = diagram_problems(graph, doc);
    problems.extend(table_problems(graph, doc));
    problems.extend(code_problems(doc, codes));
    problems.extend(rule_problems(graph));
    problems
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
            .args(["metadata", "--format-version", "1", "--offline"])
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
    fn error_codes_are_read_from_as_str() {
        let text = "match self {\n    Self::NoJson => \"no_json\",\n    Self::ToolError => \"tool_error\",\n}";
        assert_eq!(error_codes(text), ["no_json", "tool_error"]);
    }
}
