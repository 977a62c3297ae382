//! The checks of `harness plugins check`, run on this plugin's freshly built library file.

use harness_plugin_check::{CheckOptions, build_library, check};

#[test]
fn the_library_passes_the_harness_checks() {
    let library = build_library(env!("CARGO"), env!("CARGO_PKG_NAME")).expect("calc builds");
    let report = check(&library, &CheckOptions::default()).expect("the library file is readable");
    assert!(report.passed(), "{}", report.table());
    println!("{}", report.table());
}
