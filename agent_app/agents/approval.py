"""The app's durable approval: ``zett_agent.extensions.approval.ApprovalExtension`` with
what the chat page shows and what outlives a crash.

``ConfirmationExtension`` gates an assistant's ``approval_required`` tools
(``agent_app.agents.factory`` builds one per assistant). On top of the runtime's gate it adds the
``question`` and ``response_event`` the page shows, and ``on_execute``: right before an
approved call runs the app marks its stored wait as executing (``agent_app.durable.waits``), so a
process killed mid-call never runs it a second time; recovery settles such a call instead.
``settled_elsewhere``: a continuation may run a call whose result another extension gives
(an MCP call cut off mid-question, ``agent_app.agents.elicitation``); such a call is not
asked about again.
The wait itself (its digest, its deadline) is stored when ``approval_requested`` is
broadcast (``agent_app.sessions.live``), so an approval survives restarts and any worker can take
the reply.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection
from typing import TYPE_CHECKING, Any

from zett_agent.extensions.approval import (
    APPROVAL_REQUESTED_EVENT,
    APPROVAL_RESPONSE_EVENT,
    ApprovalDenied,
    ApprovalExtension,
)

if TYPE_CHECKING:
    from zett_agent.agent import AgentRunContext
    from zett_agent.messages import ToolCall
    from zett_agent.tools.base import ToolResult

__all__ = [
    "APPROVAL_REQUESTED_EVENT",
    "APPROVAL_RESPONSE_EVENT",
    "ApprovalDenied",
    "ConfirmationExtension",
]


class ConfirmationExtension(ApprovalExtension):
    """The runtime's approval gate, durable: ``on_execute`` runs before an approved call."""

    def __init__(
        self,
        tools_needing_approval: Collection[str],
        *,
        timeout: float | None = None,
        on_execute: Callable[[AgentRunContext, ToolCall], Awaitable[None]] | None = None,
        settled_elsewhere: Callable[[AgentRunContext, ToolCall], Awaitable[Any]] | None = None,
    ) -> None:
        super().__init__(tools_needing_approval, timeout=timeout)
        self.on_execute = on_execute
        self.settled_elsewhere = settled_elsewhere

    async def _elsewhere(self, context: AgentRunContext, call: ToolCall) -> bool:
        return self.settled_elsewhere is not None and bool(
            await self.settled_elsewhere(context, call)
        )

    async def before_tool(self, context: AgentRunContext, call: ToolCall) -> None:
        if call.name in self.tools_needing_approval and await self._elsewhere(context, call):
            return
        await super().before_tool(context, call)

    async def on_tool_call(
        self,
        context: AgentRunContext,
        call: ToolCall,
        call_next: Callable[[ToolCall], Awaitable[ToolResult]],
    ) -> ToolResult:
        if call.name in self.tools_needing_approval and await self._elsewhere(context, call):
            return await call_next(call)
        return await super().on_tool_call(context, call, call_next)

    def request_payload(self, call: ToolCall, tool: Any = None) -> dict[str, Any] | None:
        payload = super().request_payload(call, tool)
        if payload is not None:
            payload["question"] = f"Allow {call.name} to run with these arguments?"
            payload["response_event"] = APPROVAL_RESPONSE_EVENT
        return payload

    async def before_execute(self, context: AgentRunContext, call: ToolCall) -> None:
        if self.on_execute is not None:
            await self.on_execute(context, call)
