"""A hand-written MCP server over Streamable HTTP (JSON answers, no SDK) that misbehaves on
purpose, on a free loopback port, which it prints on stdout as `PORT <n>`. Each request's
method is one line on stderr (`METHOD <name>`), so that a test can tell what the client sent.

Usage: hostile_server.py MODE, where MODE is one of
  endless         every tools/list page is 2 MiB of tools, each with a nextCursor (up to
                  128 pages, then an error)
  loud            tool `shout` fails with 12 MiB of error text (isError), and tool
                  `shout_rpc` with a 12 MiB JSON-RPC error message
  discover-empty  answers `server/discover` with an empty result `{}`, as a server that does
                  not know the method but answers everything; offers tool `hello`
  sse-close       answers `server/discover` with `{}` too, and `tools/call` on an SSE
                  stream that it closes, gracefully, after a first event (`id: ev-1`,
                  `retry: 700`) and before the result; the result comes on the GET that
                  resumes the stream with `Last-Event-ID: ev-1`
                  (logged as `RESUMED <event id> AFTER <ms>`)
  asks            answers `tools/call` of `hello` on an SSE stream that first asks the client
                  for elicitation, then for sampling, waits for each answer, and returns the
                  two answers as the tool's text
"""

import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODE = sys.argv[1]
HUGE = 12 << 20
RETRY_MS = 700

# After this many pages (256 MiB) the endless listing fails instead: a client without caps
# (this test against a harness without them) is then grown by that much, not without end.
GIVE_UP = 128

# The client's answers to this server's own requests, by request id.
ANSWERS = {}
ANSWERED = threading.Condition()

# The call whose stream was closed, by the id of its last event: (request id, closed at).
PENDING = {}

TOOL_SCHEMA = {"type": "object", "properties": {}}


def page_of_tools(page):
    """About 2 MiB of tools, named for their page so that none repeats."""
    pad = "x" * 10000
    return [{"name": f"t{page}_{i}", "description": pad, "inputSchema": TOOL_SCHEMA} for i in range(200)]


def tools():
    if MODE == "loud":
        return [{"name": "shout", "description": "Fails loudly.", "inputSchema": TOOL_SCHEMA},
                {"name": "shout_rpc", "description": "Fails loudly.", "inputSchema": TOOL_SCHEMA}]
    return [{"name": "hello", "description": "Says hello.", "inputSchema": TOOL_SCHEMA}]


def result(method, params):
    """The result of a request, or `None` for a method not found."""
    if method == "initialize":
        return {"protocolVersion": params.get("protocolVersion", "2025-06-18"),
                "capabilities": {"tools": {}}, "serverInfo": {"name": "hostile", "version": "1"}}
    if method == "server/discover" and MODE in ("discover-empty", "sse-close"):
        return {}
    if method == "ping":
        return {}
    if method == "tools/list":
        if MODE == "endless":
            page = int((params or {}).get("cursor") or 0)
            if page >= GIVE_UP:
                return None
            return {"tools": page_of_tools(page), "nextCursor": str(page + 1)}
        return {"tools": tools()}
    if method == "tools/call":
        name = params.get("name")
        if name == "shout":
            return {"content": [{"type": "text", "text": "A" * HUGE}], "isError": True}
        if name == "hello":
            return {"content": [{"type": "text", "text": "hi"}]}
    return None


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def answer(self, status, body=None):
        data = b"" if body is None else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        last = self.headers.get("Last-Event-ID")
        if MODE != "sse-close" or last not in PENDING:
            self.answer(405)
            return
        request_id, closed_at = PENDING.pop(last)
        waited = int((time.monotonic() - closed_at) * 1000)
        print(f"RESUMED {last} AFTER {waited}", file=sys.stderr, flush=True)
        answer = {"jsonrpc": "2.0", "id": request_id,
                  "result": {"content": [{"type": "text", "text": "hi, resumed"}]}}
        self.sse([f"id: ev-2\ndata: {json.dumps(answer)}\n\n"])

    def ask_then_answer(self, call_id):
        """Asks the client for elicitation and sampling on the call's SSE stream, then answers
        the call with what the client said to each."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        asks = [("ask-1", "elicitation/create",
                 {"message": "Your name?", "requestedSchema": {"type": "object", "properties": {}}}),
                ("ask-2", "sampling/createMessage",
                 {"messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}], "maxTokens": 5})]
        said = []
        for ask_id, ask_method, ask_params in asks:
            request = {"jsonrpc": "2.0", "id": ask_id, "method": ask_method, "params": ask_params}
            self.wfile.write(f"data: {json.dumps(request)}\n\n".encode())
            self.wfile.flush()
            with ANSWERED:
                ANSWERED.wait_for(lambda: ask_id in ANSWERS, timeout=10)
                said.append(ANSWERS.get(ask_id, {"unanswered": ask_id}))
        answer = {"jsonrpc": "2.0", "id": call_id,
                  "result": {"content": [{"type": "text", "text": json.dumps(said)}]}}
        self.wfile.write(f"data: {json.dumps(answer)}\n\n".encode())
        self.wfile.flush()
        self.close_connection = True

    def sse(self, events):
        """Events on an SSE stream, which then ends: the connection is closed, gracefully."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        for event in events:
            self.wfile.write(event.encode())
        self.wfile.flush()
        self.close_connection = True

    def do_DELETE(self):
        self.answer(200)

    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        message = json.loads(self.rfile.read(length))
        method = message.get("method")
        print(f"METHOD {method}", file=sys.stderr, flush=True)
        if "id" not in message:
            self.answer(202)
            return
        if method is None:
            # The client's answer to a request of this server's.
            with ANSWERED:
                ANSWERS[message["id"]] = message
                ANSWERED.notify_all()
            self.answer(202)
            return
        params = message.get("params") or {}
        if method == "tools/call" and params.get("name") == "shout_rpc":
            error = {"code": -32000, "message": "B" * HUGE}
            self.answer(200, {"jsonrpc": "2.0", "id": message["id"], "error": error})
            return
        if MODE == "asks" and method == "tools/call":
            self.ask_then_answer(message["id"])
            return
        if MODE == "sse-close" and method == "tools/call":
            PENDING["ev-1"] = (message["id"], time.monotonic())
            self.sse([f"id: ev-1\nretry: {RETRY_MS}\ndata: \n\n"])
            return
        found = result(method, params)
        if found is None:
            error = {"code": -32601, "message": f"method not found: {method}"}
            self.answer(200, {"jsonrpc": "2.0", "id": message["id"], "error": error})
            return
        self.answer(200, {"jsonrpc": "2.0", "id": message["id"], "result": found})


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(f"PORT {server.server_address[1]}", flush=True)
server.serve_forever()
