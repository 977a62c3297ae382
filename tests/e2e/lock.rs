//! `harness lock` and `--locked`: a plugin file swapped for one whose tool reads differently is
//! refused with a field-by-field diff, and is a warning without `--locked`; the library a pin
//! vouches for is the one loaded, even with another renamed over it meanwhile.

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

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

/// Where `load-marker`'s constructor leaves a mark: a file named by the loading process's id,
/// holding the text its library carries (patched in the second library, below).
const MARKS: &str = "/tmp/harness-load-marker";
const MARK_TEXT: &[u8] = b"the library was loaded here\n";
const OTHER_TEXT: &[u8] = b"the OTHER library ran here!\n";

/// A copy of `from` whose constructor writes [`OTHER_TEXT`]: the same manifest, another file.
fn other_library(from: &Path, to: &Path) {
    let mut bytes = std::fs::read(from).unwrap();
    let at = bytes.windows(MARK_TEXT.len()).position(|w| w == MARK_TEXT).expect("the fixture's mark text");
    bytes[at..at + OTHER_TEXT.len()].copy_from_slice(OTHER_TEXT);
    std::fs::write(to, bytes).unwrap();
}

/// What the harness process `cmd` starts left as its mark (`None`: it loaded no library itself).
fn mark_of(cmd: &mut Command) -> Option<Vec<u8>> {
    let mut child = cmd.stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    let mark = Path::new(MARKS).join(child.id().to_string());
    child.wait().unwrap();
    let text = std::fs::read(&mark).ok();
    let _ = std::fs::remove_file(&mark);
    text
}

/// The pin and the load are one open: a process renaming two libraries with the same manifest
/// over the pinned file, as fast as it can, never gets the unpinned one loaded in the harness.
#[test]
fn a_library_flipped_over_the_pinned_file_is_never_the_one_loaded_in_process() {
    let s = Scratch::new();
    std::fs::create_dir_all(s.path("p")).unwrap();
    let pinned_file = s.path("p/libload_marker.so");
    std::fs::copy(fixture("load-marker"), s.path("pinned.so")).unwrap();
    other_library(&s.path("pinned.so"), &s.path("other.so"));
    std::fs::hard_link(s.path("pinned.so"), &pinned_file).unwrap();
    s.write("h.toml", "[plugins.load-marker]\nisolation = \"in-process\"\n");
    let base = ["--config", "h.toml", "--plugins-dir", "p", "--no-default-plugins"];
    let r = ran(s.harness().arg("lock").args(base));
    assert_eq!(r.code, 0, "{}", r.stderr);

    let stop = Arc::new(AtomicBool::new(false));
    let flipper = {
        let (stop, dir) = (Arc::clone(&stop), s.path(""));
        std::thread::spawn(move || {
            // Bounded in count, and stopped when the runs are done. Flips as fast as it can for
            // 200 ms, then none for 100 ms, over and over: a start-up within a quiet spell finds
            // the file unchanged from its listing to its load (each flip changes both files'
            // ctime, part of a file's identity), so that the pinned library is loaded now and
            // then and the test shows the pin holding, not only refusals; without the quiet
            // spells, on a loaded machine, no start-up saw one file throughout.
            let began = Instant::now();
            for i in 0..2_000_000u32 {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                if began.elapsed().as_millis() % 300 >= 200 {
                    std::thread::sleep(Duration::from_millis(5));
                    continue;
                }
                let (from, tmp) = if i % 2 == 0 { ("other.so", "flip-a") } else { ("pinned.so", "flip-b") };
                let _ = std::fs::remove_file(dir.join(tmp));
                if std::fs::hard_link(dir.join(from), dir.join(tmp)).is_ok() {
                    let _ = std::fs::rename(dir.join(tmp), dir.join("p/libload_marker.so"));
                }
            }
        })
    };
    let (mut pinned, mut other) = (0, 0);
    let deadline = Instant::now() + Duration::from_secs(90);
    // 120 start-ups, and on until one has loaded the pinned library (at most 400).
    for runs in 0..400 {
        if Instant::now() > deadline || (runs >= 120 && pinned > 0) {
            break;
        }
        match mark_of(s.harness().args(["plugins", "list", "--json"]).args(base)).as_deref() {
            Some(MARK_TEXT) => pinned += 1,
            Some(_) => other += 1,
            None => {}
        }
    }
    stop.store(true, Ordering::Relaxed);
    flipper.join().unwrap();
    assert_eq!(other, 0, "the unpinned library ran in the harness in {other} runs ({pinned} loaded the pinned one)");
    assert!(pinned > 0, "no run loaded the pinned library in-process: the test shows nothing");
}
