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
- ``max_tokens`` is 4,096 unless set: the API requires a limit on every request.
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

The stream is read by ``_anthropic_stream.MessageStreamReader``; the client, one attempt and
the errors both SDKs share live in ``_sdk_model.SDKModel``. Retries and cancellation follow
``zett_agent.providers.base``.
"""

from __future__ import annotations

import base64
import re
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
    ToolMessage,
    UserMessage,
)
from zett_agent.model import ModelRequest, ReasoningEffort, ServerToolDefinition
from zett_agent.providers._anthropic_stream import (
    PROVIDER,
    REDACTED_ATTRIBUTE,
    SIGNATURE_ATTRIBUTE,
    MessageStreamReader,
)
from zett_agent.providers._sdk_model import SDKModel
from zett_agent.providers.base import ProviderAuthError, ProviderConnectionError, ProviderError

if TYPE_CHECKING:
    from anthropic import AsyncAnthropic

__all__ = ["SIGNATURE_ATTRIBUTE", "AnthropicModel"]

KEY_VARIABLE = "ANTHROPIC_API_KEY"
THINKING_BUDGETS = {ReasoningEffort.LOW: 1024, ReasoningEffort.HIGH: 8192}
#: Error types of an ``error`` event after which a new attempt may succeed.
_RETRYABLE_STREAM_ERRORS = frozenset(
    {"overloaded_error", "api_error", "rate_limit_error", "timeout_error"}
)
_DATE_SUFFIX = re.compile(r"_\d{8}$")
_DATA_URL = re.compile(r"^data:(?P<media>[\w.+-]+/[\w.+-]+);base64,(?P<data>.*)$", re.DOTALL)


class AnthropicModel(SDKModel["AsyncAnthropic"]):
    """An ``AgentModel`` on the Anthropic Messages streaming API."""

    provider = PROVIDER
    #: User messages may carry image parts: sent as `image` blocks (base64 for bytes).
    accepts_images = True
    sdk_name = "anthropic"
    key_variable = KEY_VARIABLE
    stream_item = "event"
    #: The Messages API requires a limit, so ``max_tokens`` is never None here.
    default_max_tokens = 4096
    max_tokens: int

    def _build_client(self) -> AsyncAnthropic:
        anthropic = self._sdk()
        try:
            client = anthropic.AsyncAnthropic(**self._client_options())
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
        return client

    def _label(self) -> str:
        return f"Anthropic API at {self.base_url}" if self.base_url else "Anthropic"

    async def _open_stream(self, client: AsyncAnthropic, request: ModelRequest) -> Any:
        params = build_message_params(request, model=self.model, max_tokens=self.max_tokens)
        return await client.messages.create(**params)

    def _reader(self) -> MessageStreamReader:
        return MessageStreamReader(self.model)

    def _translate_status(self, error: Any, label: str) -> ProviderError:
        detail = error.api_message or str(error.message)
        if error.status_code >= 400:
            return self._status_error(label, error.status_code, detail, error.response.headers)
        # An ``error`` event inside an HTTP 200 stream.
        return ProviderError(
            f"{label} reported {error.type or 'an error'} while streaming: {detail}",
            provider=PROVIDER,
            retryable=error.type in _RETRYABLE_STREAM_ERRORS,
        )

    def _translate_other(self, error: Exception, label: str) -> ProviderError | None:
        import httpx2

        anthropic = self._sdk()
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
