"""The tool phase of a turn (mixed into ``zett_agent._request.Request``): the answer's
calls run one at a time, each between ``before_tool`` and ``after_tool``, its result
appended and announced; a steering message found after any of them skips the rest.

While a call runs, ``current_tool_call_id`` and ``current_run_context`` name it and its
request (set in the request's own ``contextvars.Context``, reset after the call).
The calls run in the loop of ``_tool_phase`` itself, not in a coroutine each: every event of
a call passes one frame fewer on its way to the consumer.
"""

from __future__ import annotations

from collections.abc import Awaitable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from zett_agent._driver import emission
from zett_agent._hooks import HookTable
from zett_agent._inbox import RequestInbox
from zett_agent._members import E, P
from zett_agent._tool_call import execute_tool, failed_result, find_tool
from zett_agent.events import AgentEvent, runtime_event
from zett_agent.extensions.events import MessageTiming, _measured
from zett_agent.messages import AssistantMessage, ToolCall, ToolMessage, UserMessage
from zett_agent.phases import AgentPhase
from zett_agent.tools.base import _current_run_context, _current_tool_call_id, to_tool_result

if TYPE_CHECKING:
    from zett_agent._context import AgentRunContext

__all__ = ["SKIPPED_TOOL_CONTENT", "ToolTurns"]


SKIPPED_TOOL_CONTENT = "Superseded by a steering message"


def _tool_timing(
    started: tuple[datetime, int] | None, completed: tuple[datetime, int] | None
) -> MessageTiming | None:
    """A tool result's timing, from the moves into RUNNING_TOOL and back (None: untimed)."""
    if started is None or completed is None:
        return None
    return _measured(started[0], completed[0], max(completed[1] - started[1], 0), None, None)


class ToolTurns:
    """Mixed into ``Request``: the tool phase of a turn."""

    hooks: HookTable
    inbox: RequestInbox
    context: AgentRunContext
    _unsettled: list[ToolCall]

    if TYPE_CHECKING:

        def emit(self, event: AgentEvent) -> Awaitable[None]: ...
        def move(self, target: AgentPhase) -> Awaitable[tuple[datetime, int] | None]: ...
        def stage(self, extensions: tuple[Any, ...], hook: str, *args: Any) -> Awaitable[None]: ...
        def append(
            self, message: Any, timing: MessageTiming | None = None, usage: Any = None
        ) -> Awaitable[None]: ...
        async def _start_steering(self, messages: list[UserMessage]) -> None: ...

    async def _tool_phase(self, message: AssistantMessage) -> bool:
        """Run ``message``'s unsettled calls in order, then ``after_turn``; True if steered.

        A steering message found after any tool skips the remaining calls and is appended
        before ``after_turn``, so the next turn answers it.
        """
        hooks = self.hooks
        context = self.context
        session_id = context.config.session_id
        state = context.state
        has_steering = self.inbox.has_steering
        while self._unsettled and not has_steering():
            call = self._unsettled[0]
            token = _current_tool_call_id.set(call.id)
            context_token = _current_run_context.set(context)
            try:
                if hooks.before_tool:
                    await self.stage(hooks.before_tool, "before_tool", call)
                started = await moved if (moved := self.move(P.RUNNING_TOOL)) else None
                await emission(
                    runtime_event(E.TOOL_STARTED, session_id, tool_calls=[call], phase=state.phase)
                )
                if hooks.on_tool_call:
                    result, error = await execute_tool(context, hooks.on_tool_call, call)
                else:  # no layer: the tool is awaited here, without a coroutine between
                    try:
                        tool = find_tool(context, call.name)
                        result = to_tool_result(await tool.invoke(call.arguments))
                        error = None
                    except Exception as failure:
                        result, error = failed_result(failure), failure
                completed = await moved if (moved := self.move(P.READY)) else None
                if hooks.after_tool:
                    await self.stage(hooks.after_tool, "after_tool", call, result, error)
                message_of_call = ToolMessage(
                    call.id,
                    call.name,
                    result.content,
                    success=result.success,
                    attributes=dict(result.attributes),
                )
                timing = None if completed is None else _tool_timing(started, completed)
                if settling := self._settle(call, message_of_call, timing):
                    await settling
                await emission(
                    runtime_event(
                        E.TOOL_COMPLETED if message_of_call.success else E.TOOL_FAILED,
                        session_id,
                        tool_calls=[call],
                        message=message_of_call,
                        error=error,
                        phase=state.phase,
                    )
                )
            finally:
                _current_run_context.reset(context_token)
                _current_tool_call_id.reset(token)
        steered = bool(self._unsettled) or has_steering()
        if steered:
            await self._skip_unsettled()
            await self._start_steering(self.inbox.take_steering())
        if hooks.after_turn:
            await self.stage(hooks.after_turn, "after_turn", message)
        return steered

    async def _skip_unsettled(self) -> None:
        session_id = self.context.session_id
        while self._unsettled:
            call = self._unsettled[0]
            message = ToolMessage(call.id, call.name, SKIPPED_TOOL_CONTENT, success=False)
            await self._settle(call, message)
            await self.emit(
                AgentEvent(E.TOOL_SKIPPED, session_id, tool_calls=[call], message=message)
            )

    def _settle(
        self, call: ToolCall, message: ToolMessage, timing: MessageTiming | None = None
    ) -> Awaitable[None]:
        """Append a call's result (await the result if it is true); from here on
        cancellation no longer closes the call."""
        if self._unsettled and self._unsettled[0] is call:
            self._unsettled.pop(0)
        return self.append(message, timing)
