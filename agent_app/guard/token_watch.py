"""What an API token opened ends when the token does: ``TokenWatch``.

A socket or an event stream opened with a token (``agent_app.guard.tokens``) is checked when it
opens. Revoking the token (``manage.py zett_token revoke``, the admin), its expiry, or its
user made inactive or deleted must also end what is already open, on every worker. So each
process keeps the token ids of its open connections and reads them again every
``RECHECK_SECONDS`` — one query for all of them, and only while one is open — and ends
the connections of every token that is no longer good (``tokens.valid_token_ids``).

Reading the database rather than waiting for a message through the channel layer makes it
hold whatever changed the token — the admin in any worker, the management command in a
process of its own, a plain ``UPDATE`` — and without Redis. What ending means is the
connection's: a socket is told ``forbidden`` and closed with ``TOKEN_ENDED_CLOSE_CODE``, an
event stream ends (``agent_app.api.stream``).

Concurrency: everything runs on the event loop that serves the connections; the query runs
in the ORM's thread. The check runs in one task of the watch, started by the first
connection and ended when the last one is forgotten. A connection ended by it is forgotten
first, so its own clean-up finds nothing to undo.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from channels.db import database_sync_to_async

from agent_app.guard.tokens import valid_token_ids

__all__ = ["RECHECK_SECONDS", "TOKEN_ENDED_CLOSE_CODE", "TokenWatch", "Watched", "token_watch"]

logger = logging.getLogger(__name__)

#: Seconds between two checks of the open connections' tokens.
RECHECK_SECONDS = 0.5
#: Close code of a socket whose API token was revoked or expired (or whose user was
#: deactivated) while it was open.
TOKEN_ENDED_CLOSE_CODE = 4401


@dataclass(eq=False)
class Watched:
    """One open connection of a token, and how to end it."""

    token_id: int
    end: Callable[[], Awaitable[None]]


class TokenWatch:
    """The open connections of this process, by token (see the module docstring)."""

    def __init__(self) -> None:
        self._open: dict[int, set[Watched]] = {}
        self._task: asyncio.Task[None] | None = None

    def watch(self, token_id: int, end: Callable[[], Awaitable[None]]) -> Watched:
        """Call ``end`` once the token ``token_id`` is no longer good; ``forget`` it when
        the connection ends by itself."""
        watched = Watched(token_id, end)
        self._open.setdefault(token_id, set()).add(watched)
        task = self._task
        loop = asyncio.get_running_loop()
        if task is None or task.done() or task.get_loop() is not loop:
            # A context of its own: not the context of the request that happened to open
            # the first connection, whose ORM executor ends with that request.
            self._task = loop.create_task(
                self._check_while_open(), name="zett-token-watch", context=contextvars.Context()
            )
        return watched

    def forget(self, watched: Watched) -> None:
        """The connection ended: stop watching it (idempotent)."""
        connections = self._open.get(watched.token_id)
        if connections is None:
            return
        connections.discard(watched)
        if not connections:
            del self._open[watched.token_id]
        if not self._open and self._task is not None:
            task, self._task = self._task, None
            if not task.done() and task is not asyncio.current_task():
                task.cancel()

    @property
    def token_ids(self) -> set[int]:
        """The tokens with an open connection here."""
        return set(self._open)

    async def _check_while_open(self) -> None:
        while self._open:
            await asyncio.sleep(RECHECK_SECONDS)
            await self.check()

    async def check(self) -> None:
        """End the connections of every watched token that is no longer good."""
        watched = list(self._open)
        if not watched:
            return
        try:
            good = await database_sync_to_async(valid_token_ids)(watched)
        except Exception:
            logger.warning("Could not check the API tokens of open connections", exc_info=True)
            return
        for token_id in watched:
            if token_id in good:
                continue
            ended = self._open.pop(token_id, set())
            if ended:
                logger.info("API token %s ended: closing %d connection(s)", token_id, len(ended))
            for connection in ended:
                try:
                    await connection.end()
                except Exception:
                    logger.exception("Closing a connection of API token %s failed", token_id)


_WATCH = TokenWatch()


def token_watch() -> TokenWatch:
    """This process's watch."""
    return _WATCH
