"""``AgentEventDispatcher``: typed callbacks for an ``AgentEvent`` stream.

``await dispatcher.dispatch(event)`` calls the one method named ``on_<type value>_event``
(``on_text_delta_event``, ``on_custom_event`` …). Every method is a no-op here; override the
ones you need. Errors raised by a callback propagate to the caller of ``dispatch``.
"""

from __future__ import annotations

from zett_agent.events import AgentEvent, AgentEventType

__all__ = ["AgentEventDispatcher"]


class AgentEventDispatcher:
    """Routes each event to ``on_<event type>_event``."""

    async def dispatch(self, event: AgentEvent) -> None:
        """Call the callback for ``event.type``."""
        await getattr(self, _METHODS[event.type])(event)


_METHODS = {member: f"on_{member.value}_event" for member in AgentEventType}


async def _ignore(self: AgentEventDispatcher, event: AgentEvent) -> None:
    """Default callback: do nothing."""


for _method in _METHODS.values():
    setattr(AgentEventDispatcher, _method, _ignore)
del _method
