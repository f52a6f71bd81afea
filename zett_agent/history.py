"""Restoring history so that a provider accepts it, at a cost that does not grow with it.

A request that failed or was cancelled, or a model that stopped abnormally, can leave an
assistant message whose tool calls have no (or only some) results, and compaction or
manual edits can leave results whose call is gone. Providers reject both. ``valid_history``
drops results without a matching call and assistant tool batches whose results are
incomplete (together with the partial results), keeping everything else in order.

``keep_open_tail=True`` keeps an incomplete batch at the very end (the last assistant
message with tool calls, followed only by some of its results): that is a session paused
in a wait that outlived its process, which ``Agent.resume_stream`` continues. A
persistence extension restores with it when the request is a resume.

``ValidatedHistory`` is the same rule for a history that only grows: it remembers how far
it has already checked, so restoring a session at the start of each request validates the
messages appended since the previous one, not the whole conversation (the in-memory
accumulator uses it; a persistence extension can too). Why that is exact: a checked prefix
ends at a settled point (after a message outside any tool batch, or after a complete
batch), and ``valid_history`` treats what follows such a point the same whether or not the
prefix is there: a result right after a complete batch is a duplicate or foreign one,
dropped in both cases.
"""

from __future__ import annotations

from collections.abc import Iterable

from zett_agent.messages import AnyMessage, AssistantMessage, ToolMessage

__all__ = ["ValidatedHistory", "valid_history"]


def valid_history(
    messages: Iterable[AnyMessage], *, keep_open_tail: bool = False
) -> list[AnyMessage]:
    """Return ``messages`` without orphaned tool results and incomplete tool batches.

    With ``keep_open_tail`` an incomplete batch at the very end is kept (with its valid
    results), so a session paused in a tool call can be resumed.
    """
    messages = list(messages)
    keep = [True] * len(messages)
    index = 0
    while index < len(messages):
        message = messages[index]
        if isinstance(message, ToolMessage):
            keep[index] = False  # a result not directly after its call's batch
            index += 1
            continue
        if isinstance(message, AssistantMessage) and message.tool_calls:
            wanted = {call.id for call in message.tool_calls}
            end = index + 1
            seen: set[str] = set()
            while end < len(messages) and isinstance(messages[end], ToolMessage):
                result = messages[end]
                assert isinstance(result, ToolMessage)
                if result.tool_call_id not in wanted or result.tool_call_id in seen:
                    keep[end] = False
                else:
                    seen.add(result.tool_call_id)
                end += 1
            if seen != wanted and not (keep_open_tail and end == len(messages)):
                for position in range(index, end):
                    keep[position] = False
            index = end
            continue
        index += 1
    return [message for message, kept in zip(messages, keep, strict=True) if kept]


def _open_batch_start(messages: list[AnyMessage]) -> int | None:
    """Index of the assistant message of an incomplete batch at the end, if there is one."""
    index = len(messages) - 1
    while index >= 0 and isinstance(messages[index], ToolMessage):
        index -= 1
    if index < 0:
        return None
    message = messages[index]
    if not isinstance(message, AssistantMessage) or not message.tool_calls:
        return None
    answered = {m.tool_call_id for m in messages[index + 1 :]}  # type: ignore[union-attr]
    if all(call.id in answered for call in message.tool_calls):
        return None
    return index


class ValidatedHistory:
    """A growing history kept provider-valid by checking only what was added since last time.

    ``append``/``extend`` add messages; ``valid()`` validates the unchecked tail in place
    (exactly as ``valid_history`` would validate the whole list) and returns the list
    itself, so the caller must not modify it. Restoring a session therefore costs the
    messages added since the previous restore, not the length of the conversation.
    """

    __slots__ = ("_checked", "_messages")

    def __init__(self, messages: Iterable[AnyMessage] = ()) -> None:
        self._messages: list[AnyMessage] = list(messages)
        #: ``_messages[:_checked]`` is valid and ends at a settled point.
        self._checked = 0

    def __len__(self) -> int:
        return len(self._messages)

    def append(self, message: AnyMessage) -> None:
        self._messages.append(message)

    def extend(self, messages: Iterable[AnyMessage]) -> None:
        self._messages.extend(messages)

    def truncate(self, length: int) -> None:
        """Forget every message after the first ``length`` (e.g. to retry the last turn)."""
        if isinstance(length, bool) or not isinstance(length, int) or length < 0:
            raise ValueError(f"length must be an int >= 0, got {length!r}")
        del self._messages[length:]
        self._checked = min(self._checked, length)

    def replace(self, messages: Iterable[AnyMessage]) -> None:
        """Swap the whole history (after a compaction); it is checked again on next use."""
        self._messages = list(messages)
        self._checked = 0

    def valid(self, *, keep_open_tail: bool = False) -> list[AnyMessage]:
        """The history without orphans and incomplete batches (see ``valid_history``).

        Dropped messages are gone for good, except an open batch at the end that
        ``keep_open_tail`` kept: it stays unchecked, so a later ``valid()`` without the
        flag still drops it if nothing completed it.
        """
        messages = self._messages
        start = self._checked
        if start < len(messages):
            messages[start:] = valid_history(messages[start:], keep_open_tail=keep_open_tail)
            open_start = _open_batch_start(messages) if keep_open_tail else None
            self._checked = len(messages) if open_start is None else open_start
        return messages
