//! `-v`/`-vv` and `HARNESS_LOG`: diagnostics on stderr through `tracing`. Without either no
//! subscriber is installed, so the macros stay a cheap check and nothing new is written.

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
}

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
pub(crate) fn init(args: &LogArgs) -> Result<(), String> {
    let variable = std::env::var(VARIABLE).ok();
    let Some(directives) = filter(args.verbose, variable.as_deref()) else { return Ok(()) };
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
