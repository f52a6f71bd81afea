"""``InternalMessageExtension``: built into every Agent; queues application instructions.

``ExternalEvent("internal_message", {"content": str})`` (or publishing
``InternalMessageEvent`` from a hook) queues an ``AgentMessage`` that the running request
answers after its next final answer, at most ``max_internal_messages`` per request.
Rejected (``[]``) outside a running request and during a compaction pass.
``INTERNAL_MESSAGE_COMPLETED`` carries the answer to the instruction in ``message``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from zett_agent.extensions.base import AgentExtension
from zett_agent.extensions.steering import _content, _inbox_for
from zett_agent.messages import AgentMessage

if TYPE_CHECKING:
    from zett_agent._context import AgentRunConfig
    from zett_agent._inbox import RequestInbox
    from zett_agent.events import ExternalEvent

__all__ = ["INTERNAL_MESSAGE_EVENT_NAME", "InternalMessageExtension"]

INTERNAL_MESSAGE_EVENT_NAME = "internal_message"


class InternalMessageExtension(AgentExtension):
    """Accepts ``internal_message`` external events for the session's running request."""

    def __init__(self, inboxes: dict[str, RequestInbox]) -> None:
        self._inboxes = inboxes

    def accept(self, config: AgentRunConfig | None, event: ExternalEvent) -> bool:
        if event.name != INTERNAL_MESSAGE_EVENT_NAME:
            return False
        content = _content(event.payload)
        inbox = _inbox_for(self._inboxes, config)
        if content is None or inbox is None:
            return False
        return inbox.push_internal(AgentMessage(content))
