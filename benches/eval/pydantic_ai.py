#!/usr/bin/env python3
"""pydantic-ai on a harness tasks file, with the harness's own tools: writes an answers file
that `harness eval TASKS --answers ANSWERS` scores by the same rules as the harness's runs.

The tools are the harness's plugins served over MCP (`harness mcp serve`, stdio), so both
frameworks call the same code; the model is any OpenAI-compatible server (a llama-server).
Each task is one `agent.run` with a fresh conversation, temperature 0 and a fixed seed.

    python3 -m venv /tmp/eval/venv && /tmp/eval/venv/bin/pip install 'pydantic-ai-slim[openai,mcp]'
    /tmp/eval/venv/bin/python benches/eval/pydantic_ai.py evals/everyday.jsonl \
        --out answers.jsonl --base-url http://127.0.0.1:8080/v1 \
        --harness target/debug/harness --enable calc --enable chem
    target/debug/harness eval evals/everyday.jsonl --answers answers.jsonl

Written for pydantic-ai 2.x (`MCPToolset` over a FastMCP `Client`; `MCPServerStdio` is gone).
"""

import argparse
import asyncio
import json
import os
import sys
import time

# This file is named after the package it runs: its own directory must not shadow it.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]

from fastmcp.client import Client  # noqa: E402 (after the path fix above)
from fastmcp.client.transports import StdioTransport
from pydantic_ai import Agent
from pydantic_ai.mcp import MCPToolset
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider
from pydantic_ai.usage import UsageLimits


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("tasks", help="the tasks file (JSON Lines, docs/eval.md)")
    p.add_argument("--out", required=True, help="the answers file to write (JSON Lines)")
    p.add_argument("--base-url", default="http://127.0.0.1:8080/v1", help="the OpenAI-compatible server")
    p.add_argument("--model", default="local", help="the model name sent (llama-server serves one model)")
    p.add_argument("--api-key", default="none", help="sent as the bearer token (llama-server ignores it)")
    p.add_argument("--harness", default="target/debug/harness", help="the harness binary that serves the tools")
    p.add_argument("--plugins-dir", action="append", default=[], help="passed to harness mcp serve")
    p.add_argument("--enable", action="append", default=[], help="plugins to serve (calc, chem), passed on")
    p.add_argument("--max-tokens", type=int, default=1024, help="the most tokens of one reply (harness's default)")
    p.add_argument("--request-limit", type=int, default=8, help="model requests per task (harness's max_steps)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--only", action="append", default=[], help="run only these task ids (repeatable)")
    p.add_argument("--limit", type=int, help="run only the first N tasks")
    return p.parse_args()


def read_tasks(path, only, limit):
    tasks = []
    with open(path) as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                task = json.loads(line)
                key, request = task["id"], task["request"]
            except (ValueError, KeyError, TypeError) as e:
                sys.exit(f"{path}:{number}: not a task ({e}); see docs/eval.md")
            if not only or str(key) in only:
                tasks.append((key, request))
    return tasks[:limit] if limit else tasks


def toolset(args):
    serve = ["mcp", "serve"]
    for d in args.plugins_dir:
        serve += ["--plugins-dir", d]
    for name in args.enable:
        serve += ["--enable", name]
    return MCPToolset(Client(StdioTransport(args.harness, serve)))


async def run_one(agent, request, args):
    """One task: its answer, steps (model requests), tokens and time; or the error."""
    started = time.monotonic()
    line = {}
    try:
        result = await agent.run(request, usage_limits=UsageLimits(request_limit=args.request_limit))
        usage = result.usage
        if not hasattr(usage, "requests"):  # a method before it became a property
            usage = usage()
        line = {
            "answer": result.output,
            "steps": usage.requests,
            "tokens": (usage.input_tokens or 0) + (usage.output_tokens or 0),
        }
    except Exception as e:  # a run that fails is a line with its error, and the next task runs
        line = {"answer": None, "error": f"{type(e).__name__}: {e}"}
    line["seconds"] = round(time.monotonic() - started, 3)
    return line


async def main():
    args = parse_args()
    tasks = read_tasks(args.tasks, set(args.only), args.limit)
    model = OpenAIChatModel(args.model, provider=OpenAIProvider(base_url=args.base_url, api_key=args.api_key))
    settings = {"temperature": 0.0, "seed": args.seed, "max_tokens": args.max_tokens}
    agent = Agent(model, toolsets=[toolset(args)], model_settings=settings)
    async with agent:
        with open(args.out, "w") as out:
            for key, request in tasks:
                line = {"id": key, **await run_one(agent, request, args)}
                out.write(json.dumps(line) + "\n")
                out.flush()
                print(f"{key}: {json.dumps(line.get('answer'))[:80]} {line.get('error', '')}", file=sys.stderr)


if __name__ == "__main__":
    asyncio.run(main())
