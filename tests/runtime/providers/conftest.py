"""Fixtures for the provider tests: a local scripted server, a retry policy that never waits,
and adapters pointed at the server."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from zett_agent.providers.anthropic import AnthropicModel
from zett_agent.providers.base import RetryPolicy
from zett_agent.providers.openai import OpenAIModel
from zett_agent.providers.switch import allow_model_requests

from .fake_server import FakeServer
from .support import Adapters, RecordedSleep


@pytest.fixture
async def server() -> AsyncIterator[FakeServer]:
    async with FakeServer() as fake:
        yield fake


@pytest.fixture
def sleeps() -> RecordedSleep:
    return RecordedSleep()


@pytest.fixture
def retry_policy(sleeps: RecordedSleep) -> RetryPolicy:
    # No jitter, so the recorded delays are exact.
    return RetryPolicy(max_retries=2, initial_delay=0.5, jitter=0.0, sleep=sleeps)


@pytest.fixture
async def adapters(server: FakeServer, retry_policy: RetryPolicy) -> AsyncIterator[Adapters]:
    built = Adapters(server, retry_policy)
    yield built
    await built.aclose()


@pytest.fixture
def openai_model(adapters: Adapters) -> OpenAIModel:
    return adapters.openai()


@pytest.fixture
def anthropic_model(adapters: Adapters) -> AnthropicModel:
    return adapters.anthropic()


@pytest.fixture(autouse=True)
def _requests_to_the_local_server():
    """The adapters here talk to the local scripted server: the suite's block on real
    model requests (the zett pytest plugin) is lifted for them."""
    with allow_model_requests():
        yield


@pytest.fixture(autouse=True)
def _no_ambient_provider_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """A developer's own keys or base URLs must not leak into the tests."""
    for name in (
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "OPENAI_ORG_ID",
        "OPENAI_PROJECT_ID",
        "OPENAI_CUSTOM_HEADERS",
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_AUTH_TOKEN",
        "ANTHROPIC_BASE_URL",
        "ANTHROPIC_PROFILE",
        "ANTHROPIC_CUSTOM_HEADERS",
        "ZETT_OPENAI_BASE_URL",
        "ZETT_DEMO_PACE",
    ):
        monkeypatch.delenv(name, raising=False)
