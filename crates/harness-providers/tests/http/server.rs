//! A model API stand-in: a real HTTP server on 127.0.0.1 that answers canned responses in
//! order and records every request it saw.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, to_bytes};
use axum::extract::{Request, State};
use axum::response::Response;
use serde_json::{Value, json};

/// One canned response.
#[derive(Debug, Clone)]
pub(crate) struct Canned {
    pub(crate) status: u16,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: String,
    /// Held back this long before answering.
    pub(crate) delay: Duration,
}

impl Canned {
    pub(crate) fn json(status: u16, body: Value) -> Self {
        Self { status, headers: Vec::new(), body: body.to_string(), delay: Duration::ZERO }
    }

    pub(crate) fn raw(status: u16, body: &str) -> Self {
        Self { status, headers: Vec::new(), body: body.to_owned(), delay: Duration::ZERO }
    }

    pub(crate) fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }

    pub(crate) fn delayed(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }
}

/// A request as the server saw it.
#[derive(Debug, Clone)]
pub(crate) struct Seen {
    pub(crate) path: String,
    /// Header names in lower case.
    pub(crate) headers: HashMap<String, String>,
    pub(crate) raw: String,
    pub(crate) body: Value,
}

#[derive(Default)]
struct Shared {
    replies: VecDeque<Canned>,
    seen: Vec<Seen>,
    /// What a server's own endpoints answer, by path (llama.cpp's `GET /props`, Ollama's
    /// `GET /api/ps` and `POST /api/show`, OpenRouter's `GET /v1/models`); 404 for any other,
    /// as for `/tokenize`. Not canned replies, and not in `seen`: the tests count the chat
    /// requests.
    own: HashMap<String, Value>,
}

/// A running server; it stops with the test's runtime.
pub(crate) struct MockApi {
    /// `http://127.0.0.1:PORT`, no trailing slash.
    pub(crate) origin: String,
    shared: Arc<Mutex<Shared>>,
}

impl MockApi {
    pub(crate) async fn start(replies: Vec<Canned>) -> Self {
        Self::with_props(replies, None).await
    }

    /// A server that also answers `GET /props` with `props`, as llama.cpp's does.
    pub(crate) async fn with_props(replies: Vec<Canned>, props: Option<Value>) -> Self {
        Self::with_endpoints(replies, props.map(|p| ("/props", p)).into_iter().collect()).await
    }

    /// A server that also answers its own `endpoints` (path, JSON), GET or POST.
    pub(crate) async fn with_endpoints(replies: Vec<Canned>, endpoints: Vec<(&str, Value)>) -> Self {
        let own = endpoints.into_iter().map(|(path, body)| (path.to_owned(), body)).collect();
        let shared = Arc::new(Mutex::new(Shared { replies: replies.into(), seen: Vec::new(), own }));
        let app = Router::new().fallback(answer).with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind 127.0.0.1");
        let addr = listener.local_addr().expect("local address");
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self { origin: format!("http://{addr}"), shared }
    }

    /// Every request so far, in order.
    pub(crate) fn seen(&self) -> Vec<Seen> {
        self.shared.lock().expect("lock").seen.clone()
    }
}

async fn answer(State(shared): State<Arc<Mutex<Shared>>>, request: Request) -> Response {
    let path = request.uri().path().to_owned();
    // A server's own endpoints (llama.cpp's /props, /tokenize, Ollama's /api/...) are no chat
    // request: they take no canned reply.
    let own = shared.lock().expect("lock").own.get(&path).cloned();
    if request.method() == axum::http::Method::GET
        || ["/tokenize", "/api/show"].contains(&path.as_str())
        || own.is_some()
    {
        let (status, body) = match own {
            Some(own) => (200, own.to_string()),
            None => (404, json!({"error": {"message": "mock: not found"}}).to_string()),
        };
        return Response::builder().status(status).body(Body::from(body)).expect("response builds");
    }
    let headers = request
        .headers()
        .iter()
        .map(|(k, v)| (k.as_str().to_owned(), String::from_utf8_lossy(v.as_bytes()).into_owned()))
        .collect();
    let raw = to_bytes(request.into_body(), usize::MAX).await.map(|b| String::from_utf8_lossy(&b).into_owned());
    let raw = raw.unwrap_or_default();
    let body = serde_json::from_str(&raw).unwrap_or(Value::Null);
    let canned = {
        let mut s = shared.lock().expect("lock");
        s.seen.push(Seen { path, headers, raw, body });
        s.replies.pop_front()
    };
    // Running out is a test mistake: a status no provider retries.
    let canned =
        canned.unwrap_or_else(|| Canned::json(418, json!({"error": {"message": "mock: no canned reply left"}})));
    // A slow server, where a test asks for one: the delay is the behaviour under test.
    tokio::time::sleep(canned.delay).await;
    let mut response = Response::builder().status(canned.status).header("content-type", "application/json");
    for (k, v) in &canned.headers {
        response = response.header(k, v);
    }
    response.body(Body::from(canned.body)).expect("response builds")
}

/// A chat completions answer with these tool calls: `(id, name, arguments as sent)`.
pub(crate) fn openai_calls(calls: &[(&str, &str, &str)]) -> Canned {
    let calls: Vec<Value> = calls
        .iter()
        .map(|(id, name, args)| json!({"id": id, "type": "function", "function": {"name": name, "arguments": args}}))
        .collect();
    Canned::json(
        200,
        json!({
            "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "test-model",
            "choices": [{"index": 0, "finish_reason": "tool_calls",
                "message": {"role": "assistant", "content": null, "tool_calls": calls}}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13}
        }),
    )
}

/// A chat completions answer with text only and an empty `tool_calls`.
pub(crate) fn openai_text(text: &str) -> Canned {
    Canned::json(
        200,
        json!({
            "id": "chatcmpl-2", "object": "chat.completion", "created": 1, "model": "test-model",
            "choices": [{"index": 0, "finish_reason": "stop",
                "message": {"role": "assistant", "content": text, "tool_calls": []}}],
            "usage": {"prompt_tokens": 7, "completion_tokens": 2, "total_tokens": 9}
        }),
    )
}

/// An OpenAI-shaped error body.
pub(crate) fn openai_error(status: u16, message: &str) -> Canned {
    Canned::json(
        status,
        json!({"error": {"message": message, "type": "invalid_request_error", "param": null, "code": null}}),
    )
}

/// A Messages answer with these tool uses: `(id, name, input)`.
pub(crate) fn anthropic_tool_uses(uses: &[(&str, &str, Value)]) -> Canned {
    let mut content = vec![json!({"type": "text", "text": "Working on it."})];
    content.extend(
        uses.iter().map(|(id, name, input)| json!({"type": "tool_use", "id": id, "name": name, "input": input})),
    );
    Canned::json(
        200,
        json!({
            "id": "msg_1", "type": "message", "role": "assistant", "model": "test-model",
            "content": content, "stop_reason": "tool_use", "stop_sequence": null,
            "usage": {"input_tokens": 20, "output_tokens": 8}
        }),
    )
}
