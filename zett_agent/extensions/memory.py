"""``InMemoryMessageAccumulator``: keeps each session's history in process memory.

It records every appended message that belongs to the history (``include_in_messages``)
and restores the session's history in ``on_state``, after the system messages, without
re-publishing it. A ``CompactionEvent`` replaces the stored history with the compacted one.
History is restored through ``ValidatedHistory`` (the rule of ``valid_history``), so a
request that failed or was cancelled mid-batch never leaves the next one with unanswered
tool calls; a resumed request (``Agent.resume_stream``) keeps such an open batch at the end
so it can run its calls. The default extension of an Agent; use a persistent one (e.g. the
Django app's) to survive restarts.

Cost per request: recording is O(1) per message; restoring validates only the messages
added since the previous request and copies nothing: the context borrows the history's own
list (``ValidatedHistory._lend``) where ``restore_messages`` would have copied it, and the
first model request's tuple is built straight from it. A request's Python work does not
grow with the session's length; the one copy of the references per model call (its
``messages`` tuple) is C-level.

Like the rest of a request's state, it is meant for the event loop's thread (where the
runtime calls its hooks): it is not thread-safe.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from zett_agent.extensions.base import AgentExtension
from zett_agent.extensions.events import CompactionEvent, MessageAppendedEvent
from zett_agent.history import ValidatedHistory
from zett_agent.messages import AnyMessage

if TYPE_CHECKING:
    from zett_agent._context import AgentRunContext
    from zett_agent.extensions.events import ExtensionEvent

__all__ = ["InMemoryMessageAccumulator"]


class InMemoryMessageAccumulator(AgentExtension):
    """Per-session message history held in memory."""

    def __init__(self) -> None:
        self._sessions: dict[str, ValidatedHistory] = {}

    def messages(self, session_id: str) -> tuple[AnyMessage, ...]:
        """The stored history of a session."""
        history = self._sessions.get(session_id)
        return tuple(history.valid(keep_open_tail=True)) if history is not None else ()

    def load(self, session_id: str, messages: Iterable[AnyMessage]) -> None:
        """Replace a session's stored history (e.g. one imported from elsewhere)."""
        self._sessions[session_id] = ValidatedHistory(messages)

    def truncate(self, session_id: str, length: int) -> None:
        """Forget a session's messages after its first ``length`` (e.g. to retry a turn)."""
        history = self._sessions.get(session_id)
        if history is not None:
            history.truncate(length)

    def clear(self, session_id: str | None = None) -> None:
        """Forget one session's history, or every session's."""
        if session_id is None:
            self._sessions.clear()
        else:
            self._sessions.pop(session_id, None)

    async def on_state(self, context: AgentRunContext) -> None:
        history = self._sessions.get(context.session_id)
        if history is None or not len(history):
            return
        # restore_messages without its copy: the context borrows the history's own list
        # (see ValidatedHistory._lend) until its first read of the messages.
        context.state._borrow(history._lend(keep_open_tail=context.resuming))

    async def on_event(self, context: AgentRunContext, event: ExtensionEvent) -> None:
        if isinstance(event, MessageAppendedEvent):
            if event.message.include_in_messages:
                history = self._sessions.get(context.session_id)
                if history is None:
                    history = self._sessions[context.session_id] = ValidatedHistory()
                history.append(event.message)
        elif isinstance(event, CompactionEvent):
            # An event that carries only ranges (as upstream's code publishes it) is
            # published after the context was replaced: the context is the new history.
            compacted = event.messages or context.state.messages
            history = self._sessions.setdefault(context.session_id, ValidatedHistory())
            history.replace(m for m in compacted if m.include_in_messages)
