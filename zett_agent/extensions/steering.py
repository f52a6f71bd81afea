"""``SteeringExtension``: built into every Agent; redirects a running request.

``ExternalEvent("steering_message", {"content": str})`` (or publishing
``SteeringMessageEvent`` from a hook) is accepted only while the target request runs. The
runtime checks for it after each model response and after each tool: the rest of the turn's
tool calls are skipped, the message is appended and the next turn answers it (with
``agent.steering_interrupts_stream`` it also ends a model call that streams text at once:
``zett_agent._interrupt``). Acceptance and the request's final "nothing left to answer"
decision share one lock (``RequestInbox``), so an accepted message is always processed. A
compaction pass accepts none.

A deliberate difference from upstream: several steering messages queued before the same
checkpoint are appended together and answered by one turn (each gets ``STEERING_STARTED``;
all but the last are marked ``STEERING_INTERRUPTED``), not one turn each: a user who sends
two corrections in a row meant one redirection (docs/runtime.md, Steering).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from zett_agent.extensions.base import AgentExtension
from zett_agent.messages import UserMessage

if TYPE_CHECKING:
    from zett_agent._context import AgentRunConfig
    from zett_agent._inbox import RequestInbox
    from zett_agent.events import ExternalEvent

__all__ = ["STEERING_EVENT_NAME", "SteeringExtension"]

STEERING_EVENT_NAME = "steering_message"


def _inbox_for(
    inboxes: dict[str, RequestInbox], config: AgentRunConfig | None
) -> RequestInbox | None:
    if config is None or config.session_id is None:
        return None
    inbox = inboxes.get(config.session_id)
    if inbox is None or (config.request_id is not None and config.request_id != inbox.request_id):
        return None
    return inbox


def _content(payload: dict) -> str | None:
    content = payload.get("content")
    if isinstance(content, str) and content.strip():
        return content
    return None


class SteeringExtension(AgentExtension):
    """Accepts ``steering_message`` external events for the session's running request."""

    def __init__(self, inboxes: dict[str, RequestInbox]) -> None:
        self._inboxes = inboxes

    def accept(self, config: AgentRunConfig | None, event: ExternalEvent) -> bool:
        if event.name != STEERING_EVENT_NAME:
            return False
        content = _content(event.payload)
        inbox = _inbox_for(self._inboxes, config)
        if content is None or inbox is None:
            return False
        return inbox.push_steering(UserMessage(content))
