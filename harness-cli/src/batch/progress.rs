//! What the batch says while it runs (a bar on a terminal, plain lines elsewhere) and the
//! summary at its end.

use std::fmt::Write as _;
use std::io::IsTerminal;
use std::time::{Duration, Instant};

use harness_batch::{Observer, Tally};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// How progress is shown.
enum Shown {
    /// A bar redrawn in place, on a terminal.
    Bar(ProgressBar),
    /// A plain line every so often, for logs.
    Lines { every: Duration, last: Instant },
    /// Nothing (`--quiet`).
    Quiet,
}

/// What a batch (or an eval) shows of its runs on stderr while it makes them: not `harness
/// run`'s progress lines, which a trace sink in run.rs writes step by step.
pub(crate) struct BatchProgress {
    shown: Shown,
    total: usize,
    started: Instant,
}

impl BatchProgress {
    /// A bar when stderr is a terminal, plain lines every `every` otherwise, or nothing when quiet.
    pub(crate) fn new(total: usize, every: Duration, quiet: bool) -> Self {
        let shown = if quiet {
            Shown::Quiet
        } else if std::io::stderr().is_terminal() {
            let bar = ProgressBar::with_draw_target(Some(total as u64), ProgressDrawTarget::stderr());
            let style = ProgressStyle::with_template(
                "{spinner} [{elapsed_precise}] {wide_bar} {pos}/{len} done{msg}, ETA {eta}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar());
            bar.set_style(style);
            bar.enable_steady_tick(Duration::from_millis(200));
            Shown::Bar(bar)
        } else {
            Shown::Lines { every, last: Instant::now() }
        };
        Self { shown, total, started: Instant::now() }
    }

    /// Clears the bar before the summary.
    pub(crate) fn finish(&self) {
        if let Shown::Bar(bar) = &self.shown {
            bar.finish_and_clear();
        }
    }

    /// Seconds since the runs started.
    pub(crate) fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    /// "120/200 done (3 failed), 8.1 runs/s, ETA 10 s".
    fn line(&self, tally: &Tally) -> String {
        let done = tally.done();
        let rate = rate(done, self.started);
        let mut line = format!("{done}/{} done", self.total);
        let trouble = tally.trouble();
        if !trouble.is_empty() {
            let _ = write!(line, " ({trouble})");
        }
        let _ = write!(line, ", {rate:.1} runs/s");
        if rate > 0.0 && done < self.total {
            let _ = write!(line, ", ETA {}", human_secs((self.total - done) as f64 / rate));
        }
        line
    }
}

impl Observer for BatchProgress {
    /// Shows the tally after a run ends.
    fn ran(&mut self, tally: &Tally) {
        match &mut self.shown {
            Shown::Bar(bar) => {
                bar.set_position(tally.done() as u64);
                let trouble = tally.trouble();
                let trouble = if trouble.is_empty() { String::new() } else { format!(" ({trouble})") };
                bar.set_message(format!("{trouble}, {:.1} runs/s", rate(tally.done(), self.started)));
            }
            Shown::Lines { .. } => Observer::tick(self, tally),
            Shown::Quiet => {}
        }
    }

    /// Prints a plain line when its time has come.
    fn tick(&mut self, tally: &Tally) {
        if let Shown::Lines { every, last } = &mut self.shown
            && last.elapsed() >= *every
        {
            *last = Instant::now();
            eprintln!("harness: batch: {}", self.line(tally));
        }
    }
}

/// Runs a second since `started`.
fn rate(done: usize, started: Instant) -> f64 {
    let secs = started.elapsed().as_secs_f64();
    if secs > 0.0 { done as f64 / secs } else { 0.0 }
}

/// "850 ms", "12.3 s", "4 min 5 s", "2 h 3 min".
pub(crate) fn human_secs(secs: f64) -> String {
    if secs < 1.0 {
        format!("{:.0} ms", secs * 1000.0)
    } else if secs < 60.0 {
        format!("{secs:.1} s")
    } else if secs < 3600.0 {
        format!("{} min {} s", (secs / 60.0) as u64, (secs % 60.0) as u64)
    } else {
        format!("{} h {} min", (secs / 3600.0) as u64, ((secs % 3600.0) / 60.0) as u64)
    }
}

/// "0.84 ms", "12.3 ms", "1.20 s".
pub(crate) fn human_ms(ms: f64) -> String {
    if ms < 10.0 {
        format!("{ms:.2} ms")
    } else if ms < 1000.0 {
        format!("{ms:.1} ms")
    } else {
        format!("{:.2} s", ms / 1000.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_read_well() {
        assert_eq!(human_secs(0.25), "250 ms");
        assert_eq!(human_secs(75.0), "1 min 15 s");
        assert_eq!(human_ms(0.842), "0.84 ms");
        assert_eq!(human_ms(1234.0), "1.23 s");
    }
}
