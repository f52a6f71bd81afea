"""Live sessions: the in-process state every socket of one chat session shares.

How a run, its frames and its cancellation flow (told once, here):

- **One live session per chat session and event loop.** The first socket of a session
  creates it; later sockets of the same session join it; the last one to leave drops it.
  It holds the agent, the ``seq`` counter and at most one active run, so two tabs on one
  session see the same stream and a second ``user_message`` from either is ``busy``. The
  session's ``Agent`` is built by its first run (and kept): a socket that never sends a
  message costs no agent, and a model that cannot be built fails each request that tries.
- **A run is a task of its own**, never the consumer's ``receive``: the socket keeps
  reading ``cancel``, ``steer`` and ``external_event`` frames while the agent works. The
  task iterates ``agent.stream`` and hands each event, as an ``agent_event`` frame encoded
  once, to every socket of the session in turn, awaiting each send. The runtime runs at
  most one event ahead of that loop, so a slow socket slows the run instead of piling up
  frames. daphne writes a sent frame out only when the event loop next polls, so after
  every event that is not a streamed delta, and at least every 4 ms while deltas stream,
  the task lets the loop go round: a tool's start reaches the client when it happens, not
  when the model next waits, and other sockets are served meanwhile.
- **seq** is assigned under the session's broadcast lock, so it is strictly increasing in
  the order sockets receive frames. It starts from ``ChatSession.last_event_seq`` and is
  written back when a run ends, so numbering continues after every socket closed or the
  process restarted. (Several worker processes would each number their own runs: run one
  ASGI process, or route a session's sockets to one worker.)
- **Cancellation**: ``cancel()`` cancels the run task and awaits its end. The
  ``CancelledError`` lands wherever the run waits — the agent's construction, the model
  stream, a tool, an approval or ask-user wait, a socket send. The runtime settles the
  request (cancelled tool results, ``RunCancelledEvent`` cancelling pending waits,
  persistence writing the settled messages), ``aclosing`` closes the model stream, the task
  reports ``run_cancelled`` and ends. When ``cancel()`` returns nothing of the run is
  left: no task, no wait, no stream.
- **Replies** (``external_event``, ``steer``) are handed to the agent under the same
  lock, and the replying socket gets its ``external_event_result`` before any event the
  reply causes. Only the verdict is sent under the lock: the audit row is written by the
  replying socket after releasing it, so the woken run never waits for the database (and
  that socket reads its next frame only once the row is written).
- **Ownership**: a run belongs to the socket that started it. When that socket closes, the
  run is cancelled (other sockets of the session see ``run_cancelled``); a socket that
  merely watched can come and go freely.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
import weakref
from collections.abc import Awaitable, Callable
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any, Protocol

from agent_app.agents import build_agent
from agent_app.models import ChatSession
from agent_app.protocol import (
    OutboundFrame,
    RunCancelledFrame,
    RunFailedFrame,
    agent_event_frame,
    encode_frame,
)
from zett_agent.agent import Agent, AgentRunConfig
from zett_agent.events import AgentEventType
from zett_agent.extensions.external import ExternalEvent
from zett_agent.serialization import error_to_dict, event_to_dict

__all__ = ["AgentFactory", "Busy", "LiveSession", "LiveSessions", "Subscriber", "live_sessions"]

logger = logging.getLogger(__name__)

#: Builds the agent of one session, given its id.
AgentFactory = Callable[[str], Awaitable[Agent]]

#: Streamed pieces: these may wait in the socket's buffer for the next ones.
_DELTAS = frozenset(
    {
        AgentEventType.TEXT_DELTA,
        AgentEventType.REASONING_DELTA,
        AgentEventType.TOOL_CALL_DELTA,
        AgentEventType.SERVER_TOOL_INPUT_DELTA,
        AgentEventType.COMPACTION_TEXT_DELTA,
        AgentEventType.COMPACTION_REASONING_DELTA,
    }
)
#: Longest a run keeps the event loop to itself while it streams deltas, in seconds: far
#: below what a reader of the stream notices, long enough that a fast stream leaves in a
#: few large writes rather than many small ones.
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


@dataclass(eq=False)
class _Run:
    request_id: str
    owner: Subscriber
    task: asyncio.Task[None]


class LiveSession:
    """The agent, frame numbering and active run of one chat session in this process."""

    def __init__(self, session_id: str, factory: AgentFactory, seq: int) -> None:
        self.session_id = session_id
        #: Built by the first run; ``None`` until then (or while it cannot be built).
        self.agent: Agent | None = None
        self._factory = factory
        self.seq = seq
        self.subscribers: list[Subscriber] = []
        self._run: _Run | None = None
        self._broadcast_lock = asyncio.Lock()

    @property
    def active_request_id(self) -> str | None:
        return self._run.request_id if self._run else None

    # --- runs --------------------------------------------------------------------------

    async def start_run(self, content: str, owner: Subscriber) -> str:
        """Start a request answering ``content``; return its id (``Busy`` if one runs)."""
        if self._run is not None:
            raise Busy(self._run.request_id)
        request_id = str(uuid.uuid4())
        task = asyncio.create_task(
            self._execute(request_id, content), name=f"zett-run-{request_id}"
        )
        self._run = _Run(request_id, owner, task)
        return request_id

    async def cancel(self) -> bool:
        """Cancel the active run and wait until it has wound down; False if none ran."""
        run = self._run
        if run is None:
            return False
        run.task.cancel()
        await asyncio.wait([run.task])
        return True

    def owns_run(self, subscriber: Subscriber) -> bool:
        return self._run is not None and self._run.owner is subscriber

    async def _agent(self) -> Agent:
        if self.agent is None:
            try:
                self.agent = await self._factory(self.session_id)
            except Exception as error:
                logger.error("Cannot build the agent of session %s: %s", self.session_id, error)
                raise
        return self.agent

    async def _execute(self, request_id: str, content: str) -> None:
        config = AgentRunConfig(session_id=self.session_id, request_id=request_id)
        final: dict[str, Any] | None = None
        outcome: OutboundFrame | None = None
        try:
            agent = await self._agent()
            clock = asyncio.get_running_loop().time
            streak_started = clock()
            async with aclosing(agent.stream(content, config=config)) as events:
                async for event in events:
                    if event.type is AgentEventType.RUN_COMPLETED:
                        # Held back until the stream has ended and released the session:
                        # a client may send its next message the moment it sees this.
                        final = event_to_dict(event)
                        continue
                    await self.broadcast_event(request_id, event_to_dict(event))
                    if event.type not in _DELTAS or clock() - streak_started > _STREAK:
                        await _let_the_loop_write()
                        streak_started = clock()
        except asyncio.CancelledError:
            # This task is the top of its own stack: reporting the cancellation is its
            # last job, and ``cancel()`` learns that it ended from ``asyncio.wait``.
            outcome = RunCancelledFrame(request_id=request_id)
        except Exception as error:
            if self.agent is not None:  # a failed build was logged by ``_agent``
                logger.warning(
                    "Request %s of session %s failed", request_id, self.session_id, exc_info=error
                )
            outcome = RunFailedFrame(request_id=request_id, error=error_to_dict(error))
        async with self._broadcast_lock:
            # Under the lock, so a run started from here on sends after this last frame.
            self._run = None
            if final is not None:
                self.seq += 1
                await self._send_all(encode_frame(agent_event_frame(self.seq, request_id, final)))
            if outcome is not None:
                await self._send_all(encode_frame(outcome.dump()))
        await self._save_seq()

    async def _save_seq(self) -> None:
        try:
            await ChatSession.objects.filter(pk=self.session_id).aupdate(last_event_seq=self.seq)
        except Exception:
            logger.exception("Could not store the frame counter of session %s", self.session_id)

    # --- frames ------------------------------------------------------------------------

    async def broadcast_event(self, request_id: str, event: dict[str, Any]) -> None:
        """Number one agent event and send it to every socket, in the same order for all."""
        async with self._broadcast_lock:
            self.seq += 1
            await self._send_all(encode_frame(agent_event_frame(self.seq, request_id, event)))

    async def _send_all(self, text: str) -> None:
        """Send one encoded frame to every socket: encoded once, whatever their number."""
        for subscriber in tuple(self.subscribers):
            try:
                await subscriber.send_text(text)
            except Exception:
                # A socket that cannot be written to is gone; the others keep the stream.
                logger.warning(
                    "Dropping a socket of session %s that failed a send",
                    self.session_id,
                    exc_info=True,
                )
                if subscriber in self.subscribers:
                    self.subscribers.remove(subscriber)

    # --- external events ---------------------------------------------------------------

    async def deliver(
        self,
        name: str,
        payload: dict[str, Any],
        answer: Callable[[list[str]], Awaitable[None]],
    ) -> tuple[str | None, list[str]]:
        """Route a client reply to the active request; return ``(request_id, accepted_by)``.

        ``answer(accepted_by)`` sends the verdict under the broadcast lock, so the replying
        socket hears it before any event the reply causes (a woken tool's start). Anything
        slow (the audit row) belongs after this returns: the woken run is waiting for the
        lock.
        """
        async with self._broadcast_lock:
            request_id = self.active_request_id
            accepted_by: list[str] = []
            if self.agent is not None and request_id is not None:
                config = AgentRunConfig(session_id=self.session_id, request_id=request_id)
                accepted_by = self.agent.emit_external_event(
                    ExternalEvent(name, payload), config=config
                )
            await answer(accepted_by)
        return request_id, accepted_by


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
        self._lock = asyncio.Lock()
        self._factory = factory or build_agent

    def get(self, session_id: str) -> LiveSession | None:
        return self._sessions.get(session_id)

    async def attach(self, session_id: str, subscriber: Subscriber) -> LiveSession:
        """Join (or bring up) the live session; ``subscriber`` receives its frames from now."""
        async with self._lock:
            live = self._sessions.get(session_id)
            if live is None:
                seq = (
                    await ChatSession.objects.filter(pk=session_id)
                    .values_list("last_event_seq", flat=True)
                    .afirst()
                )
                live = LiveSession(session_id, self._factory, seq or 0)
                self._sessions[session_id] = live
            live.subscribers.append(subscriber)
            return live

    async def detach(self, live: LiveSession, subscriber: Subscriber) -> None:
        """Leave; cancels the run ``subscriber`` started, drops the session when unwatched."""
        if subscriber in live.subscribers:
            live.subscribers.remove(subscriber)
        if live.owns_run(subscriber):
            await live.cancel()
        unwatched = not live.subscribers and live.active_request_id is None
        if unwatched and self._sessions.get(live.session_id) is live:
            del self._sessions[live.session_id]

    def __len__(self) -> int:
        return len(self._sessions)


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
