"""A run's whole life in this process: start, events, waits, end and outcome.

A ``Run`` is one request of a session that this process runs. Its ``state`` says where it
is, and the transitions are only these (``RunState``)::

    STARTING --launch--> RUNNING <--event / wait announced--> WAITING
        |                   |                                    |
        +-------------------+------------- finish ---------------+--> ENDING --> ENDED

``STARTING``: stored and announced (``run_started``), its task not running yet;
``WAITING``: its last event announced a question or approval and it does nothing until a
reply or a deadline; ``ENDING``: its outcome is being recorded; ``ENDED``: its last frame
is sent. How it stopped, when not on its own, is ``stop`` (``StopReason``): cancelled by a
user, interrupted because its lease was lost or the process shuts down.

The run's final answer is stored with its end, in one transaction: the persistence
extension hands it over (``RunSeams.at_end``) instead of writing it, which saves a
run one database round trip and one transaction. No frame says more than the database
holds: the answer's ``model_completed`` frame is held back (``held``) and sent just before
the run's last frame, once both are stored. If the run goes on instead (a steering message,
an internal message), the answer is written and its frame sent before the next frame
(``_release_held``). A crash before the run's end loses that answer as it would lose one
still streaming: its deltas were shown, its ``model_completed`` was not, and the run is
recovered as interrupted. Cancellation and the session's lock are told once, in
``agent_app.sessions.live``.

A delegate's events (a sub-run, ``agent_app.agents.subruns``) come in the run's stream,
marked with their ``agent``: they are broadcast like the run's own, their waits stored as
the run's, their tokens counted in its usage. A handoff (``agent_app.agents.teamwork``)
ends the agent's request after its call; the run then streams the new assistant's
continuation of the same turn (``handoff``), under the same request id.

The run's parts each have a module: its states and what it needs of its session
(``run_state``), its waits (``run_waits``) and its end (``run_end``); this one starts it
and streams its events.
"""

from __future__ import annotations

import asyncio
import logging
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any

from channels.db import database_sync_to_async

from agent_app.agents.factory import serves
from agent_app.agents.teamwork import HANDOFF_ATTRIBUTE
from agent_app.assistants import Entry, enter_run
from agent_app.budgets.ledger import BudgetExceeded
from agent_app.bus.base import Marker
from agent_app.durable import continuation, recovery, waits
from agent_app.durable.persistence import RunSeams, shielded
from agent_app.durable.runs import Begun, user_message_for
from agent_app.models import RunKind, RunStatus
from agent_app.protocol.frames import run_started_frame
from agent_app.protocol.text import encode_frame
from agent_app.sessions.branching import announce_version
from agent_app.sessions.fanout import STREAK_SECONDS, TEXT_DELTAS, let_the_loop_write
from agent_app.sessions.run_end import RunEnding
from agent_app.sessions.run_state import TRANSITIONS, RunOwner, RunState, StopReason
from agent_app.sessions.run_waits import RunWaits
from agent_app.telemetry import context, metrics, tracing
from zett_agent.agent import Agent, AgentRunConfig
from zett_agent.events import AgentEventType, RelayedEvent
from zett_agent.messages import UserMessage, content_text
from zett_agent.serialization import event_to_dict

__all__ = ["Run", "RunOwner", "RunState", "StopReason", "add_usage"]

logger = logging.getLogger(__name__)

E = AgentEventType
_TOOL_ENDS = frozenset({E.TOOL_COMPLETED, E.TOOL_FAILED, E.TOOL_SKIPPED})
#: What may follow a final answer before the run ends: held back with its frame.
_TURN_ENDS = frozenset({E.STEERING_COMPLETED, E.INTERNAL_MESSAGE_COMPLETED})


_RUNNING, _WAITING = RunState.RUNNING, RunState.WAITING


@dataclass(eq=False)
class Run(RunWaits, RunEnding):
    """One run of a session in this process (see the module docstring)."""

    owner: RunOwner
    request_id: str
    kind: str = RunKind.MESSAGE
    resumed_from: str | None = None
    state: RunState = RunState.STARTING
    task: asyncio.Task[None] | None = None
    stop: StopReason | None = None
    #: How it ended, once it has.
    outcome: RunStatus | None = None
    #: Token usage summed over the run's model calls.
    usage: dict[str, int] = field(default_factory=dict)
    #: Calls of this run with a stored wait (marked done when their result lands).
    waits: set[str] = field(default_factory=set)
    #: Set once the run's task exists, or its start failed (``cancel`` waits for it).
    launched: asyncio.Event = field(default_factory=asyncio.Event)
    #: The text deltas of the answer streaming now, as sent (a cancelled answer's partial
    #: text: ``RunSeams.streamed``). A delta counts once its frame is numbered, even when
    #: the cancellation lands while it still goes out: it is kept for replay, so shown.
    streamed: list[str] = field(default_factory=list)
    #: The final answer's row, stored with the run's end (``RunSeams.at_end``).
    at_end: list[Any] = field(default_factory=list)
    #: That answer's ``model_completed`` event (and the completions of its turn that
    #: follow it), held back until the answer is stored.
    held: list[dict[str, Any]] | None = None
    agent: Agent | None = None
    #: The event loop's clock when the run's task started, and at its first text (metrics).
    started: float = 0.0
    first_token: float | None = None
    #: Traced, and its span's traceparent not read yet; then that traceparent, stored with
    #: the run's waits and its end (``agent_app.telemetry.context``).
    trace_pending: bool = False
    trace_context: str = ""
    #: Why it ended ``budget_exceeded``, when it did.
    refusal: BudgetExceeded | None = None
    #: Which worker of the run this is: 1, or more for a continuation after a crash.
    attempt: int = 1
    #: What the run shares with the persistence extension (``frozen`` on a handover).
    seams: RunSeams | None = None
    #: The assistant a ``transfer_to_<id>`` call handed the chat to: it answers the rest
    #: of the turn once the current agent's request has ended (``agent_app.agents.teamwork``).
    handoff: str | None = None

    def to(self, state: RunState) -> None:
        """Move to ``state``; a transition the diagram does not draw is a bug."""
        if state not in TRANSITIONS[self.state]:
            raise RuntimeError(f"A run cannot go from {self.state.name} to {state.name}")
        self.state = state

    @property
    def finished(self) -> bool:
        """Its outcome is recorded or being recorded."""
        return self.state is RunState.ENDING or self.state is RunState.ENDED

    # --- start -------------------------------------------------------------------------

    async def announce(self, begun: Begun) -> None:
        """Broadcast ``run_started`` (under the lock): the first frame of the run."""
        feed = self.owner.feed
        feed.seq.add_block(*begun.seq_block)
        feed.replay.clear()
        seq = await feed.seq.take()
        message = begun.message
        frame = run_started_frame(
            seq=seq,
            request_id=self.request_id,
            content=None if message is None else content_text(message.content),
            kind=self.kind,
            resumed_from=self.resumed_from,
            position=begun.position,
            message_id=begun.message_id,
            superseded_from=begun.superseded_from,
            created_at=begun.created_at.isoformat().replace("+00:00", "Z"),
            attachments=begun.attachments,
            title=begun.title,
        )
        await feed.broadcast(
            seq, encode_frame(frame), marker=Marker.START, request_id=self.request_id
        )
        await announce_version(feed, self.request_id, begun)

    @classmethod
    def continuing(cls, owner: RunOwner, outcome: recovery.Settled) -> Run:
        """The run that continues a dead one claimed for this process (same request)."""
        return cls(
            owner,
            outcome.request_id,
            kind=outcome.kind or RunKind.MESSAGE,
            attempt=outcome.attempt,
        )

    async def take_over(self, outcome: recovery.Settled) -> asyncio.Task[None]:
        """Announce and launch a continuation (under the lock); its task."""
        try:
            await self.announce_continued(outcome)
        except BaseException:
            self.owner.run_ended(self)
            self.launched.set()
            raise
        self.launch(None, None, None)
        assert self.task is not None
        self.task.add_done_callback(lambda _: self.owner.check_idle())
        return self.task

    async def announce_continued(self, outcome: recovery.Settled) -> None:
        """Broadcast ``run_continued`` (under the lock): the first frame of a continuation.

        Its ``seq`` comes after every frame the dead worker sent (the settling reserved a
        fresh block); a page drops the unfinished step's partial text when it arrives.
        """
        feed = self.owner.feed
        feed.replay.clear()
        seq = await feed.next_seq()
        frame = outcome.frame(seq)
        await feed.broadcast(
            seq, encode_frame(frame), marker=Marker.START, request_id=self.request_id
        )

    def launch(
        self,
        message: UserMessage | None,
        history: list[Any] | None,
        entry: Entry | Exception | None,
    ) -> None:
        """Start the run's task: it streams the agent's events until the run ends.

        ``entry``: what its top checks, read as it was stored (``enter_run``)."""
        if message is not None:
            self.seams = RunSeams(
                input_stored=True,
                restored_history=history,
                streamed=self.streamed,
                at_end=self.at_end,
            )
        elif self.attempt > 1:  # a continuation after a crash: its partial text is its own
            self.seams = RunSeams(streamed=self.streamed, at_end=self.at_end)
        self.started = asyncio.get_running_loop().time()
        self.task = asyncio.create_task(
            self._execute(message, history, entry), name=f"zett-run-{self.request_id}"
        )
        self.to(RunState.RUNNING)
        self.launched.set()

    # --- events ------------------------------------------------------------------------

    async def _execute(
        self,
        message: UserMessage | None,
        history: list[Any] | None,
        entry: Entry | Exception | None,
    ) -> None:
        final: dict[str, Any] | None = None
        try:
            final = await self._stream(await self._open(message, history, entry))
            while self.handoff is not None:
                final = await self._stream(await self._hand_over())
        except asyncio.CancelledError:
            if self.stop is StopReason.HANDOVER:
                await self._leave_running()
                return
            status = RunStatus.CANCELLED if self.stop is None else RunStatus.INTERRUPTED
            await self.finish(status)
            return
        except BudgetExceeded as refusal:
            # Before a model call: the calls before it are stored, no further one is made.
            self.refusal = refusal
            await self.finish(RunStatus.BUDGET_EXCEEDED, error=(refusal.code, refusal.message))
            return
        except Exception as error:
            logger.warning(
                "Request %s of session %s failed",
                self.request_id,
                self.owner.session_id,
                exc_info=error,
            )
            await self.finish(RunStatus.FAILED, error=user_message_for(error))
            return
        await self.finish(RunStatus.COMPLETED, final=final)

    async def _open(
        self,
        message: UserMessage | None,
        history: list[Any] | None,
        entry: Entry | Exception | None,
    ) -> Any:
        """The agent's event stream: a new message's, or a continuation's."""
        config = AgentRunConfig(session_id=self.owner.session_id, request_id=self.request_id)
        await enter_run(self.owner.session_id, entry)  # current_user()/current_chat(); permission
        agent = await self.owner.get_agent()
        if isinstance(entry, Entry) and serves(agent) not in (None, entry.assistant.id):
            self.owner.agent = None  # the chat was handed to another assistant meanwhile
            agent = await self.owner.get_agent()
        self.agent = agent
        self.trace_pending = tracing.active()
        if message is None:
            metadata: dict[str, Any] = {}
            if self.seams is not None:
                metadata.update(self.seams.metadata())
            replies, deadlines = await self._resumption()
            if tracing.active():  # the run (or attempt) it continues, wherever that ran
                links = await database_sync_to_async(context.continuation_metadata)(
                    self.request_id if self.attempt > 1 else self.resumed_from
                )
                metadata.update(links or {})
            return agent.resume_stream(
                config=config, replies=replies, deadlines=deadlines, metadata=metadata or None
            )
        assert self.seams is not None
        return agent.stream(message, config=config, metadata=self.seams.metadata())

    async def _hand_over(self) -> Any:
        """The stream of the assistant a handoff named, answering the rest of the turn:
        the chat's agent is now its (the chat is bound to it already)."""
        self.handoff = None
        self.streamed.clear()  # the text before the handoff is stored with its call
        self.owner.agent = None
        agent = self.agent = await self.owner.get_agent()
        config = AgentRunConfig(session_id=self.owner.session_id, request_id=self.request_id)
        # Held by the run: a shutdown's handover freezes the writes of this stream too.
        self.seams = RunSeams(input_stored=True, streamed=self.streamed, at_end=self.at_end)
        return agent.resume_stream(config=config, metadata=self.seams.metadata())

    async def _stream(self, stream: Any) -> dict[str, Any] | None:
        """Broadcast each event of the run; return its ``run_completed`` event, if any.

        The ``run_completed`` event is held back until the stream has ended and released
        the session: a client may send its next message the moment it sees it.
        """
        final: dict[str, Any] | None = None
        clock = asyncio.get_running_loop().time
        streak_started = clock()
        feed, request_id, streamed = self.owner.feed, self.request_id, self.streamed
        async with aclosing(stream) as events:
            async for event in events:
                kind = event.type
                if type(event) is RelayedEvent:  # a sub-run's
                    await self._relayed(event)
                    continue
                if self.trace_pending:  # the run's span exists by its first event
                    await self._store_trace_context()
                if self.state is _WAITING:
                    self.state = _RUNNING  # any event ends a wait
                if self.held is not None and kind is not E.RUN_COMPLETED:
                    if kind in _TURN_ENDS and self.at_end:
                        self.held.append(event_to_dict(event))
                        continue
                    await self._release_held()  # the run goes on after its answer
                if kind is E.TEXT_DELTA:
                    # Most of a run: its frame is built from the event as text.
                    numbered = feed.last_seq
                    try:
                        await feed.broadcast_event(request_id, event)
                    except asyncio.CancelledError:
                        if feed.last_seq != numbered:  # sent, or kept for replay: shown
                            streamed.append(event.delta)
                        raise
                    streamed.append(event.delta)  # sent: part of a partial answer
                    if self.first_token is None:
                        self._first_token(clock())
                elif kind in TEXT_DELTAS:
                    await feed.broadcast_event(request_id, event)
                elif kind is E.RUN_COMPLETED:
                    final = event_to_dict(event)
                    continue
                elif kind is E.CUSTOM:
                    await self._custom(event_to_dict(event))
                    await let_the_loop_write()
                    streak_started = clock()
                    continue
                elif not await self._other_event(kind, event_to_dict(event)):
                    continue  # held back until its answer is stored
                if clock() - streak_started > STREAK_SECONDS:
                    await let_the_loop_write()
                    streak_started = clock()
        return final

    def _first_token(self, now: float) -> None:
        self.first_token = now
        if metrics.ENABLED:
            metrics.time_to_first_token(metrics.assistant_of(self.agent), now - self.started)

    async def _other_event(self, kind: AgentEventType, data: dict[str, Any]) -> bool:
        """Broadcast an event that is no text delta; False when it is held back instead."""
        if kind is E.MODEL_STARTED:
            self.streamed.clear()  # a partial answer is this model call's text only
        elif kind is E.MODEL_COMPLETED or kind is E.MODEL_STOPPED:
            add_usage(self.usage, data.get("response"))
            if self.at_end:
                self.held = [data]  # sent once its answer is stored
                return False
        elif kind in _TOOL_ENDS:
            if self.waits:
                await self._close_waits(data)
            handoff = ((data.get("message") or {}).get("attributes") or {}).get(HANDOFF_ATTRIBUTE)
            if isinstance(handoff, dict) and isinstance(handoff.get("to"), str):
                self.handoff = handoff["to"]
        await self.owner.feed.broadcast_event(self.request_id, data)
        return True

    async def _relayed(self, event: RelayedEvent) -> None:
        """Broadcast a sub-run's event (``agent_app.agents.subruns``): its waits are the
        chat's, its tokens the run's."""
        if self.state is _WAITING:
            self.state = _RUNNING
        kind = event.type
        data = event_to_dict(event)
        if kind is E.CUSTOM:
            payload = data.get("payload")
            if waits.wait_kind(data.get("name"), payload) is not None:
                payload["agent"] = event.agent  # listed in ``pending`` with who asks
                payload["parent_tool_call_id"] = event.parent_tool_call_id
            await self._custom(data)
            return
        if kind is E.MODEL_COMPLETED or kind is E.MODEL_STOPPED:
            add_usage(self.usage, data.get("response"))
        elif kind in _TOOL_ENDS and self.waits:
            await self._close_waits(data)
        await self.owner.feed.broadcast_event(self.request_id, data)

    async def _store_trace_context(self) -> None:
        """Record this attempt's span and store it at once: a continuation on another
        worker links to it, even if this worker dies before the run's span ends."""
        self.trace_pending = False
        self.trace_context = context.attempt_span(
            context.traceparent_of(self.agent, self.owner.session_id),
            session_id=self.owner.session_id,
            request_id=self.request_id,
            attempt=self.attempt,
        )
        if self.trace_context:
            await shielded(
                database_sync_to_async(continuation.record_trace_context)(
                    self.request_id, self.trace_context
                )
            )

    # --- stopping from outside ---------------------------------------------------------

    async def step_aside(self) -> None:
        """Stop for a shutdown: hand the run over to be continued elsewhere, or, when its
        writes cannot be held back (no seams yet), end it ``interrupted``."""
        await self.interrupt(StopReason.HANDOVER if self.seams is not None else StopReason.SHUTDOWN)

    async def interrupt(self, reason: StopReason) -> None:
        """Cancel the run's task for ``reason`` and wait until it has ended."""
        if self.task is None:
            return
        self.stop = reason
        if reason is StopReason.HANDOVER and self.seams is not None:
            self.seams.frozen = True  # what the cancellation would store stays unstored
        self.task.cancel()
        await asyncio.wait([self.task])
        if reason is StopReason.HANDOVER and not self.finished:
            await self._leave_running()  # cancelled before its first step: nothing of it ran


def add_usage(totals: dict[str, int], response: dict[str, Any] | None) -> None:
    """Add one model call's token usage to the run's totals (stored with its end)."""
    usage = (response or {}).get("usage") or {}
    for key, value in usage.items():
        if isinstance(value, int):
            totals[key] = totals.get(key, 0) + value
