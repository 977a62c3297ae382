//! Signed plugins through the binary: `plugins keygen` and `plugins sign` write minisign files,
//! a plugin signed by a trusted publisher is admitted and shown with its signer, and a
//! changed library, a key nobody trusts, and an unsigned plugin under `require_signed` are
//! refused naming the file; `plugins install` refuses a changed signed library.

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::support::{Scratch, plugin, ran};

/// A key pair made by `harness plugins keygen` in the scratch directory: the secret key's
/// path and the public key's base64 line.
fn keygen(s: &Scratch, name: &str) -> (PathBuf, String) {
    let secret = s.path(name);
    let r = ran(s.harness().args(["plugins", "keygen", "--out"]).arg(&secret));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let public = std::fs::read_to_string(s.path(&format!("{name}.pub"))).unwrap();
    let key = public.lines().nth(1).expect("a minisign .pub file has two lines").to_owned();
    assert!(r.stdout.contains(&key), "{}", r.stdout);
    (secret, key)
}

/// The calc plugin copied into the scratch plugin directory `dir`.
fn calc_in(s: &Scratch, dir: &str) -> PathBuf {
    let from = plugin("calc");
    let to = s.path(dir).join(from.file_name().unwrap());
    std::fs::create_dir_all(s.path(dir)).unwrap();
    std::fs::copy(&from, &to).unwrap();
    to
}

fn sign(s: &Scratch, library: &Path, key: &Path) {
    let r = ran(s.harness().args(["plugins", "sign"]).arg(library).arg("--key").arg(key));
    assert_eq!(r.code, 0, "{}", r.stderr);
}

/// Writes the user's configuration file (read without being trusted: it is the user's own).
fn user_config(s: &Scratch, text: &str) {
    s.write("xdg-config/harness/config.toml", text);
}

fn trust(s: &Scratch, name: &str, key: &str, require: bool) {
    user_config(
        s,
        &format!("[trust]\nrequire_signed = {require}\n\n[[trust.publishers]]\nname = \"{name}\"\nkey = \"{key}\"\n"),
    );
}

/// `plugins list` of the scratch `plugins` directory alone.
fn list(s: &Scratch, extra: &[&str]) -> crate::support::Ran {
    let r = ran(s
        .harness()
        .args(["plugins", "list", "--no-default-plugins", "--plugins-dir"])
        .arg(s.path("plugins"))
        .args(extra));
    assert_eq!(r.code, 0, "{}", r.stderr);
    r
}

/// The reason the file `file` was skipped for, from `plugins list --json`.
fn skipped(s: &Scratch, file: &Path) -> String {
    let listing = list(s, &["--json"]).json();
    assert!(listing["plugins"].as_array().unwrap().is_empty(), "{listing}");
    let entry = listing["skipped"].as_array().unwrap().iter().find(|e| e["path"] == json!(file)).cloned();
    entry.unwrap_or_else(|| panic!("{} is not skipped: {listing}", file.display()))["reason"]
        .as_str()
        .unwrap()
        .to_owned()
}

fn flip_last_byte(file: &Path) {
    let mut bytes = std::fs::read(file).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    std::fs::write(file, bytes).unwrap();
}

#[test]
fn a_plugin_signed_by_a_trusted_publisher_runs_and_is_listed_with_its_signer() {
    let s = Scratch::new();
    let (secret, key) = keygen(&s, "chem.key");
    let mode = std::fs::metadata(&secret).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "{mode:o}");
    assert!(std::fs::read_to_string(&secret).unwrap().starts_with("untrusted comment:"));
    let library = calc_in(&s, "plugins");
    sign(&s, &library, &secret);
    let signature = std::fs::read_to_string(s.path("plugins/libcalc.so.minisig")).unwrap();
    // minisign's format: two comment lines, each followed by its base64 line.
    let lines: Vec<&str> = signature.lines().collect();
    assert!(lines[0].starts_with("untrusted comment: ") && lines[2].starts_with("trusted comment: "), "{signature}");
    trust(&s, "chemistry team", &key, true);

    let library = library.canonicalize().unwrap();
    let listing = list(&s, &["--json"]).json();
    let calc = &listing["plugins"][0];
    assert_eq!((&calc["name"], &calc["signed_by"]), (&json!("calc"), &json!("chemistry team")), "{listing}");
    assert_eq!(calc["path"], json!(library));
    assert!(list(&s, &[]).stdout.contains("    signed by: chemistry team"));

    let script = s.script(&[
        json!({"tool": "calculate", "arguments": {"expression": "6*7"}}),
        json!({"tool": "finish", "arguments": {"answer": 42}}),
    ]);
    let r = ran(s
        .harness()
        .args(["run", "go", "--provider", "scripted", "--json", "--no-default-plugins", "--plugins-dir"])
        .arg(s.path("plugins"))
        .arg("--script")
        .arg(&script));
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let out: Value = r.json();
    assert_eq!(out["answer"], 42, "{out}");
}

#[test]
fn a_library_changed_after_signing_is_refused_naming_the_file() {
    let s = Scratch::new();
    let (secret, key) = keygen(&s, "k");
    let library = calc_in(&s, "plugins");
    sign(&s, &library, &secret);
    flip_last_byte(&library);
    // Refused even where signatures are not required: a bad signature is never a warning.
    trust(&s, "team", &key, false);
    let reason = skipped(&s, &library.canonicalize().unwrap());
    assert!(reason.contains("libcalc.so.minisig does not match the file"), "{reason}");
    assert!(reason.contains("\"team\"") && reason.contains("sign it again"), "{reason}");
    let text = list(&s, &[]).stdout;
    assert!(text.contains(&format!("skipped {}: its signature", library.canonicalize().unwrap().display())), "{text}");
}

#[test]
fn a_signature_by_a_key_nobody_trusts_is_refused() {
    let s = Scratch::new();
    let (_, trusted) = keygen(&s, "trusted.key");
    let (other, _) = keygen(&s, "other.key");
    let library = calc_in(&s, "plugins");
    sign(&s, &library, &other);
    trust(&s, "team", &trusted, false);
    let reason = skipped(&s, &library.canonicalize().unwrap());
    assert!(reason.contains("by a key that no trusted publisher holds"), "{reason}");
    assert!(reason.contains("[[trust.publishers]]"), "{reason}");
}

#[test]
fn a_malformed_signature_is_refused() {
    let s = Scratch::new();
    let library = calc_in(&s, "plugins");
    s.write("plugins/libcalc.so.minisig", "untrusted comment: x\nnot base64\n");
    let reason = skipped(&s, &library.canonicalize().unwrap());
    assert!(reason.contains("is not a minisign signature"), "{reason}");
}

#[test]
fn require_signed_refuses_an_unsigned_plugin_with_the_fix() {
    let s = Scratch::new();
    let (_, key) = keygen(&s, "k");
    let library = calc_in(&s, "plugins");
    trust(&s, "team", &key, true);
    let canonical = library.canonicalize().unwrap();
    let reason = skipped(&s, &canonical);
    assert!(reason.contains("it is not signed, and signatures are required"), "{reason}");
    assert!(reason.contains(&format!("harness plugins sign {} --key KEY", canonical.display())), "{reason}");
    // Without the requirement it loads, unsigned.
    trust(&s, "team", &key, false);
    let listing = list(&s, &["--json"]).json();
    assert_eq!(listing["plugins"][0]["signed_by"], Value::Null, "{listing}");
}

#[test]
fn install_verifies_the_signature_and_copies_it_beside_the_library() {
    let s = Scratch::new();
    let (secret, key) = keygen(&s, "k");
    trust(&s, "team", &key, false);
    let library = calc_in(&s, "downloads");
    sign(&s, &library, &secret);
    let installed = s.path("xdg-data/harness/plugins/libcalc.so");

    let tampered = calc_in(&s, "tampered");
    std::fs::copy(s.path("downloads/libcalc.so.minisig"), s.path("tampered/libcalc.so.minisig")).unwrap();
    flip_last_byte(&tampered);
    let r = ran(s.harness().args(["plugins", "install"]).arg(&tampered));
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains(&format!("{} is refused", tampered.display())), "{}", r.stderr);
    assert!(r.stderr.contains("does not match the file") && r.stderr.contains("nothing was installed"), "{}", r.stderr);
    assert!(!installed.exists());

    // calc is found beside the harness too: --force installs it anyway.
    let r = ran(s.harness().args(["plugins", "install", "--force"]).arg(&library));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains(", signed by team,"), "{}", r.stdout);
    let copied = std::fs::read(s.path("xdg-data/harness/plugins/libcalc.so.minisig")).unwrap();
    assert_eq!(copied, std::fs::read(s.path("downloads/libcalc.so.minisig")).unwrap());
    let r = ran(s
        .harness()
        .args(["plugins", "list", "--json", "--no-default-plugins", "--plugins-dir"])
        .arg(s.path("xdg-data/harness/plugins")));
    let listing = r.json();
    let calc = listing["plugins"].as_array().unwrap().iter().find(|p| p["name"] == "calc").cloned();
    assert_eq!(calc.expect("installed calc is found")["signed_by"], "team", "{listing}");
}

/// The plugin cache records a signature found good, so that a start-up that finds the same
/// file, the same signature and the same trusted key does not read the library again; a new
/// signature file, or a key no longer trusted, is checked again.
#[test]
fn the_plugin_cache_never_stands_in_for_a_changed_signature_or_a_key_no_longer_trusted() {
    let s = Scratch::new();
    let (secret, key) = keygen(&s, "k");
    let (other, _) = keygen(&s, "other.key");
    let library = calc_in(&s, "plugins");
    sign(&s, &library, &secret);
    trust(&s, "team", &key, false);
    for _ in 0..2 {
        let listing = list(&s, &["--json"]).json();
        assert_eq!(listing["plugins"][0]["signed_by"], "team", "{listing}");
    }
    let entries: Vec<String> = std::fs::read_dir(s.path("plugin-cache"))
        .unwrap()
        .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap())
        .collect();
    assert!(entries.iter().any(|e| e.contains("\"signature\":{")), "{entries:?}");
    let listing = list(&s, &["--json"]).json();
    assert_eq!(listing["plugins"][0]["from_cache"], true, "{listing}");

    // The library unchanged, its signature replaced by one of a key nobody trusts.
    sign(&s, &library, &other);
    let reason = skipped(&s, &library.canonicalize().unwrap());
    assert!(reason.contains("by a key that no trusted publisher holds"), "{reason}");

    // Signed again by the trusted key, then that key no longer trusted.
    sign(&s, &library, &secret);
    assert_eq!(list(&s, &["--json"]).json()["plugins"][0]["signed_by"], "team");
    let (_, unrelated) = keygen(&s, "unrelated.key");
    trust(&s, "someone else", &unrelated, false);
    let reason = skipped(&s, &library.canonicalize().unwrap());
    assert!(reason.contains("by a key that no trusted publisher holds"), "{reason}");
}

/// A project file that trusts a publisher, or turns the requirement off, says so when trusted:
/// both widen what loads.
#[test]
fn config_trust_lists_the_publishers_a_project_file_trusts() {
    let s = Scratch::new();
    let (_, key) = keygen(&s, "k");
    s.write(
        "harness.toml",
        &format!("[trust]\nrequire_signed = false\n\n[[trust.publishers]]\nname = \"chem team\"\nkey = \"{key}\"\n"),
    );
    let r = ran(s.harness().args(["config", "trust", "harness.toml"]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout.contains(&format!("trusts plugins signed by publisher \"chem team\" (key {key})")),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("loads unsigned plugins ([trust] require_signed = false)"), "{}", r.stdout);
    // A key that is not minisign's is an error naming the file and the publisher.
    s.write("bad.toml", "[[trust.publishers]]\nname = \"x\"\nkey = \"nope\"\n");
    let r = ran(s.harness().args(["plugins", "list", "--config", "bad.toml", "--no-default-plugins"]));
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains("bad.toml: [[trust.publishers]] publisher \"x\": its key is not a minisign public key"),
        "{}",
        r.stderr
    );
}

/// A secret key protected by a password is refused with the fix: signing never waits for a
/// prompt (minisign's prompt reads the terminal, not stdin, so it would hang a CI job).
#[test]
fn sign_refuses_a_password_protected_key_without_prompting() {
    use base64::Engine as _;
    let s = Scratch::new();
    let (secret, _) = keygen(&s, "k");
    let text = std::fs::read_to_string(&secret).unwrap();
    let engine = base64::engine::general_purpose::STANDARD;
    let mut bytes = engine.decode(text.lines().nth(1).unwrap()).unwrap();
    // The key's KDF algorithm: "Sc" (scrypt) is a password-protected key, as minisign -G writes.
    bytes[2..4].copy_from_slice(b"Sc");
    let locked = s.write("locked.key", &format!("untrusted comment: locked\n{}\n", engine.encode(bytes)));
    let library = calc_in(&s, "plugins");
    let r = ran(s.harness().args(["plugins", "sign"]).arg(&library).arg("--key").arg(&locked));
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains("is protected by a password") && r.stderr.contains("harness plugins keygen"),
        "{}",
        r.stderr
    );
    assert!(!s.path("plugins/libcalc.so.minisig").exists());
}

/// A plugin the configuration runs in-process, pinned by `harness.lock` to an earlier file:
/// unsigned, the new file falls back to a child; signed by a trusted publisher, it runs
/// in-process without a new lock.
#[test]
fn a_signed_upgrade_runs_in_process_without_a_new_lock() {
    let s = Scratch::new();
    let (secret, key) = keygen(&s, "k");
    let library = calc_in(&s, "plugins");
    s.write(
        "h.toml",
        &format!(
            "[plugins.calc]\nisolation = \"in-process\"\n\n[[trust.publishers]]\nname = \"team\"\nkey = \"{key}\"\n"
        ),
    );
    let lock = json!({"tools": {"calculate": {"source": "plugin calc 0.1.0",
        "library_sha256": "0".repeat(64), "definition_sha256": "x"}}});
    s.write("harness.lock", &lock.to_string());
    let placed = |s: &Scratch| {
        let listing = list(s, &["--json", "--config", "h.toml"]).json();
        let calc = listing["plugins"][0].clone();
        (calc["isolation"].as_str().unwrap().to_owned(), calc["placement"].clone())
    };
    let (isolation, placement) = placed(&s);
    assert_eq!((isolation.as_str(), &placement["kind"]), ("process", &json!("pin_mismatch")), "{placement}");
    sign(&s, &library, &secret);
    let (isolation, placement) = placed(&s);
    assert_eq!((isolation.as_str(), &placement["kind"]), ("in-process", &json!("signed_in_process")), "{placement}");
    assert!(placement["reason"].as_str().unwrap().contains("signed by trusted publisher \"team\""), "{placement}");
}
