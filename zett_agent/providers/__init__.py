"""Model adapters, and ``load_model`` which picks one from a short text spec.

Importing this package imports no SDK: each adapter module imports its SDK when a model is
built, so the runtime and the offline demo model run without ``openai`` or ``anthropic``.

Accepted specs (``ZETT_MODEL`` in the app):

- ``demo``: the offline demo model; ``ZETT_DEMO_PACE`` (seconds between words) if set.
- ``openai:<model>``: OpenAI Chat Completions, or any compatible server (Ollama, vLLM,
  llama.cpp, OpenRouter…) when ``ZETT_OPENAI_BASE_URL`` is set. Key: ``OPENAI_API_KEY``.
- ``openai-compatible:<model>``: the same adapter for a server at ``ZETT_OPENAI_BASE_URL``
  (required); ``OPENAI_API_KEY`` is sent when set, else a placeholder, because such servers
  mostly need no key and the SDK refuses to start without one.
- ``anthropic:<model>``: Anthropic Messages. Key: ``ANTHROPIC_API_KEY``.
- ``package.module:attribute``: your own model object, or a callable returning one.
"""

from __future__ import annotations

import importlib
import os
from typing import Any

from zett_agent.model import AgentModel

__all__ = ["load_model"]

_ACCEPTED = (
    "'demo', 'openai:<model>', 'openai-compatible:<model>' (with ZETT_OPENAI_BASE_URL), "
    "'anthropic:<model>' or 'package.module:attribute' (a model object or a callable "
    "returning one)"
)
#: The key sent to an OpenAI-compatible server when ``OPENAI_API_KEY`` is not set.
PLACEHOLDER_KEY = "unused"


def load_model(spec: str, *, openai_base_url: str | None = None) -> AgentModel:
    """Build the model named by ``spec``; a ``ValueError`` says which forms are accepted.

    ``openai_base_url`` is the OpenAI-compatible server's /v1 URL; when None, the
    ``ZETT_OPENAI_BASE_URL`` environment variable is read.
    """
    if not isinstance(spec, str) or not spec.strip():
        raise ValueError(f"Model spec cannot be empty; use {_ACCEPTED}")
    spec = spec.strip()
    prefix, separator, rest = spec.partition(":")
    kind = prefix.strip().lower()
    if kind == "demo" and not separator:
        return _demo_model()
    if kind in ("openai", "openai-compatible", "anthropic"):
        name = rest.strip()
        if not name:
            raise ValueError(f"Model spec {spec!r} names no model; expected '{kind}:<model>'")
        if kind != "anthropic":
            from zett_agent.providers.openai import OpenAIModel

            base_url = (openai_base_url or "").strip() or (
                os.environ.get("ZETT_OPENAI_BASE_URL", "").strip() or None
            )
            key = None  # the SDK reads OPENAI_API_KEY itself
            if kind == "openai-compatible":
                if base_url is None:
                    raise ValueError(
                        f"Model spec {spec!r} needs ZETT_OPENAI_BASE_URL: the server's /v1 URL"
                    )
                key = os.environ.get("OPENAI_API_KEY", "").strip() or PLACEHOLDER_KEY
            return OpenAIModel(name, api_key=key, base_url=base_url)
        from zett_agent.providers.anthropic import AnthropicModel

        return AnthropicModel(name)
    if separator and prefix and rest:
        return _import_model(spec, prefix.strip(), rest.strip())
    raise ValueError(f"Unknown model spec {spec!r}; use {_ACCEPTED}")


def _demo_model() -> AgentModel:
    from zett_agent.providers.demo import DemoModel

    pace = os.environ.get("ZETT_DEMO_PACE", "").strip()
    if not pace:
        return DemoModel()
    try:
        seconds = float(pace)
    except ValueError:
        raise ValueError(f"ZETT_DEMO_PACE must be a number of seconds, got {pace!r}") from None
    return DemoModel(pace=seconds)


def _import_model(spec: str, module_name: str, attribute: str) -> AgentModel:
    try:
        target: Any = importlib.import_module(module_name)
    except ImportError as error:
        raise ValueError(
            f"Model spec {spec!r}: cannot import {module_name!r} ({error}); use {_ACCEPTED}"
        ) from error
    for part in attribute.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise ValueError(
                f"Model spec {spec!r}: {module_name!r} has no attribute {attribute!r}"
            ) from None
    # A class or factory builds the model; an object that already streams is the model.
    if isinstance(target, type) or (callable(target) and not _is_model(target)):
        target = target()
    if not _is_model(target):
        raise ValueError(
            f"Model spec {spec!r} resolved to {type(target).__name__}, which is not a model: "
            f"it needs a stream(request) method"
        )
    return target


def _is_model(candidate: object) -> bool:
    return callable(getattr(candidate, "stream", None)) and not isinstance(candidate, type)
