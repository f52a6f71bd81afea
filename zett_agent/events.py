"""The UI-facing event stream of ``Agent.stream()``.

``AgentPhase`` and ``check_transition`` (the request phase machine, ``zett_agent.phases``)
are importable from here too, where code written for upstream finds them.

Three channels exist and must not be confused:

- ``AgentEvent`` (this module): what a UI renders, yielded by ``Agent.stream()``;
- ``ExtensionEvent`` (``zett_agent.extensions.events``): notifications between the runtime
  and extensions, delivered to ``on_event``;
- ``ExternalEvent`` (this module, and ``zett_agent.extensions.external`` where the
  extension that waits for it lives): replies from outside the process, delivered through
  ``Agent.emit_external_event``.

Model failures and cancellation propagate as exceptions; they never become events.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from zett_agent.phases import AgentPhase, check_transition

if TYPE_CHECKING:
    from zett_agent.extensions.events import CompactionEvent
    from zett_agent.messages import (
        AgentMessage,
        AssistantMessage,
        ToolCall,
        ToolMessage,
        UserMessage,
    )
    from zett_agent.model import (
        ModelResponse,
        ServerToolCall,
        ServerToolInputDelta,
        ServerToolResult,
        StopInfo,
        ToolCallDelta,
    )

__all__ = [
    "AgentEvent",
    "AgentEventType",
    "AgentPhase",
    "ExternalEvent",
    "RelayedEvent",
    "check_transition",
]


class AgentEventType(StrEnum):
    """Every kind of ``AgentEvent``; the value is the lower-case member name."""

    MODEL_STARTED = "model_started"
    REASONING_STARTED = "reasoning_started"
    REASONING_DELTA = "reasoning_delta"
    REASONING_COMPLETED = "reasoning_completed"
    CONTENT_STARTED = "content_started"
    TEXT_DELTA = "text_delta"
    CONTENT_COMPLETED = "content_completed"
    TOOL_CALL_DELTA = "tool_call_delta"
    SERVER_TOOL_STARTED = "server_tool_started"
    SERVER_TOOL_INPUT_DELTA = "server_tool_input_delta"
    SERVER_TOOL_COMPLETED = "server_tool_completed"
    SERVER_TOOL_FAILED = "server_tool_failed"
    MODEL_COMPLETED = "model_completed"
    MODEL_STOPPED = "model_stopped"
    TOOL_STARTED = "tool_started"
    TOOL_COMPLETED = "tool_completed"
    TOOL_FAILED = "tool_failed"
    TOOL_SKIPPED = "tool_skipped"
    STEERING_STARTED = "steering_started"
    STEERING_COMPLETED = "steering_completed"
    STEERING_INTERRUPTED = "steering_interrupted"
    INTERNAL_MESSAGE_STARTED = "internal_message_started"
    INTERNAL_MESSAGE_COMPLETED = "internal_message_completed"
    INTERNAL_MESSAGE_INTERRUPTED = "internal_message_interrupted"
    COMPACTION_STARTED = "compaction_started"
    COMPACTION_TEXT_DELTA = "compaction_text_delta"
    COMPACTION_REASONING_DELTA = "compaction_reasoning_delta"
    COMPACTION_COMPLETED = "compaction_completed"
    RUN_COMPLETED = "run_completed"
    CUSTOM = "custom"


@dataclass
class AgentEvent:
    """One UI-facing event emitted by ``Agent.stream()``.

    Optional fields are populated according to ``type``; match the type first, then read::

        TEXT_DELTA / REASONING_DELTA   delta
        TOOL_CALL_DELTA                tool_call_delta
        TOOL_STARTED                   tool_calls
        TOOL_COMPLETED / FAILED        tool_calls, message, optional error
        TOOL_SKIPPED                   tool_calls, message
        SERVER_TOOL_STARTED            server_tool_call
        SERVER_TOOL_INPUT_DELTA        server_tool_input_delta
        SERVER_TOOL_COMPLETED / FAILED server_tool_result
        MODEL_COMPLETED                response
        MODEL_STOPPED                  stop, response, message
        STEERING_*                     steering_message
        INTERNAL_MESSAGE_*             internal_message
        INTERNAL_MESSAGE_COMPLETED     internal_message, message (the answer)
        COMPACTION_*_DELTA             delta
        COMPACTION_COMPLETED           applied, compaction
        RUN_COMPLETED                  message
        CUSTOM                         name, payload

    The fields' defaults live on the class (no ``__slots__``), so the runtime builds its
    own events by setting only the fields an event carries (``streamed_event``,
    ``runtime_event``); ``tool_calls`` is made, a fresh list, when first read.
    """

    type: AgentEventType
    #: Session that owns the run emitting this event.
    session_id: str
    #: Exclusive request phase when the event was queued; stamped by the runtime.
    phase: AgentPhase | None = None
    #: Incremental text or reasoning.
    delta: str = ""
    #: Incomplete tool arguments for display, never for execution.
    tool_call_delta: ToolCallDelta | None = None
    #: Complete invocations of a tool event; one item per event in sequential execution.
    tool_calls: list[ToolCall] = field(default_factory=list)
    server_tool_call: ServerToolCall | None = None
    server_tool_input_delta: ServerToolInputDelta | None = None
    server_tool_result: ServerToolResult | None = None
    #: Final model response, including usage.
    response: ModelResponse | None = None
    #: Why the model stopped; only MODEL_STOPPED.
    stop: StopInfo | None = None
    #: Tool result or final assistant answer.
    message: AssistantMessage | ToolMessage | None = None
    internal_message: AgentMessage | None = None
    steering_message: UserMessage | None = None
    #: Tool failure. Model and cancellation exceptions propagate instead.
    error: Exception | None = None
    #: Applied compaction details; only COMPACTION_COMPLETED.
    compaction: CompactionEvent | None = None
    #: Whether a completed compaction replaced context; None for other events.
    applied: bool | None = None
    #: Stable name of a CUSTOM event; required for CUSTOM.
    name: str | None = None
    #: Extension-owned, JSON-serializable data of a CUSTOM event.
    payload: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        kind = self.type
        if type(kind) is not AgentEventType:
            kind = self.type = AgentEventType(kind)
        if kind is AgentEventType.CUSTOM and (
            not isinstance(self.name, str) or not self.name.strip()
        ):
            raise ValueError("A CUSTOM AgentEvent requires a non-empty name")


class _FreshList:
    """The class-level default of ``AgentEvent.tool_calls``: a new list for each event,
    made and kept on the event when it is first read (the constructor sets its own)."""

    __slots__ = ()

    def __get__(self, event: AgentEvent | None, owner: type | None = None) -> Any:
        if event is None:
            return self
        fresh: list[ToolCall] = []
        event.__dict__["tool_calls"] = fresh
        return fresh


AgentEvent.tool_calls = _FreshList()  # type: ignore[assignment]


@dataclass(slots=True)
class RelayedEvent(AgentEvent):
    """An event of a sub-run (another agent's request that one of this request's tools
    runs), relayed into this request's stream by ``AgentRunContext.relay``: any type but
    ``RUN_COMPLETED``, its fields as the sub-run emitted them, plus who emitted it.
    """

    #: The id of the agent whose request emitted it.
    agent: str = ""
    #: The tool call of the relaying request that runs the sub-run.
    parent_tool_call_id: str = ""


def relayed(
    event: AgentEvent, session_id: str, agent: str, parent_tool_call_id: str
) -> RelayedEvent:
    """A copy of ``event`` as ``session_id``'s, marked as ``agent``'s under that call."""
    copy = _new(RelayedEvent)
    for name in _EVENT_FIELDS:
        setattr(copy, name, getattr(event, name))
    copy.session_id = session_id
    copy.agent = agent
    copy.parent_tool_call_id = parent_tool_call_id
    return copy


def streamed_event(
    kind: AgentEventType,
    session_id: str,
    delta: str = "",
    tool_call_delta: ToolCallDelta | None = None,
    phase: AgentPhase | None = None,
) -> AgentEvent:
    """``AgentEvent(kind, session_id, phase, delta, tool_call_delta)``, faster.

    For the runtime's own events of a known, non-CUSTOM ``kind`` (one per streamed model
    item): only the fields that differ from the class defaults are set, with no generated
    ``__init__`` and no ``__post_init__`` check, in a fraction of the time; the others read
    as the dataclass would have set them (``tool_calls`` a fresh list).
    ``tests/runtime/test_events.py`` compares the two field by field.
    """
    event = _new(AgentEvent)
    event.type = kind
    event.session_id = session_id
    event.phase = phase
    event.delta = delta
    if tool_call_delta is not None:
        event.tool_call_delta = tool_call_delta
    return event


def runtime_event(
    kind: AgentEventType,
    session_id: str,
    *,
    tool_calls: list[ToolCall] | None = None,
    response: ModelResponse | None = None,
    message: AssistantMessage | ToolMessage | None = None,
    error: Exception | None = None,
    phase: AgentPhase | None = None,
) -> AgentEvent:
    """``AgentEvent(kind, session_id, ...)`` for the runtime's own non-CUSTOM events, faster.

    Built as by ``streamed_event`` (only the fields given are set, no generated
    ``__init__``, no check), with the payload fields a tool, model or run event carries;
    ``tests/runtime/test_events.py`` compares it with the dataclass field by field.
    ``phase`` stamps it already, for an event handed over by ``emission`` directly.
    """
    event = _new(AgentEvent)
    event.type = kind
    event.session_id = session_id
    event.phase = phase
    if tool_calls is not None:
        event.tool_calls = tool_calls
    if response is not None:
        event.response = response
    if message is not None:
        event.message = message
    if error is not None:
        event.error = error
    return event


_new = object.__new__
_EVENT_FIELDS = tuple(AgentEvent.__dataclass_fields__)


@dataclass(frozen=True, slots=True)
class ExternalEvent:
    """A named reply from outside; ``payload`` is never modified by the runtime."""

    name: str
    payload: dict[str, Any]

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise ValueError(f"ExternalEvent name cannot be empty, got {self.name!r}")
        if not isinstance(self.payload, dict):
            raise TypeError(
                "ExternalEvent payload must be a dictionary with string keys, got "
                f"{type(self.payload).__name__}"
            )
        for key in self.payload:
            if not isinstance(key, str):
                raise TypeError(
                    f"ExternalEvent payload must be a dictionary with string keys, got key {key!r}"
                )
