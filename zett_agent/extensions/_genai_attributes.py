"""What the tracing extension's spans say of a model, a model call and its usage.

The GenAI semantic conventions' attributes that do not depend on a span's life: the
model's provider, requested name and server (``ModelSpans``, worked out once per model),
a model call's content (``chat_input``), finish reasons, token usage.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from zett_agent.extensions._genai_content import message_json, message_parts, to_json
from zett_agent.messages import SystemMessage

if TYPE_CHECKING:
    from zett_agent.messages import AnyMessage
    from zett_agent.model import ModelResponse

__all__ = ["ModelSpans", "chat_input", "finish_reasons", "model_identity", "usage_attributes"]


class ModelSpans:
    """What spans say of one model: its provider, requested name and server attributes
    (``base_url`` parsed once), and its model calls' span name."""

    __slots__ = ("attributes", "chat_name", "provider", "requested", "stated")

    def __init__(self, model: object) -> None:
        provider, requested = model_identity(model)
        self.provider, self.requested = provider, requested
        #: What the model stated, as read (``describes`` compares it without checking it).
        self.stated = _stated(model)
        attributes: dict[str, Any] = {}
        if provider is not None:
            attributes["gen_ai.provider.name"] = provider
        if requested is not None:
            attributes["gen_ai.request.model"] = requested
        attributes.update(server_of(model, provider))
        self.attributes = attributes
        self.chat_name = f"chat {requested}" if requested else "chat"

    def describes(self, model: object) -> bool:
        """Whether ``model`` still says what it said (its attributes may be reassigned)."""
        return _stated(model) == self.stated


def _stated(model: object) -> tuple[object, object, object]:
    """The model's ``base_url``, ``provider`` and ``model`` as it states them."""
    return (
        getattr(model, "base_url", None),
        getattr(model, "provider", None),
        getattr(model, "model", None),
    )


def chat_input(messages: Sequence[AnyMessage]) -> dict[str, Any]:
    """A model call's content attributes: its system instructions and input messages."""
    attributes: dict[str, Any] = {}
    system = [m for m in messages if isinstance(m, SystemMessage)]
    if system:
        attributes["gen_ai.system_instructions"] = to_json(
            [part for message in system for part in message_parts(message.content)]
        )
    attributes["gen_ai.input.messages"] = to_json(
        [message_json(m) for m in messages if not isinstance(m, SystemMessage)]
    )
    return attributes


def model_identity(model: object) -> tuple[str | None, str | None]:
    """(provider, model name) as a model object states them (``provider`` / ``model``)."""
    provider = getattr(model, "provider", None)
    name = getattr(model, "model", None)
    return (
        provider if isinstance(provider, str) and provider else None,
        name if isinstance(name, str) and name else None,
    )


#: Where the providers' own APIs are, when a model is not pointed elsewhere.
_OFFICIAL_SERVERS = {"openai": "api.openai.com", "anthropic": "api.anthropic.com"}


def server_of(model: object, provider: str | None) -> dict[str, Any]:
    """``server.address`` (and ``server.port`` when not the scheme's) of the model's API:
    its ``base_url``, else its provider's official host; nothing for a model without one."""
    base_url = getattr(model, "base_url", None)
    if isinstance(base_url, str) and base_url:
        parts = urlsplit(base_url if "//" in base_url else f"//{base_url}")
        if not parts.hostname:
            return {}
        server: dict[str, Any] = {"server.address": parts.hostname}
        try:
            port = parts.port
        except ValueError:
            port = None
        if port is not None:
            server["server.port"] = port
        return server
    official = _OFFICIAL_SERVERS.get(provider or "")
    return {"server.address": official} if official else {}


def finish_reasons(response: ModelResponse) -> list[str]:
    if response.finish_reason:
        return [str(response.finish_reason)]
    if response.stop is not None:
        return [response.stop.reason.value]
    return []


def usage_attributes(
    input_tokens: int, output_tokens: int, cache_read: int, cache_write: int
) -> dict:
    attributes: dict[str, Any] = {
        "gen_ai.usage.input_tokens": input_tokens,
        "gen_ai.usage.output_tokens": output_tokens,
    }
    if cache_read:
        attributes["gen_ai.usage.cache_read.input_tokens"] = cache_read
    if cache_write:
        attributes["gen_ai.usage.cache_creation.input_tokens"] = cache_write
    return attributes
