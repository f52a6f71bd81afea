"""What the runtime tests share: model turns, LLM doubles, tools, observers and stream drivers.

``ProbeModel`` and ``Responder`` are the hand-written LLM doubles here. Most tests use the
library's ``ScriptedModel``; ``ProbeModel`` exists for the tests that must see inside a model
stream: how far it got, and whether the runtime closed it (its ``finally`` ran).

Waiting is always on an ``asyncio.Event`` a double or tool sets at the point the test means
("the model is streaming", "the tool has started"), never on time. ``cancel_when`` is the one
place that turns such an event into a cancellation, and it fails (instead of hanging) when the
work ends before the event is ever set.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from typing import Any

import pytest

from zett_agent.agent import Agent, AgentRunConfig
from zett_agent.events import AgentEvent, AgentEventType, AgentPhase
from zett_agent.extensions.base import AgentExtension
from zett_agent.extensions.events import (
    MessageAppendedEvent,
    PhaseTransitionEvent,
    RunCancelledEvent,
)
from zett_agent.extensions.external import ExternalEvent
from zett_agent.messages import (
    AgentMessage,
    AnyMessage,
    AssistantMessage,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from zett_agent.model import ModelEvent, ModelRequest, ModelResponse
from zett_agent.tools.base import AgentTool, tool

# --- model turns ------------------------------------------------------------------------


def answer(text: str, **fields: Any) -> list[ModelEvent]:
    """A model turn that streams ``text`` in one delta and completes with it."""
    return [
        ModelEvent.text(text),
        ModelEvent.completed(ModelResponse(AssistantMessage(content=text), **fields)),
    ]


def calls(*tool_calls: ToolCall, content: str = "") -> list[ModelEvent]:
    """A model turn that completes with a message requesting ``tool_calls``."""
    message = AssistantMessage(content=content, tool_calls=tool_calls)
    return [ModelEvent.completed(ModelResponse(message, finish_reason="tool_calls"))]


def call(name: str, call_id: str = "call-1", **arguments: Any) -> ToolCall:
    return ToolCall(id=call_id, name=name, arguments=arguments)


Turn = list[ModelEvent] | Callable[[ModelRequest], AsyncIterator[ModelEvent]]


def parked_turn(reached: asyncio.Event, release: asyncio.Event, text: str = "late") -> Turn:
    """A turn that streams one delta, sets ``reached``, then answers ``text`` once released."""

    async def turn(request: ModelRequest) -> AsyncIterator[ModelEvent]:
        yield ModelEvent.text("thinking ")
        reached.set()
        await release.wait()
        for event in answer(text)[1:]:
            yield event

    return turn


# --- LLM doubles ------------------------------------------------------------------------


class ProbeModel:
    """An LLM double that records requests, events produced and streams closed.

    A turn is a list of ``ModelEvent`` or an async generator function taking the request,
    which lets a test park the stream on an ``asyncio.Event``.
    """

    def __init__(self, *turns: Turn) -> None:
        self._turns = list(turns)
        self.requests: list[ModelRequest] = []
        self.produced = 0
        self.streams_closed = 0

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        self.requests.append(request)
        if not self._turns:
            raise RuntimeError("ProbeModel has no turn left")
        turn = self._turns.pop(0)
        try:
            if callable(turn):
                async with contextlib.aclosing(turn(request)) as events:
                    async for event in events:
                        self.produced += 1
                        yield event
            else:
                for event in turn:
                    self.produced += 1
                    yield event
        finally:
            self.streams_closed += 1


def last_input(request: ModelRequest) -> UserMessage | AgentMessage:
    """The newest user or agent message of a request: what the model is answering."""
    return next(m for m in reversed(request.messages) if isinstance(m, UserMessage | AgentMessage))


class Responder:
    """Answers ``re: <text>`` to the newest user or agent message; can park its first turn.

    With ``park_first`` the first turn streams one delta, sets ``reached`` and waits for
    ``release``: the window in which a test steers or instructs a running request.
    """

    def __init__(self, park_first: bool = False) -> None:
        self.requests: list[ModelRequest] = []
        self.reached = asyncio.Event()
        self.release = asyncio.Event()
        self.park_first = park_first

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        self.requests.append(request)
        text = f"re: {last_input(request).content}"
        if self.park_first and len(self.requests) == 1:
            yield ModelEvent.text("...")
            self.reached.set()
            await self.release.wait()
        for event in answer(text):
            yield event


class ThreadHoppingResponder:
    """Streams ``re: <text>`` word by word, each word after a round trip through a worker
    thread, so a thread racing the request gets real chances to run at every point of it."""

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        words = f"re: {last_input(request).content}".split(" ")
        for word in words:
            await asyncio.to_thread(lambda: None)
            yield ModelEvent.text(word + " ")
        for event in answer(" ".join(words) + " ")[1:]:
            yield event


class CallThenReport:
    """Requests ``tool_call`` first; answers ``<success>:<content>`` of the result it gets."""

    def __init__(self, tool_call: ToolCall) -> None:
        self.tool_call = tool_call
        self.requests: list[ModelRequest] = []

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        self.requests.append(request)
        last = request.messages[-1]
        if isinstance(last, ToolMessage):
            events = answer(f"{last.success}:{last.content}")
        else:
            events = calls(self.tool_call)
        for event in events:
            yield event


# --- tools ------------------------------------------------------------------------------


@tool
async def lookup(key: str) -> str:
    """Look up a value by key.

    Args:
        key: The key to look up.

    Snippet:
        lookup(key="colour")

    Guidelines:
        - Use when the answer depends on stored values.
    """
    return f"value of {key}"


@tool
async def add(a: int, b: int) -> int:
    """Add two numbers.

    Guidelines:
        - Use to add.
    """
    return a + b


def counting_tool(counted: list[int]) -> AgentTool:
    """A tool ``count(number=0)`` that appends every number its handler receives."""

    @tool
    async def count(number: int = 0) -> str:
        """Count a number.

        Guidelines:
            - Use to count.
        """
        counted.append(number)
        return "counted"

    return count


def parked_tool(
    started: asyncio.Event,
    release: asyncio.Event | None = None,
    cancelled: list[str] | None = None,
) -> AgentTool:
    """A tool ``slow(label="x")`` that sets ``started``, then waits for ``release`` (forever
    without one) and returns ``slow result``; a cancelled call appends ``<label> cancelled``."""
    gate = release or asyncio.Event()

    @tool
    async def slow(label: str = "x") -> str:
        """Take a long time.

        Guidelines:
            - Use when slowness is wanted.
        """
        started.set()
        try:
            await gate.wait()
        except asyncio.CancelledError:
            if cancelled is not None:
                cancelled.append(f"{label} cancelled")
            raise
        return "slow result"

    return slow


# --- extensions that watch a request ----------------------------------------------------


class Observer(AgentExtension):
    """Records what an extension is told about its requests: every published extension event,
    the end-of-turn and end-of-request hooks that ran, and the errors it saw."""

    def __init__(self, name: str | None = None, priority: int = 100) -> None:
        if name is not None:
            self.name = name
        self.priority = priority
        self.events: list[object] = []
        self.ended: list[str] = []
        self.errors: list[Exception] = []
        self.tool_errors: list[Exception | None] = []
        self.turn_results: list[AssistantMessage] = []
        self.successes: list[AssistantMessage] = []

    async def on_event(self, context, event) -> None:
        self.events.append(event)

    async def after_tool(self, context, call, result, error) -> None:
        self.tool_errors.append(error)

    async def after_turn(self, context, result) -> None:
        self.ended.append("after_turn")
        self.turn_results.append(result)

    async def after_run(self, context, result) -> None:
        self.ended.append("after_run")

    async def on_success(self, context, result) -> None:
        self.ended.append("on_success")
        self.successes.append(result)

    async def on_error(self, context, error) -> None:
        self.errors.append(error)

    def of_type(self, kind: type) -> list:
        return [event for event in self.events if isinstance(event, kind)]

    @property
    def cancelled(self) -> list[RunCancelledEvent]:
        return self.of_type(RunCancelledEvent)

    @property
    def transitions(self) -> list[PhaseTransitionEvent]:
        return self.of_type(PhaseTransitionEvent)

    @property
    def moves(self) -> list[tuple[AgentPhase, AgentPhase]]:
        return [(move.previous_phase, move.current_phase) for move in self.transitions]

    @property
    def phases(self) -> list[AgentPhase]:
        """The phase each move went to, in order."""
        return [move.current_phase for move in self.transitions]

    @property
    def tool_messages(self) -> list[ToolMessage]:
        return [
            event.message
            for event in self.of_type(MessageAppendedEvent)
            if isinstance(event.message, ToolMessage)
        ]


def raising_in(hook: str, error: Exception) -> AgentExtension:
    """An extension whose ``hook`` raises ``error`` (whatever arguments the hook takes)."""

    async def raise_error(self, *args):
        raise error

    return type(f"RaisingIn_{hook}", (AgentExtension,), {hook: raise_error})()


def _logs(hook: str):
    async def record(self, context, *args) -> None:
        self.log.append(hook)

    record.__name__ = hook
    return record


class HookLog(AgentExtension):
    """Records every hook, phase move and appended non-system message, in order."""

    def __init__(self, name: str | None = None, priority: int = 100) -> None:
        if name is not None:
            self.name = name
        self.priority = priority
        self.log: list = []

    async def on_event(self, context, event):
        if isinstance(event, PhaseTransitionEvent):
            self.log.append(("phase", event.previous_phase.value, event.current_phase.value))
        elif isinstance(event, MessageAppendedEvent) and not isinstance(
            event.message, SystemMessage
        ):
            self.log.append(("appended", event.message.role.value))

    def without_phases(self) -> list:
        """The log with the phase moves left out: hooks and appended messages only."""
        return [
            entry for entry in self.log if not (isinstance(entry, tuple) and entry[0] == "phase")
        ]

    async def on_tool_call(self, context, call, call_next):
        self.log.append("on_tool_call")
        return await call_next(call)

    on_tool = _logs("on_tool")
    on_state = _logs("on_state")
    on_message = _logs("on_message")
    before_run = _logs("before_run")
    before_turn = _logs("before_turn")
    before_model = _logs("before_model")
    after_model = _logs("after_model")
    before_tool = _logs("before_tool")
    after_tool = _logs("after_tool")
    after_turn = _logs("after_turn")
    after_run = _logs("after_run")
    on_success = _logs("on_success")
    on_error = _logs("on_error")
    on_compact = _logs("on_compact")


class SeededHistory(AgentExtension):
    """Restores a fixed history after the system messages, as a persistence layer would."""

    def __init__(self, *history: AnyMessage, priority: int = 100) -> None:
        self.history = list(history)
        self.priority = priority

    async def on_state(self, context) -> None:
        current = list(context.state.messages)
        split = 0
        while split < len(current) and isinstance(current[split], SystemMessage):
            split += 1
        context.replace_messages(
            [*current[:split], *self.history, *current[split:]], emit_new=False
        )


# --- driving a request ------------------------------------------------------------------


def types(events: list[AgentEvent]) -> list[AgentEventType]:
    return [event.type for event in events]


def without_deltas(events: list[AgentEvent]) -> list[AgentEventType]:
    """Event types with the display-only streaming events removed."""
    streaming = {
        AgentEventType.REASONING_STARTED,
        AgentEventType.REASONING_DELTA,
        AgentEventType.REASONING_COMPLETED,
        AgentEventType.CONTENT_STARTED,
        AgentEventType.TEXT_DELTA,
        AgentEventType.CONTENT_COMPLETED,
        AgentEventType.TOOL_CALL_DELTA,
    }
    return [event.type for event in events if event.type not in streaming]


async def collect(agent: Any, message: Any, **kwargs: Any) -> list[AgentEvent]:
    """Consume one request to the end and return every event it yielded."""
    async with contextlib.aclosing(agent.stream(message, **kwargs)) as stream:
        return [event async for event in stream]


async def events_of(
    model: Any,
    *,
    tools: Sequence[AgentTool] = (),
    extensions: Sequence[AgentExtension] = (),
    config: AgentRunConfig | None = None,
) -> list[AgentEvent]:
    """Run ``hi`` on a new agent with exactly these tools and extensions; return its events."""
    agent = await Agent.create(model, tools=list(tools), extensions=list(extensions))
    return await collect(agent, "hi", config=config or AgentRunConfig(session_id="s"))


async def close_at(
    agent: Any, message: Any, event_type: AgentEventType, **kwargs: Any
) -> list[AgentEvent]:
    """Consume one request up to its first ``event_type`` event, then close the stream."""
    received: list[AgentEvent] = []
    async with contextlib.aclosing(agent.stream(message, **kwargs)) as stream:
        async for event in stream:
            received.append(event)
            if event.type is event_type:
                return received
    raise AssertionError(f"the request ended without a {event_type.value} event")


async def _nothing() -> None:
    return None


async def let_other_tasks_run(rounds: int = 3) -> None:
    """Suspend so every other ready task gets turns; an ordering tool, not a timed wait."""
    for _ in range(rounds):
        await asyncio.create_task(_nothing())


async def cancel_when(gate: asyncio.Event, work: Coroutine[Any, Any, Any]) -> None:
    """Run ``work`` in a task; once ``gate`` is set and the task is parked, cancel it and
    check that the cancellation propagated. Work that ends first fails the test."""
    task = asyncio.create_task(work)
    gate_set = asyncio.create_task(gate.wait())
    await asyncio.wait({task, gate_set}, return_when=asyncio.FIRST_COMPLETED)
    if not gate_set.done():
        gate_set.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await gate_set
        task.result()  # re-raises what ended the work early
        pytest.fail("the work finished before the gate was set")
    await let_other_tasks_run()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def races_lost(
    event: ExternalEvent, accepted_by: list[str], started: AgentEventType, runs: int = 100
) -> list[str]:
    """Emit ``event`` from a thread while a request finishes, ``runs`` times, and return the
    runs in which "accepted" (the verdict is ``accepted_by``) and "processed" (the request
    yielded a ``started`` event) disagree; the answer should be none.

    Each run releases the thread at a different event of the request (the run index modulo
    ten), so together the runs sweep the whole request.
    """
    agent = await Agent.create(ThreadHoppingResponder(), extensions=[])
    lost: list[str] = []
    for index in range(runs):
        config = AgentRunConfig(session_id=f"race-{index}")
        go = threading.Event()
        verdict: list[list[str]] = []

        def emit_when_told(c=config, g=go, v=verdict):
            g.wait()
            v.append(agent.emit_external_event(event, config=c))

        thread = threading.Thread(target=emit_when_told)
        thread.start()
        events: list[AgentEvent] = []
        release_at = index % 10
        try:
            async with contextlib.aclosing(agent.stream("start", config=config)) as stream:
                async for item in stream:
                    events.append(item)
                    if len(events) == release_at:
                        go.set()
        finally:
            go.set()
            await asyncio.to_thread(thread.join)
        accepted = verdict[0] == accepted_by
        processed = any(item.type is started for item in events)
        if accepted != processed:
            lost.append(f"run {index}: accepted={verdict[0]} processed={processed}")
    return lost
