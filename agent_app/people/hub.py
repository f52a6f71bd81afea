"""The seam between a tool that runs inside a run and the session it runs in.

``handoff_to_human`` (``agent_app.people.tool``) is built into agents by the agent
factory, which the session code imports: the tool cannot import the sessions back. It
calls ``announce_in_run``; ``agent_app.sessions.people`` installs the implementation when it
is imported (by the consumer and the app's start-up).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

__all__ = ["Announcer", "FrameBuilder", "announce_in_run", "install"]

#: Builds a frame (a JSON-ready dict) given its ``seq``.
FrameBuilder = Callable[[int], dict[str, Any]]
#: Sends one frame to every socket of a session from inside the run that session runs here.
Announcer = Callable[[str, FrameBuilder], Awaitable[None]]

_announcer: list[Announcer] = []


def install(announcer: Announcer) -> None:
    _announcer[:] = [announcer]


async def announce_in_run(session_id: str, build: FrameBuilder) -> None:
    """Send ``build(seq)`` to every socket of ``session_id`` (numbered by its run)."""
    if _announcer:
        await _announcer[0](session_id, build)
