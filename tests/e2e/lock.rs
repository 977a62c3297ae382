//! `harness lock` and `--locked`: a plugin file swapped for one whose tool reads differently is
//! refused with a field-by-field diff, and is a warning without `--locked`.

use serde_json::json;

use crate::support::{Scratch, fixture, plugin, ran};

#[test]
fn a_swapped_plugin_is_refused_under_locked_with_the_diff() {
    let s = Scratch::new();
    std::fs::create_dir_all(s.path("p")).unwrap();
    let calc = s.path("p").join(plugin("calc").file_name().unwrap());
    std::fs::copy(plugin("calc"), &calc).unwrap();
    s.write("h.toml", "max_steps = 4\n");
    let base = ["--config", "h.toml", "--plugins-dir", "p", "--no-default-plugins"];
    let r = ran(s.harness().arg("lock").args(base));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("harness.lock: 1 tools"), "{}", r.stdout);
    let lock: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(s.path("harness.lock")).unwrap()).unwrap();
    assert_eq!(lock["tools"]["calculate"]["source"], json!(format!("plugin calc {}", env!("CARGO_PKG_VERSION"))));
    let script = s.script(&[json!({"tool": "finish", "arguments": {"answer": 1}})]);
    let r = ran(s.harness().args(["run", "x", "--locked", "--script"]).arg(&script).args(base));
    assert_eq!(r.code, 0, "{}", r.stderr);

    // Replaced as an operator would not notice: another library under the same file name.
    let tmp = s.path("p/new.tmp");
    std::fs::copy(fixture("clash"), &tmp).unwrap();
    std::fs::rename(&tmp, &calc).unwrap();
    let r = ran(s.harness().args(["run", "x", "--locked", "--script"]).arg(&script).args(base));
    assert_eq!(r.code, 2, "{}", r.stderr);
    // The lock file beside the configuration, named by its full path.
    let lock_file =
        format!("the offered tools do not match {}", s.path("harness.lock").canonicalize().unwrap().display());
    for needle in [
        lock_file.as_str(),
        "tool calculate: source was plugin calc",
        "is now plugin clash",
        "tool calculate: library_sha256 was",
        "tool calculate: definition_sha256 was",
        "tool clash_only: offered now",
        "run `harness lock` to accept it",
    ] {
        assert!(r.stderr.contains(needle), "{needle:?} not in {}", r.stderr);
    }
    let r = ran(s.harness().args(["run", "x", "--script"]).arg(&script).args(base));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stderr.contains("warning: the offered tools do not match"), "{}", r.stderr);
}
