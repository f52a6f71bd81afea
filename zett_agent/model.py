"""The model protocol: what the runtime sends to a model and what it reads back.

A model is any object with ``stream(request) -> AsyncIterator[ModelEvent]``, usually an async
generator. A valid stream is zero or more deltas followed by exactly one ``completed`` event.
Deltas are display data; the ``ModelResponse`` carried by ``completed`` is the truth the
runtime appends to the conversation. The runtime closes the stream (``aclose``) whenever it
stops reading early, so an adapter releases its HTTP response in ``finally``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol, runtime_checkable

from zett_agent.messages import AnyMessage, AssistantMessage

__all__ = [
    "AgentModel",
    "ModelEvent",
    "ModelEventType",
    "ModelRequest",
    "ModelResponse",
    "ModelUsage",
    "ReasoningEffort",
    "ServerToolCall",
    "ServerToolDefinition",
    "ServerToolInputDelta",
    "ServerToolResult",
    "StopInfo",
    "StopReason",
    "ToolCallDelta",
    "ToolDefinition",
]


class ReasoningEffort(StrEnum):
    """How hard a reasoning model should think; adapters map it to their provider's knob."""

    NONE = "none"
    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"


class StopReason(StrEnum):
    """Why generation ended abnormally."""

    MAX_TOKENS = "max_tokens"
    CONTENT_FILTER = "content_filter"
    REFUSAL = "refusal"
    OTHER = "other"


@dataclass(frozen=True, slots=True)
class StopInfo:
    """An abnormal end of generation; set on ``ModelResponse.stop`` by the model."""

    reason: StopReason
    #: Provider wording, e.g. the raw finish reason.
    detail: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.reason, StopReason):
            object.__setattr__(self, "reason", StopReason(self.reason))


@dataclass(frozen=True, slots=True)
class ToolDefinition:
    """A local tool as offered to the model: name, description and JSON Schema parameters."""

    name: str
    description: str
    parameters: dict[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})


@dataclass(frozen=True, slots=True)
class ServerToolDefinition:
    """A provider-hosted tool (web search, code execution…). The runtime never executes it."""

    type: str
    configuration: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.type, str) or not self.type.strip():
            raise ValueError("ServerToolDefinition.type cannot be empty")
        if "type" in self.configuration:
            raise ValueError(
                "Server tool configuration cannot override type: give it as "
                "ServerToolDefinition(type=...)"
            )


@dataclass(frozen=True, slots=True)
class ToolCallDelta:
    """A fragment of a tool call being generated. Display only, never executed."""

    #: Position of the call within the response (several calls may stream interleaved).
    index: int
    id: str | None = None
    name: str | None = None
    #: The next fragment of the JSON arguments text.
    arguments_delta: str = ""


@dataclass(frozen=True, slots=True)
class ServerToolCall:
    """A provider-hosted tool invocation that has started."""

    id: str
    name: str
    input: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ServerToolInputDelta:
    """A fragment of a provider-hosted tool's input, correlated by call id."""

    call_id: str
    delta: str


@dataclass(frozen=True, slots=True)
class ServerToolResult:
    """The terminal output (or structured failure) of a provider-hosted tool."""

    call_id: str
    name: str
    output: Any = None
    #: Set when the provider reports a failure.
    error: str | None = None


@dataclass(frozen=True, slots=True)
class ModelUsage:
    """Token counts for one model call. All counts are non-negative integers."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0

    def __post_init__(self) -> None:
        for name in (
            "input_tokens",
            "output_tokens",
            "cache_read_tokens",
            "cache_write_tokens",
            "reasoning_tokens",
        ):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool):
                raise TypeError(f"{name} must be an int, got {type(value).__name__}")
            if value < 0:
                raise ValueError(f"{name} must be >= 0, got {value}")

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens."""
        return self.input_tokens + self.output_tokens

    def __add__(self, other: ModelUsage) -> ModelUsage:
        if not isinstance(other, ModelUsage):
            return NotImplemented
        return ModelUsage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cache_read_tokens + other.cache_read_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
            self.reasoning_tokens + other.reasoning_tokens,
        )


@dataclass(frozen=True, slots=True)
class ModelResponse:
    """The complete result of one model call."""

    message: AssistantMessage
    #: The provider's raw finish reason (``"stop"``, ``"tool_calls"``, ``"length"`` …).
    finish_reason: str | None = None
    usage: ModelUsage = field(default_factory=ModelUsage)
    #: Set only when generation ended abnormally; the runtime then emits MODEL_STOPPED.
    stop: StopInfo | None = None
    #: The provider's id of this response (``chatcmpl-…``, ``msg_…``), when it gave one.
    response_id: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.message, AssistantMessage):
            raise TypeError(
                f"ModelResponse.message must be an AssistantMessage, "
                f"got {type(self.message).__name__}"
            )


@dataclass(frozen=True, slots=True)
class ModelRequest:
    """Everything one model call sees. Frozen: edit the context, not the request."""

    messages: tuple[AnyMessage, ...]
    tools: tuple[ToolDefinition, ...] = ()
    server_tools: tuple[ServerToolDefinition, ...] = ()
    reasoning_effort: ReasoningEffort = ReasoningEffort.MEDIUM
    #: ``None`` (model decides), ``"auto"``, ``"none"``, ``"required"`` or a tool name.
    tool_choice: str | None = None
    #: Stable key for provider prompt caching, usually the session id; never blank.
    cache_key: str | None = None

    def __post_init__(self) -> None:
        key = self.cache_key
        if key is not None and (not isinstance(key, str) or not key.strip()):
            raise ValueError(f"cache_key must be a non-empty string when supplied, got {key!r}")


def runtime_request(
    messages: tuple[AnyMessage, ...],
    tools: tuple[ToolDefinition, ...],
    server_tools: tuple[ServerToolDefinition, ...],
    cache_key: str,
) -> ModelRequest:
    """``ModelRequest(messages, tools, server_tools, cache_key=cache_key)``, faster.

    For the runtime's own request of each model call, whose ``cache_key`` is the session id
    (never blank): the frozen slots are filled directly, without the generated
    ``__init__``'s keyword handling and the check, in about half the time. The other fields
    take their defaults; ``tests/runtime/test_model.py`` compares the two field by field.
    """
    request = _new(ModelRequest)
    _set(request, "messages", messages)
    _set(request, "tools", tools)
    _set(request, "server_tools", server_tools)
    _set(request, "reasoning_effort", _MEDIUM)
    _set(request, "tool_choice", None)
    _set(request, "cache_key", cache_key)
    return request


_new = object.__new__
_set = object.__setattr__
_MEDIUM = ReasoningEffort.MEDIUM


class ModelEventType(StrEnum):
    """Kinds of items in a model stream.

    Each kind also answers to the upstream library's name (``TEXT_DELTA`` is ``TEXT``,
    ``RESPONSE`` is ``COMPLETED`` …): the same member, so either spelling matches.
    """

    TEXT = "text"
    REASONING = "reasoning"
    TOOL_CALL = "tool_call"
    SERVER_TOOL_STARTED = "server_tool_started"
    SERVER_TOOL_INPUT = "server_tool_input"
    SERVER_TOOL_COMPLETED = "server_tool_completed"
    SERVER_TOOL_FAILED = "server_tool_failed"
    COMPLETED = "completed"
    # Aliases: the names upstream's adapters and tests use.
    TEXT_DELTA = "text"
    REASONING_DELTA = "reasoning"
    TOOL_CALL_DELTA = "tool_call"
    SERVER_TOOL_INPUT_DELTA = "server_tool_input"
    RESPONSE = "completed"


@dataclass(frozen=True, slots=True)
class ModelEvent:
    """One item of a model stream; build it with the class-method factories."""

    type: ModelEventType
    delta: str = ""
    tool_call_delta: ToolCallDelta | None = None
    server_tool_call: ServerToolCall | None = None
    server_tool_input_delta: ServerToolInputDelta | None = None
    server_tool_result: ServerToolResult | None = None
    response: ModelResponse | None = None

    @classmethod
    def text(cls, delta: str) -> ModelEvent:
        if cls is ModelEvent:
            return _model_event(ModelEventType.TEXT, delta, None, None)
        return cls(ModelEventType.TEXT, delta=delta)

    @classmethod
    def reasoning(cls, delta: str) -> ModelEvent:
        if cls is ModelEvent:
            return _model_event(ModelEventType.REASONING, delta, None, None)
        return cls(ModelEventType.REASONING, delta=delta)

    @classmethod
    def tool_call(cls, delta: ToolCallDelta) -> ModelEvent:
        if cls is ModelEvent:
            return _model_event(ModelEventType.TOOL_CALL, "", delta, None)
        return cls(ModelEventType.TOOL_CALL, tool_call_delta=delta)

    @classmethod
    def server_tool_started(cls, call: ServerToolCall) -> ModelEvent:
        return cls(ModelEventType.SERVER_TOOL_STARTED, server_tool_call=call)

    @classmethod
    def server_tool_input(cls, delta: ServerToolInputDelta) -> ModelEvent:
        return cls(ModelEventType.SERVER_TOOL_INPUT, server_tool_input_delta=delta)

    @classmethod
    def server_tool_completed(cls, result: ServerToolResult) -> ModelEvent:
        return cls(ModelEventType.SERVER_TOOL_COMPLETED, server_tool_result=result)

    @classmethod
    def server_tool_failed(cls, result: ServerToolResult) -> ModelEvent:
        return cls(ModelEventType.SERVER_TOOL_FAILED, server_tool_result=result)

    @classmethod
    def completed(cls, response: ModelResponse) -> ModelEvent:
        if cls is ModelEvent:
            return _model_event(ModelEventType.COMPLETED, "", None, response)
        return cls(ModelEventType.COMPLETED, response=response)


# The hot factories (one call per streamed delta) fill the slots directly: the frozen
# dataclass __init__ goes through object.__setattr__ once per field, twice as slow.
_SLOT_SETTERS = tuple(
    getattr(ModelEvent, name).__set__
    for name in (
        "type",
        "delta",
        "tool_call_delta",
        "response",
        "server_tool_call",
        "server_tool_input_delta",
        "server_tool_result",
    )
)


def _model_event(
    kind: ModelEventType,
    delta: str,
    tool_call_delta: ToolCallDelta | None,
    response: ModelResponse | None,
) -> ModelEvent:
    event = object.__new__(ModelEvent)
    set_type, set_delta, set_tool_call, set_response, set_call, set_input, set_result = (
        _SLOT_SETTERS
    )
    set_type(event, kind)
    set_delta(event, delta)
    set_tool_call(event, tool_call_delta)
    set_response(event, response)
    set_call(event, None)
    set_input(event, None)
    set_result(event, None)
    return event


@runtime_checkable
class AgentModel(Protocol):
    """The one-method seam between the runtime and a language model."""

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """Stream one response to ``request``: deltas, then exactly one ``completed``."""
        ...
