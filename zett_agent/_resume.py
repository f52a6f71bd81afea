"""Resuming a session whose history ends in open tool calls (``Agent.resume_stream``).

A request that paused in an external wait (a question, an approval) may outlive its
process: a restart or a crash leaves the session's stored history ending in an assistant
message whose tool calls have no results. A resumed request restores that history like any
request (``on_tool``, ``on_state``; no input message), then:

- the *open calls* are the tool calls of the last ``AssistantMessage`` that have no
  ``ToolMessage`` after it, provided only tool results (or system messages) follow it. They
  run one at a time in model order exactly as a turn's tool phase runs them, then
  ``after_turn(that message)``, then the normal turn loop continues;
- with no open calls, a history that ends with a user or agent message or a settled tool
  batch simply continues with a model call;
- a history that is empty or ends with a final answer has nothing to resume: the request
  fails with ``AgentProtocolError`` through the normal failure path.

Replies that arrived while nobody was waiting are checked after ``on_state`` against the
open calls (``Resumption.assign``) and handed to the extension's wait when it registers
(``ExternalEventExtension._wait_for_external_event``); deadlines supplied by the caller
replace ``now + timeout`` for the waits they name.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from zett_agent.events import ExternalEvent
from zett_agent.exceptions import AgentProtocolError
from zett_agent.extensions.external import ExternalEventExtension
from zett_agent.messages import AnyMessage, AssistantMessage, SystemMessage, ToolCall, ToolMessage

if TYPE_CHECKING:
    from zett_agent.extensions.base import AgentExtension

__all__ = ["ResumePoint", "Resumption", "open_tail", "resume_point"]


@dataclass(frozen=True, slots=True)
class ResumePoint:
    """Where a resumed request continues."""

    #: The assistant message whose calls are still open, or None (continue with a model call).
    message: AssistantMessage | None
    #: Its calls without a result, in model order.
    open_calls: tuple[ToolCall, ...]


def open_tail(
    messages: Sequence[AnyMessage],
) -> tuple[AssistantMessage | None, tuple[ToolCall, ...]]:
    """The last assistant message with tool calls still open, and those calls, if any.

    Looks only at the end of ``messages`` (the trailing tool results and system messages),
    so it costs as much as that tail, not the whole history.
    """
    index = len(messages) - 1
    while index >= 0 and isinstance(messages[index], ToolMessage | SystemMessage):
        index -= 1
    if index < 0:
        return None, ()
    message = messages[index]
    if not isinstance(message, AssistantMessage) or not message.tool_calls:
        return None, ()
    answered = {
        result.tool_call_id for result in messages[index + 1 :] if isinstance(result, ToolMessage)
    }
    calls = tuple(call for call in message.tool_calls if call.id not in answered)
    return (message, calls) if calls else (None, ())


def resume_point(messages: Sequence[AnyMessage]) -> ResumePoint:
    """Where to continue ``messages``; ``AgentProtocolError`` when there is nothing to resume."""
    last = next((m for m in reversed(messages) if not isinstance(m, SystemMessage)), None)
    if last is None:
        raise AgentProtocolError("There is nothing to resume: the session has no history")
    if isinstance(last, AssistantMessage) and not last.tool_calls:
        raise AgentProtocolError(
            "There is nothing to resume: the session's history ends with a final answer; "
            "send a new message instead"
        )
    message, calls = open_tail(messages)
    return ResumePoint(message, calls)


def _describe(reply: ExternalEvent) -> str:
    fields = ", ".join(f"{key}={value!r}" for key, value in list(reply.payload.items())[:3])
    return f"{reply.name!r} ({fields})"


class Resumption:
    """The replies and deadlines a resumed request brings; read by external-event waits."""

    __slots__ = ("_assigned", "_deadlines", "_replies")

    def __init__(
        self, replies: Iterable[ExternalEvent], deadlines: Mapping[str, datetime] | None
    ) -> None:
        self._replies = tuple(replies)
        for reply in self._replies:
            if not isinstance(reply, ExternalEvent):
                raise TypeError(f"replies must be ExternalEvent objects, got {reply!r}")
        if deadlines is not None and not isinstance(deadlines, Mapping):
            raise TypeError(
                f"deadlines must map correlation ids to datetimes, got {type(deadlines).__name__}"
            )
        self._deadlines: dict[str, datetime] = {}
        for key, moment in (deadlines or {}).items():
            if not isinstance(key, str) or not key.strip():
                raise TypeError(f"deadlines keys must be correlation ids (str), got {key!r}")
            if not isinstance(moment, datetime):
                raise TypeError(f"deadline of {key!r} must be a datetime, got {moment!r}")
            if moment.tzinfo is None or moment.utcoffset() is None:
                raise ValueError(f"deadline of {key!r} must be timezone-aware, got {moment!r}")
            self._deadlines[key] = moment.astimezone(UTC)
        self._assigned: dict[str, tuple[ExternalEventExtension, ExternalEvent]] = {}

    def assign(self, extensions: Iterable[AgentExtension], open_calls: Sequence[ToolCall]) -> None:
        """Match every reply to the open call it answers; ``AgentProtocolError`` otherwise."""
        waiting = [ext for ext in extensions if isinstance(ext, ExternalEventExtension)]
        open_ids = [call.id for call in open_calls]
        for reply in self._replies:
            candidates = [ext for ext in waiting if reply.name in ext.response_event_names]
            if not candidates:
                raise AgentProtocolError(
                    f"Cannot resume with reply {_describe(reply)}: no registered "
                    f"ExternalEventExtension accepts replies named {reply.name!r}"
                )
            match: tuple[ExternalEventExtension, str] | None = None
            for extension in candidates:
                value = reply.payload.get(extension.correlation_field)
                if isinstance(value, str) and value in open_ids:
                    match = (extension, value)
                    break
            if match is None:
                raise AgentProtocolError(
                    f"Cannot resume with reply {_describe(reply)}: it answers none of the open "
                    f"tool calls {open_ids} (stale: the call already has a result, or a wrong id)"
                )
            extension, call_id = match
            if call_id in self._assigned:
                raise AgentProtocolError(
                    f"Cannot resume with reply {_describe(reply)}: tool call {call_id!r} "
                    "already has a reply in this resume"
                )
            self._assigned[call_id] = (extension, reply)

    def take_reply(
        self, extension: ExternalEventExtension, correlation_id: str
    ) -> ExternalEvent | None:
        """Pop the reply known for ``correlation_id`` if it belongs to ``extension``."""
        entry = self._assigned.get(correlation_id)
        if entry is None or entry[0] is not extension:
            return None
        del self._assigned[correlation_id]
        return entry[1]

    def deadline(self, correlation_id: str) -> datetime | None:
        """The deadline the caller supplied for ``correlation_id``, if any."""
        return self._deadlines.get(correlation_id)
