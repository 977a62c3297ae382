//! `-v`/`-vv` and `HARNESS_LOG`: diagnostics on stderr through `tracing`. Without either no
//! subscriber is installed, so the macros stay a cheap check and nothing new is written.
//! And `-q`, their opposite: no notices or warnings on stderr (errors always print).

use std::sync::atomic::{AtomicBool, Ordering};

use clap::{ArgAction, Args};
use tracing_subscriber::EnvFilter;

/// The variable that filters the diagnostics, as `RUST_LOG` does (`harness_providers=debug`).
const VARIABLE: &str = "HARNESS_LOG";

/// The crates whose diagnostics `-v` turns on; a dependency's own (hyper, rmcp) only by
/// `HARNESS_LOG`.
const OURS: [&str; 4] = ["harness", "harness_providers", "harness_loader", "harness_mcp"];

/// The `-v` flag, on every command (global), in both parsers of `main`.
#[derive(Debug, Clone, Args)]
pub(crate) struct LogArgs {
    /// Diagnostics on stderr: -v requests, retries, plugins and MCP servers; -vv also the bodies (keys redacted).
    #[arg(short, long, global = true, action = ArgAction::Count)]
    pub(crate) verbose: u8,
    /// No notices, warnings or progress on stderr; errors still print (run, batch: see their docs).
    #[arg(short, long, global = true, conflicts_with = "verbose")]
    pub(crate) quiet: bool,
}

/// `-q`, set once by [`init`] before any command runs: read wherever a notice is written,
/// rather than passed through every function between `main` and the notice.
static QUIET: AtomicBool = AtomicBool::new(false);

/// Whether `-q` was given: notices and warnings are not written.
pub(crate) fn quiet() -> bool {
    QUIET.load(Ordering::Relaxed)
}

/// `eprintln!` for a notice or a warning: silent under `-q`. Errors use `eprintln!` itself.
macro_rules! notice {
    ($($arg:tt)*) => {
        if !$crate::log::quiet() {
            eprintln!($($arg)*);
        }
    };
}
pub(crate) use notice;

/// The filter `-v` (counted `verbose` times) and `HARNESS_LOG` ask for, or `None` for none;
/// the variable's directives come after the flag's, so that they win where both name a crate.
fn filter(verbose: u8, variable: Option<&str>) -> Option<String> {
    let level = match verbose {
        0 => None,
        1 => Some("info"),
        _ => Some("debug"),
    };
    let mut directives: Vec<String> =
        level.map(|l| OURS.iter().map(|c| format!("{c}={l}")).collect()).unwrap_or_default();
    if let Some(v) = variable.map(str::trim).filter(|v| !v.is_empty()) {
        directives.push(v.to_owned());
    }
    (!directives.is_empty()).then(|| directives.join(","))
}

/// Installs the stderr subscriber when `-v` or `HARNESS_LOG` asks for one; a filter that does
/// not parse is the caller's usage error, named with the variable.
pub(crate) fn init(verbose: u8, quiet: bool) -> Result<(), String> {
    QUIET.store(quiet, Ordering::Relaxed);
    let variable = std::env::var(VARIABLE).ok();
    let Some(directives) = filter(verbose, variable.as_deref()) else { return Ok(()) };
    let filter = EnvFilter::builder().parse(&directives).map_err(|e| {
        format!(
            "{VARIABLE}={:?} is not a filter ({e}); write e.g. harness_providers=debug",
            variable.unwrap_or_default()
        )
    })?;
    tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(false).init();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::filter;

    #[test]
    fn nothing_asked_is_no_filter() {
        assert_eq!(filter(0, None), None);
        assert_eq!(filter(0, Some(" ")), None);
    }

    #[test]
    fn the_variable_comes_after_the_flag() {
        assert_eq!(filter(0, Some("harness_providers=debug")).as_deref(), Some("harness_providers=debug"));
        let both = filter(2, Some("harness_mcp=off")).unwrap_or_default();
        assert!(both.starts_with("harness=debug,"), "{both}");
        assert!(both.ends_with(",harness_mcp=off"), "{both}");
        assert!(filter(1, None).unwrap_or_default().contains("harness_loader=info"));
    }
}
