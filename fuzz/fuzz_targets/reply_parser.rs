//! Any model text, and any structured arguments string, must parse or fail cleanly.
#![no_main]

use harness_core::{ModelReply, ProposedCall, parse_reply};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data).into_owned();
    let _ = parse_reply(&ModelReply { text: Some(text.clone()), ..Default::default() }, 1, None);
    let _ = parse_reply(&ModelReply { text: Some(text.clone()), ..Default::default() }, 1, Some("finish"));
    let call = ProposedCall { id: None, name: "t".into(), arguments: serde_json::Value::String(text).into() };
    let _ = parse_reply(&ModelReply { calls: vec![call], ..Default::default() }, 1, None);
});
