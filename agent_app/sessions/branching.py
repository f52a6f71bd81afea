"""Switching a chat's shown version, and telling every socket of a new path.

Which rows are shown is the database's business (``agent_app.durable.branches``); this
module orders the change with everything else the sockets see. A switch takes the feed's
lock (``agent_app.sessions.live``), so it lands between two frames, never inside a run's
stream: a run of the session, here or on another worker, makes it ``Busy`` (checked here
first, then again, under the session row's lock, by the switch's transaction, which also
counts a run that waits for a reply). The ``branch_switched`` frame takes its ``seq``
before the transaction, which records it as the session's last: a socket that joins later
reads the new path in its ``session`` frame. It is not part of a run, so it is not kept for
replay. A new version made by ``edit`` or ``regenerate`` is announced by the run that
answers it, right after its ``run_started`` and kept with the run's frames, so a socket
that resumes the run sees it too (``announce_version``).
"""

from __future__ import annotations

from typing import Any, Protocol

from channels.db import database_sync_to_async

from agent_app.bus.base import Marker
from agent_app.durable.branches import BranchBusy, NotATurn, switch_version
from agent_app.durable.history import branch_page, history_item
from agent_app.durable.runs import Begun
from agent_app.models import ChatSession
from agent_app.protocol.frames import BranchSwitchedFrame
from agent_app.protocol.refusals import Busy
from agent_app.protocol.text import encode_frame
from agent_app.sessions.fanout import Feed

__all__ = ["BranchHost", "announce_version", "switch"]

#: What a switch is told while a run goes on (or waits for a reply).
BUSY_MESSAGE = (
    "A run is going on in this chat (or waits for a reply): switch versions once it has ended"
)


class BranchHost(Protocol):
    """What a switch needs of its session (``LiveSession``)."""

    session_id: str
    feed: Feed

    @property
    def active_request_id(self) -> str | None: ...


def _switched(session_id: str, position: int, index: int, seq: int) -> dict[str, Any]:
    switched = switch_version(session_id, position, index, seq=seq)
    return {"index": switched.index, **branch_page(session_id, position)}


async def switch(host: BranchHost, position: int, index: int) -> None:
    """Show version ``index`` of the turn at ``position`` and tell every socket.

    ``Busy`` while a run goes on; ``agent_app.durable.branches.NotATurn`` for a position
    or index that names nothing (nothing changes either way).
    """
    running = host.active_request_id
    if running is not None:
        raise Busy(running, BUSY_MESSAGE)
    feed = host.feed
    async with feed.lock:
        if (running := host.active_request_id) is not None:
            raise Busy(running, BUSY_MESSAGE)
        try:
            seq = await feed.next_seq()  # reserves numbers in the chat's row, if it has one
        except ChatSession.DoesNotExist:
            raise NotATurn(f"There is no message at position {position} of this chat") from None
        try:
            fields = await database_sync_to_async(_switched)(host.session_id, position, index, seq)
        except BranchBusy:
            raise Busy(None, BUSY_MESSAGE) from None
        frame = BranchSwitchedFrame(seq=seq, position=position, **fields)
        await feed.broadcast(seq, encode_frame(frame.dump()), marker=Marker.UNKEPT)


async def announce_version(feed: Feed, request_id: str, begun: Begun) -> None:
    """After a run's ``run_started`` (under the lock): the new version it answers."""
    row = begun.version_row
    if row is None or begun.position is None:
        return
    item = history_item(row)
    if begun.attachments:
        item["attachments"] = begun.attachments
    seq = await feed.next_seq()
    frame = BranchSwitchedFrame(
        seq=seq,
        position=begun.position,
        index=row.version,
        messages=[item],
        runs=[],
        has_more=False,
    )
    await feed.broadcast(seq, encode_frame(frame.dump()), request_id=request_id)
