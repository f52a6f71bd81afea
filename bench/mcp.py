"""MCP tool-call overhead: a zett ``MCPServer`` tool against a bare ``mcp`` ClientSession.

    python -m bench.mcp            # the full run
    python -m bench.mcp --smoke    # a few calls of each, every check, no target judged

Both sides call the same tool (``add(a, b)``, read-only, structured output) of the same
local server, written with the ``mcp`` package's MCPServer and started by this module
itself (``--serve stdio`` / ``--serve http PORT``), over stdio and over streamable HTTP:

- **bare**: ``Client(...).session.call_tool("add", ...)``, the ``mcp`` package alone;
- **zett**: ``AgentTool.invoke`` of ``bench__add`` from ``await MCPServer(...).tools()``:
  the JSON Schema check of the arguments, the connection lookup by headers, the call
  through the connection's owner, and the result mapped to a ``ToolResult``.

The two alternate in rounds (bare, zett, bare, zett, ...) in one process, so load on the
machine hits both alike; the result per transport is the median time per call of each and
their ratio. Target: zett at most 1.2 times bare.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import statistics
import sys
import time
from typing import Any

TARGET_RATIO = 1.2


def serve(argv: list[str]) -> None:
    """The benchmark's MCP server (run as a child process)."""
    from mcp.server.mcpserver import MCPServer
    from mcp_types import ToolAnnotations

    app = MCPServer("bench")

    @app.tool(annotations=ToolAnnotations(readOnlyHint=True))
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    if argv[0] == "stdio":
        app.run()
        return
    import uvicorn

    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", int(argv[1])))
    sock.listen(64)
    print("READY", flush=True)
    config = uvicorn.Config(app.streamable_http_app(), log_level="warning")
    uvicorn.Server(config).run(sockets=[sock])


def _command() -> list[str]:
    return [sys.executable, "-m", "bench.mcp", "--serve", "stdio"]


async def _zett(transport: str, url: str | None) -> tuple[Any, Any]:
    from zett_agent.mcp import MCPServer

    if transport == "http":
        server = MCPServer("bench", url=url, idle_timeout=None, connect_timeout=120)
    else:
        server = MCPServer("bench", command=_command(), idle_timeout=None, connect_timeout=120)
    tools = {tool.name: tool for tool in await server.tools()}
    return server, tools["bench__add"]


async def _measure(transport: str, url: str | None, calls: int, rounds: int) -> dict[str, Any]:
    from mcp import Client, StdioServerParameters

    target: Any = (
        url
        if transport == "http"
        else StdioServerParameters(command=_command()[0], args=_command()[1:])
    )
    server, add = await _zett(transport, url)
    bare_times: list[float] = []
    zett_times: list[float] = []
    try:
        async with Client(target, cache=None) as client:
            session = client.session
            await session.call_tool("add", {"a": 0, "b": 0})  # warm-up (and output schema)
            await add.invoke({"a": 0, "b": 0})
            for _ in range(rounds):
                started = time.perf_counter()
                for i in range(calls):
                    result = await session.call_tool("add", {"a": i, "b": 1})
                    if result.structured_content != {"result": i + 1}:
                        raise AssertionError(f"bare call {i} answered {result!r}")
                bare_times.append((time.perf_counter() - started) / calls)
                started = time.perf_counter()
                for i in range(calls):
                    outcome = await add.invoke({"a": i, "b": 1})
                    if outcome.content != str(i + 1) or not outcome.success:
                        raise AssertionError(f"zett call {i} answered {outcome!r}")
                zett_times.append((time.perf_counter() - started) / calls)
    finally:
        await server.aclose()
    bare = statistics.median(bare_times)
    zett = statistics.median(zett_times)
    return {
        "transport": transport,
        "calls_per_round": calls,
        "rounds": rounds,
        "bare_us_per_call": round(bare * 1e6, 1),
        "zett_us_per_call": round(zett * 1e6, 1),
        "ratio": round(zett / bare, 3),
    }


async def _start_http() -> tuple[asyncio.subprocess.Process, str]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bench.mcp",
        "--serve",
        "http",
        str(port),
        stdout=asyncio.subprocess.PIPE,
    )
    assert process.stdout is not None
    if (await process.stdout.readline()).strip() != b"READY":
        raise RuntimeError("the benchmark's HTTP MCP server did not start")
    return process, f"http://127.0.0.1:{port}/mcp"


async def run(smoke: bool) -> list[dict[str, Any]]:
    calls, rounds = (5, 2) if smoke else (50, 9)
    results = [await _measure("stdio", None, calls, rounds)]
    process, url = await _start_http()
    try:
        results.append(await _measure("http", url, calls, rounds))
    finally:
        process.kill()
        await process.wait()
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true", help="a few calls, for CI")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    parser.add_argument("--serve", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        serve(args.serve)
        return 0
    from bench.machine import describe_machine, package_versions

    results = asyncio.run(run(args.smoke))
    failed = False
    print(f"{'transport':<10}{'bare µs/call':>14}{'zett µs/call':>14}{'ratio':>8}")
    for row in results:
        verdict = ""
        if not args.smoke:
            ok = row["ratio"] <= TARGET_RATIO
            failed |= not ok
            verdict = "  ok" if ok else f"  OVER the {TARGET_RATIO}x target"
        print(
            f"{row['transport']:<10}{row['bare_us_per_call']:>14}"
            f"{row['zett_us_per_call']:>14}{row['ratio']:>8}{verdict}"
        )
    if args.json:
        report = {
            "machine": describe_machine(),
            "versions": package_versions(["mcp", "mcp-types", "jsonschema"]),
            "target_ratio": TARGET_RATIO,
            "results": results,
        }
        with open(args.json, "w") as out:
            json.dump(report, out, indent=2)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
