//! Keep every request within the model's context.
//!
//! Before each request the prompt's size is estimated: the tokens of the conversation's text,
//! scaled by how the server counted the last request (its `usage`), plus the system prompt,
//! plus room for the reply. A reply cut at the token limit is kept as a short stub, never
//! whole. When the next request would not fit, the oldest steps are compacted in one chunk into
//! one line each, right after the request, so that the prompt keeps a long common prefix (the
//! server's prompt cache keeps serving it) and compaction happens rarely; when even that
//! cannot fit, the run ends `context_exhausted`, before the server refuses the request.

mod summary;

use serde::Serialize;
use serde_json::{Value, json};

use super::{Run, RunOutcome, RunStatus, Step, arguments_size, message_size};
use crate::error::{ErrorCode, HarnessError};
use crate::provider::{Arguments, ContextWindow, Message, ModelReply};
use crate::trace::TraceSink;

/// Bytes of a cut reply kept at each end of its stub: enough to show what the model began and
/// what it kept repeating.
const STUB_END_BYTES: usize = 300;
/// Bytes per token assumed before the server has counted a request: low, so that the first
/// estimates err large (JSON and code run 3 to 4 bytes a token in the usual tokenizers).
const BYTES_PER_TOKEN: usize = 3;
/// Tokens a message costs beyond its text: the chat template's role markers.
const MESSAGE_OVERHEAD_TOKENS: u64 = 8;
/// Tokens of message text a request must hold before its count corrects the estimates.
const MIN_TEXT_TO_LEARN: u64 = 64;
/// Tokens kept free beyond the estimate, for what an estimate misses (the template's own text).
const SLACK_TOKENS: u64 = 32;

/// Tokens of `bytes` bytes of text, estimated before a server has counted any.
pub fn estimate_tokens(bytes: usize) -> u64 {
    bytes.div_ceil(BYTES_PER_TOKEN) as u64
}

/// How a run used the model's context, for `--json` and the trace's last line.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ContextUse {
    /// The context the run kept to and where its size came from; absent when the provider
    /// declares none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub window: Option<ContextWindow>,
    /// The largest prompt sent, in tokens: as the server counted it, else as estimated.
    pub largest_prompt_tokens: u64,
    /// Compactions made.
    pub compactions: u32,
    /// Tokens the compactions took out of the prompt, estimated.
    pub tokens_saved: u64,
}

/// The trace line of one compaction: which steps it shortened and what that saved.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Compaction {
    /// Always `compaction`.
    pub kind: &'static str,
    /// The step whose request needed the room.
    pub before_step: u32,
    /// The first and last step shortened to one line each.
    pub steps: [u32; 2],
    /// Messages replaced by the summary.
    pub messages_removed: usize,
    /// The prompt's estimated tokens before and after.
    pub tokens_before: u64,
    /// The prompt's estimated tokens after.
    pub tokens_after: u64,
    /// `tokens_before - tokens_after`.
    pub tokens_saved: u64,
    /// The model's context, in tokens.
    pub context_tokens: u64,
}

/// What the loop keeps about the context from one request to the next.
#[derive(Debug, Default)]
pub(super) struct ContextState {
    /// What the run's `--json` and last line report.
    pub(super) used: ContextUse,
    /// Server tokens per estimated token, learnt from the last request's `usage`.
    scale: Option<f64>,
    /// The conversation's length when the last request was sent.
    asked_len: usize,
    /// The estimate of the last request's message text, before scaling.
    asked_estimate: u64,
    /// The role markers of the last request's messages, estimated.
    asked_overhead: u64,
    /// Steps already shortened into the summary.
    compacted: u32,
    /// The summary of compacted steps, the conversation's second message when not empty.
    summary: summary::Summary,
    /// Replies cut at the token limit in a row.
    pub(super) cut_in_row: u32,
    /// The server has counted a prompt: the largest prompt is its count, not an estimate.
    counted: bool,
    /// The estimated tokens of the conversation's text, kept as a running total so that a step
    /// costs the same at step 10,000 as at step 10 (a rescan of every message before every
    /// request made a long run quadratic).
    text_total: u64,
    /// The messages `text_total` has counted: the conversation's first `text_counted`.
    text_counted: usize,
}

impl ContextState {
    /// Learns from a reply: its prompt's size as the server counted it, whether it was cut.
    pub(super) fn after_reply(&mut self, reply: &ModelReply) {
        self.cut_in_row = if reply.truncated { self.cut_in_row + 1 } else { 0 };
        let Some(counted) = reply.usage.map(|u| u.input_tokens).filter(|&n| n > 0) else {
            return;
        };
        // Once the server counts, its counts replace the estimates made before.
        let before = if self.counted { self.used.largest_prompt_tokens } else { 0 };
        self.used.largest_prompt_tokens = before.max(counted);
        self.counted = true;
        // The system prompt's count is the provider's own (a server's tokenizer where it has
        // one); the messages' role markers are counted as estimated; only their text is scaled, and
        // only once there is enough of it that the template's own tokens do not swamp it.
        let fixed = self.used.window.as_ref().map_or(0, |w| w.prompt_tokens) + self.asked_overhead;
        if self.asked_estimate >= MIN_TEXT_TO_LEARN && counted > fixed {
            // Bounded, so that one odd count cannot make the estimates absurd.
            self.scale = Some(((counted - fixed) as f64 / self.asked_estimate as f64).clamp(0.25, 2.0));
        }
    }
}

/// Readies the conversation for the next request: ends a run whose replies keep being cut,
/// stubs a cut reply, compacts when the request would not fit, and ends the run when even that
/// cannot make it fit. `Some` is the run's end.
pub(super) fn before_ask(run: &mut Run<'_>, step: &Step, trace: &mut dyn TraceSink) -> Option<RunOutcome> {
    let max = run.options.max_truncated;
    if max > 0 && run.context.cut_in_row >= max {
        let error = cut_too_often(&run.conversation, run.context.cut_in_row);
        return Some(run.ended(RunStatus::ReplyTruncated, step.number - 1, error));
    }
    let from = run.context.asked_len;
    for message in &mut run.conversation[from..] {
        if let Message::Assistant { reply } = message
            && reply.truncated
        {
            stub_reply(reply);
        }
    }
    count_new_text(run);
    let fitted = fit(run, step, trace);
    run.context.asked_len = run.conversation.len();
    run.context.asked_estimate = text_estimate(run);
    run.context.asked_overhead = MESSAGE_OVERHEAD_TOKENS * run.conversation.len() as u64;
    if !run.context.counted {
        let estimate = prompt_estimate(run);
        run.context.used.largest_prompt_tokens = run.context.used.largest_prompt_tokens.max(estimate);
    }
    fitted
}

/// Compacts when the next request would not fit; `Some` (the run's end) when it cannot be made to.
fn fit(run: &mut Run<'_>, step: &Step, trace: &mut dyn TraceSink) -> Option<RunOutcome> {
    // No declared context: nothing to keep to.
    let window = run.context.used.window.clone()?;
    let room = window.tokens.saturating_sub(window.reply_tokens + SLACK_TOKENS);
    let before = prompt_estimate(run);
    if before <= room {
        return None;
    }
    if let Some(line) = compact(run, step.number, &window, before)
        && let Err(e) = trace.compacted(&line)
    {
        return Some(run.failed(step.number - 1, super::record::trace_error(&e)));
    }
    let after = prompt_estimate(run);
    if after <= room {
        return None;
    }
    let error = HarnessError::new(
        ErrorCode::ContextExhausted,
        format!(
            "the next request needs about {after} tokens and {} more for the reply, over the model's context of {} tokens (from {}), even with every earlier step shortened; give the server a larger context (llama-server -c), lower --max-reply-tokens, or shorten the request",
            window.reply_tokens, window.tokens, window.source
        ),
        json!({ "prompt_tokens": after, "reply_tokens": window.reply_tokens, "context_tokens": window.tokens, "source": window.source }),
    );
    Some(run.ended(RunStatus::ContextExhausted, step.number - 1, error))
}

/// The conversation's text in tokens, estimated from its bytes, before any correction, as
/// last counted ([`count_new_text`]).
fn text_estimate(run: &Run<'_>) -> u64 {
    run.context.text_total
}

/// Adds the messages appended since the last count to the running total. Messages are only
/// appended between requests, and a cut reply is stubbed before it is counted; compaction,
/// which removes messages, counts the whole conversation again ([`recount_text`]).
fn count_new_text(run: &mut Run<'_>) {
    let from = run.context.text_counted.min(run.conversation.len());
    run.context.text_total += run.conversation[from..].iter().map(text_tokens).sum::<u64>();
    run.context.text_counted = run.conversation.len();
}

/// Counts the whole conversation's text again, after compaction changed it.
fn recount_text(run: &mut Run<'_>) {
    run.context.text_total = run.conversation.iter().map(text_tokens).sum();
    run.context.text_counted = run.conversation.len();
}

/// The next prompt's tokens: the system prompt's, the messages' role markers, and their text
/// as the server would count it.
fn prompt_estimate(run: &Run<'_>) -> u64 {
    let prompt = run.context.used.window.as_ref().map_or(0, |w| w.prompt_tokens);
    let overhead = MESSAGE_OVERHEAD_TOKENS * run.conversation.len() as u64;
    prompt + overhead + scaled(run, text_estimate(run))
}

/// A conversation estimate as the server would count it, once it has counted a request.
fn scaled(run: &Run<'_>, raw: u64) -> u64 {
    match run.context.scale {
        Some(scale) => (raw as f64 * scale).ceil() as u64,
        None => raw,
    }
}

/// Tokens of one message's text, estimated.
fn text_tokens(message: &Message) -> u64 {
    let bytes = match message {
        Message::Assistant { reply } => message_size(message) + reply.calls.iter().map(|c| c.name.len()).sum::<usize>(),
        _ => message_size(message),
    };
    estimate_tokens(bytes)
}

/// Shortens the oldest steps into the summary after the request: as many as it takes to bring
/// the conversation to half the room the system prompt and the reply leave it, so that the next
/// compaction is far off; never the latest step unless it alone is too large. `None` when there
/// is nothing to shorten.
fn compact(run: &mut Run<'_>, before_step: u32, window: &ContextWindow, before: u64) -> Option<Compaction> {
    let had_summary = !run.context.summary.is_empty();
    let start = if had_summary { 2 } else { 1 };
    let groups = step_groups(&run.conversation[start..]);
    if groups.is_empty() {
        return None;
    }
    let room = window.tokens.saturating_sub(window.reply_tokens + SLACK_TOKENS + window.prompt_tokens);
    let target = room / 2;
    let old_summary = if had_summary { text_tokens(&run.conversation[1]) } else { 0 };
    let others = text_estimate(run) - old_summary;
    // The messages that stay: the request, the summary, and those not shortened.
    let mut kept = run.conversation.len() as u64 + u64::from(!had_summary);
    let (mut cut, mut removed) = (0, 0);
    let mut summary = run.context.summary.clone();
    let mut step = run.context.compacted;
    for (i, group) in groups.iter().enumerate() {
        let messages = &run.conversation[start + group.start..start + group.end];
        removed += messages.iter().map(text_tokens).sum::<u64>();
        kept -= messages.len() as u64;
        summary.add(messages, &mut step);
        // The summary itself keeps to a third of the room: past it, its oldest lines fold.
        summary.fold_to(room / 3);
        cut = group.end;
        let text = estimate_tokens(summary.text().len());
        let left = kept * MESSAGE_OVERHEAD_TOKENS + scaled(run, (others + text).saturating_sub(removed));
        let last = i + 1 == groups.len();
        if left <= target || (i + 2 == groups.len() && left <= room) || last {
            break;
        }
    }
    let first_step = run.context.compacted + 1;
    let drained = run.conversation.drain(start..start + cut).count();
    let content = summary.text();
    if had_summary {
        run.conversation[1] = Message::User { content };
    } else {
        run.conversation.insert(1, Message::User { content });
    }
    run.context.summary = summary;
    run.context.compacted = step;
    run.current = None;
    run.conversation_bytes = run.conversation.iter().map(message_size).sum();
    recount_text(run);
    let after = prompt_estimate(run);
    let saved = before.saturating_sub(after);
    run.context.used.compactions += 1;
    run.context.used.tokens_saved += saved;
    Some(Compaction {
        kind: "compaction",
        before_step,
        steps: [first_step, step],
        messages_removed: drained,
        tokens_before: before,
        tokens_after: after,
        tokens_saved: saved,
        context_tokens: window.tokens,
    })
}

/// A step group: a reply and the results that answer it, as a range of the conversation.
struct Group {
    start: usize,
    end: usize,
}

/// The conversation split at each reply: every group a reply and what answered it.
fn step_groups(messages: &[Message]) -> Vec<Group> {
    let mut groups: Vec<Group> = Vec::new();
    for (i, message) in messages.iter().enumerate() {
        match (message, groups.last_mut()) {
            (Message::Assistant { .. }, _) | (_, None) => groups.push(Group { start: i, end: i + 1 }),
            (_, Some(group)) => group.end = i + 1,
        }
    }
    groups
}

/// A call's arguments as text: a string (OpenAI sends JSON in one) as it is.
fn arguments_text(arguments: &Arguments) -> String {
    match arguments.as_value() {
        Some(Value::String(s)) => s.clone(),
        _ => arguments.to_string(),
    }
}

/// `text` cut to about `max` bytes at a character boundary, on one line.
fn clip(text: &str, max: usize) -> String {
    let one_line = text.replace(['\n', '\r'], " ");
    if one_line.len() <= max {
        return one_line;
    }
    format!("{}…", &one_line[..floor_boundary(&one_line, max)])
}

fn floor_boundary(text: &str, at: usize) -> usize {
    (0..=at.min(text.len())).rev().find(|&i| text.is_char_boundary(i)).unwrap_or(0)
}

fn ceil_boundary(text: &str, at: usize) -> usize {
    (at.min(text.len())..=text.len()).find(|&i| text.is_char_boundary(i)).unwrap_or(text.len())
}

/// A cut reply as it is fed back: its first and last few hundred bytes and the size cut out
/// between them; a short text is kept whole.
pub(super) fn stub(text: &str) -> String {
    if text.len() <= 2 * STUB_END_BYTES + 64 {
        return text.to_owned();
    }
    let head = floor_boundary(text, STUB_END_BYTES);
    let tail = ceil_boundary(text, text.len() - STUB_END_BYTES);
    format!("{} …({} bytes cut)… {}", &text[..head], tail - head, &text[tail..])
}

/// Stubs a cut reply's text and its last call's arguments (where the cut fell).
fn stub_reply(reply: &mut ModelReply) {
    if let Some(text) = &mut reply.text {
        *text = stub(text);
    }
    if let Some(call) = reply.calls.last_mut()
        && arguments_size(&call.arguments) > 2 * STUB_END_BYTES + 64
    {
        call.arguments = Arguments::Value(json!({ "cut": stub(&arguments_text(&call.arguments)) }));
    }
}

/// The error that ends a run whose replies were cut `times` times in a row, with what the
/// model kept writing.
fn cut_too_often(conversation: &[Message], times: u32) -> HarnessError {
    let last = conversation.iter().rev().find_map(|m| match m {
        Message::Assistant { reply } => Some(reply),
        _ => None,
    });
    let written = last.map(|r| match (r.calls.last(), &r.text) {
        (Some(call), _) => format!("{} {}", call.name, arguments_text(&call.arguments)),
        (None, Some(text)) => text.clone(),
        (None, None) => String::new(),
    });
    let kept = clip(&written.unwrap_or_default(), 200);
    HarnessError::new(
        ErrorCode::ReplyTruncated,
        format!(
            "the model's last {times} replies were cut at the token limit; it kept writing: {kept}. Raise --max-reply-tokens, use a larger model, or raise --max-truncated"
        ),
        json!({ "times": times, "kept_writing": kept }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::approval::Approvals;
    use crate::run::RunOptions;

    fn window(tokens: u64) -> ContextWindow {
        ContextWindow { tokens, source: "script".into(), reply_tokens: 100, prompt_tokens: 50, tools_tokens: 20 }
    }

    /// A step of 300 bytes of result: 100 tokens of text, 16 of role markers.
    fn add_step(run: &mut Run<'_>, n: u32) {
        let call = crate::provider::ProposedCall {
            id: Some(format!("c{n}")),
            name: "t".into(),
            arguments: json!({ "n": n }).into(),
        };
        run.conversation.push(Message::Assistant { reply: ModelReply { calls: vec![call], ..Default::default() } });
        let content = json!("r".repeat(298));
        run.conversation.push(Message::ToolResult {
            call_id: Some(format!("c{n}")),
            tool: Some("t".into()),
            content,
            is_error: false,
        });
    }

    #[test]
    fn a_prompt_that_fits_is_left_alone_and_one_that_does_not_is_compacted_oldest_first() {
        let (options, mut approvals) = (RunOptions::default(), Approvals::allow_all());
        let mut run = Run::start("request", &options, Default::default(), &mut approvals);
        run.context.used.window = Some(window(1000));
        let mut lines: Vec<Value> = Vec::new();
        for n in 1..=5 {
            add_step(&mut run, n);
        }
        // 50 (system) + 11 messages x 8 + text (3 + 5 x (3 + 100)): 656, within 1000 - 100 - 32.
        count_new_text(&mut run);
        assert_eq!(prompt_estimate(&run), 656);
        assert!(before_ask(&mut run, &Step::begin(6, false), &mut lines).is_none());
        assert!(lines.is_empty() && run.conversation.len() == 11);

        for n in 6..=8 {
            add_step(&mut run, n);
        }
        assert!(before_ask(&mut run, &Step::begin(9, false), &mut lines).is_none());
        assert_eq!(lines.len(), 1, "one compaction");
        let line = &lines[0];
        assert_eq!((line["kind"].as_str(), line["before_step"].as_u64()), (Some("compaction"), Some(9)));
        // Down to half the room the system prompt and the reply leave (818 / 2), oldest first.
        let after = line["tokens_after"].as_u64().unwrap();
        assert!(after <= 50 + 409, "{line}");
        assert_eq!(line["steps"][0], 1);
        assert_eq!(line["tokens_saved"].as_u64(), Some(line["tokens_before"].as_u64().unwrap() - after));
        let Message::User { content } = &run.conversation[1] else { panic!("the summary follows the request") };
        assert!(
            content.starts_with("Earlier steps, shortened to one line each:\nstep 1: t {\"n\":1} -> rrr"),
            "{content}"
        );
        assert!(matches!(run.conversation.last(), Some(Message::ToolResult { call_id: Some(id), .. }) if id == "c8"));
        assert_eq!(
            (run.context.used.compactions, run.context.used.tokens_saved),
            (1, line["tokens_saved"].as_u64().unwrap())
        );
    }

    #[test]
    fn the_running_total_of_text_is_what_a_rescan_of_the_conversation_counts() {
        let (options, mut approvals) = (RunOptions::default(), Approvals::allow_all());
        let mut run = Run::start("request", &options, Default::default(), &mut approvals);
        run.context.used.window = Some(window(1000));
        let mut lines: Vec<Value> = Vec::new();
        let rescan = |run: &Run<'_>| run.conversation.iter().map(text_tokens).sum::<u64>();
        for n in 1..=20 {
            add_step(&mut run, n);
            assert!(before_ask(&mut run, &Step::begin(n + 1, false), &mut lines).is_none());
            assert_eq!(text_estimate(&run), rescan(&run), "after step {n}");
        }
        assert!(!lines.is_empty(), "the run compacted, and the total followed");
    }

    #[test]
    fn a_prompt_that_cannot_fit_even_compacted_ends_the_run_context_exhausted() {
        let (options, mut approvals) = (RunOptions::default(), Approvals::allow_all());
        let mut run = Run::start(&"q".repeat(900), &options, Default::default(), &mut approvals);
        run.context.used.window = Some(window(400));
        let mut lines: Vec<Value> = Vec::new();
        let outcome = before_ask(&mut run, &Step::begin(1, false), &mut lines).expect("the run ends");
        assert_eq!((outcome.status, outcome.steps), (RunStatus::ContextExhausted, 0));
        let details = &outcome.error.expect("an error").details;
        assert_eq!(details["context_tokens"], 400);
        assert_eq!(details["prompt_tokens"], 50 + 8 + 300);
        assert!(lines.is_empty(), "nothing to compact");
    }

    #[test]
    fn the_servers_count_corrects_the_estimate_of_the_messages_text() {
        let (options, mut approvals) = (RunOptions::default(), Approvals::allow_all());
        let mut run = Run::start("request", &options, Default::default(), &mut approvals);
        run.context.used.window = Some(window(100_000));
        for n in 1..=3 {
            add_step(&mut run, n);
        }
        assert!(before_ask(&mut run, &Step::begin(4, false), &mut Vec::<Value>::new()).is_none());
        let text = text_estimate(&run);
        // The server counted half the estimated text, on top of the system prompt and the markers.
        let counted = 50 + 8 * run.conversation.len() as u64 + text / 2;
        let usage = crate::provider::Usage { input_tokens: counted, ..Default::default() };
        run.context.after_reply(&ModelReply { usage: Some(usage), ..Default::default() });
        assert_eq!(run.context.used.largest_prompt_tokens, counted);
        assert_eq!(prompt_estimate(&run), counted);
    }

    #[test]
    fn a_short_text_is_its_own_stub_and_a_long_one_keeps_its_ends() {
        assert_eq!(stub("short"), "short");
        let long = format!("{}{}{}", "a".repeat(400), "b".repeat(5000), "c".repeat(400));
        let s = stub(&long);
        assert!(s.starts_with(&"a".repeat(300)) && s.ends_with(&"c".repeat(300)), "{s}");
        assert!(s.contains("(5200 bytes cut)"), "{s}");
        assert!(s.len() < 700, "{}", s.len());
        // Cut at character boundaries: no panic on multi-byte text.
        let wide = "é".repeat(2000);
        assert!(stub(&wide).contains("bytes cut"));
    }

    #[test]
    fn estimates_round_up_and_lines_are_clipped_to_one_line() {
        assert_eq!(estimate_tokens(0), 0);
        assert_eq!(estimate_tokens(1), 1);
        assert_eq!(estimate_tokens(7), 3);
        assert_eq!(clip("a\nb", 10), "a b");
        assert_eq!(clip("abcdef", 3), "abc…");
    }

    #[test]
    fn groups_start_at_each_reply() {
        let reply = Message::Assistant { reply: ModelReply::default() };
        let result = Message::ToolResult { call_id: None, tool: None, content: json!(1), is_error: false };
        let messages = [reply.clone(), result.clone(), result, reply];
        let groups = step_groups(&messages);
        assert_eq!(groups.iter().map(|g| (g.start, g.end)).collect::<Vec<_>>(), [(0, 3), (3, 4)]);
    }
}
