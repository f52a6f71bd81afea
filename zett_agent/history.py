"""Restoring history so that a provider accepts it.

A request that failed or was cancelled, or a model that stopped abnormally, can leave an
assistant message whose tool calls have no (or only some) results, and compaction or
manual edits can leave results whose call is gone. Providers reject both. ``valid_history``
drops results without a matching call and assistant tool batches whose results are
incomplete (together with the partial results), keeping everything else in order.

``keep_open_tail=True`` keeps an incomplete batch at the very end (the last assistant
message with tool calls, followed only by some of its results): that is a session paused
in a wait that outlived its process, which ``Agent.resume_stream`` continues. A
persistence extension restores with it when the request is a resume.
"""

from __future__ import annotations

from collections.abc import Iterable

from zett_agent.messages import AnyMessage, AssistantMessage, ToolMessage

__all__ = ["valid_history"]


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
