//! Discovery and loading through the binary: skips with reasons, ABI refusal, duplicates,
//! enable/disable from flags and config.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::support::{ENFORCEMENT, ENFORCEMENT_GAPS, PLUGIN_VERSION, Scratch, bin_dir, fixture, plugin, ran, snapshot};

fn copy_into(s: &Scratch, dir: &str, from: &Path) -> PathBuf {
    let to = s.path(dir).join(from.file_name().unwrap());
    std::fs::create_dir_all(s.path(dir)).unwrap();
    std::fs::copy(from, &to).unwrap();
    to
}

fn list(s: &Scratch, extra: &[&str]) -> Value {
    let r = ran(s.harness().args(["plugins", "list", "--json", "--no-default-plugins"]).args(extra));
    assert_eq!(r.code, 0, "{}", r.stderr);
    r.json()
}

fn names(listing: &Value) -> Vec<String> {
    listing["plugins"].as_array().unwrap().iter().map(|p| p["name"].as_str().unwrap().to_owned()).collect()
}

fn reason_for<'a>(listing: &'a Value, file: &str) -> &'a str {
    listing["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["path"].as_str().unwrap().ends_with(file))
        .unwrap_or_else(|| panic!("{file} not skipped: {listing}"))["reason"]
        .as_str()
        .unwrap()
}

/// Any shared library that is not a plugin: a proc-macro library cargo built for us.
fn foreign_library() -> PathBuf {
    let deps = bin_dir().join("deps");
    std::fs::read_dir(&deps)
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            name.starts_with(&format!("{}serde_derive", std::env::consts::DLL_PREFIX))
                && name.ends_with(std::env::consts::DLL_SUFFIX)
        })
        .expect("serde_derive's proc-macro library is in target/debug/deps")
}

#[test]
fn a_real_plugin_loads_beside_three_broken_files_each_skipped_with_its_reason() {
    let s = Scratch::new();
    let dir = "mixed";
    copy_into(&s, dir, &plugin("calc"));
    let foreign = s.path(dir).join(format!("{}foreign{}", std::env::consts::DLL_PREFIX, std::env::consts::DLL_SUFFIX));
    std::fs::copy(foreign_library(), &foreign).unwrap();
    s.write(&format!("{dir}/libx{}", std::env::consts::DLL_SUFFIX), "I am only text.\n");
    let whole = std::fs::read(plugin("calc")).unwrap();
    std::fs::write(s.path(dir).join(format!("libtruncated{}", std::env::consts::DLL_SUFFIX)), &whole[..1000]).unwrap();
    s.write(&format!("{dir}/README.txt"), "not a library, not even tried");

    let l = list(&s, &["--plugins-dir", s.path(dir).to_str().unwrap()]);
    assert_eq!(names(&l), ["calc"]);
    assert_eq!(l["skipped"].as_array().unwrap().len(), 3, "{l}");
    assert!(reason_for(&l, "foreign.so").contains("not a harness plugin"), "{l}");
    assert!(reason_for(&l, "libx.so").contains("not a loadable shared library"), "{l}");
    assert!(reason_for(&l, "libtruncated.so").contains("not a loadable shared library"), "{l}");
    assert!(
        reason_for(&l, "libx.so").contains("too short") || reason_for(&l, "libx.so").contains("invalid ELF header"),
        "{l}"
    );

    // And a run with that directory still works with the plugin that loaded.
    let r = ran(s.harness().args(["run", "calculate 2+3", "--no-default-plugins", "--plugins-dir"]).arg(s.path(dir)));
    assert_eq!((r.code, r.stdout.as_str()), (0, "5\n"), "{}", r.stderr);
    assert!(r.stderr.contains("skipped") && r.stderr.contains("libx.so"), "{}", r.stderr);
}

#[test]
fn a_plugin_built_for_another_abi_major_is_refused_naming_both_versions() {
    let s = Scratch::new();
    copy_into(&s, "p", &fixture("abi-future"));
    copy_into(&s, "p", &plugin("calc"));
    let l = list(&s, &["--plugins-dir", s.path("p").to_str().unwrap()]);
    assert_eq!(names(&l), ["calc"]);
    let reason = reason_for(&l, "libabi_future.so");
    assert!(reason.contains("plugin ABI 2.0.0") && reason.contains("host ABI 1.0.0"), "{reason}");
}

#[test]
fn the_first_plugin_of_a_name_wins_and_one_file_reached_twice_loads_once() {
    let s = Scratch::new();
    let a = copy_into(&s, "a", &plugin("calc"));
    copy_into(&s, "b", &plugin("calc"));
    std::fs::create_dir_all(s.path("c")).unwrap();
    #[cfg(unix)]
    std::os::unix::fs::symlink(&a, s.path("c").join("liblinked.so")).unwrap();
    let dirs: Vec<String> = ["a", "b", "c"].iter().map(|d| s.path(d).to_string_lossy().into_owned()).collect();
    let l = list(&s, &["--plugins-dir", &dirs[0], "--plugins-dir", &dirs[1], "--plugins-dir", &dirs[2]]);
    assert_eq!(names(&l), ["calc"]);
    assert!(l["plugins"][0]["path"].as_str().unwrap().contains("/a/"), "{l}");
    let skipped = l["skipped"].as_array().unwrap();
    assert_eq!(skipped.len(), 1, "the link to the same file is not a second plugin: {l}");
    let reason = reason_for(&l, "/b/libcalc.so");
    assert!(reason.contains("already loaded from") && reason.contains("/a/libcalc.so"), "{reason}");
}

#[test]
fn a_tool_name_offered_twice_goes_to_the_first_plugin() {
    let s = Scratch::new();
    copy_into(&s, "p", &plugin("calc"));
    copy_into(&s, "q", &fixture("clash"));
    let (p, q) = (s.path("p"), s.path("q"));
    let l = list(&s, &["--plugins-dir", p.to_str().unwrap(), "--plugins-dir", q.to_str().unwrap()]);
    assert_eq!(names(&l), ["calc", "clash"]);
    let clash_tools = &l["plugins"][1]["tools"];
    assert_eq!(clash_tools[0]["name"], "calculate");
    assert_eq!(clash_tools[0]["state"], json!({"kind": "name_taken", "by": "calc"}));
    assert_eq!(clash_tools[1]["state"]["kind"], "offered");
    assert!(l["warnings"][0].as_str().unwrap().contains("plugin \"calc\" already offers"), "{l}");

    let script = s.script(&[
        json!({"tool": "calculate", "arguments": {"expression": "2*21"}}),
        json!({"tool": "finish", "arguments": {"answer": 1}}),
    ]);
    let r = ran(s
        .harness()
        .args(["run", "x", "--no-default-plugins", "--trace", "t.jsonl", "--plugins-dir"])
        .arg(&p)
        .arg("--plugins-dir")
        .arg(&q)
        .arg("--script")
        .arg(&script));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(s.trace("t.jsonl")[0]["plugin"], "calc");
    assert_eq!(s.trace("t.jsonl")[0]["result"], 42);
}

fn offered(l: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for p in l["plugins"].as_array().unwrap() {
        for t in p["tools"].as_array().unwrap() {
            if t["state"]["kind"] == "offered" {
                out.push(format!("{}.{}", p["name"].as_str().unwrap(), t["name"].as_str().unwrap()));
            }
        }
    }
    out
}

#[test]
fn enable_disable_and_deny_effects_from_flags_and_config() {
    let s = Scratch::new();
    for p in ["calc", "files", "fault"] {
        copy_into(&s, "p", &plugin(p));
    }
    let dir = s.path("p").to_string_lossy().into_owned();
    s.write("data/a.txt", "a");
    s.write("root.toml", "[plugins.files]\nroot = \"data\"\n");
    let base = ["--plugins-dir", dir.as_str(), "--config", "root.toml"];
    let l = list(&s, &base);
    assert_eq!(offered(&l), ["calc.calculate", "files.read_file", "files.list_dir", "files.write_file"]);

    let with = |extra: &[&str]| offered(&list(&s, &[&base[..], extra].concat()));
    assert_eq!(with(&["--disable", "files"]), ["calc.calculate"]);
    assert_eq!(with(&["--disable", "files.read_file"]), ["calc.calculate", "files.list_dir", "files.write_file"]);
    assert_eq!(with(&["--enable", "calc"]), ["calc.calculate"]);
    assert_eq!(with(&["--enable", "fault.fault_echo", "--enable", "calc"]), ["calc.calculate", "fault.fault_echo"]);
    assert_eq!(with(&["--deny-effects", "reads"]), ["calc.calculate", "files.write_file"]);

    // Without a root the files plugin declines, in a child or in process: it offers nothing,
    // is not skipped as broken, and the listing says what it needs.
    s.write("in.toml", "[plugins.files]\nisolation = \"in-process\"\n");
    for config in [&[][..], &["--config", "in.toml"][..]] {
        let l = list(&s, &[&["--plugins-dir", dir.as_str()][..], config].concat());
        assert_eq!(offered(&l), ["calc.calculate"]);
        assert_eq!(l["skipped"], json!([]), "{l}");
        let files = l["plugins"].as_array().unwrap().iter().find(|p| p["name"] == "files").unwrap();
        let needs = json!({"kind": "needs_configuration", "needs": "[plugins.files] root"});
        assert!(files["tools"].as_array().unwrap().iter().all(|t| t["state"] == needs), "{files}");
    }
    // The table's wording of that state is in the plugins-list snapshot.

    s.write(
        "h.toml",
        "[plugins]\ndisable = [\"calc\"]\ndeny_effects = [\"reads\"]\nenable = [\"calc\", \"files\", \"fault\"]\n",
    );
    let from_config = offered(&list(&s, &["--plugins-dir", dir.as_str(), "--config", "h.toml"]));
    assert!(from_config.iter().all(|t| t.starts_with("fault.")), "{from_config:?}");
    assert_eq!(from_config.len(), 8);

    let l = list(&s, &[&base[..], &["--disable", "nosuch"]].concat());
    assert!(l["warnings"].to_string().contains("nosuch"), "{l}");
}

#[test]
fn a_failing_init_skips_the_plugin_with_its_message() {
    let s = Scratch::new();
    copy_into(&s, "p", &plugin("files"));
    copy_into(&s, "p", &plugin("calc"));
    s.write("h.toml", "[plugins.files]\nroot = \"/no/such/root\"\ncolour = \"blue\"\n");
    let l = list(&s, &["--plugins-dir", s.path("p").to_str().unwrap(), "--config", "h.toml"]);
    assert_eq!(names(&l), ["calc"]);
    let reason = reason_for(&l, "libfiles.so");
    assert!(reason.contains("init failed") && reason.contains("colour"), "{reason}");
}

#[test]
fn plugin_path_env_and_config_dirs_are_searched() {
    let s = Scratch::new();
    copy_into(&s, "env", &plugin("calc"));
    copy_into(&s, "conf", &plugin("files"));
    s.write("h.toml", "[plugins]\ndirs = [\"conf\"]\n[plugins.files]\nroot = \"data\"\n");
    std::fs::create_dir_all(s.path("data")).unwrap();
    let r = ran(s
        .harness()
        .args(["plugins", "list", "--json", "--no-default-plugins", "--config", "h.toml"])
        .env("HARNESS_PLUGIN_PATH", s.path("env")));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(names(&r.json()), ["calc", "files"]);
}

#[test]
fn inspect_shows_schemas_by_name_and_by_file() {
    let s = Scratch::new();
    let r = ran(s.harness().args(["plugins", "inspect", "calc", "--json"]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let v = r.json();
    assert_eq!(v["name"], "calc");
    assert_eq!(v["tools"][0]["parameters"]["required"], json!(["expression"]));
    let examples = v["tools"][0]["examples"].as_array().unwrap();
    let percent = examples.iter().find(|e| e["arguments"] == json!({"expression": "17/100*2340"})).unwrap();
    assert_eq!(percent["result"], 397.8);
    // A worked example shows the request it answers.
    assert_eq!(examples[0]["request"], "What is 7 times 8?", "{v}");
    assert_eq!((&examples[0]["arguments"], &examples[0]["result"]), (&json!({"expression": "7*8"}), &json!(56)));
    assert!(v["tools"][0]["description"].as_str().unwrap().contains("true division"), "{v}");
    let r = ran(s.harness().args(["plugins", "inspect"]).arg(plugin("files")));
    assert_eq!(r.code, 0, "{}", r.stderr);
    snapshot("plugins-inspect-files", &s, &r.stdout, &[(r"files \d+\.\d+\.\d+:", "files [version]:")]);
    let r = ran(s.harness().args(["plugins", "inspect", "nosuch"]));
    assert_eq!(r.code, 1);
    assert!(r.stderr.starts_with("harness: error: ") && r.stderr.contains("\"nosuch\""), "{}", r.stderr);
}

/// The table a person reads: each plugin with its version, ABI and file, where it runs and how
/// it is confined, what it may see, each tool's effect and state, and each refused file with
/// the reason. Compared whole; the plugins' own version and what this kernel can enforce are
/// redacted.
#[test]
fn list_shows_a_readable_table() {
    let s = Scratch::new();
    for name in ["calc", "files", "fault"] {
        copy_into(&s, "p", &plugin(name));
    }
    copy_into(&s, "p", &fixture("abi-future"));
    let r = ran(s.harness().args(["plugins", "list", "--no-default-plugins", "--plugins-dir"]).arg(s.path("p")));
    assert_eq!(r.code, 0, "{}", r.stderr);
    snapshot("plugins-list", &s, &r.stdout, &[PLUGIN_VERSION, ENFORCEMENT, ENFORCEMENT_GAPS]);
}

#[test]
fn truncated_plugins_are_refused_at_every_length_never_crashing_the_host() {
    // glibc's loader dies of SIGBUS on a file cut inside a loadable segment; the header check
    // must refuse such files first.
    let s = Scratch::new();
    let whole = std::fs::read(plugin("calc")).unwrap();
    for len in [0, 16, 64, 1000, 4096, 100_000] {
        std::fs::create_dir_all(s.path("t")).unwrap();
        std::fs::write(s.path("t").join("libcut.so"), &whole[..len.min(whole.len())]).unwrap();
        let r = ran(s
            .harness()
            .args(["plugins", "list", "--json", "--no-default-plugins", "--plugins-dir"])
            .arg(s.path("t")));
        assert_eq!(r.code, 0, "length {len}: {}", r.stderr);
        let l = r.json();
        let reason = reason_for(&l, "libcut.so");
        assert!(reason.contains("not a loadable shared library"), "length {len}: {reason}");
    }
}
