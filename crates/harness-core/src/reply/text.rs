//! Moving through text: whitespace, markers, and a seeker that never searches a stretch twice.

/// Skips ASCII whitespace from `at`.
pub(super) fn skip_ws(text: &str, at: usize) -> usize {
    let bytes = text.as_bytes();
    let mut i = at;
    while i < bytes.len() && bytes[i].is_ascii_whitespace() {
        i += 1;
    }
    i
}

/// Whether `text` at `at` starts with `marker`.
pub(super) fn starts(text: &str, at: usize, marker: &str) -> bool {
    text.get(at..).is_some_and(|t| t.starts_with(marker))
}

/// Finds `marker` at or after `from`, as an absolute offset.
pub(super) fn find_from(text: &str, from: usize, marker: &str) -> Option<usize> {
    text.get(from..)?.find(marker).map(|i| from + i)
}

/// Finds `marker` in `text[from..to]`, as an absolute offset.
pub(super) fn find_within(text: &str, from: usize, to: usize, marker: &str) -> Option<usize> {
    text.get(from..to)?.find(marker).map(|i| from + i)
}

/// Finds one marker again and again as a reading moves forward, never searching a stretch of
/// text twice: what keeps readers with many markers linear.
pub(super) struct Seeker {
    marker: &'static str,
    /// The last answer: `Some(None)` once the marker is known absent from here on.
    next: Option<Option<usize>>,
}

impl Seeker {
    /// A seeker of `marker`.
    pub(super) fn new(marker: &'static str) -> Self {
        Self { marker, next: None }
    }

    /// The marker's first occurrence at or after `pos`; `pos` must never move back.
    pub(super) fn next_at(&mut self, text: &str, pos: usize) -> Option<usize> {
        match self.next {
            Some(Some(at)) if at >= pos => return Some(at),
            Some(None) => return None,
            _ => {}
        }
        let found = find_from(text, pos, self.marker);
        self.next = Some(found);
        found
    }
}
