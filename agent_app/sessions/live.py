"""Live sessions: the in-process state of a chat session that has sockets or a run here.

Where a session's state lives, and who may change it (told once, here):

- **The database** holds what must outlive a process: the messages (written as they are
  complete, ``agent_app.durable.persistence``), the runs (``agent_app.durable.runs``), the
  waits (``agent_app.durable.waits``), the title, the ``seq`` high-water mark
  (``agent_app.durable.sequence``).
- **This process** holds, per session, a ``LiveSession``: its feed (the sockets connected
  here, the frame numbering, the replay buffer: ``agent_app.sessions.fanout``), the active
  run if this process runs it (``agent_app.sessions.run``) and the agent. It exists while
  the session has a socket or a run here, and is dropped when it has neither
  (``agent_app.sessions.registry``).
- **The session bus** (``agent_app.bus``) holds the run lease — one run per session, in
  one process or across many — and, with ``REDIS_URL``, the fan-out to the other workers
  and a shared replay stream. ``agent_app.sessions.follower`` is how a session follows a
  run another worker runs; ``agent_app.sessions.replies`` takes replies.

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
  sockets see the same frames in the same order; a socket joins under it too — it gets the
  ``session`` frame, then the active run's frames from the replay buffer after the ``seq``
  it last saw, then the live ones, with nothing lost or repeated in between.
- **The run task** iterates ``agent.stream`` and broadcasts each event. The runtime runs at
  most one event ahead of it; a socket that does not read does not slow the others: its
  frames wait in its transport, up to a cap past which it is dropped and resumes later
  (``agent_app.backpressure``).
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
- **Honest restarts**: a run row still ``running`` that no process runs (its process
  died) is settled the next time the session is touched — a socket joins or a message
  starts a run — by ``agent_app.durable.recovery``: it becomes ``interrupted`` (its open
  tool calls closed) or ``paused`` (it was waiting for replies that can still be given),
  and the sockets are told.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from channels.db import database_sync_to_async

from agent_app.bus.base import WORKER_ID, Marker, SessionBus
from agent_app.durable import recovery
from agent_app.durable.history import bare_snapshot, page_before, snapshot
from agent_app.durable.persistence import shielded
from agent_app.durable.runs import AlreadyContinued, Begun, Creator, StaleRuns, begin_run
from agent_app.models import RunKind, RunStatus
from agent_app.protocol.frames import encode_frame
from agent_app.sessions import shutdown
from agent_app.sessions.errors import Busy, NotRunning
from agent_app.sessions.fanout import Feed, Subscriber
from agent_app.sessions.follower import Follower
from agent_app.sessions.replies import ReplyDesk, Verdict
from agent_app.sessions.run import Run, RunState, StopReason
from zett_agent.agent import Agent

__all__ = ["AgentFactory", "LiveSession", "SessionRegistry"]

logger = logging.getLogger(__name__)

#: Built once (every run starts here).
_begin_run = database_sync_to_async(begin_run)

#: Tries to take a lease that an ending run (or a recovery) is about to let go.
_LEASE_ATTEMPTS = 40

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
        #: Built by the first run; kept while the session is live here.
        self.agent: Agent | None = None
        self._run: Run | None = None
        #: The task of the last run started here (it may still be ending after ``_run``
        #: was cleared): the session stays live until it is done.
        self._task: asyncio.Task[None] | None = None
        #: Sockets between ``session()`` and the end of ``join``: the session must not be
        #: dropped under them (they would join a session nobody else can find).
        self._joining = 0

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
        return not self.sockets and not self._joining and self._run is None and not ending

    def check_idle(self) -> None:
        self.registry.drop_if_idle(self)

    # --- sockets -----------------------------------------------------------------------

    async def join(
        self, subscriber: Subscriber, after_seq: int | None = None, *, history: bool = True
    ) -> None:
        """Send ``session`` (and the active run's frames after ``after_seq``); then live.

        Call it right after ``LiveSessions.session()``, with no await in between: from
        here until it returns the session counts as watched, so it is not dropped.
        ``history=False``: the ``session`` frame carries only the active run and
        ``last_seq`` (a subscriber that reads runs, not the conversation).
        """
        ready: list[str] = []
        self._joining += 1
        try:
            await self._join(subscriber, after_seq, ready, history)
        finally:
            self._joining -= 1
            self.check_idle()
        for paused in ready:
            await self.resume(paused)

    async def _join(
        self, subscriber: Subscriber, after_seq: int | None, ready: list[str], history: bool
    ) -> None:
        feed = self.feed
        async with feed.lock:
            await self.follower.follow()
            if self._run is None and self.follower.remote is None:
                ready.extend(await self.recover())
            active = self.active_request_id
            if history:
                state = await database_sync_to_async(snapshot)(
                    self.session_id, active_request_id=active
                )
            else:
                state = await database_sync_to_async(bare_snapshot)(self.session_id)
            stored_last = state.pop("stored_last_seq")
            frame = {
                "type": "session",
                "session_id": self.session_id,
                **state,
                "active_request_id": active,
                "last_seq": max(stored_last, feed.last_seq),
            }
            await subscriber.send_text(encode_frame(frame))
            if self._run is not None:
                for text in feed.replay.frames_after(after_seq):
                    await subscriber.send_text(text)
            elif self.follower.remote is not None:
                await self.follower.replay_to(subscriber, after_seq)
            elif frame["last_seq"] > feed.last_seq:
                # The database knows a later end than this worker has forwarded: frames up
                # to it may still be on their way here, and this socket must not get them.
                feed.floors[subscriber] = frame["last_seq"]
            feed.sockets.append(subscriber)

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
    ) -> str:
        """Store and start a request; ``Busy`` if one runs (here or on another worker).

        ``content`` is the user's message. ``replace_last_turn`` (``regenerate``, ``edit``)
        supersedes the last turn first and, with ``content`` None, asks its message again
        (``NothingToReplace`` when there is none). ``resumed_from`` (``content`` None)
        continues that paused run instead (``agent_app.sessions.replies``).
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
            async with self.feed.lock:
                self.follower.set_remote(None)
                begun = await self._begin(begin, first=resumed_from is None)
                await run.announce(begun)
        except BaseException:
            if self._run is run:
                self._run = None
            run.launched.set()
            if leased:
                await self.bus.release(self.session_id)
            raise
        run.launch(begun.message, begun.history)
        self._task = run.task
        run.task.add_done_callback(lambda _: self.check_idle())  # type: ignore[union-attr]
        return run.request_id

    async def _begin(self, begin: Callable[..., Awaitable[Begun]], *, first: bool) -> Begun:
        """Store the run (under the lock); recover runs a dead process left first."""
        try:
            # A new message settles runs a dead process left first (abandoning paused
            # ones); ``begin_run`` says whether there are any.
            return await shielded(begin(refuse_stale=first))
        except StaleRuns:
            ready = await self.recover(abandon_paused=True, leased=True)
            assert not ready  # a new message abandons paused runs; nothing is left to resume
            return await shielded(begin())

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
        """End the run here for good: this process is about to exit (``sessions.shutdown``).

        A run waiting for a reply is left as it stands in the database (its wait is stored)
        and settled like a run whose process died: paused, answerable elsewhere or later.
        A working run is cancelled and recorded as interrupted.
        """
        run = self._run
        if run is None or run.task is None:
            return
        if run.state is RunState.WAITING:
            self._run = None  # its task stays parked in the wait until the process exits
            await self.bus.release(self.session_id)
            async with self.feed.lock:
                await self.recover()
            return
        await run.interrupt(StopReason.SHUTDOWN)

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

    async def resume(self, paused_request_id: str) -> str | None:
        """Start a run that continues a paused one; None if another run is active."""
        try:
            return await self.start(None, kind=RunKind.RESUME, resumed_from=paused_request_id)
        except Busy:
            return None  # that run takes the recorded replies when it reaches them
        except AlreadyContinued:
            return None  # another socket or process continued it first
        except Exception:
            logger.exception("Could not continue the paused request %s", paused_request_id)
            return None

    # --- recovery ----------------------------------------------------------------------

    async def recover(self, *, abandon_paused: bool = False, leased: bool = False) -> list[str]:
        """Settle runs whose process died (under the lock, no run active here).

        ``abandon_paused``: a new message is starting, so a paused run's questions are
        dropped (the conversation moved on). The settling happens under the session's
        lease (``leased``: the caller holds it already), so two workers never settle one
        run twice. Returns the paused runs whose replies are all known: the caller
        continues them, and those whose continuation was due but never started.
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
        if not leased and await self.bus.acquire(self.session_id, "") is None:
            return []  # another worker runs the session, or settles it right now
        try:
            settled = await database_sync_to_async(recovery.recover_session)(
                self.session_id, dead, abandon_paused=abandon_paused
            )
            for outcome in settled:
                self.feed.seq.add_block(*outcome.seq_block)
            for outcome in settled:
                seq = await self.feed.next_seq()
                text = encode_frame(outcome.frame(seq))
                await self.feed.broadcast(seq, text, marker=Marker.UNKEPT)
            ready = [outcome.request_id for outcome in settled if outcome.ready]
            if not abandon_paused:
                due = await database_sync_to_async(recovery.answered_paused_runs)(self.session_id)
                ready.extend(request_id for request_id in due if request_id not in ready)
        finally:
            if not leased:
                await self.bus.flushed(self.session_id)
                await self.bus.release(self.session_id)
        return ready


async def take_lease(bus: SessionBus, session_id: str, request_id: str) -> None:
    """Take the session's run lease; ``Busy`` while another run holds it.

    A run's last frame goes out just before its worker lets the lease go, so a client
    that answers that frame at once may find the lease still held by a run that has
    ended: then the lease is taken as soon as it is free (within moments).
    """
    for attempt in range(_LEASE_ATTEMPTS):
        if await bus.acquire(session_id, request_id) is not None:
            return
        holder = await bus.holder(session_id)
        if holder is None:
            continue  # let go meanwhile
        ending = not holder.request_id or not await database_sync_to_async(recovery.is_running)(
            holder.request_id
        )
        if not ending:
            raise Busy(holder.request_id)
        await asyncio.sleep(0.002 * (attempt + 1))
    raise Busy(None)  # still held by a run that ends: it let go of nothing in time
