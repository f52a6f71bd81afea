"""Live sessions: the in-process state of a chat session that has sockets or a run here.

Where a session's state lives, and who may change it (told once, here):

- **The database** holds what must outlive a process: the messages (written as they settle,
  ``agent_app.persistence``), the runs (``agent_app.runs``), the waits
  (``agent_app.waits``), the title, the ``seq`` high-water mark (``agent_app.sequence``).
- **This process** holds, per session, a ``LiveSession``: the sockets connected here, the
  active run if this process runs it (its task, its agent, its replay buffer) and the
  ``seq`` block it numbers frames from. It exists while the session has a socket or a
  run here, and is dropped when it has neither.
- **Other processes** (with ``REDIS_URL``): ``agent_app.cluster`` adds run leases,
  cross-process fan-out and a shared replay stream, and ``agent_app.remote`` is how a
  session follows a run another worker runs. Replies are ``agent_app.replies``'.

``LiveSession`` is built from mixins, one concept a module: ``agent_app.fanout``
numbers and sends frames, ``agent_app.run_end`` records how a run ends,
``agent_app.replies`` and ``agent_app.remote`` as above; ``agent_app.live_registry`` holds
the live sessions of the process (``live_sessions()``).

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
  most one event ahead of it; a socket that does not read does not slow the others: its
  frames wait in its transport, up to a cap past which it is dropped and resumes later
  (``agent_app.backpressure``).
  daphne writes a frame out only when the event loop polls the socket, which it does
  whenever the run waits (a model's network read, a database write, a reply): frames sent
  in one burst leave together, in one write. A run that does not wait (a model or tool
  that never yields) lets the loop go round at least every 4 ms of events
  (``agent_app.fanout._let_the_loop_write``), and before a widget's wait.
- **Replies** (``external_event``, ``steer``) are handed to the agent under the lock; the
  replying socket gets its ``external_event_result`` before any frame the reply causes, and
  every socket gets ``reply_accepted``. An approved tool records that it starts
  (``executing``) before it runs, so after a crash it is never run again
  (``agent_app.replies``).
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
import functools
import logging
import uuid
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any, Protocol

from channels.db import database_sync_to_async
from django.conf import settings

from agent_app import recovery, shutdown
from agent_app.cluster import Cluster, RemoteRun
from agent_app.current import enter_run
from agent_app.fanout import _STREAK, _TEXT_DELTAS, FrameFanout, _let_the_loop_write
from agent_app.history import page_before, snapshot
from agent_app.live_registry import WORKER_ID, AgentFactory, LiveSessions, live_sessions
from agent_app.models import RunKind, RunStatus
from agent_app.persistence import (
    ANSWER_AT_END,
    INPUT_STORED,
    RESTORED_HISTORY,
    STREAMED_TEXT,
    settle,
)
from agent_app.protocol import RunStartedFrame, encode_frame
from agent_app.remote import RemoteRuns
from agent_app.replay import DEFAULT_REPLAY_FRAMES, ReplayBuffer
from agent_app.replies import ReplyHandling, Verdict
from agent_app.run_end import RunEnding, _add_usage
from agent_app.runs import Begun, Creator, StaleRuns, begin_run, user_message_for
from agent_app.sequence import SeqCounter
from zett_agent.agent import Agent, AgentRunConfig
from zett_agent.events import AgentEventType
from zett_agent.messages import UserMessage, content_text
from zett_agent.serialization import event_to_dict

__all__ = [
    "WORKER_ID",
    "AgentFactory",
    "Busy",
    "LiveSession",
    "LiveSessions",
    "NotRunning",
    "Subscriber",
    "Verdict",
    "live_sessions",
]

logger = logging.getLogger(__name__)

#: Built once (every run starts here).
_begin_run = database_sync_to_async(begin_run)

E = AgentEventType
_TOOL_ENDS = frozenset({E.TOOL_COMPLETED, E.TOOL_FAILED, E.TOOL_SKIPPED})
#: What may follow a final answer before the run ends: held back with its frame.
_TURN_ENDS = frozenset({E.STEERING_COMPLETED, E.INTERNAL_MESSAGE_COMPLETED})
#: Tries to take a lease that an ending run (or a recovery) is about to let go.
_LEASE_ATTEMPTS = 40


class Subscriber(Protocol):
    """A socket of the session: the live session only ever sends it encoded frames."""

    async def send_text(self, text: str) -> None: ...


class Busy(Exception):
    """A request of this session is already running (or this process is shutting down)."""

    def __init__(self, request_id: str, message: str | None = None) -> None:
        super().__init__(
            message
            or f"Request {request_id} of this session is still running; "
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
    #: Another worker took over this run's lease (``agent_app.remote.lost_lease``).
    lease_lost: bool = False
    #: How it ended, once it has.
    outcome: RunStatus | None = None
    #: Its last event announced a wait: it does nothing until a reply or its deadline.
    waiting: bool = False
    #: Stopped because this process shuts down (``agent_app.shutdown``).
    shutting_down: bool = False
    #: Set once the run's task exists, or its start failed (``cancel`` waits for it).
    launched: asyncio.Event = field(default_factory=asyncio.Event)
    #: The text deltas of the answer streaming now, as sent (a cancelled answer's partial
    #: text: ``agent_app.persistence.STREAMED_TEXT``).
    streamed: list[str] = field(default_factory=list)
    #: The final answer's row, stored with the run's end (``agent_app.run_end``).
    at_end: list[Any] = field(default_factory=list)
    #: That answer's ``model_completed`` event (and the completions of its turn that
    #: follow it), held back until the answer is stored.
    held: list[dict[str, Any]] | None = None


class LiveSession(ReplyHandling, RemoteRuns, FrameFanout, RunEnding):
    """The sockets, the active run and the frame numbering of one session in this process."""

    def __init__(self, registry: LiveSessions, session_id: str) -> None:
        self.registry = registry
        self.cluster: Cluster | None = registry.cluster
        self.session_id = session_id
        #: A run of this session that another worker runs (cluster only).
        self.remote: RemoteRun | None = None
        #: Whether this worker receives the session's frames from others (cluster only).
        self.subscribed = False
        #: Sockets that saw frames up to this ``seq`` elsewhere (``agent_app.remote``).
        self.floors: dict[Subscriber, int] = {}
        #: Sockets between ``session()`` and the end of ``join``: the session must not be
        #: dropped under them (they would join a session nobody else can find).
        self._joining = 0
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
        #: The task of the last run started here (it may still be ending after ``_run``
        #: was cleared): the session stays live until it is done.
        self._task: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()

    @property
    def active_request_id(self) -> str | None:
        if self._run is not None:
            return self._run.request_id
        return self.remote.request_id if self.remote is not None else None

    @property
    def idle(self) -> bool:
        ending = self._task is not None and not self._task.done()
        return not self.sockets and not self._joining and self._run is None and not ending

    # --- sockets -----------------------------------------------------------------------

    async def join(self, subscriber: Subscriber, after_seq: int | None = None) -> None:
        """Send ``session`` (and the active run's frames after ``after_seq``); then live.

        Call it right after ``LiveSessions.session()``, with no await in between: from
        here until it returns the session counts as watched, so it is not dropped.
        """
        ready: list[str] = []
        self._joining += 1
        try:
            await self._join(subscriber, after_seq, ready)
        finally:
            self._joining -= 1
            self.registry.drop_if_idle(self)
        for paused in ready:
            await self.resume(paused)

    async def _join(self, subscriber: Subscriber, after_seq: int | None, ready: list[str]) -> None:
        async with self._lock:
            if self.cluster is not None:
                await self._follow()
            if self._run is None and self.remote is None:
                ready.extend(await self._recover())
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
            elif self.remote is not None:
                await self._replay_remote(subscriber, after_seq)
            elif frame["last_seq"] > self.last_seq:
                # The database knows a later end than this worker has forwarded: frames up
                # to it may still be on their way here, and this socket must not get them.
                self.floors[subscriber] = frame["last_seq"]
            self.sockets.append(subscriber)

    def leave(self, subscriber: Subscriber) -> None:
        """Stop sending to ``subscriber``; the run (if any) goes on."""
        if subscriber in self.sockets:
            self.sockets.remove(subscriber)
        self.floors.pop(subscriber, None)
        self.registry.drop_if_idle(self)

    async def history_before(self, position: int, limit: int) -> dict[str, Any]:
        """A ``history_page`` frame's fields."""
        return await database_sync_to_async(page_before)(
            self.session_id, position, limit, active_request_id=self.active_request_id
        )

    # --- runs --------------------------------------------------------------------------

    async def start(
        self,
        content: str | None,
        creator: Creator | None = None,
        *,
        kind: str = RunKind.MESSAGE,
        resumed_from: str | None = None,
        replace_last_turn: bool = False,
    ) -> str:
        """Store and start a request; ``Busy`` if one runs (here or on another worker).

        ``content`` is the user's message. ``replace_last_turn`` (``regenerate``, ``edit``)
        supersedes the last turn first and, with ``content`` None, asks its message again
        (``NothingToReplace`` when there is none). ``resumed_from`` (``content`` None)
        continues that paused run instead (``agent_app.replies``).
        """
        if self._run is not None:
            raise Busy(self._run.request_id)
        if shutdown.draining():
            raise Busy("", shutdown.DRAINING_MESSAGE)
        run = self._run = _Run(str(uuid.uuid4()), kind=kind, resumed_from=resumed_from)
        leased = False
        ready: list[str] = []
        try:
            if self.cluster is not None:
                await self._take_lease(run.request_id)
                leased = True
            async with self._lock:
                self._set_remote_none()
                begin = functools.partial(
                    _begin_run,
                    self.session_id,
                    run.request_id,
                    content=content,
                    worker=WORKER_ID,
                    creator=creator,
                    kind=kind,
                    resumed_from=resumed_from or "",
                    replace_last_turn=replace_last_turn,
                )
                try:
                    # A new message settles runs a dead process left first (abandoning
                    # paused ones); ``begin_run`` says whether there are any.
                    begun = await settle(begin(refuse_stale=resumed_from is None))
                except StaleRuns:
                    ready = await self._recover(abandon_paused=True, leased=True)
                    begun = await settle(begin())
                await self._announce(run, begun)
        except BaseException:
            if self._run is run:
                self._run = None
            run.launched.set()
            if leased:
                await self.cluster.release(self.session_id)  # type: ignore[union-attr]
            raise
        assert not ready  # a new message abandons paused runs; nothing is left to resume
        run.task = self._task = asyncio.create_task(
            self._execute(run, begun.message, begun.history), name=f"zett-run-{run.request_id}"
        )
        run.task.add_done_callback(lambda _: self.registry.drop_if_idle(self))
        run.launched.set()
        return run.request_id

    async def _take_lease(self, request_id: str) -> None:
        """Take the session's run lease (cluster only); ``Busy`` while another run holds it.

        A run's last frame goes out just before its worker lets the lease go, so a client
        that answers that frame at once may find the lease still held by a run that has
        ended: then the lease is taken as soon as it is free (within moments).
        """
        cluster = self.cluster
        assert cluster is not None
        for attempt in range(_LEASE_ATTEMPTS):
            if await cluster.acquire(self.session_id, request_id) is not None:
                return
            holder = await cluster.holder(self.session_id)
            if holder is None:
                continue  # let go meanwhile
            ending = not holder.request_id or not await database_sync_to_async(recovery.is_running)(
                holder.request_id
            )
            if not ending:
                raise Busy(holder.request_id)
            await asyncio.sleep(0.002 * (attempt + 1))
        raise Busy("of another worker")

    def _set_remote_none(self) -> None:
        if self.cluster is not None:
            self._set_remote(None)

    async def _announce(self, run: _Run, begun: Begun) -> None:
        """Broadcast ``run_started`` (under the lock): the first frame of the run."""
        self.seq.add_block(*begun.seq_block)
        self.replay.clear()
        seq = await self.seq.take()
        message = begun.message
        frame = RunStartedFrame(
            seq=seq,
            request_id=run.request_id,
            content=None if message is None else content_text(message.content),
            kind=run.kind,
            resumed_from=run.resumed_from,
            position=begun.position,
            superseded_from=begun.superseded_from,
            created_at=begun.created_at.isoformat().replace("+00:00", "Z"),
        )
        await self._broadcast(
            seq, encode_frame(frame.dump()), marker="start", request_id=run.request_id
        )

    async def cancel(self, *, forwarded: bool = False) -> None:
        """Cancel the active run and wait until it has wound down (``NotRunning`` if none).

        A run another worker runs is cancelled there (unless this was ``forwarded``).
        """
        run = self._run
        if (
            run is None
            and self.cluster is not None
            and not forwarded
            and await self._forward_cancel()
        ):
            return
        if run is not None and run.task is None:
            await run.launched.wait()  # still being stored: cancel it once it runs
        if run is None or run.task is None:
            raise NotRunning
        run.task.cancel()
        await asyncio.wait([run.task])
        if not run.finished:  # cancelled before its first step: nothing of it ran
            await self._finish(run, RunStatus.CANCELLED)
        if run.outcome is not RunStatus.CANCELLED:
            raise NotRunning  # it ended otherwise just before the cancel reached it

    @property
    def run_task(self) -> asyncio.Task[None] | None:
        """The task of the run this process runs for the session, if any."""
        return self._run.task if self._run is not None else None

    async def stop_for_shutdown(self) -> None:
        """End the run here for good: this process is about to exit (``agent_app.shutdown``).

        A run waiting for a reply is left as it stands in the database (its wait is stored)
        and settled like a run whose process died: paused, answerable elsewhere or later.
        A working run is cancelled and recorded as interrupted.
        """
        run = self._run
        if run is None or run.task is None:
            return
        if run.waiting:
            self._run = None  # its task stays parked in the wait until the process exits
            if self.cluster is not None:
                await self.cluster.release(self.session_id)
            async with self._lock:
                await self._recover()
            return
        run.shutting_down = True
        run.task.cancel()
        await asyncio.wait([run.task])

    async def wait_for_run(self) -> None:
        """Return once the run started here (if any) has ended and its outcome is sent."""
        if self._run is not None and self._run.task is None:
            await self._run.launched.wait()
        if self._task is not None:
            await asyncio.wait([self._task])

    async def _agent(self) -> Agent:
        if self.agent is None:
            self.agent = await self.registry.factory(self.session_id)
        return self.agent

    async def _execute(
        self, run: _Run, message: UserMessage | None, history: list[Any] | None = None
    ) -> None:
        config = AgentRunConfig(session_id=self.session_id, request_id=run.request_id)
        final: dict[str, Any] | None = None
        try:
            await enter_run(self.session_id)  # current_user()/current_chat(); permission
            agent = await self._agent()
            if message is None:
                replies, deadlines = await self._resumption()
                stream = agent.resume_stream(config=config, replies=replies, deadlines=deadlines)
            else:
                metadata: dict[str, Any] = {
                    INPUT_STORED: True,
                    STREAMED_TEXT: run.streamed,
                    ANSWER_AT_END: run.at_end,
                }
                if history is not None:
                    metadata[RESTORED_HISTORY] = history
                stream = agent.stream(message, config=config, metadata=metadata)
            clock = asyncio.get_running_loop().time
            streak_started = clock()
            streamed = run.streamed
            async with aclosing(stream) as events:
                async for event in events:
                    kind = event.type
                    run.waiting = False
                    if run.held is not None and kind is not E.RUN_COMPLETED:
                        if kind in _TURN_ENDS and run.at_end:
                            run.held.append(event_to_dict(event))
                            continue
                        await self._release_held(run)  # the run goes on after its answer
                    if kind in _TEXT_DELTAS:
                        # Most of a run: its frame is built from the event as text.
                        await self.broadcast_event(run.request_id, event)
                        if kind is E.TEXT_DELTA:
                            streamed.append(event.delta)  # sent: part of a partial answer
                        if clock() - streak_started > _STREAK:
                            await _let_the_loop_write()
                            streak_started = clock()
                        continue
                    if kind is E.RUN_COMPLETED:
                        # Held back until the stream has ended and released the session:
                        # a client may send its next message the moment it sees this.
                        final = event_to_dict(event)
                        continue
                    data = event_to_dict(event)
                    if kind is E.CUSTOM:
                        await self._custom(run, data)
                        await _let_the_loop_write()
                        streak_started = clock()
                        continue
                    if kind is E.MODEL_STARTED:
                        streamed.clear()  # a partial answer is this model call's text only
                    elif kind is E.MODEL_COMPLETED or kind is E.MODEL_STOPPED:
                        _add_usage(run.usage, data.get("response"))
                        if run.at_end:
                            run.held = [data]  # sent once its answer is stored
                            continue
                    elif kind in _TOOL_ENDS and run.waits:
                        await self._close_waits(run, data)
                    await self.broadcast_event(run.request_id, data)
                    if clock() - streak_started > _STREAK:
                        await _let_the_loop_write()
                        streak_started = clock()
        except asyncio.CancelledError:
            stopped = run.lease_lost or run.shutting_down
            status = RunStatus.INTERRUPTED if stopped else RunStatus.CANCELLED
            await self._finish(run, status)
            return
        except Exception as error:
            logger.warning(
                "Request %s of session %s failed", run.request_id, self.session_id, exc_info=error
            )
            await self._finish(run, RunStatus.FAILED, error=user_message_for(error))
            return
        await self._finish(run, RunStatus.COMPLETED, final=final)

    # --- recovery ----------------------------------------------------------------------

    async def _recover(self, *, abandon_paused: bool = False, leased: bool = False) -> list[str]:
        """Settle runs whose process died (under the lock, no run active here).

        ``abandon_paused``: a new message is starting, so a paused run's questions are
        dropped (the conversation moved on). With a cluster the settling happens under
        the session's lease (``leased``: the caller holds it already), so two workers never
        settle one run twice. Returns the paused runs whose replies are all known: the
        caller continues them, and those whose continuation was due but never started.
        """
        stale = await database_sync_to_async(recovery.stale_runs)(self.session_id)
        if not stale:
            return []
        dead = [
            request_id
            for request_id, status in stale
            if status == RunStatus.RUNNING
            and not await self.registry.is_live(self.session_id, request_id)
        ]
        cluster = self.cluster
        took = False
        if cluster is not None and not leased:
            took = await cluster.acquire(self.session_id, "") is not None
            if not took:
                return []  # another worker runs the session, or settles it right now
        try:
            settled = await database_sync_to_async(recovery.recover_session)(
                self.session_id, dead, abandon_paused=abandon_paused
            )
            for outcome in settled:
                self.seq.add_block(*outcome.seq_block)
            for outcome in settled:
                seq = await self.next_seq()
                await self._broadcast(seq, encode_frame(outcome.frame(seq)), marker="unkept")
            ready = [outcome.request_id for outcome in settled if outcome.ready]
            if not abandon_paused:
                due = await database_sync_to_async(recovery.answered_paused_runs)(self.session_id)
                ready.extend(request_id for request_id in due if request_id not in ready)
        finally:
            if took:
                await cluster.flushed(self.session_id)  # type: ignore[union-attr]
                await cluster.release(self.session_id)  # type: ignore[union-attr]
        return ready
