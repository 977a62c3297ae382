"""Drives an MCP server with the official Python MCP SDK's client, and prints what it saw as one
JSON object, for the Rust end-to-end tests to check.

usage: client.py [--mode auto|legacy] CALLS -- COMMAND [ARG...]
       client.py [--mode auto|legacy] --url URL CALLS

CALLS is a JSON list of {"name": TOOL, "arguments": {...}}. The server is COMMAND, started by
the SDK's stdio transport, or the Streamable HTTP endpoint at URL, reached by the SDK's
`streamable_http_client` with `Authorization: Bearer $MCP_TOKEN`. Every call is made in order whatever the previous one gave; each
gives {"is_error", "text", "structured"} or, for a JSON-RPC error, {"protocol_error": {...}}.
"""

import argparse
import json
import os
import sys

import anyio
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


def server_of(url: str | None, command: list):
    if url is None:
        return StdioServerParameters(command=command[0], args=command[1:])
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {os.environ['MCP_TOKEN']}"})
    return streamable_http_client(url, http_client=http)


async def drive(mode: str, calls: list, server) -> dict:
    async with Client(server, mode=mode, read_timeout_seconds=30) as client:
        info = client.server_info
        listed = await client.list_tools()
        report = {
            "protocol_version": client.protocol_version,
            "server_info": info.model_dump(mode="json", exclude_none=True) if info else None,
            "tools": [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in listed.tools],
            "calls": [],
        }
        for call in calls:
            try:
                result = await client.call_tool(call["name"], call.get("arguments"))
            except MCPError as e:
                report["calls"].append({"protocol_error": {"code": e.code, "message": e.message, "data": e.data}})
                continue
            texts = [block.text for block in result.content if block.type == "text"]
            report["calls"].append(
                {
                    "is_error": bool(result.is_error),
                    "text": "\n".join(texts),
                    "structured": result.structured_content,
                }
            )
        return report


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", default="auto", choices=["auto", "legacy"])
    parser.add_argument("--url")
    parser.add_argument("calls")
    parser.add_argument("command", nargs="*")
    args = parser.parse_args()
    report = anyio.run(drive, args.mode, json.loads(args.calls), server_of(args.url, args.command))
    json.dump(report, sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
