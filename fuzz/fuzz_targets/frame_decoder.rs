//! Any bytes on a plugin-host pipe must decode or be refused, never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = harness_frames::decode_request(data, 1 << 20);
    let _ = harness_frames::decode_response(data, 1 << 20);
});
