"""Testing a project's assistants: script the model, override an assistant, chat in a test.

Importable without pytest; the pytest plugin (``agent_app.testing.pytest_plugin``, loaded
by its entry point once zett is installed) adds the fixtures ``zett_chat`` and
``script_model`` and blocks real model requests for the whole test run. docs/testing.md
tells how to use each part.

- ``ScriptModel`` with ``call`` and ``text``: an offline model playing a script;
- ``override_assistant``: an assistant with another model, tools or instructions;
- ``ChatClient``: a person's chat over the project's real ASGI stack;
- ``ModelRequestsBlocked``: what a real provider request raises inside tests, unless
  ``ZETT_ALLOW_MODEL_REQUESTS=1`` (``block_model_requests`` and ``allow_model_requests``
  turn the switch by hand, e.g. under Django's own test runner).
"""

from agent_app.testing.client import ChatClient, ChatRefused, ChatTimeout
from agent_app.testing.overrides import override_assistant
from agent_app.testing.script import ScriptExhausted, ScriptModel, call, text
from zett_agent.providers.switch import (
    ModelRequestsBlocked,
    allow_model_requests,
    block_model_requests,
)

__all__ = [
    "ChatClient",
    "ChatRefused",
    "ChatTimeout",
    "ModelRequestsBlocked",
    "ScriptExhausted",
    "ScriptModel",
    "allow_model_requests",
    "block_model_requests",
    "call",
    "override_assistant",
    "text",
]
