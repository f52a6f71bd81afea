"""Progress and log notifications of a tool call, relayed to the person as events.

A server may report progress on a call (``notifications/progress``, for the progress
token zett sends with every ``tools/call``) and log lines (``notifications/message``).
Both arrive in the connection's reader, not in the calling task, and the reader must never
wait for a slow consumer (every other call on the connection would wait with it). So the
reader only records the latest state in the call's ``CallProgress`` (no await); a relay
task of the tool call emits it as a CUSTOM event ``tool_progress`` when the consumer takes
it. Updates that come faster than the consumer takes them are merged: the person sees the
newest progress and the newest line, never a backlog.

A log line is tied to a call only when it can be: on a connection with one call in flight
(a server on the 2026-07-28 protocol logs only for calls that ask, which zett's calls do at
``info``); other lines go to the ``zett_agent.mcp`` logger only.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from zett_agent.events import AgentEvent, AgentEventType

if TYPE_CHECKING:
    from zett_agent._context import AgentRunContext

__all__ = ["PROGRESS_EVENT", "CallProgress", "MCPProgressEvent"]

logger = logging.getLogger("zett_agent.mcp")

#: The CUSTOM event a call's progress or log line is.
PROGRESS_EVENT = "tool_progress"
#: A log line or progress message longer than this is cut (a page shows one line).
MAX_MESSAGE_CHARS = 500


class MCPProgressEvent(AgentEvent):
    """CUSTOM event ``tool_progress``: where a running tool call is.

    Payload: ``tool_call_id``, ``tool``, ``server``, ``progress`` and ``total`` (numbers, or
    None before the server reported any; ``total`` None when it does not know it),
    ``message`` (the newest progress message or log line, or None) and ``level`` (the log
    line's level, None for a progress message)."""

    def __init__(self, *, session_id: str, payload: dict[str, Any]) -> None:
        super().__init__(AgentEventType.CUSTOM, session_id, name=PROGRESS_EVENT, payload=payload)


def _line(data: Any) -> str:
    text = data if isinstance(data, str) else json.dumps(data, default=str)
    return text if len(text) <= MAX_MESSAGE_CHARS else text[: MAX_MESSAGE_CHARS - 1] + "…"


class CallProgress:
    """The latest progress of one tool call, recorded by the reader, emitted by a relay."""

    def __init__(self, context: AgentRunContext, tool_call_id: str, tool: str, server: str) -> None:
        self._context = context
        self._state: dict[str, Any] = {
            "tool_call_id": tool_call_id,
            "tool": tool,
            "server": server,
            "progress": None,
            "total": None,
            "message": None,
            "level": None,
        }
        self._changed = asyncio.Event()

    # -- the reader's side (never awaits the consumer) ----------------------------------

    async def progress(self, progress: float, total: float | None, message: str | None) -> None:
        """The ``progress_callback`` of the call."""
        self._state.update(progress=progress, total=total)
        if message:
            self._state.update(message=_line(message), level=None)
        self._changed.set()

    def log(self, level: str, data: Any) -> None:
        self._state.update(message=_line(data), level=level)
        self._changed.set()

    # -- the relay (a task of the tool call) ---------------------------------------------

    async def relay(self) -> None:
        """Emit each new state until cancelled (the call ended)."""
        while True:
            await self._changed.wait()
            if not await self._emit():
                return

    async def _emit(self) -> bool:
        self._changed.clear()
        event = MCPProgressEvent(session_id=self._context.session_id, payload=dict(self._state))
        try:
            await self._context.emit(event)
        except Exception as error:  # the request ended: nobody is left to tell
            logger.debug("A tool_progress event was not emitted: %r", error)
            return False
        return True

    @contextlib.asynccontextmanager
    async def relaying(self) -> AsyncIterator[None]:
        """``async with progress.relaying():`` around the call; a call that ends
        normally emits its last state if the relay had not yet (the person sees 3 of 3)."""
        task = asyncio.get_running_loop().create_task(self.relay())
        try:
            yield
        finally:
            task.cancel()
            await asyncio.wait([task])  # (never swallows a cancellation of the caller)
        if self._changed.is_set():
            await self._emit()
