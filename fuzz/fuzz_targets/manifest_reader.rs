//! Any bytes a plugin returns as its manifest must be accepted or refused, never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = harness_loader::parse_manifest(text);
    }
});
