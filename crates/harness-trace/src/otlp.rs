//! OpenTelemetry export: the trace's records as spans over OTLP/HTTP, following the GenAI
//! semantic conventions. One `invoke_agent` span per run, a `chat` span per model request and
//! an `execute_tool` span per call, children of the run's.
//!
//! Another receiver of the same records as the JSON Lines file ([`OtlpSink`] is a
//! [`TraceSink`]): the loop does not know it exists. Spans are queued (bounded; dropped when
//! full) and sent from the SDK's own thread, so a step never waits for the collector; an
//! export that fails costs one warning on stderr, never the run.

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime};

use harness_core::{RunEnd, RunStart, StepStatus, TraceEntry, TraceSink};
use opentelemetry::trace::{Span as _, SpanKind, Status, TraceContextExt, Tracer as _, TracerProvider as _};
use opentelemetry::{Array, Context, KeyValue, StringValue, Value};
use opentelemetry_otlp::WithExportConfig;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{
    BatchConfigBuilder, BatchSpanProcessor, SdkTracer, SdkTracerProvider, SpanData, SpanExporter,
};

/// The variable that turns on message and argument content in spans.
pub const CAPTURE_CONTENT: &str = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT";

/// Why export could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum OtlpError {
    /// The endpoint is not an http(s) URL.
    #[error(
        "OTLP endpoint {endpoint:?} ({from}) is not an http:// or https:// URL; give the collector's base URL, such as http://localhost:4318"
    )]
    BadEndpoint {
        /// The URL given.
        endpoint: String,
        /// Where it came from: `--otlp` or a variable.
        from: String,
    },
    /// The exporter could not be built.
    #[error("cannot set up OTLP export to {endpoint}: {message}")]
    Exporter {
        /// Where spans would go.
        endpoint: String,
        /// What the exporter said.
        message: String,
    },
}

/// Where spans go and what they may hold, from `--otlp` and the standard variables.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OtlpSettings {
    /// The collector's traces URL (`.../v1/traces`).
    pub endpoint: String,
    /// `service.name` of the spans' resource.
    pub service_name: String,
    /// Message and argument content goes into spans.
    pub capture_content: bool,
}

impl OtlpSettings {
    /// The settings from `--otlp URL` (a collector's base URL, as `OTEL_EXPORTER_OTLP_ENDPOINT`)
    /// or else the standard variables; `None` when neither asks for export.
    pub fn resolve(flag: Option<&str>, env: impl Fn(&str) -> Option<String>) -> Result<Option<Self>, OtlpError> {
        let non_empty = |name: &str| env(name).filter(|v| !v.trim().is_empty());
        let endpoint =
            match (flag, non_empty("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"), non_empty("OTEL_EXPORTER_OTLP_ENDPOINT")) {
                (Some(url), _, _) => traces_url(url, "--otlp")?,
                // The signal's own variable is the whole URL, as the specification says.
                (None, Some(url), _) => checked(url, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")?,
                (None, None, Some(url)) => traces_url(&url, "OTEL_EXPORTER_OTLP_ENDPOINT")?,
                (None, None, None) => return Ok(None),
            };
        Ok(Some(Self {
            endpoint,
            service_name: non_empty("OTEL_SERVICE_NAME").unwrap_or_else(|| "harness".to_owned()),
            capture_content: env(CAPTURE_CONTENT).is_some_and(|v| v.trim().eq_ignore_ascii_case("true")),
        }))
    }
}

fn checked(url: String, from: &str) -> Result<String, OtlpError> {
    if url.starts_with("http://") || url.starts_with("https://") {
        Ok(url)
    } else {
        Err(OtlpError::BadEndpoint { endpoint: url, from: from.to_owned() })
    }
}

/// A base URL with `/v1/traces` appended, as `OTEL_EXPORTER_OTLP_ENDPOINT` is read.
fn traces_url(base: &str, from: &str) -> Result<String, OtlpError> {
    let base = checked(base.trim().to_owned(), from)?;
    if base.trim_end_matches('/').ends_with("/v1/traces") {
        return Ok(base);
    }
    Ok(format!("{}/v1/traces", base.trim_end_matches('/')))
}

/// The exporter: one per process, shared by every run it exports. Call [`Otlp::shutdown`] at
/// the end, outside any async runtime, to send what is queued (bounded by the export timeout).
pub struct Otlp {
    provider: SdkTracerProvider,
    tracer: SdkTracer,
    settings: OtlpSettings,
}

/// How long one export may take; the last flush at exit waits at most this long.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(5);
/// Spans queued before new ones are dropped: a slow collector never holds a step.
const MAX_QUEUE: usize = 4096;

impl Otlp {
    /// Sets up export; headers come from `OTEL_EXPORTER_OTLP_HEADERS` (read by the exporter).
    /// Must be called outside an async runtime (the HTTP client runs its own thread).
    pub fn start(settings: OtlpSettings) -> Result<Self, OtlpError> {
        let fail = |e: &dyn std::fmt::Display| OtlpError::Exporter {
            endpoint: settings.endpoint.clone(),
            message: e.to_string(),
        };
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_endpoint(settings.endpoint.clone())
            .with_timeout(EXPORT_TIMEOUT)
            .build()
            .map_err(|e| fail(&e))?;
        let warning =
            WarnOnce { inner: exporter, endpoint: settings.endpoint.clone(), warned: Arc::new(AtomicBool::new(false)) };
        let batch = BatchConfigBuilder::default()
            .with_max_queue_size(MAX_QUEUE)
            .with_scheduled_delay(Duration::from_millis(500))
            .build();
        let processor = BatchSpanProcessor::builder(warning).with_batch_config(batch).build();
        let resource = Resource::builder().with_service_name(settings.service_name.clone()).build();
        let provider = SdkTracerProvider::builder().with_span_processor(processor).with_resource(resource).build();
        let tracer = provider.tracer("harness");
        Ok(Self { provider, tracer, settings })
    }

    /// Where spans go.
    pub fn settings(&self) -> &OtlpSettings {
        &self.settings
    }

    /// A sink for one run (or for `mcp serve`'s calls).
    pub fn sink(&self) -> OtlpSink {
        self.sink_factory().sink()
    }

    /// A handle that makes sinks, for runs on other threads (a batch's).
    pub fn sink_factory(&self) -> OtlpSinks {
        OtlpSinks { tracer: self.tracer.clone(), capture: self.settings.capture_content }
    }

    /// Sends what is queued and stops; waits at most the export timeout.
    pub fn shutdown(self) {
        // A failure here was already warned about by the exporter.
        let _ = self.provider.shutdown_with_timeout(EXPORT_TIMEOUT);
    }
}

/// Makes [`OtlpSink`]s; cheap to clone, shareable across threads.
#[derive(Clone)]
pub struct OtlpSinks {
    tracer: SdkTracer,
    capture: bool,
}

impl OtlpSinks {
    /// A sink for one run.
    pub fn sink(&self) -> OtlpSink {
        OtlpSink { tracer: self.tracer.clone(), capture: self.capture, run: None }
    }
}

/// The OTLP exporter, saying once on stderr when the collector cannot be reached.
#[derive(Debug)]
struct WarnOnce<E> {
    inner: E,
    endpoint: String,
    warned: Arc<AtomicBool>,
}

impl<E: SpanExporter> SpanExporter for WarnOnce<E> {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let result = self.inner.export(batch).await;
        if let Err(e) = &result
            && !self.warned.swap(true, Ordering::Relaxed)
        {
            eprintln!(
                "harness: warning: cannot export spans to {} ({e}); the run goes on, its spans are dropped",
                self.endpoint
            );
        }
        result
    }
    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }
    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }
    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

/// What a run's spans share: its root span, and what each child repeats.
struct RunSpan {
    cx: Context,
    provider: String,
    model: Option<String>,
}

/// Receives a run's records and turns them into spans. Never fails the run.
pub struct OtlpSink {
    tracer: SdkTracer,
    capture: bool,
    run: Option<RunSpan>,
}

fn kv(key: &'static str, value: impl Into<Value>) -> KeyValue {
    KeyValue::new(key, value)
}

fn micros(us: u64) -> Duration {
    Duration::from_micros(us)
}

impl OtlpSink {
    fn parent(&self) -> Context {
        self.run.as_ref().map_or_else(Context::new, |r| r.cx.clone())
    }

    /// The `chat` span of a step that asked the model.
    fn chat(&self, entry: &TraceEntry<'_>, start: SystemTime) {
        let model = self.run.as_ref().and_then(|r| r.model.clone());
        let provider = self.run.as_ref().map_or_else(|| "unknown".to_owned(), |r| r.provider.clone());
        let mut attributes = vec![
            kv("gen_ai.operation.name", "chat"),
            kv("gen_ai.provider.name", provider),
            kv("openinference.span.kind", "LLM"),
            kv("harness.step", i64::from(entry.step)),
        ];
        attributes.extend(model.clone().map(|m| kv("gen_ai.request.model", m)));
        if let Some(u) = entry.usage {
            attributes.push(kv("gen_ai.usage.input_tokens", i64::try_from(u.input_tokens).unwrap_or(i64::MAX)));
            attributes.push(kv("gen_ai.usage.output_tokens", i64::try_from(u.output_tokens).unwrap_or(i64::MAX)));
        }
        if let Some(reply) = entry.reply {
            let reason = reply
                .finish_reason
                .clone()
                .unwrap_or_else(|| if reply.calls.is_empty() { "stop" } else { "tool_calls" }.to_owned());
            attributes.push(kv(
                "gen_ai.response.finish_reasons",
                Value::Array(Array::String(vec![StringValue::from(reason)])),
            ));
            attributes.extend(reply.router_mode.clone().map(|m| kv("harness.router_mode", m)));
            if self.capture {
                attributes.push(kv("gen_ai.output.messages", output_messages(reply).to_string()));
            }
        }
        let name = match &model {
            Some(m) => format!("chat {m}"),
            None => "chat".to_owned(),
        };
        let builder = self
            .tracer
            .span_builder(name)
            .with_kind(SpanKind::Client)
            .with_start_time(start)
            .with_attributes(attributes);
        let mut span = self.tracer.build_with_context(builder, &self.parent());
        let asked_failed = entry.error.filter(|e| matches!(e.code.as_str(), "provider_error" | "reply_too_large"));
        if let Some(e) = asked_failed {
            span.set_attribute(kv("error.type", e.code.as_str()));
            span.set_status(Status::error(e.message.clone()));
        }
        span.end_with_timestamp(start + micros(entry.model_us));
    }

    /// The `execute_tool` span of a step that called a tool (not `finish`: that is the answer).
    fn tool(&self, entry: &TraceEntry<'_>, tool: &str, start: SystemTime, end: SystemTime) {
        let mut attributes = vec![
            kv("gen_ai.operation.name", "execute_tool"),
            kv("gen_ai.tool.name", tool.to_owned()),
            kv("gen_ai.tool.type", "function"),
            kv("openinference.span.kind", "TOOL"),
            kv("harness.step", i64::from(entry.step)),
            kv("harness.step.status", status_name(entry.status)),
        ];
        let call_id = entry.reply.and_then(|r| r.calls.get(entry.call_index.unwrap_or(0))).and_then(|c| c.id.clone());
        attributes.extend(call_id.map(|id| kv("gen_ai.tool.call.id", id)));
        attributes.extend(entry.plugin.map(|p| kv("harness.plugin.name", p.to_owned())));
        attributes.extend(entry.plugin_version.map(|v| kv("harness.plugin.version", v.to_owned())));
        attributes.extend(entry.mcp_server.map(|s| kv("harness.mcp.server", s.to_owned())));
        if self.capture {
            attributes.extend(entry.arguments.map(|a| kv("gen_ai.tool.call.arguments", a.to_string())));
            attributes.extend(entry.result.map(|r| kv("gen_ai.tool.call.result", r.to_string())));
        }
        let builder = self
            .tracer
            .span_builder(format!("execute_tool {tool}"))
            .with_kind(SpanKind::Internal)
            .with_start_time(start)
            .with_attributes(attributes);
        let mut span = self.tracer.build_with_context(builder, &self.parent());
        if let Some(e) = entry.error {
            span.set_attribute(kv("error.type", e.code.as_str()));
            span.set_status(Status::error(e.message.clone()));
        }
        span.end_with_timestamp(end);
    }
}

/// A reply as the GenAI conventions write output messages: one assistant message whose parts
/// are its reasoning, text and tool calls.
fn output_messages(reply: &harness_core::ModelReply) -> serde_json::Value {
    let mut parts = Vec::new();
    if let Some(r) = &reply.reasoning {
        parts.push(serde_json::json!({ "type": "reasoning", "content": r }));
    }
    if let Some(t) = &reply.text {
        parts.push(serde_json::json!({ "type": "text", "content": t }));
    }
    for c in &reply.calls {
        parts.push(serde_json::json!({ "type": "tool_call", "id": c.id, "name": c.name, "arguments": c.arguments }));
    }
    let mut message = serde_json::json!({ "role": "assistant", "parts": parts });
    if let Some(reason) = &reply.finish_reason {
        message["finish_reason"] = reason.as_str().into();
    }
    serde_json::json!([message])
}

fn status_name(status: StepStatus) -> &'static str {
    match status {
        StepStatus::Ok => "ok",
        StepStatus::Rejected => "rejected",
        StepStatus::Error => "error",
        StepStatus::Finished => "finished",
        StepStatus::AwaitingApproval => "awaiting_approval",
    }
}

impl TraceSink for OtlpSink {
    fn begin(&mut self, start: &RunStart) -> io::Result<()> {
        let mut attributes = vec![
            kv("gen_ai.operation.name", "invoke_agent"),
            kv("gen_ai.agent.name", "harness"),
            kv("gen_ai.provider.name", start.provider.clone()),
            kv("openinference.span.kind", "AGENT"),
            kv("harness.version", start.harness_version.clone()),
            kv("harness.tools", i64::try_from(start.tools.len()).unwrap_or(i64::MAX)),
            kv("harness.max_steps", i64::from(start.limits.max_steps)),
        ];
        attributes.extend(start.model.clone().map(|m| kv("gen_ai.request.model", m)));
        attributes.extend(start.router_mode.clone().map(|m| kv("harness.router_mode", m)));
        if self.capture {
            let input =
                serde_json::json!([{ "role": "user", "parts": [{ "type": "text", "content": start.request }] }]);
            attributes.push(kv("gen_ai.input.messages", input.to_string()));
        }
        let builder = self
            .tracer
            .span_builder("invoke_agent harness")
            .with_kind(SpanKind::Internal)
            .with_start_time(SystemTime::now())
            .with_attributes(attributes);
        let span = self.tracer.build_with_context(builder, &Context::new());
        self.run = Some(RunSpan {
            cx: Context::new().with_span(span),
            provider: start.provider.clone(),
            model: start.model.clone(),
        });
        Ok(())
    }

    fn record(&mut self, entry: &TraceEntry<'_>) -> io::Result<()> {
        let end = SystemTime::now();
        let start = end.checked_sub(micros(entry.duration_us)).unwrap_or(end);
        let asked = entry.reply.is_some()
            || entry.error.is_some_and(|e| matches!(e.code.as_str(), "provider_error" | "reply_too_large"));
        if asked {
            self.chat(entry, start);
        }
        let tool_start = if asked { start + micros(entry.model_us) } else { start };
        match entry.tool {
            Some(tool) if tool != harness_core::FINISH => self.tool(entry, tool, tool_start.min(end), end),
            _ => {}
        }
        Ok(())
    }

    fn end(&mut self, end: &RunEnd) -> io::Result<()> {
        let Some(run) = self.run.take() else { return Ok(()) };
        let span = run.cx.span();
        let status =
            serde_json::to_value(end.status).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default();
        span.set_attributes([
            kv("harness.run.status", status),
            kv("harness.run.steps", i64::from(end.steps)),
            kv("gen_ai.usage.input_tokens", i64::try_from(end.usage.input_tokens).unwrap_or(i64::MAX)),
            kv("gen_ai.usage.output_tokens", i64::try_from(end.usage.output_tokens).unwrap_or(i64::MAX)),
        ]);
        if self.capture
            && let Some(answer) = &end.answer
        {
            let text = answer.as_str().map_or_else(|| answer.to_string(), str::to_owned);
            let output = serde_json::json!([{ "role": "assistant", "parts": [{ "type": "text", "content": text }] }]);
            span.set_attribute(kv("gen_ai.output.messages", output.to_string()));
        }
        if let Some(e) = &end.error {
            span.set_attribute(kv("error.type", e.code.as_str()));
            span.set_status(Status::error(e.message.clone()));
        }
        span.end_with_timestamp(SystemTime::now());
        Ok(())
    }
}

/// A run cut short (an early return, a panic) still ends its root span.
impl Drop for OtlpSink {
    fn drop(&mut self) {
        if let Some(run) = self.run.take() {
            run.cx.span().end();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| vars.iter().find(|(k, _)| *k == name).map(|(_, v)| (*v).to_owned())
    }

    #[test]
    fn settings_come_from_the_flag_then_the_standard_variables() {
        assert_eq!(OtlpSettings::resolve(None, env(&[])).unwrap(), None);
        let s = OtlpSettings::resolve(Some("http://127.0.0.1:4318/"), env(&[])).unwrap().unwrap();
        assert_eq!(
            (s.endpoint.as_str(), s.service_name.as_str(), s.capture_content),
            ("http://127.0.0.1:4318/v1/traces", "harness", false)
        );
        let vars = [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "https://collector:4318/base"),
            ("OTEL_SERVICE_NAME", "agents"),
            (CAPTURE_CONTENT, "TRUE"),
        ];
        let s = OtlpSettings::resolve(None, env(&vars)).unwrap().unwrap();
        assert_eq!(
            (s.endpoint.as_str(), s.service_name.as_str(), s.capture_content),
            ("https://collector:4318/base/v1/traces", "agents", true)
        );
        let whole =
            [("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://c/custom"), ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://x")];
        assert_eq!(OtlpSettings::resolve(None, env(&whole)).unwrap().unwrap().endpoint, "http://c/custom");
        let e = OtlpSettings::resolve(Some("localhost:4318"), env(&[])).unwrap_err().to_string();
        assert!(e.contains("\"localhost:4318\" (--otlp)") && e.contains("http://localhost:4318"), "{e}");
    }
}
