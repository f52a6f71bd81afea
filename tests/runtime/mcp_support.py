"""Helpers of the MCP tests: the test server as a child process, and scripted runs.

``HttpServer`` starts ``mcp_test_server.py`` over streamable HTTP on a free localhost port
and waits for its ``READY`` line (its socket listens from then on); ``kill`` and ``start``
stop and restart it on the same port. ``stdio_command`` is the command of the same server
over stdio. ``calls_in(log)`` reads what reached the server.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

from zett_agent.agent import Agent, AgentRunConfig
from zett_agent.events import AgentEvent, AgentEventType
from zett_agent.messages import AssistantMessage, ToolCall
from zett_agent.testing import ScriptedModel

SERVER = Path(__file__).with_name("mcp_test_server.py")
T = AgentEventType


def stdio_command(log: Path) -> list[str]:
    return [sys.executable, str(SERVER), "stdio", str(log)]


def _entries(log: Path) -> list[dict[str, Any]]:
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


def calls_in(log: Path) -> list[dict[str, Any]]:
    """Every tools/call the server received, in order (as {"tool", "arguments", "token"})."""
    return [
        {key: entry[key] for key in ("tool", "arguments", "token")}
        for entry in _entries(log)
        if entry["method"] == "tools/call"
    ]


def listings_in(log: Path) -> int:
    """How many tools/list requests the server received."""
    return sum(1 for entry in _entries(log) if entry["method"] == "tools/list")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class HttpServer:
    """The test server over streamable HTTP, as a child process on a fixed port."""

    def __init__(self, log: Path) -> None:
        self.log = log
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.process: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        self.process = await asyncio.create_subprocess_exec(
            sys.executable,
            str(SERVER),
            "http",
            str(self.log),
            str(self.port),
            stdout=asyncio.subprocess.PIPE,
        )
        assert self.process.stdout is not None
        line = await self.process.stdout.readline()
        if line.strip() != b"READY":
            raise RuntimeError(f"the test MCP server did not start: {line!r}")

    async def kill(self) -> None:
        if self.process is not None and self.process.returncode is None:
            self.process.kill()
            await self.process.wait()


class SharedHttpServer:
    """The same server for a whole module (started without a loop); ``clear_log`` between
    tests keeps each test's view of what reached it its own."""

    def __init__(self, log: Path) -> None:
        self.log = log
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.process = subprocess.Popen(
            [sys.executable, str(SERVER), "http", str(log), str(self.port)],
            stdout=subprocess.PIPE,
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if line.strip() != b"READY":
            self.close()
            raise RuntimeError(f"the test MCP server did not start: {line!r}")

    def clear_log(self) -> None:
        self.log.write_text("")

    def close(self) -> None:
        self.process.kill()
        self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()


def tool_call(name: str, call_id: str = "c1", **arguments: Any) -> AssistantMessage:
    return AssistantMessage(tool_calls=(ToolCall(id=call_id, name=name, arguments=arguments),))


async def run_calls(
    agent_kwargs: dict[str, Any],
    *calls: AssistantMessage,
    session: str = "s",
    on_event: Any = None,
    metadata: dict[str, Any] | None = None,
) -> tuple[list[AgentEvent], ScriptedModel]:
    """One request whose model makes ``calls`` (one turn each), then answers "done"."""
    model = ScriptedModel([*calls, AssistantMessage("done")])
    agent = await Agent.create(model, **agent_kwargs)
    config = AgentRunConfig(session_id=session, request_id=f"{session}-r")
    events: list[AgentEvent] = []
    async with contextlib.aclosing(agent.stream("go", config=config, metadata=metadata)) as stream:
        async for event in stream:
            events.append(event)
            if on_event is not None:
                on_event(agent, config, event)
    return events, model


def tool_results(events: list[AgentEvent]) -> list[Any]:
    """The ToolMessage of every finished tool call, in order."""
    return [e.message for e in events if e.type in (T.TOOL_COMPLETED, T.TOOL_FAILED)]
