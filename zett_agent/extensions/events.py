"""Notifications published to extensions through ``on_event``.

The runtime publishes ``PhaseTransitionEvent`` on every phase move, ``MessageAppendedEvent``
for every message that enters the context, and ``RunCancelledEvent`` when a request is
cancelled. Extensions publish ``SteeringMessageEvent`` / ``InternalMessageEvent`` to redirect
a running request, and ``CompactionEvent`` after replacing older context with a summary.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

from zett_agent.messages import (
    AgentMessage,
    AnyMessage,
    AssistantMessage,
    CompactedMessage,
    UserMessage,
)
from zett_agent.model import ModelUsage
from zett_agent.phases import AgentPhase

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
    """How long the work that produced a message took (UTC times, monotonic durations).

    For an assistant message the span is the model call (into GENERATING and back to
    READY), with the reasoning and content segments when the model streamed them; for a
    tool result it is the call (RUNNING_TOOL and back). Any other message took no
    measured time (``MessageTiming.instant()``). Durations come from the monotonic clock,
    so a wall-clock correction never makes them negative.
    """

    started_at: datetime
    completed_at: datetime
    duration_ns: int
    reasoning_started_at: datetime | None = None
    reasoning_completed_at: datetime | None = None
    reasoning_duration_ns: int | None = None
    content_started_at: datetime | None = None
    content_completed_at: datetime | None = None
    content_duration_ns: int | None = None

    def __post_init__(self) -> None:
        if self.duration_ns < 0:
            raise ValueError(f"duration_ns cannot be negative, got {self.duration_ns}")
        for span in ("reasoning", "content"):
            values = (
                getattr(self, f"{span}_started_at"),
                getattr(self, f"{span}_completed_at"),
                getattr(self, f"{span}_duration_ns"),
            )
            given = [value is not None for value in values]
            if any(given) and not all(given):
                raise ValueError(f"{span} timing fields must be supplied together")
            if values[2] is not None and values[2] < 0:
                raise ValueError(f"{span}_duration_ns cannot be negative, got {values[2]}")

    @classmethod
    def instant(cls) -> MessageTiming:
        """A message that took no measured time: started and completed now."""
        now = datetime.now(UTC)
        return _measured(now, now, 0, None, None)

    @property
    def occurred_at(self) -> datetime:
        """When the message was ready (``completed_at``)."""
        return self.completed_at


_TIMING_SETTERS = tuple(
    getattr(MessageTiming, name).__set__ for name in MessageTiming.__dataclass_fields__
)


def _measured(
    started_at: datetime,
    completed_at: datetime,
    duration_ns: int,
    reasoning: tuple[datetime, datetime, int] | None,
    content: tuple[datetime, datetime, int] | None,
) -> MessageTiming:
    """A timing the runtime measured itself (consistent by construction): no validation.

    One per appended message, so it fills the slots directly instead of going through the
    frozen dataclass ``__init__`` and its checks.
    """
    timing = object.__new__(MessageTiming)
    s_start, s_end, s_duration, r_start, r_end, r_duration, c_start, c_end, c_duration = (
        _TIMING_SETTERS
    )
    s_start(timing, started_at)
    s_end(timing, completed_at)
    s_duration(timing, duration_ns)
    if reasoning is None:
        r_start(timing, None)
        r_end(timing, None)
        r_duration(timing, None)
    else:
        r_start(timing, reasoning[0])
        r_end(timing, reasoning[1])
        r_duration(timing, reasoning[2])
    if content is None:
        c_start(timing, None)
        c_end(timing, None)
        c_duration(timing, None)
    else:
        c_start(timing, content[0])
        c_end(timing, content[1])
        c_duration(timing, content[2])
    return timing


@dataclass(frozen=True, slots=True)
class MessageAppendedEvent(ExtensionEvent):
    """A message entered the request's context (input, answer, tool result, added message).

    ``usage`` is the model call's token usage for an assistant answer, else None.
    """

    message: AnyMessage
    timing: MessageTiming
    usage: ModelUsage | None = None

    def __post_init__(self) -> None:
        if self.usage is not None and not isinstance(self.message, AssistantMessage):
            raise ValueError(
                f"usage belongs to an assistant answer, not to a {type(self.message).__name__}"
            )


@dataclass(frozen=True, slots=True)
class PhaseTransitionEvent(ExtensionEvent):
    """The request moved from ``previous_phase`` to ``current_phase``."""

    previous_phase: AgentPhase
    current_phase: AgentPhase
    occurred_at: datetime
    monotonic_ns: int


def _moved(
    previous: AgentPhase, current: AgentPhase, occurred_at: datetime, monotonic_ns: int
) -> PhaseTransitionEvent:
    """A ``PhaseTransitionEvent`` of the runtime's own move, its slots filled directly.

    One per phase move while any extension listens, so it skips the frozen dataclass
    ``__init__`` (which sets each field through ``object.__setattr__``), as ``_measured``
    does; ``tests/runtime/test_events.py`` compares the two.
    """
    event = object.__new__(PhaseTransitionEvent)
    set_previous, set_current, set_at, set_ns = _PHASE_SETTERS
    set_previous(event, previous)
    set_current(event, current)
    set_at(event, occurred_at)
    set_ns(event, monotonic_ns)
    return event


def _appended(
    message: AnyMessage, timing: MessageTiming, usage: ModelUsage | None
) -> MessageAppendedEvent:
    """A ``MessageAppendedEvent`` of the runtime's own append, its slots filled directly
    (the runtime gives ``usage`` to assistant answers only, which the check is about)."""
    event = object.__new__(MessageAppendedEvent)
    set_message, set_timing, set_usage = _APPENDED_SETTERS
    set_message(event, message)
    set_timing(event, timing)
    set_usage(event, usage)
    return event


_PHASE_SETTERS = tuple(
    getattr(PhaseTransitionEvent, name).__set__
    for name in PhaseTransitionEvent.__dataclass_fields__
)
_APPENDED_SETTERS = tuple(
    getattr(MessageAppendedEvent, name).__set__
    for name in MessageAppendedEvent.__dataclass_fields__
)


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
    """Older context was summarised into one checkpoint message.

    The ranges are one-based and inclusive, in the list of non-system messages just before
    the compaction (an earlier checkpoint counts as one message): ``compressed_*`` were
    folded into the checkpoint, ``kept_*`` stay as they were. ``summary`` is the
    checkpoint's exact content. The keyword fields carry the messages themselves, for
    memory and persistence; an event built with the positional fields only (as upstream's
    code publishes it) leaves them empty.
    """

    compressed_from: int
    compressed_to: int
    kept_from: int
    kept_to: int
    summary: str
    #: The checkpoint that now stands for the replaced messages.
    checkpoint: CompactedMessage | None = field(default=None, kw_only=True)
    #: The messages the checkpoint replaced, in order.
    replaced: tuple[AnyMessage, ...] = field(default=(), kw_only=True)
    #: The complete context after compaction, in order.
    messages: tuple[AnyMessage, ...] = field(default=(), kw_only=True)
    tokens_before: int = field(default=0, kw_only=True)
    tokens_after: int = field(default=0, kw_only=True)
    occurred_at: datetime = field(default_factory=lambda: datetime.now(UTC), kw_only=True)
