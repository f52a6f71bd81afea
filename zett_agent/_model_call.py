"""One primary model call: stream it through the middleware onion and mirror it as events.

The stream is validated as it is read (docs/runtime.md, Events): deltas, then exactly one
``completed``; nothing after it; server tool calls started before their input or result, with
matching ids, and all closed before ``completed``. Text and reasoning deltas open a segment
(``CONTENT_STARTED`` / ``REASONING_STARTED``) before their first non-empty delta, and the
segment is closed when the other kind starts or the response arrives. The stream is always
closed (``aclose``), so cancellation and early errors reach the provider.

With ``agent.steering_interrupts_stream = True`` a steering message may end the call early
(``zett_agent._interrupt``): the open segment is closed and the partial response returned.
"""

from __future__ import annotations

import asyncio
import time
import types
from collections.abc import AsyncIterator, Awaitable, Callable, Generator
from datetime import UTC, datetime
from types import AsyncGeneratorType
from typing import TYPE_CHECKING, Any, Protocol

from zett_agent._driver import REJOIN, Shortcut, emission
from zett_agent._interrupt import StreamWatch
from zett_agent._members import E, P
from zett_agent.events import AgentEvent, AgentEventType, streamed_event
from zett_agent.exceptions import AgentProtocolError
from zett_agent.extensions.events import MessageTiming, _measured
from zett_agent.model import ModelEvent, ModelEventType, ModelRequest, ModelResponse
from zett_agent.phases import AgentPhase

if TYPE_CHECKING:
    from zett_agent._context import AgentRunContext
    from zett_agent._driver import Driver
    from zett_agent._hooks import HookTable
    from zett_agent._inbox import RequestInbox
    from zett_agent.extensions.base import AgentExtension

__all__ = ["call_model"]


class CallingRequest(Protocol):
    """What a model call needs of its request (``zett_agent._request.Request``, which
    calls it: the protocol keeps this helper below its caller)."""

    context: AgentRunContext
    hooks: HookTable
    inbox: RequestInbox
    driver: Driver | None
    #: ``agent.steering_interrupts_stream``: a steer may end the call early.
    steering_interrupts_stream: bool

    def emit(self, event: AgentEvent) -> Awaitable[None]: ...

    def move(self, target: AgentPhase) -> Awaitable[tuple[datetime, int] | None]: ...


_TEXT = ModelEventType.TEXT
_REASONING = ModelEventType.REASONING
_TOOL_CALL = ModelEventType.TOOL_CALL
_COMPLETED = ModelEventType.COMPLETED
_CONTENT_STARTED, _REASONING_STARTED = E.CONTENT_STARTED, E.REASONING_STARTED
_TEXT_DELTA, _REASONING_DELTA, _TOOL_CALL_DELTA = E.TEXT_DELTA, E.REASONING_DELTA, E.TOOL_CALL_DELTA
_new = object.__new__


def _open_model_stream(run: CallingRequest, request: ModelRequest) -> AsyncIterator[ModelEvent]:
    context = run.context
    call: Callable[[ModelRequest], AsyncIterator[ModelEvent]] = context.model.stream
    for extension in reversed(run.hooks.on_model_request):
        call = _model_layer(extension, context, call)
    return call(request)


async def call_model(
    run: CallingRequest, request: ModelRequest
) -> tuple[ModelResponse, MessageTiming | None]:
    """Stream one model call, mirroring its deltas as events; return its response and timing.

    The timing spans GENERATING and back to READY; a segment's span runs from its opening
    event to its closing one (clocks are read only there, never per delta).
    """
    session_id = run.context.config.session_id
    # None: nobody listens, nothing is timed (a false move is not awaited: it is done)
    started = await moved if (moved := run.move(P.GENERATING)) else None
    # segment kind -> [start, start_ns, end, end_ns]; None when nothing is timed
    spans: dict[AgentEventType, list[Any]] | None = None if started is None else {}
    # Every event of the stream is built stamped with the phase and handed over by
    # ``emission`` right here: what ``run.emit`` does, without a call, once per event.
    state = run.context.state
    await emission(streamed_event(E.MODEL_STARTED, session_id, "", None, state.phase))
    response: ModelResponse | None = None
    segment: AgentEventType | None = None  # REASONING_STARTED or CONTENT_STARTED
    # Made at the first server tool event: most calls have none.
    open_server_calls: set[str] | None = None
    seen_server_calls: set[str] = _NO_CALLS
    stream = _open_model_stream(run, request)
    # Armed only once nothing can fail before the ``finally`` that disarms it.
    watch = StreamWatch(run.inbox, run.driver) if run.steering_interrupts_stream else None
    # Further deltas of an open segment go through ``_delta_shortcut``, stepped by the driver.
    shortcut = watch is None and run.driver is not None
    steering_waits = run.inbox.has_steering
    cut = False
    read = _READ
    item: Any = read  # an item handed back by the shortcut is taken before reading on
    try:
        items = aiter(stream)
        next_item = items.__anext__
        while True:
            if item is read:
                try:
                    item = await next_item()
                except StopAsyncIteration:
                    break
            if item.__class__ is not ModelEvent and not isinstance(item, ModelEvent):
                raise AgentProtocolError(
                    f"A model stream must yield ModelEvent objects, got {type(item).__name__}"
                )
            kind = item.type
            if kind is _TEXT:
                delta = item.delta
                if delta and segment is not _CONTENT_STARTED:
                    if segment is _REASONING_STARTED:
                        if spans is not None:
                            _close_span(spans, _REASONING_STARTED)
                        await emission(
                            streamed_event(E.REASONING_COMPLETED, session_id, "", None, state.phase)
                        )
                    segment = _CONTENT_STARTED
                    if spans is not None:
                        _open_span(spans, _CONTENT_STARTED)
                    await emission(
                        streamed_event(_CONTENT_STARTED, session_id, "", None, state.phase)
                    )
                event = _new(AgentEvent)
                event.type = _TEXT_DELTA
                event.session_id = session_id
                event.phase = state.phase
                event.delta = delta
                if shortcut and segment is _CONTENT_STARTED:
                    item = await _shortcut(items, event, _TEXT, _TEXT_DELTA, session_id, state)
                    if item is _ENDED:
                        break
                    continue
                await emission(event)
                item = read
                if watch is not None:
                    watch.text.append(delta)
                    if watch.armed and steering_waits():
                        cut = True
                        break
            elif kind is _REASONING:
                delta = item.delta
                if delta and segment is not _REASONING_STARTED:
                    if segment is _CONTENT_STARTED:
                        if spans is not None:
                            _close_span(spans, _CONTENT_STARTED)
                        await emission(
                            streamed_event(E.CONTENT_COMPLETED, session_id, "", None, state.phase)
                        )
                    segment = _REASONING_STARTED
                    if spans is not None:
                        _open_span(spans, _REASONING_STARTED)
                    await emission(
                        streamed_event(_REASONING_STARTED, session_id, "", None, state.phase)
                    )
                event = _new(AgentEvent)
                event.type = _REASONING_DELTA
                event.session_id = session_id
                event.phase = state.phase
                event.delta = delta
                if shortcut and segment is _REASONING_STARTED:
                    item = await _shortcut(
                        items, event, _REASONING, _REASONING_DELTA, session_id, state
                    )
                    if item is _ENDED:
                        break
                    continue
                await emission(event)
                item = read
                if watch is not None:
                    watch.reasoning.append(delta)
                    if watch.armed and steering_waits():
                        cut = True
                        break
            elif kind is _TOOL_CALL:
                if watch is not None:
                    watch.disarm()
                await emission(
                    streamed_event(
                        _TOOL_CALL_DELTA, session_id, "", item.tool_call_delta, state.phase
                    )
                )
                item = read
            elif kind is _COMPLETED:
                if watch is not None:
                    watch.disarm()
                if not isinstance(item.response, ModelResponse):
                    raise AgentProtocolError("A completed model event needs a ModelResponse")
                if open_server_calls:
                    raise AgentProtocolError(
                        "Model stream completed before server tools completed: "
                        f"{sorted(open_server_calls)} still open"
                    )
                response = item.response
                if segment is not None:
                    closing = (
                        E.CONTENT_COMPLETED
                        if segment is _CONTENT_STARTED
                        else E.REASONING_COMPLETED
                    )
                    if spans is not None:
                        _close_span(spans, segment)
                    segment = None
                    await emission(streamed_event(closing, session_id, "", None, state.phase))
                break
            else:
                if watch is not None:
                    watch.disarm()
                if open_server_calls is None:
                    open_server_calls, seen_server_calls = set(), set()
                await _server_tool_event(run, item, open_server_calls, seen_server_calls)
                item = read
        if response is not None:  # the stream must end with its completed event
            async for item in items:
                raise AgentProtocolError(
                    f"Model stream yielded {_kind(item)} after its completed event"
                )
    except asyncio.CancelledError:
        if watch is None or not watch.cut_short():
            raise
        cut = True
    finally:
        if watch is not None:
            watch.disarm()
        # An async generator that ran to its end (as a complete stream does) has nothing
        # left to close: its ``aclose`` would do nothing but cost a call and an awaitable.
        if stream.__class__ is not AsyncGeneratorType or stream.ag_frame is not None:
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                await aclose()
    if cut and response is None:
        assert watch is not None
        response = watch.response()
        if segment is not None:
            if spans is not None:
                _close_span(spans, segment)
            closing = E.CONTENT_COMPLETED if segment is _CONTENT_STARTED else E.REASONING_COMPLETED
            await run.emit(AgentEvent(closing, session_id))
    if response is None:
        raise AgentProtocolError("Model stream ended without a response")
    completed = await moved if (moved := run.move(P.READY)) else None
    if started is None or completed is None or spans is None:
        return response, None
    timing = _measured(
        started[0],
        completed[0],
        max(completed[1] - started[1], 0),
        _span(spans.get(E.REASONING_STARTED)),
        _span(spans.get(E.CONTENT_STARTED)),
    )
    return response, timing


def _shortcut(
    items: AsyncIterator[ModelEvent],
    event: AgentEvent,
    kind: ModelEventType,
    event_type: AgentEventType,
    session_id: str,
    state: Any,
) -> Generator[Any, Any, Any]:
    """The ``_delta_shortcut`` that hands over ``event`` and the segment's further deltas."""
    handed = Shortcut(event)
    next_item = items.__anext__
    read = next_item if items.__class__ is AsyncGeneratorType else _awaiting(next_item)
    handed.coro = _delta_shortcut(read, handed, kind, event_type, session_id, state)
    return handed.coro


#: ``call_model``'s server tool calls before the first server tool event: none.
_NO_CALLS: Any = frozenset()
#: ``call_model``'s next item is to be read from the stream.
_READ: Any = object()
#: The stream ended while ``_delta_shortcut`` read it.
_ENDED: Any = object()


@types.coroutine
def _delta_shortcut(
    next_item: Callable[[], Any],
    shortcut: Shortcut,
    kind: ModelEventType,
    event_type: AgentEventType,
    session_id: str,
    state: Any,
) -> Generator[Any, Any, Any]:
    """Hand over ``shortcut.event``, then every further delta of the open segment's ``kind``
    (text or reasoning) as an ``event_type`` event; return the first other item (``_ENDED``
    if the stream ends), for ``call_model`` to handle.

    The driver sends into this generator directly (``zett_agent._driver``, ``Shortcut``),
    so a delta costs this frame alone, and it yields each event bare. It must not return or
    raise while the driver holds it: whatever happens, it yields ``REJOIN`` first and
    finishes when the request resumes it.
    """
    new, event_class, model_event = object.__new__, AgentEvent, ModelEvent
    item: Any = _ENDED
    error: BaseException | None = None
    try:
        yield shortcut
        while True:
            item = yield from next_item()
            if item.__class__ is not model_event or item.type is not kind:
                break
            event = new(event_class)
            event.type = event_type
            event.session_id = session_id
            event.phase = state.phase
            event.delta = item.delta
            yield event
    except StopAsyncIteration:
        item = _ENDED
    except GeneratorExit:
        raise
    except BaseException as exc:
        error = exc
    yield REJOIN
    if error is not None:
        try:
            raise error
        finally:
            error = None
    return item


def _awaiting(next_item: Callable[[], Awaitable[ModelEvent]]) -> Callable[[], Any]:
    """``next_item`` as ``yield from`` takes it: any awaitable's iterator (an async
    generator's own ``__anext__`` result is one already)."""

    def read() -> Any:
        return next_item().__await__()

    return read


def _open_span(spans: dict[AgentEventType, list[Any]], kind: AgentEventType) -> None:
    """A segment opened. A segment that opens again (reasoning, text, reasoning) spans
    from its first opening to its last closing."""
    span = spans.get(kind)
    if span is None:
        spans[kind] = [datetime.now(UTC), time.monotonic_ns(), None, None]


def _close_span(spans: dict[AgentEventType, list[Any]], kind: AgentEventType) -> None:
    span = spans[kind]
    span[2], span[3] = datetime.now(UTC), time.monotonic_ns()


def _span(span: list[Any] | None) -> tuple[datetime, datetime, int] | None:
    if span is None or span[2] is None:
        return None
    return span[0], span[2], max(span[3] - span[1], 0)


async def _server_tool_event(
    run: CallingRequest, item: ModelEvent, open_calls: set[str], seen_calls: set[str]
) -> None:
    session_id = run.context.session_id
    kind = item.type
    if kind is ModelEventType.SERVER_TOOL_STARTED:
        call = item.server_tool_call
        if call is None:
            raise AgentProtocolError("server_tool_started needs a ServerToolCall")
        if call.id in seen_calls:
            raise AgentProtocolError(f"Server tool call {call.id!r} started more than once")
        seen_calls.add(call.id)
        open_calls.add(call.id)
        await run.emit(AgentEvent(E.SERVER_TOOL_STARTED, session_id, server_tool_call=call))
    elif kind is ModelEventType.SERVER_TOOL_INPUT:
        delta = item.server_tool_input_delta
        if delta is None or delta.call_id not in open_calls:
            raise AgentProtocolError(
                "Server tool input requires its matching start: no open call "
                f"{getattr(delta, 'call_id', None)!r}"
            )
        await run.emit(
            AgentEvent(E.SERVER_TOOL_INPUT_DELTA, session_id, server_tool_input_delta=delta)
        )
    elif kind in (ModelEventType.SERVER_TOOL_COMPLETED, ModelEventType.SERVER_TOOL_FAILED):
        result = item.server_tool_result
        if result is None or result.call_id not in open_calls:
            raise AgentProtocolError(
                "Server tool result requires its matching start: no open call "
                f"{getattr(result, 'call_id', None)!r}"
            )
        open_calls.discard(result.call_id)
        event_type = (
            E.SERVER_TOOL_COMPLETED
            if kind is ModelEventType.SERVER_TOOL_COMPLETED
            else E.SERVER_TOOL_FAILED
        )
        await run.emit(AgentEvent(event_type, session_id, server_tool_result=result))
    else:
        raise AgentProtocolError(f"Unknown model event type {kind!r}")


def _model_layer(
    extension: AgentExtension,
    context: AgentRunContext,
    call_next: Callable[[ModelRequest], AsyncIterator[ModelEvent]],
) -> Callable[[ModelRequest], AsyncIterator[ModelEvent]]:
    def layer(request: ModelRequest) -> AsyncIterator[ModelEvent]:
        return extension.on_model_request(context, request, call_next)

    return layer


def _kind(item: Any) -> str:
    kind = getattr(item, "type", None)
    return getattr(kind, "value", repr(item))
