"""``ToolGuidelinesExtension``: tells the model how to use the request's tools.

In ``on_state`` it renders the snippets and guidelines of every registered tool (all
``on_tool`` hooks have finished by then) and inserts them as one system message after the
other system messages. Nothing is added when no tool has guidance.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from zett_agent.extensions.base import AgentExtension
from zett_agent.messages import SystemMessage
from zett_agent.tools.base import render_tool_guidance

if TYPE_CHECKING:
    from zett_agent.agent import AgentRunContext

__all__ = ["ToolGuidelinesExtension"]


class ToolGuidelinesExtension(AgentExtension):
    """Adds a "Tool snippets" / "Tool guidelines" system message to each request."""

    async def on_state(self, context: AgentRunContext) -> None:
        guidance = render_tool_guidance(context.tools.values())
        if not guidance:
            return
        messages = context.state.messages
        index = 0
        for position, message in enumerate(messages):
            if isinstance(message, SystemMessage):
                index = position + 1
        context.add_message(SystemMessage(guidance), index=index)
