"""The harness as the MCP client under test of the official conformance suite's client
scenarios: the suite runs this with the URL of its scenario server as the last argument and
the scenario's name in $MCP_CONFORMANCE_SCENARIO. It writes a configuration naming that server
and runs `$HARNESS_BIN run` with a script that calls the scenario's tool (none for
`initialize`), then `finish`. The exit code is the run's.

For the `auth/*` scenarios the server entry has an OAuth client (`[mcp.servers.oauth]`): the
pre-registered client id and secret (or private key) the suite passes in
$MCP_CONFORMANCE_CONTEXT (JSON), the secret through an environment variable as a user would; where it passes none, a client the
authorization server does not know, so that discovery still runs (and refuses what it must).

Usage: conformance_client.py URL"""

import json
import os
import subprocess
import sys
import tempfile

# The tool each scenario's server offers, and the arguments to call it with.
CALLS = {
    "initialize": [],
    "tools_call": [{"tool": "add_numbers", "arguments": {"a": 2, "b": 3}}],
    "sse-retry": [{"tool": "test_reconnection", "arguments": {}}],
}

scenario = os.environ["MCP_CONFORMANCE_SCENARIO"]
context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
url = sys.argv[-1]
env = dict(os.environ)
oauth = ""
if scenario.startswith("auth/"):
    CALLS[scenario] = [{"tool": "test-tool", "arguments": {}}]
    client_id = context.get("client_id", "unregistered-client")
    oauth = f'[mcp.servers.oauth]\nclient_id = {json.dumps(client_id)}\n'
    if "private_key_pem" in context:
        env["CONFORMANCE_PRIVATE_KEY"] = context["private_key_pem"]
        oauth += 'private_key_env = "CONFORMANCE_PRIVATE_KEY"\n'
    else:
        env["CONFORMANCE_CLIENT_SECRET"] = context.get("client_secret", "unregistered-secret")
        oauth += 'client_secret_env = "CONFORMANCE_CLIENT_SECRET"\n'

with tempfile.TemporaryDirectory() as work:
    config = os.path.join(work, "harness.toml")
    with open(config, "w") as f:
        f.write(f'[[mcp.servers]]\nname = "scenario"\nurl = {json.dumps(url)}\ntimeout = 20\n' + oauth)
    script = os.path.join(work, "script.jsonl")
    steps = CALLS.get(scenario, []) + [{"tool": "finish", "arguments": {"answer": "done"}}]
    with open(script, "w") as f:
        f.write("".join(json.dumps(step) + "\n" for step in steps))
    plugins = os.path.join(work, "plugins")
    os.mkdir(plugins, 0o700)
    command = [os.environ["HARNESS_BIN"], "run", scenario, "--config", config, "--plugins-dir", plugins,
               "--allow", "network", "--script", script, "--json"]
    sys.exit(subprocess.run(command, cwd=work, env=env).returncode)
