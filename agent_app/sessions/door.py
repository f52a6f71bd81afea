"""A socket's way into a session: the ``session`` frame, the frames it missed, then live.

``Door.join`` does it all under the session's lock (``Feed.lock``), so nothing is lost or
sent twice between the three: it follows a run another worker runs, settles the runs a dead
process left (when no run is active), sends the ``session`` frame (the stored state and the
active run's id), replays the active run's frames after the ``seq`` the socket last saw
(from the feed's replay buffer, or the owner's stream for a run on another worker), and
adds the socket to the feed. From the moment a socket asks for the session until it has
joined it counts as ``joining``, so the session is not dropped under it.
"""

from __future__ import annotations

from typing import Any, Protocol

from channels.db import database_sync_to_async

from agent_app.durable.history import bare_snapshot, snapshot
from agent_app.protocol.frames import encode_frame
from agent_app.sessions.fanout import Feed, Subscriber
from agent_app.sessions.follower import Follower
from agent_app.sessions.replies import ReplyDesk
from agent_app.sessions.run import Run
from agent_app.sessions.settling import Settler
from agent_app.telemetry import metrics

__all__ = ["Door", "DoorHost"]


class DoorHost(Protocol):
    """What the door needs of its session (``LiveSession``)."""

    session_id: str
    feed: Feed
    follower: Follower
    settler: Settler
    replies: ReplyDesk

    @property
    def run(self) -> Run | None: ...

    @property
    def active_request_id(self) -> str | None: ...

    def check_idle(self) -> None: ...


class Door:
    """How sockets join one session (see the module docstring)."""

    def __init__(self, host: DoorHost) -> None:
        self.host = host
        #: Sockets between ``session()`` and the end of ``join``.
        self.joining = 0

    async def join(
        self,
        subscriber: Subscriber,
        after_seq: int | None = None,
        *,
        history: bool = True,
        stored_last_seq: int | None = None,
    ) -> None:
        """Send ``session`` (and the active run's frames after ``after_seq``); then live.

        ``history=False``: the ``session`` frame carries only the active run and
        ``last_seq`` (a subscriber that reads runs, not the conversation: an AG-UI stream).
        ``stored_last_seq`` (with ``history=False``): the caller has just read the stored
        ``last_seq`` and found no run to settle, and starts a run next (which settles what
        a dead process left meanwhile): the door reads neither again.
        """
        ready: list[str] = []
        self.joining += 1
        try:
            await self._enter(subscriber, after_seq, ready, history, stored_last_seq)
        finally:
            self.joining -= 1
            self.host.check_idle()
        for paused in ready:
            await self.host.replies.resume(paused)

    async def _enter(
        self,
        subscriber: Subscriber,
        after_seq: int | None,
        ready: list[str],
        history: bool,
        stored_last_seq: int | None,
    ) -> None:
        host = self.host
        feed, follower = host.feed, host.follower
        async with feed.lock:
            await follower.follow()
            if host.run is None and follower.remote is None and stored_last_seq is None:
                ready.extend(await host.settler.settle())
            frame = await self._session_frame(history, stored_last_seq)
            await subscriber.send_text(encode_frame(frame))
            if host.run is not None:
                replayed = 0
                for text in feed.replay.frames_after(after_seq):
                    await subscriber.send_text(text)
                    replayed += 1
                metrics.replayed(replayed)
            elif follower.remote is not None:
                await follower.replay_to(subscriber, after_seq)
            elif frame["last_seq"] > feed.last_seq:
                # The database knows a later end than this worker has forwarded: frames up
                # to it may still be on their way here, and this socket must not get them.
                feed.floors[subscriber] = frame["last_seq"]
            feed.sockets.append(subscriber)

    async def _session_frame(
        self, history: bool = True, stored_last_seq: int | None = None
    ) -> dict[str, Any]:
        """The ``session`` frame: the stored state, the active run, the last ``seq``."""
        host = self.host
        active = host.active_request_id
        if history:
            state = await database_sync_to_async(snapshot)(
                host.session_id, active_request_id=active
            )
        elif stored_last_seq is not None:
            state = {"stored_last_seq": stored_last_seq}
        else:
            state = await database_sync_to_async(bare_snapshot)(host.session_id)
        stored_last = state.pop("stored_last_seq")
        return {
            "type": "session",
            "session_id": host.session_id,
            **state,
            "active_request_id": active,
            "last_seq": max(stored_last, host.feed.last_seq),
        }
