"""Live sessions: the in-process state every socket of one chat session shares.

How a run, its frames and its cancellation flow (told once, here):

- **One live session per chat session and event loop.** The first socket of a session
  creates it (building the session's ``Agent``); later sockets of the same session join it;
  the last one to leave drops it. It holds the agent, the ``seq`` counter and at most one
  active run, so two tabs on one session see the same stream and a second
  ``user_message`` from either is ``busy``.
- **A run is a task of its own**, never the consumer's ``receive``: the socket keeps
  reading ``cancel``, ``steer`` and ``external_event`` frames while the agent works. The
  task iterates ``agent.stream`` and hands each event, as an ``agent_event`` frame, to every
  socket of the session in turn, awaiting each send. The runtime runs at most one event
  ahead of that loop, so a slow socket slows the run instead of piling up frames.
- **seq** is assigned under the session's broadcast lock, so it is strictly increasing in
  the order sockets receive frames. It starts from ``ChatSession.last_event_seq`` and is
  written back when a run ends, so numbering continues after every socket closed or the
  process restarted. (Several worker processes would each number their own runs: run one
  ASGI process, or route a session's sockets to one worker.)
- **Cancellation**: ``cancel()`` cancels the run task and awaits its end. The
  ``CancelledError`` lands wherever the run waits — the model stream, a tool, an approval
  or ask-user wait, a socket send. The runtime settles the request (cancelled tool
  results, ``RunCancelledEvent`` cancelling pending waits, persistence writing the settled
  messages), ``aclosing`` closes the model stream, the task reports ``run_cancelled`` and
  ends. When ``cancel()`` returns nothing of the run is left: no task, no wait, no stream.
- **Replies** (``external_event``, ``steer``) are handed to the agent under the same
  lock, and the replying socket gets its ``external_event_result`` before any event the
  reply causes.
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
from agent_app.protocol import AgentEventFrame, OutboundFrame, RunCancelledFrame, RunFailedFrame
from zett_agent.agent import Agent, AgentRunConfig
from zett_agent.events import AgentEventType
from zett_agent.extensions.external import ExternalEvent
from zett_agent.serialization import error_to_dict, event_to_dict

__all__ = ["Busy", "LiveSession", "LiveSessions", "Subscriber", "live_sessions"]

logger = logging.getLogger(__name__)


class Subscriber(Protocol):
    """A socket of the session: the live session only ever sends it frames."""

    async def send_frame(self, frame: OutboundFrame) -> None: ...


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

    def __init__(
        self, session_id: str, agent: Agent | None, setup_error: Exception | None, seq: int
    ) -> None:
        self.session_id = session_id
        self.agent = agent
        #: Why the agent could not be built (e.g. a bad ``ZETT_MODEL``); reported per request.
        self.setup_error = setup_error
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
        if self.agent is None:
            await self.broadcast(
                RunFailedFrame(request_id=request_id, error=error_to_dict(self.setup_error))
            )
            return request_id
        task = asyncio.create_task(
            self._execute(self.agent, request_id, content), name=f"zett-run-{request_id}"
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

    async def _execute(self, agent: Agent, request_id: str, content: str) -> None:
        config = AgentRunConfig(session_id=self.session_id, request_id=request_id)
        final: dict[str, Any] | None = None
        outcome: OutboundFrame | None = None
        try:
            async with aclosing(agent.stream(content, config=config)) as events:
                async for event in events:
                    if event.type is AgentEventType.RUN_COMPLETED:
                        # Held back until the stream has ended and released the session:
                        # a client may send its next message the moment it sees this.
                        final = event_to_dict(event)
                        continue
                    await self.broadcast_event(request_id, event_to_dict(event))
        except asyncio.CancelledError:
            # This task is the top of its own stack: reporting the cancellation is its
            # last job, and ``cancel()`` learns that it ended from ``asyncio.wait``.
            outcome = RunCancelledFrame(request_id=request_id)
        except Exception as error:
            logger.warning(
                "Request %s of session %s failed", request_id, self.session_id, exc_info=error
            )
            outcome = RunFailedFrame(request_id=request_id, error=error_to_dict(error))
        async with self._broadcast_lock:
            # Under the lock, so a run started from here on sends after this last frame.
            self._run = None
            if final is not None:
                self.seq += 1
                await self._send_all(
                    AgentEventFrame(seq=self.seq, request_id=request_id, event=final)
                )
            if outcome is not None:
                await self._send_all(outcome)
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
            frame = AgentEventFrame(seq=self.seq, request_id=request_id, event=event)
            await self._send_all(frame)

    async def broadcast(self, frame: OutboundFrame) -> None:
        """Send a session-wide frame (run outcome) to every socket."""
        async with self._broadcast_lock:
            await self._send_all(frame)

    async def _send_all(self, frame: OutboundFrame) -> None:
        for subscriber in list(self.subscribers):
            try:
                await subscriber.send_frame(frame)
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
        answer: Callable[[str | None, list[str]], Awaitable[None]],
    ) -> list[str]:
        """Route a client reply to the active request; ``answer`` reports the verdict.

        ``answer(request_id, accepted_by)`` runs under the broadcast lock, so the replying
        socket hears the verdict before any event the reply causes (a woken tool's result).
        """
        async with self._broadcast_lock:
            request_id = self.active_request_id
            accepted_by: list[str] = []
            if self.agent is not None and request_id is not None:
                config = AgentRunConfig(session_id=self.session_id, request_id=request_id)
                accepted_by = self.agent.emit_external_event(
                    ExternalEvent(name, payload), config=config
                )
            await answer(request_id, accepted_by)
            return accepted_by


class LiveSessions:
    """The live sessions of one event loop, by session id."""

    def __init__(self, factory: Callable[[str], Awaitable[Agent]] | None = None) -> None:
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
                live = await self._open(session_id)
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

    async def _open(self, session_id: str) -> LiveSession:
        agent: Agent | None = None
        error: Exception | None = None
        try:
            agent = await self._factory(session_id)
        except Exception as exc:
            logger.error("Cannot build the agent of session %s: %s", session_id, exc)
            error = exc
        seq = (
            await ChatSession.objects.filter(pk=session_id)
            .values_list("last_event_seq", flat=True)
            .afirst()
        )
        return LiveSession(session_id, agent, error, seq or 0)

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
