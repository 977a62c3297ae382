//! Any model text, read as any call format, cut or not, must read or fail cleanly: no panic,
//! and a reply with no call always says why.
#![no_main]

use harness_reply::{ReadOptions, ReplyFormat, read_reply};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else { return };
    let text = String::from_utf8_lossy(rest);
    let format = ReplyFormat::ALL[usize::from(selector) % ReplyFormat::ALL.len()];
    let truncated = selector & 0x80 != 0;
    for forced in [None, Some("finish")] {
        let options: ReadOptions = ReadOptions { format, truncated, tools: &[], forced };
        let read = read_reply(&text, &options);
        assert!(read.format != ReplyFormat::Auto);
        assert!(!read.calls.is_empty() || read.error.is_some());
    }
});
