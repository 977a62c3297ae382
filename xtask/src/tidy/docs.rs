//! The documents held to the code: every test they cite by name as proof (`` `module::name` ``
//! or `` `name` `` in backticks) is a function of the workspace, in the module cited, so that a
//! renamed or moved test cannot leave a citation that proves nothing; and docs/benchmarks.md
//! stays a reference (each benchmark's command, today's figure, what dominates), its history
//! in git.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use super::{documents, read, rust_files};

/// Where the cited tests live: every function below these directories counts.
const TEST_HOMES: &[&str] = &["crates", "harness-cli", "plugins", "tests", "xtask", "benches"];

/// The fewest all-letter words a backticked snake_case name needs to be read as a test's name.
/// Tests here are named as sentences (`a_denied_call_is_fed_back_as_call_denied_with_the_reason`);
/// fields, codes and tools have fewer words (`cached_input_tokens`, `json_schema_2020_12_tool`).
const TEST_NAME_WORDS: usize = 5;

/// The benchmarks reference.
pub(super) const BENCHMARKS: &str = "docs/benchmarks.md";
/// The line count [`BENCHMARKS`] stays under.
const BENCHMARKS_MAX_LINES: usize = 400;

/// [`BENCHMARKS`] has fewer than [`BENCHMARKS_MAX_LINES`] lines: figures before a change and
/// the story of how one was reached belong in its git history, not in the reference.
pub(super) fn benchmarks_problems(doc: &str) -> Vec<String> {
    let lines = doc.lines().count();
    if lines < BENCHMARKS_MAX_LINES {
        return Vec::new();
    }
    vec![format!(
        "{BENCHMARKS} has {lines} lines; it stays under {BENCHMARKS_MAX_LINES}: keep for each benchmark its \
         command, today's figure and what dominates, and leave earlier figures and experiments to `git log -p \
         {BENCHMARKS}`"
    )]
}

/// Each test the documents cite that no function of [`TEST_HOMES`] answers to, with the fix.
pub(super) fn cited_test_problems(root: &Path) -> Result<Vec<String>, String> {
    let functions = functions(root)?;
    let mut problems = Vec::new();
    for doc in documents(root)? {
        let shown = doc.strip_prefix(root).unwrap_or(&doc).display().to_string();
        for cited in cited_tests(&read(&doc)?) {
            problems.extend(citation_problem(&shown, &cited, &functions));
        }
    }
    Ok(problems)
}

/// The test names a document cites: inline code spans outside fenced blocks (a fenced block's
/// `fn` is an example, not a citation) that are `name` or `module::name`, each once.
fn cited_tests(doc: &str) -> BTreeSet<String> {
    let mut prose = String::new();
    let mut fenced = false;
    for line in doc.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced {
            prose.push_str(line);
            prose.push('\n');
        }
    }
    code_spans(&prose).into_iter().filter(|span| is_test_path(span)).map(str::to_owned).collect()
}

/// The inline code spans of a text, trimmed: each opened by a run of backticks and closed by
/// the next run of the same length, as Markdown reads them (`` `a` `` holds `` `a` ``).
fn code_spans(text: &str) -> Vec<&str> {
    let mut spans = Vec::new();
    let mut rest = text;
    while let Some(open) = rest.find('`') {
        let fence = rest[open..].len() - rest[open..].trim_start_matches('`').len();
        let body = &rest[open + fence..];
        let Some(close) = runs(body).find(|(_, len)| *len == fence).map(|(at, _)| at) else { break };
        spans.push(body[..close].trim());
        rest = &body[close + fence..];
    }
    spans
}

/// Each run of backticks in a text: where it starts and how long it is.
fn runs(text: &str) -> impl Iterator<Item = (usize, usize)> + '_ {
    let bytes = text.as_bytes();
    (0..bytes.len()).filter(move |&i| bytes[i] == b'`' && (i == 0 || bytes[i - 1] != b'`')).map(move |i| {
        let len = bytes[i..].iter().take_while(|b| **b == b'`').count();
        (i, len)
    })
}

/// Whether a code span reads as a test: lower-case identifiers joined by `::`, the last a
/// sentence of at least [`TEST_NAME_WORDS`] words.
fn is_test_path(span: &str) -> bool {
    let identifier =
        |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    let name = span.rsplit("::").next().unwrap_or(span);
    let words = name.split('_').filter(|w| !w.is_empty() && w.chars().all(|c| c.is_ascii_lowercase())).count();
    span.split("::").all(identifier) && words >= TEST_NAME_WORDS
}

/// Every `fn NAME` of the Rust files of [`TEST_HOMES`]: the path of each file defining it,
/// relative to the root, as its components without `.rs` (`tests/e2e/mcp/bounds`).
fn functions(root: &Path) -> Result<BTreeMap<String, Vec<Vec<String>>>, String> {
    let mut files = Vec::new();
    for home in TEST_HOMES {
        rust_files(&root.join(home), &mut files)?;
    }
    let mut functions: BTreeMap<String, Vec<Vec<String>>> = BTreeMap::new();
    for file in files {
        let relative = file.strip_prefix(root).unwrap_or(&file).with_extension("");
        let place: Vec<String> = relative.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
        let text = read(&file)?;
        for (at, _) in text.match_indices("fn ") {
            let before = text[..at].chars().next_back();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                continue;
            }
            let name: String = text[at + 3..].chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
            functions.entry(name).or_default().push(place.clone());
        }
    }
    Ok(functions)
}

/// What is wrong with one citation, if anything: no such function, or none in the module
/// cited (its path's segments, but an inline `tests`, in order among a file's path).
fn citation_problem(doc: &str, cited: &str, functions: &BTreeMap<String, Vec<Vec<String>>>) -> Option<String> {
    let mut segments: Vec<&str> = cited.split("::").collect();
    let name = segments.pop().unwrap_or(cited);
    segments.retain(|s| *s != "tests");
    let Some(places) = functions.get(name) else {
        return Some(format!(
            "{doc} cites the test `{cited}`, which is no `fn` under {}/: cite the test's name today, or drop the citation",
            TEST_HOMES.join("/, ")
        ));
    };
    let in_module = |place: &Vec<String>| {
        let mut rest = place.iter();
        segments.iter().all(|segment| rest.any(|p| p == segment))
    };
    if places.iter().any(in_module) {
        return None;
    }
    let found: Vec<String> = places.iter().map(|p| format!("{}.rs", p.join("/"))).collect();
    Some(format!(
        "{doc} cites the test `{cited}`, but `fn {name}` is in {}: cite it by the module it is in",
        found.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root() -> &'static Path {
        Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("xtask sits in the workspace")
    }

    #[test]
    fn a_benchmarks_reference_of_400_lines_or_more_fails_the_check() {
        let real = read(&root().join(BENCHMARKS)).unwrap();
        assert_eq!(benchmarks_problems(&real), Vec::<String>::new());
        assert_eq!(benchmarks_problems(&"a line\n".repeat(399)), Vec::<String>::new());
        let found = benchmarks_problems(&"a line\n".repeat(400));
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].starts_with("docs/benchmarks.md has 400 lines"), "{found:?}");
    }

    #[test]
    fn the_tests_the_docs_cite_exist() {
        assert_eq!(cited_test_problems(root()).unwrap(), Vec::<String>::new());
    }

    /// A citation of a renamed test, and one of a test under the wrong module, are named; a
    /// field, a tool and a fenced example are not read as citations.
    #[test]
    fn a_cited_test_renamed_or_moved_fails_the_check() {
        let functions = functions(root()).unwrap();
        let doc = "The test `approval::a_denied_call_is_fed_back_as_call_denied_with_the_reason` holds it,\n\
                   as do `trust::a_denied_call_is_fed_back_as_call_denied_with_the_reason` and\n\
                   `approval::a_denied_call_is_fed_back_as_call_refused_with_the_reason`. Fields such as\n\
                   `cached_input_tokens` and the tool `json_schema_2020_12_tool` are no tests.\n\
                   ```rust\n#[test]\nfn an_example_of_a_test_in_a_fenced_block() {}\n```\n";
        assert_eq!(code_spans("a `b` c `` `d` `` e ```f``` g `h"), ["b", "`d`", "f"]);
        let cited = cited_tests(doc);
        assert_eq!(cited.len(), 3, "{cited:?}");
        let found: Vec<String> = cited.iter().filter_map(|c| citation_problem("d.md", c, &functions)).collect();
        assert_eq!(
            found,
            [
                "d.md cites the test `approval::a_denied_call_is_fed_back_as_call_refused_with_the_reason`, which is no \
                 `fn` under crates/, harness-cli/, plugins/, tests/, xtask/, benches/: cite the test's name today, or \
                 drop the citation",
                "d.md cites the test `trust::a_denied_call_is_fed_back_as_call_denied_with_the_reason`, but `fn \
                 a_denied_call_is_fed_back_as_call_denied_with_the_reason` is in tests/e2e/approval.rs: cite it by the \
                 module it is in",
            ]
        );
    }
}
