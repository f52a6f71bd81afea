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

A request can also borrow the validated list instead of copying it (``_lend``, how the
in-memory accumulator restores): until the lease is released, the history copies its list
before editing it in place (``truncate``, a ``valid()`` that drops messages), so what was
lent stays as it was; appending does not disturb it.
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

    __slots__ = ("_checked", "_lent", "_messages")

    def __init__(self, messages: Iterable[AnyMessage] = ()) -> None:
        self._messages: list[AnyMessage] = list(messages)
        #: ``_messages[:_checked]`` is valid and ends at a settled point.
        self._checked = 0
        #: Unreleased leases of ``_messages``: while any, it is copied before an edit.
        self._lent = 0

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
        if length < len(self._messages):
            del self._editable()[length:]
        self._checked = min(self._checked, length)

    def replace(self, messages: Iterable[AnyMessage]) -> None:
        """Swap the whole history (after a compaction); it is checked again on next use."""
        self._messages = list(messages)
        self._checked = 0
        self._lent = 0

    def valid(self, *, keep_open_tail: bool = False) -> list[AnyMessage]:
        """The history without orphans and incomplete batches (see ``valid_history``).

        Dropped messages are gone for good, except an open batch at the end that
        ``keep_open_tail`` kept: it stays unchecked, so a later ``valid()`` without the
        flag still drops it if nothing completed it.
        """
        messages = self._messages
        start = self._checked
        if start < len(messages):
            checked = valid_history(messages[start:], keep_open_tail=keep_open_tail)
            if len(checked) < len(messages) - start:  # something dropped: an edit
                messages = self._editable()
                messages[start:] = checked
            open_start = _open_batch_start(messages) if keep_open_tail else None
            self._checked = len(messages) if open_start is None else open_start
        return messages

    def _lend(self, *, keep_open_tail: bool = False) -> _HistoryLease:
        """``valid()``, borrowed: the caller reads the list without copying it.

        Release the lease when done; until then the history copies its list before any
        edit, so the lent messages never change under the borrower.
        """
        messages = self.valid(keep_open_tail=keep_open_tail)
        self._lent += 1
        return _HistoryLease(self, messages, len(messages))

    def _editable(self) -> list[AnyMessage]:
        """The list, ready for an edit in place: a copy of it while it is lent."""
        if self._lent:
            self._messages = list(self._messages)
            self._lent = 0
        return self._messages


class _HistoryLease:
    """The first ``length`` messages of ``messages``, a ``ValidatedHistory``'s own list.

    ``ValidatedHistory._lend`` makes one. The history keeps appending to the list while it
    is lent, never editing what the lease covers; ``release`` ends the loan.
    """

    __slots__ = ("_history", "length", "messages")

    def __init__(self, history: ValidatedHistory, messages: list[AnyMessage], length: int) -> None:
        self._history: ValidatedHistory | None = history
        self.messages = messages
        self.length = length

    def release(self) -> None:
        """End the loan (again: nothing); the history may edit its list in place again."""
        history, self._history = self._history, None
        if history is not None and history._messages is self.messages:
            history._lent -= 1

    def freeze(self, around: list[AnyMessage], at: int) -> tuple[AnyMessage, ...]:
        """``around[:at] + messages[:length] + around[at:]`` as a tuple; releases the lease.

        One copy of the references: the lent list itself is spliced (``around``'s parts in
        place of what the history appended after ``length``; the lent references are moved,
        not copied), turned into the tuple and put back as it was before returning. Nothing
        can see it spliced: there is no ``await`` in between.
        """
        lent, length = self.messages, self.length
        appended = lent[length:]
        lent[length:] = around[at:]
        try:
            lent[:0] = around[:at]
            try:
                frozen = tuple(lent)
            finally:
                del lent[:at]
        finally:
            lent[length:] = appended
        self.release()
        return frozen
