"""The feed's fast path (``Feed.broadcast_event``) sends exactly the frames of its plain twin.

``broadcast_event`` gives up idioms for speed (the lock held by hand, a delta's frame built
as text, one length check instead of a measurement); ``broadcast_event_plain`` is the same
step written plainly. Both run over the same events, on the in-memory bus, and every socket
and the replay buffer must end up with the same text.
"""

from __future__ import annotations

from typing import Any

import pytest

from agent_app.bus.local import LocalBus
from agent_app.sessions.fanout import Feed
from zett_agent.events import AgentEvent, AgentEventType, AgentPhase

E = AgentEventType
SESSION_ID = "5f0c6f3e-session"
PAIR = "\ud83d\ude42"


def _events() -> list[dict[str, Any] | AgentEvent]:
    words = [AgentEvent(E.TEXT_DELTA, SESSION_ID, phase=AgentPhase.GENERATING, delta=f"w{i} ")
             for i in range(40)]  # fmt: skip
    return [
        {"type": "model_started", "session_id": SESSION_ID, "phase": "generating"},
        *words,
        AgentEvent(E.REASONING_DELTA, SESSION_ID, phase=None, delta="think \ud800 \x00 \u2028"),
        AgentEvent(E.TEXT_DELTA, SESSION_ID, phase=None, delta=('\x01"' + PAIR) * 120_000),
        AgentEvent(E.COMPACTION_TEXT_DELTA, SESSION_ID, phase=None, delta="short"),
        {
            "type": "custom",
            "session_id": SESSION_ID,
            "phase": None,
            "name": "ask_user",
            "payload": {"tool_call_id": "ask-1", "question": "Which? " * 100_000},
        },
        {"type": "tool_started", "session_id": SESSION_ID, "phase": None, "tool_calls": []},
        *words[:5],
    ]


class Socket:
    def __init__(self) -> None:
        self.texts: list[str] = []

    async def send_text(self, text: str) -> None:
        self.texts.append(text)


async def _sent(method: str) -> tuple[list[str], list[str]]:
    feed = Feed(SESSION_ID, LocalBus("test-worker"))
    feed.seq.add_block(1, 100_000)  # no database: the numbers are reserved already
    socket = Socket()
    feed.sockets.append(socket)
    send = getattr(feed, method)
    for event in _events():
        await send("req-1", event)
    return socket.texts, list(feed.replay.frames_after(None))


@pytest.mark.parametrize("replay_frames", [8, 1000])
async def test_the_fast_broadcast_sends_the_frames_of_the_plain_one(settings, replay_frames):
    settings.ZETT_REPLAY_FRAMES = replay_frames  # small: the replay buffer merges deltas
    fast, plain = await _sent("broadcast_event"), await _sent("broadcast_event_plain")
    assert len(fast[0]) > len(_events())  # the huge delta went out in several frames
    assert fast == plain
