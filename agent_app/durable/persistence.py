"""``OrmPersistenceExtension``: a session's conversation lives in the database, written ahead.

Restoring: ``on_state`` puts the session's stored history (``agent_app.durable.store``) before the
request's own messages, at the cost of one copy of the references however long the chat;
a run the app starts hands over the history ``begin_run`` read in its own round trip
(``RunSeams.restored_history``), so restoring costs no database work of its own.
A request that resumes a paused run (``context.resuming``) gets its last, still open tool
batch too, so the runtime can run the open calls.

Writing, as each message is complete (never all at the end of a request):

- the user's message: already stored by ``agent_app.durable.runs.begin_run`` before the agent was
  built, when the request's ``RunSeams`` say so (``input_stored``); otherwise it is written
  when the runtime appends it, which is still before the model is called;
- each answer of the model as soon as its response is known (``after_model``, which the
  runtime calls right after appending it), with its token usage and, when the model stopped
  abnormally, the stop reason; anything that happens before that (another message, the
  request's end, a cancellation) writes it first. A caller that stores the run's end itself
  may take over a final answer (no tool calls): it hands over a list (``RunSeams.at_end``,
  as ``agent_app.sessions.run`` does), ``after_model`` puts the answer there instead of writing it,
  and the caller stores it in the transaction that records the run's end (one write
  instead of two), holding back the answer's ``model_completed`` frame until then.
  Anything else that comes first (another message, a cancellation, a failure) still writes
  it here first;
- each tool result when it is appended (cancelled and skipped calls included);
- a steering message when it is appended (marked as steering);
- on cancellation, the answer that was streaming, as far as it got, marked partial: the user
  saw that text, and the model is told about it later like about any answer. A caller that
  shows the text deltas itself hands over the list it collects them in (``RunSeams.streamed``,
  as ``agent_app.sessions.run`` does), so the model's stream is not wrapped for every delta;
  otherwise ``on_model_request`` watches the stream.

Cancellation can never drop a write that was due: each write is shielded and finished
before the ``CancelledError`` goes on (``shielded``), and the runtime awaits this hook before
it lets the cancellation reach its caller.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from channels.db import database_sync_to_async

from agent_app.durable.store import RowMeta, append_rows, restore_history, update_tool_result
from zett_agent.extensions.base import AgentExtension
from zett_agent.extensions.events import MessageAppendedEvent, RunCancelledEvent
from zett_agent.messages import AssistantMessage, SystemMessage, ToolMessage, UserMessage
from zett_agent.model import ModelEventType
from zett_agent.serialization import usage_to_dict

if TYPE_CHECKING:
    from zett_agent.agent import AgentRunContext
    from zett_agent.extensions.events import ExtensionEvent
    from zett_agent.model import ModelEvent, ModelRequest, ModelResponse

__all__ = [
    "RUN_SEAMS",
    "STORED_ATTRIBUTE",
    "OrmPersistenceExtension",
    "RunSeams",
    "shielded",
    "write_pending",
]

#: The one request-metadata key of this extension: its value is a ``RunSeams``.
RUN_SEAMS = "zett.run_seams"
#: A tool result's attribute: its row was stored with the tool's own writes, in one
#: transaction (``agent_app.durable.atomic``): not written again here.
STORED_ATTRIBUTE = "stored_with_effects"


@dataclass(slots=True)
class RunSeams:
    """What a caller that runs the agent shares with this extension, for one request.

    Passed in the request's metadata (``metadata()``); each field is optional.
    """

    #: The input message is stored already (``begin_run``): not written again.
    input_stored: bool = False
    #: The history as the run's write-ahead step read it (``begin_run``), user message
    #: last; restored without another database round trip.
    restored_history: list[Any] | None = None
    #: A list the caller appends every text delta to as it shows it; read for a cancelled
    #: answer's partial text (the extension then leaves the stream alone).
    streamed: list[str] | None = None
    #: A list the caller stores with the run's end; a final answer goes there (with its
    #: row's metadata) instead of being written by ``after_model``.
    at_end: list[tuple[AssistantMessage, RowMeta]] | None = None
    #: Set when the run is handed over to another worker: from then on nothing is written
    #: (not the cancelled calls, not the partial answer); the run goes on elsewhere from
    #: what was stored before (``agent_app.durable.continuation``).
    frozen: bool = False

    def metadata(self) -> dict[str, Any]:
        """The request metadata that hands these seams over."""
        return {RUN_SEAMS: self}


T = TypeVar("T")

logger = logging.getLogger(__name__)

#: Built once: a wrapper costs a few microseconds to make, and every message is written.
write_rows = database_sync_to_async(append_rows)


async def shielded(awaitable: Awaitable[T]) -> T:
    """Await ``awaitable`` to its end even if the caller is cancelled meanwhile.

    The write runs in a task of its own; a cancellation that arrives while it runs is held
    back until the write has finished, then re-raised (a write that failed meanwhile is
    logged). So a row that was due is written before the cancellation reaches whoever
    cancelled.
    """
    task = asyncio.ensure_future(awaitable)
    try:
        # Most writes end with no cancellation: ``shield`` awaits one for less than
        # ``asyncio.wait`` (~11 against ~12-19 µs; a plain run makes three of them).
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        if task.cancelled():
            raise  # the write itself was cancelled, not its caller
    while not task.done():
        try:
            await asyncio.wait([task])
        except asyncio.CancelledError:
            pass  # held back until the write has finished
    if not task.cancelled() and task.exception() is not None:
        logger.error("A write failed while its request was cancelled", exc_info=task.exception())
    raise asyncio.CancelledError


async def write_pending(session_id: str, request_id: str, pending: list[Any]) -> None:
    """Write now what a ``RunSeams.at_end`` list holds, and empty it (``shielded``)."""
    if pending:
        entries = pending[:]
        pending.clear()
        await shielded(write_rows(session_id, request_id, entries))


@dataclass
class _Request:
    """What one request has in flight."""

    input_stored: bool
    input_message: UserMessage | None
    #: Text streamed by the model call in progress (for a partial answer on cancellation).
    streamed: list[str] = field(default_factory=list)
    #: Whether ``on_model_request`` collects ``streamed`` (no caller does).
    watch_stream: bool = True
    #: A model call is under way: the next answer appended is its response's message.
    calling: bool = False
    #: That answer, appended and waiting for ``after_model`` (which knows its usage).
    answer: AssistantMessage | None = None
    #: The caller's ``RunSeams.at_end`` list, if it handed one over.
    at_end: list[tuple[AssistantMessage, RowMeta]] | None = None
    #: The caller's seams (``frozen``: write nothing more).
    seams: RunSeams | None = None

    @property
    def frozen(self) -> bool:
        return self.seams is not None and self.seams.frozen


class OrmPersistenceExtension(AgentExtension):
    """Restores a session's history from the ORM and stores every message once complete."""

    #: Restore before other extensions look at the context in their own ``on_state``.
    priority = 10

    def __init__(self) -> None:
        self._requests: dict[str, _Request] = {}

    async def on_state(self, context: AgentRunContext) -> None:
        seams = context.metadata.pop(RUN_SEAMS, None)
        if not isinstance(seams, RunSeams):
            seams = RunSeams()
        history = seams.restored_history
        if history is None:
            history = await database_sync_to_async(restore_history)(
                context.session_id, keep_open_tail=context.resuming
            )
        input_stored = seams.input_stored
        if input_stored and history and history[-1] == context.input_message:
            history.pop()  # stored ahead as the last row; the runtime appends it itself
        streamed = seams.streamed
        self._requests[context.request_id] = _Request(
            input_stored=input_stored,
            input_message=context.input_message,
            streamed=[] if streamed is None else streamed,
            watch_stream=streamed is None,
            at_end=seams.at_end,
            seams=seams,
        )
        # One copy of the references, no work per message: a turn's cost does not grow
        # with the length of the conversation (``agent_app.durable.store`` keeps it validated).
        context.restore_messages(history)

    def on_model_request(
        self,
        context: AgentRunContext,
        request: ModelRequest,
        call_next: Callable[[ModelRequest], AsyncIterator[ModelEvent]],
    ) -> AsyncIterator[ModelEvent]:
        state = self._requests.get(context.request_id)
        if state is None:
            return call_next(request)
        state.calling = True
        if not state.watch_stream:
            return call_next(request)  # the caller collects the text: no layer per delta
        return _watched(state.streamed, call_next(request))

    async def after_model(self, context: AgentRunContext, response: ModelResponse) -> None:
        state = self._requests.get(context.request_id)
        if state is None or state.answer is None or state.frozen:
            return
        answer, state.answer = state.answer, None
        meta = RowMeta()
        if response.message is answer:
            stop = response.stop
            meta = RowMeta(
                usage=usage_to_dict(response.usage),
                stop_reason=stop.reason.value if stop is not None else "",
            )
        if state.at_end is not None and not answer.tool_calls:
            state.at_end.append((answer, meta))  # stored with the run's end by the caller
            return
        await self._write(context, answer, meta)

    async def on_event(self, context: AgentRunContext, event: ExtensionEvent) -> None:
        state = self._requests.get(context.request_id)
        if state is None:
            return
        if state.frozen:
            if isinstance(event, RunCancelledEvent):
                self._requests.pop(context.request_id, None)
            return
        if isinstance(event, MessageAppendedEvent):
            message = event.message
            if not message.persist or isinstance(message, SystemMessage):
                return
            if message is state.input_message and state.input_stored:
                return
            meta = self._meta(state, message)
            if meta.steering and state.answer is None and state.at_end:
                # The answer a steer follows (or cut short) and the steer: one write, so a
                # worker that dies in between leaves both or neither, never an answer whose
                # steer is lost (and no run that looks finished while it goes on).
                entries = [*state.at_end, (message, meta)]
                state.at_end.clear()
                await shielded(write_rows(context.session_id, context.request_id, entries))
                return
            await self._flush(context, state)
            if isinstance(message, ToolMessage) and STORED_ATTRIBUTE in message.attributes:
                # Stored with the tool's own writes (``agent_app.durable.atomic``).
                await _refresh_stored(context.session_id, message)
                return
            if isinstance(message, AssistantMessage):
                state.streamed.clear()  # the answer landed: nothing of it is partial any more
                if state.calling:
                    state.calling = False
                    state.answer = message  # written by ``after_model``, with its usage
                    return
            await self._write(context, message, meta)
        elif isinstance(event, RunCancelledEvent):
            self._requests.pop(context.request_id, None)
            await self._flush(context, state)
            text = "".join(state.streamed)
            if text.strip():
                partial = AssistantMessage(text, attributes={"partial": True})
                await self._write(context, partial, RowMeta(partial=True))

    async def on_success(self, context: AgentRunContext, result: AssistantMessage) -> None:
        state = self._requests.pop(context.request_id, None)
        if state is not None and not state.frozen:
            await self._flush(context, state, ending=True)

    async def on_error(self, context: AgentRunContext, error: Exception) -> None:
        state = self._requests.pop(context.request_id, None)
        if state is not None and not state.frozen:
            await self._flush(context, state)

    async def _flush(
        self, context: AgentRunContext, state: _Request, *, ending: bool = False
    ) -> None:
        """Write an answer still waiting for ``after_model``, or one the caller was to store
        with the run's end, now that something else came first (unless the request just
        succeeded: ``ending``, the caller's end stores it)."""
        if state.answer is not None:
            answer, state.answer = state.answer, None
            await self._write(context, answer, RowMeta())
        if state.at_end and not ending:
            await write_pending(context.session_id, context.request_id, state.at_end)

    @staticmethod
    def _meta(state: _Request, message: Any) -> RowMeta:
        if isinstance(message, UserMessage) and message is not state.input_message:
            return RowMeta(steering=True)
        return RowMeta()

    async def _write(self, context: AgentRunContext, message: Any, meta: RowMeta) -> None:
        await shielded(write_rows(context.session_id, context.request_id, [(message, meta)]))


async def _refresh_stored(session_id: str, message: ToolMessage) -> None:
    """Bring an atomic tool's stored result up to date if a layer changed its attributes."""
    attributes = dict(message.attributes)
    stored = attributes.pop(STORED_ATTRIBUTE)
    if attributes != stored:
        final = ToolMessage(
            message.tool_call_id,
            message.name,
            message.content,
            success=message.success,
            attributes=attributes,
        )
        await shielded(database_sync_to_async(update_tool_result)(session_id, final))


async def _watched(
    streamed: list[str], stream: AsyncIterator[ModelEvent]
) -> AsyncIterator[ModelEvent]:
    """Pass a model stream through, keeping its text deltas in ``streamed``."""
    streamed.clear()
    async with aclosing(stream) as events:  # type: ignore[type-var]
        async for event in events:
            if event.type is ModelEventType.TEXT:
                streamed.append(event.delta)
            yield event
