"""Frame fan-out: how one numbered frame reaches every socket of a session.

``FrameFanout`` is a mixin of ``agent_app.sessions.live.LiveSession``: it numbers frames
(``next_seq``, ``broadcast_event``), sends them to this process's sockets and publishes them
to the other workers (``_broadcast``, ``_send_local``). Why the lock orders every frame and
when a run lets the event loop write them out is told once, in ``agent_app.sessions.live``. This is
the hot path of a streaming run: it is tuned for speed, so change it only with a benchmark
(``bench/socket.py``).
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from agent_app.bus.replay import MERGEABLE_EVENTS
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

if TYPE_CHECKING:
    from agent_app.sessions.live import LiveSession

__all__ = ["FrameFanout"]

logger = logging.getLogger(__name__)

E = AgentEventType
#: Deltas whose frame is built as text straight from the event (``encode_delta_frame``).
_TEXT_DELTAS = frozenset(
    {E.TEXT_DELTA, E.REASONING_DELTA, E.COMPACTION_TEXT_DELTA, E.COMPACTION_REASONING_DELTA}
)
#: Of those, the ones the replay buffer may merge (``MERGEABLE_EVENTS``).
_MERGEABLE_DELTAS = frozenset(kind for kind in _TEXT_DELTAS if kind.value in MERGEABLE_EVENTS)
#: Longest a run keeps the event loop to itself while it streams deltas, in seconds.
_STREAK = 0.004


class FrameFanout:
    """Numbering and sending frames (a mixin of ``LiveSession``; see the module docstring)."""

    async def next_seq(self: LiveSession) -> int:
        """The next frame number (the caller holds the lock)."""
        seq = self.seq.take_nowait()
        return seq if seq is not None else await self.seq.take()

    async def broadcast_event(
        self: LiveSession, request_id: str, event: dict[str, Any] | AgentEvent
    ) -> None:
        """Number one agent event and send it to every socket, in the same order for all.

        ``event`` is ``event_to_dict``'s output, or, for a text, reasoning or compaction
        delta, the ``AgentEvent`` itself: its frame is then built as text directly
        (``encode_delta_frame``, the same text). One length check tells the rare event
        too large for a frame (``_broadcast_large``) from the rest.
        """
        if type(event) is not dict and event.type not in _TEXT_DELTAS:
            event = event_to_dict(event)  # only deltas take the text path
        lock = self._lock
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
            await self._broadcast(seq, text, mergeable=mergeable, request_id=request_id)
        finally:
            lock.release()

    async def _broadcast_large(
        self: LiveSession, seq: int, request_id: str, event: dict[str, Any]
    ) -> None:
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
            await self._broadcast(seq, text, mergeable=mergeable, request_id=request_id)

    async def _broadcast(
        self: LiveSession,
        seq: int,
        text: str,
        *,
        marker: str = "",
        mergeable: bool = False,
        request_id: str | None = None,
    ) -> None:
        """Send one numbered frame to every socket, here and on the other workers.

        The caller holds the lock. ``marker``: ``start`` (a run's first frame), ``end``
        (its last), ``unkept`` (not part of a run), or ``""``. Run frames are kept for
        replay (``end`` and ``unkept`` ones are not).
        """
        previous, self.last_seq = self.last_seq, seq
        kept = marker in ("", "start")
        merged = kept and self.replay.append(seq, text, mergeable=mergeable)
        await self._send_local(text, seq)
        cluster = self.cluster
        if cluster is not None:
            if merged:
                cluster.rewrite_replay(self.session_id, request_id or "", self.replay.export())
            waiting = cluster.publish(
                self.session_id, [seq, previous, text, marker, request_id or ""]
            )
            if waiting is not None:
                await waiting

    async def _send_local(self: LiveSession, text: str, seq: int | None = None) -> None:
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


async def _let_the_loop_write() -> None:
    """Let the event loop write out the frames sent so far before the run goes on.

    daphne hands a frame to its transport, which writes only when the loop polls the
    socket; a model that never waits (or a burst of events between two waits) would keep
    every frame in the buffer until the run next blocks. Two turns: in the first the
    selector reports the socket writable and queues its write behind this task, in the
    second that write runs before this task continues.
    """
    await asyncio.sleep(0)
    await asyncio.sleep(0)
