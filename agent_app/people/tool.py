"""``handoff_to_human``: the tool of an assistant declared with ``handoff = True``.

The assistant calls it when a person of the team should take over (the customer asks
for one, is upset, or needs what only staff can do). The chat is marked as needing a
person and every socket is told at once, numbered by the run that calls it
(``agent_app.people.hub``); the model is told to say so to the customer.
"""

from __future__ import annotations

from typing import Annotated

from channels.db import database_sync_to_async
from pydantic import Field

from agent_app.people import hub, records
from agent_app.people.hours import support_hours_text
from agent_app.protocol.people import HandoffRequestedFrame
from zett_agent.tools.base import AgentTool, current_run_context, tool

__all__ = ["HANDOFF_TOOL_NAME", "handoff_to_human", "handoff_tools"]

HANDOFF_TOOL_NAME = "handoff_to_human"


@tool
async def handoff_to_human(
    reason: Annotated[str, Field(min_length=1, max_length=records.MAX_REASON_CHARS)],
) -> str:
    """Ask a person of the team to take this conversation over.

    Args:
        reason: Why a person is needed, in one sentence for the team.

    Guidelines:
        - Use when the user asks for a person, or needs what you cannot do for them.
        - Call it once; then tell the user that a person will join this chat.
    """
    session_id = current_run_context().session_id
    marked = await database_sync_to_async(records.mark_needs_human)(session_id, reason, "assistant")
    if not marked:
        return "This chat is not stored yet; nobody could be asked."
    hours = support_hours_text()

    def build(seq: int) -> dict[str, object]:
        frame = HandoffRequestedFrame(seq=seq, reason=reason, source="assistant", hours=hours)
        return frame.dump()

    await hub.announce_in_run(session_id, build)
    when = f" The team answers {hours}." if hours else ""
    return f"A person of the team was asked to join this chat.{when} Tell the user so."


def handoff_tools(enabled: bool) -> list[AgentTool]:
    """The tools ``Assistant.handoff`` adds (none when it is off)."""
    return [handoff_to_human] if enabled else []
