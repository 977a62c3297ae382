//! `-v`/`-vv` and `HARNESS_LOG` through the binary: the provider's request and reply lines
//! against a stand-in on 127.0.0.1, the filter, and the API key kept out of every line.

use serde_json::json;

use crate::providers::{Api, KEY, call, harness};
use crate::support::{Scratch, ran};

/// Two replies: a calculation, then `finish`.
fn two_steps() -> Api {
    Api::serve(vec![
        call("call_1", "calculate", json!({"expression": "6*7"})),
        call("call_2", "finish", json!({"answer": 42})),
    ])
}

#[test]
fn v_shows_each_request_and_its_reply_and_never_the_key() {
    let s = Scratch::new();
    let api = two_steps();
    let r = ran(harness(&s, &api, "what is 6*7").arg("-v"));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let url = format!("POST {}/chat/completions mode=native bytes=", api.base_url);
    assert_eq!(r.stderr.matches(&url).count(), 2, "{}", r.stderr);
    assert_eq!(r.stderr.matches("reply ok tokens_in=10 tokens_out=3 in ").count(), 2, "{}", r.stderr);
    // Plugin discovery: each file loaded, with its isolation.
    assert!(r.stderr.contains(": loaded calc "), "{}", r.stderr);
    // Bodies are for -vv alone.
    assert!(!r.stderr.contains("request body:"), "{}", r.stderr);
    assert!(!r.stderr.contains(KEY), "the key leaked:\n{}", r.stderr);
}

#[test]
fn vv_shows_the_bodies_with_the_key_cut_out_and_never_a_header() {
    let s = Scratch::new();
    let api = two_steps();
    // The key in the request itself: the body that carries it is logged with it redacted.
    let r = ran(harness(&s, &api, &format!("what is 6*7? my key is {KEY}")).arg("-vv"));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stderr.contains("request body: {"), "{}", r.stderr);
    assert!(r.stderr.contains("reply body: {"), "{}", r.stderr);
    assert!(r.stderr.contains("my key is [redacted]"), "{}", r.stderr);
    assert!(!r.stderr.contains(KEY), "the key leaked:\n{}", r.stderr);
    assert!(!r.stderr.to_ascii_lowercase().contains("bearer"), "a header was logged:\n{}", r.stderr);
}

#[test]
fn harness_log_filters_by_crate() {
    let s = Scratch::new();
    let api = two_steps();
    let r = ran(harness(&s, &api, "what is 6*7").env("HARNESS_LOG", "harness_loader=info"));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stderr.contains(": loaded calc "), "{}", r.stderr);
    assert!(!r.stderr.contains("POST "), "the providers' lines were not asked for:\n{}", r.stderr);

    let api = two_steps();
    let r = ran(harness(&s, &api, "what is 6*7").env("HARNESS_LOG", "harness_providers=debug"));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stderr.contains("request body: {"), "{}", r.stderr);
    assert!(!r.stderr.contains(": loaded calc "), "the loader's lines were not asked for:\n{}", r.stderr);
}

#[test]
fn without_v_or_harness_log_nothing_is_logged_and_a_bad_filter_is_a_usage_error() {
    let s = Scratch::new();
    let api = two_steps();
    let r = ran(&mut harness(&s, &api, "what is 6*7"));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(!r.stderr.contains("POST ") && !r.stderr.contains("harness_"), "{}", r.stderr);

    let r = ran(s.harness().args(["plugins", "list"]).env("HARNESS_LOG", "harness_providers=loud"));
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("HARNESS_LOG=\"harness_providers=loud\" is not a filter"), "{}", r.stderr);
}

#[test]
fn q_silences_a_warning_on_any_command_but_never_an_error() {
    let s = Scratch::new();
    let warned = "harness: warning: HARNESS_MODLE is no setting of the harness";
    let r = ran(s.harness().args(["plugins", "list"]).env("HARNESS_MODLE", "x"));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stderr.contains(warned), "{}", r.stderr);
    // Before or after the command's name: -q is global.
    for args in [["-q", "plugins", "list"], ["plugins", "list", "-q"]] {
        let r = ran(s.harness().args(args).env("HARNESS_MODLE", "x"));
        assert_eq!((r.code, r.stderr.as_str()), (0, ""), "{args:?}");
        assert!(r.stdout.contains("calc"), "{}", r.stdout);
    }
    let r = ran(s.harness().args(["plugins", "list", "-q", "--config", "missing.toml"]).env("HARNESS_MODLE", "x"));
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("harness: error: cannot read config file missing.toml"), "{}", r.stderr);
    assert!(!r.stderr.contains(warned), "{}", r.stderr);
}

#[test]
fn q_and_v_together_are_a_usage_error() {
    let s = Scratch::new();
    let r = ran(s.harness().args(["plugins", "list", "-q", "-v"]));
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("'--quiet' cannot be used with '--verbose"), "{}", r.stderr);
}

#[test]
fn v_shows_a_retry_with_its_reason_and_wait() {
    let s = Scratch::new();
    let api = Api::serve(vec![
        (503, json!({"error": {"message": format!("overloaded, key {KEY}")}})),
        call("call_1", "finish", json!({"answer": 42})),
    ]);
    let r = ran(harness(&s, &api, "what is 6*7").arg("-v"));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let retry = r.stderr.lines().find(|l| l.contains("INFO harness_providers: retry 1/")).unwrap_or_default();
    assert!(retry.contains(" ms") && retry.contains("503"), "{}", r.stderr);
    assert!(r.stderr.contains("reply failed in "), "{}", r.stderr);
    assert!(!r.stderr.contains(KEY), "the key leaked:\n{}", r.stderr);
}

#[test]
fn vv_shows_the_frames_to_and_from_a_plugin_host_and_v_does_not() {
    let s = Scratch::new();
    let call = ["tools", "call", "calculate", r#"{"expression": "6*7"}"#, "--isolation", "process"];
    let r = ran(s.harness().args(call).arg("-vv"));
    assert_eq!((r.code, r.stdout.as_str()), (0, "42\n"), "{}", r.stderr);
    assert!(r.stderr.contains("plugin-host frame out: call, "), "{}", r.stderr);
    assert!(r.stderr.contains("plugin-host frame in: ok, "), "{}", r.stderr);
    assert!(r.stderr.contains("(isolation process, "), "{}", r.stderr);
    let r = ran(s.harness().args(call).arg("-v"));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(!r.stderr.contains("plugin-host frame"), "{}", r.stderr);
}
