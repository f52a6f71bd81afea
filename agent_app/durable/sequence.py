"""``seq``: the numbers of a session's broadcast frames, never going backwards.

A process that numbers a session's frames first reserves a block of numbers in the
database (``ChatSession.seq_reserved``), then hands them out from memory. A crash loses at
most the rest of the block, never a number already sent: the next process to number the
session reserves above everything ever reserved, so its frames are numbered above every
frame the dead process sent. Only the process that holds a session's run (or recovers it)
numbers its frames, so numbers also increase across processes. Within one process the
numbers of consecutive frames are consecutive: a run's frames are contiguous.

``reserve_block`` is one ``UPDATE … SET seq_reserved = seq_reserved + n`` and a read of the
new value in the same transaction: the update takes the row's write lock (PostgreSQL) or
the database's (SQLite) before the read, so two processes never get the same block.
"""

from __future__ import annotations

from channels.db import database_sync_to_async
from django.db import transaction
from django.db.models import F

from agent_app.models import ChatSession

__all__ = ["SEQ_BLOCK", "SeqCounter", "reserve_block"]

#: Numbers reserved at a time: one database write per this many frames.
SEQ_BLOCK = 1000


def reserve_block(session_id: str, size: int = SEQ_BLOCK) -> tuple[int, int]:
    """Reserve ``size`` numbers of a stored session; return ``(first, last)`` of the block."""
    with transaction.atomic():
        ChatSession.objects.filter(pk=session_id).update(seq_reserved=F("seq_reserved") + size)
        last = ChatSession.objects.filter(pk=session_id).values_list("seq_reserved", flat=True)
        last = last.get()
    return last - size + 1, last


class SeqCounter:
    """Hands out a session's frame numbers in this process, block by block."""

    __slots__ = ("_limit", "_next", "session_id")

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self._next = 0
        self._limit = -1

    @property
    def last(self) -> int:
        """The last number handed out (0 before the first)."""
        return max(self._next - 1, 0)

    def add_block(self, first: int, last: int) -> None:
        """Use a freshly reserved block (continuing the current one when it is adjacent)."""
        if first != self._limit + 1:
            self._next = first
        self._limit = last

    def take_nowait(self) -> int | None:
        """The next number, or None when the block is used up (call ``take``)."""
        if self._next > self._limit:
            return None
        number = self._next
        self._next += 1
        return number

    async def take(self) -> int:
        """The next number, reserving a new block first when needed."""
        number = self.take_nowait()
        if number is None:
            self.add_block(*await database_sync_to_async(reserve_block)(self.session_id))
            number = self.take_nowait()
            assert number is not None
        return number
