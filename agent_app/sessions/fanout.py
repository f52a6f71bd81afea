"""Fan-out: the feed of one session, how one numbered frame reaches every socket.

A ``Feed`` holds the sockets of a session in this process, the lock that orders every frame
they see, the ``seq`` numbering and the run's replay buffer. It numbers frames
(``next_seq``, ``broadcast_event``), sends them to this process's sockets (``send_local``)
and publishes them on the session bus to the other workers (``broadcast``). Why the lock
orders every frame and when a run lets the event loop write them out is told once, in
``agent_app.sessions.live``. This is the hot path of a streaming run: it is tuned for
speed, so change it only with a benchmark (``bench/socket.py``).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Protocol

from django.conf import settings

from agent_app.bus.base import Marker, SessionBus
from agent_app.bus.replay import DEFAULT_REPLAY_FRAMES, MERGEABLE_EVENTS, ReplayBuffer
from agent_app.durable.sequence import SeqCounter
from agent_app.protocol.text import (
    DELTA_FAST_CHARS,
    FRAME_FAST_CHARS,
    agent_event_frame,
    encode_delta_frame,
    encode_frame,
    event_frame_text,
    fits,
    split_event,
)
from zett_agent.events import AgentEvent, AgentEventType
from zett_agent.serialization import event_to_dict

__all__ = ["STREAK_SECONDS", "TEXT_DELTAS", "Feed", "Subscriber", "let_the_loop_write"]

logger = logging.getLogger(__name__)

E = AgentEventType
#: Deltas whose frame is built as text straight from the event (``encode_delta_frame``).
TEXT_DELTAS = frozenset(
    {E.TEXT_DELTA, E.REASONING_DELTA, E.COMPACTION_TEXT_DELTA, E.COMPACTION_REASONING_DELTA}
)
#: Of those, the ones the replay buffer may merge (``MERGEABLE_EVENTS``).
_MERGEABLE_DELTAS = frozenset(kind for kind in TEXT_DELTAS if kind.value in MERGEABLE_EVENTS)
#: Longest a run keeps the event loop to itself while it streams deltas, in seconds.
STREAK_SECONDS = 0.004
_KEPT = (Marker.KEPT, Marker.START)


class Subscriber(Protocol):
    """A socket of the session: the feed only ever sends it encoded frames."""

    async def send_text(self, text: str) -> None: ...


class Feed:
    """The sockets, the frame numbering and the replay buffer of one session here."""

    def __init__(self, session_id: str, bus: SessionBus) -> None:
        self.session_id = session_id
        self.bus = bus
        #: Orders every frame every socket sees (``agent_app.sessions.live``).
        self.lock = asyncio.Lock()
        self.seq = SeqCounter(session_id)
        #: The last ``seq`` sent from here.
        self.last_seq = 0
        self.replay = ReplayBuffer(
            int(getattr(settings, "ZETT_REPLAY_FRAMES", 0) or 0) or DEFAULT_REPLAY_FRAMES
        )
        self.sockets: list[Subscriber] = []
        #: Sockets that saw frames up to this ``seq`` elsewhere (``agent_app.sessions.follower``).
        self.floors: dict[Subscriber, int] = {}

    async def next_seq(self) -> int:
        """The next frame number (the caller holds the lock)."""
        seq = self.seq.take_nowait()
        return seq if seq is not None else await self.seq.take()

    async def broadcast_event(self, request_id: str, event: dict[str, Any] | AgentEvent) -> None:
        """Number one agent event and send it to every socket, in the same order for all.

        ``event`` is ``event_to_dict``'s output, or, for a text, reasoning or compaction
        delta, the ``AgentEvent`` itself: its frame is then built as text directly
        (``encode_delta_frame``, the same text). One length check tells the rare event
        too large for a frame (``_broadcast_large``) from the rest.
        """
        if type(event) is not dict and event.type not in TEXT_DELTAS:
            event = event_to_dict(event)  # only deltas take the text path
        lock = self.lock
        await lock.acquire()  # (``async with`` costs two more coroutines per event)
        try:
            seq = self.seq.take_nowait()
            if seq is None:
                seq = await self.seq.take()
            if type(event) is dict:
                text = encode_frame(agent_event_frame(seq, request_id, event))
                if len(text) > FRAME_FAST_CHARS and not fits(text):
                    await self._broadcast_large(seq, request_id, event)
                    return
                mergeable = event["type"] in MERGEABLE_EVENTS
            else:
                if len(event.delta) > DELTA_FAST_CHARS:
                    await self._broadcast_large(seq, request_id, event_to_dict(event))
                    return
                kind, phase = event.type, event.phase
                text = encode_delta_frame(
                    seq,
                    request_id,
                    kind._value_,
                    event.session_id,
                    None if phase is None else phase._value_,
                    event.delta,
                )
                mergeable = kind in _MERGEABLE_DELTAS
            await self.broadcast(seq, text, mergeable=mergeable, request_id=request_id)
        finally:
            lock.release()

    async def broadcast_event_plain(
        self, request_id: str, event: dict[str, Any] | AgentEvent
    ) -> None:
        """``broadcast_event`` written plainly: every event as a dict, through the encoder,
        under ``async with``, its size measured. The speed-ups of ``broadcast_event`` (the
        lock held by hand, a delta's frame built as text, one length check) must send
        exactly these frames; a test holds the two equal (docs/benchmarks.md)."""
        if type(event) is not dict:
            event = event_to_dict(event)
        async with self.lock:
            seq = await self.next_seq()
            text = encode_frame(agent_event_frame(seq, request_id, event))
            if not fits(text):
                await self._broadcast_large(seq, request_id, event)
                return
            mergeable = event["type"] in MERGEABLE_EVENTS
            await self.broadcast(seq, text, mergeable=mergeable, request_id=request_id)

    async def _broadcast_large(self, seq: int, request_id: str, event: dict[str, Any]) -> None:
        """Send an event too large for one frame (the caller holds the lock, took ``seq``).

        A delta goes out as several frames, numbered in a row, whose deltas concatenate to
        it; anything else as one shortened frame (``agent_app.protocol.text``). Either way
        they are broadcast and kept like any frame: replays and resumes see the same ones.
        """
        mergeable = event["type"] in MERGEABLE_EVENTS
        for index, piece in enumerate(split_event(request_id, event)):
            if index:
                seq = await self.next_seq()
            text = event_frame_text(seq, request_id, piece)
            await self.broadcast(seq, text, mergeable=mergeable, request_id=request_id)

    async def broadcast(
        self,
        seq: int,
        text: str,
        *,
        marker: Marker = Marker.KEPT,
        mergeable: bool = False,
        request_id: str | None = None,
    ) -> None:
        """Send one numbered frame to every socket, here and on the other workers.

        The caller holds the lock. Run frames (``Marker.KEPT``, ``Marker.START``) are kept
        for replay; a run's last frame and frames outside a run are not.
        """
        previous, self.last_seq = self.last_seq, seq
        merged = marker in _KEPT and self.replay.append(seq, text, mergeable=mergeable)
        await self.send_local(text, seq)
        bus = self.bus
        if merged:
            bus.rewrite_replay(self.session_id, request_id or "", self.replay.export())
        waiting = bus.publish(self.session_id, [seq, previous, text, marker, request_id or ""])
        if waiting is not None:
            await waiting

    async def send_local(self, text: str, seq: int | None = None) -> None:
        """Send one encoded frame to this process's sockets of the session.

        A socket with a floor (``floors``: it saw frames up to there on another worker)
        is skipped for the frames at or below it.
        """
        floors = self.floors
        for subscriber in tuple(self.sockets):
            if floors and seq is not None and subscriber in floors:
                if seq <= floors[subscriber]:
                    continue
                del floors[subscriber]
            try:
                await subscriber.send_text(text)
            except Exception:
                # A socket that cannot be written to is gone; the others keep the stream.
                logger.info("Dropping a socket of session %s that failed a send", self.session_id)
                if subscriber in self.sockets:
                    self.sockets.remove(subscriber)

    def forget(self, subscriber: Subscriber) -> None:
        """Stop sending to ``subscriber``."""
        if subscriber in self.sockets:
            self.sockets.remove(subscriber)
        self.floors.pop(subscriber, None)


async def let_the_loop_write() -> None:
    """Let the event loop write out the frames sent so far before the run goes on.

    daphne hands a frame to its transport, which writes only when the loop polls the
    socket; a model that never waits (or a burst of events between two waits) would keep
    every frame in the buffer until the run next blocks. Two turns: in the first the
    selector reports the socket writable and queues its write behind this task, in the
    second that write runs before this task continues.
    """
    await asyncio.sleep(0)
    await asyncio.sleep(0)
