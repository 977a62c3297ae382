//! Reasoning, split off before anything is searched for calls.
//!
//! The blocks: `<think>…</think>` (Qwen3, DeepSeek R1/V3.1, GLM, Kimi, MiniMax), also with the
//! opening tag missing, as templates that pre-fill it produce; `[THINK]…[/THINK]` (Magistral);
//! `◁think▷…◁/think▷` (Kimi VL); `<|channel>thought…<channel|>` (Gemma 4);
//! `<seed:think>…</seed:think>` (Seed-OSS); `<|open|>think<|sep|>…<|close|>think<|sep|>` (Kimi
//! K3, whose template may write the opening into the prompt); and Harmony's `analysis` channel (gpt-oss), which
//! runs to `<|end|>` or to the next message.

use super::Seeker;

/// A reasoning block: its opening marker and the markers that may close it.
struct Block {
    open: &'static str,
    /// Closing markers, and whether each is part of the block (consumed) or starts what follows.
    close: &'static [(&'static str, bool)],
}

const BLOCKS: &[Block] = &[
    Block { open: "<think>", close: &[("</think>", true)] },
    Block { open: "[THINK]", close: &[("[/THINK]", true)] },
    Block { open: "◁think▷", close: &[("◁/think▷", true)] },
    Block { open: "<|channel>thought", close: &[("<channel|>", true)] },
    Block { open: "<seed:think>", close: &[("</seed:think>", true)] },
    Block { open: "<|open|>think<|sep|>", close: &[("<|close|>think<|sep|>", true)] },
    Block {
        open: "<|channel|>analysis<|message|>",
        close: &[("<|end|>", true), ("<|start|>", false), ("<|channel|>", false)],
    },
];

/// Closing markers whose opening tag a template may have written into the prompt.
const PREFILLED: &[(&str, &str)] =
    &[("<think>", "</think>"), ("[THINK]", "[/THINK]"), ("<|open|>think<|sep|>", "<|close|>think<|sep|>")];

/// A reply with its reasoning split off.
pub(super) struct Split {
    /// The text without reasoning.
    pub(super) content: String,
    /// Where each piece of `content` came from: (offset in content, offset in the reply).
    pub(super) offsets: Vec<(usize, usize)>,
    /// The reasoning, blocks joined by newlines.
    pub(super) reasoning: String,
    /// The reply ended inside a reasoning block.
    pub(super) cut_in_reasoning: bool,
}

impl Split {
    /// A reply with no reasoning: all of it is content.
    pub(super) fn none(text: &str) -> Self {
        let mut out =
            Self { content: String::new(), offsets: Vec::new(), reasoning: String::new(), cut_in_reasoning: false };
        out.keep(text, 0, text.len());
        out
    }

    fn keep(&mut self, text: &str, from: usize, to: usize) {
        if let Some(piece) = text.get(from..to).filter(|p| !p.is_empty()) {
            self.offsets.push((self.content.len(), from));
            self.content.push_str(piece);
        }
    }

    fn think(&mut self, piece: &str) {
        let piece = piece.trim();
        if piece.is_empty() {
            return;
        }
        if !self.reasoning.is_empty() {
            self.reasoning.push('\n');
        }
        self.reasoning.push_str(piece);
    }
}

/// Splits the reasoning off `text`. Linear: each marker's search only moves forward.
///
/// Reasoning comes before the calls: once a call has opened (one of `call_markers` stands
/// outside reasoning), the rest is the readers', so that a `<think>` or `</think>` inside an
/// argument value never cuts a call nor turns the rest of the value into calls.
pub(super) fn split(text: &str, call_markers: &[&'static str]) -> Split {
    let mut out =
        Split { content: String::new(), offsets: Vec::new(), reasoning: String::new(), cut_in_reasoning: false };
    let mut calls: Vec<Seeker> = call_markers.iter().map(|m| Seeker::new(m)).collect();
    let first_call = calls.iter_mut().filter_map(|s| s.next_at(text, 0)).min().unwrap_or(text.len());
    let mut pos = prefilled(text, first_call, &mut out);
    let mut opens: Vec<Seeker> = BLOCKS.iter().map(|b| Seeker::new(b.open)).collect();
    let mut closes: Vec<Vec<Seeker>> =
        BLOCKS.iter().map(|b| b.close.iter().map(|(m, _)| Seeker::new(m)).collect()).collect();
    loop {
        let next = opens.iter_mut().enumerate().filter_map(|(i, s)| s.next_at(text, pos).map(|at| (at, i))).min();
        let call = calls.iter_mut().filter_map(|s| s.next_at(text, pos)).min();
        let Some((at, block)) = next.filter(|(at, _)| call.is_none_or(|c| c >= *at)) else {
            out.keep(text, pos, text.len());
            return out;
        };
        out.keep(text, pos, at);
        let body = at + BLOCKS[block].open.len();
        let end = closes[block]
            .iter_mut()
            .zip(BLOCKS[block].close)
            .filter_map(|(s, (m, consumed))| s.next_at(text, body).map(|c| (c, if *consumed { m.len() } else { 0 })))
            .min_by_key(|(c, _)| *c);
        match end {
            Some((close, len)) => {
                out.think(text.get(body..close).unwrap_or(""));
                pos = close + len;
            }
            None => {
                out.think(text.get(body..).unwrap_or(""));
                out.cut_in_reasoning = true;
                return out;
            }
        }
    }
}

/// Takes the reasoning whose opening tag was in the prompt: a closing tag before any opening
/// one, and before the first call, ends it. Returns where the rest of the reply starts.
fn prefilled(text: &str, first_call: usize, out: &mut Split) -> usize {
    for (open, close) in PREFILLED {
        if let Some(c) = text[..first_call].find(close)
            && text.find(open).is_none_or(|o| c < o)
        {
            out.think(&text[..c]);
            return c + close.len();
        }
    }
    0
}
