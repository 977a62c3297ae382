//! The checks of `harness plugins check`, run on this plugin's freshly built library file,
//! confined to a scratch root so that generated paths can only ever read what is put there.

use harness_plugin_check::{CheckOptions, build_library, check};
use harness_sdk::serde_json::json;

#[test]
fn the_library_passes_the_harness_checks() {
    let root = tempfile::tempdir().expect("scratch root");
    std::fs::write(root.path().join("a"), "some text").expect("a file to find");
    std::fs::create_dir(root.path().join("b")).expect("a directory to list");
    let library = build_library(env!("CARGO"), env!("CARGO_PKG_NAME")).expect("files builds");
    let options = CheckOptions::default().with_section("files", json!({ "root": root.path() }));
    let report = check(&library, &options).expect("the library file is readable");
    assert!(report.passed(), "{}", report.table());
}
