"""zett's pytest plugin: real model requests blocked, and the fixtures of the testing kit.

Installing zett is enough: the plugin is registered by the ``pytest11`` entry point
``agent_app.testing.pytest_plugin``. For the whole run a real provider request raises
``ModelRequestsBlocked`` unless ``ZETT_ALLOW_MODEL_REQUESTS=1``.

Fixtures (async tests; they use the database with real transactions, as anything that
goes through a socket must — the server side runs in other threads):

- ``script_model(turns, assistant=None)``: a ``ScriptModel`` answering for ``assistant``
  (every registered assistant when None) until the test ends;
- ``zett_chat(user=None, assistant=None, chat=None, **options)``: ``await`` it for a
  connected ``ChatClient``; every client is closed when the test ends.

This module imports nothing of Django or the app at import time: pytest loads it before
Django is set up.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest

from zett_agent.providers.switch import block_model_requests


def pytest_configure(config: pytest.Config) -> None:
    block_model_requests()


def pytest_unconfigure(config: pytest.Config) -> None:
    block_model_requests(False)


@pytest.fixture(autouse=True, scope="session")
def _zett_test_process() -> None:
    """The test process is no server: SIGTERM stops it instead of draining its runs."""
    from django.conf import settings

    if settings.configured:
        settings.ZETT_GRACEFUL_SHUTDOWN = False


@pytest.fixture
def script_model() -> Iterator[Callable[..., Any]]:
    """``script_model(turns, assistant=None) -> ScriptModel``, installed until the test ends."""
    from agent_app.assistants import registry
    from agent_app.testing import ScriptModel, override_assistant

    active: list[override_assistant] = []

    def install(turns: Any, assistant: str | None = None) -> ScriptModel:
        model = ScriptModel(turns)
        ids = [assistant] if assistant is not None else registry.ids()
        if not ids:
            raise LookupError("No assistant is registered to answer with the ScriptModel")
        for assistant_id in ids:
            override = override_assistant(assistant_id, model=model)
            override.enable()
            active.append(override)
        return model

    yield install
    for override in reversed(active):
        override.disable()


@pytest.fixture
async def zett_chat(transactional_db: None) -> AsyncIterator[Callable[..., Any]]:
    """``await zett_chat(user=None, assistant=None, chat=None, **options) -> ChatClient``."""
    from agent_app.testing import ChatClient

    opened: list[ChatClient] = []

    async def connect(
        user: Any = None, assistant: str | None = None, chat: Any = None, **options: Any
    ) -> ChatClient:
        client = ChatClient(user=user, assistant=assistant, chat=chat, **options)
        opened.append(client)
        await client.connect()
        return client

    yield connect
    for client in reversed(opened):
        await client.close()
