"""Sessions paused inside an external wait: memory per paused session (W3) and reply latency.

``ConfirmExtension`` follows the confirmation example of docs/runtime.md: its ``confirm`` tool
needs a UI decision, so ``before_tool`` registers a wait, emits ``confirmation_requested`` and
suspends until ``emit_external_event`` delivers ``confirmation_response``. The model asks for
``confirm`` once, then answers with one delta.

How a paused session is held here: one consumer task per session drains ``agent.stream``
and flags the session as paused when it sees ``confirmation_requested``; the request's own
work is then suspended on the wait's Future, with nothing running. Releasing replies to
every session with its exact ``(session_id, request_id)`` and waits for each consumer to see
``RUN_COMPLETED``; a reply that no extension accepts is a failure, not a skipped sample.

Memory is measured twice, in two separate passes so that tracemalloc's own bookkeeping never
inflates the RSS figure: RSS growth of the process (what the machine pays), then the Python
heap growth seen by tracemalloc (what the objects weigh).
"""

from __future__ import annotations

import asyncio
import gc
import os
import statistics
import time
import tracemalloc
from collections.abc import AsyncIterator
from contextlib import aclosing
from dataclasses import dataclass

from zett_agent.agent import Agent, AgentRunConfig, AgentRunContext
from zett_agent.events import AgentEvent, AgentEventType
from zett_agent.extensions.external import ExternalEvent, ExternalEventExtension
from zett_agent.messages import AssistantMessage, ToolCall, ToolMessage
from zett_agent.model import ModelEvent, ModelRequest, ModelResponse
from zett_agent.tools.base import tool

__all__ = [
    "ConfirmExtension",
    "PausedMemory",
    "ReplyLatency",
    "measure_paused_memory",
    "measure_reply_latency",
    "rss_bytes",
]

REQUEST_EVENT = "confirmation_requested"
RESPONSE_EVENT = "confirmation_response"
_PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")


def rss_bytes() -> int:
    """Resident set size of this process, from ``/proc/self/statm``."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * _PAGE_SIZE


class ConfirmExtension(ExternalEventExtension):
    """A ``confirm`` tool that waits for a ``confirmation_response`` reply."""

    def __init__(self) -> None:
        super().__init__(response_event_name=RESPONSE_EVENT, correlation_field="tool_call_id")
        #: ``perf_counter_ns()`` when each tool call's body ran, by call id and session.
        self.ran_at: dict[tuple[str, str], int] = {}
        #: Set when a tool body runs, for whoever waits on one specific reply.
        self.ran = asyncio.Event()

    async def on_tool(self, context: AgentRunContext) -> None:
        extension = self

        @tool
        async def confirm() -> bool:
            """Ask the user whether to proceed.

            Guidelines:
                - Use when proceeding needs an explicit user decision.
            """
            reply = extension._take_external_event(context)
            extension.ran_at[(context.session_id, reply.payload["tool_call_id"])] = (
                time.perf_counter_ns()
            )
            extension.ran.set()
            return bool(reply.payload.get("approved"))

        context.register_tool(confirm)

    async def before_tool(self, context: AgentRunContext, call: ToolCall) -> None:
        if call.name != "confirm":
            return
        async with self._wait_for_external_event(context, call.id):
            await context.emit(
                AgentEvent(
                    AgentEventType.CUSTOM,
                    session_id=context.session_id,
                    name=REQUEST_EVENT,
                    payload={"tool_call_id": call.id},
                )
            )


class ConfirmModel:
    """Calls ``confirm`` once per request, then answers with one delta."""

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        if isinstance(request.messages[-1], ToolMessage):
            yield ModelEvent.text("done")
            yield ModelEvent.completed(ModelResponse(AssistantMessage(content="done")))
            return
        call = ToolCall("confirm_1", "confirm", {})
        yield ModelEvent.completed(ModelResponse(AssistantMessage(tool_calls=(call,))))


class _PausedSession:
    """A consumer task for one session, and the moment it saw the wait begin."""

    def __init__(self, agent: Agent, config: AgentRunConfig) -> None:
        self.config = config
        self.call_id: str | None = None
        self.completed = False
        self.paused = asyncio.Event()
        self.task = asyncio.create_task(self._consume(agent))

    async def _consume(self, agent: Agent) -> None:
        async with aclosing(agent.stream("hi", config=self.config)) as events:
            async for event in events:
                if event.type is AgentEventType.CUSTOM and event.name == REQUEST_EVENT:
                    self.call_id = event.payload["tool_call_id"]
                    self.paused.set()
                elif event.type is AgentEventType.RUN_COMPLETED:
                    self.completed = True

    def reply(self, agent: Agent) -> list[str]:
        payload = {"tool_call_id": self.call_id, "approved": True}
        return agent.emit_external_event(ExternalEvent(RESPONSE_EVENT, payload), config=self.config)


async def _pause_sessions(agent: Agent, count: int, tag: str) -> list[_PausedSession]:
    """Start ``count`` sessions and return once every one of them is paused in its wait."""
    sessions = [
        _PausedSession(
            agent, AgentRunConfig(session_id=f"{tag}-{index}", request_id=f"{tag}-request-{index}")
        )
        for index in range(count)
    ]
    for session in sessions:
        await session.paused.wait()
    return sessions


async def _release(agent: Agent, sessions: list[_PausedSession], extension_name: str) -> int:
    """Reply to every paused session, await them all and return how many completed."""
    for session in sessions:
        accepted = session.reply(agent)
        if accepted != [extension_name]:
            raise RuntimeError(f"reply to {session.config.session_id} accepted by {accepted}")
    await asyncio.gather(*(session.task for session in sessions))
    return sum(session.completed for session in sessions)


@dataclass(frozen=True, slots=True)
class PausedMemory:
    """Memory held by ``sessions`` concurrently paused sessions, and their release."""

    sessions: int
    #: Bytes of RSS growth per paused session (pass 1, tracemalloc off).
    rss_per_session: float
    #: Bytes of Python heap growth per paused session (pass 2, tracemalloc on).
    heap_per_session: float
    #: Sessions that reached RUN_COMPLETED after their reply, over both passes.
    released: int
    #: Executions of the ``confirm`` tool over both passes.
    tool_runs: int


async def measure_paused_memory(sessions: int) -> PausedMemory:
    """W3: pause ``sessions`` sessions at once, weigh them, release them and check they end."""
    extension = ConfirmExtension()
    agent = await Agent.create(ConfirmModel(), extensions=[extension])
    # Warm every code path (imports, caches) so the first pass weighs only sessions.
    await _release(agent, await _pause_sessions(agent, 8, "warm"), extension.name)

    gc.collect()
    rss_before = rss_bytes()
    paused = await _pause_sessions(agent, sessions, "rss")
    gc.collect()
    rss_after = rss_bytes()
    released = await _release(agent, paused, extension.name)
    del paused

    gc.collect()
    tracemalloc.start()
    heap_before = tracemalloc.get_traced_memory()[0]
    paused = await _pause_sessions(agent, sessions, "heap")
    gc.collect()
    heap_after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    released += await _release(agent, paused, extension.name)

    return PausedMemory(
        sessions=sessions,
        rss_per_session=(rss_after - rss_before) / sessions,
        heap_per_session=(heap_after - heap_before) / sessions,
        released=released,
        tool_runs=len([key for key in extension.ran_at if not key[0].startswith("warm")]),
    )


@dataclass(frozen=True, slots=True)
class ReplyLatency:
    """Microseconds from ``emit_external_event`` to the tool body running."""

    samples: int
    p50_us: float
    p99_us: float
    max_us: float


async def measure_reply_latency(samples: int) -> ReplyLatency:
    """Pause one session at a time and time its reply to the tool's first line."""
    extension = ConfirmExtension()
    agent = await Agent.create(ConfirmModel(), extensions=[extension])
    latencies: list[float] = []
    for index in range(samples + 20):
        (session,) = await _pause_sessions(agent, 1, f"latency-{index}")
        extension.ran.clear()
        started = time.perf_counter_ns()
        if session.reply(agent) != [extension.name]:
            raise RuntimeError(f"reply to {session.config.session_id} was rejected")
        await extension.ran.wait()
        ran = extension.ran_at[(session.config.session_id, session.call_id)]
        await session.task
        if index >= 20:  # the first replies warm the code path
            latencies.append((ran - started) / 1000)
    latencies.sort()
    return ReplyLatency(
        samples=len(latencies),
        p50_us=statistics.median(latencies),
        p99_us=latencies[min(len(latencies) - 1, round(0.99 * (len(latencies) - 1)))],
        max_us=latencies[-1],
    )
