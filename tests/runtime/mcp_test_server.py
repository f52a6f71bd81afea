"""A real MCP server (the ``mcp`` package's MCPServer) that the MCP tests run as a child.

    python mcp_test_server.py stdio LOG
    python mcp_test_server.py http LOG PORT

Every ``tools/call`` and ``tools/list`` that reaches the server is appended to LOG as one
JSON line (``{"method", "tool", "arguments", "token"}``) before anything else handles it,
so a test can prove what did, and did not, reach the server. Over HTTP every request needs
``Authorization: Bearer <token>`` with a known token (401 otherwise), and the notes tools
keep one notebook per token: two people see only their own notes. Over HTTP the process
prints ``READY`` once its socket listens.
"""

from __future__ import annotations

import base64
import json
import os
import socket
import sys
from typing import Annotated

from mcp.server.mcpserver import Context, Elicit, ElicitationResult, MCPServer, Resolve
from mcp_types import ImageContent, TextContent, ToolAnnotations
from pydantic import BaseModel

TOKENS = {"alice-token", "bob-token"}
PNG = base64.b64encode(b"\x89PNG\r\n\x1a\nzett").decode()
LOG = sys.argv[2]
NOTES: dict[str, list[str]] = {}
READ_ONLY = ToolAnnotations(readOnlyHint=True)


def _token(ctx: Context | None) -> str:
    headers = dict(ctx.headers or {}) if ctx is not None else {}
    authorization = headers.get("authorization", "")
    return authorization.removeprefix("Bearer ") or "stdio"


def _append(line: str) -> None:
    """Append one line to the log (a small local write: blocking is fine here)."""
    with open(LOG, "a") as log:
        log.write(line)


async def log_calls(ctx, call_next):
    if ctx.method in ("tools/call", "tools/list"):
        params = ctx.params or {}
        request = getattr(ctx, "request", None)
        headers = getattr(request, "headers", None) or {}
        entry = {
            "method": ctx.method,
            "tool": params.get("name"),
            "arguments": params.get("arguments"),
            "token": headers.get("authorization", "").removeprefix("Bearer ") or "stdio",
        }
        _append(json.dumps(entry) + "\n")
    return await call_next(ctx)


app = MCPServer("zett-test", middleware=[log_calls])


@app.tool(annotations=READ_ONLY)
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@app.tool(annotations=READ_ONLY)
def read_notes(ctx: Context) -> list[str]:
    """The caller's notes."""
    return NOTES.get(_token(ctx), [])


@app.tool()
def write_note(text: str, ctx: Context) -> str:
    """Store a note in the caller's notebook."""
    NOTES.setdefault(_token(ctx), []).append(text)
    return f"stored {text!r}"


@app.tool(annotations=ToolAnnotations(readOnlyHint=True, destructiveHint=True))
def odd_hints() -> str:
    """Claims to be read-only and destructive at once."""
    return "odd"


@app.tool(annotations=READ_ONLY)
def picture() -> list:
    """A caption and an image."""
    return [
        TextContent(type="text", text="a tiny picture"),
        ImageContent(type="image", data=PNG, mimeType="image/png"),
    ]


@app.tool(annotations=READ_ONLY)
def forecast(city: str) -> dict:
    """Structured weather."""
    return {"city": city, "celsius": 21}


@app.tool(annotations=READ_ONLY)
def fail() -> str:
    """Always fails."""
    raise ValueError("the tool broke on purpose")


@app.tool(annotations=READ_ONLY)
def env_var(name: str) -> str:
    """One variable of the server's environment ("" when unset)."""
    return os.environ.get(name, "")


@app.tool(annotations=READ_ONLY)
def big(size: int) -> str:
    """A long text."""
    return "x" * size


@app.tool()
async def grow(ctx: Context) -> str:
    """Adds the tool 'fresh' and announces the change."""
    app.add_tool(lambda: "fresh!", name="fresh", description="A tool added at run time.")
    await ctx.notify_tools_changed()  # 2026-07-28: to subscriptions/listen streams
    if ctx.protocol_version == "2025-11-25":
        await ctx.session.send_tool_list_changed()  # the handshake era's notification
    return "grown"


@app.tool(annotations=READ_ONLY)
def pid() -> int:
    """The server process's id (a test kills it from outside)."""
    return os.getpid()


@app.tool(annotations=READ_ONLY)
async def count_to(n: int, ctx: Context) -> str:
    """Counts to ``n``, reporting progress and logging each step."""
    for step in range(1, n + 1):
        await ctx.report_progress(step, n, f"step {step} of {n}")
        await ctx.info(f"counted {step}")
    return f"counted to {n}"


@app.tool(annotations=READ_ONLY)
async def gate(path: str, ctx: Context) -> str:
    """Half way, then waits until the test writes to the named pipe ``path``."""
    import anyio

    await ctx.report_progress(1, 2, "half way")
    await ctx.info("waiting at the gate")
    await anyio.Path(path).read_text()  # a FIFO: returns once the test writes and closes it
    await ctx.report_progress(2, 2, "through")
    return "through the gate"


@app.tool()
def crash() -> str:
    """The server process dies in the middle of the call."""
    os._exit(3)


@app.tool(annotations=READ_ONLY)
async def slow(ctx: Context) -> str:
    """Never answers (until cancelled)."""
    import anyio

    await anyio.sleep_forever()
    return "never"


class Confirmation(BaseModel):
    reason: str


def ask_reason() -> Elicit[Confirmation]:
    return Elicit("Why delete everything?", Confirmation)


@app.tool()
async def delete_all(
    answer: Annotated[ElicitationResult[Confirmation], Resolve(ask_reason)],
) -> str:
    """Deletes after asking the person why."""
    if answer.action == "accept":
        return f"deleted because {answer.data.reason}"
    return f"kept ({answer.action})"


def main() -> None:
    if sys.argv[1] == "stdio":
        app.run()
        return
    import uvicorn

    port = int(sys.argv[3])
    inner = app.streamable_http_app()

    async def bearer_only(scope, receive, send):
        if scope["type"] == "http":
            headers = dict(scope["headers"])
            token = headers.get(b"authorization", b"").decode().removeprefix("Bearer ")
            if token not in TOKENS:
                await send({"type": "http.response.start", "status": 401, "headers": []})
                await send({"type": "http.response.body", "body": b"unauthorized"})
                return
        await inner(scope, receive, send)

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(64)
    print("READY", flush=True)
    config = uvicorn.Config(bearer_only, log_level="warning", lifespan="on")
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    main()
