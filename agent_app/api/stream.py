"""One AG-UI event stream: a thread's frames, as SSE, to one HTTP client.

A ``ThreadStream`` is a subscriber of the thread's live session, exactly like a chat
page's socket (``agent_app.sessions.live``): it joins under the session's lock and is sent
the ``session`` frame, then the active run's frames from the replay buffer (on this worker
or from the shared stream of another: ``agent_app.sessions.follower``), then the live
ones, every frame once, in ``seq`` order. So an HTTP client and the page's sockets see one
run, numbered the same, on any worker. The frames are fed to a ``RunEncoder``
(``agent_app.agui.encoder``), which turns them into AG-UI events with their SSE ids.

The stream always joins with the whole replay (the encoder learns from the run's first
frame where it stands) and the encoder's ``after_seq`` says which events are sent: those
after ``Last-Event-ID`` for a re-attachment, those after the ``session`` frame's
``last_seq`` for a new message or a resume (only what happens from now on).

Concurrency: the live session calls ``send_text`` under its lock and must never wait for
an HTTP client, so frames go into an unbounded queue, read by the response's iterator
(``sse``). A client that leaves more than ``MAX_QUEUED`` frames unread is dropped (its
stream ends; it re-attaches with its last id, as a socket that falls behind does). The
iterator waits for the next frame at most ``ZETT_SSE_KEEPALIVE_SECONDS`` and sends a
keep-alive comment when none came. It ends after the AG-UI run's ``RUN_FINISHED`` or
``RUN_ERROR``, or when the chat is deleted, and however it ends — the client went away
(Django cancels the response's task), the server failed — it leaves the live session and
gives back its place in the per-person limits (``close``, idempotent).
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import logging
from collections.abc import AsyncIterator, Coroutine, Iterable
from typing import Any, TypeVar

from agent_app import conf
from agent_app.agui.encoder import RunEncoder
from agent_app.agui.sse import KEEP_ALIVE, SseEvent, encode_events
from agent_app.guard.limits import SocketTicket, limiter
from agent_app.sessions.live import LiveSession
from agent_app.sessions.registry import live_sessions

__all__ = ["MAX_QUEUED", "TERMINAL_EVENTS", "ThreadStream", "detached"]

T = TypeVar("T")

logger = logging.getLogger(__name__)

#: Frames a client may leave unread before its stream is dropped.
MAX_QUEUED = 20_000
#: The events that end an AG-UI run, and so a stream.
TERMINAL_EVENTS = frozenset({"RUN_FINISHED", "RUN_ERROR"})
_END = None


async def detached(work: Coroutine[Any, Any, T]) -> T:
    """Await ``work`` in a task with a context of its own, not the request's.

    What a view starts in a live session — a run, a continuation, a lease watcher —
    outlives the request, but a task inherits the context it was created in, and a
    request's context carries the executor Django runs its ORM calls in for that request
    (asgiref's ``ThreadSensitiveContext``), which is shut down when the response ends.
    Started from here, those tasks use the ORM the way the chat socket's tasks do.
    Cancelling the caller cancels ``work``.
    """
    return await asyncio.create_task(work, context=contextvars.Context())


class ThreadStream:
    """A thread's frames for one HTTP client (see the module docstring)."""

    def __init__(self, thread_id: str, ticket: SocketTicket | None = None) -> None:
        self.thread_id = thread_id
        self.live: LiveSession | None = None
        self._ticket = ticket
        self._queue: asyncio.Queue[str | None] = asyncio.Queue()
        #: The ``session`` frame the live session sent first (set by ``open``).
        self.session: dict[str, Any] = {}
        self._closed = False

    # --- the live session's side -------------------------------------------------------

    async def send_text(self, text: str) -> None:
        if self._closed:
            return
        if self._queue.qsize() >= MAX_QUEUED:
            logger.info("Dropping an event stream of thread %s: it does not read", self.thread_id)
            self._stop()
            return
        self._queue.put_nowait(text)

    async def chat_deleted(self) -> None:
        """The chat was deleted (``agent_app.chat_records``): the stream ends."""
        self._stop()

    def _stop(self) -> None:
        if self.live is not None:
            self.live.leave(self)
        self._queue.put_nowait(_END)

    # --- the view's side ---------------------------------------------------------------

    async def open(self) -> dict[str, Any]:
        """Join the thread's live session; returns its ``session`` frame."""
        await detached(self._join())
        first = self._queue.get_nowait()
        assert first is not None
        self.session = json.loads(first)
        return self.session

    async def _join(self) -> None:
        live = self.live = live_sessions().session(self.thread_id)
        await live.join(self)  # right after ``session()``: see ``LiveSession.join``

    @property
    def last_seq(self) -> int:
        """The highest ``seq`` the session had sent when this stream joined."""
        return int(self.session.get("last_seq") or 0)

    def close(self) -> None:
        """Leave the live session and the limits (idempotent)."""
        if self._closed:
            return
        self._closed = True
        live, self.live = self.live, None
        ticket, self._ticket = self._ticket, None
        try:
            if live is not None:
                live.leave(self)
        finally:
            if ticket is not None:
                limiter().close_socket(ticket)

    async def sse(
        self,
        encoder: RunEncoder,
        *,
        first: Iterable[SseEvent] = (),
        run_id: str | None = None,
        stop_when_idle: bool = False,
    ) -> AsyncIterator[str]:
        """The SSE text of the stream: ``first``, then the encoded frames.

        ``run_id``: frames before that run's ``run_started`` are skipped (a new message's
        stream is that run's only). ``stop_when_idle``: end at once when no run is active.
        """
        getter: asyncio.Future[str | None] | None = None
        try:
            prelude = list(first)
            if prelude:
                yield encode_events(prelude)
                if prelude[-1].type in TERMINAL_EVENTS:
                    return
            if stop_when_idle and not self.session.get("active_request_id"):
                return
            waiting_for = run_id
            keepalive = float(conf.ZETT_SSE_KEEPALIVE_SECONDS)
            queue = self._queue
            while True:
                if queue.empty():
                    if getter is None:
                        getter = asyncio.ensure_future(queue.get())
                    done, _ = await asyncio.wait((getter,), timeout=keepalive)
                    if not done:
                        yield KEEP_ALIVE
                        continue
                    text, getter = getter.result(), None
                else:
                    text = queue.get_nowait()
                if text is None:
                    return
                frame = json.loads(text)
                if waiting_for is not None:
                    if frame.get("type") != "run_started" or frame.get("request_id") != run_id:
                        continue
                    waiting_for = None
                events = encoder.encode(frame)
                if not events:
                    continue
                yield encode_events(events)
                if any(event.type in TERMINAL_EVENTS for event in events):
                    return
        finally:
            if getter is not None:
                getter.cancel()
            self.close()
