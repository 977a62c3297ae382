//! gpt-oss Harmony: a reply is a run of messages, each `[<|start|>ROLE…]<|channel|>CHANNEL…
//! <|message|>BODY` ended by `<|end|>`, `<|call|>`, `<|return|>` or the next `<|start|>`.
//! A message with a recipient (`to=functions.NAME`, in the role header or after the channel)
//! is a call whose body is the JSON arguments (`<|constrain|>json` may say so); `analysis` is
//! reasoning; `final` and `commentary` without a recipient are content. Servers often drop the
//! `<|call|>` stop token, so a call's body may also end at the end of the reply.

use super::{Reading, Seeker, skip_ws, starts};

const START: &str = "<|start|>";
const CHANNEL: &str = "<|channel|>";
const MESSAGE: &str = "<|message|>";
const CONSTRAIN: &str = "<|constrain|>";
/// Markers that end a message body, and whether they belong to it (`<|start|>` begins the next).
const ENDS: [(&str, bool); 4] = [("<|end|>", true), ("<|call|>", true), ("<|return|>", true), (START, false)];

/// A message header, between its first marker and `<|message|>`.
struct Header<'t> {
    channel: &'t str,
    recipient: Option<&'t str>,
}

fn header(text: &str) -> Header<'_> {
    let channel = text
        .find(CHANNEL)
        .map(|c| &text[c + CHANNEL.len()..])
        .and_then(|rest| rest.split(|ch: char| ch.is_whitespace() || ch == '<').next())
        .unwrap_or("");
    let recipient = text
        .split(|ch: char| ch.is_whitespace() || ch == '<' || ch == '>')
        .find_map(|token| token.strip_prefix("to="))
        .filter(|r| !r.is_empty());
    Header { channel, recipient }
}

/// Reads the messages of `text`.
pub(super) fn read(text: &str, r: &mut Reading<'_>) {
    let mut starts_at = Seeker::new(START);
    let mut channels = Seeker::new(CHANNEL);
    let mut messages = Seeker::new(MESSAGE);
    let mut ends: Vec<Seeker> = ENDS.iter().map(|(m, _)| Seeker::new(m)).collect();
    let mut pos = 0;
    loop {
        let head = [starts_at.next_at(text, pos), channels.next_at(text, pos)].into_iter().flatten().min();
        let Some(head) = head else {
            return r.content(&text[pos..]);
        };
        r.content(&text[pos..head]);
        let Some(message) = messages.next_at(text, head) else {
            let h = header(&text[head..]);
            return if h.recipient.is_some() || r.truncated {
                r.cut(head, h.recipient)
            } else {
                r.content(&text[head..])
            };
        };
        // A header with no message before the next one (an empty `<|start|>assistant`) is skipped.
        if let Some(next) = starts_at.next_at(text, head + 1).filter(|n| *n < message) {
            pos = next;
            continue;
        }
        let header_text = text[head..message].replace(CONSTRAIN, " ");
        let h = header(&header_text);
        let body = message + MESSAGE.len();
        let Some(after_body) = (match h.recipient {
            Some(to) => read_call(text, head, body, to, r, &mut ends),
            None => read_text(text, body, h.channel == "analysis", r, &mut ends),
        }) else {
            return;
        };
        pos = after_body;
    }
}

/// Where the body from `from` ends: the end marker's offset and the offset after it.
fn body_end(text: &str, from: usize, ends: &mut [Seeker]) -> (usize, usize) {
    ends.iter_mut()
        .zip(ENDS)
        .filter_map(|(s, (m, own))| s.next_at(text, from).map(|at| (at, if own { at + m.len() } else { at })))
        .min()
        .unwrap_or((text.len(), text.len()))
}

fn read_text(text: &str, body: usize, analysis: bool, r: &mut Reading<'_>, ends: &mut [Seeker]) -> Option<usize> {
    let (end, after) = body_end(text, body, ends);
    let piece = &text[body..end];
    if analysis {
        r.reasoning.push_str(piece);
    } else {
        r.content(piece);
    }
    Some(after)
}

fn read_call(
    text: &str,
    head: usize,
    body: usize,
    to: &str,
    r: &mut Reading<'_>,
    ends: &mut [Seeker],
) -> Option<usize> {
    let name = to.strip_prefix("functions.").unwrap_or(to);
    let start = skip_ws(text, body);
    let (value, after_json) = r.json_at(text, start, head, Some(name))?;
    let arguments = r.object_arguments(start, name, value)?;
    let close = skip_ws(text, after_json);
    if close < text.len() && !ENDS.iter().any(|(m, _)| starts(text, close, m)) {
        r.malformed(close, &format!("expected <|call|> after the JSON arguments of {name:?}"));
        return None;
    }
    r.call(name, arguments);
    let (_, after) = body_end(text, close, ends);
    Some(after)
}
