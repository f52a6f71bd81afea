"""External events: replies from outside the request (a UI, a webhook) that a tool awaits.

How a wait works, and every way it ends:

1. ``_wait_for_external_event(context, correlation_id)`` registers a pending Future under
   ``(session_id, correlation_id)`` on entry, before the body emits the outbound event, so
   even a reply that arrives while the event is being handled finds its wait.
2. ``accept(config, event)`` (any thread) claims the wait under a lock; a claimed, cancelled
   or unknown wait rejects further replies. The Future is completed on its own loop:
   directly when called on that loop's thread, through ``call_soon_threadsafe`` otherwise.
3. Leaving the ``async with`` body awaits the Future and stages the reply for the current
   request; the tool takes it once with ``_take_external_event``.
4. Cancellation of the waiting task, or ``RunCancelledEvent``, cancels the wait; ``on_error``
   fails it with the request's original error. The pending entry is removed in ``finally``
   on every exit, and staged replies are dropped when the request ends.

One staged reply per request: this base supports sequential tools, not concurrent
external-response tools in the same request.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncGenerator, Collection
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from zett_agent.extensions.base import AgentExtension
from zett_agent.extensions.events import PhaseTransitionEvent, RunCancelledEvent

if TYPE_CHECKING:
    from zett_agent.agent import AgentRunConfig, AgentRunContext
    from zett_agent.extensions.events import ExtensionEvent

__all__ = ["ExternalEvent", "ExternalEventExtension"]


@dataclass(frozen=True, slots=True)
class ExternalEvent:
    """A named reply from outside; ``payload`` is never modified by the runtime."""

    name: str
    payload: dict[str, Any]

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise ValueError(f"ExternalEvent name cannot be empty, got {self.name!r}")
        if not isinstance(self.payload, dict):
            raise TypeError(
                f"ExternalEvent payload must be a dict, got {type(self.payload).__name__}"
            )
        for key in self.payload:
            if not isinstance(key, str):
                raise TypeError(f"ExternalEvent payload keys must be str, got {key!r}")


class _PendingExternalEvent:
    """One registered wait: its Future, owning loop and who may answer it."""

    __slots__ = ("claimed", "context", "future", "loop", "names", "request_id")

    def __init__(
        self,
        context: AgentRunContext,
        names: frozenset[str],
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        self.context = context
        self.request_id = context.request_id
        self.names = names
        self.loop = loop
        self.future: asyncio.Future[ExternalEvent] = loop.create_future()
        self.claimed = False


def _resolve(future: asyncio.Future[ExternalEvent], event: ExternalEvent) -> None:
    if not future.done():
        future.set_result(event)


class ExternalEventExtension(AgentExtension):
    """Base class for extensions that suspend until an external response arrives.

    The subclass owns the tool, the outbound UI event and business validation; this base
    owns pending Futures, routing, duplicate rejection, thread-safe wake-up and cleanup.
    """

    def __init__(
        self, *, response_event_name: str | Collection[str], correlation_field: str
    ) -> None:
        if isinstance(response_event_name, str):
            names = frozenset({response_event_name})
        else:
            names = frozenset(response_event_name)
        if not names or any(not isinstance(n, str) or not n.strip() for n in names):
            raise ValueError(
                "response_event_name must be a non-empty name or names, "
                f"got {response_event_name!r}"
            )
        if not isinstance(correlation_field, str) or not correlation_field.strip():
            raise ValueError(f"correlation_field cannot be empty, got {correlation_field!r}")
        self._response_event_names = names
        self._correlation_field = correlation_field
        self._external_lock = threading.Lock()
        self._pending_external: dict[tuple[str, str], _PendingExternalEvent] = {}
        self._staged_external: dict[AgentRunContext, ExternalEvent] = {}

    @property
    def response_event_names(self) -> frozenset[str]:
        """The inbound event names this extension accepts."""
        return self._response_event_names

    @property
    def correlation_field(self) -> str:
        """The payload key whose value identifies the awaited operation."""
        return self._correlation_field

    @asynccontextmanager
    async def _wait_for_external_event(
        self,
        context: AgentRunContext,
        correlation_id: str,
        *,
        response_event_name: str | None = None,
    ) -> AsyncGenerator[None]:
        """Register on entry; await and stage the response when the body exits."""
        if not isinstance(correlation_id, str) or not correlation_id.strip():
            raise ValueError(f"correlation_id cannot be empty, got {correlation_id!r}")
        if response_event_name is None:
            names = self._response_event_names
        elif response_event_name in self._response_event_names:
            names = frozenset({response_event_name})
        else:
            raise ValueError(
                f"response_event_name {response_event_name!r} is not one of "
                f"{sorted(self._response_event_names)}"
            )
        key = (context.session_id, correlation_id)
        pending = _PendingExternalEvent(context, names, asyncio.get_running_loop())
        with self._external_lock:
            if key in self._pending_external:
                raise RuntimeError(
                    f"Session {key[0]!r} is already waiting for an external event "
                    f"with correlation id {correlation_id!r}"
                )
            self._pending_external[key] = pending
        try:
            yield
            event = await pending.future
            self._staged_external[context] = event
        finally:
            with self._external_lock:
                if self._pending_external.get(key) is pending:
                    del self._pending_external[key]
            future = pending.future
            if not future.done():
                future.cancel()
            elif not future.cancelled():
                future.exception()  # mark retrieved: the waiter may have left before it

    def _take_external_event(self, context: AgentRunContext) -> ExternalEvent:
        """Pop this invocation's staged response exactly once inside its tool."""
        try:
            return self._staged_external.pop(context)
        except KeyError:
            raise RuntimeError(
                "No external response is staged for this request: call "
                "_take_external_event once, after _wait_for_external_event has finished"
            ) from None

    def accept(self, config: AgentRunConfig | None, event: ExternalEvent) -> bool:
        """Claim a matching response and wake its waiter on the Future's loop."""
        if event.name not in self._response_event_names:
            return False
        if config is None or config.session_id is None:
            return False
        correlation_id = event.payload.get(self._correlation_field)
        if not isinstance(correlation_id, str) or not correlation_id.strip():
            return False
        with self._external_lock:
            pending = self._pending_external.get((config.session_id, correlation_id))
            if pending is None or pending.claimed or pending.future.done():
                return False
            if config.request_id is not None and config.request_id != pending.request_id:
                return False
            if event.name not in pending.names:
                return False
            pending.claimed = True
        loop = pending.loop
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            _resolve(pending.future, event)
            return True
        try:
            loop.call_soon_threadsafe(_resolve, pending.future, event)
        except RuntimeError:  # the waiting loop is closed: nobody can receive it
            with self._external_lock:
                pending.claimed = False
            return False
        return True

    def _pending_of(self, context: AgentRunContext) -> list[_PendingExternalEvent]:
        with self._external_lock:
            return [p for p in self._pending_external.values() if p.context is context]

    async def on_event(self, context: AgentRunContext, event: ExtensionEvent) -> None:
        """Cancel active waits when their request enters CANCELLED."""
        if isinstance(event, RunCancelledEvent):
            for pending in self._pending_of(context):
                pending.future.cancel()
            self._staged_external.pop(context, None)
        elif isinstance(event, PhaseTransitionEvent) and event.current_phase.is_terminal:
            self._staged_external.pop(context, None)

    async def on_error(self, context: AgentRunContext, error: Exception) -> None:
        """Complete active waits with the request's original error."""
        for pending in self._pending_of(context):
            if not pending.future.done():
                pending.future.set_exception(error)
        self._staged_external.pop(context, None)
