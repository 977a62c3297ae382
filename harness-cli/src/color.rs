//! `--color auto|always|never`: for clap's own help and errors, and the harness's own
//! `harness: error:` prefix. `auto` colours a terminal unless `NO_COLOR` is set (no-color.org),
//! as clap does; a flag beats the variable.

use std::ffi::OsString;
use std::io::IsTerminal;

use clap::builder::styling::AnsiColor;
use clap::{Args, ColorChoice};

/// The `--color` flag, on every command (global), in both parsers of `main`.
#[derive(Debug, Clone, Args)]
pub(crate) struct ColorArgs {
    /// When to colour help and errors; auto: on a terminal, unless NO_COLOR is set.
    #[arg(long, global = true, value_enum, value_name = "WHEN", default_value_t = ColorChoice::Auto)]
    pub(crate) color: ColorChoice,
}

/// The choice the command line makes, read before it is parsed: clap colours its own help and
/// errors while it parses, so it must be told first. The last `--color` wins, as in clap;
/// nothing after `--` is a flag. A value clap would refuse leaves `auto`, and clap says so.
pub(crate) fn from_args(args: impl IntoIterator<Item = OsString>) -> ColorChoice {
    let mut choice = ColorChoice::Auto;
    let mut args = args.into_iter().skip(1);
    while let Some(arg) = args.next() {
        if arg == "--" {
            break;
        }
        let value = match arg.to_str() {
            Some("--color") => args.next(),
            Some(other) => other.strip_prefix("--color=").map(OsString::from),
            None => None,
        };
        choice = match value.as_ref().and_then(|v| v.to_str()) {
            Some("always") => ColorChoice::Always,
            Some("never") => ColorChoice::Never,
            Some("auto") => ColorChoice::Auto,
            _ => choice,
        };
    }
    choice
}

/// Whether stderr is coloured under `choice`: with `auto`, as clap's own output decides it
/// (`NO_COLOR` first, then `CLICOLOR_FORCE`, `CLICOLOR=0`, a terminal whose `TERM` is set and not `dumb`).
pub(crate) fn stderr_colored(choice: ColorChoice) -> bool {
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    match choice {
        ColorChoice::Always => true,
        ColorChoice::Never => false,
        ColorChoice::Auto => {
            if var("NO_COLOR").is_some() {
                false
            } else if var("CLICOLOR_FORCE").is_some_and(|v| v != "0") {
                true
            } else if var("CLICOLOR").is_some_and(|v| v == "0") {
                false
            } else {
                std::io::stderr().is_terminal() && var("TERM").is_some_and(|t| t != "dumb")
            }
        }
    }
}

/// The word `error` of `harness: error: ...`, red and bold when stderr is coloured.
pub(crate) fn error_word(colored: bool) -> String {
    let style = AnsiColor::Red.on_default().bold();
    if colored { format!("{style}error{style:#}") } else { "error".to_owned() }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn choice(args: &[&str]) -> ColorChoice {
        from_args(std::iter::once("harness").chain(args.iter().copied()).map(OsString::from))
    }

    #[test]
    fn the_last_color_flag_wins_and_nothing_after_a_double_dash_counts() {
        assert_eq!(choice(&["run", "x"]), ColorChoice::Auto);
        assert_eq!(choice(&["--color", "never", "run", "x"]), ColorChoice::Never);
        assert_eq!(choice(&["run", "--color=always", "x", "--color", "never"]), ColorChoice::Never);
        assert_eq!(choice(&["run", "--color=always", "--", "--color=never"]), ColorChoice::Always);
        assert_eq!(choice(&["run", "--color", "purple"]), ColorChoice::Auto);
    }

    #[test]
    fn the_error_word_is_styled_only_when_asked() {
        assert_eq!(error_word(false), "error");
        assert!(error_word(true).starts_with("\u{1b}[") && error_word(true).contains("error"));
        assert!(stderr_colored(ColorChoice::Always) && !stderr_colored(ColorChoice::Never));
    }
}
