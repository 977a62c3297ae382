//! JUnit XML: one `testsuite` per check, one `testcase` per check and tool.
//!
//! The layout CI systems render (Jenkins, GitLab, GitHub test reporters): `testsuites`, then
//! a `testsuite` for each check, named after it, then a `testcase` named after the tool
//! (`classname` is `plugin.check`), holding a `failure` or a `skipped` element when it did not
//! pass. Text from the plugin goes through [`escape`], which also drops the characters XML 1.0
//! cannot carry at all (most control characters), so the file is well-formed whatever a tool
//! returned.

use std::fmt::Write as _;
use std::time::Duration;

use crate::report::{Report, Status};

/// Escapes text for an XML attribute or element, replacing characters XML cannot carry.
pub(crate) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' => out.push_str("&#9;"),
            '\n' => out.push_str("&#10;"),
            '\r' => out.push_str("&#13;"),
            c if (c as u32) < 0x20 || c == '\u{fffe}' || c == '\u{ffff}' => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    out
}

fn seconds(d: Duration) -> String {
    format!("{:.3}", d.as_secs_f64())
}

impl Report {
    /// The report as a JUnit XML document.
    pub fn junit(&self) -> String {
        let subject = self.subject();
        let outcomes = || self.checks.iter().flat_map(|c| &c.outcomes);
        let count = |s: Status| outcomes().filter(|o| o.status == s).count();
        let mut x = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
        let _ = writeln!(
            x,
            "<testsuites name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"0\" skipped=\"{}\" time=\"{}\">",
            escape(&format!("harness plugins check {subject}")),
            outcomes().count(),
            count(Status::Failed),
            count(Status::Skipped),
            seconds(self.duration)
        );
        for c in &self.checks {
            let of = |s: Status| c.outcomes.iter().filter(|o| o.status == s).count();
            let _ = writeln!(
                x,
                "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"0\" skipped=\"{}\" time=\"{}\">",
                c.check,
                c.outcomes.len(),
                of(Status::Failed),
                of(Status::Skipped),
                seconds(c.duration)
            );
            let _ = writeln!(
                x,
                "    <properties><property name=\"seed\" value=\"{}\"/><property name=\"cases\" value=\"{}\"/><property name=\"file\" value=\"{}\"/></properties>",
                self.seed,
                self.cases,
                escape(&self.file.display().to_string())
            );
            for o in &c.outcomes {
                let name = o.tool.as_deref().unwrap_or(&subject);
                let _ = write!(
                    x,
                    "    <testcase name=\"{}\" classname=\"{}\" time=\"{}\"",
                    escape(name),
                    escape(&format!("{subject}.{}", c.check)),
                    seconds(o.duration)
                );
                match o.status {
                    Status::Passed => x.push_str("/>\n"),
                    Status::Skipped => {
                        let _ = writeln!(x, ">\n      <skipped message=\"{}\"/>\n    </testcase>", escape(&o.detail));
                    }
                    Status::Failed => {
                        let lines: Vec<String> = o.failures.iter().map(|f| f.describe(o.tool.as_deref())).collect();
                        let mut body = lines.join("\n");
                        if o.more_failures > 0 {
                            let _ = write!(body, "\n... and {} more", o.more_failures);
                        }
                        let message = lines.first().map_or(o.detail.as_str(), String::as_str);
                        let _ = writeln!(
                            x,
                            ">\n      <failure message=\"{}\" type=\"{}\">{}</failure>\n    </testcase>",
                            escape(message),
                            c.check,
                            escape(&body)
                        );
                    }
                }
            }
            x.push_str("  </testsuite>\n");
        }
        x.push_str("</testsuites>\n");
        x
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_and_control_characters_are_escaped() {
        assert_eq!(escape("a<b>&\"c'"), "a&lt;b&gt;&amp;&quot;c&apos;");
        assert_eq!(escape("x\0y\u{1b}"), "x\\u{0}y\\u{1b}");
        assert_eq!(escape("line\nnext"), "line&#10;next");
        assert_eq!(escape("日本 🦀"), "日本 🦀");
    }
}
