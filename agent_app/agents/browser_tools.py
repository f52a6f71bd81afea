"""Host-page tools: tools an assistant declares that run in the person's browser.

An assistant lists them in ``browser_tools`` as ordinary ``@tool`` functions: their
signature and docstring are what the model is offered, their body never runs on the
server. When the model calls one, the run waits for the page, exactly as it waits for an
answer to a question, and with the same machinery:

- the extension emits a CUSTOM ``browser_tool`` event ``{tool_call_id, tool, arguments,
  response_event, expires_at}``; the run stores it as a durable wait (kind
  ``browser_tool``, ``agent_app.durable.waits``) before any page sees it, so it survives
  a restart of the server like a question does;
- a page whose client registered a handler (``client.onTool(name, fn)`` in
  ``client.js``) runs it and replies ``browser_tool_result`` ``{tool_call_id, result}``
  (or ``{tool_call_id, error}``); the first reply wins, like any reply;
- the result is what the model reads (JSON for anything but a string); an ``error``
  makes the call fail with that text;
- nobody answers by the deadline (``ZETT_BROWSER_TOOL_TIMEOUT`` seconds, as no page was
  open or none knew the tool): the call fails with a result that says so, and the run goes
  on. Stopping the run ends the wait like any other.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from zett_agent.events import AgentEvent, AgentEventType
from zett_agent.extensions.external import (
    ExternalEventExpired,
    ExternalEventExtension,
    utc_iso,
)
from zett_agent.tools.base import AgentTool, current_run_context

if TYPE_CHECKING:
    from zett_agent.agent import AgentRunContext
    from zett_agent.messages import ToolCall
    from zett_agent.tools.base import ToolResult

__all__ = [
    "BROWSER_TOOL_EVENT",
    "BROWSER_TOOL_RESULT",
    "BrowserToolError",
    "BrowserToolExtension",
    "BrowserToolUnanswered",
]

#: The CUSTOM event that asks the page to run a tool.
BROWSER_TOOL_EVENT = "browser_tool"
#: The reply that carries its result.
BROWSER_TOOL_RESULT = "browser_tool_result"


class BrowserToolUnanswered(RuntimeError):
    """No page ran the tool before its deadline."""


class BrowserToolError(RuntimeError):
    """The page ran the tool and it failed (the page's own error text)."""


class BrowserToolExtension(ExternalEventExtension):
    """Offers ``tools`` to the model and waits for a page to run each call."""

    name = "BrowserToolExtension"

    def __init__(self, tools: Sequence[AgentTool], *, timeout: float | None = None) -> None:
        super().__init__(
            response_event_name=BROWSER_TOOL_RESULT,
            correlation_field="tool_call_id",
            timeout=timeout,
        )
        for tool in tools:
            if not isinstance(tool, AgentTool):
                raise TypeError(f"browser_tools must hold @tool functions, got {tool!r}")
        self.declared = {tool.name: tool for tool in tools}
        self._tools = {name: self._page_tool(tool) for name, tool in self.declared.items()}

    @property
    def tool_names(self) -> frozenset[str]:
        return frozenset(self._tools)

    def _page_tool(self, declared: AgentTool) -> AgentTool:
        """The declared tool's definition, with a handler that takes the page's reply."""
        extension = self

        async def run_in_page(**arguments: Any) -> Any:
            declared.validate_arguments(arguments)  # bad input fails here, never waits
            context = current_run_context()
            try:
                payload = extension._take_external_event(context).payload
            except ExternalEventExpired:
                raise BrowserToolUnanswered(
                    f"No page ran {declared.name} within {extension.timeout:g} seconds (no "
                    "page with this chat was open, or none knew the tool), so it did "
                    "nothing. Go on without its result."
                ) from None
            if payload.get("error") is not None:
                error = payload["error"]
                raise BrowserToolError(f"The page could not run {declared.name}: {error}")
            result = payload.get("result")
            return result if isinstance(result, str) else json.dumps(result)

        return AgentTool(
            name=declared.name,
            description=declared.description,
            parameters=declared.parameters,
            handler=run_in_page,
            guidelines=declared.guidelines,
            snippet=declared.snippet,
        )

    def request_payload(
        self, call: ToolCall, expires_at: str | None = None
    ) -> dict[str, Any] | None:
        """The ``browser_tool`` payload for ``call``; None if its arguments are invalid."""
        declared = self.declared.get(call.name)
        if declared is None:
            return None
        try:
            declared.validate_arguments(call.arguments)
        except ValueError:
            return None
        payload: dict[str, Any] = {
            "tool_call_id": call.id,
            "tool": call.name,
            "arguments": dict(call.arguments),
            "response_event": BROWSER_TOOL_RESULT,
        }
        if expires_at is not None:
            payload["expires_at"] = expires_at
        return payload

    async def on_tool(self, context: AgentRunContext) -> None:
        for tool in self._tools.values():
            context.register_tool(tool)

    async def before_tool(self, context: AgentRunContext, call: ToolCall) -> None:
        tool = self._tools.get(call.name)
        if tool is None or context.tools.get(call.name) is not tool:
            return
        if self.request_payload(call) is None:
            return  # the handler fails with the validation error
        async with self._wait_for_external_event(context, call.id):
            expires_at = self._wait_expires_at(context, call.id)
            payload = self.request_payload(call, utc_iso(expires_at) if expires_at else None)
            await context.emit(
                AgentEvent(
                    AgentEventType.CUSTOM,
                    context.session_id,
                    tool_calls=[call],
                    name=BROWSER_TOOL_EVENT,
                    payload=payload,
                )
            )

    async def after_tool(
        self,
        context: AgentRunContext,
        call: ToolCall,
        result: ToolResult,
        error: Exception | None,
    ) -> None:
        if call.name in self._tools and isinstance(error, BrowserToolUnanswered):
            # The stored wait ends as expired, not done (``sessions.run``).
            result.attributes["browser_tool"] = {"expired": True}
