"""A hand-written MCP server over Streamable HTTP (JSON answers, no SDK) protected by OAuth,
which is its own authorization server, on a free loopback port that it prints on stdout as
`PORT <n>`. It publishes protected resource metadata (RFC 9728, named in its 401 challenge)
and authorization server metadata (RFC 8414) that offers the client credentials grant with
`client_secret_basic` and `client_secret_post`, for the one client `harness-e2e` whose
secret is `e2e-client-secret`. Every token it grants is new and logged on stderr
(`GRANTED <token> SCOPE <scope> AUTH <basic|post>`), as every MCP request is
(`METHOD <name> TOKEN <token or ->`), so that a test can look for the tokens elsewhere.

Usage: oauth_server.py MODE, where MODE is one of
  plain        tool `hello` answers "hi" to any token granted
  step-up      scopes_supported is ["tools:read"]; `hello` needs "tools:call" as well, and
               a token without it gets 403 insufficient_scope naming both
  always-more  `hello` answers 403 insufficient_scope to every token, asking for one more
               scope each time
  mismatch     the protected resource metadata names another server's resource
  code-only    the authorization server offers the authorization code grant alone
  short        tokens expire in 20 s (within the client's 30 s margin: each is stale at once)
"""

import base64
import json
import secrets
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs

MODE = sys.argv[1]
CLIENT_ID = "harness-e2e"
CLIENT_SECRET = "e2e-client-secret"
# Every token granted, with its scopes.
GRANTED = {}
ASKED = [0]


def log(line):
    print(line, file=sys.stderr, flush=True)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def base(self):
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def answer(self, status, body=None, headers=()):
        data = b"" if body is None else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        base = self.base()
        if self.path == "/.well-known/oauth-protected-resource/mcp":
            resource = "https://elsewhere.example/mcp" if MODE == "mismatch" else f"{base}/mcp"
            scopes = ["tools:read"] if MODE == "step-up" else []
            self.answer(200, {"resource": resource, "authorization_servers": [base], "scopes_supported": scopes})
        elif self.path == "/.well-known/oauth-authorization-server":
            self.answer(200, {"issuer": base, "token_endpoint": f"{base}/token",
                              "grant_types_supported": ["authorization_code"] if MODE == "code-only"
                              else ["client_credentials"],
                              "token_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post"]})
        else:
            self.answer(404 if self.path != "/mcp" else 405)

    def do_DELETE(self):
        self.answer(200)

    def token(self, form):
        """The client credentials grant, for the one client, by either method."""
        given = self.headers.get("Authorization", "")
        if given.startswith("Basic "):
            client_id, _, secret = base64.b64decode(given[6:]).decode().partition(":")
            how = "basic"
        else:
            client_id, secret, how = form.get("client_id", ""), form.get("client_secret", ""), "post"
        if form.get("grant_type") != "client_credentials" or (client_id, secret) != (CLIENT_ID, CLIENT_SECRET):
            log(f"REFUSED {client_id}")
            self.answer(401, {"error": "invalid_client", "error_description": "unknown client or secret"})
            return
        token = "e2e-token-" + secrets.token_hex(8)
        scope = form.get("scope", "")
        GRANTED[token] = scope.split()
        log(f"GRANTED {token} SCOPE {scope or '-'} AUTH {how} RESOURCE {form.get('resource', '-')}")
        self.answer(200, {"access_token": token, "token_type": "Bearer", "expires_in": 20 if MODE == "short" else 3600,
                          "scope": scope})

    def challenge(self, status, error=None, scope=None):
        params = [f'resource_metadata="{self.base()}/.well-known/oauth-protected-resource/mcp"']
        if error:
            params.insert(0, f'error="{error}"')
        if scope:
            params.append(f'scope="{scope}"')
        self.answer(status, {"error": error or "unauthorized"}, [("WWW-Authenticate", "Bearer " + ", ".join(params))])

    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(length)
        if self.path == "/token":
            self.token({k: v[0] for k, v in parse_qs(body.decode()).items()})
            return
        token = self.headers.get("Authorization", "").removeprefix("Bearer ")
        message = json.loads(body)
        method = message.get("method")
        log(f"METHOD {method} TOKEN {token or '-'}")
        if token not in GRANTED:
            self.challenge(401)
            return
        if method == "tools/call" and MODE in ("step-up", "always-more"):
            ASKED[0] += 1
            needed = ["tools:read", "tools:call"] if MODE == "step-up" else [f"more:{ASKED[0]}"]
            if not set(needed) <= set(GRANTED[token]):
                self.challenge(403, "insufficient_scope", " ".join(needed))
                return
        if "id" not in message:
            self.answer(202)
            return
        self.answer(200, {"jsonrpc": "2.0", "id": message["id"], "result": result(method, message.get("params") or {})})


def result(method, params):
    if method == "initialize":
        return {"protocolVersion": params.get("protocolVersion", "2025-06-18"),
                "capabilities": {"tools": {}}, "serverInfo": {"name": "oauth-e2e", "version": "1"}}
    if method == "tools/list":
        return {"tools": [{"name": "hello", "description": "Says hi.", "inputSchema": {"type": "object"}}]}
    if method == "tools/call":
        return {"content": [{"type": "text", "text": "hi"}]}
    return {}


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(f"PORT {server.server_address[1]}", flush=True)
server.serve_forever()
