"""``AgentEventDispatcher``: typed callbacks for an ``AgentEvent`` stream.

``await dispatcher.dispatch(event)`` calls the one method named ``on_<type value>_event``
(``on_text_delta_event``, ``on_tool_started_event``, ``on_custom_event`` …). Every such
method is a no-op here; override the ones you need. Errors raised by a callback propagate
to the caller of ``dispatch``. A subclass that defines an ``on_…_event`` method matching no
event type is a ``TypeError`` at class creation, so a typo cannot silently drop events.
"""

from __future__ import annotations

from typing import Any

from zett_agent.events import AgentEvent, AgentEventType

__all__ = ["AgentEventDispatcher"]

_METHODS = {member: f"on_{member.value}_event" for member in AgentEventType}
_KNOWN = frozenset(_METHODS.values())


class AgentEventDispatcher:
    """Routes each event to ``on_<event type>_event``."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        unknown = sorted(
            name
            for name in vars(cls)
            if name.startswith("on_") and name.endswith("_event") and name not in _KNOWN
        )
        if unknown:
            raise TypeError(
                f"{cls.__name__} defines {unknown}, which match no AgentEventType; "
                f"callbacks are named on_<type>_event, e.g. on_text_delta_event"
            )

    async def dispatch(self, event: AgentEvent) -> None:
        """Call the callback for ``event.type``."""
        await getattr(self, _METHODS[event.type])(event)


def _make_default(event_type: AgentEventType) -> Any:
    async def callback(self: AgentEventDispatcher, event: AgentEvent) -> None:
        """Default: ignore the event."""

    callback.__name__ = callback.__qualname__ = _METHODS[event_type]
    callback.__doc__ = f"Called for {event_type.name} events; does nothing by default."
    return callback


for _event_type in AgentEventType:
    setattr(AgentEventDispatcher, _METHODS[_event_type], _make_default(_event_type))
del _event_type
