"""``ToolGuidelinesExtension``: tells the model how to use the request's tools.

In ``on_state`` it renders the snippets and guidelines of every registered tool (all
``on_tool`` hooks have finished by then) and inserts them as one system message after the
other system messages: after the leading ones (the instructions at the head of the
context), or at the end when the context ends with a system message (one an extension that
runs earlier added after the restored history, or one that ends the history). Nothing is
added when no tool has guidance. Only the head and the last message are looked at, so the
cost does not grow with the session; a system message further inside the restored history
(one stored with ``include_in_messages=True``) is not searched for, and the guidance goes
before it. The rendered text is cached per set of tools.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from zett_agent.extensions.base import AgentExtension
from zett_agent.messages import SystemMessage
from zett_agent.tools.base import AgentTool, render_tool_guidance

if TYPE_CHECKING:
    from zett_agent._context import AgentRunContext

__all__ = ["ToolGuidelinesExtension"]


class ToolGuidelinesExtension(AgentExtension):
    """Adds a "Tool snippets" / "Tool guidelines" system message to each request."""

    def __init__(self) -> None:
        self._rendered: tuple[tuple[AgentTool, ...], str] = ((), "")

    async def on_state(self, context: AgentRunContext) -> None:
        tools = tuple(context.tools.values())
        cached_tools, guidance = self._rendered
        if len(tools) != len(cached_tools) or any(
            a is not b for a, b in zip(tools, cached_tools, strict=True)
        ):
            guidance = render_tool_guidance(tools)
            self._rendered = (tools, guidance)
        if not guidance:
            return
        state = context.state
        if isinstance(state._last(), SystemMessage):
            context.add_message(SystemMessage(guidance))  # after the trailing ones too
        else:
            context.add_message(SystemMessage(guidance), index=state._leading_system())
