"""How a request ends when it does not complete: cancelled or failed (mixed into
``zett_agent._request.Request``, whose docstring tells every ending), and the release
of its session, once, whatever the ending.

A cancelled request closes the tool calls left without a result, moves to CANCELLED and
publishes ``RunCancelledEvent``; a failed one moves to FAILED and calls ``on_error`` on
every extension. Errors met while doing either become notes on the original.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from zett_agent._driver import emission
from zett_agent._hooks import HookTable
from zett_agent._inbox import RequestInbox
from zett_agent._members import E, P
from zett_agent.events import AgentEvent, runtime_event
from zett_agent.extensions.events import ExtensionEvent, MessageTiming, RunCancelledEvent
from zett_agent.messages import AssistantMessage, ToolCall, ToolMessage
from zett_agent.phases import AgentPhase

if TYPE_CHECKING:
    from zett_agent._context import AgentRunContext

__all__ = ["CANCELLED_TOOL_CONTENT", "Endings"]


CANCELLED_TOOL_CONTENT = "Request cancelled before tool completion"


class Endings:
    """Mixed into ``Request``: its success, cancellation and failure, and its release."""

    hooks: HookTable
    inbox: RequestInbox
    context: AgentRunContext
    _release: Callable[[Any], None]
    _unsettled: list[ToolCall]
    _ended: bool

    if TYPE_CHECKING:

        def emit(self, event: AgentEvent) -> Awaitable[None]: ...
        def move(self, target: AgentPhase) -> Awaitable[tuple[datetime, int] | None]: ...
        def stage(self, extensions: tuple[Any, ...], hook: str, *args: Any) -> Awaitable[None]: ...
        async def publish(self, event: ExtensionEvent, *, target: Any = None) -> None: ...
        def _settle(
            self, call: ToolCall, message: ToolMessage, timing: MessageTiming | None = None
        ) -> Awaitable[None]: ...

    def _end(self) -> None:
        """Give the session back, once: at the move into COMPLETED, else when ``execute`` ends."""
        if self._ended:
            return
        self._ended = True
        try:
            self.context.state._return_borrowed()
        finally:
            self.inbox.close()
            self._release(self)

    def _finish(self, final: AssistantMessage) -> Awaitable[None]:
        """Complete the request with ``final`` (await the result).

        With no hook to call and no listener to await (one that hears the move through
        ``_on_move`` is called in it), nothing is awaited but the hand-over of
        RUN_COMPLETED: no coroutine of its own.
        """
        hooks = self.hooks
        if hooks.after_run or hooks.on_success or not hooks.completes_quietly:
            return self._finish_with_hooks(final)
        self.move(P.COMPLETED)  # nobody listens but through ``_on_move``: nothing to await
        self._end()
        context = self.context
        return emission(
            runtime_event(
                E.RUN_COMPLETED,
                context.config.session_id,
                message=final,
                phase=context.state.phase,
            )
        )

    async def _finish_with_hooks(self, final: AssistantMessage) -> None:
        hooks = self.hooks
        if hooks.after_run:
            await self.stage(hooks.after_run, "after_run", final)
        if hooks.on_success:
            await self.stage(hooks.on_success, "on_success", final)
        if moving := self.move(P.COMPLETED):
            await moving
        # Nothing runs after RUN_COMPLETED: the session is free while the consumer holds it,
        # so a consumer that breaks out there can start the next request at once.
        self._end()
        await self.emit(
            runtime_event(E.RUN_COMPLETED, self.context.config.session_id, message=final)
        )

    async def _cancelled(self, cancel: asyncio.CancelledError) -> None:
        state = self.context.state
        previous = state.phase
        self.inbox.close()
        if previous.is_terminal:
            return  # finished already: the consumer only stopped listening (at RUN_COMPLETED)
        try:
            while self._unsettled:
                call = self._unsettled[0]
                await self._settle(
                    call, ToolMessage(call.id, call.name, CANCELLED_TOOL_CONTENT, success=False)
                )
            moved = None
            if previous.is_active:
                moved = await self.move(P.CANCELLED)
            else:
                state.phase = P.CANCELLED
            if moved is None:
                moved = (datetime.now(UTC), time.monotonic_ns())
            # The same instant as the move into CANCELLED, published after it.
            await self.publish(RunCancelledEvent(previous, *moved))
        except Exception as error:
            cancel.add_note(f"While cancelling the request: {type(error).__name__}: {error}")

    async def _failed(self, error: Exception) -> None:
        state = self.context.state
        self.inbox.close()
        try:
            if state.phase.is_active:
                await self.move(P.FAILED)
            elif not state.phase.is_terminal:  # CREATED: nothing was announced yet
                state.phase = P.FAILED
        except Exception as secondary:
            state.phase = P.FAILED
            error.add_note(f"While failing the request: {type(secondary).__name__}: {secondary}")
        for extension in self.hooks.on_error:
            try:
                await extension.on_error(self.context, error)
            except Exception as secondary:
                error.add_note(
                    f"{extension.name}.on_error raised {type(secondary).__name__}: {secondary}"
                )
