//! `harness trace html`: one self-contained HTML file: inline style, one inline script allowed
//! by its hash, no request to anywhere. Everything from the trace is untrusted (model and tool
//! output) and reaches the page only as escaped text.

use std::fmt::Write as _;

use base64::Engine as _;
use serde_json::Value;
use sha2::{Digest, Sha256};

use harness_trace::{Ending, Line, StepStatus as Status, Trace, brief};

use super::human_us;

/// Largest value shown whole in the report; longer ones are cut with a note (the trace has them).
const MAX_SHOWN: usize = 1 << 20;

/// Filters by status and expands or collapses every step; the page works without it.
const SCRIPT: &str = r##"
(function () {
  var steps = Array.prototype.slice.call(document.querySelectorAll("li.step"));
  var boxes = Array.prototype.slice.call(document.querySelectorAll("input[data-filter]"));
  function apply() {
    var on = {};
    boxes.forEach(function (b) { on[b.getAttribute("data-filter")] = b.checked; });
    var shown = 0;
    steps.forEach(function (s) {
      var visible = on[s.getAttribute("data-status")] !== false;
      s.hidden = !visible;
      if (visible) { shown += 1; }
    });
    document.getElementById("shown").textContent = "showing " + shown + " of " + steps.length + " steps";
  }
  function openAll(open) {
    steps.forEach(function (s) { s.querySelector("details").open = open; });
  }
  boxes.forEach(function (b) { b.addEventListener("change", apply); });
  document.getElementById("expand").addEventListener("click", function () { openAll(true); });
  document.getElementById("collapse").addEventListener("click", function () { openAll(false); });
  document.getElementById("controls").hidden = false;
  apply();
  // A link to #all opens every step; a link to #step-N opens that one.
  if (location.hash === "#all") { openAll(true); }
  var target = /^#step-[0-9]+$/.test(location.hash) && document.getElementById(location.hash.slice(1));
  if (target) { target.querySelector("details").open = true; target.scrollIntoView(); }
  document.body.setAttribute("data-ready", "1");
})();
"##;

const STYLE: &str = r#"
:root { --ok: #1a7f37; --rejected: #9a6700; --error: #cf222e; --finished: #0969da; --line: #d0d7de;
  --muted: #57606a; --bg: #f6f8fa; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: #1f2328; margin: 0 auto;
  max-width: 1200px; padding: 16px 24px 40px; }
h1 { font-size: 20px; margin: 0 0 4px; }
h1 code { font-size: 17px; }
h2 { font-size: 15px; margin: 12px 0 4px; }
h3 { font-size: 12px; text-transform: uppercase; letter-spacing: .04em; color: var(--muted); margin: 12px 0 4px; }
h3 code { text-transform: none; letter-spacing: 0; color: var(--error); font-size: 12.5px; }
code, pre, .mono { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }
pre { background: var(--bg); border: 1px solid var(--line); border-radius: 6px; padding: 8px 10px; margin: 0;
  white-space: pre-wrap; word-break: break-word; max-height: 480px; overflow: auto; font-size: 12.5px; }
.summary { border: 1px solid var(--line); border-radius: 8px; padding: 12px 16px; margin: 12px 0 16px; }
.summary dl { display: flex; flex-wrap: wrap; gap: 8px 32px; margin: 0; }
.summary dt { font-size: 12px; color: var(--muted); }
.summary dd { margin: 0; font-weight: 600; }
.ending { font-weight: 600; }
.chip, .badge { display: inline-block; border-radius: 10px; padding: 0 8px; color: #fff; font-size: 12px;
  font-weight: 600; line-height: 20px; }
.counts { margin: 10px 0 0; display: flex; gap: 6px; flex-wrap: wrap; }
.st-ok { --c: var(--ok); } .st-rejected { --c: var(--rejected); } .st-error { --c: var(--error); }
.st-finished { --c: var(--finished); }
.chip, .badge { background: var(--c); }
.ending.st-ok, .ending.st-rejected, .ending.st-error, .ending.st-finished { color: var(--c); }
#controls { display: flex; gap: 14px; align-items: center; flex-wrap: wrap; margin: 0 0 8px; color: var(--muted); }
#controls[hidden] { display: none; }
#controls button { font: inherit; padding: 2px 10px; border: 1px solid var(--line); border-radius: 6px;
  background: #fff; cursor: pointer; }
ol.timeline { list-style: none; padding: 0; margin: 0; border-top: 1px solid var(--line); }
li.step { border-bottom: 1px solid var(--line); border-left: 4px solid var(--c); }
li.step[hidden] { display: none; }
li.step summary, .columns { display: grid; grid-template-columns: 40px minmax(90px, 170px) 84px 150px 76px 160px 1fr;
  gap: 10px; align-items: center; padding: 6px 10px; cursor: pointer; list-style: none; }
.columns { cursor: default; font-size: 12px; color: var(--muted); border-left: 4px solid transparent; padding-bottom: 4px; }
.columns span:first-child, .columns span:nth-child(5) { text-align: right; }
li.step summary::-webkit-details-marker { display: none; }
li.step summary:hover { background: var(--bg); }
li.step details[open] summary { background: var(--bg); }
.n { color: var(--muted); text-align: right; font-variant-numeric: tabular-nums; }
.n::before { content: "▸ "; color: var(--muted); }
details[open] .n::before { content: "▾ "; }
.tool { font-weight: 600; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
.code { color: var(--error); font-size: 12.5px; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
.time { text-align: right; font-variant-numeric: tabular-nums; color: var(--muted); }
.track { position: relative; height: 10px; background: var(--bg); border-radius: 3px; }
.bar { position: absolute; top: 0; bottom: 0; min-width: 2px; background: var(--c); opacity: .45; border-radius: 3px; }
.bar .model { position: absolute; top: 0; bottom: 0; left: 0; background: var(--c); border-radius: 3px; }
.brief { color: var(--muted); overflow: hidden; text-overflow: ellipsis; white-space: nowrap; font-size: 12.5px; }
.body { padding: 4px 16px 14px 54px; }
.body dl.meta { display: grid; grid-template-columns: max-content 1fr; gap: 2px 16px; margin: 12px 0 0;
  font-size: 12.5px; }
.body dl.meta dt { color: var(--muted); }
.body dl.meta dd { margin: 0; }
.message { margin: 0 0 6px; }
.note { color: var(--muted); font-size: 12px; }
.bad { border: 1px solid var(--error); border-radius: 8px; padding: 8px 16px; margin: 16px 0; }
footer { color: var(--muted); font-size: 12px; margin-top: 20px; }
"#;

/// The report of a trace read from `source` (named in the title).
pub(crate) fn report(trace: &Trace, source: &str) -> String {
    let hash = base64::engine::general_purpose::STANDARD.encode(Sha256::digest(SCRIPT.as_bytes()));
    let mut page = String::with_capacity(16 * 1024);
    let _ = write!(
        page,
        "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; \
         script-src 'sha256-{hash}'; base-uri 'none'; form-action 'none'\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <meta name=\"generator\" content=\"harness trace html\">\n<title>Trace {}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n",
        esc(source)
    );
    let _ = writeln!(page, "<header><h1>Trace <code>{}</code></h1></header>", esc(source));
    summary(&mut page, trace);
    controls(&mut page);
    timeline(&mut page, trace);
    if !trace.bad.is_empty() {
        let _ = writeln!(
            page,
            "<section class=\"bad\" id=\"bad-lines\"><h2>{} line{} of the file {} not trace lines and {} left out</h2><ul>",
            trace.bad.len(),
            if trace.bad.len() == 1 { "" } else { "s" },
            if trace.bad.len() == 1 { "is" } else { "are" },
            if trace.bad.len() == 1 { "is" } else { "are" },
        );
        for (line, why) in &trace.bad {
            let _ = writeln!(page, "<li>line {line}: {}</li>", esc(why));
        }
        page.push_str("</ul></section>\n");
    }
    let _ = write!(
        page,
        "<footer>Written by <code>harness trace html</code> from {}. This file is self-contained: it loads nothing.</footer>\n\
         <script>{SCRIPT}</script>\n</body>\n</html>\n",
        esc(source)
    );
    page
}

fn summary(page: &mut String, trace: &Trace) {
    let s = trace.summary();
    let (ending_class, ending) = match &s.ending {
        Ending::Recorded(end) => {
            let class = match end.status {
                harness_trace::RunStatus::Finished => "st-finished",
                harness_trace::RunStatus::Failed => "st-error",
                _ => "st-rejected",
            };
            (class, end.status.as_str().replace('_', " "))
        }
        Ending::Killed => ("st-error", "ended without a record (killed?)".to_owned()),
        Ending::Finished(_) => ("st-finished", "finished".to_owned()),
        Ending::Failed(e) => ("st-error", format!("failed: {}", e.code)),
        Ending::Unfinished => ("st-rejected", "not finished: no finish call".to_owned()),
        Ending::Empty => ("", "no steps".to_owned()),
    };
    let _ = writeln!(page, "<section class=\"summary\" id=\"summary\">\n<dl>");
    let mut item = |term: &str, value: String, class: &str| {
        let _ = writeln!(page, "<div><dt>{term}</dt><dd class=\"{class}\">{}</dd></div>", esc(&value));
    };
    item("Outcome", ending, &format!("ending {ending_class}"));
    if let Some(start) = &trace.start {
        let st = &start.value;
        item("Provider", st.provider.clone(), "");
        item("Model", st.model.clone().unwrap_or_else(|| "—".to_owned()), "");
        item("Router mode", st.router_mode.clone().unwrap_or_else(|| "—".to_owned()), "");
        item("Tools", st.tools.len().to_string(), "");
        item("Harness", st.harness_version.clone(), "");
    }
    item("Steps", trace.lines.len().to_string(), "");
    item("Time", format!("{} (model {})", human_us(s.duration_us), human_us(s.model_us)), "");
    item("Tokens", format!("{} in, {} out", s.tokens.input_tokens, s.tokens.output_tokens), "");
    page.push_str("</dl>\n");
    if let Some(start) = &trace.start {
        page.push_str("<h2>Request</h2>");
        pre(page, &start.value.request);
    }
    page.push_str("<p class=\"counts\">");
    for (status, n) in Status::ALL.iter().zip(s.counts) {
        if n > 0 {
            let _ = write!(page, "<span class=\"chip st-{0}\">{n} {0}</span>", status.as_str());
        }
    }
    page.push_str("</p>\n");
    ending_detail(page, &s.ending);
    page.push_str("</section>\n");
}

/// The answer, or the error, that ended the run.
fn ending_detail(page: &mut String, ending: &Ending<'_>) {
    match ending {
        Ending::Recorded(end) => {
            if let Some(e) = &end.error {
                let _ = write!(page, "<h2>Error <code>{}</code></h2><p class=\"message\">{}</p>", esc(&e.code), esc(&e.message));
            } else {
                page.push_str("<h2>Answer</h2>");
                value(page, end.answer.as_ref().unwrap_or(&Value::Null));
            }
        }
        Ending::Killed => page.push_str(
            "<p class=\"note\">The trace has a first line but no last one: the run was stopped before it could record how it ended.</p>",
        ),
        Ending::Finished(answer) => {
            page.push_str("<h2>Answer</h2>");
            value(page, answer.unwrap_or(&Value::Null));
        }
        Ending::Failed(e) => {
            let _ = write!(page, "<h2>Error</h2><p class=\"message\">{}</p>", esc(&e.message));
        }
        Ending::Unfinished => page.push_str(
            "<p class=\"note\">The last step is not a finish call: the step or time budget ran out, or the run was stopped.</p>",
        ),
        Ending::Empty => {}
    }
}

fn controls(page: &mut String) {
    page.push_str("<nav id=\"controls\" hidden>");
    for status in Status::ALL {
        let _ =
            write!(page, "<label><input type=\"checkbox\" data-filter=\"{0}\" checked> {0}</label>", status.as_str());
    }
    page.push_str(
        "<button type=\"button\" id=\"expand\">Expand all</button><button type=\"button\" id=\"collapse\">Collapse all</button>\
         <span id=\"shown\"></span></nav>\n",
    );
}

fn timeline(page: &mut String, trace: &Trace) {
    let total = trace.lines.iter().map(|l| l.value.duration_us).fold(0u64, u64::saturating_add).max(1) as f64;
    let mut start = 0u64;
    page.push_str(
        "<div class=\"columns\" aria-hidden=\"true\"><span>step</span><span>tool</span><span>status</span><span>error</span>\
         <span>time</span><span>timeline</span><span>arguments → result</span></div>\n<ol class=\"timeline\" id=\"steps\">\n",
    );
    for line in &trace.lines {
        let s = &line.value;
        let left = start as f64 / total * 100.0;
        let width = s.duration_us as f64 / total * 100.0;
        let model =
            if s.duration_us == 0 { 0.0 } else { (s.model_us as f64 / s.duration_us as f64 * 100.0).min(100.0) };
        start = start.saturating_add(s.duration_us);
        let status = s.status.as_str();
        let _ = write!(
            page,
            "<li class=\"step st-{status}\" data-status=\"{status}\" id=\"step-{n}\"><details><summary>\
             <span class=\"n\">{n}</span><span class=\"tool\">{tool}</span><span><span class=\"badge\">{status}</span></span>\
             <span class=\"code\">{code}</span><span class=\"time\">{time}</span>\
             <span class=\"track\" title=\"model {model_time} of {time}\"><span class=\"bar\" style=\"left:{left:.3}%;width:{width:.3}%\">\
             <span class=\"model\" style=\"width:{model:.1}%\"></span></span></span><span class=\"brief\">{brief}</span></summary>\n<div class=\"body\">",
            n = s.step,
            tool = esc(s.tool.as_deref().unwrap_or("—")),
            code = esc(s.error.as_ref().map_or("", |e| e.code.as_str())),
            time = human_us(s.duration_us),
            model_time = human_us(s.model_us),
            brief = esc(&brief(s, 160)),
        );
        details(page, line);
        page.push_str("</div></details></li>\n");
    }
    page.push_str("</ol>\n");
}

fn details(page: &mut String, line: &Line) {
    let s = &line.value;
    if let Some(args) = &s.arguments {
        page.push_str("<h3>Arguments</h3>");
        value(page, args);
    }
    if let Some(result) = &s.result {
        page.push_str(if s.status == Status::Finished { "<h3>Answer</h3>" } else { "<h3>Result</h3>" });
        value(page, result);
    }
    if let Some(e) = &s.error {
        let _ =
            write!(page, "<h3>Error <code>{}</code></h3><p class=\"message\">{}</p>", esc(&e.code), esc(&e.message));
        if !e.details.is_null() && e.details != Value::Object(serde_json::Map::new()) {
            value(page, &e.details);
        }
    }
    if let Some(reasoning) = s.reasoning() {
        page.push_str("<h3>Reasoning</h3>");
        pre(page, reasoning);
    }
    if let Some(text) = &s.reply_text {
        page.push_str("<h3>Model text</h3>");
        pre(page, text);
    }
    page.push_str("<dl class=\"meta\">");
    let mut meta = |term: &str, text: String| {
        let _ = write!(page, "<dt>{term}</dt><dd>{}</dd>", esc(&text));
    };
    if let Some(plugin) = &s.plugin {
        let version = s.plugin_version.as_deref().map(|v| format!(" {v}")).unwrap_or_default();
        meta("plugin", format!("{plugin}{version}"));
    }
    if let Some(offered) = &s.offered {
        meta("offered", offered.clone());
    }
    if let Some(i) = s.call_index {
        meta("call of the reply", format!("{}", i + 1));
    }
    if let Some(mode) = &s.router_mode {
        meta("router mode", mode.clone());
    }
    if let Some(u) = s.usage {
        meta("tokens", format!("{} in, {} out", u.input_tokens, u.output_tokens));
    }
    meta("time", format!("{} (model {})", human_us(s.duration_us), human_us(s.model_us)));
    meta("trace line", line.number.to_string());
    page.push_str("</dl>");
}

/// A JSON value, pretty-printed, as escaped text.
fn value(page: &mut String, v: &Value) {
    let text = serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string());
    pre(page, &text);
}

/// Preformatted escaped text, cut past `MAX_SHOWN` bytes with a note.
fn pre(page: &mut String, text: &str) {
    let cut = (0..=MAX_SHOWN.min(text.len())).rev().find(|&i| text.is_char_boundary(i)).unwrap_or(0);
    let _ = write!(page, "<pre>{}</pre>", esc(&text[..cut]));
    if cut < text.len() {
        let _ = write!(
            page,
            "<p class=\"note\">Cut at {} KiB of {} KiB; the trace line has it whole.</p>",
            cut >> 10,
            text.len() >> 10
        );
    }
}

/// Escapes text for HTML content and quoted attribute values.
pub(crate) fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + text.len() / 8);
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            '\0' => out.push('\u{fffd}'),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use harness_trace::parse;

    #[test]
    fn everything_from_the_trace_is_escaped() {
        let line = r#"{"step":1,"tool":"<b>x</b>","arguments":{"a":"</pre><script>alert(1)</script>"},"status":"finished","result":"'\"&<img src=x onerror=alert(1)>","offered":"all","duration_us":3,"model_us":1}"#;
        let page = report(&parse(line.as_bytes()), "<t>.jsonl");
        assert!(!page.contains("<script>alert"), "{page}");
        assert!(!page.contains("<img"), "{page}");
        assert!(!page.contains("<b>x"), "{page}");
        assert!(page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
        assert!(page.contains("Trace &lt;t&gt;.jsonl"));
        assert_eq!(page.matches("<script>").count(), 1, "only the page's own script");
    }

    #[test]
    fn the_page_loads_nothing() {
        let line = r#"{"step":1,"tool":"finish","arguments":{"answer":"https://example.invalid/x.png"},"status":"finished","result":1,"offered":"all","duration_us":3,"model_us":1}"#;
        let page = report(&parse(line.as_bytes()), "t.jsonl");
        for needle in [" src=", " href=", "url(", "@import", "<link", "<img", "<iframe"] {
            assert!(!page.contains(needle), "{needle}");
        }
        assert!(page.contains("default-src 'none'"));
        let hash = base64::engine::general_purpose::STANDARD.encode(Sha256::digest(SCRIPT.as_bytes()));
        assert!(page.contains(&format!("script-src 'sha256-{hash}'")));
    }
}
