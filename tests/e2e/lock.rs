//! `harness lock` and `--locked`: a plugin file swapped for one whose tool reads differently is
//! refused with a field-by-field diff, and is a warning without `--locked`.

use serde_json::json;

use crate::support::{Scratch, fixture, plugin, ran, snapshot};

/// [`snapshot`] filters for the lock's hashes and the plugins' version.
const LOCK_FILTERS: [(&str, &str); 2] =
    [(r"[0-9a-f]{64}", "[sha256]"), (r"(plugin \w+) \d+\.\d+\.\d+", "$1 [version]")];

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
    snapshot("lock-written", &s, &r.stdout, &LOCK_FILTERS);
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
    // The lock file beside the configuration, named by its full path, and the diff field by field.
    r.usage_error(&["harness.lock", "harness lock"]);
    snapshot("lock-refuses-a-swapped-plugin", &s, &r.stderr, &LOCK_FILTERS);
    let r = ran(s.harness().args(["run", "x", "--script"]).arg(&script).args(base));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let warnings: Vec<&str> = r.stderr.lines().filter(|l| !l.starts_with("harness: step ")).collect();
    snapshot("lock-warns-of-a-swapped-plugin", &s, &warnings.join("\n"), &LOCK_FILTERS);
}
