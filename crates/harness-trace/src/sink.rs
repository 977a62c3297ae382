//! Sinks that pass each trace line on: to several receivers at once.

use std::io;

use harness_core::{Compaction, RunEnd, RunStart, TraceEntry, TraceSink};

/// Hands every line to each of its sinks in turn, the first error stopping it: the JSON Lines
/// file and the OpenTelemetry exporter receive the same records.
#[derive(Default)]
pub struct Tee<'a> {
    sinks: Vec<Box<dyn TraceSink + 'a>>,
}

impl<'a> Tee<'a> {
    /// A tee with no sink yet.
    pub fn new() -> Self {
        Self { sinks: Vec::new() }
    }

    /// Adds a receiver.
    pub fn push(&mut self, sink: impl TraceSink + 'a) {
        self.sinks.push(Box::new(sink));
    }

    /// Adds a boxed receiver.
    pub fn push_boxed(&mut self, sink: Box<dyn TraceSink + 'a>) {
        self.sinks.push(sink);
    }
}

impl TraceSink for Tee<'_> {
    fn begin(&mut self, start: &RunStart) -> io::Result<()> {
        self.sinks.iter_mut().try_for_each(|s| s.begin(start))
    }
    fn record(&mut self, entry: &TraceEntry<'_>) -> io::Result<()> {
        self.sinks.iter_mut().try_for_each(|s| s.record(entry))
    }
    fn end(&mut self, end: &RunEnd) -> io::Result<()> {
        self.sinks.iter_mut().try_for_each(|s| s.end(end))
    }
    fn compacted(&mut self, line: &Compaction) -> io::Result<()> {
        self.sinks.iter_mut().try_for_each(|s| s.compacted(line))
    }
}
