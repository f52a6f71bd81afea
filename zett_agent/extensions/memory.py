"""``InMemoryMessageAccumulator``: keeps each session's history in process memory.

It records every appended message that belongs to the history (``include_in_messages``)
and restores the session's history in ``on_state``, after the system messages, without
re-publishing it. A ``CompactionEvent`` replaces the stored history with the compacted one.
History is restored through ``valid_history``, so a request that failed or was cancelled
mid-batch never leaves the next one with unanswered tool calls. The default extension of
an Agent; use a persistent one (e.g. the Django app's) to survive restarts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from zett_agent.extensions.base import AgentExtension
from zett_agent.extensions.events import CompactionEvent, MessageAppendedEvent
from zett_agent.history import valid_history
from zett_agent.messages import AnyMessage, SystemMessage

if TYPE_CHECKING:
    from zett_agent.agent import AgentRunContext
    from zett_agent.extensions.events import ExtensionEvent

__all__ = ["InMemoryMessageAccumulator"]


class InMemoryMessageAccumulator(AgentExtension):
    """Per-session message history held in memory."""

    def __init__(self) -> None:
        self._sessions: dict[str, list[AnyMessage]] = {}

    def messages(self, session_id: str) -> tuple[AnyMessage, ...]:
        """The stored history of a session."""
        return tuple(self._sessions.get(session_id, ()))

    def clear(self, session_id: str | None = None) -> None:
        """Forget one session's history, or every session's."""
        if session_id is None:
            self._sessions.clear()
        else:
            self._sessions.pop(session_id, None)

    async def on_state(self, context: AgentRunContext) -> None:
        history = self._sessions.get(context.session_id)
        if not history:
            return
        current = list(context.state.messages)
        split = 0
        while split < len(current) and isinstance(current[split], SystemMessage):
            split += 1
        restored = valid_history(history, keep_open_tail=context._resumption is not None)
        self._sessions[context.session_id] = list(restored)
        context.replace_messages([*current[:split], *restored, *current[split:]], emit_new=False)

    async def on_event(self, context: AgentRunContext, event: ExtensionEvent) -> None:
        if isinstance(event, MessageAppendedEvent):
            if event.message.include_in_messages:
                self._sessions.setdefault(context.session_id, []).append(event.message)
        elif isinstance(event, CompactionEvent):
            self._sessions[context.session_id] = [
                message for message in event.messages if message.include_in_messages
            ]
