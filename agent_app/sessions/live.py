"""Live sessions: the in-process state of a chat session that has sockets or a run here.

Where a session's state lives, and who may change it (told once, here):

- **The database** holds what must outlive a process: the messages (written as they are
  complete, ``agent_app.durable.persistence``), the runs (``agent_app.durable.runs``), the
  waits (``agent_app.durable.waits``), the title, the ``seq`` high-water mark
  (``agent_app.durable.sequence``).
- **This process** holds, per session, a ``LiveSession``: its feed (the sockets connected
  here, the frame numbering, the replay buffer: ``agent_app.sessions.fanout``), the active
  run if this process runs it (``agent_app.sessions.run``), the agent, and the collaborators
  that let sockets in (``door``), take replies (``replies``), follow a run elsewhere
  (``follower``) and settle dead runs (``settling``). It exists while the session has a
  socket or a run here, and is dropped when it has neither (``sessions.registry``).
- **The session bus** (``agent_app.bus``) holds the run lease — one run per session, in
  one process or across many — and, with ``REDIS_URL``, the fan-out to the other workers
  and a shared replay stream.

How a run flows:

- **A run belongs to the session, not to a socket.** ``start`` claims the session
  synchronously (a second ``user_message`` from any socket is ``Busy``), takes the lease,
  stores the run and the user's message (``begin_run``, write-ahead), broadcasts
  ``run_started`` to every socket, and only then starts the run's task. Sockets come and
  go; closing the last one changes nothing for the run, which goes on to its end and is
  stored. A question or approval with no socket left keeps waiting until its deadline.
  Only ``cancel`` stops a run.
- **One lock orders everything every socket sees** (``Feed.lock``): each broadcast frame
  takes the next ``seq`` under it and is sent to every socket before the next, so all
  sockets see the same frames in the same order; a socket joins under it too
  (``agent_app.sessions.door``) — the ``session`` frame, then the active run's frames after
  the ``seq`` it last saw, then the live ones, with nothing lost or repeated in between.
- **The run task** iterates ``agent.stream`` and broadcasts each event. The runtime runs at
  most one event ahead of it; a socket that does not read does not slow the others: its
  frames wait in its transport, up to a cap past which it is dropped and resumes later
  (``agent_app.sessions.backpressure``).
  daphne writes a frame out only when the event loop polls the socket, which it does
  whenever the run waits (a model's network read, a database write, a reply): frames sent
  in one burst leave together, in one write. A run that does not wait (a model or tool
  that never yields) lets the loop go round at least every 4 ms of events
  (``agent_app.sessions.fanout.let_the_loop_write``), and before a widget's wait.
- **Replies** (``external_event``, ``steer``) are handed to the agent under the lock; the
  replying socket gets its ``external_event_result`` before any frame the reply causes, and
  every socket gets ``reply_accepted``. An approved tool records that it starts
  (``executing``) before it runs, so after a crash it is never run again.
- **Cancellation**: ``cancel()`` cancels the run task and awaits its end. The runtime
  winds the request down (cancelled tool results, waits cancelled, the partial answer
  stored); the task records the outcome and broadcasts ``run_cancelled``. When
  ``cancel()`` returns, nothing of the run is left. A task cancelled before it ever ran is
  finished by ``cancel``.
- **Runs outlive their worker**: a run row still ``running`` that no process runs (its
  process died, or handed it over at shutdown) is continued from its checkpoint by the
  next worker that touches the session or sweeps (``agent_app.sessions.settling``,
  ``agent_app.durable.continuation``), or settled ``interrupted`` or ``paused``.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol

from channels.db import database_sync_to_async

from agent_app.bus.base import SessionBus
from agent_app.durable.history import page_before
from agent_app.durable.recovery import Settled
from agent_app.durable.runs import Creator
from agent_app.models import RunKind, RunStatus
from agent_app.process import shutdown
from agent_app.protocol.refusals import Busy, NotRunning
from agent_app.sessions.door import Door
from agent_app.sessions.fanout import Feed, Subscriber
from agent_app.sessions.follower import Follower
from agent_app.sessions.replies import ReplyDesk, Verdict
from agent_app.sessions.run import Run, RunState, StopReason
from agent_app.sessions.settling import Settler, take_lease
from zett_agent.agent import Agent

__all__ = ["AgentFactory", "LiveSession", "SessionRegistry"]

logger = logging.getLogger(__name__)

#: Builds the agent of one session, given its id.
AgentFactory = Callable[[str], Awaitable[Agent]]


class SessionRegistry(Protocol):
    """What a live session needs of the registry that holds it (``LiveSessions``)."""

    factory: AgentFactory
    bus: SessionBus

    async def is_live(self, session_id: str, request_id: str) -> bool: ...

    def drop_if_idle(self, live: LiveSession) -> None: ...


class LiveSession:
    """The sockets, the active run and the frame numbering of one session in this process."""

    def __init__(self, registry: SessionRegistry, session_id: str) -> None:
        self.registry = registry
        self.bus = registry.bus
        self.session_id = session_id
        self.feed = Feed(session_id, self.bus)
        self.follower = Follower(self)
        self.replies = ReplyDesk(self)
        self.settler = Settler(self, functools.partial(registry.is_live, session_id))
        self.door = Door(self)
        #: Built by the first run; kept while the session is live here.
        self.agent: Agent | None = None
        self._run: Run | None = None
        #: The task of the last run started here (it may still be ending after ``_run``
        #: was cleared): the session stays live until it is done.
        self._task: asyncio.Task[None] | None = None

    @property
    def run(self) -> Run | None:
        """The run this process runs for the session, if any."""
        return self._run

    @property
    def sockets(self) -> list[Subscriber]:
        return self.feed.sockets

    @property
    def active_request_id(self) -> str | None:
        if self._run is not None:
            return self._run.request_id
        remote = self.follower.remote
        return remote.request_id if remote is not None else None

    @property
    def idle(self) -> bool:
        ending = self._task is not None and not self._task.done()
        return not self.sockets and not self.door.joining and self._run is None and not ending

    def check_idle(self) -> None:
        self.registry.drop_if_idle(self)

    # --- sockets -----------------------------------------------------------------------

    async def join(
        self, subscriber: Subscriber, after_seq: int | None = None, *, history: bool = True
    ) -> None:
        """``session`` (no conversation if not ``history``), the run's frames after
        ``after_seq``, then live (``Door.join``). Call it right after ``session()``, with no
        await in between: from there until it returns the session is watched, not dropped.
        """
        await self.door.join(subscriber, after_seq, history=history)

    def leave(self, subscriber: Subscriber) -> None:
        """Stop sending to ``subscriber``; the run (if any) goes on."""
        self.feed.forget(subscriber)
        self.check_idle()

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
        turn_position: int | None = None,
        attachments: Sequence[str] = (),
    ) -> str:
        """Store and start a request; ``Busy`` if one runs (here or on another worker).

        ``content``: the user's message. ``replace_last_turn``: a new version of the turn at
        ``turn_position`` (None: the last; ``content`` None asks it again). ``resumed_from``
        (``content`` None): continue that paused run. ``attachments``: ids (checked).
        """
        if self._run is not None:
            raise Busy(self._run.request_id)
        if shutdown.draining():
            raise Busy(None, shutdown.DRAINING_MESSAGE)
        run = self._run = Run(self, str(uuid.uuid4()), kind=kind, resumed_from=resumed_from)
        leased = False
        try:
            await take_lease(self.bus, self.session_id, run.request_id)
            leased = True
            async with self.feed.lock:
                self.follower.set_remote(None)
                begun, entry = await self.settler.begin(
                    run.request_id,
                    content=content,
                    creator=creator,
                    kind=kind,
                    resumed_from=resumed_from or "",
                    replace_last_turn=replace_last_turn,
                    turn_position=turn_position,
                    attachments=list(attachments),
                )
                await run.announce(begun)
        except BaseException:
            if self._run is run:
                self._run = None
            run.launched.set()
            if leased:
                await self.bus.release(self.session_id)
            raise
        run.launch(begun.message, begun.history, entry)
        self._task = run.task
        run.task.add_done_callback(lambda _: self.check_idle())  # type: ignore[union-attr]
        return run.request_id

    async def adopt(self, outcome: Settled) -> None:
        """Continue a dead run here (``Settler.settle``: under the lock, its lease held)."""
        self._run = Run.continuing(self, outcome)
        self._task = await self._run.take_over(outcome)

    def run_ended(self, run: Run) -> None:
        if self._run is run:
            self._run = None

    async def get_agent(self) -> Agent:
        if self.agent is None:
            self.agent = await self.registry.factory(self.session_id)
        return self.agent

    async def cancel(self, *, forwarded: bool = False) -> None:
        """Cancel the active run and wait until it has wound down (``NotRunning`` if none).

        A run another worker runs is cancelled there (unless this was ``forwarded``).
        """
        run = self._run
        if run is None and not forwarded and await self.follower.forward_cancel():
            return
        if run is not None and run.task is None:
            await run.launched.wait()  # still being stored: cancel it once it runs
        if run is None or run.task is None:
            raise NotRunning
        run.task.cancel()
        await asyncio.wait([run.task])
        if not run.finished:  # cancelled before its first step: nothing of it ran
            await run.finish(RunStatus.CANCELLED)
        if run.outcome is not RunStatus.CANCELLED:
            raise NotRunning  # it ended otherwise just before the cancel reached it

    @property
    def run_task(self) -> asyncio.Task[None] | None:
        """The task of the run this process runs for the session, if any."""
        return self._run.task if self._run is not None else None

    async def stop_for_shutdown(self) -> None:
        """This process is about to exit (``process.shutdown``): a run waiting for a reply
        is settled as paused (its wait is stored), a working one handed over."""
        run = self._run
        if run is not None and run.task is not None and run.state is RunState.WAITING:
            self._run = None  # its task stays parked in the wait until the process exits
            await self.bus.release(self.session_id)
            async with self.feed.lock:
                await self.settler.settle(own=run.request_id)
        elif run is not None:
            await run.step_aside()

    async def lost_lease(self, request_id: str) -> None:
        """Another worker took this run's lease (this one failed to renew it): stop."""
        run = self._run
        if run is not None and run.request_id == request_id:
            await run.interrupt(StopReason.LEASE_LOST)

    async def wait_for_run(self) -> None:
        """Return once the run started here (if any) has ended and its outcome is sent."""
        if self._run is not None and self._run.task is None:
            await self._run.launched.wait()
        if self._task is not None:
            await asyncio.wait([self._task])

    # --- replies -----------------------------------------------------------------------

    async def deliver(
        self,
        name: str,
        payload: dict[str, Any],
        answer: Callable[[Verdict], Awaitable[None]],
        *,
        forwarded: bool = False,
    ) -> Verdict:
        """Route a client reply (``ReplyDesk.deliver``); a run another worker runs gets it
        forwarded (unless it was ``forwarded`` from there already)."""
        if self._run is None and not forwarded:
            verdict = await self.follower.forward_reply(name, payload, answer)
            if verdict is not None:
                return verdict
        return await self.replies.deliver(name, payload, answer)
