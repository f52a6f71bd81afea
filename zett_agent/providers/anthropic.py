"""Anthropic Messages adapter, on the raw event stream of ``messages.create(stream=True)``.

The raw events (``message_start``, ``content_block_start/delta/stop``, ``message_delta``,
``message_stop``) map one-to-one onto model events, so this adapter reads them rather than the
SDK's higher-level stream helper. The ``anthropic`` SDK is imported when the first request
is made, so importing this module is cheap.

Choices this adapter makes:

- System messages become the ``system`` parameter (joined by blank lines, in order); the API
  requires alternating turns, so consecutive user-side messages (user text, tool results,
  ``AgentMessage``s) are merged into one user turn, tool results first as the API demands.
- A failed tool result is a ``tool_result`` block with ``is_error: true``.
- Thinking: ``ReasoningEffort`` maps to an extended-thinking budget: NONE and MEDIUM (the
  runtime's default) send no ``thinking`` parameter, so the model's default applies and
  ``tool_choice`` stays unrestricted; LOW = 1,024 tokens (the API minimum), HIGH = 8,192.
  The budget is added to ``max_tokens``, so the answer keeps its own allowance.
- Thinking is replayed only with its signature, which the API requires: the signature of
  the response's thinking block is kept in ``attributes["anthropic_thinking_signature"]``,
  redacted thinking in ``attributes["anthropic_redacted_thinking"]``. A message restored
  without them is sent without its reasoning, which the API accepts for earlier turns.
- Server tools (``ServerToolDefinition(type, configuration)``) are sent as
  ``{"type": type, "name": <type without its date suffix>, **configuration}`` and reported
  as ``SERVER_TOOL_*`` events; their result blocks are not replayed in later requests.
- Usage is normalised: ``input_tokens`` counts every prompt token (the API reports uncached,
  cache-read and cache-write tokens separately and this adds them up).
- Stop reasons: ``max_tokens`` and ``model_context_window_exceeded`` → MAX_TOKENS,
  ``refusal`` → REFUSAL, ``pause_turn`` and unknown values → OTHER; ``end_turn``,
  ``tool_use`` and ``stop_sequence`` are normal. A stream without a stop reason was cut off
  and raises ``ProviderResponseError``.

Retries and cancellation follow ``zett_agent.providers.base``.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from zett_agent.messages import (
    AgentMessage,
    AnyMessage,
    AssistantMessage,
    ContentPart,
    ImageBytesSource,
    ImageContent,
    SystemMessage,
    TextContent,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from zett_agent.model import (
    ModelEvent,
    ModelRequest,
    ModelResponse,
    ModelUsage,
    ReasoningEffort,
    ServerToolCall,
    ServerToolDefinition,
    ServerToolInputDelta,
    ServerToolResult,
    StopInfo,
    StopReason,
    ToolCallDelta,
)
from zett_agent.providers.base import (
    ProviderAuthError,
    ProviderConnectionError,
    ProviderError,
    ProviderResponseError,
    RetryPolicy,
    parse_retry_after,
    parse_tool_arguments,
    status_error,
    stream_with_retries,
)

if TYPE_CHECKING:
    from anthropic import AsyncAnthropic

__all__ = ["SIGNATURE_ATTRIBUTE", "AnthropicModel"]

PROVIDER = "anthropic"
KEY_VARIABLE = "ANTHROPIC_API_KEY"
#: Where the signature of a response's thinking block is kept for replay.
SIGNATURE_ATTRIBUTE = "anthropic_thinking_signature"
#: Where the opaque data of redacted thinking blocks is kept for replay.
REDACTED_ATTRIBUTE = "anthropic_redacted_thinking"

THINKING_BUDGETS = {ReasoningEffort.LOW: 1024, ReasoningEffort.HIGH: 8192}

_NORMAL_STOPS = frozenset({"end_turn", "tool_use", "stop_sequence"})
_ABNORMAL_STOPS = {
    "max_tokens": StopReason.MAX_TOKENS,
    "model_context_window_exceeded": StopReason.MAX_TOKENS,
    "refusal": StopReason.REFUSAL,
    "pause_turn": StopReason.OTHER,
}
#: Error types of an ``error`` event after which a new attempt may succeed.
_RETRYABLE_STREAM_ERRORS = frozenset(
    {"overloaded_error", "api_error", "rate_limit_error", "timeout_error"}
)
_DATE_SUFFIX = re.compile(r"_\d{8}$")
_DATA_URL = re.compile(r"^data:(?P<media>[\w.+-]+/[\w.+-]+);base64,(?P<data>.*)$", re.DOTALL)


class AnthropicModel:
    """An ``AgentModel`` on the Anthropic Messages streaming API."""

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float = 60.0,
        max_tokens: int = 4096,
        retry_policy: RetryPolicy | None = None,
    ) -> None:
        if not isinstance(model, str) or not model.strip():
            raise ValueError("model cannot be empty")
        if timeout <= 0:
            raise ValueError(f"timeout must be > 0 seconds, got {timeout}")
        if max_tokens <= 0:
            raise ValueError(f"max_tokens must be > 0, got {max_tokens}")
        self.model = model.strip()
        self.base_url = base_url
        self.timeout = timeout
        self.max_tokens = max_tokens
        self.retry_policy = retry_policy or RetryPolicy()
        self._api_key = api_key
        self._client: AsyncAnthropic | None = None
        self._closed = False

    def __repr__(self) -> str:
        where = f", base_url={self.base_url!r}" if self.base_url else ""
        return f"AnthropicModel({self.model!r}{where})"

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """Stream one message, retrying failures that happen before the first event."""
        return stream_with_retries(lambda: self._attempt(request), self.retry_policy)

    async def aclose(self) -> None:
        """Release the HTTP client; the model cannot be used afterwards."""
        self._closed = True
        client, self._client = self._client, None
        if client is not None:
            await client.close()

    def _get_client(self) -> AsyncAnthropic:
        if self._closed:
            raise ProviderError(
                "Cannot send a request, as the AnthropicModel has been closed.", provider=PROVIDER
            )
        if self._client is None:
            import anthropic

            try:
                client = anthropic.AsyncAnthropic(
                    api_key=self._api_key,
                    base_url=self.base_url,
                    timeout=self.timeout,
                    max_retries=0,  # base.stream_with_retries owns the retry policy
                )
            except anthropic.AnthropicError as error:  # e.g. a broken saved profile
                raise ProviderAuthError(
                    f"Could not load credentials for {self._label()}: {error}. "
                    f"Set {KEY_VARIABLE} to use an API key instead.",
                    provider=PROVIDER,
                ) from error
            if client.api_key is None and client.auth_token is None and client.credentials is None:
                raise ProviderAuthError(
                    f"No API key for {self._label()}: set {KEY_VARIABLE}.", provider=PROVIDER
                )
            self._client = client
        return self._client

    def _label(self) -> str:
        return f"Anthropic API at {self.base_url}" if self.base_url else "Anthropic"

    async def _attempt(self, request: ModelRequest) -> AsyncGenerator[ModelEvent, None]:
        client = self._get_client()
        params = build_message_params(request, model=self.model, max_tokens=self.max_tokens)
        try:
            sdk_stream = await client.messages.create(**params)
        except Exception as error:
            translated = self._translate(error)
            if translated is None:
                raise
            raise translated from error
        reader = MessageStreamReader(self.model)
        try:
            while True:
                try:
                    event = await anext(sdk_stream)
                except StopAsyncIteration:
                    break
                except Exception as error:
                    translated = self._translate(error, streaming=True)
                    if translated is None:
                        raise
                    raise translated from error
                for model_event in reader.feed(event):
                    yield model_event
            yield ModelEvent.completed(reader.finish())
        finally:
            await sdk_stream.close()

    def _translate(self, error: Exception, *, streaming: bool = False) -> ProviderError | None:
        """Turn an SDK (or transport) exception into a ProviderError; None for anything else."""
        import anthropic
        import httpx2

        label = self._label()
        if isinstance(error, anthropic.APIStatusError):
            detail = error.api_message or str(error.message)
            if error.status_code >= 400:
                return status_error(
                    provider=PROVIDER,
                    label=label,
                    status=error.status_code,
                    detail=detail,
                    key_variable=KEY_VARIABLE,
                    retry_after=parse_retry_after(error.response.headers),
                )
            # An ``error`` event inside an HTTP 200 stream.
            return ProviderError(
                f"{label} reported {error.type or 'an error'} while streaming: {detail}",
                provider=PROVIDER,
                retryable=error.type in _RETRYABLE_STREAM_ERRORS,
            )
        if isinstance(error, anthropic.APITimeoutError):
            return ProviderConnectionError(
                f"{label} did not answer within {self.timeout:g}s ({error.request.url})",
                provider=PROVIDER,
                url=str(error.request.url),
            )
        if isinstance(error, anthropic.APIConnectionError):
            cause = error.__cause__ or error
            failure = "Lost the connection to" if streaming else "Could not connect to"
            return ProviderConnectionError(
                f"{failure} {error.request.url} ({label}): {cause}",
                provider=PROVIDER,
                url=str(error.request.url),
            )
        if isinstance(error, anthropic.APIResponseValidationError):
            return ProviderResponseError(
                f"{label} sent a response that does not match the API: {error.message}",
                provider=PROVIDER,
            )
        if isinstance(error, httpx2.TransportError):
            # The SDK does not wrap transport failures that happen while a stream is read.
            try:
                url: str | None = str(error.request.url)
            except RuntimeError:  # httpx raises when the error carries no request
                url = None
            return ProviderConnectionError(
                f"The connection to {label} broke while streaming: {error!r}",
                provider=PROVIDER,
                url=url,
            )
        if isinstance(error, json.JSONDecodeError):
            return ProviderResponseError(
                f"{label} sent a stream event that is not JSON: {error.msg}", provider=PROVIDER
            )
        if isinstance(error, anthropic.AnthropicError):
            return ProviderError(f"{label}: {error}", provider=PROVIDER)
        return None


# --- request mapping ---------------------------------------------------------------------


def build_message_params(request: ModelRequest, *, model: str, max_tokens: int) -> dict[str, Any]:
    """The keyword arguments of ``messages.create`` for one request."""
    params: dict[str, Any] = {
        "model": model,
        "max_tokens": max_tokens,
        "messages": anthropic_messages(request.messages),
        "stream": True,
    }
    system = "\n\n".join(m.content for m in request.messages if isinstance(m, SystemMessage))
    if system:
        params["system"] = system
    tools: list[dict[str, Any]] = [
        {"name": tool.name, "description": tool.description, "input_schema": tool.parameters}
        for tool in request.tools
    ]
    tools.extend(_server_tool(tool) for tool in request.server_tools)
    if tools:
        params["tools"] = tools
        if request.tool_choice:
            params["tool_choice"] = _tool_choice(request.tool_choice)
    budget = THINKING_BUDGETS.get(request.reasoning_effort)
    if budget is not None:
        params["thinking"] = {"type": "enabled", "budget_tokens": budget}
        params["max_tokens"] = max_tokens + budget
    return params


def _server_tool(tool: ServerToolDefinition) -> dict[str, Any]:
    return {"type": tool.type, "name": _DATE_SUFFIX.sub("", tool.type), **tool.configuration}


def _tool_choice(choice: str) -> dict[str, Any]:
    if choice in ("auto", "none"):
        return {"type": choice}
    if choice == "required":
        return {"type": "any"}
    return {"type": "tool", "name": choice}


def anthropic_messages(messages: tuple[AnyMessage, ...]) -> list[dict[str, Any]]:
    """Map runtime messages to alternating Messages API turns (system messages excluded)."""
    turns: list[dict[str, Any]] = []

    def add(role: str, blocks: list[dict[str, Any]]) -> None:
        if not blocks:
            return
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})

    for message in messages:
        if isinstance(message, SystemMessage):
            continue
        if isinstance(message, UserMessage | AgentMessage):
            add("user", _content_blocks(message.content))
        elif isinstance(message, ToolMessage):
            block: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": message.tool_call_id,
                "content": message.content
                if isinstance(message.content, str)
                else _content_blocks(message.content),
            }
            if not message.success:
                block["is_error"] = True
            add("user", [block])
        elif isinstance(message, AssistantMessage):
            add("assistant", _assistant_blocks(message))
        else:
            raise TypeError(f"Cannot send a {type(message).__name__} to an Anthropic model")
    return turns


def _content_blocks(content: str | list[ContentPart]) -> list[dict[str, Any]]:
    parts: list[ContentPart] = [TextContent(content)] if isinstance(content, str) else content
    blocks: list[dict[str, Any]] = []
    for part in parts:
        if isinstance(part, TextContent):
            if part.text:  # the API rejects empty text blocks
                blocks.append({"type": "text", "text": part.text})
        else:
            blocks.append(_image_block(part))
    return blocks


def _image_block(image: ImageContent) -> dict[str, Any]:
    source = image.source
    if isinstance(source, ImageBytesSource):
        data = base64.b64encode(source.data).decode("ascii")
        return {
            "type": "image",
            "source": {"type": "base64", "media_type": source.media_type, "data": data},
        }
    inline = _DATA_URL.match(source.url)
    if inline:
        return {
            "type": "image",
            "source": {"type": "base64", "media_type": inline["media"], "data": inline["data"]},
        }
    return {"type": "image", "source": {"type": "url", "url": source.url}}


def _assistant_blocks(message: AssistantMessage) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    signature = message.attributes.get(SIGNATURE_ATTRIBUTE)
    if message.reasoning and isinstance(signature, str) and signature:
        blocks.append({"type": "thinking", "thinking": message.reasoning, "signature": signature})
    for data in message.attributes.get(REDACTED_ATTRIBUTE) or ():
        blocks.append({"type": "redacted_thinking", "data": data})
    if message.content:
        blocks.append({"type": "text", "text": message.content})
    blocks.extend(
        {"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments}
        for call in message.tool_calls
    )
    return blocks


# --- stream mapping ----------------------------------------------------------------------


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
            message, finish_reason=self._stop_reason, usage=self._model_usage(), stop=self._stop()
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
