//! `--color auto|always|never`: for clap's own help and errors, and the harness's own
//! `harness: error:` prefix. `auto` colours a terminal unless `NO_COLOR` is set (no-color.org),
//! as clap does; a flag beats the variable.

use std::ffi::OsString;

use anstyle::{AnsiColor, Style};
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

/// Makes `choice` the one of every `anstream` writer of this process (`harness: error:`
/// among them). `auto` is anstream's: `NO_COLOR`, then `CLICOLOR_FORCE` and `CLICOLOR`, then a
/// terminal that takes colour; on Windows it turns on the console's escape sequences too.
pub(crate) fn apply(choice: ColorChoice) {
    let choice = match choice {
        ColorChoice::Always => anstream::ColorChoice::Always,
        ColorChoice::Never => anstream::ColorChoice::Never,
        ColorChoice::Auto => anstream::ColorChoice::Auto,
    };
    choice.write_global();
}

/// The style of the word `error` in `harness: error: ...`; an `anstream` writer drops it where
/// colour is off.
pub(crate) const ERROR: Style = AnsiColor::Red.on_default().bold();

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
    fn the_error_word_is_styled_and_the_stream_drops_the_style_where_colour_is_off() {
        let styled = format!("{ERROR}error{ERROR:#}");
        assert!(styled.starts_with("\u{1b}[") && styled.contains("error"), "{styled:?}");
        let mut plain = anstream::AutoStream::new(Vec::new(), anstream::ColorChoice::Never);
        std::io::Write::write_all(&mut plain, styled.as_bytes()).unwrap();
        assert_eq!(plain.into_inner(), b"error");
    }
}
