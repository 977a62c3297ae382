//! `cargo xtask fuzz`: every target of `fuzz/` for a fixed time, on the stable toolchain.
//!
//! cargo-fuzz is installed into the cache directory (outside the clone) the first time. CI has
//! stable Rust only: libFuzzer's instrumentation needs no sanitizer (`--sanitizer none`), and
//! the few unstable flags cargo-fuzz passes are let through by `RUSTC_BOOTSTRAP=1`.
//!
//! The build and each target's corpus are kept in the cache too (`fuzz/`), so that a fresh
//! clone rebuilds only the project's own crates (the instrumented release build of the 110
//! dependencies alone takes minutes, over CI's 3-minute budget) and each run starts from the
//! inputs earlier runs found. The input of a crash goes to the clone's `target/fuzz/`, and the
//! failure names it.

use std::process::Command;

use crate::{Context, cached_install, run};

/// The cargo-fuzz release installed.
const CARGO_FUZZ: &str = "0.13.2";

/// Each target and how long it runs, in seconds: the reply reader most (it reads every
/// model's text), the others less. About 100 s in all, within CI's 3 minutes with the build.
const TARGETS: &[(&str, u32)] = &[("reply_parser", 60), ("manifest_reader", 20), ("frame_decoder", 20)];

/// Runs `TARGET[=SECONDS]...` (all targets, at their own times, when none is named).
pub(crate) fn fuzz(context: &Context, rest: &[String]) -> Result<(), String> {
    let chosen = chosen(rest)?;
    let cargo_fuzz = cached_install(context, "cargo-fuzz", CARGO_FUZZ)?;
    let kept = context.cache.join("fuzz");
    let fuzz = |args: &[&str]| {
        let mut command = Command::new(&cargo_fuzz);
        command
            .current_dir(context.root.join("fuzz"))
            .arg("fuzz")
            .args(args)
            .args(["--sanitizer", "none", "--target-dir"])
            .arg(kept.join("target"))
            // The stable toolchain, with the unstable flags cargo-fuzz passes let through.
            .env("RUSTC_BOOTSTRAP", "1")
            .env_remove("RUSTUP_TOOLCHAIN");
        command
    };
    eprintln!("== cargo fuzz build (stable, --sanitizer none)");
    run(&mut fuzz(&["build"]))?;
    for (target, seconds) in chosen {
        let corpus = kept.join("corpus").join(&target);
        let artifacts = context.root.join("target/fuzz/artifacts").join(&target);
        for dir in [&corpus, &artifacts] {
            std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        }
        eprintln!("== fuzz {target} for {seconds} s");
        let mut command = fuzz(&["run", &target]);
        command
            .arg(&corpus)
            .arg("--")
            .arg(format!("-max_total_time={seconds}"))
            .arg(format!("-artifact_prefix={}/", artifacts.display()));
        run(&mut command).map_err(|e| {
            format!("{e}\nfuzz target {target} failed: the input that broke it is in {}", artifacts.display())
        })?;
    }
    Ok(())
}

/// The targets named (`reply_parser` or `reply_parser=30`), or all of them.
fn chosen(rest: &[String]) -> Result<Vec<(String, u32)>, String> {
    if rest.is_empty() {
        return Ok(TARGETS.iter().map(|(t, s)| ((*t).to_owned(), *s)).collect());
    }
    rest.iter()
        .map(|arg| {
            let (name, time) = arg.split_once('=').map_or((arg.as_str(), None), |(n, t)| (n, Some(t)));
            let Some((_, default)) = TARGETS.iter().find(|(t, _)| *t == name) else {
                let known: Vec<&str> = TARGETS.iter().map(|(t, _)| *t).collect();
                return Err(format!("no fuzz target named {name:?}; known: {}", known.join(", ")));
            };
            let seconds = match time {
                Some(t) => t.parse().map_err(|_| format!("{arg}: the time is whole seconds, as reply_parser=30"))?,
                None => *default,
            };
            Ok((name.to_owned(), seconds))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_are_chosen_by_name_with_their_own_time_or_one_given() {
        assert_eq!(chosen(&[]).unwrap().len(), TARGETS.len());
        let args = ["reply_parser=5".to_owned(), "frame_decoder".to_owned()];
        assert_eq!(chosen(&args).unwrap(), [("reply_parser".to_owned(), 5), ("frame_decoder".to_owned(), 20)]);
        assert!(chosen(&["nope".to_owned()]).unwrap_err().contains("known: reply_parser"));
        assert!(chosen(&["reply_parser=1m".to_owned()]).unwrap_err().contains("whole seconds"));
    }
}
