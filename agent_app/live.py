"""Live sessions: the in-process state of a chat session that has sockets or a run here.

Where a session's state lives, and who may change it (told once, here):

- **The database** holds what must outlive a process: the messages (written as they settle,
  ``agent_app.persistence``), the runs (``agent_app.runs``), the waits
  (``agent_app.waits``), the title, the ``seq`` high-water mark (``agent_app.sequence``).
- **This process** holds, per session, a ``LiveSession``: the sockets connected here, the
  active run if this process runs it (its task, its agent, its replay buffer) and the
  ``seq`` block it numbers frames from. It exists while the session has a socket or a
  run here, and is dropped when it has neither.
- **Other processes** (with ``REDIS_URL``): ``agent_app.cluster`` extends this with run
  leases, cross-process fan-out and a shared replay buffer.

How a run flows:

- **A run belongs to the session, not to a socket.** ``start`` claims the session
  synchronously (a second ``user_message`` from any socket is ``Busy``), stores the run and
  the user's message (``begin_run``, write-ahead), broadcasts ``run_started`` to every
  socket, and only then starts the run's task. Sockets come and go; closing the last one
  changes nothing for the run, which goes on to its end and is stored. A question or
  approval with no socket left keeps waiting until its deadline. Only ``cancel`` stops a run.
- **One lock orders everything every socket sees** (``_lock``): each broadcast frame takes
  the next ``seq`` under it and is sent to every socket before the next, so all sockets see
  the same frames in the same order; a socket joins under it too — it gets the ``session``
  frame, then the active run's frames from the replay buffer after the ``seq`` it last saw,
  then the live ones, with nothing lost or repeated in between.
- **The run task** iterates ``agent.stream`` and broadcasts each event. The runtime runs at
  most one event ahead of it, so a slow socket slows the run instead of piling up frames.
  daphne writes a frame out only when the event loop polls the socket, so after every event
  that is not a streamed delta, and at least every 4 ms while deltas stream, the task lets
  the loop go round (``_let_the_loop_write``).
- **Replies** (``external_event``, ``steer``) are handed to the agent under the lock; the
  replying socket gets its ``external_event_result`` before any frame the reply causes, and
  every socket gets ``reply_accepted``. An accepted answer to a question or approval is
  recorded (``waits.mark``) before the lock is released, so before the tool it unblocks can
  start: an approved tool never runs on a reply the database does not know.
- **Cancellation**: ``cancel()`` cancels the run task and awaits its end. The runtime
  settles the request (cancelled tool results, waits cancelled, the partial answer stored);
  the task records the outcome and broadcasts ``run_cancelled``. When ``cancel()`` returns,
  nothing of the run is left. A task cancelled before it ever ran is finished by ``cancel``.
- **Honest restarts**: a run row still ``running`` that no process runs (its process
  died) is settled the next time the session is touched — a socket joins or a message
  starts a run — by ``agent_app.recovery``: it becomes ``interrupted`` (its open tool calls
  closed) or ``paused`` (it was waiting for replies that can still be given), and the
  sockets are told.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket as _socket
import uuid
import weakref
from collections.abc import Awaitable, Callable, Iterator
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any, Protocol

from channels.db import database_sync_to_async
from django.conf import settings

from agent_app import recovery, waits
from agent_app.agents import build_agent
from agent_app.history import page_before, snapshot
from agent_app.models import RunKind, RunStatus, WaitStatus
from agent_app.persistence import INPUT_STORED, settle
from agent_app.protocol import (
    RunCancelledFrame,
    RunFailedFrame,
    RunStartedFrame,
    agent_event_frame,
    encode_frame,
    fit_event,
)
from agent_app.replay import DEFAULT_REPLAY_FRAMES, MERGEABLE_EVENTS, ReplayBuffer
from agent_app.runs import Begun, Creator, begin_run, end_run, user_message_for
from agent_app.sequence import SeqCounter
from zett_agent.agent import Agent, AgentRunConfig
from zett_agent.events import AgentEventType
from zett_agent.extensions.external import ExternalEvent
from zett_agent.serialization import event_to_dict

__all__ = [
    "WORKER_ID",
    "AgentFactory",
    "Busy",
    "LiveSession",
    "LiveSessions",
    "NotRunning",
    "Subscriber",
    "live_sessions",
]

logger = logging.getLogger(__name__)

#: This process, as run rows and leases name it: host, pid and a random boot id.
WORKER_ID = f"{_socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"

#: Builds the agent of one session, given its id.
AgentFactory = Callable[[str], Awaitable[Agent]]

E = AgentEventType
#: Streamed pieces: these may wait in the socket's buffer for the next ones.
_DELTAS = frozenset(
    {
        E.TEXT_DELTA,
        E.REASONING_DELTA,
        E.TOOL_CALL_DELTA,
        E.SERVER_TOOL_INPUT_DELTA,
        E.COMPACTION_TEXT_DELTA,
        E.COMPACTION_REASONING_DELTA,
    }
)
_TOOL_ENDS = frozenset({E.TOOL_COMPLETED, E.TOOL_FAILED, E.TOOL_SKIPPED})
#: Longest a run keeps the event loop to itself while it streams deltas, in seconds.
_STREAK = 0.004


class Subscriber(Protocol):
    """A socket of the session: the live session only ever sends it encoded frames."""

    async def send_text(self, text: str) -> None: ...


class Busy(Exception):
    """A request of this session is already running."""

    def __init__(self, request_id: str) -> None:
        super().__init__(
            f"Request {request_id} of this session is still running; "
            "wait for it to finish or send cancel"
        )
        self.request_id = request_id


class NotRunning(Exception):
    """No request of this session is running."""


@dataclass(eq=False)
class _Run:
    request_id: str
    kind: str = RunKind.MESSAGE
    resumed_from: str | None = None
    task: asyncio.Task[None] | None = None
    finished: bool = False
    #: Token usage summed over the run's model calls.
    usage: dict[str, int] = field(default_factory=dict)
    #: Calls of this run with a stored wait (marked done when their result lands).
    waits: set[str] = field(default_factory=set)


@dataclass(frozen=True, slots=True)
class Verdict:
    """What became of a reply: who took it, or why nobody did."""

    request_id: str | None
    accepted_by: list[str]
    reason: str | None = None


class LiveSession:
    """The sockets, the active run and the frame numbering of one session in this process."""

    def __init__(self, registry: LiveSessions, session_id: str) -> None:
        self.registry = registry
        self.session_id = session_id
        self.sockets: list[Subscriber] = []
        #: Built by the first run; kept while the session is live here.
        self.agent: Agent | None = None
        self.seq = SeqCounter(session_id)
        #: The last ``seq`` broadcast from here.
        self.last_seq = 0
        self.replay = ReplayBuffer(
            int(getattr(settings, "ZETT_REPLAY_FRAMES", 0) or 0) or DEFAULT_REPLAY_FRAMES
        )
        self._run: _Run | None = None
        self._lock = asyncio.Lock()

    @property
    def active_request_id(self) -> str | None:
        return self._run.request_id if self._run else None

    @property
    def idle(self) -> bool:
        return not self.sockets and self._run is None

    # --- sockets -----------------------------------------------------------------------

    async def join(self, subscriber: Subscriber, after_seq: int | None = None) -> None:
        """Send ``session`` (and the active run's frames after ``after_seq``); then live."""
        async with self._lock:
            if self._run is None:
                await self._recover()
            active = self.active_request_id
            state = await database_sync_to_async(snapshot)(
                self.session_id, active_request_id=active
            )
            stored_last = state.pop("stored_last_seq")
            frame = {
                "type": "session",
                "session_id": self.session_id,
                **state,
                "active_request_id": active,
                "last_seq": max(stored_last, self.last_seq),
            }
            await subscriber.send_text(encode_frame(frame))
            if self._run is not None:
                for text in self.replay.frames_after(after_seq):
                    await subscriber.send_text(text)
            self.sockets.append(subscriber)

    def leave(self, subscriber: Subscriber) -> None:
        """Stop sending to ``subscriber``; the run (if any) goes on."""
        if subscriber in self.sockets:
            self.sockets.remove(subscriber)
        self.registry.drop_if_idle(self)

    async def history_before(self, position: int, limit: int) -> dict[str, Any]:
        """A ``history_page`` frame's fields."""
        return await database_sync_to_async(page_before)(
            self.session_id, position, limit, active_request_id=self.active_request_id
        )

    # --- runs --------------------------------------------------------------------------

    async def start(self, content: str, creator: Creator | None = None) -> str:
        """Store and start a request answering ``content``; ``Busy`` if one runs."""
        if self._run is not None:
            raise Busy(self._run.request_id)
        run = self._run = _Run(request_id=str(uuid.uuid4()))
        try:
            async with self._lock:
                await self._recover(abandon_paused=True)
                begun = await settle(
                    database_sync_to_async(begin_run)(
                        self.session_id,
                        run.request_id,
                        content=content,
                        worker=WORKER_ID,
                        creator=creator,
                    )
                )
                await self._announce(run, begun, content)
        except BaseException:
            if self._run is run:
                self._run = None
            raise
        run.task = asyncio.create_task(
            self._execute(run, content), name=f"zett-run-{run.request_id}"
        )
        return run.request_id

    async def _announce(self, run: _Run, begun: Begun, content: str | None) -> None:
        """Broadcast ``run_started`` (under the lock): the first frame of the run."""
        self.seq.add_block(*begun.seq_block)
        self.replay.clear()
        seq = await self.seq.take()
        frame = RunStartedFrame(
            seq=seq,
            request_id=run.request_id,
            content=content,
            kind=run.kind,
            resumed_from=run.resumed_from,
            position=begun.position,
            created_at=begun.created_at.isoformat().replace("+00:00", "Z"),
        )
        await self._broadcast(seq, encode_frame(frame.dump()))

    async def cancel(self) -> None:
        """Cancel the active run and wait until it has wound down (``NotRunning`` if none)."""
        run = self._run
        if run is None or run.task is None:
            raise NotRunning
        run.task.cancel()
        await asyncio.wait([run.task])
        if not run.finished:  # cancelled before its first step: nothing of it ran
            await self._finish(run, RunStatus.CANCELLED)

    async def wait_for_run(self) -> None:
        """Return once the active run (if any) has ended and its outcome is sent."""
        run = self._run
        if run is not None and run.task is not None:
            await asyncio.wait([run.task])

    async def _agent(self) -> Agent:
        if self.agent is None:
            self.agent = await self.registry.factory(self.session_id)
        return self.agent

    async def _execute(self, run: _Run, content: str | None) -> None:
        config = AgentRunConfig(session_id=self.session_id, request_id=run.request_id)
        final: dict[str, Any] | None = None
        try:
            agent = await self._agent()
            stream = agent.stream(content, config=config, metadata={INPUT_STORED: True})
            clock = asyncio.get_running_loop().time
            streak_started = clock()
            async with aclosing(stream) as events:
                async for event in events:
                    kind = event.type
                    if kind is E.RUN_COMPLETED:
                        # Held back until the stream has ended and released the session:
                        # a client may send its next message the moment it sees this.
                        final = event_to_dict(event)
                        continue
                    data = event_to_dict(event)
                    if kind is E.CUSTOM:
                        await self._custom(run, data)
                        streak_started = clock()
                        continue
                    if kind is E.MODEL_COMPLETED or kind is E.MODEL_STOPPED:
                        _add_usage(run.usage, data.get("response"))
                    elif kind in _TOOL_ENDS and run.waits:
                        await self._close_wait(run, data)
                    await self.broadcast_event(run.request_id, data)
                    if kind not in _DELTAS or clock() - streak_started > _STREAK:
                        await _let_the_loop_write()
                        streak_started = clock()
        except asyncio.CancelledError:
            await self._finish(run, RunStatus.CANCELLED)
            return
        except Exception as error:
            logger.warning(
                "Request %s of session %s failed", run.request_id, self.session_id, exc_info=error
            )
            await self._finish(run, RunStatus.FAILED, error=user_message_for(error))
            return
        await self._finish(run, RunStatus.COMPLETED, final=final)

    async def _finish(
        self,
        run: _Run,
        status: RunStatus,
        *,
        final: dict[str, Any] | None = None,
        error: tuple[str, str] | None = None,
    ) -> None:
        """Record the outcome, then send its frame: the run's last act, under the lock."""
        if run.finished:
            return
        run.finished = True
        async with self._lock:
            try:
                if status is not RunStatus.COMPLETED:
                    await settle(
                        database_sync_to_async(recovery.close_run_calls)(
                            self.session_id, run.request_id, status
                        )
                    )
                seq = await self.seq.take()
                await settle(
                    database_sync_to_async(end_run)(
                        run.request_id, status, last_seq=seq, error=error, usage=run.usage
                    )
                )
            except Exception:
                logger.exception("Could not record the end of request %s", run.request_id)
                seq = await self.seq.take()
            finally:
                if self._run is run:
                    self._run = None
            if status is RunStatus.COMPLETED and final is not None:
                text = encode_frame(agent_event_frame(seq, run.request_id, fit_event(final)))
            elif status is RunStatus.CANCELLED:
                text = encode_frame(RunCancelledFrame(seq=seq, request_id=run.request_id).dump())
            else:
                error = error or ("Error", "The answer failed.")
                text = encode_frame(
                    RunFailedFrame(
                        seq=seq,
                        request_id=run.request_id,
                        error={"type": error[0], "message": error[1]},
                    ).dump()
                )
            await self._broadcast(seq, text, keep=False)
            self.replay.clear()
        self.registry.drop_if_idle(self)

    # --- frames ------------------------------------------------------------------------

    async def broadcast_event(self, request_id: str, event: dict[str, Any]) -> None:
        """Number one agent event and send it to every socket, in the same order for all."""
        async with self._lock:
            seq = self.seq.take_nowait()
            if seq is None:
                seq = await self.seq.take()
            text = encode_frame(agent_event_frame(seq, request_id, fit_event(event)))
            await self._broadcast(seq, text, mergeable=event["type"] in MERGEABLE_EVENTS)

    async def _broadcast(
        self, seq: int, text: str, *, keep: bool = True, mergeable: bool = False
    ) -> None:
        """Send one encoded frame to every socket (the caller holds the lock)."""
        self.last_seq = seq
        if keep:
            self.replay.append(seq, text, mergeable=mergeable)
        for subscriber in tuple(self.sockets):
            try:
                await subscriber.send_text(text)
            except Exception:
                # A socket that cannot be written to is gone; the others keep the stream.
                logger.info("Dropping a socket of session %s that failed a send", self.session_id)
                if subscriber in self.sockets:
                    self.sockets.remove(subscriber)

    # --- waits and replies -------------------------------------------------------------

    async def _custom(self, run: _Run, event: dict[str, Any]) -> None:
        """Broadcast a ``custom`` event; store the wait it announces first (write-ahead)."""
        payload = event.get("payload")
        kind = waits.wait_kind(event.get("name"), payload)
        known = None
        if kind is not None:
            assert isinstance(payload, dict)
            run.waits.add(payload["tool_call_id"])
            known = await settle(
                database_sync_to_async(waits.record_wait)(
                    self.session_id, run.request_id, event["name"], payload
                )
            )
        await self.broadcast_event(run.request_id, event)
        await _let_the_loop_write()
        if known is not None and self.agent is not None:
            # Answered while nobody was waiting for it: hand it over now.
            name = payload.get("response_event") if isinstance(payload, dict) else None
            if isinstance(name, str):
                config = AgentRunConfig(session_id=self.session_id, request_id=run.request_id)
                self.agent.emit_external_event(ExternalEvent(name, known), config=config)

    async def _close_wait(self, run: _Run, event: dict[str, Any]) -> None:
        calls = event.get("tool_calls") or ()
        for call in calls:
            call_id = call.get("id")
            if call_id in run.waits:
                run.waits.discard(call_id)
                await settle(
                    database_sync_to_async(waits.mark)(self.session_id, call_id, WaitStatus.DONE)
                )

    async def deliver(
        self,
        name: str,
        payload: dict[str, Any],
        answer: Callable[[Verdict], Awaitable[None]],
    ) -> Verdict:
        """Route a client reply to the run waiting for it and tell every socket.

        ``answer`` sends the verdict to the replying socket under the lock, before any
        frame the reply causes.
        """
        async with self._lock:
            run = self._run
            verdict = Verdict(None, [], "not_running")
            if run is not None and run.task is not None and self.agent is not None:
                config = AgentRunConfig(session_id=self.session_id, request_id=run.request_id)
                taken = self.agent.emit_external_event(ExternalEvent(name, payload), config=config)
                verdict = Verdict(run.request_id, taken, None if taken else "stale")
                if taken and isinstance(payload.get("tool_call_id"), str):
                    call_id = payload["tool_call_id"]
                    if call_id in run.waits:
                        await settle(
                            database_sync_to_async(waits.mark)(
                                self.session_id, call_id, WaitStatus.ANSWERED, payload
                            )
                        )
            await answer(verdict)
            if verdict.accepted_by:
                await self._reply_accepted(verdict.request_id, name, payload)
        return verdict

    async def _reply_accepted(
        self, request_id: str | None, name: str, payload: dict[str, Any]
    ) -> None:
        seq = self.seq.take_nowait()
        if seq is None:
            seq = await self.seq.take()
        correlation = payload.get("tool_call_id")
        frame = {
            "type": "reply_accepted",
            "seq": seq,
            "request_id": request_id,
            "name": name,
            "correlation_id": correlation if isinstance(correlation, str) else None,
            "payload": payload,
        }
        await self._broadcast(seq, encode_frame(frame))

    # --- recovery ----------------------------------------------------------------------

    async def _recover(self, *, abandon_paused: bool = False) -> None:
        """Settle runs whose process died (the caller holds the lock, no run is active).

        ``abandon_paused``: a new message is starting, so a paused run's questions are
        dropped (the conversation moved on).
        """
        stale = await database_sync_to_async(recovery.stale_runs)(self.session_id)
        if not stale:
            return
        dead = [
            request_id
            for request_id, status in stale
            if status == RunStatus.RUNNING and not await self.registry.is_live(request_id)
        ]
        settled = await database_sync_to_async(recovery.recover_session)(
            self.session_id, dead, abandon_paused=abandon_paused
        )
        for outcome in settled:
            self.seq.add_block(*outcome.seq_block)
        for outcome in settled:
            seq = await self.seq.take()
            await self._broadcast(seq, encode_frame(outcome.frame(seq)), keep=False)


def _add_usage(totals: dict[str, int], response: dict[str, Any] | None) -> None:
    usage = (response or {}).get("usage") or {}
    for key, value in usage.items():
        if isinstance(value, int):
            totals[key] = totals.get(key, 0) + value


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


class LiveSessions:
    """The live sessions of one event loop, by session id."""

    def __init__(self, factory: AgentFactory | None = None) -> None:
        self._sessions: dict[str, LiveSession] = {}
        self.factory = factory or build_agent

    def get(self, session_id: str) -> LiveSession | None:
        return self._sessions.get(session_id)

    def session(self, session_id: str) -> LiveSession:
        """The live session of ``session_id``, brought up if needed."""
        live = self._sessions.get(session_id)
        if live is None:
            live = self._sessions[session_id] = LiveSession(self, session_id)
        return live

    async def is_live(self, request_id: str) -> bool:
        """Whether some process runs ``request_id``: here, with one process, this one."""
        return any(live.active_request_id == request_id for live in self._sessions.values())

    def drop_if_idle(self, live: LiveSession) -> None:
        if live.idle and self._sessions.get(live.session_id) is live:
            del self._sessions[live.session_id]

    def __len__(self) -> int:
        return len(self._sessions)

    def __iter__(self) -> Iterator[LiveSession]:
        return iter(list(self._sessions.values()))


_registries: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, LiveSessions] = (
    weakref.WeakKeyDictionary()
)


def live_sessions() -> LiveSessions:
    """The registry of the running event loop (asyncio objects never cross loops)."""
    loop = asyncio.get_running_loop()
    registry = _registries.get(loop)
    if registry is None:
        registry = _registries[loop] = LiveSessions()
    return registry
