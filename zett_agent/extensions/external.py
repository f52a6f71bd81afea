"""External events: replies from outside the request (a UI, a webhook) that a tool awaits.

How a wait works, and every way it ends:

1. ``_wait_for_external_event(context, correlation_id)`` registers a pending Future under
   ``(session_id, correlation_id)`` on entry, before the body emits the outbound event, so
   even a reply that arrives while the event is being handled finds its wait. The wait gets
   its deadline at the same moment (see below); ``_wait_expires_at`` reads it in the body.
2. ``accept(config, event)`` (any thread) claims the wait under a lock; a claimed, expired,
   cancelled or unknown wait rejects further replies. The Future is completed on its own
   loop: directly when called on that loop's thread, through ``call_soon_threadsafe``
   otherwise. A claim made under the lock before the deadline's timer runs wins: the
   timer then leaves the wait alone, so an accepted reply is never lost.
3. Leaving the ``async with`` body awaits the Future and stages the reply for the current
   request; the tool takes it once with ``_take_external_event``.
4. Cancellation of the waiting task, or ``RunCancelledEvent``, cancels the wait at once;
   ``on_error`` fails it with the request's original error. The pending entry is removed in
   ``finally`` on every exit, and staged replies are dropped when the request ends.

Deadlines. A wait's deadline is, in this order: the one a resumed request supplied for its
correlation id (``Agent.resume_stream(deadlines=...)``), else ``now + timeout`` when the
extension has a ``timeout``, else none (it waits until answered or cancelled). The timer is
one ``loop.call_at`` handle (the loop's own timer machinery: no task), cancelled in
``finally``. When it fires, the wait is marked expired under the same lock ``accept`` uses
(so a later reply is rejected: ``emit_external_event`` answers ``[]``), the body's exit
returns normally, and ``_take_external_event`` raises ``ExternalEventExpired``: a tool that
takes its reply in its body therefore fails with "Nobody answered …" and the request goes
on; a subclass that takes the reply in ``before_tool`` catches it. ``accept`` also refuses
a reply once the deadline has passed even if the timer has not run yet, so a deadline
already in the past expires at once.

Resumed requests (``Agent.resume_stream``). A reply that arrived while nobody was waiting
is handed over right after registration through the normal ``accept(config, reply)``, so
the body still runs (the outbound event is emitted as for a live answer) and leaving the
body does not wait; such a reply is accepted even past the deadline (the caller vouched
for it).

One staged reply per request: this base supports sequential tools, not concurrent
external-response tools in the same request.
"""

from __future__ import annotations

import asyncio
import math
import numbers
import threading
from collections.abc import AsyncGenerator, Collection
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from zett_agent.events import ExternalEvent
from zett_agent.extensions.base import AgentExtension
from zett_agent.extensions.events import PhaseTransitionEvent, RunCancelledEvent

if TYPE_CHECKING:
    from zett_agent._context import AgentRunConfig, AgentRunContext
    from zett_agent.extensions.events import ExtensionEvent

__all__ = ["ExternalEvent", "ExternalEventExpired", "ExternalEventExtension"]


class ExternalEventExpired(TimeoutError):
    """Nobody answered a wait before its deadline.

    Raised by ``_take_external_event`` for the wait that expired; ``correlation_id`` names
    the wait and ``expires_at`` is its deadline (an aware UTC datetime).
    """

    def __init__(self, message: str, *, correlation_id: str, expires_at: datetime) -> None:
        super().__init__(message)
        self.correlation_id = correlation_id
        self.expires_at = expires_at


def utc_iso(moment: datetime) -> str:
    """``moment`` as ISO 8601 UTC with milliseconds, the form outbound payloads use."""
    return moment.astimezone(UTC).isoformat(timespec="milliseconds")


def check_timeout(timeout: object) -> float | None:
    """Validate a wait timeout in seconds; return it, or None for "no deadline" (None, 0)."""
    message = f"timeout must be a number of seconds >= 0, got {timeout!r}"
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, numbers.Real):
        raise TypeError(message)
    seconds = float(timeout)
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(message)
    return seconds or None


#: The result a wait's Future gets when its deadline passes first.
_EXPIRED: Any = object()


class _PendingExternalEvent:
    """One registered wait: its Future, owning loop, deadline and who may answer it."""

    __slots__ = (
        "claimed",
        "context",
        "correlation_id",
        "deadline",
        "expired",
        "expires_at",
        "future",
        "handing_over",
        "loop",
        "names",
        "request_id",
        "timeout",
    )

    def __init__(
        self,
        context: AgentRunContext,
        correlation_id: str,
        names: frozenset[str],
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        self.context = context
        self.correlation_id = correlation_id
        self.request_id = context.request_id
        self.names = names
        self.loop = loop
        self.future: asyncio.Future[Any] = loop.create_future()
        self.claimed = False
        self.expired = False
        #: True while a resumed request hands over a reply that arrived meanwhile.
        self.handing_over = False
        #: Aware UTC deadline, and the same instant on the loop's clock (``loop.time()``).
        self.expires_at: datetime | None = None
        self.deadline: float | None = None
        #: The extension timeout the deadline came from (None for a supplied deadline).
        self.timeout: float | None = None

    def expiry(self) -> ExternalEventExpired:
        assert self.expires_at is not None
        stamp = self.expires_at.isoformat(timespec="seconds").replace("+00:00", "Z")
        if self.timeout is not None:
            seconds = int(self.timeout) if self.timeout.is_integer() else self.timeout
            text = f"Nobody answered within {seconds} seconds (deadline {stamp})"
        else:
            text = f"Nobody answered in time (deadline {stamp})"
        return ExternalEventExpired(
            text, correlation_id=self.correlation_id, expires_at=self.expires_at
        )


def _resolve(future: asyncio.Future[Any], result: Any) -> None:
    if not future.done():
        future.set_result(result)


class ExternalEventExtension(AgentExtension):
    """Base class for extensions that suspend until an external response arrives.

    The subclass owns the tool, the outbound UI event and business validation; this base
    owns pending Futures, routing, duplicate rejection, deadlines, thread-safe wake-up and
    cleanup. ``timeout`` (seconds; None or 0 = none) gives every wait a deadline.
    """

    def __init__(
        self,
        *,
        response_event_name: str | Collection[str],
        correlation_field: str,
        timeout: float | None = None,
    ) -> None:
        if isinstance(response_event_name, str):
            names = frozenset({response_event_name})
        else:
            names = frozenset(response_event_name)
        if not names or any(not isinstance(n, str) or not n.strip() for n in names):
            raise ValueError(
                "response_event_name cannot be empty: give a non-empty name or names, "
                f"got {response_event_name!r}"
            )
        if not isinstance(correlation_field, str) or not correlation_field.strip():
            raise ValueError(f"correlation_field cannot be empty, got {correlation_field!r}")
        self._response_event_names = names
        self._correlation_field = correlation_field
        self._timeout = check_timeout(timeout)
        self._external_lock = threading.Lock()
        self._pending_external: dict[tuple[str, str], _PendingExternalEvent] = {}
        self._staged_external: dict[AgentRunContext, ExternalEvent | ExternalEventExpired] = {}

    @property
    def response_event_names(self) -> frozenset[str]:
        """The inbound event names this extension accepts."""
        return self._response_event_names

    @property
    def correlation_field(self) -> str:
        """The payload key whose value identifies the awaited operation."""
        return self._correlation_field

    @property
    def timeout(self) -> float | None:
        """Seconds each wait may last, or None when waits have no deadline (None or 0)."""
        return self._timeout

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
        loop = asyncio.get_running_loop()
        pending = _PendingExternalEvent(context, correlation_id, names, loop)
        resumption = context._resumption
        supplied = resumption.deadline(correlation_id) if resumption is not None else None
        if supplied is not None:
            pending.expires_at = supplied
        elif self._timeout is not None:
            pending.timeout = self._timeout
            pending.expires_at = datetime.now(UTC) + timedelta(seconds=self._timeout)
        with self._external_lock:
            if key in self._pending_external:
                raise RuntimeError(
                    f"An external event for session {key[0]!r} with correlation id "
                    f"{correlation_id!r} is already pending"
                )
            self._pending_external[key] = pending
        timer: asyncio.TimerHandle | None = None
        try:
            if pending.expires_at is not None:
                remaining = (pending.expires_at - datetime.now(UTC)).total_seconds()
                pending.deadline = loop.time() + remaining
                timer = loop.call_at(pending.deadline, self._expire, pending)
            if resumption is not None:
                known = resumption.take_reply(self, correlation_id)
                if known is not None:
                    pending.handing_over = True
                    try:
                        self.accept(context.config, known)
                    finally:
                        pending.handing_over = False
            yield
            result = await pending.future
            self._staged_external[context] = pending.expiry() if result is _EXPIRED else result
        finally:
            if timer is not None:
                timer.cancel()
            with self._external_lock:
                if self._pending_external.get(key) is pending:
                    del self._pending_external[key]
            future = pending.future
            if not future.done():
                future.cancel()
            elif not future.cancelled():
                future.exception()  # mark retrieved: the waiter may have left before it

    def _wait_expires_at(self, context: AgentRunContext, correlation_id: str) -> datetime | None:
        """The deadline (aware UTC) of this request's wait for ``correlation_id``, or None.

        Call it inside the ``_wait_for_external_event`` body, e.g. to put the deadline in
        the outbound event's payload.
        """
        with self._external_lock:
            pending = self._pending_external.get((context.session_id, correlation_id))
        if pending is None or pending.context is not context:
            raise RuntimeError(
                f"No wait for correlation id {correlation_id!r} is registered by this request: "
                "call _wait_expires_at inside the _wait_for_external_event body"
            )
        return pending.expires_at

    def _take_external_event(self, context: AgentRunContext) -> ExternalEvent:
        """Pop this invocation's staged response exactly once inside its tool.

        Raises ``ExternalEventExpired`` when the wait's deadline passed unanswered.
        """
        try:
            staged = self._staged_external.pop(context)
        except KeyError:
            raise RuntimeError(
                "_take_external_event was called without an accepted external response: "
                "call it once, after _wait_for_external_event has finished"
            ) from None
        if isinstance(staged, ExternalEventExpired):
            raise staged
        return staged

    def _expire(self, pending: _PendingExternalEvent) -> None:
        """Timer callback on the wait's loop: expire the wait unless a reply claimed it."""
        with self._external_lock:
            if pending.claimed or pending.future.done():
                return
            pending.expired = True
        _resolve(pending.future, _EXPIRED)

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
            if pending is None or pending.claimed or pending.expired or pending.future.done():
                return False
            if config.request_id is not None and config.request_id != pending.request_id:
                return False
            if event.name not in pending.names:
                return False
            if (
                pending.deadline is not None
                and not pending.handing_over
                and pending.loop.time() >= pending.deadline
            ):
                return False  # past the deadline: the timer is about to expire the wait
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
