//! The harness's OAuth client (client credentials of a pre-registered client), against a
//! hand-written server that is its own authorization server (tests/mcp/oauth_server.py):
//! where the conformance suite does not look, at the token at rest and in the trace, at a
//! token kept for the next run, and at a 403 `insufficient_scope`.

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};

use serde_json::json;

use super::fixture;
use crate::support::{Ran, Scratch, ran};

/// The OAuth-protected server, in one of its modes.
struct Protected {
    child: Child,
    url: String,
}

impl Protected {
    fn start(mode: &str) -> Self {
        let mut child = Command::new("python3")
            .arg(fixture("oauth_server.py"))
            .arg(mode)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("python3 runs the OAuth server");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("piped stdout")).read_line(&mut line).expect("its port");
        let port = line.trim().strip_prefix("PORT ").unwrap_or_else(|| panic!("not a port line: {line:?}"));
        Self { child, url: format!("http://127.0.0.1:{port}/mcp") }
    }

    /// Its log, once stopped: `GRANTED <token> ...` and `METHOD <name> TOKEN <token>` lines.
    fn log(mut self) -> String {
        let _ = self.child.kill();
        let mut log = String::new();
        let _ = self.child.stderr.take().expect("piped stderr").read_to_string(&mut log);
        log
    }
}

impl Drop for Protected {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The tokens the server granted, in order.
fn granted(log: &str) -> Vec<&str> {
    log.lines().filter_map(|l| l.strip_prefix("GRANTED ")).filter_map(|l| l.split(' ').next()).collect()
}

/// A run that calls `hello` then finishes, with the pre-registered client (`method`: its
/// token endpoint auth method, if one is named) and its secret in `E2E_CLIENT_SECRET`.
fn run(s: &Scratch, url: &str, method: Option<&str>) -> Ran {
    let method = method.map(|m| format!("token_endpoint_auth_method = {m:?}\n")).unwrap_or_default();
    s.write(
        "harness.toml",
        &format!(
            "[[mcp.servers]]\nname = \"protected\"\nurl = {url:?}\ntimeout = 30\n\n[mcp.servers.oauth]\nclient_id = \"harness-e2e\"\nclient_secret_env = \"E2E_CLIENT_SECRET\"\n{method}"
        ),
    );
    let script = s.script(&[
        json!({"tool": "hello", "arguments": {}}),
        json!({"tool": "finish", "arguments": {"answer": "done"}}),
    ]);
    let args = ["run", "x", "--config", "harness.toml", "--allow", "network", "--json", "--trace", "t.jsonl"];
    ran(s.harness().env("E2E_CLIENT_SECRET", "e2e-client-secret").args(args).arg("--script").arg(&script))
}

/// The token files under the scratch directory's cache.
fn token_files(s: &Scratch) -> Vec<std::path::PathBuf> {
    let dir = s.path("xdg-cache/harness/mcp-oauth");
    std::fs::read_dir(&dir).map(|d| d.flatten().map(|e| e.path()).collect()).unwrap_or_default()
}

#[cfg(unix)]
#[test]
fn a_granted_token_is_sent_kept_in_a_0600_file_reused_and_never_traced() {
    use std::os::unix::fs::PermissionsExt;
    let server = Protected::start("plain");
    let s = Scratch::new();
    let first = run(&s, &server.url, None);
    assert_eq!(first.code, 0, "{}", first.stderr);
    assert_eq!(s.trace("t.jsonl")[0]["result"], json!("hi"), "{}", first.stderr);
    // A second run finds the token in its file: no new grant.
    let second = run(&s, &server.url, None);
    assert_eq!(second.code, 0, "{}", second.stderr);
    assert_eq!(s.trace("t.jsonl")[0]["result"], json!("hi"), "{}", second.stderr);
    let listed = ran(s.harness().env("E2E_CLIENT_SECRET", "e2e-client-secret").args([
        "plugins",
        "list",
        "--config",
        "harness.toml",
        "--json",
    ]));
    let listing = &listed.json()["mcp_servers"][0];
    assert_eq!((&listing["oauth_client"], &listing["failure"]), (&json!("harness-e2e"), &json!(null)), "{listing}");
    let files = token_files(&s);
    assert_eq!(files.len(), 1, "{files:?}");
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&files[0]), 0o600);
    assert_eq!(mode(files[0].parent().unwrap()), 0o700);
    let kept = std::fs::read_to_string(&files[0]).unwrap();
    let trace = std::fs::read_to_string(s.path("t.jsonl")).unwrap();

    // A token file others can read is not trusted: a new token is granted and the file replaced.
    std::fs::set_permissions(&files[0], std::fs::Permissions::from_mode(0o644)).unwrap();
    let third = run(&s, &server.url, Some("client_secret_post"));
    assert_eq!(third.code, 0, "{}", third.stderr);
    assert_eq!(token_files(&s), files);
    assert_eq!(mode(&files[0]), 0o600);

    let log = server.log();
    let tokens = granted(&log);
    assert_eq!(tokens.len(), 2, "one grant for the first two runs, one for the third: {log}");
    let auth: Vec<&str> =
        log.lines().filter(|l| l.starts_with("GRANTED ")).filter_map(|l| l.split(" AUTH ").nth(1)).collect();
    assert!(
        auth[0].starts_with("basic") && auth[1].starts_with("post"),
        "the default, then the configured method: {log}"
    );
    assert!(log.contains(&format!("METHOD tools/call TOKEN {}", tokens[0])), "{log}");
    assert!(kept.contains(tokens[0]), "{kept}");
    // Neither the token nor the secret is anywhere the run writes.
    for said in [&trace, &first.stdout, &first.stderr, &second.stdout, &second.stderr, &listed.stdout] {
        assert!(!said.contains(tokens[0]) && !said.contains("e2e-client-secret"), "{said}");
    }

    // `config trust` says who the harness authorizes as, and with what, never the secret.
    let trust = ran(s.harness().args(["config", "trust", "harness.toml"]));
    let said = trust.stdout + &trust.stderr;
    assert!(
        said.contains("getting OAuth tokens as client harness-e2e with its secret from $E2E_CLIENT_SECRET"),
        "{said}"
    );
}

#[test]
fn insufficient_scope_gets_one_larger_token_and_no_more() {
    let server = Protected::start("step-up");
    let s = Scratch::new();
    let r = run(&s, &server.url, None);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(s.trace("t.jsonl")[0]["result"], json!("hi"), "{}", r.stderr);
    let log = server.log();
    let scopes: Vec<&str> =
        log.lines().filter(|l| l.starts_with("GRANTED ")).filter_map(|l| l.split(" SCOPE ").nth(1)).collect();
    assert_eq!(scopes.len(), 2, "{log}");
    assert!(scopes[0].starts_with("tools:read AUTH"), "the resource's scopes_supported first: {log}");
    assert!(scopes[1].starts_with("tools:read tools:call AUTH"), "then the union with the challenge's: {log}");

    let server = Protected::start("always-more");
    let s = Scratch::new();
    let r = run(&s, &server.url, None);
    let t = s.trace("t.jsonl");
    assert_ne!(t[0]["status"], json!("ok"), "{}", t[0]);
    assert!(t[0].to_string().contains("insufficient scope again"), "{}", t[0]);
    let log = server.log();
    assert_eq!(granted(&log).len(), 2, "one step-up, not a loop: {log}\n{}", r.stderr);
}

#[test]
fn an_authorization_server_without_client_credentials_is_refused_with_the_alternative() {
    let server = Protected::start("code-only");
    let s = Scratch::new();
    let r = run(&s, &server.url, None);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let warning = r
        .stderr
        .lines()
        .find(|l| l.contains("MCP server \"protected\" did not start"))
        .unwrap_or_else(|| panic!("{}", r.stderr));
    assert!(
        warning.contains("does not offer the client credentials grant (its grant_types_supported: authorization_code)"),
        "{warning}"
    );
    assert!(
        warning.contains("interactive flows (a browser) are not supported")
            && warning.contains("Authorization = \"Bearer ${TOKEN}\""),
        "{warning}"
    );
    assert!(granted(&server.log()).is_empty());
}

#[test]
fn a_resource_that_is_another_server_gets_no_token_and_a_missing_secret_is_named() {
    let server = Protected::start("mismatch");
    let s = Scratch::new();
    let r = run(&s, &server.url, None);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stderr.contains("is for resource \"https://elsewhere.example/mcp\", not for"), "{}", r.stderr);
    assert!(granted(&server.log()).is_empty());

    let r = ran(s.harness().env_remove("E2E_CLIENT_SECRET").args([
        "run",
        "x",
        "--config",
        "harness.toml",
        "--allow",
        "network",
        "--script",
        "script.jsonl",
    ]));
    assert!(r.stderr.contains("oauth.client_secret_env names $E2E_CLIENT_SECRET, which is not set"), "{}", r.stderr);
}

#[test]
fn an_expired_token_is_fetched_again_before_it_is_sent() {
    let server = Protected::start("short");
    let s = Scratch::new();
    let r = run(&s, &server.url, None);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(s.trace("t.jsonl")[0]["result"], json!("hi"), "{}", r.stderr);
    let log = server.log();
    // Only the very first request goes without a token (its 401 starts discovery); after it,
    // every request carries a new token rather than an expired one or none.
    let bare = log.lines().filter(|l| l.starts_with("METHOD ") && l.ends_with(" TOKEN -")).count();
    assert_eq!(bare, 1, "{log}");
    assert!(granted(&log).len() > 2, "{log}");
}
