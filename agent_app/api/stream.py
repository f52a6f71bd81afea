"""One AG-UI event stream: a thread's frames, as SSE, to one HTTP client.

A ``ThreadStream`` is a subscriber of the thread's live session, exactly like a chat
page's socket (``agent_app.sessions.live``): it joins under the session's lock and is sent
the ``session`` frame, then the active run's frames from the replay buffer (on this worker
or from the shared stream of another: ``agent_app.sessions.follower``), then the live
ones, every frame once, in ``seq`` order. So an HTTP client and the page's sockets see one
run, numbered the same, on any worker. The frames are fed to a ``RunEncoder``
(``agent_app.agui.encoder``), which turns them into AG-UI events with their SSE ids.

The encoder learns from the run's first frame where the run stands, and its
``after_seq`` says which events are sent: those after ``Last-Event-ID`` for a
re-attachment, those after the ``session`` frame's ``last_seq`` for a new message or a
resume (only what happens from now on). A new message or a resume joins with the whole
replay; a re-attachment joins after its id (so a merged delta that straddles it comes cut,
as a socket's replay does) and reads the run's frames up to its id apart, for the
encoder's state (``open``).

Concurrency: the live session calls ``send_text`` under its lock and must never wait for
an HTTP client, so frames go into a queue, read by the response's iterator (``sse``),
which takes every frame that arrived since its last write and sends their events in one
piece (one write to the client per burst, not per event; a long burst in pieces of about
``WRITE_BYTES``). What a client does not read piles up in daphne's transport, so before
each write the stream measures it, as a socket does (``agent_app.sessions.backpressure``): past
``ZETT_WS_SEND_BUFFER_BYTES`` unread, the stream waits up to ``DRAIN_SECONDS`` for the
client to read it down (the frames meanwhile wait in the queue, which holds the same text
objects every subscriber gets: it costs little), then the connection is dropped — and
its buffer with it — and the client re-attaches with its last id (a socket that falls
behind is closed with 4408 and resumes the same way). A client that leaves more than
``MAX_QUEUED`` frames unread is dropped too (a server without a transport to measure). The
iterator waits for the next frame at most ``ZETT_SSE_KEEPALIVE_SECONDS`` and sends a
keep-alive comment when none came. It ends after the AG-UI run's ``RUN_FINISHED`` or
``RUN_ERROR`` (and, whatever the encoder showed, with the zett run's last frame: a stream
never outlives its run), when the chat is deleted, or when the API token it was opened
with is revoked or expires (``agent_app.guard.token_watch``; its last event is then ``CUSTOM``
``zett.stream_closed``), and however it ends — the client went away
(Django cancels the response's task), the server failed — it leaves the live session and
gives back its place in the per-person limits (``close``, idempotent). A stream whose
response never begins to read it (the client hung up between the view and the first byte)
is closed after ``UNCLAIMED_SECONDS``.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import logging
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from typing import Any, TypeVar

from agent_app import conf
from agent_app.agui.encoder import RunEncoder
from agent_app.agui.sse import KEEP_ALIVE, SseEvent
from agent_app.durable.history import shown_path
from agent_app.durable.orm_thread import orm_call
from agent_app.guard.limits import SocketTicket, limiter
from agent_app.guard.token_watch import Watched, token_watch
from agent_app.protocol.text import encode_delta_frame
from agent_app.sessions.backpressure import buffered_bytes, send_buffer_cap
from agent_app.sessions.live import LiveSession
from agent_app.sessions.registry import live_sessions

__all__ = [
    "MAX_QUEUED",
    "TERMINAL_EVENTS",
    "TOKEN_ENDED_EVENT",
    "ThreadStream",
    "detached",
    "on_orm_thread",
]

T = TypeVar("T")

logger = logging.getLogger(__name__)

#: Frames a client may leave unread before its stream is dropped.
MAX_QUEUED = 20_000
#: About the most text one write to the client holds (frames are never split).
WRITE_BYTES = 64 * 1024
#: Seconds a client over its send buffer cap has to read it down before it is dropped,
#: and how often the backlog is measured meanwhile (only while it is over the cap).
DRAIN_SECONDS = 2.0
DRAIN_POLL_SECONDS = 0.02
#: Seconds a joined stream waits for its response to start reading it, then gives up (a
#: client that hung up between the view and the first byte: nobody will read it).
UNCLAIMED_SECONDS = 60.0
#: The events that end an AG-UI run, and so a stream.
TERMINAL_EVENTS = frozenset({"RUN_FINISHED", "RUN_ERROR"})
_END = None
#: Put in the queue when the stream's API token ends (compared by identity).
_TOKEN_ENDED = "token ended"
#: The last event of a stream whose API token was revoked or expired while it was open.
TOKEN_ENDED_EVENT = SseEvent(
    {
        "type": "CUSTOM",
        "name": "zett.stream_closed",
        "value": {"code": "unauthorized", "message": "The API token was revoked or has expired"},
    }
).encode()


async def detached(work: Coroutine[Any, Any, T]) -> T:
    """Await ``work`` in a task with a context of its own, not the request's.

    What a view starts in a live session — a run, a continuation, a lease watcher —
    outlives the request, but a task inherits the context it was created in, and a
    request's context carries the executor Django runs its ORM calls in for that request
    (asgiref's ``ThreadSensitiveContext``), which serves that request alone and is taken
    out of the context when the response ends (``agent_app.process.request_threads``).
    Started from here, those tasks use the ORM the way the chat socket's tasks do.
    Cancelling the caller cancels ``work``.
    """
    return await asyncio.create_task(work, context=contextvars.Context())


async def on_orm_thread(call: Callable[..., Awaitable[T]], *args: Any, **kwargs: Any) -> T:
    """Await ``call`` (an ``orm_call``: ``agent_app.durable.orm_thread``) made outside the
    request's context, so it takes the lean hop to the thread the runs' ORM work runs in
    (whose connection stays open) instead of the request's own thread: what ``detached``
    does for a ``database_sync_to_async`` call, without a task and asgiref's hop."""
    pending = contextvars.Context().run(call, *args, **kwargs)
    if asyncio.isfuture(pending):
        return await pending
    return await detached(pending)  # type: ignore[arg-type]  # asgiref's hop after all


class ThreadStream:
    """A thread's frames for one HTTP client (see the module docstring)."""

    def __init__(
        self,
        thread_id: str,
        ticket: SocketTicket | None = None,
        *,
        token_id: int | None = None,
        transport: Any = None,
    ) -> None:
        self.thread_id = thread_id
        self.live: LiveSession | None = None
        self._ticket = ticket
        #: The API token the stream was opened with, watched while it is open.
        self._token_id = token_id
        #: daphne's transport of the client's connection (``agent_app.sessions.backpressure``).
        self._transport = transport
        self._watched: Watched | None = None
        #: Frames not read yet; ``_END`` once the stream must end.
        self._frames: deque[str | None] = deque()
        #: Set by the next frame when the reader waits for one.
        self._wakeup: asyncio.Future[None] | None = None
        #: The ``session`` frame the live session sent first (set by ``open``).
        self.session: dict[str, Any] = {}
        self._closed = False
        self._unclaimed: asyncio.TimerHandle | None = None
        #: The run's frames up to a re-attachment's ``after_seq`` (``open``).
        self._before: list[dict[str, Any]] = []
        #: The highest ``seq`` of the active run's frames when a re-attachment joined.
        self._run_seq = 0

    # --- the live session's side -------------------------------------------------------

    async def send_text(self, text: str) -> None:
        if self._closed:
            return
        if len(self._frames) >= MAX_QUEUED:
            logger.info("Dropping an event stream of thread %s: it does not read", self.thread_id)
            self._stop()
            return
        self._put(text)

    def _put(self, text: str | None) -> None:
        self._frames.append(text)
        wakeup = self._wakeup
        if wakeup is not None and not wakeup.done():
            wakeup.set_result(None)

    async def chat_deleted(self) -> None:
        """The chat was deleted (``agent_app.durable.chat_records``): the stream ends."""
        self._stop()

    async def _token_ended(self) -> None:
        """Its API token was revoked or expired (``agent_app.guard.token_watch``): the stream
        says so and ends."""
        self._watched = None
        if self.live is not None:
            self.live.leave(self)
        self._put(_TOKEN_ENDED)

    def _stop(self) -> None:
        if self.live is not None:
            self.live.leave(self)
        self._put(_END)

    # --- the view's side ---------------------------------------------------------------

    async def open(
        self, after_seq: int | None = None, *, stored_last_seq: int | None = None
    ) -> dict[str, Any]:
        """Join the thread's live session; returns its ``session`` frame.

        ``after_seq`` (a re-attachment): the replay holds the frames after it, cut where a
        merged delta straddles it, and the run's frames up to it are read apart
        (``_frames_up_to``), for the encoder to learn where the run stood.
        ``stored_last_seq`` (a new message, whose view read it with the thread's rows and
        found no run to settle): the join reads nothing from the database.
        """
        await detached(self._join(after_seq or None, stored_last_seq))
        if self._token_id is not None:
            self._watched = token_watch().watch(self._token_id, self._token_ended)
        loop = asyncio.get_running_loop()
        self._unclaimed = loop.call_later(UNCLAIMED_SECONDS, self._abandon)
        first = self._frames.popleft()
        assert first is not None
        self.session = json.loads(first)
        if after_seq:
            self._before = await self._frames_up_to(after_seq)
        return self.session

    @property
    def known_seq(self) -> int:
        """The highest ``seq`` sent so far that this stream knows of: the thread's last
        one, or the active run's last frame (read by ``open`` for a re-attachment, also
        from another worker's replay stream, which may be ahead of this worker)."""
        return max(self.last_seq, self._run_seq)

    def beyond(self, after_seq: int) -> bool:
        """Whether ``after_seq`` names an event nobody was sent yet. A re-attachment
        with it would wait for events it then hides, so the view refuses it."""
        return after_seq > self.known_seq

    async def _join(self, after_seq: int | None, stored_last_seq: int | None) -> None:
        live = self.live = live_sessions().session(self.thread_id)
        # Right after ``session()`` (see ``LiveSession.join``); the stream reads runs, not
        # the conversation: its ``session`` frame carries no history.
        await live.join(self, after_seq, history=False, stored_last_seq=stored_last_seq)

    async def _frames_up_to(self, after_seq: int) -> list[dict[str, Any]]:
        """The active run's frames numbered up to ``after_seq``, decoded.

        From this worker's replay buffer when the run runs here, else from the shared
        replay stream. Deltas merged into a frame numbered past ``after_seq`` are not
        among them (that frame comes in the replay, cut): only a delta's text is lost to
        the encoder, never what was open.
        """
        live, active = self.live, self.session.get("active_request_id")
        if live is None or not active:
            return []
        if live.run is not None and live.run.request_id == active:
            texts: list[str] = list(live.feed.replay.frames_after(None))
        else:
            texts = [text for _, text in await live.bus.replay(self.thread_id, active, None)]
        frames = [json.loads(text) for text in texts]
        self._run_seq = max((int(frame.get("seq") or 0) for frame in frames), default=0)
        return [frame for frame in frames if int(frame.get("seq") or 0) <= after_seq]

    @property
    def last_seq(self) -> int:
        """The highest ``seq`` the session had sent when this stream joined."""
        return int(self.session.get("last_seq") or 0)

    def _abandon(self) -> None:
        """Nobody began reading the stream (the response never started): let it go."""
        logger.info("An event stream of thread %s was never read; closing it", self.thread_id)
        self.close()

    def close(self) -> None:
        """Leave the live session and the limits (idempotent)."""
        if self._unclaimed is not None:
            self._unclaimed.cancel()
            self._unclaimed = None
        if self._closed:
            return
        self._closed = True
        live, self.live = self.live, None
        ticket, self._ticket = self._ticket, None
        watched, self._watched = self._watched, None
        try:
            if watched is not None:
                token_watch().forget(watched)
            if live is not None:
                live.leave(self)
        finally:
            if ticket is not None:
                limiter().close_socket(ticket)

    async def _arrival(self, seconds: float) -> bool:
        """Wait up to ``seconds`` for a frame; whether one came."""
        loop = asyncio.get_running_loop()
        wakeup = self._wakeup = loop.create_future()
        timer = loop.call_later(seconds, _wake, wakeup)
        try:
            await wakeup
        finally:
            timer.cancel()
            self._wakeup = None
        return bool(self._frames)

    async def sse(
        self,
        encoder: RunEncoder,
        *,
        run_id: str | None = None,
        stop_when_idle: bool = False,
        snapshot: bool = False,
    ) -> AsyncIterator[str]:
        """The SSE text of the stream: the encoded frames, every frame that arrived
        meanwhile in one piece (one write to the client, however many events), in pieces
        of at most about ``WRITE_BYTES``.

        ``run_id``: frames before that run's ``run_started`` are skipped (a new message's
        stream is that run's only). ``snapshot`` (with ``run_id``): the run's
        ``RUN_STARTED`` is the first write, before anything is read; then the shown path
        without the run's messages (``shown_path``) is the ``MESSAGES_SNAPSHOT``'s history.
        ``stop_when_idle``: end at once when no run is active. Before each write the
        client's backlog is measured (``_drained``).
        """
        if self._unclaimed is not None:
            self._unclaimed.cancel()
            self._unclaimed = None
        try:
            if self._closed or (stop_when_idle and not self.session.get("active_request_id")):
                return
            for frame in self._before:
                encoder.encode(frame)  # numbered up to ``after_seq``: state, no events
            self._before = []
            if snapshot and run_id is not None:
                yield encoder.begin(run_id).encode()  # the first byte: nothing to wait for
                shown = await on_orm_thread(_shown_before, self.thread_id, before_request=run_id)
                encoder.show(shown)
            keepalive = float(conf.ZETT_SSE_KEEPALIVE_SECONDS)
            frames = self._frames
            batch = _Batch(encoder, run_id)
            while True:
                if not frames and not await self._arrival(keepalive):
                    yield KEEP_ALIVE
                    continue
                out, ended = batch.take(frames)
                if out:
                    if not await self._drained():
                        return
                    yield out
                if ended:
                    return
                if frames:
                    # More to write at once: let the server's loop send what it holds
                    # first (a write only queues bytes in the transport).
                    await asyncio.sleep(0)
        finally:
            self.close()

    async def _drained(self) -> bool:
        """Whether the client's connection may take the next write: it holds at most
        ``ZETT_WS_SEND_BUFFER_BYTES`` unread, or gets there within ``DRAIN_SECONDS`` (a
        client that reads but is slower than the run for a moment). Otherwise the
        connection is dropped, and what the transport held with it: the client
        re-attaches with its last id, as a socket closed with 4408 resumes."""
        transport = self._transport
        cap = send_buffer_cap()
        if transport is None or buffered_bytes(transport) <= cap:
            return True
        loop = asyncio.get_running_loop()
        deadline = loop.time() + DRAIN_SECONDS
        while loop.time() < deadline and not self._closed:
            await asyncio.sleep(DRAIN_POLL_SECONDS)
            if buffered_bytes(transport) <= cap:
                return True
        logger.info("Dropping an event stream of thread %s: it does not read", self.thread_id)
        transport.abortConnection()
        return False


class _Batch:
    """Turns queued frames into SSE text (``take``), for one stream and its encoder."""

    def __init__(self, encoder: RunEncoder, run_id: str | None) -> None:
        self.encoder = encoder
        self.run_id = run_id
        #: Frames are skipped until this run's ``run_started`` (None: none are).
        self.waiting_for = run_id
        self.deltas = _DeltaFrames()

    def take(self, frames: deque[str | None]) -> tuple[str, bool]:
        """The text of the frames at the head of ``frames`` (about ``WRITE_BYTES`` at
        most), and whether the stream ends with them."""
        out: list[str] = []
        size = 0
        encoder, deltas = self.encoder, self.deltas
        while frames and size < WRITE_BYTES:
            text = frames.popleft()
            if text is None or text is _TOKEN_ENDED:
                out.extend(() if text is None else [TOKEN_ENDED_EVENT])
                return "".join(out), True
            if self.waiting_for is None:
                delta = deltas.parse(text)
                if delta is not None:
                    fast = encoder.delta_text(*delta)
                    if fast is not None:
                        out.append(fast)
                        size += len(fast)
                        continue
            frame = json.loads(text)
            deltas.learn(frame)
            if self.waiting_for is not None:
                if frame.get("type") != "run_started" or frame.get("request_id") != self.run_id:
                    continue
                self.waiting_for = None
            ended = False
            for event in encoder.encode(frame):
                piece = event.encode()
                out.append(piece)
                size += len(piece)
                ended = ended or event.type in TERMINAL_EVENTS
            # However the encoder showed it: a stream never outlives its run.
            if ended or _ends_run(frame, encoder.run_id):
                return "".join(out), True
        return "".join(out), False


class _DeltaFrames:
    """Reads a text or reasoning delta frame without decoding it (``parse``).

    Such a frame is ``{"type": "agent_event", "seq": N`` + a middle fixed for the run
    (its request, the event type, session and phase) + the delta's JSON string + ``}}``
    (``agent_app.protocol.text.encode_delta_frame``, which also writes what the
    ``encode_frame`` of the same frame gives). The middles are learnt from the first
    frame of each kind, decoded the usual way (``learn``); ``parse`` then gives ``(seq,
    request id, event type, delta literal)`` for a frame that has one of them.
    """

    _PREFIX = '{"type": "agent_event", "seq": '

    def __init__(self) -> None:
        self.middles: dict[str, tuple[str, str]] = {}

    def learn(self, frame: dict[str, Any]) -> None:
        event = frame.get("event")
        if frame.get("type") != "agent_event" or not isinstance(event, dict):
            return
        kind = event.get("type")
        if kind not in _DELTA_KINDS or set(event) != _DELTA_KEYS or len(self.middles) > 8:
            return
        request_id, session_id, phase = frame.get("request_id"), event["session_id"], event["phase"]
        if not (isinstance(request_id, str) and isinstance(session_id, str)):
            return
        if phase is not None and not isinstance(phase, str):
            return
        probe = encode_delta_frame(7, request_id, kind, session_id, phase, "")
        start, end = len(self._PREFIX) + 1, len(probe) - len('""}}')
        if probe.startswith(self._PREFIX + "7") and probe.endswith('""}}'):
            self.middles[probe[start:end]] = (request_id, kind)

    def parse(self, text: str) -> tuple[int, str, str, str] | None:
        if not self.middles or not text.startswith(self._PREFIX) or not text.endswith("}}"):
            return None
        comma = text.find(",", len(self._PREFIX))
        digits = text[len(self._PREFIX) : comma]
        if comma < 0 or not digits.isdigit():
            return None
        for middle, (request_id, kind) in self.middles.items():
            if text.startswith(middle, comma):
                literal = text[comma + len(middle) : -2]
                if literal.startswith('"'):
                    return int(digits), request_id, kind, literal
        return None


#: Frames that end a zett run (``agent_event`` ``run_completed`` too): docs/protocol.md.
_RUN_ENDS = frozenset({"run_failed", "run_cancelled", "run_interrupted", "run_paused"})


def _ends_run(frame: dict[str, Any], run_id: str | None) -> bool:
    """Whether ``frame`` ends the run a stream shows (``run_id``; None: any run)."""
    if run_id is not None and frame.get("request_id") != run_id:
        return False
    kind = frame.get("type")
    if kind in _RUN_ENDS:
        return True
    event = frame.get("event")
    return (
        kind == "agent_event" and isinstance(event, dict) and event.get("type") == "run_completed"
    )


_DELTA_KINDS = frozenset({"text_delta", "reasoning_delta"})
_DELTA_KEYS = frozenset({"type", "session_id", "phase", "delta"})


#: The thread's shown path without the run's messages, read on the connection the run
#: writes on (the runs' ORM thread, not the request's), so after or before each of its
#: writes and never beside one (SQLite would refuse the read while another connection's
#: write holds the table).
_shown_before = orm_call(shown_path)


def _wake(wakeup: asyncio.Future[None]) -> None:
    if not wakeup.done():
        wakeup.set_result(None)
