"""Reading the raw Messages stream of ``AnthropicModel``: events in, model events out.

Each raw event (``message_start``, ``content_block_start/delta/stop``, ``message_delta``,
``message_stop``) becomes at most one model event, in order; the blocks are kept by index so
``finish`` can assemble the message, its usage and its stop reason once the stream ends. The
choices behind the mapping are listed in ``zett_agent.providers.anthropic``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from zett_agent.messages import AssistantMessage, ToolCall
from zett_agent.model import (
    ModelEvent,
    ModelResponse,
    ModelUsage,
    ServerToolCall,
    ServerToolInputDelta,
    ServerToolResult,
    StopInfo,
    StopReason,
    ToolCallDelta,
)
from zett_agent.providers.base import ProviderResponseError, parse_tool_arguments

__all__ = ["PROVIDER", "REDACTED_ATTRIBUTE", "SIGNATURE_ATTRIBUTE", "MessageStreamReader"]

PROVIDER = "anthropic"
#: Where the signature of a response's thinking block is kept for replay.
SIGNATURE_ATTRIBUTE = "anthropic_thinking_signature"
#: Where the opaque data of redacted thinking blocks is kept for replay.
REDACTED_ATTRIBUTE = "anthropic_redacted_thinking"

_NORMAL_STOPS = frozenset({"end_turn", "tool_use", "stop_sequence"})
_ABNORMAL_STOPS = {
    "max_tokens": StopReason.MAX_TOKENS,
    "model_context_window_exceeded": StopReason.MAX_TOKENS,
    "refusal": StopReason.REFUSAL,
    "pause_turn": StopReason.OTHER,
}


@dataclass(slots=True)
class _Block:
    type: str
    id: str = ""
    name: str = ""
    #: Position among the response's tool calls (``tool_use`` blocks only).
    ordinal: int = -1
    text: list[str] = field(default_factory=list)
    json: list[str] = field(default_factory=list)
    input: dict[str, Any] = field(default_factory=dict)
    signature: str = ""
    data: str = ""


class MessageStreamReader:
    """Turns raw Messages stream events into model events and, at the end, the response."""

    def __init__(self, model: str) -> None:
        self.model = model
        self.response_id: str | None = None
        self._blocks: dict[int, _Block] = {}
        self._tool_calls = 0
        self._server_tool_names: dict[str, str] = {}
        self._usage: dict[str, int] = {}
        self._stop_reason: str | None = None
        self._stop_details: dict[str, Any] = {}

    def feed(self, event: Any) -> list[ModelEvent]:
        """Events for one raw stream event."""
        kind = getattr(event, "type", None)
        if kind == "message_start":
            message = event.message
            self.model = getattr(message, "model", None) or self.model
            response_id = getattr(message, "id", None)
            if isinstance(response_id, str) and response_id:
                self.response_id = response_id
            self._record_usage(getattr(message, "usage", None))
        elif kind == "content_block_start":
            return self._start(event.index, _plain(event.content_block))
        elif kind == "content_block_delta":
            return self._delta(event.index, event.delta)
        elif kind == "message_delta":
            self._stop_reason = getattr(event.delta, "stop_reason", None) or self._stop_reason
            details = getattr(event.delta, "stop_details", None)
            if details is not None:
                self._stop_details = _plain(details)
            self._record_usage(getattr(event, "usage", None))
        return []

    def _start(self, index: int, block: dict[str, Any]) -> list[ModelEvent]:
        kind = str(block.get("type", ""))
        entry = _Block(kind, id=str(block.get("id") or ""), name=str(block.get("name") or ""))
        self._blocks[index] = entry
        if kind in ("text", "thinking"):
            initial = block.get(kind) or ""
            entry.text.append(initial)
            entry.signature = block.get("signature") or ""
            if not initial:
                return []
            return [ModelEvent.text(initial) if kind == "text" else ModelEvent.reasoning(initial)]
        if kind == "redacted_thinking":
            entry.data = str(block.get("data") or "")
        elif kind == "tool_use":
            entry.ordinal = self._tool_calls
            self._tool_calls += 1
            entry.input = block.get("input") or {}
            delta = ToolCallDelta(entry.ordinal, id=entry.id, name=entry.name)
            return [ModelEvent.tool_call(delta)]
        elif kind == "server_tool_use":
            self._server_tool_names[entry.id] = entry.name
            call = ServerToolCall(entry.id, entry.name, block.get("input") or {})
            return [ModelEvent.server_tool_started(call)]
        elif kind.endswith("_tool_result") and block.get("tool_use_id"):
            return [self._server_tool_result(kind, block)]
        return []

    def _server_tool_result(self, kind: str, block: dict[str, Any]) -> ModelEvent:
        call_id = str(block["tool_use_id"])
        name = self._server_tool_names.get(call_id) or kind.removesuffix("_tool_result")
        content = block.get("content")
        if isinstance(content, dict) and str(content.get("type", "")).endswith("_error"):
            error = str(content.get("error_code") or content["type"])
            return ModelEvent.server_tool_failed(ServerToolResult(call_id, name, content, error))
        return ModelEvent.server_tool_completed(ServerToolResult(call_id, name, content))

    def _delta(self, index: int, delta: Any) -> list[ModelEvent]:
        block = self._blocks.get(index)
        if block is None:
            raise ProviderResponseError(
                f"Anthropic sent a delta for content block {index} before starting it.",
                provider=PROVIDER,
            )
        kind = getattr(delta, "type", None)
        if kind == "text_delta" and delta.text:
            block.text.append(delta.text)
            return [ModelEvent.text(delta.text)]
        if kind == "thinking_delta" and delta.thinking:
            block.text.append(delta.thinking)
            return [ModelEvent.reasoning(delta.thinking)]
        if kind == "signature_delta":
            block.signature += delta.signature or ""
        elif kind == "input_json_delta" and delta.partial_json:
            block.json.append(delta.partial_json)
            if block.type == "tool_use":
                fragment = ToolCallDelta(block.ordinal, arguments_delta=delta.partial_json)
                return [ModelEvent.tool_call(fragment)]
            if block.type == "server_tool_use":
                piece = ServerToolInputDelta(block.id, delta.partial_json)
                return [ModelEvent.server_tool_input(piece)]
        return []

    def _record_usage(self, usage: Any) -> None:
        if usage is None:
            return
        for name in (
            "input_tokens",
            "output_tokens",
            "cache_read_input_tokens",
            "cache_creation_input_tokens",
        ):
            value = getattr(usage, name, None)
            if isinstance(value, int):
                self._usage[name] = value
        details = getattr(usage, "output_tokens_details", None)
        thinking = getattr(details, "thinking_tokens", None)
        if isinstance(thinking, int):
            self._usage["thinking_tokens"] = thinking

    def finish(self) -> ModelResponse:
        """The complete response; raises ProviderResponseError for a cut or broken stream."""
        if self._stop_reason is None:
            raise ProviderResponseError(
                "The Anthropic stream ended without a stop reason: the connection was cut "
                "before the model finished.",
                provider=PROVIDER,
            )
        blocks = [self._blocks[index] for index in sorted(self._blocks)]
        thinking = [block for block in blocks if block.type == "thinking"]
        attributes: dict[str, Any] = {}
        if len(thinking) == 1 and thinking[0].signature:
            attributes[SIGNATURE_ATTRIBUTE] = thinking[0].signature
        redacted = [block.data for block in blocks if block.type == "redacted_thinking"]
        if redacted:
            attributes[REDACTED_ATTRIBUTE] = redacted
        message = AssistantMessage(
            content="".join("".join(block.text) for block in blocks if block.type == "text"),
            reasoning="".join("".join(block.text) for block in thinking) or None,
            tool_calls=tuple(self._tool_call(b) for b in blocks if b.type == "tool_use"),
            provider=PROVIDER,
            model=self.model,
            attributes=attributes,
        )
        return ModelResponse(
            message,
            finish_reason=self._stop_reason,
            usage=self._model_usage(),
            stop=self._stop(),
            response_id=self.response_id,
        )

    def _stop(self) -> StopInfo | None:
        reason = self._stop_reason
        if reason in _NORMAL_STOPS:
            return None
        if reason == "refusal":
            explanation = self._stop_details.get("explanation") or self._stop_details.get(
                "category"
            )
            return StopInfo(StopReason.REFUSAL, str(explanation or reason))
        return StopInfo(_ABNORMAL_STOPS.get(str(reason), StopReason.OTHER), reason)

    @staticmethod
    def _tool_call(block: _Block) -> ToolCall:
        if not block.json:
            return ToolCall(block.id, block.name, dict(block.input))
        arguments = parse_tool_arguments(
            "".join(block.json), provider=PROVIDER, name=block.name, call_id=block.id
        )
        return ToolCall(block.id, block.name, arguments)

    def _model_usage(self) -> ModelUsage:
        cache_read = self._usage.get("cache_read_input_tokens", 0)
        cache_write = self._usage.get("cache_creation_input_tokens", 0)
        return ModelUsage(
            input_tokens=self._usage.get("input_tokens", 0) + cache_read + cache_write,
            output_tokens=self._usage.get("output_tokens", 0),
            cache_read_tokens=cache_read,
            cache_write_tokens=cache_write,
            reasoning_tokens=self._usage.get("thinking_tokens", 0),
        )


def _plain(value: Any) -> Any:
    """JSON-safe data of an SDK model, as the API sent it (the SDK may mistype new kinds)."""
    if hasattr(value, "to_dict"):
        return value.to_dict(mode="json", warnings=False)
    if isinstance(value, list):
        return [_plain(item) for item in value]
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    return value
