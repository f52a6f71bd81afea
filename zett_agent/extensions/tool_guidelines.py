"""``ToolGuidelinesExtension``: tells the model how to use the request's tools.

In ``on_state`` it renders the snippets and guidelines of every registered tool (all
``on_tool`` hooks have finished by then) and inserts them as one system message right
after the leading system messages (the instructions at the head of the context). Nothing is
added when no tool has guidance. Only the head is scanned, never the restored history, so
the cost does not grow with the session; a system message restored inside the history
(one stored with ``include_in_messages=True``) stays where it is, after the guidance.
The rendered text is cached per set of tools.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from zett_agent.extensions.base import AgentExtension
from zett_agent.messages import SystemMessage
from zett_agent.tools.base import AgentTool, render_tool_guidance

if TYPE_CHECKING:
    from zett_agent.agent import AgentRunContext

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
        index = context.state._leading_system()
        context.add_message(SystemMessage(guidance), index=index)
