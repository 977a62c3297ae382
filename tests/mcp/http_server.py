"""Serves one of the MCP servers of this directory (tool_server, rug_pull_server) over the
official Python SDK's Streamable HTTP transport on a free loopback port, which it prints on
stdout as `PORT <n>`. Every request must carry `Authorization: Bearer $MCP_TEST_TOKEN`; any
other gets 401 with a `WWW-Authenticate` challenge that points at OAuth metadata, as a hosted
server that wants OAuth answers.

To fail on purpose: `MCP_FAIL_FIRST=N` answers 503 to the first N POSTs (a server starting up
behind its load balancer); `MCP_FAIL_CALLS=503,500` answers the first `tools/call` POST 503,
the second 500, before the server sees them (an empty item lets that one through). With
`MCP_LOG=FILE`, each `tools/call` the server is handed is one line there: `NAME ARGUMENTS`.

Usage: http_server.py MODULE"""

import importlib
import json
import os
import socket
import sys

import uvicorn

module = importlib.import_module(sys.argv[1])
app = module.server.streamable_http_app()
expected = f"Bearer {os.environ['MCP_TEST_TOKEN']}".encode()


fail_first = int(os.environ.get("MCP_FAIL_FIRST", "0"))
fail_calls = [int(s) if s else None for s in os.environ["MCP_FAIL_CALLS"].split(",")] if "MCP_FAIL_CALLS" in os.environ else []
log = os.environ.get("MCP_LOG")


async def answer(send, status, body, headers=()):
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), *headers]})
    await send({"type": "http.response.body", "body": body})


async def read_body(receive):
    """The whole request body, and a `receive` that hands it over again."""
    chunks, more = [], True
    while more:
        message = await receive()
        chunks.append(message.get("body", b""))
        more = message.get("more_body", False)
    body, given = b"".join(chunks), False

    async def again():
        nonlocal given
        if given:
            return await receive()
        given = True
        return {"type": "http.request", "body": body, "more_body": False}

    return body, again


async def bearer_only(scope, receive, send):
    global fail_first
    if scope["type"] != "http":
        return await app(scope, receive, send)
    if dict(scope["headers"]).get(b"authorization") != expected:
        challenge = b'Bearer resource_metadata="http://127.0.0.1/.well-known/oauth-protected-resource"'
        return await answer(send, 401, b'{"error": "invalid_token"}', [(b"www-authenticate", challenge)])
    if scope["method"] != "POST":
        return await app(scope, receive, send)
    if fail_first > 0:
        fail_first -= 1
        return await answer(send, 503, b'{"error": "starting"}')
    body, receive = await read_body(receive)
    try:
        message = json.loads(body)
    except ValueError:
        message = {}
    if isinstance(message, dict) and message.get("method") == "tools/call":
        if fail_calls:
            status = fail_calls.pop(0)
            if status is not None:
                return await answer(send, status, b'{"error": "on purpose"}')
        if log:
            with open(log, "a") as f:
                params = message.get("params", {})
                f.write(f"{params.get('name')} {json.dumps(params.get('arguments'), sort_keys=True)}\n")
    await app(scope, receive, send)


sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
sock.bind(("127.0.0.1", 0))
# Listening before the port is printed: a client that connects before uvicorn has started waits
# in the backlog instead of being refused, which a test would count as one retry too many.
sock.listen(128)
print(f"PORT {sock.getsockname()[1]}", flush=True)
config = uvicorn.Config(bearer_only, log_level="warning", lifespan="on")
# The app's lifespan starts the SDK's session manager; the wrapper passes it through.
uvicorn.Server(config).run(sockets=[sock])
