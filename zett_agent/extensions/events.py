"""Notifications published to extensions through ``on_event``.

The runtime publishes ``PhaseTransitionEvent`` on every phase move, ``MessageAppendedEvent``
for every message that enters the context, and ``RunCancelledEvent`` when a request is
cancelled. Extensions publish ``SteeringMessageEvent`` / ``InternalMessageEvent`` to redirect
a running request, and ``CompactionEvent`` after replacing older context with a summary.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from zett_agent.events import AgentPhase
from zett_agent.messages import AgentMessage, AnyMessage, UserMessage

__all__ = [
    "CompactionEvent",
    "ExtensionEvent",
    "InternalMessageEvent",
    "MessageAppendedEvent",
    "MessageTiming",
    "PhaseTransitionEvent",
    "RunCancelledEvent",
    "SteeringMessageEvent",
]


class ExtensionEvent:
    """Base class of everything delivered to ``AgentExtension.on_event``."""

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class MessageTiming:
    """When a message entered the context."""

    #: Wall-clock time (UTC).
    occurred_at: datetime
    #: ``time.monotonic_ns()`` at the same instant, for ordering and durations.
    monotonic_ns: int


@dataclass(frozen=True, slots=True)
class MessageAppendedEvent(ExtensionEvent):
    """A message entered the request's context (input, answer, tool result, added message)."""

    message: AnyMessage
    timing: MessageTiming


@dataclass(frozen=True, slots=True)
class PhaseTransitionEvent(ExtensionEvent):
    """The request moved from ``previous_phase`` to ``current_phase``."""

    previous_phase: AgentPhase
    current_phase: AgentPhase
    occurred_at: datetime
    monotonic_ns: int


@dataclass(frozen=True, slots=True)
class RunCancelledEvent(ExtensionEvent):
    """The request was cancelled while in ``previous_phase``; ``on_error`` is not called."""

    previous_phase: AgentPhase
    occurred_at: datetime
    monotonic_ns: int


@dataclass(frozen=True, slots=True)
class SteeringMessageEvent(ExtensionEvent):
    """Redirect the running request with a new user message."""

    message: UserMessage

    def __post_init__(self) -> None:
        if not isinstance(self.message, UserMessage):
            raise TypeError(
                f"SteeringMessageEvent needs a UserMessage, got {type(self.message).__name__}"
            )


@dataclass(frozen=True, slots=True)
class InternalMessageEvent(ExtensionEvent):
    """Queue an application instruction, answered at the request's next final answer."""

    message: AgentMessage

    def __post_init__(self) -> None:
        if not isinstance(self.message, AgentMessage):
            raise TypeError(
                f"InternalMessageEvent needs an AgentMessage, got {type(self.message).__name__}"
            )


@dataclass(frozen=True, slots=True)
class CompactionEvent(ExtensionEvent):
    """Older context was summarised into one checkpoint message."""

    #: The checkpoint that now stands for the replaced messages.
    summary: AgentMessage
    #: The messages the checkpoint replaced, in order.
    replaced: tuple[AnyMessage, ...]
    #: The complete context after compaction, in order.
    messages: tuple[AnyMessage, ...]
    tokens_before: int
    tokens_after: int
    occurred_at: datetime = field(default_factory=lambda: datetime.now().astimezone())
