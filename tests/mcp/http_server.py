"""Serves one of the MCP servers of this directory (tool_server, rug_pull_server) over the
official Python SDK's Streamable HTTP transport on a free loopback port, which it prints on
stdout as `PORT <n>`. Every request must carry `Authorization: Bearer $MCP_TEST_TOKEN`; any
other gets 401 with a `WWW-Authenticate` challenge that points at OAuth metadata, as a hosted
server that wants OAuth answers.

Usage: http_server.py MODULE"""

import importlib
import os
import socket
import sys

import uvicorn

module = importlib.import_module(sys.argv[1])
app = module.server.streamable_http_app()
expected = f"Bearer {os.environ['MCP_TEST_TOKEN']}".encode()


async def bearer_only(scope, receive, send):
    if scope["type"] == "http" and dict(scope["headers"]).get(b"authorization") != expected:
        challenge = b'Bearer resource_metadata="http://127.0.0.1/.well-known/oauth-protected-resource"'
        await send({"type": "http.response.start", "status": 401,
                    "headers": [(b"www-authenticate", challenge), (b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": b'{"error": "invalid_token"}'})
        return
    await app(scope, receive, send)


sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
sock.bind(("127.0.0.1", 0))
print(f"PORT {sock.getsockname()[1]}", flush=True)
config = uvicorn.Config(bearer_only, log_level="warning", lifespan="on")
# The app's lifespan starts the SDK's session manager; the wrapper passes it through.
uvicorn.Server(config).run(sockets=[sock])
