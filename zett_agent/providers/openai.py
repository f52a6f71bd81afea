"""OpenAI Chat Completions adapter: OpenAI itself and every server that speaks its API.

Ollama, vLLM, llama.cpp's server, DeepSeek, OpenRouter and most gateways accept the same
streaming Chat Completions request, so one adapter serves them all: point ``base_url`` at the
server. The ``openai`` SDK is imported when the first request is made, so importing this
module is cheap and the runtime does not need the SDK.

Choices this adapter makes (each keeps a request valid on servers that differ):

- ``reasoning_effort`` is sent only when the request asks for something other than MEDIUM,
  the runtime's default: MEDIUM means "the model's own default", so models without a
  reasoning knob (gpt-4o, most local models) never receive a parameter they reject.
- Reasoning text is read from the ``reasoning_content`` field (DeepSeek, vLLM, llama.cpp) or
  the ``reasoning`` field (OpenRouter, Ollama). It is never sent back: Chat Completions has no
  input field for it, and DeepSeek rejects requests that carry it.
- ``max_tokens`` becomes ``max_completion_tokens`` on api.openai.com (reasoning models reject
  the old name) and ``max_tokens`` elsewhere, the name compatible servers understand. The
  request's ``cache_key`` becomes ``prompt_cache_key`` on api.openai.com only.
- A failed tool result is sent as ``"Tool call failed: <error>"``. Tool messages can carry only
  text, so images returned by a tool follow the tool messages as a user turn.
- Usage is normalised: ``input_tokens`` counts every prompt token, cached ones included, and
  ``cache_read_tokens`` says how many of them came from the cache.
- Finish reasons: ``length`` → MAX_TOKENS, ``content_filter`` → CONTENT_FILTER, any refusal
  text → REFUSAL (the refusal is also the message's content, so the user sees it);
  ``stop``/``tool_calls`` are normal; any other value → OTHER. A stream that ends without a
  finish reason was cut off and raises ``ProviderResponseError``.

The client, one attempt and the errors both SDKs share live in ``_sdk_model.SDKModel``.
Retries and cancellation follow ``zett_agent.providers.base``.
"""

from __future__ import annotations

import base64
import json
import logging
import uuid
from dataclasses import dataclass
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
    content_text,
)
from zett_agent.model import (
    ModelEvent,
    ModelRequest,
    ModelResponse,
    ModelUsage,
    ReasoningEffort,
    StopInfo,
    StopReason,
    ToolCallDelta,
)
from zett_agent.providers._sdk_model import SDKModel
from zett_agent.providers.base import (
    ProviderAuthError,
    ProviderError,
    ProviderResponseError,
    parse_tool_arguments,
)

if TYPE_CHECKING:
    from openai import AsyncOpenAI

__all__ = ["OpenAIModel"]

logger = logging.getLogger(__name__)

PROVIDER = "openai"
KEY_VARIABLE = "OPENAI_API_KEY"
OFFICIAL_HOST = "api.openai.com"
FAILED_TOOL_PREFIX = "Tool call failed: "

_NORMAL_FINISH = frozenset({"stop", "tool_calls", "function_call"})
_ABNORMAL_FINISH = {"length": StopReason.MAX_TOKENS, "content_filter": StopReason.CONTENT_FILTER}
#: A response's usage until a chunk reports one (usage objects are immutable).
_NO_USAGE = ModelUsage()
#: The hot event factories, looked up once (one call per streamed chunk).
_text_event = ModelEvent.text
_reasoning_event = ModelEvent.reasoning
#: Error types that a streamed error event may carry when a new attempt could succeed.
_RETRYABLE_STREAM_ERRORS = frozenset({"server_error", "internal_error", "rate_limit_exceeded"})


class OpenAIModel(SDKModel["AsyncOpenAI"]):
    """An ``AgentModel`` on the OpenAI Chat Completions streaming API."""

    provider = PROVIDER
    #: User messages may carry image parts: sent as `image_url` parts (data URLs for bytes).
    accepts_images = True
    sdk_name = "openai"
    key_variable = KEY_VARIABLE
    stream_item = "chunk"

    def _build_client(self) -> AsyncOpenAI:
        openai = self._sdk()
        try:
            return openai.AsyncOpenAI(**self._client_options())
        except openai.OpenAIError as error:
            raise ProviderAuthError(
                f"No API key for {self._label()}: set {KEY_VARIABLE} (a server that needs "
                f"no key, such as Ollama, accepts any value, e.g. {KEY_VARIABLE}=ollama).",
                provider=PROVIDER,
            ) from error

    def _label(self) -> str:
        if self._client is not None and self._client.base_url.host == OFFICIAL_HOST:
            return "OpenAI"
        if self.base_url is None:
            return "OpenAI"
        return f"OpenAI-compatible server at {self.base_url}"

    async def _open_stream(self, client: AsyncOpenAI, request: ModelRequest) -> Any:
        params = build_chat_params(
            request,
            model=self.model,
            max_tokens=self.max_tokens,
            official=client.base_url.host == OFFICIAL_HOST,
        )
        return await client.chat.completions.create(**params)

    def _reader(self) -> ChatStreamReader:
        return ChatStreamReader(self.model)

    def _translate_status(self, error: Any, label: str) -> ProviderError:
        detail = _error_detail(error.body, error.message)
        return self._status_error(label, error.status_code, detail, error.response.headers)

    def _translate_other(self, error: Exception, label: str) -> ProviderError | None:
        openai = self._sdk()
        if isinstance(error, openai.APIError):
            # An error event inside an HTTP 200 stream.
            body = error.body if isinstance(error.body, dict) else {}
            return ProviderError(
                f"{label} reported an error while streaming: {_error_detail(body, error.message)}",
                provider=PROVIDER,
                retryable=_is_retryable_stream_error(body),
            )
        if isinstance(error, openai.OpenAIError):
            return ProviderError(f"{label}: {error}", provider=PROVIDER)
        return None


def _is_retryable_stream_error(body: dict[str, Any]) -> bool:
    if body.get("type") in _RETRYABLE_STREAM_ERRORS or body.get("code") in _RETRYABLE_STREAM_ERRORS:
        return True
    code = body.get("code")
    return isinstance(code, int | str) and str(code).isdigit() and int(code) >= 500


def _error_detail(body: object, fallback: str) -> str:
    if isinstance(body, dict):
        message = body.get("message")
        if isinstance(message, str) and message:
            return message
    if isinstance(body, str) and body.strip():
        return body.strip()
    return fallback


# --- request mapping ---------------------------------------------------------------------


def build_chat_params(
    request: ModelRequest, *, model: str, max_tokens: int | None, official: bool
) -> dict[str, Any]:
    """The keyword arguments of ``chat.completions.create`` for one request."""
    params: dict[str, Any] = {
        "model": model,
        "messages": chat_messages(request.messages),
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if request.tools:
        params["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": tool.name,
                    "description": tool.description,
                    "parameters": tool.parameters,
                },
            }
            for tool in request.tools
        ]
        if request.tool_choice:
            params["tool_choice"] = _tool_choice(request.tool_choice)
    if request.server_tools:
        logger.warning(
            "Chat Completions has no server tools; ignoring %s",
            ", ".join(tool.type for tool in request.server_tools),
        )
    if request.reasoning_effort != ReasoningEffort.MEDIUM:
        params["reasoning_effort"] = request.reasoning_effort.value
    if max_tokens is not None:
        params["max_completion_tokens" if official else "max_tokens"] = max_tokens
    if official and request.cache_key:
        params["prompt_cache_key"] = request.cache_key
    return params


def _tool_choice(choice: str) -> str | dict[str, Any]:
    if choice in ("auto", "none", "required"):
        return choice
    return {"type": "function", "function": {"name": choice}}


def chat_messages(messages: tuple[AnyMessage, ...]) -> list[dict[str, Any]]:
    """Map runtime messages to Chat Completions messages."""
    result: list[dict[str, Any]] = []
    # Tool messages must directly follow their assistant turn, so the images that tools
    # returned wait here until the run of tool messages ends.
    tool_images: list[dict[str, Any]] = []
    for message in messages:
        if tool_images and not isinstance(message, ToolMessage):
            result.extend(tool_images)
            tool_images.clear()
        if isinstance(message, SystemMessage):
            result.append({"role": "system", "content": message.content})
        elif isinstance(message, UserMessage):
            result.append({"role": "user", "content": _user_content(message.content)})
        elif isinstance(message, AgentMessage):
            result.append({"role": "user", "content": message.content})
        elif isinstance(message, AssistantMessage):
            result.append(_assistant_message(message))
        elif isinstance(message, ToolMessage):
            text = content_text(message.content)
            result.append(
                {
                    "role": "tool",
                    "tool_call_id": message.tool_call_id,
                    "content": text if message.success else FAILED_TOOL_PREFIX + text,
                }
            )
            images = [] if isinstance(message.content, str) else message.content
            parts = [_image_part(part) for part in images if isinstance(part, ImageContent)]
            if parts:
                caption = f"Images returned by tool {message.name!r} (call {message.tool_call_id}):"
                tool_images.append(
                    {"role": "user", "content": [{"type": "text", "text": caption}, *parts]}
                )
        else:
            raise TypeError(f"Cannot send a {type(message).__name__} to a Chat Completions model")
    result.extend(tool_images)
    return result


def _user_content(content: str | list[ContentPart]) -> str | list[dict[str, Any]]:
    if isinstance(content, str):
        return content
    return [
        {"type": "text", "text": part.text} if isinstance(part, TextContent) else _image_part(part)
        for part in content
    ]


def _image_part(image: ImageContent) -> dict[str, Any]:
    source = image.source
    if isinstance(source, ImageBytesSource):
        url = f"data:{source.media_type};base64,{base64.b64encode(source.data).decode('ascii')}"
    else:
        url = source.url
    image_url: dict[str, Any] = {"url": url}
    if image.detail:
        image_url["detail"] = image.detail
    return {"type": "image_url", "image_url": image_url}


def _assistant_message(message: AssistantMessage) -> dict[str, Any]:
    if not message.tool_calls:
        return {"role": "assistant", "content": message.content}
    return {
        "role": "assistant",
        "content": message.content or None,
        "tool_calls": [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": json.dumps(call.arguments)},
            }
            for call in message.tool_calls
        ],
    }


# --- stream mapping ----------------------------------------------------------------------


@dataclass(slots=True)
class _PartialCall:
    id: str | None = None
    name: str | None = None
    arguments: str = ""


class ChatStreamReader:
    """Turns ``ChatCompletionChunk``s into model events and, at the end, the response."""

    def __init__(self, model: str) -> None:
        self.model = model
        self._text: list[str] = []
        self._reasoning: list[str] = []
        self._refusal: list[str] = []
        self._calls: dict[int, _PartialCall] = {}
        self._finish_reason: str | None = None
        self._usage = _NO_USAGE
        self.response_id: str | None = None

    def feed(self, chunk: Any) -> list[ModelEvent]:
        """Events for one chunk, in the order the chunk carries them."""
        # The SDK builds chunks without validation: a field the server left out is None.
        model, usage, choices = chunk.model, chunk.usage, chunk.choices
        if model:
            self.model = model
        response_id = getattr(chunk, "id", None)
        if isinstance(response_id, str) and response_id:
            self.response_id = response_id
        if usage is not None:
            self._usage = _usage(usage)
        if not choices:
            return []
        events: list[ModelEvent] = []
        for choice in choices:
            if choice.index:  # we never ask for n > 1
                continue
            delta = choice.delta
            if delta is not None:
                # Servers put reasoning text in fields outside the SDK's schema (extras).
                if getattr(delta, "model_extra", None):
                    reasoning = _reasoning_text(delta)
                    if reasoning:
                        self._reasoning.append(reasoning)
                        events.append(_reasoning_event(reasoning))
                content = delta.content
                if content:
                    self._text.append(content)
                    events.append(_text_event(content))
                if delta.refusal:
                    self._refusal.append(delta.refusal)
                    events.append(_text_event(delta.refusal))
                if delta.tool_calls:
                    for fragment in delta.tool_calls:
                        events.append(ModelEvent.tool_call(self._tool_fragment(fragment)))
            if choice.finish_reason:
                self._finish_reason = str(choice.finish_reason)
        return events

    def _tool_fragment(self, fragment: Any) -> ToolCallDelta:
        index = fragment.index
        if not isinstance(index, int):
            # Servers that omit the index send each call whole, or continue the last one.
            known = {call.id for call in self._calls.values()}
            if not self._calls or (fragment.id and fragment.id not in known):
                index = len(self._calls)
            else:
                index = max(self._calls)
        call = self._calls.setdefault(index, _PartialCall())
        function = fragment.function
        name = function.name if function is not None else None
        arguments = (function.arguments if function is not None else None) or ""
        if fragment.id and call.id is None:
            call.id = fragment.id
        if name and call.name is None:
            call.name = name
        call.arguments += arguments
        return ToolCallDelta(index=index, id=fragment.id, name=name, arguments_delta=arguments)

    def finish(self) -> ModelResponse:
        """The complete response; raises ProviderResponseError for a cut or broken stream."""
        if self._finish_reason is None:
            raise ProviderResponseError(
                "The Chat Completions stream ended without a finish reason: the connection "
                "was cut before the model finished.",
                provider=PROVIDER,
            )
        tool_calls = tuple(self._tool_call(call) for _, call in sorted(self._calls.items()))
        refusal = "".join(self._refusal)
        if refusal:
            stop: StopInfo | None = StopInfo(StopReason.REFUSAL, refusal)
        elif self._finish_reason in _ABNORMAL_FINISH:
            stop = StopInfo(_ABNORMAL_FINISH[self._finish_reason], self._finish_reason)
        elif self._finish_reason in _NORMAL_FINISH:
            stop = None
        else:
            stop = StopInfo(StopReason.OTHER, self._finish_reason)
        message = AssistantMessage(
            content="".join(self._text) + refusal,
            reasoning="".join(self._reasoning) or None,
            tool_calls=tool_calls,
            provider=PROVIDER,
            model=self.model,
        )
        return ModelResponse(
            message,
            finish_reason=self._finish_reason,
            usage=self._usage,
            stop=stop,
            response_id=self.response_id,
        )

    @staticmethod
    def _tool_call(call: _PartialCall) -> ToolCall:
        call_id = call.id or f"call_{uuid.uuid4().hex[:24]}"
        if not call.name:
            raise ProviderResponseError(
                f"The model streamed a tool call (id {call_id}) without a function name.",
                provider=PROVIDER,
            )
        arguments = parse_tool_arguments(
            call.arguments, provider=PROVIDER, name=call.name, call_id=call_id
        )
        return ToolCall(id=call_id, name=call.name, arguments=arguments)


def _reasoning_text(delta: Any) -> str:
    extra = getattr(delta, "model_extra", None) or {}
    for field_name in ("reasoning_content", "reasoning"):
        value = extra.get(field_name)
        if isinstance(value, str) and value:
            return value
    return ""


def _usage(usage: Any) -> ModelUsage:
    prompt_details = getattr(usage, "prompt_tokens_details", None)
    completion_details = getattr(usage, "completion_tokens_details", None)
    return ModelUsage(
        input_tokens=usage.prompt_tokens or 0,
        output_tokens=usage.completion_tokens or 0,
        cache_read_tokens=getattr(prompt_details, "cached_tokens", None) or 0,
        cache_write_tokens=getattr(prompt_details, "cache_write_tokens", None) or 0,
        reasoning_tokens=getattr(completion_details, "reasoning_tokens", None) or 0,
    )
