"""A small MCP server written with the official Python MCP SDK, used by the end-to-end tests
as a source of tools for `harness run`."""

import os
import time

from mcp.server.mcpserver import MCPServer

server = MCPServer("py-tools", version="1.0.0", log_level="WARNING")


@server.tool(structured_output=False)
def greet(name: str) -> str:
    """Greet someone by name."""
    return f"Hello, {name}!"


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool(structured_output=False)
def calculate(expression: str) -> str:
    """A tool whose name the calc plugin already has: offered as py__calculate."""
    return f"python was asked for {expression}"


@server.tool(structured_output=False)
def env(name: str) -> str:
    """The value of one environment variable of this server, or "(unset)"."""
    return os.environ.get(name, "(unset)")


@server.tool(structured_output=False)
def fail(message: str) -> str:
    """Always fails with the message."""
    raise ValueError(message)


@server.tool(structured_output=False)
def sleep(seconds: float) -> str:
    """Sleeps, then answers: a tool that hangs past a timeout."""
    time.sleep(seconds)
    return "awake"


@server.tool(structured_output=False)
def die(code: int) -> str:
    """Ends this server's process at once, mid-call."""
    os._exit(code)


@server.tool(name="weather.today", structured_output=False)
def weather_today() -> str:
    """A name model APIs refuse (it has a dot): never offered."""
    return "sunny"


if __name__ == "__main__":
    parent = os.getppid()
    server.run()
    # run() returns when the client closes this server's stdin; a kill never gets here. With
    # CLOSED_FILE set, say in that file whether the client was still there a moment later,
    # waiting for this exit as a graceful close does (our parent unchanged), or had exited
    # without waiting (its exit closed our stdin, and we were handed to another parent).
    closed = os.environ.get("CLOSED_FILE")
    if closed:
        time.sleep(0.2)
        waited = os.getppid() == parent
        with open(closed, "w") as f:
            f.write("closed while the client waited" if waited else "closed after the client was gone")
