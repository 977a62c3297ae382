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

/// Finds, again and again as a reading moves forward, the `closer` that ends a value: the
/// first one the format's grammar lets stand there, that is one followed (after whitespace) by
/// one of `followers` or by the end of the text. A closer inside a value, followed by more of
/// the value, is text. Each occurrence is looked at once, so a reading stays linear.
pub(super) struct Closer {
    closer: &'static str,
    followers: &'static [&'static str],
    /// The last answer: `Some(None)` once no such closer is left.
    next: Option<Option<usize>>,
    /// The marker that ends a call, the seeker of the next call's opener and one of this
    /// closer again: see [`Closer::quoting_calls`].
    call_end: Option<(&'static str, Seeker, Seeker)>,
}

impl Closer {
    /// A seeker of `closer` followed by one of `followers`.
    pub(super) fn new(closer: &'static str, followers: &'static [&'static str]) -> Self {
        Self { closer, followers, next: None, call_end: None }
    }

    /// A closer followed by `end` (the marker that ends a call) ends the value only when no
    /// closer like it comes after, before the next call's `opener`: else the value quotes a
    /// whole call, its end included, and goes on to its own closer.
    pub(super) fn quoting_calls(mut self, end: &'static str, opener: &'static str) -> Self {
        self.call_end = Some((end, Seeker::new(opener), Seeker::new(self.closer)));
        self
    }

    /// Whether the follower at `next` lets the closer before it stand.
    fn ends_value(&mut self, text: &str, next: usize) -> bool {
        let Some((end, opener, again)) = self.call_end.as_mut().filter(|(end, ..)| starts(text, next, end)) else {
            return true;
        };
        let after = next + end.len();
        match again.next_at(text, after) {
            None => true,
            Some(again) => opener.next_at(text, after).is_some_and(|open| open < again),
        }
    }

    /// The first such closer at or after `pos`; `pos` must never move back.
    pub(super) fn next_at(&mut self, text: &str, pos: usize) -> Option<usize> {
        match self.next {
            Some(Some(at)) if at >= pos => return Some(at),
            Some(None) => return None,
            _ => {}
        }
        let mut search = pos;
        // A closer taken for a quoted call's end still ends the value when no other one does
        // (prose after the call that names the closer).
        let mut quoted = None;
        let found = loop {
            let Some(at) = find_from(text, search, self.closer) else { break quoted };
            let next = skip_ws(text, at + self.closer.len());
            if next >= text.len() {
                break Some(at);
            }
            if self.followers.iter().any(|f| starts(text, next, f)) {
                if self.ends_value(text, next) {
                    break Some(at);
                }
                quoted = quoted.or(Some(at));
            }
            search = at + self.closer.len();
        };
        self.next = Some(found);
        found
    }
}

/// Why a hand-parsed value (Gemma's, Python literals) could not be read.
pub(super) enum Fault {
    /// The text ended inside it.
    Cut,
    /// Something else was wrong, at this offset.
    Bad(usize, String),
}
