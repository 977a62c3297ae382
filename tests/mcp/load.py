"""Load test of `harness mcp serve --http` on loopback: CLIENTS concurrent clients, CALLS
`tools/call`s each, against one server with sessions, then against two `--stateless` replicas
behind nginx. Every call computes `c*100000+i` with the calc plugin, so each answer is checked
against its own request; afterwards the servers' traces must hold each request exactly once
(none lost, none run twice). Prints one Markdown table row per setup.

usage: load.py --harness PATH --plugin-path DIR [--clients 16] [--calls 500] [--nginx PATH]
"""

import argparse
import asyncio
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

import httpx2

TOKEN = "load-test-token"
ACCEPT = "application/json, text/event-stream"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_replica(args, work: str, name: str, stateless: bool) -> tuple[subprocess.Popen, int]:
    port = free_port()
    cmd = [args.harness, "mcp", "serve", "--http", f"127.0.0.1:{port}", "--token-env", "LOAD_TOKEN",
           "--enable", "calc", "--trace", os.path.join(work, f"{name}.jsonl")]
    if stateless:
        cmd.append("--stateless")
    env = dict(os.environ, LOAD_TOKEN=TOKEN, HARNESS_PLUGIN_PATH=args.plugin_path,
               XDG_CONFIG_HOME=os.path.join(work, "xdg"), HARNESS_PLUGIN_CACHE=os.path.join(work, "cache"))
    proc = subprocess.Popen(cmd, env=env, cwd=work, stderr=subprocess.PIPE, text=True)
    for line in proc.stderr:
        if " at http://" in line:
            # Drained from here on, so that a full pipe never stalls the server.
            threading.Thread(target=proc.stderr.read, daemon=True).start()
            return proc, port
    sys.exit(f"{name} did not start: {proc.wait()}")


def start_nginx(nginx: str, work: str, ports: list[int]) -> tuple[subprocess.Popen, int]:
    port = free_port()
    upstreams = "".join(f"server 127.0.0.1:{p};" for p in ports)
    conf = f"""
worker_processes 1; pid {work}/nginx.pid; error_log {work}/nginx.err warn; daemon off;
events {{ worker_connections 1024; }}
http {{
  access_log off;
  client_body_temp_path {work}/body; proxy_temp_path {work}/proxy;
  fastcgi_temp_path {work}/fcgi; uwsgi_temp_path {work}/uwsgi; scgi_temp_path {work}/scgi;
  upstream replicas {{ {upstreams} keepalive 32; }}
  server {{
    listen 127.0.0.1:{port};
    location / {{ proxy_pass http://replicas; proxy_http_version 1.1; proxy_set_header Connection "";
                  proxy_set_header Host 127.0.0.1; proxy_buffering off; }}
  }}
}}"""
    path = os.path.join(work, "nginx.conf")
    with open(path, "w") as f:
        f.write(conf)
    proc = subprocess.Popen([nginx, "-p", work, "-c", path])
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            return proc, port
        except OSError:
            time.sleep(0.05)
    sys.exit("nginx did not start")


def body(id_: int, method: str, params: dict) -> dict:
    return {"jsonrpc": "2.0", "id": id_, "method": method, "params": params}


def answer_of(response: httpx2.Response) -> dict:
    """The JSON-RPC answer, from a JSON body or the SSE stream a session's POST gets."""
    if response.headers.get("content-type", "").startswith("application/json"):
        return response.json()
    for line in response.text.splitlines():
        if line.startswith("data:") and line[5:].strip():
            message = json.loads(line[5:])
            if "id" in message:
                return message
    raise ValueError(f"no answer in {response.text!r}")


async def client(url: str, c: int, calls: int, sessions: bool, latencies: list, wrong: list) -> None:
    headers = {"Authorization": f"Bearer {TOKEN}", "Accept": ACCEPT, "Content-Type": "application/json"}
    async with httpx2.AsyncClient(timeout=60) as http:
        if sessions:
            init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "load", "version": "1"}}
            r = await http.post(url, json=body(0, "initialize", init), headers=headers)
            headers["Mcp-Session-Id"] = r.headers["mcp-session-id"]
            headers["Mcp-Protocol-Version"] = "2025-11-25"
            await http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
        for i in range(calls):
            id_ = c * 100000 + i
            call = body(id_, "tools/call", {"name": "calculate", "arguments": {"expression": f"{c}*100000+{i}"}})
            started = time.perf_counter()
            r = await http.post(url, json=call, headers=headers)
            latencies.append(time.perf_counter() - started)
            message = answer_of(r) if r.status_code == 200 else {"status": r.status_code}
            text = message.get("result", {}).get("content", [{}])[0].get("text")
            if message.get("id") != id_ or text != str(id_):
                wrong.append((id_, message))


def traced(work: str, names: list[str]) -> list[str]:
    expressions = []
    for name in names:
        with open(os.path.join(work, f"{name}.jsonl")) as f:
            expressions += [json.loads(line)["arguments"]["expression"] for line in f if line.strip()]
    return expressions


async def load(url: str, args, sessions: bool) -> tuple[float, list, list]:
    latencies, wrong = [], []
    started = time.perf_counter()
    await asyncio.gather(*(client(url, c, args.calls, sessions, latencies, wrong) for c in range(args.clients)))
    return time.perf_counter() - started, latencies, wrong


def report(setup: str, args, work: str, names: list[str], elapsed: float, latencies: list, wrong: list) -> None:
    expected = {f"{c}*100000+{i}" for c in range(args.clients) for i in range(args.calls)}
    ran = traced(work, names)
    lost, twice = len(expected - set(ran)), len(ran) - len(set(ran))
    latencies.sort()
    p = lambda q: latencies[min(len(latencies) - 1, int(q * len(latencies)))] * 1000
    total = args.clients * args.calls
    print(f"| {setup} | {total} | {total / elapsed:.0f} | {p(0.50):.2f} | {p(0.99):.2f} | "
          f"{len(wrong)} | {lost} | {twice} |", flush=True)
    if wrong:
        print(f"first wrong answer: {wrong[0]}", file=sys.stderr)


def stop(procs: list) -> None:
    for proc in procs:
        proc.send_signal(signal.SIGTERM)
    for proc in procs:
        proc.wait(timeout=60)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--harness", required=True)
    parser.add_argument("--plugin-path", required=True)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--nginx", default=shutil.which("nginx") or "/usr/sbin/nginx")
    args = parser.parse_args()
    args.harness, args.plugin_path = os.path.abspath(args.harness), os.path.abspath(args.plugin_path)
    print("| setup | calls | calls/s | p50 ms | p99 ms | wrong answers | lost | run twice |")
    print("|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="harness-load-") as work:
        one, port = start_replica(args, work, "one", stateless=False)
        elapsed, latencies, wrong = asyncio.run(load(f"http://127.0.0.1:{port}/mcp", args, sessions=True))
        stop([one])
        report("one server, sessions", args, work, ["one"], elapsed, latencies, wrong)

        alone, port = start_replica(args, work, "alone", stateless=True)
        elapsed, latencies, wrong = asyncio.run(load(f"http://127.0.0.1:{port}/mcp", args, sessions=False))
        stop([alone])
        report("one --stateless server", args, work, ["alone"], elapsed, latencies, wrong)

        replicas = [start_replica(args, work, name, stateless=True) for name in ("a", "b")]
        proxy, port = start_nginx(args.nginx, work, [p for _, p in replicas])
        elapsed, latencies, wrong = asyncio.run(load(f"http://127.0.0.1:{port}/mcp", args, sessions=False))
        proxy.send_signal(signal.SIGQUIT)
        proxy.wait(timeout=30)
        stop([r for r, _ in replicas])
        report("two --stateless replicas behind nginx", args, work, ["a", "b"], elapsed, latencies, wrong)
        per_replica = [len(traced(work, [n])) for n in ("a", "b")]
        print(f"\ncalls per replica: {per_replica}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
