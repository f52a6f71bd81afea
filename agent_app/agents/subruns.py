"""Sub-runs: an ``ask_<id>`` call runs another assistant inside the chat's run.

``run_sub_run`` is the body of every delegate tool (``agent_app.agents.teamwork``). The
delegate gets an agent of its own (``agent_app.agents.factory.build_sub_agent``: its
instructions, model, tools, approvals, MCP servers), serving the same chat: its request
runs under the chat's session id (so its approvals, questions, budget and attachments are
the chat's, as the chat's own run's are) with a request id of its own, and with a history
of its own instead of the chat's (``SubRunHistory``: one ``SubRun`` row,
``agent_app.durable.subruns``). The same person and chat are bound (``current_user()``,
``current_chat()``): the sub-run runs in the calling tool's task.

**One stream.** Each event of the sub-run is relayed into the chat's run
(``AgentRunContext.relay``), marked with ``agent`` and ``parent_tool_call_id``, so it
reaches every socket, AG-UI and the traces like the run's own events; its final answer is
the call's result. Its questions and approvals are announced through that stream, so the
chat's run stores them as the chat's waits (``agent_app.sessions.run``). A reply to one
of them is offered to the live sub-runs of the chat (``offer``) when the chat's own agent
does not take it (``agent_app.sessions.replies``).

**The chain.** ``CHAIN`` holds the assistants running in the calling task, outermost
first, with the call that started each: an assistant never delegates to one already in
it (no cycles), and never deeper than ``ZETT_MAX_DELEGATION_DEPTH``.

**Crashes.** An ``ask_<id>`` call is safe to run again (``idempotent``): a continuation
after a crash runs it again, and it finds its sub-run (``SubRun``, one per call and
version of the turn) and goes on from the sub-run's stored conversation, not from the
start. ``SubRunCalls`` gives the sub-run's own tool calls the top run's rules (at most
once; exactly once for ``atomic`` tools, whose results are stored in the row with their
writes).

Concurrency: a sub-run runs in its caller's task, one at a time per call; the live
registry is per process and per chat (a reply for a chat reaches the process running its
run first: ``agent_app.sessions.follower``).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from contextlib import aclosing
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from channels.db import database_sync_to_async

from agent_app import conf
from agent_app.durable import subruns as stored
from agent_app.durable.persistence import shielded
from agent_app.models import SubRunStatus
from zett_agent.agent import AgentRunConfig
from zett_agent.events import AgentEventType
from zett_agent.extensions.base import AgentExtension
from zett_agent.extensions.events import MessageAppendedEvent
from zett_agent.extensions.external import ExternalEvent
from zett_agent.history import valid_history
from zett_agent.messages import AnyMessage, content_text
from zett_agent.serialization import message_to_dict
from zett_agent.tools.base import AgentTool, current_run_context, current_tool_call_id

if TYPE_CHECKING:
    from agent_app.assistants import Assistant
    from zett_agent.agent import Agent, AgentRunContext
    from zett_agent.extensions.events import ExtensionEvent

__all__ = ["CHAIN", "Link", "SubRunCalls", "SubRunHistory", "offer", "run_sub_run"]


@dataclass(frozen=True, slots=True)
class Link:
    """One assistant running in the chain, and the call that started it (None: the
    chat's own run)."""

    assistant: str
    call_id: str | None
    #: The chat's run (its request id), the same along the chain.
    request_id: str


#: The assistants running in this task, outermost first (empty outside sub-runs).
CHAIN: ContextVar[tuple[Link, ...]] = ContextVar("zett_delegation_chain", default=())

#: The live sub-runs of each chat in this process, innermost last: (agent, its config).
_LIVE: dict[str, list[tuple[Agent, AgentRunConfig]]] = {}


def offer(session_id: str, event: ExternalEvent) -> list[str]:
    """Offer a reply to the chat's live sub-runs, innermost first; who took it."""
    for agent, config in reversed(_LIVE.get(session_id, ())):
        taken = agent.emit_external_event(event, config=config)
        if taken:
            return taken
    return []


def running(owner: str) -> tuple[set[str], int]:
    """The assistants running in the calling task's chain (``owner`` included), and the
    depth of the request that asks (0: the chat's own run)."""
    chain = CHAIN.get()
    return {link.assistant for link in chain} | {owner}, max(len(chain) - 1, 0)


class SubRunHistory(AgentExtension):
    """A sub-run's conversation: restored from its ``SubRun`` row, and written back as
    each message is appended (the whole list: a sub-run's conversation is short)."""

    #: Restore before other extensions look at the context in their own ``on_state``.
    priority = 10

    def __init__(self, pk: int, messages: list[AnyMessage]) -> None:
        self.pk = pk
        self.messages = list(messages)
        self._written = [message_to_dict(message) for message in self.messages]

    async def on_state(self, context: AgentRunContext) -> None:
        if self.messages:
            context.restore_messages(valid_history(self.messages, keep_open_tail=context.resuming))
            if context.resuming:  # with the results ``resumption`` added, if any
                await self._write()

    async def on_event(self, context: AgentRunContext, event: ExtensionEvent) -> None:
        if _cancelling():
            # Stopped (or handed over): what the cancellation appends (its cancelled
            # calls) is not the sub-run's checkpoint; a continuation goes on from before.
            return
        if isinstance(event, MessageAppendedEvent) and event.message.include_in_messages:
            self.messages.append(event.message)
            self._written.append(message_to_dict(event.message))
            await self._write()

    async def _write(self) -> None:
        await shielded(database_sync_to_async(stored.write_messages)(self.pk, list(self._written)))


class SubRunCalls(AgentExtension):
    """A sub-run's tool calls that a crash may cut off, as ``AtomicToolsExtension`` does
    for the chat's run: an ``atomic`` tool commits with its result in the ``SubRun`` row;
    a call that must not run twice is named on the row before it starts."""

    #: The innermost layer around a tool call (an approval decides before it).
    priority = 1000

    def __init__(self, pk: int) -> None:
        self.pk = pk

    async def on_tool_call(self, context: AgentRunContext, call: Any, call_next: Any) -> Any:
        tool = context.tools.get(call.name)
        if getattr(tool, "idempotent", False):
            return await call_next()
        if not isinstance(tool, AgentTool) or not tool.atomic:
            await shielded(database_sync_to_async(stored.mark_started)(self.pk, call.id))
            return await call_next()
        arguments = tool.validate_arguments(call.arguments)
        return await database_sync_to_async(stored.run_atomically)(tool, arguments, self.pk, call)


def _cancelling() -> bool:
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


#: Builds a sub-run's agent: ``(assistant, session id, history, calls) -> Agent``
#: (``agent_app.agents.factory.build_sub_agent``).
Builder = Callable[["Assistant", str, AgentExtension, AgentExtension], Awaitable["Agent"]]


async def run_sub_run(owner: str, delegate: Assistant, request: str, build: Builder) -> str:
    """Run ``delegate`` as a sub-run of the calling tool's request (a request of the
    assistant ``owner``); return its answer.

    Called by an ``ask_<id>`` tool. A sub-run stored for this call goes on from where it
    stopped (a continuation after a restart), or gives its stored answer.
    """
    context = current_run_context()
    call_id = current_tool_call_id()
    if call_id is None:  # pragma: no cover - a tool always runs for a call
        raise RuntimeError("A delegate runs only as a tool call")
    outer = _outer_chain(owner, delegate, context.request_id)
    request_id = outer[0].request_id
    opened = await database_sync_to_async(stored.open_sub_run)(
        context.session_id,
        call_id,
        root_tool_call_id=outer[1].call_id if len(outer) > 1 else call_id,
        assistant=delegate.id,
        request_id=request_id,
        depth=len(outer),
    )
    if opened.answer is not None:
        return opened.answer  # answered before: never run twice
    token = CHAIN.set((*outer, Link(delegate.id, call_id, request_id)))
    try:
        answer = await _stream(context, delegate, request, opened, call_id, build)
    except Exception:
        await shielded(database_sync_to_async(stored.finish)(opened.pk, SubRunStatus.FAILED))
        raise
    finally:
        CHAIN.reset(token)
    await shielded(database_sync_to_async(stored.finish)(opened.pk, SubRunStatus.COMPLETED, answer))
    return answer


def _outer_chain(owner: str, delegate: Assistant, request_id: str) -> tuple[Link, ...]:
    """The chain the sub-run joins; ``ValueError`` for a cycle or a chain too deep."""
    outer = CHAIN.get() or (Link(owner, None, request_id),)
    if delegate.id in {link.assistant for link in outer}:
        names = " → ".join(link.assistant for link in outer)
        raise ValueError(f"{delegate.id} is already working on this request ({names})")
    if len(outer) > int(conf.ZETT_MAX_DELEGATION_DEPTH):
        raise ValueError(
            f"Cannot ask {delegate.id}: delegation may go {conf.ZETT_MAX_DELEGATION_DEPTH} "
            "levels deep"
        )
    return outer


async def _stream(
    context: AgentRunContext,
    delegate: Assistant,
    request: str,
    opened: stored.Opened,
    call_id: str,
    build: Builder,
) -> str:
    """Run the sub-run's request (or its continuation), relaying its events; its answer."""
    session_id = context.session_id
    messages, replies, deadlines = opened.messages, [], {}
    if messages:
        messages, replies, deadlines = await database_sync_to_async(stored.resumption)(
            session_id, messages, opened.started_call
        )
    agent = await build(
        delegate, session_id, SubRunHistory(opened.pk, messages), SubRunCalls(opened.pk)
    )
    config = AgentRunConfig(
        session_id=session_id, request_id=f"{CHAIN.get()[0].request_id}.{uuid.uuid4().hex}"
    )
    if messages:
        events: Any = agent.resume_stream(
            config=config,
            replies=[ExternalEvent(name, payload) for name, payload in replies],
            deadlines=deadlines,
        )
    else:
        events = agent.stream(request, config=config)
    live = _LIVE.setdefault(session_id, [])
    entry = (agent, config)
    live.append(entry)
    answer = ""
    try:
        async with aclosing(events) as stream:
            async for event in stream:
                if event.type is AgentEventType.RUN_COMPLETED:
                    message = event.message
                    answer = content_text(message.content) if message is not None else ""
                    continue
                await context.relay(event, agent=delegate.id, parent_tool_call_id=call_id)
    finally:
        live.remove(entry)
        if not live:
            _LIVE.pop(session_id, None)
    return answer
